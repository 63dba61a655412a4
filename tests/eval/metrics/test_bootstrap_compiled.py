"""The compiled AP bootstrap (aegis_eval/metrics/_cbootstrap.c) against its NumPy twin, and the shared resample rows
(``ResampleRows``) of a sweep: identical per-resample values, bit for bit, on the cases that exercise every branch
(mixed tie blocks copied many times, ignored detections, resamples without GT, clusters, B = 1)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from numpy.random import PCG64, Generator

from aegis_data.compiled import load_extension
from aegis_eval.metrics import bootstrap as bs
from aegis_eval.metrics.bootstrap import (
    BootstrapOptions,
    ResampleRows,
    bootstrap_ap,
    bootstrap_samples,
    resample_weights,
)
from aegis_eval.metrics.coco import accumulate, evaluate_images
from aegis_eval.metrics.matching import match_at_threshold
from aegis_eval.metrics.types import Detections, GroundTruth
from tests.eval.metrics.test_bootstrap import scene
from tests.eval.metrics.test_metrics_parity import make_fixture

EXTENSION = "aegis_eval.metrics._cbootstrap"
compiled = pytest.mark.skipif(load_extension(EXTENSION, "AP bootstrap") is None, reason="C extension not built")


def _numpy_ap(monkeypatch, weights, table):
    with monkeypatch.context() as m:
        m.setenv("AEGIS_KERNELS", "numpy")
        return bootstrap_ap(weights, table)


def _assert_identical(a, b, context):
    for m in ("map50", "map50_95"):
        assert a[m].dtype == b[m].dtype == np.float64
        assert np.array_equal(a[m], b[m], equal_nan=True), (context, m, np.nanmax(np.abs(a[m] - b[m])))


def crowded(n_images: int, key: int, decimals: int) -> tuple[GroundTruth, Detections]:
    """Ties everywhere (scores rounded to ``decimals``), crowd GT (ignored detections), images without GT."""
    gt, dets = scene(n_images, key)
    rng = Generator(PCG64(key + 100))
    crowd = rng.random(gt.n_boxes) < 0.15
    return replace(gt, iscrowd=crowd), replace(dets, scores=np.round(dets.scores, decimals))


@compiled
@pytest.mark.parametrize("key", range(0, 60, 3))
def test_compiled_equals_numpy_on_the_parity_fixtures(monkeypatch, key):
    gt, dets = make_fixture(key)
    table = evaluate_images(gt, dets)
    weights = resample_weights(gt.n_images, BootstrapOptions(n_bootstrap=70, seed=key))
    _assert_identical(bootstrap_ap(weights, table), _numpy_ap(monkeypatch, weights, table), key)


@compiled
@pytest.mark.parametrize("decimals", [1, 2, 5])
@pytest.mark.parametrize("clustered", [False, True])
def test_compiled_equals_numpy_with_ties_crowds_and_clusters(monkeypatch, decimals, clustered):
    gt, dets = crowded(60, 7 + decimals, decimals)
    table = evaluate_images(gt, dets)
    assert table.ignored[0].any(), "the fixture must hold ignored detections"
    clusters = np.arange(gt.n_images) // 4 if clustered else None
    # B not a multiple of the lane width: the padded rows must not leak into the values
    weights = resample_weights(gt.n_images, BootstrapOptions(n_bootstrap=97, seed=decimals), clusters)
    ours = bootstrap_ap(weights, table)
    _assert_identical(ours, _numpy_ap(monkeypatch, weights, table), (decimals, clustered))
    for b in range(0, 97, 16):  # and both equal the reference on the repeated data
        ref = accumulate(table, weights[b])
        assert ours["map50_95"][b] == pytest.approx(ref["map50_95"], abs=1e-12)


@compiled
def test_compiled_rows_without_gt_and_heavy_copies(monkeypatch):
    """Rows that draw only images without GT are NaN; a row that draws one tie-block image many times lays out
    every copy."""
    gt, dets = crowded(12, 3, 1)
    table = evaluate_images(gt, dets)
    empty = np.flatnonzero(np.bincount(gt.box_image, minlength=gt.n_images) == 0)
    assert len(empty)
    weights = np.ones((5, gt.n_images), np.int32)
    weights[1] = 0
    weights[1, empty[0]] = gt.n_images  # no GT in this resample
    weights[2] = 0
    weights[2, np.argmax(np.bincount(table.det_image, minlength=gt.n_images))] = gt.n_images
    weights[3] = np.arange(gt.n_images) % 3
    ours = bootstrap_ap(weights, table)
    assert np.isnan(ours["map50"][1]) and not np.isnan(ours["map50"][0])
    _assert_identical(ours, _numpy_ap(monkeypatch, weights, table), "rows")


@compiled
def test_compiled_point_estimate_and_no_detections(monkeypatch):
    gt, dets = scene(20, 4)
    none = Detections(det_image=np.zeros(0, np.int64), boxes=np.zeros((0, 4)), scores=np.zeros(0))
    for d in (dets, none):
        table = evaluate_images(gt, d)
        ones = np.ones((1, gt.n_images), np.int32)
        ours = bootstrap_ap(ones, table)
        _assert_identical(ours, _numpy_ap(monkeypatch, ones, table), d.n)
        point = accumulate(table)
        assert ours["map50"][0] == point["map50"] and ours["map50_95"][0] == point["map50_95"]


def test_shared_rows_give_the_matrix_results(monkeypatch):
    """A sweep passes one ResampleRows to every condition: the samples are those of the plain matrix, on both paths."""
    gt, _ = scene(40, 11)
    weights = resample_weights(gt.n_images, BootstrapOptions(n_bootstrap=50, seed=2))
    shared = ResampleRows(weights)
    for mode in ("auto", "numpy"):
        monkeypatch.setenv("AEGIS_KERNELS", mode)
        for key in (11, 12, 13):  # three "conditions" on the same GT
            _, dets = scene(40, key)
            dets = Detections(det_image=dets.det_image % gt.n_images, boxes=dets.boxes, scores=dets.scores)
            table = evaluate_images(gt, dets)
            counts = match_at_threshold(gt, dets, 0.4).counts
            a, b = bootstrap_samples(shared, table, counts), bootstrap_samples(weights, table, counts)
            assert a.keys() == b.keys()
            for m in a:
                assert np.array_equal(a[m], b[m], equal_nan=True), (mode, key, m)


def test_shared_rows_check_the_image_count():
    gt, dets = scene(10, 1)
    shared = ResampleRows(np.ones((3, 9), np.int32))
    with pytest.raises(ValueError, match=r"shape \(B, 10\)"):
        bootstrap_ap(shared, evaluate_images(gt, dets))
    with pytest.raises(ValueError, match="integer multiplicities"):
        ResampleRows(np.ones((3, 9)))


@compiled
def test_extension_refuses_bad_inputs():
    """Sizes, indices and flags are checked at the C boundary, never trusted."""
    ext = load_extension(EXTENSION, "AP bootstrap")
    lanes = ext.lanes()
    q = np.zeros((lanes, 1, 3))
    wt = np.zeros((2, lanes))
    need = np.zeros((lanes, 3))
    totals = np.zeros((3, lanes))
    det = np.array([0, 1], np.int64)
    flags = np.zeros(2, np.uint64)
    empty = np.zeros(0, np.int64)
    no_blocks = (empty,) * 4 + (np.zeros(1, np.int64), empty, empty, 0)

    def call(*, q=q, rows=lanes, det=det, flags=flags, totals=totals, blocks=(no_blocks,), begin=0, end=lanes):
        ext.ap_precisions(q, wt, rows, 2, det, flags, totals, need, 3, blocks, begin, end, True)

    call()  # the well-formed call runs
    with pytest.raises(ValueError, match="out of range"):  # image 5 of 2
        call(det=np.array([0, 5], np.int64))
    with pytest.raises(ValueError, match="out of range"):  # a flag for threshold 3 of 1
        call(flags=np.array([0, 1 << 3], np.uint64))
    with pytest.raises(ValueError, match="block starts disagree"):  # a block start the block list lacks
        call(flags=np.array([0, 1 << 48], np.uint64))
    one_block = (np.array([0], np.int64), np.array([1], np.int64)) + (np.zeros(1, np.int64),) * 2
    one_block += (np.array([0, 1], np.int64), np.ones(1, np.int64), np.zeros(1, np.int64), 1)
    with pytest.raises(ValueError, match="block starts disagree"):  # a listed block the flags do not start
        call(blocks=(one_block,))
    with pytest.raises(ValueError, match="multiples of the lane width"):
        call(begin=0, end=2 * lanes)
    with pytest.raises(ValueError, match="expected"):  # q too small for rows x T x R
        call(q=np.zeros(3))
    with pytest.raises(ValueError, match="expected"):  # totals of the wrong size
        call(totals=np.zeros((2, lanes)))


@compiled
def test_row_ranges_on_threads_give_the_single_range_values(monkeypatch):
    """The rows split over threads (one range per core) give the values of one range on one thread."""
    gt, dets = crowded(50, 21, 2)
    table = evaluate_images(gt, dets)
    weights = resample_weights(gt.n_images, BootstrapOptions(n_bootstrap=200, seed=9))
    monkeypatch.setattr(bs, "_cores", lambda: 3)
    split = bootstrap_ap(weights, table)
    monkeypatch.setattr(bs, "_cores", lambda: 1)
    _assert_identical(split, bootstrap_ap(weights, table), "threads")


def test_numpy_switch_runs_the_twin(monkeypatch):
    monkeypatch.setenv("AEGIS_KERNELS", "numpy")
    assert load_extension(EXTENSION, "AP bootstrap") is None
    gt, dets = scene(15, 2)
    table = evaluate_images(gt, dets)
    w = resample_weights(gt.n_images, BootstrapOptions(n_bootstrap=4, seed=1))
    calls = []
    monkeypatch.setattr(bs, "_compiled_ap", lambda *a: calls.append(a))
    bootstrap_ap(w, table)
    assert not calls
