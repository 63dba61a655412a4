"""``aegis baseline sweep``: val → frozen threshold (once) → 28 conditions → score; byte-identical re-runs."""

from __future__ import annotations

import hashlib
import json

import pytest
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.engine.config import load_config
from aegis_data.errors import AegisError
from aegis_eval.protocols.threshold import read_threshold_file
from aegis_eval.runners.predict import PredictSettings
from aegis_eval.runners.sweep import run_sweep
from tests.eval.runners.test_runners_fixtures import make_split

runner = CliRunner()
YOLO = dict(model="yolo11", weights="yolo11n.yaml", imgsz=64, max_det=10, batch=8, score_floor=0.0, device="cpu")


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    return make_split(tmp_path_factory.mktemp("split"), n_test=3, n_val=3)


def test_sweep_twice_gives_identical_bytes_and_reuses_the_threshold(split, tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    args = [
        "baseline",
        "sweep",
        "--split-dir",
        str(split),
        "--model",
        "yolo11",
        "--weights",
        "yolo11n.yaml",
        "--imgsz",
        "64",
        "--max-det",
        "10",
        "--score-floor",
        "0",
        "--device",
        "cpu",
        "--bootstrap",
        "20",
    ]
    result = runner.invoke(app, [*args, "--out-dir", str(first)])
    assert result.exit_code == 0, result.output
    assert "frozen" in result.stderr and "score.json" in result.stdout
    run_sweep(PredictSettings(**YOLO), split, second, bootstrap=20)
    conditions = load_config().conditions()
    for cond in conditions:
        a = (first / "predictions" / f"{cond}.json").read_bytes()
        assert a == (second / "predictions" / f"{cond}.json").read_bytes(), cond
        assert len(json.loads(a)) > 0
    assert (first / "val" / "clean.json").read_bytes() == (second / "val" / "clean.json").read_bytes()
    assert read_threshold_file(first / "threshold.json")[0] == read_threshold_file(second / "threshold.json")[0]
    score = json.loads((first / "score.json").read_text())
    assert score["schema"] == "aegis-score/1" and list(score["conditions"]) == conditions
    assert score["provenance"]["bootstrap"] == 20 and (first / "score.csv").is_file()
    # the samples file beside score.json, for paired differences with other models (aegis rank, the report)
    samples = (first / "score.samples.npz").read_bytes()
    assert hashlib.sha256(samples).hexdigest() == score["provenance"]["samples_sha256"]
    # Re-run in place: everything is resumed, the threshold file is reused byte for byte.
    threshold_bytes = (first / "threshold.json").read_bytes()
    again = runner.invoke(app, [*args, "--out-dir", str(first)])
    assert again.exit_code == 0, again.output
    assert "reused" in again.stderr and again.stderr.count("skipped") == 29
    assert (first / "threshold.json").read_bytes() == threshold_bytes


def _count_detector_loads(monkeypatch) -> list:
    from aegis_eval.runners import predict as predict_mod

    loads: list = []
    real = predict_mod.load_detector
    monkeypatch.setattr(predict_mod, "load_detector", lambda *a, **k: loads.append(a) or real(*a, **k))
    return loads


def test_sweep_refuses_a_threshold_frozen_on_other_inputs(split, tmp_path, monkeypatch):
    out = tmp_path / "r"
    loads = _count_detector_loads(monkeypatch)
    run_sweep(PredictSettings(**YOLO), split, out, bootstrap=5, conditions="clean")
    assert len(loads) == 1, "one detector shared by the val and test stages"
    run_sweep(PredictSettings(**YOLO), split, out, bootstrap=5, conditions="clean")
    assert len(loads) == 1, "a fully resumed sweep loads no model"
    doc = json.loads((out / "threshold.json").read_text())
    doc["predictions"]["sha256"] = "0" * 64  # as if frozen on other validation predictions
    (out / "threshold.json").write_text(json.dumps(doc))
    with pytest.raises(AegisError, match="frozen on different inputs.*`force`"):
        run_sweep(PredictSettings(**YOLO), split, out, bootstrap=5, conditions="clean")
    result = run_sweep(PredictSettings(**YOLO), split, out, bootstrap=5, conditions="clean", force=True)
    assert list(result["conditions"]) == ["clean"]
    assert json.loads((out / "threshold.json").read_text())["predictions"]["sha256"] != "0" * 64


def test_sweep_on_a_split_written_by_build_splits(tmp_path):
    from aegis_data.sources import load_source
    from aegis_data.split.build import build_splits

    root = tmp_path / "synthetic"
    build_splits(load_source("synthetic", n=6, size="128x96"), root, workers=1)
    out = tmp_path / "results"
    result = runner.invoke(
        app,
        [
            "baseline",
            "sweep",
            "--split-dir",
            str(root),
            "--out-dir",
            str(out),
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
            "--bootstrap",
            "10",
            "--label",
            "frcnn-random",
        ],
    )
    assert result.exit_code == 0, result.output
    score = json.loads((out / "score.json").read_text())
    assert score["label"] == "frcnn-random" and score["dataset"] == "synthetic"
    assert len(score["conditions"]) == 28 and score["summary"]["missing_conditions"] == []
    assert score["provenance"]["manifest_root_hash"] == json.loads((root / "manifest.json").read_text())["root_hash"]
    run = json.loads((out / "predictions" / "run.json").read_text())
    assert run["n_images"] == len(json.loads((root / "annotations" / "test.json").read_text())["images"])
