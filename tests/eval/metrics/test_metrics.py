"""Contracts of aegis_eval.metrics.coco beyond the random parity sweep: sentinels, weights, validation, quirks."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.random import PCG64, Generator

from aegis_data.errors import AegisError
from aegis_eval.metrics.coco import AREA_RANGES, IOU_THRESHOLDS, ApTable, accumulate, coco_ap, evaluate_images
from aegis_eval.metrics.result_keys import AP_METRICS
from aegis_eval.metrics.types import Detections, GroundTruth
from tests.eval.metrics.test_metrics_parity import assert_stats_equal, coco_objects, make_fixture, reference_stats


def _gt(boxes, images, n_images, areas=None, crowd=None, ann_ids=None) -> GroundTruth:
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    n = len(boxes)
    return GroundTruth(
        image_ids=np.arange(1, n_images + 1, dtype=np.int64),
        file_names=tuple(f"{i}.png" for i in range(n_images)),
        widths=np.full(n_images, 1000),
        heights=np.full(n_images, 1000),
        box_image=np.asarray(images, np.int64).reshape(-1),
        boxes=boxes,
        areas=boxes[:, 2] * boxes[:, 3] if areas is None else np.asarray(areas, float),
        iscrowd=np.zeros(n, bool) if crowd is None else np.asarray(crowd, bool),
        ann_ids=np.arange(1, n + 1) if ann_ids is None else np.asarray(ann_ids, np.int64),
    )


def _dets(boxes, images, scores) -> Detections:
    return Detections(
        det_image=np.asarray(images, np.int64).reshape(-1),
        boxes=np.asarray(boxes, np.float64).reshape(-1, 4),
        scores=np.asarray(scores, np.float64),
    )


SIZED = [[10, 10, 20, 20], [100, 100, 50, 50], [300, 300, 150, 150], [600, 600, 12, 30]]  # small/medium/large/small


def test_perfect_predictions_score_one_everywhere():
    gt = _gt(SIZED, [0, 0, 1, 1], 2)
    dets = _dets(SIZED, [0, 0, 1, 1], [0.9, 0.8, 0.7, 0.6])
    # precision is tp / (tp + fp + eps) in the reference, so "1" is 1 - 2.2e-16
    assert coco_ap(gt, dets) == pytest.approx({k: 1.0 for k in AP_METRICS}, abs=1e-12)


def test_sentinel_minus_one_for_ranges_without_gt():
    gt = _gt([[10, 10, 20, 20]], [0], 2)  # only a small box
    dets = _dets([[10, 10, 20, 20], [500, 500, 200, 200]], [0, 1], [0.9, 0.5])
    res = coco_ap(gt, dets)
    assert res["map_medium"] == -1.0 and res["map_large"] == -1.0
    assert res["map_small"] == pytest.approx(1.0, abs=1e-12) and res["map50_95"] == pytest.approx(1.0, abs=1e-12)
    empty = _gt(np.zeros((0, 4)), [], 2)
    assert coco_ap(empty, dets) == {k: -1.0 for k in AP_METRICS}


def test_no_detections_scores_zero():
    gt = _gt(SIZED, [0, 0, 1, 1], 2)
    res = coco_ap(gt, _dets(np.zeros((0, 4)), [], []))
    assert res == {k: 0.0 for k in AP_METRICS}


def test_crowd_region_absorbs_detections_and_is_not_counted():
    # one regular GT, one crowd region; detections inside the crowd region are ignored, not false positives
    gt = _gt([[0, 0, 20, 20], [200, 200, 300, 300]], [0, 0], 1, crowd=[False, True])
    dets = _dets([[0, 0, 20, 20], [220, 220, 40, 40], [230, 230, 40, 40]], [0, 0, 0], [0.5, 0.9, 0.8])
    res = coco_ap(gt, dets)
    assert res["map50_95"] == pytest.approx(1.0, abs=1e-12)
    assert_stats_equal(res, reference_stats(*coco_objects(gt, dets)), "crowd")


def test_annotation_id_zero_quirk_matches_reference():
    # pycocotools stores the matched GT id and tests it for non-zero: a match to GT id 0 counts as a miss
    gt = _gt([[0, 0, 20, 20], [100, 100, 20, 20]], [0, 0], 1, ann_ids=[0, 1])
    dets = _dets([[0, 0, 20, 20], [100, 100, 20, 20]], [0, 0], [0.9, 0.8])
    res = coco_ap(gt, dets)
    assert_stats_equal(res, reference_stats(*coco_objects(gt, dets)), "ann id 0")
    assert res["map50"] < 1.0


def test_area_boundary_is_in_both_ranges():
    gt = _gt([[0, 0, 32, 32]], [0], 1)  # area exactly 32**2
    res = coco_ap(gt, _dets([[0, 0, 32, 32]], [0], [0.5]))
    assert res["map_small"] == res["map_medium"] == pytest.approx(1.0, abs=1e-12)
    assert res["map_large"] == -1.0


def test_table_shapes_and_max_dets_cut():
    rng = Generator(PCG64(3))
    gt = _gt([[0, 0, 50, 50]], [0], 2)
    boxes = np.column_stack([rng.uniform(0, 900, 130), rng.uniform(0, 900, 130), np.full(130, 40), np.full(130, 40)])
    table = evaluate_images(gt, _dets(boxes, np.r_[np.zeros(120), np.ones(10)], rng.random(130)))
    assert isinstance(table, ApTable)
    assert table.n_dets == 110 and table.n_images == 2
    assert table.matched.shape == table.ignored.shape == (len(AREA_RANGES), len(IOU_THRESHOLDS), 110)
    assert table.n_gt.tolist() == [[1, 0], [0, 0], [1, 0], [0, 0]]
    kept = table.scores[table.det_image == 0]
    assert np.all(np.diff(kept) <= 0) and len(kept) == 100


def test_input_order_without_ties_does_not_matter():
    gt, dets = make_fixture(7)
    dets = _dets(dets.boxes, dets.det_image, dets.scores + np.arange(dets.n) * 1e-9)  # break every tie
    perm = Generator(PCG64(1)).permutation(dets.n)
    shuffled = _dets(dets.boxes[perm], dets.det_image[perm], dets.scores[perm])
    assert coco_ap(gt, dets) == coco_ap(gt, shuffled)


def _duplicated(gt: GroundTruth, dets: Detections, weights: np.ndarray) -> tuple[GroundTruth, Detections, np.ndarray]:
    """The dataset with image i repeated weights[i] times; copy ids sort right after the original's."""
    img_rows, ids = [], []
    for i, k in enumerate(weights):
        for c in range(int(k)):
            img_rows.append(i)
            ids.append(int(gt.image_ids[i]) * 100 + c)
    new_row = {}
    for r, i in enumerate(img_rows):
        new_row.setdefault(i, []).append(r)
    g_sel = [(g, r) for g in range(gt.n_boxes) for r in new_row.get(int(gt.box_image[g]), [])]
    d_sel = [(d, r) for d in range(dets.n) for r in new_row.get(int(dets.det_image[d]), [])]
    g_idx = np.array([g for g, _ in g_sel], dtype=np.int64)
    d_idx = np.array([d for d, _ in d_sel], dtype=np.int64)
    dup_gt = GroundTruth(
        image_ids=np.asarray(ids, np.int64),
        file_names=tuple(f"{r}.png" for r in img_rows),
        widths=gt.widths[img_rows],
        heights=gt.heights[img_rows],
        box_image=np.array([r for _, r in g_sel], dtype=np.int64),
        boxes=gt.boxes[g_idx].reshape(-1, 4),
        areas=gt.areas[g_idx],
        iscrowd=gt.iscrowd[g_idx],
        ann_ids=np.arange(1, len(g_idx) + 1),
    )
    dup_dets = Detections(
        det_image=np.array([r for _, r in d_sel], dtype=np.int64),
        boxes=dets.boxes[d_idx].reshape(-1, 4),
        scores=dets.scores[d_idx],
    )
    return dup_gt, dup_dets, np.asarray(ids)


@pytest.mark.parametrize("key", [1, 3, 6, 9, 12, 15, 20, 33])
def test_weighted_accumulate_equals_reference_on_duplicated_images(key):
    gt, dets = make_fixture(key)
    gt = GroundTruth(**{**gt.__dict__, "ann_ids": np.arange(1, gt.n_boxes + 1)})  # no id-0 quirk here
    weights = Generator(PCG64(1000 + key)).integers(0, 4, gt.n_images)
    weights[0] = 3  # at least one image really duplicated
    table = evaluate_images(gt, dets)
    dup_gt, dup_dets, ids = _duplicated(gt, dets, weights)
    ref = reference_stats(*coco_objects(dup_gt, dup_dets, image_ids=ids))
    assert_stats_equal(accumulate(table, weights), ref, f"key {key}, weights {weights.tolist()}")


def test_all_ones_weights_equal_unweighted():
    gt, dets = make_fixture(11)
    table = evaluate_images(gt, dets)
    assert accumulate(table, np.ones(gt.n_images, dtype=np.int32)) == accumulate(table)


@pytest.mark.parametrize(
    "weights, message",
    [
        (np.ones(3), "shape"),
        (-np.ones(2, dtype=int), ">= 0"),
        (np.array([0.5, 1.0]), "whole numbers"),
        (np.array(["a", "b"]), "integers"),
    ],
)
def test_bad_weights_raise(weights, message):
    table = evaluate_images(_gt(SIZED[:2], [0, 1], 2), _dets(SIZED[:2], [0, 1], [0.5, 0.5]))
    with pytest.raises(AegisError, match=message):
        accumulate(table, weights)


def test_bad_inputs_raise_one_clear_error():
    gt = _gt(SIZED[:2], [0, 1], 2)
    with pytest.raises(AegisError, match="max_dets"):
        evaluate_images(gt, _dets(SIZED[:1], [0], [0.5]), max_dets=0)
    with pytest.raises(AegisError, match=r"image rows must lie in \[0, 2\)"):
        evaluate_images(gt, _dets(SIZED[:1], [2], [0.5]))
    with pytest.raises(AegisError, match="non-finite"):
        evaluate_images(gt, _dets([[0, 0, np.nan, 1]], [0], [0.5]))
    bad = Detections(det_image=np.zeros(2, np.int64), boxes=np.zeros((1, 4)), scores=np.zeros(2))
    with pytest.raises(AegisError, match="disagree in length"):
        evaluate_images(gt, bad)
