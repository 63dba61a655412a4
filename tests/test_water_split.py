"""Water in a built aegis-v2 split: the sidecar water mask a scene used is kept in the split (``scenes/``, listed in
the manifest) so verify re-derives the scene from the split alone; the persons a scene knows come from the GT and
are re-derived too (docs/SPLITS.md, docs/CORRUPTIONS.md "The water mask")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.engine.scene import water_mask_digest
from aegis_data.files.imageio import read_rgb, write_png_atomic
from golden.scenes import coast_frame

runner = CliRunner()
BUILD = ("--dataset", "yolo", "--severities", "1", "--workers", "1", "--suite", "aegis-v2", "--scale", "object",
         "--person-px", "30")


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def coast_source(root: Path) -> Path:
    """Two coast images with YOLO person labels; c0 has a sidecar naming a water mask (a pond the pixels do not
    show, so the scene's water can only come from the mask)."""
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    for i in range(2):
        img, _, boxes = coast_frame(120, 160, person_px=12.0)
        write_png_atomic(root / "images" / f"c{i}.png", img)
        lines = [f"0 {(x0 + x1) / 320:.6f} {(y0 + y1) / 240:.6f} {(x1 - x0) / 160:.6f} {(y1 - y0) / 120:.6f}"
                 for x0, y0, x1, y1 in boxes]
        (root / "labels" / f"c{i}.txt").write_text("\n".join(lines) + "\n")
    mask = np.zeros((120, 160, 3), np.uint8)
    mask[20:50, 100:150] = 255
    (root / "scenes").mkdir()  # beside the images it would be read as one more image of the dataset
    write_png_atomic(root / "scenes" / "pond.png", mask)
    (root / "scenes" / "c0.scene.json").write_text(json.dumps({"water_mask": "pond.png"}))
    return root


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("water")
    src = coast_source(base / "src")
    out = base / "split"
    r = invoke("build-splits", "--source", src, "--out-dir", out, "--corruptions", "motion_blur", *BUILD,
               "--scene-dir", src / "scenes")
    assert r.exit_code == 0, r.output
    return out


@pytest.fixture
def split(built, tmp_path) -> Path:
    dst = tmp_path / "split"
    shutil.copytree(built, dst, symlinks=True)
    return dst


def manifest(split: Path) -> dict:
    return json.loads((split / "manifest.json").read_text())


def verify_failures(split: Path) -> list[dict]:
    report = split.parent / "verify.json"
    r = invoke("verify", split, "--json", report)
    assert "Traceback" not in r.output
    found = [f for f in json.loads(report.read_text())["findings"] if f["failure"]]
    assert (r.exit_code == 1) == bool(found), r.output
    return found


def test_the_sidecar_mask_is_kept_in_the_split_and_verify_passes(built):
    m = manifest(built)
    masks = [e for e in m["entries"] if e["kind"] == "water_mask"]
    assert [e["path"] for e in masks] == ["scenes/test/c0.water.png"]
    stored = read_rgb(built / masks[0]["path"]).any(axis=2)
    assert stored[20:50, 100:150].all() and stored.sum() == 30 * 50
    assert masks[0]["mask_sha256"] == water_mask_digest(stored)
    scene = next(e["scene"] for e in m["entries"] if e.get("condition") == "clean" and e["image_id"] == "c0")
    assert scene["water"]["source"] == "sidecar" and scene["water_mask_sha256"] == water_mask_digest(stored)
    other = next(e["scene"] for e in m["entries"] if e.get("condition") == "clean" and e["image_id"] == "c1")
    assert other["water"]["source"] == "estimated" and other["water"]["fraction"] > 0.3
    assert verify_failures(built) == []


def test_the_scene_knows_the_persons_of_the_ground_truth(built):
    m = manifest(built)
    gt = json.loads((built / "annotations" / "test.json").read_text())
    ids = {im["id"]: Path(im["file_name"]).stem for im in gt["images"]}
    for e in m["entries"]:
        if e.get("condition") != "clean":
            continue
        boxes = [a["bbox"] for a in gt["annotations"] if ids[a["image_id"]] == e["image_id"]]
        got = [[x0, y0, x1 - x0, y1 - y0] for x0, y0, x1, y1 in e["scene"]["persons"]]
        assert len(got) == len(boxes) == 2
        assert np.allclose(got, boxes, atol=1e-6)


def test_a_changed_stored_mask_is_a_scene_finding(split):
    path = split / "scenes" / "test" / "c0.water.png"
    mask = read_rgb(path)
    mask[0:5, 0:5] = 255
    write_png_atomic(path, mask)
    found = verify_failures(split)
    assert any(f["path"] == "scenes/test/c0.water.png" and f["kind"] == "scene" for f in found), found
    assert any(f["path"] == "test/clean/c0.png" and f["kind"] == "scene" and "water" in f["detail"] for f in found), found


def test_a_missing_stored_mask_is_a_finding_not_a_traceback(split):
    (split / "scenes" / "test" / "c0.water.png").unlink()
    found = verify_failures(split)
    assert any(f["path"] == "scenes/test/c0.water.png" and f["kind"] == "missing" for f in found), found
    assert any(f["path"] == "test/clean/c0.png" and f["kind"] == "scene" for f in found), found


def test_edited_persons_in_a_resealed_manifest_are_a_scene_finding(split):
    from aegis_data.split.manifest import files_hash, root_hash, sealed_header

    m = manifest(split)
    e = next(e for e in m["entries"] if e.get("condition") == "clean" and e["image_id"] == "c1")
    e["scene"]["persons"] = [[1.0, 1.0, 2.0, 2.0]]  # verify takes the persons from the record: still consistent,
    m["root_hash"] = root_hash(m, m["entries"])      # so it compares them with the split's ground truth
    m["files_hash"] = files_hash(m["root_hash"], m["encoder"], m["entries"], sealed_header(m))
    (split / "manifest.json").write_text(json.dumps(m))
    found = verify_failures(split)
    assert any(f["path"] == "test/clean/c1.png" and f["kind"] == "scene" and "persons" in f["detail"]
               for f in found), found
