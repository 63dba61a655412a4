"""Image-level bootstrap of the scoring metrics from cached per-image tables (docs/SCORING.md, "Bootstrap intervals").

A resample is a row of image multiplicities (how many times each image is drawn). Every metric of a resample
comes from tables computed once per condition: thresholded metrics from per-image counts, AP from the
:class:`~aegis_eval.metrics.coco.ApTable`. No COCO evaluation is re-run per resample.

Randomness: one ``aegis_data.engine.seeding.KeyedRandom`` stream keyed by (seed, "bootstrap", number of images, B,
cluster partition); its raw 64-bit words become indices by an unbiased rejection rule of our own, so the draws
do not depend on NumPy's distribution methods and the same options give the same resamples on any machine.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aegis_data.compiled import load_extension
from aegis_data.engine.seeding import KeyedRandom
from aegis_data.errors import AegisError
from aegis_eval.metrics.coco import IOU_THRESHOLDS, RECALL_THRESHOLDS, ApTable, accumulate
from aegis_eval.metrics.matching import PerImageCounts, threshold_rates
from aegis_eval.metrics.result_keys import CI_METRICS

_KEY_VERSION = "aegis-bootstrap/1"
# Resample rows handled together in the AP bootstrap; bounds the (rows, detections) working arrays.
_ROW_CHUNK = 16
_COUNT_FIELDS = ("tp", "fp", "n_gt", "tp_small", "gt_small", "tp_medium", "gt_medium", "tp_large", "gt_large")
_THRESHOLD_CI = tuple(m for m in CI_METRICS if m not in ("map50", "map50_95"))
# The most resamples one run takes: the weight matrix is B x images (a 10**12 request would ask for terabytes);
# percentile intervals are stable long before (docs/SCORING.md).
MAX_BOOTSTRAP = 100_000
# Integers below this are exact in float64, and so is every partial sum of their products that stays below it.
_FLOAT_EXACT = 2**53
# Multiply-adds per block of ResampleRows.totals: below OpenBLAS's threshold for waking its threads (65,536 x 4).
_SINGLE_THREAD_PRODUCT = 200_000
# Counts below this have exact products in float64 (their square is below 2**53): the compiled walk then ranks
# precisions by cross products instead of dividing at every point (_cbootstrap.c, "Walk").
_EXACT_RATIO = 2**26


@dataclass(frozen=True)
class BootstrapOptions:
    """Resampling options, validated on construction (AegisError otherwise).

    n_bootstrap: number of resamples, 1 <= B <= ``MAX_BOOTSTRAP``; B = 1 gives the point estimate only (a
        zero-width interval).
    seed: integer recorded in provenance; part of the key of every draw.
    confidence: coverage of the percentile interval, strictly between 0 and 1.
    """

    n_bootstrap: int = 1000
    seed: int = 0
    confidence: float = 0.95

    def __post_init__(self) -> None:
        b = self.n_bootstrap
        if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b < 1:
            raise AegisError(f"`n_bootstrap` must be an integer >= 1; got {b!r}", param="n_bootstrap")
        if b > MAX_BOOTSTRAP:
            raise AegisError(f"`n_bootstrap` is at most {MAX_BOOTSTRAP:,} resamples; got {b:,}", param="n_bootstrap")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)):
            raise AegisError(f"`seed` must be an integer; got {self.seed!r}", param="seed")
        c = self.confidence
        if (
            isinstance(c, bool)
            or not isinstance(c, (int, float, np.floating))
            or not math.isfinite(c)
            or not 0.0 < c < 1.0
        ):
            raise AegisError(f"`confidence` must be a number strictly between 0 and 1; got {c!r}", param="confidence")


def _cluster_structure(n_images: int, clusters: np.ndarray | None) -> tuple[np.ndarray | None, int, str]:
    """(cluster index per image or None, number of units to draw, signature for the key)."""
    if clusters is None:
        return None, n_images, "none"
    labels = np.asarray(clusters)
    if labels.shape != (n_images,):
        raise AegisError(
            f"`clusters` must have one label per image, shape ({n_images},); got {labels.shape}", param="clusters"
        )
    if labels.dtype.kind not in "iu":
        raise AegisError(f"cluster labels must be integers; got dtype {labels.dtype}")
    _, first_index, inverse = np.unique(labels, return_index=True, return_inverse=True)
    # The partition, not the label values, identifies the resampling: number clusters by first appearance.
    relabel = np.empty(len(first_index), dtype=np.int64)
    relabel[np.argsort(first_index)] = np.arange(len(first_index))
    canonical = relabel[inverse.reshape(-1)]
    signature = hashlib.sha256(canonical.astype("<i8").tobytes()).hexdigest()
    return canonical, int(canonical.max()) + 1, signature


def _keyed_indices(key: str, n: int, count: int) -> np.ndarray:
    """``count`` uniform integers in [0, n) from the keyed stream ``key`` (``aegis_data.engine.seeding``).

    Raw 64-bit words are reduced with ``% n`` after rejecting the top ``2**64 mod n`` values, so every index is
    exactly equally likely and the result depends only on the raw stream.
    """
    stream = KeyedRandom(key)
    span = 2**64
    limit = (span // n) * n
    parts: list[np.ndarray] = []
    got = 0
    while got < count:
        raw = stream.bits(count - got)
        if limit < span:
            raw = raw[raw < np.uint64(limit)]
        parts.append((raw % np.uint64(n)).astype(np.int64))
        got += len(raw)
    return np.concatenate(parts)[:count] if parts else np.zeros(0, dtype=np.int64)


def resample_weights(n_images: int, options: BootstrapOptions, clusters: np.ndarray | None = None) -> np.ndarray:
    """(B, I) int32 matrix; row b holds how many times each image occurs in resample b.

    Without clusters, each row draws I images with replacement. With clusters ((I,) integer labels), each row
    draws the C clusters with replacement and every image takes its cluster's multiplicity, so clusters stay
    whole. B = 1 returns a single row of ones: the point estimate.
    The draws are keyed by (seed, "bootstrap", n_images, B, cluster partition): identical options give
    identical rows anywhere; the row order is part of the contract (paired intervals rely on it).
    """
    if isinstance(n_images, bool) or not isinstance(n_images, (int, np.integer)) or n_images < 1:
        raise AegisError(f"cannot resample {n_images!r} images; expected an integer >= 1")
    n_images = int(n_images)
    inverse, n_units, signature = _cluster_structure(n_images, clusters)
    b = int(options.n_bootstrap)
    if b == 1:
        return np.ones((1, n_images), dtype=np.int32)
    key = f"{_KEY_VERSION}|{int(options.seed)}|bootstrap|{n_images}|{b}|{signature}"
    draws = _keyed_indices(key, n_units, b * n_units).reshape(b, n_units)
    flat = draws + (np.arange(b, dtype=np.int64) * n_units)[:, None]
    unit_counts = np.bincount(flat.ravel(), minlength=b * n_units).reshape(b, n_units)
    weights = unit_counts if inverse is None else unit_counts[:, inverse]
    return weights.astype(np.int32)


def resample_seeds(n_seeds: int, options: BootstrapOptions) -> np.ndarray:
    """(B, S) int64 matrix; row b lists the S training seeds (as indices) drawn with replacement in resample b.

    The outer level of a two-level bootstrap over training runs (``aegis_eval.protocols.mitigation.combined_gains``):
    row b is paired with row b of ``resample_weights``, so resample b draws seeds, then images. Keyed by
    (seed, "training-seeds", S, B) in the bootstrap namespace; B = 1 returns every seed once (the point estimate).
    """
    if isinstance(n_seeds, bool) or not isinstance(n_seeds, (int, np.integer)) or n_seeds < 1:
        raise AegisError(f"cannot resample {n_seeds!r} training seeds; expected an integer >= 1")
    n, b = int(n_seeds), int(options.n_bootstrap)
    if b == 1:
        return np.arange(n, dtype=np.int64)[None, :]
    key = f"{_KEY_VERSION}|{int(options.seed)}|training-seeds|{n}|{b}"
    return _keyed_indices(key, n, b * n).reshape(b, n).astype(np.int64)


def _check_weights(weights: np.ndarray, n_images: int) -> np.ndarray:
    w = np.asarray(weights)
    if w.ndim != 2 or w.shape[1] != n_images:
        raise AegisError(f"bootstrap weights must have shape (B, {n_images}); got {w.shape}")
    if w.dtype.kind not in "iu":
        raise AegisError(f"bootstrap weights must be integer multiplicities; got dtype {w.dtype}")
    if w.size and w.min() < 0:
        raise AegisError("bootstrap weights must be >= 0")
    return w.astype(np.int64)


class ResampleRows:
    """One bootstrap weight matrix (B, I), checked once and laid out once for every table scored with it.

    A sweep scores every condition (and every class) on the same resample rows, against the same ground truth; this
    holds what those scorings share instead of rebuilding it per condition: the checked int64 multiplicities, the
    transposed, lane-padded float copy the compiled AP bootstrap walks, and, per GT column, the weighted GT totals
    and the TP counts each recall threshold needs. :func:`bootstrap_samples` and :func:`bootstrap_ap` take it
    wherever they take a weight matrix, with the same results.
    """

    def __init__(self, weights: np.ndarray, n_images: int | None = None) -> None:
        w = np.asarray(weights)
        self.weights = _check_weights(w, w.shape[1] if n_images is None and w.ndim == 2 else int(n_images or 0))
        self.n_rows, self.n_images = self.weights.shape
        self._lanes: dict[tuple[int, bytes], tuple[np.ndarray, int]] = {}
        self._row_sum_max: int | None = None
        self._float_weights: np.ndarray | None = None
        self._need: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

    def check(self, n_images: int) -> ResampleRows:
        if self.n_images != n_images:
            raise AegisError(f"bootstrap weights must have shape (B, {n_images}); got {self.weights.shape}")
        return self

    def totals(self, columns: np.ndarray) -> np.ndarray:
        """(B, K) int64 weighted totals of the (I, K) integer per-image columns, exact.

        Where every total stays below 2**53 the product runs in float64, where it is exact too, in blocks of rows
        small enough that BLAS keeps each on the calling thread (a whole-matrix call wakes BLAS threads that keep
        spinning on a shared machine): 3-6x faster than NumPy's integer loop, which runs otherwise (measured with
        B = 200-1000, 300-3000 images, 7-11 columns)."""
        c = np.asarray(columns, dtype=np.int64)
        if c.ndim != 2 or not c.size or not self.n_rows:
            return self.weights @ c
        if self._row_sum_max is None:
            self._row_sum_max = int(self.weights.sum(axis=1).max())
        if self._row_sum_max * int(np.abs(c).max()) >= _FLOAT_EXACT:
            return self.weights @ c
        if self._float_weights is None:
            self._float_weights = self.weights.astype(np.float64)
        cf = c.astype(np.float64)
        out = np.empty((self.n_rows, c.shape[1]))
        step = max(1, _SINGLE_THREAD_PRODUCT // (c.shape[1] * self.n_images))
        for r in range(0, self.n_rows, step):
            np.matmul(self._float_weights[r : r + step], cf, out=out[r : r + step])
        return out.astype(np.int64)

    def positives(self, n_gt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(weighted GT count per row (B,), required TP counts (B, R) of the rows that have GT), per GT column."""
        key = np.ascontiguousarray(n_gt, dtype=np.int64).tobytes()
        if key not in self._need:
            n_pos = self.totals(np.asarray(n_gt, dtype=np.int64)[:, None])[:, 0]
            live = n_pos > 0
            need = _required_tp(n_pos[live]) if live.any() else np.zeros((0, len(RECALL_THRESHOLDS)), np.int64)
            self._need[key] = (n_pos, need)
        return self._need[key]

    def lanes(self, live: np.ndarray, lane_width: int) -> tuple[np.ndarray, int]:
        """(padded rows / lane_width, I, lane_width) float64 weights of the ``live`` rows, padded with zero rows to
        whole lanes: each group of lane_width rows transposed into one contiguous block (the compiled walk reads one
        group at a time)."""
        key = (lane_width, np.packbits(live).tobytes())
        if key not in self._lanes:
            rows = int(live.sum())
            padded = -(-rows // lane_width) * lane_width
            w = np.zeros((padded, self.n_images))
            w[:rows] = self.weights if rows == self.n_rows else self.weights[live]
            wt = np.ascontiguousarray(w.reshape(padded // lane_width, lane_width, self.n_images).transpose(0, 2, 1))
            self._lanes = {key: (wt, padded)}  # one layout at a time: a sweep asks for the same one throughout
        return self._lanes[key]


def _rows(weights: np.ndarray | ResampleRows, n_images: int) -> ResampleRows:
    return weights.check(n_images) if isinstance(weights, ResampleRows) else ResampleRows(weights, n_images)


def _required_tp(n_pos: np.ndarray) -> np.ndarray:
    """(B, R) smallest TP count n with ``n / n_pos >= r`` in float64, per recall threshold r.

    Evaluated with the same division the reference uses for recall, so the first detection whose recall
    reaches r is found exactly. n_pos: (B,) int64 > 0.
    """
    npos = n_pos.astype(np.float64)[:, None]
    guess = np.ceil(RECALL_THRESHOLDS[None, :] * npos).astype(np.int64)
    # the float test differs from the exact one by at most one count; scan a margin of two each side
    fails = np.zeros_like(guess)
    for delta in range(-2, 3):
        c = guess + delta
        with np.errstate(divide="ignore", invalid="ignore"):
            ok = (c >= 0) & ((c > n_pos[:, None]) | (c.astype(np.float64) / npos >= RECALL_THRESHOLDS[None, :]))
        fails += ~ok
    return guess - 2 + fails


@dataclass(frozen=True)
class _ThresholdPlan:
    """Static layout of one IoU threshold's detections in accumulation order (shared by all resamples).

    Precision can only peak right after a TP, and inside a run of TPs with no FP between them precision only
    rises, so only the last TP of each run needs evaluating. A run of TPs is what the reference sees for the
    copies of one detection, or of a tie block (equal-score detections of one image) holding TPs only, so those
    need nothing special. A *mixed* tie block (TPs and FPs of one image at one score) is different: the
    reference repeats the whole block once per copy of its image, so its points are built per copy (``blk_*``).
    """

    tp_image: np.ndarray  # (P,) image row of every TP detection, in order
    run_end: np.ndarray  # (E,) index into the TP list of the last TP of each run outside mixed blocks
    end_position: np.ndarray  # (E,) position of those TPs in the accumulation order
    ig_image: np.ndarray  # (Q,) image row of every ignored detection, in order
    ig_before: np.ndarray  # (E,) ignored detections before each run end
    blk_image: np.ndarray  # (M,) image of each mixed tie block
    blk_start: np.ndarray  # (M,) position of its first detection
    blk_tp_before: np.ndarray  # (M,) TP detections before it (index into the TP list)
    blk_ig_before: np.ndarray  # (M,) ignored detections before it
    blk_tp: np.ndarray  # (M,) TPs in the block
    blk_fp: np.ndarray  # (M,) FPs in the block
    pt_block: np.ndarray  # (L,) block of each in-block point (a TP followed by an FP of the block, or last)
    pt_tp: np.ndarray  # (L,) TPs of the block up to and including that TP
    pt_fp: np.ndarray  # (L,) FPs of the block before it
    pt_last: np.ndarray  # (M,) index into the points of each block's last point


def _threshold_plans(table: ApTable) -> list[_ThresholdPlan]:
    order = table.order
    det_img = table.det_image[order]
    scores = table.scores[order]
    n = len(order)
    new_block = np.ones(n, dtype=bool)
    new_block[1:] = (scores[1:] != scores[:-1]) | (det_img[1:] != det_img[:-1])
    block_id = np.cumsum(new_block) - 1
    block_start = np.flatnonzero(new_block)
    plans = []
    for t in range(len(IOU_THRESHOLDS)):
        ignored = table.ignored[0][t][order]
        tp = table.matched[0][t][order] & ~ignored
        fp = ~table.matched[0][t][order] & ~ignored
        mixed_block = (np.bincount(block_id, tp, len(block_start)) > 0) & (
            np.bincount(block_id, fp, len(block_start)) > 0
        )
        in_mixed = mixed_block[block_id]
        counted = np.flatnonzero(~ignored)
        tp_c, mixed_c, block_c = tp[counted], in_mixed[counted], block_id[counted]
        nxt_tp = np.concatenate([tp_c[1:], [False]])
        nxt_mixed = np.concatenate([mixed_c[1:], [False]])
        end_position = counted[tp_c & ~mixed_c & ~(nxt_tp & ~nxt_mixed)]
        same_block_next = np.concatenate([block_c[1:] == block_c[:-1], [False]])
        pt_position = counted[tp_c & mixed_c & ~(nxt_tp & same_block_next)]

        tp_position = np.flatnonzero(tp)
        ig_position = np.flatnonzero(ignored)
        blocks = np.flatnonzero(mixed_block)
        starts = block_start[blocks]
        cum_tp = np.concatenate([[0], np.cumsum(tp)])  # cum_tp[p] = TPs before position p
        cum_fp = np.concatenate([[0], np.cumsum(fp)])
        ends = np.append(block_start, n)[blocks + 1]
        pt_block = np.searchsorted(blocks, block_id[pt_position])
        pt_last = np.searchsorted(pt_block, np.arange(len(blocks)), side="right") - 1
        plans.append(
            _ThresholdPlan(
                tp_image=det_img[tp_position],
                run_end=np.searchsorted(tp_position, end_position),
                end_position=end_position,
                ig_image=det_img[ig_position],
                ig_before=np.searchsorted(ig_position, end_position),
                blk_image=det_img[starts],
                blk_start=starts,
                blk_tp_before=cum_tp[starts],
                blk_ig_before=np.searchsorted(ig_position, starts),
                blk_tp=cum_tp[ends] - cum_tp[starts],
                blk_fp=cum_fp[ends] - cum_fp[starts],
                pt_block=pt_block,
                pt_tp=cum_tp[pt_position + 1] - cum_tp[starts][pt_block],
                pt_fp=cum_fp[pt_position] - cum_fp[starts][pt_block],
                pt_last=pt_last,
            )
        )
    return plans


def _point_order(plan: _ThresholdPlan, copies: int) -> np.ndarray:
    """Permutation putting [run ends, block points (point, copy)] into sequence order.

    Block points sort at their block's start, then by copy, then by point: the reference's repeated block.
    """
    n_pt = len(plan.pt_block)
    pos = np.concatenate([plan.end_position, np.repeat(plan.blk_start[plan.pt_block], copies)])
    copy = np.concatenate([np.zeros(len(plan.end_position), np.int64), np.tile(np.arange(copies), n_pt)])
    point = np.concatenate([np.zeros(len(plan.end_position), np.int64), np.repeat(np.arange(n_pt), copies)])
    return np.lexsort((point, copy, pos))


def _block_points(
    plan: _ThresholdPlan,
    w: np.ndarray,
    cum_tp_full: np.ndarray,
    all_before: np.ndarray,
    cum_ig: np.ndarray | None,
    copies: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(TP, FP) counts (rows, L * copies) at every point of every mixed tie block, copy by copy.

    Copies beyond an image's weight repeat the block's final point (or the state before the block when the
    weight is 0), which keeps counts monotone and adds no new point. all_before: (rows, M) weighted count of
    all detections before each block.
    """
    rows = w.shape[0]
    before = plan.blk_tp_before
    t0 = np.where(before > 0, cum_tp_full[:, np.maximum(before - 1, 0)], 0.0)
    ig0 = 0.0 if cum_ig is None else cum_ig[:, plan.blk_ig_before]
    f0 = all_before - t0 - ig0  # (rows, M)
    k = w[:, plan.blk_image]  # (rows, M) copies of each block's image
    b = plan.pt_block
    j = np.arange(copies, dtype=np.float64)[None, None, :]
    kb = k[:, b][:, :, None]
    valid = j < kb
    last = plan.pt_last[b]
    full_tp = (kb - 1) * plan.blk_tp[b][None, :, None] + plan.pt_tp[last][None, :, None]
    full_fp = (kb - 1) * plan.blk_fp[b][None, :, None] + plan.pt_fp[last][None, :, None]
    tp_in = np.where(valid, j * plan.blk_tp[b][None, :, None] + plan.pt_tp[None, :, None], full_tp)
    fp_in = np.where(valid, j * plan.blk_fp[b][None, :, None] + plan.pt_fp[None, :, None], full_fp)
    tp_in = np.where(kb > 0, tp_in, 0.0)
    fp_in = np.where(kb > 0, fp_in, 0.0)
    tp = t0[:, b][:, :, None] + tp_in
    fp = f0[:, b][:, :, None] + fp_in
    return tp.reshape(rows, -1), fp.reshape(rows, -1)


def bootstrap_ap(weights: np.ndarray | ResampleRows, table: ApTable) -> dict[str, np.ndarray]:
    """Per-resample AP50 and AP (IoU .50:.95), area "all", ``table.max_dets`` detections per image.

    weights: (B, I) non-negative ints. Returns {"map50": (B,), "map50_95": (B,)} float64, NaN for a resample
    without regular GT (where pycocotools reports -1). Row b equals
    ``accumulate(table, weights[b])`` (pycocotools on the data with each image repeated weights[b, i] times).

    Method: along the score order only the points after the last TP of a run of TPs can carry the
    interpolated precision (an FP lowers precision at unchanged recall; a further TP raises both), so per
    resample we need the weighted cumulative TP and FP counts at those run ends only (see ``_ThresholdPlan``);
    FP counts come from one weighted cumulative sum over all detections.
    """
    shared = _rows(weights, table.n_images)
    w_all = shared.weights
    n_rows = w_all.shape[0]
    compiled = load_extension("aegis_eval.metrics._cbootstrap", "AP bootstrap")
    if compiled is not None:
        return _compiled_ap(compiled, shared, table)
    det_img = table.det_image[table.order]
    plans = _threshold_plans(table)
    copies = _copies(w_all, [p.blk_image for p in plans])
    slots = _block_slots(plans, copies)
    n_pos_all = w_all @ table.n_gt[0]
    t50 = np.flatnonzero(IOU_THRESHOLDS == 0.5)

    out50 = np.full(n_rows, np.nan)
    out = np.full(n_rows, np.nan)
    # float64 holds every count exactly (< 2**53) and is what the precision formula needs anyway.
    w_float = w_all.astype(np.float64)
    columns, end_col, blk_col = _count_columns(plans)
    running = np.empty((_ROW_CHUNK, len(det_img)))
    for r0 in range(0, n_rows, _ROW_CHUNK):
        n_pos = n_pos_all[r0 : r0 + _ROW_CHUNK]
        live = np.flatnonzero(n_pos > 0)
        if len(live) == 0:
            continue
        rows = len(live)
        w = w_float[r0 + live]  # (rows, I)
        n_pos = n_pos[live]
        np.take(w, det_img, axis=1, out=running[:rows])
        np.cumsum(running[:rows], axis=1, out=running[:rows])
        cum_all = running[:rows][:, columns]
        q = _chunk_precisions(plans, slots, copies, w, cum_all, end_col, blk_col, n_pos)
        target = live + r0
        out50[target] = q[:, t50].reshape(rows, -1).mean(axis=1)
        out[target] = q.reshape(rows, -1).mean(axis=1)
    return {"map50": out50, "map50_95": out}


def _copies(weights: np.ndarray, block_images: list[np.ndarray]) -> list[int]:
    """Copies to lay out per threshold for its mixed tie blocks: the largest weight any of their images gets."""
    return [int(weights[:, b].max()) if len(b) and len(weights) else 0 for b in block_images]


def _compiled_ap(compiled: Any, shared: ResampleRows, table: ApTable) -> dict[str, np.ndarray]:
    """:func:`bootstrap_ap` through the C extension (``_cbootstrap.c``): the same points, counts and precisions as
    the NumPy code below, every resample row at once, rows innermost; the means over recall thresholds are
    NumPy's, on the same (rows, T, R) layout, so the values are identical (tests compare both)."""
    n_rows = shared.n_rows
    out50 = np.full(n_rows, np.nan)
    out = np.full(n_rows, np.nan)
    n_pos_all, need_live = shared.positives(table.n_gt[0])
    live = n_pos_all > 0
    rows = int(live.sum())
    if rows == 0:
        return {"map50": out50, "map50_95": out}
    weights_t, padded = shared.lanes(live, compiled.lanes())
    need = np.zeros((padded, len(RECALL_THRESHOLDS)))
    need[:rows] = need_live
    det_img, flags, per_image, blocks = _walk_inputs(table, compiled)
    # weighted totals per row: all kept detections, each threshold's TPs, its ignored detections
    totals = np.zeros((per_image.shape[1], padded))
    totals[:, :rows] = shared.totals(per_image)[live].T
    copies = _copies(shared.weights, [b[0] for b in blocks])
    packed = tuple((*b, c) for b, c in zip(blocks, copies))
    q = np.empty((padded, len(IOU_THRESHOLDS), len(RECALL_THRESHOLDS)))
    # every count is at most the row's weighted total of kept detections: below 2**26.5 their cross products are exact
    exact = bool(totals[0].max(initial=0.0) < _EXACT_RATIO)
    args = (
        q,
        weights_t,
        padded,
        table.n_images,
        np.ascontiguousarray(det_img, dtype=np.int64),
        flags,
        totals,
        need,
        len(RECALL_THRESHOLDS),
        packed,
    )
    # Rows are independent and the extension releases the GIL: disjoint row ranges run on the machine's cores
    # (the values do not depend on the split).
    lanes = compiled.lanes()
    n_chunks = padded // lanes
    workers = min(n_chunks, _cores())
    bounds = [lanes * (n_chunks * k // workers) for k in range(workers + 1)]
    if workers <= 1:
        compiled.ap_precisions(*args, 0, padded, exact)
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(lambda k: compiled.ap_precisions(*args, bounds[k], bounds[k + 1], exact), range(workers)))
    q = q[:rows]
    t50 = np.flatnonzero(IOU_THRESHOLDS == 0.5)
    out50[live] = q[:, t50].reshape(rows, -1).mean(axis=1)
    out[live] = q.reshape(rows, -1).mean(axis=1)
    return {"map50": out50, "map50_95": out}


def _cores() -> int:
    """CPU cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # no affinity call on this platform
        return max(1, os.cpu_count() or 1)


def _position_flags(table: ApTable, plans: list[_ThresholdPlan]) -> tuple[np.ndarray, np.ndarray]:
    """What the compiled walk reads per position of the accumulation order, and the per-image counts its totals
    come from. flags (D,) uint64: bit t of the low 16 bits = TP at threshold t, of the next 16 = ignored, then run
    end, then start of a mixed tie block. per_image (I, 1 + 2T) int64: kept detections, TPs per threshold, ignored
    per threshold."""
    order = table.order
    n, n_thr = len(order), len(plans)
    det_img = table.det_image[order]
    flags = np.zeros(n, np.uint64)
    per_image = np.zeros((table.n_images, 1 + 2 * n_thr), np.int64)
    per_image[:, 0] = np.bincount(det_img, minlength=table.n_images)
    for t, plan in enumerate(plans):
        ignored = table.ignored[0][t][order]
        tp = table.matched[0][t][order] & ~ignored
        bit = np.uint64(1 << t)
        flags[tp] |= bit
        flags[ignored] |= bit << np.uint64(16)
        flags[plan.end_position] |= bit << np.uint64(32)
        flags[plan.blk_start] |= bit << np.uint64(48)
        per_image[:, 1 + t] = np.bincount(det_img[tp], minlength=table.n_images)
        per_image[:, 1 + n_thr + t] = np.bincount(det_img[ignored], minlength=table.n_images)
    return flags, per_image


def _packed_blocks(plan: _ThresholdPlan) -> tuple[np.ndarray, ...]:
    """One threshold's mixed tie blocks as the C extension reads them: 7 int64 arrays (blk_image, blk_start, blk_tp,
    blk_fp, pt_start (M + 1: where each block's points begin, then their count), pt_tp, pt_fp)."""
    pt_start = np.searchsorted(plan.pt_block, np.arange(len(plan.blk_image) + 1))
    arrays = (plan.blk_image, plan.blk_start, plan.blk_tp, plan.blk_fp, pt_start, plan.pt_tp, plan.pt_fp)
    return tuple(np.ascontiguousarray(a, dtype=np.int64) for a in arrays)


def _walk_inputs(
    table: ApTable, compiled: Any = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[np.ndarray, ...]]]:
    """What the compiled walk reads: (D,) image of each position of the accumulation order, the (D,) flags and
    (I, 1 + 2T) per-image counts of :func:`_position_flags`, and per threshold its mixed tie blocks
    (:func:`_packed_blocks`). Defined by the NumPy code (``compiled`` None); the extension's ``walk_inputs`` builds
    the same arrays in one pass over the table (tests/eval/metrics/test_bootstrap_walk.py compares them)."""
    order = np.ascontiguousarray(table.order, dtype=np.int64)
    if compiled is None:
        plans = _threshold_plans(table)
        flags, per_image = _position_flags(table, plans)
        return table.det_image[order], flags, per_image, [_packed_blocks(p) for p in plans]
    n_thr = table.matched.shape[1]
    det_img = np.empty(len(order), np.int64)
    flags = np.zeros(len(order), np.uint64)
    per_image = np.zeros((table.n_images, 1 + 2 * n_thr), np.int64)
    blocks = compiled.walk_inputs(
        order,
        np.ascontiguousarray(table.det_image, dtype=np.int64),
        np.ascontiguousarray(table.scores, dtype=np.float64),
        np.ascontiguousarray(table.matched[0], dtype=bool).view(np.uint8),
        np.ascontiguousarray(table.ignored[0], dtype=bool).view(np.uint8),
        n_thr,
        table.n_images,
        det_img,
        flags,
        per_image,
    )
    return det_img, flags, per_image, [tuple(np.frombuffer(a, np.int64) for a in b) for b in blocks]


def _block_slots(plans: list, copies: list[int]) -> list[tuple[np.ndarray, np.ndarray] | None]:
    """Per IoU threshold: where its run ends and mixed-block points go in the merged, sequence-ordered point
    list (None without mixed blocks)."""
    slots: list[tuple[np.ndarray, np.ndarray] | None] = []
    for p, c in zip(plans, copies):
        if not c:
            slots.append(None)
            continue
        order = _point_order(p, c)
        place = np.empty_like(order)
        place[order] = np.arange(len(order))
        slots.append((place[: len(p.end_position)], place[len(p.end_position) :]))
    return slots


def _count_columns(plans: list) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]:
    """The running count of all detections is read only at run ends and before mixed blocks: the columns to
    keep, and per threshold the positions of its run ends and block starts among them."""
    wanted = [(p.end_position, np.maximum(p.blk_start - 1, 0)) for p in plans]
    columns = np.unique(np.concatenate([np.concatenate(pair) for pair in wanted] + [np.zeros(0, np.int64)]))
    end_col = [np.searchsorted(columns, e) for e, _ in wanted]
    blk_col = [np.searchsorted(columns, b) for _, b in wanted]
    return columns, end_col, blk_col


def _chunk_precisions(
    plans: list,
    slots: list,
    copies: list[int],
    w: np.ndarray,
    cum_all: np.ndarray,
    end_col: list,
    blk_col: list,
    n_pos: np.ndarray,
) -> np.ndarray:
    """(rows, T, R) interpolated precision at every recall threshold for one chunk of resample rows."""
    rows = w.shape[0]
    n_thr, n_rec = len(IOU_THRESHOLDS), len(RECALL_THRESHOLDS)
    need = _required_tp(n_pos).astype(np.float64)  # (rows, R)
    # row-wise searchsorted below: each row is shifted into its own disjoint range of counts
    offset = (np.arange(rows) * float(n_pos.max() + 1))[:, None]
    targets = (need + offset).ravel()
    q = np.zeros((rows, n_thr, n_rec))
    for t, plan in enumerate(plans):
        cum_tp_full = w[:, plan.tp_image]
        np.cumsum(cum_tp_full, axis=1, out=cum_tp_full)
        tp = cum_tp_full[:, plan.run_end]  # (rows, E)
        fp = cum_all[:, end_col[t]]
        fp -= tp
        cum_ig = None
        if len(plan.ig_image):
            cum_ig = np.concatenate([np.zeros((rows, 1)), np.cumsum(w[:, plan.ig_image], axis=1)], axis=1)
            fp -= cum_ig[:, plan.ig_before]
        if slots[t] is not None:
            all_before = np.where(plan.blk_start > 0, cum_all[:, blk_col[t]], 0.0)
            tp_b, fp_b = _block_points(plan, w, cum_tp_full, all_before, cum_ig, copies[t])
            n_e = tp.shape[1] + tp_b.shape[1]
            merged_tp, merged_fp = np.empty((rows, n_e)), np.empty((rows, n_e))
            merged_tp[:, slots[t][0]], merged_tp[:, slots[t][1]] = tp, tp_b
            merged_fp[:, slots[t][0]], merged_fp[:, slots[t][1]] = fp, fp_b
            tp, fp = merged_tp, merged_fp
        if tp.shape[1]:
            q[:, t] = _precision_at_recalls(tp, fp, offset, targets)
    return q


def _precision_at_recalls(tp: np.ndarray, fp: np.ndarray, offset: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """(rows, R) interpolated precision from the (rows, E) cumulative TP/FP counts at the candidate points
    (both overwritten): the envelope's value at the first point reaching each required TP count, 0 if none."""
    rows, n_e = tp.shape
    eps = np.spacing(1)
    # pr = tp / (fp + tp + eps), the reference's expression and order, computed in place
    pr = np.add(fp, tp, out=fp)
    pr += eps
    np.divide(tp, pr, out=pr)
    envelope = np.maximum.accumulate(pr[:, ::-1], axis=1)[:, ::-1]
    # first point reaching the required TP count, per row
    tp += offset
    idx = np.searchsorted(tp.ravel(), targets, side="left").reshape(rows, -1)
    idx -= (np.arange(rows) * n_e)[:, None]
    reached = idx < n_e
    picked = np.take_along_axis(envelope, np.minimum(idx, n_e - 1), axis=1)
    return np.where(reached, picked, 0.0)


def bootstrap_samples(
    weights: np.ndarray | ResampleRows,
    ap_table: ApTable,
    counts: PerImageCounts,
    point_ap: Mapping[str, float] | None = None,
) -> dict[str, np.ndarray]:
    """Per-resample values (B,) of every CI_METRICS key (precision, recall, f1, fp_per_image, map50, map50_95).

    weights: (B, I) from :func:`resample_weights`. ap_table: the condition's ApTable. counts: its
    ``aegis_eval.metrics.matching.PerImageCounts`` at the frozen threshold. Thresholded metrics are
    ``threshold_rates`` of the weighted totals (NaN where undefined); AP as :func:`bootstrap_ap`.
    point_ap: the table's ``coco.accumulate`` values when the caller has them: the single row of ones (B = 1, the
    point estimate) then takes them instead of walking the table again.
    """
    shared = _rows(weights, ap_table.n_images)
    if counts.n_images != ap_table.n_images:
        raise AegisError(
            f"per-image counts cover {counts.n_images} images but the AP table covers "
            f"{ap_table.n_images}; both must come from the same ground truth"
        )
    columns = [np.asarray(getattr(counts, name), dtype=np.int64) for name in _COUNT_FIELDS]
    columns += [(np.asarray(counts.fp) > 0).astype(np.int64), np.ones(ap_table.n_images, np.int64)]
    point = shared.n_rows == 1 and bool((shared.weights == 1).all())
    # the row of ones sums each column: the same exact integers as the product
    summed = np.column_stack(columns).sum(axis=0)[None, :] if point else shared.totals(np.column_stack(columns))
    totals = {name: summed[:, k] for k, name in enumerate(_COUNT_FIELDS)}
    rates = threshold_rates(n_images=summed[:, -1], images_with_fp=summed[:, -2], **totals)
    samples = {m: np.asarray(rates[m], dtype=np.float64) for m in _THRESHOLD_CI}
    samples.update(_point_ap(ap_table, point_ap) if point else bootstrap_ap(shared, ap_table))
    return {m: samples[m] for m in CI_METRICS}


def _point_ap(table: ApTable, ap: Mapping[str, float] | None) -> dict[str, np.ndarray]:
    """:func:`bootstrap_ap` of the single row of ones: the table's own AP (the same precisions, averaged over the
    same contiguous layout), NaN without GT as a resample without GT. tests/eval/metrics compare both."""
    if int(np.asarray(table.n_gt[0]).sum()) == 0:
        return {"map50": np.full(1, np.nan), "map50_95": np.full(1, np.nan)}
    if ap is None:
        ap = accumulate(table)
    return {"map50": np.array([float(ap["map50"])]), "map50_95": np.array([float(ap["map50_95"])])}


def percentile_interval(samples: np.ndarray, confidence: float = 0.95) -> tuple[float | None, float | None]:
    """Percentile-method interval of bootstrap samples: the (1-c)/2 and (1+c)/2 quantiles (linear), NaNs ignored.

    Returns (None, None) when every sample is NaN (the metric is undefined in every resample).
    """
    if not 0.0 < confidence < 1.0:
        raise AegisError(f"`confidence` must be strictly between 0 and 1; got {confidence!r}", param="confidence")
    values = np.asarray(samples, dtype=np.float64).ravel()
    values = values[~np.isnan(values)]
    if values.size == 0:
        return None, None
    lo, hi = linear_quantiles(values, np.array([50.0 * (1.0 - confidence), 50.0 * (1.0 + confidence)]) / 100)
    return float(lo), float(hi)


def linear_quantiles(values: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``np.quantile(values, q)`` (method "linear") of a 1-D float64 array without NaN, for ``q`` in [0, 1], bit for
    bit: the same floating-point steps as NumPy's (virtual index ``(n - 1) q``, its neighbours, the partition, and
    the lerp that counts from the nearer end). Written out because ``np.percentile`` calls ``np.unique``, whose first
    call imports ``numpy.ma`` (4 ms of a one-condition score's 0.21 s, measured over 30 processes).
    ``tests/eval/metrics/test_bootstrap.py`` holds it to ``np.percentile``."""
    n = values.size
    virtual = (n - 1) * q
    floor = np.floor(virtual)
    above = virtual >= n - 1  # at or past the last value: both neighbours are the last
    floor[above] = -1
    previous = floor.astype(np.intp)
    following = np.where(above, -1, previous + 1)
    arr = values.copy()
    arr.partition(np.array(sorted({0, -1, *previous.tolist(), *following.tolist()}), dtype=np.intp))
    a, b = arr[previous], arr[following]
    gamma = virtual - previous
    diff = b - a
    out = a + diff * gamma
    np.subtract(b, diff * (1 - gamma), out=out, where=gamma >= 0.5)
    return out


def intervals(samples: Mapping[str, np.ndarray], confidence: float = 0.95) -> dict[str, list[float | None]]:
    """{metric: [lo, hi]} percentile intervals for every metric in ``samples``."""
    return {name: list(percentile_interval(values, confidence)) for name, values in samples.items()}


def paired_drop_intervals(
    clean_samples: Mapping[str, np.ndarray], cond_samples: Mapping[str, np.ndarray], confidence: float = 0.95
) -> dict[str, list[float | None]]:
    """{metric: [lo, hi]} intervals of the relative drop (clean - condition) / clean, paired per resample.

    Both sample sets must come from the SAME weight matrix over the SAME image set (row b of each is the same
    resample of images), which holds when every condition is scored against one GroundTruth with one
    :func:`resample_weights` call. Resamples where the clean value is 0 or NaN give NaN and are skipped.
    Metrics present in only one of the two are left out.
    """
    out: dict[str, list[float | None]] = {}
    for name, clean in clean_samples.items():
        if name not in cond_samples:
            continue
        c = np.asarray(clean, dtype=np.float64)
        x = np.asarray(cond_samples[name], dtype=np.float64)
        if c.shape != x.shape:
            raise AegisError(
                f"paired samples of {name!r} differ in shape: clean {c.shape}, condition {x.shape}; "
                "both must use the same bootstrap weights"
            )
        out[name] = list(percentile_interval(relative_to_clean(c - x, c), confidence))
    return out


def relative_to_clean(numerator: np.ndarray, clean: np.ndarray) -> np.ndarray:
    """numerator / clean per resample (a drop ``clean - x`` gives the relative drop); NaN where clean is 0 or
    undefined."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((clean != 0) & ~np.isnan(clean), numerator / np.where(clean != 0, clean, 1.0), np.nan)


def nanmean_rows(rows: Sequence[np.ndarray]) -> np.ndarray:
    """Mean of equal-length rows per resample (column), skipping NaN; NaN where a column has no value. The
    values of ``np.nanmean(np.stack(rows), axis=0)`` (same sums, same order), without its all-NaN warning."""
    arr = np.vstack([np.asarray(r, dtype=np.float64) for r in rows])
    n = (~np.isnan(arr)).sum(axis=0)
    total = np.where(np.isnan(arr), 0.0, arr).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n > 0, total / np.maximum(n, 1), np.nan)
