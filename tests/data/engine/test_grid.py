"""The severity contact sheet: layout, determinism, and that its cells are the engine's output at full resolution,
cropped and downscaled (issue 31: a cell rendered at cell size showed other pixels than the split holds)."""

from __future__ import annotations

import numpy as np
import pytest

from aegis_data.engine.grid import fit_width, people_region, severity_grid
from aegis_data.errors import AegisError


def test_severity_grid_layout_is_deterministic_and_uses_the_engine_at_full_size():
    from aegis_data.engine.config import load_config
    from aegis_data.engine.corruptions import apply_corruption
    from tests.golden.frames import golden_frame

    v1 = load_config("aegis-v1")  # frame scale: a cell is the engine's output on the full image, downscaled
    img = golden_frame(300, 400)
    sheet = severity_grid(img, "g", width=600, config=v1)
    again = severity_grid(img, "g", width=600, config=v1)
    np.testing.assert_array_equal(sheet, again)
    pad = max(4, 600 // 256)
    cw = (600 - 4 * pad) // 3
    small = fit_width(img, cw)
    ch = small.shape[0]
    assert sheet.shape == (sheet.shape[0], 600, 3) and sheet.shape[0] > 10 * (ch + pad)
    # The bottom-right cell is dust_haze_s3 of the full image, downscaled; below its label band it is untouched.
    title_h = sheet.shape[0] - 10 * (ch + pad) - pad
    y0, x0 = title_h + 9 * (ch + pad), pad + 2 * (cw + pad)
    cell = sheet[y0 : y0 + ch, x0 : x0 + cw]
    expected = fit_width(apply_corruption(img, "dust_haze", 3, "g", config=v1), cw)
    np.testing.assert_array_equal(cell[ch // 2 :], expected[ch // 2 :])
    at_cell_size = apply_corruption(small, "dust_haze", 3, "g", config=v1)
    assert not np.array_equal(cell[ch // 2 :], at_cell_size[ch // 2 :])  # what the old grid showed
    assert not np.array_equal(cell[:8, :40], expected[:8, :40])  # the label band was drawn
    with pytest.raises(AegisError, match="at least 480"):
        severity_grid(img, "g", width=300)


def test_an_aegis_v2_grid_renders_each_cell_at_full_size_with_the_full_person_unit_in_one_scene():
    from aegis_data.engine.config import load_config
    from aegis_data.engine.corruptions import apply_corruption, scene_for
    from aegis_data.engine.scale import Scale
    from tests.golden.frames import golden_frame

    v2 = load_config("aegis-v2")
    img = golden_frame(300, 400)
    sheet = severity_grid(img, "g", width=600, config=v2, scale=Scale("object", 40.0, "test"))
    pad = max(4, 600 // 256)
    cw = (600 - 4 * pad) // 3
    small = fit_width(img, cw)
    ch = small.shape[0]
    rows = 1 + len(v2.names)
    title_h = sheet.shape[0] - rows * (ch + pad) - pad
    unit = Scale("object", 40.0, "test")  # the full image's unit: the frame is rendered as the build renders it
    scene = scene_for(img, v2, unit)
    for r, name in ((1, v2.names[0]), (rows - 1, v2.names[-1])):
        y0, x0 = title_h + r * (ch + pad), pad + 2 * (cw + pad)
        expected = fit_width(apply_corruption(img, name, 3, "g", config=v2, scale=unit, scene=scene), cw)
        np.testing.assert_array_equal(sheet[y0 + ch // 2 : y0 + ch, x0 : x0 + cw], expected[ch // 2 :], err_msg=name)
    with pytest.raises(AegisError, match="person unit"):
        severity_grid(img, "g", width=600, config=v2)


def test_a_crop_shows_the_full_size_corruption_of_that_window():
    from aegis_data.engine.config import load_config
    from aegis_data.engine.corruptions import apply_corruption
    from tests.golden.frames import golden_frame

    v1 = load_config("aegis-v1")
    img = golden_frame(300, 400)
    region = (100, 60, 200, 150)
    sheet = severity_grid(img, "g", width=600, config=v1, region=region)
    pad = max(4, 600 // 256)
    cw = (600 - 4 * pad) // 3
    crop = fit_width(np.ascontiguousarray(img[60:210, 100:300]), cw)  # upscaled: the people show larger
    ch = crop.shape[0]
    title_h = sheet.shape[0] - 10 * (ch + pad) - pad
    y0, x0 = title_h + 9 * (ch + pad), pad + 2 * (cw + pad)
    full = apply_corruption(img, "dust_haze", 3, "g", config=v1)
    expected = fit_width(np.ascontiguousarray(full[60:210, 100:300]), cw)
    np.testing.assert_array_equal(sheet[y0 + ch // 2 : y0 + ch, x0 : x0 + cw], expected[ch // 2 :])
    with pytest.raises(AegisError, match="inside the 400x300 image"):
        severity_grid(img, "g", width=600, config=v1, region=(350, 0, 100, 10))


def test_the_people_window_holds_every_box_with_a_margin_at_the_image_aspect():
    x, y, w, h = people_region([(100, 100, 110, 130), (150, 120, 160, 150)], 1080, 1920)
    assert x <= 100 - 30 and y <= 100 - 30 and x + w >= 160 + 30 and y + h >= 150 + 30
    assert abs(w / h - 1920 / 1080) < 0.02
    # Near a corner it stays inside the image.
    x, y, w, h = people_region([(0, 0, 20, 40)], 1080, 1920)
    assert x == 0 and y == 0 and w <= 1920 and h <= 1080
    with pytest.raises(AegisError, match="no person box"):
        people_region([], 1080, 1920)
