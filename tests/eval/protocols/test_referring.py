"""Referring detection: P@θ with the strict IoU > θ rule (IoU exactly at θ is wrong), mP, splits, missing
predictions counted wrong, duplicate ids refused, bootstrap intervals, RefCOCO-style conversion and the CLI."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.errors import AegisError
from aegis_eval.metrics.bootstrap import BootstrapOptions
from aegis_eval.protocols.referring import (
    parse_ref_predictions,
    parse_refs,
    refs_from_refcoco,
    score_referring,
    score_referring_paths,
)
from tests.conftest import assert_one_line_error


def refs_doc() -> dict:
    """Six expressions, all with the GT box [0, 0, 10, 10]; three per split, two per image."""
    return {
        "schema": "aegis-refs/1",
        "refs": [
            {
                "ref_id": k + 1,
                "image_id": k // 2,
                "bbox": [0, 0, 10, 10],
                "expression": f"person {k}",
                "split": "testA" if k < 3 else "testB",
            }
            for k in range(6)
        ],
    }


def preds_doc() -> list[dict]:
    """Heights 5..9 of a 10-wide box at the origin: IoU exactly 0.5, 0.6, 0.7, 0.8, 0.9; expression 6 missing."""
    return [{"ref_id": k + 1, "bbox": [0, 0, 10, 5 + k], "score": 0.9} for k in range(5)]


def test_p_at_theta_is_strict_and_missing_counts_wrong():
    refs = parse_refs(refs_doc())
    boxes, predicted = parse_ref_predictions(preds_doc(), refs["ids"])
    result = score_referring(refs, boxes, predicted, bootstrap=BootstrapOptions(n_bootstrap=1))
    o = result["overall"]
    # IoU > 0.5 holds for 0.6..0.9 (four), > 0.6 for three, > 0.7 for two, > 0.8 for one
    assert (o["p_at_50"], o["p_at_60"], o["p_at_70"], o["p_at_80"]) == (4 / 6, 3 / 6, 2 / 6, 1 / 6)
    assert o["mp"] == pytest.approx(10 / 24)
    assert o["mean_iou"] == pytest.approx((0.5 + 0.6 + 0.7 + 0.8 + 0.9) / 6)
    assert (o["n_refs"], o["n_predicted"], o["n_missing"]) == (6, 5, 1)
    assert result["missing"] == ["6"]
    a, b = result["splits"]["testA"], result["splits"]["testB"]
    assert a["p_at_50"] == 2 / 3 and a["p_at_70"] == 0.0  # IoUs 0.5, 0.6, 0.7: only 0.6 and 0.7 pass 0.5
    assert b["p_at_50"] == 2 / 3 and b["p_at_80"] == 1 / 3 and b["n_missing"] == 1
    assert o["ci"]["mp"] == [o["mp"], o["mp"]]  # B = 1: the point estimate


def test_bootstrap_intervals_are_seeded_and_can_resample_images():
    refs = parse_refs(refs_doc())
    boxes, predicted = parse_ref_predictions(preds_doc(), refs["ids"])
    options = BootstrapOptions(n_bootstrap=300, seed=9)
    one = score_referring(refs, boxes, predicted, bootstrap=options)
    again = score_referring(refs, boxes, predicted, bootstrap=options)
    assert one == again
    lo, hi = one["overall"]["ci"]["p_at_50"]
    assert 0.0 <= lo < 4 / 6 < hi <= 1.0
    by_image = score_referring(refs, boxes, predicted, bootstrap=options, cluster_by="image_id")
    assert by_image["overall"]["ci"] != one["overall"]["ci"]
    with pytest.raises(AegisError, match=r"^\[referring_cluster\]"):
        score_referring(refs, boxes, predicted, bootstrap=options, cluster_by="group")


@pytest.mark.parametrize(
    "doc, code",
    [
        ({"refs": [{"ref_id": 12, "bbox": [0, 0, 1, 1]}, {"ref_id": "12", "bbox": [0, 0, 1, 1]}]}, "refs_duplicate_id"),
        ({"refs": []}, "refs_wrong_type"),
        ([], "refs_wrong_type"),
        ({"refs": [{"ref_id": 1}]}, "refs_missing_key"),
        ({"refs": [{"ref_id": 1.5, "bbox": [0, 0, 1, 1]}]}, "refs_id_type"),
        ({"refs": [{"ref_id": 1, "bbox": [0, 0, -1, 1]}]}, "refs_bbox_invalid"),
    ],
)
def test_ground_truth_refusals(doc, code):
    with pytest.raises(AegisError, match=rf"^\[{code}\]"):
        parse_refs(doc)


@pytest.mark.parametrize(
    "preds, code",
    [
        ([{"ref_id": 1, "bbox": [0, 0, 1, 1]}, {"ref_id": "1", "bbox": [0, 0, 2, 2]}], "ref_pred_duplicate"),
        ([{"ref_id": 99, "bbox": [0, 0, 1, 1]}], "ref_pred_unknown"),
        ([{"ref_id": 1, "bbox": [0, 0, float("nan"), 1]}], "ref_pred_bbox_invalid"),
        ([{"bbox": [0, 0, 1, 1]}], "ref_pred_missing_key"),
        ({"boxes": []}, "ref_pred_wrong_type"),
    ],
)
def test_prediction_refusals(preds, code):
    with pytest.raises(AegisError, match=rf"^\[{code}\]"):
        parse_ref_predictions(preds, parse_refs(refs_doc())["ids"])


def test_refcoco_conversion():
    refs = [
        {
            "ref_id": 7,
            "ann_id": 70,
            "image_id": 3,
            "split": "val",
            "sentences": [{"sent_id": 100, "sent": "man in red"}, {"sent_id": 101, "sent": "left man"}],
        }
    ]
    instances = {"images": [{"id": 3, "file_name": "x.jpg"}], "annotations": [{"id": 70, "bbox": [1, 2, 3, 4]}]}
    doc = refs_from_refcoco(refs, instances)
    assert [r["ref_id"] for r in doc["refs"]] == [100, 101]
    assert doc["refs"][0] == {
        "ref_id": 100,
        "image_id": 3,
        "bbox": [1, 2, 3, 4],
        "expression": "man in red",
        "split": "val",
        "ref": 7,
        "ann_id": 70,
        "file_name": "x.jpg",
    }
    with pytest.raises(AegisError, match=r"^\[refcoco_unknown_ann\]"):
        refs_from_refcoco([{**refs[0], "ann_id": 5}], instances)


def test_cli_referring(tmp_path):
    refs, preds = tmp_path / "refs.json", tmp_path / "preds.json"
    refs.write_text(json.dumps(refs_doc()))
    preds.write_text(json.dumps(preds_doc()))
    out = tmp_path / "ref_score.json"
    runner = CliRunner()
    res = runner.invoke(
        app,
        ["score", "--task", "referring", str(preds), "--split-dir", str(refs), "--bootstrap", "50", "--json", str(out)],
    )
    assert res.exit_code == 0, res.output
    assert "testA" in res.output and "[ref_pred_missing] 1 expressions" in res.stderr
    doc = json.loads(out.read_text())
    assert doc["schema"] == "aegis-referring/1" and doc["overall"]["p_at_50"] == pytest.approx(4 / 6)
    fresh = score_referring_paths(preds, refs, bootstrap=50)  # the CLI calls the library, nothing more
    assert {k: v for k, v in fresh.items() if k != "provenance"} == {k: v for k, v in doc.items() if k != "provenance"}
    base = ["score", "--task", "referring", str(preds), "--split-dir", str(refs)]
    assert_one_line_error(runner.invoke(app, base + ["--threshold", "0.5"]), "[referring_option]")
    assert_one_line_error(
        runner.invoke(app, ["score", "--task", "ranking", str(preds), "--split-dir", str(refs)]), "[task_unknown]"
    )
    dup = tmp_path / "dup.json"
    dup.write_text(json.dumps(preds_doc() + [{"ref_id": 1, "bbox": [0, 0, 1, 1]}]))
    assert_one_line_error(
        runner.invoke(app, ["score", "--task", "referring", str(dup), "--split-dir", str(refs)]), "[ref_pred_duplicate]"
    )
    # RefCOCO-style refs converted on the command line
    rc, inst, conv = tmp_path / "rc.json", tmp_path / "inst.json", tmp_path / "conv.json"
    rc.write_text(json.dumps([{"ref_id": 1, "ann_id": 2, "image_id": 3, "sentences": [{"sent_id": 4, "sent": "a"}]}]))
    inst.write_text(json.dumps({"images": [], "annotations": [{"id": 2, "bbox": [0, 0, 5, 5]}]}))
    res = runner.invoke(app, ["convert-refs", str(rc), "--instances", str(inst), "--out", str(conv)])
    assert res.exit_code == 0, res.output
    assert json.loads(conv.read_text())["refs"][0]["ref_id"] == 4
