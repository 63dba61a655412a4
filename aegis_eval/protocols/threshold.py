"""Freezing the confidence threshold once, on clean validation predictions (docs/SCORING.md, "The frozen threshold").

The frozen value is stored in a small JSON file (schema ``aegis-threshold/1``) with the rule, the grid, the
validation metrics at every grid point and at the chosen one, and the SHA-256 of the predictions and GT it was
chosen on. Scoring with it as the ``threshold_file`` applies it unchanged to every test condition.

Rules:
* ``max-f1`` (default): the grid threshold with the highest F1; ties go to the lowest threshold.
* ``precision>=X``: the lowest grid threshold whose precision is >= X (keeps the most recall at that precision).
* ``recall>=X``: the highest grid threshold whose recall is >= X (fewest false alarms at that recall).
* ``fp_per_image<=A`` / ``false_alarm_image_share<=A`` with a risk level ``delta`` (default 0.05): the lowest
  grid threshold whose exact one-sided ``1 - delta`` upper bound on clean validation (Garwood for the FP count,
  Clopper-Pearson for the image share; ``aegis_eval.metrics.exact_bounds``) is <= A. The grid is tested as a fixed
  sequence from the highest threshold down and the walk stops at the first threshold that fails: a chain of
  tests in a fixed order needs no multiplicity correction, so the accepted threshold exceeds the budget with
  probability at most ``delta``. The FP count only grows as the threshold falls (matching is prefix-consistent),
  so this is also the lowest passing grid point, and the highest threshold gives the best reachable bound.
A rule that no grid point satisfies is an error. A choice on the first or last grid point is warned about:
the optimum may lie outside the grid.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from aegis_data import __version__
from aegis_data.errors import AegisError
from aegis_data.files.imageio import file_sha256, write_bytes_atomic
from aegis_eval.metrics.exact_bounds import DEFAULT_DELTA, check_delta
from aegis_eval.metrics.false_alarms import false_alarm_risk
from aegis_eval.metrics.matching import (
    DEFAULT_IOU,
    PerImageCounts,
    match_at_threshold,
    per_image_counts,
    rates_from_counts,
    sum_counts,
)
from aegis_eval.metrics.types import Detections, GroundTruth
from aegis_eval.protocols.predictions import as_float, read_json_file, resolve_gt_path
from aegis_eval.protocols.provenance import utc_timestamp

THRESHOLD_SCHEMA = "aegis-threshold/1"
DEFAULT_RULE = "max-f1"
# 0.00, 0.01, ..., 0.99, then two points near 1 for very confident detectors. Declared once, here.
DEFAULT_GRID: tuple[float, ...] = tuple(round(k / 100, 2) for k in range(100)) + (0.995, 0.999)
# Per-grid-point metrics stored in the threshold file (compact: one list per metric).
CURVE_KEYS = ("precision", "recall", "f1", "tp", "fp", "fp_per_image")

# The largest grid accepted: one matching pass plus a vectorised count per point, and one float per point and
# metric in the threshold file. 100,001 points is a 1e-5 step over [0, 1]; finer grids add nothing a score can
# resolve and a grid like 0:1:1e-12 would otherwise exhaust memory.
MAX_GRID_POINTS = 100_001

_RULE_RE = re.compile(r"^\s*(precision|recall)\s*>=\s*([0-9]*\.?[0-9]+)\s*$")
_RISK_RULE_RE = re.compile(r"^\s*(fp_per_image|false_alarm_image_share)\s*<=\s*([0-9]*\.?[0-9]+)\s*$")
# Which exact bound guards each risk metric.
RISK_BOUNDS = {"fp_per_image": "garwood", "false_alarm_image_share": "clopper-pearson"}


@dataclass(frozen=True)
class FrozenThreshold:
    """A chosen operating point. ``metrics`` are the val metrics at ``value`` (as ``threshold_metrics``);
    ``curve`` maps each of CURVE_KEYS (and ``threshold``) to one list over ``grid``."""

    value: float
    rule: str
    grid: tuple[float, ...]
    iou: float
    metrics: dict[str, Any]
    curve: dict[str, list]
    warnings: tuple[str, ...] = field(default=())
    # {"predictions"|"gt": {"file", "sha256"}} of the bytes the loaders actually read, when they recorded them.
    inputs: dict[str, dict[str, str]] = field(default_factory=dict)
    # For a risk rule: metric, budget, delta, bound, the accepted upper bound and the bound at each grid point
    # the fixed-sequence walk visited (None elsewhere). None for the other rules.
    risk: dict[str, Any] | None = None


def parse_rule(rule: str) -> tuple[str, float | None]:
    """``'max-f1' -> ('max-f1', None)``; ``'precision>=0.9' -> ('precision', 0.9)``;
    ``'fp_per_image<=0.2' -> ('fp_per_image', 0.2)``; AegisError otherwise."""
    if rule.strip() == DEFAULT_RULE:
        return DEFAULT_RULE, None
    risk = _RISK_RULE_RE.match(rule)
    if risk:
        budget = float(risk.group(2))
        if risk.group(1) == "false_alarm_image_share" and budget > 1.0:
            raise AegisError(f"[threshold_rule] {rule!r}: a false-alarm image share budget must lie in [0, 1]")
        return risk.group(1), budget
    m = _RULE_RE.match(rule)
    if not m or not 0.0 <= float(m.group(2)) <= 1.0:
        raise AegisError(
            f"[threshold_rule] unknown threshold rule {rule!r}; expected 'max-f1', 'precision>=X' or "
            "'recall>=X' with X in [0, 1], or 'fp_per_image<=A' / 'false_alarm_image_share<=A'"
        )
    return m.group(1), float(m.group(2))


def parse_grid(text: str) -> tuple[float, ...]:
    """``'0:1:0.01'`` (start:stop:step, stop included when on the step) or ``'0.3,0.5,0.7'``."""
    text = text.strip()
    try:
        if ":" in text:
            parts = [float(p) for p in text.split(":")]
            if len(parts) != 3 or not all(np.isfinite(parts)) or parts[2] <= 0 or parts[1] < parts[0]:
                raise ValueError
            points = (parts[1] - parts[0]) / parts[2]
            if not points < MAX_GRID_POINTS:  # also catches an overflow to inf
                raise AegisError(_too_many(f"{points + 1:.4g}", text))
            n = int(np.floor(points + 1e-9)) + 1
            values = [round(parts[0] + k * parts[2], 10) for k in range(n)]
        else:
            values = [float(p) for p in text.split(",") if p.strip()]
    except AegisError:
        raise
    except ValueError:
        raise AegisError(
            f"cannot read threshold grid {text!r}; expected 'start:stop:step' (e.g. 0:1:0.01) or "
            "a comma list (e.g. 0.25,0.5,0.75)"
        ) from None
    return validate_grid(values)


def _too_many(size: str, text: str) -> str:
    return (
        f"threshold grid {text[:40]!r} has {size} points, above the limit of {MAX_GRID_POINTS:,}; "
        f"use a coarser step (0:1:0.00001 is the finest full grid)"
    )


def validate_grid(grid: Sequence[float]) -> tuple[float, ...]:
    if len(grid) > MAX_GRID_POINTS:
        raise AegisError(_too_many(f"{len(grid):,}", f"{len(grid)} values"))
    try:
        values = sorted(set(float(v) for v in grid))
    except (TypeError, ValueError, OverflowError):
        raise AegisError("threshold grid values must be numbers in [0, 1]") from None
    if not values:
        raise AegisError("threshold grid is empty; expected at least one value in [0, 1]")
    bad = [v for v in values if not np.isfinite(v) or not 0.0 <= v <= 1.0]
    if bad:
        raise AegisError(f"threshold grid values must lie in [0, 1]; got {bad[:3]}")
    return tuple(values)


def grid_counts(
    gt: GroundTruth, dets: Detections, grid: Sequence[float], iou: float = DEFAULT_IOU
) -> list[PerImageCounts]:
    """Per-image counts at every grid value (ascending), from one matching pass at the lowest value."""
    grid = validate_grid(grid)
    base = match_at_threshold(gt, dets, grid[0], iou)
    scores = np.asarray(dets.scores, dtype=np.float64)
    # No detections at all (a valid, empty results list): nothing is matched at any threshold.
    matched_det_score = (
        np.where(base.gt_matched_det >= 0, scores[np.maximum(base.gt_matched_det, 0)], -np.inf)
        if scores.size
        else np.full(len(base.gt_matched_det), -np.inf)
    )
    out = []
    for t in grid:
        above = scores >= t
        out.append(per_image_counts(gt, dets.det_image, base.is_tp & above, base.is_fp & above, matched_det_score >= t))
    return out


def risk_upper_bound(metric: str, counts: PerImageCounts, delta: float) -> float:
    """Exact one-sided ``1 - delta`` upper bound of ``fp_per_image`` or ``false_alarm_image_share``."""
    if counts.n_images == 0:
        raise AegisError("[threshold_no_images] the validation ground truth has no images; no false-alarm bound")
    totals = counts.totals()
    # The score's false-alarm block computes the same bounds: one definition, so the rule and the report agree.
    return false_alarm_risk(totals["fp"], totals["images_with_fp"], counts.n_images, None, delta)[f"{metric}_upper"]


def choose_under_risk(
    counts: Sequence[PerImageCounts], grid: Sequence[float], metric: str, budget: float, delta: float
) -> tuple[int, dict[str, Any]]:
    """(grid index, risk record) for a risk rule; the fixed-sequence walk of the module docstring.

    AegisError ``[threshold_risk_unreachable]`` with the best reachable bound when the highest threshold fails.
    """
    bounds: list[float | None] = [None] * len(grid)
    accepted = None
    for k in range(len(grid) - 1, -1, -1):
        bound = bounds[k] = risk_upper_bound(metric, counts[k], delta)
        if bound > budget:
            break
        accepted = k
    if accepted is None:
        # Counts only fall as the threshold rises, so the highest threshold holds the best reachable bound.
        raise AegisError(
            f"[threshold_risk_unreachable] no grid threshold meets {metric}<={budget:g} at delta "
            f"{delta:g}: the best reachable {100 * (1 - delta):g}% upper bound is {bounds[-1]:.4g}, "
            f"at the highest grid threshold {grid[-1]:g}; raise the budget, the delta or the "
            "validation set size"
        )
    record = {
        "metric": metric,
        "budget": budget,
        "delta": delta,
        "confidence": 1.0 - delta,
        "bound": RISK_BOUNDS[metric],
        "procedure": "fixed-sequence, highest threshold first",
        "upper_bound": bounds[accepted],
        "upper_bound_curve": bounds,
    }
    return accepted, record


def _choose(curve: list[dict], kind: str, target: float | None) -> int:
    if kind == DEFAULT_RULE:
        f1 = np.array([np.nan if m["f1"] is None else m["f1"] for m in curve])
        if np.all(np.isnan(f1)):
            raise AegisError("cannot choose a max-f1 threshold: the validation ground truth has no person boxes")
        return int(np.nanargmax(f1))  # first maximum = lowest threshold on ties
    assert target is not None  # parse_rule gives every rule but max-f1 a target
    values = [m[kind] for m in curve]
    ok = [k for k, v in enumerate(values) if v is not None and v >= target - 1e-12]
    if not ok:
        best = max((v for v in values if v is not None), default=None)
        raise AegisError(
            f"no grid threshold satisfies {kind}>={target:g} (best {kind} on the grid: "
            f"{'undefined' if best is None else f'{best:.4f}'})"
        )
    return ok[0] if kind == "precision" else ok[-1]


def score_range(dets: Detections) -> tuple[float, float] | None:
    """(lowest, highest) detection score, None without detections: where a threshold stops making a difference."""
    scores = np.asarray(dets.scores, dtype=np.float64)
    return (float(scores.min()), float(scores.max())) if scores.size else None


_ROUND_STEPS = tuple(float(f"{m}e{e}") for e in range(0, -8, -1) for m in (5, 2, 1))  # 5, 2, 1, 0.5, ...


def _finer_grid(lo: float, hi: float) -> str:
    """A grid text (``parse_grid``) from ``lo`` to ``hi`` (rounded outwards) in 10-25 round steps (1, 2 or 5 x 10^k)."""
    span = max(hi - lo, 1e-4) / 10
    # The largest round step within the span, from parsed literals: no log10, whose last bit varies with the
    # CPU's SIMD path and would move the threshold file's bytes at an exact power of ten.
    step = next((s for s in _ROUND_STEPS if s <= span), _ROUND_STEPS[-1])
    start = max(0.0, np.floor(lo / step + 1e-9) * step)
    stop = min(1.0, np.ceil(hi / step - 1e-9) * step)
    return f"{start:.6g}:{stop:.6g}:{step:.6g}"


def threshold_warnings(grid_t: Sequence[float], k: int, scores: tuple[float, float] | None) -> list[str]:
    """The warnings of a choice at grid index ``k`` given the detections' (lowest, highest) score.

    A threshold at or below the lowest score keeps every detection: every such value scores the same, so the
    detector's own confidence cut-off, not the rule, set the operating point, and a lower grid cannot help
    (``[threshold_at_score_floor]``, naming the lowest score). Otherwise a choice on the first or last grid value
    is ``[threshold_on_grid_edge]``, with a finer grid between that value and the scores beyond it."""
    value = grid_t[k]
    if scores is not None and value <= scores[0]:
        return [
            f"[threshold_at_score_floor] the chosen threshold {value:g} keeps every detection: the detector's "
            f"lowest score is {scores[0]:.4g}, so every threshold up to it scores the same and the optimum may lie "
            "below the detector's own confidence cut-off; predict again with a lower cut-off (e.g. 0.001) and "
            f"freeze on a grid reaching below it (e.g. `grid` {_finer_grid(0.0, scores[0])} for that range)"
        ]
    if len(grid_t) < 2 or k not in (0, len(grid_t) - 1):
        return []
    side = "lowest" if k == 0 else "highest"
    text = (
        f"[threshold_on_grid_edge] the chosen threshold {value:g} is the {side} grid value; "
        "the optimum may lie outside the grid"
    )
    if scores is not None and k == 0 and scores[0] < value:
        text += f" (detections score down to {scores[0]:.4g}: try `grid` {_finer_grid(scores[0], grid_t[1])})"
    elif scores is not None and k > 0 and value < 1.0:
        text += f" (detections score up to {scores[1]:.4g}: try `grid` {_finer_grid(grid_t[-2], 1.0)})"
    return [text]


def _freeze_from_counts(
    counts: Sequence[PerImageCounts],
    grid_t: tuple[float, ...],
    rule: str,
    iou: float,
    delta: float | None,
    score_range: tuple[float, float] | None = None,
) -> FrozenThreshold:
    """The rule applied to per-image counts at every grid value (no ``inputs``: the caller knows the files).
    ``score_range``: the detections' (lowest, highest) score, for the warnings (``threshold_warnings``)."""
    kind, target = parse_rule(rule)
    is_risk = kind in RISK_BOUNDS
    if delta is not None and not is_risk:
        raise AegisError(
            f"[threshold_delta_unused] `delta` applies to the false-alarm rules "
            f"'fp_per_image<=A' and 'false_alarm_image_share<=A'; the rule is {rule!r}",
            param="delta",
        )
    curve = [rates_from_counts(c) for c in counts]
    risk = None
    if is_risk:
        assert target is not None  # a risk rule always has its budget
        k, risk = choose_under_risk(
            counts, grid_t, kind, float(target), check_delta(DEFAULT_DELTA if delta is None else delta)
        )
    else:
        k = _choose(curve, kind, target)
    warnings = threshold_warnings(grid_t, k, score_range)
    canonical_rule = (
        DEFAULT_RULE if kind == DEFAULT_RULE else f"{kind}<={target:g}" if is_risk else f"{kind}>={target:g}"
    )
    return FrozenThreshold(
        value=grid_t[k],
        rule=canonical_rule,
        grid=grid_t,
        iou=float(iou),
        metrics=curve[k],
        curve=_compact_curve(grid_t, curve),
        warnings=tuple(warnings),
        risk=risk,
    )


def _compact_curve(grid_t: Sequence[float], curve: Sequence[Mapping[str, Any]]) -> dict[str, list]:
    compact: dict[str, list] = {"threshold": list(grid_t)}
    for key in CURVE_KEYS:
        compact[key] = [m[key] for m in curve]
    return compact


def _loaded_inputs(dets_source: Mapping[str, Any], gt_source: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    return {
        name: {"file": str(src["path"]), "sha256": str(src["sha256"])}
        for name, src in (("predictions", dets_source), ("gt", gt_source))
        if src.get("path") and src.get("sha256")
    }


def freeze_threshold(
    gt: GroundTruth,
    dets: Detections,
    rule: str = DEFAULT_RULE,
    grid: Sequence[float] | None = None,
    iou: float = DEFAULT_IOU,
    delta: float | None = None,
) -> FrozenThreshold:
    """Choose the operating point on clean validation predictions by ``rule`` over ``grid``
    (default DEFAULT_GRID). See the module docstring for the rules and the tie/edge conventions.
    ``delta`` is the risk level of a false-alarm rule (default 0.05) and refused with any other rule."""
    parse_rule(rule)  # a bad rule is refused before any matching
    grid_t = validate_grid(DEFAULT_GRID if grid is None else grid)
    frozen = _freeze_from_counts(grid_counts(gt, dets, grid_t, iou), grid_t, rule, iou, delta, score_range(dets))
    return replace(frozen, inputs=_loaded_inputs(dets.source, gt.source))


CLASS_THRESHOLD_MODES = ("per-class", "shared")


@dataclass(frozen=True)
class ClassThresholds:
    """Frozen thresholds of several classes. ``mode`` "per-class": each class's rule applied to its own counts;
    "shared": one threshold, the rule applied to the counts of all classes added (``pooled``), and
    ``per_class`` holding each class's val metrics at that value."""

    mode: str
    per_class: dict[str, FrozenThreshold]
    category_ids: dict[str, int]
    pooled: FrozenThreshold | None = None
    inputs: dict[str, dict[str, str]] = field(default_factory=dict)

    def values(self) -> dict[str, float]:
        return {c: f.value for c, f in self.per_class.items()}


def freeze_thresholds_by_class(
    gts: Mapping[str, GroundTruth],
    dets: Mapping[str, Detections],
    rule: str = DEFAULT_RULE,
    grid: Sequence[float] | None = None,
    iou: float = DEFAULT_IOU,
    delta: float | None = None,
    mode: str = "per-class",
) -> ClassThresholds:
    """Thresholds for multi-class scoring, one per class or one shared (``mode``), on clean validation."""
    if mode not in CLASS_THRESHOLD_MODES:
        raise AegisError(
            f"[threshold_class_mode] class thresholds must be one of {', '.join(CLASS_THRESHOLD_MODES)}; got {mode!r}"
        )
    parse_rule(rule)
    grid_t = validate_grid(DEFAULT_GRID if grid is None else grid)
    counts = {c: grid_counts(gt, dets[c], grid_t, iou) for c, gt in gts.items()}
    category_ids = {c: int(gt.category_id) for c, gt in gts.items()}
    first = next(iter(gts))
    inputs = _loaded_inputs(dets[first].source, gts[first].source)
    if mode == "per-class":
        per_class = {c: _freeze_from_counts(counts[c], grid_t, rule, iou, delta, score_range(dets[c])) for c in gts}
        return ClassThresholds(mode, per_class, category_ids, None, inputs)
    pooled_counts = [sum_counts([counts[c][k] for c in gts]) for k in range(len(grid_t))]
    ranges = [r for r in (score_range(dets[c]) for c in gts) if r is not None]
    pooled_range = (min(r[0] for r in ranges), max(r[1] for r in ranges)) if ranges else None
    pooled = _freeze_from_counts(pooled_counts, grid_t, rule, iou, delta, pooled_range)
    k = grid_t.index(pooled.value)
    per_class = {}
    for c in gts:
        curve = [rates_from_counts(x) for x in counts[c]]
        per_class[c] = FrozenThreshold(
            value=pooled.value,
            rule=pooled.rule,
            grid=grid_t,
            iou=float(iou),
            metrics=curve[k],
            curve=_compact_curve(grid_t, curve),
        )
    return ClassThresholds(mode, per_class, category_ids, pooled, inputs)


def _input_record(inputs: Mapping[str, Mapping[str, str]], name: str, file: str | Path) -> dict[str, str]:
    # Record the hash of the bytes the threshold was chosen on (hashed once by the loader); hash the file
    # only when the frozen threshold did not come from that file.
    known = inputs.get(name)
    if known and Path(known["file"]).resolve() == Path(file).resolve():
        return {"file": str(file), "sha256": known["sha256"]}
    return {"file": str(file), "sha256": file_sha256(file)}


def _write_doc(doc: dict[str, Any], path: str | Path) -> str:
    data = (json.dumps(doc, indent=1) + "\n").encode()
    write_bytes_atomic(path, data)
    return hashlib.sha256(data).hexdigest()


def _validation(metrics: Mapping[str, Any]) -> dict[str, int]:
    """The size of the validation set a threshold was chosen on: images and GT boxes."""
    return {"n_images": int(metrics["n_images"]), "n_gt": int(metrics["n_gt"])}


def _frozen_fields(frozen: FrozenThreshold) -> dict[str, Any]:
    return {
        "metrics": frozen.metrics,
        "grid": list(frozen.grid),
        "curve": frozen.curve,
        "warnings": list(frozen.warnings),
        "validation": _validation(frozen.metrics),
        **({"risk": frozen.risk} if frozen.risk is not None else {}),
    }  # only risk rules add the key


def threshold_notes(info: Mapping[str, Any]) -> dict[str, Any]:
    """``validation`` and ``warnings`` of a threshold file's record, for the score JSON's threshold block.

    Only what the file knows: a file written before they were recorded has no ``validation`` (then both are
    left out). A per-class file's class warnings follow the shared ones, prefixed with the class name."""
    validation = info.get("validation")
    if not isinstance(validation, dict):
        return {}
    warnings = [str(w) for w in info.get("warnings") or ()]
    per_class = info.get("per_class")
    if isinstance(per_class, dict) and info.get("class_thresholds") == "per-class":
        warnings += [f"{c}: {w}" for c, e in per_class.items() if isinstance(e, dict) for w in e.get("warnings") or ()]
    return {"validation": dict(validation), "warnings": warnings}


def write_threshold_file(
    frozen: FrozenThreshold,
    path: str | Path,
    preds_path: str | Path,
    gt_path: str | Path,
    split: str = "val",
    class_map: Mapping[str, Any] | None = None,
) -> str:
    """Write the threshold JSON atomically; returns its SHA-256. ``gt_path`` may be a split directory
    (then ``annotations/<split>.json`` is hashed). ``class_map``: the remap applied to the validation data
    (``ClassMap.record()``), stored under ``class_map`` only when given."""
    gt_file, _ = resolve_gt_path(gt_path, split)
    doc = {
        "schema": THRESHOLD_SCHEMA,
        "value": frozen.value,
        "rule": frozen.rule,
        "iou": frozen.iou,
        **_frozen_fields(frozen),
        "predictions": _input_record(frozen.inputs, "predictions", preds_path),
        "gt": _input_record(frozen.inputs, "gt", gt_file),
        **({"class_map": dict(class_map)} if class_map is not None else {}),
        "toolkit_version": __version__,
        "created": utc_timestamp(),
    }
    return _write_doc(doc, path)


def write_class_threshold_file(
    frozen: ClassThresholds,
    path: str | Path,
    preds_path: str | Path,
    gt_path: str | Path,
    split: str = "val",
    class_map: Mapping[str, Any] | None = None,
) -> str:
    """Write a multi-class threshold JSON atomically (docs/SCORING.md §2); returns its SHA-256.

    ``value`` is the shared threshold, or null with per-class thresholds; ``per_class`` holds each class's
    category id, value, val metrics and curve."""
    gt_file, _ = resolve_gt_path(gt_path, split)
    any_class = next(iter(frozen.per_class.values()))
    pooled = frozen.pooled
    doc = {
        "schema": THRESHOLD_SCHEMA,
        "value": pooled.value if pooled else None,
        "rule": any_class.rule,
        "iou": any_class.iou,
        "class_thresholds": frozen.mode,
        **(
            _frozen_fields(pooled)
            if pooled
            else {
                "metrics": None,
                "grid": list(any_class.grid),
                "curve": None,
                "warnings": [],
                # The same images for every class; their boxes added.
                "validation": {
                    "n_images": int(any_class.metrics["n_images"]),
                    "n_gt": sum(int(f.metrics["n_gt"]) for f in frozen.per_class.values()),
                },
            }
        ),
        "per_class": {
            c: {"category_id": frozen.category_ids[c], "value": f.value, **_frozen_fields(f)}
            for c, f in frozen.per_class.items()
        },
        "predictions": _input_record(frozen.inputs, "predictions", preds_path),
        "gt": _input_record(frozen.inputs, "gt", gt_file),
        **({"class_map": dict(class_map)} if class_map is not None else {}),
        "toolkit_version": __version__,
        "created": utc_timestamp(),
    }
    return _write_doc(doc, path)


def _check_value(value: Any, path: Path, where: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0.0 <= as_float(value) <= 1.0:
        raise AegisError(
            f"[threshold_value] threshold file {path}: {where} must be a number in [0, 1]; got {value!r:.40}"
        )
    return float(value)


def read_class_thresholds(path: str | Path, classes: Sequence[str]) -> tuple[dict[str, float], dict[str, Any]]:
    """({class: threshold}, info) for multi-class scoring: a per-class file gives each class its value (a class
    it lacks is refused), a single-value file gives every class the same value (``class_thresholds`` "shared")."""
    path = Path(path)
    doc, sha = _read_doc(path)
    info = dict(doc)
    info.update(file=str(path), sha256=sha)
    per_class = doc.get("per_class")
    if per_class is None:
        value = _check_value(doc.get("value"), path, "'value'")
        info["class_thresholds"] = "shared"
        return {c: value for c in classes}, info
    if not isinstance(per_class, dict):
        raise AegisError(f"[threshold_wrong_type] threshold file {path}: 'per_class' must be an object")
    missing = [c for c in classes if c not in per_class]
    if missing:
        raise AegisError(
            f"[threshold_class_missing] threshold file {path} has no threshold for classes "
            f"{missing[:5]} (it has {sorted(per_class)[:8]}); freeze them with the same `classes`",
            param="classes",
        )
    out = {}
    for c in classes:
        entry = per_class[c]
        out[c] = _check_value(entry.get("value") if isinstance(entry, dict) else None, path, f"per_class[{c!r}].value")
    return out, info


def _read_doc(path: Path) -> tuple[dict[str, Any], str]:
    doc, sha = read_json_file(path, "threshold", "threshold_")
    if not isinstance(doc, dict):
        raise AegisError(
            f"[threshold_wrong_type] threshold file {path}: expected a JSON object written by 'aegis freeze-threshold'"
        )
    if doc.get("schema") != THRESHOLD_SCHEMA:
        raise AegisError(
            f"[threshold_schema] threshold file {path}: schema {doc.get('schema')!r}, expected {THRESHOLD_SCHEMA!r}"
        )
    return doc, sha


def read_threshold_file(path: str | Path) -> tuple[float, dict[str, Any]]:
    """(value, info) from a threshold file; info has the file's rule, metrics, inputs, ``file`` and ``sha256``.
    A per-class file (null ``value``) is refused here: it needs multi-class scoring."""
    path = Path(path)
    doc, sha = _read_doc(path)
    value = doc.get("value")
    if value is None and isinstance(doc.get("per_class"), dict):
        raise AegisError(
            f"[threshold_per_class] threshold file {path} holds one threshold per class; score with `classes`",
            param="classes",
        )
    value = _check_value(value, path, "'value'")
    info = dict(doc)
    info.update(file=str(path), sha256=sha)
    return value, info
