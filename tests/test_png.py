"""The toolkit's PNG writer: standard PNG that libpng, OpenCV and Pillow decode to the same pixels, a fixed
chunk layout, the known-answer self-test, and a clear refusal when it fails."""

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

from aegis_data import png
from aegis_data.errors import AegisError
from aegis_data.imageio import decode_image_bytes, encode_png


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


def _libpng_decode(data: bytes) -> np.ndarray:
    """Decode with the system libpng through its simplified API (png_image_*), independent of OpenCV."""
    name = ctypes.util.find_library("png16") or ctypes.util.find_library("png")
    if name is None:
        pytest.skip("no system libpng to decode with")
    lib = ctypes.CDLL(name)

    class PngImage(ctypes.Structure):
        _fields_ = [("opaque", ctypes.c_void_p), ("version", ctypes.c_uint32), ("width", ctypes.c_uint32),
                    ("height", ctypes.c_uint32), ("format", ctypes.c_uint32), ("flags", ctypes.c_uint32),
                    ("colormap_entries", ctypes.c_uint32), ("warning_or_error", ctypes.c_uint32),
                    ("message", ctypes.c_char * 64)]

    image = PngImage(version=1)  # PNG_IMAGE_VERSION
    buf = ctypes.create_string_buffer(data, len(data))
    assert lib.png_image_begin_read_from_memory(ctypes.byref(image), buf, ctypes.c_size_t(len(data))), image.message
    image.format = 2  # PNG_FORMAT_RGB
    out = np.zeros((image.height, image.width, 3), np.uint8)
    ok = lib.png_image_finish_read(ctypes.byref(image), None, out.ctypes.data_as(ctypes.c_void_p),
                                   ctypes.c_int32(image.width * 3), None)
    assert ok, image.message
    return out


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_libpng_opencv_and_pillow_decode_the_same_pixels(name):
    from PIL import Image

    rgb = IMAGES[name]
    data = encode_png(rgb)
    assert np.array_equal(decode_image_bytes(data), rgb)  # OpenCV (its bundled libpng)
    assert np.array_equal(_libpng_decode(data), rgb)  # the system libpng
    with Image.open(io.BytesIO(data)) as im:  # Pillow's own decoder
        assert im.mode == "RGB" and np.array_equal(np.asarray(im), rgb)


def _chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    assert data[:8] == png.PNG_SIGNATURE
    out, i = [], 8
    while i < len(data):
        (n,) = struct.unpack(">I", data[i:i + 4])
        kind, payload, crc = data[i + 4:i + 8], data[i + 8:i + 8 + n], data[i + 8 + n:i + 12 + n]
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


def test_same_pixels_same_bytes_whatever_the_array_layout():
    rgb = IMAGES["noise"]
    view = np.asfortranarray(rgb)
    assert encode_png(view) == encode_png(rgb.copy()) == encode_png(rgb)


@pytest.mark.parametrize("bad", [np.zeros((4, 4), np.uint8), np.zeros((4, 4, 3), np.float32),
                                 np.zeros((4, 4, 4), np.uint8), np.zeros((0, 4, 3), np.uint8), "x"])
def test_non_rgb_input_is_one_clear_error(bad):
    with pytest.raises(AegisError, match="HxWx3 uint8"):
        encode_png(bad)


def test_the_shipped_known_answer_is_what_this_host_writes():
    assert png.self_test_sha256() == png.SELF_TEST_SHA256
    assert hashlib.sha256(encode_png(png.self_test_image())).hexdigest() == png.SELF_TEST_SHA256
    png.check_png_writer()  # no error


def test_a_tampered_known_answer_refuses_in_one_line_naming_the_encoder():
    with pytest.raises(AegisError) as exc:
        png.check_png_writer("0" * 64)
    msg = str(exc.value)
    assert "\n" not in msg and "self-test failed" in msg and "aegis-png/1" in msg
    assert f"zlib-ng {png.ZLIB_NG_VERSION}" in msg and png.ZLIB_NG_PACKAGE_VERSION in msg


def test_the_manifest_records_the_writer():
    info = png.writer_info()
    assert info["name"] == "aegis-png" and info["version"] == png.WRITER_VERSION
    assert png.ZLIB_NG_VERSION in info["deflate"] and "Huffman-only" in info["deflate"]


def test_without_the_zlib_ng_package_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "zlib_ng", None)  # import of zlib_ng now fails
    with pytest.raises(AegisError, match=r"pip install zlib-ng==1\.1\.0"):
        png._zlib_ng()


def test_a_failed_self_test_stops_a_build_before_anything_is_written(monkeypatch, tmp_path):
    from aegis_data.sources import load_source
    from aegis_data.splits import build_splits

    monkeypatch.setattr(png, "SELF_TEST_SHA256", "0" * 64)
    out = tmp_path / "never"
    with pytest.raises(AegisError, match="self-test failed"):
        build_splits(load_source("synthetic", n=4, size="96x64"), out, workers=1, corruptions=["low_light"],
                     severities=[1])
    assert not out.exists()


def test_opencv_bytes_are_not_what_the_toolkit_writes():
    """The reason for the writer: OpenCV's bytes come from the host's zlib, ours from the pinned deflate."""
    rgb = IMAGES["smooth"]
    ok, buf = cv2.imencode(".png", rgb[:, :, ::-1].copy())
    assert ok and buf.tobytes() != encode_png(rgb)
