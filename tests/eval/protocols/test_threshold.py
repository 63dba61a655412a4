"""freeze_threshold: rules, ties, grid edges, the curve from one pass, and the threshold file."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from aegis_data.errors import AegisError
from aegis_eval.metrics.matching import match_at_threshold, rates_from_counts, threshold_metrics
from aegis_eval.protocols.predictions import (
    detections_from_results,
    ground_truth_from_coco,
    load_ground_truth,
    load_predictions,
)
from aegis_eval.protocols.threshold import (
    DEFAULT_GRID,
    THRESHOLD_SCHEMA,
    freeze_threshold,
    grid_counts,
    parse_grid,
    parse_rule,
    read_threshold_file,
    write_threshold_file,
)


def gt_and_dets(n_gt: int, tp_scores: list[float], fp_scores: list[float]):
    """One image per GT box (each 10x10 at the origin); TPs hit GT boxes in order, FPs land far away."""
    images = [{"id": i + 1, "file_name": f"f{i + 1}.png", "width": 100, "height": 100} for i in range(n_gt)]
    anns = [{"id": i + 1, "image_id": i + 1, "category_id": 1, "bbox": [0, 0, 10, 10]} for i in range(n_gt)]
    gt = ground_truth_from_coco({"images": images, "annotations": anns, "categories": [{"id": 1, "name": "person"}]})
    rows = [{"image_id": i + 1, "category_id": 1, "bbox": [0, 0, 10, 10], "score": s} for i, s in enumerate(tp_scores)]
    rows += [{"image_id": 1, "category_id": 1, "bbox": [60, 60, 10, 10], "score": s} for s in fp_scores]
    return gt, detections_from_results(rows, gt)


def test_default_grid_is_declared_once():
    assert DEFAULT_GRID[:3] == (0.0, 0.01, 0.02) and DEFAULT_GRID[99] == 0.99
    assert DEFAULT_GRID[-2:] == (0.995, 0.999) and len(DEFAULT_GRID) == 102


def test_curve_from_one_pass_equals_matching_at_each_threshold():
    gt, dets = gt_and_dets(6, [0.95, 0.8, 0.55, 0.3, 0.3], [0.9, 0.6, 0.3, 0.1])
    grid = (0.0, 0.2, 0.3, 0.5, 0.7, 0.9, 0.95, 1.0)
    for t, row in zip(grid, (rates_from_counts(c) for c in grid_counts(gt, dets, grid))):
        assert row == threshold_metrics(match_at_threshold(gt, dets, t))


def test_max_f1_picks_the_best_f1():
    # 4 GT; TPs at .9 .8 .7, FPs at .85 .2: F1 at .7 = 2*(3/4)*(3/4)/(3/2) = .75 (best).
    gt, dets = gt_and_dets(4, [0.9, 0.8, 0.7], [0.85, 0.2])
    frozen = freeze_threshold(gt, dets, grid=[0.1, 0.5, 0.75, 0.95])
    assert frozen.value == 0.5
    assert frozen.metrics["f1"] == pytest.approx(0.75)
    assert frozen.rule == "max-f1" and frozen.warnings == ()
    assert frozen.curve["threshold"] == [0.1, 0.5, 0.75, 0.95]
    assert frozen.curve["tp"] == [3, 3, 2, 0]


def test_max_f1_ties_go_to_the_lowest_threshold():
    gt, dets = gt_and_dets(2, [0.9, 0.6], [])
    frozen = freeze_threshold(gt, dets, grid=[0.1, 0.3, 0.5, 0.7])
    assert [frozen.curve["f1"][k] for k in range(3)] == [1.0, 1.0, 1.0]
    assert frozen.value == 0.1
    # 0.1 keeps both detections (lowest score 0.6): a score-floor choice, not a grid edge (issue 31).
    assert any("[threshold_at_score_floor]" in w and "0.6" in w for w in frozen.warnings)


def test_edge_warning_on_highest_value():
    gt, dets = gt_and_dets(2, [0.95, 0.95], [0.5, 0.6, 0.7])
    frozen = freeze_threshold(gt, dets, grid=[0.2, 0.5, 0.9])
    assert frozen.value == 0.9
    assert any("highest" in w for w in frozen.warnings)


def test_precision_rule_takes_the_lowest_qualifying_threshold():
    gt, dets = gt_and_dets(4, [0.9, 0.8, 0.7, 0.4], [0.85, 0.5, 0.3])
    frozen = freeze_threshold(gt, dets, rule="precision>=0.75", grid=[0.2, 0.45, 0.6, 0.75, 0.88])
    # precision at .2: 4/7; .45: 4/6; .6: 3/4 = .75 -> first qualifying.
    assert frozen.value == 0.6 and frozen.rule == "precision>=0.75"
    assert frozen.metrics["precision"] == 0.75


def test_recall_rule_takes_the_highest_qualifying_threshold():
    gt, dets = gt_and_dets(4, [0.9, 0.8, 0.7, 0.4], [0.85, 0.5, 0.3])
    frozen = freeze_threshold(gt, dets, rule="recall >= 0.5", grid=[0.2, 0.45, 0.6, 0.75, 0.88])
    # recall: .2 -> 1, .45 -> .75, .6 -> .75, .75 -> .5, .88 -> .25
    assert frozen.value == 0.75 and frozen.metrics["recall"] == 0.5


def test_unsatisfiable_rule_is_an_error():
    gt, dets = gt_and_dets(4, [0.9], [0.95])
    with pytest.raises(
        AegisError, match=r"no grid threshold satisfies recall>=0.9 \(best recall on the grid: 0.2500\)"
    ):
        freeze_threshold(gt, dets, rule="recall>=0.9", grid=[0.1, 0.5])


@pytest.mark.parametrize("rule", ["max-f2", "precision>0.9", "recall>=1.5", "f1>=0.5", ""])
def test_unknown_rules_are_refused(rule):
    with pytest.raises(AegisError, match="unknown threshold rule"):
        parse_rule(rule)


def test_val_without_gt_cannot_use_max_f1():
    gt = ground_truth_from_coco(
        {"images": [{"id": 1, "file_name": "a.png"}], "annotations": [], "categories": [{"id": 1, "name": "person"}]}
    )
    dets = detections_from_results([{"image_id": 1, "category_id": 1, "bbox": [0, 0, 5, 5], "score": 0.5}], gt)
    with pytest.raises(AegisError, match="no person boxes"):
        freeze_threshold(gt, dets)


def test_parse_grid_forms():
    assert parse_grid("0:1:0.25") == (0.0, 0.25, 0.5, 0.75, 1.0)
    assert parse_grid("0.7, 0.3,0.5") == (0.3, 0.5, 0.7)
    assert len(parse_grid("0:1:0.01")) == 101 and parse_grid("0:1:0.01")[37] == 0.37
    for bad in ("a:b:c", "0:1", "0:1:0", "1:0:0.1", "0.5,2", ""):
        with pytest.raises(AegisError):
            parse_grid(bad)


def test_threshold_file_round_trip(tmp_path):
    gt, dets = gt_and_dets(4, [0.9, 0.8, 0.7], [0.85, 0.2])
    preds = tmp_path / "val_preds.json"
    preds.write_text("[]")
    gt_file = tmp_path / "val.json"
    gt_file.write_text("{}")
    frozen = freeze_threshold(gt, dets, grid=[0.1, 0.5, 0.75, 0.95])
    out = tmp_path / "sub" / "threshold.json"
    sha = write_threshold_file(frozen, out, preds, gt_file)
    value, info = read_threshold_file(out)
    assert value == 0.5 and info["rule"] == "max-f1" and info["sha256"] == sha
    assert info["schema"] == THRESHOLD_SCHEMA and info["grid"] == [0.1, 0.5, 0.75, 0.95]
    assert info["metrics"]["f1"] == pytest.approx(0.75)
    assert len(info["predictions"]["sha256"]) == 64 and len(info["gt"]["sha256"]) == 64
    assert [p.name for p in out.parent.iterdir()] == ["threshold.json"]  # no temp file left behind


@pytest.mark.parametrize(
    "content, code",
    [
        ("{not json", "threshold_not_json"),
        ("[0.5]", "threshold_wrong_type"),
        (json.dumps({"schema": "other", "value": 0.5}), "threshold_schema"),
        (json.dumps({"schema": THRESHOLD_SCHEMA, "value": 1.5}), "threshold_value"),
        (json.dumps({"schema": THRESHOLD_SCHEMA, "value": "0.5"}), "threshold_value"),
        (json.dumps({"schema": THRESHOLD_SCHEMA}), "threshold_value"),
    ],
)
def test_bad_threshold_files_are_refused(tmp_path, content, code):
    f = tmp_path / "t.json"
    f.write_text(content)
    with pytest.raises(AegisError, match=rf"\[{code}\]"):
        read_threshold_file(f)
    with pytest.raises(AegisError, match=r"\[threshold_not_found\]"):
        read_threshold_file(tmp_path / "missing.json")


def test_freeze_on_noisy_detector_chooses_interior_point():
    rng = np.random.default_rng(20260707)
    n = 40
    gt, _ = gt_and_dets(n, [], [])
    rows = [
        {"image_id": i + 1, "category_id": 1, "bbox": [0, 0, 10, 10], "score": float(rng.uniform(0.3, 1.0))}
        for i in range(n)
    ]
    rows += [
        {"image_id": i + 1, "category_id": 1, "bbox": [50, 50, 10, 10], "score": float(rng.uniform(0.0, 0.6))}
        for i in range(n)
    ]
    frozen = freeze_threshold(gt, detections_from_results(rows, gt))
    assert 0.0 < frozen.value < 0.99 and frozen.warnings == ()
    best = max(f for f in frozen.curve["f1"] if f is not None)
    assert frozen.metrics["f1"] == best


def test_threshold_file_records_the_hash_of_the_bytes_the_loaders_read(tmp_path):
    gt_file = tmp_path / "val.json"
    gt_file.write_text(
        json.dumps(
            {
                "images": [{"id": 1, "file_name": "a.png", "width": 50, "height": 50}],
                "annotations": [
                    {"id": 1, "image_id": 1, "category_id": 1, "bbox": [5, 5, 10, 10], "area": 100, "iscrowd": 0}
                ],
                "categories": [{"id": 1, "name": "person"}],
            }
        )
    )
    preds = tmp_path / "val_preds.json"
    preds.write_text(json.dumps([{"image_id": 1, "category_id": 1, "bbox": [5, 5, 10, 10], "score": 0.8}]))
    read_sha = hashlib.sha256(preds.read_bytes()).hexdigest()
    gt = load_ground_truth(gt_file)
    frozen = freeze_threshold(gt, load_predictions(preds, gt))
    preds.write_text("[]")  # the file changes after the threshold was chosen
    write_threshold_file(frozen, tmp_path / "t.json", preds, gt_file)
    _, info = read_threshold_file(tmp_path / "t.json")
    assert info["predictions"]["sha256"] == read_sha
    assert info["gt"]["sha256"] == hashlib.sha256(gt_file.read_bytes()).hexdigest()
