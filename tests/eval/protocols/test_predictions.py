"""Loading COCO ground truth and COCO-results predictions: every validation finding, id resolution
(integer ids, string stems, Ultralytics numeric stems), category offsets and warnings."""

from __future__ import annotations

import json

import numpy as np
import pytest

from aegis_data.errors import AegisError
from aegis_eval.protocols.predictions import (
    detections_from_results,
    ground_truth_from_coco,
    load_ground_truth,
    load_predictions,
)

PERSON = [{"id": 1, "name": "person"}]


def coco(images, anns=(), categories=PERSON):
    return {"images": list(images), "annotations": list(anns), "categories": list(categories)}


def img(i, name=None, **extra):
    return {"id": i, "file_name": name or f"img_{i:03d}.png", "width": 64, "height": 48, **extra}


def ann(k, image_id, bbox, cat=1, **extra):
    return {"id": k, "image_id": image_id, "category_id": cat, "bbox": bbox, **extra}


@pytest.fixture
def gt():
    return ground_truth_from_coco(
        coco(
            [img(3), img(1), img(2)],
            [ann(1, 1, [0, 0, 10, 10]), ann(2, 3, [5, 5, 10, 20], area=150.0), ann(3, 1, [20, 20, 4, 4])],
        )
    )


def det(image_id, bbox=(0, 0, 10, 10), score=0.9, cat=1, **extra):
    return {"image_id": image_id, "category_id": cat, "bbox": list(bbox), "score": score, **extra}


def error_of(fn, *args) -> str:
    with pytest.raises(AegisError) as info:
        fn(*args)
    msg = str(info.value)
    assert "\n" not in msg
    return msg


# --- ground truth --------------------------------------------------------------------------------------
def test_ground_truth_rows_sorted_by_id_and_boxes_grouped(gt):
    assert gt.image_ids.tolist() == [1, 2, 3]
    assert gt.file_names == ("img_001.png", "img_002.png", "img_003.png")
    assert gt.box_image.tolist() == [0, 0, 2]
    assert gt.boxes[:2].tolist() == [[0, 0, 10, 10], [20, 20, 4, 4]]  # file order kept inside an image
    assert gt.areas.tolist() == [100.0, 16.0, 150.0]  # area field wins; w*h when absent
    assert gt.category_id == 1 and gt.n_images == 3 and gt.n_boxes == 3


def test_ground_truth_keeps_person_only_and_extra_attributes():
    g = ground_truth_from_coco(
        coco(
            [img(1, group="seq7")],
            [ann(1, 1, [0, 0, 5, 5]), ann(2, 1, [0, 0, 9, 9], cat=2)],
            [{"id": 2, "name": "car"}, {"id": 1, "name": "Person"}],
        )
    )
    assert g.n_boxes == 1 and g.attributes[0] == {"group": "seq7"}
    single = ground_truth_from_coco(coco([img(1)], [ann(1, 1, [0, 0, 5, 5], cat=7)], [{"id": 7, "name": "human"}]))
    assert single.category_id == 7 and single.n_boxes == 1


@pytest.mark.parametrize(
    "doc, code",
    [
        ([1, 2], "gt_wrong_type"),
        ({"images": []}, "gt_missing_key"),
        (coco([img(1)], categories=[{"id": 1, "name": "car"}, {"id": 2, "name": "bus"}]), "gt_no_person_category"),
        (coco([img(1), img(1)]), "gt_duplicate_image_id"),
        (coco([{"id": "a"}]), "gt_image_id_type"),
        (coco([img(1)], [ann(1, 9, [0, 0, 1, 1])]), "gt_unknown_image"),
        (coco([img(1)], [ann(1, 1, [0, 0, -1, 1])]), "gt_bbox_invalid"),
        (coco([img(1)], [{"id": 1, "image_id": 1, "category_id": 1}]), "gt_missing_key"),
        (coco([img(1, width="wide")]), "gt_image_size"),
        (coco([img(2**70)]), "gt_image_id_type"),
        (coco([img(1)], [ann(1, [1], [0, 0, 1, 1])]), "gt_unknown_image"),
        (coco([img(1)], [ann("a", 1, [0, 0, 1, 1])]), "gt_annotation_id"),
    ],
)
def test_ground_truth_findings(doc, code):
    assert f"[{code}]" in error_of(ground_truth_from_coco, doc)


def test_load_ground_truth_from_file_and_split_dir(tmp_path):
    f = tmp_path / "gt.json"
    f.write_text(json.dumps(coco([img(1)], [ann(1, 1, [0, 0, 5, 5])])))
    g = load_ground_truth(f)
    assert g.source["path"] == str(f) and len(g.source["sha256"]) == 64 and g.source.get("dataset") is None

    root = tmp_path / "split"
    (root / "annotations").mkdir(parents=True)
    (root / "annotations" / "val.json").write_text(json.dumps(coco([img(1), img(2)])))
    (root / "manifest.json").write_text(
        json.dumps({"dataset": "synthetic", "config_hash": "abc123", "root_hash": "f" * 64})
    )
    g = load_ground_truth(root, split="val")
    assert g.n_images == 2
    assert (g.source["dataset"], g.source["config_hash"], g.source["manifest_root_hash"]) == (
        "synthetic",
        "abc123",
        "f" * 64,
    )
    assert "[gt_not_found]" in error_of(load_ground_truth, root, "test")
    assert "[gt_not_found]" in error_of(load_ground_truth, tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"images": [')
    msg = error_of(load_ground_truth, bad)
    assert "[gt_not_json]" in msg and "truncated" in msg


@pytest.mark.parametrize("scale", ["object", 5, [1, 2], True])
def test_a_manifest_scale_that_is_not_an_object_is_one_line(tmp_path, scale):
    root = tmp_path / "split"
    (root / "annotations").mkdir(parents=True)
    (root / "annotations" / "val.json").write_text(json.dumps(coco([img(1)])))
    manifest = {"dataset": "synthetic", "config_hash": "abc123", "root_hash": "f" * 64}
    (root / "manifest.json").write_text(json.dumps(dict(manifest, scale=scale)))
    assert "[manifest_invalid]" in error_of(load_ground_truth, root, "val") and "'scale' must be an object" in error_of(
        load_ground_truth, root, "val"
    )
    unit = {"mode": "object", "person_px": 24.0}
    (root / "manifest.json").write_text(json.dumps(dict(manifest, scale=unit)))
    assert load_ground_truth(root, "val").source["scale"] == unit  # what provenance records


# --- predictions: formats ----------------------------------------------------------------------------------
def test_results_list_and_wrapped_form_and_empty(gt):
    dets = detections_from_results([det(1), det(3, (1, 2, 3, 4), 0.25)], gt)
    assert dets.det_image.tolist() == [0, 2]
    assert dets.boxes.tolist() == [[0, 0, 10, 10], [1, 2, 3, 4]]
    assert dets.scores.tolist() == [0.9, 0.25]
    assert dets.source["warnings"] == []
    wrapped = detections_from_results({"annotations": [det(2)]}, gt)
    assert wrapped.det_image.tolist() == [1]
    empty = detections_from_results([], gt)
    assert empty.n == 0 and empty.boxes.shape == (0, 4)


def test_load_predictions_records_hash(gt, tmp_path):
    f = tmp_path / "clean.json"
    f.write_text(json.dumps([det(1)]))
    dets = load_predictions(f, gt)
    assert dets.source["path"] == str(f) and len(dets.source["sha256"]) == 64 and dets.n == 1


# --- predictions: findings -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, code",
    [
        ('[{"image_id": 1, ', "not_json"),
        ("not json at all", "not_json"),
        ("42", "wrong_type"),
        ('{"predictions": []}', "wrong_type"),
        ("[[1, 2, 3]]", "entry_type"),
    ],
)
def test_file_level_findings(gt, tmp_path, text, code):
    f = tmp_path / "p.json"
    f.write_text(text)
    assert f"[{code}]" in error_of(load_predictions, f, gt)


def test_truncated_file_says_so(gt, tmp_path):
    f = tmp_path / "p.json"
    f.write_text(json.dumps([det(1), det(2)])[:-7])
    assert "truncated" in error_of(load_predictions, f, gt)


def test_missing_file_and_directory(gt, tmp_path):
    assert "[not_found]" in error_of(load_predictions, tmp_path / "missing.json", gt)
    assert "[wrong_type]" in error_of(load_predictions, tmp_path, gt)


def test_missing_key_names_key_and_first_index(gt):
    entries = [det(1), {"image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1]}, {"image_id": 1}]
    msg = error_of(detections_from_results, entries, gt)
    assert "[missing_key]" in msg and "entry 1" in msg and "'score'" in msg and "2 entries" in msg


@pytest.mark.parametrize(
    "entry, code, fragment",
    [
        (det(1, bbox=(0, 0, float("nan"), 5)), "bbox_nonfinite", "entry 1"),
        (det(1, bbox=(0, 0, float("inf"), 5)), "bbox_nonfinite", "entry 1"),
        (det(1, bbox=(0, 0, -3, 5)), "bbox_negative", "entry 1"),
        (det(1, bbox=(0, 0, 5)), "bbox_invalid", "entry 1"),
        ({**det(1), "bbox": ["0", 0, 5, 5]}, "bbox_invalid", "entry 1"),
        ({**det(1), "bbox": None}, "bbox_invalid", "entry 1"),
        (det(1, score=1.5), "score_out_of_range", "entry 1"),
        (det(1, score=-0.01), "score_out_of_range", "entry 1"),
        (det(1, score=float("nan")), "score_out_of_range", "entry 1"),
        (det(1, score="0.5"), "score_not_numeric", "entry 1"),
        (det(1, score=True), "score_not_numeric", "entry 1"),
        (det(1, cat="1"), "category_invalid", "entry 1"),
        (det(1, cat=2**70), "category_invalid", "entry 1"),
        (det(2**70), "image_id_unknown", "1 detections"),
        (det(1.0), "image_id_type", "entry 1"),
        (det(None), "image_id_type", "entry 1"),
    ],
)
def test_entry_findings(gt, entry, code, fragment):
    msg = error_of(detections_from_results, [det(1), entry], gt)
    assert f"[{code}]" in msg and fragment in msg


def test_nan_from_json_text_is_caught(gt, tmp_path):
    f = tmp_path / "p.json"
    f.write_text('[{"image_id": 1, "category_id": 1, "bbox": [0, 0, NaN, 4], "score": 0.5}]')
    msg = error_of(load_predictions, f, gt)  # refused by the reader: NaN is not JSON
    assert "[json_nonfinite]" in msg and str(f) in msg


def test_unknown_image_ids_reports_count_and_first_few(gt):
    entries = [det(1), det(99), det(99), det("ghost"), det(77), det(55)]
    msg = error_of(detections_from_results, entries, gt)
    assert "[image_id_unknown]" in msg and "5 detections" in msg and "4 image ids" in msg
    assert "99" in msg and "'ghost'" in msg


def test_unknown_category_is_refused(gt):
    msg = error_of(detections_from_results, [det(1, cat=5)], gt)
    assert "[category_unknown]" in msg and "5" in msg


def test_zero_based_single_class_is_accepted_and_mixed_is_refused(gt):
    dets = detections_from_results([det(1, cat=0), det(2, cat=0)], gt)
    assert dets.n == 2 and dets.source["category_offset"] == 1
    assert any("[category_zero_based]" in w for w in dets.source["warnings"])
    assert "[category_mixed]" in error_of(detections_from_results, [det(1, cat=0), det(2, cat=1)], gt)


def test_other_gt_categories_are_dropped_with_a_warning():
    g = ground_truth_from_coco(
        coco([img(1)], [ann(1, 1, [0, 0, 5, 5])], [{"id": 1, "name": "person"}, {"id": 3, "name": "car"}])
    )
    dets = detections_from_results([det(1), det(1, cat=3)], g)
    assert dets.n == 1
    assert any("[category_other]" in w for w in dets.source["warnings"])


def test_duplicates_and_zero_size_boxes_warn(gt):
    dets = detections_from_results([det(1), det(1), det(2, bbox=(0, 0, 0, 5))], gt)
    assert dets.n == 3
    joined = " ".join(dets.source["warnings"])
    assert "[duplicate_detection] 1 detections" in joined and "[bbox_degenerate] 1 boxes" in joined


# --- id resolution -----------------------------------------------------------------------------------------
def test_string_stems_resolve_through_file_names(gt):
    dets = detections_from_results([det("img_002"), det("img_003"), det(1)], gt)
    assert dets.det_image.tolist() == [1, 2, 0]


def test_ultralytics_numeric_stems_resolve_as_ints():
    g = ground_truth_from_coco(coco([img(1, "000123.png"), img(2, "000456.png"), img(3, "frame_a.jpg")]))
    dets = detections_from_results([det(123), det(456), det("frame_a"), det("000456")], g)
    assert dets.det_image.tolist() == [0, 1, 2, 1]


def test_id_that_is_an_id_and_another_images_numeric_stem_is_ambiguous():
    g = ground_truth_from_coco(coco([img(1, "2.png"), img(2, "7.png")]))
    msg = error_of(detections_from_results, [det(2)], g)
    assert "[image_id_ambiguous]" in msg and "2.png" in msg and "7.png" in msg
    # An Ultralytics file_name settles it.
    dets = detections_from_results([det(2, file_name="2.jpg"), det(1)], g)
    assert dets.det_image.tolist() == [0, 0]
    # An id equal to its own image's numeric stem is not ambiguous.
    same = ground_truth_from_coco(coco([img(5, "5.png")]))
    assert detections_from_results([det(5)], same).det_image.tolist() == [0]


def test_superscript_digits_are_no_numeric_stem():
    g = ground_truth_from_coco(coco([img(1, "².png"), img(2, "7.png")]))  # "²".isdigit() is True, int("²") fails
    assert detections_from_results([det("²"), det("7"), det(7)], g).det_image.tolist() == [0, 1, 1]


def test_numeric_stem_clash_is_ambiguous():
    g = ground_truth_from_coco(coco([img(10, "1.png"), img(20, "01.png")]))
    assert "[image_id_ambiguous]" in error_of(detections_from_results, [det(1)], g)


def test_ultralytics_predictions_json_end_to_end(tmp_path):
    """The format `ultralytics val save_json=True` writes: stem ids (int when numeric), file_name, 1-based class."""
    g = ground_truth_from_coco(
        coco(
            [img(1, "000000.png"), img(2, "000001.png"), img(3, "gss0042.png")],
            [ann(1, 1, [0, 0, 10, 10]), ann(2, 3, [5, 5, 8, 8])],
        )
    )
    preds = [
        {"image_id": 0, "file_name": "000000.jpg", "category_id": 1, "bbox": [0.0, 0.0, 10.0, 10.0], "score": 0.91234},
        {"image_id": 1, "file_name": "000001.jpg", "category_id": 1, "bbox": [1.5, 2.0, 3.0, 4.0], "score": 0.1},
        {"image_id": "gss0042", "file_name": "gss0042.jpg", "category_id": 1, "bbox": [5, 5, 8, 8], "score": 0.7},
    ]
    f = tmp_path / "predictions.json"
    f.write_text(json.dumps(preds))
    dets = load_predictions(f, g)
    # id 1 is both GT id 1 (000000.png) and the numeric stem of 000001.png: file_name settles it.
    assert dets.det_image.tolist() == [0, 1, 2]
    zero_based = [{**p, "category_id": 0} for p in preds]
    f.write_text(json.dumps(zero_based))
    assert load_predictions(f, g).n == 3
    np.testing.assert_array_equal(load_predictions(f, g).scores, [0.91234, 0.1, 0.7])


def test_without_file_name_the_same_ultralytics_ids_are_refused(tmp_path):
    g = ground_truth_from_coco(coco([img(1, "000000.png"), img(2, "000001.png")]))
    msg = error_of(detections_from_results, [det(0), det(1)], g)
    assert "[image_id_ambiguous]" in msg


def test_gt_annotation_id_zero_is_flagged():
    flagged = ground_truth_from_coco(coco([img(1)], [ann(0, 1, [0, 0, 5, 5]), ann(1, 1, [9, 9, 5, 5])]))
    assert any("[gt_annotation_id_zero]" in w for w in flagged.warnings)
    clean = ground_truth_from_coco(coco([img(1)], [ann(1, 1, [0, 0, 5, 5])]))
    assert clean.warnings == ()


def _gt_outcome(coco):
    try:
        gt = ground_truth_from_coco(coco)
    except AegisError as exc:
        return str(exc)
    return [gt.box_image.tolist(), gt.boxes.tolist(), gt.areas.tolist(), gt.iscrowd.tolist(), gt.ann_ids.tolist()]


@pytest.mark.parametrize(
    "change",
    [
        None,
        ("bbox", [1, 2.5, 3, 4]),
        ("bbox", [1, 2, -3, 4]),
        ("bbox", [1, 2, 3]),
        ("bbox", [1, 2, True, 4]),
        ("bbox", [1, 2, 10**400, 4]),
        ("bbox", "1,2,3,4"),
        ("area", None),
        ("area", "12"),
        ("area", 10**400),
        ("area", True),
        ("id", None),
        ("id", 2**70),
        ("id", 0),
        ("image_id", 99),
        ("image_id", True),
        ("iscrowd", 1),
        ("iscrowd", "no"),
        ("category_id", 2),
        ("category_id", 1.0),
        ("category_id", None),
        ("drop", "id"),
        ("drop", "area"),
        ("drop", "bbox"),
        ("drop", "category_id"),
        ("not an object", None),
        ("category_id", [1]),
        ("category_id", {"id": 1}),
    ],
)
def test_gt_fast_path_matches_the_per_annotation_checks(monkeypatch, change):
    """Well-formed annotations are read one key at a time; whatever the data, the result (or the refusal
    message) is the one the per-annotation checks give."""
    import aegis_eval.protocols.predictions as predictions

    coco = {
        "images": [{"id": i, "file_name": f"f{i}.png", "width": 100, "height": 80} for i in (1, 2)],
        "annotations": [
            {
                "id": k + 1,
                "image_id": 1 + k % 2,
                "category_id": 1 + (k == 3),
                "bbox": [k, 2 * k, 10.5, 7],
                "area": 70.0 + k,
                "iscrowd": 0,
            }
            for k in range(6)
        ],
        "categories": [{"id": 1, "name": "person"}, {"id": 2, "name": "car"}],
    }
    if change is not None:
        key, value = change
        if key == "drop":
            del coco["annotations"][2][value]
        elif key == "not an object":
            coco["annotations"][2] = [1, 2, 3, 4]
        else:
            coco["annotations"][2][key] = value
    fast = _gt_outcome(coco)
    monkeypatch.setattr(predictions, "_gt_boxes_well_formed", lambda *args: None)
    slow = _gt_outcome(coco)
    assert fast == slow
    if change is not None and change[0] == "category_id" and isinstance(change[1], (list, dict)):
        assert fast.startswith("[gt_bad_category]") and "annotations[2].category_id must be an integer" in fast
