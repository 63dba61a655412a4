"""Quieter runs: repeated warnings of one kind become one line; the sweep's threshold line names the file's
warnings (e.g. a threshold on the edge of the grid)."""

from __future__ import annotations

import json

import pytest

from aegis_data.engine.config import load_config
from aegis_eval.protocols.warning_groups import group_lines, grouped
from aegis_eval.runners.sweep import freeze_or_reuse_threshold
from tests.eval.protocols.scoring_memory import score_paths


def test_repeated_kind_becomes_one_line_with_count_and_examples():
    msgs = [
        f"{c}: [duplicate_detection] {k} detections repeat an identical (image, box, score)"
        for k, c in enumerate(["clean", "low_light_s1", "low_light_s2", "smoke_haze_s3", "inundation_s1"], 1)
    ]
    lines = group_lines(
        ["ground truth: [bbox_degenerate] 1 boxes", *msgs, "a line without a code", "clean: [bbox_degenerate] 2 boxes"]
    )
    assert lines == [
        "[bbox_degenerate] 2 warnings, e.g. ground truth: 1 boxes; clean: 2 boxes",
        "[duplicate_detection] 5 warnings, e.g. clean: 1 detections repeat an identical (image, box, score); "
        "low_light_s1: 2 detections repeat an identical (image, box, score); low_light_s2: 3 detections repeat an "
        "identical (image, box, score) (and 2 more)",
        "a line without a code",
    ]
    assert group_lines(msgs[:1]) == msgs[:1]  # a kind seen once is passed on unchanged


def test_grouped_flushes_when_the_block_raises():
    seen: list[str] = []
    with pytest.raises(RuntimeError):
        with grouped(seen.append) as warn:
            warn("x: [k] one")
            warn("y: [k] two")
            raise RuntimeError("boom")
    assert seen == ["[k] 2 warnings, e.g. x: one; y: two"]
    with grouped(None) as warn:
        assert warn is None


def _coco(n: int = 4) -> dict:
    images = [{"id": i + 1, "file_name": f"f{i}.png", "width": 64, "height": 48} for i in range(n)]
    anns = [
        {"id": i + 1, "image_id": i + 1, "category_id": 1, "bbox": [10, 10, 20, 20], "area": 400, "iscrowd": 0}
        for i in range(n)
    ]
    return {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "person"}]}


def _perfect(coco: dict, repeat: int = 1) -> list[dict]:
    return [
        {"image_id": a["image_id"], "category_id": 1, "bbox": a["bbox"], "score": 0.99}
        for a in coco["annotations"]
        for _ in range(repeat)
    ]


def test_score_paths_reports_a_repeated_loader_warning_once(tmp_path):
    coco = _coco()
    (tmp_path / "gt.json").write_text(json.dumps(coco))
    preds = tmp_path / "preds"
    preds.mkdir()
    conditions = load_config().conditions()[:6]
    for cond in conditions:
        (preds / f"{cond}.json").write_text(json.dumps(_perfect(coco, repeat=2)))  # every box written twice
    seen: list[str] = []
    score_paths(preds, tmp_path / "gt.json", threshold=0.5, bootstrap=1, on_warning=seen.append)
    dup = [line for line in seen if "[duplicate_detection]" in line]
    assert len(dup) == 1 and dup[0].startswith("[duplicate_detection] 6 warnings, e.g. clean: ")
    assert dup[0].endswith("(and 3 more)")


def test_sweep_threshold_status_names_the_grid_edge_warning(tmp_path):
    split = tmp_path / "split"
    (split / "annotations").mkdir(parents=True)
    coco = _coco()
    (split / "annotations" / "val.json").write_text(json.dumps(coco))
    val_preds = tmp_path / "val.json"
    val_preds.write_text(json.dumps(_perfect(coco)))  # F1 = 1 at every threshold: the tie goes to the lowest
    value, status = freeze_or_reuse_threshold(val_preds, split, tmp_path / "threshold.json")
    # Every detection scores above the chosen threshold: a score-floor choice (issue 31), named as such.
    assert status.startswith("frozen; warning: [threshold_at_score_floor] the chosen threshold")
    assert "keeps every detection" in status
    again_value, again = freeze_or_reuse_threshold(val_preds, split, tmp_path / "threshold.json")
    assert again_value == value and again.startswith("reused; warning: [threshold_at_score_floor]")
