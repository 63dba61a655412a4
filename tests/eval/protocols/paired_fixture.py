"""A tiny split (24 images in 6 groups of 4) and the predictions of models on it, for the paired-difference tests
of rank, the samples file, the report and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

from aegis_data.engine.config import load_config
from tests.eval.protocols.test_scoring import synthetic_gt, synthetic_predictions

CONDITIONS = ("clean", "low_light_s1", "low_light_s2", "smoke_haze_s1")


def make_split(root: Path) -> Path:
    split = root / "split"
    (split / "annotations").mkdir(parents=True)
    (split / "annotations" / "test.json").write_text(json.dumps(synthetic_gt(24, 1)))
    (split / "manifest.json").write_text(
        json.dumps({"dataset": "synthetic", "config_hash": load_config().config_hash, "root_hash": "ab" * 32})
    )
    return split


def make_predictions(root: Path, split: Path, name: str, seed: int) -> Path:
    gt = json.loads((split / "annotations" / "test.json").read_text())
    folder = root / name
    folder.mkdir()
    for cond in CONDITIONS:
        (folder / f"{cond}.json").write_text(json.dumps(synthetic_predictions(gt, cond, seed=seed)))
    return folder
