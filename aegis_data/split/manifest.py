"""The manifest of a frozen split: what was built, from what, and the hash of every file.

Layout of ``manifest.json`` (keys written sorted, two-space indent, UTF-8, trailing newline)::

    format          "aegis-manifest/2"
    toolkit         {"name": "aegisbench", "version": ...}
    dataset         dataset name, e.g. "synthetic"
    source          the adapter's description of the source (dict)
    suite           corruption-suite name ("aegis-v1")
    config_hash     first 12 hex of the SHA-256 of the suite config's parsed content in canonical form
                    (``aegis_data.engine.config.canonical_suite_bytes``; builds before aegisbench 0.3: of the
                    file's bytes)
    seed            global seed of every random draw
    scale           only in object-scale builds: {mode: "object", person_px, basis} -- the person unit the
                    length parameters were scaled to (``aegis_data.engine.scale``); absent means frame scale
    acted           generation-2 builds only: {condition: number of test images whose pixels the corruption
                    changed} (a model that needs water leaves a frame without water unchanged); derived from the
                    entries (``acted_counts``), sealed by files_hash and checked by verify
    conditions      condition ids built for the test split, canonical order
    splits          {split: number of images}
    entries         one dict per written file, sorted by "path" (see below)
    encoder         the PNG writer that produced the file bytes ({name, version, deflate, filter})
    root_hash       the benchmark's identity: SHA-256 over the build identity (dataset, source, suite,
                    config_hash, seed, conditions, splits, and scale when present) and each entry's identity
                    fields -- decoded pixels,
                    GT digests, never encoded PNG bytes (see ``root_hash``)
    files_hash      SHA-256 over every entry *including* file-byte hashes, plus ``encoder``: seals this copy of
                    the manifest so no field of it can be edited unnoticed
    environment     library versions of the building machine -- in neither hash

Entry kinds:
    image        path, kind, split, condition, image_id (stem), coco_id, width, height, sha256 (file bytes),
                 pixel_sha256 (decoded RGB, see ``imageio.pixel_sha256``), source_pixel_sha256; generation 2: the
                 clean entry's ``scene``, and a flood condition's ``submerged_fraction`` (per GT box of the image,
                 in annotation order: the share of the person under water, null outside the valid region)
    annotations  path, kind, split, sha256, gt {stem: SHA-256 of that image's canonical box list}
    yolo         path, kind, sha256 (YOLO label files, image lists and data.yaml files: text the toolkit writes,
                 whose bytes are their identity)
    water_mask   path, kind, split, image_id, sha256 (file bytes), mask_sha256 (``scene.water_mask_digest`` of
                 the decoded mask): a sidecar's water mask that an image's scene used (generation 2), kept under
                 ``scenes/`` so that verify can re-derive the scene

Why two hashes: PNG bytes depend on the encoder (a host's zlib build changes them for the same pixels), so the
identity two machines must share is the decoded pixels; the file-byte hashes still catch any flipped byte in a
given copy. There are no timestamps: two machines that produce the same pixels produce the same root hash.
"""

from __future__ import annotations

import hashlib
import json
import platform
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aegis_data import __version__
from aegis_data.engine.scale import scale_from_record
from aegis_data.errors import AegisError
from aegis_data.files.imageio import write_bytes_atomic
from aegis_data.files.layout import SPLIT_DIRS, water_mask_relpath
from aegis_data.files.readers import parse_json_bytes

MANIFEST_FORMAT = "aegis-manifest/2"
LEGACY_FORMATS = ("aegis-manifest/1",)
ENTRY_KINDS = ("image", "annotations", "yolo", "water_mask")
# What the root hash covers: the build identity, and per entry kind the fields that do not depend on an encoder.
ROOT_IDENTITY_KEYS = ("dataset", "source", "suite", "config_hash", "seed", "conditions", "splits")
ROOT_ENTRY_KEYS = {
    "image": (
        "path",
        "kind",
        "split",
        "condition",
        "image_id",
        "coco_id",
        "width",
        "height",
        "pixel_sha256",
        "source_pixel_sha256",
    ),
    "annotations": ("path", "kind", "split", "gt"),
    "yolo": ("path", "kind", "sha256"),
    "water_mask": ("path", "kind", "split", "image_id", "mask_sha256"),
}
_STRING_FIELDS = (
    "kind",
    "split",
    "condition",
    "image_id",
    "sha256",
    "pixel_sha256",
    "source_pixel_sha256",
    "mask_sha256",
)


def canonical_json(value: Any) -> bytes:
    """Deterministic JSON bytes: sorted keys, no whitespace, UTF-8; the input to every hash here."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def sort_entries(entries: Iterable[Mapping[str, Any]]) -> list[dict]:
    """Entries sorted by path; AegisError on a duplicate path."""
    # Plain dicts are sorted by reference, not copied: a build's entries are held once (client memory per file).
    out = sorted((e if type(e) is dict else dict(e) for e in entries), key=lambda e: e["path"])
    for a, b in zip(out, out[1:]):
        if a["path"] == b["path"]:
            raise AegisError(f"manifest entries list {a['path']!r} twice")
    return out


def entry_identity(entry: Mapping[str, Any]) -> dict:
    """The fields of one entry that the root hash covers (no encoded-byte hash for images or GT files); a
    generation-2 build's clean image entries add the image's ``scene`` record (absent elsewhere, so the roots of
    aegis-v1 builds are unchanged)."""
    kind = entry.get("kind")
    if kind not in ROOT_ENTRY_KEYS:
        raise AegisError(f"manifest entry {entry.get('path')!r} has kind {kind!r}; expected one of {ENTRY_KINDS}")
    out = {k: entry.get(k) for k in ROOT_ENTRY_KEYS[kind]}
    if kind == "image" and entry.get("scene") is not None:
        out["scene"] = entry["scene"]
    if kind == "image" and entry.get("submerged_fraction") is not None:
        out["submerged_fraction"] = entry["submerged_fraction"]  # part of the ground truth's contract
    return out


def records_acted(entries: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a manifest of these entries records ``acted``: a generation-2 build's (its images carry scenes)."""
    return any(e.get("kind") == "image" and e.get("scene") is not None for e in entries)


def acted_counts(entries: Iterable[Mapping[str, Any]], conditions: Iterable[str], split: str = "test") -> dict:
    """{condition: number of ``split`` images whose decoded pixels differ from their source's}, for every corrupted
    condition (clean excluded), in the given order: on how many images the corruption acted."""
    order = [c for c in conditions if c != "clean"]
    counts = dict.fromkeys(order, 0)
    for e in entries:
        if (
            e.get("kind") == "image"
            and e.get("split") == split
            and e.get("condition") in counts
            and e.get("pixel_sha256") != e.get("source_pixel_sha256")
        ):
            counts[e["condition"]] += 1
    return counts


def root_identity(identity: Mapping[str, Any]) -> dict:
    """The build-identity part of the root hash: ``ROOT_IDENTITY_KEYS``, plus ``scale`` when the build has one
    (object scale; frame-scale builds carry none, so their roots are those of every earlier build)."""
    out = {k: identity.get(k) for k in ROOT_IDENTITY_KEYS}
    if identity.get("scale") is not None:
        out["scale"] = identity["scale"]
    return out


def root_hash(identity: Mapping[str, Any], entries: Iterable[Mapping[str, Any]]) -> str:
    """SHA-256 hex of the benchmark's identity: the build identity plus every entry's identity fields.

    ``identity`` holds at least ``ROOT_IDENTITY_KEYS`` (a manifest dict works). Entry order does not matter.
    """
    # canonical_json({"entries": [...], "format": ..., "identity": ...}), hashed entry by entry (flat memory).
    h = hashlib.sha256(b'{"entries":[')
    _hash_list(h, (entry_identity(e) for e in sort_entries(entries)))
    h.update(
        b'],"format":'
        + canonical_json(MANIFEST_FORMAT)
        + b',"identity":'
        + canonical_json(root_identity(identity))
        + b"}"
    )
    return h.hexdigest()


def _hash_list(h: Any, items: Iterable[Any]) -> None:
    """Feed the canonical JSON of ``items`` joined by commas (the inside of a JSON list) to the hash ``h``."""
    for i, item in enumerate(items):
        h.update(canonical_json(item) if i == 0 else b"," + canonical_json(item))


# Top-level fields outside the files_hash's header: the ones it covers in its own right, itself, and the
# building machine's library versions (diagnosis only; two machines differ there by design).
_UNSEALED = ("entries", "encoder", "root_hash", "files_hash", "environment")


def sealed_header(manifest: Mapping[str, Any]) -> dict:
    """Every top-level field the files_hash seals besides entries, encoder and root hash (all but environment)."""
    return {k: v for k, v in manifest.items() if k not in _UNSEALED}


def files_hash(
    root: str, encoder: Mapping[str, Any], entries: Iterable[Mapping[str, Any]], header: Mapping[str, Any] | None = None
) -> str:
    """SHA-256 hex over the root hash, the encoder, the complete entries (file-byte hashes included) and the
    ``header`` (:func:`sealed_header`: format, toolkit and every other top-level field but environment).

    Without ``header`` it is the earlier seal (aegisbench 0.2.0 before the header was sealed), which
    ``check_manifest`` still accepts with a note."""
    # canonical_json({"encoder": ..., "entries": [...], "header": ..., "root_hash": ...}), hashed entry by entry.
    h = hashlib.sha256(b'{"encoder":' + canonical_json(dict(encoder)) + b',"entries":[')
    _hash_list(h, sort_entries(entries))
    h.update(b"]" + (b"" if header is None else b',"header":' + canonical_json(dict(header))))
    h.update(b',"root_hash":' + canonical_json(root) + b"}")
    return h.hexdigest()


def box_xywh(box: Iterable[float]) -> list[float]:
    """A box given by its corners (x0, y0, x1, y1) as the GT file holds it, [x, y, w, h] (what :func:`gt_digest`
    reads): one conversion for the file the build writes, its digest, and verify's check of a scene's persons."""
    x0, y0, x1, y1 = (float(v) for v in box)
    return [x0, y0, x1 - x0, y1 - y0]


def gt_digest(boxes_xywh: Iterable[Iterable[float]]) -> str:
    """SHA-256 of one image's GT boxes (list of [x, y, w, h] floats, in annotation order)."""
    return hashlib.sha256(canonical_json([[float(v) for v in b] for b in boxes_xywh])).hexdigest()


def annotation_identity(bbox_xywh: Iterable[float], category_id: Any, iscrowd: Any, area: Any) -> list:
    """What one GT annotation contributes to its image's digest: every field the scorer reads.

    A box as the toolkit writes it (person category 1, not crowd, area w*h) is its plain ``[x, y, w, h]``, so
    every digest of a toolkit-built split is what :func:`gt_digest` gives for the box list; any other category,
    crowd flag or area adds ``{"area", "category_id", "iscrowd"}`` to the box, so editing them changes the
    digest."""
    box = [float(v) for v in bbox_xywh]
    plain = (
        category_id == 1
        and not isinstance(category_id, bool)
        and iscrowd in (0, False)
        and isinstance(area, (int, float))
        and not isinstance(area, bool)
        and area == box[2] * box[3]
    )
    return box if plain else [*box, {"area": area, "category_id": category_id, "iscrowd": iscrowd}]


# The fields of a GT image the scorer reads (COCO id, file name, size); see image_identity.
IMAGE_IDENTITY_KEYS = ("id", "file_name", "width", "height")


def image_identity(image: Mapping[str, Any], expected: Mapping[str, Any] | None) -> dict | None:
    """What one GT image's own fields add to its digest: nothing when they are what the toolkit writes (the id,
    width and height of the manifest's image entries for that stem, file name ``<stem>.png``: ``expected``),
    else ``{"image": {id, file_name, width, height}}``. So editing any of them changes the digest, while the
    digest of every toolkit-built split stays the box-list digest earlier versions wrote (root hashes unchanged).
    """
    got = {k: image.get(k) for k in IMAGE_IDENTITY_KEYS}
    if expected is not None and all(
        type(got[k]) is type(expected.get(k)) and got[k] == expected.get(k) for k in IMAGE_IDENTITY_KEYS
    ):
        return None
    return {"image": got}


def annotation_digest(items: Iterable[Any]) -> str:
    """SHA-256 of one image's :func:`annotation_identity` list (in annotation order), followed by its
    :func:`image_identity` when that is not None."""
    return hashlib.sha256(canonical_json(list(items))).hexdigest()


def environment_versions() -> dict[str, str]:
    """Versions of what touches pixels on this machine; recorded for diagnosis, kept out of the root hash."""
    import cv2
    import numpy

    from aegis_data.engine.kernels import kernels_backend
    from aegis_data.files.png import deflate_backend

    return {
        "aegisbench": __version__,
        # compiled or numpy: the same bytes either way, recorded for diagnosis
        "engine_loops": kernels_backend(),
        "png_deflate": deflate_backend(),
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
    encoder: Mapping[str, Any] | None = None,
    environment: Mapping[str, str] | None = None,
    scale: Mapping[str, Any] | None = None,
) -> dict:
    """Assemble the manifest dict (pure); ``encoder`` and ``environment`` default to this machine's.
    ``scale``: ``Scale.identity()`` of an object-scale build (None: frame scale, no ``scale`` key). A
    generation-2 build (its image entries carry scenes) also records on how many test images each condition acted
    (``acted``, :func:`records_acted`)."""
    sorted_entries = sort_entries(entries)  # root_hash below refuses an unknown entry kind
    if encoder is None:
        from aegis_data.files.png import writer_info

        encoder = writer_info()
    condition_ids = list(conditions)
    data = {
        "format": MANIFEST_FORMAT,
        "toolkit": {"name": "aegisbench", "version": __version__},
        "dataset": dataset,
        "source": dict(source),
        "suite": suite,
        "config_hash": config_hash,
        "seed": int(seed),
        "conditions": condition_ids,
        "splits": {k: int(v) for k, v in splits.items()},
        "entries": sorted_entries,
        "encoder": dict(encoder),
        "environment": dict(environment if environment is not None else environment_versions()),
    }
    if scale is not None:
        data["scale"] = dict(scale)
    if records_acted(sorted_entries):
        data["acted"] = acted_counts(sorted_entries, condition_ids)
    # One canonical form, as it will read back from disk (tuples become lists, ints stay ints); entry by entry,
    # keeping an entry that already is in that form, so the entries are not all held twice.
    for i, e in enumerate(sorted_entries):
        canonical = json.loads(canonical_json(e))
        if canonical != e:  # a tuple is not equal to the list it becomes
            sorted_entries[i] = canonical
    data = json.loads(canonical_json({k: v for k, v in data.items() if k != "entries"}))
    data["entries"] = sorted_entries
    data["root_hash"] = root_hash(data, sorted_entries)
    data["files_hash"] = files_hash(data["root_hash"], data["encoder"], sorted_entries, sealed_header(data))
    return data


def _pretty(value: Any) -> str:
    return json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)


def manifest_chunks(manifest: Mapping[str, Any]) -> Iterator[bytes]:
    """The file form (sorted keys, indent 2, trailing newline) in pieces, one per entry: the same bytes as one
    ``json.dumps(indent=2)`` of the whole, without ever holding the text of every entry at once (a manifest of millions
    of files)."""
    entries = manifest.get("entries")
    if not entries:
        yield (_pretty(manifest) + "\n").encode("utf-8")
        return
    marker = "aegis-entries-placeholder"
    head, tail = _pretty({**manifest, "entries": [marker]}).split(json.dumps(marker))
    yield head.encode("utf-8")
    indent = "\n    "  # entries sit two levels deep; JSON text has no raw newline inside a string
    for i, e in enumerate(entries):
        yield (("" if i == 0 else "," + indent) + _pretty(e).replace("\n", indent)).encode("utf-8")
    yield (tail + "\n").encode("utf-8")


def write_manifest(path: str | Path, manifest: Mapping[str, Any]) -> None:
    """Write atomically (temp file + rename): a reader sees the old manifest, the new one, or none."""
    write_bytes_atomic(path, manifest_chunks(manifest))


@dataclass(frozen=True)
class Manifest:
    """A loaded, checked manifest. ``entries`` maps path -> entry dict."""

    data: Mapping[str, Any]
    entries: Mapping[str, Mapping[str, Any]]
    path: str
    legacy_seal: bool = False  # sealed in the earlier form: entries, encoder and root hash only

    @property
    def root_hash(self) -> str:
        return self.data["root_hash"]

    @property
    def files_hash(self) -> str:
        return self.data["files_hash"]

    @property
    def encoder(self) -> Mapping[str, Any]:
        return self.data["encoder"]

    @property
    def identity(self) -> dict:
        return identity_of(self.data)

    def images(self) -> list[Mapping[str, Any]]:
        return [e for e in self.entries.values() if e["kind"] == "image"]


def identity_of(data: Mapping[str, Any]) -> dict:
    """What makes two builds 'the same benchmark': dataset, source description, suite, config hash, seed, and
    the scale of an object-scale build."""
    out = {k: data.get(k) for k in ("dataset", "source", "suite", "config_hash", "seed")}
    if data.get("scale") is not None:
        out["scale"] = data["scale"]
    return out


def load_manifest(path: str | Path) -> Manifest:
    """Read and check a manifest file; AegisError when absent, not JSON, or inconsistent with its root hash."""
    p = Path(path)
    if p.is_dir() and p.name != "manifest.json":  # a split folder names its manifest; a folder *named* so is no file
        p = p / "manifest.json"
    if p.exists() and not p.is_file() and not p.is_dir():  # checked before open(): reading a FIFO blocks
        raise AegisError(f"[manifest_wrong_type] manifest path is not a regular file (a FIFO, socket or device): {p}")
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise AegisError(f"no manifest at {p}: not a finished build (run `aegis build-splits` to finish it)") from None
    except OSError as exc:
        raise AegisError(
            f"cannot read manifest {p}: {exc.strerror}{' (a folder, not a file)' if p.is_dir() else ''}"
        ) from None
    data = parse_json_bytes(raw, "manifest", p, "manifest_")
    return check_manifest(data, p)


def check_manifest(data: Any, p: str | Path) -> Manifest:
    """A parsed manifest checked for format, confined entry paths and both hashes; AegisError naming ``p``.

    Entry paths are checked before anything else uses them: a manifest (the split's own or a third party's
    ``against`` reference) can only name files inside the split, never ``../..`` or an absolute path.
    """
    if isinstance(data, dict) and data.get("format") in LEGACY_FORMATS:
        raise AegisError(
            f"{p} is an {data['format']} manifest (aegisbench 0.1, whose root hash covered PNG file bytes); this "
            f"version reads {MANIFEST_FORMAT}: re-run the same `aegis build-splits` command to rewrite the split "
            f"and its manifest (the pixels do not change)"
        )
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        got = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise AegisError(f"{p} is not an AegisBench manifest (format {got!r}, expected {MANIFEST_FORMAT!r})")
    entries = data.get("entries")
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and isinstance(e.get("path"), str) for e in entries
    ):
        raise AegisError(f"manifest {p}: 'entries' must be a list of objects with a 'path'")
    for e in entries:
        why = unsafe_entry_path(e["path"])
        if why:
            raise AegisError(
                f"manifest {p}: entry path {e['path'][:120]!r} {why}; a manifest may only name files "
                f"inside the split (relative paths under {', '.join(SPLIT_DIRS)})"
            )
        why = _entry_problem(e)
        if why:
            raise AegisError(f"manifest {p}: entry {e['path'][:120]!r} {why}")
    if not isinstance(data.get("encoder"), dict):
        raise AegisError(f"manifest {p}: 'encoder' must be an object naming the PNG writer")
    scale_from_record(data.get("scale"), f"manifest {p}")
    seed = data.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise AegisError(f"manifest {p}: seed {seed!r:.40} is not an integer")
    try:
        recomputed = root_hash(data, entries)
        sealed = files_hash(recomputed, data["encoder"], entries, sealed_header(data))
        legacy = sealed != data.get("files_hash") and files_hash(recomputed, data["encoder"], entries) == data.get(
            "files_hash"
        )
    except (TypeError, ValueError) as exc:  # unhashable, non-finite (NaN, Infinity) or non-JSON values
        raise AegisError(f"manifest {p} holds values that are not canonical JSON ({exc})") from None
    if recomputed != data.get("root_hash"):
        raise AegisError(
            f"manifest {p} is internally inconsistent: root_hash {data.get('root_hash')!r} but its identity and "
            f"entries hash to {recomputed!r} (the file was edited)"
        )
    if sealed != data.get("files_hash") and not legacy:
        raise AegisError(
            f"manifest {p} is internally inconsistent: files_hash {data.get('files_hash')!r} but its fields and "
            f"entries hash to {sealed!r} (the file was edited)"
        )
    return Manifest(data=data, entries={e["path"]: e for e in entries}, path=str(p), legacy_seal=legacy)


# Fields each entry kind must hold as strings; they name files, folders and hashes that verify reads.
_REQUIRED = {
    "image": ("split", "condition", "image_id", "sha256", "pixel_sha256", "source_pixel_sha256"),
    "annotations": ("split", "sha256"),
    "yolo": ("sha256",),
    "water_mask": ("split", "image_id", "sha256", "mask_sha256"),
}
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$")  # one path component, no separator, no leading dot


def _entry_problem(e: Mapping[str, Any]) -> str | None:
    """Why one entry cannot be used (None when it can): a missing or non-string field, a path-like field
    (split, condition, image id) that could name a file outside its folder, or a GT map that is no map."""
    kind = e.get("kind")
    if kind not in _REQUIRED:
        return f"has kind {kind!r:.40}; expected one of {', '.join(ENTRY_KINDS)}"
    bad = next((k for k in _STRING_FIELDS if k in e and not isinstance(e[k], str)), None)
    if bad:
        return f"has {bad} {e[bad]!r:.40}; expected a string"
    missing = [k for k in _REQUIRED[kind] if k not in e]
    if missing:
        return f"lacks {', '.join(missing)}"
    for k in ("split", "condition", "image_id"):
        if k in e and not _PLAIN_NAME.match(e[k]):
            return f"has {k} {e[k][:60]!r}, which is not a plain file or folder name"
    if kind == "image" and e["path"] != f"{e['split']}/{e['condition']}/{e['image_id']}.png":
        return f"names {e['split']}/{e['condition']}/{e['image_id']}.png in its fields"
    if kind == "water_mask" and e["path"] != water_mask_relpath(e["split"], e["image_id"]):
        return f"names {water_mask_relpath(e['split'], e['image_id'])} in its fields"
    gt = e.get("gt")
    if kind == "annotations" and not (isinstance(gt, dict) and all(isinstance(v, str) for v in gt.values())):
        return f"has gt {gt!r:.40}; expected an object of image id -> digest"
    return None


def unsafe_entry_path(path: str) -> str | None:
    """Why ``path`` may not name a file of a split (None when it may): it must be relative, POSIX, free of
    ``.``/``..``/empty components and start with one of ``SPLIT_DIRS``."""
    if not path or "\x00" in path:
        return "is empty or holds a NUL"
    if path.startswith("/") or "\\" in path or (len(path) > 1 and path[1] == ":"):
        return "is absolute or not a POSIX path"
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "has an empty, '.' or '..' component"
    if parts[0] not in SPLIT_DIRS or len(parts) < 2:
        return f"is not under {', '.join(SPLIT_DIRS)}"
    return None
