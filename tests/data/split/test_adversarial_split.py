"""Adversarial repros against the split room (aegis_data/split): a resumed build re-checks its source, verify
covers every file a detector reads, the manifest seals its identity and confines its paths, ``--against`` compares
every field; a ground-truth name stays inside its split and metadata a reader applies is a format finding (round 3).
Numbers in the section titles follow the issue that listed them; shared inputs: tests/adversarial.py.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest

from tests.adversarial import (
    YOLO_BUILD,
    _rehash,
    _reseal,
    build_yolo,
    invoke,
    write_png,
    yolo_source,
    yolo_split,  # noqa: F401 (fixtures)
)
from tests.conftest import assert_one_line_error


# --- 1. resume re-checks the source ------------------------------------------------------------------------
def test_resume_rerenders_an_image_whose_source_pixels_changed(tmp_path, yolo_split):
    src, out, first = yolo_split
    p = src / "images" / "f1.png"
    img = cv2.imread(str(p))
    img[:, :, 0] = 0  # blue channel (OpenCV is BGR)
    cv2.imwrite(str(p), img)
    r = invoke("build-splits", "--source", src, "--out-dir", out, *YOLO_BUILD)
    assert r.exit_code == 0, r.output
    assert "sources changed" in r.stdout
    again = json.loads((out / "manifest.json").read_text())
    fresh = build_yolo(src, tmp_path / "fresh")
    assert again["root_hash"] == fresh["root_hash"] != first["root_hash"]
    assert invoke("verify", out).exit_code == 0


def test_resume_from_another_source_folder_is_refused(tmp_path):
    from aegis_data.sources import load_source
    from aegis_data.split.build import build_splits
    from tests.data.split.test_splits_doubles import no_leak

    a = yolo_source(tmp_path / "a" / "data", seed=0)
    b = yolo_source(tmp_path / "b" / "data", seed=10)  # same folder name, counts and labels; other pixels
    out = tmp_path / "out"

    class Stop(Exception):
        pass

    def stop_after_one(p):
        if p.done == 1:
            raise Stop

    with pytest.raises(Stop):
        build_splits(
            load_source("yolo", source=a),
            out,
            corruptions=["low_light"],
            severities=[1],
            workers=1,
            audit=no_leak,
            progress=stop_after_one,
        )
    assert not (out / "manifest.json").exists()
    r = invoke("build-splits", "--source", b, "--out-dir", out, *YOLO_BUILD)
    assert_one_line_error(r, "refusing to resume", str(a.resolve()), str(b.resolve()))
    shutil.rmtree(out)
    finished = build_yolo(a, out)
    # A finished build re-run from the other folder is refused too; without the journal every image is
    # checked against the new source, which gives a fresh build's result.
    assert_one_line_error(invoke("build-splits", "--source", b, "--out-dir", out, *YOLO_BUILD), "refusing to resume")
    shutil.rmtree(out / ".aegis-build")
    again = build_yolo(b, out)
    assert again["root_hash"] == build_yolo(b, tmp_path / "fresh")["root_hash"] != finished["root_hash"]


def test_resume_with_unchanged_source_still_skips_every_file(yolo_split):
    src, out, first = yolo_split
    r = invoke("build-splits", "--source", src, "--out-dir", out, *YOLO_BUILD)
    assert r.exit_code == 0 and "sources changed" not in r.stdout
    assert "0 / 6 " in r.stdout  # 3 test images x (clean, low_light_s1), all kept
    assert json.loads((out / "manifest.json").read_text())["root_hash"] == first["root_hash"]


# --- 2. verify covers the YOLO view ------------------------------------------------------------------------
def _verify_fails(out: Path, *fragments: str, against: Path | None = None):
    extra = ("--against", against) if against else ()
    r = invoke("verify", out, "--json", out.parent / "v.json", *extra)
    assert r.exit_code == 1, r.output
    text = (out.parent / "v.json").read_text()
    for f in fragments:
        assert f in text, text
    return json.loads(text)


def test_verify_refuses_a_yolo_images_link_to_another_folder(tmp_path, yolo_split):
    src, out, _ = yolo_split
    shutil.copytree(out / "test", tmp_path / "other")
    link = out / "yolo" / "images" / "test"
    link.unlink()
    os.symlink(tmp_path / "other", link)
    _verify_fails(out, '"kind": "link"', "yolo/images/test")
    _verify_fails(out, "yolo/images/test", against=out / "manifest.json")


def test_verify_refuses_replaced_condition_labels(yolo_split):
    src, out, _ = yolo_split
    link = out / "yolo" / "labels" / "test" / "low_light_s1"
    link.unlink()
    shutil.copytree(out / "yolo" / "labels" / "test" / "clean", link)
    assert invoke("verify", out).exit_code == 0  # an identical copy is the no-symlink fallback: fine
    (link / "f0.txt").write_text("0 0.1 0.1 0.05 0.05\n")
    _verify_fails(out, "yolo/labels/test/low_light_s1", "other labels")


def test_verify_refuses_a_deleted_yolo_view(yolo_split):
    src, out, _ = yolo_split
    shutil.rmtree(out / "yolo" / "images")
    _verify_fails(out, "yolo/images/test", "missing")
    _verify_fails(out, "yolo/images/test", against=out / "manifest.json")


def test_verify_reports_links_leaving_the_split_and_hardlinks(tmp_path, yolo_split):
    src, out, _ = yolo_split
    victim = out / "test" / "clean" / "f0.png"
    outside = tmp_path / "f0-elsewhere.png"
    shutil.copyfile(victim, outside)
    victim.unlink()
    os.symlink(outside, victim)  # same bytes, but not part of this copy
    doc = _verify_fails(out, "outside the split")
    assert any(f["path"] == "test/clean/f0.png" and f["kind"] == "link" for f in doc["findings"])
    victim.unlink()
    os.link(outside, victim)  # a hard link is the same bytes: information only
    r = invoke("verify", out, "--json", tmp_path / "h.json")
    assert r.exit_code == 0, r.output
    assert "hard link" in r.stdout
    assert json.loads((tmp_path / "h.json").read_text())["counts"] == {"hardlink": 1}


@pytest.mark.parametrize(
    "field,value",
    [
        ("dataset", "heridal"),
        ("config_hash", "000000000000"),
        ("seed", 1),
        ("suite", "other"),
        ("conditions", ["clean"]),
        ("splits", {"test": 9}),
    ],
)
def test_identity_fields_cannot_be_edited(yolo_split, field, value):
    src, out, m = yolo_split
    m[field] = value
    (out / "manifest.json").write_text(json.dumps(m))
    assert_one_line_error(invoke("verify", out), "internally inconsistent")


@pytest.mark.parametrize("bad", ["../../../../etc/hostname", "/etc/hostname", "test/../../x.png", "elsewhere/a.png"])
def test_manifest_paths_outside_the_split_are_refused_before_reading(tmp_path, yolo_split, bad, monkeypatch):
    import aegis_data.split.verify as verify_mod

    src, out, m = yolo_split
    m["entries"].append({"path": bad, "kind": "yolo", "sha256": "0" * 64})
    _rehash(m)
    ref = tmp_path / "third-party.json"
    ref.write_text(json.dumps(m))
    opened = []
    monkeypatch.setattr(verify_mod, "file_sha256", lambda p: opened.append(p))
    assert_one_line_error(invoke("verify", out, "--against", ref), "inside the split")
    (out / "manifest.json").write_text(json.dumps(m))
    assert_one_line_error(invoke("verify", out), "inside the split")
    assert opened == []


def test_non_finite_numbers_in_a_manifest_are_one_line(yolo_split):
    src, out, m = yolo_split
    text = json.dumps(m).replace('"width": 48', '"width": NaN', 1)
    (out / "manifest.json").write_text(text)
    assert_one_line_error(invoke("verify", out), "NaN")
    (out / "manifest.json").write_text(json.dumps(m).replace('"width": 48', '"width": Infinity', 1))
    assert_one_line_error(invoke("verify", out), "Infinity")


def test_disk_full_while_building_is_one_line_and_nothing_verifies(tmp_path, monkeypatch):
    import aegis_data.files.imageio as imageio

    src = yolo_source(tmp_path / "src")
    real = imageio.os.replace

    def full_on_manifest(a, b):
        if str(b).endswith("manifest.json"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(a, b)

    monkeypatch.setattr(imageio.os, "replace", full_on_manifest)
    r = invoke("build-splits", "--source", src, "--out-dir", tmp_path / "out", *YOLO_BUILD)
    assert_one_line_error(r, "no space left", "manifest.json")
    monkeypatch.undo()
    assert_one_line_error(invoke("verify", tmp_path / "out"), "no manifest")


def test_a_folder_named_tmp_in_a_finished_build_keeps_the_manifest(yolo_split):
    src, out, first = yolo_split
    (out / ".scratch.tmp").mkdir()
    (out / "test" / "clean" / ".x.tmp").mkdir()
    r = invoke("build-splits", "--source", src, "--out-dir", out, *YOLO_BUILD)
    assert r.exit_code == 0, r.output
    assert json.loads((out / "manifest.json").read_text())["root_hash"] == first["root_hash"]


def test_a_failing_rebuild_does_not_delete_a_valid_manifest(yolo_split, monkeypatch):
    import aegis_data.split.build as splits_mod

    src, out, first = yolo_split

    def broken(record, max_pixels):
        raise splits_mod.AegisError("cannot decode image (simulated)")

    monkeypatch.setattr(splits_mod, "_default_read", broken)
    assert_one_line_error(invoke("build-splits", "--source", src, "--out-dir", out, *YOLO_BUILD), "simulated")
    monkeypatch.undo()
    assert invoke("verify", out).exit_code == 0


def test_yolo_yaml_never_trains_on_the_test_list(yolo_split):
    src, out, m = yolo_split
    text = (out / "yolo" / "test_clean.yaml").read_text()
    assert "train: no_train.txt" in text and (out / "yolo" / "no_train.txt").read_text() == ""
    assert "yolo/no_train.txt" in {e["path"] for e in m["entries"]}


# --- 2. bytes-only means a detector's reader sees the same pixels ------------------------------------------
def _png_with_chunk(data: bytes, name: bytes, body: bytes) -> bytes:
    import struct
    import zlib

    chunk = struct.pack(">I", len(body)) + name + body + struct.pack(">I", zlib.crc32(name + body))
    at = 8 + 25  # after the signature and IHDR
    return data[:at] + chunk + data[at:]


def _exif_orientation_6() -> bytes:
    return b"MM\x00*\x00\x00\x00\x08\x00\x01\x01\x12\x00\x03\x00\x00\x00\x01\x00\x06\x00\x00\x00\x00\x00\x00"


@pytest.mark.parametrize("rewrite", ["exif", "16bit", "rgba"])
def test_against_a_reference_a_file_a_detector_reads_differently_is_no_bytes_only(tmp_path, yolo_split, rewrite):
    src, out, _ = yolo_split
    p = out / "test" / "clean" / "f0.png"
    bgr = cv2.imread(str(p), cv2.IMREAD_UNCHANGED)
    if rewrite == "exif":
        p.write_bytes(_png_with_chunk(p.read_bytes(), b"eXIf", _exif_orientation_6()))
        assert cv2.imread(str(p)).shape[:2] == bgr.shape[1::-1]  # what Ultralytics reads: rotated
    elif rewrite == "16bit":
        assert cv2.imwrite(str(p), np.clip(bgr.astype(np.int32) * 257 - 128, 0, 65535).astype(np.uint16))
    else:
        assert cv2.imwrite(str(p), np.dstack([bgr, np.zeros(bgr.shape[:2], np.uint8)]))
    doc = _verify_fails(out, '"kind": "format"', against=out / "manifest.json")
    (f,) = [f for f in doc["findings"] if f["path"] == "test/clean/f0.png"]
    assert f["kind"] == "format" and f["failure"]


def test_a_plain_rewrite_with_other_deflate_settings_stays_bytes_only(tmp_path, yolo_split):
    src, out, _ = yolo_split
    p = out / "test" / "clean" / "f0.png"
    assert cv2.imwrite(str(p), cv2.imread(str(p)), [cv2.IMWRITE_PNG_COMPRESSION, 1])
    r = invoke("verify", out, "--against", out / "manifest.json", "--json", tmp_path / "v.json")
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "v.json").read_text())["counts"] == {"bytes-only": 1}


# --- 5. the per-image GT digest covers every field the scorer reads ---------------------------------------
@pytest.mark.parametrize("field,value", [("iscrowd", 1), ("area", 1.0), ("category_id", 2)])
def test_subset_against_a_reference_catches_edited_gt_fields(tmp_path, yolo_split, field, value):
    src, out, m = yolo_split
    ref = tmp_path / "ref.json"
    shutil.copyfile(out / "manifest.json", ref)
    gt_path = out / "annotations" / "test.json"
    gt = json.loads(gt_path.read_text())
    gt["annotations"][0][field] = value
    gt_path.write_text(json.dumps(gt))
    # Plain verify names the image (no longer "formatting/metadata")
    doc = _verify_fails(out, "annotations changed for 1: f0")
    # The local manifest resealed over the edited file: the reference still catches it, per image.
    import hashlib

    entry = next(e for e in m["entries"] if e["path"] == "annotations/test.json")
    entry["sha256"] = hashlib.sha256(gt_path.read_bytes()).hexdigest()
    _reseal(out, m)
    r = invoke("verify", out, "--against", ref, "--subset", "--json", tmp_path / "s.json")
    assert r.exit_code == 1, r.output
    assert "against the reference: annotations changed for 1: f0" in (tmp_path / "s.json").read_text()
    assert doc["findings"][0]["kind"] == "annotations"


def test_the_gt_digest_of_a_toolkit_box_is_unchanged():
    from aegis_data.split.manifest import annotation_digest, annotation_identity, gt_digest

    boxes = [[1.5, 2.0, 3.0, 4.25], [0.0, 0.0, 1.0, 1.0]]
    plain = [annotation_identity(b, 1, 0, b[2] * b[3]) for b in boxes]
    assert annotation_digest(plain) == gt_digest(boxes)
    assert annotation_digest([annotation_identity(boxes[0], 1, 1, 12.75)]) != gt_digest(boxes[:1])


# --- 6./7. --against compares every identity field and confines every path-like field ---------------------
@pytest.mark.parametrize(
    "field,value",
    [
        ("condition", "low_light_s1"),
        ("coco_id", 9),
        ("width", 7),
        ("image_id", "f1"),
        ("source_pixel_sha256", "0" * 64),
    ],
)
def test_a_reference_relabelling_an_entry_is_a_finding(tmp_path, yolo_split, field, value):
    src, out, m = yolo_split
    e = next(e for e in m["entries"] if e["path"] == "test/clean/f0.png")
    e[field] = value
    ref = tmp_path / "ref.json"
    ref.write_text(json.dumps(_rehash(m)))
    r = invoke("verify", out, "--against", ref, "--json", tmp_path / "v.json")
    if field in ("condition", "image_id"):  # the entry's path no longer names the file its fields describe
        assert_one_line_error(r, "test/clean/f0.png", "in its fields")
        return
    assert r.exit_code == 1, r.output
    assert any(
        f["kind"] == "manifest" and field in f["detail"]
        for f in json.loads((tmp_path / "v.json").read_text())["findings"]
    )


def test_a_reference_with_other_conditions_is_a_finding(tmp_path, yolo_split):
    src, out, m = yolo_split
    m["conditions"] = ["clean"]
    ref = tmp_path / "ref.json"
    ref.write_text(json.dumps(_rehash(m)))
    _verify_fails(out, "conditions", against=ref)


@pytest.mark.parametrize(
    "field,value", [("image_id", "../../../outside/evil"), ("split", "../x"), ("condition", "a/b")]
)
def test_path_like_entry_fields_are_confined(tmp_path, yolo_split, field, value):
    src, out, m = yolo_split
    (tmp_path / "outside").mkdir()
    e = next(e for e in m["entries"] if e["path"] == "test/low_light_s1/f0.png")
    e[field] = value
    ref = tmp_path / "ref.json"
    ref.write_text(json.dumps(_rehash(m)))
    assert_one_line_error(invoke("verify", out, "--against", ref), "not a plain file or folder name")


# --- 9. every top-level field but environment is sealed ----------------------------------------------------
@pytest.mark.parametrize("edit", ["toolkit", "added", "format_kept"])
def test_top_level_fields_are_sealed(yolo_split, edit):
    src, out, m = yolo_split
    if edit == "toolkit":
        m["toolkit"]["version"] = "9.9.9"
    elif edit == "added":
        m["note"] = "trust me"
    else:
        m["environment"]["numpy"] = "0.0"  # the one field outside the seal
    (out / "manifest.json").write_text(json.dumps(m))
    r = invoke("verify", out)
    if edit == "format_kept":
        assert r.exit_code == 0, r.output
    else:
        assert_one_line_error(r, "internally inconsistent", "files_hash")


def test_a_manifest_with_the_earlier_seal_verifies_with_a_note(tmp_path, yolo_split):
    from aegis_data.split.manifest import files_hash

    src, out, m = yolo_split
    m["files_hash"] = files_hash(m["root_hash"], m["encoder"], m["entries"])  # the earlier form
    (out / "manifest.json").write_text(json.dumps(m))
    r = invoke("verify", out, "--json", tmp_path / "v.json")
    assert r.exit_code == 0, r.output
    assert "earlier form" in r.stdout and "re-seal" in r.stdout
    assert json.loads((tmp_path / "v.json").read_text())["counts"] == {"seal": 1}
    assert build_yolo(src, out)["files_hash"] != m["files_hash"]  # a rebuild re-seals
    r = invoke("verify", out)
    assert r.exit_code == 0 and "earlier form" not in r.stdout


# --- 10. incomplete or mistyped manifest fields are one line ------------------------------------------------
@pytest.mark.parametrize(
    "edit",
    ["no_sha256", "no_pixel_sha256", "no_condition", "no_split", "seed_abc", "seed_list", "seed_missing", "gt_list"],
)
def test_incomplete_manifest_entries_are_one_line(yolo_split, edit):
    src, out, m = yolo_split
    image = next(e for e in m["entries"] if e["kind"] == "image")
    gt = next(e for e in m["entries"] if e["kind"] == "annotations")
    if edit.startswith("no_"):
        del image[edit[3:]]
    elif edit == "seed_abc":
        m["seed"] = "abc"
    elif edit == "seed_list":
        m["seed"] = [1]
    elif edit == "seed_missing":
        del m["seed"]
    else:
        gt["gt"] = [1, 2]
    _reseal(out, m)
    assert_one_line_error(invoke("verify", out), "manifest")


# --- 11. a manifest.json that is a folder ------------------------------------------------------------------
def test_a_manifest_json_folder_is_named_once(tmp_path, yolo_split):
    src, out, m = yolo_split
    (out / "manifest.json").unlink()
    (out / "manifest.json").mkdir()
    r = invoke("verify", out)
    assert_one_line_error(r, "a folder, not a file")
    assert "manifest.json/manifest.json" not in r.output


# ==========================================================================================================
# Reliability round 3 (what a received file may make the toolkit do, docs/SECURITY.md): a ground-truth
# name stays in its split, verify's GT identity covers what the scorer reads, orientation metadata is a
# format finding. Section numbers follow that issue.
# ==========================================================================================================
# --- 3. a ground-truth file name or stem stays in its folder --------------------------------------------------
@pytest.fixture(scope="module")
def built_split(tmp_path_factory) -> Path:
    """A tiny split built by the toolkit (YOLO source, one corrupted condition): copy it before editing."""
    out = tmp_path_factory.mktemp("built") / "split"
    build_yolo(yolo_source(tmp_path_factory.mktemp("src")), out)
    return out


@pytest.fixture
def split_copy(built_split, tmp_path) -> Path:
    import shutil

    dst = tmp_path / "deep" / "er" / "split"
    shutil.copytree(built_split, dst, symlinks=True)
    return dst


def edit_gt(split: Path, edit, name: str = "test") -> dict:
    path = split / "annotations" / f"{name}.json"
    gt = json.loads(path.read_text())
    edit(gt)
    path.write_text(json.dumps(gt))
    return gt


def point_outside(split: Path, field: str) -> Path:
    """Aim the first test image's ``field`` at a PNG planted outside the split; return that PNG."""
    outside = write_png(split.parent.parent / "outside.png", seed=9)  # split/test/clean/../../../../outside.png

    def edit(gt):
        im = gt["images"][0]
        if field == "stem":
            im["stem"] = "../../../../outside"
        else:
            im["file_name"] = "../../../../outside.png"
            im.pop("stem", None)

    edit_gt(split, edit)
    return outside


@pytest.mark.parametrize("field", ["stem", "file_name"])
def test_load_split_images_stay_inside_the_split(split_copy, field):
    from aegis_data.errors import AegisError
    from aegis_data.split.reader import load_split

    point_outside(split_copy, field)
    with pytest.raises(AegisError, match=field):
        list(load_split(split_copy).images("clean"))


def test_baseline_predict_reads_no_frame_outside_the_split(split_copy, tmp_path):
    point_outside(split_copy, "file_name")
    result = invoke(
        "baseline",
        "predict",
        "--split-dir",
        split_copy,
        "--out-dir",
        tmp_path / "p",
        "--model",
        "fasterrcnn",
        "--weights",
        "none",
        "--arch",
        "mobilenet_v3",
        "--imgsz",
        "64",
        "--device",
        "cpu",
        "--conditions",
        "clean",
    )
    assert_one_line_error(result, "file_name", "outside")


def test_gallery_reads_no_frame_outside_the_split(split_copy, tmp_path):
    point_outside(split_copy, "file_name")
    gt = json.loads((split_copy / "annotations" / "test.json").read_text())
    found = [
        {"image_id": a["image_id"], "category_id": a["category_id"], "bbox": a["bbox"], "score": 0.9}
        for a in gt["annotations"]
    ]
    preds = tmp_path / "preds"
    preds.mkdir()
    (preds / "clean.json").write_text(json.dumps(found))
    (preds / "low_light_s1.json").write_text("[]")  # every image loses its person: every image is drawn
    result = invoke("gallery", preds, "--split-dir", split_copy, "--out-dir", tmp_path / "g", "--threshold", "0.5")
    assert_one_line_error(result, "file_name", "outside")


@pytest.mark.parametrize("stem", [[1], {"a": 1}, 7, "", "a/b", ".."])
def test_verify_of_a_gt_stem_that_is_no_name_is_a_finding(split_copy, stem):
    def edit(gt):
        gt["images"][0]["stem"] = stem

    edit_gt(split_copy, edit)
    result = invoke("verify", split_copy)
    assert result.exit_code == 1 and result.exception is None or isinstance(result.exception, SystemExit), (
        result.exception
    )
    assert "Traceback" not in result.output
    assert "annotations/test.json" in result.output and "not a plain file name" in result.output, result.output


# --- 4. verify's GT identity covers every image field the scorer reads ----------------------------------------
def reseal(split: Path, gt_map_edit=None) -> None:
    """Rewrite the local manifest over the edited GT file as an attacker would: new file hash, the GT map edited
    (``gt_map_edit``), both hashes recomputed, so the split verifies against its own manifest."""
    import hashlib

    from aegis_data.split.manifest import files_hash, root_hash, sealed_header

    m = json.loads((split / "manifest.json").read_text())
    entry = next(e for e in m["entries"] if e["path"] == "annotations/test.json")
    entry["sha256"] = hashlib.sha256((split / "annotations" / "test.json").read_bytes()).hexdigest()
    if gt_map_edit is not None:
        gt_map_edit(entry["gt"])
    m["root_hash"] = root_hash(m, m["entries"])
    m["files_hash"] = files_hash(m["root_hash"], m["encoder"], m["entries"], sealed_header(m))
    (split / "manifest.json").write_text(json.dumps(m))


def swap_file_names(gt):
    a, b = gt["images"][0], gt["images"][1]
    a["file_name"], b["file_name"] = b["file_name"], a["file_name"]


def shrink_to_one_pixel(gt):
    gt["images"][0]["width"] = gt["images"][0]["height"] = 1


def drop_image(gt):
    gone = gt["images"].pop()
    gt["annotations"] = [a for a in gt["annotations"] if a["image_id"] != gone["id"]]


def drop_boxes(gt):
    gt["annotations"] = [a for a in gt["annotations"] if a["image_id"] != gt["images"][-1]["id"]]


GT_EDITS = {  # edit, the GT-map edit that goes with it, what the finding names
    "swapped file names": (swap_file_names, None, "file_name"),
    "size set to 1x1": (shrink_to_one_pixel, None, "width"),
    "image deleted, stem dropped": (drop_image, lambda gt_map: gt_map.pop("f2"), "f2"),
    "boxes deleted, stem dropped": (drop_boxes, lambda gt_map: gt_map.pop("f2"), "f2"),
}


@pytest.mark.parametrize("case", list(GT_EDITS))
def test_a_resealed_gt_edit_fails_verify_against_the_reference(split_copy, tmp_path, case):
    import shutil

    edit, gt_map_edit, named = GT_EDITS[case]
    ref = tmp_path / "reference.json"
    shutil.copyfile(split_copy / "manifest.json", ref)
    edit_gt(split_copy, edit)
    reseal(split_copy, gt_map_edit)
    for subset in ([], ["--subset"]):
        report = tmp_path / "v.json"
        r = invoke("verify", split_copy, "--against", ref, *subset, "--json", report)
        assert r.exit_code == 1, (subset, r.output)
        found = [f for f in json.loads(report.read_text())["findings"] if f["failure"]]
        assert any(f["path"] == "annotations/test.json" and named in f["detail"] for f in found), (subset, found)
        assert not any("is identical" in f["detail"] for f in found), found


def test_plain_verify_names_the_image_fields_that_changed(split_copy, tmp_path):
    edit_gt(split_copy, swap_file_names)
    report = tmp_path / "v.json"
    assert invoke("verify", split_copy, "--json", report).exit_code == 1
    (finding,) = json.loads(report.read_text())["findings"]
    assert "file_name 'f1.png'" in finding["detail"] and "is identical" not in finding["detail"], finding


def test_formatting_only_gt_changes_still_say_so(split_copy, tmp_path):
    path = split_copy / "annotations" / "test.json"
    path.write_text(json.dumps(json.loads(path.read_text()), indent=4))
    report = tmp_path / "v.json"
    assert invoke("verify", split_copy, "--json", report).exit_code == 1
    (finding,) = json.loads(report.read_text())["findings"]
    assert "is identical" in finding["detail"] and "file name" in finding["detail"], finding


# --- 5. (from 11) orientation carried in PNG text chunks is a format finding -----------------------------------
def _chunk(name: bytes, body: bytes) -> bytes:
    import zlib

    return len(body).to_bytes(4, "big") + name + body + zlib.crc32(name + body).to_bytes(4, "big")


def _exif_rotate_90() -> bytes:
    """A little-endian TIFF header with one IFD entry: Orientation (0x0112) = 6, 'rotate 90 clockwise'."""
    return (
        b"II*\x00"
        + (8).to_bytes(4, "little")
        + (1).to_bytes(2, "little")
        + bytes.fromhex("1201")
        + (3).to_bytes(2, "little")
        + (1).to_bytes(4, "little")
        + (6).to_bytes(2, "little")
        + b"\x00\x00"
        + bytes(4)
    )


def _raw_profile(exif: bytes) -> bytes:
    """ImageMagick's text form of an EXIF block, which Pillow reads as the image's EXIF."""
    return f"\nexif\n{len(exif):8d}\n".encode() + exif.hex().encode() + b"\n"


def _xmp(orientation: bool) -> bytes:
    extra = ' tiff:Orientation="6"' if orientation else ""
    return (
        f'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
        f'<rdf:Description xmlns:tiff="http://ns.adobe.com/tiff/1.0/"{extra}/></rdf:RDF></x:xmpmeta>'
    ).encode()


def _text_chunk(kind: str, keyword: bytes, text: bytes) -> bytes:
    import zlib

    if kind == "tEXt":
        return _chunk(b"tEXt", keyword + b"\x00" + text)
    if kind == "zTXt":
        return _chunk(b"zTXt", keyword + b"\x00\x00" + zlib.compress(text))
    return _chunk(b"iTXt", keyword + b"\x00\x01\x00\x00\x00" + zlib.compress(text))  # compressed, no language


ORIENTING_CHUNKS = {
    "exif profile in tEXt": ("tEXt", b"Raw profile type exif", _raw_profile(_exif_rotate_90())),
    "exif profile in zTXt": ("zTXt", b"Raw profile type exif", _raw_profile(_exif_rotate_90())),
    "xmp orientation in iTXt": ("iTXt", b"XML:com.adobe.xmp", _xmp(True)),
    "xmp orientation in tEXt": ("tEXt", b"XML:com.adobe.xmp", _xmp(True)),
}


def with_chunk(png: Path, chunk: bytes) -> None:
    data = png.read_bytes()
    at = 8 + 12 + int.from_bytes(data[8:12], "big")  # after IHDR
    png.write_bytes(data[:at] + chunk + data[at:])


@pytest.mark.parametrize("case", list(ORIENTING_CHUNKS))
def test_orientation_in_a_png_text_chunk_is_a_format_finding(split_copy, tmp_path, case):
    import shutil

    from PIL import Image, ImageOps

    ref = tmp_path / "reference.json"
    shutil.copyfile(split_copy / "manifest.json", ref)
    png = split_copy / "test" / "clean" / "f0.png"
    with_chunk(png, _text_chunk(*ORIENTING_CHUNKS[case]))
    with Image.open(png) as im:  # what torchvision's Pillow loaders and exif_transpose users see: rotated
        assert ImageOps.exif_transpose(im).size == im.size[::-1]
    report = tmp_path / "v.json"
    r = invoke("verify", split_copy, "--against", ref, "--json", report)
    assert r.exit_code == 1, r.output
    (finding,) = json.loads(report.read_text())["findings"]
    assert (finding["path"], finding["kind"], finding["failure"]) == ("test/clean/f0.png", "format", True)
    assert "orientation" in finding["detail"], finding


def test_text_metadata_without_orientation_stays_bytes_only(split_copy, tmp_path):
    import shutil

    ref = tmp_path / "reference.json"
    shutil.copyfile(split_copy / "manifest.json", ref)
    png = split_copy / "test" / "clean" / "f0.png"
    with_chunk(png, _text_chunk("iTXt", b"XML:com.adobe.xmp", _xmp(False)))
    with_chunk(png, _text_chunk("tEXt", b"Software", b"another encoder"))
    report = tmp_path / "v.json"
    assert invoke("verify", split_copy, "--against", ref, "--json", report).exit_code == 0
    (finding,) = json.loads(report.read_text())["findings"]
    assert (finding["kind"], finding["failure"]) == ("bytes-only", False)
