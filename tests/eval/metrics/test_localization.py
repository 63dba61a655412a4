"""Localization stability on hand-made box shifts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from aegis_eval.metrics.coco import box_iou_coco
from aegis_eval.metrics.localization import localization_stability, paired_iou_xywh
from aegis_eval.metrics.matching import match_at_threshold
from aegis_eval.metrics.result_keys import LOCALIZATION_KEYS
from aegis_eval.protocols.predictions import detections_from_results, ground_truth_from_coco

GT = {
    "images": [{"id": 1, "file_name": "a.png"}, {"id": 2, "file_name": "b.png"}],
    "annotations": [
        {"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 30, 40]},
        {"id": 2, "image_id": 2, "category_id": 1, "bbox": [100, 100, 20, 20]},
        {"id": 3, "image_id": 2, "category_id": 1, "bbox": [0, 0, 10, 10]},
    ],
    "categories": [{"id": 1, "name": "person"}],
}


def dets(gt, rows):
    return detections_from_results([{"image_id": i, "category_id": 1, "bbox": b, "score": s} for i, b, s in rows], gt)


def test_paired_iou():
    assert paired_iou_xywh([[0, 0, 10, 10]], [[5, 0, 10, 10]]).tolist() == [pytest.approx(50 / 150)]
    assert paired_iou_xywh([[0, 0, 0, 0]], [[0, 0, 0, 0]]).tolist() == [0.0]


def test_paired_iou_of_identical_boxes_is_exactly_one():
    # The pycocotools formula rounds these to 1 - 8e-12 and 1 + 2e-16 ((x + w) - x != w); the override must hold.
    boxes = np.array([[123456.1, 0.3, 0.7, 0.9], [0.1, 0.2, 0.3, 0.7]])
    raw = box_iou_coco(boxes, boxes, np.zeros(1, dtype=bool))
    assert raw[0] < 1.0 < raw[1]
    assert paired_iou_xywh(boxes, boxes).tolist() == [1.0, 1.0]


def test_hand_made_shift():
    gt = ground_truth_from_coco(GT)
    clean = dets(gt, [(1, [0, 0, 30, 40], 0.9), (2, [100, 100, 20, 20], 0.9), (2, [0, 0, 10, 10], 0.9)])
    # GT 1 found shifted by (3, 4) px -> centre shift 5 / diag 50 = 0.1; GT 2 found unchanged; GT 3 lost.
    cond = dets(gt, [(1, [3, 4, 30, 40], 0.8), (2, [100, 100, 20, 20], 0.8), (2, [60, 60, 10, 10], 0.8)])
    cm, km = match_at_threshold(gt, clean, 0.5), match_at_threshold(gt, cond, 0.5)
    loc = localization_stability(gt, clean, cm, cond, km)
    assert tuple(loc) == LOCALIZATION_KEYS
    assert loc["n_matched"] == 2
    shifted_iou = (27 * 36) / (2 * 30 * 40 - 27 * 36)
    assert loc["iou_clean_vs_condition"] == pytest.approx((shifted_iou + 1.0) / 2)
    assert loc["center_shift"] == pytest.approx((5 / math.hypot(30, 40) + 0.0) / 2)
    assert loc["iou_gt_clean"] == pytest.approx(1.0)
    assert loc["iou_gt_condition"] == pytest.approx((shifted_iou + 1.0) / 2)


def test_clean_against_itself_is_perfectly_stable():
    gt = ground_truth_from_coco(GT)
    clean = dets(gt, [(1, [1, 1, 30, 40], 0.9), (2, [101, 99, 20, 20], 0.9)])
    m = match_at_threshold(gt, clean, 0.5)
    loc = localization_stability(gt, clean, m, clean, m)
    assert loc["n_matched"] == 2 and loc["iou_clean_vs_condition"] == 1.0 and loc["center_shift"] == 0.0
    assert loc["iou_gt_clean"] == loc["iou_gt_condition"] < 1.0


def test_no_common_matches_gives_none():
    gt = ground_truth_from_coco(GT)
    clean = dets(gt, [(1, [0, 0, 30, 40], 0.9)])
    cond = dets(gt, [(2, [100, 100, 20, 20], 0.9)])
    loc = localization_stability(gt, clean, match_at_threshold(gt, clean, 0.5), cond, match_at_threshold(gt, cond, 0.5))
    assert loc == {
        "n_matched": 0,
        "iou_clean_vs_condition": None,
        "center_shift": None,
        "iou_gt_clean": None,
        "iou_gt_condition": None,
    }


def test_only_detections_above_the_threshold_count():
    gt = ground_truth_from_coco(GT)
    clean = dets(gt, [(1, [0, 0, 30, 40], 0.9)])
    cond = dets(gt, [(1, [0, 0, 30, 40], 0.3)])
    loc = localization_stability(gt, clean, match_at_threshold(gt, clean, 0.5), cond, match_at_threshold(gt, cond, 0.5))
    assert loc["n_matched"] == 0
