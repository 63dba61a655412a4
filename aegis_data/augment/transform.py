"""Disaster-aware training augmentation on the benchmark's own kernels, in a key namespace of its own.

A **policy** (``configs/augment/<name>.yaml``, format in docs/MITIGATION.md) declares which corruptions a
training run may see, at which severities and with which weights, and the probability ``p_clean`` of leaving an
image clean. It resolves to a list of *cells* (corruption, severity, weight); the hash of that resolved form
(plus the suite config hash, since the kernels read their parameters from it) identifies the policy in every
artefact trained with it. A policy renders with one suite: its ``suite`` key (``aegis-v1`` or ``aegis-v2``), else
the one its loader is given (``suite``), else the default suite, aegis-v2; an aegis-v2 policy needs the training
frames' person unit (``DisasterAugment(..., scale=)``).

Severities are discrete (1, 2, 3). They are not interpolated: several kernels' parameters are not continuous
in the severity (motion blur's odd kernel length, rain's streak count, the calibrated three-level tables), and
only the three declared levels are calibrated.

Key namespace. The frozen benchmark keys its draws ``aegis-v1|<image_id>|<corruption>|<severity>|<seed>``
(``aegis-v2|...``) (``aegis_data.engine.seeding.stream_key``). Training draws are keyed::

    aegis-train|<seed>|<epoch>|<sample>

(``train_key``), with sub-streams ``|choice`` (clean or which cell) and ``|<corruption>|s<severity>`` (the
corruption's own draws). Every key is a ``|``-joined string whose first field is its namespace tag, and tags
contain no ``|``; so a training key's first field is always ``aegis-train`` and a test key's always
``aegis-v1`` or ``aegis-v2``, whatever the other fields hold. Two different strings give independent SHA-256-keyed
streams, so no training draw can reuse a frozen test draw. Draws are deterministic in (seed, epoch, sample) and differ
across epochs.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aegis_data.conditions import SEVERITIES, condition_id
from aegis_data.engine.config import DEFAULT_SUITE, PACKAGE_ROOT, REPO_ROOT, SUITE_NAMES, load_config
from aegis_data.engine.scale import Scale
from aegis_data.engine.seeding import KeyedRandom
from aegis_data.errors import AegisError
from aegis_data.files.readers import read_yaml
from aegis_data.files.rgb import check_rgb_image

TRAIN_TAG = "aegis-train"
POLICY_SCHEMA = "aegis-augment/1"
# In a checkout the policies are read from configs/augment; a wheel carries them as aegis_data/augment_policies
# (a symlink to that folder in the repository).
_CHECKOUT_POLICIES = REPO_ROOT / "configs" / "augment"
POLICY_DIR = _CHECKOUT_POLICIES if _CHECKOUT_POLICIES.is_dir() else PACKAGE_ROOT / "augment_policies"
ALL = "all"

Sample = int | np.integer | str  # a sample's index (a NumPy one too: its key is the same) or its id

# key -> meaning (docs/MITIGATION.md). Unknown keys are refused with the list of valid ones.
POLICY_KEYS: dict[str, str] = {
    "schema": f"must be {POLICY_SCHEMA!r}",
    "name": "policy name (label of runs trained with it)",
    "description": "free text",
    "p_clean": "probability of leaving an image clean, in [0, 1]",
    "families": "'all' or a list of families to draw from",
    "exclude_families": "families never drawn (leave-one-family-out)",
    "corruptions": "'all' or a list of corruptions (intersected with families)",
    "exclude_corruptions": "corruptions never drawn",
    "severities": "severities drawn, a subset of [1, 2, 3]",
    "severity_weights": "relative weight of each listed severity (default equal)",
    "per_corruption_severities": "corruption -> its own severity list (severity hold-out)",
    "suite": "the suite the policy renders with, aegis-v1 or aegis-v2 (default: the loader's suite, else aegis-v2)",
}


def train_key(seed: int, epoch: int, sample: Sample) -> str:
    """The key of one training sample's augmentation draws (format in the module doc)."""
    for name, v in (("seed", seed), ("epoch", epoch)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise AegisError(f"{name} must be an int, got {type(v).__name__} {v!r}")
    if int(epoch) < 0:
        raise AegisError(f"`epoch` must be >= 0, got {epoch}", param="epoch")
    if isinstance(sample, bool) or not isinstance(sample, (int, np.integer, str)):
        raise AegisError(
            f"`sample` must be an int index or a str id, got {type(sample).__name__} {sample!r}", param="sample"
        )
    return f"{TRAIN_TAG}|{int(seed)}|{int(epoch)}|{sample}"


# --- policies ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cell:
    corruption: str
    severity: int
    weight: float

    @property
    def condition(self) -> str:
        return condition_id(self.corruption, self.severity)


@dataclass(frozen=True)
class AugmentPolicy:
    """A resolved policy: draw clean with ``p_clean``, else one corruption uniformly, then its severity by weight.

    ``cells`` lists every (corruption, severity) the policy can draw, in suite order; ``hash`` is the first 12
    hex of the SHA-256 of :meth:`canonical` (the resolved form plus the suite config hash).
    """

    name: str
    p_clean: float
    cells: tuple[Cell, ...]
    suite_config_hash: str
    description: str = ""
    source: str | None = None
    suite: str = DEFAULT_SUITE  # the shipped suite the cells render with (its hash is suite_config_hash)

    @property
    def corruptions(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.corruption for c in self.cells))

    @property
    def trained_conditions(self) -> tuple[str, ...]:
        """Condition ids this policy trains on (clean counts when ``p_clean`` > 0)."""
        return (("clean",) if self.p_clean > 0 else ()) + tuple(c.condition for c in self.cells)

    def canonical(self) -> dict[str, Any]:
        return {
            "schema": POLICY_SCHEMA,
            "p_clean": float(self.p_clean),
            "suite_config_hash": self.suite_config_hash,
            "cells": [[c.corruption, c.severity, float(c.weight)] for c in self.cells],
        }

    @property
    def hash(self) -> str:
        text = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]

    def record(self) -> dict[str, Any]:
        """What runs and scores record about the policy (docs/MITIGATION.md)."""
        families = load_config(self.suite).corruptions
        return {
            "name": self.name,
            "hash": self.hash,
            "p_clean": float(self.p_clean),
            "description": self.description,
            "source": self.source,
            "suite": self.suite,
            "suite_config_hash": self.suite_config_hash,
            "families": sorted({families[c].family for c in self.corruptions}),
            "trained_conditions": list(self.trained_conditions),
            "cells": [[c.corruption, c.severity, float(c.weight)] for c in self.cells],
        }


def _as_list(value: Any, key: str, where: str) -> list:
    if isinstance(value, (list, tuple)):
        return list(value)
    raise AegisError(
        f"{where}: {key} must be a list{' or ' + repr(ALL) if key in ('families', 'corruptions') else ''}, "
        f"got {value!r}"
    )


def _finite(w: int | float) -> bool:
    """A weight a float holds: an integer beyond float64 (400 digits in YAML) is no finite weight."""
    try:
        return math.isfinite(w)
    except OverflowError:
        return False


def _severity_list(value: Any, key: str, where: str) -> list[int]:
    sev = _as_list(value, key, where)
    if not sev or any(isinstance(s, bool) or s not in SEVERITIES for s in sev) or len(set(sev)) != len(sev):
        raise AegisError(f"{where}: {key}={value!r} is invalid; expected distinct severities from {list(SEVERITIES)}")
    return [int(s) for s in sev]


def _names(value: Any, key: str, valid: Sequence[str], where: str) -> list[str]:
    items = list(valid) if value == ALL else _as_list(value, key, where)
    bad = [v for v in items if v not in valid]
    if bad:
        raise AegisError(f"{where}: {key} has unknown {bad[0]!r}; expected {ALL!r} or some of {', '.join(valid)}")
    return items


def resolve_policy(raw: Mapping[str, Any], where: str = "<policy>", suite: str | None = None) -> AugmentPolicy:
    """Validate a policy mapping and resolve it to cells (AegisError naming ``where`` and the key otherwise).
    ``suite``: the suite to render with when the policy names none (default aegis-v2); a policy naming another
    suite than a given one is refused."""
    if not isinstance(raw, Mapping):
        raise AegisError(f"{where}: expected a mapping of policy keys, got {type(raw).__name__}")
    unknown = [k for k in raw if k not in POLICY_KEYS]
    if unknown:
        raise AegisError(f"{where}: unknown key {unknown[0]!r}; valid keys: {', '.join(POLICY_KEYS)}")
    if raw.get("schema", POLICY_SCHEMA) != POLICY_SCHEMA:
        raise AegisError(f"{where}: schema={raw.get('schema')!r}; expected {POLICY_SCHEMA!r}")
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip() or "|" in name:
        raise AegisError(f"{where}: name must be a non-empty string without '|', got {name!r}")
    p_clean = raw.get("p_clean", 0.5)
    if isinstance(p_clean, bool) or not isinstance(p_clean, (int, float)) or not 0.0 <= p_clean <= 1.0:
        raise AegisError(f"{where}: p_clean={p_clean!r} is invalid; expected a number in [0, 1]")
    named = raw.get("suite")
    if named is not None and named not in SUITE_NAMES:
        raise AegisError(f"{where}: suite={named!r} is invalid; expected one of {', '.join(SUITE_NAMES)}")
    if named is not None and suite is not None and named != suite:
        raise AegisError(
            f"{where}: the policy renders with suite {named}, not {suite}; drop `suite` or the policy's suite key",
            param="suite",
        )
    if suite is not None and suite not in SUITE_NAMES:
        raise AegisError(
            f"`suite` {suite!r} is invalid for a policy; expected one of {', '.join(SUITE_NAMES)}", param="suite"
        )
    suite_name = named or suite or DEFAULT_SUITE
    cfg = load_config(suite_name)
    families = _names(raw.get("families", ALL), "families", list(cfg.families), where)
    families = [
        f
        for f in families
        if f not in _names(raw.get("exclude_families", []), "exclude_families", list(cfg.families), where)
    ]
    allowed = _names(raw.get("corruptions", ALL), "corruptions", list(cfg.names), where)
    excluded = set(_names(raw.get("exclude_corruptions", []), "exclude_corruptions", list(cfg.names), where))
    chosen = [c for c in cfg.names if cfg.corruptions[c].family in families and c in allowed and c not in excluded]
    severities = _severity_list(raw.get("severities", list(SEVERITIES)), "severities", where)
    weights = raw.get("severity_weights")
    weights = [1.0] * len(severities) if weights is None else _as_list(weights, "severity_weights", where)
    if len(weights) != len(severities) or any(
        isinstance(w, bool) or not isinstance(w, (int, float)) or not _finite(w) or w <= 0 for w in weights
    ):
        raise AegisError(
            f"{where}: severity_weights={raw.get('severity_weights')!r:.80} is invalid; expected one "
            f"finite positive number per severity in {severities}"
        )
    weight_of = dict(zip(severities, (float(w) for w in weights)))
    per = raw.get("per_corruption_severities") or {}
    if not isinstance(per, Mapping):
        raise AegisError(f"{where}: per_corruption_severities must map corruption -> severity list, got {per!r}")
    for c in per:
        if c not in chosen:
            raise AegisError(f"{where}: per_corruption_severities names {c!r}, which the policy does not draw")
    cells = []
    for c in chosen:
        sev = _severity_list(per[c], f"per_corruption_severities.{c}", where) if c in per else severities
        cells += [Cell(c, s, weight_of.get(s, 1.0)) for s in sorted(sev)]
    if not cells and p_clean < 1.0:
        raise AegisError(f"{where}: the policy draws no corruption; set p_clean: 1.0 for clean-only training")
    return AugmentPolicy(
        name=name,
        p_clean=float(p_clean),
        cells=tuple(cells),
        suite_config_hash=cfg.config_hash,
        description=str(raw.get("description") or ""),
        suite=suite_name,
    )


def available_policies() -> list[str]:
    return sorted(p.stem for p in POLICY_DIR.glob("*.yaml"))


def load_policy(spec: str | Path, suite: str | None = None) -> AugmentPolicy:
    """A policy by name (``configs/augment/<name>.yaml``) or by path to a yaml file; ``suite``: the suite it
    renders with when it names none (default aegis-v2)."""
    p = Path(spec)
    if not p.suffix and not p.exists():
        p = POLICY_DIR / f"{spec}.yaml"
        if not p.is_file():
            raise AegisError(
                f"unknown augmentation policy {str(spec)!r}; expected a yaml path or one of: "
                f"{', '.join(available_policies())}"
            )
    raw, _ = read_yaml(p, "augmentation policy")
    policy = resolve_policy(raw, str(p), suite)
    return AugmentPolicy(**{**policy.__dict__, "source": str(p)})


# --- the transform -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Choice:
    """What one sample gets: ``corruption`` None means clean."""

    corruption: str | None
    severity: int
    key: str

    @property
    def condition(self) -> str:
        return "clean" if self.corruption is None else condition_id(self.corruption, self.severity)


class DisasterAugment:
    """Training-time disaster corruption: ``aug(image, boxes, epoch=e, sample=i) -> (image, boxes)``.

    image: HxWx3 uint8 RGB (the full frame, before any tiling or resizing); boxes: anything, returned as the
    same object (the corruptions never move content by more than ~1.5 px, so boxes stay valid). The choice and
    every draw come from the keyed stream ``train_key(seed, epoch, sample)``: the same (seed, epoch, sample)
    gives the same bytes in any order or process; another epoch gives another draw.
    """

    def __init__(self, policy: AugmentPolicy | str | Path, seed: int = 0, scale: Scale | None = None):
        self.policy = policy if isinstance(policy, AugmentPolicy) else load_policy(policy)
        train_key(seed, 0, 0)  # validates seed
        self.seed = int(seed)
        self.config = load_config(self.policy.suite)
        if self.config.uses_scene and (scale is None or not scale.is_object) and self.policy.cells:
            raise AegisError(
                f"augmentation policy {self.policy.name!r} renders with {self.config.suite}, which needs "
                f"the training frames' person unit: pass `scale` Scale('object', person_px) (the runners "
                f"take it from the split)",
                param="scale",
            )
        self.scale = scale
        weight = {c: c.weight for c in self.policy.cells}
        if not math.isfinite(sum(weight.values())):  # huge finite weights: relative to the largest, so sums stay finite
            top = max(weight.values())
            weight = {c: w / top for c, w in weight.items()}
        n: dict[str, float] = {}
        for c in self.policy.cells:
            n[c.corruption] = n.get(c.corruption, 0.0) + weight[c]
        # Cell probabilities: corruptions equally likely, severities by weight within a corruption.
        probs = np.array([weight[c] / n[c.corruption] / len(n) for c in self.policy.cells], dtype=np.float64)
        self._cum = np.cumsum(probs) if len(probs) else probs

    def __repr__(self) -> str:
        return f"DisasterAugment(policy={self.policy.name!r} [{self.policy.hash}], seed={self.seed})"

    def choose(self, epoch: int, sample: Sample) -> Choice:
        """Which condition sample ``sample`` gets in ``epoch`` (clean or one policy cell)."""
        key = train_key(self.seed, epoch, sample)
        u_clean, u_cell = KeyedRandom(key).child("choice").uniform(2)
        if u_clean < self.policy.p_clean or not self.policy.cells:
            return Choice(None, 0, key)
        k = int(np.searchsorted(self._cum, u_cell * self._cum[-1], side="right"))
        cell = self.policy.cells[min(k, len(self.policy.cells) - 1)]
        return Choice(cell.corruption, cell.severity, key)

    def apply(self, image: np.ndarray, choice: Choice) -> np.ndarray:
        """The image under ``choice`` (a copy when clean, so callers may write to it)."""
        from aegis_data.engine.corruptions import corrupt_with_stream

        check_rgb_image(image)
        if choice.corruption is None:
            return image.copy()
        rng = KeyedRandom(choice.key).child(f"{choice.corruption}|s{choice.severity}")
        return corrupt_with_stream(image, choice.corruption, choice.severity, rng, self.config, self.scale)

    def __call__(self, image: np.ndarray, boxes: Any = None, *, epoch: int, sample: Sample):
        return self.apply(image, self.choose(epoch, sample)), boxes
