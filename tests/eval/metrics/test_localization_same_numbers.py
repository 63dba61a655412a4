"""localization_stability gives, bit for bit, what its first spelling gave (fancy-indexed rows, linalg.norm of the
centre offsets), on random matches with shared, missing and identical boxes."""

from __future__ import annotations

import numpy as np
import pytest

from aegis_eval.metrics.localization import localization_stability, paired_iou_xywh
from aegis_eval.metrics.matching import match_at_threshold
from tests.eval.metrics.test_cmatch_order import _crowded


def _first_spelling(gt, clean_dets, clean_match, cond_dets, cond_match):
    both = np.flatnonzero((clean_match.gt_matched_det >= 0) & (cond_match.gt_matched_det >= 0))
    box_clean = clean_dets.boxes[clean_match.gt_matched_det[both]]
    box_cond = cond_dets.boxes[cond_match.gt_matched_det[both]]
    gt_boxes = gt.boxes[both]
    diag = np.hypot(gt_boxes[:, 2], gt_boxes[:, 3])
    centre = lambda b: b[:, :2] + b[:, 2:] / 2.0  # noqa: E731
    shift = np.linalg.norm(centre(box_clean) - centre(box_cond), axis=1) / diag
    mean = lambda x: float(np.mean(x)) if len(x) else None  # noqa: E731
    return {
        "n_matched": int(len(both)),
        "iou_clean_vs_condition": mean(paired_iou_xywh(box_clean, box_cond)),
        "center_shift": mean(shift),
        "iou_gt_clean": mean(clean_match.gt_matched_iou[both]),
        "iou_gt_condition": mean(cond_match.gt_matched_iou[both]),
    }


@pytest.mark.parametrize("key", range(8))
def test_localization_numbers_unchanged(key):
    gt, clean = _crowded(key)
    _, cond = _crowded(key + 100)  # other detections on the same GT layout
    cond = type(cond)(det_image=cond.det_image % gt.n_images, boxes=cond.boxes, scores=cond.scores)
    for threshold in (0.0, 0.5, 0.95):
        m_clean, m_cond = match_at_threshold(gt, clean, threshold), match_at_threshold(gt, cond, threshold)
        for a, b in ((clean, m_clean), (cond, m_cond)):
            got = localization_stability(gt, clean, m_clean, a, b)
            assert got == _first_spelling(gt, clean, m_clean, a, b)
