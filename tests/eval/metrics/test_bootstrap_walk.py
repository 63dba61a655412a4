"""The compiled AP bootstrap's walk (aegis_eval/metrics/_cbootstrap.c) in both of its envelope modes: cross products
of exact counts (below bootstrap._EXACT_RATIO) and a division per point (above it). Both must give the NumPy twin's
values bit for bit (the crowded fixture's ties and copies make the envelope's tie-break visible: keeping the earlier
of two points with equal cross products fails here)."""

from __future__ import annotations

import numpy as np
import pytest

from aegis_data.compiled import load_extension
from aegis_eval.metrics import bootstrap as bs
from aegis_eval.metrics.bootstrap import BootstrapOptions, bootstrap_ap, resample_weights
from aegis_eval.metrics.coco import evaluate_images
from tests.eval.metrics.test_bootstrap_compiled import crowded

compiled = pytest.mark.skipif(
    load_extension("aegis_eval.metrics._cbootstrap", "AP bootstrap") is None, reason="C extension not built"
)


def _both(monkeypatch, weights, table):
    ours = bootstrap_ap(weights, table)
    with monkeypatch.context() as m:
        m.setenv("AEGIS_KERNELS", "numpy")
        twin = bootstrap_ap(weights, table)
    for k in ("map50", "map50_95"):
        assert np.array_equal(ours[k], twin[k], equal_nan=True), k
    return ours


@compiled
@pytest.mark.parametrize("exact", [True, False])
def test_both_envelope_modes_give_the_numpy_values(monkeypatch, exact):
    gt, dets = crowded(70, 31, 2)
    table = evaluate_images(gt, dets)
    weights = resample_weights(gt.n_images, BootstrapOptions(n_bootstrap=90, seed=4))
    if not exact:  # every count counts as too large for exact cross products: the walk divides per point
        monkeypatch.setattr(bs, "_EXACT_RATIO", 0)
    _both(monkeypatch, weights, table)
