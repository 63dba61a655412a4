"""The evaluation side in one import: score, freeze a threshold, rank models, diff GT versions, referring P@θ.

Each function takes what a Python user has at hand -- a path, a folder, or predictions already in memory -- and
returns a typed result, calling the same library code as the ``aegis`` commands (so a result here is the one
the CLI writes, byte for byte, through ``to_json``). docs/API.md shows one runnable example per task.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, Union

from aegis_data.errors import AegisError
from aegis_data.exports import lazy_exports

PathLike = Union[str, Path]
# One condition's predictions: a COCO results file, or the results list itself ([{image_id, category_id,
# bbox, score}, ...]).
ConditionPredictions = Union[PathLike, Sequence[Mapping[str, Any]]]
# Predictions of a run: a file (one condition, named after its stem), a folder of <condition>.json, a results
# list (the clean condition), or {condition: file or list}.
Predictions = Union[PathLike, Sequence[Mapping[str, Any]], Mapping[str, ConditionPredictions]]
IN_MEMORY = "<in-memory>"  # the "file" provenance records for predictions passed as lists


def _numpy_as_python(value: Any) -> Any:
    """NumPy scalars and arrays (a detector's float32 score, an ndarray bbox) as the Python numbers and lists
    they hold, so they hash as their JSON; only called for objects json cannot write, so pure-Python
    predictions hash exactly as before."""
    import numpy as np

    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist() if isinstance(value, np.ndarray) else value.item()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _in_memory_source(results: Any, condition: str) -> dict[str, Any]:
    """Provenance of predictions given as a list: the file is ``IN_MEMORY``, the hash that of their canonical
    JSON (sorted keys, no whitespace), so the same predictions always record the same hash."""
    try:
        data = json.dumps(results, sort_keys=True, separators=(",", ":"), allow_nan=False,
                          default=_numpy_as_python).encode()
    except (TypeError, ValueError) as exc:
        raise AegisError(f"[predictions_not_json] predictions for {condition!r} are not JSON-serialisable "
                         f"({exc})") from None
    return {"path": IN_MEMORY, "sha256": hashlib.sha256(data).hexdigest()}


# A condition named in memory: what a <condition>.json file stem may be, without folders or hidden names (at most
# score_doc.MAX_CONDITION_NAME characters, checked apart from the pattern).
_CONDITION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def _as_mapping(predictions: Predictions) -> Mapping[str, ConditionPredictions] | None:
    """{condition: file or list} for in-memory forms; None when ``predictions`` is a path (file or folder)."""
    if isinstance(predictions, (str, Path)):
        return None
    if isinstance(predictions, Mapping):
        if not predictions:
            raise AegisError("nothing to score: the predictions mapping is empty")
        from aegis_eval.protocols.score_doc import MAX_CONDITION_NAME

        for cond in predictions:
            if not isinstance(cond, str) or len(cond) > MAX_CONDITION_NAME or not _CONDITION_NAME.fullmatch(cond):
                raise AegisError(f"[condition_name] {cond!r:.60} is no condition name; expected 'clean', a condition "
                                 "id such as 'low_light_s3', or a name such as 'ood' (letters, digits, '_', '.', "
                                 f"'-'; at most {MAX_CONDITION_NAME})")
        return predictions
    if isinstance(predictions, Sequence):
        return {"clean": predictions}
    raise AegisError(f"predictions must be a path, a results list or {{condition: path or list}}, got "
                     f"{type(predictions).__name__}")


def _load_condition(value: ConditionPredictions, condition: str, gt: Any):
    """Detections of one condition given as a results file or a results list, resolved against ``gt``."""
    from aegis_eval.protocols.predictions import detections_from_results, load_predictions

    if isinstance(value, (str, Path)):
        return load_predictions(value, gt)
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return detections_from_results(list(value), gt, _in_memory_source(value, condition))
    raise AegisError(f"predictions for {condition!r} must be a file path or a results list, got "
                     f"{type(value).__name__}")


# --- score ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ConditionResult:
    """One condition's numbers. ``metrics``: every scalar of the condition (``map50``, ``recall``, ``tp``, ...,
    None where undefined); ``ci``: percentile intervals ``(lo, hi)``; ``rel_drop`` / ``ci_drop``: the relative
    drop vs clean and its paired interval (empty for clean)."""

    name: str
    corruption: str | None
    family: str | None
    severity: int | None  # 0 for clean; None for a condition that is no suite condition id (iid, ood)
    metrics: Mapping[str, Any]
    ci: Mapping[str, tuple]
    rel_drop: Mapping[str, Any]
    ci_drop: Mapping[str, tuple]
    localization: Mapping[str, Any]

    def __getattr__(self, name: str) -> Any:  # result.conditions["clean"].recall
        metrics = self.__dict__.get("metrics") or {}
        if name in metrics:
            return metrics[name]
        raise AttributeError(f"condition {self.__dict__.get('name')!r} has no metric {name!r}")


_CONDITION_FIELDS = ("corruption", "family", "severity", "rel_drop", "ci", "ci_drop", "localization")


def _pairs(block: Any) -> dict[str, tuple]:
    return {k: tuple(v) for k, v in (block or {}).items() if isinstance(v, (list, tuple))}


@dataclass(frozen=True)
class ScoreResult:
    """A scored run: the ``aegis-score/1`` document (docs/SCORE_JSON.md) with typed access.

    ``conditions[name]`` -> :class:`ConditionResult`; ``mpc`` / ``rpc`` / ``mean_rel_drop`` / ``per_family`` /
    ``per_corruption``: the robustness summary; ``threshold``: the frozen value applied (None with per-class
    values, which ``class_thresholds`` holds). ``to_dict()`` is the
    document; ``to_json(path)`` writes exactly what ``aegis score --json`` writes. A document that is no score
    document (docs/SCORE_JSON.md) is refused at construction with one ``[score_schema]`` AegisError line.
    """

    document: Mapping[str, Any]

    def __post_init__(self) -> None:
        from aegis_eval.protocols.ranking import checked_score_result

        doc = dict(self.document) if isinstance(self.document, Mapping) else self.document
        checked_score_result(doc, "score document")

    @cached_property  # built once per result: loops over conditions do not rebuild it on every access
    def conditions(self) -> dict[str, ConditionResult]:
        out = {}
        for name, entry in self.document.get("conditions", {}).items():
            metrics = {k: v for k, v in entry.items() if k not in _CONDITION_FIELDS and not isinstance(v, dict)}
            severity = entry.get("severity")
            out[name] = ConditionResult(
                name=name, corruption=entry.get("corruption"), family=entry.get("family"),
                severity=None if severity is None else int(severity), metrics=metrics, ci=_pairs(entry.get("ci")),
                rel_drop=dict(entry.get("rel_drop") or {}), ci_drop=_pairs(entry.get("ci_drop")),
                localization=dict(entry.get("localization") or {}))
        return out

    @property
    def threshold(self) -> float | None:
        """The frozen value applied; None when each class had its own (then see :attr:`class_thresholds`)."""
        value = (self.document.get("threshold") or {}).get("value")
        return None if value is None else float(value)

    @property
    def class_thresholds(self) -> dict[str, float]:
        """{class: value} when the threshold was frozen per class (``classes=`` scoring), else empty."""
        per_class = (self.document.get("threshold") or {}).get("per_class") or {}
        return {str(k): float(v) for k, v in per_class.items()}

    def _summary(self, key: str) -> dict[str, Any]:
        return dict((self.document.get("summary") or {}).get(key) or {})

    @property
    def mpc(self) -> dict[str, Any]:
        return self._summary("mpc")

    @property
    def rpc(self) -> dict[str, Any]:
        return self._summary("rpc")

    @property
    def mean_rel_drop(self) -> dict[str, Any]:
        return self._summary("mean_rel_drop")

    @property
    def per_family(self) -> dict[str, Any]:
        return self._summary("per_family")

    @property
    def per_corruption(self) -> dict[str, Any]:
        return self._summary("per_corruption")

    @property
    def provenance(self) -> dict[str, Any]:
        return dict(self.document.get("provenance") or {})

    def to_dict(self) -> dict[str, Any]:
        return json.loads(self.to_bytes())

    def to_bytes(self) -> bytes:
        from aegis_eval.protocols.scoring import score_json_bytes

        return score_json_bytes(self.document)

    def to_json(self, path: PathLike) -> Path:
        """Write the document atomically (the bytes of ``aegis score --json``); returns the path."""
        from aegis_eval.protocols.scoring import write_score_json

        write_score_json(self.document, path)
        return Path(path)


def score(predictions: Predictions, gt: PathLike, *, threshold: float | None = None,
          threshold_file: PathLike | None = None, bootstrap: int = 1000, seed: int = 0, iou: float = 0.5,
          split: str = "test", classes: str | None = None, cluster_by: str | None = None,
          label: str | None = None, on_warning: Callable[[str], None] | None = None) -> ScoreResult:
    """Score predictions against a frozen split (or a COCO GT file) with the shared evaluator.

    predictions: a COCO results file (one condition, named by its stem), a folder of ``<condition>.json``, a
    results list (the clean condition), or ``{condition: file or results list}``. Exactly one of ``threshold``
    (a value) and ``threshold_file`` (from :func:`freeze_threshold`). ``classes`` (``"all"`` or ``"a,b"``)
    scores several GT categories; it takes file or folder predictions. ``label`` names the model (default: the
    file or folder name; ``"predictions"`` for in-memory ones). AegisError on bad input.
    """
    from aegis_eval.protocols.predictions import load_ground_truth
    from aegis_eval.protocols.scoring import PathOptions, frozen_threshold, score_loaded, score_paths_detailed
    from aegis_eval.protocols.warning_groups import grouped

    options = PathOptions(threshold=threshold, threshold_file=threshold_file, bootstrap=bootstrap, seed=seed,
                          iou=iou, cluster_by=cluster_by, label=label, split=split, on_warning=on_warning,
                          classes=classes)
    mapping = _as_mapping(predictions)
    if mapping is None:
        return ScoreResult(score_paths_detailed(predictions, gt, options).result)
    if classes is not None:
        raise AegisError("classes= scores predictions from files; pass a file or a folder of <condition>.json")
    value, info = frozen_threshold(options)
    ground_truth = load_ground_truth(gt, split)
    detections = {str(cond): _load_condition(v, str(cond), ground_truth) for cond, v in mapping.items()}
    with grouped(on_warning) as collect:  # repeated kinds as one line, as score_paths_detailed passes them
        options = replace(options, label="predictions" if label is None else label, on_warning=collect)
        return ScoreResult(score_loaded(ground_truth, detections, value, info, options).result)


# --- freeze_threshold -------------------------------------------------------------------------------------------
def freeze_threshold(predictions: ConditionPredictions, gt: PathLike, *, rule: str = "max-f1",
                     grid: Iterable[float] | None = None, iou: float = 0.5, delta: float | None = None,
                     out: PathLike | None = None, split: str = "val"):
    """Freeze the confidence threshold once on clean *validation* predictions (a results file or list).

    gt: a split folder (its ``annotations/<split>.json``, default val) or a COCO file. ``rule``: ``max-f1``,
    ``precision>=X``, ``recall>=X``, ``fp_per_image<=A`` or ``false_alarm_image_share<=A`` (docs/SCORING.md).
    Returns the :class:`~aegis_eval.protocols.threshold.FrozenThreshold` (``.value``, ``.metrics``, ``.warnings``); with
    ``out``, also writes the threshold file ``aegis score`` reads (predictions from memory are recorded by the
    SHA-256 of their canonical JSON).
    """
    from aegis_eval.protocols.predictions import load_ground_truth
    from aegis_eval.protocols.threshold import freeze_threshold as freeze, write_threshold_file

    ground_truth = load_ground_truth(gt, split)
    dets = _load_condition(predictions, "val", ground_truth)
    frozen = freeze(ground_truth, dets, rule=rule, grid=None if grid is None else tuple(grid), iou=iou, delta=delta)
    if out is not None:
        preds_path = predictions if isinstance(predictions, (str, Path)) else IN_MEMORY
        write_threshold_file(frozen, out, preds_path, gt, split=split)
    return frozen


# --- rank, gt_diff, score_referring --------------------------------------------------------------------------
def rank(scores: Sequence[PathLike | ScoreResult | Mapping[str, Any]], metric: str = "map50", *,
         by: str = "condition", condition: str = "clean", reference: str | None = None, bootstrap: int = 1000,
         seed: int = 0, allow_mixed_suites: bool = False, merge_same_label: bool = False) -> dict[str, Any]:
    """Rank models by ``metric`` from a list of their score JSONs (paths), :class:`ScoreResult` s or score
    documents (each checked as ``aegis rank`` checks a file): the ``aegis rank`` document (rank agreement across
    conditions, paired intervals; docs/SCORING.md). Scores of different suites are refused unless
    ``allow_mixed_suites``. ``merge_same_label``: score files with one label are one model (their conditions become
    columns). AegisError on bad input."""
    from aegis_eval.metrics.bootstrap import BootstrapOptions
    from aegis_eval.protocols.ranking import checked_score_result, load_score_results, model_labels, rank_models

    if isinstance(scores, (str, Path, Mapping, ScoreResult)) or not isinstance(scores, Iterable):
        raise AegisError(f"rank takes a list of two or more score files or results, got one "
                         f"{type(scores).__name__}")
    scores = list(scores)
    if not scores:
        raise AegisError("rank needs at least two scored models; none were given")
    if all(isinstance(s, (str, Path)) for s in scores):
        from aegis_eval.protocols.ranking import rank_paths

        return rank_paths(scores, metric, by=by, condition=condition, reference=reference, bootstrap=bootstrap,
                          seed=seed, merge_same_label=merge_same_label, allow_mixed_suites=allow_mixed_suites)
    if merge_same_label:  # merging reads each file's label and records the files it merged
        raise AegisError("`merge_same_label` merges score files: pass paths", param="merge_same_label")
    results = []
    for k, s in enumerate(scores):
        if isinstance(s, ScoreResult):
            results.append(s.to_dict())
        elif isinstance(s, Mapping):
            results.append(checked_score_result(dict(s), f"scores[{k}]"))
        elif isinstance(s, (str, Path)):
            results.extend(load_score_results([s]))
        else:
            raise AegisError(f"scores[{k}] must be a score file path, a ScoreResult or a score document, got "
                             f"{type(s).__name__}")
    return rank_models(results, metric, by=by, condition=condition, reference=reference,
                       bootstrap=BootstrapOptions(n_bootstrap=bootstrap, seed=seed), labels=model_labels(results),
                       allow_mixed_suites=allow_mixed_suites)


def gt_diff(old: PathLike, new: PathLike, *, iou: float = 0.3, pr_iou: float = 0.5) -> dict[str, Any]:
    """What changed between two versions of ground truth (two COCO files or two split folders): the
    ``aegis-gt-diff/1`` document (boxes kept / moved / added / removed, and the old GT scored as predictions
    against the new)."""
    from aegis_eval.protocols.gt_diff import gt_diff_paths

    return gt_diff_paths(old, new, iou=iou, pr_iou=pr_iou)


def score_referring(predictions: PathLike, refs: PathLike, *, bootstrap: int = 1000, seed: int = 0,
                    cluster_by: str | None = None, label: str | None = None) -> dict[str, Any]:
    """Referring-expression grounding, P@θ with intervals: the ``aegis-referring/1`` document for a predictions
    file and an ``aegis-refs/1`` file (``aegis convert-refs`` makes one from RefCOCO-style data)."""
    from aegis_eval.protocols.referring import score_referring_paths

    return score_referring_paths(predictions, refs, bootstrap=bootstrap, seed=seed, cluster_by=cluster_by,
                                 label=label)


# === Baselines and reports ==========================================================================================
# The reference runners (``aegis baseline predict | train | sweep | ablate``) and the report renderers (``aegis
# report``, ``aegis gallery``): each command is parsing and rendering around one function below, so a new option is
# one parameter of the command and one of its function. A runner's settings come from ``config`` (a baseline yaml,
# configs/baselines/) overridden by the parameters given (None = not given; aegis_eval.runners.config).

# Formatting shared by the reports and the command line, so a value reads the same in both (loaded on first use).
_SHARED_FORMATS = {
    "fmt_tau": "aegis_eval.report.tables",
    "rank_order": "aegis_eval.report.tables",
    "fmt_threshold": "aegis_eval.report.mitigation",
}


__getattr__ = lazy_exports(__name__, globals(), _SHARED_FORMATS)[0]


Progress = Callable[[str, str], None]  # (stage, status) as a runner reports it
Log = Callable[[str], None]


def write_document(document: Mapping[str, Any], path: PathLike) -> Path:
    """Write a score, ranking, GT-diff or referring document atomically, in the bytes the commands write."""
    from aegis_eval.protocols.scoring import write_score_json

    write_score_json(document, path)
    return Path(path)


def baseline_settings(config: PathLike | None = None, **overrides: Any) -> dict[str, Any]:
    """The runner settings of the baseline yaml ``config`` (or the defaults) with ``overrides`` applied (a None
    override is not given); refused without a model or weights."""
    from aegis_eval.runners.config import resolve_settings

    cfg = resolve_settings(config, overrides)
    if not cfg.get("model"):
        raise AegisError("no model given: pass `model` yolo11|rtdetr|fasterrcnn, or a `config` that names one",
                         param="model")
    if not cfg.get("weights"):
        raise AegisError(f"no weights given for {cfg['model']}: pass `weights` (a local file; for Ultralytics also "
                         f"a model yaml for random init; 'none' for a random Faster R-CNN)", param="weights")
    return cfg


def _predict_settings(cfg: Mapping[str, Any], tile: bool | None, limit: int | None, split_name: str,
                      allow_download: bool):
    from aegis_eval.runners.predict import PredictSettings

    return PredictSettings(model=cfg["model"], weights=cfg["weights"], arch=cfg.get("arch"), imgsz=cfg.get("imgsz"),
                           tiled=True if tile is None else tile, tile=cfg["tile"], overlap=cfg["overlap"],
                           nms_iou=cfg["nms_iou"], score_floor=cfg["score_floor"], max_det=cfg["max_det"],
                           batch=cfg["batch"], limit=limit, split_name=split_name, device=cfg["device"],
                           seed=cfg["seed"], allow_download=allow_download)


def _train_settings(cfg: Mapping[str, Any], allow_download: bool):
    from aegis_eval.runners.train import TrainSettings

    keys = ("arch", "epochs", "imgsz", "batch", "seed", "lr0", "optimizer", "momentum", "weight_decay", "device",
            "workers", "amp", "tile", "overlap", "min_visibility", "score_floor", "nms_iou", "max_det")
    return TrainSettings(model=cfg["model"], weights=cfg["weights"], allow_download=allow_download,
                         **{k: cfg[k] for k in keys})


def _check_run_dir(out_dir: PathLike, split_dir: PathLike) -> None:
    from aegis_data.files.outputs import check_output_dirs

    check_output_dirs({"`out_dir`": Path(out_dir)}, [Path(split_dir)])


@dataclass(frozen=True)
class PredictRun:
    """What :func:`predict` did: the detector's name and the run record (``run.json``: device, conditions with
    their image and detection counts, timings)."""

    model: str
    record: dict[str, Any]


def predict(split_dir: PathLike, out_dir: PathLike, *, model: str | None = None, weights: str | None = None,
            config: PathLike | None = None, conditions: str = "all", split_name: str = "test",
            tile: bool | None = None, tile_size: int | None = None, overlap: int | None = None,
            limit: int | None = None, batch: int | None = None, score_floor: float | None = None,
            max_det: int | None = None, nms_iou: float | None = None, imgsz: int | None = None,
            arch: str | None = None, device: str | None = None, seed: int | None = None, force: bool = False,
            allow_download: bool = False, progress: Progress | None = None) -> PredictRun:
    """Predict every condition of a split with a reference detector: one COCO results file per condition under
    ``out_dir``, resumable (``force`` recomputes finished conditions). docs/BASELINES.md."""
    _check_run_dir(out_dir, split_dir)
    from aegis_eval.runners.predict import predict_split

    cfg = baseline_settings(config, model=model, weights=weights, tile=tile_size, overlap=overlap, batch=batch,
                            score_floor=score_floor, max_det=max_det, nms_iou=nms_iou, imgsz=imgsz, arch=arch,
                            device=device, seed=seed)
    settings = _predict_settings(cfg, tile, limit, split_name, allow_download)
    record = predict_split(settings, split_dir, out_dir, conditions=conditions, force=force, progress=progress)
    return PredictRun(settings.model, record)


@dataclass(frozen=True)
class TrainRun:
    """What :func:`train` did: the detector's name, the trainer's result (``status``, ``best`` and ``last``
    weights, ``config``) and the augmentation policy it trained with (None: clean frames only)."""

    model: str
    result: dict[str, Any]
    policy: Any


def train(split_dir: PathLike, out_dir: PathLike, *, model: str | None = None, weights: str | None = None,
          config: PathLike | None = None, epochs: int | None = None, imgsz: int | None = None,
          batch: int | None = None, seed: int | None = None, lr0: float | None = None, optimizer: str | None = None,
          device: str | None = None, workers: int | None = None, arch: str | None = None, amp: bool | None = None,
          tile_size: int | None = None, overlap: int | None = None, min_visibility: float | None = None,
          augment: str | None = None, suite: str | None = None, allow_download: bool = False,
          log: Log | None = None) -> TrainRun:
    """Fine-tune on the split's train images (tiled), validating on clean val; resumes a stopped run. ``augment``:
    a disaster-augmentation policy (a name in configs/augment or a yaml path) of ``suite`` (default: the
    split's) applied to every training frame (docs/MITIGATION.md)."""
    _check_run_dir(out_dir, split_dir)
    from aegis_data.augment.transform import load_policy
    from aegis_eval.runners.augment_hooks import policy_suite_for
    from aegis_eval.runners.train import train_baseline

    cfg = baseline_settings(config, model=model, weights=weights, epochs=epochs, imgsz=imgsz, batch=batch, seed=seed,
                            lr0=lr0, optimizer=optimizer, device=device, workers=workers, arch=arch, amp=amp,
                            tile=tile_size, overlap=overlap, min_visibility=min_visibility)
    settings = _train_settings(cfg, allow_download)
    policy = load_policy(augment, suite or policy_suite_for(split_dir)) if augment else None
    result = train_baseline(settings, split_dir, out_dir, log=log, augment=policy)
    return TrainRun(settings.model, result, policy)


def sweep(split_dir: PathLike, out_dir: PathLike, *, model: str | None = None, weights: str | None = None,
          config: PathLike | None = None, bootstrap: int | None = None, conditions: str = "all",
          label: str | None = None, tile: bool | None = None, tile_size: int | None = None,
          overlap: int | None = None, limit: int | None = None, batch: int | None = None,
          score_floor: float | None = None, max_det: int | None = None, nms_iou: float | None = None,
          imgsz: int | None = None, arch: str | None = None, device: str | None = None, seed: int | None = None,
          force: bool = False, allow_download: bool = False, progress: Progress | None = None,
          on_warning: Log | None = None) -> dict[str, Any]:
    """Predict clean val, freeze the threshold once, predict every test condition and score it with bootstrap
    intervals: the score document (also written to ``out_dir``/score.json and score.csv)."""
    _check_run_dir(out_dir, split_dir)
    from aegis_eval.runners.sweep import run_sweep

    cfg = baseline_settings(config, model=model, weights=weights, bootstrap=bootstrap, tile=tile_size,
                            overlap=overlap, batch=batch, score_floor=score_floor, max_det=max_det, nms_iou=nms_iou,
                            imgsz=imgsz, arch=arch, device=device, seed=seed)
    settings = _predict_settings(cfg, tile, limit, "test", allow_download)
    return run_sweep(settings, split_dir, out_dir, bootstrap=cfg["bootstrap"], seed=cfg["seed"],
                     rule=cfg["threshold_rule"], label=label or cfg.get("name") or settings.model,
                     conditions=conditions, force=force, progress=progress, on_warning=on_warning)


def ablate(split_dir: PathLike, out_dir: PathLike, policies: str | Sequence[str], *, model: str | None = None,
           weights: str | None = None, config: PathLike | None = None, epochs: int | None = None,
           imgsz: int | None = None, batch: int | None = None, seed: int | None = None, lr0: float | None = None,
           optimizer: str | None = None, bootstrap: int | None = None, conditions: str = "all",
           label: str | None = None, arch: str | None = None, device: str | None = None,
           init: PathLike | None = None, seeds: str | Sequence[int] | None = None, suite: str | None = None,
           allow_download: bool = False, progress: Progress | None = None, log: Log | None = None,
           on_warning: Log | None = None) -> dict[str, Any]:
    """Train one model per augmentation policy plus the clean baseline (per training seed with ``seeds``), sweep
    every condition and compare: the ablation record (also ``out_dir``/ablation.json). ``init``: a checkpoint
    every model is fine-tuned from, instead of ``weights``."""
    _check_run_dir(out_dir, split_dir)
    from aegis_eval.runners.ablate import parse_policies, parse_seeds, run_ablation
    from aegis_eval.runners.augment_hooks import policy_suite_for

    chosen = parse_policies(policies, suite or policy_suite_for(split_dir))
    seed_list = parse_seeds(seeds) if seeds is not None else None
    if init is not None and weights is not None:
        raise AegisError("give `init` (a checkpoint to fine-tune from) or `weights`, not both", param="init")
    cfg = baseline_settings(config, model=model, weights=str(init) if init is not None else weights, epochs=epochs,
                            imgsz=imgsz, batch=batch, seed=seed, lr0=lr0, optimizer=optimizer, bootstrap=bootstrap,
                            arch=arch, device=device)
    train_settings = _train_settings(cfg, allow_download)
    predict_settings = _predict_settings(cfg, None, None, "test", allow_download)
    return run_ablation(train_settings, predict_settings, split_dir, out_dir, chosen, bootstrap=cfg["bootstrap"],
                        seed=cfg["seed"], rule=cfg["threshold_rule"], label=label or cfg.get("name") or cfg["model"],
                        conditions=conditions, init=init, seeds=seed_list, progress=progress, log=log,
                        on_warning=on_warning)


def report(results: Sequence[PathLike], out_dir: PathLike, *, formats: str | Iterable[str] | None = None,
           metric: str = "recall", html_figures: str = "png", allow_mixed_suites: bool = False):
    """Render figures (PNG, PDF, SVG), report.md/html, LaTeX tables and report.tex from score JSONs under
    ``out_dir``: the :class:`~aegis_eval.report.build.ReportFiles` (``files``, ``notes``). ``formats``: a subset of
    md, html, latex (default all)."""
    from aegis_data.files.outputs import check_output_dirs

    check_output_dirs({"`out_dir`": Path(out_dir)})
    from aegis_eval.report import build_report, load_results

    extra = {} if formats is None else {"formats": formats}
    return build_report(load_results(results), out_dir, metric=metric, html_figures=html_figures,
                        allow_mixed_suites=allow_mixed_suites, **extra)


def gallery(predictions: PathLike, split_dir: PathLike, out_dir: PathLike, *, threshold: float | None = None,
            threshold_file: PathLike | None = None, conditions: str | Sequence[str] = "all", n: int = 8,
            max_width: int = 1600):
    """Draw the ``n`` (image, condition) pairs whose recall drops most against clean -- clean beside corrupted,
    ground truth and predictions -- from a folder of ``clean.json`` and ``<condition>.json`` results: the
    :class:`~aegis_eval.report.gallery.GalleryFiles` (``pairs``, ``index_html``, ``notes``)."""
    from aegis_data.files.outputs import check_output_dirs

    check_output_dirs({"`out_dir`": Path(out_dir)}, [Path(split_dir), Path(predictions)])
    from aegis_eval.report.gallery import build_gallery

    return build_gallery(split_dir, predictions, out_dir, threshold=threshold, threshold_file=threshold_file,
                         conditions=conditions, n=n, max_width=max_width)
