"""The scorer's evaluate step runs each condition's bootstrap on a thread beside the next condition's matching:
the same document as one condition after the other, and an error in a resample reaches the caller as itself."""

from __future__ import annotations

import numpy as np
import pytest

from aegis_data.errors import AegisError
from aegis_eval.metrics.bootstrap import BootstrapOptions
from aegis_eval.metrics.types import Detections
from aegis_eval.protocols import scoring
from tests.eval.metrics.test_bootstrap import scene
from tests.eval.protocols.scoring_memory import score_conditions_with_samples


def _sweep():
    gt, _ = scene(40, 1)
    names = ["clean", "low_light_s1", "low_light_s2", "low_light_s3", "motion_blur_s1"]
    predictions = {}
    for k, name in enumerate(names):
        _, dets = scene(40, 10 + k)
        predictions[name] = Detections(det_image=dets.det_image % gt.n_images, boxes=dets.boxes, scores=dets.scores)
    return gt, predictions


def test_overlapped_resamples_give_the_sequential_document(monkeypatch):
    gt, predictions = _sweep()
    options = {"bootstrap": BootstrapOptions(n_bootstrap=60, seed=4)}
    doc, samples = score_conditions_with_samples(gt, predictions, 0.4, **options)
    monkeypatch.setattr(scoring, "_RESAMPLES_IN_FLIGHT", 1)  # each condition's resamples finish before the next
    seq_doc, seq_samples = score_conditions_with_samples(gt, predictions, 0.4, **options)
    assert scoring.score_json_bytes(doc) == scoring.score_json_bytes(seq_doc)
    assert samples.keys() == seq_samples.keys()
    for cond in samples:
        for m in samples[cond]:
            assert np.array_equal(samples[cond][m], seq_samples[cond][m], equal_nan=True)


def test_a_failing_resample_reaches_the_caller(monkeypatch):
    gt, predictions = _sweep()
    calls = []

    def failing(weights, table, counts):
        calls.append(table.n_dets)
        if len(calls) == 3:
            raise AegisError("resample failed on purpose")
        return real(weights, table, counts)

    real = scoring.bootstrap_samples
    monkeypatch.setattr(scoring, "bootstrap_samples", failing)
    with pytest.raises(AegisError, match="resample failed on purpose"):
        score_conditions_with_samples(gt, predictions, 0.4, bootstrap=BootstrapOptions(n_bootstrap=20))
    assert 3 <= len(calls) <= 3 + scoring._RESAMPLES_IN_FLIGHT  # the sweep stopped soon after, it did not hang
