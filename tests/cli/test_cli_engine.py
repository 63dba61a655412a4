"""`aegis list / corrupt / grid / calibrate`: results, files written, and every error path (one line, exit 1)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.engine.config import load_config
from aegis_data.engine.corruptions import apply_corruption
from aegis_data.files.imageio import pixel_sha256, read_rgb, write_png_atomic
from aegis_data.split.manifest import build_manifest, write_manifest
from tests.conftest import assert_one_line_error as _one_line_error
from tests.golden.frames import golden_frame


def assert_one_line_error(result, *fragments: str) -> None:
    _one_line_error(result, *fragments, exit_code=None)  # usage errors exit 2, ours 1


runner = CliRunner()
CFG = load_config()  # the default suite (aegis-v2)
# Tests of aegis-v1's values, pixels and ladders pin that suite; tests of a command's plumbing run the default suite
# with a person unit (aegis-v2 renders in physical units and needs one).
V1 = load_config("aegis-v1")
SUITE_V1 = ["--suite", "aegis-v1"]
UNIT = ["--person-px", "40"]


def frame(h: int = 240, w: int = 320, phase: int = 0) -> np.ndarray:
    """The golden test frame (integer-built), optionally shifted so two images differ."""
    return np.ascontiguousarray(np.roll(golden_frame(h, w), phase * 17, axis=1))


@pytest.fixture(scope="module")
def image_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("imgs")
    write_png_atomic(d / "alpha.png", frame(phase=0))
    write_png_atomic(d / "beta.png", frame(phase=3))
    (d / "notes.txt").write_text("not an image")
    (d / "._alpha.png").write_bytes(b"\x00\x05\x16\x07")  # a macOS AppleDouble stub: hidden, so skipped
    return d


def test_console_script_starts():
    exe = Path(sys.executable).parent / "aegis"
    proc = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for cmd in ("list", "corrupt", "grid", "calibrate"):
        assert cmd in proc.stdout


# --- list ------------------------------------------------------------------------------------------------
def test_list_table_names_every_corruption_and_the_config():
    result = runner.invoke(app, ["list"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for name, spec in CFG.corruptions.items():
        assert name in result.stdout and spec.statistic in result.stdout
    assert CFG.config_hash in result.stdout and str(CFG.seed) in result.stdout
    assert "ev_loss 4.6 / 8 / 11.6" in result.stdout  # a severity row, as list formats it


def test_list_json_matches_the_config():
    result = runner.invoke(app, ["list", "--format", "json", *SUITE_V1])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["config_hash"] == V1.config_hash and data["seed"] == V1.seed
    assert [c["name"] for c in data["corruptions"]] == list(V1.names)
    low = next(c for c in data["corruptions"] if c["name"] == "low_light")
    assert low["severities"]["gain"] == [0.330, 0.130, 0.045] and low["direction"] == "decrease"


# --- corrupt ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("suite, extra", [("aegis-v1", SUITE_V1), ("aegis-v2", UNIT)])
def test_corrupt_writes_the_engine_output_and_its_hash(image_dir, tmp_path, suite, extra):
    from aegis_data.engine.scale import Scale

    out = tmp_path / "sub" / "rain.png"
    result = runner.invoke(
        app,
        [
            "corrupt",
            str(image_dir / "alpha.png"),
            "--corruption",
            "rain_streaks",
            "--severity",
            "3",
            "--out",
            str(out),
            *extra,
        ],
    )
    assert result.exit_code == 0, result.output
    scale = Scale("object", 40.0) if suite == "aegis-v2" else None
    expected = apply_corruption(
        read_rgb(image_dir / "alpha.png"), "rain_streaks", 3, "alpha", config=load_config(suite), scale=scale
    )
    np.testing.assert_array_equal(read_rgb(out), expected)
    assert pixel_sha256(expected) in result.stdout and "rain.png" in result.stdout
    assert [p.name for p in out.parent.iterdir()] == ["rain.png"]  # no temp file left behind


def test_corrupt_image_id_keys_the_draws(image_dir, tmp_path):
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    args = ["corrupt", str(image_dir / "alpha.png"), "-c", "water_glare", "-s", "2", *SUITE_V1]
    assert runner.invoke(app, args + ["--out", str(a)]).exit_code == 0
    assert runner.invoke(app, args + ["--out", str(b), "--image-id", "other"]).exit_code == 0
    assert not np.array_equal(read_rgb(a), read_rgb(b))
    np.testing.assert_array_equal(
        read_rgb(b), apply_corruption(read_rgb(image_dir / "alpha.png"), "water_glare", 2, "other", config=V1)
    )


@pytest.mark.parametrize(
    "case, extra, fragments",
    [
        ("missing", ["-c", "low_light", "-s", "1"], ["image not found", "nope.png"]),
        ("undecodable", ["-c", "low_light", "-s", "1"], ["cannot decode image"]),
        ("unknown", ["-c", "snow", "-s", "1"], ["unknown corruption 'snow'", "water_glare"]),
        ("severity4", ["-c", "low_light", "-s", "4"], ["--severity must be 1, 2 or 3, got 4"]),
        ("severity0", ["-c", "low_light", "-s", "0"], ["got 0"]),
    ],
)
def test_corrupt_bad_input_is_one_line(image_dir, tmp_path, case, extra, fragments):
    src = image_dir / "alpha.png"
    if case == "missing":
        src = tmp_path / "nope.png"
    elif case == "undecodable":
        src = tmp_path / "broken.jpg"
        src.write_bytes(b"\xff\xd8\xff\xe0 definitely not a jpeg")
    out = tmp_path / "out.png"
    result = runner.invoke(app, ["corrupt", str(src), *extra, *UNIT, "--out", str(out)])
    assert_one_line_error(result, *fragments)
    assert not out.exists()


def test_corrupt_refuses_a_lossy_output(image_dir, tmp_path):
    result = runner.invoke(
        app,
        [
            "corrupt",
            str(image_dir / "alpha.png"),
            "-c",
            "low_light",
            "-s",
            "1",
            *UNIT,
            "--out",
            str(tmp_path / "x.jpg"),
        ],
    )
    assert_one_line_error(result, "must be a .png")


# --- grid ------------------------------------------------------------------------------------------------
def test_grid_writes_a_labelled_sheet(image_dir, tmp_path):
    out = tmp_path / "grid.png"
    result = runner.invoke(app, ["grid", str(image_dir / "alpha.png"), "--out", str(out), "--width", "600", *UNIT])
    assert result.exit_code == 0, result.output
    sheet = read_rgb(out)
    assert sheet.shape[1] == 600 and sheet.shape[0] > 10 * 100  # 1 clean row + 9 corruption rows
    assert f"600x{sheet.shape[0]}" in result.stdout


@pytest.mark.parametrize("case", ["missing", "narrow", "lossy"])
def test_grid_bad_input_is_one_line(image_dir, tmp_path, case):
    src = image_dir / "alpha.png" if case != "missing" else tmp_path / "gone.png"
    out = tmp_path / ("grid.jpg" if case == "lossy" else "grid.png")
    width = "100" if case == "narrow" else "600"
    result = runner.invoke(app, ["grid", str(src), "--out", str(out), "--width", width, *UNIT])
    frag = {"missing": "image not found", "narrow": "--width must be at least 480", "lossy": "must be a .png"}[case]
    assert_one_line_error(result, frag)
    assert not out.exists()


# --- calibrate -------------------------------------------------------------------------------------------
def test_calibrate_folder_passes_and_writes_json(image_dir, tmp_path):
    js = tmp_path / "cal.json"
    result = runner.invoke(app, ["calibrate", str(image_dir), "--json", str(js), *SUITE_V1], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    assert "✓" in result.stdout and "✗" not in result.stdout
    data = json.loads(js.read_text())
    assert data["n_images"] == 2 and data["violations"] == []
    assert len(data["rows"]) == 27 and {r["n"] for r in data["rows"]} == {2}


def test_calibrate_subset_and_limit(image_dir, tmp_path):
    js = tmp_path / "cal.json"
    result = runner.invoke(
        app,
        [
            "calibrate",
            str(image_dir),
            "-c",
            "low_light,smoke_haze",
            "-c",
            "fire_warm_tint",
            "--limit",
            "1",
            "--json",
            str(js),
            *SUITE_V1,
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(js.read_text())
    assert data["n_images"] == 1
    assert [r["condition"] for r in data["rows"]][::3] == ["low_light_s1", "smoke_haze_s1", "fire_warm_tint_s1"]


def _seal(root: Path, conditions: list[str]) -> None:
    """A sealed aegis-v1 manifest naming no files: calibration reads a split's suite and unit through the sealed
    reader, which checks the manifest and not the files (``aegis verify`` does that)."""
    root.mkdir(parents=True, exist_ok=True)
    manifest = build_manifest(
        dataset="fixture",
        source={},
        suite=V1.suite,
        config_hash=V1.config_hash,
        seed=V1.seed,
        conditions=["clean", *conditions],
        splits={"test": 2},
        entries=[],
    )
    write_manifest(root / "manifest.json", manifest)


def _split(root: Path, conditions: dict[str, callable]) -> Path:
    """A minimal frozen-split layout: manifest + test/clean + the given conditions (condition -> fn(img, stem))."""
    root.mkdir(parents=True, exist_ok=True)
    _seal(root, [])
    for phase, stem in ((0, "img_a"), (5, "img_b")):
        img = frame(phase=phase)
        write_png_atomic(root / "test" / "clean" / f"{stem}.png", img)
        for cond, fn in conditions.items():
            write_png_atomic(root / "test" / cond / f"{stem}.png", fn(img, stem))
    return root


def test_calibrate_split_reads_conditions_from_disk_and_skips_absent(tmp_path):
    conds = {
        f"low_light_s{s}": (lambda img, stem, s=s: apply_corruption(img, "low_light", s, stem, config=V1))
        for s in (1, 3)
    }
    root = _split(tmp_path / "split", conds)
    js = tmp_path / "cal.json"
    result = runner.invoke(app, ["calibrate", str(root), "-c", "low_light", "--json", str(js)])
    assert result.exit_code == 0, result.output
    rows = json.loads(js.read_text())["rows"]
    assert [r["n"] for r in rows] == [2, 0, 2]


def test_calibrate_split_fails_on_a_flat_ladder(tmp_path):
    # Every "corrupted" file is the clean image: nothing moves, so the ladder is not monotone.
    conds = {f"smoke_haze_s{s}": (lambda img, stem: img) for s in (1, 2, 3)}
    root = _split(tmp_path / "split", conds)
    result = runner.invoke(app, ["calibrate", str(root), "-c", "smoke_haze"])
    assert result.exit_code == 1
    assert "✗" in result.stdout
    assert_one_line_error(result, "not strictly monotone", "smoke_haze")


@pytest.mark.parametrize("case", ["missing", "empty", "unknown", "limit0", "no_clean"])
def test_calibrate_bad_input_is_one_line(image_dir, tmp_path, case):
    path, extra, frag = image_dir, [], ""
    if case == "missing":
        path, frag = tmp_path / "nowhere", "path not found"
    elif case == "empty":
        path, frag = tmp_path, "no images in"
    elif case == "unknown":
        extra, frag = ["-c", "hail"], "unknown corruption 'hail'"
    elif case == "limit0":
        extra, frag = ["--limit", "0"], "--limit must be at least 1, got 0"
    elif case == "no_clean":
        _seal(tmp_path, [])
        path, frag = tmp_path, "no test/clean folder"
    # A folder of images under the default suite needs a person unit; a split takes none (its manifest fixes it).
    result = runner.invoke(app, ["calibrate", str(path), *extra, *([] if case == "no_clean" else UNIT)])
    assert_one_line_error(result, frag)
