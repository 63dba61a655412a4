"""Reference runners: weights/device resolution, the Detector contract, tiling + NMS merge, result encoding,
baseline config files."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from aegis_data.errors import AegisError
from aegis_eval.runners import check_batch, load_detector, resolve_device, resolve_weights
from aegis_eval.runners.config import load_baseline_config, resolve_settings
from aegis_eval.runners.predict import coco_results, encode_results
from aegis_eval.runners.tiled import merge_tile_predictions, nms_xyxy, predict_images
from aegis_eval.runners.tiling import tile_grid
from tests import REPO_ROOT

REPO = REPO_ROOT


# --- weights and device --------------------------------------------------------------------------------
def test_missing_weights_file_is_one_clear_error(tmp_path):
    with pytest.raises(AegisError, match=r"^weights file not found: .*nope\.pt$"):
        resolve_weights("yolo11", str(tmp_path / "nope.pt"))
    with pytest.raises(AegisError, match="weights file not found"):
        resolve_weights("fasterrcnn", str(tmp_path / "model.pth"))


def test_bare_downloadable_name_needs_allow_download():
    with pytest.raises(AegisError, match="`allow_download`"):
        resolve_weights("yolo11", "yolo11m.pt")
    assert resolve_weights("yolo11", "yolo11m.pt", allow_download=True) == "yolo11m.pt"


def test_weights_none_and_yaml_rules(tmp_path):
    assert resolve_weights("fasterrcnn", "none") is None
    assert resolve_weights("rtdetr", "rtdetr-l.yaml") == "rtdetr-l.yaml"
    with pytest.raises(AegisError, match="only for fasterrcnn"):
        resolve_weights("yolo11", "none")
    with pytest.raises(AegisError, match="no weights given"):
        resolve_weights("yolo11", None)
    with pytest.raises(AegisError, match="unknown model"):
        resolve_weights("detr", "x.pt")
    local = tmp_path / "w.pt"
    local.write_bytes(b"x")
    assert resolve_weights("yolo11", str(local)) == str(local.resolve())


def test_resolve_device():
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("CPU") == "cpu"
    with pytest.raises(AegisError, match="unknown device"):
        resolve_device("tpu")


def test_check_batch_rejects_non_rgb_uint8():
    with pytest.raises(AegisError, match="image 1 of the batch must (be|have)"):
        check_batch([np.zeros((4, 4, 3), np.uint8), np.zeros((4, 4), np.uint8)])
    with pytest.raises(AegisError, match="float32"):
        check_batch([np.zeros((4, 4, 3), np.float32)])


# --- NMS -----------------------------------------------------------------------------------------------
def test_nms_keeps_best_of_duplicates_and_breaks_ties_by_input_order():
    boxes = np.array([[0, 0, 10, 10], [0, 0, 10, 10], [1, 0, 11, 10], [50, 50, 60, 60]], float)
    scores = np.array([0.5, 0.9, 0.9, 0.1])
    keep = nms_xyxy(boxes, scores, 0.5)
    # 1 and 2 tie at 0.9: input order decides, 1 is kept and suppresses 2 (IoU 0.82) and 0; 3 is disjoint.
    assert keep.tolist() == [1, 3]


def test_nms_threshold_is_strict():
    # IoU of these two is exactly 0.5: 100 / (150 + 150 - 100) — kept, suppression needs IoU > threshold.
    boxes = np.array([[0, 0, 10, 15], [0, 5, 10, 20]], float)
    assert nms_xyxy(boxes, np.array([0.9, 0.8]), 0.5).tolist() == [0, 1]
    assert nms_xyxy(boxes, np.array([0.9, 0.8]), 0.49).tolist() == [0]


def test_nms_matches_torchvision_on_random_boxes():
    from torchvision.ops import nms as tv_nms

    rs = np.random.RandomState(3)
    xy = rs.rand(300, 2) * 200
    wh = rs.rand(300, 2) * 40 + 2
    boxes = np.concatenate([xy, xy + wh], axis=1)
    scores = rs.permutation(300) / 300.0  # distinct scores: the order is then unambiguous for both
    ours = nms_xyxy(boxes, scores, 0.5)
    theirs = tv_nms(torch.from_numpy(boxes), torch.from_numpy(scores), 0.5).numpy()
    assert ours.tolist() == theirs.tolist()


# --- tiled inference -----------------------------------------------------------------------------------
class StubDetector:
    """Test double: 'detects' the known people that lie wholly inside the tile it is shown.

    It identifies the tile by a marker: the tile's top-left frame coordinates are encoded in the pixel values
    of its first row (written by _frame_with_markers), so the stub needs no hidden state.
    """

    model, device = "stub", "cpu"

    def __init__(self, people: np.ndarray, scores: np.ndarray, max_det: int = 300):
        self.people, self.scores, self.max_det = people, scores, max_det
        self.batches: list[list[tuple[int, int]]] = []

    def describe(self) -> dict:
        return {"model": "stub"}

    def predict(self, images, score_floor):
        out, shapes = [], []
        for im in images:
            x0 = int(im[0, 0, 0]) * 256 + int(im[0, 0, 1])
            y0 = int(im[0, 0, 2]) * 256 + int(im[0, 1, 0])
            h, w = im.shape[:2]
            shapes.append((w, h))
            inside = (
                (self.people[:, 0] >= x0)
                & (self.people[:, 2] <= x0 + w)
                & (self.people[:, 1] >= y0)
                & (self.people[:, 3] <= y0 + h)
            )
            b = self.people[inside] - np.array([x0, y0, x0, y0], float)
            s = self.scores[inside]
            out.append((b, s))
        self.batches.append(shapes)
        return out


def _frame_with_markers(width: int, height: int) -> np.ndarray:
    frame = np.zeros((height, width, 3), np.uint8)
    for t in tile_grid(width, height, 1024, 256):
        frame[t.y0, t.x0] = (t.x0 // 256, t.x0 % 256, t.y0 // 256)
        frame[t.y0, t.x0 + 1, 0] = t.y0 % 256
    return frame


def test_tiled_merge_of_large_frame_has_no_duplicates_across_seams():
    width, height = 2500, 1800
    grid = tile_grid(width, height, 1024, 256)
    # Columns start at 0, 768, 1476 and rows at 0, 768, 776: the last tile of each axis is flush with the edge.
    assert len(grid) == 9 and all(t.width == 1024 and t.height == 1024 for t in grid)
    # People seen whole by 2, 3, 6, 2 and 2 tiles: in a horizontal overlap, a vertical one, the corner where
    # six tiles meet, the bottom-right corner (flush tiles), and the overlap of the last two columns.
    people = np.array(
        [
            [800, 100, 830, 160],  # x-overlap of tiles 0 and 1
            [200, 800, 230, 860],  # y-overlap of tiles 0 and 3
            [900, 850, 930, 910],  # seen by tiles 0, 1, 3, 4
            [2400, 1700, 2430, 1760],  # bottom-right corner, last tiles flush with the edge
            [1600, 300, 1630, 360],
        ],
        float,
    )  # tiles at x 768..1792 and 1476..2500
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.5])
    stub = StubDetector(people, scores)
    ((boxes, got_scores),) = predict_images(
        stub, [_frame_with_markers(width, height)], 0.001, tile=1024, overlap=256, batch=4
    )
    assert boxes.shape == (5, 4) and got_scores.tolist() == scores.tolist()
    np.testing.assert_array_equal(boxes, people)  # shifted back exactly, one box per person
    assert [len(b) for b in stub.batches] == [4, 4, 1]  # 9 tiles in batches of 4
    assert all(shape == (1024, 1024) for b in stub.batches for shape in b)


def test_tiled_equals_untiled_for_a_frame_that_fits_one_tile():
    stub = StubDetector(np.array([[10, 10, 30, 50], [12, 11, 31, 52]], float), np.array([0.4, 0.9]))
    frame = _frame_with_markers(300, 200)
    tiled = predict_images(stub, [frame], 0.001, tiled=True)
    untiled = predict_images(stub, [frame], 0.001, tiled=False)
    # Single tile: no merge NMS, so even the overlapping pair (IoU > 0.5) is passed through untouched.
    for (bt, st), (bu, su) in zip(tiled, untiled):
        np.testing.assert_array_equal(bt, bu)
        np.testing.assert_array_equal(st, su)
    assert len(tiled[0][1]) == 2


def test_tiled_equals_untiled_with_a_real_detector():
    det = load_detector("fasterrcnn", "none", "cpu", arch="mobilenet_v3", imgsz=64, max_det=50)
    rs = np.random.RandomState(0)
    frames = [rs.randint(0, 255, (90, 120, 3)).astype(np.uint8), rs.randint(0, 255, (64, 64, 3)).astype(np.uint8)]
    tiled = predict_images(det, frames, 0.001, tiled=True, batch=2)
    untiled = predict_images(det, frames, 0.001, tiled=False, batch=2)
    assert len(tiled[0][1]) > 0
    for (bt, st), (bu, su) in zip(tiled, untiled):
        np.testing.assert_array_equal(bt, bu)
        np.testing.assert_array_equal(st, su)


def test_merge_caps_at_max_det_keeping_the_best():
    tiles = tile_grid(1500, 1000, 1024, 256)  # two tiles: x 0..1024 and 476..1500
    per_tile = [
        (np.array([[0, 0, 5, 5], [100, 100, 105, 105]], float), np.array([0.3, 0.6])),
        (np.array([[0, 0, 5, 5]], float), np.array([0.9])),
    ]
    boxes, scores = merge_tile_predictions(per_tile, tiles, iou=0.5, max_det=2)
    assert scores.tolist() == [0.9, 0.6]
    np.testing.assert_array_equal(boxes[0], [tiles[1].x0, 0, tiles[1].x0 + 5, 5])


# --- detectors: shape contract ---------------------------------------------------------------------------
def _check_contract(preds, n_images, max_det):
    assert len(preds) == n_images
    for boxes, scores in preds:
        assert boxes.dtype == np.float64 and scores.dtype == np.float64
        assert boxes.ndim == 2 and boxes.shape[1] == 4 and scores.shape == (len(boxes),)
        assert len(scores) <= max_det
        assert np.all(np.diff(scores) <= 0) and np.all((scores >= 0) & (scores <= 1))


def test_rtdetr_from_yaml_predicts_shape_contract():
    det = load_detector("rtdetr", "rtdetr-l.yaml", "cpu", imgsz=64, max_det=7)
    image = np.random.RandomState(1).randint(0, 255, (70, 90, 3)).astype(np.uint8)
    preds = det.predict([image], 0.0)
    _check_contract(preds, 1, 7)
    assert det.describe()["n_params"] > 30_000_000


def test_yolo_from_yaml_batch_contract():
    det = load_detector("yolo11", "yolo11n.yaml", "cpu", imgsz=64, max_det=5)
    rs = np.random.RandomState(2)
    preds = det.predict([rs.randint(0, 255, (64, 80, 3)).astype(np.uint8) for _ in range(3)], 0.0)
    _check_contract(preds, 3, 5)
    assert all(len(s) == 5 for _, s in preds)  # floor 0 keeps max_det boxes even with random weights
    with pytest.raises(AegisError, match="`arch` applies to fasterrcnn only"):
        load_detector("yolo11", "yolo11n.yaml", "cpu", arch="mobilenet_v3")


def test_fasterrcnn_checkpoint_mismatch_and_coco_head(tmp_path):
    from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_fpn

    from aegis_eval.runners.torchvision_runner import build_fasterrcnn

    small = tmp_path / "mobilenet.pt"
    torch.save(build_fasterrcnn("mobilenet_v3").state_dict(), small)
    with pytest.raises(AegisError, match=r"do not fit fasterrcnn resnet50_v2 with 2 classes"):
        load_detector("fasterrcnn", str(small), "cpu", arch="resnet50_v2")
    # A 91-class COCO checkpoint is reduced to background + person rows.
    torch.manual_seed(0)
    coco = fasterrcnn_mobilenet_v3_large_fpn(weights=None, weights_backbone=None, num_classes=91).state_dict()
    path = tmp_path / "coco.pth"
    torch.save(coco, path)
    det = load_detector("fasterrcnn", str(path), "cpu", arch="mobilenet_v3", imgsz=64)
    head = det.net.roi_heads.box_predictor
    torch.testing.assert_close(head.cls_score.weight, coco["roi_heads.box_predictor.cls_score.weight"][[0, 1]])
    torch.testing.assert_close(head.bbox_pred.bias, coco["roi_heads.box_predictor.bbox_pred.bias"][:8])
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint")
    with pytest.raises(AegisError, match="cannot read fasterrcnn checkpoint"):
        load_detector("fasterrcnn", str(garbage), "cpu")


# --- result encoding -----------------------------------------------------------------------------------
def test_coco_results_clip_round_and_order():
    boxes = np.array([[-3.0, 2.123456, 10.5, 20.0], [5.0, 5.0, 200.0, 7.0004]])
    scores = np.array([0.2, 0.87654321])
    rows = coco_results(7, (boxes, scores), width=100, height=50)
    assert rows == [
        {"image_id": 7, "category_id": 1, "bbox": [5.0, 5.0, 95.0, 2.0], "score": 0.876543},
        {"image_id": 7, "category_id": 1, "bbox": [0.0, 2.123, 10.5, 17.877], "score": 0.2},
    ]
    data = encode_results(rows)
    assert json.loads(data) == rows and encode_results(rows) == data
    assert encode_results([]) == b"[]\n"


# --- baseline configs ----------------------------------------------------------------------------------
def test_shipped_configs_load_with_reference_settings():
    files = sorted((REPO / "configs" / "baselines").glob("*.yaml"))
    assert {f.stem for f in files} >= {
        f"{d}-{m}" for d in ("heridal", "sard") for m in ("yolo11m", "rtdetr-l", "fasterrcnn")
    }
    for f in files:
        cfg = load_baseline_config(f)
        assert cfg["imgsz"] == 1024 and cfg["tile"] == 1024 and cfg["overlap"] == 256
        assert cfg["score_floor"] == 0.001 and cfg["nms_iou"] == 0.5 and cfg["optimizer"] in ("SGD", "AdamW")


def test_config_unknown_key_did_you_mean_and_types(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: yolo11\nlr: 0.01\n")
    with pytest.raises(AegisError, match=r"unknown key 'lr'; did you mean 'lr0'\?"):
        load_baseline_config(bad)
    bad.write_text("epochs: ten\n")
    with pytest.raises(AegisError, match=r"epochs='ten' must be int"):
        load_baseline_config(bad)
    bad.write_text("optimizer: auto\n")
    with pytest.raises(AegisError, match=r"optimizer='auto' is invalid"):
        load_baseline_config(bad)
    bad.write_bytes(b"model: \x80yolo11\n")  # not UTF-8: one AegisError, not a UnicodeDecodeError
    with pytest.raises(AegisError, match=r"bad.yaml: not valid YAML"):
        load_baseline_config(bad)
    good = tmp_path / "good.yaml"
    good.write_text("model: rtdetr\nlr0: 0.001\nbatch: 2\n")
    cfg = resolve_settings(good, {"batch": 4, "lr0": None})
    assert (cfg["model"], cfg["lr0"], cfg["batch"], cfg["overlap"]) == ("rtdetr", 0.001, 4, 256)


def test_runner_defaults_are_declared_once():
    """TrainSettings, PredictSettings and the CLI's resolved settings all read runners.config.KEYS; in
    particular imgsz is the same 1024 px for training and prediction (a library caller used to get None)."""
    from dataclasses import fields

    from aegis_eval.runners.config import defaults, resolve_settings
    from aegis_eval.runners.predict import PredictSettings
    from aegis_eval.runners.train import TrainSettings

    table = defaults()
    for cls in (TrainSettings, PredictSettings):
        shared = {
            f.name: f.default for f in fields(cls) if f.name in table and f.name not in ("model", "weights", "arch")
        }
        assert shared == {k: table[k] for k in shared}, cls.__name__
    assert TrainSettings("yolo11", None).imgsz == PredictSettings("yolo11", None).imgsz == table["imgsz"] == 1024
    assert resolve_settings(None, {})["imgsz"] == 1024
