"""Issue 31, deliverables 1 and 3: a split of numbered video frames scores under both image-id conventions (GT ids,
and file stems as integers as Ultralytics writes them), and a dataset has a name of its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import aegis_eval as ae
from aegis_data.errors import AegisError
from aegis_data.sources import load_source
from aegis_data.sources.records import Record
from aegis_data.split.build import build_splits, coco_image_ids
from cli.main import app
from tests.conftest import assert_one_line_error
from tests.data.sources.test_groups import numbered_frames

SMALL = {"corruptions": ["low_light"], "severities": [1], "workers": 1}


def _records(*stems: str) -> list[Record]:
    return [Record(s, f"{s}.png", 10, 10) for s in sorted(stems)]


@pytest.mark.parametrize(
    ("stems", "ids"),
    [
        (("1", "2", "10", "100"), (1, 10, 100, 2)),  # string order of stems, each its own number
        (("0", "0007", "12"), (0, 7, 12)),  # zero and leading zeros: the number Ultralytics reads
        (("a", "b"), (1, 2)),  # no numbered stem: 1..N as before
        (("3", "a", "10"), (10, 3, 11)),  # the others count on above the largest numbered stem
        (("1", "01", "5"), (6, 7, 5)),  # 1 and 01 share a number: neither takes it, nor any other image
        (("1", str(2**53)), (1, 2)),  # a stem too large for every JSON reader: 1..N
    ],
)
def test_image_ids_are_the_stem_numbers(stems, ids):
    assert coco_image_ids(_records(*stems)) == ids


@pytest.fixture(scope="module")
def frames_split(tmp_path_factory) -> Path:
    root = numbered_frames(tmp_path_factory.mktemp("src") / "beach")
    ds = load_source("yolo", source=root, groups="frames", val_fraction="0.3")
    out = tmp_path_factory.mktemp("split") / "beach-c"
    build_splits(ds, out, **SMALL)
    return out


def _preds(split: Path, split_name: str, by_stem: bool) -> list[dict]:
    gt = json.loads((split / "annotations" / f"{split_name}.json").read_text())
    stem_of = {im["id"]: int(Path(im["file_name"]).stem) for im in gt["images"]}
    return [
        {
            "image_id": stem_of[a["image_id"]] if by_stem else a["image_id"],
            "category_id": 1,  # Ultralytics: class index 0 + 1
            "bbox": a["bbox"],
            "score": 0.9 - 0.01 * k,
        }
        for k, a in enumerate(gt["annotations"])
    ]


def test_the_split_numbers_images_by_their_stems(frames_split):
    for split_name in ("test", "val"):
        gt = json.loads((frames_split / "annotations" / f"{split_name}.json").read_text())
        assert all(im["id"] == int(Path(im["file_name"]).stem) for im in gt["images"])
    manifest = json.loads((frames_split / "manifest.json").read_text())
    assert all(e["coco_id"] == int(e["image_id"]) for e in manifest["entries"] if e["kind"] == "image")


def test_both_id_conventions_score_alike_in_the_api(frames_split):
    # Old code: [image_id_ambiguous] for the GT ids (id 2 was 10.png, stem "2" was 2.png) and for the stems.
    docs = []
    for by_stem in (False, True):
        preds = {"clean": _preds(frames_split, "test", by_stem)}
        doc = ae.score(preds, frames_split, threshold=0.5, bootstrap=20).to_dict()
        docs.append(doc["conditions"]["clean"])
        assert doc["conditions"]["clean"]["recall"] == 1.0
    assert docs[0] == docs[1]


def test_both_id_conventions_freeze_the_same_threshold(frames_split):
    values = [ae.freeze_threshold(_preds(frames_split, "val", by_stem), frames_split).value for by_stem in (0, 1)]
    assert values[0] == values[1]


@pytest.mark.parametrize("by_stem", [False, True])
def test_both_id_conventions_pass_the_cli(frames_split, tmp_path, by_stem):
    val, test = tmp_path / "val.json", tmp_path / "clean.json"
    val.write_text(json.dumps(_preds(frames_split, "val", by_stem)))
    test.write_text(json.dumps(_preds(frames_split, "test", by_stem)))
    t = tmp_path / "t.json"
    r = CliRunner().invoke(app, ["freeze-threshold", str(val), "--split-dir", str(frames_split), "--out", str(t)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(
        app, ["score", str(test), "--split-dir", str(frames_split), "--threshold-file", str(t), "--bootstrap", "10"]
    )
    assert r.exit_code == 0, r.output


def test_an_ambiguous_id_names_the_way_out(tmp_path):
    # A COCO file numbered 1..N in string order (as splits were built before): id 2 is 10.png, stem 2 is 2.png.
    images = [{"id": i, "file_name": f"{s}.png", "width": 50, "height": 50} for i, s in enumerate(("1", "10", "2"), 1)]
    anns = [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 1, 10, 10], "area": 100, "iscrowd": 0}]
    gt = tmp_path / "gt.json"
    gt.write_text(json.dumps({"images": images, "annotations": anns, "categories": [{"id": 1, "name": "person"}]}))
    preds = [{"image_id": 2, "category_id": 1, "bbox": [1, 1, 10, 10], "score": 0.9}]
    with pytest.raises(AegisError, match=r"image_id_ambiguous.*'file_name' of its image.*build the split again"):
        ae.score({"clean": preds}, gt, threshold=0.5, bootstrap=1)
    preds[0]["file_name"] = "10.png"  # the way out the message names
    assert ae.score({"clean": preds}, gt, threshold=0.5, bootstrap=1).to_dict()["conditions"]["clean"]


# --- the dataset's name ------------------------------------------------------------------------------------------
def test_the_name_defaults_to_the_source_folder(frames_split):
    # Old code: every YOLO dataset was called "yolo".
    assert json.loads((frames_split / "manifest.json").read_text())["dataset"] == "beach"
    assert json.loads((frames_split / "annotations" / "test.json").read_text())["info"]["dataset"] == "beach"
    preds = {"clean": _preds(frames_split, "test", False)}
    assert ae.score(preds, frames_split, threshold=0.5, bootstrap=1).to_dict()["dataset"] == "beach"


def test_name_is_given_on_the_command_line(tmp_path):
    root = numbered_frames(tmp_path / "frames", clips=2, per_clip=2)
    base = ["build-splits", "--dataset", "yolo", "--source", str(root), "--corruptions", "low_light"]
    base += ["--severities", "1", "--workers", "1"]
    r = CliRunner().invoke(app, [*base, "--name", "mountains", "--out-dir", str(tmp_path / "m")])
    assert r.exit_code == 0, r.output
    assert "mountains-C written" in " ".join(r.output.split())
    assert json.loads((tmp_path / "m" / "manifest.json").read_text())["dataset"] == "mountains"
    bad = CliRunner().invoke(app, [*base, "--name", "no/slash", "--out-dir", str(tmp_path / "x")])
    assert_one_line_error(bad, "--name")
    assert not (tmp_path / "x").exists()


def test_the_synthetic_set_keeps_its_name():
    assert load_source("synthetic", n=2).default_name == "synthetic"


def test_published_datasets_keep_their_name_whatever_their_folder(tmp_path):
    from tests.data.sources.test_groups import _heridal_tree

    assert load_source("heridal", source=_heridal_tree(tmp_path / "My HERIDAL copy")).default_name == "heridal"
    root = numbered_frames(tmp_path / "My beach (2024)", clips=1, per_clip=1)
    assert load_source("yolo", source=root).default_name == "My_beach_2024"
