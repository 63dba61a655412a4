"""Shared inputs of the adversarial repros (the ``test_adversarial_*.py`` file in each room's test folder).

Small inputs, in-process CLI calls (``--workers 1``): a random PNG, a three-image YOLO source, its one-condition
split, and the ground truth and predictions of that split for the scoring commands. The fixtures here are
imported by name into the test modules that use them.
"""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from typer.testing import CliRunner

from aegis_cli.main import app

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def write_png(path: Path, width: int = 48, height: int = 32, seed: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    img = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    assert cv2.imwrite(str(path), img)
    return path


def yolo_source(root: Path, n: int = 3, seed: int = 0) -> Path:
    for i in range(n):
        write_png(root / "images" / f"f{i}.png", seed=seed + i)
        (root / "labels").mkdir(parents=True, exist_ok=True)
        (root / "labels" / f"f{i}.txt").write_text("0 0.5 0.5 0.25 0.25\n")
    return root


YOLO_BUILD = ("--dataset", "yolo", "--corruptions", "low_light", "--severities", "1", "--workers", "1")


def build_yolo(src: Path, out: Path, *extra: str):
    r = invoke("build-splits", "--source", src, "--out-dir", out, *YOLO_BUILD, *extra)
    assert r.exit_code == 0, r.output
    return json.loads((out / "manifest.json").read_text())


@pytest.fixture
def yolo_split(tmp_path):
    src = yolo_source(tmp_path / "src")
    out = tmp_path / "out"
    return src, out, build_yolo(src, out)


def _rehash(m: dict) -> dict:
    from aegis_data.split.manifest import files_hash, root_hash, sealed_header

    m["root_hash"] = root_hash(m, m["entries"])
    m["files_hash"] = files_hash(m["root_hash"], m["encoder"], m["entries"], sealed_header(m))
    return m


@pytest.fixture
def scoring_inputs(tmp_path, yolo_split):
    src, out, _ = yolo_split
    gt = out / "annotations" / "test.json"
    preds = tmp_path / "clean.json"
    preds.write_text(json.dumps([{"image_id": 1, "category_id": 1, "bbox": [18, 12, 12, 8], "score": 0.9}]))
    return gt, preds


BIG = "1" + "0" * 400  # valid JSON, no float64


@pytest.fixture
def score_json(tmp_path, scoring_inputs):
    gt, preds = scoring_inputs
    path = tmp_path / "score.json"
    assert (
        invoke("score", preds, "--split-dir", gt, "--threshold", "0.5", "--bootstrap", "1", "--json", path).exit_code
        == 0
    )
    return path


def _flip_pixel(path: Path) -> None:
    img = cv2.imread(str(path))
    img[0, 0, 0] ^= 0xFF
    assert cv2.imwrite(str(path), img)


def _reseal(out: Path, m: dict) -> dict:
    (out / "manifest.json").write_text(json.dumps(_rehash(m)))
    return m
