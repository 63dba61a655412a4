"""Reliability round 3, the corruption engine's bounds (issue 28, items 2, 4 and the engine part of 11).

Each case reproduces what an adversarial user saw: a long motion blur that lost brightness (16-bit sums), schema-valid
configs that an object-scale unit turned into an OOM, a minute-long render or a traceback, and a person unit the
docs allow that the engine refused. Small frames throughout; the hostile cases must fail before any pixel work.
"""

from __future__ import annotations

import math
import re
import time
import tracemalloc
from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.engine import corruptions as C
from aegis_data.engine import kernels as K
from aegis_data.engine.config import config_from_bytes, load_config
from aegis_data.engine.corruptions import CORRUPTIONS, apply_corruption
from aegis_data.engine.scale import Scale, resolve_scale
from aegis_data.errors import AegisError
from conftest import assert_one_line_error

REPO = Path(__file__).resolve().parents[1]
COMPILED = K.CKERNELS
runner = CliRunner()


def _backends():
    """The backends this build has: the compiled loops (when built) and the NumPy code."""
    return [COMPILED, None] if COMPILED is not None else [None]


def _on_each_backend(fn):
    """fn() once per backend (compiled, NumPy), the results in that order."""
    results = []
    try:
        for backend in _backends():
            K.CKERNELS = backend
            results.append(fn())
    finally:
        K.CKERNELS = COMPILED
    return results


def _suite(name: str, **fixed) -> object:
    """The installed suite with ``name``'s parameters in ``fixed`` set for every severity (schema-valid values)."""
    raw = yaml.safe_load(load_config().raw)
    spec = raw["corruptions"][name]
    for key, value in fixed.items():
        spec["severities"].pop(key, None)
        spec["fixed"][key] = value
    return config_from_bytes(yaml.safe_dump(raw, sort_keys=False).encode(), f"hostile-{name}.yaml")


# ==========================================================================================================
# Item 2: motion_blur beyond 257 px summed in 16 bits (saturated), so long blurs lost brightness
# ==========================================================================================================
def _shear_box_reference(image: np.ndarray, length: int, slope: float) -> np.ndarray:
    """``_shear_box`` written out from its definition, in int64 (no 16-bit step anywhere): the sum along the digital
    line through each pixel of a mirrored frame, read at x - 1, x, x + 1 with the phase weights in 1/64, divided
    by 64 L rounding half up."""
    h, w = image.shape[:2]
    r = length // 2
    pad_x = int(math.ceil(r * abs(slope))) + 2
    padded = np.pad(image, ((r, r), (pad_x, pad_x), (0, 0)), mode="symmetric").astype(np.int64)
    off = np.floor((np.arange(h + 2 * r, dtype=np.float64) - r) * slope + 0.5).astype(np.int64)
    ys = np.arange(h)
    phase = ys * slope - off[r + ys]
    w_left = np.floor(np.maximum(phase, 0.0) * 64.0 + 0.5).astype(np.int64)
    w_right = np.floor(np.maximum(-phase, 0.0) * 64.0 + 0.5).astype(np.int64)
    w_mid = 64 - w_left - w_right
    cols = np.arange(-1, w + 1)  # x - 1 .. x + 1 for every x
    sums = np.zeros((h, w + 2, 3), dtype=np.int64)
    for j in range(2 * r + 1):
        rows = ys + j
        at = pad_x + cols[None, :] + (off[rows] - off[ys + r])[:, None]
        sums += padded[rows[:, None], at]
    acc = sums[:, 1:-1] * w_mid[:, None, None] + sums[:, :-2] * w_left[:, None, None]
    acc += sums[:, 2:] * w_right[:, None, None] + 32 * length
    return (acc // (64 * length)).astype(np.uint8)


@pytest.mark.parametrize("length,slope", [(9, 0.37), (257, -0.6), (259, 0.81), (333, -1.0), (601, 0.2)])
def test_the_line_sums_are_exact_at_every_length_on_both_backends(length, slope):
    # Bright (mean 253.5): from 259 px on, a 16-bit sum overflows. The texture keeps every phase weight in play.
    img = np.random.default_rng(length).integers(252, 256, (23, 31, 3), dtype=np.uint8)
    want = _shear_box_reference(img, length, slope)
    for got in _on_each_backend(lambda: C._shear_box(img, length, slope)):
        assert np.array_equal(got, want), int((got != want).sum())


def test_a_long_motion_blur_keeps_a_constant_frame_constant():
    """The issue's repro: a constant 250 frame came out 197 at --person-px 200 s3 (333 px), 20 at 2000 (3333 px),
    218 on a 12,000-px frame at frame scale (301 px)."""
    flat = np.full((96, 128, 3), 250, np.uint8)
    for person_px in (200.0, 2000.0):
        for out in _on_each_backend(lambda: apply_corruption(flat, "motion_blur", 3, "a", scale=Scale("object", person_px))):
            assert np.unique(out).tolist() == [250], person_px
    wide = np.full((8, 12000, 3), 250, np.uint8)
    for out in _on_each_backend(lambda: apply_corruption(wide, "motion_blur", 3, "a")):
        assert np.unique(out).tolist() == [250]


# ==========================================================================================================
# Item 11 (engine part): the largest person unit on a tiny frame, and the documented gsd bounds
# ==========================================================================================================
def test_aegis_corrupt_runs_on_a_32px_image_at_the_largest_person_unit(tmp_path):
    """At P = 2000 the shipped inundation s3 feathers its shore over 2000 px, a block sum of 666 px blocks on a
    32x32 image: the compiled block sum refused factors above 16x the frame (a ValueError traceback)."""
    src = tmp_path / "tiny.png"
    cv2.imwrite(str(src), np.random.default_rng(1).integers(0, 256, (32, 32, 3), dtype=np.uint8))
    for name in ("inundation", "water_glare"):
        r = runner.invoke(app, ["corrupt", str(src), "-c", name, "-s", "3", "-o", str(tmp_path / f"{name}.png"),
                                "--scale", "object", "--person-px", "2000"])
        assert r.exit_code == 0, r.output
        assert cv2.imread(str(tmp_path / f"{name}.png")).shape == (32, 32, 3)


@pytest.mark.parametrize("shape", [(1, 1), (32, 32), (3, 90)])
def test_every_shipped_corruption_renders_tiny_frames_at_both_ends_of_the_person_unit(shape):
    img = np.random.default_rng(shape[1]).integers(0, 256, (*shape, 3), dtype=np.uint8)
    for person_px in (4.0, 2000.0):
        for name in CORRUPTIONS:
            for sev in (1, 3):
                outs = _on_each_backend(lambda: apply_corruption(img, name, sev, "t", scale=Scale("object", person_px)))
                assert all(o.shape == img.shape and np.array_equal(o, outs[0]) for o in outs), (name, sev, person_px)


def test_block_sums_far_beyond_the_frame_match_on_both_backends():
    mask = np.random.default_rng(3).random((32, 29)) < 0.4
    for factor in (512, 700, 2001):  # past the compiled loop's old limit of 16x the long side (512)
        a = _on_each_backend(lambda: K.block_sum(mask, factor))
        assert all(x.dtype == np.int64 and np.array_equal(x, a[0]) for x in a)
        # One block covering the mirrored tiling of the frame: every pixel counted by its multiplicity.
        assert a[0].shape == (1, 1)


def test_the_documented_gsd_bounds_are_the_codes_and_inclusive():
    text = (REPO / "docs" / "CORRUPTIONS.md").read_text()
    lo, hi = (float(v) for v in re.search(r"The gsd must give a unit of 4 to 2000 px: ([\d.]+) to ([\d.]+) cm/px",
                                          text).groups())
    for gsd, unit in ((lo, 2000.0), (hi, 4.0)):
        assert resolve_scale("object", gsd_cm_per_px=gsd).person_px == unit
    for bad in (lo - 1e-6, hi + 1e-6):
        with pytest.raises(AegisError, match=rf"^--gsd must lie in \[{lo}, {hi}\] cm per px"):
            resolve_scale("object", gsd_cm_per_px=bad)
