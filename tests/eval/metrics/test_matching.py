"""Thresholded one-to-one matching: a pure-Python reference on random tiny fixtures, pycocotools parity,
the tie rules, size bins and the rate conventions."""

from __future__ import annotations

import contextlib
import io
import itertools

import numpy as np
import pytest

from aegis_data.errors import AegisError
from aegis_eval.metrics.matching import (
    ThresholdMatch,
    box_iou_xywh,
    match_at_threshold,
    size_bins,
    threshold_metrics,
    threshold_rates,
)
from aegis_eval.protocols.predictions import detections_from_results, ground_truth_from_coco


def make_gt(per_image: list[list[list[float]]], crowd: list[list[bool]] | None = None, areas=None):
    """GT with image ids 1..N; per_image[i] lists xywh boxes of image i+1."""
    images = [{"id": i + 1, "file_name": f"img{i + 1}.png", "width": 100, "height": 100} for i in range(len(per_image))]
    anns = []
    for i, boxes in enumerate(per_image):
        for j, b in enumerate(boxes):
            a = {
                "id": len(anns) + 1,
                "image_id": i + 1,
                "category_id": 1,
                "bbox": list(b),
                "iscrowd": int(bool(crowd and crowd[i][j])),
            }
            if areas is not None:
                a["area"] = areas[len(anns)]
            anns.append(a)
    return ground_truth_from_coco({"images": images, "annotations": anns, "categories": [{"id": 1, "name": "person"}]})


def make_dets(gt, rows: list[tuple[int, list[float], float]]):
    """rows: (image id, xywh, score)."""
    return detections_from_results(
        [{"image_id": i, "category_id": 1, "bbox": list(b), "score": s} for i, b, s in rows], gt
    )


# --- an independent, deliberately naive reference ------------------------------------------------------
def _iou_py(a, b):
    ix = max(0.0, min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = a[2] * a[3] + b[2] * b[3] - inter
    return inter / union if union > 0 else 0.0


def _crowd_py(d, c):
    ix = max(0.0, min(d[0] + d[2], c[0] + c[2]) - max(d[0], c[0]))
    iy = max(0.0, min(d[1] + d[3], c[1] + c[3]) - max(d[1], c[1]))
    return ix * iy / (d[2] * d[3]) if d[2] * d[3] > 0 else 0.0


def reference_match(gt_images, crowd, det_rows, threshold, iou):
    """Returns (tp flags, fp flags, matched gt (image, local index) or None) per detection, in input order."""
    n = len(det_rows)
    tp, fp, match = [False] * n, [False] * n, [None] * n
    for img in range(len(gt_images)):
        mine = [k for k in range(n) if det_rows[k][0] == img + 1 and det_rows[k][2] >= threshold]
        mine.sort(key=lambda k: (-det_rows[k][2], k))
        used = set()
        for k in mine:
            best, best_iou = None, -1.0
            for g, box in enumerate(gt_images[img]):
                if crowd[img][g] or g in used:
                    continue
                v = _iou_py(det_rows[k][1], box)
                if v >= iou and v > best_iou:  # strict '>' keeps the lowest index on ties
                    best, best_iou = g, v
            if best is not None:
                used.add(best)
                tp[k], match[k] = True, (img, best)
            elif not any(
                crowd[img][g] and _crowd_py(det_rows[k][1], box) >= iou for g, box in enumerate(gt_images[img])
            ):
                fp[k] = True
    return tp, fp, match


def random_fixture(seed: int, continuous: bool = False, with_crowd: bool = True):
    rng = np.random.default_rng([seed, 7])  # explicitly keyed per fixture
    n_img = int(rng.integers(1, 4))
    gt_images, crowd, det_rows = [], [], []
    for i in range(n_img):
        n_gt = int(rng.integers(0, 5))
        boxes = []
        for _ in range(n_gt):
            if continuous:
                boxes.append([float(x) for x in rng.uniform(0, 40, 2)] + [float(x) for x in rng.uniform(4, 20, 2)])
            else:  # a coarse grid provokes exact IoU ties
                boxes.append([float(rng.integers(0, 4) * 4), float(rng.integers(0, 4) * 4), 8.0, 8.0])
        gt_images.append(boxes)
        crowd.append([bool(with_crowd and rng.random() < 0.15) for _ in boxes])
        for _ in range(int(rng.integers(0, 6))):
            if continuous and boxes and rng.random() < 0.7:  # a jittered copy of a GT box
                g = boxes[int(rng.integers(0, len(boxes)))]
                b = [float(v + d) for v, d in zip(g, rng.uniform(-2, 2, 4))]
                s = float(rng.random())
            elif continuous:
                b = [float(x) for x in rng.uniform(0, 40, 2)] + [float(x) for x in rng.uniform(4, 20, 2)]
                s = float(rng.random())
            else:
                b = [float(rng.integers(0, 5) * 3), float(rng.integers(0, 5) * 3), 8.0, float(rng.integers(6, 10))]
                s = float(rng.choice([0.2, 0.5, 0.5, 0.9]))  # score ties on purpose
            det_rows.append((i + 1, b, s))
    return gt_images, crowd, det_rows


@pytest.mark.parametrize("seed", range(160))
def test_matches_naive_reference_on_random_fixtures(seed):
    gt_images, crowd, det_rows = random_fixture(seed)
    gt = make_gt(gt_images, crowd)
    dets = make_dets(gt, det_rows)
    for threshold in (0.0, 0.5, 0.9):
        m = match_at_threshold(gt, dets, threshold, iou=0.5)
        tp, fp, ref_match = reference_match(gt_images, crowd, det_rows, threshold, 0.5)
        assert m.is_tp.tolist() == tp, (seed, threshold)
        assert m.is_fp.tolist() == fp, (seed, threshold)
        # matched GT: global index -> (image, local index in file order)
        offsets = np.cumsum([0] + [len(b) for b in gt_images])
        got = [None if g < 0 else (int(gt.box_image[g]), int(g - offsets[gt.box_image[g]])) for g in m.matched_gt]
        assert got == ref_match, (seed, threshold)
        totals = m.counts.totals()
        assert totals["tp"] == sum(tp) and totals["fp"] == sum(fp)
        assert totals["n_gt"] == sum(1 for c in crowd for x in c if not x)


def test_matches_naive_reference_exhaustively_on_a_tiny_grid():
    """Every fixture of one image with up to 2 GT boxes (3 positions) and up to 2 detections (4 positions x 2
    scores), enumerated with itertools: equal IoUs and equal scores occur throughout."""
    gt_pos = [[0, 0, 8, 8], [4, 0, 8, 8], [2, 0, 8, 8]]
    det_opts = [(b, sc) for b in ([2, 0, 8, 8], [0, 0, 8, 8], [3, 0, 8, 8], [1, 0, 8, 9]) for sc in (0.3, 0.6)]
    n_checked = 0
    for n_gt in range(3):
        for gts in itertools.product(gt_pos, repeat=n_gt):
            gt = make_gt([[list(b) for b in gts]])
            for n_det in range(3):
                for chosen in itertools.product(det_opts, repeat=n_det):
                    rows = [(1, list(b), sc) for b, sc in chosen]
                    dets = make_dets(gt, rows)
                    for threshold in (0.0, 0.5):
                        m = match_at_threshold(gt, dets, threshold)
                        tp, fp, ref = reference_match([list(gts)], [[False] * n_gt], rows, threshold, 0.5)
                        assert m.is_tp.tolist() == tp and m.is_fp.tolist() == fp, (gts, rows, threshold)
                        assert [None if g < 0 else (0, int(g)) for g in m.matched_gt] == ref
                        n_checked += 1
    assert n_checked == 2 * 13 * 73


@pytest.mark.parametrize("seed", range(25))
def test_true_positives_agree_with_pycocotools(seed):
    """Without IoU ties, our TP set at IoU 0.5 equals pycocotools' dtMatches for the kept detections."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    gt_images, crowd, det_rows = random_fixture(1000 + seed, continuous=True, with_crowd=False)
    threshold = 0.3
    images = [{"id": i + 1, "width": 100, "height": 100} for i in range(len(gt_images))]
    anns = [
        {"id": k + 1, "image_id": i + 1, "category_id": 1, "bbox": b, "area": b[2] * b[3], "iscrowd": 0}
        for k, (i, b) in enumerate((i, b) for i, bs in enumerate(gt_images) for b in bs)
    ]
    kept = [(i, b, s) for i, b, s in det_rows if s >= threshold]
    gt = make_gt(gt_images)
    ours = match_at_threshold(gt, make_dets(gt, det_rows), threshold)
    expected_tp = int(ours.is_tp.sum())
    if not anns or not kept:
        assert expected_tp == 0
        return
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        coco.dataset = {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "person"}]}
        coco.createIndex()
        res = coco.loadRes([{"image_id": i, "category_id": 1, "bbox": b, "score": s} for i, b, s in kept])
        ev = COCOeval(coco, res, "bbox")
        ev.params.iouThrs = np.array([0.5])
        ev.params.maxDets = [1000]
        ev.params.areaRng = [[0, 1e10]]
        ev.params.areaRngLbl = ["all"]
        ev.evaluate()
    coco_tp = sum(int((e["dtMatches"][0] > 0).sum()) for e in ev.evalImgs if e is not None)
    assert expected_tp == coco_tp


def test_pycocotools_parity_fixtures_are_not_vacuous():
    gt_images, _, det_rows = random_fixture(1000, continuous=True, with_crowd=False)
    gt = make_gt(gt_images)
    assert sum(1 for i, b, s in det_rows if s >= 0.3) > 0
    assert sum(match_at_threshold(gt, make_dets(gt, det_rows), 0.0).is_tp) > 0


def test_iou_tie_goes_to_lowest_gt_index():
    # Two GT boxes placed symmetrically around the detection: identical IoU.
    gt = make_gt([[[0, 0, 10, 10], [4, 0, 10, 10]]])
    dets = make_dets(gt, [(1, [2, 0, 10, 10], 0.9)])
    m = match_at_threshold(gt, dets, 0.5)
    assert box_iou_xywh(dets.boxes, gt.boxes)[0, 0] == box_iou_xywh(dets.boxes, gt.boxes)[0, 1]
    assert m.matched_gt.tolist() == [0]
    assert m.gt_matched_det.tolist() == [0, -1]


def test_score_tie_keeps_input_order():
    gt = make_gt([[[0, 0, 10, 10]]])
    dets = make_dets(gt, [(1, [1, 0, 10, 10], 0.7), (1, [0, 0, 10, 10], 0.7)])
    m = match_at_threshold(gt, dets, 0.5)
    # The first detection in the file wins the GT although the second fits better.
    assert m.is_tp.tolist() == [True, False]
    assert m.is_fp.tolist() == [False, True]


def test_highest_iou_free_gt_is_taken():
    gt = make_gt([[[0, 0, 10, 10], [2, 0, 10, 10]]])
    dets = make_dets(gt, [(1, [2, 0, 10, 10], 0.9), (1, [0, 0, 10, 10], 0.8)])
    m = match_at_threshold(gt, dets, 0.0)
    assert m.matched_gt.tolist() == [1, 0]
    assert m.matched_iou.tolist() == [1.0, 1.0]


def test_threshold_filters_and_iou_boundary_is_inclusive():
    gt = make_gt([[[0, 0, 10, 10]]])
    # IoU exactly 0.5: [0,0,10,10] vs [0,0,10,20] -> 100 / 200.
    dets = make_dets(gt, [(1, [0, 0, 10, 20], 0.6), (1, [0, 0, 10, 10], 0.4)])
    m = match_at_threshold(gt, dets, 0.5)
    assert m.kept.tolist() == [True, False]
    assert m.is_tp.tolist() == [True, False]
    assert m.matched_iou[0] == 0.5


def test_image_without_gt_contributes_only_false_positives():
    gt = make_gt([[[0, 0, 10, 10]], []])
    dets = make_dets(gt, [(1, [0, 0, 10, 10], 0.9), (2, [0, 0, 10, 10], 0.9), (2, [20, 20, 5, 5], 0.8)])
    m = match_at_threshold(gt, dets, 0.5)
    assert m.counts.tp.tolist() == [1, 0]
    assert m.counts.fp.tolist() == [0, 2]
    out = threshold_metrics(m)
    assert out["precision"] == pytest.approx(1 / 3) and out["recall"] == 1.0
    assert out["fp_per_image"] == 1.0 and out["false_alarm_image_share"] == 0.5


def test_crowd_region_ignores_detections_and_is_not_counted():
    gt = make_gt([[[0, 0, 50, 50], [100, 0, 10, 10]]], crowd=[[True, False]])
    dets = make_dets(
        gt,
        [(1, [5, 5, 10, 10], 0.9), (1, [10, 10, 10, 10], 0.8), (1, [100, 0, 10, 10], 0.7), (1, [200, 200, 5, 5], 0.6)],
    )
    m = match_at_threshold(gt, dets, 0.5)
    assert m.ignored.tolist() == [True, True, False, False]
    assert m.is_tp.tolist() == [False, False, True, False]
    out = threshold_metrics(m)
    assert (out["tp"], out["fp"], out["n_gt"], out["fn"]) == (1, 1, 1, 0)


def test_size_bins_use_coco_boundaries_on_the_area_field():
    assert size_bins(np.array([0.0, 1023.9, 1024.0, 9215.9, 9216.0, 1e6])).tolist() == [0, 0, 1, 1, 2, 2]
    # The area field wins over w*h (pycocotools bins by it): a 40x40 box declared with area 500 is small.
    gt = make_gt([[[0, 0, 40, 40], [50, 0, 40, 40], [0, 50, 100, 100]]], areas=[500.0, 1600.0, 10000.0])
    dets = make_dets(gt, [(1, [0, 0, 40, 40], 0.9), (1, [0, 50, 100, 100], 0.9)])
    m = match_at_threshold(gt, dets, 0.5)
    t = m.counts.totals()
    assert (t["gt_small"], t["gt_medium"], t["gt_large"]) == (1, 1, 1)
    assert (t["tp_small"], t["tp_medium"], t["tp_large"]) == (1, 0, 1)
    out = threshold_metrics(m)
    assert out["recall_small"] == 1.0 and out["recall_medium"] == 0.0 and out["recall_large"] == 1.0


def test_rate_conventions_for_undefined_values():
    r = threshold_rates(0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0)
    assert r["precision"] == 0.0  # no detections: precision 0
    assert np.isnan(r["recall"]) and np.isnan(r["f1"])
    assert np.isnan(r["recall_small"])
    r = threshold_rates(0, 3, 4, 2, 1, 0, 4, 0, 0, 0, 0)
    assert r["precision"] == 0.0 and r["recall"] == 0.0 and r["f1"] == 0.0
    assert r["fp_per_image"] == 1.5 and r["false_alarm_image_share"] == 0.5 and r["fn"] == 4


def test_rates_are_elementwise_over_resamples():
    tp = np.array([3, 0, 2])
    fp = np.array([1, 0, 0])
    n_gt = np.array([4, 0, 2])
    r = threshold_rates(tp, fp, n_gt, np.array([2, 2, 2]), np.array([1, 0, 0]), tp, n_gt, 0, 0, 0, 0)
    assert r["precision"].tolist() == [0.75, 0.0, 1.0]
    assert r["recall"][0] == 0.75 and np.isnan(r["recall"][1]) and r["recall"][2] == 1.0
    assert r["f1"][0] == pytest.approx(0.75) and np.isnan(r["f1"][1]) and r["f1"][2] == 1.0
    assert r["fp_per_image"].tolist() == [0.5, 0.0, 0.0]


def test_match_is_prefix_consistent_across_thresholds():
    for seed in range(30):
        gt_images, crowd, det_rows = random_fixture(500 + seed)
        gt = make_gt(gt_images, crowd)
        dets = make_dets(gt, det_rows)
        low = match_at_threshold(gt, dets, 0.0)
        for t in (0.3, 0.5, 0.7):
            high = match_at_threshold(gt, dets, t)
            above = dets.scores >= t
            assert (high.is_tp == (low.is_tp & above)).all()
            assert (high.matched_gt == np.where(above, low.matched_gt, -1)).all()
            assert (high.ignored == (low.ignored & above)).all()


def test_match_is_pure_and_returns_threshold_match():
    gt = make_gt([[[0, 0, 10, 10]]])
    dets = make_dets(gt, [(1, [0, 0, 10, 10], 0.9)])
    before = (dets.boxes.copy(), dets.scores.copy(), gt.boxes.copy())
    m = match_at_threshold(gt, dets, 0.5)
    assert isinstance(m, ThresholdMatch)
    assert (dets.boxes == before[0]).all() and (dets.scores == before[1]).all() and (gt.boxes == before[2]).all()


@pytest.mark.parametrize("threshold, iou", [(-0.1, 0.5), (1.5, 0.5), (float("nan"), 0.5), (0.5, 0.0), (0.5, 1.2)])
def test_bad_threshold_or_iou_is_refused(threshold, iou):
    gt = make_gt([[[0, 0, 10, 10]]])
    dets = make_dets(gt, [])
    with pytest.raises(AegisError):
        match_at_threshold(gt, dets, threshold, iou)
