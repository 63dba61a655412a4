"""exact_bounds' log factorials are math.lgamma(float(j) + 1.0) of each j, bit for bit, however they are computed."""

from __future__ import annotations

import math

import numpy as np

from aegis_eval.metrics import exact_bounds


def test_log_factorials_are_lgamma_of_each_count():
    values = np.concatenate([np.arange(0, 300), exact_bounds._kept_terms(61_274), [2**40, 2**52 - 1]]).astype(np.int64)
    got = exact_bounds._log_factorials(values)
    want = np.array([math.lgamma(float(j) + 1.0) for j in values.tolist()], dtype=np.float64)
    assert got.dtype == np.float64 and got.tobytes() == want.tobytes()
    assert exact_bounds._log_factorials(np.zeros(0, np.int64)).shape == (0,)
