"""Freezing the confidence threshold once, on clean validation predictions (SPEC §6).

The frozen value is stored in a small JSON file (schema ``aegis-threshold/1``) with the rule, the grid, the
validation metrics at every grid point and at the chosen one, and the SHA-256 of the predictions and GT it was
chosen on. ``aegis score --threshold-file`` applies it unchanged to every test condition.

Rules:
* ``max-f1`` (default): the grid threshold with the highest F1; ties go to the lowest threshold.
* ``precision>=X``: the lowest grid threshold whose precision is >= X (keeps the most recall at that precision).
* ``recall>=X``: the highest grid threshold whose recall is >= X (fewest false alarms at that recall).
A rule that no grid point satisfies is an error. A choice on the first or last grid point is warned about:
the optimum may lie outside the grid.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from aegis_data import __version__
from aegis_data.errors import AegisError
from aegis_data.imageio import file_sha256, write_bytes_atomic
from aegis_eval.matching import DEFAULT_IOU, match_at_threshold, per_image_counts, rates_from_counts
from aegis_eval.predictions import as_float, read_json_file, resolve_gt_path
from aegis_eval.provenance import utc_timestamp
from aegis_eval.types import Detections, GroundTruth

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


def parse_rule(rule: str) -> tuple[str, float | None]:
    """``'max-f1' -> ('max-f1', None)``; ``'precision>=0.9' -> ('precision', 0.9)``; AegisError otherwise."""
    if rule.strip() == DEFAULT_RULE:
        return DEFAULT_RULE, None
    m = _RULE_RE.match(rule)
    if not m or not 0.0 <= float(m.group(2)) <= 1.0:
        raise AegisError(f"unknown threshold rule {rule!r}; expected 'max-f1', 'precision>=X' or 'recall>=X' "
                         "with X in [0, 1]")
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
        raise AegisError(f"cannot read threshold grid {text!r}; expected 'start:stop:step' (e.g. 0:1:0.01) or "
                         "a comma list (e.g. 0.25,0.5,0.75)") from None
    return validate_grid(values)


def _too_many(size: str, text: str) -> str:
    return (f"threshold grid {text[:40]!r} has {size} points, above the limit of {MAX_GRID_POINTS:,}; "
            f"use a coarser step (0:1:0.00001 is the finest full grid)")


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


def threshold_curve(gt: GroundTruth, dets: Detections, grid: Sequence[float], iou: float = DEFAULT_IOU) -> list[dict]:
    """threshold_metrics at every grid value, from one matching pass at the lowest value.

    Valid because greedy matching in score order is prefix-consistent (see aegis_eval.matching).
    """
    grid = validate_grid(grid)
    base = match_at_threshold(gt, dets, grid[0], iou)
    scores = np.asarray(dets.scores, dtype=np.float64)
    # No detections at all (a valid, empty results list): nothing is matched at any threshold.
    matched_det_score = (np.where(base.gt_matched_det >= 0, scores[np.maximum(base.gt_matched_det, 0)], -np.inf)
                         if scores.size else np.full(len(base.gt_matched_det), -np.inf))
    out = []
    for t in grid:
        above = scores >= t
        counts = per_image_counts(gt, dets.det_image, base.is_tp & above, base.is_fp & above, matched_det_score >= t)
        out.append(rates_from_counts(counts))
    return out


def _choose(curve: list[dict], kind: str, target: float | None) -> int:
    if kind == DEFAULT_RULE:
        f1 = np.array([np.nan if m["f1"] is None else m["f1"] for m in curve])
        if np.all(np.isnan(f1)):
            raise AegisError("cannot choose a max-f1 threshold: the validation ground truth has no person boxes")
        return int(np.nanargmax(f1))  # first maximum = lowest threshold on ties
    values = [m[kind] for m in curve]
    ok = [k for k, v in enumerate(values) if v is not None and v >= target - 1e-12]
    if not ok:
        best = max((v for v in values if v is not None), default=None)
        raise AegisError(f"no grid threshold satisfies {kind}>={target:g} (best {kind} on the grid: "
                         f"{'undefined' if best is None else f'{best:.4f}'})")
    return ok[0] if kind == "precision" else ok[-1]


def freeze_threshold(gt: GroundTruth, dets: Detections, rule: str = DEFAULT_RULE,
                     grid: Sequence[float] | None = None, iou: float = DEFAULT_IOU) -> FrozenThreshold:
    """Choose the operating point on clean validation predictions by ``rule`` over ``grid``
    (default DEFAULT_GRID). See the module docstring for the rules and the tie/edge conventions."""
    kind, target = parse_rule(rule)
    grid_t = validate_grid(DEFAULT_GRID if grid is None else grid)
    curve = threshold_curve(gt, dets, grid_t, iou)
    k = _choose(curve, kind, target)
    warnings = []
    if len(grid_t) > 1 and k in (0, len(grid_t) - 1):
        side = "lowest" if k == 0 else "highest"
        warnings.append(f"[threshold_on_grid_edge] the chosen threshold {grid_t[k]:g} is the {side} grid value; "
                        "the optimum may lie outside the grid")
    compact: dict[str, list] = {"threshold": list(grid_t)}
    for key in CURVE_KEYS:
        compact[key] = [m[key] for m in curve]
    canonical_rule = DEFAULT_RULE if kind == DEFAULT_RULE else f"{kind}>={target:g}"
    inputs = {name: {"file": str(src["path"]), "sha256": str(src["sha256"])}
              for name, src in (("predictions", dets.source), ("gt", gt.source))
              if src.get("path") and src.get("sha256")}
    return FrozenThreshold(value=grid_t[k], rule=canonical_rule, grid=grid_t, iou=float(iou), metrics=curve[k],
                           curve=compact, warnings=tuple(warnings), inputs=inputs)


def write_threshold_file(frozen: FrozenThreshold, path: str | Path, preds_path: str | Path, gt_path: str | Path,
                         split: str = "val") -> str:
    """Write the threshold JSON atomically; returns its SHA-256. ``gt_path`` may be a split directory
    (then ``annotations/<split>.json`` is hashed)."""
    gt_file, _ = resolve_gt_path(gt_path, split)

    def input_record(name: str, file: str | Path) -> dict[str, str]:
        # Record the hash of the bytes the threshold was chosen on (hashed once by the loader); hash the file
        # only when the frozen threshold did not come from that file.
        known = frozen.inputs.get(name)
        if known and Path(known["file"]).resolve() == Path(file).resolve():
            return {"file": str(file), "sha256": known["sha256"]}
        return {"file": str(file), "sha256": file_sha256(file)}

    doc = {
        "schema": THRESHOLD_SCHEMA,
        "value": frozen.value,
        "rule": frozen.rule,
        "iou": frozen.iou,
        "metrics": frozen.metrics,
        "grid": list(frozen.grid),
        "curve": frozen.curve,
        "warnings": list(frozen.warnings),
        "predictions": input_record("predictions", preds_path),
        "gt": input_record("gt", gt_file),
        "toolkit_version": __version__,
        "created": utc_timestamp(),
    }
    data = (json.dumps(doc, indent=1) + "\n").encode()
    write_bytes_atomic(path, data)
    return hashlib.sha256(data).hexdigest()


def read_threshold_file(path: str | Path) -> tuple[float, dict[str, Any]]:
    """(value, info) from a threshold file; info has the file's rule, metrics, inputs, ``file`` and ``sha256``."""
    path = Path(path)
    doc, sha = read_json_file(path, "threshold", "threshold_")
    if not isinstance(doc, dict):
        raise AegisError(f"[threshold_wrong_type] threshold file {path}: expected a JSON object written by "
                         "'aegis freeze-threshold'")
    if doc.get("schema") != THRESHOLD_SCHEMA:
        raise AegisError(f"[threshold_schema] threshold file {path}: schema {doc.get('schema')!r}, expected "
                         f"{THRESHOLD_SCHEMA!r}")
    value = doc.get("value")
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0.0 <= as_float(value) <= 1.0:
        raise AegisError(f"[threshold_value] threshold file {path}: 'value' must be a number in [0, 1]; "
                         f"got {value!r:.40}")
    info = dict(doc)
    info.update(file=str(path), sha256=sha)
    return float(value), info
