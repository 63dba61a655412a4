"""SARD adapter: original and Roboflow layouts, group-aware splits that never straddle, clear failures."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import cv2
import numpy as np
import pytest

from aegis_data.errors import AegisError
from aegis_data.sources import load_source
from aegis_data.sources.audit import audit_dataset
from aegis_data.sources.sard import original_stem, sequence_groups


def write_image(path: Path, width: int = 40, height: int = 30, value: int = 100) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    img = np.full((height, width, 3), value % 256, np.uint8)
    img[0, 0] = (value * 7) % 256  # distinct files for distinct values
    assert cv2.imwrite(str(path), img)
    return path


def voc(objects) -> str:
    objs = "".join(
        f"<object><name>{n}</name><bndbox><xmin>{a}</xmin><ymin>{b}</ymin><xmax>{c}</xmax><ymax>{d}</ymax></bndbox></object>"
        for n, a, b, c, d in objects
    )
    return f"<annotation>{objs}</annotation>"


def original_tree(root: Path, numbers) -> Path:
    for k in numbers:
        write_image(root / f"gss{k}.jpg", value=k)
        (root / f"gss{k}.xml").write_text(voc([("human", 2, 2, 12, 20)] if k % 3 else []))
    return root


def frame(image_id: str) -> int:
    return int(re.match(r"gss(\d+)", image_id).group(1))


def assert_no_near_duplicates_straddle(ds, gap: int) -> None:
    where = {}
    for split, rs in ds.splits.items():
        for r in rs:
            where.setdefault(frame(r.image_id), set()).add(split)
    assert all(len(s) == 1 for s in where.values()), "a frame is in several splits"
    nums = sorted(where)
    for a in nums:
        for b in nums:
            if 0 < b - a <= gap:
                assert where[a] == where[b], f"frames {a} and {b} are {gap} apart but split {where[a]} / {where[b]}"


def test_original_layout_sequences_stay_together(tmp_path: Path):
    numbers = list(range(1, 7)) + [9, 10] + list(range(30, 36)) + [60, 61, 62, 90, 120, 150, 151]
    root = original_tree(tmp_path / "SARD", numbers)
    ds = load_source("sard", source=root)
    assert sum(len(v) for v in ds.splits.values()) == len(numbers)
    groups = defaultdict(set)
    for split, rs in ds.splits.items():
        for r in rs:
            groups[r.group].add(split)
    assert all(len(s) == 1 for s in groups.values())
    assert ds.records()[0].group  # a declared group, not the image id default
    assert {r.group for r in ds.records() if frame(r.image_id) in (1, 6)} == {"gss1-6"}
    assert {r.group for r in ds.records() if frame(r.image_id) in (9, 10)} == {"gss9-10"}  # 6 -> 9 is a gap of 3
    assert_no_near_duplicates_straddle(ds, gap=2)
    assert audit_dataset(ds)["leakage"] is False
    assert ds.description["layout_kind"] == "original"
    json.dumps(ds.description)
    # boxes from the XML; frames with k % 3 == 0 are negatives
    rec = next(r for r in ds.records() if r.image_id == "gss1")
    assert rec.boxes == ((2.0, 2.0, 12.0, 20.0),)
    assert next(r for r in ds.records() if r.image_id == "gss3").boxes == ()


def test_long_sequences_are_cut_and_purged_at_cuts(tmp_path: Path):
    root = original_tree(tmp_path / "SARD", range(1, 61))  # one unbroken sequence of 60 frames
    ds = load_source("sard", source=root, max_group="6", gap="1")
    assert ds.description["groups"] == 10
    assert_no_near_duplicates_straddle(ds, gap=1)
    kept = sum(len(v) for v in ds.splits.values())
    assert kept + ds.description["purged_at_cuts"] == 60
    assert ds.description["purged_at_cuts"] > 0
    assert set(ds.splits) == {"test", "val", "train"}


def test_sequence_groups_rule():
    group_of, chunks = sequence_groups(["gss1", "gss2", "gss4", "gss8", "cam7", "gss9"], gap=2, max_group=50)
    assert group_of["gss1"] == group_of["gss2"] == group_of["gss4"] == "gss1-4"
    assert group_of["gss8"] == group_of["gss9"] == "gss8-9"
    assert group_of["cam7"] == "cam7-7"  # another prefix is another sequence
    with pytest.raises(AegisError, match="no trailing frame number"):
        sequence_groups(["gss1", "aerial_view"], gap=2, max_group=50)


def test_names_without_frame_numbers_need_a_groups_file(tmp_path: Path):
    root = tmp_path / "S"
    for name in ("alpha", "beta", "gamma", "delta", "eps"):
        write_image(root / f"{name}.jpg", value=len(name))
        (root / f"{name}.xml").write_text(voc([]))
    with pytest.raises(AegisError, match="cannot form SARD sequence groups.*groups=FILE"):
        load_source("sard", source=root)
    csv_file = tmp_path / "groups.csv"
    csv_file.write_text("stem,group\nalpha,A\nbeta,A\ngamma,B\ndelta,C\neps,C\n")
    ds = load_source("sard", source=root, groups=str(csv_file))
    split_of = {r.image_id: r.split for r in ds.records()}
    assert split_of["alpha"] == split_of["beta"] and split_of["delta"] == split_of["eps"]
    assert {r.group for r in ds.records()} == {"A", "B", "C"}
    json_file = tmp_path / "groups.json"
    json_file.write_text(json.dumps({"alpha.jpg": "A", "beta": "A", "gamma": "B", "delta": "C"}))
    with pytest.raises(AegisError, match="does not list 1 of 5 image.*eps"):
        load_source("sard", source=root, groups=str(json_file))
    with pytest.raises(AegisError, match="groups file not found"):
        load_source("sard", source=root, groups=str(tmp_path / "missing.csv"))


def roboflow_tree(root: Path) -> Path:
    files = {
        "train": [
            "gss10_jpg.rf.aaa111",
            "gss10_jpg.rf.bbb222",
            "gss11_jpg.rf.ccc333",
            "gss40_jpg.rf.ddd444",
            "gss70_jpg.rf.eee555",
            "gss100_jpg.rf.fff666",
        ],
        "valid": ["gss11_jpg.rf.0a0a0a", "gss130_jpg.rf.1b1b1b"],  # gss11 also in train: Roboflow leakage
        "test": ["gss160_jpg.rf.2c2c2c", "gss190_jpg.rf.3d3d3d"],
    }
    for k, (split, stems) in enumerate(files.items()):
        for j, stem in enumerate(stems):
            write_image(root / split / "images" / f"{stem}.jpg", 50, 40, value=10 * k + j)
            lines = "0 0.5 0.5 0.2 0.25\n1 0.1 0.1 0.1 0.1\n" if j % 2 == 0 else ""
            (root / split / "labels").mkdir(parents=True, exist_ok=True)
            (root / split / "labels" / f"{stem}.txt").write_text(lines)
    return root


def test_roboflow_export_groups_copies_of_one_frame(tmp_path: Path):
    root = roboflow_tree(tmp_path / "rf")
    ds = load_source("sard", source=root)
    assert ds.description["layout_kind"] == "roboflow"
    assert ds.description["roboflow_stems_in_several_source_splits"] == 1
    json.dumps(ds.description)
    by_stem = defaultdict(set)
    for r in ds.records():
        by_stem[original_stem(r.image_id)].add(r.split)
    assert all(len(s) == 1 for s in by_stem.values())
    assert {r.group for r in ds.records() if original_stem(r.image_id) in ("gss10", "gss11")} == {"gss10-11"}
    rec = next(r for r in ds.records() if r.image_id == "gss10_jpg.rf.aaa111")
    assert np.allclose(rec.boxes, ((20.0, 15.0, 30.0, 25.0), (2.5, 2.0, 7.5, 6.0)))  # all classes by default
    only0 = load_source("sard", source=root, classes="0")
    rec0 = next(r for r in only0.records() if r.image_id == "gss10_jpg.rf.aaa111")
    assert rec0.boxes == ((20.0, 15.0, 30.0, 25.0),)
    assert only0.description["ignored_boxes_by_class"] == {"1": 5}


def test_original_stem():
    assert original_stem("gss123_jpg.rf.9f8e7d") == "gss123"
    assert original_stem("img_7_png.rf.ABC") == "img_7"
    assert original_stem("gss123") == "gss123"


def test_empty_or_missing_root(tmp_path: Path):
    with pytest.raises(AegisError, match="no labelled images found"):
        load_source("sard", source=tmp_path)
    with pytest.raises(AegisError, match="SARD root not found"):
        load_source("sard", source=tmp_path / "nope")


def test_bad_yolo_line_in_roboflow_export(tmp_path: Path):
    root = roboflow_tree(tmp_path / "rf")
    (root / "test" / "labels" / "gss160_jpg.rf.2c2c2c.txt").write_text("0 0.5 0.5 0.2\n")
    with pytest.raises(AegisError, match=r"gss160_jpg.rf.2c2c2c.txt:1: expected 5 values"):
        load_source("sard", source=root)


def test_same_frame_in_several_folders_shares_a_group(tmp_path: Path):
    root = tmp_path / "mirror"
    for folder in ("train", "test"):
        write_image(root / folder / "gss7.jpg", value=7)
        (root / folder / "gss7.xml").write_text(voc([("human", 1, 1, 9, 9)] if folder == "train" else []))
    write_image(root / "train" / "gss40.jpg", value=40)
    (root / "train" / "gss40.xml").write_text(voc([]))
    ds = load_source("sard", source=root)
    recs = {r.image_id: r for r in ds.records()}
    assert set(recs) == {"train__gss7", "test__gss7", "gss40"}
    assert recs["train__gss7"].boxes == ((1.0, 1.0, 9.0, 9.0),) and recs["test__gss7"].boxes == ()  # own XML
    assert recs["train__gss7"].split == recs["test__gss7"].split
    assert ds.description["layout"]["stems_in_several_folders"] == 1
    report = audit_dataset(ds)
    assert report["duplicates"]["sets"] == 1 and report["leakage"] is False


def test_fractions_leaving_no_train_are_refused(tmp_path: Path):
    root = original_tree(tmp_path / "SARD", [1, 10, 20])
    with pytest.raises(AegisError, match="add up to 1 or more"):
        load_source("sard", source=root, test_fraction=0.6, val_fraction=0.4)


def test_max_group_shorter_than_gap_is_refused(tmp_path: Path):
    root = original_tree(tmp_path / "SARD", [1, 2, 3])
    with pytest.raises(AegisError, match=r"max_group='1': expected an integer >= 2"):
        load_source("sard", source=root, max_group="1")


@pytest.mark.parametrize("gap,max_group", [(1, 1), (1, 3), (2, 2), (2, 5), (3, 4), (3, 7)])
def test_no_near_duplicate_pair_ever_straddles_splits(tmp_path: Path, gap, max_group):
    # Runs of consecutive frames with holes of 1..4 frames between them, so some holes are within `gap`.
    numbers, k = [], 1
    for run in range(8):
        numbers += list(range(k, k + 3 + run % 4))
        k = numbers[-1] + 1 + (run % 4) + 1
    root = original_tree(tmp_path / "SARD", numbers)
    ds = load_source("sard", source=root, gap=gap, max_group=max_group, test_fraction=0.3, val_fraction=0.2)
    assert_no_near_duplicates_straddle(ds, gap=gap)
    assert sum(len(v) for v in ds.splits.values()) + ds.description["purged_at_cuts"] == len(numbers)
