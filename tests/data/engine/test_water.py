"""The water mask of aegis-v2's scene (docs/CORRUPTIONS.md, "The water mask"): no neural network, integer statistics,
known water found on synthetic scenes, never sky, bars, land, a tarp or a person; a sidecar mask overrides it; the
documented failures stay documented; the exact optics helpers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from aegis_data.engine import water as W
from aegis_data.engine.config import load_config
from aegis_data.engine.scene import check_sidecar, estimate_scene, water_mask_digest
from aegis_data.errors import AegisError
from tests.golden.frames import golden_frame
from tests.golden.scenes import coast_frame, lake_oblique_frame, letterboxed_frame, oblique_frame

CAMERA = load_config("aegis-v2").camera
REAL = Path("/work/shared/real-frames/heridal")


def _iou(a, b):
    return (a & b).sum() / max(1, (a | b).sum())


def test_the_sea_of_a_coast_is_found_and_nothing_on_land():
    img, truth, boxes = coast_frame(479, 641)
    scene = estimate_scene(img, 30.0, CAMERA, persons=boxes)
    mask = scene.water_mask()
    assert _iou(mask, truth) > 0.98
    assert not (mask & ~truth).any()  # no sand, grass, tarp or person is water
    for x0, y0, x1, y1 in boxes:
        assert not mask[int(y0) : int(y1), int(x0) : int(x1)].any()
    rec = scene.record()["water"]
    assert rec["source"] == "estimated" and rec["sha256"] == water_mask_digest(mask)
    assert rec["fraction"] == pytest.approx(truth.mean(), abs=0.01)


def test_an_oblique_lake_is_found_and_the_sky_never_is():
    img, truth, horizon = lake_oblique_frame(479, 641)
    scene = estimate_scene(img, 30.0, CAMERA)
    assert scene.view == "oblique"
    mask = scene.water_mask()
    assert _iou(mask, truth) > 0.9 and not mask[:horizon].any()
    # The sky is blue, smooth and not bright: only the scene's sky mask keeps it out.
    rows = scene.gsd_rows(np.arange(img.shape[0]))
    without_sky = W.estimate_water(img, scene.valid, None, np.where(np.isfinite(rows), rows, scene.gsd_m))
    assert without_sky[:horizon].any()


def test_bars_are_never_water_even_when_blue():
    img = letterboxed_frame(479, 641, 48, colour=(20, 60, 130))
    scene = estimate_scene(img, 30.0, CAMERA)
    assert scene.valid[1] == 48
    assert not scene.water_mask()[:48].any() and not scene.water_mask()[-48:].any()


def test_a_sidecar_mask_overrides_the_estimate_inside_the_valid_region():
    img, truth, _ = coast_frame(240, 320)
    given = np.zeros(img.shape[:2], dtype=bool)
    given[100:140, 200:260] = True  # says: a pond on the grass, and no sea
    given[:, :4] = True
    facts = check_sidecar({"water_mask": "m.png", "valid": [8, 0, 320, 240]}, "t")
    scene = estimate_scene(img, 30.0, CAMERA, facts, given)
    assert scene.water_source == "sidecar" and scene.water_mask_sha256 == water_mask_digest(given)
    assert scene.water_mask()[100:140, 200:260].all() and not scene.water_mask()[:, :8].any()
    assert scene.water_mask().sum() == 40 * 60
    assert scene.record()["water"]["source"] == "sidecar"


def test_the_mask_is_a_pure_function_of_the_pixels():
    img, _, _ = coast_frame(240, 320)
    a = estimate_scene(img, 30.0, CAMERA).record()
    b = estimate_scene(img.copy(), 30.0, CAMERA).record()
    assert a == b
    other = img.copy()
    other[10:60, 10:60] = (200, 180, 120)  # sand poured into the sea
    assert estimate_scene(other, 30.0, CAMERA).record()["water"] != a["water"]


def test_small_blue_things_are_not_water():
    img = np.full((240, 320, 3), (70, 100, 45), np.uint8)
    img[100:120, 100:120] = (30, 90, 140)  # 20 px at 30-px people: under a square metre
    scene = estimate_scene(img, 30.0, CAMERA)
    assert not scene.water_mask().any()


def test_documented_failures_brown_floodwater_and_green_lagoons_are_not_found():
    """docs/CORRUPTIONS.md lists where the mask fails; these pin two of them, so a change that fixes (or moves)
    them is seen and the docs are updated with it."""
    for colour in ((120, 95, 60), (60, 120, 55)):  # brown floodwater, an algae-green lagoon
        img, truth, _ = coast_frame(240, 320)
        img[truth] = colour
        assert not estimate_scene(img, 30.0, CAMERA).water_mask().any()


def test_documented_failure_the_last_rows_of_sky_above_a_water_horizon_are_water():
    """The scene's sky ends at the block whose vertical differences cross the horizon, so the sky rows of that block
    (fewer than one block) are ground to the scene; above a sea that reaches the horizon they join the water. Pinned
    (docs/CORRUPTIONS.md, "Where it fails"), so a fix of the sky's edge is seen and the docs follow it."""
    img, horizon = oblique_frame(480, 640)
    y, x = np.mgrid[0:480, 0:640]
    sea = (y >= horizon) & (y < horizon + (480 - horizon) // 2) & (x < 640 * 3 // 5)
    sea &= ~(img == np.array([30, 25, 35], np.uint8)).all(axis=2)  # the persons stand in it
    ripple = ((x * 5 + y * 11) % 12) - 6
    img[sea] = np.stack([34 + ripple // 3, 78 + ripple // 2, 104 + ripple // 2], axis=-1)[sea]
    scene = estimate_scene(img, 30.0, CAMERA)
    mask, b = scene.water_mask(), W.water_block_size(480, 640)
    assert scene.view == "oblique" and set(scene.sky_depth) == {horizon - b}
    assert not mask[: horizon - b].any() and mask[horizon - b : horizon, : 640 * 3 // 5].mean() > 0.99
    assert (mask[horizon:] == sea[horizon:]).mean() > 0.999


@pytest.mark.skipif(not REAL.is_dir(), reason=f"{REAL} is not on this machine")
@pytest.mark.parametrize("name", ["train_ZRI_2006", "train_ZRI_2026", "train_ZRI_2082", "train_ZRI_3033"])
def test_no_water_on_the_real_park_frames(name):
    import cv2

    img = np.ascontiguousarray(cv2.imread(str(REAL / f"{name}.jpg"))[..., ::-1])
    # A crop is enough: the evening-lit path and the shadows are what a looser rule took for water.
    crop = np.ascontiguousarray(img[:1500, :2000])
    assert not estimate_scene(crop, 60.0, CAMERA).water_mask().any()


def test_the_sun_is_drawn_once_per_image_unless_given():
    img = golden_frame(120, 160)
    a = estimate_scene(img, 30.0, CAMERA)
    assert a.sun_drawn == ("elevation", "azimuth") and 15.0 <= a.sun_elevation_deg <= 65.0
    assert 0.0 <= a.sun_azimuth_deg < 360.0
    assert estimate_scene(img.copy(), 30.0, CAMERA).sun_elevation_deg == a.sun_elevation_deg
    b = estimate_scene(img, 30.0, CAMERA, check_sidecar({"sun_elevation_deg": -4.0}, "t"))
    assert b.sun_elevation_deg == -4.0 and b.sun_drawn == ("azimuth",) and b.sun_azimuth_deg == a.sun_azimuth_deg
    assert b.record()["sun_drawn"] == ["azimuth"]


def test_persons_are_checked_and_recorded():
    img = golden_frame(120, 160)
    scene = estimate_scene(img, 30.0, CAMERA, persons=[(10, 20, 30, 60)])
    assert scene.record()["persons"] == [[10.0, 20.0, 30.0, 60.0]]
    for bad in ([(10, 20, 5, 60)], [(10, 20, 30, 600)], [(1, 2, 3)], [(0, 0, float("nan"), 4)]):
        with pytest.raises(AegisError, match="person"):
            estimate_scene(img, 30.0, CAMERA, persons=bad)


# --- exact optics --------------------------------------------------------------------------------------------
def test_exp_neg_is_accurate_and_built_from_basic_operations():
    x = np.linspace(0.0, 60.0, 20001)
    assert np.max(np.abs(W.exp_neg(x) / np.exp(-x) - 1.0)) < 2e-13
    assert W.exp_neg(0.0) == 1.0 and W.exp_neg(800.0) == 0.0
    assert W.exp_neg(1.5) == W.exp_neg(np.array([1.5]))[0]


def test_fresnel_matches_the_textbook_values_of_water():
    assert W.fresnel(1.0, 1.333) == pytest.approx(((1.333 - 1) / (1.333 + 1)) ** 2, rel=1e-12)
    assert W.fresnel(1e-9) == pytest.approx(1.0, abs=1e-6)
    c = np.cos(np.radians([0.0, 30.0, 60.0, 80.0, 89.0]))
    r = W.fresnel(c)
    assert (np.diff(r) > 0).all() and r[3] > 0.3  # grazing angles reflect most of the sky


def test_turbid_reflectance_rises_and_saturates():
    sat, half = (0.17, 0.14, 0.05), (60.0, 80.0, 120.0)
    low, mid, high = (W.turbid_reflectance(s, sat, half) for s in (10.0, 200.0, 1e6))
    assert all(a < b < c for a, b, c in zip(low, mid, high)) and high[0] == pytest.approx(0.17, rel=1e-4)
    with pytest.raises(AegisError):
        W.turbid_reflectance(float("nan"), sat, half)
