"""Localization stability: how far a detector's boxes move when the image is corrupted (docs/SCORING.md, "Localization
stability").

Over the GT instances matched at the frozen threshold in *both* the clean condition and a corrupted one:

* ``iou_clean_vs_condition``: mean IoU between the clean matched box and the condition's matched box;
* ``center_shift``: mean distance between the two boxes' centres divided by the GT box diagonal;
* ``iou_gt_clean`` / ``iou_gt_condition``: mean IoU with the GT box in each, over the same instances;
* ``n_matched``: how many instances that is. With none, the means are None (JSON null).

Clean against itself gives IoU 1 and shift 0, which is what the score JSON reports for ``clean``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aegis_eval.metrics.coco import box_iou_coco
from aegis_eval.metrics.matching import ThresholdMatch
from aegis_eval.metrics.types import Detections, GroundTruth


def paired_iou_xywh(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise IoU of two (N,4) xywh arrays -> (N,) in [0, 1]; exactly 1 for identical non-empty boxes,
    0 where the union is empty."""
    a = np.asarray(a, dtype=np.float64).reshape(-1, 4)
    b = np.asarray(b, dtype=np.float64).reshape(-1, 4)
    iou = box_iou_coco(a, b, np.zeros(1, dtype=bool))
    # (x + w) - x need not equal w in floating point; identical boxes are exactly 1, and IoU never exceeds 1.
    identical = np.all(a == b, axis=1) & (a[:, 2] * a[:, 3] > 0)
    return np.where(identical, 1.0, np.clip(iou, 0.0, 1.0))


def _centres(boxes: np.ndarray) -> np.ndarray:
    return boxes[:, :2] + boxes[:, 2:] / 2.0


def _mean(x: np.ndarray) -> float | None:
    return float(np.mean(x)) if len(x) else None


def localization_stability(
    gt: GroundTruth,
    clean_dets: Detections,
    clean_match: ThresholdMatch,
    cond_dets: Detections,
    cond_match: ThresholdMatch,
) -> dict[str, Any]:
    """The LOCALIZATION_KEYS dict for one condition against clean (see the module docstring).

    Both matches must come from ``match_at_threshold`` on the same ``gt``.
    """
    both = np.flatnonzero((clean_match.gt_matched_det >= 0) & (cond_match.gt_matched_det >= 0))
    # np.take copies whole rows (several times faster than fancy indexing of a 2-D array; the same values)
    box_clean = np.take(clean_dets.boxes, clean_match.gt_matched_det[both], axis=0)
    box_cond = np.take(cond_dets.boxes, cond_match.gt_matched_det[both], axis=0)
    gt_boxes = np.take(gt.boxes, both, axis=0)
    diag = np.hypot(gt_boxes[:, 2], gt_boxes[:, 3])
    # A matched GT has IoU >= iou > 0, hence positive area and a positive diagonal.
    offset = _centres(box_clean) - _centres(box_cond)
    # linalg.norm's sqrt of the row's sum of squares, spelled out (two terms: the same sum, without its overhead)
    shift = np.sqrt(offset[:, 0] * offset[:, 0] + offset[:, 1] * offset[:, 1]) / diag
    return {
        "n_matched": int(len(both)),
        "iou_clean_vs_condition": _mean(paired_iou_xywh(box_clean, box_cond)),
        "center_shift": _mean(shift),
        "iou_gt_clean": _mean(clean_match.gt_matched_iou[both]),
        "iou_gt_condition": _mean(cond_match.gt_matched_iou[both]),
    }
