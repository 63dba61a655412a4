"""Adversarial repros: each case an adversarial user tried, and the behaviour the toolkit now promises.

Small inputs, in-process CLI calls (``--workers 1``) unless a case needs real processes. Numbers in the
section titles follow the issue that listed them.
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
from typer.testing import CliRunner

from cli.main import app
from conftest import assert_one_line_error

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def write_png(path: Path, width: int = 48, height: int = 32, seed: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    img = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    assert cv2.imwrite(str(path), img)
    return path


def yolo_source(root: Path, n: int = 3, seed: int = 0) -> Path:
    for i in range(n):
        write_png(root / "images" / f"f{i}.png", seed=seed + i)
        (root / "labels").mkdir(parents=True, exist_ok=True)
        (root / "labels" / f"f{i}.txt").write_text("0 0.5 0.5 0.25 0.25\n")
    return root


YOLO_BUILD = ("--dataset", "yolo", "--corruptions", "low_light", "--severities", "1", "--workers", "1")


def build_yolo(src: Path, out: Path, *extra: str):
    r = invoke("build-splits", "--source", src, "--out", out, *YOLO_BUILD, *extra)
    assert r.exit_code == 0, r.output
    return json.loads((out / "manifest.json").read_text())


@pytest.fixture
def yolo_split(tmp_path):
    src = yolo_source(tmp_path / "src")
    out = tmp_path / "out"
    return src, out, build_yolo(src, out)


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
    from aegis_data.splits import build_splits
    from test_splits_doubles import no_leak

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


# --- 5./6. the manifest: identity under the root hash, entry paths confined ----------------------------
def _rehash(m: dict) -> dict:
    from aegis_data.manifest import files_hash, root_hash

    m["root_hash"] = root_hash(m, m["entries"])
    m["files_hash"] = files_hash(m["root_hash"], m["encoder"], m["entries"])
    return m


@pytest.mark.parametrize("field,value", [("dataset", "heridal"), ("config_hash", "000000000000"), ("seed", 1),
                                          ("suite", "other"), ("conditions", ["clean"]), ("splits", {"test": 9})])
def test_identity_fields_cannot_be_edited(yolo_split, field, value):
    src, out, m = yolo_split
    m[field] = value
    (out / "manifest.json").write_text(json.dumps(m))
    assert_one_line_error(invoke("verify", out), "internally inconsistent")


@pytest.mark.parametrize("bad", ["../../../../etc/hostname", "/etc/hostname", "test/../../x.png", "elsewhere/a.png"])
def test_manifest_paths_outside_the_split_are_refused_before_reading(tmp_path, yolo_split, bad, monkeypatch):
    import aegis_data.verify as verify_mod

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
    assert_one_line_error(invoke("verify", out), "not canonical JSON")
    (out / "manifest.json").write_text(json.dumps(m).replace('"width": 48', '"width": Infinity', 1))
    assert_one_line_error(invoke("verify", out), "not canonical JSON")


def test_score_refuses_provenance_from_an_edited_manifest(tmp_path, yolo_split):
    src, out, m = yolo_split
    m["dataset"] = "heridal"
    (out / "manifest.json").write_text(json.dumps(m))
    preds = tmp_path / "p.json"
    preds.write_text("[]")
    assert_one_line_error(invoke("score", preds, "--gt", out, "--threshold", "0.5"), "manifest_invalid")
