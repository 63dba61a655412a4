"""Provenance of a score: which toolkit, code, suite, split, inputs and settings produced it (docs/SCORING.md,
"Provenance").

Everything here fails soft: a toolkit run outside a git checkout (an installed wheel) reports ``git_sha`` and
``git_dirty`` as None rather than failing the score.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from aegis_data import __version__
from aegis_data.engine.config import REPO_ROOT, SuiteConfig, installed_suites, load_config
from aegis_data.errors import AegisError


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def git_state(root: str | Path = REPO_ROOT) -> tuple[str | None, bool | None]:
    """(HEAD commit SHA, dirty flag) of the checkout the toolkit runs from; (None, None) when not in git.

    Dirty means tracked files differ from HEAD (untracked files do not count). An answer :func:`git_state_ahead`
    started for ``root`` is taken (once) instead of asking git again.
    """
    with _GIT_AHEAD_LOCK:
        ahead = _GIT_AHEAD.pop(str(root), None)
    if ahead is not None:
        ahead.join()
        return ahead.state
    return _git_state(Path(root))


class _GitAhead(threading.Thread):
    def __init__(self, root: Path) -> None:
        super().__init__(name="git-state", daemon=True)
        self.root = root
        self.state: tuple[str | None, bool | None] = (None, None)

    def run(self) -> None:
        self.state = _git_state(self.root)


_GIT_AHEAD: dict[str, _GitAhead] = {}
_GIT_AHEAD_LOCK = threading.Lock()


def git_state_ahead(root: str | Path = REPO_ROOT) -> None:
    """Ask git for :func:`git_state` on a thread: the two git processes run while the caller scores (the thread
    only waits on them), and the provenance written at the end takes their answer."""
    with _GIT_AHEAD_LOCK:
        if str(root) in _GIT_AHEAD:
            return
        job = _GIT_AHEAD[str(root)] = _GitAhead(Path(root))
    job.start()


def _git_state(root: Path) -> tuple[str | None, bool | None]:
    sha = _git(["rev-parse", "HEAD"], root)
    if sha is None:
        return None, None
    status = _git(["status", "--porcelain", "--untracked-files=no"], root)
    return sha.strip(), (None if status is None else bool(status.strip()))


def utc_timestamp() -> str:
    """Now, in UTC to the second; or the time ``SOURCE_DATE_EPOCH`` names, when it is set.

    That variable (the reproducible-builds convention) lets a reviewer regenerate a score or threshold JSON
    byte for byte: the timestamp is the one field that otherwise differs between two runs of one commit.
    """
    fixed = os.environ.get("SOURCE_DATE_EPOCH")
    if fixed is None:
        moment = datetime.now(timezone.utc)
    else:
        digits = fixed.strip()
        if not (digits.isascii() and digits.isdigit()):  # str.isdigit alone takes "²", which int() refuses
            raise AegisError(f"SOURCE_DATE_EPOCH must be a whole number of seconds since 1970, got {fixed!r}")
        try:
            moment = datetime.fromtimestamp(int(fixed), timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise AegisError(f"SOURCE_DATE_EPOCH is out of range: {fixed!r}") from None
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def shipped_suite(config_hash: Any) -> SuiteConfig | None:
    """The shipped suite whose config hash this is (current or pre-0.3 form), else None. The default suite (the
    first of :func:`installed_suites`) is asked first, so a score of it parses no other suite file."""
    default = load_config()
    if config_hash in (default.config_hash, default.bytes_hash):
        return default
    return next((s for s in installed_suites() if config_hash in (s.config_hash, s.bytes_hash)), None)


def score_suite(doc: Mapping[str, Any]) -> str:
    """The suite a score document was made with: the shipped suite its provenance's config hash names, else its
    provenance's ``suite``; a document from before suites were recorded with neither is taken as aegis-v1 (the only
    suite then)."""
    raw = doc.get("provenance")
    prov: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    known = shipped_suite(prov.get("config_hash"))
    if known is not None:  # the hash covers the suite's name: it wins over a (possibly edited) name field
        return known.suite
    named = prov.get("suite")
    if isinstance(named, str) and named:
        return named
    return "aegis-v1"


def score_suite_version(doc: Mapping[str, Any]) -> str | None:
    """The version of its suite a score document was made with: the shipped suite's config hash when its provenance
    names that suite in either hash form, else its own config hash (None when it records none)."""
    raw = doc.get("provenance")
    prov: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    config_hash = prov.get("config_hash")
    known = shipped_suite(config_hash)
    if known is not None:
        return known.config_hash
    return config_hash if isinstance(config_hash, str) else None


def check_one_suite(docs: Sequence[Mapping[str, Any]], names: Sequence[str], allow_mixed: bool = False) -> str | None:
    """The one suite all ``docs`` (named ``names`` in messages) were scored on; AegisError ``[mixed_suites]`` when
    they differ, or name two versions of one suite (config hashes: a suite such as aegis-v2 may still change its
    models), and ``allow_mixed`` is False (a condition id means a different corruption in each), None when they
    differ and mixing is allowed."""
    suites = [score_suite(d) for d in docs]
    versions = [score_suite_version(d) for d in docs]
    known = {v for v in versions if v is not None}
    if len(set(suites)) <= 1 and len(known) <= 1:
        return suites[0] if suites else None
    if allow_mixed:
        return None
    first = suites[0]
    other = next((i for i, s in enumerate(suites) if s != first), None)
    if other is not None:
        raise AegisError(
            f"[mixed_suites] {names[0]} was scored on suite {first} but {names[other]} on "
            f"{suites[other]}: the same condition id names a different corruption in each; compare "
            f"scores of one suite, or pass `allow_mixed_suites` to compare them anyway",
            param="allow_mixed_suites",
        )
    base = next(v for v in versions if v is not None)
    other = next(i for i, v in enumerate(versions) if v is not None and v != base)
    first_named = names[versions.index(base)]
    raise AegisError(
        f"[mixed_suites] {first_named} and {names[other]} were scored on two versions of {first} (config "
        f"{base} and {versions[other]}): a condition id may name another model in each; compare scores "
        f"of one version, or pass `allow_mixed_suites` to compare them anyway",
        param="allow_mixed_suites",
    )


def build_provenance(
    *,
    gt_source: Mapping[str, Any],
    predictions: Mapping[str, Mapping[str, Any]],
    threshold_sha256: str | None,
    seed: int,
    bootstrap: int,
    iou: float,
    cluster_by: str | None = None,
    class_map: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``provenance`` block of the score JSON.

    gt_source: ``GroundTruth.source`` (path, sha256 and, for a split dir, config_hash / manifest_root_hash).
    predictions: {condition: Detections.source} (path -> ``file``, sha256).
    The config hash is the split manifest's when GT is a split directory, else the installed suite config's.
    class_map: the applied class remap (``ClassMap.record()``); the key is present only when one was applied.
    """
    sha, dirty = git_state()
    config_hash = gt_source.get("config_hash") or load_config().config_hash
    return {
        "toolkit_version": __version__,
        "git_sha": sha,
        "git_dirty": dirty,
        "suite": gt_source.get("suite") or getattr(shipped_suite(config_hash), "suite", None),
        "config_hash": config_hash,
        "manifest_root_hash": gt_source.get("manifest_root_hash"),
        "gt_file": gt_source.get("path"),
        "gt_sha256": gt_source.get("sha256"),
        "predictions": {c: {"file": s.get("path"), "sha256": s.get("sha256")} for c, s in predictions.items()},
        "threshold_sha256": threshold_sha256,
        "seed": int(seed),
        "bootstrap": int(bootstrap),
        "cluster_by": cluster_by,
        "iou": float(iou),
        **({"class_map": dict(class_map)} if class_map is not None else {}),
        # The split's length unit when it was built with object scale (frame-scale results carry no key).
        **({"scale": dict(gt_source["scale"])} if "scale" in gt_source else {}),
        "timestamp": utc_timestamp(),
    }
