"""Disaster augmentation where the reference detectors train: on the full frame, before tiling and before the
trainer's own augmentations, as the benchmark corrupts.

``FrameAugmenter`` maps every training sample (a frame or a tile ``<stem>_x<x0>_y<y0>`` of one) back to its
source frame in the split's clean train folder, corrupts that whole frame with ``DisasterAugment`` (sample key =
the frame's COCO image id, so all tiles of a frame share one draw per epoch) and crops the tile. Faster R-CNN
calls it directly; for Ultralytics, ``ultralytics_trainer`` returns a subclass of the task's trainer whose
training dataset loads images through it (``augmented_load_image``) — Ultralytics' mosaic, HSV and flips then run on
the corrupted image as they would on a clean one. Nothing in Ultralytics is patched.

Epochs: the trainer writes its epoch into a shared-memory tensor at every epoch start. With ``workers=0`` (the
default) every draw is exactly keyed by (seed, epoch, frame). With ``workers>0`` batches prefetched across an
epoch boundary may use the previous epoch's key (still training keys, never a test draw).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from aegis_data.augment import AugmentPolicy, DisasterAugment
from aegis_data.errors import AegisError
from aegis_data.imageio import read_rgb
from aegis_data.tiling import Tile, crop

AUGMENT_FILE = "augment.json"
# Corrupted full frames kept per process: tiles of one frame are usually read close together.
_CACHE_FRAMES = 4


@dataclass(frozen=True)
class TileSource:
    frame: Path       # the clean train frame on disk
    image_id: int     # its COCO id: the augmentation's sample key
    tile: Tile        # the region the training image shows (the whole frame when it fits one tile)


class FrameAugmenter:
    """``tile(name, epoch) -> RGB uint8``: the training image ``name`` cut from its disaster-augmented frame."""

    def __init__(self, augment: DisasterAugment, sources: dict[str, TileSource]):
        self.augment = augment
        self.sources = sources
        self._cache: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()

    @property
    def policy(self) -> AugmentPolicy:
        return self.augment.policy

    def frame(self, src: TileSource, epoch: int) -> np.ndarray:
        key = (src.image_id, int(epoch))
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        out = self.augment.apply(read_rgb(src.frame), self.augment.choose(int(epoch), src.image_id))
        self._cache[key] = out
        while len(self._cache) > _CACHE_FRAMES:
            self._cache.popitem(last=False)
        return out

    def tile(self, name: str, epoch: int) -> np.ndarray:
        src = self.sources.get(name)
        if src is None:
            raise AegisError(f"training image {name!r} is not a frame or tile of the split's clean train set; "
                             f"rebuild the run's data/ folder")
        return np.ascontiguousarray(crop(self.frame(src, epoch), src.tile))


# --- Ultralytics -------------------------------------------------------------------------------------------------
def augmented_load_image(self, i: int, rect_mode: bool | None = None, resize_short: bool = False):
    """``load_image`` of an augmented Ultralytics dataset: the sample read through its ``FrameAugmenter``.

    Same contract as Ultralytics' ``BaseDataset.load_image`` (BGR, long side resized to ``imgsz`` with linear
    interpolation in rect mode, else stretched; kept in the mosaic buffer), except that it never returns a
    buffered copy: every load is a fresh draw for the current epoch.
    """
    rect_mode = self._aegis_rect_default if rect_mode is None else rect_mode  # RT-DETR's default is False
    rgb = self._aegis.tile(Path(self.im_files[i]).stem, int(self._aegis_epoch))
    im = np.ascontiguousarray(rgb[..., ::-1])
    h0, w0 = im.shape[:2]
    shape = tuple(self.imgsz) if isinstance(self.imgsz, (tuple, list)) else (self.imgsz, self.imgsz)
    if rect_mode:
        side = min(h0, w0) if resize_short else max(h0, w0)
        r = max(shape) / side
        if r != 1:
            if resize_short:
                size = (math.ceil(w0 * r), max(shape)) if h0 < w0 else (max(shape), math.ceil(h0 * r))
            else:
                size = (min(math.ceil(w0 * r), max(shape)), min(math.ceil(h0 * r), max(shape)))
            im = cv2.resize(im, size, interpolation=cv2.INTER_LINEAR)
    elif (h0, w0) != shape:
        im = cv2.resize(im, shape[::-1], interpolation=cv2.INTER_LINEAR)
    if self.augment and self.cache != "ram":  # the mosaic buffer, as Ultralytics keeps it
        self.ims[i], self.im_hw0[i], self.im_hw[i] = im, (h0, w0), im.shape[:2]
        self.buffer.append(i)
        if 1 < len(self.buffer) >= self.max_buffer_length:
            j = self.buffer.pop(0)
            self.ims[j], self.im_hw0[j], self.im_hw[j] = None, None, None
    return im, (h0, w0), im.shape[:2]


def _dataset_classes() -> dict[type, type]:
    """Ultralytics dataset class -> its augmented subclass (module-level classes, so workers can unpickle them)."""
    return {_YOLO_BASE: AegisYOLODataset, _RTDETR_BASE: AegisRTDETRDataset}


def attach(dataset, augmenter: FrameAugmenter, epoch: int = 0):
    """Make an Ultralytics training dataset load through ``augmenter``; returns the dataset."""
    import torch

    classes = _dataset_classes()
    cls = classes.get(type(dataset))
    if cls is None:
        raise AegisError(f"disaster augmentation supports Ultralytics {', '.join(c.__name__ for c in classes)}, "
                         f"not {type(dataset).__name__}")
    dataset.__class__ = cls
    dataset._aegis = augmenter
    dataset._aegis_epoch = torch.tensor(int(epoch), dtype=torch.int64).share_memory_()
    return dataset


def ultralytics_trainer(model: str, augmenter: FrameAugmenter):
    """The task trainer of ``model`` (yolo11 | rtdetr) with its training dataset augmented by ``augmenter``."""
    from ultralytics.models.rtdetr.train import RTDETRTrainer
    from ultralytics.models.yolo.detect import DetectionTrainer

    base = RTDETRTrainer if model == "rtdetr" else DetectionTrainer

    class AegisAugmentTrainer(base):
        aegis_augmenter = augmenter

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.add_callback("on_train_epoch_start", _set_epoch)

        def build_dataset(self, img_path, mode="train", batch=None):
            dataset = super().build_dataset(img_path, mode, batch)
            if mode == "train":
                attach(dataset, self.aegis_augmenter, getattr(self, "start_epoch", 0) or 0)
            return dataset

    return AegisAugmentTrainer


def _set_epoch(trainer) -> None:
    dataset = trainer.train_loader.dataset
    if hasattr(dataset, "_aegis_epoch"):
        dataset._aegis_epoch.fill_(int(trainer.epoch))


def _bases() -> tuple[type, type]:
    from ultralytics.data.dataset import YOLODataset
    from ultralytics.models.rtdetr.val import RTDETRDataset

    return YOLODataset, RTDETRDataset


try:  # the runner extra; without it only the Faster R-CNN path of this module is usable
    _YOLO_BASE, _RTDETR_BASE = _bases()

    # Single inheritance, so an Ultralytics dataset object can take the augmented class in place.
    class AegisYOLODataset(_YOLO_BASE):
        _aegis_rect_default = True
        load_image = augmented_load_image

    class AegisRTDETRDataset(_RTDETR_BASE):
        _aegis_rect_default = False  # RT-DETR trains on square-stretched images
        load_image = augmented_load_image

except ImportError:  # pragma: no cover - ultralytics not installed
    _YOLO_BASE = _RTDETR_BASE = AegisYOLODataset = AegisRTDETRDataset = None


# --- the run's record ------------------------------------------------------------------------------------------
def _checkpoints(run: Path) -> list[Path]:
    return [p for p in (run / "last.pt", run / "train" / "weights" / "last.pt") if p.is_file()]


def check_augment_record(run: Path, policy: AugmentPolicy | None, seed: int) -> dict[str, Any] | None:
    """The record a run trained with ``policy`` keeps; refuses to resume a run under another policy (or none)."""
    path = run / AUGMENT_FILE
    old = _read_record(path) if path.is_file() else None
    new = None if policy is None else {**policy.record(), "seed": int(seed)}
    if old is None and new is None:
        return None
    if old is None and _checkpoints(run):
        raise AegisError(f"{run} holds a run trained without augmentation; use another --out for --augment "
                         f"{policy.name}")
    if old is not None and (new is None or (old.get("hash"), old.get("seed")) != (new["hash"], new["seed"])):
        what = "without --augment" if new is None else f"with policy {new['name']} [{new['hash']}] seed {seed}"
        raise AegisError(f"{run} was trained with augmentation policy {old.get('name')} [{old.get('hash')}] seed "
                         f"{old.get('seed')}; it cannot be resumed {what} — use another --out")
    return new


def write_augment_record(run: Path, record: dict[str, Any]) -> Path:
    import json

    from aegis_data.imageio import write_bytes_atomic

    path = run / AUGMENT_FILE
    write_bytes_atomic(path, (json.dumps(record, indent=2, sort_keys=True) + "\n").encode())
    return path


def _read_record(path: Path) -> dict[str, Any]:
    from aegis_eval.predictions import read_json_file

    obj, _ = read_json_file(path, "augmentation record")
    if not isinstance(obj, dict) or not isinstance(obj.get("hash"), str):
        raise AegisError(f"{path}: not an augmentation record (expected a JSON object with name and hash)")
    return obj


def augment_record_for_weights(weights: str | Path | None) -> dict[str, Any] | None:
    """The augmentation record of the training run that wrote ``weights``, or None (clean training or unknown).

    Looks for RUN/augment.json beside RUN/config.yaml, for weights at RUN/best.pt (Faster R-CNN) or
    RUN/train/weights/best.pt (Ultralytics) — the layout ``train_baseline`` writes.
    """
    if weights is None:
        return None
    p = Path(weights)
    if not p.is_file():
        return None
    for run in (p.parent, p.parent.parent.parent):
        if (run / "config.yaml").is_file() and (run / AUGMENT_FILE).is_file():
            return _read_record(run / AUGMENT_FILE)
    return None
