"""Issue 31, deliverable 2: sequences. ``groups`` for every file adapter (a file, or the numbered-frame rule), the
integer-only frame hash behind the rule, and the audit's near-duplicate frames across splits."""

from __future__ import annotations

import json
import re
from pathlib import Path

import cv2
import numpy as np
import pytest
from typer.testing import CliRunner

from aegis_data.errors import AegisError
from aegis_data.sources import load_source
from aegis_data.sources.audit import audit_dataset
from aegis_data.sources.frame_hash import NEAR_DISTANCE, distance, frame_hash, near_pairs
from aegis_data.split.build import build_splits
from cli.main import app

CLIPS, PER_CLIP = 5, 6
PINNED_HASH = 9470008727210711000


def clip_frames(seed: int, n: int, size: tuple[int, int] = (120, 160)) -> list[np.ndarray]:
    """``n`` consecutive frames of one "clip": a smooth random scene with a little noise per frame."""
    rng = np.random.default_rng(seed)
    base = cv2.resize(rng.integers(0, 256, (12, 16, 3), dtype=np.uint8), size[::-1], interpolation=cv2.INTER_CUBIC)
    return [np.clip(base.astype(int) + rng.integers(-3, 4, base.shape), 0, 255).astype(np.uint8) for _ in range(n)]


def numbered_frames(root: Path, clips: int = CLIPS, per_clip: int = PER_CLIP, prefix: str = "") -> Path:
    """A YOLO source of frames ``1.png .. N.png`` cut from ``clips`` clips (the issue's layout), one person each."""
    (root / "images").mkdir(parents=True, exist_ok=True)
    (root / "labels").mkdir(exist_ok=True)
    n = 1
    for clip in range(clips):
        for k, img in enumerate(clip_frames(clip, per_clip)):
            assert cv2.imwrite(str(root / "images" / f"{prefix}{n}.png"), img)
            (root / "labels" / f"{prefix}{n}.txt").write_text(f"0 {0.3 + 0.01 * k:.3f} 0.5 0.1 0.2\n")
            n += 1
    return root


def clip_of(stem: str, per_clip: int = PER_CLIP) -> int:
    return (int(stem) - 1) // per_clip


# --- the frame hash ---------------------------------------------------------------------------------------------
def test_frame_hash_is_a_fixed_integer_function_of_the_pixels():
    # Pinned: integer arithmetic only, so this value holds on every machine and NumPy version.
    img = np.arange(60 * 80 * 3, dtype=np.int64).reshape(60, 80, 3) * 7919 % 251
    assert frame_hash(img.astype(np.uint8)) == PINNED_HASH


def _hash_by_the_letter(img: np.ndarray) -> int | None:
    """docs/DATA.md's definition with Python integers, cell by cell."""
    h, w = img.shape[:2]
    px = img.astype(int).tolist()
    means = []
    for r in range(8):
        row = []
        for c in range(9):
            y0, y1, x0, x1 = r * h // 8, (r + 1) * h // 8, c * w // 9, (c + 1) * w // 9
            luma = sum(
                299 * px[y][x][0] + 587 * px[y][x][1] + 114 * px[y][x][2] for y in range(y0, y1) for x in range(x0, x1)
            )
            row.append(luma // (1000 * (y1 - y0) * (x1 - x0)))
        means.append(row)
    pairs = [(means[r][c], means[r][c + 1]) for r in range(8) for c in range(8)]
    if sum(abs(a - b) >= 2 for a, b in pairs) < 16:
        return None
    return sum(1 << k for k, (a, b) in enumerate(pairs) if a > b)


def test_data_md_states_the_gray_level_the_hash_computes():
    # Old docs/DATA.md rounded each pixel's gray, (299 R + 587 G + 114 B + 500) // 1000, before the cell mean: a
    # different hash (6 of 200 noisy 40x45 frames) from the code's and _hash_by_the_letter's single floor per cell.
    from tests import REPO_ROOT

    text = " ".join((REPO_ROOT / "docs" / "DATA.md").read_text(encoding="utf-8").split())
    assert "(299 R + 587 G + 114 B) summed over its pixels, // (1000 × its pixel count)" in text
    assert "+ 500) // 1000" not in text


@pytest.mark.parametrize("shape", [(23, 31), (8, 9), (120, 160), (61, 17)])
def test_frame_hash_follows_its_documented_definition(shape):
    img = np.random.default_rng(shape[0]).integers(0, 256, (*shape, 3), dtype=np.uint8)
    assert frame_hash(img) == _hash_by_the_letter(img)
    assert frame_hash(clip_frames(3, 1, shape)[0]) == _hash_by_the_letter(clip_frames(3, 1, shape)[0])


def test_frames_of_one_clip_are_near_and_of_two_clips_far():
    a, b = clip_frames(0, 2)
    c = clip_frames(1, 1)[0]
    ha, hb, hc = frame_hash(a), frame_hash(b), frame_hash(c)
    assert ha is not None and hb is not None and hc is not None
    assert distance(ha, hb) <= NEAR_DISTANCE < distance(ha, hc)


def test_flat_and_tiny_frames_have_no_hash():
    flat = np.full((48, 64, 3), 90, np.uint8)
    flat[3, 5] = 255  # one bright pixel is noise, not structure
    assert frame_hash(flat) is None
    assert frame_hash(np.zeros((7, 8, 3), np.uint8)) is None


def test_near_pairs_compares_every_pair_by_bit_distance():
    assert list(near_pairs([0b1111, 2**63 + 1], [0b0111, 0], max_distance=1)) == [(0, 0, 1)]
    assert list(near_pairs([], [1])) == []


# --- groups=frames and group files --------------------------------------------------------------------------
def test_numbered_frames_rule_groups_each_clip(tmp_path):
    root = numbered_frames(tmp_path / "beach")
    ds = load_source("yolo", source=root, groups="frames")
    groups = {r.image_id: r.group_key for r in ds.records()}
    by_clip: dict[int, set[str]] = {}
    for stem, g in groups.items():
        by_clip.setdefault(clip_of(stem), set()).add(g)
    assert all(len(g) == 1 for g in by_clip.values())  # a clip is one group
    assert len({g for gs in by_clip.values() for g in gs}) == CLIPS  # and clips are not merged
    assert groups["1"] == "1..6"
    assert "numbered frames" in ds.description["rules"]["groups"]


def test_groups_keep_a_clip_in_one_split_when_val_is_carved(tmp_path):
    root = numbered_frames(tmp_path / "beach")
    ds = load_source("yolo", source=root, groups="frames", val_fraction="0.3")
    split_of_clip: dict[int, set[str]] = {}
    for r in ds.records():
        split_of_clip.setdefault(clip_of(r.image_id), set()).add(r.split)
    assert all(len(s) == 1 for s in split_of_clip.values())
    assert {s for ss in split_of_clip.values() for s in ss} == {"test", "val"}


def _voc_tree(root: Path) -> Path:
    (root / "JPEGImages").mkdir(parents=True)
    (root / "Annotations").mkdir()
    for n, img in enumerate(clip_frames(0, 3) + clip_frames(1, 3), start=1):
        cv2.imwrite(str(root / "JPEGImages" / f"{n}.png"), img)
        (root / "Annotations" / f"{n}.xml").write_text(
            "<annotation><object><name>person</name><bndbox><xmin>10</xmin><ymin>10</ymin><xmax>30</xmax>"
            "<ymax>50</ymax></bndbox></object></annotation>"
        )
    return root


def _coco_tree(root: Path) -> Path:
    (root / "img").mkdir(parents=True)
    images, anns = [], []
    for n, img in enumerate(clip_frames(0, 3) + clip_frames(1, 3), start=1):
        cv2.imwrite(str(root / "img" / f"{n}.png"), img)
        images.append({"id": n, "file_name": f"img/{n}.png", "width": 160, "height": 120})
        anns.append({"id": n, "image_id": n, "category_id": 1, "bbox": [10, 10, 20, 40], "iscrowd": 0})
    cats = [{"id": 1, "name": "person"}]
    (root / "gt.json").write_text(json.dumps({"images": images, "annotations": anns, "categories": cats}))
    return root


def _heridal_tree(root: Path) -> Path:
    for folder, frames in (("trainImages", clip_frames(0, 3) + clip_frames(1, 3)), ("testImages", clip_frames(2, 2))):
        (root / folder).mkdir(parents=True)
        for n, img in enumerate(frames, start=1 if folder == "trainImages" else 100):
            cv2.imwrite(str(root / folder / f"{n}.png"), img)
            (root / folder / f"{n}.xml").write_text(
                "<annotation><object><name>person</name><bndbox><xmin>10</xmin><ymin>10</ymin><xmax>30</xmax>"
                "<ymax>50</ymax></bndbox></object></annotation>"
            )
    return root


ADAPTERS = {
    "voc": (_voc_tree, {}),
    "coco": (_coco_tree, {"annotations": "gt.json"}),
    "heridal": (_heridal_tree, {}),
}


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
@pytest.mark.parametrize("spec", ["file", "frames"])
def test_every_file_adapter_takes_groups(tmp_path, adapter, spec):
    make, options = ADAPTERS[adapter]
    root = make(tmp_path / "src")
    stems = sorted({p.stem for p in root.rglob("*.png")}, key=int)
    if spec == "file":
        (tmp_path / "groups.csv").write_text("stem,group\n" + "".join(f"{s},clip{int(s) > 3}\n" for s in stems))
        value = str(tmp_path / "groups.csv")
    else:
        value = "frames"
    ds = load_source(adapter, source=root, groups=value, **options)
    groups = {r.image_id.rsplit("__", 1)[-1]: r.group_key for r in ds.records()}
    assert groups["1"] == groups["2"] == groups["3"] != groups["4"] == groups["5"] == groups["6"]
    assert "groups" in ds.description["rules"]


def test_heridal_carves_val_by_group(tmp_path):
    root = _heridal_tree(tmp_path / "src")
    ds = load_source("heridal", source=root, groups="frames", val_fraction="0.4")
    assert {r.split for r in ds.records() if int(r.image_id) <= 3} in ({"train"}, {"val"})
    assert {r.split for r in ds.records() if 4 <= int(r.image_id) <= 6} in ({"train"}, {"val"})


def test_a_groups_file_missing_an_image_is_refused_by_name(tmp_path):
    root = numbered_frames(tmp_path / "beach", clips=1, per_clip=3)
    (tmp_path / "g.json").write_text(json.dumps({"1": "a", "2": "a"}))
    with pytest.raises(AegisError, match=r"does not list 1 of 3 image\(s\) \(e\.g\. 3\)") as info:
        load_source("yolo", source=root, groups=str(tmp_path / "g.json"))
    assert info.value.param == "groups"


def test_without_groups_the_description_is_unchanged(tmp_path):
    # Sources built without groups keep their description, so their root hash does not move.
    root = numbered_frames(tmp_path / "beach", clips=1, per_clip=2)
    assert "groups" not in load_source("yolo", source=root).description["rules"]


# --- the audit --------------------------------------------------------------------------------------------------
def test_audit_flags_near_identical_frames_across_splits(tmp_path):
    # The case: frames of one clip on both sides of the val/test cut were "leakage: none".
    root = numbered_frames(tmp_path / "beach")
    report = audit_dataset(load_source("yolo", source=root, val_fraction="0.3"))
    details = report["leakage_details"]
    assert report["leakage"] is True
    assert details["groups_in_several_splits"] == details["duplicates_in_several_splits"] == 0
    assert details["near_duplicates_in_several_splits"] > 0
    for pair in details["near_duplicate_examples"]:
        assert len({clip_of(s) for s in pair["images"]}) == 1 and len(set(pair["splits"])) == 2
    assert report["near_duplicates"]["max_distance_bits"] == NEAR_DISTANCE


def test_audit_is_clean_once_clips_are_groups(tmp_path):
    root = numbered_frames(tmp_path / "beach")
    report = audit_dataset(load_source("yolo", source=root, val_fraction="0.3", groups="frames"))
    assert report["leakage"] is False
    assert report["leakage_details"]["near_duplicates_in_several_splits"] == 0


def test_cli_audit_exits_1_and_names_the_way_out(tmp_path):
    root = numbered_frames(tmp_path / "beach")
    r = CliRunner().invoke(app, ["audit", "--dataset", "yolo", "--source", str(root), "--option", "val_fraction=0.3"])
    assert r.exit_code == 1, r.output
    assert "near-duplicates in several splits" in r.output and "--groups" in r.output
    ok = CliRunner().invoke(
        app, ["audit", "--dataset", "yolo", "--source", str(root), "--option", "val_fraction=0.3", "--groups", "frames"]
    )
    assert ok.exit_code == 0, ok.output


def test_build_warns_of_near_duplicates_across_splits_and_names_groups(tmp_path):
    # A hash match is a warning, not a refusal: the pairs may straddle the source's own fixed split.
    root = numbered_frames(tmp_path / "beach")
    ds = load_source("yolo", source=root, val_fraction="0.3")
    result = build_splits(ds, tmp_path / "out", corruptions=["low_light"], severities=[1], workers=1, limit=2)
    assert len(result.warnings) == 1
    assert re.search(
        r"near_duplicates_across_splits.*near-identical image pair\(s\) across splits.*`groups`", result.warnings[0]
    )
    grouped = load_source("yolo", source=root, val_fraction="0.3", groups="frames")
    clean = build_splits(grouped, tmp_path / "out2", corruptions=["low_light"], severities=[1], workers=1, limit=2)
    assert clean.warnings == ()


def test_build_refuses_a_group_in_two_splits(tmp_path):
    from aegis_data.split.build import _refuse_leakage

    report = {
        "leakage": True,
        "leakage_details": {
            "groups_in_several_splits": 1,
            "group_examples": [{"group": "c1", "splits": ["test", "val"]}],
        },
    }
    plan = type("Plan", (), {"dataset": "beach"})()
    with pytest.raises(AegisError, match=r"1 group\(s\) in several splits, e.g. 'c1'.*`groups`") as info:
        _refuse_leakage(plan, report)
    assert info.value.param == "groups"


def test_hf_takes_groups_and_hashes_the_stored_images(tmp_path, monkeypatch):
    import datasets

    from aegis_data.sources import hf as hf_source

    frames = clip_frames(0, 3) + clip_frames(1, 3)
    paths = []
    for k, img in enumerate(frames):
        paths.append(str(tmp_path / "src" / f"img{k}.png"))
        (tmp_path / "src").mkdir(exist_ok=True)
        cv2.imwrite(paths[-1], img)
    features = datasets.Features(
        {
            "image": datasets.Image(),
            "objects": {
                "bbox": datasets.Sequence(datasets.Sequence(datasets.Value("float32"), length=4)),
                "category": datasets.Sequence(datasets.ClassLabel(names=["person"])),
            },
        }
    )
    objects = [{"bbox": [[1, 2, 10, 12]], "category": [0]}] * len(paths)
    hf = datasets.Dataset.from_dict({"image": paths, "objects": objects}, features=features)
    datasets.DatasetDict({"test": hf}).save_to_disk(str(tmp_path / "hfds"))
    decoded: list[str] = []
    real = hf_source.decode_image_bytes
    monkeypatch.setattr(
        hf_source, "decode_image_bytes", lambda data, what, **kw: decoded.append(what) or real(data, what=what, **kw)
    )
    ds = load_source("hf", source=str(tmp_path / "hfds"), groups="frames")
    groups = {r.image_id: r.group_key for r in ds.records()}
    assert groups["img0"] == groups["img2"] == "img0..img2" != groups["img3"] == groups["img5"] == "img3..img5"
    # The rule and the audit share each image's hash (old code: 12 decodes of 6 images, the audit's a second time).
    assert audit_dataset(ds)["leakage"] is False
    assert sorted(decoded) == sorted(set(decoded)) and len(decoded) == len(frames)


def test_the_frames_rule_and_the_audit_decode_each_frame_once(tmp_path, monkeypatch):
    # Old code: 60 decodes of 30 frames (the rule's reader and the audit's each decoded every file).
    from aegis_data.files import imageio

    root = numbered_frames(tmp_path / "beach")
    decoded: list[str] = []
    real = imageio.decode_file_bytes
    monkeypatch.setattr(
        imageio, "decode_file_bytes", lambda data, path, *a: decoded.append(str(path)) or real(data, path, *a)
    )
    ds = load_source("yolo", source=root, groups="frames", val_fraction="0.3")
    report = audit_dataset(ds)
    assert report["leakage"] is False
    assert sorted(decoded) == sorted(set(decoded)) and len(decoded) == CLIPS * PER_CLIP
