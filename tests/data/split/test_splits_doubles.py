"""Test doubles for the split builder: a tiny in-memory source and a trivial keyed corruption.

They live at module level so worker processes (forkserver/spawn) can import them by name. No tests here.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from aegis_data.sources.records import Record

FEW = ["water_glare", "low_light"]  # a small selection keeps the builds in tests fast


@dataclass(frozen=True)
class FakeDataset:
    name: str
    description: Mapping[str, Any]
    splits: Mapping[str, list]


def _key(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256("|".join(map(str, parts)).encode()).digest()[:4], "big")


def fake_read(record: Record, max_pixels: int) -> np.ndarray:
    """A deterministic gradient image per image id (no RNG at all)."""
    h, w = record.height, record.width
    k = _key(record.image_id)
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([(x * 3 + k) % 256, (y * 5 + k // 7) % 256, (x + 2 * y + k // 49) % 256], axis=-1).astype(np.uint8)


def fake_corrupt(
    image: np.ndarray, name: str, severity: int, image_id: str, seed: int, config=None, scale=None, scene=None
) -> np.ndarray:
    """A keyed brightness shift: depends on every argument, like the real engine (``config``, ``scale`` and
    ``scene`` are accepted so it can stand in for the builder's default corruption, which receives the split's
    suite config and length unit, and under a generation-2 suite each image's scene; an object scale shifts by its
    person unit too)."""
    shift = 1 + (_key(name, severity, image_id, seed) + (0 if scale is None else int(scale.person_px))) % 250
    return ((image.astype(np.int32) + shift) % 256).astype(np.uint8)


def slow_corrupt(image: np.ndarray, name: str, severity: int, image_id: str, seed: int) -> np.ndarray:
    """fake_corrupt that takes a while, so a build can be killed mid-way."""
    time.sleep(0.05)
    return fake_corrupt(image, name, severity, image_id, seed)


def no_leak(dataset: Any) -> dict:
    return {"leakage": False}


def leaky(dataset: Any) -> dict:
    return {
        "leakage": True,
        "leakage_details": {
            "groups_in_several_splits": 1,
            "group_examples": [{"group": "g1", "splits": ["test", "val"]}],
            "duplicates_in_several_splits": 0,
            "duplicate_examples": [],
        },
    }


def record(i: int, split: str = "test", w: int = 40, h: int = 30, boxes=None) -> Record:
    if boxes is None:
        boxes = (
            ((1.0 + i % 4, 2.0, 12.5 + i % 4, 20.0), (20.0, 5.25, 30.0, 29.0))
            if i % 2 == 0
            else ((3.0, 4.0, 9.0, 10.0),)
        )
    return Record(f"img{i:03d}", f"fake:{i}", w, h, tuple(boxes), group=f"g{i}", split=split)


def fake_dataset(n_test: int = 3, n_val: int = 1, n_train: int = 0, name: str = "fake", **desc) -> FakeDataset:
    splits = {"test": [record(i) for i in range(n_test)]}
    if n_val:
        splits["val"] = [record(100 + i, "val") for i in range(n_val)]
    if n_train:
        splits["train"] = [record(200 + i, "train") for i in range(n_train)]
    return FakeDataset(name, {"adapter": name, "n": n_test, **desc}, splits)


def build_kwargs(**over) -> dict:
    kw = dict(corruptions=FEW, severities=(1, 2), workers=1, read_image=fake_read, corrupt=fake_corrupt, audit=no_leak)
    kw.update(over)
    return kw


def dying_corrupt(image, name: str, severity: int, image_id: str, seed: int):
    """Kills its own worker process, as the OOM killer would."""
    import os
    import signal

    os.kill(os.getpid(), signal.SIGKILL)
