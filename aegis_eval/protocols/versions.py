"""Cross-version re-scoring: the same predictions against several annotation versions of the same images.

Each version is scored exactly as ``aegis score`` scores one GT, at the same frozen threshold. Every version
covers the same images (same ids), so one bootstrap weight matrix serves all of them: resample b draws the
same images for each version, and the interval of a difference is the percentile interval of the
per-resample differences (paired), which is much narrower than comparing two separate intervals when the
versions mostly agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from aegis_data.errors import AegisError
from aegis_eval.metrics.bootstrap import percentile_interval
from aegis_eval.metrics.result_keys import AP_METRICS, CI_METRICS, COUNT_KEYS
from aegis_eval.metrics.robustness import defined
from aegis_eval.protocols.coco_doc import category_names
from aegis_eval.protocols.predictions import ground_truth_from_coco, read_ground_truth_doc
from aegis_eval.protocols.scoring import Predictions, Scored, ScoreOptions, score

# What the matrix shows per (condition, version); differences with paired intervals are given for CI_METRICS.
MATRIX_METRICS = AP_METRICS + ("precision", "recall", "f1", "fp_per_image", "false_alarm_image_share") + COUNT_KEYS


def version_names(paths: Sequence[str | Path]) -> list[str]:
    """A name per GT version: the file stem (a split directory's name), with ``#k`` added to repeats."""
    stems = [Path(p).stem for p in paths]
    return [s if stems.count(s) == 1 else f"{s}#{k + 1}" for k, s in enumerate(stems)]


def _image_ids(path: str | Path, split: str) -> np.ndarray:
    """The image table of a GT version (read before scoring, so a mismatch is named before any prediction is
    resolved against the wrong images)."""
    coco, source = read_ground_truth_doc(path, split)
    first_category = next(iter(category_names(coco, source["path"])))
    return ground_truth_from_coco(coco, source, category_id=first_category).image_ids


def _check_same_images(ref_ids: np.ndarray, ids: np.ndarray, ref_name: str, name: str) -> None:
    if not np.array_equal(ref_ids, ids):
        only_ref = np.setdiff1d(ref_ids, ids)
        only_other = np.setdiff1d(ids, ref_ids)
        raise AegisError(
            f"[versions_images_differ] GT versions {ref_name!r} and {name!r} do not cover the same "
            f"image ids ({len(only_ref)} only in {ref_name!r}, {len(only_other)} only in {name!r}); "
            "paired re-scoring needs the same images; 'aegis gt-diff' lists them"
        )


def _check_pairable(ref: Scored, other: Scored, ref_name: str, name: str) -> None:
    _check_same_images(ref.image_ids, other.image_ids, ref_name, name)
    same_clusters = (ref.clusters is None and other.clusters is None) or (
        ref.clusters is not None and other.clusters is not None and np.array_equal(ref.clusters, other.clusters)
    )
    if not same_clusters:
        raise AegisError(
            f"[versions_clusters_differ] GT versions {ref_name!r} and {name!r} group the images "
            "differently for `cluster_by`; the paired bootstrap needs one partition",
            param="cluster_by",
        )


def _difference(value: Any, ref_value: Any) -> float | None:
    v, r = defined(value), defined(ref_value)
    return None if v is None or r is None else v - r


def score_versions(
    preds: Predictions, gts: Sequence[str | Path], options: ScoreOptions, remap_versions: Sequence[int] | None = None
) -> dict[str, Any]:
    """The first version's complete score document plus a ``versions`` block (docs/SCORE_JSON.md): the
    matrix of MATRIX_METRICS per condition and version, and per other version the differences to the first
    with paired bootstrap intervals. Every version is scored by :func:`aegis_eval.protocols.scoring.score`
    with ``options``.

    ``options.class_map``: applied to the predictions, or (GT side) to every version, or only to the versions
    numbered in ``remap_versions`` (1-based, in ``gts`` order) -- so one file given twice compares its labels as
    they are with the same labels remapped.
    """
    class_map = options.class_map
    if len(gts) < 2:
        raise AegisError(
            f"[versions_too_few] cross-version re-scoring needs at least two `gts`; got {len(gts)}", param="gts"
        )
    if remap_versions is not None:
        if class_map is None or class_map.side != "gt":
            raise AegisError(
                "[class_map_versions] `remap_versions` needs a `class_map` applied to the GT (`remap_side` gt)",
                param="remap_versions",
            )
        bad = [k for k in remap_versions if not 1 <= k <= len(gts)]
        if bad:
            raise AegisError(
                f"[class_map_versions] `remap_versions` {bad[0]} is not one of the {len(gts)} `gts` "
                "versions (numbered from 1)",
                param="remap_versions",
            )
    version_maps = [class_map if remap_versions is None or k + 1 in remap_versions else None for k in range(len(gts))]
    names = version_names(gts)
    tables = [_image_ids(g, options.split) for g in gts]
    for name, ids in zip(names[1:], tables[1:]):
        _check_same_images(tables[0], ids, names[0], name)
    scored = [
        score(preds, g, options if cmap is class_map else replace(options, class_map=cmap))
        for g, cmap in zip(gts, version_maps)
    ]
    ref = scored[0]
    for name, other in zip(names[1:], scored[1:]):
        _check_pairable(ref, other, names[0], name)
    conditions = list(ref.result["conditions"])
    matrix = {
        cond: {
            name: {m: s.result["conditions"][cond][m] for m in MATRIX_METRICS}
            | {"ci": s.result["conditions"][cond]["ci"]}
            for name, s in zip(names, scored)
        }
        for cond in conditions
    }
    differences: dict[str, Any] = {}
    for name, other in zip(names[1:], scored[1:]):
        per_cond = {}
        for cond in conditions:
            mine, base = other.result["conditions"][cond], ref.result["conditions"][cond]
            per_metric = {}
            for m in CI_METRICS:
                paired = np.asarray(other.samples[cond][m], float) - np.asarray(ref.samples[cond][m], float)
                per_metric[m] = {"value": _difference(mine[m], base[m]), "ci": list(percentile_interval(paired, 0.95))}
            per_cond[cond] = per_metric
        differences[name] = per_cond
    block = {
        "reference": names[0],
        "gt": {
            name: {
                "file": s.result["provenance"].get("gt_file"),
                "sha256": s.result["provenance"].get("gt_sha256"),
                "class_map": s.result["provenance"].get("class_map"),
            }
            for name, s in zip(names, scored)
        },
        "matrix": matrix,
        "differences": differences,
    }
    out = {k: v for k, v in ref.result.items() if k != "provenance"}
    out["versions"] = block
    out["provenance"] = ref.result["provenance"]
    return out
