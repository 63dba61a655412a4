"""Issue 31, deliverable 2: the bootstrap resamples the split's groups by default (a clip's frames together), and
``cluster_by="none"`` / ``--cluster-by none`` turns that off; all-singleton groups keep image resampling, so the
numbers of splits without sequences do not move."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import aegis_eval as ae
from cli.main import app


def _gt(tmp_path: Path, groups: list[str] | None) -> Path:
    n = 12 if groups is None else len(groups)
    images = [{"id": i + 1, "file_name": f"f{i}.png", "width": 100, "height": 100} for i in range(n)]
    for im, g in zip(images, groups or ()):
        im["group"] = g
    anns = [
        {"id": i + 1, "image_id": i + 1, "category_id": 1, "bbox": [10, 10, 20, 40], "area": 800, "iscrowd": 0}
        for i in range(n)
    ]
    path = tmp_path / "gt.json"
    path.write_text(json.dumps({"images": images, "annotations": anns, "categories": [{"id": 1, "name": "person"}]}))
    return path


def _preds(n: int) -> list[dict]:
    # Every third image missed, so the recall interval depends on what is resampled.
    return [
        {"image_id": i + 1, "category_id": 1, "bbox": [10, 10, 20, 40], "score": 0.9} for i in range(n) if i % 3 != 0
    ]


def _score(gt: Path, n: int, **kw) -> dict:
    return ae.score({"clean": _preds(n)}, gt, threshold=0.5, bootstrap=200, seed=1, **kw).to_dict()


CLIPS = [f"clip{k // 4}" for k in range(12)]  # 3 clips of 4 frames


def test_groups_of_several_images_are_resampled_by_default(tmp_path):
    gt = _gt(tmp_path, CLIPS)
    doc = _score(gt, 12)
    assert (doc["sample"]["resampling_unit"], doc["sample"]["n_units"]) == ("cluster", 3)
    assert doc["provenance"]["cluster_by"] == "group"
    named = _score(gt, 12, cluster_by="group")
    assert named["conditions"] == doc["conditions"]


def test_cluster_by_none_resamples_images(tmp_path):
    gt = _gt(tmp_path, CLIPS)
    doc = _score(gt, 12, cluster_by="none")
    assert (doc["sample"]["resampling_unit"], doc["sample"]["n_units"]) == ("image", 12)
    assert doc["provenance"]["cluster_by"] == "none"
    assert doc["conditions"]["clean"]["ci"] != _score(gt, 12)["conditions"]["clean"]["ci"]


@pytest.mark.parametrize("groups", [None, [f"g{k}" for k in range(12)]], ids=["no-group", "singletons"])
def test_without_sequences_nothing_moves(tmp_path, groups):
    doc = _score(_gt(tmp_path, groups), 12)
    assert (doc["sample"]["resampling_unit"], doc["sample"]["n_units"]) == ("image", 12)
    assert doc["provenance"]["cluster_by"] is None
    assert doc["conditions"] == _score(_gt(tmp_path, groups), 12, cluster_by="none")["conditions"]


def test_cli_cluster_by_none(tmp_path):
    gt = _gt(tmp_path, CLIPS)
    preds = tmp_path / "clean.json"
    preds.write_text(json.dumps(_preds(12)))
    out = tmp_path / "s.json"
    base = ["score", str(preds), "--split-dir", str(gt), "--threshold", "0.5", "--bootstrap", "50", "--json", str(out)]
    r = CliRunner().invoke(app, [*base, "--cluster-by", "none"])
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["sample"]["resampling_unit"] == "image"
    r = CliRunner().invoke(app, base)
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["sample"]["resampling_unit"] == "cluster"
