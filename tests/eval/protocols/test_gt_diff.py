"""`aegis gt-diff`: revision counts, medians and shares on a constructed pair of annotation versions with
hand-computed answers, the one-to-one tie rule, images and splits present in one version only, OLD scored as
predictions against NEW, and the refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.errors import AegisError
from aegis_eval.protocols.gt_diff import diff_versions, gt_diff_paths, match_versions
from aegis_eval.protocols.predictions import ground_truth_by_class
from tests.conftest import assert_one_line_error

CATS = [{"id": 1, "name": "person"}, {"id": 2, "name": "vehicle"}]


def ann(k: int, image: int, cat: int, box: list[float]) -> dict:
    return {"id": k, "image_id": image, "category_id": cat, "bbox": box}


def old_version() -> dict:
    images = [{"id": 1, "file_name": "a.png"}, {"id": 2, "file_name": "b.png"}, {"id": 3, "file_name": "c.png"}]
    anns = [
        ann(1, 1, 1, [0, 0, 10, 10]),
        ann(2, 1, 1, [20, 0, 10, 10]),
        ann(3, 1, 1, [40, 0, 10, 10]),
        ann(4, 1, 1, [60, 0, 10, 10]),
        ann(5, 1, 2, [80, 0, 10, 10]),
        ann(6, 2, 1, [0, 0, 10, 10]),
        ann(7, 3, 1, [0, 0, 10, 10]),
    ]
    return {"images": images, "annotations": anns, "categories": CATS}


def new_version() -> dict:
    # ids renumbered on purpose: images pair by file_name
    images = [{"id": 10, "file_name": "a.png"}, {"id": 20, "file_name": "b.png"}, {"id": 40, "file_name": "d.png"}]
    anns = [
        ann(1, 10, 1, [0, 0, 10, 10]),  # unchanged
        ann(2, 10, 1, [21, 0, 8, 10]),  # tightened: area 0.8, IoU 0.8
        ann(3, 10, 1, [40, 0, 12, 10]),  # loosened: area 1.2, IoU 100/120
        ann(4, 10, 2, [62, 0, 10, 10]),  # shifted and relabelled vehicle: IoU 80/120
        ann(5, 10, 2, [0, 50, 10, 10]),  # added
        ann(6, 20, 1, [5, 0, 10, 10]),  # shifted by half a box: IoU exactly 1/3
        ann(7, 40, 1, [0, 0, 10, 10]),
    ]
    return {"images": images, "annotations": anns, "categories": CATS}


def diff(iou: float = 0.3) -> dict:
    return diff_versions(
        ground_truth_by_class(old_version(), {}, "all"), ground_truth_by_class(new_version(), {}, "all"), iou=iou
    )


def test_revision_counts_and_medians():
    d = diff()
    assert d["images"] == {"common": 2, "only_old": ["c.png"], "only_new": ["d.png"]}
    t = d["total"]
    assert {
        k: t[k]
        for k in (
            "old_boxes",
            "new_boxes",
            "matched",
            "added",
            "removed",
            "unchanged",
            "tightened",
            "loosened",
            "shifted",
            "class_changed",
        )
    } == {
        "old_boxes": 6,
        "new_boxes": 6,
        "matched": 5,
        "added": 1,
        "removed": 1,
        "unchanged": 1,
        "tightened": 1,
        "loosened": 1,
        "shifted": 2,
        "class_changed": 1,
    }
    # IoUs 1, 0.8, 100/120, 80/120, 1/3; area ratios 1, 0.8, 1.2, 1, 1
    assert t["median_iou"] == pytest.approx(0.8)
    assert t["share_iou_below_0_7"] == pytest.approx(2 / 5)
    assert t["median_area_ratio"] == pytest.approx(1.0) and t["share_shrunk"] == pytest.approx(1 / 5)
    person, vehicle = d["per_class"]["person"], d["per_class"]["vehicle"]
    assert (person["old_boxes"], person["new_boxes"], person["matched"], person["class_changed"]) == (5, 4, 5, 1)
    assert (vehicle["old_boxes"], vehicle["new_boxes"], vehicle["added"], vehicle["removed"]) == (1, 2, 1, 1)
    assert vehicle["median_iou"] is None and vehicle["share_shrunk"] is None


def test_the_matching_iou_is_inclusive_and_declared():
    assert diff(iou=1 / 3)["total"]["matched"] == 5  # the half-shifted box sits exactly at 1/3
    assert diff(iou=0.34)["total"]["matched"] == 4
    strict = diff(iou=0.7)["total"]
    assert strict["matched"] == 3 and strict["added"] == 3 and strict["removed"] == 3


def test_one_to_one_greedy_by_iou_with_index_ties():
    old = np.array([[0, 0, 10, 10], [0, 0, 10, 10]], float)  # two identical OLD boxes
    new = np.array([[0, 0, 10, 10], [2, 0, 10, 10]], float)
    i, j, v = match_versions(old, new, 0.3)
    assert i.tolist() == [0, 1] and j.tolist() == [0, 1]  # best pair first, tie to the lower OLD index
    assert v[0] == 1.0 and v[1] == pytest.approx(80 / 120)


def test_old_as_predictions_against_new():
    p = diff()["old_as_predictions"]
    # person: o1-n1, o2-n2, o3-n3 match; o4 (now a vehicle) and o6 (IoU 1/3) are FPs; n6 is missed.
    # vehicle: o5 hits nothing; n4 and n5 are missed.
    assert (p["tp"], p["fp"], p["fn"]) == (3, 3, 3)
    assert p["precision"] == pytest.approx(0.5) and p["recall"] == pytest.approx(0.5) and p["f1"] == pytest.approx(0.5)
    assert p["per_class"]["person"]["tp"] == 3 and p["per_class"]["vehicle"]["fn"] == 2


def write_split(root, split: str, doc: dict):
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    (root / "annotations" / f"{split}.json").write_text(json.dumps(doc))


def test_split_directories_and_cli(tmp_path):
    old, new = tmp_path / "v1", tmp_path / "v2"
    write_split(old, "test", old_version())
    write_split(old, "train", old_version())
    write_split(new, "test", new_version())
    doc = gt_diff_paths(old, new)
    assert list(doc["splits"]) == ["test"] and doc["splits_only_old"] == ["train"]
    assert doc["splits"]["test"]["total"]["matched"] == 5 and len(doc["old"]["test"]["sha256"]) == 64
    runner = CliRunner()
    out = tmp_path / "diff.json"
    res = runner.invoke(app, ["gt-diff", str(old), str(new), "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "ONLY IN OLD: c.png" in res.output and "OLD as predictions" in res.output
    assert json.loads(out.read_text())["splits"]["test"]["total"]["class_changed"] == 1
    assert_one_line_error(
        runner.invoke(app, ["gt-diff", str(old), str(new / "annotations" / "test.json")]), "[gt_diff_kinds]"
    )
    assert_one_line_error(runner.invoke(app, ["gt-diff", str(old), str(tmp_path / "nope")]), "[gt_not_found]")
    assert_one_line_error(runner.invoke(app, ["gt-diff", str(old), str(new), "--iou", "0"]), "[gt_diff_iou]")
    other = tmp_path / "v3"
    write_split(other, "val", new_version())
    with pytest.raises(AegisError, match=r"^\[gt_diff_no_common_split\]"):
        gt_diff_paths(old, other)


def test_repeated_file_names_are_refused():
    doc = old_version()
    doc["images"][1]["file_name"] = "a.png"
    with pytest.raises(AegisError, match=r"^\[gt_diff_duplicate_file_name\] OLD .*'a.png'"):
        diff_versions(ground_truth_by_class(doc, {}, "all"), ground_truth_by_class(new_version(), {}, "all"))


@pytest.mark.parametrize("category", [[1], {"id": 1}])
def test_an_unhashable_category_id_is_one_line(tmp_path, category):
    new = new_version()
    new["annotations"][3]["category_id"] = category
    paths = []
    for name, doc in (("old.json", old_version()), ("new.json", new)):
        paths.append(tmp_path / name)
        paths[-1].write_text(json.dumps(doc))
    with pytest.raises(AegisError, match=r"^\[gt_bad_category\] .*annotations\[3\]\.category_id must be an integer"):
        gt_diff_paths(*paths)
