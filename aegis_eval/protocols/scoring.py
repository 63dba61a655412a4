"""The shared scorer behind ``aegis score``: one or many conditions -> the ``aegis-score/1`` JSON
(docs/SCORE_JSON.md) and a flat CSV.

Per condition: COCO AP (``aegis_eval.metrics.coco``), counts and rates at the frozen threshold
(``aegis_eval.metrics.matching``), percentile bootstrap intervals, paired intervals of the drop vs clean (the same
resample rows for every condition), relative drops, and localization stability vs clean. Then the robustness
summary (``aegis_eval.metrics.robustness``), the false-alarm block (``aegis_eval.metrics.false_alarms``) and provenance.
``score_conditions_by_class`` does the same for several classes and adds macro entries; ``score_paths_detailed``
keeps the per-resample values that cross-version re-scoring (``aegis_eval.protocols.versions``) pairs.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from aegis_data.conditions import parse_condition
from aegis_data.engine.config import SuiteConfig, load_config
from aegis_data.errors import AegisError
from aegis_data.files.imageio import write_bytes_atomic
from aegis_eval.metrics import coco as ap_metrics
from aegis_eval.metrics.bootstrap import (BootstrapOptions, bootstrap_samples, intervals, nanmean_rows,
                                  paired_drop_intervals, resample_weights)
from aegis_eval.metrics.exact_bounds import DEFAULT_DELTA
from aegis_eval.metrics.false_alarms import false_alarm_record
from aegis_eval.metrics.localization import localization_stability
from aegis_eval.metrics.matching import (DEFAULT_IOU, PerImageCounts, ThresholdMatch, match_at_threshold,
                                 rates_from_counts, sum_counts, threshold_metrics)
from aegis_eval.metrics.result_keys import (AP_METRICS, CI_METRICS, COUNT_KEYS, LOCALIZATION_KEYS, LOWER_IS_BETTER,
                                    SCHEMA, THRESHOLD_METRICS)
from aegis_eval.metrics.robustness import (ROBUSTNESS_METRICS, corruption_of, relative_drops, summarize_robustness,
                                  summary_intervals)
from aegis_eval.metrics.types import Detections, GroundTruth
from aegis_eval.protocols.class_map import ClassMap
from aegis_eval.protocols.condition_effects import SplitEffects, split_effects, submerged_strata
from aegis_eval.protocols.predictions import (load_ground_truth, load_ground_truth_by_class, load_predictions,
                                    load_predictions_by_class, read_json_file, suite_config_of)
from aegis_eval.protocols.provenance import build_provenance
from aegis_eval.protocols.threshold import read_class_thresholds, read_threshold_file
from aegis_eval.protocols.warning_groups import grouped

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


def condition_order(names: list[str], config: SuiteConfig | None = None) -> list[str]:
    """Canonical order: clean, then ``<corruption>_s<k>`` in config order, then any other names sorted."""
    canonical = (config or load_config()).conditions()
    rank = {c: k for k, c in enumerate(canonical)}
    return sorted(names, key=lambda c: (0, rank[c], "") if c in rank else (1, 0, c))


def condition_labels(condition: str, config: SuiteConfig | None = None) -> dict[str, Any]:
    """corruption / family / severity of a condition id (all None for a name that is not a condition id)."""
    parsed = corruption_of(condition)
    if parsed is None:
        return {"corruption": None, "family": None, "severity": None}
    name, sev = parsed
    family = None
    if name is not None:
        spec = (config or load_config()).corruptions.get(name)
        family = spec.family if spec is not None else None
    return {"corruption": name, "family": family, "severity": sev}


@dataclass(frozen=True)
class _GroundTruthScore:
    """Every condition scored against one GroundTruth (one class): finished entries, the per-resample values
    (paired across conditions: one weight matrix), per-image counts and false-alarm records."""

    conditions: dict[str, dict[str, Any]]
    samples: dict[str, dict[str, np.ndarray]]
    counts: dict[str, PerImageCounts]
    false_alarms: dict[str, dict[str, Any]]
    matched: dict[str, np.ndarray] = field(default_factory=dict)  # per condition: (G,) whether each GT box is matched


def _check_threshold(threshold: float) -> None:
    if not np.isfinite(threshold) or not 0.0 <= threshold <= 1.0:
        raise AegisError(f"threshold must be a number in [0, 1]; got {threshold!r}")


def _score_ground_truth(gt: GroundTruth, predictions: Mapping[str, Detections], names: list[str], threshold: float,
                        weights: np.ndarray, iou: float, confidence: float, config: SuiteConfig) -> _GroundTruthScore:
    matches: dict[str, ThresholdMatch] = {}
    samples: dict[str, dict[str, np.ndarray]] = {}
    conditions: dict[str, dict[str, Any]] = {}
    false_alarms: dict[str, dict[str, Any]] = {}
    for cond in names:
        dets = predictions[cond]
        match = match_at_threshold(gt, dets, threshold, iou)
        table = ap_metrics.evaluate_images(gt, dets)
        ap = ap_metrics.accumulate(table)
        entry: dict[str, Any] = condition_labels(cond, config)
        entry.update({m: _clean_number(ap[m]) for m in AP_METRICS})
        tm = threshold_metrics(match)
        for key in THRESHOLD_METRICS[:3] + COUNT_KEYS + THRESHOLD_METRICS[3:]:
            entry[key] = tm[key]
        samples[cond] = bootstrap_samples(weights, table, match.counts)
        false_alarms[cond] = false_alarm_record(gt, match.counts, DEFAULT_DELTA)
        matches[cond] = match
        conditions[cond] = entry

    clean = conditions.get("clean")
    for cond in names:
        entry = conditions[cond]
        ci = {m: _interval(v) for m, v in intervals(samples[cond], confidence).items()}
        if clean is None:
            entry["rel_drop"] = {m: None for m in ROBUSTNESS_METRICS}
            entry["ci"] = ci
            entry["ci_drop"] = {m: [None, None] for m in CI_METRICS}
            entry["localization"] = {k: None for k in LOCALIZATION_KEYS}
            continue
        entry["rel_drop"] = relative_drops(clean, entry)
        entry["ci"] = ci
        drops = paired_drop_intervals(samples["clean"], samples[cond], confidence)
        entry["ci_drop"] = {m: _interval(v) for m, v in drops.items()}
        entry["localization"] = localization_stability(gt, predictions["clean"], matches["clean"],
                                                       predictions[cond], matches[cond])
    return _GroundTruthScore(conditions, samples, {c: m.counts for c, m in matches.items()}, false_alarms,
                             {c: m.gt_matched_det >= 0 for c, m in matches.items()})


def _false_alarm_block(records: Mapping[str, Any]) -> dict[str, Any]:
    return {"confidence": 1.0 - DEFAULT_DELTA, "conditions": dict(records)}


def _summary(conditions: Mapping[str, Mapping[str, Any]], samples: Mapping[str, Mapping[str, np.ndarray]],
             config: SuiteConfig, confidence: float) -> dict[str, Any]:
    """The robustness summary with the intervals of its means (``ci``, after the existing keys), every one
    bootstrapped over the same resample rows as the per-condition intervals."""
    return {**summarize_robustness(conditions, config), "ci": summary_intervals(samples, config, confidence)}


def sample_block(counts: PerImageCounts, bootstrap: BootstrapOptions, clusters: np.ndarray | None) -> dict[str, Any]:
    """What every number of a score rests on: images, GT boxes (per COCO size bin) and how the bootstrap
    resampled them. counts: any condition's per-image counts (the GT side is the same in every condition)."""
    t = counts.totals()
    n_units = counts.n_images if clusters is None else int(len(np.unique(np.asarray(clusters))))
    return {"n_images": counts.n_images, "n_gt": t["n_gt"], "n_gt_small": t["gt_small"],
            "n_gt_medium": t["gt_medium"], "n_gt_large": t["gt_large"],
            "resampling_unit": "image" if clusters is None else "cluster", "n_units": n_units,
            "n_bootstrap": int(bootstrap.n_bootstrap), "seed": int(bootstrap.seed),
            "confidence": float(bootstrap.confidence)}


Samples = dict[str, dict[str, np.ndarray]]  # {condition: {CI metric: (B,) per-resample values}}


# --- several classes -----------------------------------------------------------------------------------------
# Metrics whose macro value is the mean over classes; the exposure rates (FP per image, image share) are
# totals over all classes instead, since a false alarm of any class costs the same search time.
MACRO_MEAN_METRICS = tuple(m for m in AP_METRICS + THRESHOLD_METRICS if m not in LOWER_IS_BETTER)


def _macro_value(values: list[Any], ap: bool) -> Any:
    """Mean of the defined per-class values; for AP the classes with pycocotools' -1 (no GT) are skipped, as
    COCOeval's mean over categories does, and -1 stays the answer when no class has GT."""
    kept = [float(v) for v in values if v is not None and not (ap and float(v) == -1.0)]
    if not kept:
        return -1.0 if ap else None
    return float(np.mean(kept))


def _pooled_localization(per_class: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Localization over all classes: counts added, means weighted by each class's matched count."""
    n = sum(int(e.get("n_matched") or 0) for e in per_class)
    out: dict[str, Any] = {"n_matched": n}
    for key in LOCALIZATION_KEYS:
        if key == "n_matched":
            continue
        pairs = [(int(e["n_matched"]), e[key]) for e in per_class if e.get(key) is not None and e.get("n_matched")]
        out[key] = sum(w * v for w, v in pairs) / sum(w for w, _ in pairs) if pairs else None
    return {k: out[k] for k in LOCALIZATION_KEYS}


def _macro_samples(per_class: list[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Per-resample macro values: the mean over classes defined in that resample; FP per image summed."""
    out = {}
    for m in CI_METRICS:
        rows = [np.asarray(s[m], dtype=np.float64) for s in per_class]
        out[m] = np.vstack(rows).sum(axis=0) if m in LOWER_IS_BETTER else nanmean_rows(rows)
    return out


def _macro_conditions(names: list[str], per_class: list[_GroundTruthScore], first: GroundTruth,
                      bootstrap: BootstrapOptions, config: SuiteConfig
                      ) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, np.ndarray]], dict[str, dict[str, Any]]]:
    """(macro entries, per-resample macro values, pooled false-alarm records) of every condition over the classes:
    means for the rates of MACRO_MEAN_METRICS, totals for counts and exposure rates. One class is its own macro
    (its entries as they are: a weighted mean of one value need not return that value to the last bit)."""
    if len(per_class) == 1:
        only = per_class[0]
        return only.conditions, only.samples, only.false_alarms
    conditions: dict[str, dict[str, Any]] = {}
    macro_samples: dict[str, dict[str, np.ndarray]] = {}
    false_alarms: dict[str, dict[str, Any]] = {}
    for cond in names:
        entries = [s.conditions[cond] for s in per_class]
        total = sum_counts([s.counts[cond] for s in per_class])
        pooled = rates_from_counts(total)
        entry: dict[str, Any] = condition_labels(cond, config)
        for key in AP_METRICS + THRESHOLD_METRICS[:3] + COUNT_KEYS + THRESHOLD_METRICS[3:]:
            if key in MACRO_MEAN_METRICS:
                entry[key] = _macro_value([e[key] for e in entries], key in AP_METRICS)
            else:  # counts and the exposure rates: all classes together
                entry[key] = pooled[key]
        macro_samples[cond] = _macro_samples([s.samples[cond] for s in per_class])
        false_alarms[cond] = false_alarm_record(first, total, DEFAULT_DELTA)
        conditions[cond] = entry
    clean = conditions.get("clean")
    for cond in names:
        entry = conditions[cond]
        entry["rel_drop"] = relative_drops(clean, entry) if clean else {m: None for m in ROBUSTNESS_METRICS}
        entry["ci"] = {m: _interval(v) for m, v in intervals(macro_samples[cond], bootstrap.confidence).items()}
        if clean:
            drops = paired_drop_intervals(macro_samples["clean"], macro_samples[cond], bootstrap.confidence)
            entry["ci_drop"] = {m: _interval(v) for m, v in drops.items()}
            entry["localization"] = _pooled_localization([s.conditions[cond]["localization"] for s in per_class])
        else:
            entry["ci_drop"] = {m: [None, None] for m in CI_METRICS}
            entry["localization"] = {k: None for k in LOCALIZATION_KEYS}

    return conditions, macro_samples, false_alarms


@dataclass(frozen=True, eq=False)
class ScoreOptions:
    """How a set of conditions is scored, once for every entry point.

    bootstrap: resamples, seed and confidence. iou: the thresholded matching's IoU. clusters: optional (I,)
    group label per GT image row (the bootstrap then resamples whole groups). label: the model's name.
    provenance: a prebuilt provenance block (built from the inputs' sources when None). threshold_info: rule /
    file / sha256 of the threshold file (None values when the threshold was given). config: the suite the
    conditions belong to (order, families; default the installed one; ``score_paths`` passes the split's).
    """

    bootstrap: BootstrapOptions = field(default_factory=BootstrapOptions)
    iou: float = DEFAULT_IOU
    clusters: np.ndarray | None = None
    label: str | None = None
    provenance: Mapping[str, Any] | None = None
    threshold_info: Mapping[str, Any] | None = None
    config: SuiteConfig | None = None
    effects: SplitEffects | None = None  # what the split records per condition (generation 2), or None


def _options(options: ScoreOptions | None, fields: Mapping[str, Any]) -> ScoreOptions:
    """``options``, or ScoreOptions made of ``fields``; both at once would silently drop the fields."""
    if options is not None and fields:
        raise AegisError(f"pass ScoreOptions or its fields ({', '.join(sorted(fields))}), not both")
    return options or ScoreOptions(**fields)


def score_conditions(gt: GroundTruth, predictions: Mapping[str, Detections], threshold: float,
                     options: ScoreOptions | None = None, **fields: Any) -> dict[str, Any]:
    """Score every condition at one frozen ``threshold``; returns the docs/SCORE_JSON.md structure
    (:func:`score_conditions_with_samples` without the samples). ``fields``: ScoreOptions fields."""
    return score_conditions_with_samples(gt, predictions, threshold, options, **fields)[0]


def score_conditions_with_samples(gt: GroundTruth, predictions: Mapping[str, Detections], threshold: float,
                                  options: ScoreOptions | None = None, **fields: Any) -> tuple[dict[str, Any], Samples]:
    """(score document, per-resample values of every condition). The samples let a caller pair this score with
    another one drawn with the same weight rows (the same images, options and clusters).

    The single-class protocol is the several-class one with one class (the person category of ``gt``):
    predictions {condition id (or any name): Detections resolved against ``gt``}.
    """
    if not predictions:
        raise AegisError("nothing to score: no predictions were given")
    return _score(({PERSON: gt}), {c: {PERSON: d} for c, d in predictions.items()}, {PERSON: threshold},
                  _options(options, fields), single=True)


def score_conditions_by_class(gts: Mapping[str, GroundTruth], predictions: Mapping[str, Mapping[str, Detections]],
                              thresholds: Mapping[str, float], options: ScoreOptions | None = None,
                              **fields: Any) -> dict[str, Any]:
    """Score several classes: every class exactly as :func:`score_conditions` (its own frozen threshold), plus
    macro entries over the classes in ``conditions`` (docs/SCORE_JSON.md, "Several classes").
    :func:`score_conditions_by_class_with_samples` without the samples."""
    return score_conditions_by_class_with_samples(gts, predictions, thresholds, options, **fields)[0]


def score_conditions_by_class_with_samples(
        gts: Mapping[str, GroundTruth], predictions: Mapping[str, Mapping[str, Detections]],
        thresholds: Mapping[str, float], options: ScoreOptions | None = None,
        **fields: Any) -> tuple[dict[str, Any], Samples]:
    """(score document, per-resample macro values of every condition).

    gts: {class name: GroundTruth of that category}, all over the same image table.
    predictions: {condition: {class name: Detections}}. thresholds: {class name: value}.
    Every class uses the same bootstrap weight rows, so the macro intervals are per-resample means.
    """
    if not gts:
        raise AegisError("[classes_empty] no classes to score")
    if not predictions:
        raise AegisError("nothing to score: no predictions were given")
    return _score(gts, predictions, thresholds, _options(options, fields), single=False)


PERSON = "person"  # the class name of the single-class protocol (never written: its document has no classes)


def _score(gts: Mapping[str, GroundTruth], predictions: Mapping[str, Mapping[str, Detections]],
           thresholds: Mapping[str, float], options: ScoreOptions, single: bool) -> tuple[dict[str, Any], Samples]:
    """The one scoring pipeline: every class against its GT at its threshold with shared bootstrap rows, the
    macro entries over the classes (a single class is its own macro), and one document builder."""
    first = next(iter(gts.values()))
    if any(not np.array_equal(g.image_ids, first.image_ids) for g in gts.values()):
        raise AegisError("[classes_image_table] the per-class ground truths must share one image table")
    missing = [c for c in gts if c not in thresholds]
    if missing:
        raise AegisError(f"[threshold_class_missing] no frozen threshold for classes {missing[:5]}")
    for value in thresholds.values():
        _check_threshold(value)
    bootstrap = options.bootstrap
    config = options.config or load_config()
    names = condition_order(list(predictions), config)
    weights = resample_weights(first.n_images, bootstrap, options.clusters)
    scored = {c: _score_ground_truth(gt, {cond: predictions[cond][c] for cond in names}, names,
                                     float(thresholds[c]), weights, options.iou, bootstrap.confidence, config)
              for c, gt in gts.items()}
    conditions, macro_samples, false_alarms = _macro_conditions(names, list(scored.values()), first, bootstrap,
                                                                config)
    if options.effects is not None:
        _add_effects(conditions, options.effects, first, scored[PERSON] if single else None)
    info = dict(options.threshold_info or {})
    provenance = options.provenance
    if provenance is None:
        provenance = build_provenance(gt_source=first.source,
                                      predictions={c: next(iter(predictions[c].values())).source for c in names},
                                      threshold_sha256=info.get("sha256"), seed=bootstrap.seed,
                                      bootstrap=bootstrap.n_bootstrap, iou=options.iou)
    threshold: dict[str, Any] = {"value": None, "rule": info.get("rule"), "file": info.get("file"),
                                 "file_sha256": info.get("sha256")}
    values = sorted(set(float(v) for v in thresholds.values()))
    if single:
        threshold["value"] = values[0]
    else:
        threshold.update(value=values[0] if len(values) == 1 else None,
                         class_thresholds=info.get("class_thresholds") or ("shared" if len(values) == 1 else "per-class"),
                         per_class={c: float(thresholds[c]) for c in gts})
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "label": options.label,
        "dataset": first.dataset,
        "iou": float(options.iou),
        "threshold": threshold,
        "conditions": conditions,
        "summary": _summary(conditions, macro_samples, config, bootstrap.confidence),
        # Beside the per-condition entries (whose keys stay as they were): exposure and exact upper bounds.
        "false_alarm": _false_alarm_block(false_alarms),
    }
    if not single:
        doc["classes"] = {c: {"category_id": int(gts[c].category_id), "threshold": float(thresholds[c]),
                              "conditions": s.conditions,
                              "summary": _summary(s.conditions, s.samples, config, bootstrap.confidence),
                              "false_alarm": _false_alarm_block(s.false_alarms)}
                          for c, s in scored.items()}
    doc["sample"] = sample_block(sum_counts([s.counts[names[0]] for s in scored.values()]), bootstrap,
                                 options.clusters)
    doc["provenance"] = dict(provenance)
    return doc, macro_samples


def _add_effects(conditions: dict[str, dict[str, Any]], effects: SplitEffects, gt: GroundTruth,
                 person: _GroundTruthScore | None) -> None:
    """Beside each corrupted condition's metrics: on how many images it acted (``acted_images``, of its
    ``n_images``); for a flood condition of the single-class protocol, the recall per submerged-fraction bin."""
    for cond, entry in conditions.items():
        if cond in effects.acted:
            entry["acted_images"] = int(effects.acted[cond])
        if person is not None and cond in effects.submerged and cond in person.matched:
            entry["submerged"] = submerged_strata(gt, person.matched[cond], person.matched.get("clean"),
                                                  effects.submerged[cond])


# --- paths -> result ---------------------------------------------------------------------------------------
# Files a prediction folder may hold that are not predictions.
RUN_METADATA_FILES = frozenset({"run.json"})


def prediction_files(preds: str | Path, on_warning: Warn | None = None) -> dict[str, Path]:
    """{condition: file}. A file is one condition named after its stem; a directory contributes every
    ``<condition>.json`` whose stem is a condition id (other JSON files are skipped with a warning)."""
    preds = Path(preds)
    if preds.exists() and not preds.is_dir():  # the reader refuses what is not a regular file (a FIFO, ...)
        return {preds.stem: preds}
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


def check_condition_names(names: Iterable[str], config: SuiteConfig) -> None:
    """AegisError ``[condition_unknown]`` for a name shaped as a condition id (``<x>_s<k>``) that the suite
    does not have (``low_light_s9``, ``made_up_s1``): the report would refuse the score. ``clean``, the suite's
    ids and other names (``iid``, ``ood``) pass."""
    known = set(config.conditions())
    for name in names:
        if name not in known and corruption_of(name) is not None:
            raise AegisError(f"[condition_unknown] {name!r:.60} is not a condition of suite config "
                             f"{config.config_hash} (expected 'clean' or '<corruption>_s<1-3>' with one of: "
                             f"{', '.join(config.names)})")


def check_threshold_choice(threshold: float | None, threshold_file: str | Path | None) -> None:
    if (threshold is None) == (threshold_file is None):
        raise AegisError("give exactly one of a threshold value (--threshold) or a threshold file "
                         "(--threshold-file, written by 'aegis freeze-threshold')")
    # True is no threshold (it would read as 1.0); a string or None here is a caller's slip, not a value.
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.floating))):
        raise AegisError(f"threshold must be a number in [0, 1]; got {threshold!r:.40}")


def _warn_iou_mismatch(info: Mapping[str, Any], iou: float, on_warning: Warn | None) -> None:
    frozen_iou = info.get("iou")
    if on_warning and isinstance(frozen_iou, (int, float)) and float(frozen_iou) != float(iou):
        on_warning(f"[iou_mismatch] the threshold was frozen with IoU {frozen_iou:g} but scoring uses "
                   f"IoU {iou:g}")


def _warn_all(prefix: str, lines, on_warning: Warn | None) -> None:
    for w in lines:
        if on_warning:
            on_warning(f"{prefix}: {w}")


@dataclass(frozen=True)
class PathOptions:
    """What ``score_paths`` needs besides the two paths (docs/SCORING.md): exactly one of ``threshold`` /
    ``threshold_file``; bootstrap resamples and seed; IoU; ``cluster_by`` (a GT image attribute or a JSON
    mapping); ``label`` (default: the predictions folder or file name); GT ``split``; ``on_warning`` (loader
    warnings, grouped by kind); ``classes`` (None: the person protocol; ``"all"`` or ``"a,b"``: several GT
    categories); ``class_map`` (a remap applied before anything else); ``cross_check`` (``"pycocotools"``)."""

    threshold: float | None = None
    threshold_file: str | Path | None = None
    bootstrap: int = 1000
    seed: int = 0
    iou: float = DEFAULT_IOU
    cluster_by: str | None = None
    label: str | None = None
    split: str = "test"
    on_warning: Warn | None = None
    classes: str | None = None
    class_map: ClassMap | None = None
    cross_check: str | None = None


def score_paths(preds: str | Path, gt: str | Path, **fields: Any) -> dict[str, Any]:
    """Load, validate and score predictions (a file or a directory of ``<condition>.json``) against GT (a COCO
    file or a split directory); ``fields`` are :class:`PathOptions`. ``cross_check="pycocotools"`` recomputes
    COCO AP with pycocotools on the same inputs and raises AegisError on any difference above 1e-12
    (``aegis_eval.protocols.crosscheck``); its summary goes to ``provenance.cross_check``."""
    return score_paths_detailed(preds, gt, PathOptions(**fields)).result


@dataclass(frozen=True)
class PathScore:
    """A score with what pairing it to another needs: its samples, image ids and bootstrap clusters."""

    result: dict[str, Any]
    samples: Samples
    image_ids: np.ndarray
    clusters: np.ndarray | None


def score_paths_detailed(preds: str | Path, gt: str | Path, options: PathOptions) -> PathScore:
    """:func:`score_paths` with the samples, image ids and clusters a paired comparison needs. Warnings of one
    kind repeated over conditions reach ``on_warning`` as one line (``aegis_eval.protocols.warning_groups``)."""
    with grouped(options.on_warning) as collect:
        return _score_paths_detailed(preds, gt, replace(options, on_warning=collect))


def _score_paths_detailed(preds: str | Path, gt: str | Path, o: PathOptions) -> PathScore:
    if o.cross_check is not None:
        from aegis_eval.protocols.crosscheck import check_tool

        check_tool(o.cross_check)
        if o.classes is not None:
            raise AegisError("[cross_check_classes] --cross-check compares the single-class (person) protocol; "
                             "run it without --classes")
    check_threshold_choice(o.threshold, o.threshold_file)
    files = prediction_files(preds, o.on_warning)
    if o.label is None:
        o = replace(o, label=Path(preds).name if Path(preds).is_dir() else Path(preds).stem)
    if o.classes is not None:
        gts = load_ground_truth_by_class(gt, o.classes, o.split, o.class_map)
        if o.threshold_file is not None:
            values, info = read_class_thresholds(o.threshold_file, list(gts))
        else:
            values, info = {c: float(o.threshold) for c in gts}, {"class_thresholds": "shared"}
        detections = {cond: load_predictions_by_class(f, gts, o.class_map) for cond, f in files.items()}
        return score_loaded(gts, detections, values, info, o)
    value, info = frozen_threshold(o)
    ground_truth = load_ground_truth(gt, o.split, o.class_map)
    detections = {cond: load_predictions(f, ground_truth, o.class_map) for cond, f in files.items()}
    scored = score_loaded(ground_truth, detections, value, info, o)
    if o.cross_check is not None:
        from aegis_eval.protocols.crosscheck import cross_check as run_cross_check

        scored.result["provenance"]["cross_check"] = run_cross_check(scored.result, ground_truth, detections,
                                                                     o.cross_check)
    return scored


def frozen_threshold(o: PathOptions) -> tuple[float, dict[str, Any]]:
    """(threshold value, its file's record) of the single-class protocol: exactly one of ``o.threshold`` and
    ``o.threshold_file``; the record is empty for a value given directly."""
    check_threshold_choice(o.threshold, o.threshold_file)
    if o.threshold_file is not None:
        return read_threshold_file(o.threshold_file)
    return float(o.threshold), {}


def score_loaded(ground_truth: GroundTruth | Mapping[str, GroundTruth],
                 detections: Mapping[str, Detections] | Mapping[str, Mapping[str, Detections]],
                 thresholds: float | Mapping[str, float], info: Mapping[str, Any], o: PathOptions) -> PathScore:
    """Score loaded inputs with provenance built from their sources: the part of :func:`score_paths` after
    loading, shared with in-memory scoring (``aegis_eval.api.score``). Single-class: one GroundTruth,
    ``{condition: Detections}`` and one threshold value; several classes: ``{class: GroundTruth}``,
    ``{condition: {class: Detections}}`` and ``{class: threshold}``. ``info``: the threshold file's record."""
    single = isinstance(ground_truth, GroundTruth)
    first = ground_truth if single else next(iter(ground_truth.values()))
    _warn_all("ground truth", first.warnings, o.on_warning)
    _warn_iou_mismatch(info, o.iou, o.on_warning)
    for cond, d in detections.items():
        one = d if single else next(iter(d.values()))
        _warn_all(cond, one.source.get("warnings", ()), o.on_warning)
    bootstrap = BootstrapOptions(n_bootstrap=o.bootstrap, seed=o.seed)
    config = suite_config_of(first)
    check_condition_names(detections, config)
    clusters = cluster_labels(first, o.cluster_by) if o.cluster_by else None
    provenance = build_provenance(
        gt_source=first.source,
        predictions={c: (d if single else next(iter(d.values()))).source for c, d in detections.items()},
        threshold_sha256=info.get("sha256"), seed=o.seed, bootstrap=o.bootstrap, iou=o.iou, cluster_by=o.cluster_by,
        class_map=o.class_map.record() if o.class_map is not None else None)
    options = ScoreOptions(bootstrap=bootstrap, iou=o.iou, clusters=clusters, label=o.label, provenance=provenance,
                           threshold_info=info, config=config, effects=split_effects(first.split_dir))
    if single:
        result, samples = score_conditions_with_samples(ground_truth, detections, thresholds, options)
    else:
        result, samples = score_conditions_by_class_with_samples(ground_truth, detections, thresholds, options)
    return PathScore(result, samples, first.image_ids, clusters)


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


MACRO_CLASS = "macro"  # the ``class`` cell of a multi-class score's macro rows


def csv_columns(result: Mapping[str, Any] | None = None) -> list[str]:
    """The CSV header; a multi-class result (one with ``classes``) gets a leading ``class`` column."""
    cols = ["condition", "corruption", "family", "severity", *AP_METRICS, *THRESHOLD_METRICS, *COUNT_KEYS]
    cols += [f"{m}_{b}" for m in CI_METRICS for b in ("lo", "hi")]
    cols += [f"rel_drop_{m}" for m in ROBUSTNESS_METRICS]
    cols += [f"rel_drop_{m}_{b}" for m in CI_METRICS for b in ("lo", "hi")]
    cols += [f"loc_{k}" for k in LOCALIZATION_KEYS]
    cols += ["label", "threshold", "iou", "predictions_file", "predictions_sha256", *PROVENANCE_COLUMNS]
    return (["class"] + cols) if result is not None and result.get("classes") else cols


def _condition_rows(result: Mapping[str, Any], conditions: Mapping[str, Any], threshold: Any) -> list[dict[str, Any]]:
    prov = result.get("provenance", {})
    rows = []
    for cond, e in conditions.items():
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
        row.update(label=result.get("label"), threshold=threshold, iou=result.get("iou"),
                   predictions_file=pred.get("file"), predictions_sha256=pred.get("sha256"))
        for k in PROVENANCE_COLUMNS:
            row[k] = prov.get(k)
        rows.append(row)
    return rows


def score_csv_rows(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One flat row per condition (columns: :func:`csv_columns`). A multi-class result gives the macro rows
    (``class`` = "macro") and then every class's rows, each at that class's threshold."""
    rows = _condition_rows(result, result["conditions"], result["threshold"]["value"])
    classes = result.get("classes")
    if not classes:
        return rows
    out = [{"class": MACRO_CLASS, **row} for row in rows]
    for name, block in classes.items():
        out += [{"class": name, **row} for row in _condition_rows(result, block["conditions"], block["threshold"])]
    return out


def write_score_csv(result: Mapping[str, Any], path: str | Path) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=csv_columns(result), lineterminator="\n")
    writer.writeheader()
    for row in score_csv_rows(result):
        writer.writerow({k: ("" if v is None else _clean_number(v)) for k, v in row.items()})
    write_bytes_atomic(path, buf.getvalue().encode())
