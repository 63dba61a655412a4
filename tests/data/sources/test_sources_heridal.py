"""HERIDAL adapter: layout, the real label quirks, the deterministic val carve, and clear failures."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from aegis_data.errors import AegisError
from aegis_data.sources import load_source, read_rgb


def write_image(path: Path, width: int, height: int, value: int = 90) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    img = np.full((height, width, 3), value, np.uint8)
    img[: height // 2, : width // 2] = (value + 60) % 256
    assert cv2.imwrite(str(path), img)
    return path


def voc(objects, size=None, size_first=True, order=("xmin", "ymin", "xmax", "ymax")) -> str:
    """A VOC XML string; objects are (name, xmin, ymin, xmax, ymax); children written in ``order``."""
    size_xml = f"<size><width>{size[0]}</width><height>{size[1]}</height><depth>3</depth></size>" if size else ""
    objs = ""
    for name, x0, y0, x1, y1 in objects:
        vals = {"xmin": x0, "ymin": y0, "xmax": x1, "ymax": y1}
        bb = "".join(f"<{k}>{vals[k]}</{k}>" for k in order)
        objs += f"<object><name>{name}</name><bndbox>{bb}</bndbox></object>"
    body = size_xml + objs if size_first else objs + size_xml
    return f"<annotation><filename>x.jpg</filename>{body}</annotation>"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def heridal(tmp_path: Path) -> Path:
    root = tmp_path / "HERIDAL"
    # train: labels in trainImages/labels/
    for i in range(10):
        write_image(root / "trainImages" / f"train_{i:03d}.jpg", 64, 48)
        write(root / "trainImages" / "labels" / f"train_{i:03d}.xml", voc([]))  # empty = negative
    write(
        root / "trainImages" / "labels" / "train_000.xml",
        voc([("human", 10, 5, 20, 25)], size=(64, 48), order=("xmin", "xmax", "ymin", "ymax")),
    )
    write(
        root / "trainImages" / "labels" / "train_001.xml",
        voc([("Person", 1, 2, 30, 40), ("dog", 3, 3, 9, 9)], size=None),
    )  # no <size>, non-person class
    write(
        root / "trainImages" / "labels" / "train_002.xml",
        voc([("PEOPLE", 5, 5, 64.5, 48.4)], size=(64, 48), size_first=False),
    )  # object before size, overshoot
    write(root / "trainImages" / "labels" / "train_003.xml", "")  # zero-byte label file = negative
    write(root / "trainImages" / "labels" / "orphan_label.xml", voc([("human", 1, 1, 5, 5)]))  # no image
    write_image(root / "trainImages" / "no_label.jpg", 64, 48)  # image without XML
    # test: XML beside the images, one frame of the 4000x2250 kind
    write_image(root / "testImages" / "test_a.jpg", 64, 48)
    write(root / "testImages" / "test_a.xml", voc([("pedestrian", 2, 3, 12, 30)], size=(4000, 3000)))  # wrong size
    write_image(root / "testImages" / "test_wide.jpg", 4000, 2250)
    write(root / "testImages" / "test_wide.xml", voc([("human", 3900, 2200, 3950, 2249)]))
    return root


def test_layout_quirks_and_counts(heridal: Path):
    ds = load_source("heridal", source=heridal)
    assert set(ds.splits) == {"train", "val", "test"}
    assert [r.image_id for r in ds.splits["test"]] == ["test_a", "test_wide"]
    allr = {r.image_id: r for r in ds.records()}
    assert len(allr) == 12  # 10 train (one carved to val) + 2 test; no_label and the orphan XML skipped
    assert allr["train_000"].boxes == ((10.0, 5.0, 20.0, 25.0),)  # xmin, xmax, ymin, ymax order in the file
    assert allr["train_001"].boxes == ((1.0, 2.0, 30.0, 40.0),)  # the dog is not a person
    assert allr["train_002"].boxes == ((5.0, 5.0, 64.0, 48.0),)  # overshoot within 1 px is clipped
    assert allr["train_003"].boxes == () and allr["train_009"].boxes == ()
    assert (allr["test_wide"].width, allr["test_wide"].height) == (4000, 2250)
    assert (allr["test_a"].width, allr["test_a"].height) == (64, 48)  # header wins over the XML's <size>
    layout = ds.description["layout"]
    assert layout["trainImages"]["images_without_xml_skipped"] == 1
    assert layout["trainImages"]["xml_without_image_skipped"] == 1
    assert layout["trainImages"]["ignored_objects_by_class"] == {"dog": 1}
    assert layout["trainImages"]["xml_without_size"] >= 1
    assert layout["testImages"]["xml_size_disagrees_with_image"] == 1
    json.dumps(ds.description)  # goes into the manifest
    assert layout["trainImages"]["empty_label_files"] == 7  # 003 (zero bytes) and 004..009


def test_val_carve_is_the_sha256_rule(heridal: Path):
    ds = load_source("heridal", source=heridal)
    train_ids = [f"train_{i:03d}" for i in range(10)]
    first = min(train_ids, key=lambda s: hashlib.sha256(f"heridal-val|{s}".encode()).hexdigest())
    assert [r.image_id for r in ds.splits["val"]] == [first]
    assert len(ds.splits["train"]) == 9
    ds3 = load_source("heridal", source=heridal, val_fraction="0.3")
    assert len(ds3.splits["val"]) == 3 and first in {r.image_id for r in ds3.splits["val"]}
    ds0 = load_source("heridal", source=heridal, val_fraction=0)
    assert "val" not in ds0.splits


def test_large_frame_size_comes_from_the_header(heridal: Path, monkeypatch):
    import aegis_data.files.imageio as imageio

    def no_decoding(*a, **k):
        raise AssertionError("the adapter decoded an image")

    monkeypatch.setattr(imageio.cv2, "imdecode", no_decoding)
    ds = load_source("heridal", source=heridal)
    assert ds.splits["test"][1].width == 4000


def test_read_rgb_checks_the_record_size(heridal: Path):
    rec = load_source("heridal", source=heridal).splits["test"][0]
    assert read_rgb(rec).shape == (48, 64, 3)


def test_labels_in_root_labels_split_dir(tmp_path: Path):
    root = tmp_path / "H"
    write_image(root / "trainImages" / "a.jpg", 32, 32)
    write_image(root / "testImages" / "b.jpg", 32, 32)
    write(root / "labels" / "trainImages" / "a.xml", voc([("human", 1, 1, 8, 8)]))
    write(root / "labels" / "testImages" / "b.xml", voc([]))
    ds = load_source("heridal", source=root, val_fraction=0)
    assert ds.splits["train"][0].boxes == ((1.0, 1.0, 8.0, 8.0),)
    assert ds.splits["test"][0].boxes == ()


@pytest.mark.parametrize(
    "box,message",
    [
        ((30, 5, 20, 25), "inverted"),
        ((10, 5, 10, 25), "zero-area"),
        ((-3, 5, 20, 25), "outside the 64x48 frame"),
        ((10, 5, 20, 50), "outside the 64x48 frame"),
    ],
)
def test_bad_boxes_name_the_file_and_box(heridal: Path, box, message):
    xml = write(heridal / "testImages" / "test_a.xml", voc([("human", *box)]))
    with pytest.raises(AegisError, match=message) as exc:
        load_source("heridal", source=heridal)
    assert str(xml) in str(exc.value) and str(box[0]) in str(exc.value)


def test_malformed_xml(heridal: Path):
    write(heridal / "testImages" / "test_a.xml", "<annotation><object>")
    with pytest.raises(AegisError, match="not valid XML"):
        load_source("heridal", source=heridal)
    write(
        heridal / "testImages" / "test_a.xml",
        "<annotation><object><name>human</name><bndbox><xmin>a</xmin></bndbox></object></annotation>",
    )
    with pytest.raises(AegisError, match="expected a number"):
        load_source("heridal", source=heridal)


def test_missing_layout_and_source(tmp_path: Path):
    (tmp_path / "trainImages").mkdir()
    with pytest.raises(AegisError, match="missing testImages/"):
        load_source("heridal", source=tmp_path)
    with pytest.raises(AegisError, match="HERIDAL root not found"):
        load_source("heridal", source=tmp_path / "nope")
    with pytest.raises(AegisError, match="needs a source"):
        load_source("heridal")
    (tmp_path / "testImages").mkdir()
    with pytest.raises(AegisError, match="no labelled images"):
        load_source("heridal", source=tmp_path)


def test_duplicate_stem_across_splits_is_refused(heridal: Path):
    write_image(heridal / "testImages" / "train_005.jpg", 64, 48)
    write(heridal / "testImages" / "train_005.xml", voc([]))
    with pytest.raises(AegisError, match="occurs twice"):
        load_source("heridal", source=heridal)


def test_unknown_option(heridal: Path):
    with pytest.raises(AegisError, match="did you mean 'val_fraction'"):
        load_source("heridal", source=heridal, val_fracton=0.2)
