"""Adversarial repros against the report (aegis_eval/report): a score JSON beyond float64 and an over-long
dataset name. Shared inputs: tests/adversarial.py.
"""

from __future__ import annotations

import json

from tests.adversarial import BIG, invoke, score_json, scoring_inputs, yolo_split  # noqa: F401 (fixtures)
from tests.conftest import assert_one_line_error


def test_report_on_a_score_beyond_float64_is_a_finding(tmp_path, score_json):
    import re

    score_json.write_text(re.sub(r'"recall": [0-9.e-]+', f'"recall": {BIG}', score_json.read_text(), count=1))
    assert_one_line_error(invoke("report", score_json, "--out-dir", tmp_path / "r"), "json_number_overflow")


def test_report_with_a_300_character_dataset_name(tmp_path, score_json):
    doc = json.loads(score_json.read_text())
    doc["dataset"] = "x" * 300
    score_json.write_text(json.dumps(doc))
    r = invoke("report", score_json, "--out-dir", tmp_path / "r")
    assert r.exit_code == 0, r.output
    assert all(len(p.name) < 100 for p in (tmp_path / "r").rglob("*"))
