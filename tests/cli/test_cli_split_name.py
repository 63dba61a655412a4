"""Issue 31: `--split-name` wherever a command reads one split of a split folder, so an external detector's
validation predictions freeze and score as the docs say (docs/SCORING.md, "Validation predictions from your own
detector")."""

from __future__ import annotations

import json

from tests.adversarial import build_yolo, invoke, yolo_source


def test_freeze_threshold_and_score_take_split_name_val(tmp_path):
    src = yolo_source(tmp_path / "src", n=6)
    split = tmp_path / "split"
    build_yolo(src, split, "--option", "val_fraction=0.34")
    val = json.loads((split / "annotations" / "val.json").read_text())
    rows = [{"image_id": im["id"], "category_id": 1, "bbox": [18, 12, 12, 8], "score": 0.8} for im in val["images"]]
    preds = tmp_path / "val_preds.json"
    preds.write_text(json.dumps(rows))
    thr = tmp_path / "t.json"
    r = invoke("freeze-threshold", preds, "--split-dir", split, "--split-name", "val", "--out", thr)
    assert r.exit_code == 0, r.output
    assert "on 2 val images, 2 GT boxes" in r.output
    # The score-floor warning names the flag on the command line (the library names the parameter).
    assert (
        "[threshold_at_score_floor]" in r.output and "lowest score is 0.8" in r.output and "--grid 0:0.8:" in r.output
    )
    assert json.loads(thr.read_text())["gt"]["file"].endswith("val.json")
    r = invoke("score", preds, "--split-dir", split, "--split-name", "val", "--threshold-file", thr, "--bootstrap", "1")
    assert r.exit_code == 0, r.output
    # The score names the validation set the threshold was chosen on, and repeats the file's warnings.
    assert "threshold frozen on 2 validation images, 2 GT boxes" in r.stdout
    assert "warning: threshold file: [threshold_at_score_floor]" in r.stderr
    # --split-name test reads annotations/test.json (4 images), as asked.
    r = invoke("freeze-threshold", preds, "--split-dir", split, "--split-name", "test", "--out", tmp_path / "t2.json")
    assert r.exit_code == 0 and "on 4 test images" in r.output, r.output
    assert json.loads((tmp_path / "t2.json").read_text())["gt"]["file"].endswith("test.json")
