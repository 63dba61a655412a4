"""`aegis freeze-threshold` and `aegis score`: results, files written, warnings, and every error path
(one line on stderr, exit 1, no traceback)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.engine.config import load_config
from tests.conftest import assert_one_line_error

runner = CliRunner()


def gt_doc(n: int) -> dict:
    images = [
        {"id": i + 1, "file_name": f"f{i:03d}.png", "width": 200, "height": 200, "group": f"g{i // 2}"}
        for i in range(n)
    ]
    anns = [
        {"id": i + 1, "image_id": i + 1, "category_id": 1, "bbox": [10.0 + i, 20.0, 30.0, 50.0], "area": 1500.0}
        for i in range(n)
    ]
    return {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "person"}]}


def preds_doc(n: int, found: int, shift: float = 0.0) -> list[dict]:
    """Finds the first `found` people (score .9, boxes shifted by `shift` px), plus one false alarm per image."""
    out = [
        {"image_id": i + 1, "category_id": 1, "bbox": [10.0 + i + shift, 20.0, 30.0, 50.0], "score": 0.9}
        for i in range(found)
    ]
    out += [
        {"image_id": i + 1, "category_id": 1, "bbox": [150.0, 150.0, 20.0, 20.0], "score": 0.3 + 0.01 * i}
        for i in range(n)
    ]
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cli_scoring")
    split = root / "split"
    (split / "annotations").mkdir(parents=True)
    (split / "annotations" / "test.json").write_text(json.dumps(gt_doc(10)))
    (split / "annotations" / "val.json").write_text(json.dumps(gt_doc(8)))
    (split / "manifest.json").write_text(
        json.dumps({"dataset": "synthetic", "config_hash": load_config().config_hash, "root_hash": "1" * 64})
    )
    val = root / "val_preds.json"
    val.write_text(json.dumps(preds_doc(8, 7)))
    preds = root / "preds"
    preds.mkdir()
    (preds / "clean.json").write_text(json.dumps(preds_doc(10, 9)))
    (preds / "low_light_s1.json").write_text(json.dumps(preds_doc(10, 7, 1.0)))
    (preds / "low_light_s3.json").write_text(json.dumps(preds_doc(10, 3, 3.0)))
    (preds / "water_glare_s2.json").write_text(json.dumps(preds_doc(10, 8, 0.5)))
    return {"root": root, "split": split, "val": val, "preds": preds, "gt": split / "annotations" / "test.json"}


def test_console_script_starts():
    exe = Path(sys.executable).parent / "aegis"
    proc = subprocess.run([str(exe), "score", "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "--threshold-file" in proc.stdout and "--cluster-by" in proc.stdout


# --- freeze-threshold ---------------------------------------------------------------------------------------
def test_freeze_threshold_on_split_dir_writes_file(files, tmp_path):
    out = tmp_path / "threshold.json"
    result = runner.invoke(
        app, ["freeze-threshold", str(files["val"]), "--split-dir", str(files["split"]), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    # 7 TPs at .9, FPs at .30-.37: every grid value in (.37, .9] gives F1 = 2*1*(7/8)/(1+7/8); lowest is .38.
    assert doc["value"] == 0.38 and doc["rule"] == "max-f1"
    assert doc["gt"]["file"].endswith("val.json")
    assert "threshold 0.38 (max-f1)" in result.stdout and "P 1.000" in result.stdout and "R 0.875" in result.stdout


def test_freeze_threshold_rule_grid_and_edge_warning(files, tmp_path):
    out = tmp_path / "t.json"
    result = runner.invoke(
        app,
        [
            "freeze-threshold",
            str(files["val"]),
            "--split-dir",
            str(files["split"]),
            "--out",
            str(out),
            "--rule",
            "recall>=0.5",
            "--grid",
            "0.1,0.5,0.95",
        ],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["value"] == 0.5
    edge = runner.invoke(
        app,
        [
            "freeze-threshold",
            str(files["val"]),
            "--split-dir",
            str(files["split"]),
            "--out",
            str(out),
            "--grid",
            "0.5:0.9:0.2",
        ],
    )
    assert edge.exit_code == 0 and "[threshold_on_grid_edge]" in edge.stderr


@pytest.mark.parametrize(
    "extra, fragments",
    [
        (["--rule", "max-f9"], ("unknown threshold rule",)),
        (["--grid", "0:1"], ("cannot read threshold grid",)),
        (["--grid", "0.2,1.4"], ("must lie in [0, 1]",)),
        (["--rule", "recall>=1.0"], ("no grid threshold satisfies recall>=1",)),
    ],
)
def test_freeze_threshold_errors(files, tmp_path, extra, fragments):
    result = runner.invoke(
        app,
        [
            "freeze-threshold",
            str(files["val"]),
            "--split-dir",
            str(files["split"]),
            "--out",
            str(tmp_path / "t.json"),
            *extra,
        ],
    )
    assert_one_line_error(result, *fragments)
    assert not (tmp_path / "t.json").exists()


def test_freeze_threshold_input_errors(files, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('[{"image_id": 1, "category_id": 1, "bbox": [0, 0, -4, 4], "score": 0.5}]')
    assert_one_line_error(
        runner.invoke(app, ["freeze-threshold", str(bad), "--split-dir", str(files["split"])]), "[bbox_negative]"
    )
    assert_one_line_error(
        runner.invoke(app, ["freeze-threshold", str(tmp_path / "none.json"), "--split-dir", str(files["split"])]),
        "[not_found]",
    )
    assert_one_line_error(
        runner.invoke(app, ["freeze-threshold", str(files["val"]), "--split-dir", str(tmp_path)]),
        "[gt_not_found]",
        "annotations/val.json",
    )


# --- score --------------------------------------------------------------------------------------------------
def test_score_sweep_prints_tables_and_writes_outputs(files, tmp_path):
    tfile = tmp_path / "threshold.json"
    assert (
        runner.invoke(
            app, ["freeze-threshold", str(files["val"]), "--split-dir", str(files["split"]), "--out", str(tfile)]
        ).exit_code
        == 0
    )
    jpath, cpath = tmp_path / "score.json", tmp_path / "score.csv"
    result = runner.invoke(
        app,
        [
            "score",
            str(files["preds"]),
            "--split-dir",
            str(files["split"]),
            "--threshold-file",
            str(tfile),
            "--bootstrap",
            "50",
            "--seed",
            "1",
            "--label",
            "toy",
            "--json",
            str(jpath),
            "--csv",
            str(cpath),
        ],
        env={"COLUMNS": "240"},
    )
    assert result.exit_code == 0, result.output
    for fragment in (
        "toy @ threshold 0.38",
        "clean",
        "low_light_s3",
        "recall by corruption and severity",
        "mPC",
        "rPC",
        "missing",
    ):
        assert fragment in result.stdout, fragment
    doc = json.loads(jpath.read_text())
    assert doc["label"] == "toy" and doc["threshold"]["rule"] == "max-f1" and doc["dataset"] == "synthetic"
    assert doc["conditions"]["clean"]["recall"] == 0.9 and doc["conditions"]["low_light_s3"]["recall"] == 0.3
    assert doc["conditions"]["low_light_s3"]["rel_drop"]["recall"] == pytest.approx(2 / 3)
    assert doc["provenance"]["bootstrap"] == 50 and doc["provenance"]["manifest_root_hash"] == "1" * 64
    assert len(cpath.read_text().splitlines()) == 1 + 4


def test_score_single_file_with_threshold_and_cluster(files):
    result = runner.invoke(
        app,
        [
            "score",
            str(files["preds"] / "clean.json"),
            "--split-dir",
            str(files["gt"]),
            "--threshold",
            "0.5",
            "--bootstrap",
            "20",
            "--cluster-by",
            "group",
        ],
        env={"COLUMNS": "240"},
    )
    assert result.exit_code == 0, result.output
    assert "clean @ threshold 0.5" in result.stdout
    assert "recall by corruption" not in result.stdout  # no sweep, no matrix


def test_score_warns_when_threshold_iou_differs(files, tmp_path):
    tfile = tmp_path / "t.json"
    assert (
        runner.invoke(
            app,
            [
                "freeze-threshold",
                str(files["val"]),
                "--split-dir",
                str(files["split"]),
                "--iou",
                "0.6",
                "--out",
                str(tfile),
            ],
        ).exit_code
        == 0
    )
    result = runner.invoke(
        app,
        [
            "score",
            str(files["preds"] / "clean.json"),
            "--split-dir",
            str(files["gt"]),
            "--threshold-file",
            str(tfile),
            "--bootstrap",
            "5",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "[iou_mismatch]" in result.stderr


def test_score_prints_loader_warnings(files, tmp_path):
    p = tmp_path / "clean.json"
    rows = preds_doc(10, 5)
    p.write_text(json.dumps(rows + rows[:2]))
    result = runner.invoke(
        app, ["score", str(p), "--split-dir", str(files["gt"]), "--threshold", "0.5", "--bootstrap", "10"]
    )
    assert result.exit_code == 0, result.output
    assert "clean: [duplicate_detection] 2 detections" in result.stderr


def test_score_errors(files, tmp_path):
    base = ["score", str(files["preds"]), "--split-dir", str(files["split"])]
    assert_one_line_error(runner.invoke(app, base), "exactly one")
    assert_one_line_error(
        runner.invoke(app, base + ["--threshold", "0.5", "--threshold-file", "t.json"]), "exactly one"
    )
    assert_one_line_error(runner.invoke(app, base + ["--threshold", "1.5"]), "threshold must be a number in [0, 1]")
    assert_one_line_error(
        runner.invoke(app, base + ["--threshold-file", str(tmp_path / "none.json")]), "[threshold_not_found]"
    )
    bad_t = tmp_path / "t.json"
    bad_t.write_text(json.dumps({"schema": "aegis-threshold/1", "value": 2}))
    assert_one_line_error(runner.invoke(app, base + ["--threshold-file", str(bad_t)]), "[threshold_value]")
    assert_one_line_error(
        runner.invoke(app, base + ["--threshold", "0.5", "--cluster-by", "flight"]), "[cluster_missing]", "'flight'"
    )
    assert_one_line_error(
        runner.invoke(app, base + ["--threshold", "0.5", "--bootstrap", "0"]),
        "--bootstrap must be an integer >= 1; got 0",
    )
    assert_one_line_error(runner.invoke(app, base + ["--threshold", "0.5", "--iou", "0"]), "--iou must be in (0, 1]")
    assert_one_line_error(
        runner.invoke(
            app, ["score", str(files["preds"]), "--split-dir", str(tmp_path / "x.json"), "--threshold", "0.5"]
        ),
        "[gt_not_found]",
    )
    assert_one_line_error(
        runner.invoke(app, ["score", str(tmp_path / "none"), "--split-dir", str(files["gt"]), "--threshold", "0.5"]),
        "[predictions_not_found]",
    )


@pytest.mark.parametrize(
    "content, code",
    [
        ('[{"image_id": 1', "[not_json]"),
        ('{"images": []}', "[wrong_type]"),
        ('[{"image_id": 1, "bbox": [0, 0, 1, 1], "score": 0.5}]', "[missing_key]"),
        ('[{"image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1], "score": 7}]', "[score_out_of_range]"),
        ('[{"image_id": 99, "category_id": 1, "bbox": [0, 0, 1, 1], "score": 0.5}]', "[image_id_unknown]"),
        ('[{"image_id": 1, "category_id": 4, "bbox": [0, 0, 1, 1], "score": 0.5}]', "[category_unknown]"),
        ('[{"image_id": 1, "category_id": 1, "bbox": [0, 0, Infinity, 1], "score": 0.5}]', "[json_nonfinite]"),
    ],
)
def test_score_prediction_findings(files, tmp_path, content, code):
    p = tmp_path / "clean.json"
    p.write_text(content)
    out = tmp_path / "score.json"
    result = runner.invoke(
        app, ["score", str(p), "--split-dir", str(files["gt"]), "--threshold", "0.5", "--json", str(out)]
    )
    assert_one_line_error(result, code)
    assert not out.exists()
