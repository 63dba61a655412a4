"""Tiled inference on large frames and the class-agnostic NMS that merges tiles (docs/BASELINES.md, "Tiled inference").

The frame is corrupted first (it comes from the split on disk), then cut with
``aegis_eval.runners.tiling.tile_grid`` (1024 px tiles, 256 px overlap, last tile flush with the edge). Every tile is
predicted at the low score floor, boxes are shifted back to frame pixels, and overlapping detections of one
person seen by two tiles are merged by greedy NMS.

NMS is done in NumPy float64 rather than ``torchvision.ops.nms`` so that the order is defined exactly:
candidates are visited by score descending with ties broken by input order (tile row-major, then the tile's
own output order), and a box is suppressed when its IoU with a kept box is strictly greater than the
threshold. A frame that fits in one tile is passed through untouched (no merge NMS), so tiled and untiled
inference agree exactly there.
"""

from __future__ import annotations

import numpy as np

from aegis_data.errors import AegisError
from aegis_eval.runners.detector import Detector, Prediction, check_batch, empty_prediction
from aegis_eval.runners.tiling import DEFAULT_OVERLAP, DEFAULT_TILE, Tile, boxes_to_frame, crop, tile_grid

DEFAULT_NMS_IOU = 0.5


def nms_xyxy(boxes: np.ndarray, scores: np.ndarray, iou: float = DEFAULT_NMS_IOU) -> np.ndarray:
    """Indices kept by greedy class-agnostic NMS, in visiting order (score desc, ties by input order).

    boxes: (N,4) xyxy; scores: (N,). A box whose IoU with an already kept box is > ``iou`` is dropped.
    Degenerate boxes (zero area) have IoU 0 with everything and are never suppressed by area alone.
    """
    if not 0.0 <= iou <= 1.0:
        raise AegisError(f"NMS IoU must be in [0, 1], got {iou}")
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if len(b) != len(s):
        raise AegisError(f"NMS needs one score per box, got {len(b)} boxes and {len(s)} scores")
    order = np.argsort(-s, kind="stable")
    areas = np.maximum(b[:, 2] - b[:, 0], 0.0) * np.maximum(b[:, 3] - b[:, 1], 0.0)
    alive = np.ones(len(b), dtype=bool)
    keep: list[int] = []
    for pos, i in enumerate(order):
        if not alive[i]:
            continue
        keep.append(int(i))
        rest = order[pos + 1 :]
        rest = rest[alive[rest]]
        if len(rest) == 0:
            continue
        iw = np.minimum(b[i, 2], b[rest, 2]) - np.maximum(b[i, 0], b[rest, 0])
        ih = np.minimum(b[i, 3], b[rest, 3]) - np.maximum(b[i, 1], b[rest, 1])
        inter = np.maximum(iw, 0.0) * np.maximum(ih, 0.0)
        union = areas[i] + areas[rest] - inter
        with np.errstate(divide="ignore", invalid="ignore"):
            ious = np.where(union > 0, inter / union, 0.0)
        alive[rest[ious > iou]] = False
    return np.asarray(keep, dtype=np.int64)


def merge_tile_predictions(
    per_tile: list[Prediction], tiles: list[Tile], *, iou: float = DEFAULT_NMS_IOU, max_det: int = 300
) -> Prediction:
    """Shift each tile's boxes to frame pixels, concatenate, NMS, keep the ``max_det`` best (score desc)."""
    if len(per_tile) != len(tiles):
        raise AegisError(f"got predictions for {len(per_tile)} tiles but the grid has {len(tiles)}")
    parts_b = [boxes_to_frame(b, t) for (b, _), t in zip(per_tile, tiles)]
    parts_s = [np.asarray(s, dtype=np.float64).reshape(-1) for _, s in per_tile]
    if not parts_b or sum(len(s) for s in parts_s) == 0:
        return empty_prediction()
    boxes = np.concatenate(parts_b, axis=0)
    scores = np.concatenate(parts_s, axis=0)
    keep = nms_xyxy(boxes, scores, iou)[: int(max_det)]
    return np.ascontiguousarray(boxes[keep]), np.ascontiguousarray(scores[keep])


def predict_images(
    detector: Detector,
    images: list[np.ndarray],
    score_floor: float,
    *,
    tiled: bool = True,
    tile: int = DEFAULT_TILE,
    overlap: int = DEFAULT_OVERLAP,
    nms_iou: float = DEFAULT_NMS_IOU,
    batch: int = 8,
) -> list[Prediction]:
    """Predict full frames, tiled or not; one ``(boxes xyxy, scores)`` per input frame, in frame pixels.

    Tiles of all given frames are pooled and sent to the detector ``batch`` at a time, so small frames and
    large ones share batches. With ``tiled=False`` every frame goes to the detector whole (the detector then
    resizes it to its input size).
    """
    check_batch(images)
    if int(batch) < 1:
        raise AegisError(f"`batch` must be >= 1, got {batch}", param="batch")
    if not 0.0 <= float(score_floor) <= 1.0:
        raise AegisError(f"score floor must be in [0, 1], got {score_floor}")
    if not tiled:
        out: list[Prediction] = []
        for k in range(0, len(images), batch):
            out.extend(detector.predict(list(images[k : k + batch]), score_floor))
        return out
    grids = [tile_grid(im.shape[1], im.shape[0], tile, overlap) for im in images]
    jobs = [(i, t) for i, g in enumerate(grids) for t in g]
    raw: list[Prediction] = []
    for k in range(0, len(jobs), batch):
        chunk = jobs[k : k + batch]
        raw.extend(detector.predict([crop(images[i], t) for i, t in chunk], score_floor))
    if len(raw) != len(jobs):
        raise AegisError(f"detector returned {len(raw)} results for {len(jobs)} tiles")
    results: list[Prediction] = []
    pos = 0
    for g in grids:
        per_tile = raw[pos : pos + len(g)]
        pos += len(g)
        if len(g) == 1:  # fits one tile: exactly the untiled prediction
            results.append(per_tile[0])
        else:
            results.append(merge_tile_predictions(per_tile, g, iou=nms_iou, max_det=detector.max_det))
    return results
