"""export-hf: a frozen split as a datasets dataset with embedded images, loadable offline; push via a fake api."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from aegis_data.errors import AegisError
from aegis_data.files.imageio import read_rgb
from aegis_data.split.build import build_splits
from aegis_data.split.export_hf import export_split, push_split
from aegis_data.split.manifest import build_manifest, write_manifest
from tests.data.split.test_splits_doubles import build_kwargs, fake_dataset


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    base = tmp_path_factory.mktemp("hf")
    split = base / "fake-c"
    build_splits(fake_dataset(n_test=2, n_val=1), split, **build_kwargs(corruptions=["low_light"], severities=(1,)))
    expected = {(p.parent.name, p.stem): read_rgb(p) for p in (split / "test").rglob("*.png")}
    gt = json.loads((split / "annotations" / "test.json").read_text())
    result = export_split(split, base / "export")
    moved = base / "moved"
    shutil.move(str(result.out), moved)
    shutil.rmtree(split)  # nothing may point back at the split's files
    return moved, expected, gt, result


def test_rows_per_split(exported):
    _, _, _, result = exported
    assert dict(result.rows) == {"test": 4, "validation": 1}


def test_load_from_disk_after_moving_has_embedded_images(exported):
    from datasets import load_from_disk

    moved, expected, gt, _ = exported
    dd = load_from_disk(str(moved / "dataset"))
    test = dd["test"]
    assert test.column_names == ["image", "condition", "image_id", "coco_id", "width", "height", "objects"]
    assert test["condition"] == ["clean", "clean", "low_light_s1", "low_light_s1"]
    row = test[3]
    assert (row["image_id"], row["coco_id"], row["width"], row["height"]) == ("img001", 2, 40, 30)
    assert np.array_equal(np.asarray(row["image"].convert("RGB")), expected[("low_light_s1", "img001")])
    boxes0 = [a["bbox"] for a in gt["annotations"] if a["image_id"] == 1]
    assert test[0]["objects"] == {"bbox": boxes0, "category": [0] * len(boxes0)}
    assert dd["validation"][0]["condition"] == "clean"


def test_parquet_after_moving_has_embedded_images(exported):
    from datasets import load_dataset

    moved, expected, _, _ = exported
    files = sorted(p.name for p in (moved / "data").iterdir())
    assert files == ["test-clean.parquet", "test-low_light_s1.parquet", "validation-clean.parquet"]
    ds = load_dataset("parquet", data_files={"test": str(moved / "data" / "test-*.parquet")})["test"]
    assert len(ds) == 4 and type(ds.features["image"]).__name__ == "Image"
    for row in ds:
        got = np.asarray(row["image"].convert("RGB"))
        assert np.array_equal(got, expected[(row["condition"], row["image_id"])])


def test_card_and_manifest_travel_with_the_export(exported):
    moved, _, _, _ = exported
    card = (moved / "README.md").read_text()
    assert "path: data/test-*.parquet" in card and "path: data/validation-*.parquet" in card
    manifest = json.loads((moved / "manifest.json").read_text())
    assert manifest["root_hash"] in card


class FakeApi:
    def __init__(self):
        self.calls = []

    def create_repo(self, repo_id, **kw):
        self.calls.append(("create_repo", repo_id, kw))

    def upload_folder(self, **kw):
        self.calls.append(("upload_folder", kw["repo_id"], kw))


def test_push_goes_through_the_api_object(exported):
    moved, _, _, _ = exported
    api = FakeApi()
    url = push_split(moved, "someone/fake-c", api)
    assert url == "https://huggingface.co/datasets/someone/fake-c"
    assert [c[0] for c in api.calls] == ["create_repo", "upload_folder"]
    assert api.calls[0][2] == {"repo_type": "dataset", "exist_ok": True}
    up = api.calls[1][2]
    assert up["repo_type"] == "dataset" and Path(up["folder_path"]) == moved
    assert "data/*.parquet" in up["allow_patterns"]


def test_push_refuses_bad_repo_ids_and_non_redistributable_sets(exported, tmp_path):
    moved, _, _, _ = exported
    with pytest.raises(AegisError, match="repo id like 'user/name'"):
        push_split(moved, "noslash", FakeApi())
    heridal = tmp_path / "heridal"
    shutil.copytree(moved, heridal)
    m = json.loads((heridal / "manifest.json").read_text())
    # A genuine HERIDAL build's manifest (re-sealed: the dataset name is covered by the root hash).
    fields = {k: m[k] for k in ("source", "suite", "config_hash", "seed", "conditions", "splits", "entries", "encoder")}
    write_manifest(heridal / "manifest.json", build_manifest(dataset="heridal", **fields))
    api = FakeApi()
    with pytest.raises(AegisError, match="forbids redistribution"):
        push_split(heridal, "someone/heridal-c", api)
    assert api.calls == []


def test_export_refuses_a_changed_file_and_a_non_empty_out(tmp_path):
    split = tmp_path / "s"
    build_splits(fake_dataset(n_test=1, n_val=0), split, **build_kwargs(corruptions=["low_light"], severities=(1,)))
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("x")
    with pytest.raises(AegisError, match="not empty"):
        export_split(split, tmp_path / "busy")
    p = split / "test" / "clean" / "img000.png"
    p.write_bytes(p.read_bytes() + b"\0")
    with pytest.raises(AegisError, match="does not match the manifest; run `aegis verify"):
        export_split(split, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy", "s"]  # no half export left behind
