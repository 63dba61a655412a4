"""Mitigation with evidence: fine-tuning every model from one checkpoint (--init), several training seeds
(--seeds) with per-seed gains, and a combined interval that includes training noise (two-level bootstrap)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.augment.transform import load_policy
from aegis_data.errors import AegisError
from aegis_data.files.imageio import file_sha256
from aegis_eval.metrics.bootstrap import BootstrapOptions, resample_seeds
from aegis_eval.protocols.mitigation import combined_gains, paired_gains, score_model
from aegis_eval.protocols.predictions import detections_from_results, load_ground_truth
from aegis_eval.runners.ablate import init_record, parse_seeds
from aegis_eval.runners.train import TrainSettings, train_baseline
from tests.eval.runners.test_runners_fixtures import make_split

runner = CliRunner()
CONDS = ["clean", "low_light_s1", "low_light_s2", "low_light_s3"]


# --- the combined estimate ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """Models on one GT: ``found`` detects every person at score 0.9 in every condition, ``blind`` nothing."""
    root = make_split(tmp_path_factory.mktemp("gt"), n_test=6, n_val=1, conditions=CONDS)
    gt = load_ground_truth(root, "test")
    rows = [
        {"image_id": int(gt.image_ids[r]), "category_id": 1, "bbox": [float(v) for v in box], "score": 0.9}
        for r, box in zip(gt.box_image, gt.boxes)
    ]
    dets = detections_from_results(rows, gt)
    preds = {c: dets for c in CONDS}

    def model(threshold: float, b: int = 200):
        return score_model(gt, preds, threshold, bootstrap=BootstrapOptions(b, 0))

    return model


def test_resample_seeds_is_keyed_and_covers_every_seed():
    opts = BootstrapOptions(500, 3)
    draws = resample_seeds(3, opts)
    assert draws.shape == (500, 3) and draws.min() == 0 and draws.max() == 2
    assert np.array_equal(draws, resample_seeds(3, opts))
    assert not np.array_equal(draws, resample_seeds(3, BootstrapOptions(500, 4)))
    assert np.array_equal(resample_seeds(3, BootstrapOptions(1, 0)), [[0, 1, 2]])  # B = 1: the point estimate
    with pytest.raises(AegisError, match="training seeds"):
        resample_seeds(0, opts)


def test_combined_interval_includes_training_noise(scored):
    found, blind = scored(0.5), scored(0.95)  # 0.95 is above every score: recall 0
    trained = load_policy("low-light-s12").trained_conditions
    # Seed 0: the policy finds everyone where the clean model finds no one (+1); seed 1: no difference (0).
    pairs = [(0, blind, found), (1, found, found)]
    g = combined_gains(pairs, trained=trained)
    s3 = g["conditions"]["low_light_s3"]["recall"]
    assert [x["gain"] for x in s3["seeds"]] == [1.0, 0.0] and [x["seed"] for x in s3["seeds"]] == [0, 1]
    # Each seed's image-only interval has zero width: test images alone see no uncertainty at all ...
    assert [x["ci"] for x in s3["seeds"]] == [[1.0, 1.0], [0.0, 0.0]]
    # ... the combined one spans both training outcomes, because it resamples the seeds too.
    assert s3["gain"] == 0.5 and s3["ci"] == [0.0, 1.0]
    assert s3["seed_sd"] == pytest.approx(np.sqrt(0.5))
    # Every per-seed entry is that seed's own paired gain.
    single = paired_gains(blind, found, trained=trained)["conditions"]["low_light_s3"]["recall"]
    assert {k: s3["seeds"][0][k] for k in single} == single
    assert g["seeds"] == [0, 1] and g["thresholds"] == {"baseline": [0.95, 0.5], "policy": [0.5, 0.5]}
    assert g["bootstrap"]["levels"] == ["training seeds", "test images"]
    assert g["seen_conditions"] == ["low_light_s1", "low_light_s2"] and g["unseen_conditions"] == ["low_light_s3"]
    assert g["side_effects"]["recall"]["worst"] == {"condition": "low_light_s3", "gain": 0.5}
    assert g == combined_gains(pairs, trained=trained)  # keyed draws: the same every time


def test_combined_gains_with_one_bootstrap_row_is_the_mean(scored):
    pairs = [(0, scored(0.95, 1), scored(0.5, 1)), (2, scored(0.5, 1), scored(0.5, 1))]
    g = combined_gains(pairs)["mpc"]["recall"]
    assert (g["gain"], g["ci"]) == (0.5, [0.5, 0.5])


@pytest.mark.parametrize(
    "bad, fragment",
    [
        ([(0, "a", "b"), (0, "a", "b")], "must be distinct"),
        ([], "at least one"),
    ],
)
def test_combined_gains_refuses_bad_pairs(scored, bad, fragment):
    pairs = [(s, scored(0.5), scored(0.5)) for s, _, _ in bad]
    with pytest.raises(AegisError, match=fragment):
        combined_gains(pairs)


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ("", "no training seeds"),
        ("0,x", "'x' is invalid"),
        ("1,-2", "'-2' is invalid"),
        ("0,1,0", "given twice"),
        ("0,²", "'²' is invalid"),
        ("٣", "'٣' is invalid"),
    ],
)
def test_parse_seeds_errors(spec, fragment):
    with pytest.raises(AegisError, match=fragment):
        parse_seeds(spec)
    assert parse_seeds(" 2, 0 ,1") == [2, 0, 1]


def test_init_must_be_a_local_checkpoint(tmp_path):
    with pytest.raises(AegisError, match="not a local checkpoint file"):
        init_record("yolo11", "yolo11n.pt")
    ckpt = tmp_path / "w.pt"
    ckpt.write_bytes(b"not really weights")
    assert init_record("yolo11", ckpt) == {"path": str(ckpt.resolve()), "sha256": file_sha256(ckpt), "augment": None}


def test_shipped_low_light_policies():
    s12, oracle = load_policy("low-light-s12"), load_policy("low-light-all")
    assert [(c.corruption, c.severity) for c in s12.cells] == [("low_light", 1), ("low_light", 2)]
    assert [(c.corruption, c.severity) for c in oracle.cells] == [("low_light", s) for s in (1, 2, 3)]
    assert s12.p_clean == oracle.p_clean == 0.5 and s12.hash != oracle.hash


# --- end to end ----------------------------------------------------------------------------------------------------
def test_ablate_from_one_checkpoint_with_two_seeds(tmp_path):
    root = make_split(tmp_path / "split", n_test=2, n_val=2, n_train=3)
    pre = train_baseline(
        TrainSettings(model="yolo11", weights="yolo11n.yaml", epochs=1, imgsz=64, batch=2, device="cpu"),
        root,
        tmp_path / "pretrain",
    )
    init = pre["best"]
    out = tmp_path / "ablation"
    cmd = [
        "baseline",
        "ablate",
        "--split-dir",
        str(root),
        "--out-dir",
        str(out),
        "--model",
        "yolo11",
        "--init",
        init,
        "--seeds",
        "0,1",
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
        "--conditions",
        ",".join(CONDS),
        "--policies",
        "low-light-s12",
    ]
    result = runner.invoke(app, cmd)
    assert result.exit_code == 0, result.output
    sha = file_sha256(init)
    for name in ("clean", "low-light-s12"):
        for s in (0, 1):
            run = out / name / f"seed-{s}" / "run"
            cfg = yaml.safe_load((run / "config.yaml").read_text())["settings"]
            assert (cfg["weights"], cfg["seed"]) == (init, s)  # every model starts from the same checkpoint
            assert yaml.safe_load((run / "train" / "args.yaml").read_text())["model"] == init
            score = json.loads((out / "scores" / f"seed-{s}" / f"{name}.json").read_text())
            assert score["label"] == f"yolo11/{name}/seed-{s}" and score["provenance"]["training_seed"] == s
            assert score["provenance"]["init"]["sha256"] == sha
    record = json.loads((out / "ablation.json").read_text())
    assert record["settings"]["init"]["sha256"] == sha and record["settings"]["seeds"] == [0, 1]
    top = json.loads((out / "scores" / "low-light-s12.json").read_text())
    assert top["label"] == "yolo11/low-light-s12" and top["provenance"]["training_seed"] == 0
    block = top["mitigation"]
    assert block["seeds"] == [0, 1] and block["baseline_label"] == "yolo11/clean"
    s3 = block["conditions"]["low_light_s3"]["recall"]
    for s, entry in zip((0, 1), s3["seeds"]):
        own = json.loads((out / "scores" / f"seed-{s}" / "low-light-s12.json").read_text())["mitigation"]
        assert entry["gain"] == own["conditions"]["low_light_s3"]["recall"]["gain"]
        assert block["thresholds"]["policy"][s] == own["thresholds"]["policy"]
    assert s3["ci"][0] <= s3["ci"][1]
    assert "low_light_s3" in block["unseen_conditions"]
    from aegis_cli.baseline import ablation_table

    table = ablation_table(record)
    assert [c.header for c in table.columns][-2:] == ["ΔmPC per seed", "seed SD"]
    mpc = block["mpc"]["recall"]
    assert list(table.columns[-2].cells)[1] == " / ".join(f"{x['gain']:+.3f}" for x in mpc["seeds"])

    again = runner.invoke(app, cmd)  # resumable: nothing is trained or predicted twice
    assert again.exit_code == 0, again.output
    assert again.stderr.count("already finished") == 4 and "started" in again.stderr

    report = runner.invoke(
        app,
        [
            "report",
            *(str(p) for p in sorted((out / "scores").glob("*.json"))),
            "--out-dir",
            str(tmp_path / "rep"),
            "--format",
            "md",
        ],
    )
    assert report.exit_code == 0, report.output
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "Mitigation: per training seed (Δ recall)" in md and "| seed 0 | seed 1 | seed SD |" in md
    row = next(line for line in md.splitlines() if line.startswith("| yolo11/low-light-s12 | low_light_s3 |"))
    assert f"{s3['gain']:+.3f}" in row


def test_ablate_refuses_init_with_weights(tmp_path):
    (tmp_path / "split").mkdir()
    result = runner.invoke(
        app,
        [
            "baseline",
            "ablate",
            "--split-dir",
            str(tmp_path / "split"),
            "--out-dir",
            str(tmp_path / "a"),
            "--model",
            "yolo11",
            "--weights",
            "yolo11n.yaml",
            "--init",
            str(tmp_path / "x.pt"),
            "--policies",
            "low-light-s12",
        ],
    )
    assert result.exit_code == 1 and "not both" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "a").exists()
