"""Disaster augmentation inside the reference trainers: the Ultralytics trainer subclass really loads training
images through the policy (counted), before tiling, and the policy hash is recorded; Faster R-CNN gets the same
option; runs cannot be resumed under another policy."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.augment.transform import DisasterAugment, load_policy
from aegis_data.engine.scale import Scale
from aegis_data.errors import AegisError
from aegis_data.files.imageio import read_rgb
from aegis_eval.runners.augment_hooks import AUGMENT_FILE, FrameAugmenter, augment_record_for_weights
from aegis_eval.runners.train import TrainSettings, tile_sources, train_baseline, write_yolo_dataset
from tests.eval.runners.test_runners_fixtures import make_split

runner = CliRunner()
UNIT = Scale("object", 20.0, "test")  # aegis-v2 policies take the training frames' person unit


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    return make_split(tmp_path_factory.mktemp("split"), n_test=1, n_val=2, n_train=4, conditions=["clean"])


@pytest.fixture
def counted(monkeypatch):
    """Every DisasterAugment.apply call: (frame shape, chosen condition, key)."""
    calls = []
    real = DisasterAugment.apply

    def spy(self, image, choice):
        calls.append((image.shape, choice.condition, choice.key))
        return real(self, image, choice)

    monkeypatch.setattr(DisasterAugment, "apply", spy)
    return calls


def test_ultralytics_train_with_augment_calls_the_transform_and_records_the_policy(split, tmp_path, counted):
    run = tmp_path / "run"
    result = runner.invoke(
        app,
        [
            "baseline",
            "train",
            "--split-dir",
            str(split),
            "--out-dir",
            str(run),
            "--model",
            "yolo11",
            "--weights",
            "yolo11n.yaml",
            "--epochs",
            "1",
            "--imgsz",
            "64",
            "--batch",
            "2",
            "--device",
            "cpu",
            "--augment",
            "all",
        ],
    )
    assert result.exit_code == 0, result.output
    policy = load_policy("all")
    assert f"augmentation: all [{policy.hash}]" in result.stdout
    # One fresh draw per image load (mosaic loads several per sample); all in the training key namespace, epoch 0.
    assert len(counted) >= 4
    assert all(key.startswith("aegis-train|0|0|") for _, _, key in counted)
    assert {key.rsplit("|", 1)[1] for _, _, key in counted} <= {"1", "2", "3", "4"}
    record = json.loads((run / AUGMENT_FILE).read_text())
    assert (record["name"], record["hash"], record["seed"]) == ("all", policy.hash, 0)
    assert yaml.safe_load((run / "config.yaml").read_text())["augment"]["hash"] == policy.hash
    assert augment_record_for_weights(run / "train" / "weights" / "best.pt")["hash"] == policy.hash


def test_clean_training_writes_no_augment_record(split, tmp_path, counted):
    run = tmp_path / "clean"
    settings = TrainSettings(model="yolo11", weights="yolo11n.yaml", epochs=1, imgsz=64, batch=2, device="cpu")
    train_baseline(settings, split, run)
    assert not counted and not (run / AUGMENT_FILE).exists()
    assert "augment" not in yaml.safe_load((run / "config.yaml").read_text())
    assert augment_record_for_weights(run / "train" / "weights" / "best.pt") is None
    # A clean run is not resumed (or silently re-labelled) under a policy.
    with pytest.raises(AegisError, match="without augmentation"):
        train_baseline(settings, split, run, augment=load_policy("all"))


def test_fasterrcnn_augment_option_and_no_resume_under_another_policy(split, tmp_path, counted):
    run = tmp_path / "frcnn"
    settings = TrainSettings(
        model="fasterrcnn", weights="none", arch="mobilenet_v3", epochs=1, imgsz=64, batch=2, device="cpu"
    )
    result = train_baseline(settings, split, run, augment=load_policy("blur-only"))
    assert result["augment"]["name"] == "blur-only"
    assert len(counted) == 4 and {c for _, c, _ in counted} <= {
        "clean",
        "motion_blur_s1",
        "motion_blur_s2",
        "motion_blur_s3",
    }
    import torch

    # The checkpoint records what the run folder records: the policy and its seed.
    assert torch.load(result["best"], map_location="cpu", weights_only=False)["augment"] == json.loads(
        (run / "augment.json").read_text()
    )
    with pytest.raises(AegisError, match="blur-only"):
        train_baseline(settings, split, run, augment=load_policy("all"))
    with pytest.raises(AegisError, match="without `augment`"):
        train_baseline(settings, split, run)


def test_tiles_are_cut_from_the_augmented_full_frame(tmp_path):
    root = make_split(tmp_path / "big", n_test=1, n_val=1, n_train=1, size=(1300, 1100), conditions=["clean"])
    write_yolo_dataset(root, tmp_path / "data", tile=1024, overlap=256)
    sources = tile_sources(root, tile=1024, overlap=256)
    assert sorted(sources) == sorted(p.stem for p in (tmp_path / "data" / "images" / "train").glob("*.png"))
    aug = DisasterAugment("all", seed=0, scale=UNIT)
    frames = FrameAugmenter(aug, sources)
    epoch = next(e for e in range(20) if aug.choose(e, 1).corruption not in (None, "turbidity_cast"))
    full = aug.apply(read_rgb(root / "train" / "clean" / "train_000.png"), aug.choose(epoch, 1))
    for name, src in sources.items():
        t = src.tile
        assert np.array_equal(frames.tile(name, epoch), full[t.y0 : t.y0 + t.height, t.x0 : t.x0 + t.width])
    with pytest.raises(AegisError, match="not a frame or tile"):
        frames.tile("nope", 0)


def test_unknown_policy_on_the_command_line_is_one_line(split, tmp_path):
    result = runner.invoke(
        app,
        [
            "baseline",
            "train",
            "--split-dir",
            str(split),
            "--out-dir",
            str(tmp_path / "r"),
            "--model",
            "yolo11",
            "--weights",
            "yolo11n.yaml",
            "--augment",
            "nope",
        ],
    )
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "unknown augmentation policy" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_ablate_two_policies_writes_score_jsons_and_a_report_table(tmp_path):
    root = make_split(tmp_path / "split", n_test=2, n_val=2, n_train=3)  # every condition of the grid
    out = tmp_path / "ablation"
    result = runner.invoke(
        app,
        [
            "baseline",
            "ablate",
            "--split-dir",
            str(root),
            "--out-dir",
            str(out),
            "--model",
            "yolo11",
            "--weights",
            "yolo11n.yaml",
            "--epochs",
            "1",
            "--imgsz",
            "64",
            "--batch",
            "2",
            "--device",
            "cpu",
            "--bootstrap",
            "20",
            "--policies",
            "loo-flood,blur-only",
        ],
    )
    assert result.exit_code == 0, result.output
    scores = sorted(p.name for p in (out / "scores").glob("*.json"))
    assert scores == ["blur-only.json", "clean.json", "loo-flood.json"]
    loo = json.loads((out / "scores" / "loo-flood.json").read_text())
    assert loo["schema"] == "aegis-score/1" and loo["label"] == "yolo11/loo-flood"
    assert loo["provenance"]["augment"]["hash"] == load_policy("loo-flood").hash
    assert len(loo["conditions"]) == 28
    gains = loo["mitigation"]
    assert set(gains["unseen_conditions"]) == {
        f"{c}_s{s}" for c in ("water_glare", "turbidity_cast", "inundation") for s in (1, 2, 3)
    }
    assert len(gains["seen_conditions"]) == 18 and gains["baseline_label"] == "yolo11/clean"
    # Each trained model froze its own threshold on clean val.
    record = json.loads((out / "ablation.json").read_text())
    for name in ("clean", "loo-flood", "blur-only"):
        frozen = json.loads((out / name / "results" / "threshold.json").read_text())
        assert record["runs"][name]["threshold"] == frozen["value"]
    assert gains["thresholds"]["policy"] == record["runs"]["loo-flood"]["threshold"]
    for g in (gains["mpc"]["recall"], gains["unseen"]["recall"], gains["conditions"]["clean"]["recall"]):
        lo, hi = g["ci"]
        assert lo is not None and lo <= hi
    clean = json.loads((out / "scores" / "clean.json").read_text())
    assert clean["provenance"]["augment"] is None and "mitigation" not in clean

    report = runner.invoke(
        app,
        [
            "report",
            *(str(out / "scores" / s) for s in scores),
            "--out-dir",
            str(tmp_path / "rep"),
            "--format",
            "md,html",
        ],
    )
    assert report.exit_code == 0, report.output
    md = (tmp_path / "rep" / "report.md").read_text()
    from aegis_eval.report.text import md_text

    for title in (
        "Mitigation: gain over the clean-trained model (recall)",
        "seen vs unseen",
        "side effects on untrained conditions",
        "per condition (* = not trained on)",
    ):
        assert md_text(title) in md  # as Markdown text: the "*" escaped, so it can never start emphasis
    assert "| yolo11/loo-flood |" in md and "| yolo11/blur-only |" in md
    assert "Mitigation: seen vs unseen" in (tmp_path / "rep" / "report.html").read_text()
    # Without ablation results the report has no mitigation section.
    plain = runner.invoke(
        app, ["report", str(out / "scores" / "clean.json"), "--out-dir", str(tmp_path / "rep0"), "--format", "md"]
    )
    assert plain.exit_code == 0 and "Mitigation" not in (tmp_path / "rep0" / "report.md").read_text()


def test_paired_gain_of_a_model_against_itself_is_zero(tmp_path):
    from aegis_eval.metrics.bootstrap import BootstrapOptions
    from aegis_eval.protocols.mitigation import paired_gains, score_model
    from aegis_eval.protocols.predictions import detections_from_results, load_ground_truth

    root = make_split(tmp_path / "s", n_test=4, n_val=1, conditions=["clean", "low_light_s3"])
    gt = load_ground_truth(root, "test")
    rows = [
        {"image_id": int(gt.image_ids[r]), "category_id": 1, "bbox": [float(v) for v in box], "score": 0.9}
        for r, box in zip(gt.box_image, gt.boxes)
    ]  # every GT box found at score 0.9
    dets = detections_from_results(rows, gt)
    preds = {"clean": dets, "low_light_s3": dets}
    g = paired_gains(
        score_model(gt, preds, 0.5, bootstrap=BootstrapOptions(50, 0)),
        score_model(gt, preds, 0.5, bootstrap=BootstrapOptions(50, 0)),
        trained=["clean"],
    )
    assert g["conditions"]["low_light_s3"]["recall"]["gain"] == 0.0
    assert g["mpc"]["recall"]["ci"] == [0.0, 0.0] and g["unseen_conditions"] == ["low_light_s3"]
    assert g["side_effects"]["recall"]["n_worse"] == 0
    # A "policy" whose threshold is above every score finds nothing: recall 1 -> 0 on every resample.
    g = paired_gains(
        score_model(gt, preds, 0.5, bootstrap=BootstrapOptions(50, 0)),
        score_model(gt, preds, 0.95, bootstrap=BootstrapOptions(50, 0)),
        trained=["clean"],
    )
    clean = g["conditions"]["clean"]["recall"]
    assert (clean["baseline"], clean["policy"], clean["gain"], clean["ci"]) == (1.0, 0.0, -1.0, [-1.0, -1.0])
    side = g["side_effects"]["recall"]
    assert side["n_worse"] == 1 and side["worst"] == {"condition": "low_light_s3", "gain": -1.0}


@pytest.mark.parametrize(
    "policies, fragment",
    [
        ("all,all", "given twice"),
        ("nope", "unknown augmentation policy"),
        (" , ", "no policies given"),
    ],
)
def test_ablate_policy_errors_are_one_line(split, tmp_path, policies, fragment):
    result = runner.invoke(
        app,
        [
            "baseline",
            "ablate",
            "--split-dir",
            str(split),
            "--out-dir",
            str(tmp_path / "a"),
            "--model",
            "yolo11",
            "--weights",
            "yolo11n.yaml",
            "--policies",
            policies,
        ],
    )
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert fragment in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "a").exists()


def test_a_policy_named_clean_is_refused(tmp_path):
    from aegis_eval.runners.ablate import parse_policies

    path = tmp_path / "clean.yaml"
    path.write_text("name: clean\np_clean: 0.5\n")
    with pytest.raises(AegisError, match="baseline's name"):
        parse_policies([str(path)])
