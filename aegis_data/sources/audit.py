"""Dataset audit: what a source holds, and whether its splits leak into each other.

``audit_dataset(ds) -> dict`` (JSON-serialisable) reports, per split and over all images:
- counts: images, boxes, empty images and their share;
- box sizes: quantiles (0/5/25/50/75/95/100 %) of width, height and sqrt(area) in pixels, and COCO size bins
  (small: area < 32², medium: < 96², large: the rest);
- resolutions: image counts per ``WxH``;
- duplicates: images whose content hash (SHA-256 of the file bytes; of the generation key for synthetic
  images; of the stored image bytes for Hugging Face rows) is shared;
- near-duplicates: pairs of images in different splits whose decoded pixels are near-identical (their 64-bit
  difference hashes, ``aegis_data.sources.frame_hash``, within ``NEAR_DISTANCE`` bits), such as consecutive frames
  of one video clip on both sides of a split; pairs already counted as content duplicates are left out;
- leakage: groups present in more than one split, content duplicates present in more than one split, and
  near-duplicates across splits. ``report["leakage"]`` is True when any list is non-empty; the split builder
  refuses to write then.
- source facts: the description entries an adapter names in ``audit_facts`` (SARD's CSV layout: frames,
  boxes per class, augmented copies, degenerate rows), under ``report["source_facts"]`` when there are any.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from aegis_data.executors import Placement, map_units
from aegis_data.files.imageio import file_sha256
from aegis_data.sources._groups import file_hash
from aegis_data.sources.frame_hash import COLS, EDGE_LEVELS, MIN_EDGES, NEAR_DISTANCE, ROWS, frame_hash, near_pairs
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


def record_hash(record: Record) -> int | None:
    """:func:`~aegis_data.sources.frame_hash.frame_hash` of a record's decoded pixels (files, synthetic and Hugging
    Face records alike), whatever size the record states: the hash compares content, and the build checks sizes.
    A file's or HF image's hash is the frames rule's (``file_hash``, ``hf.image_frame_hash``), decoded once for both."""
    if record.path.startswith("synthetic:"):
        from aegis_data.sources import synthetic

        return frame_hash(synthetic.render_rgb(record.path))
    if record.path.startswith("hf:"):
        from aegis_data.sources import hf

        return hf.image_frame_hash(record.path)
    return file_hash(record.path)


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

    hash_files=False skips content hashing and the near-duplicate search (group leakage is still checked).
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
    near: dict[str, Any] = {"pairs": [], "flat": 0}
    if hash_files:
        by_hash: dict[str, list[Record]] = defaultdict(list)
        digest_of: dict[str, str] = {}
        for r in all_records:
            digest_of[r.image_id] = content_hash(r)
            by_hash[digest_of[r.image_id]].append(r)
        near = near_duplicates(splits, digest_of)
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
    report["near_duplicates"] = {
        "checked": hash_files,
        "image_hash": f"64-bit difference hash of the gray image on a {ROWS}x{COLS} grid, integer arithmetic",
        "max_distance_bits": NEAR_DISTANCE,
        "flat_images_not_compared": near["flat"],
        "flat_rule": f"fewer than {MIN_EDGES} of 64 neighbouring cells {EDGE_LEVELS}+ gray levels apart, or a frame "
        f"under {COLS}x{ROWS} px",
    }
    report["leakage_details"] = {
        "groups_in_several_splits": len(leaking_groups),
        "group_examples": [{"group": g, "splits": sorted(group_splits[g])} for g in leaking_groups[:_LIST_LIMIT]],
        "duplicates_in_several_splits": len(cross_duplicates),
        "duplicate_examples": cross_duplicates[:_LIST_LIMIT],
        "near_duplicates_in_several_splits": len(near["pairs"]),
        "near_duplicate_examples": near["pairs"][:_LIST_LIMIT],
    }
    report["leakage"] = bool(leaking_groups or cross_duplicates or near["pairs"])
    facts = source_facts(ds.description)
    if facts:
        report["source_facts"] = facts
    return report


def _split_record_hash(item: tuple[str, Record]) -> int | None:
    return record_hash(item[1])


def near_duplicates(splits: Mapping[str, list[Record]], digest_of: Mapping[str, str]) -> dict[str, Any]:
    """Near-identical image pairs across splits: ``{"pairs": [{"images", "splits", "distance_bits"}, ...], "flat":
    images without a reliable hash}``. Pairs of byte-identical content are the duplicates' finding, not this."""
    hashes: dict[str, list[tuple[int, Record]]] = {}
    flat = 0
    items = [(s, r) for s, rs in splits.items() for r in rs]
    # Decoding dominates (0.2 s for a 12 MP JPEG) and releases the GIL: one thread per core, results in item order.
    for (s, r), h in map_units(_split_record_hash, items, Placement(threads=True)):
        if h is None:
            flat += 1
        else:
            hashes.setdefault(s, []).append((h, r))
    pairs: list[dict[str, Any]] = []
    names = sorted(hashes)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            left, right = hashes[a], hashes[b]
            for x, y, d in near_pairs([h for h, _ in left], [h for h, _ in right]):
                ra, rb = left[x][1], right[y][1]
                if digest_of.get(ra.image_id) == digest_of.get(rb.image_id):
                    continue
                pairs.append({"images": [ra.image_id, rb.image_id], "splits": [a, b], "distance_bits": d})
    pairs.sort(key=lambda p: (p["distance_bits"], p["images"]))
    return {"pairs": pairs, "flat": flat}


def source_facts(description: Mapping[str, Any]) -> dict[str, Any]:
    """The description entries the adapter lists under ``audit_facts``, in that order."""
    return {k: description[k] for k in description.get("audit_facts", ()) if k in description}
