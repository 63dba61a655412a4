"""aegis_eval/protocols/results_file.py: the numpy-free results file reader and its read-ahead."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from aegis_data.errors import AegisError
from aegis_eval.protocols import predictions, results_file

RESULTS = [{"image_id": 1, "category_id": 1, "bbox": [1.0, 2.0, 3.0, 4.0], "score": 0.5}]


def test_importing_it_loads_no_numpy():
    code = "import sys, aegis_eval.protocols.results_file; print('numpy' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False"]


def test_predictions_re_exports_the_reader():
    for name in ("PredictionsFile", "read_predictions_file"):
        assert getattr(predictions, name) is getattr(results_file, name)


@pytest.mark.parametrize("parse", [True, False])
def test_a_read_ahead_is_taken_once_and_equals_the_plain_read(tmp_path, parse):
    path = tmp_path / "clean.json"
    path.write_text(json.dumps(RESULTS))
    plain = results_file.read_predictions_file(path, parse)
    results_file.read_ahead(path, parse)
    results_file._AHEAD[(str(path), parse)].join()
    path.write_text("[]")  # changed after the thread read it: the score takes what the thread read
    assert results_file.read_predictions_file(path, parse) == plain
    assert results_file.read_predictions_file(path, parse).data == b"[]"  # taken once: the next read is fresh


def test_a_read_ahead_of_another_parse_flag_is_not_taken(tmp_path):
    path = tmp_path / "clean.json"
    path.write_text(json.dumps(RESULTS))
    results_file.read_ahead(path, parse=False)
    read = results_file.read_predictions_file(path, parse=True)
    assert read.columns == results_file.read_columns(read.data)
    assert results_file.read_predictions_file(path, parse=False).columns is None  # the parse=False one, taken now


def test_a_failed_read_ahead_leaves_the_error_to_the_plain_read(tmp_path):
    for target in (tmp_path / "missing.json", tmp_path):  # missing; a folder
        results_file.read_ahead(target)
        with pytest.raises(AegisError) as caught:
            results_file.read_predictions_file(target)
        with pytest.raises(AegisError) as plain:
            results_file.read_predictions_file(target)
        assert str(caught.value) == str(plain.value)


def test_a_file_the_compiled_reader_declines_is_offered_to_it_once(tmp_path, monkeypatch):
    # load_predictions reads with parse; resolving must not hand the same bytes to the reader a second time.
    calls = []
    monkeypatch.setattr(results_file, "_results_reader", lambda: type("R", (), {"columns": calls.append})())
    gt = predictions.ground_truth_from_coco(
        {
            "images": [{"id": 1, "file_name": "a.jpg", "width": 10, "height": 10}],
            "annotations": [],
            "categories": [{"id": 1, "name": "person"}],
        }
    )
    path = tmp_path / "preds.json"
    path.write_text(json.dumps([{"image_id": 1, "category_id": 1, "bbox": [0, 0, 2, 2], "score": 0.5}]))
    dets = predictions.load_predictions(path, gt)
    assert len(dets.scores) == 1 and len(calls) == 1
