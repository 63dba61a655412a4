"""Loading the corruption suite configuration (``configs/corruptions.yaml``) and its hash.

The config hash (first 12 hex of the file's SHA-256) identifies the exact suite an artefact was built with.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import yaml

from aegis_data.errors import AegisError

REPO_ROOT = Path(__file__).resolve().parent.parent
# In a checkout the config is read from configs/; an installed wheel carries the same bytes inside the package
# (aegis_data/corruptions.yaml is a symlink to it in the repository, copied as a file into wheels).
_CHECKOUT_CONFIG = REPO_ROOT / "configs" / "corruptions.yaml"
_PACKAGED_CONFIG = Path(__file__).resolve().parent / "corruptions.yaml"
DEFAULT_CONFIG_PATH = _CHECKOUT_CONFIG if _CHECKOUT_CONFIG.is_file() else _PACKAGED_CONFIG
SEVERITIES = (1, 2, 3)


@dataclass(frozen=True)
class CorruptionSpec:
    """One corruption's declaration: family, calibration statistic and parameters."""

    name: str
    family: str
    statistic: str
    direction: str  # "increase" | "decrease"
    severities: Mapping[str, tuple]  # parameter -> (s1, s2, s3)
    fixed: Mapping[str, Any]

    def params(self, severity: int) -> dict[str, Any]:
        """All parameters for one severity: the severity-dependent values merged over the fixed ones."""
        if severity not in SEVERITIES:
            raise AegisError(f"severity must be one of 1, 2, 3; got {severity!r}")
        out = dict(self.fixed)
        out.update({k: v[severity - 1] for k, v in self.severities.items()})
        return out


@dataclass(frozen=True)
class SuiteConfig:
    suite: str
    seed: int
    families: Mapping[str, tuple[str, ...]]
    corruptions: Mapping[str, CorruptionSpec]  # in file order
    calibration_threshold: Mapping[str, float]
    config_hash: str  # first 12 hex of SHA-256 of the file bytes
    config_sha256: str
    path: str

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.corruptions)

    def conditions(self, corruptions=None, severities=SEVERITIES) -> list[str]:
        """Condition ids in canonical order: ``clean`` then ``<corruption>_s<k>``."""
        names = self.names if corruptions is None else tuple(corruptions)
        return ["clean"] + [condition_id(n, s) for n in names for s in severities]


def condition_id(corruption: str, severity: int) -> str:
    return f"{corruption}_s{int(severity)}"


def parse_condition(cond: str) -> tuple[str | None, int]:
    """``'low_light_s3' -> ('low_light', 3)``; ``'clean' -> (None, 0)``."""
    if cond == "clean":
        return None, 0
    name, sep, sev = cond.rpartition("_s")
    if not sep or not sev.isdigit() or not name:
        raise AegisError(f"not a condition id: {cond!r} (expected 'clean' or '<corruption>_s<1-3>')")
    return name, int(sev)


def _parse(raw: dict, data: bytes, path: Path) -> SuiteConfig:
    try:
        families = {f: tuple(ms) for f, ms in raw["families"].items()}
        corrs = {}
        for name, c in raw["corruptions"].items():
            sev = {k: tuple(v) for k, v in c["severities"].items()}
            for k, v in sev.items():
                if len(v) != len(SEVERITIES):
                    raise AegisError(f"{path}: {name}.{k} must list 3 severities, got {len(v)}")
            fixed = {k: (tuple(v) if isinstance(v, list) else v) for k, v in (c.get("fixed") or {}).items()}
            corrs[name] = CorruptionSpec(name, c["family"], c["statistic"], c["direction"], sev, fixed)
    except (KeyError, TypeError, AttributeError) as exc:
        raise AegisError(f"{path}: malformed corruption config ({exc!r})") from None
    digest = hashlib.sha256(data).hexdigest()
    return SuiteConfig(
        suite=str(raw.get("suite", "aegis-v1")),
        seed=int(raw["seed"]),
        families=families,
        corruptions=corrs,
        calibration_threshold=dict(raw.get("calibration_threshold") or {}),
        config_hash=digest[:12],
        config_sha256=digest,
        path=str(path),
    )


def read_yaml(path: Path, what: str) -> tuple[Any, bytes]:
    """(parsed YAML, file bytes); AegisError naming ``what`` for an unreadable or malformed file."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise AegisError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        return yaml.safe_load(data), data
    except yaml.YAMLError as exc:
        raise AegisError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None


@lru_cache(maxsize=8)
def _load_cached(path: str) -> SuiteConfig:
    p = Path(path)
    raw, data = read_yaml(p, "corruption config")
    if not isinstance(raw, dict):
        raise AegisError(f"{p}: expected a mapping at the top level")
    return _parse(raw, data, p)


def load_config(path: str | Path | None = None) -> SuiteConfig:
    """The suite config (default: the repository's ``configs/corruptions.yaml``), cached per path."""
    return _load_cached(str(Path(path or DEFAULT_CONFIG_PATH).resolve()))

