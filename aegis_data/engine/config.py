"""Loading a corruption suite configuration and its hash.

Two suites ship (``configs/suites/``): ``aegis-v1``, frozen forever, and ``aegis-v2``, the default of new builds,
whose corruptions render through a scene and camera model (``aegis_data.engine.scene``) in physical units.
:func:`load_config` takes a suite name or the path of a suite file.

The config hash identifies the exact suite an artefact was built with: the first 12 hex of the SHA-256 of the
*parsed* suite in a canonical form (:func:`canonical_suite_bytes`), so comments and formatting never change it.
Before aegisbench 0.3 it covered the file's bytes; splits built then still resolve (``SuiteConfig.bytes_hash``).
A split carries the exact bytes of the config it was built with (``<split>/corruptions.yaml``, named by the
manifest's ``config_hash``); everything that works on a split -- scoring, robustness, calibration, report,
gallery, verify -- takes its :class:`SuiteConfig` from :func:`split_config`, and the installed default only
where there is no split. The engine never reads a manifest: the split side reads the hash through its sealed
reader (``aegis_data.split.reader``) and passes it here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from aegis_data.conditions import CLEAN, SEVERITIES, check_severity, condition_id
from aegis_data.engine.config_schema import validate_suite
from aegis_data.errors import AegisError
from aegis_data.files.layout import MANIFEST_NAME, SUITE_CONFIG_NAME
from aegis_data.files.readers import MAX_YAML_BYTES, parse_yaml_bytes, read_file_bytes, read_yaml

PACKAGE_ROOT = Path(__file__).resolve().parent.parent  # aegis_data/
REPO_ROOT = PACKAGE_ROOT.parent
# In a checkout the suites are read from configs/suites/; an installed wheel carries the same bytes inside the
# package (aegis_data/suites is a symlink to that folder in the repository, copied as files into wheels).
_CHECKOUT_SUITES = REPO_ROOT / "configs" / "suites"
SUITES_DIR = _CHECKOUT_SUITES if _CHECKOUT_SUITES.is_dir() else PACKAGE_ROOT / "suites"
SUITE_NAMES = ("aegis-v1", "aegis-v2")
DEFAULT_SUITE = "aegis-v2"
DEFAULT_CONFIG_PATH = SUITES_DIR / f"{DEFAULT_SUITE}.yaml"


@dataclass(frozen=True)
class CorruptionSpec:
    """One corruption's declaration: family, calibration statistic and parameters."""

    name: str
    family: str
    statistic: str
    direction: str  # "increase" | "decrease"
    severities: Mapping[str, tuple]  # parameter -> (s1, s2, s3)
    fixed: Mapping[str, Any]
    model: str = ""  # the engine model that renders it ("" = the aegis-v1 model of the same name)

    @property
    def model_name(self) -> str:
        return self.model or self.name

    def params(self, severity: int) -> dict[str, Any]:
        """All parameters for one severity: the severity-dependent values merged over the fixed ones."""
        severity = check_severity(severity)
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
    config_hash: str  # first 12 hex of the SHA-256 of the canonical parsed suite (canonical_suite_bytes)
    config_sha256: str
    path: str
    raw: bytes = field(default=b"", repr=False, compare=False)  # the exact file bytes (a split stores them)
    # The default length unit of builds with this suite ({"mode": "frame"} for aegis-v1; see suite_scale).
    scale: Mapping[str, Any] = field(default_factory=lambda: {"mode": "frame"}, compare=False)
    bytes_hash: str = ""  # first 12 hex of the file bytes' SHA-256: the config hash of builds before 0.3
    # The engine generation (a suite's ``generation`` key): 1 renders each frame alone, lengths per frame or per
    # person (aegis-v1); 2 renders through a per-image scene and camera model in physical units, object scale only.
    generation: int = 1
    # Generation 2: the default camera and platform of a scene (keys: aegis_data.engine.config_schema.CAMERA), which
    # a per-image sidecar overrides.
    camera: Mapping[str, Any] = field(default_factory=dict)

    @property
    def uses_scene(self) -> bool:
        """Whether images render through the scene and camera model (generation 2)."""
        return self.generation >= 2

    @property
    def key_tag(self) -> str:
        """The first field of every stream key (``aegis_data.engine.seeding``): the generation's, not the suite's
        name, so a renamed copy of a suite draws the same values."""
        return "aegis-v2" if self.generation >= 2 else "aegis-v1"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.corruptions)

    def check_corruption(self, name: Any) -> str:
        """``name`` when the suite declares it; else AegisError listing the suite's corruptions."""
        if not isinstance(name, str) or name not in self.corruptions:
            raise AegisError(f"unknown corruption {name!r}; expected one of: {', '.join(self.names)}")
        return name

    def select(self, corruptions: Any = None) -> tuple[str, ...]:
        """Validated corruption names, duplicates dropped, in the order given (None = all, in suite order)."""
        if corruptions is None:
            return self.names
        names = tuple(dict.fromkeys(str(c).strip() for c in corruptions if str(c).strip()))
        if not names:
            raise AegisError("no corruptions selected; name at least one of: " + ", ".join(self.names))
        for n in names:
            self.check_corruption(n)
        return names

    def conditions(self, corruptions=None, severities=SEVERITIES) -> list[str]:
        """Condition ids in canonical order: ``clean`` then ``<corruption>_s<k>``."""
        names = self.names if corruptions is None else tuple(corruptions)
        return [CLEAN] + [condition_id(n, s) for n in names for s in severities]


def _parse(raw: dict, data: bytes, path: Path) -> SuiteConfig:
    if not isinstance(raw, dict):
        raise AegisError(f"{path}: expected a mapping at the top level")
    validate_suite(raw, str(path))  # every key and shape read below is checked there
    families = {f: tuple(ms) for f, ms in raw["families"].items()}
    corrs = {}
    for name, c in raw["corruptions"].items():
        sev = {k: tuple(v) for k, v in c["severities"].items()}
        fixed = {k: (tuple(v) if isinstance(v, list) else v) for k, v in (c.get("fixed") or {}).items()}
        corrs[name] = CorruptionSpec(
            name, c["family"], c["statistic"], c["direction"], sev, fixed, str(c.get("model") or "")
        )
    suite, seed = str(raw.get("suite", "aegis-v1")), int(raw["seed"])
    calibration = dict(raw.get("calibration_threshold") or {})
    scale = suite_scale(raw.get("scale"), path)
    generation = int(raw.get("generation", 1))
    camera = {k: (tuple(v) if isinstance(v, list) else v) for k, v in (raw.get("camera") or {}).items()}
    if generation >= 2 and scale["mode"] != "object":
        raise AegisError(
            f"{path}: a generation-2 suite renders in physical units, which need a person unit: declare scale: object"
        )
    digest = hashlib.sha256(
        canonical_suite_bytes(suite, seed, families, corrs, calibration, scale, generation, camera)
    ).hexdigest()
    return SuiteConfig(
        suite=suite,
        seed=seed,
        families=families,
        corruptions=corrs,
        calibration_threshold=calibration,
        config_hash=digest[:12],
        config_sha256=digest,
        path=str(path),
        raw=bytes(data),
        scale=scale,
        bytes_hash=config_bytes_hash(data),
        generation=generation,
        camera=camera,
    )


def suite_scale(value: Any, path: str | Path = "<config>") -> dict[str, Any]:
    """The suite's default length unit (docs/CORRUPTIONS.md, "Scale"): the optional top-level ``scale`` key,
    ``frame`` (also when absent; aegis-v1), ``object``, or ``{mode: object, person_px: N}`` /
    ``{mode: object, gsd_cm_per_px: G}``. A build's ``scale`` / ``person_px`` / ``gsd_cm_per_px`` override it."""
    from aegis_data.engine.scale import FRAME, OBJECT, check_person_px, person_unit_from_gsd

    if value is None or value == FRAME:
        return {"mode": FRAME}
    if value == OBJECT:
        return {"mode": OBJECT}
    if (
        not isinstance(value, dict)
        or value.get("mode") not in (FRAME, OBJECT)
        or set(value) - {"mode", "person_px", "gsd_cm_per_px"}
    ):
        raise AegisError(
            f"{path}: scale must be 'frame', 'object' or {{mode: object, person_px: N}} / "
            f"{{mode: object, gsd_cm_per_px: G}}, got {value!r:.80}"
        )
    out = {"mode": value["mode"]}
    if "person_px" in value and "gsd_cm_per_px" in value:
        raise AegisError(f"{path}: scale gives person_px and gsd_cm_per_px; give one")
    for key, check in (
        ("person_px", lambda v: check_person_px(v, f"{path}: scale.person_px")),
        ("gsd_cm_per_px", lambda v: person_unit_from_gsd(v, f"{path}: scale.gsd_cm_per_px")),
    ):
        if key in value:
            if out["mode"] != OBJECT:
                raise AegisError(f"{path}: scale.{key} applies to mode object only")
            check(value[key])
            out[key] = float(value[key])
    return out


def config_from_bytes(data: bytes, path: str | Path = "<config>") -> SuiteConfig:
    """A SuiteConfig from the exact bytes of a suite config file (``path`` names it in messages)."""
    return _parse(parse_yaml_bytes(data, "corruption config", path), data, Path(path))


@lru_cache(maxsize=8)
def _load_cached(path: str) -> SuiteConfig:
    p = Path(path)
    raw, data = read_yaml(p, "corruption config")
    return _parse(raw, data, p)


def suite_path(suite: str | Path | None = None) -> Path:
    """The file of a shipped suite (``aegis-v1``, ``aegis-v2``; None: the default, aegis-v2), or ``suite`` as a
    path to a suite file; AegisError for a name that is neither."""
    if suite is None:
        return DEFAULT_CONFIG_PATH
    if isinstance(suite, str) and suite in SUITE_NAMES:
        return SUITES_DIR / f"{suite}.yaml"
    p = Path(suite)
    if p.exists() and not p.is_file():
        raise AegisError(
            f"suite {str(suite)!r} is not a regular file (a folder, FIFO, socket or device); give "
            f"{' or '.join(SUITE_NAMES)}, or the path of a suite config file"
        )
    if not p.is_file():
        raise AegisError(
            f"unknown suite {str(suite)!r}: give {' or '.join(SUITE_NAMES)}, or the path of a suite config file"
        )
    return p


def load_config(suite: str | Path | None = None) -> SuiteConfig:
    """A suite config, cached per file: ``suite`` is a shipped suite's name (``"aegis-v1"``, ``"aegis-v2"``),
    the path of a suite file, or None for the default suite (aegis-v2)."""
    return _load_cached(str(suite_path(suite).resolve()))


def installed_suites() -> tuple[SuiteConfig, ...]:
    """Every shipped suite, default first."""
    return tuple(load_config(n) for n in (DEFAULT_SUITE, *[n for n in SUITE_NAMES if n != DEFAULT_SUITE]))


def _canonical_value(value: Any) -> Any:
    """Numbers as floats (``16`` and ``16.0`` are one value), tuples as lists, mappings with string keys."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, Mapping):
        return {str(k): _canonical_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical_value(v) for v in value]
    raise AegisError(f"suite config value {value!r:.60} is not a number, string, list or mapping")


def canonical_suite_bytes(
    suite: str,
    seed: int,
    families: Mapping[str, tuple],
    corruptions: Mapping[str, Any],
    calibration: Mapping[str, Any],
    scale: Mapping[str, Any],
    generation: int = 1,
    camera: Mapping[str, Any] | None = None,
) -> bytes:
    """The parsed suite as canonical JSON (sorted keys, no whitespace, every number a float written by Python's
    shortest round-trip ``repr``): what the config hash covers. Comments, key order inside a block, quoting
    and number spelling never change it; the order of corruptions and of families does (it is the order of
    the conditions), so both are listed explicitly. Generation-2 keys (``generation``, ``camera``, a
    corruption's ``model``) enter only when the suite has them, so a generation-1 suite hashes as before."""
    doc = {
        "suite": suite,
        "seed": int(seed),
        "family_order": list(families),
        "families": {f: list(ms) for f, ms in families.items()},
        "corruption_order": list(corruptions),
        "corruptions": {
            n: {
                "family": c.family,
                "statistic": c.statistic,
                "direction": c.direction,
                "severities": _canonical_value(dict(c.severities)),
                "fixed": _canonical_value(dict(c.fixed)),
                **({"model": c.model} if c.model else {}),
            }
            for n, c in corruptions.items()
        },
        "calibration_threshold": _canonical_value(dict(calibration)),
        "scale": _canonical_value(dict(scale)),
    }
    if generation != 1:
        doc["generation"] = int(generation)
        doc["camera"] = _canonical_value(dict(camera or {}))
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8")


def config_bytes_hash(data: bytes) -> str:
    """First 12 hex of the SHA-256 of a config file's bytes: the config hash of builds made before the hash
    covered the parsed content (aegisbench 0.2); still accepted when such a split is read."""
    return hashlib.sha256(data).hexdigest()[:12]


def split_config(root: str | Path, config_hash: Any) -> SuiteConfig:
    """The suite config a split was built with.

    ``config_hash`` is the one the split's manifest records (the caller reads it:
    ``aegis_data.split.reader.FrozenSplit.suite_config``). The split's own copy ``<root>/corruptions.yaml`` is
    used when its bytes hash to it; else the installed config when *its* hash is the manifest's; otherwise
    AegisError: scoring against another suite's families, order or parameters would give wrong answers silently.
    """
    root = Path(root)
    if not isinstance(config_hash, str):
        raise AegisError(
            f"{root / MANIFEST_NAME}: no config_hash recorded; cannot tell which suite config built this split"
        )
    copy = root / SUITE_CONFIG_NAME
    if copy.is_file():
        data = read_file_bytes(copy, "split suite config", max_bytes=MAX_YAML_BYTES)
        suite = _split_copy_cached(str(copy.resolve()), data)
        # A split built before the hash covered the parsed content recorded the file bytes' hash; both name it.
        if config_hash in (suite.config_hash, suite.bytes_hash):
            return suite
        raise AegisError(
            f"{copy} hashes to {suite.config_hash} but the split's manifest names suite config "
            f"{config_hash} (the file was changed); restore it or rebuild the split"
        )
    installed = installed_suites()
    for suite in installed:
        if config_hash in (suite.config_hash, suite.bytes_hash):
            return suite
    raise AegisError(
        f"{root} was built with suite config {config_hash}, but it holds no {SUITE_CONFIG_NAME} and "
        f"no installed suite has that hash ({', '.join(f'{s.suite} {s.config_hash}' for s in installed)}"
        f"); put that suite's config file at {copy} or rebuild the split with this toolkit"
    )


@lru_cache(maxsize=8)
def _split_copy_cached(path: str, data: bytes) -> SuiteConfig:
    return config_from_bytes(data, path)
