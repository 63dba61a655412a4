"""One-to-one matching of detections to ground truth at a frozen confidence threshold (docs/SCORING.md, "Matching at the
threshold").

Protocol, per image:

1. keep detections with ``score >= threshold``;
2. visit them in descending score order (a *stable* sort, so equal scores keep their input order);
3. each detection takes the still-free, non-crowd GT box with the highest IoU, provided that IoU >= ``iou``;
   a tie on IoU goes to the lowest GT index (GT order within the image as loaded);
4. a detection that found no free GT but overlaps a crowd GT region (intersection / detection area >= ``iou``,
   as pycocotools treats crowd) is *ignored*: neither TP nor FP. Crowd GT boxes are not counted in ``n_gt``.
   Our frozen splits have no crowd boxes; this only matters for foreign COCO files.

Because the greedy pass visits detections in score order and a detection's fate depends only on the
detections before it, the match at threshold ``t`` is exactly the prefix (scores >= t) of the match at any
lower threshold. ``freeze_threshold`` uses this to evaluate a whole grid from one pass.

Size bins follow COCO's boundaries on the annotation ``area`` field (``GroundTruth.areas``, as pycocotools):
small < 32², medium in [32², 96²), large >= 96². Unlike COCO's AP ranges (closed at both ends, so an area of
exactly 32² counts in both) these recall bins are a partition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from aegis_data.errors import AegisError
from aegis_eval.metrics import coco
from aegis_eval.metrics.coco import box_iou_coco, candidate_pairs, match_kernel, segment_starts
from aegis_eval.metrics.types import Detections, GroundTruth

SMALL_MAX_AREA = 32.0**2
MEDIUM_MAX_AREA = 96.0**2
DEFAULT_IOU = 0.5


@dataclass(frozen=True)
class PerImageCounts:
    """Per-image counts at one threshold; every field is an (I,) int64 array over the GT image table.

    tp: matched detections; fp: unmatched, non-ignored detections; n_gt: non-crowd GT boxes;
    tp_<size> / gt_<size>: matched GT boxes and GT boxes in each COCO size bin.
    Summing a field with image weights (a bootstrap resample) gives the resample's total.
    """

    tp: np.ndarray
    fp: np.ndarray
    n_gt: np.ndarray
    tp_small: np.ndarray
    gt_small: np.ndarray
    tp_medium: np.ndarray
    gt_medium: np.ndarray
    tp_large: np.ndarray
    gt_large: np.ndarray

    @property
    def n_images(self) -> int:
        return int(len(self.tp))

    def totals(self) -> dict[str, int]:
        """Whole-split sums of every field, plus ``images_with_fp``."""
        out = {name: int(getattr(self, name).sum()) for name in _COUNT_FIELDS}
        out["images_with_fp"] = int((self.fp > 0).sum())
        return out


_COUNT_FIELDS = ("tp", "fp", "n_gt", "tp_small", "gt_small", "tp_medium", "gt_medium", "tp_large", "gt_large")


def sum_counts(counts: list[PerImageCounts]) -> PerImageCounts:
    """Per-image counts of several classes over one image table, added field by field (an image has a false
    alarm when any class has one there)."""
    if not counts or len({c.n_images for c in counts}) != 1:
        raise AegisError("per-image counts to add must be non-empty and cover the same images")
    return PerImageCounts(**{name: np.sum([getattr(c, name) for c in counts], axis=0) for name in _COUNT_FIELDS})


def _ratio(num, den) -> np.ndarray:
    """num/den elementwise, NaN where den == 0 (float64)."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def precision_recall_f1(tp, fp, n_gt) -> dict[str, np.ndarray]:
    """precision = tp/(tp+fp), 0 with no detections; recall = tp/n_gt, NaN when n_gt = 0; f1 = 2PR/(P+R), 0 when
    P+R = 0, NaN when recall is NaN. Elementwise float64 (0-d for scalars); the one definition of the three."""
    tp = np.asarray(tp, dtype=np.float64)
    fp = np.asarray(fp, dtype=np.float64)
    n_det = tp + fp
    precision = np.where(n_det > 0, _ratio(tp, n_det), 0.0)
    recall = _ratio(tp, n_gt)
    denom = precision + recall
    with np.errstate(divide="ignore", invalid="ignore"):
        f1 = np.where(denom > 0, 2.0 * precision * recall / np.where(denom > 0, denom, 1.0), 0.0)
    f1 = np.where(np.isnan(recall), np.nan, f1)
    return {"precision": precision, "recall": recall, "f1": f1}


def threshold_rates(
    tp, fp, n_gt, n_images, images_with_fp, tp_small, gt_small, tp_medium, gt_medium, tp_large, gt_large
) -> dict[str, np.ndarray]:
    """Rates from (possibly resample-weighted) totals; elementwise on scalars or (B,) arrays.

    Conventions for undefined values:
    precision = tp/(tp+fp), 0 when there are no detections (nothing claimed, nothing right);
    recall = tp/n_gt, NaN when n_gt = 0; f1 = 2PR/(P+R), 0 when P+R = 0, NaN when recall is NaN;
    fn = n_gt - tp; fp_per_image = fp/n_images and false_alarm_image_share = images_with_fp/n_images
    (NaN when n_images = 0); recall_<size> = tp_<size>/gt_<size>, NaN when gt_<size> = 0.
    Returns float64 arrays (0-d for scalar input).
    """
    tp = np.asarray(tp, dtype=np.float64)
    n_gt = np.asarray(n_gt, dtype=np.float64)
    return {
        **precision_recall_f1(tp, fp, n_gt),
        "fn": n_gt - tp,
        "fp_per_image": _ratio(fp, n_images),
        "false_alarm_image_share": _ratio(images_with_fp, n_images),
        "recall_small": _ratio(tp_small, gt_small),
        "recall_medium": _ratio(tp_medium, gt_medium),
        "recall_large": _ratio(tp_large, gt_large),
    }


@dataclass(frozen=True)
class ThresholdMatch:
    """The result of :func:`match_at_threshold`.

    Per detection (D,), in the Detections' input order: ``kept`` (score >= threshold), ``is_tp``,
    ``ignored`` (kept, unmatched, inside a crowd region), ``matched_gt`` (GT box index or -1) and
    ``matched_iou`` (NaN when unmatched). A kept detection is an FP iff ``kept & ~is_tp & ~ignored``.
    Per GT box (G,): ``gt_matched_det`` (detection index or -1) and ``gt_matched_iou`` (NaN when unmatched).
    ``counts`` aggregates per image.
    """

    threshold: float
    iou: float
    kept: np.ndarray
    is_tp: np.ndarray
    ignored: np.ndarray
    matched_gt: np.ndarray
    matched_iou: np.ndarray
    gt_matched_det: np.ndarray
    gt_matched_iou: np.ndarray
    counts: PerImageCounts

    @property
    def is_fp(self) -> np.ndarray:
        return self.kept & ~self.is_tp & ~self.ignored


def box_iou_xywh(a: np.ndarray, b: np.ndarray, crowd: bool = False) -> np.ndarray:
    """(N,4) x (M,4) xywh -> (N,M) IoU as pycocotools computes it (areas w*h, no +1; 0 without overlap).

    ``crowd=True`` treats every ``b`` box as a crowd region: intersection over the ``a`` (detection) area.
    One kernel with the AP code: this is :func:`aegis_eval.metrics.coco.box_iou_coco` broadcast to a matrix.
    """
    a = np.asarray(a, dtype=np.float64).reshape(-1, 4)
    b = np.asarray(b, dtype=np.float64).reshape(-1, 4)
    return box_iou_coco(a[:, None, :], b[None, :, :], np.array([crowd]))


def _check_inputs(gt: GroundTruth, dets: Detections, threshold: float, iou: float) -> None:
    if not np.isfinite(threshold) or not 0.0 <= threshold <= 1.0:
        raise AegisError(f"`threshold` must be a number in [0, 1]; got {threshold!r}", param="threshold")
    if not np.isfinite(iou) or not 0.0 < iou <= 1.0:
        raise AegisError(f"`iou` must be in (0, 1]; got {iou!r}", param="iou")
    if dets.n and (dets.det_image.min() < 0 or dets.det_image.max() >= gt.n_images):
        raise AegisError(
            "detections reference image rows outside the ground truth; "
            "load them with load_predictions(path, gt) against the same GroundTruth"
        )


def size_bins(areas: np.ndarray) -> np.ndarray:
    """(G,) int8 size bin of each GT area: 0 small (< 32²), 1 medium (< 96²), 2 large."""
    areas = np.asarray(areas, dtype=np.float64)
    return np.where(areas < SMALL_MAX_AREA, 0, np.where(areas < MEDIUM_MAX_AREA, 1, 2)).astype(np.int8)


def match_at_threshold(gt: GroundTruth, dets: Detections, threshold: float, iou: float = DEFAULT_IOU) -> ThresholdMatch:
    """Greedy one-to-one matching of the detections with ``score >= threshold`` (see the module docstring).

    Pure: inputs are not modified. Runs in O(sum over images of kept_i * gt_i).
    """
    threshold = float(threshold)
    iou = float(iou)
    _check_inputs(gt, dets, threshold, iou)
    kernel = match_kernel()
    if kernel is not None:
        return _match_compiled(kernel, gt, dets, threshold, iou)
    n_img, n_gt_boxes, n_det = gt.n_images, gt.n_boxes, dets.n

    kept = np.asarray(dets.scores, dtype=np.float64) >= threshold
    is_tp = np.zeros(n_det, dtype=bool)
    ignored = np.zeros(n_det, dtype=bool)
    matched_gt = np.full(n_det, -1, dtype=np.int64)
    matched_iou = np.full(n_det, np.nan)
    gt_matched_det = np.full(n_gt_boxes, -1, dtype=np.int64)
    gt_matched_iou = np.full(n_gt_boxes, np.nan)

    # Kept detections grouped by image, descending score, ties in input order (stable sorts).
    kept_idx = np.flatnonzero(kept)
    order = kept_idx[np.argsort(-dets.scores[kept_idx], kind="stable")]
    order = order[np.argsort(dets.det_image[order], kind="stable")]
    d_bounds = segment_starts(dets.det_image[order], n_img)
    gt_order = np.argsort(gt.box_image, kind="stable")  # GT boxes of an image, in loaded order
    g_bounds = segment_starts(gt.box_image[gt_order], n_img)
    crowd = np.asarray(gt.iscrowd, dtype=bool)
    boxes = np.asarray(dets.boxes, dtype=np.float64)[order]
    # Every (kept detection, GT) pair of an image that reaches ``iou``: only these can match or be ignored.
    pair_row, pair_gt, pair_iou = candidate_pairs(gt, gt_order, g_bounds, boxes, d_bounds, floor=iou)
    rank = np.arange(len(order)) - d_bounds[dets.det_image[order]]
    regular = ~crowd[pair_gt]
    row_gt, row_iou = _greedy_by_rank(pair_row[regular], pair_gt[regular], pair_iou[regular], rank, n_gt_boxes)
    crowd_rows = pair_row[~regular]
    hit = np.flatnonzero(row_gt >= 0)
    d, g = order[hit], row_gt[hit]
    is_tp[d] = True
    matched_gt[d] = g
    matched_iou[d] = row_iou[hit]
    gt_matched_det[g] = d
    gt_matched_iou[g] = row_iou[hit]
    # An unmatched detection inside a crowd region is ignored.
    ignored[order[crowd_rows[row_gt[crowd_rows] < 0]]] = True

    counts = per_image_counts(gt, dets.det_image, kept & is_tp, kept & ~is_tp & ~ignored, gt_matched_det >= 0)
    return ThresholdMatch(
        threshold, iou, kept, is_tp, ignored, matched_gt, matched_iou, gt_matched_det, gt_matched_iou, counts
    )


def _match_compiled(kernel: Any, gt: GroundTruth, dets: Detections, threshold: float, iou: float) -> ThresholdMatch:
    """match_at_threshold in _cmatch.c: the kept detections in score order per image (image_order), then the greedy
    pass with the per-image counts (threshold_match), written in the input's indexing."""
    n_img, n_gt_boxes, n_det = gt.n_images, gt.n_boxes, dets.n
    scores = np.ascontiguousarray(dets.scores, dtype=np.float64)
    rows = np.empty(n_det, dtype=np.int64)
    det_start = np.empty(n_img + 1, dtype=np.int64)
    n_kept = kernel.image_order(
        np.ascontiguousarray(dets.det_image, dtype=np.int64),
        scores,
        threshold,
        max(n_det, 1),
        rows,
        det_start,
        None,
        None,
        None,
    )
    matched_gt, matched_iou, crowd_hit, gt_matched_det, gt_matched_iou, counts = _threshold_outputs(
        n_det, n_gt_boxes, n_img
    )
    kernel.threshold_match(
        np.ascontiguousarray(dets.boxes, dtype=np.float64),
        rows[:n_kept],
        det_start,
        np.ascontiguousarray(gt.boxes, dtype=np.float64),
        np.ascontiguousarray(gt.box_image, dtype=np.int64),
        np.asarray(gt.iscrowd, dtype=bool).astype(np.uint8),
        np.ascontiguousarray(gt.areas, dtype=np.float64),
        iou,
        SMALL_MAX_AREA,
        MEDIUM_MAX_AREA,
        matched_gt,
        matched_iou,
        crowd_hit,
        gt_matched_det,
        gt_matched_iou,
        counts,
    )
    return _threshold_result(
        threshold, iou, scores, matched_gt, matched_iou, crowd_hit, gt_matched_det, gt_matched_iou, counts
    )


def _threshold_outputs(n_det: int, n_gt_boxes: int, n_img: int) -> tuple[np.ndarray, ...]:
    """The compiled threshold match's output arrays, preset: matched GT -1, IoU NaN, no crowd hit; counts written."""
    return (
        np.full(n_det, -1, dtype=np.int64),
        np.full(n_det, np.nan),
        np.zeros(n_det, dtype=np.uint8),
        np.full(n_gt_boxes, -1, dtype=np.int64),
        np.full(n_gt_boxes, np.nan),
        np.empty((len(_COUNT_FIELDS), n_img), dtype=np.int64),
    )


def _threshold_result(
    threshold: float,
    iou: float,
    scores: np.ndarray,
    matched_gt: np.ndarray,
    matched_iou: np.ndarray,
    crowd_hit: np.ndarray,
    gt_matched_det: np.ndarray,
    gt_matched_iou: np.ndarray,
    counts: np.ndarray,
) -> ThresholdMatch:
    is_tp = matched_gt >= 0
    # An unmatched detection inside a crowd region is ignored (crowd_hit is only set for kept ones).
    ignored = crowd_hit.view(bool) & ~is_tp
    return ThresholdMatch(
        threshold,
        iou,
        scores >= threshold,
        is_tp,
        ignored,
        matched_gt,
        matched_iou,
        gt_matched_det,
        gt_matched_iou,
        PerImageCounts(*counts),
    )


def match_and_evaluate(
    gt: GroundTruth, dets: Detections, threshold: float, iou: float = DEFAULT_IOU, max_dets: int = coco.DEFAULT_MAX_DETS
) -> tuple[ThresholdMatch, coco.ApTable]:
    """``(match_at_threshold(gt, dets, threshold, iou), evaluate_images(gt, dets, max_dets))``, the same values and
    the same first error. Compiled, one pass per image serves both where it can: when ``iou`` reaches the lowest AP
    threshold (the threshold's pairs are then among the AP candidates) and every detection with ``score >=
    threshold`` is among its image's ``max_dets`` best; otherwise the threshold match runs on its own."""
    threshold = float(threshold)
    iou = float(iou)
    kernel = match_kernel()
    if kernel is None or not iou >= float(coco.IOU_THRESHOLDS.min()):
        return match_at_threshold(gt, dets, threshold, iou), coco.evaluate_images(gt, dets, max_dets)
    _check_inputs(gt, dets, threshold, iou)
    coco.check_inputs(gt, dets, max_dets)
    scores = np.ascontiguousarray(dets.scores, dtype=np.float64)
    outputs = _threshold_outputs(dets.n, gt.n_boxes, gt.n_images)
    table, covered = coco.evaluate_compiled(
        kernel, gt, dets, int(max_dets), (scores, threshold, iou, SMALL_MAX_AREA, MEDIUM_MAX_AREA, *outputs)
    )
    if covered != np.count_nonzero(scores >= threshold):  # a detection at the threshold lies past max_dets
        return _match_compiled(kernel, gt, dets, threshold, iou), table
    return _threshold_result(threshold, iou, scores, *outputs), table


def _greedy_by_rank(
    pair_row: np.ndarray, pair_gt: np.ndarray, pair_iou: np.ndarray, rank: np.ndarray, n_gt_boxes: int
) -> tuple[np.ndarray, np.ndarray]:
    """The greedy pass of :func:`match_at_threshold` over candidate (detection row, non-crowd GT, IoU) pairs.

    Detections of equal rank (position in their image's score order) belong to different images and cannot
    compete for a GT, so the per-image sequential pass runs as one vectorised step per rank: each detection
    takes its first free candidate in order of descending IoU, then ascending GT index (``argmax`` over the
    image's IoU row picks the first maximum, i.e. the lowest index).
    Returns the matched GT (or -1) and its IoU (NaN when unmatched) of every detection row.
    """
    n_rows = len(rank)
    row_gt = np.full(n_rows, -1, dtype=np.int64)
    row_iou = np.full(n_rows, np.nan)
    if len(pair_row) == 0:
        return row_gt, row_iou
    by = np.lexsort((pair_gt, -pair_iou, pair_row, rank[pair_row]))
    p_row, p_gt, p_iou = pair_row[by], pair_gt[by], pair_iou[by]
    taken = np.zeros(n_gt_boxes, dtype=bool)
    steps = np.flatnonzero(np.diff(rank[p_row])) + 1
    for s, e in zip(np.concatenate([[0], steps]), np.concatenate([steps, [len(p_row)]])):
        rows, gts = p_row[s:e], p_gt[s:e]
        firsts = np.concatenate([[0], np.flatnonzero(np.diff(rows)) + 1])
        free_at = np.where(taken[gts], e - s, np.arange(e - s))
        chosen = np.minimum.reduceat(free_at, firsts)
        chosen = chosen[chosen < e - s]
        row_gt[rows[chosen]] = gts[chosen]
        row_iou[rows[chosen]] = p_iou[s:e][chosen]
        taken[gts[chosen]] = True
    return row_gt, row_iou


def per_image_counts(
    gt: GroundTruth, det_image: np.ndarray, det_tp: np.ndarray, det_fp: np.ndarray, gt_matched: np.ndarray
) -> PerImageCounts:
    """Aggregate per-detection TP/FP flags (D,) and per-GT matched flags (G,) into per-image counts."""
    n_img = gt.n_images
    real = ~np.asarray(gt.iscrowd, dtype=bool)
    bins = size_bins(gt.areas)

    def count(rows, mask):
        return np.bincount(rows[mask], minlength=n_img).astype(np.int64)

    fields: dict[str, Any] = {
        "tp": count(det_image, det_tp),
        "fp": count(det_image, det_fp),
        "n_gt": count(gt.box_image, real),
    }
    for b, name in enumerate(("small", "medium", "large")):
        in_bin = real & (bins == b)
        fields[f"tp_{name}"] = count(gt.box_image, in_bin & gt_matched)
        fields[f"gt_{name}"] = count(gt.box_image, in_bin)
    return PerImageCounts(**fields)


def to_json_number(x) -> float | None:
    x = float(x)
    return None if np.isnan(x) else x


def rates_from_counts(counts: PerImageCounts) -> dict[str, Any]:
    """Whole-split counts and rates (NaN -> None), keyed as in the score JSON."""
    t = counts.totals()
    rates = threshold_rates(
        t["tp"],
        t["fp"],
        t["n_gt"],
        counts.n_images,
        t["images_with_fp"],
        t["tp_small"],
        t["gt_small"],
        t["tp_medium"],
        t["gt_medium"],
        t["tp_large"],
        t["gt_large"],
    )
    out: dict[str, Any] = {k: to_json_number(v) for k, v in rates.items() if k != "fn"}
    out.update(tp=t["tp"], fp=t["fp"], fn=t["n_gt"] - t["tp"], n_gt=t["n_gt"], n_images=counts.n_images)
    return out


def threshold_metrics(match: ThresholdMatch) -> dict[str, Any]:
    """precision, recall, f1, tp, fp, fn, n_gt, n_images, fp_per_image, false_alarm_image_share and
    recall_small/medium/large of one match; undefined rates are None (JSON null), counts are ints."""
    return rates_from_counts(match.counts)
