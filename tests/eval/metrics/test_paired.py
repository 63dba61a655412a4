"""Paired differences (aegis_eval.metrics.paired): the bootstrap p-value, Holm's adjustment against a hand
computation, cells without an interval where nothing was resampled, and the point of pairing (shared image noise
cancels)."""

from __future__ import annotations

import numpy as np
import pytest

from aegis_data.engine.config import load_config
from aegis_eval.metrics.bootstrap import BootstrapOptions, percentile_interval, resample_weights
from aegis_eval.metrics.paired import add_holm, bootstrap_p_value, holm, paired_cell, summary_cells
from aegis_eval.metrics.robustness import summarize_robustness, summary_samples


def test_bootstrap_p_value_counts_both_sides_and_ties():
    assert bootstrap_p_value(np.array([1.0, 2.0, 3.0, 4.0])) == 0.0
    assert bootstrap_p_value(np.array([-1.0, 2.0, 3.0, 4.0])) == pytest.approx(0.5)
    # a tie with 0 in every resample (two models with equal values): no evidence at all
    assert bootstrap_p_value(np.zeros(10)) == 1.0
    assert bootstrap_p_value(np.array([np.nan, np.nan])) is None
    assert bootstrap_p_value(np.array([np.nan, 1.0, 2.0, -1.0])) == pytest.approx(2 / 3)


def test_holm_matches_the_step_down_by_hand():
    p = [0.01, 0.04, 0.03, None, 0.005]
    # sorted 0.005, 0.01, 0.03, 0.04 with m = 4: 0.02, 0.03, 0.06, 0.06 (monotone)
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06, None, 0.02])
    assert holm([0.5, 0.9]) == [1.0, 1.0]
    assert holm([]) == []


def test_add_holm_marks_what_survives():
    cells = [
        {"p": 0.001, "excludes_zero": True},
        {"p": 0.03, "excludes_zero": True},
        {"p": 0.5, "excludes_zero": False},
        {"p": None, "excludes_zero": None},
    ]
    tally = add_holm(cells)
    assert tally == {
        "correction": "holm",
        "alpha": 0.05,
        "n_tests": 3,
        "n_excluding_zero": 2,
        "n_significant": 1,
    }
    assert [c["significant"] for c in cells] == [True, False, False, None]
    assert cells[1]["p_holm"] == pytest.approx(0.06)  # 2nd smallest of 3 tests: (3 - 1) * 0.03, above 5%
    assert cells[3]["p_holm"] is None


def test_cells_without_resamples_have_no_interval():
    cell = paired_cell(0.5, 0.4, None, np.zeros(5))
    assert cell["value"] == pytest.approx(0.1) and cell["ci"] == [None, None]
    assert cell["p"] is None and cell["excludes_zero"] is None
    # B = 1: the "resample" is the point estimate, a zero-width interval would exclude 0 for any difference
    one = paired_cell(0.5, 0.4, np.array([0.5]), np.array([0.4]))
    assert one["ci"] == [None, None] and one["excludes_zero"] is None
    assert paired_cell(None, 0.4, np.ones(3), np.ones(3))["value"] is None
    assert paired_cell(-1, 0.4, None, None)["value"] is None  # COCO's "no GT" sentinel is no value


def test_pairing_cancels_the_noise_both_models_share():
    rng = np.random.default_rng(3)
    n = 200
    hard = rng.uniform(0.0, 1.0, n)  # per-image difficulty both models see
    a = (hard > 0.30).astype(float)
    b = (hard > 0.33).astype(float)  # a slightly weaker model on the same images
    w = resample_weights(n, BootstrapOptions(n_bootstrap=400, seed=1))
    sa, sb = (w @ a) / n, (w @ b) / n
    cell = paired_cell(a.mean(), b.mean(), sa, sb)
    lo_a, hi_a = percentile_interval(sa)
    lo_b, hi_b = percentile_interval(sb)
    assert lo_a < hi_b and lo_b < hi_a  # the separate intervals overlap: "no difference" by eye
    assert cell["excludes_zero"] is True and cell["ci"][0] > 0  # the paired one does not
    assert cell["ci"] == list(percentile_interval(sa - sb))
    # unpaired rows (another seed for B) would not know the images match
    w2 = resample_weights(n, BootstrapOptions(n_bootstrap=400, seed=2))
    unpaired = percentile_interval(sa - (w2 @ b) / n)
    assert unpaired[1] - unpaired[0] > 2 * (cell["ci"][1] - cell["ci"][0])


def test_summary_cells_subtract_the_summaries_resample_by_resample():
    rng = np.random.default_rng(0)
    conds = ("clean", "low_light_s1", "low_light_s2", "smoke_haze_s1")
    samples_a = {c: {"recall": rng.uniform(0.4, 0.9, 50)} for c in conds}
    samples_b = {c: {"recall": rng.uniform(0.4, 0.9, 50)} for c in conds}
    points_a = {c: {"recall": float(np.mean(v["recall"]))} for c, v in samples_a.items()}
    points_b = {c: {"recall": float(np.mean(v["recall"]))} for c, v in samples_b.items()}
    sa, sb = summarize_robustness(points_a), summarize_robustness(points_b)
    ra, rb = summary_samples(samples_a), summary_samples(samples_b)
    cells = summary_cells(sa, sb, ra, rb, "recall")
    assert cells["mpc"]["value"] == pytest.approx(sa["mpc"]["recall"] - sb["mpc"]["recall"])
    assert cells["mpc"]["ci"] == list(percentile_interval(ra["mpc"]["recall"] - rb["mpc"]["recall"]))
    assert cells["rpc"]["ci"] == list(percentile_interval(ra["rpc"]["recall"] - rb["rpc"]["recall"]))
    # the families of low_light and smoke_haze in the default suite (its names, whatever they are)
    family_of = {m: f for f, members in load_config().families.items() for m in members}
    low_light, smoke = family_of["low_light"], family_of["smoke_haze"]
    assert low_light != smoke and set(cells["per_family"]) == {low_light, smoke}
    drop = ra["per_family"][low_light]["recall"] - rb["per_family"][low_light]["recall"]
    assert cells["per_family"][low_light]["ci"] == list(percentile_interval(drop))
    assert summary_cells(sa, sb, None, rb, "recall")["mpc"]["ci"] == [None, None]
