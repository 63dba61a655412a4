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
         seed: int = 0, allow_mixed_suites: bool = False) -> dict[str, Any]:
    """Rank models by ``metric`` from a list of their score JSONs (paths), :class:`ScoreResult` s or score
    documents (each checked as ``aegis rank`` checks a file): the ``aegis rank`` document (rank agreement across
    conditions, paired intervals; docs/SCORING.md). Scores of different suites are refused unless
    ``allow_mixed_suites`` (``--allow-mixed-suites``). AegisError on bad input."""
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

        return rank_paths(scores, metric, by=by, condition=condition, reference=reference,
                          bootstrap=bootstrap, seed=seed, allow_mixed_suites=allow_mixed_suites)
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
