"""Dataset audit: what a source holds, and whether its splits leak into each other.

``audit_dataset(ds) -> dict`` (JSON-serialisable) reports, per split and over all images:
- counts: images, boxes, empty images and their share;
- box sizes: quantiles (0/5/25/50/75/95/100 %) of width, height and sqrt(area) in pixels, and COCO size bins
  (small: area < 32², medium: < 96², large: the rest);
- resolutions: image counts per ``WxH``;
- duplicates: images whose content hash (SHA-256 of the file bytes; of the generation key for synthetic
  images; of the stored image bytes for Hugging Face rows) is shared;
- leakage: groups present in more than one split, and content duplicates present in more than one split.
  ``report["leakage"]`` is True when either list is non-empty; the split builder refuses to write then.
- source facts: the description entries an adapter names in ``audit_facts`` (SARD's CSV layout: frames,
  boxes per class, augmented copies, degenerate rows), under ``report["source_facts"]`` when there are any.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from aegis_data.files.imageio import file_sha256
from aegis_data.sources.records import Record

QUANTILES = (0, 5, 25, 50, 75, 95, 100)
SMALL_AREA, MEDIUM_AREA = 32**2, 96**2  # COCO's area boundaries
_LIST_LIMIT = 50  # examples kept per finding list in the report


def content_hash(record: Record) -> str:
    """The identity of a record's content: file bytes, a synthetic generation key, or HF image bytes."""
    path = record.path
    if path.startswith("synthetic:"):
        key = record.meta.get("generation_key") if record.meta else None
        return hashlib.sha256((key or path).encode("utf-8")).hexdigest()
    if path.startswith("hf:"):
        from aegis_data.sources import hf

        return hashlib.sha256(hf.image_bytes(path)).hexdigest()
    return file_sha256(path)


def _quantiles(values: np.ndarray) -> dict[str, float] | None:
    if values.size == 0:
        return None
    qs = np.percentile(values, QUANTILES)  # linear interpolation between order statistics
    return {f"p{q}": round(float(v), 4) for q, v in zip(QUANTILES, qs)}


def box_statistics(records: Iterable[Record]) -> dict[str, Any]:
    """Counts, box-size quantiles, size bins and resolutions of a set of records."""
    records = list(records)
    boxes = np.array([b for r in records for b in r.boxes], dtype=np.float64).reshape(-1, 4)
    w, h = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    area = w * h
    empty = sum(1 for r in records if not r.boxes)
    return {
        "images": len(records),
        "boxes": int(boxes.shape[0]),
        "empty_images": empty,
        "empty_share": round(empty / len(records), 6) if records else None,
        "boxes_per_image": round(boxes.shape[0] / len(records), 6) if records else None,
        "box_width": _quantiles(w),
        "box_height": _quantiles(h),
        "box_sqrt_area": _quantiles(np.sqrt(area)),
        "size_bins": {
            "small": int((area < SMALL_AREA).sum()),
            "medium": int(((area >= SMALL_AREA) & (area < MEDIUM_AREA)).sum()),
            "large": int((area >= MEDIUM_AREA).sum()),
        },
        "resolutions": dict(sorted(Counter(f"{r.width}x{r.height}" for r in records).items())),
    }


def audit_dataset(ds, hash_files: bool = True) -> dict[str, Any]:
    """Audit a ``SourceDataset`` (see the module doc for the report's keys).

    hash_files=False skips content hashing (no duplicate detection; group leakage is still checked).
    """
    splits: dict[str, list[Record]] = {s: list(rs) for s, rs in ds.splits.items()}
    all_records = [r for rs in splits.values() for r in rs]
    report: dict[str, Any] = {
        "dataset": ds.name,
        "splits": {s: box_statistics(rs) for s, rs in splits.items()},
        "all": box_statistics(all_records),
    }

    group_splits: dict[str, set[str]] = defaultdict(set)
    for s, rs in splits.items():
        for r in rs:
            group_splits[r.group_key].add(s)
    leaking_groups = sorted(g for g, ss in group_splits.items() if len(ss) > 1)

    duplicates: list[dict[str, Any]] = []
    cross_duplicates: list[dict[str, Any]] = []
    if hash_files:
        by_hash: dict[str, list[Record]] = defaultdict(list)
        for r in all_records:
            by_hash[content_hash(r)].append(r)
        for digest, rs in sorted(by_hash.items()):
            if len(rs) < 2:
                continue
            entry = {
                "sha256": digest,
                "images": sorted(r.image_id for r in rs),
                "splits": sorted({r.split for r in rs}),
            }
            duplicates.append(entry)
            if len(entry["splits"]) > 1:
                cross_duplicates.append(entry)

    report["groups"] = {"count": len(group_splits)}
    report["duplicates"] = {
        "checked": hash_files,
        "content_hash": "sha256 of file bytes (synthetic: of the generation key; hf: of the stored image bytes)",
        "sets": len(duplicates),
        "images_in_sets": sum(len(d["images"]) for d in duplicates),
        "examples": duplicates[:_LIST_LIMIT],
    }
    report["leakage_details"] = {
        "groups_in_several_splits": len(leaking_groups),
        "group_examples": [{"group": g, "splits": sorted(group_splits[g])} for g in leaking_groups[:_LIST_LIMIT]],
        "duplicates_in_several_splits": len(cross_duplicates),
        "duplicate_examples": cross_duplicates[:_LIST_LIMIT],
    }
    report["leakage"] = bool(leaking_groups or cross_duplicates)
    facts = source_facts(ds.description)
    if facts:
        report["source_facts"] = facts
    return report


def source_facts(description: Mapping[str, Any]) -> dict[str, Any]:
    """The description entries the adapter lists under ``audit_facts``, in that order."""
    return {k: description[k] for k in description.get("audit_facts", ()) if k in description}
