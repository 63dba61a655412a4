import hashlib

import cv2
import numpy as np
import pytest

from aegis_data.errors import AegisError
from aegis_data.files.imageio import (
    decode_image_bytes,
    encode_png,
    file_sha256,
    header_size,
    image_size,
    pixel_sha256,
    read_rgb,
    write_png_atomic,
)


def _img(h=13, w=17):
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([(x * 7) % 256, (y * 11) % 256, (x * y) % 256], axis=2).astype(np.uint8)


def test_png_round_trip_and_hashes(tmp_path):
    rgb = _img()
    digest = write_png_atomic(tmp_path / "a.png", rgb)
    assert digest == file_sha256(tmp_path / "a.png")
    back = read_rgb(tmp_path / "a.png")
    np.testing.assert_array_equal(back, rgb)
    assert pixel_sha256(back) == pixel_sha256(rgb)
    assert encode_png(rgb) == encode_png(rgb.copy())  # byte-stable
    assert image_size(tmp_path / "a.png") == (17, 13)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_pixel_hash_definition_includes_shape():
    rgb = _img()
    expected = hashlib.sha256(b"13x17x3:" + rgb.tobytes()).hexdigest()
    assert pixel_sha256(rgb) == expected
    assert pixel_sha256(rgb.reshape(17, 13, 3)) != expected


def test_channel_order_is_rgb(tmp_path):
    bgr = np.zeros((4, 4, 3), np.uint8)
    bgr[..., 2] = 200  # red in OpenCV's BGR
    cv2.imwrite(str(tmp_path / "r.png"), bgr)
    rgb = read_rgb(tmp_path / "r.png")
    assert rgb[0, 0].tolist() == [200, 0, 0]


def test_errors(tmp_path):
    with pytest.raises(AegisError, match="not found"):
        read_rgb(tmp_path / "missing.png")
    (tmp_path / "junk.png").write_bytes(b"not an image")
    with pytest.raises(AegisError, match="truncated|decode"):
        read_rgb(tmp_path / "junk.png")
    data = encode_png(_img(50, 60))
    (tmp_path / "cut.png").write_bytes(data[: len(data) // 2])
    with pytest.raises(AegisError, match="truncated"):
        read_rgb(tmp_path / "cut.png")
    (tmp_path / "empty.jpg").write_bytes(b"")
    with pytest.raises(AegisError, match="empty"):
        read_rgb(tmp_path / "empty.jpg")


def test_decompression_bomb_refused_from_header():
    data = encode_png(_img(100, 100))
    assert header_size(data) == (100, 100)
    with pytest.raises(AegisError, match="above the limit"):
        decode_image_bytes(data, max_pixels=5000)


def test_jpeg_header_and_grey(tmp_path):
    ok, buf = cv2.imencode(".jpg", np.full((30, 40), 128, np.uint8))
    assert header_size(buf.tobytes()) == (40, 30)
    rgb = decode_image_bytes(buf.tobytes())
    assert rgb.shape == (30, 40, 3)


def test_encode_rejects_non_rgb():
    with pytest.raises(AegisError, match="HxWx3 uint8"):
        encode_png(np.zeros((4, 4), np.uint8))
    with pytest.raises(AegisError, match="HxWx3 uint8"):
        encode_png(np.zeros((4, 4, 3), np.float32))


def test_atomic_write_uses_normal_file_mode(tmp_path):
    import os

    write_png_atomic(tmp_path / "m.png", _img())
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / "m.png").stat().st_mode & 0o777 == 0o666 & ~mask


def test_image_size_decodes_headerless_formats_under_the_given_limit(tmp_path):
    cv2.imwrite(str(tmp_path / "a.bmp"), np.zeros((10, 20, 3), np.uint8))  # no header parser for BMP: decoded
    assert image_size(tmp_path / "a.bmp") == (20, 10)
    with pytest.raises(AegisError, match="above the limit"):
        image_size(tmp_path / "a.bmp", max_pixels=100)
