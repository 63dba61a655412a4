"""Adversarial repros against the scoring protocols (aegis_eval/protocols): bounded threshold grids, numbers
beyond float64 and over-deep JSON in scorer inputs, class maps, RefCOCO conversions, gt-diff and the one score
validator. Numbers in the section titles follow the issue that listed them; shared inputs: tests/adversarial.py.
"""

from __future__ import annotations

import json

import pytest

from tests.adversarial import BIG, invoke, score_json, scoring_inputs, yolo_split  # noqa: F401 (fixtures)
from tests.conftest import assert_one_line_error


def test_score_refuses_provenance_from_an_edited_manifest(tmp_path, yolo_split):
    src, out, m = yolo_split
    m["dataset"] = "heridal"
    (out / "manifest.json").write_text(json.dumps(m))
    preds = tmp_path / "p.json"
    preds.write_text("[]")
    assert_one_line_error(invoke("score", preds, "--split-dir", out, "--threshold", "0.5"), "manifest_invalid")


def test_a_huge_threshold_grid_is_refused_with_its_size(tmp_path, scoring_inputs):
    gt, preds = scoring_inputs
    r = invoke("freeze-threshold", preds, "--split-dir", gt, "--out", tmp_path / "t.json", "--grid", "0:1:1e-12")
    assert_one_line_error(r, "1e+12 points", "100,001")
    r = invoke("freeze-threshold", preds, "--split-dir", gt, "--out", tmp_path / "t.json", "--grid", "0:1:0.00001")
    assert r.exit_code == 0, r.output


# --- 4. one-line errors -------------------------------------------------------------------------------------
def test_freeze_threshold_on_an_empty_prediction_list(tmp_path, scoring_inputs):
    gt, preds = scoring_inputs
    preds.write_text("[]")
    r = invoke("freeze-threshold", preds, "--split-dir", gt, "--out", tmp_path / "t.json")
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "t.json").read_text())["metrics"]["tp"] == 0


# The strict JSON reader refuses such numbers while parsing; the loaders' own checks stay for in-memory input.
@pytest.mark.parametrize("field,code", [("bbox", "json_number_overflow"), ("score", "json_number_overflow")])
def test_prediction_numbers_beyond_float64_are_findings(tmp_path, scoring_inputs, field, code):
    gt, preds = scoring_inputs
    entry = '{"image_id": 1, "category_id": 1, "bbox": %s, "score": %s}' % (  # noqa: UP031 (JSON braces)
        f"[1, 1, {BIG}, 5]" if field == "bbox" else "[1, 1, 5, 5]",
        BIG if field == "score" else "0.5",
    )
    preds.write_text(f"[{entry}]")
    r = invoke("score", preds, "--split-dir", gt, "--threshold", "0.5", "--bootstrap", "1")
    assert_one_line_error(r, code)
    assert len(r.stderr) < 400  # the 401-digit number is not echoed in full


def test_threshold_file_value_beyond_float64_is_a_finding(tmp_path, scoring_inputs):
    gt, preds = scoring_inputs
    t = tmp_path / "t.json"
    t.write_text('{"schema": "aegis-threshold/1", "value": %s}' % BIG)  # noqa: UP031 (JSON braces)
    assert_one_line_error(invoke("score", preds, "--split-dir", gt, "--threshold-file", t), "json_number_overflow")


def test_gt_bbox_beyond_float64_is_a_finding(tmp_path, scoring_inputs):
    gt, preds = scoring_inputs
    doc = json.loads(gt.read_text())
    doc["annotations"][0]["bbox"] = [1, 1, 5, 5]
    text = json.dumps(doc).replace('"bbox": [1, 1, 5, 5]', f'"bbox": [1, 1, {BIG}, 5]', 1)
    (tmp_path / "gt.json").write_text(text)
    assert_one_line_error(
        invoke("score", preds, "--split-dir", tmp_path / "gt.json", "--threshold", "0.5"), "json_number_overflow"
    )


@pytest.mark.parametrize("what", ["predictions", "threshold", "score"])
def test_over_deep_json_is_one_line(tmp_path, scoring_inputs, score_json, what):
    gt, preds = scoring_inputs
    deep = "[" * 100_000 + "]" * 100_000
    if what == "predictions":
        preds.write_text(deep)
        r = invoke("score", preds, "--split-dir", gt, "--threshold", "0.5")
    elif what == "threshold":
        (tmp_path / "t.json").write_text(deep)
        r = invoke("score", preds, "--split-dir", gt, "--threshold-file", tmp_path / "t.json")
    else:
        score_json.write_text(deep)
        r = invoke("report", score_json, "--out-dir", tmp_path / "r")
    assert_one_line_error(r, "json_too_deep")


def test_in_memory_numbers_beyond_float64_are_findings_too():
    """Input that never went through the JSON reader (a caller's dicts) meets the loaders' own checks."""
    from aegis_data.errors import AegisError
    from aegis_eval.protocols.predictions import ground_truth_from_coco

    coco = {
        "images": [{"id": 1, "file_name": "a.png", "width": 10, "height": 10}],
        "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 1, 10**400, 2]}],
        "categories": [{"id": 1, "name": "person"}],
    }
    with pytest.raises(AegisError, match="gt_bbox_invalid"):
        ground_truth_from_coco(coco)


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


@pytest.mark.parametrize(
    "edit,fragment",
    [
        ("clean_null", "conditions['clean'] must be an object"),
        ("recall_text", "recall must be a number or null"),
        ("recall_bool", "recall must be a number or null"),
        ("label_list", "'label' must be a non-empty string"),
    ],
)
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
    assert_one_line_error(invoke("report", bad, "--out-dir", tmp_path / "r"), fragment)


@pytest.mark.parametrize("sentences", ["man", [None], [1]])
def test_convert_refs_with_malformed_sentences_is_one_line(tmp_path, sentences):
    refs = [{"ref_id": 7, "ann_id": 70, "image_id": 3, "split": "val", "sentences": sentences}]
    instances = {
        "images": [{"id": 3, "file_name": "x.jpg"}],
        "annotations": [{"id": 70, "image_id": 3, "bbox": [1, 2, 3, 4]}],
    }
    (tmp_path / "refs.json").write_text(json.dumps(refs))
    (tmp_path / "inst.json").write_text(json.dumps(instances))
    r = invoke(
        "convert-refs", tmp_path / "refs.json", "--instances", tmp_path / "inst.json", "--out", tmp_path / "o.json"
    )
    assert_one_line_error(r, "sentences must be a list of objects")


# --- 11. RefCOCO image ids and file names, a remote cluster's paths ---------------------------------------
def test_convert_refs_refuses_an_image_mismatch_and_keeps_the_refs_file_name():
    from aegis_data.errors import AegisError
    from aegis_eval.protocols.referring import refs_from_refcoco

    ref = {
        "ref_id": 7,
        "ann_id": 70,
        "image_id": 3,
        "split": "val",
        "file_name": "COCO_3_7.jpg",
        "sentences": [{"sent_id": 100, "sent": "man in red"}],
    }
    instances = {
        "images": [{"id": 3, "file_name": "x.jpg"}, {"id": 4, "file_name": "y.jpg"}],
        "annotations": [{"id": 70, "image_id": 3, "bbox": [1, 2, 3, 4]}],
    }
    assert refs_from_refcoco([ref], instances)["refs"][0]["file_name"] == "COCO_3_7.jpg"
    with pytest.raises(AegisError, match=r"^\[refcoco_image_mismatch\].*image 4.*image 3"):
        refs_from_refcoco([{**ref, "image_id": 4}], instances)


def test_gt_diff_names_a_new_box_of_an_undeclared_category(tmp_path):
    cats = [{"id": 1, "name": "person"}]
    images = [{"id": 1, "file_name": "a.png"}]
    old = {
        "images": images,
        "categories": cats,
        "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 10, 10]}],
    }
    new = {
        "images": images,
        "categories": cats,
        "annotations": [{"id": 1, "image_id": 1, "category_id": 7, "bbox": [0, 0, 10, 10]}],
    }
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    r = invoke("gt-diff", tmp_path / "old.json", tmp_path / "new.json", "--json", tmp_path / "d.json")
    assert r.exit_code == 0, r.output
    assert "[undeclared_category]" in r.stderr and "category ids 7" in r.stderr
    split = next(iter(json.loads((tmp_path / "d.json").read_text())["splits"].values()))
    assert split["findings"][0]["side"] == "new" and split["findings"][0]["annotation_ids"] == [1]
    assert split["total"]["removed"] == 1  # still counted as the diff sees it, but no longer silently
