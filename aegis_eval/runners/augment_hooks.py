"""Disaster augmentation where the reference detectors train: on the full frame, before tiling and before the
trainer's own augmentations, as the benchmark corrupts.

``FrameAugmenter`` maps every training sample (a frame or a tile ``<stem>_x<x0>_y<y0>`` of one) back to its
source frame in the split's clean train folder, corrupts that whole frame with ``DisasterAugment`` (sample key =
the frame's COCO image id, so all tiles of a frame share one draw per epoch) and crops the tile. Faster R-CNN
calls it directly; Ultralytics loads through it via ``aegis_eval.runners.augment_ultralytics``. The run's
augmentation record (RUN/augment.json) is kept and checked here too.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aegis_data.augment.transform import AugmentPolicy, DisasterAugment
from aegis_data.errors import AegisError
from aegis_data.files.imageio import read_rgb
from aegis_eval.runners.tiling import Tile, crop

AUGMENT_FILE = "augment.json"
# Corrupted full frames kept per process: tiles of one frame are usually read close together.
_CACHE_FRAMES = 4


@dataclass(frozen=True)
class TileSource:
    frame: Path  # the clean train frame on disk
    image_id: int  # its COCO id: the augmentation's sample key
    tile: Tile  # the region the training image shows (the whole frame when it fits one tile)


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
            raise AegisError(
                f"training image {name!r} is not a frame or tile of the split's clean train set; "
                f"rebuild the run's data/ folder"
            )
        return np.ascontiguousarray(crop(self.frame(src, epoch), src.tile))


def _split_manifest(split: str | Path) -> tuple[Path, dict] | None:
    """(path, the split's manifest as an object), or None when the folder has none; read through the sealed reader,
    which checks a build's manifest."""
    from aegis_data.split.reader import read_manifest_file

    found = read_manifest_file(split)
    if found is None:
        return None
    if not isinstance(found.data, dict):
        raise AegisError(
            f"[manifest_wrong_type] split manifest file {found.path}: expected a JSON object at the top "
            f"level, got a JSON {type(found.data).__name__}"
        )
    return found.path, found.data


def policy_suite_for(split: str | Path) -> str | None:
    """The shipped suite a split was built with (the default for its augmentation policies), or None when it has no
    manifest or another suite."""
    from aegis_data.engine.config import SUITE_NAMES

    found = _split_manifest(split)
    if found is None:
        return None
    suite = found[1].get("suite")
    return suite if suite in SUITE_NAMES else None


def training_scale(split: str | Path):
    """The person unit the training frames of ``split`` are corrupted with (an aegis-v2 policy needs one): the
    split's own object scale when it was built with one, else the median ``sqrt(w h)`` of its train (or val) person
    boxes; None when it has neither."""
    from aegis_data.engine.scale import OBJECT, Scale, person_unit_from_boxes, scale_from_record
    from aegis_data.files.layout import annotation_path
    from aegis_data.files.readers import coco_person_boxes, read_coco_gt

    split = Path(split)
    found = _split_manifest(split)
    if found is not None:
        manifest_path, manifest = found
        recorded = scale_from_record(manifest.get("scale"), f"manifest {manifest_path}")
        if recorded.is_object:
            return recorded
    for name in ("train", "val"):
        path = annotation_path(split, name)
        if path.is_file():
            coco, _ = read_coco_gt(path)
            boxes = [(x, y, x + w, y + h) for bs in coco_person_boxes(coco, path).values() for x, y, w, h in bs]
            unit, n = person_unit_from_boxes(boxes)
            if n:
                return Scale(OBJECT, unit, f"median sqrt(w*h) of {n} {name} boxes")
    return None


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
    if old is None and policy is not None and _checkpoints(run):  # (policy is set: new is not None)
        raise AegisError(
            f"{run} holds a run trained without augmentation; use another `run_dir` for `augment` {policy.name}",
            param="run_dir",
        )
    if old is not None and (new is None or (old.get("hash"), old.get("seed")) != (new["hash"], new["seed"])):
        what = "without `augment`" if new is None else f"with policy {new['name']} [{new['hash']}] seed {seed}"
        raise AegisError(
            f"{run} was trained with augmentation policy {old.get('name')} [{old.get('hash')}] seed "
            f"{old.get('seed')}; it cannot be resumed {what} — use another `run_dir`",
            param="run_dir",
        )
    return new


def write_augment_record(run: Path, record: dict[str, Any]) -> Path:
    import json

    from aegis_data.files.imageio import write_bytes_atomic

    path = run / AUGMENT_FILE
    write_bytes_atomic(path, (json.dumps(record, indent=2, sort_keys=True) + "\n").encode())
    return path


def _read_record(path: Path) -> dict[str, Any]:
    from aegis_eval.protocols.predictions import read_json_file

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
