"""The severity contact sheet: layout, determinism, and that its cells are the engine's output at cell size."""

from __future__ import annotations

import numpy as np
import pytest

from aegis_data.engine.grid import fit_width, severity_grid
from aegis_data.errors import AegisError


def test_severity_grid_layout_is_deterministic_and_uses_the_engine_at_cell_size():
    from aegis_data.engine.config import load_config
    from aegis_data.engine.corruptions import apply_corruption
    from tests.golden.frames import golden_frame

    v1 = load_config("aegis-v1")  # frame scale: a cell is the engine's output on the downscaled image
    img = golden_frame(300, 400)
    sheet = severity_grid(img, "g", width=600, config=v1)
    again = severity_grid(img, "g", width=600, config=v1)
    np.testing.assert_array_equal(sheet, again)
    pad = max(4, 600 // 256)
    cw = (600 - 4 * pad) // 3
    small = fit_width(img, cw)
    ch = small.shape[0]
    assert sheet.shape == (sheet.shape[0], 600, 3) and sheet.shape[0] > 10 * (ch + pad)
    # The bottom-right cell is dust_haze_s3 of the downscaled image; below its label band it is untouched.
    title_h = sheet.shape[0] - 10 * (ch + pad) - pad
    y0, x0 = title_h + 9 * (ch + pad), pad + 2 * (cw + pad)
    cell = sheet[y0 : y0 + ch, x0 : x0 + cw]
    expected = apply_corruption(small, "dust_haze", 3, "g", config=v1)
    np.testing.assert_array_equal(cell[ch // 2 :], expected[ch // 2 :])
    assert not np.array_equal(cell[:8, :40], expected[:8, :40])  # the label band was drawn
    with pytest.raises(AegisError, match="at least 480"):
        severity_grid(img, "g", width=300)


def test_an_aegis_v2_grid_renders_each_cell_at_the_cell_sized_person_unit_in_one_scene():
    from aegis_data.engine.config import load_config
    from aegis_data.engine.corruptions import apply_corruption
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
    unit = Scale("object", round(40.0 * cw / 400, 2), "cell")  # people shrink with the resize; the unit follows
    for r, name in ((1, v2.names[0]), (rows - 1, v2.names[-1])):
        y0, x0 = title_h + r * (ch + pad), pad + 2 * (cw + pad)
        expected = apply_corruption(small, name, 3, "g", config=v2, scale=unit)
        np.testing.assert_array_equal(sheet[y0 + ch // 2 : y0 + ch, x0 : x0 + cw], expected[ch // 2 :], err_msg=name)
    with pytest.raises(AegisError, match="person unit"):
        severity_grid(img, "g", width=600, config=v2)
