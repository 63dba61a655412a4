"""The manifest of a frozen split: what was built, from what, and the hash of every file (SPEC §4).

Layout of ``manifest.json`` (keys written sorted, two-space indent, UTF-8, trailing newline)::

    format          "aegis-manifest/1"
    toolkit         {"name": "aegisbench", "version": ...}
    dataset         dataset name, e.g. "synthetic"
    source          the adapter's description of the source (dict)
    suite           corruption-suite name ("aegis-v1")
    config_hash     first 12 hex of the SHA-256 of configs/corruptions.yaml
    seed            global seed of every random draw
    conditions      condition ids built for the test split, canonical order
    splits          {split: number of images}
    entries         one dict per written file, sorted by "path" (see below)
    root_hash       SHA-256 hex of canonical_json(entries)
    environment     library versions of the building machine -- NOT part of the root hash

Entry kinds:
    image        path, kind, split, condition, image_id (stem), coco_id, width, height, sha256 (file bytes),
                 pixel_sha256 (decoded RGB, see ``imageio.pixel_sha256``), source_pixel_sha256
    annotations  path, kind, split, sha256, gt {stem: SHA-256 of that image's canonical box list}
    yolo         path, kind, sha256 (YOLO label files, image lists and data.yaml files)

There are no timestamps: two machines that produce the same pixels produce the same entries and root hash;
only ``environment`` can differ.
"""

from __future__ import annotations

import hashlib
import json
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from aegis_data import __version__
from aegis_data.errors import AegisError
from aegis_data.imageio import write_bytes_atomic

MANIFEST_FORMAT = "aegis-manifest/1"
ENTRY_KINDS = ("image", "annotations", "yolo")
_IMAGE_KEYS = (
    "path", "kind", "split", "condition", "image_id", "coco_id", "width", "height",
    "sha256", "pixel_sha256", "source_pixel_sha256",
)


def canonical_json(value: Any) -> bytes:
    """Deterministic JSON bytes: sorted keys, no whitespace, UTF-8; the input to every hash here."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def sort_entries(entries: Iterable[Mapping[str, Any]]) -> list[dict]:
    """Entries sorted by path; AegisError on a duplicate path."""
    out = sorted((dict(e) for e in entries), key=lambda e: e["path"])
    for a, b in zip(out, out[1:]):
        if a["path"] == b["path"]:
            raise AegisError(f"manifest entries list {a['path']!r} twice")
    return out


def root_hash(entries: Iterable[Mapping[str, Any]]) -> str:
    """SHA-256 hex over ``canonical_json`` of the entries sorted by path."""
    return hashlib.sha256(canonical_json(sort_entries(entries))).hexdigest()


def gt_digest(boxes_xywh: Iterable[Iterable[float]]) -> str:
    """SHA-256 of one image's GT boxes (list of [x, y, w, h] floats, in annotation order)."""
    return hashlib.sha256(canonical_json([[float(v) for v in b] for b in boxes_xywh])).hexdigest()


def environment_versions() -> dict[str, str]:
    """Versions of what touches pixels on this machine; recorded for diagnosis, kept out of the root hash."""
    import cv2
    import numpy

    return {
        "aegisbench": __version__,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "opencv": cv2.__version__,
        "platform": f"{platform.system()}-{platform.machine()}",
    }


def build_manifest(
    *,
    dataset: str,
    source: Mapping[str, Any],
    suite: str,
    config_hash: str,
    seed: int,
    conditions: Iterable[str],
    splits: Mapping[str, int],
    entries: Iterable[Mapping[str, Any]],
    environment: Mapping[str, str] | None = None,
) -> dict:
    """Assemble the manifest dict (pure); ``environment`` defaults to this machine's versions."""
    sorted_entries = sort_entries(entries)
    for e in sorted_entries:
        if e.get("kind") not in ENTRY_KINDS:
            raise AegisError(f"manifest entry {e.get('path')!r} has kind {e.get('kind')!r}; expected one of {ENTRY_KINDS}")
    return {
        "format": MANIFEST_FORMAT,
        "toolkit": {"name": "aegisbench", "version": __version__},
        "dataset": dataset,
        "source": dict(source),
        "suite": suite,
        "config_hash": config_hash,
        "seed": int(seed),
        "conditions": list(conditions),
        "splits": {k: int(v) for k, v in splits.items()},
        "entries": sorted_entries,
        "root_hash": hashlib.sha256(canonical_json(sorted_entries)).hexdigest(),
        "environment": dict(environment if environment is not None else environment_versions()),
    }


def manifest_bytes(manifest: Mapping[str, Any]) -> bytes:
    """The file form: sorted keys, indent 2, trailing newline (stable for identical content)."""
    return (json.dumps(manifest, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def write_manifest(path: str | Path, manifest: Mapping[str, Any]) -> None:
    """Write atomically (temp file + rename): a reader sees the old manifest, the new one, or none."""
    write_bytes_atomic(path, manifest_bytes(manifest))


@dataclass(frozen=True)
class Manifest:
    """A loaded, checked manifest. ``entries`` maps path -> entry dict."""

    data: Mapping[str, Any]
    entries: Mapping[str, Mapping[str, Any]]
    path: str

    @property
    def root_hash(self) -> str:
        return self.data["root_hash"]

    @property
    def identity(self) -> dict:
        return identity_of(self.data)

    def images(self) -> list[Mapping[str, Any]]:
        return [e for e in self.entries.values() if e["kind"] == "image"]


def identity_of(data: Mapping[str, Any]) -> dict:
    """What makes two builds 'the same benchmark': dataset, source description, suite, config hash, seed."""
    return {k: data.get(k) for k in ("dataset", "source", "suite", "config_hash", "seed")}


def load_manifest(path: str | Path) -> Manifest:
    """Read and check a manifest file; AegisError when absent, not JSON, or inconsistent with its root hash."""
    p = Path(path)
    if p.is_dir():
        p = p / "manifest.json"
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise AegisError(
            f"no manifest at {p}: not a finished build (run `aegis build-splits` to finish it)"
        ) from None
    except OSError as exc:
        raise AegisError(f"cannot read manifest {p}: {exc.strerror}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise AegisError(f"manifest {p} is not valid JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        got = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise AegisError(f"{p} is not an AegisBench manifest (format {got!r}, expected {MANIFEST_FORMAT!r})")
    entries = data.get("entries")
    if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("path"), str) for e in entries):
        raise AegisError(f"manifest {p}: 'entries' must be a list of objects with a 'path'")
    recomputed = root_hash(entries)
    if recomputed != data.get("root_hash"):
        raise AegisError(
            f"manifest {p} is internally inconsistent: root_hash {data.get('root_hash')!r} but its entries hash to "
            f"{recomputed!r} (the file was edited)"
        )
    return Manifest(data=data, entries={e["path"]: e for e in entries}, path=str(p))
