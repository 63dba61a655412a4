"""A sweep resolves every condition's image ids against one GT: the id resolver is built once per GT (held by a weak
reference, so the cache never keeps a GT alive) and gives the same rows as a fresh one."""

from __future__ import annotations

import gc

import numpy as np

from aegis_eval.protocols import predictions
from tests.eval.protocols.test_results_reader import _gt


def test_one_resolver_per_gt(monkeypatch):
    built = []
    real = predictions._IdResolver
    monkeypatch.setattr(predictions, "_IdResolver", lambda gt: built.append(gt) or real(gt))
    gt = _gt(6)
    keys = np.array([3, 1, 6, 3], np.int64)
    first = predictions._resolve_image_ids(None, None, gt, "x", int_keys=keys)
    second = predictions._resolve_image_ids(None, None, gt, "x", int_keys=keys)
    assert first.tolist() == second.tolist() == [2, 0, 5, 2]
    assert len(built) == 1
    other = _gt(6)
    predictions._resolve_image_ids(None, None, other, "x", int_keys=keys)
    assert len(built) == 2


def test_the_cache_does_not_keep_a_gt_alive():
    gt = _gt(3)
    predictions._resolve_image_ids(None, None, gt, "x", int_keys=np.array([1], np.int64))
    held = predictions._LAST_RESOLVER
    assert held is not None and held[0]() is gt
    del gt
    gc.collect()
    assert held[0]() is None
