"""Contracts of aegis_eval.metrics.bootstrap: keyed resampling, per-resample metrics from cached tables, intervals."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.random import PCG64, Generator

from aegis_data.engine.seeding import KeyedRandom
from aegis_data.errors import AegisError
from aegis_eval.metrics.bootstrap import (
    BootstrapOptions,
    bootstrap_ap,
    bootstrap_samples,
    intervals,
    linear_quantiles,
    paired_drop_intervals,
    percentile_interval,
    resample_weights,
)
from aegis_eval.metrics.coco import accumulate, evaluate_images
from aegis_eval.metrics.matching import PerImageCounts, match_at_threshold
from aegis_eval.metrics.result_keys import CI_METRICS
from aegis_eval.metrics.types import Detections, GroundTruth
from tests.eval.metrics.test_metrics_parity import make_fixture


def scene(n_images: int, key: int) -> tuple[GroundTruth, Detections]:
    """A detector-like condition: jittered copies of GT with high scores plus low-scored clutter."""
    rng = Generator(PCG64(key))
    n_gt = rng.integers(0, 6, n_images)
    box_image = np.repeat(np.arange(n_images), n_gt)
    g = len(box_image)
    wh = rng.uniform(10, 150, (g, 2))
    boxes = np.column_stack([rng.uniform(0, 800, (g, 2)), wh])
    gt = GroundTruth(
        image_ids=np.arange(n_images, dtype=np.int64) + 1,
        file_names=tuple(f"{i}.png" for i in range(n_images)),
        widths=np.full(n_images, 1000),
        heights=np.full(n_images, 1000),
        box_image=box_image,
        boxes=boxes,
        areas=wh[:, 0] * wh[:, 1],
        iscrowd=np.zeros(g, bool),
        ann_ids=np.arange(1, g + 1),
    )
    found = rng.random(g) < 0.8
    hit = boxes[found] + rng.normal(0, 0.06, (int(found.sum()), 4)) * np.repeat(wh[found], 2, axis=1)
    n_clutter = 3 * n_images
    clutter = np.column_stack([rng.uniform(0, 800, (n_clutter, 2)), rng.uniform(10, 150, (n_clutter, 2))])
    dets = Detections(
        det_image=np.concatenate([box_image[found], rng.integers(0, n_images, n_clutter)]),
        boxes=np.concatenate([hit, clutter]),
        scores=np.concatenate([rng.uniform(0.3, 1.0, int(found.sum())), rng.uniform(0, 0.6, n_clutter)]),
    )
    return gt, dets


def perfect_counts(gt: GroundTruth) -> PerImageCounts:
    n = np.bincount(gt.box_image, minlength=gt.n_images)
    zero = np.zeros(gt.n_images, dtype=np.int64)
    return PerImageCounts(
        tp=n, fp=zero, n_gt=n, tp_small=n, gt_small=n, tp_medium=zero, gt_medium=zero, tp_large=zero, gt_large=zero
    )


# --- options and resampling ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_bootstrap": 0}, "n_bootstrap"),
        ({"n_bootstrap": True}, "n_bootstrap"),
        ({"n_bootstrap": 2.5}, "n_bootstrap"),
        ({"confidence": 0.0}, "confidence"),
        ({"confidence": 1.0}, "confidence"),
        ({"confidence": float("nan")}, "confidence"),
        ({"seed": "7"}, "seed"),
    ],
)
def test_options_are_validated(kwargs, message):
    with pytest.raises(AegisError, match=message):
        BootstrapOptions(**kwargs)


def test_resample_weights_shape_and_totals():
    w = resample_weights(50, BootstrapOptions(n_bootstrap=200, seed=3))
    assert w.shape == (200, 50) and w.dtype == np.int32
    assert np.all(w.sum(axis=1) == 50) and w.min() >= 0
    assert abs(w.mean() - 1.0) < 1e-12  # every row is a full resample of 50 images
    assert 0.3 < (w == 0).mean() < 0.45  # about (1 - 1/n)^n of the images are left out of a resample


def test_resample_weights_are_keyed_and_pinned():
    a = resample_weights(30, BootstrapOptions(n_bootstrap=40, seed=5))
    assert np.array_equal(a, resample_weights(30, BootstrapOptions(n_bootstrap=40, seed=5)))
    assert not np.array_equal(a, resample_weights(30, BootstrapOptions(n_bootstrap=40, seed=6)))
    # the key includes B, so a different B is a different stream (not a prefix)
    assert not np.array_equal(a[:20], resample_weights(30, BootstrapOptions(n_bootstrap=20, seed=5)))
    # golden rows: the draws come from raw PCG64 words, so they must never change across numpy versions
    small = resample_weights(6, BootstrapOptions(n_bootstrap=3, seed=0))
    assert small.tolist() == GOLDEN_SMALL
    # and they are the documented keyed stream: raw words of KeyedRandom(key) reduced modulo the image count
    words = KeyedRandom("aegis-bootstrap/1|0|bootstrap|6|3|none").bits(18)
    assert (words < np.uint64((2**64 // 6) * 6)).all()  # no rejection happened in these 18 words
    draws = (words % np.uint64(6)).astype(np.int64).reshape(3, 6)
    assert [np.bincount(r, minlength=6).tolist() for r in draws] == GOLDEN_SMALL


GOLDEN_SMALL = [[2, 1, 1, 0, 1, 1], [0, 0, 2, 1, 1, 2], [2, 0, 1, 2, 0, 1]]


def test_single_resample_is_the_point_estimate():
    assert np.array_equal(resample_weights(7, BootstrapOptions(n_bootstrap=1)), np.ones((1, 7), np.int32))


def test_cluster_resampling_keeps_clusters_whole():
    labels = np.array([4, 4, 4, 9, 9, 1, 7, 7, 7, 7, 2])
    w = resample_weights(len(labels), BootstrapOptions(n_bootstrap=300, seed=1), clusters=labels)
    for lab in np.unique(labels):
        members = w[:, labels == lab]
        assert np.all(members == members[:, :1])
    first = [np.flatnonzero(labels == lab)[0] for lab in np.unique(labels)]
    assert np.all(w[:, first].sum(axis=1) == len(first))  # each row draws as many clusters as there are
    # only the partition matters, not the label values
    relabelled = resample_weights(len(labels), BootstrapOptions(n_bootstrap=300, seed=1), clusters=labels * 10 + 3)
    assert np.array_equal(w, relabelled)
    assert not np.array_equal(w, resample_weights(len(labels), BootstrapOptions(n_bootstrap=300, seed=1)))


@pytest.mark.parametrize(
    "n_images, clusters, message",
    [
        (0, None, "cannot resample"),
        (3, np.array([1, 2]), "one label per image"),
        (2, np.array([0.5, 1.0]), "integers"),
    ],
)
def test_bad_resampling_inputs(n_images, clusters, message):
    with pytest.raises(AegisError, match=message):
        resample_weights(n_images, BootstrapOptions(n_bootstrap=5), clusters)


# --- per-resample metrics -----------------------------------------------------------------------------------


def _assert_ap_equal(ours, table, weights, context):
    for b in range(len(weights)):
        ref = accumulate(table, weights[b])
        for m in ("map50", "map50_95"):
            if ref[m] == -1.0:
                assert np.isnan(ours[m][b]), (context, b, m)
            else:
                assert abs(ours[m][b] - ref[m]) <= 1e-12, (context, b, m, ours[m][b], ref[m])


@pytest.mark.parametrize("key", range(0, 60, 3))
def test_bootstrap_ap_equals_weighted_accumulate(key):
    # keys divisible by 3 draw scores from six values: many equal-score detections within one image, the
    # case where the reference repeats a whole tie block per image copy
    gt, dets = make_fixture(key)
    table = evaluate_images(gt, dets)
    weights = resample_weights(gt.n_images, BootstrapOptions(n_bootstrap=25, seed=key))
    _assert_ap_equal(bootstrap_ap(weights, table), table, weights, f"key {key}")


def test_weighted_fixtures_exercise_mixed_tie_blocks():
    """Guard for the test above: images with a TP and an FP at the same score, drawn more than once."""
    seen = 0
    for key in range(0, 60, 3):
        gt, dets = make_fixture(key)
        table = evaluate_images(gt, dets)
        weights = resample_weights(gt.n_images, BootstrapOptions(n_bootstrap=25, seed=key))
        o = table.order
        tp = table.matched[0, 0][o] & ~table.ignored[0, 0][o]
        fp = ~table.matched[0, 0][o] & ~table.ignored[0, 0][o]
        img, score = table.det_image[o], table.scores[o]
        for i in np.unique(img[tp]):
            mixed = np.intersect1d(score[tp & (img == i)], score[fp & (img == i)])
            seen += int(len(mixed) > 0 and weights[:, i].max() > 1)
    assert seen >= 20


def test_perfect_predictions_give_one_and_zero_width_intervals():
    gt, _ = scene(40, key=2)
    dets = Detections(det_image=gt.box_image, boxes=gt.boxes, scores=np.linspace(1, 0.5, gt.n_boxes))
    weights = resample_weights(gt.n_images, BootstrapOptions(n_bootstrap=100, seed=0))
    samples = bootstrap_samples(weights, evaluate_images(gt, dets), perfect_counts(gt))
    assert list(samples) == list(CI_METRICS)
    for m, v in samples.items():
        expected = 0.0 if m == "fp_per_image" else 1.0
        assert v.shape == (100,)
        assert np.allclose(v, expected, rtol=0, atol=1e-12), m
        lo, hi = percentile_interval(v)
        assert hi - lo <= 1e-12


def test_single_resample_equals_point_estimates():
    gt, dets = scene(60, key=4)
    table = evaluate_images(gt, dets)
    match = match_at_threshold(gt, dets, 0.5)
    weights = resample_weights(gt.n_images, BootstrapOptions(n_bootstrap=1))
    samples = bootstrap_samples(weights, table, match.counts)
    point = accumulate(table)
    assert samples["map50"][0] == pytest.approx(point["map50"], abs=1e-12)
    assert samples["map50_95"][0] == pytest.approx(point["map50_95"], abs=1e-12)
    totals = match.counts.totals()
    assert samples["recall"][0] == pytest.approx(totals["tp"] / totals["n_gt"])
    assert samples["fp_per_image"][0] == pytest.approx(totals["fp"] / gt.n_images)
    assert all(hi == lo for lo, hi in intervals(samples).values())


def test_intervals_are_deterministic_and_contain_the_point_estimate():
    gt, dets = scene(150, key=9)
    table = evaluate_images(gt, dets)
    counts = match_at_threshold(gt, dets, 0.5).counts
    point_samples = bootstrap_samples(np.ones((1, gt.n_images), np.int32), table, counts)

    def run(seed):
        w = resample_weights(gt.n_images, BootstrapOptions(n_bootstrap=300, seed=seed))
        return intervals(bootstrap_samples(w, table, counts), 0.95)

    a = run(0)
    assert a == run(0)
    assert a != run(1)
    for m, (lo, hi) in a.items():
        assert lo < hi, m
        assert lo <= float(point_samples[m][0]) <= hi, (m, lo, point_samples[m][0], hi)


def test_samples_reject_mismatched_tables():
    gt, dets = scene(10, key=1)
    table = evaluate_images(gt, dets)
    with pytest.raises(AegisError, match=r"shape \(B, 10\)"):
        bootstrap_samples(np.ones((3, 9), np.int32), table, perfect_counts(gt))
    with pytest.raises(AegisError, match="integer"):
        bootstrap_samples(np.ones((3, 10)), table, perfect_counts(gt))
    other, _ = scene(12, key=1)
    with pytest.raises(AegisError, match="same ground truth"):
        bootstrap_samples(np.ones((3, 10), np.int32), table, perfect_counts(other))


# --- intervals ------------------------------------------------------------------------------------------------


def test_percentile_interval_rules():
    assert percentile_interval(np.arange(101.0)) == pytest.approx((2.5, 97.5), abs=1e-12)
    assert percentile_interval(np.r_[np.arange(101.0), np.nan, np.nan], 0.9) == pytest.approx((5.0, 95.0), abs=1e-12)
    assert percentile_interval(np.full(5, np.nan)) == (None, None)
    with pytest.raises(AegisError, match="confidence"):
        percentile_interval(np.arange(3.0), 1.5)


def _quantile_cases():
    """Arrays the intervals meet: resampled rates (ties, exact zeros, both signs of zero), drops, counts, tiny and
    huge magnitudes, infinities, one value; and every confidence the report or a user might ask for."""
    rng = Generator(PCG64(11))
    cases = [np.array([0.5]), np.array([-0.0, 0.0]), np.array([0.0, -0.0, 0.0]), np.array([np.inf, 1.0, -np.inf])]
    cases += [np.array([-np.inf, -np.inf]), np.array([1.0, np.inf]), np.arange(101.0), np.arange(1000.0)[::-1]]
    for n in (2, 3, 7, 10, 39, 40, 41, 100, 200, 999, 1000, 1001, 5000):
        cases += [
            rng.random(n),
            np.round(rng.random(n), 2),  # many ties
            rng.integers(0, 30, n) / 30.0,  # a resampled rate
            rng.normal(0, 1e-3, n) - rng.normal(0, 1e-3, n),  # paired differences around zero
            rng.choice([-0.0, 0.0, 0.25], n),
            rng.normal(0, 1, n) * 10.0 ** rng.integers(-300, 300, n),
        ]
    return cases


def test_linear_quantiles_are_numpys_percentile_bit_for_bit():
    """The intervals' quantiles (written out so that a score need not import numpy.ma) give np.percentile's bits."""
    confidences = (0.5, 0.8, 0.9, 0.95, 0.99, 0.999, 1e-9, 1 - 1e-9, 0.6827)
    with np.errstate(invalid="ignore"):  # inf - inf: both give NaN, and the bytes are compared
        _compare_quantiles(confidences)


def _compare_quantiles(confidences) -> None:
    for values in _quantile_cases():
        for c in confidences:
            q = [50.0 * (1.0 - c), 50.0 * (1.0 + c)]
            want = np.percentile(values, q)
            got = linear_quantiles(values, np.array(q) / 100)
            assert got.tobytes() == want.tobytes(), (values[:5], c, got, want)
            assert np.array(percentile_interval(values, c)).tobytes() == want.tobytes()
        for q in (0.0, 0.5, 1.0, 0.123456789):
            assert linear_quantiles(values, np.array([q])).tobytes() == np.quantile(values, [q]).tobytes()


def test_paired_drop_intervals():
    clean = {
        "recall": np.array([0.8, 0.6, 0.5, 0.0]),
        "f1": np.array([0.5, 0.5, 0.5, 0.5]),
        "map50": np.array([0.4, 0.4, 0.4, 0.4]),
    }
    cond = {"recall": np.array([0.4, 0.3, 0.25, 0.1]), "f1": np.array([0.5, 0.5, 0.5, 0.5])}
    out = paired_drop_intervals(clean, cond, 0.95)
    assert set(out) == {"recall", "f1"}  # map50 only on one side
    assert out["recall"] == [pytest.approx(0.5), pytest.approx(0.5)]  # the 0-clean resample is skipped
    assert out["f1"] == [0.0, 0.0]
    assert paired_drop_intervals({"recall": np.zeros(3)}, {"recall": np.zeros(3)}) == {"recall": [None, None]}
    with pytest.raises(AegisError, match="same bootstrap weights"):
        paired_drop_intervals({"recall": np.ones(3)}, {"recall": np.ones(4)})


@pytest.mark.parametrize("n_rows", [1, 2, 5, 17])
def test_nanmean_rows_gives_nanmean_values_bit_for_bit(n_rows):
    """The shared per-resample mean (robustness summaries, class macros, mitigation) replaced np.nanmean in two
    places: its values must be np.nanmean's to the last bit, all-NaN columns included."""
    import warnings

    from aegis_eval.metrics.bootstrap import nanmean_rows

    rng = np.random.default_rng(n_rows)
    rows = rng.random((n_rows, 300)) * 10.0 ** rng.integers(-3, 4, (n_rows, 300))
    rows[rng.random(rows.shape) < 0.3] = np.nan
    rows[:, :7] = np.nan  # columns where no row is defined
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = np.nanmean(np.stack(list(rows)), axis=0)
    got = nanmean_rows(list(rows))
    assert np.array_equal(np.isnan(got), np.isnan(expected))  # NaN where a column is empty (its sign bit aside)
    assert got[~np.isnan(got)].tobytes() == expected[~np.isnan(expected)].tobytes()
