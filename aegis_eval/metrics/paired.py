"""Paired differences between two models scored on the same images (docs/SCORING.md, "Paired model differences").

Two scores of one split drawn with the same bootstrap plan (seed, B, images, clusters) share every resample row of
``aegis_eval.metrics.bootstrap.resample_weights``: row b of model A and row b of model B are the same images. The
difference A - B is then computed resample by resample, and its percentile interval is the *paired* interval: the
image-to-image variation both models share cancels, so it is much narrower than the two separate intervals suggest.

Per cell: the point difference, its paired interval, whether the interval excludes 0, and a two-sided bootstrap
p-value ``min(1, 2 * min(P(d <= 0), P(d >= 0)))`` over the defined resamples. Many cells tested at once get Holm's
step-down adjustment of those p-values (:func:`holm`), which controls the chance of any false "the models differ"
over the whole family of cells.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from aegis_eval.metrics.bootstrap import percentile_interval
from aegis_eval.metrics.robustness import defined

# Family-wise error rate Holm's adjustment holds; the intervals are 95% too.
ALPHA = 0.05


def bootstrap_p_value(differences: np.ndarray) -> float | None:
    """Two-sided bootstrap p-value of "the difference is 0": twice the smaller share of resamples on either side of
    0 (ties with 0 count on both sides), at most 1; None when no resample is defined. With B resamples the smallest
    non-zero value is 2/B: a 0 reads "below 1/B", not "impossible"."""
    d = np.asarray(differences, dtype=np.float64).ravel()
    d = d[~np.isnan(d)]
    if d.size == 0:
        return None
    below, above = float(np.mean(d <= 0.0)), float(np.mean(d >= 0.0))
    return min(1.0, 2.0 * min(below, above))


def paired_cell(
    value_a: Any,
    value_b: Any,
    samples_a: np.ndarray | None,
    samples_b: np.ndarray | None,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """One difference A - B: ``value`` (of the point values; None when either is undefined), ``ci`` (the paired
    percentile interval), ``p`` (:func:`bootstrap_p_value`), ``excludes_zero``. Without samples on either side, or
    with a single resample (B = 1 is the point estimate), the interval, p and ``excludes_zero`` are None: a
    difference without an interval says nothing about noise."""
    a, b = defined(value_a), defined(value_b)
    cell: dict[str, Any] = {"value": None if a is None or b is None else a - b, "ci": [None, None], "p": None}
    cell["excludes_zero"] = None
    if samples_a is None or samples_b is None:
        return cell
    sa, sb = np.asarray(samples_a, dtype=np.float64), np.asarray(samples_b, dtype=np.float64)
    if sa.shape != sb.shape or sa.size < 2:
        return cell
    diff = sa - sb
    lo, hi = percentile_interval(diff, confidence)
    cell["ci"] = [lo, hi]
    cell["p"] = bootstrap_p_value(diff)
    cell["excludes_zero"] = None if lo is None or hi is None else bool(lo > 0.0 or hi < 0.0)
    return cell


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values (None stays None and does not count as a test): sorted ascending, the
    k-th smallest of m becomes ``max_{j <= k} min(1, (m - j + 1) * p_(j))``."""
    tested = [(p, k) for k, p in enumerate(p_values) if p is not None]
    tested.sort()
    m = len(tested)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, k) in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * float(p)))
        out[k] = running
    return out


def add_holm(cells: Sequence[dict[str, Any]], alpha: float = ALPHA) -> dict[str, Any]:
    """Adds ``p_holm`` and ``significant`` (``p_holm < alpha``; None without a p-value) to every cell, the family
    being all ``cells``; returns the tally ``{"correction", "alpha", "n_tests", "n_excluding_zero",
    "n_significant"}``."""
    adjusted = holm([c.get("p") for c in cells])
    for cell, p in zip(cells, adjusted):
        cell["p_holm"] = p
        cell["significant"] = None if p is None else bool(p < alpha)
    return {
        "correction": "holm",
        "alpha": alpha,
        "n_tests": sum(p is not None for p in adjusted),
        "n_excluding_zero": sum(bool(c.get("excludes_zero")) for c in cells),
        "n_significant": sum(bool(c.get("significant")) for c in cells),
    }


def summary_cells(
    summary_a: Mapping[str, Any],
    summary_b: Mapping[str, Any],
    samples_a: Mapping[str, Any] | None,
    samples_b: Mapping[str, Any] | None,
    metric: str,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Paired cells of mPC, rPC and each family's mean relative drop of ``metric``.

    summary_*: the point summaries (``summarize_robustness`` blocks); samples_*: their per-resample twins
    (``aegis_eval.metrics.robustness.summary_samples``) or None. Families present in either summary are listed."""

    def at(node: Mapping[str, Any] | None, section: str, key: str | None) -> Any:
        node = (node or {}).get(section) or {}
        node = node.get(key) or {} if key is not None else node
        return node.get(metric)

    def cell(section: str, key: str | None = None) -> dict[str, Any]:
        points = at(summary_a, section, key), at(summary_b, section, key)
        return paired_cell(*points, at(samples_a, section, key), at(samples_b, section, key), confidence)

    families = list(dict.fromkeys([*(summary_a.get("per_family") or {}), *(summary_b.get("per_family") or {})]))
    return {"mpc": cell("mpc"), "rpc": cell("rpc"), "per_family": {fam: cell("per_family", fam) for fam in families}}
