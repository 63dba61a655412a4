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
from tests.golden.scenes import coast_frame

runner = CliRunner()
BUILD = (
    "--dataset",
    "yolo",
    "--severities",
    "1",
    "--workers",
    "1",
    "--suite",
    "aegis-v2",
    "--scale",
    "object",
    "--person-px",
    "30",
)


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def coast_source(root: Path, land: bool = False) -> Path:
    """Two coast images with YOLO person labels; c0 has a sidecar naming a water mask (a pond the pixels do not
    show, so the scene's water can only come from the mask). ``land``: a third image, c2, holds no water."""
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    for i in range(3 if land else 2):
        img, _, boxes = coast_frame(120, 160, person_px=12.0)
        if i == 2:
            img[:] = (70, 100, 45)  # a lawn: no water, only the persons on it
            for x0, y0, x1, y1 in boxes:
                img[int(y0) : int(y1), int(x0) : int(x1)] = (45, 38, 52)
        write_png_atomic(root / "images" / f"c{i}.png", img)
        lines = [
            f"0 {(x0 + x1) / 320:.6f} {(y0 + y1) / 240:.6f} {(x1 - x0) / 160:.6f} {(y1 - y0) / 120:.6f}"
            for x0, y0, x1, y1 in boxes
        ]
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
    r = invoke(
        "build-splits",
        "--source",
        src,
        "--out-dir",
        out,
        "--corruptions",
        "motion_blur",
        *BUILD,
        "--scene-dir",
        src / "scenes",
    )
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
    assert any(f["path"] == "test/clean/c0.png" and f["kind"] == "scene" and "water" in f["detail"] for f in found), (
        found
    )


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
    m["root_hash"] = root_hash(m, m["entries"])  # so it compares them with the split's ground truth
    m["files_hash"] = files_hash(m["root_hash"], m["encoder"], m["entries"], sealed_header(m))
    (split / "manifest.json").write_text(json.dumps(m))
    found = verify_failures(split)
    assert any(f["path"] == "test/clean/c1.png" and f["kind"] == "scene" and "persons" in f["detail"] for f in found), (
        found
    )


# --- the water conditions in a build: on how many images each acted; the GT contract of a flood -------------
@pytest.fixture(scope="module")
def flooded(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("flooded")
    src = coast_source(base / "src", land=True)
    out = base / "split"
    r = invoke(
        "build-splits",
        "--source",
        src,
        "--out-dir",
        out,
        "--corruptions",
        "water_glare,turbidity_cast,inundation",
        "--dataset",
        "yolo",
        "--severities",
        "1,3",
        "--workers",
        "1",
        "--suite",
        "aegis-v2",
        "--scale",
        "object",
        "--person-px",
        "30",
        "--scene-dir",
        src / "scenes",
    )
    assert r.exit_code == 0, r.output
    return out


def test_the_manifest_records_on_how_many_images_each_condition_acted(flooded):
    m = manifest(flooded)
    acted = m["acted"]
    assert set(acted) == {c for c in m["conditions"] if c != "clean"}
    for cond, n in acted.items():
        changed = [
            e["image_id"]
            for e in m["entries"]
            if e.get("condition") == cond and e["pixel_sha256"] != e["source_pixel_sha256"]
        ]
        assert n == len(changed)
    # The lawn has no water: glare and turbidity leave it as it is; a flood reaches every frame.
    lawn = {e["condition"]: e for e in m["entries"] if e.get("image_id") == "c2" and e["kind"] == "image"}
    for cond in ("water_glare_s1", "water_glare_s3", "turbidity_cast_s3"):
        assert lawn[cond]["pixel_sha256"] == lawn[cond]["source_pixel_sha256"]
        assert acted[cond] <= 2
    assert acted["inundation_s1"] == 3
    assert verify_failures(flooded) == []


def test_ground_truth_is_unchanged_and_submerged_fractions_are_recorded_per_box(flooded):
    """The contract: a flood keeps every GT box (one annotation file for all conditions); each file of a flood
    condition records, per box in annotation order, the share of the person under water."""
    m = manifest(flooded)
    gt = json.loads((flooded / "annotations" / "test.json").read_text())
    per_image = {}
    for a in gt["annotations"]:
        per_image.setdefault(a["image_id"], []).append(a["bbox"])
    stems = {im["id"]: im["stem"] for im in gt["images"]}
    for image_id, boxes in per_image.items():
        stem = stems[image_id]
        scene = next(e["scene"] for e in m["entries"] if e.get("condition") == "clean" and e["image_id"] == stem)
        assert np.allclose([[x0, y0, x1 - x0, y1 - y0] for x0, y0, x1, y1 in scene["persons"]], boxes, atol=1e-6)
        f1 = next(e for e in m["entries"] if e.get("condition") == "inundation_s1" and e["image_id"] == stem)
        f3 = next(e for e in m["entries"] if e.get("condition") == "inundation_s3" and e["image_id"] == stem)
        assert len(f1["submerged_fraction"]) == len(f3["submerged_fraction"]) == len(boxes)
        assert all(0.0 <= a <= b <= 1.0 for a, b in zip(f1["submerged_fraction"], f3["submerged_fraction"]))
    c1 = next(e for e in m["entries"] if e.get("condition") == "inundation_s3" and e["image_id"] == "c1")
    assert max(c1["submerged_fraction"]) > 0.3  # the person at the shore stands in the water
    others = [e for e in m["entries"] if e["kind"] == "image" and not e["condition"].startswith("inundation")]
    assert not any("submerged_fraction" in e for e in others)


def _reseal(split: Path, edit) -> None:
    from aegis_data.split.manifest import files_hash, root_hash, sealed_header

    m = manifest(split)
    edit(m)
    m["root_hash"] = root_hash(m, m["entries"])
    m["files_hash"] = files_hash(m["root_hash"], m["encoder"], m["entries"], sealed_header(m))
    (split / "manifest.json").write_text(json.dumps(m))


@pytest.fixture
def flooded_copy(flooded, tmp_path) -> Path:
    dst = tmp_path / "flooded"
    shutil.copytree(flooded, dst, symlinks=True)
    return dst


def test_an_edited_submerged_fraction_is_an_annotations_finding(flooded_copy):
    def edit(m):
        e = next(e for e in m["entries"] if e.get("condition") == "inundation_s3" and e["image_id"] == "c1")
        e["submerged_fraction"] = [0.0 for _ in e["submerged_fraction"]]  # "nobody is in the water"

    _reseal(flooded_copy, edit)
    found = verify_failures(flooded_copy)
    assert any(f["path"] == "test/inundation_s3/c1.png" and f["kind"] == "annotations" for f in found), found


def test_edited_acted_counts_are_a_manifest_finding(flooded_copy):
    def edit(m):
        m["acted"]["water_glare_s1"] = 3  # "it acted on every image", the lawn included

    _reseal(flooded_copy, edit)
    found = verify_failures(flooded_copy)
    assert any(f["kind"] == "manifest" and "acted" in f["detail"] for f in found), found


# --- the score shows both: acted images next to the cell, recall by submerged share -------------------------
def _predictions(split: Path, folder: Path, miss_submerged_over: float | None) -> None:
    """Perfect predictions for every condition, except that in flood conditions the persons submerged beyond
    ``miss_submerged_over`` are missed."""
    m = manifest(split)
    gt = json.loads((split / "annotations" / "test.json").read_text())
    ids = {im["stem"]: im["id"] for im in gt["images"]}
    per_image: dict[int, list] = {}
    for a in gt["annotations"]:
        per_image.setdefault(a["image_id"], []).append(a["bbox"])
    folder.mkdir()
    for cond in m["conditions"]:
        dets = []
        for stem, coco_id in ids.items():
            fractions = next(
                (
                    e.get("submerged_fraction")
                    for e in m["entries"]
                    if e.get("condition") == cond and e["image_id"] == stem
                ),
                None,
            )
            for k, box in enumerate(per_image.get(coco_id, [])):
                if miss_submerged_over is not None and fractions and fractions[k] > miss_submerged_over:
                    continue
                dets.append({"image_id": coco_id, "category_id": 1, "bbox": box, "score": 0.9})
        (folder / f"{cond}.json").write_text(json.dumps(dets))


def test_the_score_shows_acted_images_and_recall_by_submerged_share(flooded, tmp_path):
    from aegis_eval.protocols.score_doc import validate_result
    from tests.eval.protocols.scoring_memory import score_paths

    _predictions(flooded, tmp_path / "preds", miss_submerged_over=0.25)
    result = score_paths(tmp_path / "preds", flooded, threshold=0.5, bootstrap=10, seed=0)
    validate_result(result)
    m = manifest(flooded)
    conds = result["conditions"]
    assert "acted_images" not in conds["clean"]
    for cond, n in m["acted"].items():
        assert conds[cond]["acted_images"] == n and conds[cond]["n_images"] == 3
    assert conds["water_glare_s1"]["acted_images"] < 3  # the lawn has no water: glare did nothing there
    sub = conds["inundation_s3"]["submerged"]
    assert sub["labels"] == ["dry", "up to 1/4", "1/4 to 1/2", "over 1/2"]
    assert sum(sub["n_gt"]) == conds["inundation_s3"]["n_gt"]
    assert sub["recall_clean"] == [1.0 if n else None for n in sub["n_gt"]]
    deep = [r for r, n in zip(sub["recall"][2:], sub["n_gt"][2:]) if n]
    assert deep and all(r == 0.0 for r in deep)  # the persons more than a quarter under were missed
    assert "submerged" not in conds["water_glare_s1"]
    bad = json.loads(json.dumps(result))
    bad["conditions"]["water_glare_s1"]["acted_images"] = 7
    with pytest.raises(Exception, match="acted_images"):
        validate_result(bad)


def test_the_report_shows_acted_images_beside_the_cell_and_the_submerged_contract(flooded, tmp_path):
    from aegis_eval.protocols.scoring import write_score_json
    from aegis_eval.report.build import build_report
    from tests.eval.protocols.scoring_memory import score_paths

    _predictions(flooded, tmp_path / "preds", miss_submerged_over=0.25)
    result = score_paths(tmp_path / "preds", flooded, threshold=0.5, bootstrap=10, seed=0, label="m")
    write_score_json(result, tmp_path / "m.json")
    files = build_report([json.loads((tmp_path / "m.json").read_text())], tmp_path / "report", formats="md,latex")
    md = files.markdown.read_text()
    acted = result["conditions"]["water_glare_s1"]["acted_images"]
    assert f"1 (acted {acted}/3)" in md
    assert "recall of persons by the share under water" in md and "Ground-truth contract of a flood" in md
    assert "over 1/2" in md
    tex = (tmp_path / "report" / "tables").glob("*submerged*.tex")
    assert list(tex)


# --- aegis realism: where the glint falls -------------------------------------------------------------------
def test_realism_reports_glint_on_water_and_land_and_the_sparkle_size(flooded, tmp_path):
    from aegis_data.engine.realism import glint_statistics
    from aegis_data.split.measure import realism_report

    real = tmp_path / "real"
    real.mkdir()
    img, truth, _ = coast_frame(120, 160, person_px=12.0)
    shot = img.copy()
    shot[30:33, 20:23] = 255  # two sparkles on the sea, one "glare" blob on the grass
    shot[60:62, 30:32] = 255
    shot[10:14, 140:144] = 255
    write_png_atomic(real / "sea.png", shot)
    report = realism_report(real, flooded, "water_glare_s3")
    g = report.glint
    assert g is not None and set(g) == {"real", "rendered", "clean"}
    assert g["real"].sparkles == 3 and g["real"].glint_px == 9 + 4 + 16
    assert g["real"].on_water == pytest.approx(13 / 29) and g["real"].sparkle_px == 9.0
    assert g["rendered"].glint_px > 0 and g["rendered"].on_water == 1.0  # the rendering glints on water only
    assert g["clean"].glint_px == 0
    doc = report.to_dict()["glint"]
    assert doc["rendered"]["glint_on_water"] == 1.0 and doc["real"]["sparkle_px"] == 9.0
    assert realism_report(real, flooded, "inundation_s1").glint is None
    # One image: a clean reference counts only the pixels the rendering saturated.
    water = np.zeros(shot.shape[:2], bool)
    water[:, :80] = True
    assert glint_statistics(shot, water, clean=shot).glint_px == 0


def test_the_realism_command_prints_the_glint_table(flooded, tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    write_png_atomic(real / "sea.png", coast_frame(120, 160, person_px=12.0)[0])
    r = invoke("realism", real, "--condition", "water_glare_s3", "--split-dir", flooded)
    assert r.exit_code == 0, r.output
    assert "sun glint" in r.stdout and "sparkle size" in r.stdout


def test_aegis_corrupt_says_when_glare_finds_no_water(tmp_path):
    """On a frame of land, glare does nothing and says so; on a frame of sea it glints."""
    lawn = np.zeros((120, 160, 3), np.uint8)
    lawn[:] = (70, 100, 45)
    write_png_atomic(tmp_path / "lawn.png", lawn)
    r = invoke(
        "corrupt",
        tmp_path / "lawn.png",
        "-c",
        "water_glare",
        "-s",
        "3",
        "-o",
        tmp_path / "out.png",
        "--person-px",
        "30",
    )
    assert r.exit_code == 0, r.output
    assert "left the image unchanged" in r.stderr and "holds no water" in r.stderr
    assert np.array_equal(read_rgb(tmp_path / "out.png"), lawn)
    sea = coast_frame(240, 320)[0]
    write_png_atomic(tmp_path / "sea.png", sea)
    (tmp_path / "sea.scene.json").write_text(json.dumps({"sun_elevation_deg": 55.0, "sun_azimuth_deg": 175.0}))
    r = invoke(
        "corrupt",
        tmp_path / "sea.png",
        "-c",
        "water_glare",
        "-s",
        "2",
        "-o",
        tmp_path / "sea_out.png",
        "--person-px",
        "30",
    )
    assert r.exit_code == 0 and "unchanged" not in r.stderr
    assert not np.array_equal(read_rgb(tmp_path / "sea_out.png"), sea)
    (tmp_path / "sea.scene.json").write_text(json.dumps({"sun_elevation_deg": -2.0}))
    r = invoke(
        "corrupt",
        tmp_path / "sea.png",
        "-c",
        "water_glare",
        "-s",
        "2",
        "-o",
        tmp_path / "dusk.png",
        "--person-px",
        "30",
    )
    assert r.exit_code == 0 and "below the horizon" in r.stderr


def test_verify_keeps_only_the_last_clean_images_and_scenes(flooded, monkeypatch):
    """verify re-derives every scene from its clean image and kept them all (a 12 MP image with its water mask is
    ~50 MB: memory grew with the split); it keeps the last two."""
    from aegis_data.split import verify as VF

    seen = []
    real = VF._ImageCheck.scene_findings

    def spy(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        seen.append((len(self.clean_cache), len(self.derived)))
        return out

    monkeypatch.setattr(VF._ImageCheck, "scene_findings", spy)
    assert verify_failures(flooded) == []
    assert seen and all(c <= VF.RECENT_IMAGES and d <= VF.RECENT_IMAGES for c, d in seen), seen


@pytest.mark.parametrize("bad", [1.5, -0.1, "deep", True, [0.2]])
def test_a_resealed_submerged_fraction_that_is_no_share_is_one_line_not_a_traceback(flooded_copy, tmp_path, bad):
    """A manifest that hashes (resealed by hand) with a submerged fraction that is no share in [0, 1]: the score
    refuses it in one line; it took 1.5 into no bin (StopIteration) and 'deep' into float() (ValueError)."""
    from aegis_data.errors import AegisError
    from tests.eval.protocols.scoring_memory import score_paths

    def edit(m):
        e = next(e for e in m["entries"] if e.get("condition") == "inundation_s3" and e["image_id"] == "c1")
        e["submerged_fraction"] = [bad] + e["submerged_fraction"][1:]

    _reseal(flooded_copy, edit)
    _predictions(flooded_copy, tmp_path / "preds", miss_submerged_over=None)
    with pytest.raises(AegisError, match=r"submerged_fraction"):
        score_paths(tmp_path / "preds", flooded_copy, threshold=0.5, bootstrap=10, seed=0)
    r = invoke("score", tmp_path / "preds", "--split-dir", flooded_copy, "--threshold", "0.5", "--bootstrap", "10")
    assert r.exit_code != 0 and "Traceback" not in r.output and "submerged_fraction" in r.output, r.output


@pytest.mark.parametrize("bad", [-1, 4, 2.5, "2"])
def test_a_resealed_acted_count_that_is_no_count_of_test_images_is_one_line(flooded_copy, tmp_path, bad):
    """acted -1 or 4 (of 3 test images) went into the score as acted_images, a document its own validator refuses;
    2.5 and "2" were dropped without a word. The score refuses them in one line."""
    from aegis_data.errors import AegisError
    from tests.eval.protocols.scoring_memory import score_paths

    def edit(m):
        m["acted"]["water_glare_s1"] = bad

    _reseal(flooded_copy, edit)
    _predictions(flooded_copy, tmp_path / "preds", miss_submerged_over=None)
    with pytest.raises(AegisError, match=r"\[manifest_invalid\].*acted"):
        score_paths(tmp_path / "preds", flooded_copy, threshold=0.5, bootstrap=10, seed=0)
