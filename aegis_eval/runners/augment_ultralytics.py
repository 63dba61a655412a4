"""Ultralytics integration of disaster augmentation: a subclass of the task's trainer whose training dataset
loads every image through a ``FrameAugmenter`` (``augmented_load_image``) — before Ultralytics' mosaic, HSV and
flips, which then run on the corrupted image as they would on a clean one. Nothing in Ultralytics is patched.

Epochs: the trainer writes its epoch into a shared-memory tensor at every epoch start. With ``workers=0`` (the
default) every draw is exactly keyed by (seed, epoch, frame). With ``workers>0`` batches prefetched across an
epoch boundary may use the previous epoch's key (still training keys, never a test draw).
"""

from __future__ import annotations

import math
from pathlib import Path

import cv2
import numpy as np
from ultralytics.data.dataset import YOLODataset
from ultralytics.models.rtdetr.train import RTDETRTrainer
from ultralytics.models.rtdetr.val import RTDETRDataset
from ultralytics.models.yolo.detect import DetectionTrainer

from aegis_data.errors import AegisError
from aegis_eval.runners.augment_hooks import FrameAugmenter


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


# Single inheritance, so an Ultralytics dataset object can take the augmented class in place.
class AegisYOLODataset(YOLODataset):
    _aegis_rect_default = True
    load_image = augmented_load_image


class AegisRTDETRDataset(RTDETRDataset):
    _aegis_rect_default = False  # RT-DETR trains on square-stretched images
    load_image = augmented_load_image


def _dataset_classes() -> dict[type, type]:
    """Ultralytics dataset class -> its augmented subclass (module-level classes, so workers can unpickle them)."""
    return {YOLODataset: AegisYOLODataset, RTDETRDataset: AegisRTDETRDataset}


def attach(dataset, augmenter: FrameAugmenter, epoch: int = 0):
    """Make an Ultralytics training dataset load through ``augmenter``; returns the dataset."""
    import torch

    classes = _dataset_classes()
    cls = classes.get(type(dataset))
    if cls is None:
        raise AegisError(
            f"disaster augmentation supports Ultralytics {', '.join(c.__name__ for c in classes)}, "
            f"not {type(dataset).__name__}"
        )
    dataset.__class__ = cls
    dataset._aegis = augmenter
    dataset._aegis_epoch = torch.tensor(int(epoch), dtype=torch.int64).share_memory_()
    return dataset


def ultralytics_trainer(model: str, augmenter: FrameAugmenter):
    """The task trainer of ``model`` (yolo11 | rtdetr) with its training dataset augmented by ``augmenter``."""
    base = RTDETRTrainer if model == "rtdetr" else DetectionTrainer

    class AegisAugmentTrainer(base):  # type: ignore[valid-type,misc]  # the base is chosen at run time
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
