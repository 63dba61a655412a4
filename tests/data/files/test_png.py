"""The toolkit's PNG writer: standard PNG that libpng, OpenCV and Pillow decode to the same pixels, a fixed
chunk layout, its own deflate (the C extension and the NumPy fallback write the same bytes), the length-limited
code construction, the known-answer self-test, and a clear refusal when it fails."""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import io
import struct
import sys
import zlib

import cv2
import numpy as np
import pytest

from aegis_data.compiled import load_extension
from aegis_data.errors import AegisError
from aegis_data.files import png
from aegis_data.files.imageio import decode_image_bytes
from aegis_data.files.png import encode_png


def _images() -> dict[str, np.ndarray]:
    rng = np.random.RandomState(7)  # frozen stream: test inputs only
    y, x = np.mgrid[0:120, 0:161]
    smooth = np.stack([(x + y) % 256, (x * 3) % 256, (y * 5) % 256], axis=2).astype(np.uint8)
    return {
        "1x1": np.array([[[1, 2, 3]]], np.uint8),
        "1x7": rng.randint(0, 256, (1, 7, 3)).astype(np.uint8),
        "5x1": rng.randint(0, 256, (5, 1, 3)).astype(np.uint8),
        "noise": rng.randint(0, 256, (33, 17, 3)).astype(np.uint8),
        "flat": np.full((40, 50, 3), 255, np.uint8),
        "smooth": smooth,
        "wrap": np.tile(np.array([[[255, 0, 255], [0, 255, 0]]], np.uint8), (9, 11, 1)),  # Sub residues wrap
    }


IMAGES = _images()


def _from_residues(residues: np.ndarray) -> np.ndarray:
    """The RGB image whose Sub residues (h x 3w, uint8) are ``residues``: a running sum per channel, mod 256."""
    h, n = residues.shape
    return (np.cumsum(residues.reshape(h, n // 3, 3).astype(np.int64), axis=1) % 256).astype(np.uint8)


def _fibonacci_block() -> np.ndarray:
    """One block whose byte counts, with end-of-block's 1, are the Fibonacci numbers 1, 1, 2, 3, ..., 6765 (symbols
    2..20) under one symbol holding the rest: Huffman's code is then a chain 20 deep, so the 15-bit limit binds."""
    h, w = 16, 1000  # 16 * 3001 bytes: one block
    fib = [1, 2]
    while len(fib) < 19:
        fib.append(fib[-1] + fib[-2])
    values = np.repeat(np.arange(2, 21, dtype=np.uint8), fib)
    values = np.concatenate([values, np.ones(h * 3 * w - len(values), np.uint8)])  # the rest: 1, as the filter bytes
    np.random.RandomState(11).shuffle(values)  # frozen stream: test input only
    return _from_residues(values.reshape(h, 3 * w))


def _adversarial() -> dict[str, np.ndarray]:
    rng = np.random.RandomState(5)  # frozen stream: test inputs only
    assert png.BLOCK_BYTES == 65536  # the shapes below are sized for it: filtered bytes = h * (3w + 1)
    y, x = np.mgrid[0:300, 0:400]
    smooth = np.stack([(x + y) // 3, (x * y) // 500, (x // 9) * (y // 11)], axis=2) % 256
    return {
        "one_value": np.full((50, 70, 3), 77, np.uint8),
        "two_values": np.where(rng.randint(0, 2, (60, 90, 3)) == 1, 200, 13).astype(np.uint8),
        "uniform": rng.randint(0, 256, (200, 300, 3)).astype(np.uint8),
        "fibonacci": _fibonacci_block(),
        "block_exact": rng.randint(0, 4, (64, 341, 3)).astype(np.uint8),  # 65536 bytes: one full block
        "block_minus_1": rng.randint(0, 4, (771, 28, 3)).astype(np.uint8),  # 65535
        "block_plus_2": rng.randint(0, 4, (2979, 7, 3)).astype(np.uint8),  # 65538: a last block of 2 bytes
        "block_plus_3": rng.randint(0, 4, (1, 21846, 3)).astype(np.uint8),  # 65539, one row
        "two_blocks_exact": rng.randint(0, 256, (2, 21845, 3)).astype(np.uint8),  # 2 * 65536
        "one_literal_block": np.zeros((1, 30000, 3), np.uint8),  # block 2 holds only zeros: literal + EOB
        "several_blocks": (smooth + rng.randint(0, 3, smooth.shape)).astype(np.uint8),  # 360300 bytes
    }


ADVERSARIAL = _adversarial()
ALL = {**IMAGES, **ADVERSARIAL}


def _compiled():
    """The C extension, or a skip saying why (test_the_compiled_deflate_is_built_in_ci fails in CI instead)."""
    try:
        from aegis_data.files import _cpng
    except ImportError:
        pytest.skip("aegis_data.files._cpng is not built (python setup.py build_ext --inplace); NumPy path only")
    return _cpng


def _libpng_decode(data: bytes) -> np.ndarray:
    """Decode with the system libpng through its simplified API (png_image_*), independent of OpenCV."""
    name = ctypes.util.find_library("png16") or ctypes.util.find_library("png")
    if name is None:
        pytest.skip("no system libpng to decode with")
    lib = ctypes.CDLL(name)

    class PngImage(ctypes.Structure):
        _fields_ = [
            ("opaque", ctypes.c_void_p),
            ("version", ctypes.c_uint32),
            ("width", ctypes.c_uint32),
            ("height", ctypes.c_uint32),
            ("format", ctypes.c_uint32),
            ("flags", ctypes.c_uint32),
            ("colormap_entries", ctypes.c_uint32),
            ("warning_or_error", ctypes.c_uint32),
            ("message", ctypes.c_char * 64),
        ]

    image = PngImage(version=1)  # PNG_IMAGE_VERSION
    buf = ctypes.create_string_buffer(data, len(data))
    assert lib.png_image_begin_read_from_memory(ctypes.byref(image), buf, ctypes.c_size_t(len(data))), image.message
    image.format = 2  # PNG_FORMAT_RGB
    out = np.zeros((image.height, image.width, 3), np.uint8)
    ok = lib.png_image_finish_read(
        ctypes.byref(image), None, out.ctypes.data_as(ctypes.c_void_p), ctypes.c_int32(image.width * 3), None
    )
    assert ok, image.message
    return out


@pytest.mark.parametrize("name", sorted(ALL))
def test_libpng_opencv_and_pillow_decode_the_same_pixels(name):
    from PIL import Image

    rgb = ALL[name]
    data = encode_png(rgb)
    assert np.array_equal(decode_image_bytes(data), rgb)  # OpenCV (its bundled libpng)
    assert np.array_equal(_libpng_decode(data), rgb)  # the system libpng
    with Image.open(io.BytesIO(data)) as im:  # Pillow's own decoder
        assert im.mode == "RGB" and np.array_equal(np.asarray(im), rgb)


def _chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    assert data[:8] == png.PNG_SIGNATURE
    out, i = [], 8
    while i < len(data):
        (n,) = struct.unpack(">I", data[i : i + 4])
        kind, payload, crc = data[i + 4 : i + 8], data[i + 8 : i + 8 + n], data[i + 8 + n : i + 12 + n]
        assert struct.unpack(">I", crc)[0] == zlib.crc32(kind + payload)
        out.append((kind, payload))
        i += 12 + n
    return out


def test_the_file_is_ihdr_one_idat_iend_with_sub_filtered_rows():
    rgb = IMAGES["smooth"]
    chunks = _chunks(encode_png(rgb))
    assert [k for k, _ in chunks] == [b"IHDR", b"IDAT", b"IEND"]  # no timestamps, text or gamma chunks
    assert chunks[0][1] == struct.pack(">IIBBBBB", 161, 120, 8, 2, 0, 0, 0)
    raw = np.frombuffer(zlib.decompress(chunks[1][1]), np.uint8).reshape(120, 161 * 3 + 1)
    assert (raw[:, 0] == 1).all()  # filter type Sub on every row
    # Undo Sub by a running sum modulo 256 over each pixel's channel: must give the pixels back.
    residues = raw[:, 1:].reshape(120, 161, 3).astype(np.uint64)
    assert np.array_equal((np.cumsum(residues, axis=1) % 256).astype(np.uint8), rgb)


def _idat(data: bytes) -> bytes:
    return b"".join(payload for kind, payload in _chunks(data) if kind == b"IDAT")


@pytest.mark.parametrize("name", sorted(ALL))
def test_the_idat_inflates_to_the_filtered_rows(name):
    rgb = ALL[name]
    data = encode_png(rgb)
    assert [k for k, _ in _chunks(data)] == [b"IHDR", b"IDAT", b"IEND"]
    assert zlib.decompress(_idat(data)) == png.sub_filtered_rows(rgb).tobytes()  # checks the Adler-32 too


@pytest.mark.parametrize("name", sorted(ALL))
def test_compiled_and_numpy_deflate_write_the_same_bytes(name):
    rgb = ALL[name]
    numpy_bytes = png._encode_numpy(rgb)
    cpng = _compiled()
    h, w, _ = rgb.shape
    assert cpng.png_file(np.ascontiguousarray(rgb), h, w, png.BLOCK_BYTES, png._MAX_IDAT) == numpy_bytes


def test_the_stream_is_the_documented_one():
    """Header and block structure of a two-block stream, read back field by field."""
    rgb = ADVERSARIAL["block_plus_3"]
    stream = _idat(encode_png(rgb))
    assert stream[:2] == b"\x78\x01" and (0x78 * 256 + 0x01) % 31 == 0
    assert struct.unpack(">I", stream[-4:])[0] == zlib.adler32(png.sub_filtered_rows(rgb).tobytes())
    bits = int.from_bytes(stream[2:-4], "little")
    assert bits & 0b111 == 0b100  # BFINAL 0, BTYPE 2 (dynamic) for the first block
    assert (bits >> 3) & 0x1F == 0 and (bits >> 8) & 0x1F == 0  # HLIT = 257, HDIST = 1
    d = zlib.decompressobj()
    assert d.decompress(stream) == png.sub_filtered_rows(rgb).tobytes() and d.eof and not d.unused_data


@pytest.mark.parametrize("max_idat", [1, 97, 4096])
def test_a_split_idat_is_the_same_stream_in_chunks(max_idat):
    rgb = ADVERSARIAL["several_blocks"]
    data = png._encode_numpy(rgb, max_idat)
    chunks = _chunks(data)
    idats = [p for k, p in chunks if k == b"IDAT"]
    assert [k for k, _ in chunks] == [b"IHDR"] + [b"IDAT"] * len(idats) + [b"IEND"]
    assert all(len(p) == max_idat for p in idats[:-1]) and 0 < len(idats[-1]) <= max_idat
    assert b"".join(idats) == _idat(encode_png(rgb))
    assert np.array_equal(decode_image_bytes(data), rgb)
    cpng = _compiled()
    assert cpng.png_file(rgb, *rgb.shape[:2], png.BLOCK_BYTES, max_idat) == data


def test_same_pixels_same_bytes_whatever_the_array_layout():
    rgb = IMAGES["noise"]
    view = np.asfortranarray(rgb)
    assert encode_png(view) == encode_png(rgb.copy()) == encode_png(rgb)


@pytest.mark.parametrize(
    "bad",
    [
        np.zeros((4, 4), np.uint8),
        np.zeros((4, 4, 3), np.float32),
        np.zeros((4, 4, 4), np.uint8),
        np.zeros((0, 4, 3), np.uint8),
        "x",
    ],
)
def test_non_rgb_input_is_one_clear_error(bad):
    with pytest.raises(AegisError, match="HxWx3 uint8"):
        encode_png(bad)


def test_the_shipped_known_answer_is_what_this_host_writes():
    assert png.self_test_sha256() == png.SELF_TEST_SHA256
    assert hashlib.sha256(encode_png(png.self_test_image())).hexdigest() == png.SELF_TEST_SHA256
    png.check_png_writer()  # no error


def test_both_deflate_paths_give_the_shipped_known_answer(monkeypatch):
    assert hashlib.sha256(png._encode_numpy(png.self_test_image())).hexdigest() == png.SELF_TEST_SHA256
    cpng = _compiled()
    monkeypatch.setattr(png, "CPNG", cpng)
    assert png.deflate_backend() == "compiled" and png.self_test_sha256() == png.SELF_TEST_SHA256
    monkeypatch.setattr(png, "CPNG", None)
    assert png.deflate_backend() == "numpy" and png.self_test_sha256() == png.SELF_TEST_SHA256
    png.check_png_writer()


def test_a_tampered_known_answer_refuses_in_one_line_naming_the_encoder():
    with pytest.raises(AegisError) as exc:
        png.check_png_writer("0" * 64)
    msg = str(exc.value)
    assert "\n" not in msg and "self-test failed" in msg and "aegis-png/2" in msg
    assert "huffman-only deflate" in msg and png.deflate_backend() in msg


def test_the_manifest_records_the_writer():
    info = png.writer_info()
    assert info["name"] == "aegis-png" and info["version"] == png.WRITER_VERSION == "2"
    assert info["deflate"] == (
        "aegis huffman-only deflate: dynamic blocks of 65536 bytes, literals only, "
        "length-limited canonical codes (15/7 bits)"
    )
    assert info["filter"] == "sub (type 1) on every row"


def test_the_deflate_backend_follows_aegis_kernels(monkeypatch):
    monkeypatch.setenv("AEGIS_KERNELS", "numpy")
    assert load_extension("aegis_data.files._cpng", "PNG deflate") is None
    monkeypatch.setenv("AEGIS_KERNELS", "fast")
    with pytest.raises(AegisError, match="AEGIS_KERNELS must be auto, compiled or numpy"):
        load_extension("aegis_data.files._cpng", "PNG deflate")
    import aegis_data.files

    monkeypatch.setitem(sys.modules, "aegis_data.files._cpng", None)  # as if the extension were not built
    monkeypatch.delattr(aegis_data.files, "_cpng", raising=False)
    monkeypatch.setenv("AEGIS_KERNELS", "auto")
    assert load_extension("aegis_data.files._cpng", "PNG deflate") is None
    monkeypatch.setenv("AEGIS_KERNELS", "compiled")
    with pytest.raises(AegisError, match=r"AEGIS_KERNELS=compiled but the compiled PNG deflate .* not built") as exc:
        load_extension("aegis_data.files._cpng", "PNG deflate")
    assert "\n" not in str(exc.value)


def test_the_compiled_deflate_is_built_in_ci(in_ci):
    try:
        from aegis_data.files import _cpng  # noqa: F401
    except ImportError:
        if in_ci:
            pytest.fail("CI=true: aegis_data.files._cpng (the compiled PNG deflate) was not built")
        pytest.skip("aegis_data.files._cpng is not built (python setup.py build_ext --inplace)")


# --- The code construction ----------------------------------------------------------------------------------
def _kraft_is_one(lengths: list[int]) -> bool:
    """Kraft equality: the code is complete (sum of 2**-length over used symbols is exactly 1)."""
    return sum(1 << (15 - n) for n in lengths if n) == 1 << 15


def _frequency_sets() -> dict[str, tuple[list[int], int]]:
    rng = np.random.RandomState(3)  # frozen stream: test inputs only
    fib = [1, 1]
    while len(fib) < 40:
        fib.append(fib[-1] + fib[-2])
    geometric = [1 << k for k in range(30)] + [0] * 227
    return {
        "two_symbols": ([0] * 77 + [1000] + [0] * 178 + [1], 15),
        "all_equal": ([5] * 257, 15),
        "uniform_random": (rng.randint(0, 3000, 257).tolist(), 15),
        "sparse": ([rng.randint(1, 9) if k % 7 == 0 else 0 for k in range(256)] + [1], 15),
        "fibonacci_257": ((fib * 7)[:257], 15),
        "fibonacci_40": (fib + [0] * 217, 15),
        "geometric": (geometric, 15),
        "code_length_alphabet": ([0, 3, 0, 0, 1, 9, 40, 12, 80, 3, 0, 0, 0, 0, 0, 0, 2, 5, 4], 7),
        "code_length_fibonacci": (fib[:19], 7),
    }


@pytest.mark.parametrize("name", sorted(_frequency_sets()))
def test_code_lengths_are_complete_limited_and_the_same_in_c(name):
    freqs, max_bits = _frequency_sets()[name]
    lengths = png._code_lengths(freqs, max_bits)
    assert all((n == 0) == (f == 0) for n, f in zip(lengths, freqs))  # every used symbol has a code, no other
    assert max(lengths) <= max_bits and _kraft_is_one(lengths)
    # never a longer code for a more frequent symbol
    used = sorted((f, -n) for f, n in zip(freqs, lengths) if f)
    assert all(-a[1] >= -b[1] for a, b in zip(used, used[1:]))
    cpng = _compiled()
    assert list(cpng.code_lengths(np.asarray(freqs, np.uint32), max_bits)) == lengths


def test_the_fibonacci_block_makes_the_length_limit_bind():
    rgb = ADVERSARIAL["fibonacci"]
    filtered = png.sub_filtered_rows(rgb).reshape(-1)
    assert len(filtered) <= png.BLOCK_BYTES  # one block
    freqs = np.bincount(filtered, minlength=256).tolist() + [1]
    assert max(png._code_lengths(freqs, 64)) == 20  # plain Huffman would go deeper than deflate allows
    assert max(png._code_lengths(freqs, 15)) == 15 and _kraft_is_one(png._code_lengths(freqs, 15))


def test_a_one_literal_code_still_has_two_symbols():
    assert png._code_lengths([0] * 200 + [9] + [0] * 55 + [1], 15) == [0] * 200 + [1] + [0] * 55 + [1]


def test_the_checksums_of_the_extension_are_zlibs():
    cpng = _compiled()
    rng = np.random.RandomState(9)  # frozen stream: test inputs only
    for n in (0, 1, 7, 8, 9, 15, 16, 17, 255, 4096, 65535, 65536, 100003, 1000005):
        for data in (rng.randint(0, 256, n).astype(np.uint8).tobytes(), b"\xff" * n):
            assert cpng.crc32(data) == zlib.crc32(data) and cpng.crc32(data, 123456789) == zlib.crc32(data, 123456789)
            assert cpng.adler32(data) == zlib.adler32(data)
            assert cpng.adler32(data, 0xFFF0FFF0) == zlib.adler32(data, 0xFFF0FFF0)


def test_a_failed_self_test_stops_a_build_before_anything_is_written(monkeypatch, tmp_path):
    from aegis_data.sources import load_source
    from aegis_data.split.build import build_splits

    monkeypatch.setattr(png, "SELF_TEST_SHA256", "0" * 64)
    out = tmp_path / "never"
    with pytest.raises(AegisError, match="self-test failed"):
        build_splits(
            load_source("synthetic", n=4, size="96x64"), out, workers=1, corruptions=["low_light"], severities=[1]
        )
    assert not out.exists()


def test_opencv_bytes_are_not_what_the_toolkit_writes():
    """The reason for the writer: OpenCV's bytes come from the host's zlib, ours from the toolkit's own deflate."""
    rgb = IMAGES["smooth"]
    ok, buf = cv2.imencode(".png", rgb[:, :, ::-1].copy())
    assert ok and buf.tobytes() != encode_png(rgb)
