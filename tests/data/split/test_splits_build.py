"""build_splits: layout, ground truth, YOLO files, determinism across workers, resume, refusals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from aegis_data.engine.config import load_config
from aegis_data.errors import AegisError
from aegis_data.files.imageio import file_sha256, pixel_sha256, read_rgb
from aegis_data.split.build import JOURNAL_DIR, JOURNAL_NAME, build_splits, yolo_label_text
from aegis_data.split.manifest import load_manifest, root_hash
from tests import REPO_ROOT
from tests.data.split.test_splits_doubles import (
    FEW,
    build_kwargs,
    fake_corrupt,
    fake_dataset,
    fake_read,
    leaky,
    record,
)

EXPECTED_CONDS = ["clean", "water_glare_s1", "water_glare_s2", "low_light_s1", "low_light_s2"]


def _entries(path: Path) -> list[dict]:
    return load_manifest(path / "manifest.json").data["entries"]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("split") / "fake-c"
    build_splits(fake_dataset(n_test=3, n_val=1, n_train=2), out, with_train=True, **build_kwargs())
    return out


def test_layout_has_every_condition_and_split(built):
    assert sorted(p.name for p in (built / "test").iterdir()) == sorted(EXPECTED_CONDS)
    for cond in EXPECTED_CONDS:
        assert sorted(p.name for p in (built / "test" / cond).iterdir()) == ["img000.png", "img001.png", "img002.png"]
    assert sorted(p.name for p in (built / "val").iterdir()) == ["clean"]
    assert [p.name for p in (built / "val" / "clean").iterdir()] == ["img100.png"]
    assert sorted(p.name for p in (built / "train" / "clean").iterdir()) == ["img200.png", "img201.png"]
    assert sorted(p.name for p in (built / "annotations").iterdir()) == ["test.json", "train.json", "val.json"]


def test_clean_is_the_decoded_source_and_conditions_follow_the_corruption(built):
    rec = record(1)
    src = fake_read(rec, 10**9)
    assert np.array_equal(read_rgb(built / "test" / "clean" / "img001.png"), src)
    got = read_rgb(built / "test" / "low_light_s2" / "img001.png")
    assert np.array_equal(got, fake_corrupt(src, "low_light", 2, "img001", load_config().seed))


def test_coco_ground_truth_ids_boxes_and_attributes(built):
    gt = json.loads((built / "annotations" / "test.json").read_text())
    assert [im["id"] for im in gt["images"]] == [1, 2, 3]
    assert [im["file_name"] for im in gt["images"]] == ["img000.png", "img001.png", "img002.png"]
    assert gt["images"][0] == {
        "id": 1,
        "file_name": "img000.png",
        "width": 40,
        "height": 30,
        "stem": "img000",
        "group": "g0",
    }
    assert gt["categories"] == [{"id": 1, "name": "person", "supercategory": "person"}]
    anns = [a for a in gt["annotations"] if a["image_id"] == 1]
    assert [a["bbox"] for a in anns] == [[1.0, 2.0, 11.5, 18.0], [20.0, 5.25, 10.0, 23.75]]
    assert [a["area"] for a in anns] == [11.5 * 18.0, 10.0 * 23.75]
    assert {a["iscrowd"] for a in gt["annotations"]} == {0}
    assert len({a["id"] for a in gt["annotations"]}) == len(gt["annotations"]) == 5
    assert gt["info"]["conditions"] == EXPECTED_CONDS


def test_pycocotools_loads_the_ground_truth(built):
    from pycocotools.coco import COCO

    coco = COCO(str(built / "annotations" / "val.json"))
    assert coco.getImgIds() == [1] and len(coco.getAnnIds()) == 2


def test_manifest_entries_and_root_hash(built):
    m = load_manifest(built / "manifest.json")
    images = m.images()
    assert len(images) == 3 * 5 + 1 + 2
    e = m.entries["test/water_glare_s1/img002.png"]
    assert e["condition"] == "water_glare_s1" and e["image_id"] == "img002" and e["coco_id"] == 3
    assert e["sha256"] == file_sha256(built / e["path"])
    assert e["pixel_sha256"] == pixel_sha256(read_rgb(built / e["path"]))
    assert e["source_pixel_sha256"] == pixel_sha256(fake_read(record(2), 10**9))
    assert m.entries["annotations/test.json"]["sha256"] == file_sha256(built / "annotations" / "test.json")
    assert m.root_hash == root_hash(m.data, m.data["entries"])
    assert m.data["encoder"]["name"] == "aegis-png" and m.data["format"] == "aegis-manifest/2"
    assert "created" not in json.dumps(m.data)  # nothing time-dependent
    assert m.data["splits"] == {"test": 3, "val": 1, "train": 2}
    assert m.data["conditions"] == EXPECTED_CONDS


def test_yolo_label_text_is_normalised_cxcywh():
    rec = record(0, w=40, h=30, boxes=((0.0, 0.0, 20.0, 15.0),))
    assert yolo_label_text(rec) == "0 0.250000 0.250000 0.500000 0.500000\n"
    assert yolo_label_text(record(0, boxes=())) == ""


def test_ultralytics_loads_a_condition_with_its_labels(built):
    from ultralytics.data.dataset import YOLODataset
    from ultralytics.data.utils import check_det_dataset

    data = check_det_dataset(str(built / "yolo" / "test_low_light_s1.yaml"))
    assert data["names"] == {0: "person"} and data["nc"] == 1
    ds = YOLODataset(img_path=data["val"], data=data, task="detect", imgsz=64, augment=False, cache=False)
    assert [Path(f).name for f in ds.im_files] == ["img000.png", "img001.png", "img002.png"]
    assert Path(ds.im_files[0]).resolve() == (built / "test" / "low_light_s1" / "img000.png").resolve()
    lab = ds.labels[0]
    expected = np.array([[6.75 / 40, 11.0 / 30, 11.5 / 40, 18.0 / 30], [25.0 / 40, 17.125 / 30, 10.0 / 40, 23.75 / 30]])
    np.testing.assert_allclose(lab["bboxes"], expected, atol=1e-6)
    assert lab["cls"].ravel().tolist() == [0.0, 0.0]
    item = ds[1]  # loads the corrupted pixels through the symlinked image dir
    assert tuple(item["img"].shape) == (3, 64, 64) and tuple(item["ori_shape"]) == (30, 40)  # the 40x30 frame


def test_workers_1_and_2_give_identical_manifests(tmp_path):
    ds = fake_dataset(n_test=4, n_val=2)
    build_splits(ds, tmp_path / "a", **build_kwargs(workers=1))
    build_splits(ds, tmp_path / "b", **build_kwargs(workers=2))
    a = load_manifest(tmp_path / "a" / "manifest.json").data
    b = load_manifest(tmp_path / "b" / "manifest.json").data
    assert a["entries"] == b["entries"] and a["root_hash"] == b["root_hash"]
    assert (tmp_path / "a" / "manifest.json").read_bytes() == (tmp_path / "b" / "manifest.json").read_bytes()


def test_limit_takes_the_first_images_by_id_with_the_same_coco_ids(tmp_path):
    ds = fake_dataset(n_test=4, n_val=0)
    build_splits(ds, tmp_path / "full", **build_kwargs())
    build_splits(ds, tmp_path / "part", limit=2, **build_kwargs())
    full = {e["path"]: e for e in _entries(tmp_path / "full") if e["kind"] == "image"}
    part = [e for e in _entries(tmp_path / "part") if e["kind"] == "image"]
    assert sorted({e["image_id"] for e in part}) == ["img000", "img001"]
    assert all(full[e["path"]] == e for e in part)


def test_resume_after_deleting_and_damaging_files(tmp_path):
    ds = fake_dataset()
    first = build_splits(ds, tmp_path / "o", **build_kwargs())
    before = (tmp_path / "o" / "manifest.json").read_bytes()
    (tmp_path / "o" / "test" / "low_light_s2" / "img001.png").unlink()
    damaged = tmp_path / "o" / "test" / "clean" / "img002.png"
    damaged.write_bytes(damaged.read_bytes()[:-20])
    (tmp_path / "o" / "test" / "clean" / ".img000.png.x1y2.tmp").write_bytes(b"half")
    again = build_splits(ds, tmp_path / "o", **build_kwargs())
    # the damaged clean frame forces its source to be decoded again, but only changed files are rewritten
    assert again.files_written == 2 and again.files_skipped == first.files_written - 2
    assert (tmp_path / "o" / "manifest.json").read_bytes() == before
    assert not (tmp_path / "o" / "test" / "clean" / ".img000.png.x1y2.tmp").exists()


def test_a_finished_build_reruns_without_writing(tmp_path):
    ds = fake_dataset()
    first = build_splits(ds, tmp_path / "o", **build_kwargs())
    again = build_splits(ds, tmp_path / "o", **build_kwargs(workers=2))
    assert again.files_written == 0 and again.files_skipped == first.files_written
    assert again.root_hash == first.root_hash


def test_a_build_killed_with_sigkill_resumes_to_the_same_manifest(tmp_path):
    ds_args = "fake_dataset(n_test=10, n_val=1)"
    code = (
        "from aegis_data.split.build import build_splits\n"
        "from tests.data.split.test_splits_doubles import *\n"
        f"build_splits({ds_args}, {str(tmp_path / 'killed')!r}, **build_kwargs(corrupt=slow_corrupt, workers=2))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True)
    journal = tmp_path / "killed" / JOURNAL_DIR / JOURNAL_NAME
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if journal.is_file() and journal.read_text().count("\n") >= 2:
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the build finished before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)  # the build and its workers, mid-way
    finally:
        proc.wait(timeout=30)
    killed = tmp_path / "killed"
    assert not (killed / "manifest.json").exists()  # a half-built dir has no manifest
    resumed = build_splits(fake_dataset(n_test=10, n_val=1), killed, **build_kwargs())
    assert resumed.files_skipped >= len(EXPECTED_CONDS) and resumed.files_written > 0  # a real resume
    build_splits(fake_dataset(n_test=10, n_val=1), tmp_path / "straight", **build_kwargs())
    assert (killed / "manifest.json").read_bytes() == (tmp_path / "straight" / "manifest.json").read_bytes()


def test_refuses_a_directory_of_another_dataset(tmp_path):
    build_splits(fake_dataset(), tmp_path / "o", **build_kwargs())
    with pytest.raises(AegisError, match='holds a split of dataset \'fake\'.*dataset: "fake" here vs "other" now'):
        build_splits(fake_dataset(name="other"), tmp_path / "o", **build_kwargs())
    with pytest.raises(AegisError, match="seed"):
        build_splits(fake_dataset(), tmp_path / "o", **build_kwargs(seed=1))
    with pytest.raises(AegisError, match="holds a split"):
        build_splits(fake_dataset(size=99), tmp_path / "o", **build_kwargs())  # another source description


def test_refuses_an_unfinished_build_of_another_dataset(tmp_path):
    ds = fake_dataset()
    build_splits(ds, tmp_path / "o", **build_kwargs())
    (tmp_path / "o" / "manifest.json").unlink()  # journal/state alone still identify it
    with pytest.raises(AegisError, match="holds a split of dataset 'fake'"):
        build_splits(fake_dataset(name="other"), tmp_path / "o", **build_kwargs())


def test_refuses_a_non_empty_unrelated_directory(tmp_path):
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "notes.txt").write_text("mine")
    with pytest.raises(AegisError, match="not empty and holds no AegisBench build"):
        build_splits(fake_dataset(), tmp_path / "o", **build_kwargs())


def test_refuses_leakage_and_an_empty_source(tmp_path):
    with pytest.raises(
        AegisError, match="leakage between splits \\(1 group\\(s\\) in several splits, e.g. 'g1' in test, val\\)"
    ):
        build_splits(fake_dataset(), tmp_path / "o", **build_kwargs(audit=leaky))
    assert not (tmp_path / "o").exists()
    with pytest.raises(AegisError, match="no test images"):
        build_splits(fake_dataset(n_test=0), tmp_path / "o", **build_kwargs())


@pytest.mark.parametrize(
    "over, message",
    [
        ({"corruptions": ["fog"]}, "unknown corruption .fog.; expected one of: water_glare"),
        ({"severities": (0, 4)}, "`severities` must be a non-empty subset of 1, 2, 3"),
        ({"limit": 0}, "`limit` must be at least 1"),
        ({"workers": 0}, "`workers` must be at least 1"),
        ({"with_train": True}, "no train images"),
    ],
)
def test_bad_selection_is_one_clear_error(tmp_path, over, message):
    with pytest.raises(AegisError, match=message):
        build_splits(fake_dataset(), tmp_path / "o", **build_kwargs(**over))


def test_bad_records_are_refused(tmp_path):
    ds = fake_dataset()
    bad = type(ds)("fake", ds.description, {"test": [record(0, boxes=((0.0, 0.0, 50.0, 10.0),))]})
    with pytest.raises(AegisError, match="leaves the 40x30 frame"):
        build_splits(bad, tmp_path / "o", **build_kwargs())


def test_a_source_that_decodes_to_another_size_is_refused(tmp_path):
    ds = fake_dataset()
    wrong = type(ds)("fake", ds.description, {"test": [record(0, w=41)]})

    def read_wrong(rec, max_pixels):
        return fake_read(record(0), max_pixels)

    with pytest.raises(AegisError, match="decodes to 40x30 but its record says 41x30"):
        build_splits(wrong, tmp_path / "o", **build_kwargs(read_image=read_wrong))
    assert not (tmp_path / "o" / "manifest.json").exists()


def test_progress_callback_counts_images(tmp_path):
    seen = []
    build_splits(fake_dataset(n_test=2, n_val=1), tmp_path / "o", progress=seen.append, **build_kwargs())
    assert [p.done for p in seen] == [1, 2, 3] and {p.total for p in seen} == {3}
    assert seen[-1].files_written == 2 * len(EXPECTED_CONDS) + 1


def test_few_conditions_selection_keeps_canonical_order(tmp_path):
    r = build_splits(
        fake_dataset(n_test=1, n_val=0),
        tmp_path / "o",
        **build_kwargs(corruptions=list(reversed(FEW)), severities=(2, 1)),
    )
    assert list(r.conditions) == EXPECTED_CONDS


def test_the_real_audit_refuses_a_group_in_two_splits(tmp_path):
    import dataclasses

    from aegis_data.sources import load_source

    ds = load_source("synthetic", n=4, size="64")
    leaked = dataclasses.replace(ds.splits["test"][0], image_id="leaked-copy", split="val")
    bad = dataclasses.replace(ds, splits={**ds.splits, "val": [*ds.splits["val"], leaked]})
    with pytest.raises(AegisError, match="leakage between splits .*synthetic-00000"):
        build_splits(bad, tmp_path / "o", corruptions=FEW, severities=(1,), workers=1)
    assert not (tmp_path / "o").exists()


def test_a_changed_source_invalidates_all_files_of_that_image(tmp_path):
    ds = fake_dataset(n_test=2, n_val=0)
    build_splits(ds, tmp_path / "o", **build_kwargs())
    (tmp_path / "o" / "test" / "low_light_s1" / "img001.png").unlink()

    def read_changed(rec, max_pixels):
        img = fake_read(rec, max_pixels)
        return 255 - img if rec.image_id == "img001" else img

    again = build_splits(ds, tmp_path / "o", **build_kwargs(read_image=read_changed))
    assert again.files_written == len(EXPECTED_CONDS)  # every file of img001, none of img000
    clean = read_rgb(tmp_path / "o" / "test" / "clean" / "img001.png")
    assert np.array_equal(clean, 255 - fake_read(record(1), 10**9))


def test_a_dead_worker_is_one_clear_error(tmp_path):
    from tests.data.split.test_splits_doubles import dying_corrupt

    with pytest.raises(AegisError, match="a worker process died .* re-run the same command to resume"):
        build_splits(fake_dataset(n_test=2), tmp_path / "o", **build_kwargs(corrupt=dying_corrupt, workers=2))
    assert not (tmp_path / "o" / "manifest.json").exists()


def test_yolo_val_runs_on_a_condition_offline(built):
    from ultralytics import YOLO

    model = YOLO("yolo11n.yaml")  # random weights, built from yaml: no download
    metrics = model.val(
        data=str(built / "yolo" / "test_water_glare_s2.yaml"), imgsz=64, batch=2, plots=False, device="cpu", workers=0
    )
    gt = json.loads((built / "annotations" / "test.json").read_text())
    assert int(metrics.nt_per_class.sum()) == len(gt["annotations"]) == 5  # every GT box reached the validator
