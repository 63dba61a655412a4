"""Adversarial repros against the split room (aegis_data/split): a resumed build re-checks its source, verify
covers every file a detector reads, the manifest seals its identity and confines its paths, ``--against`` compares
every field. Numbers in the section titles follow the issue that listed them; shared inputs: tests/adversarial.py.
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

from tests.conftest import assert_one_line_error
from tests.adversarial import YOLO_BUILD, _rehash, _reseal, build_yolo, invoke, yolo_source
from tests.adversarial import yolo_split  # noqa: F401 (fixtures)


# --- 1. resume re-checks the source ------------------------------------------------------------------------
def test_resume_rerenders_an_image_whose_source_pixels_changed(tmp_path, yolo_split):
    src, out, first = yolo_split
    p = src / "images" / "f1.png"
    img = cv2.imread(str(p))
    img[:, :, 0] = 0  # blue channel (OpenCV is BGR)
    cv2.imwrite(str(p), img)
    r = invoke("build-splits", "--source", src, "--out", out, *YOLO_BUILD)
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
        build_splits(load_source("yolo", source=a), out, corruptions=["low_light"], severities=[1], workers=1,
                     audit=no_leak, progress=stop_after_one)
    assert not (out / "manifest.json").exists()
    r = invoke("build-splits", "--source", b, "--out", out, *YOLO_BUILD)
    assert_one_line_error(r, "refusing to resume", str(a.resolve()), str(b.resolve()))
    shutil.rmtree(out)
    finished = build_yolo(a, out)
    # A finished build re-run from the other folder is refused too; without the journal every image is
    # checked against the new source, which gives a fresh build's result.
    assert_one_line_error(invoke("build-splits", "--source", b, "--out", out, *YOLO_BUILD), "refusing to resume")
    shutil.rmtree(out / ".aegis-build")
    again = build_yolo(b, out)
    assert again["root_hash"] == build_yolo(b, tmp_path / "fresh")["root_hash"] != finished["root_hash"]


def test_resume_with_unchanged_source_still_skips_every_file(yolo_split):
    src, out, first = yolo_split
    r = invoke("build-splits", "--source", src, "--out", out, *YOLO_BUILD)
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


@pytest.mark.parametrize("field,value", [("dataset", "heridal"), ("config_hash", "000000000000"), ("seed", 1),
                                          ("suite", "other"), ("conditions", ["clean"]), ("splits", {"test": 9})])
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
    r = invoke("build-splits", "--source", src, "--out", tmp_path / "out", *YOLO_BUILD)
    assert_one_line_error(r, "no space left", "manifest.json")
    monkeypatch.undo()
    assert_one_line_error(invoke("verify", tmp_path / "out"), "no manifest")


def test_a_folder_named_tmp_in_a_finished_build_keeps_the_manifest(yolo_split):
    src, out, first = yolo_split
    (out / ".scratch.tmp").mkdir()
    (out / "test" / "clean" / ".x.tmp").mkdir()
    r = invoke("build-splits", "--source", src, "--out", out, *YOLO_BUILD)
    assert r.exit_code == 0, r.output
    assert json.loads((out / "manifest.json").read_text())["root_hash"] == first["root_hash"]


def test_a_failing_rebuild_does_not_delete_a_valid_manifest(yolo_split, monkeypatch):
    import aegis_data.split.build as splits_mod

    src, out, first = yolo_split

    def broken(record, max_pixels):
        raise splits_mod.AegisError("cannot decode image (simulated)")

    monkeypatch.setattr(splits_mod, "_default_read", broken)
    assert_one_line_error(invoke("build-splits", "--source", src, "--out", out, *YOLO_BUILD), "simulated")
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
@pytest.mark.parametrize("field,value", [("condition", "low_light_s1"), ("coco_id", 9), ("width", 7),
                                          ("image_id", "f1"), ("source_pixel_sha256", "0" * 64)])
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
    assert any(f["kind"] == "manifest" and field in f["detail"]
               for f in json.loads((tmp_path / "v.json").read_text())["findings"])


def test_a_reference_with_other_conditions_is_a_finding(tmp_path, yolo_split):
    src, out, m = yolo_split
    m["conditions"] = ["clean"]
    ref = tmp_path / "ref.json"
    ref.write_text(json.dumps(_rehash(m)))
    _verify_fails(out, "conditions", against=ref)


@pytest.mark.parametrize("field,value", [("image_id", "../../../outside/evil"), ("split", "../x"),
                                          ("condition", "a/b")])
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
@pytest.mark.parametrize("edit", ["no_sha256", "no_pixel_sha256", "no_condition", "no_split", "seed_abc",
                                  "seed_list", "seed_missing", "gt_list"])
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
