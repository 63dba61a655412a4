"""A sweep's prediction files are read and parsed on threads while the GT loads (scoring._load_single): the
detections, sources and the first error are those of reading the files one by one, in the files' order."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from aegis_data.errors import AegisError
from aegis_eval.protocols import predictions, scoring

CONDITIONS = ["clean", "dust_haze_s1", "dust_haze_s2", "dust_haze_s3", "low_light_s1", "low_light_s2", "low_light_s3"]


def _gt_file(tmp_path, n_images=6):
    images = [{"id": k + 1, "file_name": f"img_{k}.png", "width": 100, "height": 100} for k in range(n_images)]
    anns = [
        {
            "id": 2 * k + j + 1,
            "image_id": k + 1,
            "category_id": 1,
            "bbox": [10.0 + 30 * j, 10.0, 20.0, 30.0],
            "area": 600.0,
            "iscrowd": 0,
        }
        for k in range(n_images)
        for j in range(2)
    ]
    doc = {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "person"}]}
    path = tmp_path / "gt.json"
    path.write_text(json.dumps(doc))
    return path


def _preds_dir(tmp_path, n_images=6):
    folder = tmp_path / "preds"
    folder.mkdir()
    rng = np.random.default_rng(3)
    for k, cond in enumerate(CONDITIONS):
        dets = [
            {
                "image_id": int(i) + 1,
                "category_id": 1,
                "bbox": [float(x) for x in rng.uniform(5, 40, 4)],
                "score": float(rng.uniform(0.05, 1)),
            }
            for i in rng.integers(0, n_images, 12 + k)
        ]
        (folder / f"{cond}.json").write_text(json.dumps(dets))
    return folder


@pytest.mark.parametrize("kernels", ["auto", "numpy"])
def test_read_ahead_gives_the_sequential_detections(tmp_path, monkeypatch, kernels):
    monkeypatch.setenv("AEGIS_KERNELS", kernels)
    monkeypatch.setattr(scoring, "_READ_AHEAD", 2)  # fewer than the files: the window refills
    threads = []
    real = scoring.read_predictions_file
    monkeypatch.setattr(
        scoring, "read_predictions_file", lambda *a: threads.append(threading.current_thread().name) or real(*a)
    )
    gt_path, folder = _gt_file(tmp_path), _preds_dir(tmp_path)
    loaded = scoring.load(folder, gt_path, scoring.ScoreOptions(threshold=0.5, bootstrap=1))
    assert list(loaded.detections) == CONDITIONS
    assert len(threads) == len(CONDITIONS) and threading.main_thread().name not in threads
    for cond in CONDITIONS:
        ours = loaded.detections[cond]["person"]
        alone = predictions.load_predictions(folder / f"{cond}.json", loaded.first)
        for field in ("det_image", "boxes", "scores"):
            a, b = getattr(ours, field), getattr(alone, field)
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), (cond, field)
        assert ours.source == alone.source


def test_the_first_bad_file_in_order_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(scoring, "_READ_AHEAD", 3)
    gt_path, folder = _gt_file(tmp_path), _preds_dir(tmp_path)
    (folder / "dust_haze_s2.json").write_text('[{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3], "score": 0.5}]')
    (folder / "dust_haze_s3.json").write_text("[not json")
    with pytest.raises(AegisError, match="dust_haze_s2"):
        scoring.load(folder, gt_path, scoring.ScoreOptions(threshold=0.5, bootstrap=1))


def test_a_bad_gt_is_named_before_any_prediction_file(tmp_path):
    gt_path, folder = _gt_file(tmp_path), _preds_dir(tmp_path)
    (folder / "clean.json").write_text("[not json")
    gt_path.write_text('{"images": 3}')
    with pytest.raises(AegisError) as err:
        scoring.load(folder, gt_path, scoring.ScoreOptions(threshold=0.5, bootstrap=1))
    assert "clean" not in str(err.value)
