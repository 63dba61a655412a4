"""Test-side shortcuts into the scorer's four verbs (aegis_eval.protocols.scoring): score loaded GroundTruth and
Detections built in memory, and score paths with keyword options. The product has one entry point
(``score(predictions, gt, ScoreOptions)``); these only spare tests the files and the boilerplate."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from aegis_data.engine.config import load_config
from aegis_eval.metrics.bootstrap import BootstrapOptions
from aegis_eval.metrics.matching import DEFAULT_IOU
from aegis_eval.protocols.scoring import (
    PERSON,
    Loaded,
    Samples,
    ScoreOptions,
    accumulate,
    condition_order,
    evaluate,
    score,
    summarize,
)


def score_paths(preds, gt, **options: Any) -> dict[str, Any]:
    """The score document of ``score(preds, gt, ScoreOptions(**options))``."""
    return score(preds, gt, ScoreOptions(**options)).result


def score_conditions_by_class_with_samples(
    gts,
    predictions,
    thresholds,
    *,
    bootstrap: BootstrapOptions | None = None,
    iou: float = DEFAULT_IOU,
    clusters: np.ndarray | None = None,
    label: str | None = None,
    config=None,
    effects=None,
    provenance: Mapping[str, Any] | None = None,
    threshold_info: Mapping[str, Any] | None = None,
    single: bool = False,
) -> tuple[dict[str, Any], Samples]:
    """(document, macro samples) of {class: GroundTruth} against {condition: {class: Detections}} at {class:
    threshold}: :class:`Loaded` built by hand, then evaluate -> accumulate -> summarize."""
    bootstrap = bootstrap or BootstrapOptions()
    assert bootstrap.confidence == 0.95, "the scorer's intervals are 95%"
    config = config or load_config()
    names = condition_order(list(predictions), config)
    loaded = Loaded(
        gts=dict(gts),
        detections={c: dict(predictions[c]) for c in names},
        thresholds=dict(thresholds),
        threshold_info=dict(threshold_info or {}),
        single=single,
        label=label,
        config=config,
        clusters=clusters,
        effects=effects,
    )
    # the verbs read the thresholds from `loaded`; the options carry the bootstrap and IoU
    options = ScoreOptions(
        threshold=min(thresholds.values()), bootstrap=bootstrap.n_bootstrap, seed=bootstrap.seed, iou=iou, label=label
    )
    evaluation = evaluate(loaded, options)
    accumulated = accumulate(loaded, evaluation, options)
    doc = summarize(loaded, evaluation, accumulated, options)
    if provenance is not None:
        doc["provenance"] = dict(provenance)
    return doc, accumulated.samples


def score_conditions_by_class(gts, predictions, thresholds, **options: Any) -> dict[str, Any]:
    return score_conditions_by_class_with_samples(gts, predictions, thresholds, **options)[0]


def score_conditions_with_samples(gt, predictions, threshold: float, **options: Any) -> tuple[dict[str, Any], Samples]:
    """The single-class protocol: {condition: Detections} against one GroundTruth at one threshold."""
    return score_conditions_by_class_with_samples(
        {PERSON: gt}, {c: {PERSON: d} for c, d in predictions.items()}, {PERSON: threshold}, single=True, **options
    )


def score_conditions(gt, predictions, threshold: float, **options: Any) -> dict[str, Any]:
    return score_conditions_with_samples(gt, predictions, threshold, **options)[0]


def score_versions(preds, gts, remap_versions=None, **options: Any) -> dict[str, Any]:
    """Cross-version re-scoring with keyword options."""
    from aegis_eval.protocols.versions import score_versions as run

    return run(preds, gts, ScoreOptions(**options), remap_versions)
