"""Generic adapters (COCO, YOLO, VOC, Hugging Face) and the load_source / read_rgb entry points."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from aegis_data.errors import AegisError
from aegis_data.sources import DATASETS, adapter_options, load_source, parse_option_pairs, read_rgb
from aegis_data.sources.audit import audit_dataset


def write_image(path: Path, width: int = 40, height: int = 30, value: int = 100, ext_ok: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    img = np.full((height, width, 3), value, np.uint8)
    img[1, 2] = (value + 50) % 256
    assert cv2.imwrite(str(path), img)
    return path


# --- entry points ------------------------------------------------------------------------------------------
def test_registry_and_entry_point_errors(tmp_path: Path):
    assert DATASETS == ("synthetic", "heridal", "sard", "coco", "yolo", "voc", "hf")
    assert "val_fraction" in adapter_options("heridal")
    with pytest.raises(AegisError, match="unknown dataset 'kitti'; expected one of synthetic"):
        load_source("kitti", source=tmp_path)
    with pytest.raises(AegisError, match="needs a source"):
        load_source("yolo")
    assert parse_option_pairs(["val-fraction=0.2", "classes = 0,1"]) == {"val_fraction": "0.2", "classes": "0,1"}
    with pytest.raises(AegisError, match="not key=value"):
        parse_option_pairs(["novalue"])


# --- COCO --------------------------------------------------------------------------------------------------
@pytest.fixture
def coco(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "images"
    write_image(root / "a.jpg", 40, 30, 10)
    write_image(root / "sub" / "b.png", 64, 48, 20)
    write_image(root / "c.jpg", 40, 30, 30)
    data = {
        "images": [
            {"id": 1, "file_name": "a.jpg", "width": 40, "height": 30},
            {"id": 2, "file_name": "sub/b.png", "width": 64, "height": 48},
            {"id": 3, "file_name": "c.jpg", "width": 99, "height": 30},
        ],
        "annotations": [
            {"id": 10, "image_id": 1, "category_id": 1, "bbox": [1, 2, 10, 20], "iscrowd": 0},
            {"id": 11, "image_id": 1, "category_id": 2, "bbox": [1, 2, 5, 5]},
            {"id": 12, "image_id": 2, "category_id": 1, "bbox": [0, 0, 64, 48]},
            {"id": 13, "image_id": 2, "category_id": 1, "bbox": [5, 5, 10, 10], "iscrowd": 1},
        ],
        "categories": [{"id": 1, "name": "person"}, {"id": 2, "name": "car"}],
    }
    ann = tmp_path / "ann.json"
    ann.write_text(json.dumps(data))
    return root, ann


def _rewrite(ann: Path, fn) -> None:
    data = json.loads(ann.read_text())
    fn(data)
    ann.write_text(json.dumps(data))


def test_coco_loads_persons_only(coco):
    root, ann = coco
    ds = load_source("coco", source=root, annotations=str(ann))
    recs = {r.image_id: r for r in ds.splits["test"]}
    assert set(recs) == {"a", "sub__b", "c"}
    assert recs["a"].boxes == ((1.0, 2.0, 11.0, 22.0),)
    assert recs["sub__b"].boxes == ((0.0, 0.0, 64.0, 48.0),)
    assert recs["c"].boxes == ()
    d = ds.description
    json.dumps(d)
    assert d["crowd_annotations_left_out"] == 1 and d["ignored_non_person_annotations"] == 1
    assert d["json_size_disagrees_with_image"] == 1
    assert read_rgb(recs["sub__b"]).shape == (48, 64, 3)
    cars = load_source("coco", source=root, annotations=str(ann), categories="car")
    assert {r.image_id: r.boxes for r in cars.records()}["a"] == ((1.0, 2.0, 6.0, 7.0),)
    carved = load_source("coco", source=root, annotations=str(ann), split="train", val_fraction="0.34")
    assert {s: len(v) for s, v in carved.splits.items()} == {"train": 2, "val": 1}


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda d: d["images"][0].update(file_name="../escape.jpg"), "contains '..'"),
        (lambda d: d["images"][0].update(file_name="/etc/passwd"), "absolute path"),
        (lambda d: d["images"][0].update(file_name="missing.jpg"), "not found under"),
        (lambda d: d["annotations"][0].update(bbox=[1, 2, -3, 4]), "negative width"),
        (
            lambda d: d["annotations"][0].update(bbox=[30, 2, 20, 4]),
            r"box \[30, 2, 50, 6\] lies outside the 40x30 frame",
        ),
        (lambda d: d["annotations"][0].update(bbox=[1, 2, 0, 4]), "zero-area"),
        (lambda d: d["annotations"][0].update(image_id=77), "not in 'images'"),
        (lambda d: d.update(categories=[{"id": 1, "name": "pedestrian_group"}]), "no person category"),
        (lambda d: d["images"].append(dict(d["images"][0])), "occurs twice"),
    ],
)
def test_coco_rejections(coco, mutate, message):
    root, ann = coco
    _rewrite(ann, mutate)
    with pytest.raises(AegisError, match=message):
        load_source("coco", source=root, annotations=str(ann))


def test_coco_missing_inputs(coco, tmp_path: Path):
    root, ann = coco
    with pytest.raises(AegisError, match="needs the option annotations"):
        load_source("coco", source=root)
    with pytest.raises(AegisError, match="annotation file not found"):
        load_source("coco", source=root, annotations=str(tmp_path / "nope.json"))
    with pytest.raises(AegisError, match="option split='dev'"):
        load_source("coco", source=root, annotations=str(ann), split="dev")
    ann.write_text("{not json")
    with pytest.raises(AegisError, match="not valid JSON"):
        load_source("coco", source=root, annotations=str(ann))


# --- YOLO --------------------------------------------------------------------------------------------------
@pytest.fixture
def yolo(tmp_path: Path) -> Path:
    root = tmp_path / "yolo"
    write_image(root / "images" / "f1.jpg", 100, 50, 10)
    write_image(root / "images" / "f2.jpg", 100, 50, 20)
    write_image(root / "images" / "f3.jpg", 100, 50, 30)  # no label file: negative
    (root / "labels").mkdir(parents=True)
    (root / "labels" / "f1.txt").write_text("0 0.5 0.5 0.2 0.4\n\n3 0.25 0.25 0.1 0.1\n")
    (root / "labels" / "f2.txt").write_text("")
    (root / "labels" / "orphan.txt").write_text("0 0.5 0.5 0.1 0.1\n")
    return root


def test_yolo_classes_and_negatives(yolo: Path):
    ds = load_source("yolo", source=yolo)
    recs = {r.image_id: r for r in ds.splits["test"]}
    assert np.allclose(recs["f1"].boxes, [(40, 15, 60, 35), (20, 10, 30, 15)])
    assert recs["f2"].boxes == () and recs["f3"].boxes == ()
    assert ds.description["layout"]["images_without_label_file_negative"] == 1
    assert ds.description["layout"]["label_files_without_image_skipped"] == 1
    assert ds.description["rules"]["classes"] == "every class id is a person"
    json.dumps(ds.description)
    only3 = load_source("yolo", source=yolo, classes="3")
    assert np.allclose({r.image_id: r for r in only3.records()}["f1"].boxes, [(20, 10, 30, 15)])
    assert only3.description["ignored_boxes_by_class"] == {"0": 1}
    explicit = load_source("yolo", source=yolo.parent, images=str(yolo / "images"), labels=str(yolo / "labels"))
    assert len(explicit.records()) == 3


def test_yolo_images_and_labels_without_source(yolo: Path, tmp_path: Path):
    ds = load_source("yolo", images=str(yolo / "images"), labels=str(yolo / "labels"))
    assert len(ds.records()) == 3
    assert ds.description["root"] == "yolo"
    assert (ds.description["layout"]["images"], ds.description["layout"]["labels"]) == ("images", "labels")
    assert str(tmp_path) not in json.dumps(ds.description)
    # Folders in different places: the description names both, relative to their common parent.
    elsewhere = tmp_path / "ann" / "person_labels"
    elsewhere.parent.mkdir()
    (yolo / "labels").rename(elsewhere)
    ds2 = load_source("yolo", images=str(yolo / "images"), labels=str(elsewhere))
    assert (ds2.description["layout"]["images"], ds2.description["layout"]["labels"]) == (
        "yolo/images",
        "ann/person_labels",
    )
    with pytest.raises(AegisError, match=r"needs a source .*both `images` and `labels`"):
        load_source("yolo", images=str(yolo / "images"))


def test_cli_build_splits_yolo_folders_without_source(yolo: Path, tmp_path: Path):
    from typer.testing import CliRunner

    from aegis_cli.main import app

    out = tmp_path / "yolo-c"
    r = CliRunner().invoke(
        app,
        [
            "build-splits",
            "--dataset",
            "yolo",
            "--images",
            str(yolo / "images"),
            "--labels",
            str(yolo / "labels"),
            "--out-dir",
            str(out),
            "--corruptions",
            "low_light",
            "--severities",
            "1",
            "--workers",
            "1",
        ],
    )
    assert r.exit_code == 0, r.output
    source = json.loads((out / "manifest.json").read_text())["source"]
    assert source["layout"]["images"] == "images" and source["layout"]["labels"] == "labels"


@pytest.mark.parametrize(
    "line,message",
    [
        ("0 0.5 0.5 0.2", "expected 5 values"),
        ("person 0.5 0.5 0.2 0.2", "expected numbers"),
        ("0 0.95 0.5 0.2 0.2", "outside the 100x50 frame"),
        ("0 0.5 0.5 -0.2 0.2", "negative size"),
        ("0 0.5 0.5 0 0.2", "zero-area"),
    ],
)
def test_yolo_bad_lines(yolo: Path, line, message):
    (yolo / "labels" / "f2.txt").write_text(line + "\n")
    with pytest.raises(AegisError, match=message) as exc:
        load_source("yolo", source=yolo)
    assert "f2.txt:1" in str(exc.value)


def test_yolo_missing_dirs(tmp_path: Path):
    with pytest.raises(AegisError, match="YOLO images directory not found"):
        load_source("yolo", source=tmp_path, images=str(tmp_path / "nope"))
    with pytest.raises(AegisError, match="no images found"):
        load_source("yolo", source=tmp_path)


# --- VOC ---------------------------------------------------------------------------------------------------
def test_voc_layout_and_classes(tmp_path: Path):
    root = tmp_path / "VOC"
    write_image(root / "JPEGImages" / "x1.jpg", 60, 40)
    write_image(root / "JPEGImages" / "x2.jpg", 60, 40)
    write_image(root / "JPEGImages" / "x3.jpg", 60, 40)
    (root / "Annotations").mkdir()
    (root / "Annotations" / "x1.xml").write_text(
        "<annotation><object><name>person</name><bndbox><xmax>30</xmax><xmin>10</xmin><ymax>35</ymax>"
        "<ymin>5</ymin></bndbox></object><object><name>rider</name><bndbox><xmin>1</xmin><ymin>1</ymin>"
        "<xmax>4</xmax><ymax>4</ymax></bndbox></object></annotation>"
    )
    (root / "Annotations" / "x2.xml").write_text(
        "<annotation><size><width>60</width><height>40</height></size></annotation>"
    )
    ds = load_source("voc", source=root)
    recs = {r.image_id: r for r in ds.records()}
    assert set(recs) == {"x1", "x2"}  # x3 has no XML
    assert recs["x1"].boxes == ((10.0, 5.0, 30.0, 35.0),) and recs["x2"].boxes == ()
    assert ds.description["layout"]["images_without_xml_skipped"] == 1
    json.dumps(ds.description)
    riders = load_source("voc", source=root, classes="person,rider")
    assert len({r.image_id: r for r in riders.records()}["x1"].boxes) == 2
    # A class filter goes through the same XML reader: the label-file checks are still counted.
    assert riders.description["empty_label_files"] == ds.description["empty_label_files"] == 1
    with pytest.raises(AegisError, match="no images with VOC XML"):
        load_source("voc", source=tmp_path / "VOC" / "Annotations")


def test_descriptions_hold_no_absolute_paths(coco, yolo, tmp_path: Path):
    # The description goes into the manifest; it must be the same wherever a user keeps the data.
    root, ann = coco
    voc = tmp_path / "VOC"
    write_image(voc / "JPEGImages" / "x1.jpg", 60, 40)
    (voc / "Annotations").mkdir(parents=True)
    (voc / "Annotations" / "x1.xml").write_text("<annotation></annotation>")
    for ds in (
        load_source("coco", source=root, annotations=ann),
        load_source("yolo", source=yolo),
        load_source("voc", source=voc),
    ):
        text = json.dumps(ds.description)
        assert str(tmp_path) not in text, text
    assert load_source("coco", source=root, annotations=ann).description["annotations"] == "ann.json"
    assert load_source("yolo", source=yolo).description["layout"]["labels"] == "labels"


# --- Hugging Face ------------------------------------------------------------------------------------------
def _hf_dataset(tmp_path: Path, n: int = 4):
    import datasets

    paths = [str(write_image(tmp_path / "src" / f"img{k}.png", 48, 32, 10 * k)) for k in range(n)]
    features = datasets.Features(
        {
            "image": datasets.Image(),
            "objects": {
                "bbox": datasets.Sequence(datasets.Sequence(datasets.Value("float32"), length=4)),
                "category": datasets.Sequence(datasets.ClassLabel(names=["person", "car"])),
            },
        }
    )
    objects = [{"bbox": [[1, 2, 10, 12], [3, 3, 4, 4]], "category": [0, 1]}] + [{"bbox": [], "category": []}] * (n - 1)
    return datasets.Dataset.from_dict({"image": paths, "objects": objects}, features=features)


def test_hf_save_to_disk_round_trip(tmp_path: Path):
    import shutil

    import datasets

    ds_hf = _hf_dataset(tmp_path)
    dd = datasets.DatasetDict({"train": ds_hf, "test": ds_hf.select([0, 1])})
    target = tmp_path / "hfds"
    dd.save_to_disk(str(target))
    shutil.rmtree(tmp_path / "src")  # the saved dataset embeds the image bytes
    ds = load_source("hf", source=str(target))
    assert {s: len(v) for s, v in ds.splits.items()} == {"train": 4, "test": 2}
    json.dumps(ds.description)
    assert ds.description["root"] == "hfds"  # a local folder by name only
    rec = next(r for r in ds.splits["train"] if r.boxes)
    assert rec.boxes == ((1.0, 2.0, 11.0, 14.0), (3.0, 3.0, 7.0, 7.0))
    assert rec.image_id == "train-img0"  # file stems repeat across the HF splits: prefixed
    rgb = read_rgb(rec)
    assert rgb.shape == (32, 48, 3) and int(rgb[1, 2, 0]) == 50
    report = audit_dataset(ds)  # the test split repeats two train images: leakage by content
    assert report["leakage"] is True and report["leakage_details"]["duplicates_in_several_splits"] == 2
    persons = load_source("hf", source=str(target), categories="person", split="test")
    assert set(persons.splits) == {"test"}
    assert {r.image_id for r in persons.records()} == {"img0", "img1"}
    assert next(r for r in persons.records() if r.boxes).boxes == ((1.0, 2.0, 11.0, 14.0),)
    assert persons.description["ignored_objects_by_category"] == {"car": 1}


def test_hf_errors(tmp_path: Path):
    with pytest.raises(AegisError, match="HF dataset directory not found"):
        load_source("hf", source=str(tmp_path / "nope"))
    ds_hf = _hf_dataset(tmp_path, n=2)
    ds_hf.save_to_disk(str(tmp_path / "one"))
    with pytest.raises(AegisError, match="no split 'dev'"):
        load_source("hf", source=str(tmp_path / "one"), split="dev")
    with pytest.raises(AegisError, match="no image column 'img'"):
        load_source("hf", source=str(tmp_path / "one"), image_column="img")
    with pytest.raises(AegisError, match="no objects column"):
        load_source("hf", source=str(tmp_path / "one"), objects_column="labels")
    with pytest.raises(AegisError, match="cannot load Hugging Face dataset 'someone/aerial'") as exc:
        load_source("hf", source="someone/aerial")  # a hub id while offline: one clear line
    assert "network" not in str(exc.value).lower()  # refused by offline mode, not by the test's socket guard


def test_hf_local_imagefolder_with_metadata(tmp_path: Path):
    folder = tmp_path / "imgf" / "test"
    lines = []
    for k in range(3):
        write_image(folder / f"frame{k}.png", 48, 32, 40 * k)
        objs = {"bbox": [[2.0, 3.0, 10.0, 8.0]] if k else [], "category": [0] if k else []}
        lines.append(json.dumps({"file_name": f"frame{k}.png", "image_id": f"frame-{k}", "objects": objs}))
    (folder / "metadata.jsonl").write_text("\n".join(lines) + "\n")
    ds = load_source("hf", source=str(tmp_path / "imgf"))
    assert [r.image_id for r in ds.splits["test"]] == ["frame-0", "frame-1", "frame-2"]
    assert ds.splits["test"][1].boxes == ((2.0, 3.0, 12.0, 11.0),)
    assert int(read_rgb(ds.splits["test"][2])[0, 0, 0]) == 80
