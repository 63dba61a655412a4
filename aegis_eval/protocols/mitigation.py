"""Paired comparison of a mitigated model with the clean-trained one on the same frozen split.

Both models are scored on the same GT images, each at its **own** frozen threshold (re-frozen on clean val for
every trained model, as the protocol requires). One image-bootstrap weight matrix (``resample_weights``) is
shared by both, so resample b is the same multiset of images for both models and every gain
``policy - baseline`` gets a paired percentile interval. Gains are reported per condition, for the mPC
(mean over the corrupted conditions present in both), the rPC (mPC / clean) and for the mean over the
conditions the policy trained on ("seen") and those it did not ("unseen").
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aegis_data.errors import AegisError
from aegis_eval.metrics import coco as ap_metrics
from aegis_eval.metrics.bootstrap import (
    BootstrapOptions,
    bootstrap_samples,
    nanmean_rows,
    percentile_interval,
    resample_seeds,
    resample_weights,
)
from aegis_eval.metrics.matching import DEFAULT_IOU, match_at_threshold, threshold_metrics
from aegis_eval.metrics.types import Detections, GroundTruth
from aegis_eval.protocols.scoring import condition_order

SCHEMA = "aegis-mitigation/1"
GAIN_METRICS = ("recall", "map50")
# A cell counts as harmed when the policy lowers it by more than this (absolute, e.g. 3 recall points).
HARM_MARGIN = 0.03


def _samples(gt: GroundTruth, dets: Detections, threshold: float, weights: np.ndarray, iou: float):
    match = match_at_threshold(gt, dets, threshold, iou)
    table = ap_metrics.evaluate_images(gt, dets)
    point = {**threshold_metrics(match), **ap_metrics.accumulate(table)}
    return point, bootstrap_samples(weights, table, match.counts)


def _number(x: Any) -> float | None:
    x = None if x is None else float(x)
    return None if x is None or not np.isfinite(x) or x < 0 else x


def _gain(policy: np.ndarray, baseline: np.ndarray, p_point, b_point, confidence: float) -> dict[str, Any]:
    p, b = _number(p_point), _number(b_point)
    lo, hi = percentile_interval(np.asarray(policy) - np.asarray(baseline), confidence)
    return {"baseline": b, "policy": p, "gain": None if p is None or b is None else p - b, "ci": [lo, hi]}


def _mean_rows(samples: Mapping[str, Mapping[str, np.ndarray]], conds: list[str], metric: str) -> np.ndarray:
    return nanmean_rows([samples[c][metric] for c in conds])


def _mean_point(points: Mapping[str, Mapping[str, Any]], conds: list[str], metric: str) -> float | None:
    vals = [_number(points[c][metric]) for c in conds]
    known = [v for v in vals if v is not None]
    return sum(known) / len(known) if known else None


@dataclass(frozen=True)
class ScoredModel:
    """One model's points and per-resample values per condition at its frozen threshold (see ``score_model``)."""

    threshold: float
    bootstrap: BootstrapOptions
    n_images: int
    points: dict[str, dict[str, Any]]
    samples: dict[str, dict[str, np.ndarray]]


def score_model(
    gt: GroundTruth,
    predictions: Mapping[str, Detections],
    threshold: float,
    *,
    bootstrap: BootstrapOptions = BootstrapOptions(),
    iou: float = DEFAULT_IOU,
) -> ScoredModel:
    """Score one model once, so an ablation pairs every policy with the same clean-baseline scores."""
    weights = resample_weights(gt.n_images, bootstrap)  # keyed by (n_images, options): the same rows for every model
    points, samples = {}, {}
    for c, dets in predictions.items():
        points[c], samples[c] = _samples(gt, dets, threshold, weights, iou)
    return ScoredModel(float(threshold), bootstrap, gt.n_images, points, samples)


# What a gain is computed from: (policy samples, baseline samples, policy point, baseline point).
Quantity = tuple[np.ndarray, np.ndarray, Any, Any]


def _quantities(
    baseline: ScoredModel, policy: ScoredModel, trained: Iterable[str], metrics: tuple[str, ...]
) -> tuple[dict[tuple, Quantity], list[str], list[str], list[str]]:
    """What a gain is computed from, per reported quantity: ``{(section, [condition,] metric): (policy samples,
    baseline samples, policy point, baseline point)}``, plus the compared, seen and unseen condition lists."""
    if (baseline.bootstrap, baseline.n_images) != (policy.bootstrap, policy.n_images):
        raise AegisError("paired gains need both models scored on the same images with the same bootstrap options")
    conds = condition_order([c for c in policy.points if c in baseline.points])
    if "clean" not in conds:
        raise AegisError("paired gains need the clean condition predicted by both models")
    corrupted = [c for c in conds if c != "clean"]
    pts_b, smp_b, pts_p, smp_p = baseline.points, baseline.samples, policy.points, policy.samples
    trained = set(trained)
    seen = [c for c in corrupted if c in trained]
    unseen = [c for c in corrupted if c not in trained]
    q: dict[tuple, Quantity] = {}
    for c in conds:
        for m in metrics:
            q[("conditions", c, m)] = (smp_p[c][m], smp_b[c][m], pts_p[c][m], pts_b[c][m])
    for m in metrics:
        if corrupted:
            mp, mb = _mean_rows(smp_p, corrupted, m), _mean_rows(smp_b, corrupted, m)
            mpp, mpb = _mean_point(pts_p, corrupted, m), _mean_point(pts_b, corrupted, m)
            q[("mpc", m)] = (mp, mb, mpp, mpb)
            with np.errstate(divide="ignore", invalid="ignore"):
                rp, rb = mp / smp_p["clean"][m], mb / smp_b["clean"][m]
            cp, cb = _number(pts_p["clean"][m]), _number(pts_b["clean"][m])
            q[("rpc", m)] = (
                rp,
                rb,
                mpp / cp if mpp is not None and cp else None,
                mpb / cb if mpb is not None and cb else None,
            )
        for name, group in (("seen", seen), ("unseen", unseen)):
            if group:
                q[(name, m)] = (
                    _mean_rows(smp_p, group, m),
                    _mean_rows(smp_b, group, m),
                    _mean_point(pts_p, group, m),
                    _mean_point(pts_b, group, m),
                )
    return q, conds, seen, unseen


def _assemble(
    gain_of, conds: list[str], seen: list[str], unseen: list[str], metrics: tuple[str, ...], head: dict[str, Any], keys
) -> dict[str, Any]:
    """The mitigation block: ``head`` then the gains (``gain_of(key)``) in the documented layout."""
    out: dict[str, Any] = {
        **head,
        "seen_conditions": seen,
        "unseen_conditions": unseen,
        "conditions": {c: {m: gain_of(("conditions", c, m)) for m in metrics} for c in conds},
        "mpc": {},
        "rpc": {},
        "seen": {},
        "unseen": {},
        "side_effects": {},
    }
    for m in metrics:
        for section in ("mpc", "rpc", "seen", "unseen"):
            if (section, m) in keys:
                out[section][m] = gain_of((section, m))
                if section in ("seen", "unseen"):
                    out[section][m]["n_conditions"] = len(seen if section == "seen" else unseen)
        out["side_effects"][m] = side_effects({c: out["conditions"][c][m]["gain"] for c in unseen})
    return out


def paired_gains(
    baseline: ScoredModel,
    policy: ScoredModel,
    *,
    trained: Iterable[str] = (),
    iou: float = DEFAULT_IOU,
    metrics: tuple[str, ...] = GAIN_METRICS,
) -> dict[str, Any]:
    """Gains of ``policy`` over ``baseline`` (both from :func:`score_model` on the same GT), paired-bootstrapped.

    trained: condition ids the policy trained on (``AugmentPolicy.trained_conditions``); the corrupted ones
    present form the "seen" group, the other corrupted conditions the "unseen" one.
    Returns ``{"schema", "metrics", "bootstrap", "thresholds", "conditions": {cond: {metric: gain}}, "mpc",
    "rpc", "seen", "unseen", "side_effects"}`` where a gain is ``{"baseline", "policy", "gain", "ci": [lo, hi]}``.
    """
    q, conds, seen, unseen = _quantities(baseline, policy, trained, metrics)
    bootstrap = baseline.bootstrap
    conf = bootstrap.confidence
    head = {
        "schema": SCHEMA,
        "metrics": list(metrics),
        "iou": float(iou),
        "bootstrap": {"n_bootstrap": int(bootstrap.n_bootstrap), "seed": int(bootstrap.seed), "confidence": conf},
        "thresholds": {"baseline": float(baseline.threshold), "policy": float(policy.threshold)},
    }
    return _assemble(lambda k: _gain(*q[k], conf), conds, seen, unseen, metrics, head, q)


def combined_gains(
    pairs: Sequence[tuple[int, ScoredModel, ScoredModel]],
    *,
    trained: Iterable[str] = (),
    iou: float = DEFAULT_IOU,
    metrics: tuple[str, ...] = GAIN_METRICS,
) -> dict[str, Any]:
    """Gains of a policy over the clean model across training seeds, with intervals that include training noise.

    pairs: ``(training seed, clean model, policy model)`` per seed, every model scored by :func:`score_model`
    on the same GT with the same bootstrap options (so all share one image-weight matrix). Per seed, the gain
    is paired as in :func:`paired_gains`. The combined gain is the mean of the per-seed gains; its interval is
    a two-level bootstrap: resample b draws S seeds with replacement (``resample_seeds``), then uses image
    resample b (shared by every model) for each drawn seed, and averages the drawn seeds' paired gains.
    Same layout as :func:`paired_gains`; every gain also carries ``"seeds"`` (each seed's paired gain with its
    image-only interval) and ``"seed_sd"`` (sample SD of the per-seed gains; None below two seeds), and
    ``thresholds`` lists each seed's two thresholds.
    """
    if not pairs:
        raise AegisError("combined gains need at least one (seed, clean model, policy model) triple")
    seeds = [int(s) for s, _, _ in pairs]
    if len(set(seeds)) != len(seeds):
        raise AegisError(f"training seeds must be distinct, got {seeds}")
    per_seed = [_quantities(b, p, trained, metrics) for _, b, p in pairs]
    bootstrap = pairs[0][1].bootstrap
    if any((b.bootstrap, b.n_images) != (bootstrap, pairs[0][1].n_images) for _, b, _ in pairs):
        raise AegisError("combined gains need every model scored on the same images with the same bootstrap options")
    q0, conds, seen, unseen = per_seed[0]
    if any(set(q) != set(q0) or c != conds for q, c, _, _ in per_seed[1:]):
        raise AegisError("combined gains need the same conditions predicted by every model of every seed")
    conf = bootstrap.confidence
    draws = resample_seeds(len(seeds), bootstrap)
    rows = np.arange(draws.shape[0])[:, None]

    def gain_of(key: tuple) -> dict[str, Any]:
        singles = [_gain(*q[key], conf) for q, _, _, _ in per_seed]
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a resample where every drawn seed's gain is undefined
            stacked = np.stack(
                [np.asarray(q[key][0], np.float64) - np.asarray(q[key][1], np.float64) for q, _, _, _ in per_seed]
            )  # (S, B): paired gain per seed and image resample
            combined = np.nanmean(stacked.T[rows, draws], axis=1)  # (B,): row b averages its drawn seeds
        lo, hi = percentile_interval(combined, conf)
        known = [g["gain"] for g in singles if g["gain"] is not None]

        def mean(field: str) -> float | None:
            vals = [g[field] for g in singles if g[field] is not None]
            return sum(vals) / len(vals) if vals else None

        return {
            "baseline": mean("baseline"),
            "policy": mean("policy"),
            "gain": mean("gain"),
            "ci": [lo, hi],
            "seed_sd": float(np.std(known, ddof=1)) if len(known) >= 2 else None,
            "seeds": [{"seed": s, **g} for s, g in zip(seeds, singles)],
        }

    head = {
        "schema": SCHEMA,
        "metrics": list(metrics),
        "iou": float(iou),
        "bootstrap": {
            "n_bootstrap": int(bootstrap.n_bootstrap),
            "seed": int(bootstrap.seed),
            "confidence": conf,
            "levels": ["training seeds", "test images"],
        },
        "seeds": seeds,
        "thresholds": {
            "baseline": [float(b.threshold) for _, b, _ in pairs],
            "policy": [float(p.threshold) for _, _, p in pairs],
        },
    }
    return _assemble(gain_of, conds, seen, unseen, metrics, head, q0)


def side_effects(changes: Mapping[str, float | None], margin: float = HARM_MARGIN) -> dict[str, Any]:
    """Summary of the change on conditions a policy did not train on: the worst cell and how many got worse
    by more than ``margin``."""
    known = {c: v for c, v in changes.items() if v is not None}
    worst = min(known, key=lambda c: (known[c], c)) if known else None
    return {
        "n_conditions": len(changes),
        "changes": dict(changes),
        "margin": margin,
        "worst": None if worst is None else {"condition": worst, "gain": known[worst]},
        "n_worse": sum(1 for v in known.values() if v < -margin),
        "mean_gain": sum(known.values()) / len(known) if known else None,
    }
