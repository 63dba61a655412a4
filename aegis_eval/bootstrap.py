"""Image-level bootstrap of the scoring metrics from cached per-image tables (SPEC §6).

A resample is a row of image multiplicities (how many times each image is drawn). Every metric of a resample
comes from tables computed once per condition: thresholded metrics from per-image counts, AP from the
:class:`~aegis_eval.metrics.ApTable`. No COCO evaluation is re-run per resample.

Randomness: one ``aegis_data.seeding.KeyedRandom`` stream keyed by (seed, "bootstrap", number of images, B,
cluster partition); its raw 64-bit words become indices by an unbiased rejection rule of our own, so the draws
do not depend on NumPy's distribution methods and the same options give the same resamples on any machine.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from aegis_data.errors import AegisError
from aegis_data.seeding import KeyedRandom
from aegis_eval.metrics import IOU_THRESHOLDS, RECALL_THRESHOLDS, ApTable
from aegis_eval.result_keys import CI_METRICS

_KEY_VERSION = "aegis-bootstrap/1"
# Resample rows handled together in the AP bootstrap; bounds the (rows, detections) working arrays.
_ROW_CHUNK = 16
_COUNT_FIELDS = ("tp", "fp", "n_gt", "tp_small", "gt_small", "tp_medium", "gt_medium", "tp_large", "gt_large")
_THRESHOLD_CI = tuple(m for m in CI_METRICS if m not in ("map50", "map50_95"))


@dataclass(frozen=True)
class BootstrapOptions:
    """Resampling options, validated on construction (AegisError otherwise).

    n_bootstrap: number of resamples B >= 1; B = 1 gives the point estimate only (a zero-width interval).
    seed: integer recorded in provenance; part of the key of every draw.
    confidence: coverage of the percentile interval, strictly between 0 and 1.
    """

    n_bootstrap: int = 1000
    seed: int = 0
    confidence: float = 0.95

    def __post_init__(self) -> None:
        b = self.n_bootstrap
        if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b < 1:
            raise AegisError(f"n_bootstrap must be an integer >= 1; got {b!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)):
            raise AegisError(f"seed must be an integer; got {self.seed!r}")
        c = self.confidence
        if isinstance(c, bool) or not isinstance(c, (int, float, np.floating)) or not math.isfinite(c) \
                or not 0.0 < c < 1.0:
            raise AegisError(f"confidence must be a number strictly between 0 and 1; got {c!r}")


def _cluster_structure(n_images: int, clusters: np.ndarray | None) -> tuple[np.ndarray | None, int, str]:
    """(cluster index per image or None, number of units to draw, signature for the key)."""
    if clusters is None:
        return None, n_images, "none"
    labels = np.asarray(clusters)
    if labels.shape != (n_images,):
        raise AegisError(f"clusters must have one label per image, shape ({n_images},); got {labels.shape}")
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
    """``count`` uniform integers in [0, n) from the keyed stream ``key`` (``aegis_data.seeding``).

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


def _check_weights(weights: np.ndarray, n_images: int) -> np.ndarray:
    w = np.asarray(weights)
    if w.ndim != 2 or w.shape[1] != n_images:
        raise AegisError(f"bootstrap weights must have shape (B, {n_images}); got {w.shape}")
    if w.dtype.kind not in "iu":
        raise AegisError(f"bootstrap weights must be integer multiplicities; got dtype {w.dtype}")
    if w.size and w.min() < 0:
        raise AegisError("bootstrap weights must be >= 0")
    return w.astype(np.int64)


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
    """Static layout of one IoU threshold's TP detections in accumulation order (shared by all resamples)."""

    tp_image: np.ndarray  # (P,) image row of every TP detection, in order
    run_end: np.ndarray  # (E,) index into the TP list of the last TP of each run (no FP inside a run)
    end_position: np.ndarray  # (E,) position of those TP detections in the accumulation order
    ig_image: np.ndarray  # (Q,) image row of every ignored detection, in order
    ig_before: np.ndarray  # (E,) ignored detections before each run end


def _threshold_plans(table: ApTable) -> list[_ThresholdPlan]:
    order = table.order
    det_img = table.det_image[order]
    plans = []
    for t in range(len(IOU_THRESHOLDS)):
        ignored = table.ignored[0][t][order]
        tp = table.matched[0][t][order] & ~ignored
        counted = np.flatnonzero(~ignored)
        tp_counted = tp[counted]
        # Inside a run of TPs with no FP between them precision only rises, so the run's last point
        # dominates the others (higher recall, higher precision) whatever the weights: keep run ends only.
        next_is_tp = np.concatenate([tp_counted[1:], [False]])
        end_position = counted[tp_counted & ~next_is_tp]
        tp_position = np.flatnonzero(tp)
        ig_position = np.flatnonzero(ignored)
        plans.append(_ThresholdPlan(tp_image=det_img[tp_position],
                                    run_end=np.searchsorted(tp_position, end_position),
                                    end_position=end_position, ig_image=det_img[ig_position],
                                    ig_before=np.searchsorted(ig_position, end_position)))
    return plans


def bootstrap_ap(weights: np.ndarray, table: ApTable) -> dict[str, np.ndarray]:
    """Per-resample AP50 and AP (IoU .50:.95), area "all", ``table.max_dets`` detections per image.

    weights: (B, I) non-negative ints. Returns {"map50": (B,), "map50_95": (B,)} float64, NaN for a resample
    without regular GT (where pycocotools reports -1).

    Method: a detection of an image with weight k stands for k adjacent copies. Along the score order only
    the point after the last TP of a run of TPs can carry the interpolated precision (an FP lowers precision
    at unchanged recall; a further TP raises both), so per resample we need the weighted cumulative TP and FP
    counts at those run ends only; FP counts come from one weighted cumulative sum over all detections.
    This equals :func:`aegis_eval.metrics.accumulate` with the same weights whenever no image with weight > 1
    has two detections of equal score with different outcomes (accumulate repeats such a tie block image
    copy by image copy; here each detection's copies are adjacent) — a tie-order convention only.
    """
    w_all = _check_weights(weights, table.n_images)
    n_rows = w_all.shape[0]
    n_thr, n_rec = len(IOU_THRESHOLDS), len(RECALL_THRESHOLDS)
    det_img = table.det_image[table.order]
    plans = _threshold_plans(table)
    n_pos_all = w_all @ table.n_gt[0]
    t50 = np.flatnonzero(IOU_THRESHOLDS == 0.5)
    eps = np.spacing(1)

    out50 = np.full(n_rows, np.nan)
    out = np.full(n_rows, np.nan)
    # float64 holds every count exactly (< 2**53) and is what the precision formula needs anyway.
    w_float = w_all.astype(np.float64)
    gathered = np.empty((_ROW_CHUNK, len(det_img)))
    cum_all = np.empty_like(gathered)
    for r0 in range(0, n_rows, _ROW_CHUNK):
        n_pos = n_pos_all[r0:r0 + _ROW_CHUNK]
        live = np.flatnonzero(n_pos > 0)
        if len(live) == 0:
            continue
        rows = len(live)
        w = w_float[r0 + live]  # (rows, I)
        n_pos = n_pos[live]
        np.take(w, det_img, axis=1, out=gathered[:rows])
        np.cumsum(gathered[:rows], axis=1, out=cum_all[:rows])
        need = _required_tp(n_pos).astype(np.float64)  # (rows, R)
        span = float(n_pos.max() + 1)
        offset = (np.arange(rows) * span)[:, None]
        q = np.zeros((rows, n_thr, n_rec))
        for t, plan in enumerate(plans):
            n_e = len(plan.run_end)
            if n_e == 0:
                continue
            tp = np.cumsum(w[:, plan.tp_image], axis=1)[:, plan.run_end]  # (rows, E)
            fp = cum_all[:rows, plan.end_position] - tp
            if len(plan.ig_image):
                cum_ig = np.concatenate([np.zeros((rows, 1)), np.cumsum(w[:, plan.ig_image], axis=1)], axis=1)
                fp -= cum_ig[:, plan.ig_before]
            pr = tp / (fp + tp + eps)
            envelope = np.maximum.accumulate(pr[:, ::-1], axis=1)[:, ::-1]
            # first run end reaching the required TP count, per row: shift each row into its own range
            idx = np.searchsorted((tp + offset).ravel(), (need + offset).ravel(), side="left").reshape(rows, -1)
            idx -= (np.arange(rows) * n_e)[:, None]
            reached = idx < n_e
            picked = np.take_along_axis(envelope, np.minimum(idx, n_e - 1), axis=1)
            q[:, t] = np.where(reached, picked, 0.0)
        target = live + r0
        out50[target] = q[:, t50].reshape(rows, -1).mean(axis=1)
        out[target] = q.reshape(rows, -1).mean(axis=1)
    return {"map50": out50, "map50_95": out}


def bootstrap_samples(weights: np.ndarray, ap_table: ApTable, counts) -> dict[str, np.ndarray]:
    """Per-resample values (B,) of every CI_METRICS key (precision, recall, f1, fp_per_image, map50, map50_95).

    weights: (B, I) from :func:`resample_weights`. ap_table: the condition's ApTable. counts: its
    ``aegis_eval.matching.PerImageCounts`` at the frozen threshold. Thresholded metrics are
    ``threshold_rates`` of the weighted totals (NaN where undefined); AP as :func:`bootstrap_ap`.
    """
    from aegis_eval.matching import threshold_rates  # the thresholded-metric conventions live there

    w = _check_weights(weights, ap_table.n_images)
    if counts.n_images != ap_table.n_images:
        raise AegisError(f"per-image counts cover {counts.n_images} images but the AP table covers "
                         f"{ap_table.n_images}; both must come from the same ground truth")
    totals = {name: w @ np.asarray(getattr(counts, name), dtype=np.int64) for name in _COUNT_FIELDS}
    images_with_fp = w @ (np.asarray(counts.fp) > 0).astype(np.int64)
    rates = threshold_rates(n_images=w.sum(axis=1), images_with_fp=images_with_fp, **totals)
    samples = {m: np.asarray(rates[m], dtype=np.float64) for m in _THRESHOLD_CI}
    samples.update(bootstrap_ap(w, ap_table))
    return {m: samples[m] for m in CI_METRICS}


def percentile_interval(samples: np.ndarray, confidence: float = 0.95) -> tuple[float | None, float | None]:
    """Percentile-method interval of bootstrap samples: the (1-c)/2 and (1+c)/2 quantiles (linear), NaNs ignored.

    Returns (None, None) when every sample is NaN (the metric is undefined in every resample).
    """
    if not 0.0 < confidence < 1.0:
        raise AegisError(f"confidence must be strictly between 0 and 1; got {confidence!r}")
    values = np.asarray(samples, dtype=np.float64).ravel()
    values = values[~np.isnan(values)]
    if values.size == 0:
        return None, None
    lo, hi = np.percentile(values, [50.0 * (1.0 - confidence), 50.0 * (1.0 + confidence)])
    return float(lo), float(hi)


def intervals(samples: Mapping[str, np.ndarray], confidence: float = 0.95) -> dict[str, list[float | None]]:
    """{metric: [lo, hi]} percentile intervals for every metric in ``samples``."""
    return {name: list(percentile_interval(values, confidence)) for name, values in samples.items()}


def paired_drop_intervals(clean_samples: Mapping[str, np.ndarray], cond_samples: Mapping[str, np.ndarray],
                          confidence: float = 0.95) -> dict[str, list[float | None]]:
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
            raise AegisError(f"paired samples of {name!r} differ in shape: clean {c.shape}, condition {x.shape}; "
                             "both must use the same bootstrap weights")
        with np.errstate(divide="ignore", invalid="ignore"):
            drop = np.where((c != 0) & ~np.isnan(c), (c - x) / np.where(c != 0, c, 1.0), np.nan)
        out[name] = list(percentile_interval(drop, confidence))
    return out
