"""``aegis baseline predict``: 28 COCO results files the shared scorer accepts, run.json, resume, errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.engine.config import load_config
from aegis_eval.protocols.predictions import load_ground_truth, load_predictions
from tests.conftest import assert_one_line_error as _one_line_error
from tests.eval.runners.test_runners_fixtures import make_split

runner = CliRunner()
FAST = [
    "--model",
    "fasterrcnn",
    "--weights",
    "none",
    "--arch",
    "mobilenet_v3",
    "--imgsz",
    "64",
    "--max-det",
    "20",
    "--device",
    "cpu",
    "--batch",
    "4",
]


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    return make_split(tmp_path_factory.mktemp("split"), n_test=3, n_val=2)


def test_predict_all_28_conditions_then_resume(split, tmp_path):
    out = tmp_path / "preds"
    result = runner.invoke(app, ["baseline", "predict", "--split-dir", str(split), "--out-dir", str(out), *FAST])
    assert result.exit_code == 0, result.output
    conditions = load_config().conditions()
    assert len(conditions) == 28
    files = sorted(p.stem for p in out.glob("*.json") if p.name != "run.json")
    assert files == sorted(conditions)
    gt = load_ground_truth(split, "test")
    for cond in conditions:
        dets = load_predictions(out / f"{cond}.json", gt)  # the shared scorer's validating loader
        assert dets.n > 0 and set(dets.det_image.tolist()) <= set(range(gt.n_images))
        rows = json.loads((out / f"{cond}.json").read_text())
        assert {r["image_id"] for r in rows} <= set(gt.image_ids.tolist())
        assert all(r["category_id"] == 1 and len(r["bbox"]) == 4 for r in rows)
    run = json.loads((out / "run.json").read_text())
    assert run["n_images"] == 3 and run["device"] == "cpu" and run["weights"]["kind"] == "random"
    assert run["detector"]["arch"] == "mobilenet_v3" and run["versions"]["torch"]
    assert all(
        run["conditions"][c]["status"] == "complete" and run["conditions"][c]["images_per_s"] > 0 for c in conditions
    )
    before = {c: (out / f"{c}.json").stat().st_mtime_ns for c in conditions}
    again = runner.invoke(app, ["baseline", "predict", "--split-dir", str(split), "--out-dir", str(out), *FAST])
    assert again.exit_code == 0 and again.stderr.count("skipped") == 28
    assert before == {c: (out / f"{c}.json").stat().st_mtime_ns for c in conditions}
    # A changed setting makes the finished files stale: those conditions are predicted again.
    changed = runner.invoke(
        app,
        [
            "baseline",
            "predict",
            "--split-dir",
            str(split),
            "--out-dir",
            str(out),
            *FAST,
            "--conditions",
            "clean,low_light_s3",
            "--max-det",
            "5",
        ],
    )
    assert changed.exit_code == 0 and changed.stderr.count("done") == 2
    rows = json.loads((out / "clean.json").read_text())
    assert max(sum(r["image_id"] == i for r in rows) for i in (1, 2, 3)) <= 5


def test_predict_force_and_limit_are_deterministic(split, tmp_path):
    out = tmp_path / "p"
    args = [
        "baseline",
        "predict",
        "--split-dir",
        str(split),
        "--out-dir",
        str(out),
        *FAST,
        "--conditions",
        "clean",
        "--limit",
        "2",
        "--no-tile",
    ]
    assert runner.invoke(app, args).exit_code == 0
    first = (out / "clean.json").read_bytes()
    assert {r["image_id"] for r in json.loads(first)} == {1, 2}
    forced = runner.invoke(app, [*args, "--force"])
    assert forced.exit_code == 0 and "done" in forced.stderr
    assert (out / "clean.json").read_bytes() == first


def test_predict_val_split(split, tmp_path):
    out = tmp_path / "val"
    result = runner.invoke(
        app, ["baseline", "predict", "--split-dir", str(split), "--out-dir", str(out), *FAST, "--split-name", "val"]
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["clean.json", "run.json"]


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--model", "yolo11", "--weights", "missing/dir/w.pt"], "weights file not found: missing/dir/w.pt"),
        (["--model", "yolo11", "--weights", "yolo11m.pt"], "pass --allow-download"),
        (["--model", "fasterrcnn"], "no weights given for fasterrcnn"),
        (["--weights", "none"], "no model given"),
        (["--model", "fasterrcnn", "--weights", "none", "--conditions", "fog_s1"], "unknown condition 'fog_s1'"),
        (["--model", "fasterrcnn", "--weights", "none", "--score-floor", "2"], "score_floor=2.0 is invalid"),
        (["--model", "fasterrcnn", "--weights", "none", "--device", "tpu"], "unknown device 'tpu'"),
    ],
)
def test_predict_errors_are_one_line(split, tmp_path, extra, needle):
    result = runner.invoke(
        app, ["baseline", "predict", "--split-dir", str(split), "--out-dir", str(tmp_path / "o"), *extra]
    )
    _one_line_error(result, needle)


def test_predict_rejects_a_folder_that_is_not_a_split(tmp_path):
    (tmp_path / "plain").mkdir()
    result = runner.invoke(
        app, ["baseline", "predict", "--split-dir", str(tmp_path / "plain"), "--out-dir", str(tmp_path / "o"), *FAST]
    )
    _one_line_error(result, "not a split folder")


def test_predict_config_with_unknown_key(split, tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("model: fasterrcnn\nweights: none\nmax_dets: 10\n")
    result = runner.invoke(
        app, ["baseline", "predict", "--split-dir", str(split), "--out-dir", str(tmp_path / "o"), "--config", str(cfg)]
    )
    _one_line_error(result, "did you mean 'max_det'?")


def test_baseline_help_lists_the_commands():
    result = runner.invoke(app, ["baseline", "--help"])
    assert result.exit_code == 0
    assert all(cmd in result.stdout for cmd in ("predict", "train", "sweep"))


def test_predict_refuses_frames_that_do_not_match_the_gt(tmp_path):
    root = make_split(tmp_path / "s", n_test=1, n_val=1, conditions=["clean"])
    gt_path = root / "annotations" / "test.json"
    gt = json.loads(gt_path.read_text())
    gt["images"][0]["width"] = 500
    gt_path.write_text(json.dumps(gt))
    result = runner.invoke(
        app, ["baseline", "predict", "--split-dir", str(root), "--out-dir", str(tmp_path / "o"), *FAST]
    )
    _one_line_error(result, "but the GT says 500x80")
