"""Image files in and out: decoding with clear errors, lossless PNG, atomic writes, pixel hashes.

Every PNG the toolkit writes goes through ``encode_png``, which is the toolkit's own writer
(``aegis_data.files.png``): its bytes do not depend on the host's zlib, CPU features or thread count. Identity
across machines is still the hash of the decoded pixels (``pixel_sha256``): a file re-encoded by another tool
keeps it, and the file hash is the second, stricter check of one copy.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import struct
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from aegis_data.errors import AegisError
from aegis_data.files.outputs import file_above
from aegis_data.files.png import PNG_SIGNATURE, encode_png

DEFAULT_MAX_PIXELS = 200_000_000  # ~4x a 50 MP frame; guards against decompression bombs
_SOF_MARKERS = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


# The image files the toolkit reads from folders (sources, calibration), by suffix, case-insensitively.
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")


def check_text_path(path: Path, what: str = "file") -> Path:
    """``path`` when its name is text: AegisError for a name that is not UTF-8 on disk (Python holds its bytes
    as lone surrogates, which no id, hash, JSON or message can carry), naming it with its bytes escaped."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        raise AegisError(
            f"{what} name {ascii(path.name)} in {ascii(str(path.parent))} is not UTF-8; rename it "
            "(file names become image ids and manifest paths, which are text)"
        ) from None
    return path


def list_images(folder: Path, *, recursive: bool = False) -> list[Path]:
    """Image files in a folder (by suffix), sorted by path; hidden files ignored. AegisError for an image whose
    name is not UTF-8 (``check_text_path``)."""
    it = folder.rglob("*") if recursive else folder.iterdir()
    return sorted(
        check_text_path(p, "image file")
        for p in it
        if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES and not p.name.startswith(".")
    )


def header_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) read from a PNG or JPEG header without decoding, or None if not recognised."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24 and data[12:16] == b"IHDR":
        w, h = struct.unpack(">II", data[16:24])
        return int(w), int(h)
    if data[:2] == b"\xff\xd8":
        i = 2
        n = len(data)
        while i + 4 <= n:
            if data[i] != 0xFF:
                i += 1
                continue
            marker = data[i + 1]
            if marker == 0xFF:
                i += 1
                continue
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                i += 2
                continue
            (seg_len,) = struct.unpack(">H", data[i + 2 : i + 4])
            if marker in _SOF_MARKERS and i + 9 <= n:
                h, w = struct.unpack(">HH", data[i + 5 : i + 9])
                return int(w), int(h)
            i += 2 + seg_len
    return None


def _to_rgb(decoded: np.ndarray | None, what: str) -> np.ndarray:
    if decoded is None or decoded.size == 0:
        raise AegisError(f"cannot decode image {what}: not an image or truncated")
    if decoded.dtype != np.uint8:
        # 16-bit sources are scaled to 8 bits by rounding, which is exact integer arithmetic.
        if decoded.dtype == np.uint16:
            decoded = ((decoded.astype(np.uint32) * 255 + 32767) // 65535).astype(np.uint8)
        else:
            raise AegisError(f"unsupported pixel type {decoded.dtype} in {what}; expected 8- or 16-bit")
    if decoded.ndim == 2:
        decoded = np.repeat(decoded[:, :, None], 3, axis=2)
    elif decoded.shape[2] == 4:
        decoded = decoded[:, :, :3]
    elif decoded.shape[2] == 1:
        decoded = np.repeat(decoded, 3, axis=2)
    return np.ascontiguousarray(decoded[:, :, ::-1])  # BGR -> RGB


def decode_image_bytes(data: bytes, *, what: str = "<bytes>", max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Decode image bytes to an HxWx3 uint8 RGB array (alpha dropped, grey expanded)."""
    if not data:
        raise AegisError(f"cannot decode image {what}: the file is empty")
    size = header_size(data)
    if size is not None and size[0] * size[1] > max_pixels:
        raise AegisError(
            f"image {what} is {size[0]}x{size[1]} = {size[0] * size[1]:,} pixels, above the limit of "
            f"{max_pixels:,} (raise `max_pixels` if this is intended)",
            param="max_pixels",
        )
    buf = np.frombuffer(data, dtype=np.uint8)
    import cv2  # on first decode: writers and checksums (what scoring uses) run without OpenCV

    decoded = cv2.imdecode(buf, cv2.IMREAD_UNCHANGED | cv2.IMREAD_IGNORE_ORIENTATION)
    rgb = _to_rgb(decoded, what)
    if rgb.shape[0] * rgb.shape[1] > max_pixels:
        raise AegisError(f"image {what} has {rgb.shape[0] * rgb.shape[1]:,} pixels, above the limit of {max_pixels:,}")
    if size is not None and (rgb.shape[1], rgb.shape[0]) != size:
        raise AegisError(
            f"cannot decode image {what}: header says {size[0]}x{size[1]}, decoded {rgb.shape[1]}x{rgb.shape[0]}"
        )
    return rgb


# Chunks that make a standard reader show other pixels than the stored samples: orientation (eXIf, which
# cv2.imread applies by default) and a transparent colour (tRNS, an alpha channel in Pillow's RGBA).
_VIEW_CHANGING_CHUNKS = (b"eXIf", b"tRNS")
# Text chunks whose metadata a reader turns into an orientation: Pillow's getexif (so ImageOps.exif_transpose)
# reads EXIF from a "Raw profile type exif" text (ImageMagick's form) and an orientation from XMP.
_TEXT_CHUNKS = (b"tEXt", b"zTXt", b"iTXt")
_EXIF_TEXT_KEYWORD = b"Raw profile type exif"
_XMP_KEYWORD = b"XML:com.adobe.xmp"
_MAX_TEXT = 1 << 20  # bytes of a compressed XMP text inspected; Pillow refuses larger decompressed text chunks


def _text_chunk_problem(name: bytes, body: bytes) -> str | None:
    """Why a tEXt/zTXt/iTXt chunk could make a reader rotate the image (None when it cannot)."""
    import zlib

    keyword, _, rest = body.partition(b"\x00")
    where = f"a {name.decode()} chunk"
    if keyword == _EXIF_TEXT_KEYWORD:  # an EXIF block, like eXIf: the orientation a reader applies may be in it
        return f"carries an EXIF profile in {where} (orientation Pillow's exif_transpose applies)"
    if keyword != _XMP_KEYWORD:
        return None
    compressed = name == b"zTXt" or (name == b"iTXt" and rest[:1] == b"\x01")
    if name == b"zTXt":
        text = rest[1:]
    elif name == b"iTXt":  # compression flag and method, then language and translated keyword, each NUL-ended
        text = rest[2:].split(b"\x00", 2)[-1]
    else:
        text = rest
    if compressed:
        try:
            inflate = zlib.decompressobj()
            text = inflate.decompress(text, _MAX_TEXT)
        except zlib.error:
            return None  # Pillow cannot read it either
        if inflate.unconsumed_tail:
            return f"carries XMP in {where} too large to inspect for an orientation"
    if b"orientation" in text.lower():
        return f"carries an XMP orientation in {where} (Pillow's exif_transpose applies it)"
    return None


def _png_layout(data: bytes) -> str | None:
    """Why a PNG is not plain 8-bit RGB without alpha or orientation metadata (eXIf, or EXIF/XMP in a text
    chunk; None when it is)."""
    if not data.startswith(PNG_SIGNATURE) or len(data) < 33 or data[12:16] != b"IHDR":
        return "not a PNG file"
    depth, colour = data[24], data[25]
    if (depth, colour) != (8, 2):
        kinds = {0: "grey", 2: "RGB", 3: "palette", 4: "grey+alpha", 6: "RGBA"}
        return f"{depth}-bit {kinds.get(colour, f'colour type {colour}')}, not 8-bit RGB"
    pos = 8
    while pos + 8 <= len(data):
        length, name = int.from_bytes(data[pos : pos + 4], "big"), data[pos + 4 : pos + 8]
        if name in _VIEW_CHANGING_CHUNKS:
            return f"carries a {name.decode()} chunk ({'orientation' if name == b'eXIf' else 'transparency'})"
        if name in _TEXT_CHUNKS:
            why = _text_chunk_problem(name, data[pos + 8 : pos + 8 + length])
            if why:
                return why
        if name == b"IEND":
            break
        pos += 12 + length
    return None


def standard_decode_problem(data: bytes, rgb: np.ndarray) -> str | None:
    """Why a detector's reader would not see ``rgb`` (this toolkit's decode of ``data``), or None.

    A file passes only when it is plain 8-bit RGB without alpha or orientation metadata and both standard
    decoders give exactly ``rgb``: OpenCV with default flags (what Ultralytics calls, which applies EXIF
    orientation and truncates 16-bit samples) and Pillow when it is installed (torchvision's loaders)."""
    import cv2  # on first use, as in ``decode_png``

    layout = _png_layout(data)
    if layout:
        return layout
    default = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_COLOR)
    if default is None or default.shape != rgb.shape or not np.array_equal(default[:, :, ::-1], rgb):
        return "cv2.imread with default flags decodes other pixels"
    try:
        from PIL import Image
    except ImportError:  # Pillow comes with the training extras; OpenCV's check stands alone without it
        return None
    import io

    try:
        with Image.open(io.BytesIO(data)) as im:
            pil = np.asarray(im)
    except Exception as exc:  # any decoder failure is a problem with this file, reported as such
        return f"Pillow cannot decode it ({type(exc).__name__})"
    if pil.dtype != np.uint8 or pil.shape != rgb.shape or not np.array_equal(pil, rgb):
        return "Pillow decodes other pixels"
    return None


def read_rgb(path: str | Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Read an image file as HxWx3 uint8 RGB; AegisError when missing, unreadable, truncated or too large."""
    p = _regular_image_file(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise AegisError(f"image not found: {p}") from None
    except IsADirectoryError:
        raise AegisError(f"expected an image file, got a directory: {p}") from None
    except OSError as exc:
        raise AegisError(f"cannot read image {p}: {exc.strerror}") from None
    return decode_file_bytes(data, p, max_pixels)


def _regular_image_file(path: str | Path) -> Path:
    """``path`` as a Path; AegisError for a name no file can have (a NUL byte) and for a FIFO, socket or device,
    refused before it is opened: reading a FIFO blocks until a writer comes, a device may never end."""
    p = Path(path)
    if "\x00" in str(p):  # open() would raise ValueError (the existence checks just say False)
        raise AegisError(f"cannot read image {str(p)[:200]!r}: not a valid file name")
    if p.exists() and not p.is_file() and not p.is_dir():
        raise AegisError(f"expected an image file, got a FIFO, socket or device: {p}")
    return p


def decode_file_bytes(data: bytes, path: str | Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """:func:`read_rgb` on bytes already read from the image file at ``path`` (a caller that also hashes them
    reads the file once)."""
    p = Path(path)
    if p.suffix.lower() == ".png" and not data.rstrip(b"\x00").endswith(b"IEND\xaeB`\x82"):
        # OpenCV decodes truncated PNGs partially and silently; insist on the end chunk.
        raise AegisError(f"cannot decode image {p}: truncated PNG (no IEND chunk)")
    return decode_image_bytes(data, what=str(p), max_pixels=max_pixels)


def decode_samples(data: bytes, path: str | Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """The stored samples of image bytes, unconverted: uint8 or uint16, (h, w) or (h, w, c) in OpenCV's channel
    order (B, G, R[, A]); palette PNGs as their colours. For files whose values are labels, not colours (a water
    mask): :func:`decode_image_bytes` would scale 16-bit samples to 8 bits and drop alpha. The same checks as
    :func:`read_rgb`: empty, truncated PNG, the pixel limit (from the header before decoding where it has one)."""
    p = Path(path)
    if not data:
        raise AegisError(f"cannot decode image {p}: the file is empty")
    if p.suffix.lower() == ".png" and not data.rstrip(b"\x00").endswith(b"IEND\xaeB`\x82"):
        raise AegisError(f"cannot decode image {p}: truncated PNG (no IEND chunk)")
    size = header_size(data)
    if size is not None and size[0] * size[1] > max_pixels:
        raise AegisError(
            f"image {p} is {size[0]}x{size[1]} = {size[0] * size[1]:,} pixels, above the limit of {max_pixels:,}"
        )
    import cv2

    decoded = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_UNCHANGED | cv2.IMREAD_IGNORE_ORIENTATION)
    if decoded is None or decoded.size == 0:
        raise AegisError(f"cannot decode image {p}: not an image or truncated")
    if decoded.dtype not in (np.uint8, np.uint16):
        raise AegisError(f"unsupported pixel type {decoded.dtype} in {p}; expected 8- or 16-bit")
    if decoded.shape[0] * decoded.shape[1] > max_pixels:
        raise AegisError(
            f"image {p} has {decoded.shape[0] * decoded.shape[1]:,} pixels, above the limit of {max_pixels:,}"
        )
    return decoded


def image_size(path: str | Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> tuple[int, int]:
    """(width, height) from the file header when possible, else by decoding (under ``max_pixels``)."""
    p = _regular_image_file(path)
    try:
        with open(p, "rb") as fh:
            head = fh.read(1 << 16)
    except OSError as exc:
        raise AegisError(f"cannot read image {p}: {exc.strerror}") from None
    size = header_size(head)
    if size is None:
        rgb = read_rgb(p, max_pixels=max_pixels)
        size = (rgb.shape[1], rgb.shape[0])
    return size


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()


def write_bytes_atomic(path: str | Path, data: bytes | bytearray | memoryview | Iterable[bytes]) -> None:
    """Write via a temporary file in the same directory, fsync, then rename over the target.

    ``data`` is the bytes, or an iterable of byte chunks written in order (a large file never held whole).

    The result gets the usual mode for new files (0666 minus the umask), not mkstemp's private 0600. An
    ``OSError`` (disk full, a parent that is a file, a target that is a folder, no permission) becomes one
    ``AegisError`` naming the path -- and, for a full disk, the free space left -- with the temp file removed
    and the previous file (if any) untouched.
    """
    p = Path(path)
    tmp = None
    try:
        if p.is_dir():
            raise IsADirectoryError(21, "Is a directory", str(p))
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
        os.fchmod(fd, _FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            for chunk in (data,) if isinstance(data, (bytes, bytearray, memoryview)) else data:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException as exc:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        if isinstance(exc, OSError):
            raise write_error(p, exc) from None
        raise


def write_error(path: Path, exc: OSError) -> AegisError:
    """One line for a failed write: the path, the reason and, when the disk is full, the space left there."""
    if exc.errno == errno.ENOSPC:
        return AegisError(
            f"no space left on the device while writing {path} ({_free_space(path)} free there); "
            f"free some space and re-run"
        )
    blocker = file_above(path)
    if blocker is not None:
        return AegisError(f"cannot write {path}: {blocker} is a file, not a folder")
    if path.is_dir():
        return AegisError(f"cannot write {path}: it is a folder; give a file name")
    return AegisError(f"cannot write {path}: {exc.strerror or exc}")


def _free_space(path: Path) -> str:
    for d in (path.parent, *path.parents):
        try:
            free = shutil.disk_usage(d).free
        except OSError:
            continue
        return f"{free / 1e6:,.1f} MB"
    return "unknown"


def write_png_atomic(path: str | Path, rgb: np.ndarray) -> str:
    """Encode and write a PNG atomically; returns the SHA-256 hex of the bytes written."""
    data = encode_png(rgb)
    write_bytes_atomic(path, data)
    return hashlib.sha256(data).hexdigest()


def pixel_sha256(rgb: np.ndarray) -> str:
    """SHA-256 of the decoded pixels: ``b"HxWxC:"`` followed by the C-contiguous uint8 bytes."""
    arr = np.ascontiguousarray(rgb)
    if arr.dtype != np.uint8:
        raise AegisError(f"pixel hashes are defined for uint8 arrays, got {arr.dtype}")
    shape = arr.shape if arr.ndim == 3 else (*arr.shape, 1)
    h = hashlib.sha256(b"%dx%dx%d:" % shape)
    h.update(memoryview(arr).cast("B"))  # type: ignore[arg-type]  # an ndarray is a buffer
    return h.hexdigest()


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def __getattr__(name: str) -> Any:
    """``imageio.cv2``: OpenCV, imported on first use (tests patch its decoder through this name)."""
    if name == "cv2":
        import cv2

        return cv2
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
