"""Adversarial repros against the source readers (aegis_data/sources): COCO, YOLO and VOC field validation is
one line, symlinks leaving the root are skipped, a class filter must match, a label path must be a file.
Numbers in the section titles follow the issue that listed them; shared inputs: tests/adversarial.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.adversarial import YOLO_BUILD, build_yolo, invoke, write_png, yolo_source
from tests.conftest import assert_one_line_error


# --- 10. leniency -------------------------------------------------------------------------------------------
def _coco_source(tmp_path: Path, mutate) -> tuple[Path, Path]:
    root = tmp_path / "coco"
    write_png(root / "a.png")
    doc = {
        "images": [{"id": 1, "file_name": "a.png", "width": 48, "height": 32}],
        "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [4, 4, 10, 10]}],
        "categories": [{"id": 1, "name": "person"}],
    }
    mutate(doc)
    ann = tmp_path / "ann.json"
    ann.write_text(json.dumps(doc) if not isinstance(doc.get("_raw"), str) else doc["_raw"])
    return root, ann


def _set_bbox(value):
    return lambda d: d["annotations"][0].__setitem__("bbox", value)


COCO_CASES = {
    "bbox-null": (_set_bbox(None), "must be a list of 4 numbers"),
    "bbox-bool": (_set_bbox([True, 4, 10, 10]), "is not a number"),
    "bbox-string": (_set_bbox(["10", 4, 10, 10]), "is not a number"),
    "categories-strings": (lambda d: d.__setitem__("categories", ["person"]), "'categories' must be a list of objects"),
    "no-annotations": (lambda d: d.pop("annotations"), "'annotations' lists"),
    "image-id-list": (lambda d: d["images"][0].__setitem__("id", [1]), "integer or string 'id'"),
}


@pytest.mark.parametrize("case", sorted(COCO_CASES))
@pytest.mark.parametrize("cmd", ["build-splits", "audit"])
def test_coco_field_validation_is_one_line(tmp_path, case, cmd):
    mutate, message = COCO_CASES[case]
    root, ann = _coco_source(tmp_path, mutate)
    extra = ("--out-dir", tmp_path / "out", "--workers", "1") if cmd == "build-splits" else ()
    r = invoke(cmd, "--dataset", "coco", "--source", root, "--annotations", ann, *extra)
    assert_one_line_error(r, message)


def test_coco_bbox_number_overflowing_float64_is_one_line(tmp_path):
    root, ann = _coco_source(tmp_path, lambda d: None)
    ann.write_text(ann.read_text().replace('"bbox": [4, 4, 10, 10]', '"bbox": [4, 4, 1' + "0" * 400 + ", 10]"))
    r = invoke("audit", "--dataset", "coco", "--source", root, "--annotations", ann)
    assert_one_line_error(r, "json_number_overflow")


@pytest.mark.parametrize("cls", ["-1", "0.0", "1_0", "+1"])
def test_yolo_class_must_be_a_plain_non_negative_integer(tmp_path, cls):
    src = yolo_source(tmp_path / "src")
    (src / "labels" / "f0.txt").write_text(f"{cls} 0.5 0.5 0.25 0.25\n")
    assert_one_line_error(invoke("audit", "--dataset", "yolo", "--source", src), "is not a class id", "f0.txt:1")


@pytest.mark.parametrize("value", ["1_0", "1e400", "nan", "inf"])
def test_yolo_box_numbers_must_be_plain_finite_decimals(tmp_path, value):
    src = yolo_source(tmp_path / "src")
    (src / "labels" / "f0.txt").write_text(f"0 0.5 0.5 {value} 0.25\n")
    assert_one_line_error(invoke("audit", "--dataset", "yolo", "--source", src), "f0.txt:1")


def _voc_source(tmp_path: Path, width: str = "48", xmin: str = "4") -> Path:
    root = tmp_path / "voc"
    write_png(root / "JPEGImages" / "a.png")
    (root / "Annotations").mkdir(parents=True)
    (root / "Annotations" / "a.xml").write_text(
        f"<annotation><size><width>{width}</width><height>32</height></size><object><name>person</name>"
        f"<bndbox><xmin>{xmin}</xmin><ymin>4</ymin><xmax>20</xmax><ymax>20</ymax></bndbox></object></annotation>"
    )
    return root


def test_voc_size_that_overflows_is_ignored_not_a_traceback(tmp_path):
    root = _voc_source(tmp_path, width="1e400")
    r = invoke("audit", "--dataset", "voc", "--source", root, "--json", tmp_path / "a.json")
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "a.json").read_text())["source"]["xml_without_size"] == 1


@pytest.mark.parametrize("xmin", ["1_0", "1e400", "nan"])
def test_voc_box_numbers_must_be_plain_finite_decimals(tmp_path, xmin):
    root = _voc_source(tmp_path, xmin=xmin)
    assert_one_line_error(invoke("audit", "--dataset", "voc", "--source", root), "<xmin>")


def test_source_symlinks_leaving_the_root_are_skipped_and_counted(tmp_path):
    src = yolo_source(tmp_path / "src")
    write_png(tmp_path / "elsewhere" / "secret.png", seed=99)
    os.symlink(tmp_path / "elsewhere" / "secret.png", src / "images" / "secret.png")
    r = invoke("audit", "--dataset", "yolo", "--source", src, "--json", tmp_path / "a.json")
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "a.json").read_text())
    assert doc["source"]["links_outside_root_skipped"] == 1 and doc["source"]["counts"]["test"]["images"] == 3
    r = invoke("audit", "--dataset", "yolo", "--source", src, "--follow-links", "--json", tmp_path / "b.json")
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "b.json").read_text())["source"]["counts"]["test"]["images"] == 4


# --- 3. a YOLO class filter that matches nothing is refused ------------------------------------------------
@pytest.mark.parametrize(
    "classes,fragment",
    [
        ("person", "not a YOLO class id"),
        ("00", "not a YOLO class id"),
        ("abc", "not a YOLO class id"),
        ("0.0", "not a YOLO class id"),
        ("-1", "not a YOLO class id"),
        ("3", "labels hold class ids: 0"),
        ("0,7", "class id 7 matches no label"),
    ],
)
def test_a_yolo_class_filter_must_name_ids_the_labels_hold(tmp_path, classes, fragment):
    src = yolo_source(tmp_path / "src")
    r = invoke("build-splits", "--source", src, "--out-dir", tmp_path / "out", *YOLO_BUILD, "--classes", classes)
    assert_one_line_error(r, fragment)
    assert not (tmp_path / "out" / "manifest.json").exists()
    m = build_yolo(src, tmp_path / "ok", "--classes", "0")
    assert m["splits"] == {"test": 3}


# --- 11. a label path that is no file is not a negative ----------------------------------------------------
@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_label_path_that_is_a_folder_or_fifo_is_refused(tmp_path, kind):
    src = yolo_source(tmp_path / "src")
    label = src / "labels" / "f1.txt"
    label.unlink()
    label.mkdir() if kind == "folder" else os.mkfifo(label)
    r = invoke("build-splits", "--source", src, "--out-dir", tmp_path / "out", *YOLO_BUILD)
    assert_one_line_error(r, "f1.txt", "not a regular file")
