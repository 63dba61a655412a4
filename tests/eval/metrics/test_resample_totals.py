"""ResampleRows.totals multiplies in float64 blocks where every total is exact below 2**53, and in NumPy's integer
loop otherwise: the same int64 totals either way."""

from __future__ import annotations

import numpy as np

from aegis_eval.metrics import bootstrap as bs
from aegis_eval.metrics.bootstrap import BootstrapOptions, ResampleRows, resample_weights


def test_float_blocks_give_the_integer_product(monkeypatch):
    rng = np.random.default_rng(5)
    for n_images, b, k in [(1000, 1000, 21), (37, 97, 3), (5, 1, 11), (300, 64, 1)]:
        rows = ResampleRows(resample_weights(n_images, BootstrapOptions(n_bootstrap=b, seed=k)))
        columns = rng.integers(0, 10_000, (n_images, k))
        for step in (None, 1, 7):  # block edges inside and across the rows
            if step is not None:
                monkeypatch.setattr(bs, "_SINGLE_THREAD_PRODUCT", step * k * n_images)
            got = rows.totals(columns)
            assert got.dtype == np.int64
            assert np.array_equal(got, rows.weights @ columns.astype(np.int64))
        assert rows._float_weights is not None  # the float path ran


def test_totals_beyond_float_precision_take_the_integer_loop():
    rows = ResampleRows(np.array([[3, 0, 2], [1, 1, 1]], np.int32))
    big = np.array([[2**52 + 1], [5], [2**51 + 3]], np.int64)  # 3 * (2**52 + 1) is not a float64
    got = rows.totals(big)
    assert got.tolist() == [[3 * (2**52 + 1) + 2 * (2**51 + 3)], [2**52 + 1 + 5 + 2**51 + 3]]
    assert rows._float_weights is None
    empty = rows.totals(np.zeros((3, 0), np.int64))
    assert empty.shape == (2, 0) and empty.dtype == np.int64
