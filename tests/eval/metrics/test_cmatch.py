"""The compiled COCO matching (aegis_eval/metrics/_cmatch.c) and its NumPy twin give the same ApTable, bit for bit,
on the parity fixtures (crowd GT, annotation id 0, tied scores and IoUs, areas on the range bounds, empty images)."""

from __future__ import annotations

import numpy as np
import pytest

from aegis_eval.metrics import coco, matching
from aegis_eval.metrics.types import Detections, GroundTruth
from tests.compiled import extension
from tests.eval.metrics.test_metrics_parity import make_fixture

_cmatch, needs_compiled = extension("aegis_eval.metrics._cmatch")

FIELDS = ("det_index", "det_image", "det_rank", "scores", "matched", "ignored", "n_gt", "order")


def _tables(gt: GroundTruth, dets: Detections, monkeypatch, max_dets: int = 100):
    out = []
    for mode in ("compiled", "numpy"):
        monkeypatch.setenv("AEGIS_KERNELS", mode)
        out.append(coco.evaluate_images(gt, dets, max_dets))
    return out


def _assert_same(a: coco.ApTable, b: coco.ApTable) -> None:
    for name in FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), name


@needs_compiled
@pytest.mark.parametrize("key", range(64))
def test_compiled_and_numpy_matching_agree(key, monkeypatch):
    gt, dets = make_fixture(key)
    compiled, numpy_ = _tables(gt, dets, monkeypatch, max_dets=(100, 10, 1)[key % 3])
    _assert_same(compiled, numpy_)
    assert coco.accumulate(compiled) == coco.accumulate(numpy_)


@needs_compiled
def test_ties_and_thresholds(monkeypatch):
    """IoU exactly on thresholds, identical GT boxes (the later wins), a crowd region, id 0, empty images."""
    g = np.array([[0, 0, 10, 10], [0, 0, 10, 10], [20, 0, 10, 10], [0, 0, 100, 100], [5, 5, 40, 40]], float)
    gt = GroundTruth(
        image_ids=np.array([1, 2, 3, 4]),
        file_names=("a.png", "b.png", "c.png", "d.png"),
        widths=np.full(4, 200),
        heights=np.full(4, 200),
        box_image=np.array([0, 0, 0, 1, 3]),
        boxes=g,
        areas=np.array([100.0, 32.0**2, 96.0**2, 10000.0, 1600.0]),
        iscrowd=np.array([False, False, False, True, False]),
        ann_ids=np.array([1, 0, 3, 4, 5]),
    )
    d = np.array(
        [[0, 0, 10, 10], [0, 0, 10, 5], [20, 0, 10, 7.5], [0, 0, 10, 10], [10, 10, 5, 5], [5, 5, 40, 40], [0, 0, 1, 1]],
        float,
    )
    dets = Detections(
        det_image=np.array([0, 0, 0, 0, 1, 3, 2]), boxes=d, scores=np.array([0.9, 0.9, 0.8, 0.1, 0.5, 0.7, 0.3])
    )
    _assert_same(*_tables(gt, dets, monkeypatch))


def test_the_kernel_follows_the_switch(monkeypatch):
    monkeypatch.setenv("AEGIS_KERNELS", "numpy")
    assert coco.match_kernel() is None
    monkeypatch.setenv("AEGIS_KERNELS", "auto")
    assert (coco.match_kernel() is None) == (_cmatch is None)


MATCH_FIELDS = ("kept", "is_tp", "ignored", "matched_gt", "matched_iou", "gt_matched_det", "gt_matched_iou")


@needs_compiled
@pytest.mark.parametrize("key", range(48))
def test_compiled_and_numpy_threshold_matching_agree(key, monkeypatch):
    gt, dets = make_fixture(key)
    threshold, iou = (0.0, 0.25, 0.5, 0.9)[key % 4], (0.5, 0.3, 0.75, 1.0, 0.05)[key % 5]
    out = []
    for mode in ("compiled", "numpy"):
        monkeypatch.setenv("AEGIS_KERNELS", mode)
        out.append(matching.match_at_threshold(gt, dets, threshold, iou))
    for name in MATCH_FIELDS:
        x, y = getattr(out[0], name), getattr(out[1], name)
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), name
    assert out[0].counts.totals() == out[1].counts.totals()


@needs_compiled
@pytest.mark.parametrize("key", range(32))
def test_compiled_and_numpy_accumulate_agree(key, monkeypatch):
    gt, dets = make_fixture(key)
    table = coco.evaluate_images(gt, dets)
    weights = np.random.default_rng(key).integers(0, 4, gt.n_images)
    for w in (None, weights):
        out = []
        for mode in ("compiled", "numpy"):
            monkeypatch.setenv("AEGIS_KERNELS", mode)
            out.append(coco.accumulate(table, w))
        assert out[0] == out[1]


@needs_compiled
def test_extension_refuses_bad_layouts():
    """evaluate and threshold_match check their layout at the C boundary (one check serves both): offsets that do
    not cover the rows or run backwards, rows outside the boxes, GT of an image outside the table."""
    boxes = np.array([[0, 0, 10, 10], [0, 0, 5, 5]], float)
    gt_boxes = np.array([[0, 0, 10, 10]], float)
    area, crowd, nonzero = np.array([100.0]), np.zeros(1, np.uint8), np.ones(1, np.uint8)
    ranges, thresholds = coco.AREA_RANGES[:1], np.array([0.5])

    def evaluate(rows, det_start, gt_image):
        d, n_img = len(rows), len(det_start) - 1
        flags = np.zeros((1, 1, d), np.uint8)
        args = (boxes, rows, det_start, gt_boxes, gt_image, area, crowd, nonzero, ranges, thresholds, 0.5)
        _cmatch.evaluate(*args, flags, flags.copy(), np.zeros((1, n_img), np.int64))

    def threshold_match(rows, det_start, gt_image):
        n_img = len(det_start) - 1
        outputs = (np.full(2, -1), np.full(2, np.nan), np.zeros(2, np.uint8), np.full(1, -1), np.full(1, np.nan))
        args = (boxes, rows, det_start, gt_boxes, gt_image, crowd, area, 0.5, 32.0**2, 96.0**2)
        _cmatch.threshold_match(*args, *outputs, np.zeros((9, n_img), np.int64))

    good = (np.array([0, 1], np.int64), np.array([0, 1, 2], np.int64), np.array([1], np.int64))
    bad = [
        ((good[0], np.array([0, 1, 1], np.int64), good[2]), "det_start does not cover"),
        ((good[0], np.array([0, 3, 2], np.int64), good[2]), "det_start is not offsets"),
        ((np.array([0, 2], np.int64), good[1], good[2]), "outside the boxes"),
        ((good[0], good[1], np.array([2], np.int64)), r"gt_image outside \[0, I\)"),
    ]
    for call in (evaluate, threshold_match):
        call(*good)  # the well-formed call runs
        for args, message in bad:
            with pytest.raises(ValueError, match=f"^{call.__name__}: .*{message}"):
                call(*args)
