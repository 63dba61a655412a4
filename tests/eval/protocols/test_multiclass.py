"""Multi-class scoring (``--classes``) and class remaps (``--class-map``): pycocotools parity per class and for
the mean, macro definitions, one-class equivalence with the single-class scorer, per-class and shared
thresholds, and a class-inverted GT fixed by a remap."""

from __future__ import annotations

import contextlib
import copy
import io
import json

import numpy as np
import pytest
from numpy.random import PCG64, Generator
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.errors import AegisError
from aegis_eval.metrics.bootstrap import BootstrapOptions
from aegis_eval.metrics.result_keys import AP_METRICS
from aegis_eval.protocols.class_map import parse_class_map, remap_ground_truth, remap_predictions
from aegis_eval.protocols.predictions import (
    detections_by_class,
    detections_from_results,
    ground_truth_by_class,
    ground_truth_from_coco,
)
from aegis_eval.protocols.scoring import csv_columns, score_json_bytes, write_score_csv
from aegis_eval.protocols.threshold import (
    freeze_threshold,
    freeze_thresholds_by_class,
    read_class_thresholds,
    read_threshold_file,
    write_class_threshold_file,
)
from tests.conftest import assert_one_line_error
from tests.eval.protocols.scoring_memory import score_conditions, score_conditions_by_class, score_paths

ONE = BootstrapOptions(n_bootstrap=1)


def random_dataset(key: int, n_classes: int) -> tuple[dict, list[dict]]:
    """COCO GT with ``n_classes`` categories (the last sometimes without any GT) and noisy predictions."""
    rng = Generator(PCG64([key, 11]))
    n_img = int(rng.integers(2, 9))
    images = [{"id": 100 + 3 * i, "file_name": f"im{i}.png", "width": 640, "height": 480} for i in range(n_img)]
    anns, preds = [], []
    empty_class = n_classes if key % 3 == 0 else None
    for im in images:
        for c in range(1, n_classes + 1):
            n_gt = 0 if c == empty_class else int(rng.integers(0, 5))
            for _ in range(n_gt):
                side = float(rng.choice([8.0, 25.0, 50.0, 130.0]))
                x, y = (float(v) for v in rng.uniform(0, 400, 2))
                box = [round(x, 1), round(y, 1), side, round(side * rng.uniform(0.6, 1.5), 1)]
                anns.append(
                    {
                        "id": len(anns) + 1,
                        "image_id": im["id"],
                        "category_id": c,
                        "bbox": box,
                        "area": box[2] * box[3],
                        "iscrowd": 0,
                    }
                )
                if rng.random() < 0.8:
                    jit = rng.normal(0, 0.08, 4) * [box[2], box[3], box[2], box[3]]
                    # some detections carry the wrong class, so classes interact only through the GT file
                    cat = c if rng.random() < 0.85 else int(rng.integers(1, n_classes + 1))
                    preds.append(
                        {
                            "image_id": im["id"],
                            "category_id": cat,
                            "bbox": [round(float(b + j), 2) for b, j in zip(box, jit)],
                            "score": round(float(rng.uniform(0.05, 1.0)), 2 if key % 2 else 6),
                        }
                    )
            for _ in range(int(rng.integers(0, 3))):
                preds.append(
                    {
                        "image_id": im["id"],
                        "category_id": c,
                        "bbox": [float(rng.uniform(0, 500)), float(rng.uniform(0, 400)), 30.0, 30.0],
                        "score": round(float(rng.uniform(0, 0.8)), 3),
                    }
                )
    cats = [{"id": c, "name": f"class{c}"} for c in range(1, n_classes + 1)]
    return {"images": images, "annotations": anns, "categories": cats}, preds


def pycocotools_stats(gt_doc: dict, preds: list[dict], cat_ids: list[int] | None) -> np.ndarray:
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO()
        coco_gt.dataset = copy.deepcopy(gt_doc)
        coco_gt.createIndex()
        coco_dt = coco_gt.loadRes(copy.deepcopy(preds)) if preds else COCO()
        ev = COCOeval(coco_gt, coco_dt, "bbox")
        if cat_ids is not None:
            ev.params.catIds = cat_ids
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return np.asarray(ev.stats[:6])


@pytest.mark.parametrize("key", range(24))
def test_per_class_and_mean_ap_equal_pycocotools(key):
    n_classes = 2 + key % 4
    gt_doc, preds = random_dataset(key, n_classes)
    gts = ground_truth_by_class(gt_doc, {}, "all")
    dets = detections_by_class(preds, gts)
    result = score_conditions_by_class(gts, {"clean": dets}, {c: 0.5 for c in gts}, bootstrap=ONE)
    for name, gt in gts.items():
        ours = np.array([result["classes"][name]["conditions"]["clean"][m] for m in AP_METRICS])
        ref = pycocotools_stats(gt_doc, preds, [gt.category_id])
        np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-10, err_msg=f"{name}: ours {ours} ref {ref}")
    macro = np.array([result["conditions"]["clean"][m] for m in AP_METRICS])
    ref = pycocotools_stats(gt_doc, preds, None)
    np.testing.assert_allclose(macro, ref, rtol=0, atol=1e-10, err_msg=f"mean: ours {macro} ref {ref}")


def test_macro_entry_definitions():
    gt_doc, preds = random_dataset(5, 3)
    gts = ground_truth_by_class(gt_doc, {}, "class1,class3")
    assert list(gts) == ["class1", "class3"]
    dets = detections_by_class(preds, gts)
    thresholds = {"class1": 0.3, "class3": 0.6}
    result = score_conditions_by_class(
        gts, {"clean": dets, "low_light_s1": dets}, thresholds, bootstrap=BootstrapOptions(n_bootstrap=40, seed=2)
    )
    per = [result["classes"][c]["conditions"]["clean"] for c in gts]
    macro = result["conditions"]["clean"]
    for m in ("precision", "recall", "f1", "map50"):
        assert macro[m] == pytest.approx(np.mean([e[m] for e in per])), m
    for k in ("tp", "fp", "fn", "n_gt"):
        assert macro[k] == sum(e[k] for e in per)
    assert macro["fp_per_image"] == pytest.approx(macro["fp"] / macro["n_images"])
    assert result["threshold"]["value"] is None and result["threshold"]["per_class"] == thresholds
    assert result["classes"]["class3"]["threshold"] == 0.6
    # identical predictions in two conditions: zero drop, zero-width paired interval, full localization
    assert macro["rel_drop"]["recall"] == 0.0
    assert result["conditions"]["low_light_s1"]["ci_drop"]["recall"] == [0.0, 0.0]
    assert result["conditions"]["low_light_s1"]["localization"]["n_matched"] == macro["tp"]
    lo, hi = macro["ci"]["recall"]
    assert lo <= macro["recall"] <= hi
    fa = result["false_alarm"]["conditions"]["clean"]
    assert fa["fp"] == macro["fp"] and fa["n_images"] == macro["n_images"]


def test_one_class_equals_the_single_class_scorer():
    gt_doc, preds = random_dataset(4, 2)
    gt_doc["categories"][0]["name"] = "person"
    single_gt = ground_truth_from_coco(gt_doc)
    single_dets = detections_from_results([p for p in preds if p["category_id"] == 1], single_gt)
    options = BootstrapOptions(n_bootstrap=30, seed=5)
    single = score_conditions(single_gt, {"clean": single_dets}, 0.4, bootstrap=options)
    gts = ground_truth_by_class(gt_doc, {}, "person")
    multi = score_conditions_by_class(
        gts, {"clean": detections_by_class(preds, gts)}, {"person": 0.4}, bootstrap=options
    )
    for key in ("conditions", "summary", "false_alarm"):
        assert score_json_bytes(multi[key]) == score_json_bytes(single[key]), key
        assert score_json_bytes(multi["classes"]["person"][key]) == score_json_bytes(single[key]), key


def test_per_class_and_shared_thresholds(tmp_path):
    gt_doc, preds = random_dataset(7, 3)
    gts = ground_truth_by_class(gt_doc, {}, "all")
    dets = detections_by_class(preds, gts)
    per_class = freeze_thresholds_by_class(gts, dets, mode="per-class")
    for c, gt in gts.items():
        assert per_class.per_class[c].value == freeze_threshold(gt, dets[c]).value
    shared = freeze_thresholds_by_class(gts, dets, mode="shared")
    assert len(set(shared.values().values())) == 1 and shared.pooled is not None
    # the shared rule sees all classes' counts added: its val TP count is the per-class sum at that value
    assert shared.pooled.metrics["tp"] == sum(f.metrics["tp"] for f in shared.per_class.values())
    preds_path, gt_path = tmp_path / "val.json", tmp_path / "gt.json"
    preds_path.write_text(json.dumps(preds))
    gt_path.write_text(json.dumps(gt_doc))
    write_class_threshold_file(per_class, tmp_path / "t.json", preds_path, gt_path)
    values, info = read_class_thresholds(tmp_path / "t.json", list(gts))
    assert values == per_class.values() and info["class_thresholds"] == "per-class"
    with pytest.raises(AegisError, match=r"^\[threshold_per_class\]"):
        read_threshold_file(tmp_path / "t.json")
    with pytest.raises(AegisError, match=r"^\[threshold_class_missing\]"):
        read_class_thresholds(tmp_path / "t.json", ["class1", "zebra"])
    write_class_threshold_file(shared, tmp_path / "s.json", preds_path, gt_path)
    assert read_threshold_file(tmp_path / "s.json")[0] == shared.pooled.value
    with pytest.raises(AegisError, match=r"^\[threshold_class_mode\]"):
        freeze_thresholds_by_class(gts, dets, mode="each")


# --- class remaps ---------------------------------------------------------------------------------------------
def two_class_doc(inverted: bool) -> dict:
    """Two mine types on 4 images; ``inverted`` swaps the class ids of every annotation (a labelling bug)."""
    images = [{"id": i + 1, "file_name": f"m{i}.png", "width": 100, "height": 100} for i in range(4)]
    anns = []
    for i in range(4):
        for c, x in ((0, 5.0), (1, 50.0)):
            anns.append(
                {
                    "id": len(anns) + 1,
                    "image_id": i + 1,
                    "category_id": (1 - c) if inverted else c,
                    "bbox": [x, 10.0, 20.0, 20.0],
                    "area": 400.0,
                }
            )
    return {
        "images": images,
        "annotations": anns,
        "categories": [{"id": 0, "name": "anti_personnel"}, {"id": 1, "name": "anti_tank"}],
    }


def two_class_preds() -> list[dict]:
    return [
        {"image_id": i + 1, "category_id": c, "bbox": [x, 10.0, 20.0, 20.0], "score": 0.9}
        for i in range(4)
        for c, x in ((0, 5.0), (1, 50.0))
    ]


def test_a_class_inverted_gt_is_fixed_by_the_remap(tmp_path):
    gt_path, preds_path = tmp_path / "ood.json", tmp_path / "clean.json"
    gt_path.write_text(json.dumps(two_class_doc(inverted=True)))
    preds_path.write_text(json.dumps(two_class_preds()))
    broken = score_paths(preds_path, gt_path, threshold=0.5, bootstrap=1, classes="all")
    assert broken["conditions"]["clean"]["map50"] == 0.0 and broken["conditions"]["clean"]["recall"] == 0.0
    cmap = parse_class_map("0:1,1:0", "gt")
    fixed = score_paths(preds_path, gt_path, threshold=0.5, bootstrap=1, classes="all", class_map=cmap)
    assert fixed["conditions"]["clean"]["map50"] == 1.0 and fixed["conditions"]["clean"]["recall"] == 1.0
    assert fixed["provenance"]["class_map"] == {
        "side": "gt",
        "mapping": {"0": 1, "1": 0},
        "allow_merge": False,
        "text": "0:1,1:0",
    }
    assert "class_map" not in broken["provenance"]
    # the same fix from the prediction side
    fixed_preds = score_paths(
        preds_path, gt_path, threshold=0.5, bootstrap=1, classes="all", class_map=parse_class_map("0:1,1:0", "preds")
    )
    assert fixed_preds["conditions"]["clean"]["recall"] == 1.0


def test_remap_refusals_and_merges(tmp_path):
    doc = two_class_doc(inverted=False)
    with pytest.raises(AegisError, match=r"^\[class_map_unmapped\].*\[1\]"):
        remap_ground_truth(doc, parse_class_map("0:1", "gt", allow_merge=True), "gt")
    with pytest.raises(AegisError, match=r"^\[class_map_merge\].*\[0, 1\]"):
        remap_ground_truth(doc, parse_class_map("0:1,1:1", "gt"), "gt")
    merged = remap_ground_truth(doc, parse_class_map("0:1,1:1", "gt", allow_merge=True), "gt")
    assert {a["category_id"] for a in merged["annotations"]} == {1}
    assert {a["category_id"] for a in doc["annotations"]} == {0, 1}  # the caller's dict is untouched
    with pytest.raises(AegisError, match=r"^\[class_map_unknown_target\]"):
        remap_ground_truth(doc, parse_class_map("0:7,1:0", "gt"), "gt")
    for bad in ("0-1", "a:b", "", "0:1,0:2"):
        with pytest.raises(AegisError, match=r"^\[class_map_syntax\]"):
            parse_class_map(bad)
    with pytest.raises(AegisError, match=r"^\[class_map_side\]"):
        parse_class_map("0:1", "both")
    preds = two_class_preds() + [{"image_id": 1, "category_id": True, "bbox": [0, 0, 1, 1], "score": 0.5}]
    out = remap_predictions(preds, parse_class_map("0:1,1:0", "preds"), "p")
    assert out[0]["category_id"] == 1 and out[-1]["category_id"] is True  # JSON true is left for the loader
    mapping_file = tmp_path / "map.json"
    mapping_file.write_text(json.dumps({"0": 1, "1": 0}))
    from_file = parse_class_map(str(mapping_file), "gt")
    assert dict(from_file.mapping) == {0: 1, 1: 0} and len(from_file.record()["sha256"]) == 64


def test_multiclass_input_refusals():
    gt_doc, preds = random_dataset(1, 2)
    with pytest.raises(AegisError, match=r"^\[classes_unknown\]"):
        ground_truth_by_class(gt_doc, {}, "class1,zebra")
    gts = ground_truth_by_class(gt_doc, {}, "all")
    with pytest.raises(AegisError, match=r"^\[category_unknown\].*`class_map`"):
        detections_by_class([{**p, "category_id": p["category_id"] - 1} for p in preds], gts)
    dup = copy.deepcopy(gt_doc)
    dup["categories"][1]["name"] = "class1"
    with pytest.raises(AegisError, match=r"^\[gt_duplicate_category_name\]"):
        ground_truth_by_class(dup, {}, "all")


def test_cli_classes_and_class_map(tmp_path):
    gt_path, preds_dir = tmp_path / "ood.json", tmp_path / "preds"
    preds_dir.mkdir()
    gt_path.write_text(json.dumps(two_class_doc(inverted=True)))
    (preds_dir / "clean.json").write_text(json.dumps(two_class_preds()))
    runner = CliRunner()
    out = tmp_path / "s.json"
    res = runner.invoke(
        app,
        [
            "score",
            str(preds_dir),
            "--split-dir",
            str(gt_path),
            "--threshold",
            "0.5",
            "--bootstrap",
            "5",
            "--classes",
            "all",
            "--class-map",
            "0:1,1:0",
            "--json",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "per class" in res.output
    doc = json.loads(out.read_text())
    assert set(doc["classes"]) == {"anti_personnel", "anti_tank"} and doc["conditions"]["clean"]["recall"] == 1.0
    base = ["score", str(preds_dir), "--split-dir", str(gt_path), "--threshold", "0.5", "--bootstrap", "1"]
    assert_one_line_error(runner.invoke(app, base + ["--classes", "zebra"]), "[classes_unknown]")
    assert_one_line_error(
        runner.invoke(app, base + ["--classes", "all", "--class-map", "0:1,1:1"]), "[class_map_merge]"
    )
    assert_one_line_error(runner.invoke(app, base + ["--remap-side", "preds"]), "[class_map_missing]")
    # per-class thresholds frozen on validation, then applied per class
    tfile = tmp_path / "t.json"
    res = runner.invoke(
        app,
        [
            "freeze-threshold",
            str(preds_dir / "clean.json"),
            "--split-dir",
            str(gt_path),
            "--out",
            str(tfile),
            "--classes",
            "all",
            "--class-map",
            "0:1,1:0",
            "--grid",
            "0.5,0.95",
        ],
    )
    assert res.exit_code == 0, res.output
    frozen_doc = json.loads(tfile.read_text())
    assert frozen_doc["per_class"]["anti_tank"]["value"] == 0.5
    assert frozen_doc["class_map"]["mapping"] == {"0": 1, "1": 0} and frozen_doc["class_thresholds"] == "per-class"
    assert_one_line_error(
        runner.invoke(
            app,
            [
                "freeze-threshold",
                str(preds_dir / "clean.json"),
                "--split-dir",
                str(gt_path),
                "--class-thresholds",
                "shared",
            ],
        ),
        "[threshold_class_mode]",
    )
    res = runner.invoke(
        app,
        [
            "score",
            str(preds_dir),
            "--split-dir",
            str(gt_path),
            "--threshold-file",
            str(tfile),
            "--bootstrap",
            "1",
            "--classes",
            "all",
            "--class-map",
            "0:1,1:0",
        ],
    )
    assert res.exit_code == 0, res.output
    assert_one_line_error(
        runner.invoke(
            app,
            ["score", str(preds_dir), "--split-dir", str(gt_path), "--threshold-file", str(tfile), "--bootstrap", "1"],
        ),
        "[threshold_per_class]",
    )


def test_multiclass_csv_has_macro_and_per_class_rows(tmp_path):
    gt_doc, preds = random_dataset(2, 2)
    gts = ground_truth_by_class(gt_doc, {}, "all")
    dets = detections_by_class(preds, gts)
    result = score_conditions_by_class(
        gts, {"clean": dets, "low_light_s2": dets}, {"class1": 0.2, "class2": 0.6}, bootstrap=ONE
    )
    path = tmp_path / "s.csv"
    write_score_csv(result, path)
    import csv

    with path.open() as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == csv_columns(result) and csv_columns(result)[0] == "class"
    assert [(r["class"], r["condition"]) for r in rows] == [
        ("macro", "clean"),
        ("macro", "low_light_s2"),
        ("class1", "clean"),
        ("class1", "low_light_s2"),
        ("class2", "clean"),
        ("class2", "low_light_s2"),
    ]
    assert rows[4]["threshold"] == "0.6" and rows[0]["threshold"] == ""  # per-class thresholds: no shared value
    assert float(rows[2]["recall"]) == pytest.approx(result["classes"]["class1"]["conditions"]["clean"]["recall"])
    assert "class" not in csv_columns()  # single-class CSVs keep their columns
