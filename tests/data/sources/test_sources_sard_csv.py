"""SARD's CSV layout (folders of frames + one labels CSV): copies, degenerate rows, classes, and the same
groups, splits and ground truth as the same frames given in the VOC XML layout."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path

import cv2
import numpy as np
import pytest
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.errors import AegisError
from aegis_data.sources import load_source
from aegis_data.sources._sard_csv import CsvRow, copy_origins, row_problem
from aegis_data.sources.audit import audit_dataset
from tests.data.sources.test_sources_sard import assert_no_near_duplicates_straddle, frame, voc

W, H = 64, 48
HEADER = "filename,width,height,class,xmin,ymin,xmax,ymax\n"
POSTURES = ("Standing", "Walking", "Running", "Sitting", "Lying", "Not Defined", "person", "not defined", "STANDING")
FOLDERS = {
    "train": [1, 2, 3, 4, 5, 6, 9, 10, 30, 31, 32, 33, 34, 35, 60, 61, 62, 90, 120, 150, 151],
    "val": [200, 201, 202, 203, 204, 230, 260, 290, 320],
}
# copy stem -> frame number; several groups have one, so some land in test or val and some in train.
COPIES = {
    "gss2_flip": 2,
    "gss31_rot": 31,
    "gss61a": 61,
    "gss90_bright": 90,
    "gss150_flip": 150,
    "gss201_flip": 201,
    "gss230_hsv": 230,
    "gss290b": 290,
    "gss120_flip": 120,
    "gss9_rot": 9,
}
# Degenerate rows (frame number -> csv row after the filename); these frames keep their valid rows.
DEGENERATE = {
    204: f"{W},{H},person,20,18,20,18",  # zero-size, as in the published val_labels.csv
    5: f"{W},{H},Walking,30,5,10,20",  # negative width
    10: f"{W},{H},person,50,5,80,20",  # corner outside the image
    62: "1920,1080,person,10,10,20,20",  # width/height columns that are not the image's
}


def valid_rows(k: int) -> list[tuple[str, tuple[int, int, int, int]]]:
    """Class and box of each valid row of frame k; frames with k % 3 == 0 have none (negatives)."""
    if k % 3 == 0:
        return []
    rows = [(POSTURES[k % len(POSTURES)], (2 + k % 5, 3, 20 + k % 7, 30))]
    if k % 4 == 1:
        rows.append(("person", (40, 20, 52, 44)))
    return rows


def write_image(path: Path, value: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    img = np.full((H, W, 3), 40 + value, np.uint8)  # value < 200: every file has its own pixels
    img[value % H, value % W] = 255
    assert cv2.imwrite(str(path), img)


def csv_tree(root: Path, copies: bool = True) -> Path:
    value = 0
    for folder, numbers in FOLDERS.items():
        lines = [HEADER]
        for k in numbers:
            write_image(root / folder / f"gss{k}.jpg", value)
            value += 1
            for cls, (a, b, c, d) in valid_rows(k):
                lines.append(f"gss{k}.jpg,{W},{H},{cls},{a},{b},{c},{d}\n")
            if k in DEGENERATE:
                lines.append(f"gss{k}.jpg,{DEGENERATE[k]}\n")
        if copies:
            for stem, k in COPIES.items():
                if k in numbers:
                    write_image(root / folder / f"{stem}.jpg", value)
                    value += 1
                    lines += [f"{stem}.jpg,{W},{H},person,{a},{b},{c},{d}\n" for _, (a, b, c, d) in valid_rows(k)]
        (root / folder / f"{folder}_labels.csv").write_text("".join(lines))
    return root


def voc_tree(root: Path, csv_root: Path) -> Path:
    """The same frames (same files) in the original layout: VOC XML beside each frame, no copies."""
    for folder, numbers in FOLDERS.items():
        for k in numbers:
            (root / folder).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(csv_root / folder / f"gss{k}.jpg", root / folder / f"gss{k}.jpg")
            (root / folder / f"gss{k}.xml").write_text(voc([("person", *box) for _, box in valid_rows(k)]))
    return root


@pytest.fixture()
def sard(tmp_path: Path) -> Path:
    return csv_tree(tmp_path / "Sard")


def frames_view(ds) -> dict:
    return {
        r.image_id: (r.split, r.group, r.boxes)
        for r in ds.records()
        if r.image_id.startswith("gss") and r.image_id[-1].isdigit()
    }


def test_rows_become_boxes_and_frames_without_rows_are_negatives(sard: Path):
    ds = load_source("sard", source=sard)
    recs = {r.image_id: r for r in ds.records()}
    assert ds.description["layout_kind"] == "csv"
    assert recs["gss1"].boxes == ((3.0, 3.0, 21.0, 30.0), (40.0, 20.0, 52.0, 44.0))
    assert recs["gss3"].boxes == () and recs["gss204"].boxes == ()
    assert recs["gss5"].boxes == ((2.0, 3.0, 25.0, 30.0), (40.0, 20.0, 52.0, 44.0))  # negative-width row dropped
    assert (recs["gss1"].width, recs["gss1"].height) == (W, H)
    layout = ds.description["layout"]
    assert layout["csv_files"] == ["train/train_labels.csv", "val/val_labels.csv"]
    no_row = {k for ns in FOLDERS.values() for k in ns if k % 3 == 0 and k not in DEGENERATE}
    negatives = len(no_row) + sum(1 for k in COPIES.values() if k in no_row)  # a copy of a negative has no row
    assert layout["images_without_rows_negative"] == negatives
    assert ds.description["frames"] == sum(len(v) for v in FOLDERS.values())
    by_class = ds.description["boxes_by_class"]
    assert by_class["Not Defined"] >= 1 and by_class["not defined"] >= 1 and by_class["STANDING"] >= 1
    assert not any(k.startswith(("class:", "ignored_class:")) for k in ds.description)
    json.dumps(ds.description)


def test_augmented_copies_share_their_frame_group_and_stay_out_of_test_and_val(sard: Path):
    ds = load_source("sard", source=sard)
    recs = {r.image_id: r for r in ds.records()}
    split_of_frame = {r.image_id: r.split for r in ds.records() if r.image_id in {f"gss{k}" for k in COPIES.values()}}
    kept = [c for c in COPIES if c in recs]
    dropped = [c for c in COPIES if c not in recs]
    assert kept and dropped, "the fixture must put copies in both train and test/val groups"
    for c in kept:
        assert recs[c].split == "train" == split_of_frame[f"gss{COPIES[c]}"]
        assert recs[c].group == recs[f"gss{COPIES[c]}"].group
    for c in dropped:
        assert split_of_frame[f"gss{COPIES[c]}"] in ("test", "val")
    assert ds.description["augmented_copies"] == len(COPIES)
    assert ds.description["augmented_copies_dropped"] == len(dropped)
    assert "gss120_flip (copy of gss120)" in ds.description["augmented_examples"]
    assert_no_near_duplicates_straddle(ds, gap=2)
    assert audit_dataset(ds)["leakage"] is False
    # Copies do not count towards split sizes: the frames split exactly as without them.
    plain = load_source("sard", source=csv_tree(sard.parent / "no-copies", copies=False))
    assert frames_view(plain) == frames_view(ds)
    everywhere = load_source("sard", source=sard, drop_augmented="true")
    assert not any(c in {r.image_id for r in everywhere.records()} for c in COPIES)
    assert everywhere.description["augmented_copies_dropped"] == len(COPIES)
    assert frames_view(everywhere) == frames_view(ds)


def test_degenerate_rows_are_dropped_counted_and_warned_once(sard: Path):
    ds = load_source("sard", source=sard)
    d = ds.description
    assert d["degenerate_rows"] == 4
    assert d["degenerate_rows_by_kind"] == {"size_disagrees": 1, "zero_or_negative_size": 2, "outside_image": 1}
    where = [e.split()[0].split(":") for e in d["degenerate_examples"]]
    assert [f for f, _ in where] == ["train/train_labels.csv"] * 3 + ["val/val_labels.csv"]
    assert [int(n) for _, n in where[:3]] == sorted(int(n) for _, n in where[:3])  # in line order
    assert [e.split()[1] for e in d["degenerate_examples"]] == ["gss5.jpg", "gss10.jpg", "gss62.jpg", "gss204.jpg"]
    assert any("gss204.jpg [20, 18, 20, 18] zero_or_negative_size" in e for e in d["degenerate_examples"])
    assert any("(1920x1080 in the CSV, 64x48 decoded)" in e for e in d["degenerate_examples"])
    assert len(ds.warnings) == 1 and "4 degenerate row(s) dropped" in ds.warnings[0]
    assert "\n" not in ds.warnings[0]
    csv = sard / "train" / "train_labels.csv"
    csv.write_text(
        "".join(
            line
            for line in csv.read_text().splitlines(keepends=True)
            if not any(line.startswith(f"gss{k}.jpg,{row}") for k, row in DEGENERATE.items())
        )
    )
    fewer = load_source("sard", source=sard)
    assert fewer.description["degenerate_rows"] == 1 and fewer.description["degenerate_rows_by_kind"] == {
        "zero_or_negative_size": 1
    }  # only val's zero-size row is left


def test_row_problem_rule():
    def row(w, h, box):
        return CsvRow(2, "f.jpg", w, h, "person", box)

    assert row_problem(row(64, 48, (1, 1, 10, 10)), 64, 48) is None
    assert row_problem(row(64, 48, (-0.5, 1, 64.5, 10)), 64, 48) is None  # within the 1 px tolerance
    assert row_problem(row(64, 48, (-2, 1, 10, 10)), 64, 48) == "outside_image"
    assert row_problem(row(64, 48, (64.2, 1, 64.8, 10)), 64, 48) == "outside_image"  # no area inside
    assert row_problem(row(64, 48, (5, 5, 5, 9)), 64, 48) == "zero_or_negative_size"
    assert row_problem(row(64, 48, (5, 9, 8, 2)), 64, 48) == "zero_or_negative_size"
    assert row_problem(row(1920, 1080, (5, 5, 8, 9)), 64, 48) == "size_disagrees"


def test_copy_origins_rule():
    stems = ["gss12", "gss1", "gss12_flip", "gss12a", "gss123x", "gss1_rot", "cam7", "cam7-b", "alpha", "x9_y"]
    assert copy_origins(stems) == {"gss12_flip": "gss12", "gss12a": "gss12", "gss1_rot": "gss1", "cam7-b": "cam7"}
    # gss123x: no frame gss123 (gss12 is followed by a digit); alpha: no frame prefix; x9_y: no frame x9.


def test_same_frames_in_the_voc_layout_give_identical_splits_and_ground_truth(sard: Path, tmp_path: Path):
    csv_ds = load_source("sard", source=sard)
    voc_ds = load_source("sard", source=voc_tree(tmp_path / "SardVoc", sard))
    assert voc_ds.description["layout_kind"] == "original"
    assert frames_view(csv_ds) == frames_view(voc_ds)
    assert csv_ds.description["groups"] == voc_ds.description["groups"]
    assert {s: len(rs) for s, rs in voc_ds.splits.items()}["test"] == len(csv_ds.splits["test"])
    # The same with sequences cut into chunks: purging at the cuts is the same too.
    cut_csv = load_source("sard", source=sard, max_group=3, gap=1)
    cut_voc = load_source("sard", source=tmp_path / "SardVoc", max_group=3, gap=1)
    assert frames_view(cut_csv) == frames_view(cut_voc)
    assert cut_csv.description["purged_at_cuts"] >= cut_voc.description["purged_at_cuts"] > 0
    assert_no_near_duplicates_straddle(cut_csv, gap=1)


def _build(source: Path, out: Path, *extra: str):
    r = CliRunner().invoke(
        app,
        [
            "build-splits",
            "--dataset",
            "sard",
            "--source",
            str(source),
            "--out-dir",
            str(out),
            "--corruptions",
            "low_light",
            "--severities",
            "1",
            "--workers",
            "1",
            *extra,
        ],
    )
    assert r.exit_code == 0, r.output
    return r


def test_build_splits_from_the_csv_download_verifies_and_matches_the_voc_ground_truth(sard: Path, tmp_path: Path):
    built = _build(sard, tmp_path / "csv-c")
    assert "warning:" in built.stderr and "4 degenerate row(s) dropped" in built.stderr
    _build(voc_tree(tmp_path / "SardVoc", sard), tmp_path / "voc-c")
    v = CliRunner().invoke(app, ["verify", str(tmp_path / "csv-c")])
    assert v.exit_code == 0, v.output
    for split in ("test", "val"):
        a = json.loads((tmp_path / "csv-c" / "annotations" / f"{split}.json").read_text())
        b = json.loads((tmp_path / "voc-c" / "annotations" / f"{split}.json").read_text())
        assert a["images"] == b["images"] and a["annotations"] == b["annotations"]
        assert not any("_" in im["stem"] or not im["stem"][-1].isdigit() for im in a["images"])  # no copy
    manifest = json.loads((tmp_path / "csv-c" / "manifest.json").read_text())
    assert manifest["source"]["augmented_copies"] == len(COPIES)


def test_audit_reports_the_csv_layout_facts(sard: Path, tmp_path: Path):
    report = audit_dataset(load_source("sard", source=sard))
    facts = report["source_facts"]
    assert facts["frames"] == sum(len(v) for v in FOLDERS.values())
    assert facts["augmented_copies"] == len(COPIES) and facts["degenerate_rows"] == 4
    assert facts["boxes_by_class"]["person"] > 0
    out = tmp_path / "audit.json"
    r = CliRunner().invoke(app, ["audit", "--dataset", "sard", "--source", str(sard), "--json", str(out)])
    assert r.exit_code == 0, r.output
    assert "source facts" in r.stdout and "augmented copies" in r.stdout and "degenerate rows" in r.stdout
    assert r.stderr.count("warning:") == 1
    assert json.loads(out.read_text())["source_facts"]["augmented_copies"] == len(COPIES)
    # Other layouts' audits carry no such table.
    assert "source_facts" not in audit_dataset(load_source("synthetic", n=4, size="64"), hash_files=False)


def _one_line_error(source: Path, match: str, **options):
    with pytest.raises(AegisError, match=match) as exc:
        load_source("sard", source=source, **options)
    assert "\n" not in str(exc.value)


def test_a_csv_without_a_column_is_one_line_naming_it(sard: Path):
    csv = sard / "val" / "val_labels.csv"
    csv.write_text(csv.read_text().replace("xmax,", "x_max,", 1))
    _one_line_error(sard, r"val_labels.csv has no column 'xmax'")


def test_a_row_naming_a_missing_file_is_one_line_naming_it(sard: Path):
    csv = sard / "train" / "train_labels.csv"
    csv.write_text(csv.read_text() + f"gss7777.jpg,{W},{H},person,1,1,5,5\n")
    _one_line_error(sard, r"train_labels.csv:\d+: file 'gss7777.jpg' not found in .*train")


def test_bad_values_and_two_csvs_in_one_folder_are_one_line(sard: Path):
    csv = sard / "train" / "train_labels.csv"
    text = csv.read_text()
    csv.write_text(text + f"gss1.jpg,{W},{H},person,1,nan,5,5\n")
    _one_line_error(sard, r"train_labels.csv:\d+: ymin is 'nan', expected a number")
    csv.write_text(text + f"gss1.jpg,{W},{H},person,1\n")
    _one_line_error(sard, r"train_labels.csv:\d+: expected 8 values")
    csv.write_text(text)
    (sard / "train" / "extra.csv").write_text(HEADER)
    _one_line_error(sard, r"holds 2 CSV files .*exactly one labels CSV per folder")


def test_other_classes_are_refused_unless_classes_names_them(sard: Path):
    csv = sard / "train" / "train_labels.csv"
    csv.write_text(csv.read_text() + f"gss1.jpg,{W},{H},dog,1,1,5,5\n")
    _one_line_error(sard, r"train_labels.csv:\d+: class 'dog' is not a SARD person class .*classes=")
    ds = load_source("sard", source=sard, classes="person,Standing")
    ignored = ds.description["ignored_boxes_by_class"]
    assert ignored["dog"] == 1 and ignored["Walking"] >= 1
    assert set(ds.description["boxes_by_class"]) == {"person", "STANDING"}  # "Standing" matches case-insensitively


def test_a_groups_file_inside_root_is_not_a_labels_csv(sard: Path):
    groups = sard / "groups.csv"
    stems = [f"gss{k}" for ns in FOLDERS.values() for k in ns]
    groups.write_text("stem,group\n" + "".join(f"{s},{'A' if int(s[3:]) < 100 else s}\n" for s in stems))
    ds = load_source("sard", source=sard, groups="groups.csv")
    assert ds.description["layout_kind"] == "csv" and ds.description["options"]["groups"] == "groups.csv"
    by_group = defaultdict(set)
    for r in ds.records():
        by_group[r.group].add(r.split)
    assert all(len(v) == 1 for v in by_group.values())
    assert {r.group for r in ds.records() if frame(r.image_id) < 100} == {"A"}  # copies included


def test_drop_augmented_is_refused_outside_the_csv_layout(tmp_path: Path):
    root = voc_tree(tmp_path / "SardVoc", csv_tree(tmp_path / "Sard"))
    _one_line_error(root, "drop_augmented applies to SARD's CSV layout only", drop_augmented="true")
    assert load_source("sard", source=root, drop_augmented="false").description["layout_kind"] == "original"
    _one_line_error(root, r"drop_augmented='maybe': expected true or false", drop_augmented="maybe")


def test_an_unmatched_name_without_a_frame_number_still_needs_a_groups_file(sard: Path):
    write_image(sard / "train" / "aerial_view.jpg", 199)
    _one_line_error(sard, r"cannot form SARD sequence groups.*aerial_view")
