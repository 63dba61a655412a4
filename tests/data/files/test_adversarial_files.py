"""Adversarial repros against the files room (aegis_data/files): outputs are checked before any work, never
replace or land inside an input, a full disk is one line and leaves no temp file, special files are skipped.
Numbers in the section titles follow the issue that listed them; shared inputs: tests/adversarial.py.
"""

from __future__ import annotations

import errno
import os
import shutil

import pytest

from tests.adversarial import YOLO_BUILD, invoke, scoring_inputs, yolo_source, yolo_split  # noqa: F401 (fixtures)
from tests.conftest import assert_one_line_error


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
        "score": ("score", preds, "--split-dir", gt, "--threshold", "0.5", "--bootstrap", "1", "--json", target),
        "freeze-threshold": ("freeze-threshold", preds, "--split-dir", gt, "--out", target),
        "verify": ("verify", out, "--json", target),
        "audit": ("audit", "--dataset", "yolo", "--source", src, "--json", target),
        "build-splits": (
            "build-splits",
            "--source",
            src,
            *YOLO_BUILD,
            "--out-dir",
            tmp_path / "afile" / "out" if how == "parent-is-file" else tmp_path / "afile",
        ),
        "report": (
            "report",
            score_json,
            "--out-dir",
            tmp_path / "afile" if how == "folder" else tmp_path / "afile" / "r",
        ),
    }[cmd]
    if cmd == "report":
        assert (
            invoke(
                "score", preds, "--split-dir", gt, "--threshold", "0.5", "--bootstrap", "1", "--json", score_json
            ).exit_code
            == 0
        )
    assert_one_line_error(
        invoke(*args), "afile" if (how == "parent-is-file" or cmd in ("build-splits", "report")) else "afolder"
    )


def test_disk_full_is_one_line_naming_the_path_and_free_space(tmp_path, monkeypatch, scoring_inputs):
    import aegis_data.files.imageio as imageio

    gt, preds = scoring_inputs

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(imageio.os, "fsync", full)
    r = invoke("freeze-threshold", preds, "--split-dir", gt, "--out", tmp_path / "t.json", "--grid", "0.5")
    assert_one_line_error(r, "no space left", str(tmp_path / "t.json"), "MB free")
    assert not list(tmp_path.glob(".t.json.*"))  # no temp file left behind


# --- 8. special files in a predictions folder ---------------------------------------------------------------
def test_a_fifo_in_a_predictions_folder_is_skipped(tmp_path, scoring_inputs):
    gt, preds = scoring_inputs
    folder = tmp_path / "preds"
    folder.mkdir()
    shutil.copyfile(preds, folder / "clean.json")
    os.mkfifo(folder / "low_light_s1.json")
    r = invoke("score", folder, "--split-dir", gt, "--threshold", "0.5", "--bootstrap", "1")
    assert r.exit_code == 0, r.output
    assert "not_a_regular_file" in r.stderr
    r = invoke("score", folder / "low_light_s1.json", "--split-dir", gt, "--threshold", "0.5")
    assert_one_line_error(r, "not a regular file")


# --- 9. an output never replaces an input -------------------------------------------------------------------
@pytest.mark.parametrize("which", ["preds", "gt", "csv-json"])
def test_outputs_never_replace_inputs(tmp_path, scoring_inputs, which):
    gt, preds = scoring_inputs
    before = {p: p.read_bytes() for p in (gt, preds)}
    extra = {
        "preds": ("--json", preds),
        "gt": ("--json", gt),
        "csv-json": ("--csv", tmp_path / "f", "--json", tmp_path / "f"),
    }[which]
    r = invoke("score", preds, "--split-dir", gt, "--threshold", "0.5", "--bootstrap", "1", *extra)
    assert_one_line_error(r, "--json" if which != "csv-json" else "both name")
    assert {p: p.read_bytes() for p in (gt, preds)} == before


def test_disk_full_while_writing_images_is_one_line(tmp_path, monkeypatch):
    import aegis_data.files.imageio as imageio

    src = yolo_source(tmp_path / "src")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(imageio.os, "fsync", full)
    r = invoke("build-splits", "--source", src, "--out-dir", tmp_path / "out", *YOLO_BUILD)
    assert_one_line_error(r, "no space left", "MB free")
    monkeypatch.undo()
    assert not list((tmp_path / "out").rglob("*.tmp"))


def test_folder_outputs_never_land_inside_an_input_folder(tmp_path, yolo_split):
    src, out, _ = yolo_split
    r = invoke("export-hf", out, "--out-dir", out / "hf")
    assert_one_line_error(r, "lies inside the input folder")
    assert invoke("verify", out).exit_code == 0  # nothing was written into the split


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
