"""The one scorer behind ``aegis score`` and ``aegis_eval.api.score``: predictions -> the ``aegis-score/1`` JSON
(docs/SCORE_JSON.md) and a flat CSV, in four verbs (the shape of pycocotools' and hotcoco's COCOeval):

* :func:`load` reads and checks every input once: the predictions (a file, a folder of ``<condition>.json`` or
  ``{condition: file or results list}``), the ground truth of one class or several, the frozen threshold(s),
  the bootstrap clusters and what the split records per condition -> :class:`Loaded`.
* :func:`evaluate` scores every class on its own: per condition COCO AP (``aegis_eval.metrics.coco``), counts
  and rates at the frozen threshold (``aegis_eval.metrics.matching``), per-resample values on one shared
  bootstrap weight matrix, percentile and paired-drop intervals, relative drops and localization stability vs
  clean -> :class:`Evaluation`.
* :func:`accumulate` combines the classes: macro entries (a single class is its own macro), the pooled
  false-alarm records and what the split says each condition did -> :class:`Accumulated`.
* :func:`summarize` writes the document: threshold block, robustness summary (``aegis_eval.metrics.robustness``),
  false-alarm block (``aegis_eval.metrics.false_alarms``), per-class blocks, sample and provenance.

:func:`score` runs the four for every entry point, with one :class:`ScoreOptions`; its :class:`Scored` keeps the
per-resample values that cross-version re-scoring (``aegis_eval.protocols.versions``) pairs.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aegis_data.conditions import parse_condition
from aegis_data.engine.config import SuiteConfig, load_config
from aegis_data.errors import AegisError
from aegis_data.files.imageio import write_bytes_atomic
from aegis_eval.metrics import coco as ap_metrics
from aegis_eval.metrics.bootstrap import (
    BootstrapOptions,
    ResampleRows,
    bootstrap_samples,
    intervals,
    nanmean_rows,
    paired_drop_intervals,
    resample_weights,
)
from aegis_eval.metrics.exact_bounds import DEFAULT_DELTA
from aegis_eval.metrics.false_alarms import false_alarm_record
from aegis_eval.metrics.localization import localization_stability
from aegis_eval.metrics.matching import (
    DEFAULT_IOU,
    PerImageCounts,
    ThresholdMatch,
    match_and_evaluate,
    rates_from_counts,
    sum_counts,
    threshold_metrics,
)
from aegis_eval.metrics.result_keys import (
    AP_METRICS,
    CI_METRICS,
    COUNT_KEYS,
    LOCALIZATION_KEYS,
    LOWER_IS_BETTER,
    SCHEMA,
    THRESHOLD_METRICS,
)
from aegis_eval.metrics.robustness import (
    ROBUSTNESS_METRICS,
    corruption_of,
    relative_drops,
    summarize_robustness,
    summary_intervals,
)
from aegis_eval.metrics.types import Detections, GroundTruth
from aegis_eval.protocols.class_map import ClassMap
from aegis_eval.protocols.condition_effects import SplitEffects, split_effects, submerged_strata
from aegis_eval.protocols.predictions import (
    detections_from_results,
    load_ground_truth,
    load_ground_truth_by_class,
    load_predictions,
    load_predictions_by_class,
    read_json_file,
    read_predictions_file,
    resolve_predictions,
    suite_config_of,
)
from aegis_eval.protocols.provenance import build_provenance, git_state_ahead
from aegis_eval.protocols.threshold import read_class_thresholds, read_threshold_file, threshold_notes
from aegis_eval.protocols.warning_groups import grouped

Warn = Callable[[str], None]
Samples = dict[str, dict[str, np.ndarray]]  # {condition: {CI metric: (B,) per-resample values}}
Pending = dict[str, "Future[dict[str, np.ndarray]]"]  # {condition: its per-resample values, being computed}
PERSON = "person"  # the class name of the single-class protocol (never written: its document has no classes)


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


# --- the options ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScoreOptions:
    """How predictions are scored, the same for every entry point (docs/SCORING.md); checked once, here.

    Exactly one of ``threshold`` (a value in [0, 1]) and ``threshold_file`` (written by ``freeze_threshold``).
    ``bootstrap`` resamples and ``seed``; ``iou`` of the thresholded matching; ``cluster_by`` (a GT image
    attribute or a JSON mapping file: resample whole groups); ``label`` (default: the predictions folder or file
    name, ``"predictions"`` in memory); GT ``split``; ``classes`` (None: the person protocol; ``"all"`` or
    ``"a,b"``: several GT categories); ``class_map`` (a remap applied before anything else); ``cross_check``
    (``"pycocotools"``: recompute COCO AP with it and refuse any difference above 1e-12); ``on_warning``
    (loader warnings, one line per kind).
    """

    threshold: float | None = None
    threshold_file: str | Path | None = None
    bootstrap: int = 1000
    seed: int = 0
    iou: float = DEFAULT_IOU
    cluster_by: str | None = None
    label: str | None = None
    split: str = "test"
    classes: str | None = None
    class_map: ClassMap | None = None
    cross_check: str | None = None
    on_warning: Warn | None = None

    def __post_init__(self) -> None:
        if (self.threshold is None) == (self.threshold_file is None):
            raise AegisError(
                "give exactly one of a threshold value (`threshold`) or a threshold file "
                "(`threshold_file`, written by 'aegis freeze-threshold')",
                param="threshold",
            )
        if self.threshold is not None:
            value = self.threshold
            # True is no threshold (it would read as 1.0); a string here is a caller's slip, not a value.
            if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)):
                raise AegisError(f"`threshold` must be a number in [0, 1]; got {value!r:.40}", param="threshold")
            if not np.isfinite(value) or not 0.0 <= value <= 1.0:
                raise AegisError(f"`threshold` must be a number in [0, 1]; got {float(value)!r}", param="threshold")
        self.resampling  # noqa: B018 -- BootstrapOptions checks the resample count and the seed
        if self.cross_check is not None:
            from aegis_eval.protocols.crosscheck import check_tool

            check_tool(self.cross_check)
            if self.classes is not None:
                raise AegisError(
                    "[cross_check_classes] `cross_check` compares the single-class (person) protocol; "
                    "run it without `classes`",
                    param="cross_check",
                )

    @property
    def resampling(self) -> BootstrapOptions:
        """The bootstrap's resamples and seed (95% intervals)."""
        return BootstrapOptions(n_bootstrap=self.bootstrap, seed=self.seed)


# --- load ----------------------------------------------------------------------------------------------
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
        on_warning(
            f"[not_a_regular_file] skipped {len(irregular)} entries that are not regular files "
            f"({', '.join(irregular[:3])}{', ...' if len(irregular) > 3 else ''})"
        )
    if skipped and on_warning:
        on_warning(
            f"[not_a_condition] skipped {len(skipped)} JSON files whose names are not condition ids "
            f"({', '.join(skipped[:3])}{', ...' if len(skipped) > 3 else ''})"
        )
    if not found:
        raise AegisError(
            f"[predictions_empty_dir] {preds} holds no <condition>.json files "
            "(expected clean.json, low_light_s3.json, ...)"
        )
    return found


NO_CLUSTERS = "none"  # `cluster_by` that turns the default clustering by the split's groups off
SPLIT_GROUP = "group"  # the GT image attribute a built split's groups travel in


def effective_cluster_by(gt: GroundTruth, cluster_by: str | None) -> str | None:
    """What the bootstrap resamples by (docs/SCORING.md, "Cluster bootstrap"): ``cluster_by`` as given; when None, the
    split's groups (``"group"``) if every GT image carries a ``group`` and at least one group holds more than one
    image, else None (images). All-singleton groups resample exactly as images do, so they are left as images."""
    if cluster_by is not None:
        return cluster_by
    groups = [a.get(SPLIT_GROUP) for a in gt.attributes]
    if len(groups) != gt.n_images or not groups or any(g is None for g in groups):
        return None
    keys = [json.dumps(g, sort_keys=True) for g in groups]
    return SPLIT_GROUP if len(set(keys)) < len(keys) else None


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
                raise AegisError(
                    f"[cluster_missing] {path} assigns no group to image {int(gt.image_ids[r])} "
                    f"({name}); expected every GT image id or file_name as a key"
                )
            groups.append(json.dumps(hit, sort_keys=True))
    else:
        groups = []
        for r in range(gt.n_images):
            attrs = gt.attributes[r] if r < len(gt.attributes) else {}
            if cluster_by not in attrs:
                available = sorted(set().union(*[set(a) for a in gt.attributes])) if gt.attributes else []
                raise AegisError(
                    f"[cluster_missing] GT image {int(gt.image_ids[r])} has no attribute "
                    f"{cluster_by!r} (available: {', '.join(available) or 'none'}); pass an image "
                    "attribute name or a JSON mapping file"
                )
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
            raise AegisError(
                f"[condition_unknown] {name!r:.60} is not a condition of suite config "
                f"{config.config_hash} (expected 'clean' or '<corruption>_s<1-3>' with one of: "
                f"{', '.join(config.names)})"
            )


def _warn_iou_mismatch(info: Mapping[str, Any], iou: float, on_warning: Warn | None) -> None:
    frozen_iou = info.get("iou")
    if on_warning and isinstance(frozen_iou, (int, float)) and float(frozen_iou) != float(iou):
        on_warning(f"[iou_mismatch] the threshold was frozen with IoU {frozen_iou:g} but scoring uses IoU {iou:g}")


def _warn_all(prefix: str, lines: Iterable[str], on_warning: Warn | None) -> None:
    for w in lines:
        if on_warning:
            on_warning(f"{prefix}: {w}")


PathLike = str | Path
# One condition's predictions: a COCO results file, or the results list itself ([{image_id, category_id,
# bbox, score}, ...]).
ConditionPredictions = PathLike | Sequence[Mapping[str, Any]]
# Predictions of a run: a file (one condition, named after its stem), a folder of <condition>.json, a results
# list (the clean condition), or {condition: file or list}.
Predictions = PathLike | Sequence[Mapping[str, Any]] | Mapping[str, ConditionPredictions]
IN_MEMORY = "<in-memory>"  # the "file" provenance records for predictions passed as lists
# A condition named in memory: what a <condition>.json file stem may be, without folders or hidden names (at most
# score_doc.MAX_CONDITION_NAME characters, checked apart from the pattern).
_CONDITION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def _numpy_as_python(value: Any) -> Any:
    """NumPy scalars and arrays (a detector's float32 score, an ndarray bbox) as the Python numbers and lists
    they hold, so they hash as their JSON; only called for objects json cannot write, so pure-Python
    predictions hash exactly as before."""
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist() if isinstance(value, np.ndarray) else value.item()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _in_memory_source(results: Any, condition: str) -> dict[str, Any]:
    """Provenance of predictions given as a list: the file is ``IN_MEMORY``, the hash that of their canonical
    JSON (sorted keys, no whitespace), so the same predictions always record the same hash."""
    try:
        data = json.dumps(
            results, sort_keys=True, separators=(",", ":"), allow_nan=False, default=_numpy_as_python
        ).encode()
    except (TypeError, ValueError) as exc:
        raise AegisError(
            f"[predictions_not_json] predictions for {condition!r} are not JSON-serialisable ({exc})"
        ) from None
    return {"path": IN_MEMORY, "sha256": hashlib.sha256(data).hexdigest()}


def in_memory_conditions(predictions: Predictions) -> Mapping[str, ConditionPredictions] | None:
    """{condition: file or list} for in-memory forms; None when ``predictions`` is a path (file or folder)."""
    if isinstance(predictions, (str, Path)):
        return None
    if isinstance(predictions, Mapping):
        if not predictions:
            raise AegisError("nothing to score: the predictions mapping is empty", param="predictions")
        from aegis_eval.protocols.score_doc import MAX_CONDITION_NAME

        for cond in predictions:
            if not isinstance(cond, str) or len(cond) > MAX_CONDITION_NAME or not _CONDITION_NAME.fullmatch(cond):
                raise AegisError(
                    f"[condition_name] {cond!r:.60} is no condition name; expected 'clean', a condition "
                    "id such as 'low_light_s3', or a name such as 'ood' (letters, digits, '_', '.', "
                    f"'-'; at most {MAX_CONDITION_NAME})",
                    param="predictions",
                )
        return predictions
    if isinstance(predictions, Sequence):
        return {"clean": predictions}
    raise AegisError(
        f"`predictions` must be a path, a results list or {{condition: path or list}}, got "
        f"{type(predictions).__name__}",
        param="predictions",
    )


def load_condition(
    value: ConditionPredictions, condition: str, gt: GroundTruth, class_map: ClassMap | None = None
) -> Detections:
    """Detections of one condition given as a results file or a results list, resolved against ``gt``."""
    if isinstance(value, (str, Path)):
        return load_predictions(value, gt, class_map)
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return detections_from_results(list(value), gt, _in_memory_source(value, condition))
    raise AegisError(
        f"predictions for {condition!r} must be a file path or a results list, got {type(value).__name__}",
        param="predictions",
    )


# Prediction files read ahead (bytes, hash, compiled parse) while the GT loads and earlier files resolve: two
# threads, as many files held at once (bounded memory).
_READ_THREADS = 2
_READ_AHEAD = 4


def _load_single(
    files: Mapping[str, ConditionPredictions], gt: PathLike, o: ScoreOptions
) -> tuple[GroundTruth, dict[str, dict[str, Detections]]]:
    """The GT and {condition: {PERSON: Detections}} of a single-class score. The files are read and parsed on
    threads (the reader, hash and compiled parse release the GIL) while the GT loads; each is resolved against the
    GT in the given order on this thread, so the results and the first error raised are the sequential ones."""
    paths = [(str(c), f) for c, f in files.items() if isinstance(f, (str, Path))]
    with ThreadPoolExecutor(_READ_THREADS) as pool:
        ahead: dict[str, Future[Any]] = {}

        def read_ahead() -> None:
            while paths and len(ahead) < _READ_AHEAD:
                cond, f = paths.pop(0)
                ahead[cond] = pool.submit(read_predictions_file, f, o.class_map is None)

        read_ahead()
        ground_truth = load_ground_truth(gt, o.split, o.class_map)
        detections: dict[str, dict[str, Detections]] = {}
        for cond, f in files.items():
            cond = str(cond)
            if cond in ahead:
                read = ahead.pop(cond).result()
                read_ahead()
                detections[cond] = {PERSON: resolve_predictions(read, ground_truth, o.class_map)}
            else:
                detections[cond] = {PERSON: load_condition(f, cond, ground_truth, o.class_map)}
    return ground_truth, detections


@dataclass(frozen=True)
class Loaded:
    """Every input of a score, read and checked: ``gts`` {class: GroundTruth} over one image table (the
    single-class protocol: one entry, ``PERSON``); ``detections`` {condition: {class: Detections}};
    ``thresholds`` {class: frozen value}; ``threshold_info`` the threshold file's record (rule / file / sha256;
    empty for a value given directly); ``clusters`` (I,) group codes or None; the suite ``config``; the split's
    per-condition ``effects`` (generation 2) or None."""

    gts: Mapping[str, GroundTruth]
    detections: Mapping[str, Mapping[str, Detections]]
    thresholds: Mapping[str, float]
    threshold_info: Mapping[str, Any]
    single: bool
    label: str | None
    config: SuiteConfig
    clusters: np.ndarray | None = None
    effects: SplitEffects | None = None
    cluster_by: str | None = None  # what the clusters came from: the option, or "group" by default

    @property
    def first(self) -> GroundTruth:
        """The first class's GT: the image table, sources and split every class shares."""
        return next(iter(self.gts.values()))


def load(predictions: Predictions, gt: PathLike, options: ScoreOptions, on_warning: Warn | None = None) -> Loaded:
    """Read and check every input of a score once (see :class:`Loaded`): predictions as a file, a folder of
    ``<condition>.json``, a results list (the clean condition) or ``{condition: file or results list}``; the GT
    as a split folder or a COCO file. Loader warnings go to ``on_warning`` (:func:`score` passes
    ``options.on_warning`` behind its grouping)."""
    o = options
    mapping = in_memory_conditions(predictions)
    if mapping is None:
        assert isinstance(predictions, (str, Path))  # in_memory_conditions gives None for a path only
        files: Mapping[str, ConditionPredictions] = prediction_files(predictions, on_warning)
        label = (
            o.label
            if o.label is not None
            else (Path(predictions).name if Path(predictions).is_dir() else Path(predictions).stem)
        )
    elif o.classes is not None:
        raise AegisError(
            "`classes` scores predictions from files; pass a file or a folder of <condition>.json", param="classes"
        )
    else:
        files, label = mapping, "predictions" if o.label is None else o.label
    if o.classes is not None:
        gts = load_ground_truth_by_class(gt, o.classes, o.split, o.class_map)
        if o.threshold_file is not None:
            thresholds, info = read_class_thresholds(o.threshold_file, list(gts))
        else:
            assert o.threshold is not None  # ScoreOptions holds exactly one of threshold and threshold_file
            thresholds, info = {c: float(o.threshold) for c in gts}, {"class_thresholds": "shared"}
        # With classes, the files are prediction_files' paths (in-memory predictions were refused above).
        detections = {
            cond: load_predictions_by_class(f, gts, o.class_map)  # type: ignore[arg-type]
            for cond, f in files.items()
        }
    else:
        if o.threshold_file is not None:
            value, info = read_threshold_file(o.threshold_file)
        else:
            assert o.threshold is not None  # ScoreOptions holds exactly one of threshold and threshold_file
            value, info = float(o.threshold), {}
        ground_truth, detections = _load_single(files, gt, o)
        gts, thresholds = {PERSON: ground_truth}, {PERSON: value}
    first = next(iter(gts.values()))
    _warn_all("ground truth", first.warnings, on_warning)
    _warn_iou_mismatch(info, o.iou, on_warning)
    for cond, per_class in detections.items():
        _warn_all(cond, next(iter(per_class.values())).source.get("warnings", ()), on_warning)
    config = suite_config_of(first)
    check_condition_names(detections, config)
    cluster_by = effective_cluster_by(first, o.cluster_by)
    clusters = cluster_labels(first, cluster_by) if cluster_by not in (None, NO_CLUSTERS) else None
    return Loaded(
        gts,
        detections,
        thresholds,
        info,
        o.classes is None,
        label,
        config,
        clusters,
        split_effects(first.split_dir),
        cluster_by,
    )


# --- evaluate --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _GroundTruthScore:
    """Every condition scored against one GroundTruth (one class): finished entries, the per-resample values
    (paired across conditions: one weight matrix), per-image counts and false-alarm records."""

    conditions: dict[str, dict[str, Any]]
    samples: dict[str, dict[str, np.ndarray]]
    counts: dict[str, PerImageCounts]
    false_alarms: dict[str, dict[str, Any]]
    matched: dict[str, np.ndarray] = field(default_factory=dict)  # per condition: (G,) whether each GT box is matched


def _score_ground_truth(
    gt: GroundTruth,
    predictions: Mapping[str, Detections],
    names: list[str],
    threshold: float,
    weights: ResampleRows,
    iou: float,
    confidence: float,
    config: SuiteConfig,
) -> _GroundTruthScore:
    matches: dict[str, ThresholdMatch] = {}
    samples: dict[str, dict[str, np.ndarray]] = {}
    conditions: dict[str, dict[str, Any]] = {}
    false_alarms: dict[str, dict[str, Any]] = {}
    # A condition's resamples run on a thread of their own while the next condition is matched: the compiled AP
    # bootstrap releases the GIL, so on a machine with a core to spare the sweep's bootstrap hides behind its
    # matching. At most _RESAMPLES_IN_FLIGHT conditions' tables wait for their turn (bounded memory); the values
    # do not depend on the timing.
    pending: Pending = {}
    point_only = weights.n_rows == 1 and bool((weights.weights == 1).all())
    with ThreadPoolExecutor(1) as resampler:
        for cond in names:
            dets = predictions[cond]
            match, table = match_and_evaluate(gt, dets, threshold, iou)  # one pass where the two share their pairs
            ap = ap_metrics.accumulate(table)
            entry: dict[str, Any] = condition_labels(cond, config)
            entry.update({m: _clean_number(ap[m]) for m in AP_METRICS})
            tm = threshold_metrics(match)
            for key in THRESHOLD_METRICS[:3] + COUNT_KEYS + THRESHOLD_METRICS[3:]:
                entry[key] = tm[key]
            if point_only:  # B = 1: the point values, no resampling to overlap
                samples[cond] = bootstrap_samples(weights, table, match.counts, ap)
            else:
                _settle(pending, samples, _RESAMPLES_IN_FLIGHT - 1)
                pending[cond] = resampler.submit(bootstrap_samples, weights, table, match.counts)
            false_alarms[cond] = false_alarm_record(gt, match.counts, DEFAULT_DELTA)
            matches[cond] = match
            conditions[cond] = entry
        _settle(pending, samples, 0)

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
        entry["localization"] = localization_stability(
            gt, predictions["clean"], matches["clean"], predictions[cond], matches[cond]
        )
    return _GroundTruthScore(
        conditions,
        samples,
        {c: m.counts for c, m in matches.items()},
        false_alarms,
        {c: m.gt_matched_det >= 0 for c, m in matches.items()},
    )


# Conditions whose resamples may be queued or running at once behind the matching (each holds its AP table).
_RESAMPLES_IN_FLIGHT = 2


def _settle(pending: Pending, samples: dict[str, dict[str, np.ndarray]], keep: int) -> None:
    """Collect the oldest pending resamples into ``samples`` until at most ``keep`` remain (errors re-raised)."""
    while len(pending) > keep:
        cond = next(iter(pending))
        samples[cond] = pending.pop(cond).result()


@dataclass(frozen=True)
class Evaluation:
    """Every class scored on its own: ``names`` the conditions in canonical order, ``per_class`` {class:
    :class:`_GroundTruthScore`}, all drawn with the same bootstrap weight rows."""

    names: list[str]
    per_class: dict[str, _GroundTruthScore]


def evaluate(loaded: Loaded, options: ScoreOptions) -> Evaluation:
    """Score every class against its GT at its frozen threshold, every condition with the same resample rows."""
    bootstrap = options.resampling
    names = condition_order(list(loaded.detections), loaded.config)
    # one checked weight matrix for every class and condition: the rows, their layouts and the GT-side totals are
    # built once per score, not once per condition
    weights = ResampleRows(resample_weights(loaded.first.n_images, bootstrap, loaded.clusters))
    per_class = {
        c: _score_ground_truth(
            gt,
            {cond: loaded.detections[cond][c] for cond in names},
            names,
            float(loaded.thresholds[c]),
            weights,
            options.iou,
            bootstrap.confidence,
            loaded.config,
        )
        for c, gt in loaded.gts.items()
    }
    return Evaluation(names, per_class)


# --- accumulate ------------------------------------------------------------------------------------------
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


def _macro_conditions(
    names: list[str],
    per_class: list[_GroundTruthScore],
    first: GroundTruth,
    bootstrap: BootstrapOptions,
    config: SuiteConfig,
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


def _add_effects(
    conditions: dict[str, dict[str, Any]], effects: SplitEffects, gt: GroundTruth, person: _GroundTruthScore | None
) -> None:
    """Beside each corrupted condition's metrics: on how many images it acted (``acted_images``, of its
    ``n_images``); for a flood condition of the single-class protocol, the recall per submerged-fraction bin."""
    for cond, entry in conditions.items():
        if cond in effects.acted:
            entry["acted_images"] = int(effects.acted[cond])
        if person is not None and cond in effects.submerged and cond in person.matched:
            entry["submerged"] = submerged_strata(
                gt, person.matched[cond], person.matched.get("clean"), effects.submerged[cond]
            )


@dataclass(frozen=True)
class Accumulated:
    """The entries over all classes: ``conditions`` (macro entries; a single class's own), their per-resample
    ``samples`` and the pooled ``false_alarms`` records."""

    conditions: dict[str, dict[str, Any]]
    samples: Samples
    false_alarms: dict[str, dict[str, Any]]


def accumulate(loaded: Loaded, evaluation: Evaluation, options: ScoreOptions) -> Accumulated:
    """Combine the classes (:func:`_macro_conditions`) and add what the split records per condition."""
    conditions, samples, false_alarms = _macro_conditions(
        evaluation.names, list(evaluation.per_class.values()), loaded.first, options.resampling, loaded.config
    )
    if loaded.effects is not None:
        _add_effects(conditions, loaded.effects, loaded.first, evaluation.per_class[PERSON] if loaded.single else None)
    return Accumulated(conditions, samples, false_alarms)


# --- summarize -------------------------------------------------------------------------------------------
def _false_alarm_block(records: Mapping[str, Any]) -> dict[str, Any]:
    return {"confidence": 1.0 - DEFAULT_DELTA, "conditions": dict(records)}


def _summary(
    conditions: Mapping[str, Mapping[str, Any]],
    samples: Mapping[str, Mapping[str, np.ndarray]],
    config: SuiteConfig,
    confidence: float,
) -> dict[str, Any]:
    """The robustness summary with the intervals of its means (``ci``, after the existing keys), every one
    bootstrapped over the same resample rows as the per-condition intervals."""
    return {**summarize_robustness(conditions, config), "ci": summary_intervals(samples, config, confidence)}


def sample_block(counts: PerImageCounts, bootstrap: BootstrapOptions, clusters: np.ndarray | None) -> dict[str, Any]:
    """What every number of a score rests on: images, GT boxes (per COCO size bin) and how the bootstrap
    resampled them. counts: any condition's per-image counts (the GT side is the same in every condition)."""
    t = counts.totals()
    n_units = counts.n_images if clusters is None else int(len(np.unique(np.asarray(clusters))))
    return {
        "n_images": counts.n_images,
        "n_gt": t["n_gt"],
        "n_gt_small": t["gt_small"],
        "n_gt_medium": t["gt_medium"],
        "n_gt_large": t["gt_large"],
        "resampling_unit": "image" if clusters is None else "cluster",
        "n_units": n_units,
        "n_bootstrap": int(bootstrap.n_bootstrap),
        "seed": int(bootstrap.seed),
        "confidence": float(bootstrap.confidence),
    }


def summarize(
    loaded: Loaded, evaluation: Evaluation, accumulated: Accumulated, options: ScoreOptions
) -> dict[str, Any]:
    """The ``aegis-score/1`` document (docs/SCORE_JSON.md)."""
    bootstrap, config, info, first = options.resampling, loaded.config, loaded.threshold_info, loaded.first
    gts, thresholds, names = loaded.gts, loaded.thresholds, evaluation.names
    provenance = build_provenance(
        gt_source=first.source,
        predictions={c: next(iter(loaded.detections[c].values())).source for c in loaded.detections},
        threshold_sha256=info.get("sha256"),
        seed=options.seed,
        bootstrap=options.bootstrap,
        iou=options.iou,
        cluster_by=loaded.cluster_by,
        class_map=options.class_map.record() if options.class_map is not None else None,
    )
    threshold: dict[str, Any] = {
        "value": None,
        "rule": info.get("rule"),
        "file": info.get("file"),
        "file_sha256": info.get("sha256"),
    }
    values = sorted(set(float(v) for v in thresholds.values()))
    threshold.update(threshold_notes(info))  # validation n and warnings, when the file records them
    if loaded.single:
        threshold["value"] = values[0]
    else:
        threshold.update(
            value=values[0] if len(values) == 1 else None,
            class_thresholds=info.get("class_thresholds") or ("shared" if len(values) == 1 else "per-class"),
            per_class={c: float(thresholds[c]) for c in gts},
        )
    conditions = accumulated.conditions
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "label": loaded.label,
        "dataset": first.dataset,
        "iou": float(options.iou),
        "threshold": threshold,
        "conditions": conditions,
        "summary": _summary(conditions, accumulated.samples, config, bootstrap.confidence),
        # Beside the per-condition entries (whose keys stay as they were): exposure and exact upper bounds.
        "false_alarm": _false_alarm_block(accumulated.false_alarms),
    }
    if not loaded.single:
        doc["classes"] = {
            c: {
                "category_id": int(gts[c].category_id),
                "threshold": float(thresholds[c]),
                "conditions": s.conditions,
                "summary": _summary(s.conditions, s.samples, config, bootstrap.confidence),
                "false_alarm": _false_alarm_block(s.false_alarms),
            }
            for c, s in evaluation.per_class.items()
        }
    per_class = evaluation.per_class.values()
    doc["sample"] = sample_block(sum_counts([s.counts[names[0]] for s in per_class]), bootstrap, loaded.clusters)
    doc["provenance"] = provenance
    return doc


# --- the front door ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scored:
    """A score with what pairing it to another needs: its samples, image ids and bootstrap clusters."""

    result: dict[str, Any]
    samples: Samples
    image_ids: np.ndarray
    clusters: np.ndarray | None


def score(predictions: Predictions, gt: PathLike, options: ScoreOptions) -> Scored:
    """load -> evaluate -> accumulate -> summarize: the one path of ``aegis score``, ``aegis_eval.api.score``,
    cross-version re-scoring and the runners. Warnings of one kind repeated over conditions reach
    ``options.on_warning`` as one line (``aegis_eval.protocols.warning_groups``). With ``cross_check``, COCO AP
    is recomputed by that tool on the same inputs (``aegis_eval.protocols.crosscheck``) and its summary goes to
    ``provenance.cross_check``."""
    git_state_ahead()  # the provenance's git processes run while the score is computed
    with grouped(options.on_warning) as collect:
        loaded = load(predictions, gt, options, on_warning=collect)
        evaluation = evaluate(loaded, options)
        accumulated = accumulate(loaded, evaluation, options)
        result = summarize(loaded, evaluation, accumulated, options)
        if options.cross_check is not None:
            from aegis_eval.protocols.crosscheck import cross_check

            detections = {c: d[PERSON] for c, d in loaded.detections.items()}
            result["provenance"]["cross_check"] = cross_check(result, loaded.first, detections, options.cross_check)
    return Scored(result, accumulated.samples, loaded.first.image_ids, loaded.clusters)


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


PROVENANCE_COLUMNS = (
    "toolkit_version",
    "git_sha",
    "git_dirty",
    "config_hash",
    "manifest_root_hash",
    "gt_sha256",
    "threshold_sha256",
    "seed",
    "bootstrap",
    "cluster_by",
    "timestamp",
)


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
        row.update(
            label=result.get("label"),
            threshold=threshold,
            iou=result.get("iou"),
            predictions_file=pred.get("file"),
            predictions_sha256=pred.get("sha256"),
        )
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
