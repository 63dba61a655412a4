"""Baseline configuration files (``configs/baselines/*.yaml``): reference settings, loaded by name or path.

A config is a flat mapping of the keys below. Unknown keys are rejected with a "did you mean"; values are
type-checked. Command-line flags override config values, which override the defaults here.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from aegis_data.errors import AegisError
from aegis_data.files.readers import read_yaml
from aegis_eval.metrics.bootstrap import MAX_BOOTSTRAP
from aegis_eval.runners.tiled import DEFAULT_NMS_IOU
from aegis_eval.runners.tiling import DEFAULT_OVERLAP, DEFAULT_TILE

# key -> (type, default). Defaults are the reference protocol, declared here once: TrainSettings and
# PredictSettings take theirs from this table (``default``); the yaml files pin dataset/model choices.
KEYS: dict[str, tuple[type | tuple[type, ...], Any]] = {
    "name": (str, None),  # free label, e.g. "heridal-yolo11m"; used as the score label
    "dataset": (str, None),  # heridal | sard | synthetic (documentation; the split decides the data)
    "model": (str, None),  # yolo11 | rtdetr | fasterrcnn
    "weights": (str, None),  # local file, ultralytics *.yaml, or "none" (fasterrcnn random init)
    "arch": (str, None),  # fasterrcnn backbone: resnet50_v2 | mobilenet_v3
    "imgsz": (int, 1024),
    "epochs": (int, 100),
    "batch": (int, 8),
    "seed": (int, 0),
    "optimizer": (str, "SGD"),
    "lr0": (float, 0.01),
    "momentum": (float, 0.9),
    "weight_decay": (float, 0.0005),
    "workers": (int, 0),
    "amp": (bool, False),  # Ultralytics mixed precision on GPU; its self-check downloads yolo26n.pt
    "tile": (int, DEFAULT_TILE),
    "overlap": (int, DEFAULT_OVERLAP),
    "min_visibility": (float, 0.5),
    "score_floor": (float, 0.001),
    "nms_iou": (float, DEFAULT_NMS_IOU),
    "max_det": (int, 300),
    "bootstrap": (int, 1000),
    "threshold_rule": (str, "max-f1"),
    "device": (str, "auto"),
    "notes": (str, None),
}
OPTIMIZERS = ("SGD", "AdamW")
MAX_TRAINING_SEED = 2**32 - 1


def defaults() -> dict[str, Any]:
    return {k: v for k, (_, v) in KEYS.items()}


def default(key: str) -> Any:
    """The reference default of one setting (the single declaration the settings records read)."""
    return KEYS[key][1]


def _check_type(key: str, value: Any, path: str) -> Any:
    typ, _ = KEYS[key]
    if value is None:
        return None
    if typ is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if (isinstance(value, bool) and typ is not bool) or not isinstance(value, typ):
        tname = typ.__name__ if isinstance(typ, type) else "/".join(t.__name__ for t in typ)
        raise AegisError(f"{path}: {key}={value!r} must be {tname}")
    return value


def load_baseline_config(path: str | Path) -> dict[str, Any]:
    """Read a baseline yaml: the given keys only (no defaults filled in), type-checked, unknown keys refused."""
    p = Path(path)
    raw, _ = read_yaml(p, "baseline config")
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise AegisError(f"{p}: expected a mapping of settings at the top level, got {type(raw).__name__}")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in KEYS:
            close = difflib.get_close_matches(str(key), list(KEYS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; valid keys: {', '.join(KEYS)}"
            raise AegisError(f"{p}: unknown key {key!r}{hint}")
        out[key] = _check_type(key, value, str(p))
    check_values(out, str(p))
    return out


def check_values(cfg: dict[str, Any], where: str = "settings") -> None:
    """Range checks shared by config files and resolved CLI settings; one line naming key=value."""

    def bad(key: str, expect: str) -> AegisError:
        return AegisError(f"{where}: {key}={cfg[key]!r} is invalid; expected {expect}")

    if cfg.get("optimizer") is not None and cfg["optimizer"] not in OPTIMIZERS:
        raise bad("optimizer", " or ".join(OPTIMIZERS) + " (never 'auto': it would ignore lr0)")
    for key in ("imgsz", "epochs", "batch", "tile", "max_det", "bootstrap"):
        if cfg.get(key) is not None and cfg[key] < 1:
            raise bad(key, "an integer >= 1")
    # Checked before training, not hours later when the scorer refuses it.
    if cfg.get("bootstrap") is not None and cfg["bootstrap"] > MAX_BOOTSTRAP:
        raise bad("bootstrap", f"at most {MAX_BOOTSTRAP:,} resamples")
    if cfg.get("seed") is not None and not 0 <= cfg["seed"] <= MAX_TRAINING_SEED:
        raise bad("seed", f"an integer in [0, {MAX_TRAINING_SEED}] (NumPy and the trainers take 32-bit seeds)")
    if cfg.get("workers") is not None and cfg["workers"] < 0:
        raise bad("workers", "an integer >= 0")
    if cfg.get("lr0") is not None and not cfg["lr0"] > 0:
        raise bad("lr0", "a positive learning rate")
    for key in ("score_floor", "nms_iou", "momentum"):
        if cfg.get(key) is not None and not 0.0 <= cfg[key] <= 1.0:
            raise bad(key, "a number in [0, 1]")
    if cfg.get("min_visibility") is not None and not 0.0 < cfg["min_visibility"] <= 1.0:
        raise bad("min_visibility", "a number in (0, 1]")
    if cfg.get("overlap") is not None and cfg.get("tile") is not None and not 0 <= cfg["overlap"] < cfg["tile"]:
        raise bad("overlap", f"an integer in [0, tile={cfg['tile']})")


def resolve_settings(config_path: str | Path | None, overrides: dict[str, Any]) -> dict[str, Any]:
    """Defaults ← config file ← command-line overrides (None means 'not given')."""
    cfg = defaults()
    if config_path is not None:
        cfg.update(load_baseline_config(config_path))
    unknown = [k for k in overrides if k not in KEYS]
    if unknown:  # a programming error in a caller, still reported as one line
        raise AegisError(f"unknown setting {unknown[0]!r}")
    cfg.update({k: v for k, v in overrides.items() if v is not None})
    check_values(cfg)
    return cfg
