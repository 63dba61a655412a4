"""COCO bounding-box AP for one category, computed exactly as pycocotools 2.0.11 does, but vectorised.

Two stages, as in the reference: :func:`evaluate_images` does the per-image greedy matching once and caches
it in an :class:`ApTable`; :func:`accumulate` turns the table into the six headline numbers. The table is what
the bootstrap resamples, so a COCO evaluation is never re-run per resample.

Array dimensions by letter: A = 4 area ranges (all, small, medium, large), T = 10 IoU thresholds
(``linspace(.5, .95, 10)``), R = 101 recall thresholds (``linspace(0, 1, 101)``), I = images (rows of the
GroundTruth image table), D = kept detections (the ``max_dets`` best-scored per image), G = GT boxes.

Semantics reproduced from pycocotools (each one matters for parity):

* IoU as its C ``bbIou``: ``w = min(x+w) - max(x)``, zero unless positive; ``union = da + ga - inter``; for a
  crowd GT the union is the detection area.
* Per image, detections are ordered by descending score with a *stable* sort (equal scores keep their input
  order) and cut to ``max_dets``. GT boxes are ordered regular-first, otherwise as given.
* Greedy matching per IoU threshold: a detection takes, among GT it overlaps by IoU >= t that are unmatched
  (or crowd, which may be matched again), the best regular GT; only if there is none, the best ignored GT.
  "Best" is the highest IoU; on equal IoU the *later* GT in that order wins (the reference overwrites on >=).
* A GT is ignored in an area range when it is crowd or its ``area`` field lies outside ``[lo, hi]`` (both
  ends inclusive, so an area of exactly 32² is both small and medium). A detection is ignored when matched to
  an ignored GT, or unmatched with ``w*h`` outside the range.
* The reference stores the matched GT *id* and tests it for non-zero, so a match to a GT whose annotation id
  is 0 counts as unmatched (a false positive unless ignored) while still consuming that GT. Reproduced.
* Accumulation sorts all kept detections of all images by descending score, again stably, over the
  concatenation in image order; precision is made monotone from the right and read at the first index whose
  recall reaches each recall threshold (0 when recall never gets there); an area range with no regular GT
  gives the sentinel -1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from aegis_data.compiled import load_extension
from aegis_data.errors import AegisError
from aegis_eval.metrics.result_keys import AP_METRICS
from aegis_eval.metrics.types import Detections, GroundTruth

# linspace, not arange: the reference's thresholds are these exact doubles and parity depends on them.
IOU_THRESHOLDS = np.linspace(0.5, 0.95, 10)
RECALL_THRESHOLDS = np.linspace(0.0, 1.0, 101)
AREA_RANGES = np.array([[0.0, 1e10], [0.0, 32.0**2], [32.0**2, 96.0**2], [96.0**2, 1e10]])
DEFAULT_MAX_DETS = 100


def match_kernel() -> Any:
    """The compiled matching (``_cmatch.c``), or None where the NumPy code runs (``AEGIS_KERNELS=numpy``, not built)."""
    return load_extension("aegis_eval.metrics._cmatch", "COCO matching")


# The reference clamps the starting IoU to just below 1 so a perfect overlap still matches.
_MAX_IOU_START = 1.0 - 1e-10
_THRESHOLDS_CLAMPED = np.minimum(IOU_THRESHOLDS, _MAX_IOU_START)
# (detection, GT) pairs per chunk when computing IoU, to bound memory (a few arrays of this many float64).
_PAIR_CHUNK = 1_000_000


@dataclass(frozen=True)
class ApTable:
    """Per-image COCO matching results, cached for accumulation and bootstrap resampling.

    Detections are the kept ones (at most ``max_dets`` per image), stored grouped by image row and, within an
    image, in descending-score order (stable); D is their count.

    det_index: (D,) int64 index into the Detections arrays the table was built from.
    det_image: (D,) int64 GT image row of each detection.
    det_rank: (D,) int64 position within its image's score order (0 = best).
    scores: (D,) float64.
    matched: (A, T, D) bool, the reference's ``dtMatches != 0`` (matched to a GT with non-zero id).
    ignored: (A, T, D) bool, the reference's ``dtIgnore``.
    n_gt: (A, I) int64 regular (non-ignored) GT boxes per image and area range.
    order: (D,) int64 accumulation order: descending score, stable over (image row, rank).
    max_dets: the per-image cap used.
    """

    det_index: np.ndarray
    det_image: np.ndarray
    det_rank: np.ndarray
    scores: np.ndarray
    matched: np.ndarray
    ignored: np.ndarray
    n_gt: np.ndarray
    order: np.ndarray
    max_dets: int = DEFAULT_MAX_DETS

    @property
    def n_images(self) -> int:
        return int(self.n_gt.shape[1])

    @property
    def n_dets(self) -> int:
        return int(len(self.scores))


def box_iou_coco(dets_xywh: np.ndarray, gts_xywh: np.ndarray, gt_crowd: np.ndarray) -> np.ndarray:
    """Elementwise IoU of paired boxes, bit-identical to pycocotools' ``bbIou``.

    dets_xywh, gts_xywh: (P, 4) float64 COCO boxes, row p of one paired with row p of the other.
    gt_crowd: (P,) bool; for crowd GT the denominator is the detection's own area.
    Returns (P,) float64 in [0, 1] (up to one rounding step). Leading dimensions broadcast: (N, 1, 4) x (1, M, 4) with
    crowd (M,) or (1,) gives the (N, M) matrix (aegis_eval.metrics.matching uses it so). The engine's
    ``candidate_pairs`` inlines the same expression on corners computed once per box; keep the two in step.
    """
    dx, dy, dw, dh = (dets_xywh[..., k] for k in range(4))
    gx, gy, gw, gh = (gts_xywh[..., k] for k in range(4))
    w = np.minimum(dw + dx, gw + gx) - np.maximum(dx, gx)
    h = np.minimum(dh + dy, gh + gy) - np.maximum(dy, gy)
    overlap = (w > 0) & (h > 0)
    inter = w * h
    det_area = dw * dh
    union = np.where(gt_crowd, det_area, det_area + gw * gh - inter)
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = inter / np.where(overlap, union, 1.0)
    return np.where(overlap, iou, 0.0)


def check_inputs(gt: GroundTruth, dets: Detections, max_dets: int) -> None:
    """evaluate_images' checks of its arguments (AegisError on the first that fails)."""
    if isinstance(max_dets, bool) or not isinstance(max_dets, (int, np.integer)) or max_dets < 1:
        raise AegisError(f"`max_dets` must be a positive integer; got {max_dets!r}", param="max_dets")
    n_img = gt.n_images
    if (
        gt.boxes.shape != (gt.n_boxes, 4)
        or len(gt.box_image) != gt.n_boxes
        or len(gt.areas) != gt.n_boxes
        or len(gt.iscrowd) != gt.n_boxes
        or len(gt.ann_ids) != gt.n_boxes
    ):
        raise AegisError(
            f"ground truth arrays disagree in length: boxes {gt.boxes.shape}, box_image "
            f"{len(gt.box_image)}, areas {len(gt.areas)}, iscrowd {len(gt.iscrowd)}, ann_ids "
            f"{len(gt.ann_ids)}; expected (G, 4) and G each"
        )
    if dets.boxes.shape != (dets.n, 4) or len(dets.det_image) != dets.n:
        raise AegisError(
            f"detection arrays disagree in length: boxes {dets.boxes.shape}, det_image "
            f"{len(dets.det_image)}, scores {dets.n}; expected (D, 4), D, D"
        )
    if dets.n and (dets.det_image.min() < 0 or dets.det_image.max() >= n_img):
        raise AegisError(
            f"detection image rows must lie in [0, {n_img}); got "
            f"[{int(dets.det_image.min())}, {int(dets.det_image.max())}]"
        )
    if gt.n_boxes and (gt.box_image.min() < 0 or gt.box_image.max() >= n_img):
        raise AegisError(
            f"GT image rows must lie in [0, {n_img}); got [{int(gt.box_image.min())}, {int(gt.box_image.max())}]"
        )
    if not (np.isfinite(dets.boxes).all() and np.isfinite(dets.scores).all()):
        raise AegisError("detections contain non-finite boxes or scores; expected finite numbers")


def segment_starts(sorted_keys: np.ndarray, n_groups: int) -> np.ndarray:
    """(n_groups + 1,) offsets of each group in an array sorted by integer key in [0, n_groups)."""
    return np.searchsorted(sorted_keys, np.arange(n_groups + 1), side="left")


def candidate_pairs(
    gt: GroundTruth,
    gt_order: np.ndarray,
    gt_start: np.ndarray,
    det_boxes: np.ndarray,
    det_start: np.ndarray,
    floor: float = float(IOU_THRESHOLDS.min()),
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All (kept detection, GT of the same image) pairs whose IoU reaches ``floor`` (by default the lowest IoU
    threshold); for a crowd GT the IoU is the intersection over the detection's area.

    Images are processed in chunks as padded (images, detections, GT) blocks, sorted by GT count so that
    padding stays small. Returns (det row, GT index into gt arrays, IoU).
    """
    n_det_img = np.diff(det_start)
    n_gt_img = np.diff(gt_start)
    both = np.flatnonzero((n_det_img > 0) & (n_gt_img > 0))
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64))
    if len(both) == 0:
        return empty
    imgs_sorted = both[np.argsort(n_gt_img[both], kind="stable")]
    # Corner columns once; the sums are the C code's x + w, evaluated identically.
    d_x0, d_y0 = det_boxes[:, 0], det_boxes[:, 1]
    d_x1, d_y1 = det_boxes[:, 2] + d_x0, det_boxes[:, 3] + d_y0
    d_area = det_boxes[:, 2] * det_boxes[:, 3]
    g_boxes = gt.boxes[gt_order]
    g_x0, g_y0 = g_boxes[:, 0], g_boxes[:, 1]
    g_x1, g_y1 = g_boxes[:, 2] + g_x0, g_boxes[:, 3] + g_y0
    g_area = g_boxes[:, 2] * g_boxes[:, 3]
    g_crowd = np.asarray(gt.iscrowd, bool)[gt_order]
    d_max = int(n_det_img.max())
    out_d, out_g, out_iou = [], [], []
    lo, n = 0, len(imgs_sorted)
    while lo < n:
        hi = min(n, lo + max(1, _PAIR_CHUNK // (d_max * int(n_gt_img[imgs_sorted[lo]]))))
        hi = min(hi, lo + max(1, _PAIR_CHUNK // (d_max * int(n_gt_img[imgs_sorted[hi - 1]]))))
        imgs = imgs_sorted[lo:hi]
        nd, ng = n_det_img[imgs], n_gt_img[imgs]
        d_valid = np.arange(int(nd.max()))[None, :] < nd[:, None]
        g_valid = np.arange(int(ng.max()))[None, :] < ng[:, None]
        d_idx = np.where(d_valid, det_start[imgs][:, None] + np.arange(d_valid.shape[1]), 0)[:, :, None]
        g_idx = np.where(g_valid, gt_start[imgs][:, None] + np.arange(g_valid.shape[1]), 0)[:, None, :]
        w = np.minimum(d_x1[d_idx], g_x1[g_idx]) - np.maximum(d_x0[d_idx], g_x0[g_idx])
        # Most pairs do not even overlap in x: the rest of the IoU is computed for those that do.
        c, i, j = np.nonzero((w > 0) & d_valid[:, :, None] & g_valid[:, None, :])
        d_row, g_row, w = d_idx[c, i, 0], g_idx[c, 0, j], w[c, i, j]
        h = np.minimum(d_y1[d_row], g_y1[g_row]) - np.maximum(d_y0[d_row], g_y0[g_row])
        inter = w * h
        da = d_area[d_row]
        union = np.where(g_crowd[g_row], da, da + g_area[g_row] - inter)
        with np.errstate(divide="ignore", invalid="ignore"):
            iou = inter / union
        keep = (h > 0) & (iou >= floor)
        out_d.append(d_row[keep])
        out_g.append(gt_order[g_row[keep]])
        out_iou.append(iou[keep])
        lo = hi
    return np.concatenate(out_d), np.concatenate(out_g), np.concatenate(out_iou)


def _match_areas(
    pair_det: np.ndarray,
    pair_gt: np.ndarray,
    pair_iou: np.ndarray,
    det_rank: np.ndarray,
    gt_ignore: np.ndarray,
    gt_pos: np.ndarray,
    gt_crowd: np.ndarray,
    ann_nonzero: np.ndarray,
    n_dets: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Greedy matching of all A area ranges at all T thresholds. Returns (A, T, D) bool arrays: matched to a GT
    with a non-zero annotation id (the reference's ``dtMatches != 0``), and matched to an ignored GT.

    gt_ignore, gt_pos: (A, G) per area range. Detections of equal rank belong to different images and cannot
    compete for a GT, so the sequential greedy pass of the reference runs as one vectorised step per rank,
    over every area range and threshold at once.
    """
    n_area, n_thr, n_gt = gt_ignore.shape[0], len(IOU_THRESHOLDS), gt_ignore.shape[1]
    matched = np.zeros((n_area, n_thr, n_dets), dtype=bool)
    matched_ignored = np.zeros_like(matched)
    if len(pair_det) == 0:
        return matched, matched_ignored
    # Pairs grouped by (rank, detection); within a detection the last valid pair in an area's preference order
    # is the reference's choice: regular before ignored, then higher IoU, then later GT position.
    base = np.lexsort((pair_det, det_rank[pair_det]))
    prefer = np.empty((n_area, len(pair_det)), dtype=np.int64)  # pair index in each area's preference order
    key = np.empty_like(prefer)  # position of each base-ordered pair in that order
    for a in range(n_area):
        prefer[a] = np.lexsort((gt_pos[a][pair_gt], pair_iou, ~gt_ignore[a][pair_gt], pair_det, det_rank[pair_det]))
        position = np.empty(len(pair_det), dtype=np.int64)
        position[prefer[a]] = np.arange(len(pair_det))
        key[a] = position[base]
    p_det, p_gt, p_iou = pair_det[base], pair_gt[base], pair_iou[base]
    p_crowd = gt_crowd[p_gt]
    thr = _THRESHOLDS_CLAMPED[None, :, None]
    taken = np.zeros((n_area, n_thr, n_gt), dtype=bool)
    bounds = np.flatnonzero(np.diff(det_rank[p_det])) + 1
    for s, e in zip(np.concatenate([[0], bounds]), np.concatenate([bounds, [len(p_det)]])):
        dets_here = p_det[s:e]
        g_here = p_gt[s:e]
        valid = (p_iou[s:e] >= thr) & (p_crowd[s:e] | ~taken[:, :, g_here])
        seg = np.concatenate([[0], np.flatnonzero(np.diff(dets_here)) + 1])
        local = np.where(valid, key[:, None, s:e], -1)
        best = np.maximum.reduceat(local, seg, axis=2)  # (A, T, n_seg)
        a_idx, t_idx, k_idx = np.nonzero(best >= 0)
        g_sel = pair_gt[prefer[a_idx, best[a_idx, t_idx, k_idx]]]
        d_sel = dets_here[seg[k_idx]]
        matched[a_idx, t_idx, d_sel] = ann_nonzero[g_sel]
        matched_ignored[a_idx, t_idx, d_sel] = gt_ignore[a_idx, g_sel]
        taken[a_idx, t_idx, g_sel] = True
    return matched, matched_ignored


def evaluate_images(gt: GroundTruth, dets: Detections, max_dets: int = DEFAULT_MAX_DETS) -> ApTable:
    """Per-image COCO matching at 10 IoU thresholds × 4 area ranges; the input of :func:`accumulate`.

    gt: the split's ground truth (one category). GT order within an image is the order of the arrays, as the
    reference keeps the annotation file's order; it decides ties in IoU.
    dets: detections resolved against ``gt``; their input order decides ties in score, as in the reference.
    max_dets: keep the best ``max_dets`` detections per image (COCO's headline numbers use 100).
    Raises AegisError on inconsistent arrays, image rows out of range or non-finite values.
    """
    check_inputs(gt, dets, max_dets)
    kernel = match_kernel()
    if kernel is not None:
        return evaluate_compiled(kernel, gt, dets, int(max_dets))[0]
    n_img = gt.n_images
    det_image_all = np.asarray(dets.det_image, dtype=np.int64)
    scores_all = np.asarray(dets.scores, dtype=np.float64)
    # lexsort is stable: by image, then descending score, then input order — the reference's mergesort.
    by_image = np.lexsort((-scores_all, det_image_all))
    sorted_img = det_image_all[by_image]
    starts_all = segment_starts(sorted_img, n_img)
    rank_all = np.arange(len(by_image)) - starts_all[sorted_img]
    keep = rank_all < max_dets
    det_index = by_image[keep]
    det_image = sorted_img[keep]
    det_rank = rank_all[keep].astype(np.int64)
    scores = scores_all[det_index]
    det_boxes = np.asarray(dets.boxes, dtype=np.float64)[det_index]
    n_det = len(det_index)
    det_start = segment_starts(det_image, n_img)

    box_image = np.asarray(gt.box_image, dtype=np.int64)
    gt_order = np.argsort(box_image, kind="stable")
    gt_start = segment_starts(box_image[gt_order], n_img)

    areas = np.asarray(gt.areas, dtype=np.float64)
    crowd = np.asarray(gt.iscrowd, dtype=bool)
    ann_nonzero = np.asarray(gt.ann_ids) != 0
    det_area = det_boxes[:, 2] * det_boxes[:, 3]
    position_in_file = np.empty(gt.n_boxes, dtype=np.int64)
    position_in_file[gt_order] = np.arange(gt.n_boxes)

    n_area = len(AREA_RANGES)
    lo, hi = AREA_RANGES[:, :1], AREA_RANGES[:, 1:]
    gt_ignore = crowd[None, :] | (areas[None, :] < lo) | (areas[None, :] > hi)  # (A, G)
    # rank of each GT in the reference's per-image order: regular first, then file order
    gt_pos = np.empty((n_area, gt.n_boxes), dtype=np.int64)
    for a in range(n_area):
        gt_pos[a, np.lexsort((position_in_file, gt_ignore[a]))] = np.arange(gt.n_boxes)
    pair_det, pair_gt, pair_iou = candidate_pairs(gt, gt_order, gt_start, det_boxes, det_start)
    matched, match_ignored = _match_areas(
        pair_det, pair_gt, pair_iou, det_rank, gt_ignore, gt_pos, crowd, ann_nonzero, n_det
    )
    outside = (det_area[None, :] < lo) | (det_area[None, :] > hi)  # (A, D)
    ignored = match_ignored | (~matched & outside[:, None, :])
    n_gt = np.stack([np.bincount(box_image[~gt_ignore[a]], minlength=n_img) for a in range(n_area)]).astype(np.int64)

    order = np.argsort(-scores, kind="stable")
    return ApTable(
        det_index=det_index,
        det_image=det_image,
        det_rank=det_rank,
        scores=scores,
        matched=matched,
        ignored=ignored,
        n_gt=n_gt,
        order=order.astype(np.int64),
        max_dets=int(max_dets),
    )


def evaluate_compiled(
    kernel: Any, gt: GroundTruth, dets: Detections, max_dets: int, at_threshold: tuple = ()
) -> tuple[ApTable, Any]:
    """evaluate_images in _cmatch.c: the score order by radix and counting sorts (image_order), then per image the
    candidates, the greedy matching of every area range and threshold, the ignored flags and the GT counts
    (evaluate), written straight into the table's arrays. at_threshold: the kernel's optional threshold-match
    arguments (matching.match_and_evaluate); returns the table and the kernel's answer (None without them)."""
    n_img, n_all = gt.n_images, dets.n
    scores_all = np.ascontiguousarray(dets.scores, dtype=np.float64)
    by_image, image_of, rank, order = (np.empty(n_all, dtype=np.int64) for _ in range(4))
    det_start = np.empty(n_img + 1, dtype=np.int64)
    n_det = kernel.image_order(
        np.ascontiguousarray(dets.det_image, dtype=np.int64),
        scores_all,
        -np.inf,
        max_dets,
        by_image,
        det_start,
        image_of,
        rank,
        order,
    )
    det_index = by_image[:n_det]
    shape = (len(AREA_RANGES), len(IOU_THRESHOLDS), n_det)
    matched, ignored = np.empty(shape, dtype=np.uint8), np.empty(shape, dtype=np.uint8)
    n_gt = np.empty((len(AREA_RANGES), n_img), dtype=np.int64)
    answer = kernel.evaluate(
        np.ascontiguousarray(dets.boxes, dtype=np.float64),
        det_index,
        det_start,
        np.ascontiguousarray(gt.boxes, dtype=np.float64),
        np.ascontiguousarray(gt.box_image, dtype=np.int64),
        np.ascontiguousarray(gt.areas, dtype=np.float64),
        np.asarray(gt.iscrowd, dtype=bool).astype(np.uint8),
        (np.asarray(gt.ann_ids) != 0).astype(np.uint8),
        AREA_RANGES,
        _THRESHOLDS_CLAMPED,
        float(IOU_THRESHOLDS.min()),
        matched,
        ignored,
        n_gt,
        *at_threshold,
    )
    table = ApTable(
        det_index=det_index,
        det_image=image_of[:n_det],
        det_rank=rank[:n_det],
        scores=scores_all[det_index],
        matched=matched.view(bool),
        ignored=ignored.view(bool),
        n_gt=n_gt,
        order=order[:n_det],
        max_dets=max_dets,
    )
    return table, answer


def precision_at_recall(tp: np.ndarray, fp: np.ndarray, n_pos: int) -> np.ndarray:
    """Interpolated precision (T, R) from score-ordered TP/FP flags, as the reference's accumulate.

    tp, fp: (T, N) bool flags over detections in accumulation order (ignored detections have neither).
    n_pos: number of regular GT (> 0).

    The reference evaluates precision and recall after every detection; we evaluate them after every TP only.
    That is the same result: the first detection whose recall reaches a threshold is a TP, and a point after
    an FP has the recall of the point before it with lower precision, so it never raises the right-to-left
    maximum. The values at TP points are the same integer ratios, hence bit-identical.
    """
    n_thr = tp.shape[0]
    q = np.zeros((n_thr, len(RECALL_THRESHOLDS)))
    for t in range(n_thr):
        tp_pos = np.flatnonzero(tp[t])
        n_tp = len(tp_pos)
        if n_tp == 0:
            continue
        tp_sum = np.arange(1, n_tp + 1, dtype=np.float64)
        fp_sum = np.searchsorted(np.flatnonzero(fp[t]), tp_pos).astype(np.float64)
        rc = tp_sum / n_pos
        pr = tp_sum / (fp_sum + tp_sum + np.spacing(1))
        envelope = np.maximum.accumulate(pr[::-1])[::-1]
        idx = np.searchsorted(rc, RECALL_THRESHOLDS, side="left")
        reached = idx < n_tp
        q[t, reached] = envelope[idx[reached]]
    return q


def summarize(precision: np.ndarray, n_pos: np.ndarray) -> dict[str, float]:
    """The six AP_METRICS from interpolated precision (A, T, R) and regular GT counts (A,); -1 when no GT."""
    thr_50 = np.flatnonzero(IOU_THRESHOLDS == 0.5)
    thr_75 = np.flatnonzero(IOU_THRESHOLDS == 0.75)

    def mean_or_sentinel(a: int, rows: np.ndarray | None = None) -> float:
        if n_pos[a] == 0:
            return -1.0
        block = precision[a] if rows is None else precision[a][rows]
        return float(np.mean(block.ravel()))

    values = (
        mean_or_sentinel(0),
        mean_or_sentinel(0, thr_50),
        mean_or_sentinel(0, thr_75),
        mean_or_sentinel(1),
        mean_or_sentinel(2),
        mean_or_sentinel(3),
    )
    return dict(zip(AP_METRICS, values))


def _expanded_rows(table: ApTable, weights: np.ndarray) -> np.ndarray:
    """Detection rows of the dataset in which image i appears weights[i] times, copies adjacent.

    Rows come out in (image, copy, rank) order, i.e. the concatenation the reference would see if each
    duplicate's image id sorted right after its original.
    """
    det_start = segment_starts(table.det_image, table.n_images)
    n_per_img = np.diff(det_start)
    reps = weights.astype(np.int64)
    block_start = np.repeat(det_start[:-1], reps)
    block_len = np.repeat(n_per_img, reps)
    total = int(block_len.sum())
    offsets = np.repeat(np.cumsum(block_len) - block_len, block_len)
    return np.repeat(block_start, block_len) + (np.arange(total) - offsets)


def check_image_weights(weights, n_images: int) -> np.ndarray:
    """Validate (I,) non-negative integer image weights; returns them as int64."""
    w = np.asarray(weights)
    if w.shape != (n_images,):
        raise AegisError(f"image_weights must have shape ({n_images},); got {w.shape}")
    if w.dtype.kind == "f":
        if not np.isfinite(w).all() or (w != np.round(w)).any():
            raise AegisError("image_weights must be whole numbers (multiplicities); got fractional or non-finite")
    elif w.dtype.kind not in "iub":
        raise AegisError(f"image_weights must be integers; got dtype {w.dtype}")
    w = w.astype(np.int64)
    if (w < 0).any():
        raise AegisError(f"image_weights must be >= 0; got minimum {int(w.min())}")
    return w


def accumulate(table: ApTable, image_weights: np.ndarray | None = None) -> dict[str, float]:
    """The AP_METRICS keys (map50_95, map50, map75, map_small, map_medium, map_large) from an ApTable.

    image_weights: optional (I,) non-negative ints, how many times each image occurs (a bootstrap resample);
    None means each once. A weight of k gives exactly pycocotools' result on the dataset with that image
    duplicated k times (the copies' ids adjacent to the original's); 0 drops the image.
    Values are floats; -1.0 for an area range without regular GT (the reference's sentinel).
    """
    if image_weights is None:
        rows = table.order
        n_pos = table.n_gt.sum(axis=1)
    else:
        w = check_image_weights(image_weights, table.n_images)
        expanded = _expanded_rows(table, w)
        # stable sort of the duplicated concatenation by descending score, as the reference
        rows = expanded[np.argsort(-table.scores[expanded], kind="stable")]
        n_pos = table.n_gt @ w
    precision = np.zeros((len(AREA_RANGES), len(IOU_THRESHOLDS), len(RECALL_THRESHOLDS)))
    kernel = match_kernel()
    if kernel is not None and table.matched.shape[2]:
        # precision_at_recall of every area range and threshold in one pass per row (_cmatch.c)
        kernel.precision(
            np.ascontiguousarray(table.matched).view(np.uint8),
            np.ascontiguousarray(table.ignored).view(np.uint8),
            np.ascontiguousarray(rows, dtype=np.int64),
            np.ascontiguousarray(n_pos, dtype=np.int64),
            RECALL_THRESHOLDS,
            precision,
        )
        return summarize(precision, n_pos)
    for a in range(len(AREA_RANGES)):
        if n_pos[a] == 0:
            continue
        dtm = table.matched[a][:, rows]
        dig = table.ignored[a][:, rows]
        precision[a] = precision_at_recall(dtm & ~dig, ~dtm & ~dig, int(n_pos[a]))
    return summarize(precision, n_pos)


def coco_ap(gt: GroundTruth, dets: Detections, max_dets: int = DEFAULT_MAX_DETS) -> dict[str, float]:
    """COCO AP metrics of one set of detections: ``accumulate(evaluate_images(gt, dets, max_dets))``."""
    return accumulate(evaluate_images(gt, dets, max_dets))
