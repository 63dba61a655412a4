"""Suite versions end to end (docs/CORRUPTIONS.md, "The corruption suites"): --suite on every command that corrupts
or lists, aegis-v2 as the default of new builds with object scale, scenes recorded in the manifest and re-derived by
verify, sidecars, the suite in score provenance and the refusal to compare scores of two suites."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.engine.config import installed_suites, load_config
from aegis_data.split.manifest import files_hash, root_hash, sealed_header
from tests.conftest import assert_one_line_error
from tests.golden.frames import golden_frame
from tests.golden.scenes import letterboxed_frame

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def _png(path: Path, rgb: np.ndarray) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(path), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    return path


def _yolo_source(root: Path, frames: list[np.ndarray]) -> Path:
    for i, rgb in enumerate(frames):
        _png(root / "images" / f"f{i}.png", rgb)
        (root / "labels").mkdir(parents=True, exist_ok=True)
        (root / "labels" / f"f{i}.txt").write_text("0 0.5 0.5 0.1 0.2\n0 0.3 0.7 0.08 0.16\n")
    return root


def _reseal(out: Path, m: dict) -> None:
    m["root_hash"] = root_hash(m, m["entries"])
    m["files_hash"] = files_hash(m["root_hash"], m["encoder"], m["entries"], sealed_header(m))
    (out / "manifest.json").write_text(json.dumps(m))


BUILD = ("--dataset", "yolo", "--corruptions", "low_light,motion_blur", "--severities", "1,3", "--workers", "1")


@pytest.fixture(scope="module")
def v2_split(tmp_path_factory):
    root = tmp_path_factory.mktemp("suites")
    src = _yolo_source(root / "src", [golden_frame(120, 160), letterboxed_frame(120, 160, 12)])
    (src / "images" / "f1.scene.json").write_text(json.dumps({"speed_mps": 14.0, "exposure_ms": 0.5}))
    out = root / "v2"
    r = invoke("build-splits", "--source", src, "--out-dir", out, *BUILD)
    assert r.exit_code == 0, r.output
    return src, out


# --- the default suite and --suite --------------------------------------------------------------------------
def test_new_builds_are_aegis_v2_at_object_scale_with_a_scene_per_image(v2_split):
    _, out = v2_split
    m = json.loads((out / "manifest.json").read_text())
    v2 = load_config("aegis-v2")
    assert (m["suite"], m["config_hash"], m["scale"]["mode"]) == ("aegis-v2", v2.config_hash, "object")
    clean = {e["image_id"]: e for e in m["entries"] if e.get("kind") == "image" and e["condition"] == "clean"}
    scenes = {k: e["scene"] for k, e in clean.items() if e["split"] == "test"}
    assert scenes["f0"]["valid"] == [0, 0, 160, 120] and scenes["f0"]["given"] == {}
    assert scenes["f1"]["valid"] == [0, 12, 160, 108]  # the letterbox bars found, recorded
    assert scenes["f1"]["given"] == {"exposure_ms": 0.5, "speed_mps": 14.0}  # the sidecar joins the identity
    assert (out / "corruptions.yaml").read_bytes() == Path(v2.path).read_bytes()
    # The bars stay as they were in every corrupted file.
    clean_f1 = cv2.imread(str(out / "test" / "clean" / "f1.png"))
    for cond in ("low_light_s3", "motion_blur_s3"):
        img = cv2.imread(str(out / "test" / cond / "f1.png"))
        assert np.array_equal(img[:12], clean_f1[:12]) and np.array_equal(img[108:], clean_f1[108:])


def test_aegis_v1_builds_on_request_and_refuses_sidecar_options(tmp_path, v2_split):
    src, _ = v2_split
    out = tmp_path / "v1"
    r = invoke("build-splits", "--source", src, "--out-dir", out, "--suite", "aegis-v1", *BUILD)
    assert r.exit_code == 0, r.output
    m = json.loads((out / "manifest.json").read_text())
    assert m["suite"] == "aegis-v1" and "scale" not in m
    assert all("scene" not in e for e in m["entries"])
    r = invoke(
        "build-splits", "--source", src, "--out-dir", tmp_path / "x", "--suite", "aegis-v1", "--scene-dir", src, *BUILD
    )
    assert_one_line_error(r, "does not read")
    r = invoke("build-splits", "--source", src, "--out-dir", tmp_path / "y", "--scale", "frame", *BUILD)
    assert_one_line_error(r, "physical units")
    r = invoke("build-splits", "--source", src, "--out-dir", tmp_path / "z", "--suite", "aegis-v9", *BUILD)
    assert_one_line_error(r, "unknown suite")


def test_list_corrupt_grid_and_calibrate_take_the_suite(tmp_path):
    r = invoke("list", "--format", "json")
    assert r.exit_code == 0 and json.loads(r.output)["suite"] == "aegis-v2"
    doc = json.loads(invoke("list", "--suite", "aegis-v1", "--format", "json").output)
    assert doc["suite"] == "aegis-v1" and {c["model"] for c in doc["corruptions"]} == set(
        doc["families"]["storm"]
        + doc["families"]["flood"]
        + doc["families"]["wildfire"]
        + doc["families"]["earthquake"]
    )
    img = _png(tmp_path / "in" / "frame.png", golden_frame(120, 160))
    assert_one_line_error(invoke("corrupt", img, "-c", "low_light", "-s", "2", "-o", tmp_path / "a.png"), "person unit")
    for suite, extra in (("aegis-v2", ("--person-px", "30")), ("aegis-v1", ())):
        r = invoke(
            "corrupt", img, "-c", "low_light", "-s", "2", "-o", tmp_path / f"{suite}.png", "--suite", suite, *extra
        )
        assert r.exit_code == 0, r.output
    a, b = (cv2.imread(str(tmp_path / f"{s}.png")) for s in ("aegis-v2", "aegis-v1"))
    assert not np.array_equal(a, b)
    r = invoke("grid", img, "-o", tmp_path / "grid.png", "--width", "480", "--suite", "aegis-v2", "--person-px", "30")
    assert r.exit_code == 0, r.output
    r = invoke("calibrate", tmp_path / "in", "--suite", "aegis-v1", "-c", "low_light")
    assert r.exit_code == 0, r.output
    assert_one_line_error(invoke("calibrate", tmp_path / "nowhere"), "path not found")
    assert_one_line_error(invoke("list", "--scale", "tile"), "one of frame, object")


def test_corrupt_reads_the_images_sidecar(tmp_path):
    img = _png(tmp_path / "frame.png", golden_frame(120, 160))
    base = invoke("corrupt", img, "-c", "motion_blur", "-s", "3", "-o", tmp_path / "a.png", "--person-px", "30")
    (tmp_path / "frame.scene.json").write_text(json.dumps({"speed_mps": 15.0, "exposure_ms": 30.0}))
    slow = invoke("corrupt", img, "-c", "motion_blur", "-s", "3", "-o", tmp_path / "b.png", "--person-px", "30")
    assert base.exit_code == 0 and slow.exit_code == 0, slow.output
    assert base.output.split()[-1] != slow.output.split()[-1]  # another clean capture, another added smear
    (tmp_path / "bad.json").write_text(json.dumps({"speed_mps": "fast"}))
    assert_one_line_error(
        invoke(
            "corrupt",
            img,
            "-c",
            "motion_blur",
            "-s",
            "3",
            "-o",
            tmp_path / "c.png",
            "--person-px",
            "30",
            "--scene",
            tmp_path / "bad.json",
        ),
        "speed_mps",
    )


# --- verify re-derives every scene -------------------------------------------------------------------------
def test_verify_re_derives_scenes_and_names_a_resealed_scene_edit(v2_split, tmp_path):
    _, built = v2_split
    out = tmp_path / "copy"
    import shutil

    shutil.copytree(built, out, symlinks=True)
    assert invoke("verify", out).exit_code == 0
    m = json.loads((out / "manifest.json").read_text())
    entry = next(e for e in m["entries"] if e.get("scene") and e["image_id"] == "f1")
    entry["scene"]["valid"] = [0, 0, 160, 120]  # pretend the bars were scene
    _reseal(out, m)
    r = invoke("verify", out)
    assert r.exit_code == 1 and "scene" in r.output and "valid" in r.output
    entry["scene"]["valid"] = [0, 12, 160, 108]
    entry["scene"]["given"] = {"speed_mps": 2.0, "exposure_ms": 0.5}  # another flight log, resealed
    _reseal(out, m)
    r = invoke("verify", out)
    assert r.exit_code == 1 and "scene" in r.output


def test_a_changed_sidecar_re_renders_on_resume(v2_split, tmp_path):
    src, _ = v2_split
    import shutil

    src2 = tmp_path / "src"
    shutil.copytree(src, src2)
    out = tmp_path / "out"
    assert invoke("build-splits", "--source", src2, "--out-dir", out, *BUILD).exit_code == 0
    before = json.loads((out / "manifest.json").read_text())["root_hash"]
    (src2 / "images" / "f1.scene.json").write_text(json.dumps({"speed_mps": 3.0, "exposure_ms": 0.5}))
    r = invoke("build-splits", "--source", src2, "--out-dir", out, *BUILD)
    assert r.exit_code == 0, r.output
    m = json.loads((out / "manifest.json").read_text())
    assert m["root_hash"] != before
    assert invoke("verify", out).exit_code == 0


# --- scores know their suite --------------------------------------------------------------------------------
def _score_doc(suite: str | None, label: str) -> dict:
    cond = {
        "map50": 0.5,
        "recall": 0.5,
        "precision": 0.5,
        "f1": 0.5,
        "tp": 1,
        "fp": 1,
        "fn": 1,
        "n_gt": 2,
        "n_images": 1,
    }
    prov = {"config_hash": load_config(suite or "aegis-v1").config_hash}
    if suite is not None:
        prov["suite"] = suite
    return {
        "schema": "aegis-score/1",
        "label": label,
        "dataset": "d",
        "conditions": {"clean": dict(cond), "low_light_s1": dict(cond)},
        "provenance": prov,
    }


def test_rank_refuses_scores_of_two_suites_unless_asked(tmp_path):
    from aegis_eval.protocols.provenance import score_suite

    assert score_suite(_score_doc(None, "old")) == "aegis-v1"  # written before suites were recorded
    files = []
    for suite, label in (("aegis-v1", "a"), ("aegis-v2", "b")):
        p = tmp_path / f"{label}.json"
        p.write_text(json.dumps(_score_doc(suite, label)))
        files.append(p)
    assert_one_line_error(invoke("rank", *files, "--bootstrap", "10"), "mixed_suites")
    r = invoke("rank", *files, "--bootstrap", "10", "--allow-mixed-suites")
    assert r.exit_code == 0, r.output


def test_a_score_of_an_aegis_v2_split_names_its_suite(v2_split, tmp_path):
    _, out = v2_split
    gt = json.loads((out / "annotations" / "test.json").read_text())
    preds = [{"image_id": im["id"], "category_id": 1, "bbox": [10, 10, 20, 20], "score": 0.9} for im in gt["images"]]
    folder = tmp_path / "preds"
    folder.mkdir()
    for cond in ("clean", "low_light_s1"):
        (folder / f"{cond}.json").write_text(json.dumps(preds))
    r = invoke(
        "score", folder, "--split-dir", out, "--threshold", "0.5", "--bootstrap", "10", "--json", tmp_path / "s.json"
    )
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "s.json").read_text())["provenance"]["suite"] == "aegis-v2"


def test_every_shipped_suite_names_the_same_conditions():
    v1, v2 = (load_config(n) for n in ("aegis-v1", "aegis-v2"))
    assert v1.conditions() == v2.conditions() and {s.suite for s in installed_suites()} == {"aegis-v1", "aegis-v2"}


def test_two_versions_of_one_suite_are_not_compared_unless_asked(tmp_path):
    """A suite still growing (aegis-v2 gains its atmosphere and water models) changes its config hash: two scores
    naming one suite with two hashes are two benchmarks."""
    files = []
    for config_hash, label in ((load_config("aegis-v2").config_hash, "a"), ("0123456789ab", "b")):
        doc = _score_doc("aegis-v2", label)
        doc["provenance"]["config_hash"] = config_hash
        p = tmp_path / f"{label}.json"
        p.write_text(json.dumps(doc))
        files.append(p)
    assert_one_line_error(invoke("rank", *files, "--bootstrap", "10"), "two versions of aegis-v2")
    assert invoke("rank", *files, "--bootstrap", "10", "--allow-mixed-suites").exit_code == 0
