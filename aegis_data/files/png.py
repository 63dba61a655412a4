"""The toolkit's own PNG writer: the same bytes for the same pixels on every host.

Why not ``cv2.imencode``: OpenCV's (and Pillow's) Linux wheels compress through the host's ``libz.so.1``,
so the file bytes follow the system zlib (Fedora 40+ ships zlib-ng, macOS and Windows differ again), and the
encode was ~2/3 of a 12 MP build's CPU time. This writer owns every byte of the file:

- the chunk layout: signature, IHDR (8-bit RGB, no interlace), one IDAT (split only above 1 GiB), IEND;
  no optional chunks, so no timestamps, gamma or text;
- the filter: every row uses PNG filter type 1 (Sub: each byte minus the byte three to its left, modulo 256),
  computed with exact uint8 arithmetic;
- the deflate stream: the toolkit's own Huffman-only deflate, defined below. Why its own: speed (the
  Huffman-only mode of the zlib-ng package, this writer's deflate up to aegis-png/1, ran at ~160 MB/s and was the
  largest cost of a split build; the compiled path here encodes 640x640 frames 2.4-3.4x and 4000x3000 frames 3.2-4.1x
  faster, ``benchmarks/bench_png.py``), and no third-party deflate to pin: the bytes are a function of the pixels and of
  the rules below alone, computed with integer arithmetic, and no library version can change them;
- CRC-32 (chunks) and Adler-32 (zlib trailer) are mathematical functions: any correct implementation gives
  the same value.

The deflate stream (RFC 1950 wrapper around RFC 1951 blocks), exactly:

- zlib header ``78 01``: deflate with a 32 KiB window, FLEVEL 0, no preset dictionary (0x7801 is a multiple of
  31); after the last block the stream is padded with zero bits to a byte, then the Adler-32 of the filtered
  bytes follows, big-endian.
- The filtered bytes (per row: filter byte 1, then the Sub residues) are cut into blocks of ``BLOCK_BYTES``
  bytes, the last one shorter (never empty: a zero-sized image is refused). Every block is a dynamic-Huffman
  block (BTYPE 2) of literals only, BFINAL set on the last one.
- The literal code covers symbols 0..256 (HLIT = 257): a byte's frequency is its count in the block,
  end-of-block (256) has frequency 1, lengths come from ``_code_lengths(frequencies, 15)``. HDIST = 1: the
  single distance code (never used; RFC 1951 needs one) has length 1, which zlib accepts as the one
  incomplete code it allows.
- The 257 literal lengths and, separately, the one distance length are run-length coded by ``_rle``; the
  code-length code has lengths ``_code_lengths(counts of the run-length symbols, 7)``, sent 3 bits each in the
  order 16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15, trailing zeros dropped (HCLEN >= 4).
- Codes are canonical (RFC 1951, 3.2.2). Bits go out least significant first; Huffman codes most significant
  bit first (so they are stored bit-reversed), header fields and repeat counts least significant first.

Two implementations write these bytes: the C extension ``aegis_data.files._cpng`` (``_cpng.c`` beside this file)
(optional, built by setup.py; it filters the rows on the fly) and the NumPy code here, the fallback. ``AEGIS_KERNELS``
chooses, as for the engine's loops: ``auto`` (default: the extension when built), ``compiled`` (refuse without it),
``numpy``. Tests compare both on every kind of input.

A known-answer self-test (``check_png_writer``) encodes a fixed image and compares the SHA-256 of the bytes
with the value shipped here; a build refuses to start when it differs, so a broken build of the writer can
never silently produce a different reference.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from functools import cache, lru_cache

import numpy as np

from aegis_data.compiled import load_extension
from aegis_data.errors import AegisError
from aegis_data.files.rgb import check_rgb_image

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
WRITER_NAME = "aegis-png"
WRITER_VERSION = "2"
# Bytes of filtered data per deflate block. Measured on synthetic 640x640 and 4000x3000 frames, clean and
# corrupted: blocks of 16, 32, 64 and 128 KiB give 1.000, 0.998, 0.997 and 0.997 of zlib-ng's Huffman-only size,
# and take 1.15, 1.07, 1.00 and 0.99 of the time of 64 KiB; smaller blocks follow local statistics better, so
# 64 KiB, where the gains flatten out.
BLOCK_BYTES = 1 << 16
MAX_LITERAL_BITS = 15  # deflate's limit for literal/length codes
MAX_CODE_LENGTH_BITS = 7  # and for the code-length code
ZLIB_HEADER = b"\x78\x01"
_MAX_IDAT = 1 << 30  # PNG chunk lengths must stay below 2**31; split deterministically above 1 GiB
# Where the code-length code's lengths are sent (RFC 1951, 3.2.7).
_CL_ORDER = (16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15)
_EXTRA_BITS = {16: 2, 17: 3, 18: 7}
# SHA-256 of encode_png(self_test_image()) (measured, the same from both implementations; tests/data/files/test_png.py).
SELF_TEST_SHA256 = "6c88e62a0ce3fb431fb55aab84046826382c7f8a5724131fc983622fb0151b1d"
# Read at call time (tests swap it to compare both paths).
CPNG = load_extension("aegis_data.files._cpng", "PNG deflate")


def deflate_backend() -> str:
    """``compiled`` or ``numpy``: which implementation of the deflate this process runs (same bytes)."""
    return "numpy" if CPNG is None else "compiled"


def writer_info() -> dict[str, str]:
    """What the manifest records as ``encoder``: this writer and its deflate (the same for both backends)."""
    return {
        "name": WRITER_NAME,
        "version": WRITER_VERSION,
        "deflate": f"aegis huffman-only deflate: dynamic blocks of {BLOCK_BYTES} bytes, literals only, "
        f"length-limited canonical codes ({MAX_LITERAL_BITS}/{MAX_CODE_LENGTH_BITS} bits)",
        "filter": "sub (type 1) on every row",
    }


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


def _encode(rgb: np.ndarray, max_idat: int = _MAX_IDAT) -> bytes:
    check_rgb_image(rgb)
    h, w, _ = rgb.shape
    if h >= 1 << 31 or w >= 1 << 31:
        raise AegisError(f"image of {w}x{h} pixels is too large for PNG")
    if CPNG is not None:
        return CPNG.png_file(np.ascontiguousarray(rgb), h, w, BLOCK_BYTES, max_idat)
    return _encode_numpy(rgb, max_idat)


def _chunk(kind: bytes, payload) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(payload, zlib.crc32(kind)))


def _encode_numpy(rgb: np.ndarray, max_idat: int = _MAX_IDAT) -> bytes:
    """The file through the NumPy deflate (the layout the C extension writes too)."""
    h, w, _ = rgb.shape
    stream = memoryview(_zlib_stream_numpy(sub_filtered_rows(rgb).reshape(-1)))
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)  # 8-bit truecolour, deflate, adaptive filtering, no interlace
    parts = [PNG_SIGNATURE, _chunk(b"IHDR", ihdr)]
    for start in range(0, len(stream), max_idat):
        parts.append(_chunk(b"IDAT", stream[start : start + max_idat]))
    parts.append(_chunk(b"IEND", b""))
    return b"".join(parts)


# ----------------------------------------------------------------------------------------------------------
# The deflate, in Python and NumPy (aegis_data/files/_cpng.c mirrors these functions)
# ----------------------------------------------------------------------------------------------------------
def _code_lengths(freqs, max_bits: int) -> list[int]:
    """Code lengths (at most ``max_bits``) of a complete prefix code for ``freqs``; 0 for unused symbols.

    1. The used symbols (frequency > 0) sorted by (frequency, symbol). None: all lengths 0; one: length 1
       (never happens here: a block has a literal and end-of-block, and the code-length sequence always holds
       two different symbols).
    2. Huffman's two-queue merge: repeatedly take the two lightest of the next unmerged leaf and the next
       unmerged internal node, the leaf on equal weight; their parent is the next internal node. A leaf's
       depth is its length.
    3. On the number of leaves per depth: while the deepest depth d exceeds ``max_bits``, two of its leaves
       (siblings) go; one takes their parent's place at d-1, the other joins a leaf at the deepest depth
       j <= d-2 that holds one, both moving to j+1. Each step keeps the Kraft sum at 1, so the code stays
       complete. Such a j exists while fewer than 2**max_bits symbols are used (257 < 2**15, 19 < 2**7).
    4. The lengths are handed out again in the order of step 1, longest first, so that a more frequent
       symbol never gets a longer code.
    """
    used = sorted((int(f), s) for s, f in enumerate(freqs) if f > 0)
    lengths = [0] * len(freqs)
    m = len(used)
    if m == 0:
        return lengths
    if m == 1:
        lengths[used[0][1]] = 1
        return lengths
    weight = [f for f, _ in used] + [0] * (m - 1)
    parent = [0] * (2 * m - 1)
    leaf, inner = 0, m
    for node in range(m, 2 * m - 1):
        pair = []
        for _ in range(2):
            if leaf < m and (inner >= node or weight[leaf] <= weight[inner]):
                pair.append(leaf)
                leaf += 1
            else:
                pair.append(inner)
                inner += 1
        weight[node] = weight[pair[0]] + weight[pair[1]]
        parent[pair[0]] = parent[pair[1]] = node
    depth = [0] * (2 * m - 1)
    for node in range(2 * m - 3, -1, -1):
        depth[node] = depth[parent[node]] + 1
    count = [0] * (m + 1)
    for d in depth[:m]:
        count[d] += 1
    deepest = max(depth[:m])
    for d in range(deepest, max_bits, -1):
        while count[d]:
            j = d - 2
            while count[j] == 0:
                j -= 1
            count[d] -= 2
            count[d - 1] += 1
            count[j + 1] += 2
            count[j] -= 1
    k = 0
    for d in range(min(deepest, max_bits), 0, -1):
        for _ in range(count[d]):
            lengths[used[k][1]] = d
            k += 1
    return lengths


def _rle(lengths) -> list[tuple[int, int]]:
    """Run-length coding of code lengths as (symbol, extra) pairs: a run of zeros of 11..138 is symbol 18, of
    3..10 symbol 17; a non-zero length is sent, then its repeats in runs of 3..6 as symbol 16; what is left of a
    run (fewer than 3) is sent as plain lengths."""
    out: list[tuple[int, int]] = []
    i, n = 0, len(lengths)
    while i < n:
        v, run = lengths[i], 1
        while i + run < n and lengths[i + run] == v:
            run += 1
        i += run
        if v == 0:
            while run >= 11:
                r = min(run, 138)
                out.append((18, r - 11))
                run -= r
            if run >= 3:
                out.append((17, run - 3))
                run = 0
        else:
            out.append((v, 0))
            run -= 1
            while run >= 3:
                r = min(run, 6)
                out.append((16, r - 3))
                run -= r
        out.extend([(v, 0)] * run)
    return out


@lru_cache(maxsize=1)
def _reverse15() -> np.ndarray:
    """Bit reversal of every 15-bit value (uint64, for shifting into the bit stream)."""
    v = np.arange(1 << 15, dtype=np.uint64)
    r = np.zeros_like(v)
    for k in range(15):
        r |= ((v >> np.uint64(k)) & np.uint64(1)) << np.uint64(14 - k)
    return r


def _canonical_codes(lengths) -> np.ndarray:
    """Canonical codes (RFC 1951, 3.2.2) of ``lengths``, bit-reversed for LSB-first output (uint64)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    bl_count = np.bincount(lengths, minlength=16)
    bl_count[0] = 0
    next_code = np.zeros(16, dtype=np.int64)
    code = 0
    for bits in range(1, 16):
        code = (code + int(bl_count[bits - 1])) << 1
        next_code[bits] = code
    order = np.argsort(lengths, kind="stable")  # by length, then symbol
    sorted_len = lengths[order]
    rank = np.arange(len(lengths)) - np.searchsorted(sorted_len, sorted_len, side="left")
    codes = np.empty(len(lengths), dtype=np.int64)
    codes[order] = next_code[sorted_len] + rank
    codes[lengths == 0] = 0
    return _reverse15()[codes] >> (15 - lengths).astype(np.uint64)


def _block_header(lit_lengths: list[int], final: bool) -> tuple[list[int], list[int]]:
    """Header fields of a dynamic block as (values, widths in bits), in stream order."""
    items = _rle(lit_lengths) + _rle([1])
    cl_freq = [0] * 19
    for sym, _ in items:
        cl_freq[sym] += 1
    cl_len = _code_lengths(cl_freq, MAX_CODE_LENGTH_BITS)
    cl_code = _canonical_codes(cl_len).tolist()
    hclen = 19
    while hclen > 4 and cl_len[_CL_ORDER[hclen - 1]] == 0:
        hclen -= 1
    values = [int(final), 2, 257 - 257, 1 - 1, hclen - 4]
    widths = [1, 2, 5, 5, 4]
    for i in range(hclen):
        values.append(cl_len[_CL_ORDER[i]])
        widths.append(3)
    for sym, extra in items:
        values.append(cl_code[sym])
        widths.append(cl_len[sym])
        if sym in _EXTRA_BITS:
            values.append(extra)
            widths.append(_EXTRA_BITS[sym])
    return values, widths


def _pack_bits(values: np.ndarray, widths: np.ndarray, pending: tuple[int, int]) -> tuple[bytes, tuple[int, int]]:
    """Append fields (uint64 values of at most 30 bits, uint64 widths) LSB first to the ``pending`` (value, bits < 8):
    the complete bytes and the new pending bits.

    Each field lands in one 32-bit word or straddles two: its position comes from a cumulative sum of the widths,
    the fields starting in the same word are OR-ed together (their bits are disjoint), and the part shifted past
    bit 31 goes to the next word.
    """
    u64 = np.uint64
    ends = np.cumsum(widths, dtype=u64)
    ends += u64(pending[1])
    starts = ends - widths
    total = int(ends[-1])
    word = starts >> u64(5)
    shifted = values << (starts & u64(31))
    first = np.flatnonzero(word[1:] != word[:-1]) + 1
    first = np.concatenate((np.zeros(1, first.dtype), first))
    slots = word[first].astype(np.intp)
    words = np.zeros(int(word[-1]) + 2, dtype=u64)
    words[slots] = np.bitwise_or.reduceat(shifted & u64(0xFFFFFFFF), first)
    words[slots + 1] |= np.bitwise_or.reduceat(shifted >> u64(32), first)
    words[0] |= u64(pending[0])
    data = words.astype("<u4").tobytes()
    nbytes, rest = total >> 3, total & 7
    return data[:nbytes], ((data[nbytes] & ((1 << rest) - 1)) if rest else 0, rest)


def _pack_fields(values: list[int], widths: list[int], pending: tuple[int, int]) -> tuple[bytes, tuple[int, int]]:
    """``_pack_bits`` of a short list of fields (block headers, end-of-block)."""
    return _pack_bits(np.array(values, dtype=np.uint64), np.array(widths, dtype=np.uint64), pending)


def _zlib_stream_numpy(filtered: np.ndarray) -> bytes:
    """The zlib stream of the filtered bytes (1-D uint8), block by block as the module docstring specifies."""
    filtered = np.ascontiguousarray(filtered, dtype=np.uint8).reshape(-1)
    n = len(filtered)
    out = [ZLIB_HEADER]
    pending = (0, 0)
    carry_values: list[int] = []  # fields after the previous block's paired literals: its odd last one, its EOB
    carry_widths: list[int] = []
    for start in range(0, n, BLOCK_BYTES):
        block = filtered[start : start + BLOCK_BYTES]
        freqs = np.bincount(block, minlength=256).tolist() + [1]  # end-of-block once
        lengths = _code_lengths(freqs, MAX_LITERAL_BITS)
        codes = _canonical_codes(lengths)
        widths = np.asarray(lengths, dtype=np.uint64)
        head_values, head_widths = _block_header(lengths, start + BLOCK_BYTES >= n)
        data, pending = _pack_fields(carry_values + head_values, carry_widths + head_widths, pending)
        out.append(data)
        # The literals two by two (at most 30 bits each), which halves the packing work.
        even, odd = block[0 : len(block) - 1 : 2], block[1::2]
        wide = widths[even]
        paired = codes[even] | (codes[odd] << wide)
        data, pending = _pack_bits(paired, wide + widths[odd], pending)
        out.append(data)
        tail = [int(block[-1])] if len(block) % 2 else []
        carry_values = [int(codes[s]) for s in tail] + [int(codes[256])]
        carry_widths = [lengths[s] for s in tail] + [lengths[256]]
    data, (value, bits) = _pack_fields(carry_values, carry_widths, pending)
    out.append(data)
    if bits:
        out.append(bytes([value]))  # the last byte, padded with zero bits
    out.append(struct.pack(">I", zlib.adler32(filtered)))  # type: ignore[arg-type]  # an ndarray is a buffer
    return b"".join(out)


# ----------------------------------------------------------------------------------------------------------
# Known-answer self-test
# ----------------------------------------------------------------------------------------------------------
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


@cache
def _self_test_result(expected: str, backend: str) -> str | None:
    got = self_test_sha256()
    return None if got == expected else got


def check_png_writer(expected: str | None = None) -> None:
    """Refuse (one line) when this host's writer does not reproduce the known answer (default: the shipped one)."""
    expected = SELF_TEST_SHA256 if expected is None else expected
    got = _self_test_result(expected, deflate_backend())
    if got is not None:
        info = writer_info()
        raise AegisError(
            f"PNG writer self-test failed: {info['name']}/{info['version']} ({info['deflate']}; {deflate_backend()} "
            f"implementation) wrote a known image as SHA-256 {got[:16]}..., expected {expected[:16]}...; "
            f"refusing to write files whose bytes would differ from the reference"
        )
