"""The dataset audit (counts, sizes, bins, duplicates, leakage) and the ``aegis audit`` command."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.sources import load_source
from aegis_data.sources._dataset import build_dataset
from aegis_data.sources.audit import audit_dataset, box_statistics
from aegis_data.sources.records import Record

runner = CliRunner()


def write_image(path: Path, value: int, width: int = 40, height: int = 30) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    img = np.full((height, width, 3), value, np.uint8)
    assert cv2.imwrite(str(path), img)
    return path


def rec(image_id, split, boxes=(), w=100, h=80, group="", path="synthetic:none") -> Record:
    return Record(image_id, path, w, h, tuple(boxes), group=group, split=split)


def test_box_statistics_counts_quantiles_bins():
    records = [
        rec("a", "test", [(0, 0, 10, 10), (0, 0, 40, 40)]),
        rec("b", "test", [(0, 0, 100, 100)], w=100, h=100),
        rec("c", "test", [], w=64, h=48),
    ]
    s = box_statistics(records)
    assert (s["images"], s["boxes"], s["empty_images"]) == (3, 3, 1)
    assert s["empty_share"] == pytest.approx(1 / 3, abs=1e-6)
    assert s["size_bins"] == {"small": 1, "medium": 1, "large": 1}  # 100, 1600, 10000 px²
    assert s["box_width"]["p0"] == 10 and s["box_width"]["p100"] == 100 and s["box_width"]["p50"] == 40
    assert s["box_sqrt_area"]["p50"] == pytest.approx(40.0)
    assert s["resolutions"] == {"100x100": 1, "100x80": 1, "64x48": 1}
    assert box_statistics([])["box_width"] is None


def test_group_leakage_is_found():
    ds = build_dataset("t", {}, [rec("a", "test", group="seq1"), rec("b", "train", group="seq1"), rec("c", "val")])
    report = audit_dataset(ds, hash_files=False)
    assert report["leakage"] is True
    assert report["leakage_details"]["group_examples"] == [{"group": "seq1", "splits": ["test", "train"]}]
    assert report["duplicates"]["checked"] is False
    json.dumps(report)  # JSON-serialisable


def test_content_duplicates_within_and_across_splits(tmp_path: Path):
    a = write_image(tmp_path / "a.png", 10)
    shutil.copyfile(a, tmp_path / "a_copy.png")
    shutil.copyfile(a, tmp_path / "a_again.png")
    b = write_image(tmp_path / "b.png", 20)
    shutil.copyfile(b, tmp_path / "b_copy.png")
    records = [
        rec("a", "test", path=str(a)),
        rec("a_copy", "test", path=str(tmp_path / "a_copy.png")),
        rec("b", "test", path=str(b)),
        rec("b_copy", "train", path=str(tmp_path / "b_copy.png")),
    ]
    report = audit_dataset(build_dataset("t", {}, records))
    assert report["duplicates"]["sets"] == 2 and report["duplicates"]["images_in_sets"] == 4
    cross = report["leakage_details"]["duplicate_examples"]
    assert [d["images"] for d in cross] == [["b", "b_copy"]]
    assert report["leakage"] is True
    within = audit_dataset(build_dataset("t", {}, records[:3]))
    assert within["duplicates"]["sets"] == 1 and within["leakage"] is False


def test_synthetic_audit_has_no_leakage_and_both_size_bins():
    report = audit_dataset(load_source("synthetic", n=12, size="320"))
    assert report["leakage"] is False and report["duplicates"]["sets"] == 0
    assert report["all"]["images"] == 12 and report["all"]["empty_images"] == 2
    assert report["all"]["size_bins"]["small"] > 0 and report["all"]["size_bins"]["medium"] > 0


# --- CLI ---------------------------------------------------------------------------------------------------
def test_cli_audit_writes_json_and_prints_table(tmp_path: Path):
    out = tmp_path / "audit.json"
    result = runner.invoke(app, ["audit", "--dataset", "synthetic", "--n", "6", "--size", "256", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "audit of synthetic" in result.stdout and "leakage" in result.stdout
    report = json.loads(out.read_text())
    assert report["all"]["images"] == 6 and report["leakage"] is False
    assert report["source"]["adapter"] == "synthetic"


def test_cli_audit_exits_1_on_leakage(tmp_path: Path):
    import datasets

    ds_root = tmp_path / "hf"  # the same image in the train and test splits

    img = write_image(tmp_path / "x.png", 77)
    feats = datasets.Features(
        {
            "image": datasets.Image(),
            "objects": {
                "bbox": datasets.Sequence(datasets.Sequence(datasets.Value("float32"), length=4)),
                "category": datasets.Sequence(datasets.Value("int64")),
            },
        }
    )
    one = datasets.Dataset.from_dict({"image": [str(img)], "objects": [{"bbox": [], "category": []}]}, features=feats)
    datasets.DatasetDict({"train": one, "test": one}).save_to_disk(str(ds_root))
    result = runner.invoke(app, ["audit", "--dataset", "hf", "--source", str(ds_root)])
    assert result.exit_code == 1
    assert "leakage between splits" in result.stderr and "Traceback" not in result.output


@pytest.mark.parametrize(
    "args,message",
    [
        (["--dataset", "kitti", "--source", "."], "unknown dataset 'kitti'"),
        (["--dataset", "heridal", "--source", "/nonexistent/heridal"], "HERIDAL root not found"),
        (["--dataset", "heridal"], "needs a source"),
        (["--dataset", "synthetic", "--option", "sise=64"], "did you mean 'size'"),
        (["--dataset", "synthetic", "--option", "oops"], "not key=value"),
        (["--dataset", "coco", "--source", "."], "needs the option annotations"),
    ],
)
def test_cli_audit_errors_are_one_line(args, message):
    result = runner.invoke(app, ["audit", *args])
    assert result.exit_code == 1
    assert message in result.stderr
    assert "Traceback" not in result.output
    assert len([ln for ln in result.stderr.splitlines() if ln.strip()]) == 1


def test_cli_audit_missing_heridal_layout(tmp_path: Path):
    (tmp_path / "trainImages").mkdir()
    result = runner.invoke(app, ["audit", "--dataset", "heridal", "--source", str(tmp_path)])
    assert result.exit_code == 1 and "missing testImages/" in result.stderr


def test_cli_audit_help():
    result = runner.invoke(app, ["audit", "--help"])
    assert result.exit_code == 0 and "--dataset" in result.stdout and "leakage" in result.stdout
