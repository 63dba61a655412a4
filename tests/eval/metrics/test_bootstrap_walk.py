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


def _assert_same_inputs(table):
    ext = load_extension("aegis_eval.metrics._cbootstrap", "AP bootstrap")
    ours, twin = bs._walk_inputs(table, ext), bs._walk_inputs(table)
    for a, b, name in zip(ours[:3], twin[:3], ("det_img", "flags", "per_image")):
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    assert len(ours[3]) == len(twin[3])
    for t, (a, b) in enumerate(zip(ours[3], twin[3])):
        for k in range(7):
            assert a[k].dtype == b[k].dtype == np.int64 and np.array_equal(a[k], b[k]), (t, k)


@compiled
@pytest.mark.parametrize("decimals", [0, 1, 2, 5])
@pytest.mark.parametrize("key", [40, 41, 42])
def test_walk_inputs_equal_the_numpy_plans(decimals, key):
    """Flags, per-image counts and mixed tie blocks built in C equal the NumPy plans' (ties, crowds, empty images;
    blocks of one detection take a path of their own in C, so mixed blocks followed by single ones matter)."""
    gt, dets = crowded(60, key + decimals, decimals)
    table = evaluate_images(gt, dets)
    assert any(len(b[0]) for b in bs._walk_inputs(table)[3]) or decimals == 5, "the fixture must hold mixed blocks"
    _assert_same_inputs(table)


@compiled
def test_walk_inputs_without_detections():
    gt, dets = crowded(5, 1, 2)
    none = type(dets)(det_image=np.zeros(0, np.int64), boxes=np.zeros((0, 4)), scores=np.zeros(0))
    _assert_same_inputs(evaluate_images(gt, none))


@compiled
def test_walk_inputs_refuse_bad_indices():
    ext = load_extension("aegis_eval.metrics._cbootstrap", "AP bootstrap")
    z = np.zeros(2, np.int64)
    flags = np.zeros(2, np.uint64)
    per_image = np.zeros((2, 3), np.int64)
    m = np.zeros(2, np.uint8)
    with pytest.raises(ValueError, match="out of range"):
        ext.walk_inputs(np.array([0, 2], np.int64), z, np.zeros(2), m, m, 1, 2, z.copy(), flags, per_image)
    with pytest.raises(ValueError, match="out of range"):
        ext.walk_inputs(np.array([0, 1], np.int64), np.array([0, 5]), np.zeros(2), m, m, 1, 2, z, flags, per_image)
    with pytest.raises(ValueError, match="expected"):  # matched is not T x D
        ext.walk_inputs(np.array([0, 1], np.int64), z, np.zeros(2), np.zeros(3, np.uint8), m, 1, 2, z, flags, per_image)
