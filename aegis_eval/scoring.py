"""The shared scorer behind ``aegis score``: one or many conditions -> the ``aegis-score/1`` JSON
(docs/SCORE_JSON.md) and a flat CSV.

Per condition: COCO AP (``aegis_eval.metrics``), counts and rates at the frozen threshold
(``aegis_eval.matching``), percentile bootstrap intervals, paired intervals of the drop vs clean (the same
resample rows for every condition), relative drops, and localization stability vs clean. Then the robustness
summary (``aegis_eval.robustness``) and provenance.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from aegis_data.config import load_config, parse_condition
from aegis_data.errors import AegisError
from aegis_data.imageio import write_bytes_atomic
from aegis_eval import metrics as ap_metrics
from aegis_eval.bootstrap import (BootstrapOptions, bootstrap_samples, intervals, paired_drop_intervals,
                                  resample_weights)
from aegis_eval.localization import localization_stability
from aegis_eval.matching import DEFAULT_IOU, ThresholdMatch, match_at_threshold, threshold_metrics
from aegis_eval.predictions import load_ground_truth, load_predictions, read_json_file
from aegis_eval.provenance import build_provenance
from aegis_eval.result_keys import (AP_METRICS, CI_METRICS, COUNT_KEYS, LOCALIZATION_KEYS, SCHEMA,
                                    THRESHOLD_METRICS)
from aegis_eval.robustness import ROBUSTNESS_METRICS, corruption_of, relative_drops, summarize_robustness
from aegis_eval.threshold import read_threshold_file
from aegis_eval.types import Detections, GroundTruth

Warn = Callable[[str], None]


def _clean_number(x: Any) -> Any:
    """JSON-safe value: NaN -> None, numpy scalars -> Python."""
    if isinstance(x, (np.floating, float)):
        return None if math.isnan(float(x)) else float(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def _interval(pair: Any) -> list[float | None]:
    lo, hi = (pair[0], pair[1]) if pair is not None else (None, None)
    return [_clean_number(lo), _clean_number(hi)]


def condition_order(names: list[str]) -> list[str]:
    """Canonical order: clean, then ``<corruption>_s<k>`` in config order, then any other names sorted."""
    canonical = load_config().conditions()
    rank = {c: k for k, c in enumerate(canonical)}
    return sorted(names, key=lambda c: (0, rank[c], "") if c in rank else (1, 0, c))


def condition_labels(condition: str) -> dict[str, Any]:
    """corruption / family / severity of a condition id (all None for a name that is not a condition id)."""
    parsed = corruption_of(condition)
    if parsed is None:
        return {"corruption": None, "family": None, "severity": None}
    name, sev = parsed
    family = None
    if name is not None:
        spec = load_config().corruptions.get(name)
        family = spec.family if spec is not None else None
    return {"corruption": name, "family": family, "severity": sev}


def score_conditions(gt: GroundTruth, predictions: Mapping[str, Detections], threshold: float, *,
                     bootstrap: BootstrapOptions, iou: float = DEFAULT_IOU, clusters: np.ndarray | None = None,
                     label: str | None = None, provenance: Mapping[str, Any] | None = None,
                     threshold_info: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Score every condition at one frozen ``threshold``; returns the docs/SCORE_JSON.md structure.

    predictions: {condition id (or any name): Detections resolved against ``gt``}.
    clusters: optional (I,) group label per GT image row; the bootstrap then resamples whole groups.
    threshold_info: rule / file / sha256 of the threshold file (None values when the threshold was given).
    provenance: a prebuilt provenance block (``score_paths`` passes one); built from the sources when None.
    """
    if not predictions:
        raise AegisError("nothing to score: no predictions were given")
    if not np.isfinite(threshold) or not 0.0 <= threshold <= 1.0:
        raise AegisError(f"threshold must be a number in [0, 1]; got {threshold!r}")
    names = condition_order(list(predictions))
    weights = resample_weights(gt.n_images, bootstrap, clusters)

    matches: dict[str, ThresholdMatch] = {}
    samples: dict[str, dict[str, np.ndarray]] = {}
    conditions: dict[str, dict[str, Any]] = {}
    for cond in names:
        dets = predictions[cond]
        match = match_at_threshold(gt, dets, threshold, iou)
        table = ap_metrics.evaluate_images(gt, dets)
        ap = ap_metrics.accumulate(table)
        entry: dict[str, Any] = condition_labels(cond)
        entry.update({m: _clean_number(ap[m]) for m in AP_METRICS})
        tm = threshold_metrics(match)
        for key in THRESHOLD_METRICS[:3] + COUNT_KEYS + THRESHOLD_METRICS[3:]:
            entry[key] = tm[key]
        samples[cond] = bootstrap_samples(weights, table, match.counts)
        matches[cond] = match
        conditions[cond] = entry

    clean = conditions.get("clean")
    for cond in names:
        entry = conditions[cond]
        ci = {m: _interval(v) for m, v in intervals(samples[cond], bootstrap.confidence).items()}
        if clean is None:
            entry["rel_drop"] = {m: None for m in ROBUSTNESS_METRICS}
            entry["ci"] = ci
            entry["ci_drop"] = {m: [None, None] for m in CI_METRICS}
            entry["localization"] = {k: None for k in LOCALIZATION_KEYS}
            continue
        entry["rel_drop"] = relative_drops(clean, entry)
        entry["ci"] = ci
        drops = paired_drop_intervals(samples["clean"], samples[cond], bootstrap.confidence)
        entry["ci_drop"] = {m: _interval(v) for m, v in drops.items()}
        entry["localization"] = localization_stability(gt, predictions["clean"], matches["clean"],
                                                       predictions[cond], matches[cond])

    info = dict(threshold_info or {})
    if provenance is None:
        provenance = build_provenance(gt_source=gt.source, predictions={c: predictions[c].source for c in names},
                                      threshold_sha256=info.get("sha256"), seed=bootstrap.seed,
                                      bootstrap=bootstrap.n_bootstrap, iou=iou)
    return {
        "schema": SCHEMA,
        "label": label,
        "dataset": gt.source.get("dataset"),
        "iou": float(iou),
        "threshold": {"value": float(threshold), "rule": info.get("rule"), "file": info.get("file"),
                      "file_sha256": info.get("sha256")},
        "conditions": conditions,
        "summary": summarize_robustness(conditions),
        "provenance": dict(provenance),
    }


# --- paths -> result ---------------------------------------------------------------------------------------
# Files a prediction folder may hold that are not predictions.
RUN_METADATA_FILES = frozenset({"run.json"})


def prediction_files(preds: str | Path, on_warning: Warn | None = None) -> dict[str, Path]:
    """{condition: file}. A file is one condition named after its stem; a directory contributes every
    ``<condition>.json`` whose stem is a condition id (other JSON files are skipped with a warning)."""
    preds = Path(preds)
    if preds.is_file():
        return {preds.stem: preds}
    if preds.exists() and not preds.is_dir():  # a FIFO, socket or device would block or never end
        raise AegisError(f"[predictions_not_a_file] {preds} is not a regular file or a folder")
    if not preds.is_dir():
        raise AegisError(f"[predictions_not_found] predictions not found: {preds}")
    found, skipped, irregular = {}, [], []
    for f in sorted(preds.glob("*.json")):
        if f.name in RUN_METADATA_FILES:  # written beside the predictions by `aegis baseline predict`
            continue
        if not f.is_file():  # only regular files (or links to them) are read
            irregular.append(f.name)
            continue
        try:
            parse_condition(f.stem)
        except AegisError:
            skipped.append(f.name)
            continue
        found[f.stem] = f
    if irregular and on_warning:
        on_warning(f"[not_a_regular_file] skipped {len(irregular)} entries that are not regular files "
                   f"({', '.join(irregular[:3])}{', ...' if len(irregular) > 3 else ''})")
    if skipped and on_warning:
        on_warning(f"[not_a_condition] skipped {len(skipped)} JSON files whose names are not condition ids "
                   f"({', '.join(skipped[:3])}{', ...' if len(skipped) > 3 else ''})")
    if not found:
        raise AegisError(f"[predictions_empty_dir] {preds} holds no <condition>.json files "
                         "(expected clean.json, low_light_s3.json, ...)")
    return found


def cluster_labels(gt: GroundTruth, cluster_by: str) -> np.ndarray:
    """(I,) int64 group code per GT image row, from a GT image attribute name or a JSON mapping file
    ``{image_id or file_name: group}``. Every image must get a group."""
    path = Path(cluster_by)
    if path.suffix == ".json" or path.is_file():
        mapping, _ = read_json_file(path, "cluster mapping", "cluster_")
        if not isinstance(mapping, dict):
            raise AegisError(f"[cluster_wrong_type] {path}: expected a JSON object {{image_id or file_name: group}}")
        mapping = {str(k): v for k, v in mapping.items()}
        groups = []
        for r in range(gt.n_images):
            name = gt.file_names[r]
            keys = (str(int(gt.image_ids[r])), name, Path(name).stem)
            hit = next((mapping[k] for k in keys if k in mapping), None)
            if hit is None:
                raise AegisError(f"[cluster_missing] {path} assigns no group to image {int(gt.image_ids[r])} "
                                 f"({name}); expected every GT image id or file_name as a key")
            groups.append(json.dumps(hit, sort_keys=True))
    else:
        groups = []
        for r in range(gt.n_images):
            attrs = gt.attributes[r] if r < len(gt.attributes) else {}
            if cluster_by not in attrs:
                available = sorted(set().union(*[set(a) for a in gt.attributes])) if gt.attributes else []
                raise AegisError(f"[cluster_missing] GT image {int(gt.image_ids[r])} has no attribute "
                                 f"{cluster_by!r} (available: {', '.join(available) or 'none'}); pass an image "
                                 "attribute name or a JSON mapping file")
            groups.append(json.dumps(attrs[cluster_by], sort_keys=True))
    _, codes = np.unique(np.array(groups, dtype=object).astype(str), return_inverse=True)
    return codes.astype(np.int64)


def score_paths(preds: str | Path, gt: str | Path, *, threshold: float | None = None,
                threshold_file: str | Path | None = None, bootstrap: int = 1000, seed: int = 0,
                iou: float = DEFAULT_IOU, cluster_by: str | None = None, label: str | None = None,
                split: str = "test", on_warning: Warn | None = None) -> dict[str, Any]:
    """Load, validate and score predictions (a file or a directory of ``<condition>.json``) against GT (a COCO
    file or a split directory). Exactly one of ``threshold`` / ``threshold_file``. Loader warnings go to
    ``on_warning`` (prefixed with the condition)."""
    if (threshold is None) == (threshold_file is None):
        raise AegisError("give exactly one of a threshold value (--threshold) or a threshold file "
                         "(--threshold-file, written by 'aegis freeze-threshold')")
    if threshold_file is not None:
        value, info = read_threshold_file(threshold_file)
        frozen_iou = info.get("iou")
        if on_warning and isinstance(frozen_iou, (int, float)) and float(frozen_iou) != float(iou):
            on_warning(f"[iou_mismatch] the threshold was frozen with IoU {frozen_iou:g} but scoring uses "
                       f"IoU {iou:g}")
    else:
        value, info = float(threshold), {}
    options = BootstrapOptions(n_bootstrap=bootstrap, seed=seed)
    files = prediction_files(preds, on_warning)
    ground_truth = load_ground_truth(gt, split)
    for w in ground_truth.source.get("warnings", ()):
        if on_warning:
            on_warning(f"ground truth: {w}")
    detections = {}
    for cond, f in files.items():
        detections[cond] = load_predictions(f, ground_truth)
        for w in detections[cond].source.get("warnings", ()):
            if on_warning:
                on_warning(f"{cond}: {w}")
    clusters = cluster_labels(ground_truth, cluster_by) if cluster_by else None
    provenance = build_provenance(gt_source=ground_truth.source,
                                  predictions={c: d.source for c, d in detections.items()},
                                  threshold_sha256=info.get("sha256"), seed=seed, bootstrap=bootstrap, iou=iou,
                                  cluster_by=cluster_by)
    if label is None:
        label = Path(preds).name if Path(preds).is_dir() else Path(preds).stem
    return score_conditions(ground_truth, detections, value, bootstrap=options, iou=iou, clusters=clusters,
                            label=label, provenance=provenance, threshold_info=info)


# --- writers -----------------------------------------------------------------------------------------------
def _json_safe(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return _clean_number(obj)


def score_json_bytes(result: Mapping[str, Any]) -> bytes:
    """Canonical bytes of a score JSON (NaN -> null; strict JSON)."""
    return (json.dumps(_json_safe(result), indent=1, allow_nan=False) + "\n").encode()


def write_score_json(result: Mapping[str, Any], path: str | Path) -> None:
    write_bytes_atomic(path, score_json_bytes(result))


PROVENANCE_COLUMNS = ("toolkit_version", "git_sha", "git_dirty", "config_hash", "manifest_root_hash",
                      "gt_sha256", "threshold_sha256", "seed", "bootstrap", "cluster_by", "timestamp")


def csv_columns() -> list[str]:
    cols = ["condition", "corruption", "family", "severity", *AP_METRICS, *THRESHOLD_METRICS, *COUNT_KEYS]
    cols += [f"{m}_{b}" for m in CI_METRICS for b in ("lo", "hi")]
    cols += [f"rel_drop_{m}" for m in ROBUSTNESS_METRICS]
    cols += [f"rel_drop_{m}_{b}" for m in CI_METRICS for b in ("lo", "hi")]
    cols += [f"loc_{k}" for k in LOCALIZATION_KEYS]
    cols += ["label", "threshold", "iou", "predictions_file", "predictions_sha256", *PROVENANCE_COLUMNS]
    return cols


def score_csv_rows(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One flat row per condition (columns: :func:`csv_columns`)."""
    prov = result.get("provenance", {})
    rows = []
    for cond, e in result["conditions"].items():
        row: dict[str, Any] = {"condition": cond}
        for k in ("corruption", "family", "severity", *AP_METRICS, *THRESHOLD_METRICS, *COUNT_KEYS):
            row[k] = e.get(k)
        for m in CI_METRICS:
            lo, hi = e.get("ci", {}).get(m, [None, None])
            row[f"{m}_lo"], row[f"{m}_hi"] = lo, hi
            dlo, dhi = e.get("ci_drop", {}).get(m, [None, None])
            row[f"rel_drop_{m}_lo"], row[f"rel_drop_{m}_hi"] = dlo, dhi
        for m in ROBUSTNESS_METRICS:
            row[f"rel_drop_{m}"] = e.get("rel_drop", {}).get(m)
        for k in LOCALIZATION_KEYS:
            row[f"loc_{k}"] = (e.get("localization") or {}).get(k)
        pred = prov.get("predictions", {}).get(cond, {})
        row.update(label=result.get("label"), threshold=result["threshold"]["value"], iou=result.get("iou"),
                   predictions_file=pred.get("file"), predictions_sha256=pred.get("sha256"))
        for k in PROVENANCE_COLUMNS:
            row[k] = prov.get(k)
        rows.append(row)
    return rows


def write_score_csv(result: Mapping[str, Any], path: str | Path) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=csv_columns(), lineterminator="\n")
    writer.writeheader()
    for row in score_csv_rows(result):
        writer.writerow({k: ("" if v is None else _clean_number(v)) for k, v in row.items()})
    write_bytes_atomic(path, buf.getvalue().encode())
