"""The evaluation side in one import: score, freeze a threshold, rank models, diff GT versions, referring P@θ.

Each function takes what a Python user has at hand -- a path, a folder, or predictions already in memory -- and
returns a typed result, calling the same library code as the ``aegis`` commands (so a result here is the one
the CLI writes, byte for byte, through ``to_json``). docs/API.md shows one runnable example per task.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aegis_data.errors import AegisError
from aegis_data.exports import lazy_exports

if TYPE_CHECKING:  # the scorer (NumPy, the AP engine) loads on the first score, not on import
    # The predictions forms: a file, a folder, a results list, {condition: file or list} (the load verb's).
    from aegis_eval.protocols.class_map import ClassMap
    from aegis_eval.protocols.scoring import ConditionPredictions, Predictions

PathLike = str | Path


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
    values, which ``class_thresholds`` holds). ``to_dict()`` is the document; ``to_json(path)`` writes exactly the
    score JSON the ``aegis score`` command writes. A document that is no score document (docs/SCORE_JSON.md) is
    refused at construction with one ``[score_schema]`` AegisError line.

    ``samples``: the per-resample values behind the intervals (``aegis_eval.protocols.samples_file.ScoreSamples``;
    None for B = 1, GT versions, or a document read back): :func:`rank` pairs models with them, and ``to_json``
    writes them beside the JSON (``<name>.samples.npz``, docs/SCORE_JSON.md).
    """

    document: Mapping[str, Any]
    samples: Any = field(default=None, repr=False, compare=False)

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
                name=name,
                corruption=entry.get("corruption"),
                family=entry.get("family"),
                severity=None if severity is None else int(severity),
                metrics=metrics,
                ci=_pairs(entry.get("ci")),
                rel_drop=dict(entry.get("rel_drop") or {}),
                ci_drop=_pairs(entry.get("ci_drop")),
                localization=dict(entry.get("localization") or {}),
            )
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
        """Write the document atomically (the bytes of the score JSON ``aegis score`` writes), and with
        ``samples`` its samples file beside it first (``samples_path``); returns the path."""
        if self.samples is not None:
            from aegis_eval.protocols.samples_file import samples_bytes, write_samples

            write_samples(samples_bytes(self.samples), path)
        return write_json(self.document, path)

    def samples_path(self, path: PathLike) -> Path | None:
        """Where ``to_json(path)`` writes the samples file; None when it writes none."""
        from aegis_eval.protocols.samples_file import sidecar_path

        return None if self.samples is None else sidecar_path(path)

    def to_csv(self, path: PathLike) -> Path:
        """Write one flat row per condition atomically (the bytes of the CSV ``aegis score`` writes); returns the
        path."""
        from aegis_eval.protocols.scoring import write_score_csv

        write_score_csv(self.document, path)
        return Path(path)


def write_json(document: Mapping[str, Any], path: PathLike) -> Path:
    """Write any result document of this module (score, rank, gt-diff, referring) atomically, NaN as null:
    the bytes the ``aegis`` commands write; returns the path. A :class:`ScoreResult` is written as the
    score command writes it, with its samples file beside it (``ScoreResult.to_json``)."""
    from aegis_eval.protocols.scoring import write_score_json

    if isinstance(document, ScoreResult):
        return document.to_json(path)
    write_score_json(document, path)
    return Path(path)


def score(
    predictions: Predictions,
    gt: PathLike | Sequence[PathLike],
    *,
    threshold: float | None = None,
    threshold_file: PathLike | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    iou: float = 0.5,
    split: str = "test",
    classes: str | None = None,
    class_map: str | ClassMap | None = None,
    remap_side: str = "gt",
    allow_merge: bool = False,
    remap_versions: Sequence[int] | None = None,
    cluster_by: str | None = None,
    label: str | None = None,
    cross_check: str | None = None,
    on_warning: Callable[[str], None] | None = None,
) -> ScoreResult:
    """Score predictions against a frozen split (or a COCO GT file) with the shared evaluator.

    predictions: a COCO results file (one condition, named by its stem), a folder of ``<condition>.json``, a
    results list (the clean condition), or ``{condition: file or results list}``. gt: a split folder or a COCO
    file; a list of two or more re-scores the same predictions against each annotation version of the same
    images (a ``versions`` block, docs/SCORE_JSON.md). Exactly one of ``threshold`` (a value) and
    ``threshold_file`` (from :func:`freeze_threshold`). ``classes`` (``"all"`` or ``"a,b"``) scores several GT
    categories; it takes file or folder predictions. ``class_map`` (``"SRC:DST,..."``, a JSON file or a
    ``ClassMap``) remaps category ids on the ``remap_side`` (``"gt"`` or ``"preds"``; ``allow_merge`` lets
    several ids land on one); with several GT versions, ``remap_versions`` (1-based) limits a GT-side map to
    those versions. ``cluster_by``: a GT image attribute or a ``{image_id or file_name: group}`` JSON file whose
    groups the bootstrap resamples whole; default: the split's ``group`` when some group holds several images,
    else single images; ``"none"``: single images. ``label`` names the model (default: the file or folder name;
    ``"predictions"`` for in-memory ones). ``cross_check="pycocotools"`` recomputes COCO AP with it and refuses
    any difference above 1e-12. AegisError on bad input.
    """
    from aegis_eval.protocols.scoring import ScoreOptions
    from aegis_eval.protocols.scoring import score as run_score

    versions = isinstance(gt, (list, tuple)) and len(gt) > 1
    if remap_versions and not versions:
        raise AegisError("[class_map_versions] `remap_versions` applies with several `gt` only", param="remap_versions")
    if cross_check is not None and versions:
        raise AegisError("[cross_check_versions] `cross_check` applies to one `gt`", param="cross_check")
    options = ScoreOptions(
        threshold=threshold,
        threshold_file=threshold_file,
        bootstrap=bootstrap,
        seed=seed,
        iou=iou,
        cluster_by=cluster_by,
        label=label,
        split=split,
        classes=classes,
        class_map=_class_map(class_map, remap_side, allow_merge),
        cross_check=cross_check,
        on_warning=on_warning,
    )
    if versions and isinstance(gt, (list, tuple)):  # (versions: several gt)
        from aegis_eval.protocols.versions import score_versions

        return ScoreResult(score_versions(predictions, list(gt), options, remap_versions))
    # A one-item list reaches score() as it is, which refuses it in one line.
    scored = run_score(predictions, gt, options)  # type: ignore[arg-type]
    from aegis_eval.protocols.samples_file import samples_bytes, score_samples, with_samples_hash

    samples = score_samples(scored.samples, scored.image_ids, scored.clusters, scored.result)
    if samples is None:
        return ScoreResult(scored.result)
    # Only provenance gains a field (the samples file's hash): every number of the document stays as scored.
    return ScoreResult(with_samples_hash(scored.result, samples_bytes(samples)), samples)


def read_ahead_predictions(predictions: PathLike) -> None:
    """Start reading a predictions file (bytes, SHA-256, the compiled reader's columns) on a thread, for a
    :func:`score` of it that follows in this process: the read overlaps what comes before (the scorer's imports).
    The score takes that read; anything that went wrong there (a missing file, a folder) is left to the score,
    which reads again and reports it as always."""
    from aegis_eval.protocols.results_file import read_ahead

    read_ahead(predictions)


def _class_map(spec: str | ClassMap | None, side: str, allow_merge: bool) -> ClassMap | None:
    """The remap a score or a freeze applies: None without ``spec`` (then the side and merge stay defaults)."""
    from aegis_eval.protocols.class_map import ClassMap, parse_class_map

    if spec is None:
        if side != "gt" or allow_merge:
            raise AegisError(
                "[class_map_missing] `remap_side` and `allow_merge` only apply with `class_map`", param="class_map"
            )
        return None
    return spec if isinstance(spec, ClassMap) else parse_class_map(str(spec), side, allow_merge)


# --- freeze_threshold -------------------------------------------------------------------------------------------
def freeze_threshold(
    predictions: ConditionPredictions,
    gt: PathLike,
    *,
    rule: str = "max-f1",
    grid: str | Iterable[float] | None = None,
    iou: float = 0.5,
    delta: float | None = None,
    out: PathLike | None = None,
    split: str = "val",
    classes: str | None = None,
    class_thresholds: str | None = None,
    class_map: str | ClassMap | None = None,
    remap_side: str = "gt",
    allow_merge: bool = False,
    on_warning: Callable[[str], None] | None = None,
):
    """Freeze the confidence threshold once on clean *validation* predictions (a results file or list).

    gt: a split folder (its ``annotations/<split>.json``, default val) or a COCO file. ``rule``: ``max-f1``,
    ``precision>=X``, ``recall>=X``, ``fp_per_image<=A`` or ``false_alarm_image_share<=A`` (docs/SCORING.md).
    ``grid``: the threshold values (or ``"start:stop:step"`` / ``"a,b,..."``). Returns the
    :class:`~aegis_eval.protocols.threshold.FrozenThreshold` (``.value``, ``.metrics``, ``.warnings``); with
    ``classes`` (``"all"`` or ``"a,b"``), the :class:`~aegis_eval.protocols.threshold.ClassThresholds` of every
    class (``class_thresholds``: ``"per-class"``, the default, or ``"shared"``). ``class_map`` / ``remap_side``
    / ``allow_merge`` as in :func:`score`. With ``out``, also writes the threshold file ``aegis score`` reads
    (predictions from memory are recorded by the SHA-256 of their canonical JSON). The predictions' loader
    warnings go to ``on_warning``.
    """
    from aegis_eval.protocols.predictions import (
        load_ground_truth,
        load_ground_truth_by_class,
        load_predictions_by_class,
    )
    from aegis_eval.protocols.scoring import IN_MEMORY, load_condition
    from aegis_eval.protocols.threshold import freeze_threshold as freeze
    from aegis_eval.protocols.threshold import (
        freeze_thresholds_by_class,
        parse_grid,
        write_class_threshold_file,
        write_threshold_file,
    )

    grid_values = parse_grid(grid) if isinstance(grid, str) else None if grid is None else tuple(grid)
    cmap = _class_map(class_map, remap_side, allow_merge)
    record = cmap.record() if cmap is not None else None
    preds_path = predictions if isinstance(predictions, (str, Path)) else IN_MEMORY
    if classes is not None:
        if not isinstance(predictions, (str, Path)):
            raise AegisError("`classes` freezes thresholds from a predictions file; pass its path", param="classes")
        gts = load_ground_truth_by_class(gt, classes, split, cmap)
        dets_by_class = load_predictions_by_class(predictions, gts, cmap)
        for w in next(iter(dets_by_class.values())).source.get("warnings", ()):
            if on_warning:
                on_warning(w)
        by_class = freeze_thresholds_by_class(
            gts, dets_by_class, rule=rule, grid=grid_values, iou=iou, delta=delta, mode=class_thresholds or "per-class"
        )
        if out is not None:
            write_class_threshold_file(by_class, out, preds_path, gt, split=split, class_map=record)
        return by_class
    if class_thresholds is not None:
        raise AegisError(
            "[threshold_class_mode] `class_thresholds` applies with `classes` only", param="class_thresholds"
        )
    ground_truth = load_ground_truth(gt, split, cmap)
    dets = load_condition(predictions, "val", ground_truth, cmap)
    for w in dets.source.get("warnings", ()):
        if on_warning:
            on_warning(w)
    frozen = freeze(ground_truth, dets, rule=rule, grid=grid_values, iou=iou, delta=delta)
    if out is not None:
        write_threshold_file(frozen, out, preds_path, gt, split=split, class_map=record)
    return frozen


# --- rank, gt_diff, score_referring --------------------------------------------------------------------------
def rank(
    scores: Sequence[PathLike | ScoreResult | Mapping[str, Any]],
    metric: str = "map50",
    *,
    by: str = "condition",
    condition: str = "clean",
    reference: str | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    allow_mixed_suites: bool = False,
    merge_same_label: bool = False,
    paired: bool = True,
) -> dict[str, Any]:
    """Rank models by ``metric`` from a list of their score JSONs (paths), :class:`ScoreResult` s or score
    documents (each checked as ``aegis rank`` checks a file): the ``aegis rank`` document (rank agreement across
    conditions, paired intervals; docs/SCORING.md). Scores of different suites are refused unless
    ``allow_mixed_suites``. ``merge_same_label`` (score files only): the files of one label are one model, their
    conditions merged (one run per domain). The ``paired`` block holds every pair's differences with paired
    bootstrap intervals, from each file's samples file or each :class:`ScoreResult`'s ``samples`` (a plain
    document has none: unpaired); ``paired`` False leaves them out. AegisError on bad input."""
    from aegis_eval.metrics.bootstrap import BootstrapOptions
    from aegis_eval.protocols.ranking import checked_score_result, load_score_results, model_labels, rank_models

    if isinstance(scores, (str, Path, Mapping, ScoreResult)) or not isinstance(scores, Iterable):
        raise AegisError(f"rank takes a list of two or more score files or results, got one {type(scores).__name__}")
    scores = list(scores)
    if not scores:
        raise AegisError("rank needs at least two scored models; none were given")
    paths = [s for s in scores if isinstance(s, (str, Path))]
    if len(paths) == len(scores):
        from aegis_eval.protocols.ranking import rank_paths

        return rank_paths(
            paths,
            metric,
            by=by,
            condition=condition,
            reference=reference,
            bootstrap=bootstrap,
            seed=seed,
            merge_same_label=merge_same_label,
            allow_mixed_suites=allow_mixed_suites,
            paired=paired,
        )
    if merge_same_label:
        raise AegisError("`merge_same_label` merges score files; pass paths only", param="merge_same_label")
    from aegis_eval.protocols.samples_file import read_samples

    results, samples = [], []
    for k, s in enumerate(scores):
        if isinstance(s, ScoreResult):
            results.append(s.to_dict())
            samples.append(s.samples)
        elif isinstance(s, Mapping):
            results.append(checked_score_result(dict(s), f"scores[{k}]"))
            samples.append(None)
        elif isinstance(s, (str, Path)):
            results.extend(load_score_results([s]))
            samples.append(read_samples(s, results[-1]) if paired else None)
        else:
            raise AegisError(
                f"scores[{k}] must be a score file path, a ScoreResult or a score document, got {type(s).__name__}"
            )
    return rank_models(
        results,
        metric,
        by=by,
        condition=condition,
        reference=reference,
        bootstrap=BootstrapOptions(n_bootstrap=bootstrap, seed=seed),
        labels=model_labels(results),
        allow_mixed_suites=allow_mixed_suites,
        samples=samples,
        paired=paired,
    )


def gt_diff(old: PathLike, new: PathLike, *, iou: float = 0.3, pr_iou: float = 0.5) -> dict[str, Any]:
    """What changed between two versions of ground truth (two COCO files or two split folders): the
    ``aegis-gt-diff/1`` document (boxes kept / moved / added / removed, and the old GT scored as predictions
    against the new)."""
    from aegis_eval.protocols.gt_diff import gt_diff_paths

    return gt_diff_paths(old, new, iou=iou, pr_iou=pr_iou)


def score_referring(
    predictions: PathLike,
    refs: PathLike,
    *,
    bootstrap: int = 1000,
    seed: int = 0,
    cluster_by: str | None = None,
    label: str | None = None,
) -> dict[str, Any]:
    """Referring-expression grounding, P@θ with intervals: the ``aegis-referring/1`` document for a predictions
    file and an ``aegis-refs/1`` file (``aegis convert-refs`` makes one from RefCOCO-style data)."""
    from aegis_eval.protocols.referring import score_referring_paths

    return score_referring_paths(predictions, refs, bootstrap=bootstrap, seed=seed, cluster_by=cluster_by, label=label)


def convert_refs(refs: PathLike, instances: PathLike, out: PathLike) -> dict[str, Any]:
    """RefCOCO-style refs (a JSON list of {ref_id, ann_id, image_id, split, sentences}) and the COCO instances
    holding the referred boxes -> the ``aegis-refs/1`` ground truth of :func:`score_referring`, written
    atomically to ``out``; returns the document."""
    from aegis_data.files.imageio import write_bytes_atomic
    from aegis_eval.protocols.predictions import read_json_file
    from aegis_eval.protocols.referring import refs_from_refcoco

    refs_doc, _ = read_json_file(Path(refs), "refs", "refcoco_")
    inst_doc, _ = read_json_file(Path(instances), "instances", "refcoco_")
    doc = refs_from_refcoco(refs_doc, inst_doc, str(refs))
    write_bytes_atomic(out, (json.dumps(doc, indent=1) + "\n").encode())
    return doc


# === Baselines and reports ==========================================================================================
# The reference runners (``aegis baseline predict | train | sweep | ablate``) and the report renderers (``aegis
# report``, ``aegis gallery``): each command is parsing and rendering around one function below, so a new option is
# one parameter of the command and one of its function. A runner's settings come from ``config`` (a baseline yaml,
# configs/baselines/) overridden by the parameters given (None = not given; aegis_eval.runners.config).

# Formatting shared by the reports and the command line, so a value reads the same in both (loaded on first use).
_SHARED_FORMATS = {
    "fmt_tau": "aegis_eval.report.tables",
    "fmt_difference": "aegis_eval.report.tables",
    "rank_order": "aegis_eval.report.tables",
    "fmt_threshold": "aegis_eval.report.mitigation",
}


__getattr__ = lazy_exports(__name__, globals(), _SHARED_FORMATS)[0]


Progress = Callable[[str, str], None]  # (stage, status) as a runner reports it
Log = Callable[[str], None]


def baseline_settings(config: PathLike | None = None, **overrides: Any) -> dict[str, Any]:
    """The runner settings of the baseline yaml ``config`` (or the defaults) with ``overrides`` applied (a None
    override is not given); refused without a model or weights."""
    from aegis_eval.runners.config import resolve_settings

    cfg = resolve_settings(config, overrides)
    if not cfg.get("model"):
        raise AegisError(
            "no model given: pass `model` yolo11|rtdetr|fasterrcnn, or a `config` that names one", param="model"
        )
    if not cfg.get("weights"):
        raise AegisError(
            f"no weights given for {cfg['model']}: pass `weights` (a local file; for Ultralytics also "
            f"a model yaml for random init; 'none' for a random Faster R-CNN)",
            param="weights",
        )
    return cfg


def _predict_settings(
    cfg: Mapping[str, Any], tile: bool | None, limit: int | None, split_name: str, allow_download: bool
):
    from aegis_eval.runners.predict import PredictSettings

    return PredictSettings(
        model=cfg["model"],
        weights=cfg["weights"],
        arch=cfg.get("arch"),
        imgsz=cfg.get("imgsz"),
        tiled=True if tile is None else tile,
        tile=cfg["tile"],
        overlap=cfg["overlap"],
        nms_iou=cfg["nms_iou"],
        score_floor=cfg["score_floor"],
        max_det=cfg["max_det"],
        batch=cfg["batch"],
        limit=limit,
        split_name=split_name,
        device=cfg["device"],
        seed=cfg["seed"],
        allow_download=allow_download,
    )


def _train_settings(cfg: Mapping[str, Any], allow_download: bool):
    from aegis_eval.runners.train import TrainSettings

    keys = (
        "arch",
        "epochs",
        "imgsz",
        "batch",
        "seed",
        "lr0",
        "optimizer",
        "momentum",
        "weight_decay",
        "device",
        "workers",
        "amp",
        "tile",
        "overlap",
        "min_visibility",
        "score_floor",
        "nms_iou",
        "max_det",
    )
    return TrainSettings(
        model=cfg["model"], weights=cfg["weights"], allow_download=allow_download, **{k: cfg[k] for k in keys}
    )


def _check_run_dir(out_dir: PathLike, split_dir: PathLike) -> None:
    from aegis_data.files.outputs import check_output_dirs

    check_output_dirs({"`out_dir`": Path(out_dir)}, [Path(split_dir)])


@dataclass(frozen=True)
class PredictRun:
    """What :func:`predict` did: the detector's name and the run record (``run.json``: device, conditions with
    their image and detection counts, timings)."""

    model: str
    record: dict[str, Any]


def predict(
    split_dir: PathLike,
    out_dir: PathLike,
    *,
    model: str | None = None,
    weights: str | None = None,
    config: PathLike | None = None,
    conditions: str = "all",
    split_name: str = "test",
    tile: bool | None = None,
    tile_size: int | None = None,
    overlap: int | None = None,
    limit: int | None = None,
    batch: int | None = None,
    score_floor: float | None = None,
    max_det: int | None = None,
    nms_iou: float | None = None,
    imgsz: int | None = None,
    arch: str | None = None,
    device: str | None = None,
    seed: int | None = None,
    force: bool = False,
    allow_download: bool = False,
    progress: Progress | None = None,
) -> PredictRun:
    """Predict every condition of a split with a reference detector: one COCO results file per condition under
    ``out_dir``, resumable (``force`` recomputes finished conditions). docs/BASELINES.md."""
    _check_run_dir(out_dir, split_dir)
    from aegis_eval.runners.predict import predict_split

    cfg = baseline_settings(
        config,
        model=model,
        weights=weights,
        tile=tile_size,
        overlap=overlap,
        batch=batch,
        score_floor=score_floor,
        max_det=max_det,
        nms_iou=nms_iou,
        imgsz=imgsz,
        arch=arch,
        device=device,
        seed=seed,
    )
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


def train(
    split_dir: PathLike,
    out_dir: PathLike,
    *,
    model: str | None = None,
    weights: str | None = None,
    config: PathLike | None = None,
    epochs: int | None = None,
    imgsz: int | None = None,
    batch: int | None = None,
    seed: int | None = None,
    lr0: float | None = None,
    optimizer: str | None = None,
    device: str | None = None,
    workers: int | None = None,
    arch: str | None = None,
    amp: bool | None = None,
    tile_size: int | None = None,
    overlap: int | None = None,
    min_visibility: float | None = None,
    augment: str | None = None,
    suite: str | None = None,
    allow_download: bool = False,
    log: Log | None = None,
) -> TrainRun:
    """Fine-tune on the split's train images (tiled), validating on clean val; resumes a stopped run. ``augment``:
    a disaster-augmentation policy (a name in configs/augment or a yaml path) of ``suite`` (default: the
    split's) applied to every training frame (docs/MITIGATION.md)."""
    _check_run_dir(out_dir, split_dir)
    from aegis_data.augment.transform import load_policy
    from aegis_eval.runners.augment_hooks import policy_suite_for
    from aegis_eval.runners.train import train_baseline

    cfg = baseline_settings(
        config,
        model=model,
        weights=weights,
        epochs=epochs,
        imgsz=imgsz,
        batch=batch,
        seed=seed,
        lr0=lr0,
        optimizer=optimizer,
        device=device,
        workers=workers,
        arch=arch,
        amp=amp,
        tile=tile_size,
        overlap=overlap,
        min_visibility=min_visibility,
    )
    settings = _train_settings(cfg, allow_download)
    policy = load_policy(augment, suite or policy_suite_for(split_dir)) if augment else None
    result = train_baseline(settings, split_dir, out_dir, log=log, augment=policy)
    return TrainRun(settings.model, result, policy)


def sweep(
    split_dir: PathLike,
    out_dir: PathLike,
    *,
    model: str | None = None,
    weights: str | None = None,
    config: PathLike | None = None,
    bootstrap: int | None = None,
    conditions: str = "all",
    label: str | None = None,
    tile: bool | None = None,
    tile_size: int | None = None,
    overlap: int | None = None,
    limit: int | None = None,
    batch: int | None = None,
    score_floor: float | None = None,
    max_det: int | None = None,
    nms_iou: float | None = None,
    imgsz: int | None = None,
    arch: str | None = None,
    device: str | None = None,
    seed: int | None = None,
    force: bool = False,
    allow_download: bool = False,
    progress: Progress | None = None,
    on_warning: Log | None = None,
) -> dict[str, Any]:
    """Predict clean val, freeze the threshold once, predict every test condition and score it with bootstrap
    intervals: the score document (also written to ``out_dir``/score.json and score.csv)."""
    _check_run_dir(out_dir, split_dir)
    from aegis_eval.runners.sweep import run_sweep

    cfg = baseline_settings(
        config,
        model=model,
        weights=weights,
        bootstrap=bootstrap,
        tile=tile_size,
        overlap=overlap,
        batch=batch,
        score_floor=score_floor,
        max_det=max_det,
        nms_iou=nms_iou,
        imgsz=imgsz,
        arch=arch,
        device=device,
        seed=seed,
    )
    settings = _predict_settings(cfg, tile, limit, "test", allow_download)
    return run_sweep(
        settings,
        split_dir,
        out_dir,
        bootstrap=cfg["bootstrap"],
        seed=cfg["seed"],
        rule=cfg["threshold_rule"],
        label=label or cfg.get("name") or settings.model,
        conditions=conditions,
        force=force,
        progress=progress,
        on_warning=on_warning,
    )


def ablate(
    split_dir: PathLike,
    out_dir: PathLike,
    policies: str | Sequence[str],
    *,
    model: str | None = None,
    weights: str | None = None,
    config: PathLike | None = None,
    epochs: int | None = None,
    imgsz: int | None = None,
    batch: int | None = None,
    seed: int | None = None,
    lr0: float | None = None,
    optimizer: str | None = None,
    bootstrap: int | None = None,
    conditions: str = "all",
    label: str | None = None,
    arch: str | None = None,
    device: str | None = None,
    init: PathLike | None = None,
    seeds: str | Sequence[int] | None = None,
    suite: str | None = None,
    allow_download: bool = False,
    progress: Progress | None = None,
    log: Log | None = None,
    on_warning: Log | None = None,
) -> dict[str, Any]:
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
    cfg = baseline_settings(
        config,
        model=model,
        weights=str(init) if init is not None else weights,
        epochs=epochs,
        imgsz=imgsz,
        batch=batch,
        seed=seed,
        lr0=lr0,
        optimizer=optimizer,
        bootstrap=bootstrap,
        arch=arch,
        device=device,
    )
    train_settings = _train_settings(cfg, allow_download)
    predict_settings = _predict_settings(cfg, None, None, "test", allow_download)
    return run_ablation(
        train_settings,
        predict_settings,
        split_dir,
        out_dir,
        chosen,
        bootstrap=cfg["bootstrap"],
        seed=cfg["seed"],
        rule=cfg["threshold_rule"],
        label=label or cfg.get("name") or cfg["model"],
        conditions=conditions,
        init=init,
        seeds=seed_list,
        progress=progress,
        log=log,
        on_warning=on_warning,
    )


def write_report(
    results: Sequence[PathLike],
    out_dir: PathLike,
    *,
    formats: str | Iterable[str] | None = None,
    metric: str = "recall",
    html_figures: str = "png",
    allow_mixed_suites: bool = False,
    galleries: Sequence[PathLike] = (),
):
    """Render figures (PNG, PDF, SVG), report.md/html, LaTeX tables and report.tex from score JSONs under
    ``out_dir``: the :class:`~aegis_eval.report.build.ReportFiles` (``files``, ``notes``). ``formats``: a subset of
    md, html, latex (default all). ``galleries``: folders of ``write_gallery(..., per_condition=True)`` whose worst and
    best pair per condition the report links."""
    from aegis_data.files.outputs import check_output_dirs

    check_output_dirs({"`out_dir`": Path(out_dir)}, [Path(g) for g in galleries])
    from aegis_eval.report import build_report, load_results

    extra: dict[str, Any] = {} if formats is None else {"formats": formats}
    return build_report(
        load_results(results),
        out_dir,
        metric=metric,
        html_figures=html_figures,
        allow_mixed_suites=allow_mixed_suites,
        galleries=[Path(g) for g in galleries],
        **extra,
    )


def write_gallery(
    predictions: PathLike,
    split_dir: PathLike,
    out_dir: PathLike,
    *,
    threshold: float | None = None,
    threshold_file: PathLike | None = None,
    conditions: str | Sequence[str] = "all",
    n: int = 8,
    max_width: int = 1600,
    per_condition: bool = False,
    label: str | None = None,
):
    """Draw the ``n`` (image, condition) pairs whose recall drops most against clean -- clean beside corrupted,
    ground truth and predictions -- from a folder of ``clean.json`` and ``<condition>.json`` results: the
    :class:`~aegis_eval.report.gallery.GalleryFiles` (``pairs``, ``index_html``, ``notes``). ``per_condition``: also
    each condition's worst and best pair, for ``write_report(..., galleries=[out_dir])``; ``label``: the model's
    name there (default: the predictions folder's name)."""
    from aegis_data.files.outputs import check_output_dirs

    check_output_dirs({"`out_dir`": Path(out_dir)}, [Path(split_dir), Path(predictions)])
    from aegis_eval.report.gallery import build_gallery

    return build_gallery(
        split_dir,
        predictions,
        out_dir,
        threshold=threshold,
        threshold_file=threshold_file,
        conditions=conditions,
        n=n,
        max_width=max_width,
        per_condition=per_condition,
        label=label,
    )
