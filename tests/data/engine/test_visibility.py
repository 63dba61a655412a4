"""The detector-free Rose index V of a person (aegis_data.engine.visibility), its summary, its place in
`aegis calibrate`, and the calibration statistics noise_sigma and edge_width a suite may declare."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.engine import calibration as cal
from aegis_data.engine.config import config_from_bytes, load_config
from aegis_data.engine.config_schema import CALIBRATION_STATISTICS
from aegis_data.engine.visibility import (
    MIN_SURROUND_BOXES,
    ROSE_K,
    _covered_area,
    person_visibility,
    pixel_box,
    summarize_visibility,
)
from aegis_data.errors import AegisError
from aegis_data.split import measure

runner = CliRunner()


def normal(seed: int, shape) -> np.ndarray:
    return np.random.Generator(np.random.PCG64(seed)).standard_normal(shape)


def grey(values: np.ndarray) -> np.ndarray:
    return np.repeat(np.clip(np.floor(values + 0.5), 0, 255).astype(np.uint8)[..., None], 3, axis=2)


def patches(w: int, h: int, contrast: float, n: int = 4, height: int = 400, width: int = 1000):
    """A uniform 100-DN field with ``n`` person patches of +contrast, far apart; their boxes."""
    field = np.full((height, width), 100.0)
    boxes = []
    for k in range(n):
        x, y = 60 + k * (width - 120) // n, height // 2 - h // 2
        field[y : y + h, x : x + w] += contrast
        boxes.append([float(x), float(y), float(w), float(h)])
    return field, boxes


# --- V on known images ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("w, h", [(16, 16), (24, 40), (48, 48)])
def test_v_is_the_rose_snr_for_a_patch_on_white_noise(w, h):
    sigma, contrast = 10.0, 3.0
    values = []
    for seed in range(12):
        field, boxes = patches(w, h, contrast)
        values += person_visibility(grey(field + sigma * normal(seed, field.shape)), boxes)
    expected = contrast * math.sqrt(w * h) / math.sqrt(sigma**2 + 1 / 12)
    # Overlapping windows and a surround of ~8 independent windows: the median V reads 8-11 % high (documented).
    assert expected * 0.95 < float(np.median(values)) < expected * 1.3, (np.median(values), expected)


def test_v_falls_monotonically_as_noise_rises():
    field, boxes = patches(30, 50, 12.0, n=3)
    noise = normal(20, field.shape)
    v = [np.median(person_visibility(grey(field + s * noise), boxes)) for s in (1, 2, 4, 8, 16, 32)]
    assert all(a > b for a, b in zip(v, v[1:])), v


def test_a_second_person_next_to_the_first_does_not_bias_its_neighbourhood():
    sigma = 8.0
    noise = sigma * normal(21, (300, 300))
    a = [120.0, 120.0, 30.0, 40.0]
    b = [155.0, 125.0, 30.0, 40.0]  # 5 px to the right of a: inside a's neighbourhood

    def scene(with_b: bool) -> np.ndarray:
        field = np.full((300, 300), 100.0)
        field[120:160, 120:150] += 6.0
        if with_b:
            field[125:165, 155:185] += 60.0  # a much brighter neighbour
        return grey(field + noise)

    alone = person_visibility(scene(False), [a])[0]
    listed = person_visibility(scene(True), [a, b])[0]
    unlisted = person_visibility(scene(True), [a])[0]
    assert listed == pytest.approx(alone, rel=0.15)
    assert unlisted < 0.6 * alone  # had b's pixels counted as a's surround, a would look far less visible


def test_uniform_surround_and_nan_cases():
    field = np.full((200, 200), 80.0)
    field[90:110, 90:110] = 120.0
    assert person_visibility(grey(field), [[90, 90, 20, 20]]) == (math.inf,)
    assert person_visibility(grey(np.full((200, 200), 80.0)), [[90, 90, 20, 20]]) == (0.0,)
    rgb = grey(100 + 5 * normal(22, (100, 100)))
    # a box the size of the frame: no window fits; a box rounded to nothing; a box outside the frame
    got = person_visibility(rgb, [[0, 0, 100, 100], [10.2, 10.0, 0.2, 5.0], [500, 500, 10, 10]])
    assert all(math.isnan(v) for v in got)
    assert person_visibility(rgb, []) == ()
    # crowded: people on three sides leave less than MIN_SURROUND_BOXES box areas of surround
    crowd = [[40, 40, 20, 20]] + [
        [40 + dx, 40 + dy, 20, 20] for dx in (-20, 0, 20) for dy in (-20, 0, 20) if dx != 0 or dy == 20
    ]
    assert math.isnan(person_visibility(rgb, crowd)[0]) and MIN_SURROUND_BOXES == 4
    assert not math.isnan(person_visibility(rgb, crowd[:2])[0])  # one neighbour: enough surround left


def test_a_person_at_a_frame_edge_is_measured_and_at_a_corner_is_not():
    """At the top edge 5 of the 8 surrounding box areas remain; at a corner only 3, too few for a spread."""
    field = np.full((200, 200), 100.0)
    field[0:20, 90:110] += 30.0
    field[0:20, 0:20] += 30.0
    rgb = grey(field + 3 * normal(23, field.shape))
    edge, corner = person_visibility(rgb, [[90, 0, 20, 20], [0, 0, 20, 20]])
    assert edge == pytest.approx(30 * 20 / 3, rel=0.4) and math.isnan(corner)


def test_covered_area_of_the_border_windows():
    from aegis_data.engine.visibility import _border_windows

    u, v = _border_windows(50, 50, 10, 20)
    assert _covered_area(u, v, 10, 20, 50, 50) == 8 * 10 * 20  # the full surround: 3 x 3 boxes minus the person
    # Two overlapping windows of the top row of a 10 x 10 person's surround at (10, 10).
    assert _covered_area(np.array([0, 5]), np.array([0, 0]), 10, 10, 10, 10) == 150


def test_pixel_box_rounds_and_clips_and_refuses_garbage():
    assert pixel_box([10.4, 10.5, 20.2, 5.0], 100, 100) == (10, 11, 31, 16)
    assert pixel_box([-5, -5, 10, 10], 100, 100) == (0, 0, 5, 5)
    assert pixel_box([95, 95, 10, 10], 100, 100) == (95, 95, 100, 100)
    with pytest.raises(AegisError, match="4 numbers"):
        pixel_box([1, 2, 3], 10, 10)
    with pytest.raises(AegisError, match="finite"):
        pixel_box([1, 2, math.nan, 3], 10, 10)
    with pytest.raises(AegisError, match="HxWx3 uint8"):
        person_visibility(np.zeros((4, 4), np.uint8), [[0, 0, 1, 1]])


def test_summary_median_and_rose_share():
    s = summarize_visibility([1.0, 4.0, 5.0, 9.0, math.inf, math.nan])
    assert (s.n_persons, s.n_measured) == (6, 5)
    assert s.median == 5.0 and s.detectable_share == pytest.approx(3 / 5) and ROSE_K == 5.0
    empty = summarize_visibility([math.nan])
    assert empty.n_measured == 0 and math.isnan(empty.median)
    assert empty.to_dict() == {"n_persons": 1, "n_measured": 0, "median": None, "detectable_share": None}


# --- in calibrate -----------------------------------------------------------------------------------------------
def _noisier(image, name, severity, image_id):
    """Stand-in engine: adds noise growing with severity (so people get less visible)."""
    noise = normal(100 + severity, image.shape[:2])[..., None] * (6.0 * severity)
    return np.clip(np.floor(image + noise + 0.5), 0, 255).astype(np.uint8)


def test_calibrate_reports_visibility_per_condition_when_boxes_are_known():
    field, boxes = patches(24, 32, 20.0, n=4)
    images = [("a", grey(field + 2 * normal(30, field.shape)))]
    table = cal.calibrate(images, ["low_light"], corrupt=_noisier, boxes={"a": boxes})
    assert table.clean_visibility.n_persons == 4
    medians = [r.visibility_median for r in table.rows]
    assert table.clean_visibility.median > medians[0] > medians[1] > medians[2], medians
    assert [r.visibility_n for r in table.rows] == [4, 4, 4]
    assert table.rows[0].visibility_detectable_share == 1.0
    doc = table.to_dict()
    assert doc["clean_visibility"]["n_persons"] == 4
    assert {"visibility_median", "visibility_detectable_share", "visibility_n"} <= set(doc["rows"][0])
    # without boxes the JSON is as before: no visibility keys at all
    plain = cal.calibrate(images, ["low_light"], corrupt=_noisier).to_dict()
    assert "clean_visibility" not in plain and "visibility_median" not in plain["rows"][0]
    # an image without an entry has no persons
    none = cal.calibrate(images, ["low_light"], corrupt=_noisier, boxes={})
    assert none.clean_visibility.n_persons == 0 and math.isnan(none.rows[0].visibility_median)


@pytest.fixture(scope="module")
def split(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("visibility") / "split"
    # aegis-v1: its low_light ladder leaves clean at s1 on these small synthetic frames, so calibrate exits 0 and
    # the test sees the visibility columns (aegis-v2's noise_sigma at s1 measures below clean here).
    result = runner.invoke(
        app,
        [
            "build-splits",
            "--suite",
            "aegis-v1",
            "--n",
            "6",
            "--size",
            "160",
            "--corruptions",
            "low_light",
            "--severities",
            "1",
            "--workers",
            "1",
            "--out-dir",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    return out


def test_calibrate_split_reads_the_test_boxes(split, tmp_path):
    gt = json.loads((split / "annotations" / "test.json").read_text())
    table = measure.calibrate_split(split, ["low_light"])
    assert table.clean_visibility is not None and table.clean_visibility.n_persons == len(gt["annotations"])
    result = runner.invoke(
        app, ["calibrate", str(split), "-c", "low_light", "--json", str(tmp_path / "c.json")], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    assert "V med" in result.stdout and "V≥5" in result.stdout and "visibility V (Rose)" in result.stdout
    doc = json.loads((tmp_path / "c.json").read_text())
    assert doc["clean_visibility"]["n_persons"] == len(gt["annotations"])
    assert doc["rows"][0]["condition"] == "low_light_s1" and "visibility_median" in doc["rows"][0]
    # a split without test annotations calibrates as before
    (split / "annotations" / "test.json").rename(tmp_path / "test.json")
    try:
        assert measure.calibrate_split(split, ["low_light"]).clean_visibility is None
    finally:
        (tmp_path / "test.json").rename(split / "annotations" / "test.json")


# --- noise_sigma and edge_width as calibration statistics ------------------------------------------------------
def test_the_schema_and_the_calculator_know_the_same_statistics():
    assert set(CALIBRATION_STATISTICS) == set(cal.STATISTICS)
    assert {"noise_sigma", "edge_width"} <= set(CALIBRATION_STATISTICS)
    rgb = grey(120 + 4.0 * normal(40, (128, 128)))
    assert cal.compute_statistic("noise_sigma", rgb) == pytest.approx(4.0, rel=0.05)
    step = np.full((128, 128), 60.0)
    step[:, 64:] = 190.0
    assert cal.compute_statistic("edge_width", grey(step)) == pytest.approx(0.8, abs=0.1)


def _suite_with(statistic_line: bytes) -> bytes:
    data = load_config("aegis-v1").raw  # a generation-1 suite whose low_light declares mean_luminance
    old = b"statistic: mean_luminance"
    assert data.count(old) == 1
    return data.replace(old, statistic_line)


def test_a_suite_may_declare_noise_sigma_and_is_calibrated_with_it():
    cfg = config_from_bytes(_increase(_suite_with(b"statistic: noise_sigma")), "v.yaml")
    assert cfg.corruptions["low_light"].statistic == "noise_sigma"
    field = np.full((96, 96), 110.0) + 1.5 * normal(41, (96, 96))
    table = cal.calibrate([("a", grey(field))], ["low_light"], corrupt=_noisier, config=cfg)
    assert [r.statistic for r in table.rows] == ["noise_sigma"] * 3
    assert cal.check_monotone(table) == []
    assert table.rows[0].clean_mean < table.rows[0].mean < table.rows[1].mean < table.rows[2].mean


def _increase(data: bytes) -> bytes:
    """low_light's direction turned to increase (noise grows with severity)."""
    head, sep, tail = data.partition(b"statistic: noise_sigma")
    assert sep and tail.lstrip().startswith(b"direction: decrease")
    return head + sep + tail.replace(b"direction: decrease", b"direction: increase", 1)


def test_an_unknown_statistic_is_refused_when_the_suite_is_loaded():
    with pytest.raises(AegisError, match="unknown calibration statistic 'sharpness'") as err:
        config_from_bytes(_suite_with(b"statistic: sharpness"), "bad.yaml")
    assert "\n" not in str(err.value) and "noise_sigma" in str(err.value)
