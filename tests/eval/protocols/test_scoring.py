"""The shared scorer end to end: perfect and empty predictions, a synthetic 28-condition sweep (JSON keys as in
docs/SCORE_JSON.md, CSV columns), clusters, provenance and the input contract of score_paths."""

from __future__ import annotations

import csv
import json
import re

import numpy as np
import pytest

from aegis_data.engine.config import load_config
from aegis_data.errors import AegisError
from aegis_eval.metrics.bootstrap import BootstrapOptions
from aegis_eval.metrics.result_keys import (
    AP_METRICS,
    CI_METRICS,
    COUNT_KEYS,
    LOCALIZATION_KEYS,
    SCHEMA,
    THRESHOLD_METRICS,
)
from aegis_eval.protocols.predictions import detections_from_results, ground_truth_from_coco
from aegis_eval.protocols.scoring import csv_columns, score_json_bytes, write_score_csv, write_score_json
from aegis_eval.protocols.threshold import freeze_threshold, write_threshold_file
from tests import REPO_ROOT
from tests.eval.protocols.scoring_memory import score_conditions, score_paths


def documented_example() -> dict:
    """The jsonc example of docs/SCORE_JSON.md, comments stripped: the schema the scorer must produce."""
    text = (REPO_ROOT / "docs" / "SCORE_JSON.md").read_text()
    block = text.split("```jsonc", 1)[1].split("```", 1)[0]
    return json.loads(re.sub(r"//[^\n]*", "", block))


DOC = documented_example()
THRESHOLD_KEYS = set(DOC["threshold"])
CONDITION_KEYS = set(DOC["conditions"]["clean"])
LOCALIZATION_DOC_KEYS = set(DOC["conditions"]["clean"]["localization"])
SUMMARY_KEYS = set(DOC["summary"])
PROVENANCE_KEYS = set(DOC["provenance"]) - {"cross_check", "samples_sha256"}  # only with --cross-check, a samples file


def test_documented_keys_agree_with_result_keys():
    assert CONDITION_KEYS == (
        {"corruption", "family", "severity", "rel_drop", "ci", "ci_drop", "localization"}
        | set(AP_METRICS)
        | set(THRESHOLD_METRICS)
        | set(COUNT_KEYS)
    )
    assert LOCALIZATION_DOC_KEYS == set(LOCALIZATION_KEYS)
    assert DOC["schema"] == SCHEMA


def synthetic_gt(n_images: int, seed: int = 1):
    """Images of 640x480 with 0-3 people of all three COCO sizes; a 'group' attribute of 4 images each."""
    rng = np.random.default_rng([seed, 101])
    images, anns = [], []
    for i in range(n_images):
        images.append(
            {"id": i + 1, "file_name": f"frame_{i:04d}.png", "width": 640, "height": 480, "group": f"seq{i // 4}"}
        )
        for _ in range(int(rng.integers(0, 4))):
            side = float(rng.choice([12.0, 24.0, 48.0, 80.0, 120.0]))
            x, y = (float(v) for v in rng.uniform(0, 400, 2))
            anns.append(
                {
                    "id": len(anns) + 1,
                    "image_id": i + 1,
                    "category_id": 1,
                    "bbox": [x, y, side, side * 1.5],
                    "area": side * side * 1.5,
                    "iscrowd": 0,
                }
            )
    return {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "person"}]}


def synthetic_predictions(coco: dict, condition: str, per_image: int = 6, seed: int = 2) -> list[dict]:
    """A detector that finds fewer people and shifts boxes more as severity grows, plus random false alarms."""
    sev = 0 if condition == "clean" else int(condition.rsplit("_s", 1)[1])
    rng = np.random.default_rng([seed, sum(map(ord, condition)), sev])
    by_image: dict[int, list] = {}
    for a in coco["annotations"]:
        by_image.setdefault(a["image_id"], []).append(a["bbox"])
    out = []
    for im in coco["images"]:
        rows = []
        for b in by_image.get(im["id"], []):
            if rng.random() < 0.9 - 0.2 * sev:
                jitter = rng.normal(0, 0.03 + 0.03 * sev, 4) * [b[2], b[3], b[2], b[3]]
                rows.append(
                    (
                        [b[0] + jitter[0], b[1] + jitter[1], b[2] + jitter[2], b[3] + jitter[3]],
                        float(rng.uniform(0.5, 1.0)),
                    )
                )
        while len(rows) < per_image:
            rows.append(
                ([float(rng.uniform(0, 600)), float(rng.uniform(0, 440)), 20.0, 30.0], float(rng.uniform(0.0, 0.7)))
            )
        out += [
            {"image_id": im["id"], "category_id": 1, "bbox": [round(v, 3) for v in b], "score": round(s, 5)}
            for b, s in rows
        ]
    return out


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """A split-like directory (annotations + manifest) and a predictions directory of all 28 conditions."""
    root = tmp_path_factory.mktemp("sweep")
    split = root / "split"
    (split / "annotations").mkdir(parents=True)
    test_gt, val_gt = synthetic_gt(24, 1), synthetic_gt(16, 3)
    (split / "annotations" / "test.json").write_text(json.dumps(test_gt))
    (split / "annotations" / "val.json").write_text(json.dumps(val_gt))
    (split / "manifest.json").write_text(
        json.dumps({"dataset": "synthetic", "config_hash": load_config().config_hash, "root_hash": "ab" * 32})
    )
    preds = root / "preds"
    preds.mkdir()
    for cond in load_config().conditions():
        (preds / f"{cond}.json").write_text(json.dumps(synthetic_predictions(test_gt, cond)))
    val_preds = root / "val_preds.json"
    val_preds.write_text(json.dumps(synthetic_predictions(val_gt, "clean", seed=5)))
    return {"root": root, "split": split, "preds": preds, "val_preds": val_preds, "test_gt": test_gt}


@pytest.fixture(scope="module")
def sweep_result(sweep):
    val_gt = ground_truth_from_coco(json.loads((sweep["split"] / "annotations" / "val.json").read_text()))
    val_dets = detections_from_results(json.loads(sweep["val_preds"].read_text()), val_gt)
    frozen = freeze_threshold(val_gt, val_dets)
    tfile = sweep["root"] / "threshold.json"
    write_threshold_file(frozen, tfile, sweep["val_preds"], sweep["split"] / "annotations" / "val.json")
    result = score_paths(sweep["preds"], sweep["split"], threshold_file=tfile, bootstrap=60, seed=3)
    return result, frozen, tfile


def test_sweep_json_matches_the_documented_schema(sweep_result):
    result, frozen, tfile = sweep_result
    assert list(result) == list(DOC) and result["schema"] == SCHEMA
    assert set(result["threshold"]) == THRESHOLD_KEYS
    assert result["threshold"]["value"] == frozen.value and result["threshold"]["rule"] == "max-f1"
    assert result["threshold"]["file"] == str(tfile) and len(result["threshold"]["file_sha256"]) == 64
    assert list(result["conditions"]) == load_config().conditions()  # canonical order
    for cond, e in result["conditions"].items():
        assert list(e) == list(DOC["conditions"]["clean"]), cond  # same keys, documented order
        assert set(e["ci"]) == set(CI_METRICS) and set(e["ci_drop"]) == set(CI_METRICS)
        assert set(e["localization"]) == set(LOCALIZATION_KEYS)
        for m, (lo, hi) in e["ci"].items():
            if e[m] is not None and lo is not None:
                assert lo <= hi
        for k in COUNT_KEYS:
            assert isinstance(e[k], int)
        assert e["fn"] == e["n_gt"] - e["tp"] and e["n_images"] == 24
    assert set(result["summary"]) == SUMMARY_KEYS
    assert result["summary"]["n_conditions"] == 28 and result["summary"]["missing_conditions"] == []
    assert set(result["summary"]["per_family"]) == set(load_config().families)
    prov = result["provenance"]
    assert set(prov) == PROVENANCE_KEYS
    assert prov["config_hash"] == load_config().config_hash and prov["manifest_root_hash"] == "ab" * 32
    assert (
        prov["seed"] == 3 and prov["bootstrap"] == 60 and prov["threshold_sha256"] == result["threshold"]["file_sha256"]
    )
    assert set(prov["predictions"]) == set(result["conditions"])
    assert all(len(p["sha256"]) == 64 for p in prov["predictions"].values())
    assert result["dataset"] == "synthetic" and result["label"] == "preds"


def test_sweep_values_are_consistent(sweep_result):
    result, _, _ = sweep_result
    conds = result["conditions"]
    clean = conds["clean"]
    assert clean["corruption"] is None and clean["severity"] == 0
    assert conds["low_light_s3"]["corruption"] == "low_light" and conds["low_light_s3"]["family"] == "storm"
    assert all(v in (0.0, None) for v in clean["rel_drop"].values())
    # the paired drop of clean against itself is exactly 0 (undefined only where clean itself is 0)
    assert all(v == ([0.0, 0.0] if clean[m] else [None, None]) for m, v in clean["ci_drop"].items())
    assert clean["localization"]["iou_clean_vs_condition"] == 1.0 and clean["localization"]["center_shift"] == 0.0
    assert clean["localization"]["n_matched"] == clean["tp"]
    # The synthetic detector gets worse with severity.
    for name in load_config().names:
        recalls = [conds[f"{name}_s{s}"]["recall"] for s in (1, 2, 3)]
        assert clean["recall"] > recalls[0] > recalls[2], name
        r = conds[f"{name}_s2"]
        assert r["rel_drop"]["recall"] == pytest.approx((clean["recall"] - r["recall"]) / clean["recall"])
        assert r["localization"]["n_matched"] <= min(r["tp"], clean["tp"])
    mpc = np.mean([conds[c]["recall"] for c in conds if c != "clean"])
    assert result["summary"]["mpc"]["recall"] == pytest.approx(mpc)
    assert result["summary"]["rpc"]["recall"] == pytest.approx(mpc / clean["recall"])


def test_score_json_and_csv_writers(sweep_result, tmp_path):
    result, _, _ = sweep_result
    jpath, cpath = tmp_path / "out" / "score.json", tmp_path / "out" / "score.csv"
    write_score_json(result, jpath)
    back = json.loads(jpath.read_text())
    assert back["conditions"]["clean"]["recall"] == result["conditions"]["clean"]["recall"]
    assert "NaN" not in jpath.read_text()
    write_score_csv(result, cpath)
    with cpath.open() as fh:
        rows = list(csv.DictReader(fh))
    assert [r["condition"] for r in rows] == list(result["conditions"])
    assert list(rows[0]) == csv_columns()
    for m in CI_METRICS:
        assert f"{m}_lo" in rows[0] and f"{m}_hi" in rows[0]
    for m in ("recall", "map50", "fp_per_image"):
        assert f"rel_drop_{m}" in rows[0]
    assert {"config_hash", "git_sha", "predictions_sha256", "threshold", "seed", "bootstrap"} <= set(rows[0])
    row = rows[-1]
    assert float(row["recall"]) == pytest.approx(result["conditions"][row["condition"]]["recall"])
    assert sorted(p.name for p in jpath.parent.iterdir()) == ["score.csv", "score.json"]


def test_same_seed_same_result(sweep, sweep_result):
    result, _, tfile = sweep_result
    again = score_paths(sweep["preds"], sweep["split"], threshold_file=tfile, bootstrap=60, seed=3)

    def strip(r):  # provenance carries a timestamp
        return {k: v for k, v in r.items() if k != "provenance"}

    assert score_json_bytes(strip(result)) == score_json_bytes(strip(again))


def test_source_date_epoch_makes_the_whole_json_reproducible(sweep, sweep_result, monkeypatch):
    _, _, tfile = sweep_result
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764547200")
    first = score_paths(sweep["preds"], sweep["split"], threshold_file=tfile, bootstrap=20, seed=3)
    again = score_paths(sweep["preds"], sweep["split"], threshold_file=tfile, bootstrap=20, seed=3)
    assert first["provenance"]["timestamp"] == "2025-12-01T00:00:00Z"
    assert score_json_bytes(first) == score_json_bytes(again)
    for bad in ("yesterday", "-5", "1.5", "9" * 30):
        monkeypatch.setenv("SOURCE_DATE_EPOCH", bad)
        with pytest.raises(AegisError, match="SOURCE_DATE_EPOCH"):
            score_paths(sweep["preds"], sweep["split"], threshold_file=tfile, bootstrap=1)


@pytest.mark.parametrize("bad", ["²", "١٧٠٠٠٠٠٠٠٠", "12a"])
def test_source_date_epoch_takes_ascii_digits_only(monkeypatch, bad):
    from aegis_eval.protocols.provenance import utc_timestamp

    monkeypatch.setenv("SOURCE_DATE_EPOCH", bad)
    with pytest.raises(AegisError, match=r"^SOURCE_DATE_EPOCH must be a whole number of seconds"):
        utc_timestamp()
    monkeypatch.setenv("SOURCE_DATE_EPOCH", " 1764547200 ")
    assert utc_timestamp() == "2025-12-01T00:00:00Z"


# --- single-condition edge cases ----------------------------------------------------------------------------
def small_gt():
    return ground_truth_from_coco(synthetic_gt(12, 7))


def test_perfect_predictions_score_one_with_zero_width_intervals():
    coco = synthetic_gt(12, 7)
    gt = ground_truth_from_coco(coco)
    perfect = detections_from_results(
        [{"image_id": a["image_id"], "category_id": 1, "bbox": a["bbox"], "score": 1.0} for a in coco["annotations"]],
        gt,
    )
    r = score_conditions(gt, {"clean": perfect}, 0.5, bootstrap=BootstrapOptions(n_bootstrap=50, seed=0))
    e = r["conditions"]["clean"]
    for m in (
        "map50_95",
        "map50",
        "map75",
        "map_small",
        "map_medium",
        "map_large",
        "precision",
        "recall",
        "f1",
        "recall_small",
        "recall_medium",
        "recall_large",
    ):
        assert e[m] == pytest.approx(1.0), m
    assert e["fp"] == 0 and e["fp_per_image"] == 0.0 and e["false_alarm_image_share"] == 0.0
    for m in CI_METRICS:
        lo, hi = e["ci"][m]
        assert lo == pytest.approx(hi), m
    assert e["ci"]["recall"] == [pytest.approx(1.0)] * 2 and e["ci"]["fp_per_image"] == [0.0, 0.0]


def test_empty_predictions_score_zero_without_crashing():
    gt = small_gt()
    empty = detections_from_results([], gt)
    r = score_conditions(
        gt, {"clean": empty, "low_light_s1": empty}, 0.3, bootstrap=BootstrapOptions(n_bootstrap=20, seed=0)
    )
    e = r["conditions"]["clean"]
    assert e["map50_95"] == 0.0 and e["map50"] == 0.0
    assert (e["precision"], e["recall"], e["f1"], e["tp"], e["fp"]) == (0.0, 0.0, 0.0, 0, 0)
    assert e["fn"] == e["n_gt"] > 0
    assert r["conditions"]["low_light_s1"]["rel_drop"]["recall"] is None  # clean recall is 0
    assert r["conditions"]["low_light_s1"]["localization"]["n_matched"] == 0
    json.loads(score_json_bytes(r))


def test_gt_image_without_boxes_only_adds_false_positives():
    coco = {
        "images": [{"id": 1, "file_name": "a.png"}, {"id": 2, "file_name": "b.png"}],
        "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 40, 40]}],
        "categories": [{"id": 1, "name": "person"}],
    }
    gt = ground_truth_from_coco(coco)
    hit = {"image_id": 1, "category_id": 1, "bbox": [0, 0, 40, 40], "score": 0.9}
    fp = {"image_id": 2, "category_id": 1, "bbox": [0, 0, 40, 40], "score": 0.8}
    base = score_conditions(
        gt, {"clean": detections_from_results([hit], gt)}, 0.5, bootstrap=BootstrapOptions(n_bootstrap=10)
    )["conditions"]["clean"]
    more = score_conditions(
        gt, {"clean": detections_from_results([hit, fp], gt)}, 0.5, bootstrap=BootstrapOptions(n_bootstrap=10)
    )["conditions"]["clean"]
    assert (base["tp"], base["fp"], base["recall"]) == (1, 0, 1.0)
    assert (more["tp"], more["fp"], more["recall"], more["n_gt"]) == (1, 1, 1.0, 1)
    assert more["precision"] == 0.5 and more["fp_per_image"] == 0.5 and more["false_alarm_image_share"] == 0.5
    # the FP scores below the TP, so AP is unchanged (1 up to the rounding of a mean of 101 ones)
    assert more["map50"] == base["map50"] == pytest.approx(1.0)


# --- score_paths contract -------------------------------------------------------------------------------
def test_exactly_one_threshold_source_is_required(sweep):
    with pytest.raises(AegisError, match="exactly one"):
        score_paths(sweep["preds"], sweep["split"])
    with pytest.raises(AegisError, match="exactly one"):
        score_paths(sweep["preds"], sweep["split"], threshold=0.5, threshold_file=sweep["root"] / "threshold.json")


def test_single_file_is_one_condition_named_after_its_stem(sweep, tmp_path):
    f = tmp_path / "my_model_preds.json"
    f.write_text((sweep["preds"] / "clean.json").read_text())
    warnings = []
    r = score_paths(
        f, sweep["split"] / "annotations" / "test.json", threshold=0.5, bootstrap=10, on_warning=warnings.append
    )
    assert list(r["conditions"]) == ["my_model_preds"]
    e = r["conditions"]["my_model_preds"]
    assert e["corruption"] is None and e["severity"] is None and e["rel_drop"]["recall"] is None
    assert r["label"] == "my_model_preds" and r["dataset"] is None and r["threshold"]["rule"] is None
    assert r["provenance"]["manifest_root_hash"] is None
    assert "clean" in r["summary"]["missing_conditions"]


def test_directory_skips_non_condition_files_with_a_warning(sweep, tmp_path):
    d = tmp_path / "preds"
    d.mkdir()
    for c in ("clean", "low_light_s2"):
        (d / f"{c}.json").write_text((sweep["preds"] / f"{c}.json").read_text())
    (d / "notes.json").write_text("{}")
    (d / "run.json").write_text("{}")  # run metadata of `aegis baseline predict`: skipped without a warning
    warnings = []
    r = score_paths(d, sweep["split"], threshold=0.4, bootstrap=10, label="run7", on_warning=warnings.append)
    assert list(r["conditions"]) == ["clean", "low_light_s2"] and r["label"] == "run7"
    assert any("[not_a_condition]" in w and "notes.json" in w for w in warnings)
    assert not any("run.json" in w for w in warnings)
    assert len(r["summary"]["missing_conditions"]) == 26


def test_empty_or_missing_predictions(sweep, tmp_path):
    with pytest.raises(AegisError, match=r"\[predictions_empty_dir\]"):
        score_paths(tmp_path, sweep["split"], threshold=0.5)
    with pytest.raises(AegisError, match=r"\[predictions_not_found\]"):
        score_paths(tmp_path / "nope", sweep["split"], threshold=0.5)


def test_cluster_by_attribute_and_mapping_file(sweep, tmp_path):
    by_attr = score_paths(
        sweep["preds"] / "clean.json", sweep["split"], threshold=0.5, bootstrap=40, cluster_by="group"
    )
    assert by_attr["provenance"]["cluster_by"] == "group"
    mapping = {img["file_name"]: img["group"] for img in sweep["test_gt"]["images"]}
    mfile = tmp_path / "groups.json"
    mfile.write_text(json.dumps(mapping))
    by_file = score_paths(
        sweep["preds"] / "clean.json", sweep["split"], threshold=0.5, bootstrap=40, cluster_by=str(mfile)
    )
    # Same groups, same seed: same intervals.
    assert by_file["conditions"]["clean"]["ci"] == by_attr["conditions"]["clean"]["ci"]
    plain = score_paths(sweep["preds"] / "clean.json", sweep["split"], threshold=0.5, bootstrap=40, cluster_by="none")
    assert plain["conditions"]["clean"]["ci"] != by_attr["conditions"]["clean"]["ci"]
    # The split's groups are the default (issue 31): the same intervals as naming them.
    default = score_paths(sweep["preds"] / "clean.json", sweep["split"], threshold=0.5, bootstrap=40)
    assert default["conditions"]["clean"]["ci"] == by_attr["conditions"]["clean"]["ci"]
    with pytest.raises(AegisError, match=r"\[cluster_missing\].*'flight'.*available: group"):
        score_paths(sweep["preds"] / "clean.json", sweep["split"], threshold=0.5, cluster_by="flight")
    mfile.write_text(json.dumps({"frame_0000.png": "a"}))
    with pytest.raises(AegisError, match=r"\[cluster_missing\]"):
        score_paths(sweep["preds"] / "clean.json", sweep["split"], threshold=0.5, cluster_by=str(mfile))


def test_bad_threshold_value_is_refused(sweep):
    with pytest.raises(AegisError, match="threshold"):
        score_paths(sweep["preds"], sweep["split"], threshold=1.5)


def test_git_state_fails_soft_outside_a_checkout(tmp_path):
    from aegis_eval.protocols.provenance import git_state

    assert git_state(tmp_path) == (None, None)
    sha, dirty = git_state()  # the toolkit's own checkout
    assert sha is None or (len(sha) == 40 and isinstance(dirty, bool))


# --- summary intervals and the sample block ------------------------------------------------------------------


def test_summary_intervals_are_the_summaries_of_each_resample(sweep, sweep_result):
    from aegis_eval.metrics.bootstrap import percentile_interval
    from aegis_eval.protocols.scoring import ScoreOptions, score

    _, _, tfile = sweep_result
    scored = score(sweep["preds"], sweep["split"], ScoreOptions(threshold_file=tfile, bootstrap=60, seed=3))
    ci, samples = scored.result["summary"]["ci"], scored.samples
    assert ci["confidence"] == 0.95 and set(ci["mpc"]) == set(ci["rpc"]) == set(CI_METRICS)
    corrupted = [c for c in samples if c != "clean"]
    per_resample = np.mean([samples[c]["recall"] for c in corrupted], axis=0)  # recall is defined everywhere here
    assert ci["mpc"]["recall"] == pytest.approx(list(percentile_interval(per_resample)))
    assert ci["rpc"]["recall"] == pytest.approx(list(percentile_interval(per_resample / samples["clean"]["recall"])))
    storm = [c for c in corrupted if scored.result["conditions"][c]["family"] == "storm"]
    drops = np.mean(
        [(samples["clean"]["recall"] - samples[c]["recall"]) / samples["clean"]["recall"] for c in storm], axis=0
    )
    assert ci["per_family"]["storm"]["recall"] == pytest.approx(list(percentile_interval(drops)))
    low = [c for c in corrupted if c.startswith("low_light_")]
    drops = np.mean([1 - samples[c]["recall"] / samples["clean"]["recall"] for c in low], axis=0)
    assert ci["per_corruption"]["low_light"]["recall"] == pytest.approx(list(percentile_interval(drops)))
    lo, hi = ci["mpc"]["recall"]
    assert lo < hi and lo < scored.result["summary"]["mpc"]["recall"] < hi


def test_summary_intervals_collapse_to_the_point_values_with_one_resample(sweep, sweep_result):
    _, _, tfile = sweep_result
    result = score_paths(sweep["preds"], sweep["split"], threshold_file=tfile, bootstrap=1, seed=3)
    summary = result["summary"]
    for key in ("mpc", "rpc", "mean_rel_drop"):
        for m in CI_METRICS:
            assert summary["ci"][key][m] == pytest.approx([summary[key][m]] * 2), (key, m)
    for key in ("per_family", "per_corruption"):
        assert set(summary["ci"][key]) == set(summary[key])
        for name, block in summary["ci"][key].items():
            assert block["recall"] == pytest.approx([summary[key][name]["recall"]] * 2), name


def test_sample_block_counts_images_boxes_and_the_resampling_unit(sweep, sweep_result):
    result, _, tfile = sweep_result
    sample, clean = result["sample"], result["conditions"]["clean"]
    assert list(sample) == list(DOC["sample"])
    assert sample["n_images"] == clean["n_images"] == 24 and sample["n_gt"] == clean["n_gt"]
    assert sample["n_gt_small"] + sample["n_gt_medium"] + sample["n_gt_large"] == sample["n_gt"]
    assert min(sample["n_gt_small"], sample["n_gt_medium"], sample["n_gt_large"]) > 0
    # The GT's 6 groups of 4 images are resampled by default (issue 31); "none" resamples images.
    unit = (sample["resampling_unit"], sample["n_units"], sample["n_bootstrap"], sample["seed"])
    assert unit == ("cluster", 6, 60, 3)
    single = score_paths(sweep["preds"], sweep["split"], threshold_file=tfile, bootstrap=20, seed=3, cluster_by="none")
    assert (single["sample"]["resampling_unit"], single["sample"]["n_units"]) == ("image", 24)
