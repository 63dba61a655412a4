"""The compiled score order, matching and accumulation of _cmatch.c (image_order, evaluate, threshold_match,
precision) against their NumPy definitions, bit for bit, on inputs chosen to reach each shortcut: equal and signed-zero
scores (the radix sort's keys), images with more than 64 detections and more than 64 GT (the bit blocks), GT that
share a left edge or have a NaN one (the scan by left edge), crowd regions and id-0 GT (the per-range choice by
masks), thresholds met exactly and per-image counts."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.random import PCG64, Generator

from aegis_eval.metrics import coco, matching
from aegis_eval.metrics.types import Detections, GroundTruth
from tests.eval.metrics.test_cmatch import FIELDS, MATCH_FIELDS, _assert_same, needs_compiled
from tests.eval.metrics.test_metrics_parity import make_fixture

COUNT_FIELDS = ("tp", "fp", "n_gt", "tp_small", "gt_small", "tp_medium", "gt_medium", "tp_large", "gt_large")


def _crowded(key: int, n_img: int = 3, n_gt: int = 70, n_det: int = 150) -> tuple[GroundTruth, Detections]:
    """Dense images: many detections jittered around many GT on a coarse grid (shared left edges, equal IoUs), scores
    from a few values with -0.0 among them, some GT crowd or with id 0, areas on the range bounds."""
    rng = Generator(PCG64(key))
    g_img = np.repeat(np.arange(n_img), n_gt)
    xy = rng.integers(0, 12, (len(g_img), 2)) * 8.0
    wh = rng.choice([4.0, 8.0, 32.0, 96.0], (len(g_img), 2))
    boxes = np.column_stack([xy, wh])
    areas = np.where(rng.random(len(g_img)) < 0.3, rng.choice([32.0**2, 96.0**2], len(g_img)), wh[:, 0] * wh[:, 1])
    ann_ids = np.arange(len(g_img), dtype=np.int64) + (key % 2)
    perm = rng.permutation(len(g_img))
    gt = GroundTruth(
        image_ids=np.arange(n_img, dtype=np.int64) + 1,
        file_names=tuple(f"{i}.png" for i in range(n_img)),
        widths=np.full(n_img, 200, dtype=np.int64),
        heights=np.full(n_img, 200, dtype=np.int64),
        box_image=g_img[perm],
        boxes=boxes[perm],
        areas=areas[perm],
        iscrowd=(rng.random(len(g_img)) < 0.1)[perm],
        ann_ids=ann_ids[perm],
    )
    d_img = rng.integers(0, n_img, n_img * n_det)
    src = rng.integers(0, len(g_img), len(d_img))
    jitter = rng.choice([0.0, 0.0, 1.0, 4.0], (len(d_img), 4)) * rng.choice([-1.0, 1.0], (len(d_img), 4))
    d_boxes = boxes[src] + jitter
    d_boxes[:, 2:] = np.maximum(d_boxes[:, 2:], 1.0)
    scores = rng.choice(np.array([0.9, 0.5, 0.25, 0.0, -0.0, 1e-300, 0.5 + 1e-16]), len(d_img))
    return gt, Detections(det_image=d_img, boxes=d_boxes, scores=scores)


def _both(monkeypatch, fn):
    out = []
    for mode in ("compiled", "numpy"):
        monkeypatch.setenv("AEGIS_KERNELS", mode)
        out.append(fn())
    return out


@needs_compiled
@pytest.mark.parametrize("key", range(12))
@pytest.mark.parametrize("max_dets", [100, 7, 1])
def test_dense_images_match_bit_for_bit(key, max_dets, monkeypatch):
    gt, dets = _crowded(key)
    compiled, numpy_ = _both(monkeypatch, lambda: coco.evaluate_images(gt, dets, max_dets))
    _assert_same(compiled, numpy_)
    weights = np.random.default_rng(key).integers(0, 3, gt.n_images)
    for w in (None, weights):
        assert _both(monkeypatch, lambda: coco.accumulate(compiled, w)) == [coco.accumulate(numpy_, w)] * 2


@needs_compiled
@pytest.mark.parametrize("key", range(12))
@pytest.mark.parametrize("threshold,iou", [(0.0, 0.5), (0.5, 0.3), (0.25, 1.0), (0.9, 0.05)])
def test_dense_threshold_matching_and_counts(key, threshold, iou, monkeypatch):
    gt, dets = _crowded(key)
    compiled, numpy_ = _both(monkeypatch, lambda: matching.match_at_threshold(gt, dets, threshold, iou))
    for name in MATCH_FIELDS:
        x, y = getattr(compiled, name), getattr(numpy_, name)
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), name
    for name in COUNT_FIELDS:  # per image, not only the totals
        x, y = getattr(compiled.counts, name), getattr(numpy_.counts, name)
        assert x.dtype == y.dtype == np.int64 and x.tobytes() == y.tobytes(), name


@needs_compiled
def test_score_order_ties_signed_zero_and_cut(monkeypatch):
    """Equal scores keep input order, -0.0 ties +0.0, the cut keeps each image's best; the accumulation order breaks
    ties by (image, rank), not by input row."""
    gt = GroundTruth(
        image_ids=np.array([1, 2, 3]),
        file_names=("a", "b", "c"),
        widths=np.full(3, 100),
        heights=np.full(3, 100),
        box_image=np.array([0, 1]),
        boxes=np.array([[0.0, 0.0, 10.0, 10.0], [0.0, 0.0, 10.0, 10.0]]),
        areas=np.array([100.0, 100.0]),
        iscrowd=np.array([False, False]),
        ann_ids=np.array([1, 2]),
    )
    scores = np.array([0.0, 0.5, -0.0, 0.5, 0.5, 0.0, 1.0, -0.0, 0.5])
    dets = Detections(
        det_image=np.array([1, 0, 1, 2, 0, 0, 1, 1, 1]),
        boxes=np.tile([0.0, 0.0, 10.0, 10.0], (9, 1)),
        scores=scores,
    )
    for max_dets in (100, 3, 2):
        compiled, numpy_ = _both(monkeypatch, lambda: coco.evaluate_images(gt, dets, max_dets))
        _assert_same(compiled, numpy_)
        for name in FIELDS:
            assert getattr(compiled, name).dtype == getattr(numpy_, name).dtype
    compiled, numpy_ = _both(monkeypatch, lambda: matching.match_at_threshold(gt, dets, 0.0))
    assert compiled.is_tp.tobytes() == numpy_.is_tp.tobytes()
    assert compiled.gt_matched_det.tobytes() == numpy_.gt_matched_det.tobytes()


@needs_compiled
def test_nan_gt_edge_and_empty_sides(monkeypatch):
    """A GT with a NaN left edge turns the scan by left edge off for its image (and never matches); images without
    GT or without detections, and no GT at all, give the NumPy results."""
    gt, dets = _crowded(3, n_img=4, n_gt=20, n_det=30)
    boxes = gt.boxes.copy()
    boxes[np.flatnonzero(gt.box_image == 1)[0], 0] = np.nan
    keep = gt.box_image != 2  # image 2 has no GT
    odd = GroundTruth(**{**gt.__dict__, "boxes": boxes})
    odd = GroundTruth(
        **{
            **odd.__dict__,
            **{f: getattr(odd, f)[keep] for f in ("box_image", "boxes", "areas", "iscrowd", "ann_ids")},
        }
    )
    few = Detections(
        det_image=dets.det_image[dets.det_image != 3],
        boxes=dets.boxes[dets.det_image != 3],
        scores=dets.scores[dets.det_image != 3],
    )
    empty = GroundTruth(
        **{
            **gt.__dict__,
            "box_image": np.zeros(0, np.int64),
            "boxes": np.zeros((0, 4)),
            "areas": np.zeros(0),
            "iscrowd": np.zeros(0, bool),
            "ann_ids": np.zeros(0, np.int64),
        }
    )
    for g in (odd, empty):
        compiled, numpy_ = _both(monkeypatch, lambda: coco.evaluate_images(g, few))
        _assert_same(compiled, numpy_)
        assert _both(monkeypatch, lambda: coco.accumulate(compiled)) == [coco.accumulate(numpy_)] * 2
        m = _both(monkeypatch, lambda: matching.match_at_threshold(g, few, 0.25))
        for name in MATCH_FIELDS:
            assert getattr(m[0], name).tobytes() == getattr(m[1], name).tobytes(), name
        for name in COUNT_FIELDS:
            assert getattr(m[0].counts, name).tobytes() == getattr(m[1].counts, name).tobytes(), name


@needs_compiled
@pytest.mark.parametrize("key", range(10))
@pytest.mark.parametrize("threshold,iou,max_dets", [(0.25, 0.5, 100), (0.0, 0.75, 100), (0.5, 1.0, 7), (0.9, 0.3, 100)])
def test_match_and_evaluate_is_both_calls(key, threshold, iou, max_dets, monkeypatch):
    """One shared pass (iou >= 0.5 and every detection at the threshold among its image's max_dets best), the fallback
    when a kept detection lies past max_dets (max_dets 7 at threshold 0.5), and iou below the AP candidates' 0.5: the
    same arrays as the two calls, compiled and NumPy."""
    gt, dets = _crowded(key) if key % 2 else make_fixture(key)
    want_match = None
    for mode in ("numpy", "compiled"):
        monkeypatch.setenv("AEGIS_KERNELS", mode)
        match, table = matching.match_and_evaluate(gt, dets, threshold, iou, max_dets)
        if want_match is None:
            want_match = matching.match_at_threshold(gt, dets, threshold, iou)
            want_table = coco.evaluate_images(gt, dets, max_dets)
        _assert_same(table, want_table)
        for name in MATCH_FIELDS:
            x, y = getattr(match, name), getattr(want_match, name)
            assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), (mode, name)
        for name in COUNT_FIELDS:
            assert getattr(match.counts, name).tobytes() == getattr(want_match.counts, name).tobytes(), (mode, name)
        assert (match.threshold, match.iou) == (threshold, iou)


def test_match_and_evaluate_reports_the_first_error_of_the_two_calls(monkeypatch):
    from aegis_data.errors import AegisError

    gt, dets = _crowded(0, n_img=2, n_gt=3, n_det=4)
    for mode in ("numpy", "compiled", "auto"):
        monkeypatch.setenv("AEGIS_KERNELS", mode)
        with pytest.raises(AegisError, match="threshold"):
            matching.match_and_evaluate(gt, dets, 1.5, 0.5, 0)
        with pytest.raises(AegisError, match="max_dets"):
            matching.match_and_evaluate(gt, dets, 0.5, 0.5, 0)
