"""bootstrap_samples at B = 1 (one row of ones, the point estimate) takes the table's own AP and the summed counts
instead of walking the resample machinery; the values must be the walk's, bit for bit, with either kernel."""

from __future__ import annotations

import numpy as np
import pytest

from aegis_eval.metrics import bootstrap as bs
from aegis_eval.metrics.bootstrap import BootstrapOptions, ResampleRows, bootstrap_samples, resample_weights
from aegis_eval.metrics.coco import accumulate, evaluate_images
from aegis_eval.metrics.matching import match_at_threshold
from aegis_eval.metrics.types import Detections
from tests.eval.metrics.test_bootstrap import scene
from tests.eval.metrics.test_bootstrap_compiled import crowded
from tests.eval.metrics.test_metrics_parity import make_fixture


def _walked(monkeypatch, weights, table, counts):
    """The full resample walk on the same row (the point path switched off)."""
    with monkeypatch.context() as m:
        m.setattr(bs, "_point_ap", lambda t, ap: bs.bootstrap_ap(ResampleRows(np.asarray(weights)), t))
        return bootstrap_samples(weights, table, counts)


def _cases():
    for key in range(0, 60, 4):
        yield make_fixture(key)
    for decimals in (1, 2, 5):
        yield crowded(40, 11 + decimals, decimals)
    gt, dets = scene(20, 4)
    yield gt, dets
    yield gt, Detections(det_image=np.zeros(0, np.int64), boxes=np.zeros((0, 4)), scores=np.zeros(0))


@pytest.mark.parametrize("kernels", ["auto", "numpy"])
def test_point_samples_equal_the_walk(monkeypatch, kernels):
    monkeypatch.setenv("AEGIS_KERNELS", kernels)
    n = 0
    for gt, dets in _cases():
        table = evaluate_images(gt, dets)
        counts = match_at_threshold(gt, dets, 0.3, 0.5).counts
        weights = resample_weights(gt.n_images, BootstrapOptions(n_bootstrap=1))
        walked = _walked(monkeypatch, weights, table, counts)
        for given in (None, accumulate(table)):
            point = bootstrap_samples(ResampleRows(weights), table, counts, given)
            assert list(point) == list(walked)
            for m, v in walked.items():
                assert point[m].dtype == v.dtype and point[m].shape == (1,)
                assert np.array_equal(point[m], v, equal_nan=True), (n, m, point[m], v)
        n += 1
    assert n > 15


def test_point_path_only_for_the_row_of_ones(monkeypatch):
    """A single row that is not all ones (a one-resample draw, a dropped image) still walks the table."""
    gt, dets = scene(20, 5)
    table = evaluate_images(gt, dets)
    counts = match_at_threshold(gt, dets, 0.3, 0.5).counts
    walks = []
    monkeypatch.setattr(
        bs, "bootstrap_ap", lambda *a: walks.append(1) or {"map50": np.zeros(1), "map50_95": np.zeros(1)}
    )
    weights = np.ones((1, gt.n_images), np.int32)
    weights[0, 0] = 2
    bootstrap_samples(weights, table, counts)
    assert walks == [1]
    bootstrap_samples(np.ones((1, gt.n_images), np.int32), table, counts)
    assert walks == [1]
