"""Recall of a flood condition by the share of each person under water (aegis_eval.protocols.condition_effects):
bins, the boxes each image's fractions belong to, and the one-line refusal of fractions that do not fit the GT."""

from __future__ import annotations

import numpy as np
import pytest

from aegis_data.errors import AegisError
from aegis_eval.metrics.types import GroundTruth
from aegis_eval.protocols.condition_effects import submerged_strata


def _gt(box_image, crowd=None) -> GroundTruth:
    box_image = np.asarray(box_image, dtype=np.int64)
    n, g = 3, box_image.size
    return GroundTruth(
        np.arange(n),
        ("a.png", "b.png", "c.png"),
        np.ones(n, int),
        np.ones(n, int),
        box_image,
        np.ones((g, 4)),
        np.ones(g),
        np.zeros(g, bool) if crowd is None else np.asarray(crowd),
        np.arange(g),
    )


def test_each_image_fractions_go_to_its_boxes_in_annotation_order():
    # Boxes of image a (row 0) at 0 and 3, of b (row 1) at 1 and 2, c has none: not grouped by image.
    gt = _gt([0, 1, 1, 0])
    matched = np.array([True, False, True, False])
    clean = np.array([True, True, True, True])
    out = submerged_strata(gt, matched, clean, {"a": [0.0, 0.6], "b": [0.1, None]})
    assert out["n_gt"] == [1, 1, 0, 1]  # a's first box dry, b's first up to 1/4, a's second over 1/2
    assert out["tp"] == [1, 0, 0, 0]  # box 0 (dry) found; box 1 (b, 0.1) and box 3 (a, 0.6) missed
    assert out["recall"] == [1.0, 0.0, None, 0.0] and out["recall_clean"] == [1.0, 1.0, None, 1.0]
    crowd = submerged_strata(
        _gt([0, 1, 1, 0], crowd=[False, False, False, True]), matched, None, {"a": [0.0, 0.6], "b": [0.1, None]}
    )
    assert crowd["n_gt"] == [1, 1, 0, 0] and "recall_clean" not in crowd


def test_fractions_that_do_not_list_one_per_box_are_one_line():
    with pytest.raises(AegisError, match=r"\[submerged_mismatch\].*1 submerged fractions for image 'b'.* 2 boxes"):
        submerged_strata(_gt([0, 1, 1, 0]), np.zeros(4, bool), None, {"a": [0.0, 0.6], "b": [0.1]})
