"""Checking a frozen split against its manifest, or against a reference manifest from another machine.

``verify_split`` recomputes the SHA-256 of every file the manifest lists and classifies each difference:

    missing      listed in the manifest, not on disk
    extra        on disk under a split folder (test, val, train, annotations, yolo, scenes), not listed (includes
                 temp files of a crash)
    bytes-only   file bytes differ but the decoded pixels are identical (another PNG encoder or settings);
                 against a reference manifest this is information (the benchmark's identity is the pixels),
                 unless ``strict_bytes``; against the split's own manifest it fails (this copy was changed).
                 Only a plain 8-bit RGB PNG without alpha or orientation metadata, which OpenCV (default
                 flags) and Pillow decode to exactly the expected pixels, is bytes-only; else ``format``
    format       this toolkit decodes the expected pixels, but a detector's reader would not (16-bit samples
                 it truncates, alpha, an EXIF orientation it applies -- from eXIf, or EXIF/XMP in a text
                 chunk --, another layout)
    pixels       decoded pixels differ; with the count of differing pixels and max |delta| where the expected
                 image can be regenerated: the clean image of the split is the decoded source, so a corrupted
                 condition is re-run from it with the suite's corruption function
    source       the decoded *source* pixels differ from the reference's (``source_pixel_sha256``): this
                 machine's image decoder produced different pixels; the corrupted files of that image then
                 differ as a consequence, not because the corruption drifted
    annotations  a GT file changed; names the images whose boxes changed
    yolo         a YOLO label/list/data.yaml file changed
    manifest     the reference describes another benchmark (dataset, config hash, seed, conditions, splits),
                 or names a file with other identity fields (condition, image id, size, source pixels, GT)
    seal         information: the manifest carries the earlier seal, which left its top-level fields (toolkit,
                 format, ...) out of ``files_hash``; rebuilding re-seals it
    link         a symbolic link in the split that resolves outside it (its target is not hashed), or a YOLO
                 view link (``yolo/images/<split>``, ``yolo/labels/<split>/<condition>``) missing or pointing
                 at the wrong place, so ``yolo val`` would read other data
    hardlink     information: a file shares its bytes with a file outside the split (editing that one changes
                 this one)

Only reading happens here; the caller renders the report.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, overload

import numpy as np

from aegis_data.conditions import parse_condition
from aegis_data.engine.config import SuiteConfig, split_config
from aegis_data.engine.corruptor import SuiteCorruptor
from aegis_data.engine.scale import Scale, scale_from_record
from aegis_data.engine.scene import Scene, check_persons, check_sidecar, estimate_scene, read_water_mask
from aegis_data.errors import AegisError
from aegis_data.executors import Placement, map_units
from aegis_data.files.imageio import (
    DEFAULT_MAX_PIXELS,
    decode_file_bytes,
    file_sha256,
    pixel_sha256,
    read_rgb,
    standard_decode_problem,
)
from aegis_data.files.layout import (
    ANNOTATIONS_DIR,
    MANIFEST_NAME,
    SPLIT_DIRS,
    SUITE_CONFIG_NAME,
    YOLO_DIR,
    condition_dir,
    image_file_name,
    link_target,
    water_mask_relpath,
)
from aegis_data.files.readers import coco_annotations, coco_bbox, coco_images, read_coco_gt
from aegis_data.split.manifest import (
    IMAGE_IDENTITY_KEYS,
    ROOT_IDENTITY_KEYS,
    Manifest,
    acted_counts,
    annotation_digest,
    annotation_identity,
    box_xywh,
    entry_identity,
    gt_digest,
    image_identity,
    load_manifest,
    records_acted,
)

_BYTES_ONLY = "pixels identical, file bytes differ (another PNG encoder, its version or settings)"
_UNCHANGED_GT = (
    "file bytes differ; every field the scorer reads is identical (boxes, categories, crowd flags, areas; "
    "image ids, file names, sizes): formatting or metadata"
)
FINDING_KINDS = (
    "missing",
    "extra",
    "bytes-only",
    "format",
    "pixels",
    "source",
    "scene",
    "annotations",
    "yolo",
    "manifest",
    "link",
    "hardlink",
    "seal",
)
INFO_KINDS = ("hardlink", "seal")  # never failures
_LEGACY_SEAL = (
    "sealed in the earlier form (aegisbench 0.2.0 before top-level fields were sealed): toolkit, format "
    "and any added top-level field are not covered; re-run the same `aegis build-splits` command to "
    "re-seal (no pixel is re-rendered)"
)

Corrupt = Callable[..., np.ndarray]


@dataclass(frozen=True)
class Finding:
    """One difference. ``pixels_differing``/``max_abs_delta`` are None when no expected pixels are available."""

    path: str
    kind: str
    detail: str
    pixels_differing: int | None = None
    max_abs_delta: int | None = None

    def __post_init__(self) -> None:
        # A kind outside FINDING_KINDS would be a kind docs/SPLITS.md does not explain: refused where it is made.
        if self.kind not in FINDING_KINDS:
            raise ValueError(f"unknown finding kind {self.kind!r}; add it to FINDING_KINDS and docs/SPLITS.md")


@dataclass(frozen=True)
class VerifyReport:
    root: str
    reference: str  # the manifest file the files were checked against
    expected_root_hash: str
    local_root_hash: str
    checked: int  # files listed in the reference
    findings: tuple[Finding, ...] = field(default_factory=tuple)
    bytes_only_is_info: bool = False  # against a reference and not strict_bytes
    scale: str = ""  # the length unit the pixels were built with (``Scale.describe``)

    def is_failure(self, finding: Finding) -> bool:
        if finding.kind in INFO_KINDS:
            return False
        return not (self.bytes_only_is_info and finding.kind == "bytes-only")

    @property
    def failures(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if self.is_failure(f))

    @property
    def information(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if not self.is_failure(f))

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def roots_match(self) -> bool:
        return self.expected_root_hash == self.local_root_hash

    def counts(self, findings: Sequence[Finding] | None = None) -> dict[str, int]:
        """Findings per kind: of all findings, or of the given ones (e.g. ``self.failures``)."""
        out: dict[str, int] = {}
        for f in self.findings if findings is None else findings:
            out[f.kind] = out.get(f.kind, 0) + 1
        return out

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "root": self.root,
            "reference": self.reference,
            "expected_root_hash": self.expected_root_hash,
            "local_root_hash": self.local_root_hash,
            "checked": self.checked,
            "counts": self.counts(),
            "roots_match": self.roots_match,
            "bytes_only_is_information": self.bytes_only_is_info,
            "scale": self.scale,
            "findings": [dict(asdict(f), failure=self.is_failure(f)) for f in self.findings],
        }


def pixel_difference(actual: np.ndarray, expected: np.ndarray) -> tuple[int, int]:
    """(pixels where any channel differs, max |delta| over all channels); shapes must match."""
    if actual.shape != expected.shape:
        raise AegisError(f"cannot compare pixels of shapes {actual.shape} and {expected.shape}")
    delta = np.abs(actual.astype(np.int16) - expected.astype(np.int16))
    return int(np.count_nonzero(delta.max(axis=2))), int(delta.max())


def _suite_config(root: Path, config_hash: Any) -> tuple[SuiteConfig | None, str]:
    """(the suite config named by ``config_hash`` -- the split's copy or the installed one --, or None with why)."""
    try:
        return split_config(root, config_hash), ""
    except AegisError as exc:
        return None, str(exc)


def _walk_files(root: Path) -> list[str]:
    """Relative POSIX paths of every file (or file-like link) under the split dirs and annotations/."""
    found = []
    for top in SPLIT_DIRS:
        d = root / top
        if not d.is_dir() or d.is_symlink():
            continue
        for dirpath, _dirs, files in os.walk(d):
            for name in files:
                found.append(Path(dirpath, name).relative_to(root).as_posix())
    return found


def expected_gt_images(manifest: Manifest, split: str) -> dict[str, dict[str, Any]]:
    """Per image stem of ``split``, the GT image fields the toolkit writes, from the manifest's image entries
    (which the root hash covers): COCO id, ``<stem>.png``, width and height (see ``image_identity``)."""
    out: dict[str, dict[str, Any]] = {}
    for e in manifest.images():
        if e.get("split") == split and e["image_id"] not in out:
            out[e["image_id"]] = {
                "id": e.get("coco_id"),
                "file_name": image_file_name(e["image_id"]),
                "width": e.get("width"),
                "height": e.get("height"),
            }
    return out


def _gt_identity(
    path: Path, images: Mapping[str, Mapping[str, Any]] | None
) -> tuple[dict[str, str], dict[str, str], dict[str, list[str]]]:
    """(per stem: digest of the boxes alone, digest of boxes and image fields, how the image fields differ from
    ``images``) of a COCO GT file. Without ``images`` the image fields are not compared (the two digests agree)."""
    coco = read_coco_gt(path)[0]
    rows = coco_images(coco, path)
    stems: dict[int, str] = {}
    seen: set[str] = set()
    for im in rows:
        stem = im.get("stem") or Path(im["file_name"]).stem
        if stem in seen:
            raise AegisError(f"{path}: two images have the stem {stem!r}")
        seen.add(stem)
        stems[im["id"]] = stem
    items: dict[int, list] = {i: [] for i in stems}
    for k, a in coco_annotations(coco, path, items):
        box = coco_bbox(a, path, k)
        items[a["image_id"]].append(annotation_identity(box, a.get("category_id"), a.get("iscrowd", 0), a.get("area")))
    boxes, full, fields = {}, {}, {}
    for im in rows:
        stem, v = stems[im["id"]], items[im["id"]]
        boxes[stem] = annotation_digest(v)
        extra = None if images is None else image_identity(im, images.get(stem))
        full[stem] = boxes[stem] if extra is None else annotation_digest([*v, extra])
        if extra is not None:
            want = images.get(stem)  # type: ignore[union-attr]
            fields[stem] = [
                f"{k} {extra['image'][k]!r:.40}" + ("" if want is None else f" (expected {want.get(k)!r})")
                for k in IMAGE_IDENTITY_KEYS
                if want is None or extra["image"][k] != want.get(k) or type(extra["image"][k]) is not type(want.get(k))
            ]
    return boxes, full, fields


def gt_digests(path: Path, images: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, str]:
    """Per image stem, the digest of every field the scorer reads from its annotations (box, category, crowd
    flag, area; :func:`aegis_data.split.manifest.annotation_identity`) and, given ``images`` (the manifest's,
    :func:`expected_gt_images`), from the image itself (id, file name, size; ``image_identity``), from a COCO
    GT file; AegisError when unreadable."""
    return _gt_identity(path, images)[1]


def _shown(items: Sequence[str]) -> str:
    return ", ".join(items[:5]) + (f" (+{len(items) - 5} more)" if len(items) > 5 else "")


@overload
def _annotation_finding(
    path: Path,
    rel: str,
    expected: Mapping[str, Any],
    only: None = None,
    images: Mapping[str, Mapping[str, Any]] | None = None,
) -> Finding: ...
@overload
def _annotation_finding(
    path: Path,
    rel: str,
    expected: Mapping[str, Any],
    only: Any = None,
    images: Mapping[str, Mapping[str, Any]] | None = None,
) -> Finding | None: ...
def _annotation_finding(
    path: Path,
    rel: str,
    expected: Mapping[str, Any],
    only: Any = None,
    images: Mapping[str, Mapping[str, Any]] | None = None,
) -> Finding | None:
    """How the GT file at ``path`` differs from ``expected['gt']`` and, per image, from ``images`` (the image
    fields the manifest implies; for the stems in ``only`` when given); None when ``only`` is given and those
    images are unchanged."""
    try:
        boxes, digests, fields = _gt_identity(path, images)
    except AegisError as exc:
        return Finding(rel, "annotations", f"not a readable COCO GT file ({exc})")
    want: Mapping[str, str] = expected.get("gt") or {}
    if only is not None:
        want = {s: d for s, d in want.items() if s in only}
        digests = {s: d for s, d in digests.items() if s in only}
        fields = {s: f for s, f in fields.items() if s in only}
    changed = sorted(s for s in want if s in boxes and boxes[s] != want[s])
    redrawn = sorted(s for s in want if s in fields)
    lost = sorted(s for s in want if s not in digests)
    added = sorted(s for s in digests if s not in want)
    parts = []
    if changed:
        parts.append(f"annotations changed for {len(changed)}: {_shown(changed)}")
    if redrawn:
        parts.append(
            f"image fields changed for {len(redrawn)}: " + _shown([f"{s} {', '.join(fields[s])}" for s in redrawn])
        )
    for label, items in (("images removed", lost), ("images added", added)):
        if items:
            parts.append(f"{label}: {_shown(items)}")
    if not parts and only is not None:
        return None
    return Finding(rel, "annotations", "; ".join(parts) or _UNCHANGED_GT)


def hash_item(root: str, max_pixels: int, item: tuple[str, str, bool]) -> tuple[str, str | None, str | None]:
    """For one (relative path, expected file SHA-256, is an image): (file SHA-256, decoded-pixel SHA-256, why a
    standard reader would see other pixels).

    The last two are computed only for an image whose bytes differ from the expectation (None otherwise, and
    when the file does not decode); see ``imageio.standard_decode_problem``. A unit of ``map_units``: runs in
    threads here, or on Dask workers (``aegis_data.executors``).
    """
    rel, expected, is_image = item
    p = Path(root, rel)
    if not is_image:
        return file_sha256(p), None, None
    data = p.read_bytes()  # read once: hashed, and decoded only when it is not the expected file
    sha = hashlib.sha256(data).hexdigest()
    pixels = problem = None
    if sha != expected:
        try:
            rgb = decode_file_bytes(data, p, max_pixels)
            pixels, problem = pixel_sha256(rgb), standard_decode_problem(data, rgb)
        except AegisError:
            pixels = problem = None
    return sha, pixels, problem


def hash_files(
    root: Path,
    items: Sequence[tuple[str, str, bool]],
    *,
    workers: int | None = None,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    scheduler: str | None = None,
    on_cluster: Callable[[Mapping[str, Any]], None] | None = None,
    timeout: float | None = None,
) -> dict[str, tuple[str, str | None, str | None]]:
    """``hash_item`` over every item, keyed by relative path: in ``workers`` threads (hashlib and the PNG
    decoder release the GIL), or on Dask when ``scheduler`` is ``"local"`` (a LocalCluster of ``workers``
    processes) or a scheduler address whose workers see ``root`` at the same path."""
    placement = Placement(
        workers=workers,
        scheduler=scheduler,
        timeout=timeout,
        on_cluster=on_cluster,
        shared=(root / MANIFEST_NAME, "the split directory"),
        threads=True,
    )
    hashed = map_units(functools.partial(hash_item, str(root), int(max_pixels)), items, placement, chunked=True)
    return {item[0]: hashes for item, hashes in hashed}


def verify_split(
    root: str | Path,
    against: str | Path | None = None,
    *,
    strict_bytes: bool = False,
    regenerate: bool = True,
    corrupt: Corrupt | None = None,
    workers: int | None = None,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    subset: bool = False,
    scheduler: str | None = None,
    on_cluster: Callable[[Mapping[str, Any]], None] | None = None,
    timeout: float | None = None,
) -> VerifyReport:
    """Check every file of the split under ``root`` against its manifest (or ``against``, a reference manifest).

    The local ``manifest.json`` must exist (a build without one is unfinished). ``regenerate`` re-runs the
    corruption (``corrupt``, default ``apply_corruption``) from the split's clean image to count differing
    pixels of a corrupted file; it is skipped when the local suite config differs from the manifest's.
    ``subset`` (with ``against``): check only the images the local manifest lists, and the GT of those images,
    so a partial build (``limit``, ``corruptions``) can be checked against a full reference.
    With ``against``, files whose bytes differ but whose decoded pixels match are reported as information
    (another encoder wrote the same pixels); ``strict_bytes`` makes them failures. Against the split's own
    manifest they are always failures: the copy no longer matches what was built.
    scheduler (``"local"`` or a Dask scheduler address, see ``hash_files``) moves the hashing to a cluster;
    timeout: seconds a scheduler address has to answer (default 10).
    """
    root = Path(root) if scheduler is None else Path(root).resolve()  # workers see absolute paths only
    if not root.is_dir():
        raise AegisError(f"split directory not found: {root}")
    local: Manifest = load_manifest(root / MANIFEST_NAME)
    ref: Manifest = load_manifest(against) if against is not None else local
    findings = _identity_findings(ref, local, subset)
    findings.extend(
        Finding(MANIFEST_NAME if m is local else Path(m.path).name, "seal", _LEGACY_SEAL)
        for m in ([local] if ref is local else [local, ref])
        if m.legacy_seal
    )
    if subset and ref is not local:
        paths, partial = _subset_paths(root, local, ref)
        findings.extend(partial)
    else:
        paths = sorted(ref.entries)
    outside = escaping_paths(root, paths)
    findings.extend(Finding(p, "link", f"resolves outside the split, to {t}; not read") for p, t in outside.items())
    present = {p for p in paths if p not in outside and (root / p).is_file()}
    items = [(p, ref.entries[p]["sha256"], ref.entries[p].get("kind") == "image") for p in sorted(present)]
    hashed = hash_files(
        root, items, workers=workers, max_pixels=max_pixels, scheduler=scheduler, on_cluster=on_cluster, timeout=timeout
    )

    config, no_config = _suite_config(root, ref.data.get("config_hash"))
    scale = scale_from_record(ref.data.get("scale"), f"manifest {ref.path}")  # the unit the pixels were made with
    if (root / SUITE_CONFIG_NAME).is_file() and config is None:
        findings.append(Finding(SUITE_CONFIG_NAME, "manifest", no_config))
    images = _ImageCheck(
        root=root,
        max_pixels=max_pixels,
        seed=int(ref.data["seed"]),
        regenerate=regenerate and config is not None,
        why_not=(
            "regeneration off" if not regenerate else f"the manifest's suite config is not available: {no_config}"
        ),
        corrupt=corrupt or SuiteCorruptor(config, scale),
        custom_corrupt=corrupt is not None,
        source_differs=_sources_that_differ(local, ref),
        config=config,
        scale=scale,
        scenes=_recorded_scenes(ref),
        scene_sources={
            (e["split"], e["image_id"]): e.get("source_pixel_sha256", "")
            for e in ref.images()
            if e.get("condition") == "clean"
        },
        gt_digests={e["split"]: e["gt"] for e in ref.entries.values() if e.get("kind") == "annotations"},
    )
    if config is not None:
        findings.extend(_scene_record_findings(ref, config))
        if ref.data.get("suite") != config.suite:
            findings.append(
                Finding(
                    MANIFEST_NAME,
                    "manifest",
                    f"the manifest names suite "
                    f"{ref.data.get('suite')!r:.60} but its suite config is {config.suite!r:.60}",
                )
            )
    if config is not None and config.uses_scene:
        findings.extend(images.scene_findings(present, ref))
        findings.extend(_acted_findings(ref))
    # Changed images are classified image by image (decoded: their pixel hash, computed with the file hash when the
    # bytes differ): the clean image and scene a regeneration needs are then read and derived once per image, not
    # once per condition (verify keeps only the last few).
    changed = [p for p in present if ref.entries[p]["kind"] == "image" and hashed[p][0] != ref.entries[p]["sha256"]]
    changed.sort(key=lambda p: (ref.entries[p]["split"], ref.entries[p]["image_id"], p))
    changed_images = {rel: images.finding(rel, ref.entries[rel], *hashed[rel][1:]) for rel in changed}
    for rel in paths:
        if rel in outside:
            continue
        if rel not in present:
            findings.append(Finding(rel, "missing", "listed in the manifest, not on disk"))
            continue
        e = ref.entries[rel]
        if hashed[rel][0] == e["sha256"]:
            continue
        kind = e.get("kind")
        if kind == "annotations":
            findings.append(_annotation_finding(root / rel, rel, e, images=expected_gt_images(ref, e["split"])))
        elif kind == "water_mask":
            findings.append(
                Finding(
                    rel,
                    "scene",
                    "the stored water mask differs from the one the build used (the "
                    "scene cannot be re-derived from it)",
                )
            )
        elif kind != "image":
            findings.append(Finding(rel, "yolo" if kind == "yolo" else str(kind), "file content differs"))
        else:
            findings.append(changed_images[rel])

    findings.extend(_unlisted_findings(root, ref, local, subset))
    findings.extend(link_findings(root, sorted(present)))
    return VerifyReport(
        root=str(root),
        reference=ref.path,
        expected_root_hash=ref.root_hash,
        local_root_hash=local.root_hash,
        checked=len(paths),
        findings=tuple(findings),
        bytes_only_is_info=against is not None and not strict_bytes,
        scale=scale.describe(),
    )


def _identity_findings(ref: Manifest, local: Manifest, subset: bool = False) -> list[Finding]:
    """``manifest`` findings where a reference describes another build, or one of the files both list with
    other identity fields (every field the root hash covers: condition, image id, COCO id, size, decoded
    source, GT digests). The source description may hold machine-specific paths, so it is not compared; a
    ``subset`` build has fewer conditions, images and GT entries by design, so those are compared per image."""
    if ref is local:
        return []
    keys = [
        k for k in (*ROOT_IDENTITY_KEYS, "scale") if k != "source" and not (subset and k in ("conditions", "splits"))
    ]
    a, b = ref.data, local.data
    diffs = [k for k in keys if a.get(k) != b.get(k)]
    out = []
    if diffs:
        out.append(
            Finding(
                MANIFEST_NAME,
                "manifest",
                "reference and local manifest describe different builds: "
                + ", ".join(f"{k} {b.get(k)!r:.60} here vs {a.get(k)!r:.60} in the reference" for k in diffs),
            )
        )
    for rel in sorted(set(ref.entries) & set(local.entries)):
        mine, theirs = local.entries[rel], ref.entries[rel]
        if subset and mine.get("kind") != "image":
            continue  # GT and YOLO files of a partial build differ by design; GT is compared per image
        fields = dict.fromkeys(("kind", *entry_identity(theirs), *entry_identity(mine)))  # what the root hash covers
        differ = [k for k in fields if k != "sha256" and mine.get(k) != theirs.get(k)]
        if differ:
            out.append(
                Finding(
                    rel,
                    "manifest",
                    "the reference lists this file with other identity fields: "
                    + ", ".join(
                        f"{k} {mine.get(k)!r:.40} here vs {theirs.get(k)!r:.40} in the reference" for k in differ
                    ),
                )
            )
    return out


def _subset_paths(root: Path, local: Manifest, ref: Manifest) -> tuple[list[str], list[Finding]]:
    """A partial build against a full reference: (its own image paths the reference lists, findings). Its GT files
    are compared per image (their bytes differ by design); its images the reference lacks are ``extra``."""
    findings = []
    for rel, e in sorted(local.entries.items()):
        if e["kind"] == "annotations" and rel in ref.entries:
            want = ref.entries[rel].get("gt") or {}
            mine = e.get("gt") or {}
            changed = sorted(s for s, d in mine.items() if want.get(s) != d)
            if changed:
                findings.append(
                    Finding(
                        rel,
                        "annotations",
                        f"annotations differ from the reference for {len(changed)}: {_shown(changed)}",
                    )
                )
            # Every image this build holds has its GT checked: a stem dropped from the local GT map would
            # otherwise take its image's annotations out of the comparison.
            held = set(expected_gt_images(local, e["split"]))
            unmapped = sorted(held - set(mine))
            if unmapped:
                findings.append(
                    Finding(
                        rel,
                        "annotations",
                        f"the local manifest lists images without a GT digest ({len(unmapped)}): {_shown(unmapped)}",
                    )
                )
            if not (root / rel).is_file():
                findings.append(Finding(rel, "missing", "listed in the local manifest, not on disk"))
                continue
            # Image fields are expected as the reference's image entries give them (the root hash covers those).
            images = expected_gt_images(ref, e["split"])
            if file_sha256(root / rel) != e["sha256"]:
                findings.append(_annotation_finding(root / rel, rel, e, images=images))  # edited since the build
                continue
            # The file itself against the reference, for this build's images: the local manifest's digests
            # are only as good as the manifest, which anyone can reseal.
            against_ref = _annotation_finding(root / rel, rel, ref.entries[rel], only=held | set(mine), images=images)
            if against_ref is not None:
                findings.append(Finding(rel, "annotations", "against the reference: " + against_ref.detail))
    paths = sorted(p for p in local.entries if p in ref.entries and ref.entries[p]["kind"] == "image")
    findings.extend(
        Finding(p, "extra", "listed in the local manifest, not in the reference")
        for p in sorted(local.entries)
        if local.entries[p]["kind"] == "image" and p not in ref.entries
    )
    return paths, findings


def _sources_that_differ(local: Manifest, ref: Manifest) -> set[tuple[str, str]]:
    """(split, image_id) whose decoded source pixels differ between the local manifest and the reference."""
    local_src = {(e["split"], e["image_id"]): e.get("source_pixel_sha256") for e in local.images()}
    ref_src = {(e["split"], e["image_id"]): e.get("source_pixel_sha256") for e in ref.images()}
    return {k for k, v in ref_src.items() if k in local_src and local_src[k] != v}


@dataclass
class _ImageCheck:
    """Classifies an image file whose bytes differ from the manifest: bytes-only, a source difference, or pixels
    (counted against a regeneration from the split's own clean image where one is possible)."""

    root: Path
    max_pixels: int
    seed: int
    regenerate: bool
    why_not: str  # why pixels cannot be regenerated, when ``regenerate`` is False
    corrupt: Corrupt
    source_differs: set[tuple[str, str]]
    custom_corrupt: bool = False  # ``corrupt`` is the caller's, not the suite's (it takes no scene, as in the build)
    clean_cache: dict[tuple[str, str], np.ndarray | None] = field(default_factory=dict)
    config: SuiteConfig | None = None
    scale: Scale | None = None
    scenes: Mapping[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)  # recorded, generation 2
    scene_sources: Mapping[tuple[str, str], str] = field(default_factory=dict)  # their clean pixel hashes
    derived: dict[tuple[str, str], Scene | None] = field(default_factory=dict)
    gt_digests: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # split -> {image id: GT digest}

    def scene(self, split: str, image_id: str, clean: np.ndarray) -> Scene | None:
        """The scene re-derived from the clean image and the recorded sidecar facts (generation 2), or None when the
        manifest records none for this image."""
        key = (split, image_id)
        if key not in self.derived:
            recorded = self.scenes.get(key)
            if (
                recorded is None
                or self.config is None
                or not self.config.uses_scene
                or self.scale is None
                or not self.scale.is_object
            ):
                self.derived[key] = None
            else:
                where = f"manifest scene of {split}/{image_id}"
                raw_given = recorded.get("given")
                given: dict[str, Any] = raw_given if isinstance(raw_given, dict) else {}
                facts = check_sidecar(dict(given), where)
                persons = recorded.get("persons", [])
                if not isinstance(persons, list):
                    raise AegisError(f"{where}: persons must be a list of boxes, got {type(persons).__name__}")
                persons = check_persons(persons, clean.shape[0], clean.shape[1], where)
                mask = None
                if "water_mask" in facts:  # the split keeps the mask the build read (scenes/<split>/<id>.water.png)
                    mask = read_water_mask(self.root / water_mask_relpath(split, image_id), *clean.shape[:2])
                scene = estimate_scene(clean, self.scale.unit_px, self.config.camera, facts, mask, persons=persons)
                self.derived[key] = replace(scene, given=dict(given))
            _keep_recent(self.derived)
        return self.derived[key]

    def scene_findings(self, present: set[str], ref: Manifest) -> list[Finding]:
        """``scene`` findings: every recorded scene re-derived from its clean image (when ``present``) must equal the
        record; with them the ``annotations`` findings of the ground-truth contract of floods on the manifest
        ``ref`` (:meth:`contract_findings`), image by image, so each clean image is read and its scene derived once."""
        out: list[Finding] = []
        floods = self._flood_entries(ref, out)
        for (split, image_id), recorded in sorted(self.scenes.items()):
            rel = f"{split}/clean/{image_file_name(image_id)}"
            if rel not in present:
                continue
            clean = self.clean_pixels(split, image_id, self.scene_sources.get((split, image_id), ""))
            if clean is None:
                continue  # a changed or missing clean file has its own finding
            try:
                scene = self.scene(split, image_id, clean)
            except AegisError as exc:
                out.append(Finding(rel, "scene", f"the recorded scene cannot be re-derived: {exc}"))
                continue
            if scene is not None and scene.record() != recorded:
                mine = scene.record()
                differ = [k for k in sorted(set(mine) | set(recorded)) if mine.get(k) != recorded.get(k)]
                out.append(
                    Finding(
                        rel,
                        "scene",
                        "the scene re-derived from the clean image differs from the "
                        "recorded one: "
                        + ", ".join(f"{k} {mine.get(k)!r:.40} vs {recorded.get(k)!r:.40}" for k in differ),
                    )
                )
            elif scene is not None:
                problem = self.persons_problem(split, image_id, scene.persons)
                if problem:
                    out.append(Finding(rel, "scene", problem))
            if scene is not None:
                out.extend(self.contract_findings(clean, scene, floods.get((split, image_id), ())))
        return out

    def _flood_entries(self, ref: Manifest, out: list[Finding]) -> dict[tuple[str, str], list]:
        """(split, image id) -> [(path, entry, corruption, severity)] of the flood conditions' files; a file of
        another condition that records submerged fractions is an ``annotations`` finding (added to ``out``)."""
        floods: dict[tuple[str, str], list] = {}
        for rel, e in sorted(ref.entries.items()):
            if e.get("kind") != "image" or e.get("condition") == "clean" or self.config is None:
                continue
            name, severity = parse_condition(e["condition"])
            if (
                name is not None
                and name in self.config.corruptions
                and self.config.corruptions[name].model_name == "flood"
            ):
                floods.setdefault((e["split"], e["image_id"]), []).append((rel, e, name, severity))
            elif "submerged_fraction" in e:
                out.append(Finding(rel, "annotations", "records submerged fractions, but its condition is no flood"))
        return floods

    def contract_findings(self, clean: np.ndarray, scene: Scene, entries: Sequence) -> list[Finding]:
        """``annotations`` findings on the ground-truth contract of floods: every file of a flood condition records
        each person's ``submerged_fraction`` as the engine re-derives it from the clean image and its scene."""
        from aegis_data.engine.corruptions import condition_facts

        config = self.config
        if config is None:  # flood entries come from the suite config: there are none without one
            return []
        out = []
        for rel, e, name, severity in entries:
            facts = condition_facts(clean, name, severity, config, scene)
            expected = None if facts is None else facts["submerged_fraction"]
            if e.get("submerged_fraction") != expected:
                out.append(
                    Finding(
                        rel,
                        "annotations",
                        f"records submerged fractions "
                        f"{e.get('submerged_fraction')!r:.60}, the clean image and its scene give "
                        f"{expected!r:.60} (the ground-truth contract of a flood, docs/SCORING.md)",
                    )
                )
        return out

    def persons_problem(self, split: str, image_id: str, persons: Sequence) -> str | None:
        """Why a scene's recorded persons are not the image's ground truth as the manifest seals it (its GT digest;
        None when they are, or when the manifest records no digest for the image: another finding says so)."""
        digest = (self.gt_digests.get(split) or {}).get(image_id)
        if not isinstance(digest, str) or gt_digest(box_xywh(b) for b in persons) == digest:
            return None
        return (
            f"the scene's persons ({len(persons)} boxes) are not the image's ground-truth boxes the manifest "
            f"seals in {ANNOTATIONS_DIR}/{split}.json (the flood models read them)"
        )

    def clean_pixels(self, split: str, image_id: str, expected_hash: str) -> np.ndarray | None:
        key = (split, image_id)
        if key not in self.clean_cache:
            p = condition_dir(self.root, split, "clean") / image_file_name(image_id)
            img = None
            try:
                img = read_rgb(p, max_pixels=self.max_pixels)
            except AegisError:
                pass
            self.clean_cache[key] = img if img is not None and pixel_sha256(img) == expected_hash else None
            _keep_recent(self.clean_cache)
        return self.clean_cache[key]

    def finding(self, rel: str, e: Mapping[str, Any], decoded: str | None, problem: str | None = None) -> Finding:
        """``decoded``, ``problem``: the file's pixel hash and standard-decode problem from ``hash_item`` (None
        when it did not decode there)."""
        if decoded == e["pixel_sha256"]:
            if problem:
                return Finding(
                    rel,
                    "format",
                    f"{problem}: this toolkit decodes the expected pixels, but a detector's image reader would not",
                )
            return Finding(rel, "bytes-only", _BYTES_ONLY)
        try:
            # The pixels differ: decode to count. hash_item's decode is not kept (it may run on another worker,
            # and holding every changed image's pixels until here would grow memory with their number).
            actual = read_rgb(self.root / rel, max_pixels=self.max_pixels)
        except AegisError as exc:
            return Finding(rel, "pixels", f"does not decode: {exc}")
        name, severity = parse_condition(e["condition"])
        if (e["split"], e["image_id"]) in self.source_differs:
            if name is None:
                return Finding(
                    rel,
                    "source",
                    "your decoder produced different source pixels for this image than the "
                    "reference (source_pixel_sha256 differs); not a corruption drift",
                )
            return Finding(rel, "pixels", "differs because the decoded source differs (see the source row)")
        if name is None:
            return Finding(rel, "pixels", "clean pixels differ from the manifest; no reference copy to count against")
        if not self.regenerate:
            return Finding(rel, "pixels", f"pixels differ ({self.why_not}; no expected pixels to count against)")
        clean = self.clean_pixels(e["split"], e["image_id"], e["source_pixel_sha256"])
        if clean is None:
            return Finding(
                rel,
                "pixels",
                "pixels differ; the clean image is missing or changed, so the expected pixels cannot be regenerated",
            )
        scene = None
        try:
            if not self.custom_corrupt:  # the build renders with a caller's corruption without the scene: so here
                scene = self.scene(e["split"], e["image_id"], clean)
        except AegisError as exc:  # its clean entry's scene finding says why
            return Finding(
                rel,
                "pixels",
                f"pixels differ; the expected pixels cannot be regenerated: the recorded "
                f"scene cannot be re-derived ({exc})",
            )
        if scene is not None:
            expected = self.corrupt(clean, name, severity, e["image_id"], self.seed, scene=scene)
        else:
            expected = self.corrupt(clean, name, severity, e["image_id"], self.seed)
        if actual.shape != expected.shape:
            return Finding(
                rel,
                "pixels",
                f"size {actual.shape[1]}x{actual.shape[0]}, expected {expected.shape[1]}x{expected.shape[0]}",
            )
        n, dmax = pixel_difference(actual, expected)
        if pixel_sha256(expected) == e["pixel_sha256"]:
            detail = f"{n} pixels differ, max |delta| {dmax}"
        else:
            detail = (
                f"{n} pixels differ from this machine's regeneration (max |delta| {dmax}); this machine does not "
                f"reproduce the expected pixels either: corruption drift"
            )
        return Finding(rel, "pixels", detail, n, dmax)


# The clean images and scenes verify keeps: the last few only. Every scene is re-derived from its clean image, image
# after image; holding them all grew memory with the split (a 12 MP image and its water mask are ~50 MB).
RECENT_IMAGES = 2


def _keep_recent(cache: dict) -> None:
    """Drop the oldest entries of an insertion-ordered cache beyond ``RECENT_IMAGES``."""
    while len(cache) > RECENT_IMAGES:
        cache.pop(next(iter(cache)))


def _acted_findings(ref: Manifest) -> list[Finding]:
    """A ``manifest`` finding when a manifest's ``acted`` counts are not those of its entries (present exactly in a
    generation-2 build's)."""
    expected = (
        acted_counts(ref.entries.values(), ref.data.get("conditions") or [])
        if records_acted(ref.entries.values())
        else None
    )
    recorded = ref.data.get("acted")
    if recorded == expected:
        return []
    return [
        Finding(
            MANIFEST_NAME,
            "manifest",
            f"acted {recorded!r:.80} is not the number of test images each condition changed, {expected!r:.80}",
        )
    ]


def _scene_record_findings(ref: Manifest, config: SuiteConfig) -> list[Finding]:
    """``scene`` findings on the shape of the records: a generation-2 build records one scene (an object) on each
    image's clean entry and nowhere else; a generation-1 build records none. (Their contents are checked against
    the clean pixels by ``_ImageCheck.scene_findings``.)"""
    out = []
    for rel, e in sorted(ref.entries.items()):
        scene = e.get("scene")
        if e.get("kind") == "image" and not config.uses_scene:
            if scene is not None:
                out.append(
                    Finding(
                        rel,
                        "scene",
                        f"holds a scene record, but suite {config.suite} renders without a scene model (generation 1)",
                    )
                )
        elif e.get("kind") != "image" or e.get("condition") != "clean":
            if scene is not None:
                out.append(Finding(rel, "scene", "holds a scene record; only an image's clean entry records its scene"))
        elif scene is None:
            out.append(
                Finding(
                    rel,
                    "scene",
                    f"records no scene; suite {config.suite} renders every image through "
                    f"the scene its clean entry records",
                )
            )
        elif not isinstance(scene, dict):
            kind = {str: "a string", list: "a list", bool: "a boolean"}.get(type(scene), "a number")
            out.append(Finding(rel, "scene", f"the scene record is {kind}, not an object"))
    return out


def _recorded_scenes(ref: Manifest) -> dict[tuple[str, str], dict]:
    """(split, image_id) -> the scene record of its clean entry (generation-2 builds)."""
    return {
        (e["split"], e["image_id"]): e["scene"]
        for e in ref.images()
        if e.get("condition") == "clean" and isinstance(e.get("scene"), dict)
    }


def _unlisted_findings(root: Path, ref: Manifest, local: Manifest, subset: bool) -> list[Finding]:
    """The YOLO view's findings, then every file on disk that no manifest lists (``extra``)."""
    listed = set(ref.entries) | (set(local.entries) if subset else set())
    view, copies = yolo_view_findings(root, local)
    walked = [p for p in _walk_files(root) if not p.startswith((*copies, f"{YOLO_DIR}/images/"))]
    return [*view, *(Finding(rel, "extra", "on disk, not in the manifest") for rel in sorted(set(walked) - listed))]


# ----------------------------------------------------------------------------------------------------------
# What a user consumes besides the listed files: the YOLO view's links, and links leaving the split


def _resolved(path: Path) -> Path:
    """``path`` with its links followed; for links that form a loop, a placeholder naming it (it lies outside any
    split, so the loop is reported as a link and nothing is read through it)."""
    return link_target(path) or Path(f"<a symbolic link loop at {path}>")


def escaping_paths(root: Path, paths) -> dict[str, str]:
    """Listed paths that resolve (through a symlinked file or folder) outside ``root``: path -> target."""
    real_root = root.resolve()
    out = {}
    for rel in paths:
        p = root / rel
        if not (p.is_symlink() or any(q.is_symlink() for q in list(p.parents)[: rel.count("/")])):
            continue
        target = link_target(p)
        if target is None:
            out[rel] = "itself (a symbolic link loop)"
        elif not target.is_relative_to(real_root):
            out[rel] = str(target)
    return out


def link_findings(root: Path, paths) -> list[Finding]:
    """Symlinks under the split's folders that leave it, and listed files hard-linked to files outside it."""
    real_root = root.resolve()
    findings = []
    for top in SPLIT_DIRS:
        d = root / top
        if d.is_symlink() and not _resolved(d).is_relative_to(real_root):
            findings.append(Finding(top, "link", f"symbolic link to {_resolved(d)}, outside the split"))
            continue
        if not d.is_dir():
            continue
        for dirpath, dirs, files in os.walk(d):
            for name in (*dirs, *files):
                p = Path(dirpath, name)
                if p.is_symlink() and not _resolved(p).is_relative_to(real_root):
                    findings.append(
                        Finding(
                            p.relative_to(root).as_posix(),
                            "link",
                            f"symbolic link to {_resolved(p)}, outside the split",
                        )
                    )
    names: dict[tuple[int, int], int] = {}
    stats = {}
    for rel in paths:
        try:
            st = (root / rel).stat()
        except OSError:
            continue
        if st.st_nlink > 1:
            stats[rel] = st
            names[(st.st_dev, st.st_ino)] = names.get((st.st_dev, st.st_ino), 0) + 1
    for rel, st in stats.items():
        if st.st_nlink > names[(st.st_dev, st.st_ino)]:
            findings.append(
                Finding(
                    rel,
                    "hardlink",
                    f"hard link: {st.st_nlink} names share these bytes, some outside "
                    f"the split (editing one changes the other)",
                )
            )
    return findings


def yolo_view_findings(root: Path, manifest: Manifest) -> tuple[list[Finding], tuple[str, ...]]:
    """Check the Ultralytics view of the split: each ``yolo/images/<split>`` must be the link to ``<split>`` and
    each ``yolo/labels/<split>/<condition>`` the link to ``clean`` (or, where links could not be made, a copy of
    it). Returns the findings and the folders accepted as label copies (their files are not ``extra``)."""
    if not any(e.get("kind") == "yolo" for e in manifest.entries.values()):
        return [], ()
    findings: list[Finding] = []
    copies: list[str] = []
    real_root = root.resolve()
    conditions = list(manifest.data.get("conditions") or [])
    for split in manifest.data.get("splits") or {}:
        rel = f"{YOLO_DIR}/images/{split}"
        link, want = root / rel, _resolved(root / split)
        if not link.is_symlink():
            what = "missing" if not link.exists() else "a real folder, not the link"
            findings.append(
                Finding(
                    rel,
                    "link",
                    f"{what}: expected a symbolic link to ../../{split}, which the YOLO lists read images through",
                )
            )
        elif _resolved(link) != want:
            findings.append(
                Finding(
                    rel,
                    "link",
                    f"points to {_resolved(link)}, not to the split's {split}/ folder: "
                    f"`yolo val` would read other images",
                )
            )
        clean = root / YOLO_DIR / "labels" / split / "clean"
        for cond in conditions if split == "test" else ["clean"]:
            if cond == "clean":
                continue
            rel = f"{YOLO_DIR}/labels/{split}/{cond}"
            link = root / rel
            if link.is_symlink():
                if _resolved(link) != _resolved(clean) or not _resolved(link).is_relative_to(real_root):
                    findings.append(
                        Finding(
                            rel,
                            "link",
                            f"points to {_resolved(link)}, not to the split's clean "
                            f"labels: `yolo val` would read other labels",
                        )
                    )
            elif link.is_dir():
                if _same_files(link, clean):
                    copies.append(rel + "/")
                else:
                    findings.append(
                        Finding(
                            rel,
                            "yolo",
                            "a folder whose label files differ from labels/"
                            f"{split}/clean: `yolo val` would read other labels",
                        )
                    )
                    copies.append(rel + "/")
            else:
                findings.append(
                    Finding(rel, "link", "missing: expected a symbolic link to clean (the labels of every condition)")
                )
    return findings, tuple(copies)


def _same_files(a: Path, b: Path) -> bool:
    """Two flat folders with the same file names and bytes."""
    try:
        fa = sorted(p.name for p in a.iterdir())
        fb = sorted(p.name for p in b.iterdir())
        return fa == fb and all((a / n).is_file() and file_sha256(a / n) == file_sha256(b / n) for n in fa)
    except OSError:
        return False
