"""Parity of aegis_eval.metrics.coco with pycocotools 2.0.11 COCOeval on many generated fixtures (1e-9, all six stats).

The generator deliberately produces the cases where re-implementations drift: images without GT, images
without detections, score ties (within and across images), more than 100 detections per image, crowd GT,
GT ``area`` fields that differ from w*h and sit exactly on the 32²/96² boundaries, duplicate GT boxes (IoU
ties), exact-copy detections (IoU 1), tiny and huge boxes, and boxes reaching outside the image.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
from numpy.random import PCG64, Generator
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from aegis_eval.metrics.coco import accumulate, box_iou_coco, coco_ap, evaluate_images
from aegis_eval.metrics.matching import box_iou_xywh
from aegis_eval.metrics.result_keys import AP_METRICS
from aegis_eval.metrics.types import Detections, GroundTruth

N_FIXTURES = 240
# pycocotools' stats vector positions of the six AP_METRICS (all / .50 / .75 / small / medium / large).
STAT_INDEX = (0, 1, 2, 3, 4, 5)


def make_fixture(key: int) -> tuple[GroundTruth, Detections]:
    """A random single-class dataset; the kind of data depends on the key so the set covers many regimes."""
    rng = Generator(PCG64(key))
    n_img = int(rng.integers(1, 9))
    widths = rng.integers(64, 1600, n_img)
    heights = rng.integers(64, 1200, n_img)
    with_crowd = key % 4 == 0
    tie_scores = key % 3 == 0
    many_dets = key % 5 == 0
    odd_areas = key % 2 == 1
    zero_id = key % 7 == 3  # an annotation id of 0 exercises the reference's "id != 0 means matched" test

    gt_img, gt_boxes, gt_area, gt_crowd = [], [], [], []
    for i in range(n_img):
        n_gt = 0 if rng.random() < 0.15 else int(rng.integers(1, 16))
        for _ in range(n_gt):
            scale = rng.choice([3.0, 20.0, 45.0, 120.0, 400.0])
            w = max(0.5, rng.uniform(0.3, 1.7) * scale)
            h = max(0.5, rng.uniform(0.3, 1.7) * scale)
            x = rng.uniform(-0.1 * w, max(widths[i] - 0.5 * w, 1.0))
            y = rng.uniform(-0.1 * h, max(heights[i] - 0.5 * h, 1.0))
            box = [round(x, 2), round(y, 2), round(w, 2), round(h, 2)]
            area = box[2] * box[3]
            if odd_areas:
                area = rng.choice([area, area * rng.uniform(0.5, 1.0), 1024.0, 9216.0, 32.0**2 - 0.5])
            gt_img.append(i)
            gt_boxes.append(box)
            gt_area.append(float(area))
            gt_crowd.append(bool(with_crowd and rng.random() < 0.2))
            if rng.random() < 0.08:  # an identical duplicate GT: equal IoU, the later one must win
                gt_img.append(i)
                gt_boxes.append(list(box))
                gt_area.append(float(area))
                gt_crowd.append(False)
    n_gt_total = len(gt_img)
    ann_ids = np.arange(1, n_gt_total + 1, dtype=np.int64)
    if zero_id and n_gt_total:
        ann_ids -= 1
    # a shuffled file order, so the GT table is not grouped by image
    perm = rng.permutation(n_gt_total)
    gt = GroundTruth(
        image_ids=np.sort(rng.choice(10_000, n_img, replace=False)).astype(np.int64),
        file_names=tuple(f"img{i}.png" for i in range(n_img)),
        widths=widths.astype(np.int64),
        heights=heights.astype(np.int64),
        box_image=np.asarray(gt_img, dtype=np.int64).reshape(-1)[perm],
        boxes=np.asarray(gt_boxes, dtype=np.float64).reshape(-1, 4)[perm],
        areas=np.asarray(gt_area, dtype=np.float64)[perm],
        iscrowd=np.asarray(gt_crowd, dtype=bool)[perm],
        ann_ids=ann_ids[perm],
    )

    det_img, det_boxes = [], []
    for i in range(n_img):
        if rng.random() < 0.12:
            continue  # no predictions for this image
        mine = gt.boxes[gt.box_image == i]
        for box in mine:
            for _ in range(int(rng.integers(0, 4))):
                jitter = rng.choice([0.0, 0.02, 0.08, 0.2, 0.4])
                x, y, w, h = box
                det = [
                    x + rng.normal(0, jitter) * w,
                    y + rng.normal(0, jitter) * h,
                    w * np.exp(rng.normal(0, jitter)),
                    h * np.exp(rng.normal(0, jitter)),
                ]
                det_img.append(i)
                det_boxes.append(det)
        n_rand = int(rng.integers(100, 160)) if many_dets and rng.random() < 0.6 else int(rng.integers(0, 12))
        for _ in range(n_rand):
            w = rng.uniform(1, 300) if rng.random() < 0.9 else rng.uniform(800, 3000)
            h = rng.uniform(1, 300) if rng.random() < 0.9 else rng.uniform(800, 3000)
            det_img.append(i)
            det_boxes.append([rng.uniform(-200, widths[i]), rng.uniform(-200, heights[i]), w, h])
    n_det = len(det_img)
    if tie_scores:
        scores = rng.choice([0.1, 0.25, 0.5, 0.75, 0.9, 1.0], n_det)
    else:
        scores = np.round(rng.random(n_det), 3)  # rounding still leaves some ties
    perm = rng.permutation(n_det)
    dets = Detections(
        det_image=np.asarray(det_img, dtype=np.int64)[perm],
        boxes=np.asarray(det_boxes, dtype=np.float64).reshape(-1, 4)[perm],
        scores=np.asarray(scores, dtype=np.float64)[perm],
    )
    return gt, dets


def coco_objects(gt: GroundTruth, dets: Detections, image_ids=None, det_rows=None) -> tuple[COCO, COCO]:
    """In-memory pycocotools COCO objects for a fixture (detections built the way ``loadRes`` builds them)."""
    ids = gt.image_ids if image_ids is None else image_ids
    images = [
        {"id": int(ids[i]), "width": int(gt.widths[i]), "height": int(gt.heights[i]), "file_name": gt.file_names[i]}
        for i in range(gt.n_images)
    ]
    anns = [
        {
            "id": int(gt.ann_ids[g]),
            "image_id": int(ids[gt.box_image[g]]),
            "category_id": 1,
            "bbox": [float(v) for v in gt.boxes[g]],
            "area": float(gt.areas[g]),
            "iscrowd": int(gt.iscrowd[g]),
        }
        for g in range(gt.n_boxes)
    ]
    cats = [{"id": 1, "name": "person"}]
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO()
        coco_gt.dataset = {"images": images, "annotations": anns, "categories": cats}
        coco_gt.createIndex()
        coco_dt = COCO()
        rows = range(dets.n) if det_rows is None else det_rows
        results = []
        for k, d in enumerate(rows, start=1):
            x, y, w, h = (float(v) for v in dets.boxes[d])
            results.append(
                {
                    "id": k,
                    "image_id": int(ids[dets.det_image[d]]),
                    "category_id": 1,
                    "bbox": [x, y, w, h],
                    "score": float(dets.scores[d]),
                    "area": w * h,
                    "iscrowd": 0,
                }
            )
        coco_dt.dataset = {"images": images, "annotations": results, "categories": cats}
        coco_dt.createIndex()
    return coco_gt, coco_dt


def reference_stats(coco_gt: COCO, coco_dt: COCO) -> np.ndarray:
    """pycocotools' six AP stats, prints silenced."""
    with contextlib.redirect_stdout(io.StringIO()):
        ev = COCOeval(coco_gt, coco_dt, "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return np.asarray(ev.stats[list(STAT_INDEX)], dtype=np.float64)


def assert_stats_equal(ours: dict[str, float], ref: np.ndarray, context: str) -> None:
    mine = np.array([ours[k] for k in AP_METRICS])
    diff = mine - ref
    assert np.all(np.abs(diff) <= 1e-9), (
        f"{context}: AP stats differ from pycocotools\n keys  {AP_METRICS}\n ours  {mine.tolist()}\n"
        f" ref   {ref.tolist()}\n diff  {diff.tolist()}"
    )


@pytest.mark.parametrize("block", range(8))
def test_parity_with_pycocotools(block):
    per_block = N_FIXTURES // 8
    for key in range(block * per_block, (block + 1) * per_block):
        gt, dets = make_fixture(key)
        assert_stats_equal(coco_ap(gt, dets), reference_stats(*coco_objects(gt, dets)), f"fixture key {key}")


def test_fixture_set_covers_the_hard_cases():
    """Guard against a generator change silently dropping the cases the parity test exists for."""
    seen = dict(
        no_gt_image=0, no_det_image=0, over_100=0, crowd=0, within_image_tie=0, zero_id=0, outside=0, sentinel=0
    )
    for key in range(N_FIXTURES):
        gt, dets = make_fixture(key)
        gt_counts = np.bincount(gt.box_image, minlength=gt.n_images)
        det_counts = np.bincount(dets.det_image, minlength=gt.n_images)
        seen["no_gt_image"] += int((gt_counts == 0).any())
        seen["no_det_image"] += int((det_counts == 0).any())
        seen["over_100"] += int((det_counts > 100).any())
        seen["crowd"] += int(gt.iscrowd.any())
        seen["zero_id"] += int((gt.ann_ids == 0).any())
        seen["outside"] += int((dets.boxes[:, 0] < 0).any())
        pairs = np.stack([dets.det_image, dets.scores], axis=1)
        seen["within_image_tie"] += int(len(np.unique(pairs, axis=0)) < len(pairs))
        regular = gt.areas[~gt.iscrowd]
        seen["sentinel"] += int(
            any(not ((regular >= lo) & (regular <= hi)).any() for lo, hi in ((0, 32**2), (32**2, 96**2), (96**2, 1e10)))
        )
    assert all(v >= 10 for v in seen.values()), seen


def test_iou_bit_identical_to_mask_api():
    from pycocotools import mask as mask_utils

    rng = Generator(PCG64(99))
    d = np.column_stack(
        [rng.uniform(-50, 500, 300), rng.uniform(-50, 500, 300), rng.uniform(0, 200, 300), rng.uniform(0, 200, 300)]
    ).round(3)
    g = np.column_stack(
        [rng.uniform(0, 500, 40), rng.uniform(0, 500, 40), rng.uniform(0.5, 200, 40), rng.uniform(0.5, 200, 40)]
    ).round(3)
    crowd = rng.random(40) < 0.3
    ref = mask_utils.iou(d.tolist(), g.tolist(), crowd.astype(np.uint8).tolist())
    dd, gg = np.repeat(np.arange(300), 40), np.tile(np.arange(40), 300)
    ours = box_iou_coco(d[dd], g[gg], crowd[gg]).reshape(300, 40)
    assert np.array_equal(ours, ref), float(np.abs(ours - ref).max())
    # the matrix form the thresholded matching uses is the same kernel
    assert np.array_equal(box_iou_xywh(d, g[~crowd]), ref[:, ~crowd])
    assert np.array_equal(box_iou_xywh(d, g[crowd], crowd=True), ref[:, crowd])


def test_max_dets_other_than_100_matches_reference():
    gt, dets = make_fixture(5)  # >100 detections per image
    coco_gt, coco_dt = coco_objects(gt, dets)
    with contextlib.redirect_stdout(io.StringIO()):
        ev = COCOeval(coco_gt, coco_dt, "bbox")
        ev.params.maxDets = [10]
        ev.evaluate()
        ev.accumulate()
    ref = ev.eval["precision"][:, :, 0, 0, 0]
    ours = accumulate(evaluate_images(gt, dets, max_dets=10))
    assert abs(ours["map50_95"] - np.mean(ref[ref > -1])) <= 1e-12


def _tiny(gt_boxes, det_boxes, scores, crowd=None, ann_ids=None):
    n_g = len(gt_boxes)
    gt = GroundTruth(
        image_ids=np.array([7]),
        file_names=("a.png",),
        widths=np.array([100]),
        heights=np.array([100]),
        box_image=np.zeros(n_g, np.int64),
        boxes=np.asarray(gt_boxes, np.float64).reshape(-1, 4),
        areas=np.asarray([b[2] * b[3] for b in gt_boxes], np.float64),
        iscrowd=np.zeros(n_g, bool) if crowd is None else np.asarray(crowd, bool),
        ann_ids=np.arange(1, n_g + 1) if ann_ids is None else np.asarray(ann_ids),
    )
    dets = Detections(
        det_image=np.zeros(len(det_boxes), np.int64),
        boxes=np.asarray(det_boxes, np.float64).reshape(-1, 4),
        scores=np.asarray(scores, np.float64),
    )
    return gt, dets


def test_equal_iou_goes_to_the_later_gt():
    # det 1 overlaps A and B equally (IoU 0.818); which one it takes decides whether det 2 (a copy of A) is a TP
    # up to IoU 0.95 or only up to 0.65. The reference gives it to the later GT in file order, so the two file
    # orders score differently; both must agree with pycocotools.
    boxes = [[0, 0, 10, 10], [2, 0, 10, 10]]
    results = []
    for gt_order in [(0, 1), (1, 0)]:
        gt, dets = _tiny([boxes[k] for k in gt_order], [[1, 0, 10, 10], [0, 0, 10, 10]], [0.9, 0.8])
        ours = coco_ap(gt, dets)
        assert_stats_equal(ours, reference_stats(*coco_objects(gt, dets)), f"gt order {gt_order}")
        results.append(ours["map50_95"])
    assert results[0] > results[1]
