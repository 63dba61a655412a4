"""aegis-v2's physical models (docs/CORRUPTIONS.md): low light as a camera records it, motion blur in m/s and ms;
their ladders, the noise's structure, content that does not move, the budget, and a person still visible at s3."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from aegis_data.engine import camera as CAM
from aegis_data.engine import motion as MO
from aegis_data.engine.calibration import calibrate, check_monotone
from aegis_data.engine.config import load_config
from aegis_data.engine.corruptions import apply_corruption, corruption_params
from aegis_data.engine.realism import chroma_luma_noise_ratio, noise_autocorrelation
from aegis_data.engine.scale import Scale
from aegis_data.engine.scene import check_sidecar, estimate_scene, gsd_from_person_px
from aegis_data.engine.seeding import stream_key
from aegis_data.engine.visibility import person_visibility
from aegis_data.errors import AegisError
from aegis_data.sources import load_source, read_rgb
from tests.golden.frames import golden_frame
from tests.golden.scenes import oblique_frame

V1 = load_config("aegis-v1")
V2 = load_config("aegis-v2")
UNIT = Scale("object", 30.0, "test")


def _v2(img, name, sev, image_id="img", scale=UNIT, scene=None):
    return apply_corruption(img, name, sev, image_id, config=V2, scale=scale, scene=scene)


def _flat(level: int, size: int = 256) -> np.ndarray:
    return np.full((size, size, 3), level, np.uint8)


# --- auto-exposure and sensor noise ------------------------------------------------------------------------
def test_auto_exposure_lengthens_the_exposure_then_raises_iso_then_darkens():
    ll = {s: corruption_params("low_light", s, V2) for s in (1, 2, 3)}
    caps = {s: CAM.auto_exposure(ll[s].ev_loss, 1.0, 100.0, ll[s].shutter_limit_ms, ll[s].iso_cap) for s in ll}
    assert [c.exposure_ms for c in caps.values()] == [8.3, 8.3, 8.3]  # the shutter limit first
    assert caps[1].iso == pytest.approx(100 * 2**4.6 / 8.3, rel=1e-9) and caps[1].brightness == 1.0
    assert caps[2].iso == pytest.approx(100 * 2**8.0 / 8.3, rel=1e-9) and caps[2].brightness == 1.0
    assert caps[3].iso == 3200.0  # the ISO cap: the rest darkens
    assert caps[3].brightness == pytest.approx(8.3 * 32 / 2**11.6, rel=1e-9)
    # A clean capture already at the limits: nothing to win back, everything darkens; never shorter or lower.
    c = CAM.auto_exposure(2.0, 20.0, 6400.0, 8.3, 3200.0)
    assert (c.exposure_ms, c.iso, c.brightness) == (20.0, 6400.0, 0.25)


def test_sensor_noise_follows_the_published_calibration_and_only_the_added_part_is_added():
    p = corruption_params("low_light", 2, V2)
    shot, read = CAM.noise_levels(p, 100.0)
    assert shot == pytest.approx(1e-4) and read == pytest.approx(math.exp(2.18 * math.log(1e-4) + 1.2), rel=1e-10)
    shot32, _ = CAM.noise_levels(p, 3200.0)
    assert shot32 == pytest.approx(32e-4)
    same = CAM.LowLightCapture(1.0, 100.0, 1.0)  # the clean capture itself: nothing to add
    a, b = CAM.added_noise_coefficients(p, same, 100.0)
    assert not a.any() and not b.any()
    a, b = CAM.added_noise_coefficients(p, CAM.LowLightCapture(8.3, 1600.0, 1.0), 100.0)
    assert (a > 0).all() and (b > 0).all() and a[0] > a[1] and a[2] > a[1]  # weak raw red/blue: more noise


def test_low_light_noise_is_mostly_luminance_and_spatially_correlated():
    grey = _flat(110)
    v2 = _v2(grey, "low_light", 2)
    v1 = apply_corruption(grey, "low_light", 2, "img", config=V1)
    # The camera pipeline: demosaicing correlates the noise, the chroma path removes most chroma noise.
    assert noise_autocorrelation(v2).mean > 0.3
    assert chroma_luma_noise_ratio(v2).ratio < 0.35
    # aegis-v1's i.i.d. per-channel noise, for contrast: white, and as much chroma as luma.
    assert abs(noise_autocorrelation(v1).mean) < 0.1
    assert chroma_luma_noise_ratio(v1).ratio > 0.8


def test_low_light_keeps_the_brightness_while_the_camera_can_and_darkens_beyond():
    frame = golden_frame(240, 320)
    mean = frame.mean()
    out = {s: _v2(frame, "low_light", s).mean() for s in (1, 2, 3)}
    assert abs(out[1] - mean) < 0.03 * mean and abs(out[2] - mean) < 0.03 * mean
    assert out[3] < 0.6 * mean


def test_low_light_smears_with_the_exposure_its_auto_exposure_chose():
    """camera_low_light itself (not the motion model alone) smears a lit dot by the platform's path over the added
    exposure: ``v sqrt(t**2 - t0**2)`` over the ground, with t the auto-exposure's choice."""
    dot = np.zeros((101, 101, 3), np.uint8)
    dot[50, 50] = 255
    scene = estimate_scene(dot, 100.0, V2.camera, check_sidecar({"heading_deg": 0.0, "speed_mps": 10.0}, "t"))
    # Sensor noise far below one linear level and no chroma blur: what the camera leaves is the smear alone (grey
    # pixels pass its chroma path unchanged).
    p = replace(corruption_params("low_light", 1, V2), shot_noise_base=1e-30, chroma_denoise_sigma=0.0)
    capture = CAM.capture_for(p, scene)
    assert capture.exposure_ms > scene.exposure_ms
    expected_px = 10.0 * math.sqrt(capture.exposure_ms**2 - scene.exposure_ms**2) / 1000.0 / scene.gsd_m
    assert expected_px > 5.0
    out = CAM.camera_low_light(dot, p, CAM.CameraLowLightDraw(0.0, np.zeros((101, 101), np.uint16)), scene)
    lit = np.flatnonzero(out[50, :, 0])
    assert not out[:50].any() and not out[51:].any()  # along the heading only
    assert abs((lit[-1] - lit[0] + 1) - expected_px) <= 1.5


# --- motion blur in physical units ------------------------------------------------------------------------
def test_the_smear_is_speed_times_exposure_over_the_ground_sample():
    estimate_scene(golden_frame(240, 320), 30.0, V2.camera, check_sidecar({"speed_mps": 0.0}, "t"))
    gsd = gsd_from_person_px(30.0)
    for speed, ms in ((10.0, 20.0), (15.0, 33.3), (5.0, 4.0)):
        length = speed * ms / 1000.0 / gsd
        pos = MO.path_samples(length, 30.0, 0.0, 0.0, np.zeros((2, 2)))
        span = math.hypot(*(pos[-1] - pos[0])) + length / pos.shape[0]  # each sample stands for length / n
        assert span == pytest.approx(length, rel=1e-9)
    # The clean capture's own smear is taken off: (v T)^2 - (v0 T0)^2.
    assert MO.Exposure(10.0, 10.0, 10.0, 6.0).added_smear_m() == pytest.approx(0.08)
    assert MO.Exposure(10.0, 1.0, 10.0, 2.0).added_smear_m() == 0.0


@pytest.mark.parametrize("sev", [1, 2, 3])
def test_motion_blur_moves_no_content_beyond_the_budget(sev):
    # Dots on a ramp (no flat edge lines: nothing a bar detector could take for a letterbox); the blurred ramp
    # alone, rendered with the same key, is subtracted in linear light to leave the dots' own smears.
    ramp = np.broadcast_to((40 + np.arange(161) // 2).astype(np.uint8)[None, :, None], (161, 161, 3)).copy()
    img = ramp.copy()
    for cy, cx in ((20, 20), (80, 80), (140, 140), (20, 140), (140, 20)):
        img[cy - 1 : cy + 2, cx - 1 : cx + 2] = 255
    unit = Scale("object", 60.0, "t")
    out, base = _v2(img, "motion_blur", sev, scale=unit), _v2(ramp, "motion_blur", sev, scale=unit)
    lin = CAM.to_linear(out)[..., 0].astype(np.float64) - CAM.to_linear(base)[..., 0]
    for cy, cx in ((20, 20), (80, 80), (140, 140), (20, 140), (140, 20)):
        win = lin[max(0, cy - 19) : cy + 20, max(0, cx - 19) : cx + 20]
        ys, xs = np.mgrid[max(0, cy - 19) : cy + 20, max(0, cx - 19) : cx + 20]
        mass = win.sum()
        shift = math.hypot((ys * win).sum() / mass - cy, (xs * win).sum() / mass - cx)
        assert shift <= V2.camera["max_content_shift_px"] + 0.35, (sev, cy, cx, shift)


def test_rolling_shutter_skew_is_clamped_to_the_content_shift_budget():
    p = MO.TrajectoryBlurParams(60.0, 33.3, 0.0, 0.0, (0.0, 0.0), readout_ms=100.0, max_content_shift_px=1.5)
    scene = estimate_scene(golden_frame(400, 300), 10.0, V2.camera, check_sidecar({"heading_deg": 0.0}, "t"))
    bands = MO.blur_bands(p, scene, MO.TrajectoryDraw(0.0, np.zeros((64, 2))), MO.Exposure(60.0, 33.3, 0.0, 1.0), 400)
    assert len(bands) > 2
    centres = [float((t[1] * t[2]).sum() / t[2].sum()) for _, _, t in bands]
    assert max(centres) - min(centres) <= 2 * 1.5 + 1.0
    assert centres[0] < centres[-1]  # later rows displaced along the heading


def test_in_an_oblique_view_the_smear_grows_toward_the_camera_and_the_sky_only_jitters():
    img, horizon = oblique_frame(479, 641)
    scene = estimate_scene(img, 30.0, V2.camera, check_sidecar({"heading_deg": 0.0, "speed_mps": 0.0}, "t"))
    p = MO.TrajectoryBlurParams(15.0, 33.3, 0.0, 0.0, (0.0, 0.0))
    bands = MO.blur_bands(p, scene, MO.TrajectoryDraw(0.0, np.zeros((64, 2))), MO.Exposure(15.0, 33.3, 0.0, 1.0), 479)
    spans = {(a, b): int(t[1].max() - t[1].min()) for a, b, t in bands}
    sky = [s for (a, b), s in spans.items() if a < horizon - 8]
    ground = [((a + b) / 2, s) for (a, b), s in spans.items() if a >= horizon + 8]
    assert sky and all(s == 0 for s in sky)
    assert ground[0][1] < ground[-1][1]  # nearer rows (further down) smear more
    out = _v2(img, "motion_blur", 3, scene=scene)
    assert np.array_equal(out[: horizon - 8], img[: horizon - 8])  # a smooth sky: nothing to see move


def test_an_impossible_smear_is_refused_before_any_work():
    img = golden_frame(64, 64)
    fast = check_sidecar({"speed_mps": 0.0}, "t")
    scene = estimate_scene(img, 2000.0, V2.camera, fast)
    scene = replace(scene, gsd_m=1e-5)  # a 0.01 mm ground sample: 50 cm of smear is 50,000 px
    with pytest.raises(AegisError, match="render budget"):
        _v2(img, "motion_blur", 3, scene=scene)


# --- keys, ladders, visibility ---------------------------------------------------------------------------
def test_aegis_v2_draws_come_from_its_own_key_namespace():
    assert V1.key_tag == "aegis-v1" and V2.key_tag == "aegis-v2"
    assert stream_key("a", "low_light", 1, 7, V2.key_tag).startswith("aegis-v2|a|low_light|1|7")
    frame = golden_frame(240, 320)
    a = _v2(frame, "low_light", 2, "img-1")
    assert np.array_equal(a, _v2(frame.copy(), "low_light", 2, "img-1"))
    assert not np.array_equal(a, _v2(frame, "low_light", 2, "img-2"))
    assert not np.array_equal(a, apply_corruption(frame, "low_light", 2, "img-1", seed=1, config=V2, scale=UNIT))


def test_aegis_v2_needs_a_person_unit_and_refuses_frame_scale():
    with pytest.raises(AegisError, match="person unit"):
        apply_corruption(golden_frame(64, 64), "low_light", 1, "x", config=V2)
    with pytest.raises(AegisError, match="person unit"):
        apply_corruption(golden_frame(64, 64), "low_light", 1, "x", config=V2, scale=Scale())


@pytest.fixture(scope="module")
def synthetic_people():
    ds = load_source("synthetic", n=12)
    recs = [r for r in ds.splits["test"] if r.boxes]
    return [(r.image_id, read_rgb(r), [(x0, y0, x1 - x0, y1 - y0) for x0, y0, x1, y1 in r.boxes]) for r in recs]


def test_the_v2_ladders_are_monotone_on_their_statistics(synthetic_people):
    images = [(i, rgb) for i, rgb, _ in synthetic_people[:6]]
    table = calibrate(images, ["low_light", "motion_blur"], config=V2, scale=Scale("object", 25.0, "t"))
    assert not check_monotone(table), check_monotone(table)


def test_a_person_stays_visible_at_severity_3(synthetic_people):
    """The visibility floor (docs/CORRUPTIONS.md, "Visibility"): at s3 the median person keeps at least half of its
    clean Rose index V; aegis-v1's motion blur at the same person unit does not."""
    unit = Scale("object", 25.0, "t")
    clean, v2 = [], {"low_light": [], "motion_blur": []}
    v1_motion = []
    for image_id, rgb, boxes in synthetic_people:
        clean += person_visibility(rgb, boxes)
        for name in v2:
            v2[name] += person_visibility(_v2(rgb, name, 3, image_id, scale=unit), boxes)
        v1_motion += person_visibility(apply_corruption(rgb, "motion_blur", 3, image_id, config=V1, scale=unit), boxes)
    base = np.nanmedian(clean)
    for name, values in v2.items():
        assert np.nanmedian(values) >= 0.5 * base, (name, np.nanmedian(values), base)
    assert np.nanmedian(v1_motion) < np.nanmedian(v2["motion_blur"])


def test_the_visibility_floor_names_ladders_whose_s3_loses_more_than_half_the_clean_visibility():
    from aegis_data.engine.calibration import CalibrationRow, CalibrationTable, check_visibility_floor
    from aegis_data.engine.visibility import VisibilitySummary

    def row(name, sev, v):
        return CalibrationRow(
            name, "storm", "edge_width", "increase", sev, f"{name}_s{sev}", 4, 1.0 + sev, 0.1, 1.0, 0.1, v, 0.5, 4
        )

    clean = VisibilitySummary(4, 4, 4.0, 0.5)
    table = CalibrationTable(
        (row("a", 1, 3.9), row("a", 3, 2.1), row("b", 1, 3.0), row("b", 3, 1.9)), 2, "h", 0, clean_visibility=clean
    )
    assert [v.corruption for v in check_visibility_floor(table)] == ["b"]
    assert check_visibility_floor(CalibrationTable(table.rows, 2, "h", 0)) == []  # no boxes: nothing to judge


def test_stable_scalars_round_to_ten_digits_and_refuse_a_rounding_boundary():
    from aegis_data.engine.photometry import stable

    assert stable(2.0**4.6) == float(f"{2.0**4.6:.9e}") and stable(0.0) == 0.0
    with pytest.raises(AegisError, match="rounding boundary"):
        stable(1.23456789050000)  # exactly halfway at the 10th digit: an ulp of libm error decides it
    # A shipped-range extreme that a 12-digit rule refused (round 4): the auto-exposure at 20 EV.
    assert CAM.auto_exposure(20.0, 1.0, 100.0, 8.3, 3200.0).brightness == pytest.approx(8.3 * 32 / 2**20)
