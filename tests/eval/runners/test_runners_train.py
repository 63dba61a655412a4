"""``aegis baseline train``: YOLO dataset from COCO GT (tiling), Ultralytics and Faster R-CNN fine-tuning,
config copy, explicit optimizer honoured, resume."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import yaml
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.errors import AegisError
from aegis_eval.runners import load_detector
from aegis_eval.runners.train import TrainSettings, epoch_order, read_yolo_folder, train_baseline, write_yolo_dataset
from tests.eval.runners.test_runners_fixtures import make_split

runner = CliRunner()


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    return make_split(tmp_path_factory.mktemp("split"), n_test=1, n_val=2, n_train=4, conditions=["clean"])


def test_yolo_dataset_tiles_large_frames(tmp_path):
    root = make_split(tmp_path / "big", n_test=1, n_val=1, n_train=1, size=(1300, 1100), conditions=["clean"])
    data_yaml = write_yolo_dataset(root, tmp_path / "data", tile=1024, overlap=256)
    spec = yaml.safe_load(data_yaml.read_text())
    assert spec["names"] == {0: "person"} and spec["train"].startswith("/") and spec["val"].startswith("/")
    items = read_yolo_folder(tmp_path / "data" / "images" / "train")
    assert [p.name for p, _ in items] == [
        "train_000_x0_y0.png",
        "train_000_x0_y76.png",
        "train_000_x276_y0.png",
        "train_000_x276_y76.png",
    ]
    # The fixture's two people sit near the top-left: every tile that shows them whole carries both.
    assert len(items[0][1]) == 2
    for _, boxes in items:
        assert np.all(boxes >= 0) and np.all(boxes <= 1024)
    again = write_yolo_dataset(root, tmp_path / "data", tile=1024, overlap=256)
    assert again == data_yaml
    # Other tiling: the old tiles are removed, not mixed with the new frames.
    write_yolo_dataset(root, tmp_path / "data", tile=2048, overlap=256)
    assert [p.name for p, _ in read_yolo_folder(tmp_path / "data" / "images" / "train")] == ["train_000.png"]


def test_train_without_train_split_is_a_clear_error(tmp_path):
    root = make_split(tmp_path / "s", n_test=1, n_val=1, conditions=["clean"])
    result = runner.invoke(
        app,
        [
            "baseline",
            "train",
            "--split-dir",
            str(root),
            "--out-dir",
            str(tmp_path / "run"),
            "--model",
            "fasterrcnn",
            "--weights",
            "none",
            "--device",
            "cpu",
        ],
    )
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "--with-train" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_epoch_order_is_a_keyed_permutation():
    a = epoch_order(50, seed=0, epoch=0)
    assert sorted(a) == list(range(50)) and a == epoch_order(50, seed=0, epoch=0)
    assert a != epoch_order(50, seed=0, epoch=1) and a != epoch_order(50, seed=1, epoch=0)


def test_yolo_train_honours_explicit_optimizer_and_copies_config(split, tmp_path):
    run = tmp_path / "run"
    settings = TrainSettings(
        model="yolo11",
        weights="yolo11n.yaml",
        epochs=1,
        imgsz=64,
        batch=4,
        device="cpu",
        optimizer="AdamW",
        lr0=0.0123,
        seed=3,
    )
    result = train_baseline(settings, split, run)
    assert result["status"] == "trained"
    assert (run / "train" / "weights" / "best.pt").is_file() and (run / "train" / "weights" / "last.pt").is_file()
    args = yaml.safe_load((run / "train" / "args.yaml").read_text())
    assert (args["optimizer"], args["lr0"], args["seed"], args["deterministic"], args["workers"], args["amp"]) == (
        "AdamW",
        0.0123,
        3,
        True,
        0,
        False,
    )
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    assert cfg["settings"]["lr0"] == 0.0123 and cfg["settings"]["optimizer"] == "AdamW"
    assert cfg["versions"]["ultralytics"] and cfg["device_resolved"] == "cpu"
    # A finished run is not trained again; its weights load as a one-class detector.
    assert train_baseline(settings, split, run)["status"] == "already finished"
    det = load_detector("yolo11", result["best"], "cpu", imgsz=64)
    assert det.net.names == {0: "person"} and det.classes is None


def test_fasterrcnn_train_one_epoch_then_resume(split, tmp_path):
    run = tmp_path / "frcnn"
    base = [
        "baseline",
        "train",
        "--split-dir",
        str(split),
        "--out-dir",
        str(run),
        "--model",
        "fasterrcnn",
        "--weights",
        "none",
        "--arch",
        "mobilenet_v3",
        "--imgsz",
        "64",
        "--batch",
        "2",
        "--device",
        "cpu",
        "--lr0",
        "0.005",
    ]
    first = runner.invoke(app, [*base, "--epochs", "1"])
    assert first.exit_code == 0, first.output
    assert str(run / "best.pt") in first.stdout.replace("\n", "")
    last = torch.load(run / "last.pt", weights_only=True)
    assert last["epoch"] == 1 and last["optimizer"]["state"] and last["arch"] == "mobilenet_v3"
    assert math.isfinite(last["history"][0]["loss"]) and 0.0 <= last["history"][0]["val_ap50"] <= 1.0
    assert (run / "best.pt").is_file() and yaml.safe_load((run / "config.yaml").read_text())["settings"]["lr0"] == 0.005
    second = runner.invoke(app, [*base, "--epochs", "2"])
    assert second.exit_code == 0, second.output
    resumed = torch.load(run / "last.pt", weights_only=True)
    assert resumed["epoch"] == 2 and len(resumed["history"]) == 2
    assert resumed["history"][0] == last["history"][0]  # epoch 1 was not redone
    assert "epoch 2/2" in second.stderr and "epoch 1/2" not in second.stderr
    det = load_detector("fasterrcnn", str(run / "best.pt"), "cpu")  # arch and imgsz come from the checkpoint
    assert det.arch == "mobilenet_v3" and det.imgsz == 64


def test_train_settings_validation():
    with pytest.raises(AegisError, match="optimizer='auto' is invalid"):
        TrainSettings(model="yolo11", weights="yolo11n.yaml", optimizer="auto").validate()
    with pytest.raises(AegisError, match="lr0=0.0 is invalid"):
        TrainSettings(model="yolo11", weights="yolo11n.yaml", lr0=0.0).validate()


def test_validation_ap50_uses_the_real_evaluator(split):
    import json

    from aegis_eval.protocols.crosscheck import pycocotools_ap
    from aegis_eval.protocols.predictions import detections_from_results, load_ground_truth
    from aegis_eval.runners.train import coco_ap50

    gt_path = split / "annotations" / "val.json"
    gt = json.loads(gt_path.read_text())
    perfect = [
        {"image_id": a["image_id"], "category_id": 1, "bbox": a["bbox"], "score": 0.9} for a in gt["annotations"]
    ]
    assert coco_ap50(gt_path, perfect) == pytest.approx(1.0)
    # Half the people found, plus a confident false alarm: AP50 drops, and agrees with pycocotools.
    mixed = perfect[::2] + [{"image_id": 1, "category_id": 1, "bbox": [0.0, 0.0, 5.0, 5.0], "score": 0.95}]
    value = coco_ap50(gt_path, mixed)
    assert 0.0 < value < 1.0
    loaded = load_ground_truth(gt_path)
    assert value == pytest.approx(pycocotools_ap(loaded, detections_from_results(mixed, loaded))["map50"], abs=1e-12)
    assert coco_ap50(gt_path, []) == 0.0
