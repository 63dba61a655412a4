"""Object-relative scale (``--scale object``): the unit, the engine's use of it, and what a build records.

The promises: under frame scale nothing changes (the golden and reference-manifest tests guard every byte);
under object scale a frame and a crop of it that hold the same people get the same effective lengths, and the
detector-free statistic of `aegis calibrate` measured around the people agrees across the two; at the
calibration anchor (4000-px frames, 60-px people) both scales give identical pixels.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.engine.calibration import calibrate, check_monotone, compute_statistic
from aegis_data.engine.config import load_config
from aegis_data.engine.corruptions import (
    CORRUPTIONS,
    apply_corruption,
    corruption_params,
    motion_kernel_length,
    rain_streak_count,
)
from aegis_data.engine.scale import (
    FRAME_SCALE,
    Scale,
    effective_value,
    person_unit_from_boxes,
    person_unit_from_gsd,
    resolve_scale,
    scale_from_record,
)
from aegis_data.errors import AegisError
from aegis_data.sources import load_source, read_rgb
from aegis_data.sources.records import Record
from aegis_data.sources.synthetic import render_scene
from aegis_data.split.build import build_splits
from aegis_data.split.manifest import load_manifest
from aegis_data.split.verify import verify_split
from tests.conftest import assert_one_line_error
from tests.golden.frames import golden_frame

runner = CliRunner()
# Object scale as aegis-v1 defines it (scale_side, the 4000-px / 60-px anchor, frame scale as the default): pinned.
# aegis-v2 renders in physical units through a scene model, under object scale only.
V1 = load_config("aegis-v1")
SUITE_V1 = ["--suite", "aegis-v1"]


def _record(image_id: str, boxes) -> Record:
    return Record(image_id=image_id, path=f"mem://{image_id}", width=4000, height=3000, boxes=tuple(boxes))


# --- the unit --------------------------------------------------------------------------------------------
def test_person_unit_is_the_median_box_size_and_skips_slivers():
    boxes = [(0, 0, 10, 40), (0, 0, 30, 30), (0, 0, 100, 400), (5, 5, 5.5, 90)]  # 20, 30, 200; a sliver
    assert person_unit_from_boxes(boxes) == (30.0, 3)
    assert person_unit_from_boxes(boxes[:2]) == (25.0, 2)  # even count: mean of the middle two
    unit, n = person_unit_from_boxes([])
    assert n == 0 and math.isnan(unit)


def test_gsd_unit_is_an_upright_person_box():
    # 1.7 m at 2.5 cm/px is 68 px tall; sqrt(w h) of a box half as wide is 68 / sqrt(2).
    assert person_unit_from_gsd(2.5) == pytest.approx(68 / math.sqrt(2), abs=0.005)
    for bad in (0, -1, float("nan"), 1e9, "2"):
        with pytest.raises(AegisError, match="`gsd_cm_per_px`"):
            person_unit_from_gsd(bad)


def test_resolve_scale_order_and_refusals():
    recs = {"test": [_record("a", [(0, 0, 40, 90)])], "val": [_record("b", [(0, 0, 10, 10)])]}
    assert resolve_scale("frame", recs) is FRAME_SCALE
    assert resolve_scale(None) is FRAME_SCALE
    assert resolve_scale("object", recs).person_px == 60.0  # sqrt(40 * 90), from test
    assert resolve_scale("object", recs, person_px=33).basis == "given person unit"
    assert resolve_scale("object", recs, gsd_cm_per_px=2.0).basis == "ground sampling distance 2 cm/px"
    # No test boxes: the other splits' boxes; none anywhere: a refusal naming the way out.
    only_val = {"test": [_record("a", [])], "val": [_record("b", [(0, 0, 20, 20)])]}
    assert resolve_scale("object", only_val).basis == "median sqrt(w*h) of 1 val box"
    with pytest.raises(AegisError, match="give it with `person_px` \\(px\\)"):
        resolve_scale("object", {"test": [_record("a", [])]})
    with pytest.raises(AegisError, match="no meaning under `scale` frame"):
        resolve_scale("frame", recs, person_px=30)
    with pytest.raises(AegisError, match="not both"):
        resolve_scale("object", recs, person_px=30, gsd_cm_per_px=2)
    with pytest.raises(AegisError, match="`scale` must be one of"):
        resolve_scale("tile", recs)
    with pytest.raises(AegisError, match=r"\[4, 2000\]"):
        resolve_scale("object", recs, person_px=1.0)


def test_scale_record_round_trip_and_refusals():
    s = Scale("object", 42.5, "given person unit")
    assert scale_from_record(s.identity()) == s
    assert scale_from_record(None) is FRAME_SCALE
    assert FRAME_SCALE.identity() is None  # frame builds record nothing: their roots stay
    for bad in (
        {"mode": "frame"},
        {"mode": "object", "person_px": float("inf")},
        {"mode": "object"},
        {"mode": "object", "person_px": 30, "extra": 1},
        [1],
    ):
        with pytest.raises(AegisError, match="scale"):
            scale_from_record(bad, "m.json")


# --- the engine --------------------------------------------------------------------------------------------
def test_frame_scale_leaves_the_parameter_records_as_they_were():
    for name in CORRUPTIONS:
        for sev in (1, 2, 3):
            assert corruption_params(name, sev, scale=FRAME_SCALE, config=V1) == corruption_params(name, sev, config=V1)


def test_the_anchor_gives_frame_pixels_exactly():
    # HERIDAL-like: 4000-px long side, 60-px people. A 4000 x 200 strip has that long side at 1/15 the cost.
    strip = np.ascontiguousarray(np.tile(golden_frame(200, 800), (1, 5, 1)))
    anchor = Scale("object", 60.0, "anchor")
    assert anchor.reference_side == 4000.0
    for name in CORRUPTIONS:
        for sev in (1, 2, 3):
            a = apply_corruption(strip, name, sev, "anchor", config=V1)
            b = apply_corruption(strip, name, sev, "anchor", scale=anchor, config=V1)
            assert np.array_equal(a, b), (name, sev)


def test_object_lengths_follow_the_people_not_the_frame():
    obj = Scale("object", 30.0, "t")
    for sev in (1, 2, 3):
        blur = corruption_params("motion_blur", sev, scale=obj, config=V1)
        frame_blur = corruption_params("motion_blur", sev, config=V1)
        assert motion_kernel_length(blur, 640, 640) == motion_kernel_length(blur, 2160, 3840)
        assert motion_kernel_length(frame_blur, 2160, 3840) >= 5 * motion_kernel_length(frame_blur, 640, 640) - 5
        rain = corruption_params("rain_streaks", sev, scale=obj, config=V1)
        # Streaks per frame area: the crop holds (640*640)/(3840*2160) of the frame's streaks.
        full, crop = rain_streak_count(rain, 2160, 3840), rain_streak_count(rain, 640, 640)
        assert crop == pytest.approx(full * 640 * 640 / (3840 * 2160), rel=0.01, abs=1)
    # Half the person size, half the lengths; a quarter of the person area, four times the streaks per MP.
    half = Scale("object", 15.0, "t")
    assert effective_value("length_px", 30, half, None)[0] == pytest.approx(
        effective_value("length_px", 30, obj, None)[0] / 2
    )
    assert effective_value("density_per_mp", 800, half, None) == (
        4 * effective_value("density_per_mp", 800, obj, None)[0],
        "per MP",
    )
    with pytest.raises(AegisError, match="long side"):
        effective_value("length_px", 30, FRAME_SCALE, None)


def test_scale_side_cannot_come_from_a_config_or_a_non_scale():
    from aegis_data.engine.config import config_from_bytes

    with pytest.raises(AegisError, match="Scale"):
        corruption_params("motion_blur", 1, scale="object", config=V1)
    # The unit is the build's choice: a suite config that tries to set it is refused when it is loaded.
    data = V1.raw.replace(b"      min_length: 3", b"      min_length: 3\n      scale_side: 99")
    with pytest.raises(AegisError, match="no parameter 'scale_side'"):
        config_from_bytes(data, "x.yaml")


def _neighbourhoods(boxes, x0: int, width: int, height: int, unit: float):
    """Each person's box grown by one unit, in crop coordinates, for people at least two units inside the crop."""
    for b in boxes:
        if b[0] >= x0 + 2 * unit and b[2] <= x0 + width - 2 * unit:
            yield (
                slice(max(0, int(b[1] - unit)), min(height, int(math.ceil(b[3] + unit)))),
                slice(max(0, int(b[0] - x0 - unit)), min(width, int(math.ceil(b[2] - x0 + unit)))),
            )


@pytest.fixture(scope="module")
def frames_and_crops():
    """Synthetic 4000 x 1000 frames and a 1000 x 1000 crop of each around its first person (the same people)."""
    scenes = []
    for index in range(4):
        sc = render_scene(index, 4000, 1000)
        if not sc.boxes:
            continue
        cx = (sc.boxes[0][0] + sc.boxes[0][2]) / 2
        x0 = int(min(max(cx - 500, 0), 3000))
        scenes.append((sc, x0, np.ascontiguousarray(sc.rgb[:, x0 : x0 + 1000])))
    assert len(scenes) >= 3
    return scenes


def _statistic_ratio(scenes, name: str, severity: int, scale_of) -> tuple[float, float]:
    """Mean over people of the calibration statistic around them: (full frame, crop). For motion blur the
    edge strength relative to clean; for rain the streak density (paired with clean)."""
    cfg = V1
    stat = cfg.corruptions[name].statistic
    full_vals, crop_vals = [], []
    for sc, x0, crop in scenes:
        unit, _ = person_unit_from_boxes(sc.boxes)
        scale = scale_of(unit)
        full = apply_corruption(sc.rgb, name, severity, "same-view", scale=scale, config=V1)
        cut = apply_corruption(crop, name, severity, "same-view", scale=scale, config=V1)
        full_in_crop = full[:, x0 : x0 + 1000]
        sigmas_scale = scale if scale.is_object else None
        for ys, xs in _neighbourhoods(sc.boxes, x0, 1000, 1000, unit):
            clean = crop[ys, xs]
            if stat == "edge_strength":
                base = compute_statistic(stat, clean)
                full_vals.append(compute_statistic(stat, full_in_crop[ys, xs]) / base)
                crop_vals.append(compute_statistic(stat, cut[ys, xs]) / base)
            else:
                full_vals.append(compute_statistic(stat, full_in_crop[ys, xs], clean, cfg, sigmas_scale))
                crop_vals.append(compute_statistic(stat, cut[ys, xs], clean, cfg, sigmas_scale))
    assert len(full_vals) >= 4
    return float(np.mean(full_vals)), float(np.mean(crop_vals))


@pytest.mark.parametrize("name,severity", [("motion_blur", 1), ("motion_blur", 3), ("rain_streaks", 3)])
def test_a_crop_and_its_frame_degrade_the_same_people_alike(frames_and_crops, name, severity):
    # Object scale: within 10% (measured: within 1%; motion blur is identical away from the crop's border, the
    # streaks differ in position but not in density or length). Frame scale, the confound this removes: the
    # 4x smaller crop gets a 4x shorter blur and 4x shorter streaks (measured 1.7x-3.4x apart).
    full, crop = _statistic_ratio(frames_and_crops, name, severity, lambda unit: Scale("object", unit, "boxes"))
    assert crop == pytest.approx(full, rel=0.10), (full, crop)
    full_f, crop_f = _statistic_ratio(frames_and_crops, name, severity, lambda unit: FRAME_SCALE)
    assert max(full_f, crop_f) / min(full_f, crop_f) > 1.5, (full_f, crop_f)


def test_calibration_stays_monotone_under_object_scale():
    ds = load_source("synthetic")
    images = [(r.image_id, read_rgb(r)) for r in ds.splits["test"][:8]]
    unit = resolve_scale("object", ds.splits)
    table = calibrate(images, scale=unit, config=V1)
    assert check_monotone(table) == []
    assert len(table.corruptions) == 9 and table.scale.startswith("object")


# --- builds, verify, CLI --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def object_build(tmp_path_factory):
    out = tmp_path_factory.mktemp("obj") / "split"
    ds = load_source("synthetic", n=6)
    res = build_splits(
        ds, out, corruptions=["motion_blur", "rain_streaks"], severities=[1, 3], workers=1, scale="object", config=V1
    )
    return ds, out, res


def test_object_build_records_its_unit_in_the_identity(object_build, tmp_path):
    ds, out, res = object_build
    m = load_manifest(out)
    unit, n = person_unit_from_boxes(b for r in ds.splits["test"] for b in r.boxes)
    assert m.data["scale"] == {"mode": "object", "person_px": unit, "basis": f"median sqrt(w*h) of {n} test boxes"}
    assert res.scale.person_px == unit
    frame = build_splits(
        ds, tmp_path / "frame", corruptions=["motion_blur", "rain_streaks"], severities=[1, 3], workers=1, config=V1
    )
    assert "scale" not in load_manifest(tmp_path / "frame").data
    assert frame.root_hash != res.root_hash
    # Same clean pixels; other corrupted pixels (the lengths changed).
    fm, om = load_manifest(tmp_path / "frame").entries, m.entries
    assert (
        fm["test/clean/" + ds.splits["test"][0].image_id + ".png"]["pixel_sha256"]
        == om["test/clean/" + ds.splits["test"][0].image_id + ".png"]["pixel_sha256"]
    )
    differ = [p for p in om if p.startswith("test/motion_blur_s3/") and fm[p]["pixel_sha256"] != om[p]["pixel_sha256"]]
    assert differ
    # A rebuild into the same folder with another scale is refused: that folder holds another benchmark.
    with pytest.raises(AegisError, match="scale"):
        build_splits(
            ds,
            out,
            corruptions=["motion_blur", "rain_streaks"],
            severities=[1, 3],
            workers=1,
            scale="object",
            person_px=99,
            config=V1,
        )


def test_verify_regenerates_with_the_recorded_unit(object_build, tmp_path):
    import shutil

    from aegis_data.files.imageio import read_rgb as read_file
    from aegis_data.files.imageio import write_png_atomic

    _, out, _ = object_build
    copy = tmp_path / "copy"
    shutil.copytree(out, copy, symlinks=True)
    report = verify_split(copy)
    assert report.ok and report.scale.startswith("object (person unit")
    # One flipped pixel: verify re-renders the condition from clean with the manifest's unit and counts exactly
    # that pixel (a frame-scale re-render would differ almost everywhere).
    rel = next(p for p in load_manifest(copy).entries if p.startswith("test/motion_blur_s3/"))
    rgb = read_file(copy / rel)
    rgb[3, 4, 0] ^= 0x40
    write_png_atomic(copy / rel, rgb)
    finding = next(f for f in verify_split(copy).findings if f.path == rel)
    assert finding.kind == "pixels" and finding.pixels_differing == 1


def test_cli_build_list_and_errors(tmp_path):
    out = tmp_path / "s"
    r = runner.invoke(
        app,
        [
            "build-splits",
            *SUITE_V1,
            "--out-dir",
            str(out),
            "--n",
            "6",
            "--limit",
            "2",
            "--corruptions",
            "motion_blur",
            "--severities",
            "1",
            "--workers",
            "1",
            "--scale",
            "object",
            "--person-px",
            "30",
        ],
    )
    assert r.exit_code == 0, r.output
    assert json.loads((out / "manifest.json").read_text())["scale"]["person_px"] == 30.0
    v = runner.invoke(app, ["verify", str(out)])
    assert v.exit_code == 0 and "scale: object (person unit 30 px" in " ".join(v.output.split())
    build = ["build-splits", *SUITE_V1]
    assert_one_line_error(
        runner.invoke(app, [*build, "--out-dir", str(tmp_path / "f"), "--person-px", "30"]),
        "no meaning under --scale frame",
    )
    assert_one_line_error(
        runner.invoke(app, [*build, "--out-dir", str(tmp_path / "g"), "--scale", "object", "--gsd", "0"]), "--gsd"
    )
    assert_one_line_error(
        runner.invoke(app, [*build, "--out-dir", str(tmp_path / "h"), "--scale", "tiles"]),
        "--scale must be one of frame, object",
    )
    assert not (tmp_path / "h").exists()

    listed = runner.invoke(app, ["list", *SUITE_V1, "--format", "json", "--scale", "object", "--person-px", "60"])
    desc = json.loads(listed.output)
    blur = next(c for c in desc["corruptions"] if c["name"] == "motion_blur")
    assert blur["effective"]["length_px"] == {"unit": "px", "values": [36.0, 68.0, 100.0]}
    at_anchor = json.loads(runner.invoke(app, ["list", *SUITE_V1, "--format", "json", "--long-side", "4000"]).output)
    assert at_anchor["corruptions"] == desc["corruptions"]  # the anchor: the same effective values
    plain = json.loads(runner.invoke(app, ["list", *SUITE_V1, "--format", "json"]).output)
    assert "effective" not in plain["corruptions"][0]


def test_cli_calibrate_and_corrupt_take_the_scale(tmp_path):
    from aegis_data.files.imageio import read_rgb as read_file
    from aegis_data.files.imageio import write_png_atomic

    img = tmp_path / "imgs" / "a.png"
    img.parent.mkdir()
    scene = render_scene(0, 320, 240).rgb  # a scene, not the periodic golden pattern a 30-px box blur can alias on
    write_png_atomic(img, scene)
    assert_one_line_error(
        runner.invoke(app, ["calibrate", str(img.parent), *SUITE_V1, "--scale", "object"]),
        "no person boxes to measure it from",
    )
    ok = runner.invoke(
        app,
        [
            "calibrate",
            str(img.parent),
            *SUITE_V1,
            "-c",
            "motion_blur",
            "--scale",
            "object",
            "--person-px",
            "20",
            "--json",
            str(tmp_path / "c.json"),
        ],
    )
    assert ok.exit_code == 0, ok.output
    assert json.loads((tmp_path / "c.json").read_text())["scale"].startswith("object (person unit 20 px")
    out = tmp_path / "o.png"
    r = runner.invoke(
        app,
        [
            "corrupt",
            *SUITE_V1,
            str(img),
            "-c",
            "motion_blur",
            "-s",
            "3",
            "-o",
            str(out),
            "--scale",
            "object",
            "--person-px",
            "20",
        ],
    )
    assert r.exit_code == 0, r.output
    expected = apply_corruption(scene, "motion_blur", 3, "a", scale=Scale("object", 20.0, "x"), config=V1)
    assert np.array_equal(read_file(out), expected)
    assert_one_line_error(
        runner.invoke(
            app,
            [
                "corrupt",
                *SUITE_V1,
                str(img),
                "-c",
                "motion_blur",
                "-s",
                "3",
                "-o",
                str(tmp_path / "p.png"),
                "--scale",
                "object",
            ],
        ),
        "--person-px",
    )
    # A split keeps the unit its manifest records: any scale option is refused with that reason, not with
    # advice to add a person unit.
    split = tmp_path / "split"
    build_splits(
        load_source("synthetic", n=2, size=96), split, corruptions=["motion_blur"], severities=[1], workers=1, config=V1
    )
    for extra in (["--scale", "object"], ["--scale", "object", "--person-px", "20"], ["--scale", "frame"]):
        assert_one_line_error(
            runner.invoke(app, ["calibrate", str(split), *extra]), "its manifest fixes the suite and scale"
        )
    assert runner.invoke(app, ["calibrate", str(split), "-c", "motion_blur"]).exit_code == 0


def test_a_suite_config_can_make_object_scale_its_default(tmp_path):
    from aegis_data.engine.config import config_from_bytes

    base = V1.raw
    v2 = config_from_bytes(
        base.replace(b"suite: aegis-v1", b"suite: v1-object\nscale: {mode: object, person_px: 30}"),
        tmp_path / "v2.yaml",
    )
    assert v2.scale == {"mode": "object", "person_px": 30.0} and V1.scale == {"mode": "frame"}
    ds = load_source("synthetic", n=3)
    res = build_splits(ds, tmp_path / "s", corruptions=["motion_blur"], severities=[1], workers=1, config=v2)
    assert load_manifest(tmp_path / "s").data["scale"]["person_px"] == 30.0 and res.scale.person_px == 30.0
    # The call overrides the suite: frame scale, or another unit.
    res = build_splits(
        ds, tmp_path / "f", corruptions=["motion_blur"], severities=[1], workers=1, config=v2, scale="frame"
    )
    assert not res.scale.is_object
    for bad in (
        b"scale: tiles",
        b"scale: {mode: frame, person_px: 30}",
        b"scale: {mode: object, person_px: 1e6}",
        b"scale: {mode: object, person_px: 30, gsd_cm_per_px: 2}",
    ):
        with pytest.raises(AegisError, match="scale"):
            config_from_bytes(base.replace(b"suite: aegis-v1", b"suite: v1-object\n" + bad), "bad.yaml")


def test_an_explicit_object_scale_keeps_the_suite_unit_and_names_its_source(tmp_path):
    from aegis_data.engine.config import config_from_bytes
    from aegis_data.split.build import plan_build

    base = V1.raw
    ds = load_source("synthetic", n=3)
    v2 = config_from_bytes(
        base.replace(b"suite: aegis-v1", b"suite: v1-object\nscale: {mode: object, person_px: 30}"),
        tmp_path / "v2.yaml",
    )
    implicit = plan_build(ds, v2).scale
    assert implicit == Scale("object", 30.0, "suite config scale.person_px")
    # Naming object scale (--scale object) must not drop the unit the suite declares.
    assert plan_build(ds, v2, scale="object").scale == implicit
    # The call's unit wins; a frame call has none.
    assert plan_build(ds, v2, scale="object", person_px=40).scale == Scale("object", 40.0, "given person unit")
    assert plan_build(ds, v2, person_px=40).scale.basis == "given person unit"
    assert not plan_build(ds, v2, scale="frame").scale.is_object
    gsd = config_from_bytes(
        base.replace(b"suite: aegis-v1", b"suite: v1-object\nscale: {mode: object, gsd_cm_per_px: 2.5}"),
        tmp_path / "g.yaml",
    )
    for call in ({}, {"scale": "object"}):
        s = plan_build(ds, gsd, **call).scale
        assert s.person_px == person_unit_from_gsd(2.5) and s.basis == "suite config scale.gsd_cm_per_px 2.5 cm/px"
    # An object suite without a unit, and the aegis-v1 (frame) suite under --scale object: the median box.
    bare = config_from_bytes(base.replace(b"suite: aegis-v1", b"suite: v1-object\nscale: object"), tmp_path / "b.yaml")
    for cfg in (bare, V1):
        assert plan_build(ds, cfg, scale="object").scale.basis.startswith("median sqrt(w*h)")


def test_the_gsd_range_is_the_person_unit_range_and_refusals_name_the_key():
    from aegis_data.engine.config import config_from_bytes
    from aegis_data.engine.scale import GSD_RANGE_CM, PERSON_PX_RANGE

    lo, hi = GSD_RANGE_CM
    # Every gsd in range gives a usable unit, the bounds give the unit's bounds.
    assert (person_unit_from_gsd(lo), person_unit_from_gsd(hi)) == (PERSON_PX_RANGE[1], PERSON_PX_RANGE[0])
    for gsd in (lo, 2.5, 30.0, hi):
        assert Scale("object", person_unit_from_gsd(gsd)).is_object
    for bad in (40, 31, 0.05):
        with pytest.raises(
            AegisError, match=r"^`gsd_cm_per_px` must lie in \[0\.0601, 30\.05\] cm per px \(a person unit of 4"
        ):
            resolve_scale("object", gsd_cm_per_px=bad)
    # A suite config's gsd is refused when the config is loaded, naming the config key, not a flag.
    base = V1.raw
    with pytest.raises(AegisError, match=r"^g\.yaml: scale\.gsd_cm_per_px must lie in \[0\.0601, 30\.05\]"):
        config_from_bytes(
            base.replace(b"suite: aegis-v1", b"suite: v1-object\nscale: {mode: object, gsd_cm_per_px: 40}"), "g.yaml"
        )
    with pytest.raises(AegisError, match=r"^g\.yaml: scale\.gsd_cm_per_px must be a finite number"):
        config_from_bytes(
            base.replace(b"suite: aegis-v1", b"suite: v1-object\nscale: {mode: object, gsd_cm_per_px: .inf}"), "g.yaml"
        )
