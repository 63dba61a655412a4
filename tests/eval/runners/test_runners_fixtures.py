"""A tiny split on disk in the docs/SPLITS.md layout, for the runner tests (helpers only; no tests here).

The corrupted conditions are simple brightness changes of the clean frames: the runner tests check plumbing
(ids, files, resume, determinism), not the corruption engine, and must not depend on its speed.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from aegis_data.engine.config import load_config
from aegis_data.files.imageio import write_png_atomic


def _frame(seed: int, width: int, height: int) -> tuple[np.ndarray, list[list[float]]]:
    rs = np.random.RandomState(seed)  # frozen legacy stream: fixture pixels never change across numpy versions
    img = (rs.rand(height, width, 3) * 60 + 60).astype(np.uint8)
    boxes = []
    for k in range(2):
        w, h = 10 + 4 * k, 16 + 4 * k
        x = 8 + (seed * 13 + k * 37) % max(1, width - w - 16)
        y = 8 + (seed * 7 + k * 29) % max(1, height - h - 16)
        img[y : y + h, x : x + w] = (230, 200, 180)
        boxes.append([float(x), float(y), float(w), float(h)])
    return img, boxes


def make_split(
    root: Path,
    *,
    n_test: int = 3,
    n_val: int = 3,
    n_train: int = 0,
    size: tuple[int, int] = (96, 80),
    conditions: list[str] | None = None,
) -> Path:
    """Write ``root`` as a split: annotations/{test,val[,train]}.json and PNG condition folders."""
    conds = load_config().conditions() if conditions is None else conditions
    width, height = size
    splits = {"test": n_test, "val": n_val}
    if n_train:
        splits["train"] = n_train
    seed = 0
    for split, n in splits.items():
        images, anns = [], []
        for i in range(n):
            seed += 1
            stem = f"{split}_{i:03d}"
            img, boxes = _frame(seed, width, height)
            images.append({"id": i + 1, "file_name": f"{stem}.png", "width": width, "height": height})
            for b in boxes:
                anns.append(
                    {
                        "id": len(anns) + 1,
                        "image_id": i + 1,
                        "category_id": 1,
                        "bbox": b,
                        "area": b[2] * b[3],
                        "iscrowd": 0,
                    }
                )
            for c_index, cond in enumerate(conds if split == "test" else ["clean"]):
                scale = 1.0 - 0.02 * c_index  # each condition a little darker: distinct bytes per condition
                out = np.clip(img.astype(np.float64) * scale + 0.5, 0, 255).astype(np.uint8)
                write_png_atomic(root / split / cond / f"{stem}.png", out)
        gt = {
            "images": images,
            "annotations": anns,
            "categories": [{"id": 1, "name": "person", "supercategory": "person"}],
        }
        (root / "annotations").mkdir(parents=True, exist_ok=True)
        (root / "annotations" / f"{split}.json").write_text(json.dumps(gt))
    return root
