"""Calibration statistics on arrays with known values, the monotonicity check, and every real ladder."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from aegis_data.engine import calibration as cal
from aegis_data.engine.calibration import CalibrationRow, CalibrationTable, calibrate, check_monotone
from aegis_data.engine.config import SUITE_NAMES, load_config
from aegis_data.errors import AegisError

# The statistics, directions and ladders checked here are aegis-v1's declarations and engine: pinned.
V1 = load_config("aegis-v1")


def grey(h: int, w: int, v: int) -> np.ndarray:
    return np.full((h, w, 3), v, np.uint8)


# --- statistics on hand-made arrays ----------------------------------------------------------------------
def test_luma_weights():
    img = np.zeros((1, 3, 3), np.uint8)
    img[0, 0] = (255, 0, 0)
    img[0, 1] = (0, 255, 0)
    img[0, 2] = (0, 0, 255)
    np.testing.assert_allclose(cal.luma(img)[0], [0.299, 0.587, 0.114], rtol=0, atol=1e-15)
    assert cal.mean_luminance(img) == pytest.approx(1 / 3, abs=1e-12)


def test_saturated_fraction_threshold_is_strict_at_094():
    img = grey(4, 4, 0)
    img[0, :] = 240  # Y = 0.9412 > 0.94
    img[1, :] = 239  # Y = 0.9373, not saturated
    img[2, :2] = 255
    assert cal.saturated_fraction(img) == pytest.approx(6 / 16)
    assert cal.statistic("water_glare", img, grey(4, 4, 0), V1) == pytest.approx(6 / 16)  # aegis-v1 declares it


def test_rms_contrast_half_black_half_white_is_half():
    img = grey(6, 8, 0)
    img[:, 4:] = 255
    assert cal.rms_contrast(img) == pytest.approx(0.5, abs=1e-12)
    assert cal.rms_contrast(grey(5, 5, 77)) == 0.0


def test_occluded_fraction_counts_moves_beyond_008():
    clean = grey(10, 10, 100)
    corrupted = clean.copy()
    corrupted[:3] = 121  # |dY| = 21/255 = 0.0824 > 0.08
    corrupted[3:6] = 120  # 20/255 = 0.0784, not occluded
    corrupted[6] = 79  # 21 darker, counted too
    assert cal.occluded_fraction(corrupted, clean) == pytest.approx(0.4)
    assert cal.occluded_fraction(clean, clean) == 0.0


def test_red_blue_ratio_and_zero_blue():
    img = np.zeros((2, 2, 3), np.uint8)
    img[..., 0] = 200
    img[..., 2] = 100
    assert cal.red_blue_ratio(img) == pytest.approx(2.0)
    img[..., 2] = 0
    assert cal.red_blue_ratio(img) == math.inf
    assert math.isnan(cal.red_blue_ratio(np.zeros((2, 2, 3), np.uint8)))


@pytest.mark.parametrize("vertical", [True, False])
def test_edge_strength_of_a_unit_step(vertical):
    img = grey(10, 10, 0)
    if vertical:
        img[:, 5:] = 255
    else:
        img[5:, :] = 255
    # Two interior columns (rows) of magnitude 4 out of 8 -> 8 * 4 / 64 = 1.
    assert cal.edge_strength(img) == pytest.approx(1.0, abs=1e-12)
    assert cal.edge_strength(grey(10, 10, 200)) == 0.0
    assert cal.edge_strength(grey(2, 9, 200)) == 0.0


def test_edge_strength_matches_float64_sobel_definition():
    yy, xx = np.mgrid[0:40, 0:50]
    img = np.stack([(xx * 5) % 256, (yy * 7) % 256, ((xx + yy) * 3) % 256], axis=2).astype(np.uint8)
    y = cal.luma(img)
    gx = cv2.Sobel(y, cv2.CV_64F, 1, 0, ksize=3)[1:-1, 1:-1]
    gy = cv2.Sobel(y, cv2.CV_64F, 0, 1, ksize=3)[1:-1, 1:-1]
    assert cal.edge_strength(img) == pytest.approx(float(np.mean(np.hypot(gx, gy))), rel=1e-12)


def test_streak_density_counts_only_pixels_brighter_than_the_veil():
    yy, xx = np.mgrid[0:64, 0:64]
    clean = np.stack([40 + (xx * 2), 60 + yy, 50 + (xx + yy)], axis=2).astype(np.uint8)
    veil = (clean.astype(np.float64) * 0.85 + 0.5).astype(np.uint8)  # darkened, no streaks
    assert cal.streak_density(clean, clean) == 0.0
    assert cal.streak_density(veil, clean) == 0.0
    rain = veil.copy()
    rain[10:40, 20] = 255  # a 30-px streak
    rain[5:9, 50] = 255  # and a 4-px one
    assert cal.streak_density(rain, clean) == pytest.approx(34 / 64**2)


def test_streak_density_ignores_the_veil_blur_of_a_textured_image():
    # Long side 1000 px: the config's veil blurs are sigma 0.4 / 0.8 / 1.2 px.
    assert cal.veil_sigmas(1000, 240) == pytest.approx((0.4, 0.8, 1.2))
    yy, xx = np.mgrid[0:240, 0:1000]
    checker = (((xx // 5) + (yy // 5)) % 2 * 200 + 20).astype(np.uint8)
    clean = np.repeat(checker[:, :, None], 3, axis=2)
    blurred = cv2.GaussianBlur(clean, (0, 0), 1.2)
    veil = (blurred.astype(np.uint16) * 230 // 255).astype(np.uint8)
    assert cal.streak_density(veil, clean) == 0.0
    # Judged without the blur bracket, the blurred-in pixels next to bright squares would count as streaks.
    assert cal.streak_density(veil, clean, sigmas=()) > 0.01
    # A plain local-contrast detector would count the checker's bright squares; this one does not.
    assert cal.streak_density(clean, clean) == 0.0


def test_statistics_reject_bad_input():
    with pytest.raises(AegisError, match="HxWx3 uint8"):
        cal.rms_contrast(np.zeros((4, 4), np.uint8))
    with pytest.raises(AegisError, match="HxWx3 uint8"):
        cal.mean_luminance(np.zeros((4, 4, 3), np.float32))
    with pytest.raises(AegisError, match="differ in shape"):
        cal.occluded_fraction(grey(4, 4, 0), grey(4, 5, 0))
    with pytest.raises(AegisError, match="unknown corruption 'snow'"):
        cal.statistic("snow", grey(4, 4, 0), grey(4, 4, 0))
    with pytest.raises(AegisError, match="unknown calibration statistic"):
        cal.compute_statistic("sharpness", grey(4, 4, 0))
    with pytest.raises(AegisError, match="compares against the clean image"):
        cal.compute_statistic("occluded_fraction", grey(4, 4, 0))


@pytest.mark.parametrize("suite", SUITE_NAMES)
def test_every_declared_statistic_is_implemented(suite):
    cfg = load_config(suite)
    for spec in cfg.corruptions.values():
        assert spec.statistic in cal.STATISTICS, spec.name
        assert spec.direction in ("increase", "decrease"), spec.name


# --- calibrate / check_monotone with a test double for the engine ----------------------------------------
def _darken(image, name, severity, image_id):
    """Stand-in engine: scales brightness down with severity (so mean_luminance falls)."""
    return (image.astype(np.uint16) * (10 - 2 * severity) // 10).astype(np.uint8)


def test_calibrate_aggregates_means_and_stds_per_severity():
    images = [("a", grey(8, 8, 100)), ("b", grey(8, 8, 200))]
    table = calibrate(images, ["low_light"], corrupt=_darken, config=V1)
    assert table.n_images == 2
    assert [r.severity for r in table.rows] == [1, 2, 3]
    s1 = table.rows[0]
    assert s1.condition == "low_light_s1" and s1.statistic == "mean_luminance" and s1.n == 2
    assert s1.mean == pytest.approx((80 + 160) / 2 / 255)
    assert s1.std == pytest.approx(40 / 255)
    assert s1.clean_mean == pytest.approx(150 / 255)
    assert check_monotone(table) == []


def test_calibrate_skips_absent_conditions_and_checks_what_is_there():
    def only_s1_s3(image, name, severity, image_id):
        return None if severity == 2 else _darken(image, name, severity, image_id)

    table = calibrate([("a", grey(4, 4, 120))], ["low_light"], corrupt=only_s1_s3, config=V1)
    assert [r.n for r in table.rows] == [1, 0, 1]
    assert math.isnan(table.rows[1].mean)
    assert check_monotone(table) == []
    assert table.to_dict()["rows"][1]["mean"] is None


def test_calibrate_rejects_empty_input_and_bad_names():
    with pytest.raises(AegisError, match="at least one image"):
        calibrate([], ["low_light"], corrupt=_darken, config=V1)
    with pytest.raises(AegisError, match="unknown corruption 'fog'"):
        calibrate([("a", grey(4, 4, 1))], ["fog"], corrupt=_darken, config=V1)
    with pytest.raises(AegisError, match="severities"):
        calibrate([("a", grey(4, 4, 1))], ["low_light"], severities=(1, 4), corrupt=_darken, config=V1)


def _table(direction: str, clean: float, means: list[float]) -> CalibrationTable:
    rows = tuple(
        CalibrationRow("x", "fam", "stat", direction, s, f"x_s{s}", 1, m, 0.0, clean, 0.0)
        for s, m in enumerate(means, start=1)
    )
    return CalibrationTable(rows=rows, n_images=1, config_hash="0" * 12, seed=1)


@pytest.mark.parametrize(
    "direction, clean, means, n_bad",
    [
        ("increase", 0.0, [0.1, 0.2, 0.3], 0),
        ("increase", 0.1, [0.1, 0.2, 0.3], 1),  # severity 1 has not left clean
        ("increase", 0.0, [0.1, 0.1, 0.3], 1),  # a flat step is not strict
        ("increase", 0.0, [0.1, 0.3, 0.2], 1),
        ("decrease", 0.5, [0.4, 0.3, 0.2], 0),
        ("decrease", 0.5, [0.6, 0.3, 0.4], 2),
        ("decrease", 0.5, [0.4, float("nan"), 0.2], 2),
    ],
)
def test_check_monotone(direction, clean, means, n_bad):
    violations = check_monotone(_table(direction, clean, means))
    assert len(violations) == n_bad, violations
    assert all(v.corruption == "x" for v in violations)


# --- every real ladder, on the engine's output over the golden frames ------------------------------------
@pytest.fixture(scope="module")
def golden_table() -> CalibrationTable:
    from tests.golden.frames import GOLDEN_SIZES, golden_frame

    images = [(f"golden-{h}x{w}", golden_frame(h, w)) for h, w in GOLDEN_SIZES]
    return calibrate(images, config=V1)


def test_every_ladder_is_strictly_monotone_on_the_golden_frames(golden_table):
    assert golden_table.n_images == 3
    assert [r.condition for r in golden_table.rows] == V1.conditions()[1:]
    assert check_monotone(golden_table) == []
    for row in golden_table.rows:  # every severity, not only the first, is away from clean
        assert row.n == 3 and row.mean != row.clean_mean, row


def test_dust_and_smoke_are_told_apart_by_colour(golden_table):
    # Both lower rms_contrast; dust's airlight is brown (R > B), smoke's is a cool grey (R < B).
    from tests.golden.frames import golden_frame

    frame = golden_frame(240, 320)
    from aegis_data.engine.corruptions import apply_corruption

    dust = cal.red_blue_ratio(apply_corruption(frame, "dust_haze", 3, "golden-240x320", config=V1))
    smoke = cal.red_blue_ratio(apply_corruption(frame, "smoke_haze", 3, "golden-240x320", config=V1))
    assert dust > 1.25 > 1.0 > smoke, (dust, smoke)


def test_streak_density_tracks_the_engines_own_veil():
    # The engine can show its veil alone; the true streak fraction is output minus veil > margin. The pair
    # estimate (which never sees the veil) must agree within 20%.
    from aegis_data.engine.corruptions import apply_corruption, corruption_params, rain_veil
    from tests.golden.frames import golden_frame

    frame = golden_frame(479, 641)
    for sev in (1, 2, 3):
        rain = apply_corruption(frame, "rain_streaks", sev, "golden-479x641", config=V1)
        veil = rain_veil(frame, corruption_params("rain_streaks", sev, config=V1))
        truth = float(np.mean(cal.luma(rain) - cal.luma(veil) > cal.STREAK_MARGIN))
        assert truth > 0
        assert cal.streak_density(rain, frame) == pytest.approx(truth, rel=0.2), sev
        assert cal.streak_density(veil, frame) < 0.1 * truth


def test_calibrate_seed_reaches_the_engine():
    from tests.golden.frames import golden_frame

    images = [("s", golden_frame(120, 160))]
    default = calibrate(images, ["rain_streaks"], config=V1)
    other = calibrate(images, ["rain_streaks"], seed=7, config=V1)
    assert default.seed == V1.seed and other.seed == 7
    assert [r.mean for r in default.rows] != [r.mean for r in other.rows]


@pytest.mark.parametrize("suite", SUITE_NAMES)
def test_calibrate_path_takes_a_ready_scale_and_any_spelling_of_the_mode(tmp_path, suite):
    """A folder takes ``scale`` as resolve_scale does: a ready Scale (the signature's ``str | Scale``) or a mode in
    any case; aegis-v2 still refuses frame scale in either form."""
    from aegis_data.engine.scale import FRAME_SCALE, Scale

    cv2.imwrite(str(tmp_path / "a.png"), np.full((48, 64, 3), 120, np.uint8))
    unit = Scale("object", 20.0, "test")
    by_scale = cal.calibrate_clean_folder(tmp_path, ["low_light"], 1, scale=unit, suite=suite)
    by_name = cal.calibrate_clean_folder(tmp_path, ["low_light"], 1, scale="Object", person_px=20.0, suite=suite)
    assert by_scale.scale == by_name.scale.replace("given person unit", "test") and by_scale.n_images == 1
    assert [r.mean for r in by_scale.rows] == [r.mean for r in by_name.rows]
    if suite == "aegis-v2":
        for frame in (FRAME_SCALE, " Frame"):
            with pytest.raises(AegisError, match="takes `scale` object only"):
                cal.calibrate_clean_folder(tmp_path, ["low_light"], 1, scale=frame, suite=suite)
    with pytest.raises(AegisError, match="`scale` must be one of"):
        cal.calibrate_clean_folder(tmp_path, ["low_light"], 1, scale="pixels", suite=suite)


def test_a_suite_that_declares_its_person_unit_calibrates_a_folder_with_it(tmp_path):
    """corrupt, grid and build take a suite file's ``scale: {mode: object, person_px: N}`` when the call gives no
    unit; calibrate of a folder asked for --person-px instead (its own copy of the scale choice skipped the
    suite's unit). One choice (``scale.suite_call_scale``) serves all of them now."""
    from aegis_data.engine.config import SUITES_DIR

    raw = (SUITES_DIR / "aegis-v2.yaml").read_text()
    assert "\nscale: object\n" in raw
    path = tmp_path / "unit.yaml"
    path.write_text(raw.replace("\nscale: object\n", "\nscale: {mode: object, person_px: 30}\n"))
    folder = tmp_path / "imgs"
    folder.mkdir()
    cv2.imwrite(str(folder / "a.png"), np.full((48, 64, 3), 120, np.uint8))
    table = cal.calibrate_clean_folder(folder, ["low_light"], 1, suite=str(path))
    assert table.n_images == 1 and "30" in table.scale
    assert table.scale != cal.calibrate_clean_folder(folder, ["low_light"], 1, suite=str(path), person_px=20.0).scale
