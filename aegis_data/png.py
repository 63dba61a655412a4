"""The toolkit's own PNG writer: the same bytes for the same pixels on every host.

Why not ``cv2.imencode``: OpenCV's (and Pillow's) Linux wheels compress through the host's ``libz.so.1``,
so the file bytes follow the system zlib (Fedora 40+ ships zlib-ng, macOS and Windows differ again), and the
encode was ~2/3 of a 12 MP build's CPU time. This writer owns every byte of the file:

- the chunk layout: signature, IHDR (8-bit RGB, no interlace), one IDAT (split only above 1 GiB), IEND;
  no optional chunks, so no timestamps, gamma or text;
- the filter: every row uses PNG filter type 1 (Sub: each byte minus the byte three to its left, modulo 256),
  computed with exact uint8 arithmetic;
- the deflate stream: the pinned ``zlib-ng`` package (its own bundled copy of zlib-ng, never the system zlib)
  in Huffman-only mode. Huffman-only does no match search, so the CPU-dispatched match finders and hash
  functions of zlib-ng never influence the output; the stream depends only on the input bytes and the fixed
  parameters below;
- CRC-32 is a mathematical function: any correct implementation gives the same value.

A known-answer self-test (``check_png_writer``) encodes a fixed image and compares the SHA-256 of the bytes
with the value shipped here; a build refuses to start when it differs, so a changed library can never
silently produce a different reference.
"""

from __future__ import annotations

import hashlib
import struct
from functools import lru_cache

import numpy as np

from aegis_data.errors import AegisError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Exact versions whose output the known answer below was measured with; anything else is refused.
ZLIB_NG_PACKAGE_VERSION = "1.1.0"
ZLIB_NG_VERSION = "2.3.3"
WRITER_NAME = "aegis-png"
WRITER_VERSION = "1"
# Fixed deflate parameters: level 1 (level 0 would select stored blocks), 32 KiB window, memLevel 8 (which sets
# the block size, and so the block boundaries), Huffman-only strategy.
_LEVEL, _WBITS, _MEM_LEVEL = 1, 15, 8
_MAX_IDAT = 1 << 30  # PNG chunk lengths must stay below 2**31; split deterministically above 1 GiB
# SHA-256 of encode_png(self_test_image()) with the versions above (measured, see tests/test_png.py).
SELF_TEST_SHA256 = "eb656d4c15687bea1c338456eb5f47c9d0fd7150a0344e2404c79d24677bc3b8"


def _zlib_ng():
    """The zlib-ng module, or one AegisError line saying what to install."""
    try:
        from zlib_ng import zlib_ng
    except ImportError:
        raise AegisError(
            f"the PNG writer needs the zlib-ng package {ZLIB_NG_PACKAGE_VERSION} "
            f"(pip install zlib-ng=={ZLIB_NG_PACKAGE_VERSION}); it is a dependency of aegisbench"
        ) from None
    return zlib_ng


def _package_version() -> str:
    _zlib_ng()
    from zlib_ng import __version__

    return __version__


def writer_info() -> dict[str, str]:
    """What the manifest records as ``encoder``: this writer and the deflate library behind it."""
    return {
        "name": WRITER_NAME,
        "version": WRITER_VERSION,
        "deflate": f"zlib-ng {_zlib_ng().ZLIBNG_VERSION} (python package zlib-ng {_package_version()}), "
                   f"Huffman-only, level {_LEVEL}, wbits {_WBITS}, memLevel {_MEM_LEVEL}",
        "filter": "sub (type 1) on every row",
    }


def _chunk(kind: bytes, payload: bytes, crc32) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", crc32(payload, crc32(kind)) & 0xFFFFFFFF)


def sub_filtered_rows(rgb: np.ndarray) -> np.ndarray:
    """The raw IDAT payload before deflate: per row a filter byte 1 then Sub-filtered RGB bytes (exact, uint8)."""
    h, w, _ = rgb.shape
    rows = np.ascontiguousarray(rgb).reshape(h, w * 3)
    out = np.empty((h, w * 3 + 1), dtype=np.uint8)
    out[:, 0] = 1
    out[:, 1:4] = rows[:, :3]
    np.subtract(rows[:, 3:], rows[:, :-3], out=out[:, 4:])  # uint8 wraps modulo 256, as PNG specifies
    return out


def encode_png(rgb: np.ndarray) -> bytes:
    """Lossless PNG bytes of an HxWx3 uint8 RGB array; identical on every host for the same pixels.

    The first call in a process runs the known-answer self-test (``check_png_writer``) and refuses to encode
    on a mismatch.
    """
    check_png_writer()
    return _encode(rgb)


def _encode(rgb: np.ndarray) -> bytes:
    if not isinstance(rgb, np.ndarray) or rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.size == 0:
        shape = getattr(rgb, "shape", None)
        dtype = getattr(rgb, "dtype", type(rgb).__name__)
        raise AegisError(f"expected a non-empty HxWx3 uint8 RGB array, got shape {shape} dtype {dtype}")
    h, w, _ = rgb.shape
    if h >= 1 << 31 or w >= 1 << 31:
        raise AegisError(f"image of {w}x{h} pixels is too large for PNG")
    zng = _zlib_ng()
    comp = zng.compressobj(_LEVEL, zng.DEFLATED, _WBITS, _MEM_LEVEL, zng.Z_HUFFMAN_ONLY)
    stream = comp.compress(sub_filtered_rows(rgb)) + comp.flush(zng.Z_FINISH)
    crc32 = zng.crc32
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)  # 8-bit truecolour, deflate, adaptive filtering, no interlace
    parts = [PNG_SIGNATURE, _chunk(b"IHDR", ihdr, crc32)]
    for start in range(0, len(stream), _MAX_IDAT):
        parts.append(_chunk(b"IDAT", stream[start:start + _MAX_IDAT], crc32))
    parts.append(_chunk(b"IEND", b"", crc32))
    return b"".join(parts)


def self_test_image() -> np.ndarray:
    """A fixed 61x47 RGB image (odd sizes, gradients, flat areas and hash-like texture) from integer arithmetic."""
    y, x = np.mgrid[0:47, 0:61].astype(np.uint32)
    r = (x * 5 + y * 3) & 0xFF
    g = np.where((x // 8 + y // 8) % 2 == 0, 200, 17).astype(np.uint32)
    b = ((x * 2654435761 + y * 40503) >> 13) & 0xFF  # integer mixing: deterministic "noise"
    return np.stack([r, g, b], axis=2).astype(np.uint8)


def self_test_sha256() -> str:
    """SHA-256 of this host's encoding of ``self_test_image()`` (no check: the input of the check)."""
    return hashlib.sha256(_encode(self_test_image())).hexdigest()


@lru_cache(maxsize=None)
def _self_test_result(expected: str) -> str | None:
    got = self_test_sha256()
    return None if got == expected else got


def check_png_writer(expected: str | None = None) -> None:
    """Refuse (one line) when this host's writer does not reproduce the known answer (default: the shipped one)."""
    expected = SELF_TEST_SHA256 if expected is None else expected
    got = _self_test_result(expected)
    if got is not None:
        info = writer_info()
        raise AegisError(
            f"PNG writer self-test failed: {info['name']}/{info['version']} with {info['deflate']} wrote a known "
            f"image as SHA-256 {got[:16]}..., expected {expected[:16]}... (this toolkit was validated with the "
            f"zlib-ng package {ZLIB_NG_PACKAGE_VERSION}, zlib-ng {ZLIB_NG_VERSION}; installed: {_package_version()}); "
            f"refusing to write files whose bytes would differ from the reference"
        )
