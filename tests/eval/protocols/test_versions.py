"""Cross-version re-scoring: the same predictions against several GT versions, the matrix, and paired
bootstrap intervals of the differences (one resampling of images for every version)."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.errors import AegisError
from aegis_eval.metrics.bootstrap import BootstrapOptions, percentile_interval
from aegis_eval.protocols.predictions import detections_from_results, ground_truth_from_coco
from aegis_eval.protocols.versions import version_names
from tests.conftest import assert_one_line_error
from tests.eval.protocols.scoring_memory import score_conditions_with_samples, score_paths, score_versions


def version_one(n: int = 12) -> dict:
    images = [{"id": i + 1, "file_name": f"f{i}.png", "width": 200, "height": 200} for i in range(n)]
    anns = [
        {
            "id": k + 1,
            "image_id": k // 2 + 1,
            "category_id": 1,
            "bbox": [10.0 + 60 * (k % 2), 20.0, 30.0, 40.0],
            "area": 1200.0,
        }
        for k in range(2 * n)
    ]
    return {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "person"}]}


def version_two() -> dict:
    """Version one with four boxes removed and one added per odd image (a revised labelling)."""
    doc = copy.deepcopy(version_one())
    doc["annotations"] = [a for a in doc["annotations"] if a["id"] not in (1, 4, 7, 10)]
    extra = [
        {"id": 100 + i, "image_id": i, "category_id": 1, "bbox": [150.0, 150.0, 20.0, 20.0], "area": 400.0}
        for i in range(1, 13, 2)
    ]
    doc["annotations"] += extra
    return doc


def predictions() -> list[dict]:
    rng = np.random.default_rng([3, 7])
    rows = []
    for a in version_one()["annotations"]:
        if rng.random() < 0.8:
            rows.append(
                {
                    "image_id": a["image_id"],
                    "category_id": 1,
                    "bbox": [a["bbox"][0] + 1, 20.0, 30.0, 40.0],
                    "score": round(float(rng.uniform(0.4, 1)), 3),
                }
            )
    rows += [{"image_id": i, "category_id": 1, "bbox": [100.0, 120.0, 20.0, 20.0], "score": 0.45} for i in (2, 5, 9)]
    return rows


@pytest.fixture()
def files(tmp_path):
    v1, v2, preds = tmp_path / "v1.json", tmp_path / "v2.json", tmp_path / "clean.json"
    v1.write_text(json.dumps(version_one()))
    v2.write_text(json.dumps(version_two()))
    preds.write_text(json.dumps(predictions()))
    return {"v1": v1, "v2": v2, "preds": preds, "root": tmp_path}


def test_matrix_and_paired_differences(files):
    result = score_versions(files["preds"], [files["v1"], files["v2"]], threshold=0.5, bootstrap=80, seed=4)
    block = result["versions"]
    assert block["reference"] == "v1" and list(block["gt"]) == ["v1", "v2"]
    assert list(result)[-2:] == ["versions", "provenance"]
    single = {v: score_paths(files["preds"], files[v], threshold=0.5, bootstrap=80, seed=4) for v in ("v1", "v2")}
    assert result["conditions"] == single["v1"]["conditions"]  # the document is the reference's score
    for v in ("v1", "v2"):
        for m in ("map50", "recall", "precision", "tp", "n_gt"):
            assert block["matrix"]["clean"][v][m] == single[v]["conditions"]["clean"][m]
    diff = block["differences"]["v2"]["clean"]
    assert diff["recall"]["value"] == pytest.approx(
        single["v2"]["conditions"]["clean"]["recall"] - single["v1"]["conditions"]["clean"]["recall"]
    )
    # the interval is that of per-resample differences over the same image rows
    options = BootstrapOptions(n_bootstrap=80, seed=4)
    samples = {}
    for v in ("v1", "v2"):
        gt = ground_truth_from_coco(json.loads(files[v].read_text()))
        dets = detections_from_results(predictions(), gt)
        samples[v] = score_conditions_with_samples(gt, {"clean": dets}, 0.5, bootstrap=options)[1]["clean"]
    for m in ("recall", "precision", "map50"):
        expected = percentile_interval(samples["v2"][m] - samples["v1"][m])
        assert diff[m]["ci"] == pytest.approx(list(expected)), m


def test_identical_versions_differ_by_exactly_zero(files):
    twin = files["root"] / "twin.json"
    twin.write_text(files["v1"].read_text())
    result = score_versions(files["preds"], [files["v1"], twin], threshold=0.5, bootstrap=50)
    # unpaired intervals would have width; paired ones are a point
    assert result["versions"]["differences"]["twin"]["clean"]["recall"] == {"value": 0.0, "ci": [0.0, 0.0]}


def test_version_refusals(files):
    other = version_one(10)
    path = files["root"] / "fewer.json"
    path.write_text(json.dumps(other))
    with pytest.raises(AegisError, match=r"^\[versions_images_differ\].*2 only in 'v1'"):
        score_versions(files["preds"], [files["v1"], path], threshold=0.5, bootstrap=1)
    with pytest.raises(AegisError, match=r"^\[versions_too_few\]"):
        score_versions(files["preds"], [files["v1"]], threshold=0.5)
    assert version_names(["a/v.json", "b/v.json", "c/w.json"]) == ["v#1", "v#2", "w"]


def test_cli_two_gt_versions(files):
    runner = CliRunner()
    out = files["root"] / "score.json"
    res = runner.invoke(
        app,
        [
            "score",
            str(files["preds"]),
            "--split-dir",
            str(files["v1"]),
            "--split-dir",
            str(files["v2"]),
            "--threshold",
            "0.5",
            "--bootstrap",
            "20",
            "--json",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "GT versions" in res.output and "Δ v2" in res.output
    assert set(json.loads(out.read_text())["versions"]["differences"]) == {"v2"}
    fewer = files["root"] / "fewer.json"
    fewer.write_text(json.dumps(version_one(10)))
    res = runner.invoke(
        app,
        [
            "score",
            str(files["preds"]),
            "--split-dir",
            str(files["v1"]),
            "--split-dir",
            str(fewer),
            "--threshold",
            "0.5",
            "--bootstrap",
            "1",
        ],
    )
    assert_one_line_error(res, "[versions_images_differ]")


def test_one_file_twice_with_the_remap_on_the_second(tmp_path):
    """SULAND's fix: the same OOD labels as they are and with the inverted class ids swapped back."""
    from aegis_eval.protocols.class_map import parse_class_map
    from tests.eval.protocols.test_multiclass import two_class_doc, two_class_preds

    gt, preds = tmp_path / "ood.json", tmp_path / "clean.json"
    gt.write_text(json.dumps(two_class_doc(inverted=True)))
    preds.write_text(json.dumps(two_class_preds()))
    cmap = parse_class_map("0:1,1:0", "gt")
    result = score_versions(
        preds, [gt, gt], threshold=0.5, bootstrap=30, classes="all", class_map=cmap, remap_versions=[2]
    )
    block = result["versions"]
    assert list(block["gt"]) == ["ood#1", "ood#2"]
    assert block["gt"]["ood#1"]["class_map"] is None and block["gt"]["ood#2"]["class_map"]["mapping"] == {
        "0": 1,
        "1": 0,
    }
    assert block["matrix"]["clean"]["ood#1"]["map50"] == 0.0 and block["matrix"]["clean"]["ood#2"]["map50"] == 1.0
    assert block["differences"]["ood#2"]["clean"]["map50"]["value"] == 1.0
    with pytest.raises(AegisError, match=r"^\[class_map_versions\]"):
        score_versions(preds, [gt, gt], threshold=0.5, class_map=cmap, remap_versions=[3])
    with pytest.raises(AegisError, match=r"^\[class_map_versions\]"):
        score_versions(preds, [gt, gt], threshold=0.5, remap_versions=[1])
    runner = CliRunner()
    res = runner.invoke(
        app,
        [
            "score",
            str(preds),
            "--split-dir",
            str(gt),
            "--split-dir",
            str(gt),
            "--threshold",
            "0.5",
            "--bootstrap",
            "5",
            "--classes",
            "all",
            "--class-map",
            "0:1,1:0",
            "--remap-version",
            "2",
        ],
    )
    assert res.exit_code == 0, res.output
    assert_one_line_error(
        runner.invoke(app, ["score", str(preds), "--split-dir", str(gt), "--threshold", "0.5", "--remap-version", "1"]),
        "[class_map_versions]",
    )
