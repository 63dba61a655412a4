"""Exact one-sided upper confidence bounds for small event counts, in float64 without SciPy.

* :func:`clopper_pearson_upper` — k events in n trials (the share of images with a false alarm): the p that
  solves ``P(X <= k | n, p) = delta`` for X ~ Binomial(n, p); 1 when k = n.
* :func:`garwood_upper` — k events of a Poisson count (false positives over an exposure): the mean mu that
  solves ``P(Y <= k | mu) = delta`` for Y ~ Poisson(mu). Equal to ``chi2.ppf(1 - delta, 2k + 2) / 2``.

Both invert an exact CDF by bisection. The CDF is a sum of probability terms evaluated in log space (log
factorials from ``math.lgamma``, summed with a log-sum-exp), so it stays accurate when single terms underflow;
terms too small to change a float64 sum are not computed (``_kept_terms``).
Both CDFs fall monotonically in the parameter, which is what makes bisection safe; it runs until the bracket
stops shrinking in float64, so the bound is as exact as the CDF (about 1e-14 relative).
"""

from __future__ import annotations

import math

import numpy as np

from aegis_data.errors import AegisError

DEFAULT_DELTA = 0.05
# More halvings than float64 can use: the loop ends when the midpoint equals an end of the bracket.
_MAX_BISECTIONS = 2000


def check_delta(delta: float) -> float:
    """delta as float, or AegisError. An upper bound at confidence below 50% is no bound (it can sit below the
    observed rate), and the bisection brackets rely on delta <= 0.5: P(X <= k) >= 1/2 at p = k/n or mu = k."""
    delta = float(delta)
    if not math.isfinite(delta) or not 0.0 < delta <= 0.5:
        raise AegisError(
            f"[bound_delta] delta (the allowed probability of exceeding the bound) must lie in (0, 0.5]; got {delta!r}"
        )
    return delta


def _check_count(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise AegisError(f"[bound_count] {name} must be a non-negative integer; got {value!r}")
    return int(value)


def _log_sum_exp(log_terms: np.ndarray) -> float:
    top = float(np.max(log_terms))
    if top == -math.inf:
        return -math.inf
    return top + math.log(float(np.sum(np.exp(log_terms - top))))


def _log_factorials(values: np.ndarray) -> np.ndarray:
    """log j! for each j of ``values``, each from lgamma (no accumulated rounding, unlike a cumulative sum)."""
    # j + 1.0 in float64 is float(j) + 1.0 exactly (j < 2**53); map over Python floats skips per-element numpy scalars
    return np.fromiter(map(math.lgamma, (np.asarray(values) + 1.0).tolist()), dtype=np.float64, count=len(values))


def _kept_terms(k: int) -> np.ndarray:
    """The event counts j <= k whose terms can matter to P(X <= k) at or above the bound's bracket.

    For a Poisson mean mu >= k, term(k - m) / term(k) <= exp(-m^2 / (2k)); a binomial with n*p >= k decays at
    least as fast. Dropping m > 40*sqrt(k + 1) + 100 changes the sum by less than exp(-800) relative, far below
    float64 resolution, and makes the cost O(sqrt(k)) instead of O(k).
    """
    first = max(0, k - int(40.0 * math.sqrt(k + 1.0)) - 100)
    return np.arange(first, k + 1)


def _bisect_decreasing(cdf, target: float, lo: float, hi: float) -> float:
    """The x in [lo, hi] where the decreasing ``cdf`` crosses ``target`` (cdf(lo) >= target >= cdf(hi))."""
    for _ in range(_MAX_BISECTIONS):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if cdf(mid) > target:
            lo = mid
        else:
            hi = mid
    return hi  # the upper end: never below the exact bound by more than the last bracket width


def _binomial_cdf_of(k: int, n: int):
    """p -> P(X <= k) for X ~ Binomial(n, p), k/n <= p < 1 (the bound's bracket), with the log binomial
    coefficients built once."""
    j = _kept_terms(k)
    log_choose = math.lgamma(n + 1.0) - _log_factorials(j) - _log_factorials(n - j)
    jf = j.astype(np.float64)
    return lambda p: min(1.0, math.exp(_log_sum_exp(log_choose + jf * math.log(p) + (n - jf) * math.log1p(-p))))


def _poisson_cdf_of(k: int):
    """mu -> P(Y <= k) for Y ~ Poisson(mu), mu >= k (the bound's bracket), with the log factorials built once."""
    j = _kept_terms(k)
    log_fact = _log_factorials(j)
    jf = j.astype(np.float64)
    return lambda mu: min(1.0, math.exp(_log_sum_exp(-mu + jf * math.log(mu) - log_fact)))


def clopper_pearson_upper(k: int, n: int, delta: float = DEFAULT_DELTA) -> float:
    """Exact one-sided (1 - delta) upper bound on a binomial proportion after k events in n trials.

    k = 0 gives ``1 - delta**(1/n)``; k = n gives 1. AegisError for n = 0 (no trials, no bound) or k > n.
    """
    k, n, delta = _check_count("k", k), _check_count("n", n), check_delta(delta)
    if n == 0:
        raise AegisError("[bound_no_trials] a Clopper-Pearson bound needs at least one trial; got n = 0")
    if k > n:
        raise AegisError(f"[bound_count] k = {k} events cannot exceed n = {n} trials")
    if k == n:
        return 1.0
    return _bisect_decreasing(_binomial_cdf_of(k, n), delta, k / n, 1.0)


def garwood_upper(k: int, delta: float = DEFAULT_DELTA) -> float:
    """Exact one-sided (1 - delta) upper bound on a Poisson mean after observing k events.

    k = 0 gives ``-ln(delta)`` (2.995732 at delta 0.05). Divide by the exposure for a rate bound.
    """
    k, delta = _check_count("k", k), check_delta(delta)
    cdf = _poisson_cdf_of(k)
    hi = k + 10.0 + 10.0 * math.sqrt(k + 1.0)
    while cdf(hi) > delta:  # widen until the bracket holds the crossing (rarely needed)
        hi *= 2.0
    return _bisect_decreasing(cdf, delta, max(float(k), 1e-300), hi)
