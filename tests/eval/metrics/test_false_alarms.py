"""False alarms as a risk budget: exact bounds against known values, exposure, the score JSON block, and the
threshold rule that meets a budget on clean validation."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.errors import AegisError
from aegis_eval.metrics.bootstrap import BootstrapOptions
from aegis_eval.metrics.exact_bounds import clopper_pearson_upper, garwood_upper
from aegis_eval.metrics.false_alarms import false_alarm_risk
from aegis_eval.protocols.predictions import detections_from_results, ground_truth_from_coco
from aegis_eval.protocols.threshold import freeze_threshold, read_threshold_file, write_threshold_file
from tests.conftest import assert_one_line_error
from tests.eval.protocols.scoring_memory import score_conditions

# chi-square 0.95 quantiles with 2k + 2 degrees of freedom, halved (printed statistical tables).
GARWOOD_95 = {1: 4.743865, 2: 6.295794, 3: 7.753657, 4: 9.153519, 5: 10.513035}


@pytest.mark.parametrize("n", [1, 2, 7, 100, 5000])
def test_clopper_pearson_with_zero_events(n):
    assert clopper_pearson_upper(0, n) == pytest.approx(1 - 0.05 ** (1 / n), rel=1e-12, abs=1e-15)


# The order of the score's false-alarm block.
FALSE_ALARM_KEYS = (
    "n_images",
    "megapixels",
    "fp",
    "images_with_fp",
    "fp_per_image",
    "fp_per_image_upper",
    "fp_per_megapixel",
    "fp_per_megapixel_upper",
    "false_alarm_image_share",
    "false_alarm_image_share_upper",
)


def _log_sum(terms: np.ndarray) -> float:
    top = float(terms.max())
    return top + math.log(float(np.exp(terms - top).sum()))


def _log_factorials(n: int) -> np.ndarray:
    """log(j!) for j = 0..n."""
    return np.array([math.lgamma(j + 1.0) for j in range(n + 1)])  # exact to an ulp; a cumulative sum drifts


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), every term summed in log space: the reference the bounds are held to."""
    if k >= n:
        return 1.0
    log_fact = _log_factorials(n)
    j = np.arange(k + 1)
    terms = log_fact[n] - log_fact[j] - log_fact[n - j] + j * math.log(p) + (n - j) * math.log1p(-p)
    return min(1.0, math.exp(_log_sum(terms)))


def poisson_cdf(k: int, mu: float) -> float:
    """P(Y <= k) for Y ~ Poisson(mu), every term summed in log space."""
    j = np.arange(k + 1)
    return min(1.0, math.exp(_log_sum(-mu + j * math.log(mu) - _log_factorials(k))))


def test_clopper_pearson_known_values_and_edges():
    assert clopper_pearson_upper(1, 10) == pytest.approx(0.3941633, abs=5e-7)
    assert clopper_pearson_upper(5, 10) == pytest.approx(0.7775589, abs=5e-7)
    assert clopper_pearson_upper(10, 10) == 1.0
    # the bound is where the binomial CDF falls to delta, and it grows with the count
    for k in (0, 3, 40):
        p = clopper_pearson_upper(k, 200, 0.1)
        assert binomial_cdf(k, 200, p) == pytest.approx(0.1, rel=1e-9)
    assert clopper_pearson_upper(2, 50) < clopper_pearson_upper(3, 50)


def test_garwood_known_values():
    assert garwood_upper(0) == pytest.approx(-math.log(0.05), rel=1e-13)
    assert garwood_upper(0) == pytest.approx(2.995732, abs=5e-7)
    for k, value in GARWOOD_95.items():
        assert garwood_upper(k) == pytest.approx(value, abs=2e-6), k
    mu = garwood_upper(250, 0.01)
    assert poisson_cdf(250, mu) == pytest.approx(0.01, rel=1e-9)


@pytest.mark.parametrize(
    "call, code",
    [
        (lambda: clopper_pearson_upper(0, 0), "bound_no_trials"),
        (lambda: clopper_pearson_upper(4, 3), "bound_count"),
        (lambda: garwood_upper(-1), "bound_count"),
        (lambda: garwood_upper(2, 1.0), "bound_delta"),
        (lambda: garwood_upper(2, 0.7), "bound_delta"),
        (lambda: clopper_pearson_upper(1, 3, 0.0), "bound_delta"),
    ],
)
def test_bound_refusals(call, code):
    with pytest.raises(AegisError, match=rf"^\[{code}\]"):
        call()


def coco(n_images: int, with_size: bool = True, extra_empty: int = 0) -> dict:
    """One 10x10 person per image at the origin; ``extra_empty`` more images without any GT."""
    total = n_images + extra_empty
    images = [
        {"id": i + 1, "file_name": f"f{i + 1}.png", **({"width": 1000, "height": 500} if with_size else {})}
        for i in range(total)
    ]
    anns = [{"id": i + 1, "image_id": i + 1, "category_id": 1, "bbox": [0, 0, 10, 10]} for i in range(n_images)]
    return {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "person"}]}


def test_an_image_with_only_false_alarms():
    gt = ground_truth_from_coco(coco(2, extra_empty=1))
    rows = [
        {"image_id": 1, "category_id": 1, "bbox": [0, 0, 10, 10], "score": 0.9},
        {"image_id": 2, "category_id": 1, "bbox": [0, 0, 10, 10], "score": 0.9},
        {"image_id": 3, "category_id": 1, "bbox": [50, 50, 10, 10], "score": 0.8},
        {"image_id": 3, "category_id": 1, "bbox": [80, 80, 10, 10], "score": 0.7},
    ]
    result = score_conditions(
        gt, {"clean": detections_from_results(rows, gt)}, 0.5, bootstrap=BootstrapOptions(n_bootstrap=1)
    )
    block = result["false_alarm"]
    assert block["confidence"] == pytest.approx(0.95)
    e = block["conditions"]["clean"]
    assert list(e) == list(FALSE_ALARM_KEYS)
    assert (e["fp"], e["images_with_fp"], e["n_images"]) == (2, 1, 3)
    assert e["false_alarm_image_share"] == pytest.approx(1 / 3)
    assert e["false_alarm_image_share_upper"] == pytest.approx(clopper_pearson_upper(1, 3))
    assert e["megapixels"] == pytest.approx(1.5)  # 3 images of 0.5 MP
    assert e["fp_per_image"] == pytest.approx(2 / 3) and e["fp_per_megapixel"] == pytest.approx(2 / 1.5)
    assert e["fp_per_image_upper"] == pytest.approx(GARWOOD_95[2] / 3, abs=1e-6)
    assert e["fp_per_megapixel_upper"] == pytest.approx(GARWOOD_95[2] / 1.5, abs=1e-6)
    # the existing per-condition numbers agree with the block
    clean = result["conditions"]["clean"]
    assert clean["fp_per_image"] == e["fp_per_image"]
    assert clean["false_alarm_image_share"] == e["false_alarm_image_share"]


def test_zero_false_alarms_still_have_a_bound_and_unknown_sizes_no_area_rate():
    gt = ground_truth_from_coco(coco(100, with_size=False))
    rows = [{"image_id": i + 1, "category_id": 1, "bbox": [0, 0, 10, 10], "score": 0.9} for i in range(100)]
    e = score_conditions(
        gt, {"clean": detections_from_results(rows, gt)}, 0.5, bootstrap=BootstrapOptions(n_bootstrap=1)
    )["false_alarm"]["conditions"]["clean"]
    assert e["fp"] == 0 and e["fp_per_image"] == 0.0
    assert e["fp_per_image_upper"] == pytest.approx(-math.log(0.05) / 100, rel=1e-12)
    assert e["false_alarm_image_share_upper"] == pytest.approx(1 - 0.05 ** (1 / 100), rel=1e-12)
    assert e["megapixels"] is None and e["fp_per_megapixel"] is None and e["fp_per_megapixel_upper"] is None


def test_no_images_gives_no_rates():
    e = false_alarm_risk(0, 0, 0, None)
    assert e["fp_per_image"] is None and e["false_alarm_image_share_upper"] is None


def budget_fixture(n_images: int, fp_scores: list[float]):
    """``n_images`` images each with one person found at score 0.95; false alarms at ``fp_scores`` on image 1."""
    gt = ground_truth_from_coco(coco(n_images))
    rows = [{"image_id": i + 1, "category_id": 1, "bbox": [0, 0, 10, 10], "score": 0.95} for i in range(n_images)]
    rows += [
        {"image_id": 1 + k, "category_id": 1, "bbox": [300, 300, 10, 10], "score": s} for k, s in enumerate(fp_scores)
    ]
    return gt, detections_from_results(rows, gt)


GRID = tuple(round(0.1 * k, 1) for k in range(1, 10))


def test_fp_budget_accepts_the_lowest_threshold_whose_bound_meets_it(tmp_path):
    # 100 images, budget 0.05 FP/img: Garwood(k)/100 <= 0.05 holds for k <= 1 FP (4.74) and fails at 2 (6.30).
    gt, dets = budget_fixture(100, [0.85, 0.55, 0.45, 0.35])
    frozen = freeze_threshold(gt, dets, rule="fp_per_image<=0.05", grid=GRID)
    assert frozen.value == 0.6 and frozen.rule == "fp_per_image<=0.05"
    risk = frozen.risk
    assert risk["budget"] == 0.05 and risk["delta"] == 0.05 and risk["bound"] == "garwood"
    assert risk["upper_bound"] == pytest.approx(GARWOOD_95[1] / 100, abs=1e-8)
    # visited from the top down to the first failure (0.5, two FPs), nothing below it
    assert risk["upper_bound_curve"][:4] == [None] * 4
    assert risk["upper_bound_curve"][4] == pytest.approx(GARWOOD_95[2] / 100, abs=1e-8)
    assert risk["upper_bound_curve"][-1] == pytest.approx(-math.log(0.05) / 100)
    path = tmp_path / "t.json"
    preds, gtf = tmp_path / "p.json", tmp_path / "g.json"
    preds.write_text("[]")
    gtf.write_text("{}")
    write_threshold_file(frozen, path, preds, gtf)
    value, info = read_threshold_file(path)
    assert value == 0.6 and info["rule"] == "fp_per_image<=0.05" and info["risk"]["delta"] == 0.05
    # a smaller delta asks for more evidence: the same data no longer allows a single FP
    strict = freeze_threshold(gt, dets, rule="fp_per_image<=0.05", grid=GRID, delta=0.01)
    assert strict.value == 0.9 and strict.risk["confidence"] == pytest.approx(0.99)


def test_share_budget_and_unreachable_budgets():
    gt, dets = budget_fixture(50, [0.85, 0.75, 0.65, 0.55, 0.45, 0.35, 0.25, 0.15])
    budget = clopper_pearson_upper(3, 50) + 1e-9  # exactly three images with false alarms fit
    frozen = freeze_threshold(gt, dets, rule=f"false_alarm_image_share<={budget!r}", grid=GRID)
    assert frozen.value == 0.6 and frozen.risk["bound"] == "clopper-pearson"
    with pytest.raises(AegisError, match=r"^\[threshold_risk_unreachable\].* 0\.05816,"):
        freeze_threshold(gt, dets, rule="false_alarm_image_share<=0.05", grid=GRID)  # CP(0, 50) = 0.05816
    with pytest.raises(AegisError, match=r"^\[threshold_delta_unused\]"):
        freeze_threshold(gt, dets, rule="max-f1", grid=GRID, delta=0.1)
    with pytest.raises(AegisError, match=r"^\[bound_delta\]"):
        freeze_threshold(gt, dets, rule="fp_per_image<=1", grid=GRID, delta=1.5)
    with pytest.raises(AegisError, match=r"^\[threshold_rule\]"):
        freeze_threshold(gt, dets, rule="false_alarm_image_share<=2", grid=GRID)
    # a rule without a risk budget writes no risk block
    assert freeze_threshold(gt, dets, grid=GRID).risk is None


def test_cli_budget_rule_and_refusals(tmp_path):
    gt_path, preds = tmp_path / "gt.json", tmp_path / "val.json"
    gt_path.write_text(json.dumps(coco(100)))
    rows = [{"image_id": i + 1, "category_id": 1, "bbox": [0, 0, 10, 10], "score": 0.95} for i in range(100)]
    rows += [{"image_id": 1, "category_id": 1, "bbox": [300, 300, 10, 10], "score": 0.4}]
    preds.write_text(json.dumps(rows))
    out = tmp_path / "t.json"
    runner = CliRunner()
    res = runner.invoke(
        app,
        [
            "freeze-threshold",
            str(preds),
            "--split-dir",
            str(gt_path),
            "--out",
            str(out),
            "--rule",
            "fp_per_image<=0.05",
            "--grid",
            "0.1:0.9:0.1",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "upper bound (garwood)" in res.output
    assert json.loads(out.read_text())["value"] == 0.1
    res = runner.invoke(
        app,
        [
            "freeze-threshold",
            str(preds),
            "--split-dir",
            str(gt_path),
            "--out",
            str(out),
            "--rule",
            "fp_per_image<=0.01",
        ],
    )
    assert_one_line_error(res, "threshold_risk_unreachable")
    res = runner.invoke(
        app, ["freeze-threshold", str(preds), "--split-dir", str(gt_path), "--out", str(out), "--delta", "0.1"]
    )
    assert_one_line_error(res, "threshold_delta_unused")


@pytest.mark.parametrize("k", [3000, 40000])
def test_large_counts_match_the_full_sums(k):
    # the bounds sum only the terms that can matter; the reference CDFs above sum every term
    mu = garwood_upper(k)
    assert poisson_cdf(k, mu) == pytest.approx(0.05, rel=1e-9)
    p = clopper_pearson_upper(k, 3 * k)
    assert binomial_cdf(k, 3 * k, p) == pytest.approx(0.05, rel=1e-9)
    assert k < mu < k + 3 * math.sqrt(k)
