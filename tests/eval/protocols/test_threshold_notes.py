"""Issue 31: a threshold at the detector's score floor is explained (lowest score named, a grid suggested), and the
threshold's warnings and validation size travel into the threshold file and the score JSON (docs/SCORE_JSON.md)."""

from __future__ import annotations

import json

import pytest

from aegis_data.errors import AegisError
from aegis_eval.api import freeze_threshold as api_freeze
from aegis_eval.api import score
from aegis_eval.protocols.score_doc import validate_result
from aegis_eval.protocols.threshold import freeze_threshold, parse_grid
from tests.adversarial import build_yolo, yolo_source
from tests.eval.protocols.test_threshold import gt_and_dets


def test_a_threshold_at_the_score_floor_names_the_lowest_score_and_a_grid():
    # The case: a detector exporting nothing below 0.05; max-f1 ties from 0 to 0.05 go to 0.
    gt, dets = gt_and_dets(3, [0.9, 0.4, 0.05], [0.05])
    frozen = freeze_threshold(gt, dets)
    assert frozen.value == 0.0
    (warning,) = frozen.warnings
    assert warning.startswith("[threshold_at_score_floor]") and "lowest score is 0.05" in warning
    assert "threshold_on_grid_edge" not in warning  # extending the grid below 0 cannot help
    suggested = warning.split("`grid` ")[1].split(" ")[0]
    assert parse_grid(suggested)[0] == 0.0 and parse_grid(suggested)[-1] >= 0.05 and len(parse_grid(suggested)) > 5


def test_a_lowest_grid_edge_above_the_floor_suggests_a_finer_grid_reaching_the_scores():
    gt, dets = gt_and_dets(3, [0.9, 0.4, 0.12], [0.02])
    frozen = freeze_threshold(gt, dets, grid=[0.1, 0.5, 0.9])
    (warning,) = frozen.warnings
    assert warning.startswith("[threshold_on_grid_edge]") and "down to 0.02" in warning
    grid = parse_grid(warning.split("`grid` ")[1].rstrip(")"))
    assert grid[0] <= 0.02 and grid[-1] >= 0.1


def test_an_interior_choice_has_no_warning():
    gt, dets = gt_and_dets(4, [0.9, 0.8, 0.7], [0.85, 0.2])
    assert freeze_threshold(gt, dets, grid=[0.1, 0.5, 0.75, 0.95]).warnings == ()


@pytest.fixture
def val_split(tmp_path):
    src = yolo_source(tmp_path / "src", n=6)
    out = tmp_path / "split"
    build_yolo(src, out, "--option", "val_fraction=0.34")
    val = json.loads((out / "annotations" / "val.json").read_text())
    assert len(val["images"]) == 2
    ids = [im["id"] for im in val["images"]]
    # A detector with a 0.05 score floor whose best F1 keeps every box: threshold 0 (issue 31).
    rows = [{"image_id": i, "category_id": 1, "bbox": [18, 12, 12, 8], "score": s} for i, s in zip(ids, (0.9, 0.05))]
    rows.append({"image_id": ids[1], "category_id": 1, "bbox": [1, 1, 5, 5], "score": 0.05})
    preds = tmp_path / "val_preds.json"
    preds.write_text(json.dumps(rows))
    test_preds = tmp_path / "clean.json"
    test_preds.write_text(json.dumps([{"image_id": 1, "category_id": 1, "bbox": [18, 12, 12, 8], "score": 0.9}]))
    return out, preds, test_preds


def test_the_threshold_file_and_the_score_json_carry_validation_n_and_warnings(tmp_path, val_split):
    split, preds, test_preds = val_split
    thr = tmp_path / "threshold.json"
    api_freeze(preds, split, out=thr)
    doc = json.loads(thr.read_text())
    assert doc["validation"] == {"n_images": 2, "n_gt": 2}
    assert doc["warnings"] and doc["warnings"][0].startswith("[threshold_at_score_floor]")
    result = score(test_preds, split, threshold_file=thr, bootstrap=1).document
    assert result["threshold"]["validation"] == {"n_images": 2, "n_gt": 2}
    assert result["threshold"]["warnings"] == doc["warnings"]
    validate_result(result)
    # A threshold value instead of a file: nothing is known, nothing is written.
    plain = score(test_preds, split, threshold=0.5, bootstrap=1).document
    assert "validation" not in plain["threshold"] and "warnings" not in plain["threshold"]


def test_per_class_files_carry_them_per_class_and_in_total(tmp_path, val_split):
    split, preds, test_preds = val_split
    thr = tmp_path / "threshold.json"
    api_freeze(preds, split, out=thr, classes="all")
    doc = json.loads(thr.read_text())
    assert doc["validation"] == {"n_images": 2, "n_gt": 2}
    assert doc["per_class"]["person"]["validation"] == {"n_images": 2, "n_gt": 2}
    result = score(test_preds, split, threshold_file=thr, classes="all", bootstrap=1).document
    assert result["threshold"]["validation"] == {"n_images": 2, "n_gt": 2}
    assert result["threshold"]["warnings"][0].startswith("person: [threshold_at_score_floor]")


def test_an_older_threshold_file_without_them_leaves_both_out(tmp_path, val_split):
    split, preds, test_preds = val_split
    thr = tmp_path / "threshold.json"
    api_freeze(preds, split, out=thr)
    doc = json.loads(thr.read_text())
    del doc["validation"]
    thr.write_text(json.dumps(doc))
    block = score(test_preds, split, threshold_file=thr, bootstrap=1).document["threshold"]
    assert "validation" not in block and "warnings" not in block


@pytest.mark.parametrize(
    "notes",
    [
        {"validation": {"n_images": -1, "n_gt": 2}},
        {"validation": {"n_images": 2}},
        {"validation": [2, 2]},
        {"warnings": "[threshold_on_grid_edge]"},
        {"warnings": [1]},
    ],
)
def test_the_score_doc_validator_checks_them(tmp_path, val_split, notes):
    split, preds, test_preds = val_split
    doc = score(test_preds, split, threshold=0.5, bootstrap=1).document
    doc["threshold"].update(notes)
    with pytest.raises(AegisError, match="threshold.(validation|warnings)"):
        validate_result(doc)
