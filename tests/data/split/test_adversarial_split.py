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

from aegis_cli.main import app
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
    from aegis_data.split.build import build_splits
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
    from aegis_data.split.manifest import files_hash, root_hash, sealed_header

    m["root_hash"] = root_hash(m, m["entries"])
    m["files_hash"] = files_hash(m["root_hash"], m["encoder"], m["entries"], sealed_header(m))
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


def test_score_refuses_provenance_from_an_edited_manifest(tmp_path, yolo_split):
    src, out, m = yolo_split
    m["dataset"] = "heridal"
    (out / "manifest.json").write_text(json.dumps(m))
    preds = tmp_path / "p.json"
    preds.write_text("[]")
    assert_one_line_error(invoke("score", preds, "--gt", out, "--threshold", "0.5"), "manifest_invalid")


# --- 3. a bounded threshold grid ---------------------------------------------------------------------------
@pytest.fixture
def scoring_inputs(tmp_path, yolo_split):
    src, out, _ = yolo_split
    gt = out / "annotations" / "test.json"
    preds = tmp_path / "clean.json"
    preds.write_text(json.dumps([{"image_id": 1, "category_id": 1, "bbox": [18, 12, 12, 8], "score": 0.9}]))
    return gt, preds


def test_a_huge_threshold_grid_is_refused_with_its_size(tmp_path, scoring_inputs):
    gt, preds = scoring_inputs
    r = invoke("freeze-threshold", preds, "--gt", gt, "--out", tmp_path / "t.json", "--grid", "0:1:1e-12")
    assert_one_line_error(r, "1e+12 points", "100,001")
    r = invoke("freeze-threshold", preds, "--gt", gt, "--out", tmp_path / "t.json", "--grid", "0:1:0.00001")
    assert r.exit_code == 0, r.output


# --- 4. one-line errors -------------------------------------------------------------------------------------
def test_freeze_threshold_on_an_empty_prediction_list(tmp_path, scoring_inputs):
    gt, preds = scoring_inputs
    preds.write_text("[]")
    r = invoke("freeze-threshold", preds, "--gt", gt, "--out", tmp_path / "t.json")
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "t.json").read_text())["metrics"]["tp"] == 0


@pytest.mark.parametrize("cmd", ["score", "freeze-threshold", "verify", "audit", "build-splits", "report"])
@pytest.mark.parametrize("how", ["folder", "parent-is-file"])
def test_unwritable_outputs_are_refused_before_work(tmp_path, yolo_split, scoring_inputs, cmd, how):
    src, out, _ = yolo_split
    gt, preds = scoring_inputs
    (tmp_path / "afile").write_text("x")
    target = tmp_path / "afolder" if how == "folder" else tmp_path / "afile" / "x.json"
    (tmp_path / "afolder").mkdir()
    score_json = tmp_path / "s.json"
    args = {
        "score": ("score", preds, "--gt", gt, "--threshold", "0.5", "--bootstrap", "1", "--json", target),
        "freeze-threshold": ("freeze-threshold", preds, "--gt", gt, "--out", target),
        "verify": ("verify", out, "--json", target),
        "audit": ("audit", "--dataset", "yolo", "--source", src, "--json", target),
        "build-splits": ("build-splits", "--source", src, *YOLO_BUILD,
                         "--out", tmp_path / "afile" / "out" if how == "parent-is-file" else tmp_path / "afile"),
        "report": ("report", score_json, "--out", tmp_path / "afile" if how == "folder" else tmp_path / "afile" / "r"),
    }[cmd]
    if cmd == "report":
        assert invoke("score", preds, "--gt", gt, "--threshold", "0.5", "--bootstrap", "1", "--json",
                      score_json).exit_code == 0
    assert_one_line_error(invoke(*args), "afile" if (how == "parent-is-file" or cmd in ("build-splits", "report"))
                          else "afolder")


def test_disk_full_is_one_line_naming_the_path_and_free_space(tmp_path, monkeypatch, scoring_inputs):
    import aegis_data.files.imageio as imageio

    gt, preds = scoring_inputs

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(imageio.os, "fsync", full)
    r = invoke("freeze-threshold", preds, "--gt", gt, "--out", tmp_path / "t.json", "--grid", "0.5")
    assert_one_line_error(r, "no space left", str(tmp_path / "t.json"), "MB free")
    assert not list(tmp_path.glob(".t.json.*"))  # no temp file left behind


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


# --- 8. special files in a predictions folder ---------------------------------------------------------------
def test_a_fifo_in_a_predictions_folder_is_skipped(tmp_path, scoring_inputs):
    gt, preds = scoring_inputs
    folder = tmp_path / "preds"
    folder.mkdir()
    shutil.copyfile(preds, folder / "clean.json")
    os.mkfifo(folder / "low_light_s1.json")
    r = invoke("score", folder, "--gt", gt, "--threshold", "0.5", "--bootstrap", "1")
    assert r.exit_code == 0, r.output
    assert "not_a_regular_file" in r.stderr
    r = invoke("score", folder / "low_light_s1.json", "--gt", gt, "--threshold", "0.5")
    assert_one_line_error(r, "not a regular file")


# --- 9. an output never replaces an input -------------------------------------------------------------------
@pytest.mark.parametrize("which", ["preds", "gt", "csv-json"])
def test_outputs_never_replace_inputs(tmp_path, scoring_inputs, which):
    gt, preds = scoring_inputs
    before = {p: p.read_bytes() for p in (gt, preds)}
    extra = {"preds": ("--json", preds), "gt": ("--json", gt),
             "csv-json": ("--csv", tmp_path / "f", "--json", tmp_path / "f")}[which]
    r = invoke("score", preds, "--gt", gt, "--threshold", "0.5", "--bootstrap", "1", *extra)
    assert_one_line_error(r, "--json" if which != "csv-json" else "both name")
    assert {p: p.read_bytes() for p in (gt, preds)} == before


# --- 10. leniency -------------------------------------------------------------------------------------------
def _coco_source(tmp_path: Path, mutate) -> tuple[Path, Path]:
    root = tmp_path / "coco"
    write_png(root / "a.png")
    doc = {"images": [{"id": 1, "file_name": "a.png", "width": 48, "height": 32}],
           "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [4, 4, 10, 10]}],
           "categories": [{"id": 1, "name": "person"}]}
    mutate(doc)
    ann = tmp_path / "ann.json"
    ann.write_text(json.dumps(doc) if not isinstance(doc.get("_raw"), str) else doc["_raw"])
    return root, ann


def _set_bbox(value):
    return lambda d: d["annotations"][0].__setitem__("bbox", value)


COCO_CASES = {
    "bbox-null": (_set_bbox(None), "must be a list of 4 numbers"),
    "bbox-bool": (_set_bbox([True, 4, 10, 10]), "is not a number"),
    "bbox-string": (_set_bbox(["10", 4, 10, 10]), "is not a number"),
    "categories-strings": (lambda d: d.__setitem__("categories", ["person"]), "'categories' must be a list of objects"),
    "no-annotations": (lambda d: d.pop("annotations"), "'annotations' lists"),
    "image-id-list": (lambda d: d["images"][0].__setitem__("id", [1]), "integer or string 'id'"),
}


@pytest.mark.parametrize("case", sorted(COCO_CASES))
@pytest.mark.parametrize("cmd", ["build-splits", "audit"])
def test_coco_field_validation_is_one_line(tmp_path, case, cmd):
    mutate, message = COCO_CASES[case]
    root, ann = _coco_source(tmp_path, mutate)
    extra = ("--out", tmp_path / "out", "--workers", "1") if cmd == "build-splits" else ()
    r = invoke(cmd, "--dataset", "coco", "--source", root, "--annotations", ann, *extra)
    assert_one_line_error(r, message)


def test_coco_bbox_number_overflowing_float64_is_one_line(tmp_path):
    root, ann = _coco_source(tmp_path, lambda d: None)
    ann.write_text(ann.read_text().replace('"bbox": [4, 4, 10, 10]', '"bbox": [4, 4, 1' + "0" * 400 + ', 10]'))
    r = invoke("audit", "--dataset", "coco", "--source", root, "--annotations", ann)
    assert_one_line_error(r, "json_number_overflow")


@pytest.mark.parametrize("cls", ["-1", "0.0", "1_0", "+1"])
def test_yolo_class_must_be_a_plain_non_negative_integer(tmp_path, cls):
    src = yolo_source(tmp_path / "src")
    (src / "labels" / "f0.txt").write_text(f"{cls} 0.5 0.5 0.25 0.25\n")
    assert_one_line_error(invoke("audit", "--dataset", "yolo", "--source", src), "is not a class id", "f0.txt:1")


@pytest.mark.parametrize("value", ["1_0", "1e400", "nan", "inf"])
def test_yolo_box_numbers_must_be_plain_finite_decimals(tmp_path, value):
    src = yolo_source(tmp_path / "src")
    (src / "labels" / "f0.txt").write_text(f"0 0.5 0.5 {value} 0.25\n")
    assert_one_line_error(invoke("audit", "--dataset", "yolo", "--source", src), "f0.txt:1")


def _voc_source(tmp_path: Path, width: str = "48", xmin: str = "4") -> Path:
    root = tmp_path / "voc"
    write_png(root / "JPEGImages" / "a.png")
    (root / "Annotations").mkdir(parents=True)
    (root / "Annotations" / "a.xml").write_text(
        f"<annotation><size><width>{width}</width><height>32</height></size><object><name>person</name>"
        f"<bndbox><xmin>{xmin}</xmin><ymin>4</ymin><xmax>20</xmax><ymax>20</ymax></bndbox></object></annotation>")
    return root


def test_voc_size_that_overflows_is_ignored_not_a_traceback(tmp_path):
    root = _voc_source(tmp_path, width="1e400")
    r = invoke("audit", "--dataset", "voc", "--source", root, "--json", tmp_path / "a.json")
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "a.json").read_text())["source"]["xml_without_size"] == 1


@pytest.mark.parametrize("xmin", ["1_0", "1e400", "nan"])
def test_voc_box_numbers_must_be_plain_finite_decimals(tmp_path, xmin):
    root = _voc_source(tmp_path, xmin=xmin)
    assert_one_line_error(invoke("audit", "--dataset", "voc", "--source", root), "<xmin>")


def test_source_symlinks_leaving_the_root_are_skipped_and_counted(tmp_path):
    src = yolo_source(tmp_path / "src")
    write_png(tmp_path / "elsewhere" / "secret.png", seed=99)
    os.symlink(tmp_path / "elsewhere" / "secret.png", src / "images" / "secret.png")
    r = invoke("audit", "--dataset", "yolo", "--source", src, "--json", tmp_path / "a.json")
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "a.json").read_text())
    assert doc["source"]["links_outside_root_skipped"] == 1 and doc["source"]["counts"]["test"]["images"] == 3
    r = invoke("audit", "--dataset", "yolo", "--source", src, "--follow-links", "--json", tmp_path / "b.json")
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "b.json").read_text())["source"]["counts"]["test"]["images"] == 4


def test_yolo_yaml_never_trains_on_the_test_list(yolo_split):
    src, out, m = yolo_split
    text = (out / "yolo" / "test_clean.yaml").read_text()
    assert "train: no_train.txt" in text and (out / "yolo" / "no_train.txt").read_text() == ""
    assert "yolo/no_train.txt" in {e["path"] for e in m["entries"]}


# --- 7. workers die with their parent -----------------------------------------------------------------------
def _proc_stat(pid: int) -> tuple[int, str, int] | None:
    """(ppid, state, start time) of a live process from /proc, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), fields[0], int(fields[19])


def _descendants(pid: int) -> dict[int, int]:
    """pid -> start time of every live descendant of ``pid``."""
    children: dict[int, list[int]] = {}
    starts = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and (st := _proc_stat(int(d.name))) is not None:
            children.setdefault(st[0], []).append(int(d.name))
            starts[int(d.name)] = st[2]
    out, todo = {}, [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out[c] = starts[c]
            todo.append(c)
    return out


def _alive(pid: int, start: int) -> bool:
    st = _proc_stat(pid)
    return st is not None and st[2] == start and st[1] != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="needs Linux /proc to follow worker processes")
def test_workers_die_when_only_the_parent_is_killed(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    tests_dir = Path(__file__).parent
    code = (
        "from aegis_data.sources.records import Record\n"
        "from aegis_data.split.build import build_splits\n"
        "from test_splits_doubles import *\n"
        "ds = FakeDataset('fake', {'n': 40}, {'test': [Record(f'i{k:02d}', f'fake:{k}', 64, 48) for k in range(40)]})\n"
        f"build_splits(ds, {str(tmp_path / 'out')!r}, corruptions=FEW, workers=2, read_image=fake_read,\n"
        "             corrupt=slow_corrupt, audit=no_leak, person_px=30)\n"  # the default suite needs a unit
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tests_dir), str(tests_dir.parent)]))
    proc = subprocess.Popen([sys.executable, "-c", code], env=env)
    procs: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            procs = _descendants(proc.pid)  # resource tracker, forkserver, 2 workers
            if len(procs) >= 4 and (tmp_path / "out" / ".aegis-build" / "journal.jsonl").is_file():
                break
            time.sleep(0.05)
        assert proc.poll() is None and len(procs) >= 4, "the build ended before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)  # the parent only, not its process group
        proc.wait(timeout=10)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(_alive(p, t) for p, t in procs.items()):
            time.sleep(0.1)
        alive = [p for p, t in procs.items() if _alive(p, t)]
        assert not alive, f"{len(alive)} process(es) of the build still alive after its parent was killed"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        for p, t in procs.items():  # never leave a stray process behind, even when the assertion failed
            if _alive(p, t):
                os.kill(p, signal.SIGKILL)


# --- 4. numbers beyond float64 and over-deep JSON in scorer inputs -----------------------------------------
BIG = "1" + "0" * 400  # valid JSON, no float64


# The strict JSON reader refuses such numbers while parsing; the loaders' own checks stay for in-memory input.
@pytest.mark.parametrize("field,code", [("bbox", "json_number_overflow"), ("score", "json_number_overflow")])
def test_prediction_numbers_beyond_float64_are_findings(tmp_path, scoring_inputs, field, code):
    gt, preds = scoring_inputs
    entry = '{"image_id": 1, "category_id": 1, "bbox": %s, "score": %s}' % (
        f"[1, 1, {BIG}, 5]" if field == "bbox" else "[1, 1, 5, 5]", BIG if field == "score" else "0.5")
    preds.write_text(f"[{entry}]")
    r = invoke("score", preds, "--gt", gt, "--threshold", "0.5", "--bootstrap", "1")
    assert_one_line_error(r, code)
    assert len(r.stderr) < 400  # the 401-digit number is not echoed in full


def test_threshold_file_value_beyond_float64_is_a_finding(tmp_path, scoring_inputs):
    gt, preds = scoring_inputs
    t = tmp_path / "t.json"
    t.write_text('{"schema": "aegis-threshold/1", "value": %s}' % BIG)
    assert_one_line_error(invoke("score", preds, "--gt", gt, "--threshold-file", t), "json_number_overflow")


def test_gt_bbox_beyond_float64_is_a_finding(tmp_path, scoring_inputs):
    gt, preds = scoring_inputs
    doc = json.loads(gt.read_text())
    doc["annotations"][0]["bbox"] = [1, 1, 5, 5]
    text = json.dumps(doc).replace('"bbox": [1, 1, 5, 5]', f'"bbox": [1, 1, {BIG}, 5]', 1)
    (tmp_path / "gt.json").write_text(text)
    assert_one_line_error(invoke("score", preds, "--gt", tmp_path / "gt.json", "--threshold", "0.5"), "json_number_overflow")


@pytest.fixture
def score_json(tmp_path, scoring_inputs):
    gt, preds = scoring_inputs
    path = tmp_path / "score.json"
    assert invoke("score", preds, "--gt", gt, "--threshold", "0.5", "--bootstrap", "1", "--json", path).exit_code == 0
    return path


def test_report_on_a_score_beyond_float64_is_a_finding(tmp_path, score_json):
    import re

    score_json.write_text(re.sub(r'"recall": [0-9.e-]+', f'"recall": {BIG}', score_json.read_text(), count=1))
    assert_one_line_error(invoke("report", score_json, "--out", tmp_path / "r"), "json_number_overflow")


def test_report_with_a_300_character_dataset_name(tmp_path, score_json):
    doc = json.loads(score_json.read_text())
    doc["dataset"] = "x" * 300
    score_json.write_text(json.dumps(doc))
    r = invoke("report", score_json, "--out", tmp_path / "r")
    assert r.exit_code == 0, r.output
    assert all(len(p.name) < 100 for p in (tmp_path / "r").rglob("*"))


@pytest.mark.parametrize("what", ["predictions", "threshold", "score"])
def test_over_deep_json_is_one_line(tmp_path, scoring_inputs, score_json, what):
    gt, preds = scoring_inputs
    deep = "[" * 100_000 + "]" * 100_000
    if what == "predictions":
        preds.write_text(deep)
        r = invoke("score", preds, "--gt", gt, "--threshold", "0.5")
    elif what == "threshold":
        (tmp_path / "t.json").write_text(deep)
        r = invoke("score", preds, "--gt", gt, "--threshold-file", tmp_path / "t.json")
    else:
        score_json.write_text(deep)
        r = invoke("report", score_json, "--out", tmp_path / "r")
    assert_one_line_error(r, "json_too_deep")


def test_disk_full_while_writing_images_is_one_line(tmp_path, monkeypatch):
    import aegis_data.files.imageio as imageio

    src = yolo_source(tmp_path / "src")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(imageio.os, "fsync", full)
    r = invoke("build-splits", "--source", src, "--out", tmp_path / "out", *YOLO_BUILD)
    assert_one_line_error(r, "no space left", "MB free")
    monkeypatch.undo()
    assert not list((tmp_path / "out").rglob("*.tmp"))


def test_folder_outputs_never_land_inside_an_input_folder(tmp_path, yolo_split):
    src, out, _ = yolo_split
    r = invoke("export-hf", out, "--out", out / "hf")
    assert_one_line_error(r, "lies inside the input folder")
    assert invoke("verify", out).exit_code == 0  # nothing was written into the split


def test_in_memory_numbers_beyond_float64_are_findings_too():
    """Input that never went through the JSON reader (a caller's dicts) meets the loaders' own checks."""
    from aegis_data.errors import AegisError
    from aegis_eval.protocols.predictions import ground_truth_from_coco

    coco = {"images": [{"id": 1, "file_name": "a.png", "width": 10, "height": 10}],
            "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 1, 10**400, 2]}],
            "categories": [{"id": 1, "name": "person"}]}
    with pytest.raises(AegisError, match="gt_bbox_invalid"):
        ground_truth_from_coco(coco)


# ==========================================================================================================
# Second round: verify means what a detector reads (numbers follow that list)
# ==========================================================================================================
def _flip_pixel(path: Path) -> None:
    img = cv2.imread(str(path))
    img[0, 0, 0] ^= 0xFF
    assert cv2.imwrite(str(path), img)


def _reseal(out: Path, m: dict) -> dict:
    (out / "manifest.json").write_text(json.dumps(_rehash(m)))
    return m


# --- 1. suite-config values are validated; the compiled loops check sizes ---------------------------------
CONFIG_EDITS = [
    (b"sigma_read: [0.010, 0.018, 0.028]", b"sigma_read: [.nan, .nan, .nan]", "low_light.severities.sigma_read"),
    (b"gain: [0.330, 0.130, 0.045]", b"gain: [.inf, 0.130, 0.045]", "low_light.severities.gain[s1]"),
    (b"noise_base: 6", b"noise_base: 0", "water_glare.fixed.noise_base"),
    (b"noise_octaves: 4\n      noise_base: 6", b"noise_octaves: 1e9\n      noise_base: 6", "noise_octaves"),
    (b"tint: [1.00, 0.98, 0.92]", b"tint: 0", "water_glare.fixed.tint"),
    (b"bloom_sigma_px: [8, 12, 16]", b"bloom_sigma_px: [8, 12, 1e9]", "bloom_sigma_px[s3]"),
    (b"seed: 20260707", b"seed: -1", "seed"),
    (b"direction: increase", b"direction: sideways", "direction"),
    (b"suite: aegis-v1", b"suite: aegis-v1\nextra_key: 1", "extra_key"),
]
# The same for aegis-v2's own blocks: its models' physical parameters, the camera, the model names.
CONFIG_EDITS_V2 = [
    (b"ev_loss: [4.6, 8.0, 11.6]", b"ev_loss: [.nan, .nan, .nan]", "low_light.severities.ev_loss"),
    (b"ev_loss: [4.6, 8.0, 11.6]", b"ev_loss: [.inf, 8.0, 11.6]", "low_light.severities.ev_loss[s1]"),
    (b"exposure_ms: [2.0, 8.3, 33.3]", b"exposure_ms: [2.0, 8.3, 1e9]", "motion_blur.severities.exposure_ms[s3]"),
    (b"model: trajectory_blur", b"model: warp_drive", "motion_blur.model"),
    (b"hfov_deg: 71.5", b"hfov_deg: 0", "camera.hfov_deg"),
    (b"white_balance: [2.0, 1.0, 1.7]", b"white_balance: [2.0, 1.0]", "camera.white_balance"),
    (b"  base_iso: 100\n", b"", "camera.base_iso is missing"),
    (b"\nscale: object\n", b"\nscale: frame\n", "declare scale: object"),
]


@pytest.mark.parametrize("suite,old,new,names", [("aegis-v1", *c) for c in CONFIG_EDITS]
                         + [("aegis-v2", *c) for c in CONFIG_EDITS_V2],
                         ids=[f"v1-{c[2]}" for c in CONFIG_EDITS] + [f"v2-{c[2]}" for c in CONFIG_EDITS_V2])
def test_every_suite_config_value_is_checked_on_load(suite, old, new, names):
    from aegis_data.engine.config import config_from_bytes, suite_path
    from aegis_data.errors import AegisError

    data = suite_path(suite).read_bytes()
    assert old in data
    with pytest.raises(AegisError, match=names.replace("[", r"\[").replace("]", r"\]")) as info:
        config_from_bytes(data.replace(old, new, 1), "edited.yaml")
    assert "\n" not in str(info.value) and "edited.yaml" in str(info.value)


def test_a_suite_config_may_carry_a_scale_block():
    from aegis_data.engine.config import config_from_bytes, load_config, suite_path
    from aegis_data.errors import AegisError

    v1 = suite_path("aegis-v1").read_bytes()  # a suite without a scale block (frame scale) gets one
    cfg = config_from_bytes(v1 + b"scale: {mode: object, person_px: 30}\n")
    assert cfg.corruptions == load_config("aegis-v1").corruptions and cfg.scale == {"mode": "object", "person_px": 30.0}
    with pytest.raises(AegisError, match="scale must be"):
        config_from_bytes(v1 + b"scale: {reference: 1}\n")


@pytest.mark.parametrize("suite,old,new,names", [("aegis-v1", *CONFIG_EDITS[0]), ("aegis-v1", *CONFIG_EDITS[1]),
                                                 ("aegis-v2", *CONFIG_EDITS_V2[0]), ("aegis-v2", *CONFIG_EDITS_V2[1])],
                         ids=["v1-nan", "v1-inf", "v2-nan", "v2-inf"])
def test_verify_of_a_split_whose_config_holds_nan_is_one_finding_not_a_crash(tmp_path, suite, old, new, names):
    from aegis_data.engine.config import config_bytes_hash

    src, out = yolo_source(tmp_path / "src"), tmp_path / "out"
    m = build_yolo(src, out, "--suite", suite)
    data = (out / "corruptions.yaml").read_bytes().replace(old, new, 1)
    (out / "corruptions.yaml").write_bytes(data)
    m["config_hash"] = config_bytes_hash(data)  # a config that does not parse has only a byte hash
    _reseal(out, m)
    _flip_pixel(out / "test" / "low_light_s1" / "f0.png")  # verify would regenerate this file from the config
    r = invoke("verify", out, "--json", tmp_path / "v.json")
    assert r.exit_code == 1, r.output
    doc = json.loads((tmp_path / "v.json").read_text())
    assert any(f["path"] == "corruptions.yaml" and names.split("[")[0] in f["detail"] for f in doc["findings"])
    flipped = [f for f in doc["findings"] if f["path"] == "test/low_light_s1/f0.png"]
    assert flipped and flipped[0]["kind"] == "pixels" and "not available" in flipped[0]["detail"]


def test_compiled_loops_refuse_sizes_that_overflow():
    from aegis_data.engine import kernels as K
    c = K.CKERNELS
    if c is None:
        pytest.skip("the compiled loops are not built here (the NumPy fallback has no C sizes to overflow)")
    out, grid = np.zeros((2, 4), np.float32), np.zeros((2, 4))
    taps, weights = np.zeros((4, 4), np.int64), np.zeros((4, 4))
    with pytest.raises(ValueError, match="sizes out of range"):
        c.noise_columns(out, grid, 2, 4, taps, weights, 1 << 62, 1.0)
    with pytest.raises(ValueError, match="sizes out of range"):
        c.noise_columns(out, grid, 1 << 62, 4, taps, weights, 4, 1.0)
    with pytest.raises(ValueError, match="padded area overflows"):
        c.block_sum(np.zeros((1, 1), np.int64), np.zeros((4, 4), np.uint8), 4, 4, 1 << 62)
    c.noise_columns(out, grid, 2, 4, taps, weights, 4, 1.0)  # the same call with true sizes runs


def test_the_documented_parameter_table_is_the_validators():
    from aegis_data.engine.config_schema import CAMERA, PARAMETERS

    doc = (Path(__file__).resolve().parent.parent / "docs" / "CORRUPTIONS.md").read_text()
    for name, params in PARAMETERS.items():  # every model, aegis-v1's and generation 2's
        for key, p in params.items():
            assert f"| `{name}` | `{key}` | {p.describe()}" in doc, (name, key)
    for key, p in CAMERA.items():
        assert f"| `camera` | `{key}` | {p.describe()}" in doc, key
    # ... and the tables document nothing the validators do not know.
    section = doc.split("## Allowed parameter values", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:3] for line in section.splitlines() if line.startswith("| `")]
    known = {(m, k) for m, ps in PARAMETERS.items() for k in ps} | {("camera", k) for k in CAMERA}
    documented = {(a.strip().strip("`"), b.strip().strip("`")) for a, b in rows}
    assert documented == known and len(rows) == len(known)


# --- 3. a YOLO class filter that matches nothing is refused ------------------------------------------------
@pytest.mark.parametrize("classes,fragment", [("person", "not a YOLO class id"), ("00", "not a YOLO class id"),
                                              ("abc", "not a YOLO class id"), ("0.0", "not a YOLO class id"),
                                              ("-1", "not a YOLO class id"), ("3", "labels hold class ids: 0"),
                                              ("0,7", "class id 7 matches no label")])
def test_a_yolo_class_filter_must_name_ids_the_labels_hold(tmp_path, classes, fragment):
    src = yolo_source(tmp_path / "src")
    r = invoke("build-splits", "--source", src, "--out", tmp_path / "out", *YOLO_BUILD, "--classes", classes)
    assert_one_line_error(r, fragment)
    assert not (tmp_path / "out" / "manifest.json").exists()
    m = build_yolo(src, tmp_path / "ok", "--classes", "0")
    assert m["splits"] == {"test": 3}


# --- 11. a label path that is no file is not a negative ----------------------------------------------------
@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_label_path_that_is_a_folder_or_fifo_is_refused(tmp_path, kind):
    src = yolo_source(tmp_path / "src")
    label = src / "labels" / "f1.txt"
    label.unlink()
    label.mkdir() if kind == "folder" else os.mkfifo(label)
    r = invoke("build-splits", "--source", src, "--out", tmp_path / "out", *YOLO_BUILD)
    assert_one_line_error(r, "f1.txt", "not a regular file")


# --- 4. augmentation weights -------------------------------------------------------------------------------
@pytest.mark.parametrize("weights", [[float("nan"), 1, 1], [float("inf"), 1, 1], [-1, 1, 1], [0, 1, 1]])
def test_severity_weights_must_be_finite_and_positive(weights):
    from aegis_data.augment.transform import resolve_policy
    from aegis_data.errors import AegisError

    with pytest.raises(AegisError, match="finite positive number"):
        resolve_policy({"name": "w", "p_clean": 0.0, "severity_weights": weights}, "p.yaml")


def test_huge_severity_weights_keep_their_proportions():
    from aegis_data.augment.transform import DisasterAugment, resolve_policy

    def severities(weights):
        policy = resolve_policy({"name": "w", "p_clean": 0.0, "severity_weights": weights}, suite="aegis-v1")
        aug = DisasterAugment(policy, seed=3)
        return [aug.choose(0, i).severity for i in range(300)]

    huge, plain = severities([1e308, 1e308, 1e308]), severities([1, 1, 1])
    assert huge == plain and {1, 2, 3} <= set(huge)


# --- 8. a class map gives each source id once, in both forms ------------------------------------------------
@pytest.mark.parametrize("text", ['{"1": 2, "2": 2, "1": 1}', '{"1": 2, "2": 1, "01": 1}'])
def test_a_json_class_map_with_a_repeated_or_aliased_id_is_refused(tmp_path, text):
    from aegis_data.errors import AegisError
    from aegis_eval.protocols.class_map import parse_class_map

    path = tmp_path / "map.json"
    path.write_text(text)
    with pytest.raises(AegisError, match=r"^\[class_map_syntax\] .* maps id 1 twice"):
        parse_class_map(str(path))
    with pytest.raises(AegisError, match="maps id 1 twice"):
        parse_class_map("1:2,2:1,01:1")
    path.write_text('{"1": 2, "2": 1}')
    assert dict(parse_class_map(str(path)).mapping) == {1: 2, 2: 1}


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


# --- 10. schedulers, score JSONs and RefCOCO conversions are one line -------------------------------------
@pytest.mark.parametrize("address,fragment", [("inproc://x", "in-process"), ("ucx://127.0.0.1:1", "UCX"),
                                              ("tls://127.0.0.1:1", "TLS needs client certificates")])
def test_unsupported_scheduler_schemes_are_one_line(tmp_path, yolo_split, address, fragment):
    src, out, _ = yolo_split
    r = invoke("build-splits", "--source", src, "--out", tmp_path / "o", "--dataset", "yolo", "--corruptions",
               "low_light", "--severities", "1", "--scheduler", address)
    assert_one_line_error(r, fragment)
    assert_one_line_error(invoke("verify", out, "--scheduler", address), fragment)


@pytest.mark.parametrize("edit,fragment", [("clean_null", "conditions['clean'] must be an object"),
                                           ("recall_text", "recall must be a number or null"),
                                           ("recall_bool", "recall must be a number or null"),
                                           ("label_list", "'label' must be a non-empty string")])
def test_rank_and_report_share_one_score_validator(tmp_path, score_json, edit, fragment):
    doc = json.loads(score_json.read_text())
    if edit == "clean_null":
        doc["conditions"]["clean"] = None
    elif edit == "recall_text":
        doc["conditions"]["clean"]["recall"] = "high"
    elif edit == "recall_bool":
        doc["conditions"]["clean"]["recall"] = True
    else:
        doc["label"] = ["x"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    assert_one_line_error(invoke("rank", score_json, bad), fragment)
    assert_one_line_error(invoke("report", bad, "--out", tmp_path / "r"), fragment)


@pytest.mark.parametrize("sentences", ["man", [None], [1]])
def test_convert_refs_with_malformed_sentences_is_one_line(tmp_path, sentences):
    refs = [{"ref_id": 7, "ann_id": 70, "image_id": 3, "split": "val", "sentences": sentences}]
    instances = {"images": [{"id": 3, "file_name": "x.jpg"}],
                 "annotations": [{"id": 70, "image_id": 3, "bbox": [1, 2, 3, 4]}]}
    (tmp_path / "refs.json").write_text(json.dumps(refs))
    (tmp_path / "inst.json").write_text(json.dumps(instances))
    r = invoke("convert-refs", tmp_path / "refs.json", "--instances", tmp_path / "inst.json", "--out",
               tmp_path / "o.json")
    assert_one_line_error(r, "sentences must be a list of objects")


# --- 11. RefCOCO image ids and file names, a remote cluster's paths ---------------------------------------
def test_convert_refs_refuses_an_image_mismatch_and_keeps_the_refs_file_name():
    from aegis_data.errors import AegisError
    from aegis_eval.protocols.referring import refs_from_refcoco

    ref = {"ref_id": 7, "ann_id": 70, "image_id": 3, "split": "val", "file_name": "COCO_3_7.jpg",
           "sentences": [{"sent_id": 100, "sent": "man in red"}]}
    instances = {"images": [{"id": 3, "file_name": "x.jpg"}, {"id": 4, "file_name": "y.jpg"}],
                 "annotations": [{"id": 70, "image_id": 3, "bbox": [1, 2, 3, 4]}]}
    assert refs_from_refcoco([ref], instances)["refs"][0]["file_name"] == "COCO_3_7.jpg"
    with pytest.raises(AegisError, match=r"^\[refcoco_image_mismatch\].*image 4.*image 3"):
        refs_from_refcoco([{**ref, "image_id": 4}], instances)


def test_a_relative_split_path_reaches_cluster_workers_resolved(yolo_split, monkeypatch):
    import aegis_data.split.verify as verify_mod

    src, out, _ = yolo_split
    seen = []
    monkeypatch.chdir(out.parent)
    real = verify_mod.hash_files
    monkeypatch.setattr(verify_mod, "hash_files", lambda root, items, **kw: (seen.append(root), real(root, items))[1])
    report = verify_mod.verify_split(Path(out.name), scheduler="tcp://127.0.0.1:8786")
    assert report.ok and seen == [out.resolve()]


def test_gt_diff_names_a_new_box_of_an_undeclared_category(tmp_path):
    cats = [{"id": 1, "name": "person"}]
    images = [{"id": 1, "file_name": "a.png"}]
    old = {"images": images, "categories": cats, "annotations": [{"id": 1, "image_id": 1, "category_id": 1,
                                                                   "bbox": [0, 0, 10, 10]}]}
    new = {"images": images, "categories": cats, "annotations": [{"id": 1, "image_id": 1, "category_id": 7,
                                                                   "bbox": [0, 0, 10, 10]}]}
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    r = invoke("gt-diff", tmp_path / "old.json", tmp_path / "new.json", "--json", tmp_path / "d.json")
    assert r.exit_code == 0, r.output
    assert "[undeclared_category]" in r.stderr and "category ids 7" in r.stderr
    split = next(iter(json.loads((tmp_path / "d.json").read_text())["splits"].values()))
    assert split["findings"][0]["side"] == "new" and split["findings"][0]["annotation_ids"] == [1]
    assert split["total"]["removed"] == 1  # still counted as the diff sees it, but no longer silently


@pytest.mark.parametrize("value", ["0", "-3", "nan", "1e9"])
def test_a_bad_scheduler_timeout_is_one_line_before_any_connection(tmp_path, value):
    r = invoke("build-splits", "--out", tmp_path / "o", "--n", "2", "--scheduler", "tcp://127.0.0.1:9",
               "--timeout", value)
    assert_one_line_error(r, "--timeout must be a number of seconds")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("command", ["predict", "train", "sweep", "ablate"])
def test_baseline_commands_check_their_output_folder_first(command, tmp_path):
    split = tmp_path / "split"
    (split / "annotations").mkdir(parents=True)
    (tmp_path / "afile").write_text("x")
    extra = ["--policies", "all"] if command == "ablate" else []
    inside = invoke("baseline", command, "--split-dir", split, "--out-dir", split / "results", *extra)
    assert_one_line_error(inside, "lies inside the input folder")
    a_file = invoke("baseline", command, "--split-dir", split, "--out-dir", tmp_path / "afile", *extra)
    assert_one_line_error(a_file, "must be a directory")
