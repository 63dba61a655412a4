"""Robustness summaries over a sweep of conditions (docs/SCORING.md, "Robustness summaries"): relative drops,
per-corruption and per-family means, an mPC-style mean and rPC.

Conventions:
* relative drop of metric m in condition c: ``(m_clean - m_c) / m_clean``; None when either value is undefined
  (None/NaN, or pycocotools' -1 "no GT in this size range") or ``m_clean == 0``. For lower-is-better metrics
  (FP per image) a worse condition gives a *negative* drop; plots flip the sign, the numbers do not.
* "corrupted conditions" are the ids that parse as ``<corruption>_s<k>``; anything else (a predictions file
  scored under its own stem) is reported but left out of every mean.
* mPC: mean of the metric over the corrupted conditions present where it is defined; rPC = mPC / clean.
* per-corruption: mean relative drop over the corruption's severities present; per-family: mean relative drop
  over the family's conditions present (families from the suite config). Means skip undefined values and are
  None when nothing is defined.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from aegis_data.conditions import parse_condition
from aegis_data.engine.config import SuiteConfig, load_config
from aegis_data.errors import AegisError
from aegis_eval.metrics.bootstrap import nanmean_rows, percentile_interval, relative_to_clean
from aegis_eval.metrics.result_keys import AP_METRICS, THRESHOLD_METRICS

ROBUSTNESS_METRICS: tuple[str, ...] = AP_METRICS + THRESHOLD_METRICS


def defined(value: Any) -> float | None:
    """A metric value as float, or None when undefined (None, NaN, or the COCO -1 sentinel)."""
    if value is None:
        return None
    v = float(value)
    if math.isnan(v) or v == -1.0:
        return None
    return v


def relative_drop(clean: Any, condition: Any) -> float | None:
    """``(clean - condition) / clean``; None when either is undefined or clean is 0."""
    c, x = defined(clean), defined(condition)
    if c is None or x is None or c == 0.0:
        return None
    return (c - x) / c


def relative_drops(
    clean: Mapping[str, Any], condition: Mapping[str, Any], metrics: Sequence[str] = ROBUSTNESS_METRICS
) -> dict[str, float | None]:
    return {m: relative_drop(clean.get(m), condition.get(m)) for m in metrics}


def _mean_metric(values: Iterable[Any]) -> float | None:
    """Mean of metric values, skipping undefined ones (None, NaN, COCO -1)."""
    vals = [v for v in map(defined, values) if v is not None]
    return sum(vals) / len(vals) if vals else None


def _mean_drop(values: Iterable[float | None]) -> float | None:
    """Mean of relative drops, skipping None/NaN (a drop of exactly -1 is a real value, not a sentinel)."""
    vals = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    return sum(vals) / len(vals) if vals else None


def corruption_of(condition: str) -> tuple[str | None, int] | None:
    """(corruption, severity) for a condition id, (None, 0) for clean, None for a non-condition name."""
    try:
        return parse_condition(condition)
    except AegisError:
        return None


def summarize_robustness(
    conditions: Mapping[str, Mapping[str, Any]],
    config: SuiteConfig | None = None,
    metrics: Sequence[str] = ROBUSTNESS_METRICS,
) -> dict[str, Any]:
    """The ``summary`` block of the score JSON from per-condition metric dicts (normally including ``clean``).

    Returns clean, mpc, rpc, mean_rel_drop, per_corruption, per_family (each {metric: value or None}),
    n_conditions and missing_conditions (canonical ids of the suite absent from ``conditions``).
    """
    config = config or load_config()
    clean = conditions.get("clean", {})  # without clean, drops and rPC are all None
    parsed_of = {c: corruption_of(c) for c in conditions if c != "clean"}
    corrupted: dict[str, tuple[str, int]] = {
        c: (parsed[0], parsed[1]) for c, parsed in parsed_of.items() if parsed is not None and parsed[0] is not None
    }
    drops = {c: relative_drops(clean, conditions[c], metrics) for c in corrupted}

    mpc = {m: _mean_metric(conditions[c].get(m) for c in corrupted) for m in metrics}
    rpc = {}
    for m in metrics:
        c0 = defined(clean.get(m))
        mean = mpc[m]
        rpc[m] = None if mean is None or c0 is None or c0 == 0.0 else mean / c0
    mean_rel_drop = {m: _mean_drop(drops[c][m] for c in corrupted) for m in metrics}

    by_corruption: dict[str, list[str]] = {}
    for c, (name, _sev) in corrupted.items():
        by_corruption.setdefault(name, []).append(c)
    per_corruption = {
        name: {m: _mean_drop(drops[c][m] for c in conds) for m in metrics} for name, conds in by_corruption.items()
    }
    per_family = {}
    for family, members in config.families.items():
        conds = [c for name in members for c in by_corruption.get(name, [])]
        if conds:
            per_family[family] = {m: _mean_drop(drops[c][m] for c in conds) for m in metrics}

    return {
        "clean": {m: defined(clean.get(m)) for m in metrics},
        "mpc": mpc,
        "rpc": rpc,
        "mean_rel_drop": mean_rel_drop,
        "per_corruption": per_corruption,
        "per_family": per_family,
        "n_conditions": len(conditions),
        "missing_conditions": [c for c in config.conditions() if c not in conditions],
    }


def summary_samples(
    samples: Mapping[str, Mapping[str, np.ndarray]], config: SuiteConfig | None = None
) -> dict[str, Any]:
    """Per-resample values (B,) of mPC, rPC, the mean relative drop and each corruption's and family's mean drop.

    samples: {condition: {metric: (B,) per-resample values}}, every condition drawn with the SAME weight rows.
    Each summary is computed per resample exactly as :func:`summarize_robustness` computes it from the point
    values (means skip conditions where the metric is undefined in that resample); None where the summary does
    not exist (no corrupted condition, or no ``clean`` for rPC and drops). The paired model differences
    (``aegis_eval.metrics.paired``) subtract two of these resample by resample.
    """
    config = config or load_config()
    corrupted = {c: p for c in samples if c != "clean" and (p := corruption_of(c)) is not None and p[0] is not None}
    metrics = list(next(iter(samples.values()))) if samples else []
    clean = samples.get("clean")
    out: dict[str, Any] = {"mpc": {}, "rpc": {}, "mean_rel_drop": {}, "per_corruption": {}, "per_family": {}}
    for m in metrics:
        per_cond = {c: np.asarray(samples[c][m], dtype=np.float64) for c in corrupted}
        mpc = nanmean_rows(list(per_cond.values())) if per_cond else None
        c0 = np.asarray(clean[m], dtype=np.float64) if clean is not None else None
        rpc = drops = None
        if c0 is not None and mpc is not None:
            rpc = relative_to_clean(mpc, c0)
            drops = {c: relative_to_clean(c0 - v, c0) for c, v in per_cond.items()}
        out["mpc"][m] = mpc
        out["rpc"][m] = rpc
        out["mean_rel_drop"][m] = nanmean_rows(list(drops.values())) if drops else None
        for name in dict.fromkeys(n for n, _ in corrupted.values()):
            conds = [c for c, (n, _) in corrupted.items() if n == name]
            mean = nanmean_rows([drops[c] for c in conds]) if drops else None
            out["per_corruption"].setdefault(name, {})[m] = mean
        for family, members in config.families.items():
            conds = [c for c, (name, _) in corrupted.items() if name in members]
            if conds:
                fam = nanmean_rows([drops[c] for c in conds]) if drops else None
                out["per_family"].setdefault(family, {})[m] = fam
    return out


def summary_intervals(
    samples: Mapping[str, Mapping[str, np.ndarray]], config: SuiteConfig | None = None, confidence: float = 0.95
) -> dict[str, Any]:
    """Percentile intervals of mPC, rPC, the mean relative drop and each corruption's and family's mean drop.

    samples: {condition: {metric: (B,) per-resample values}}, every condition drawn with the SAME weight rows
    (``aegis_eval.protocols.scoring`` scores all conditions against one resample matrix). Each summary is computed per
    resample by :func:`summary_samples`, so the interval of rPC pairs each resample's mPC with that resample's
    clean value. Without ``clean``, rPC and drops are None.
    """

    def ci(values: np.ndarray | None) -> list[float | None]:
        return list(percentile_interval(values, confidence)) if values is not None else [None, None]

    per_resample = summary_samples(samples, config)
    out: dict[str, Any] = {"confidence": float(confidence)}
    for section in ("mpc", "rpc", "mean_rel_drop"):
        out[section] = {m: ci(v) for m, v in per_resample[section].items()}
    for section in ("per_corruption", "per_family"):
        out[section] = {k: {m: ci(v) for m, v in block.items()} for k, block in per_resample[section].items()}
    return out
