"""The revision audit between two annotation versions of the same images (``aegis gt-diff OLD NEW``).

Per split (each ``annotations/<split>.json`` of two split directories, or one pair of COCO files as split
"all"), images are paired by ``file_name``; images present in only one version are listed and left out of
every count. Within an image, OLD and NEW boxes are matched one-to-one **whatever their class**: all pairs
with IoU >= ``iou`` (default 0.3) are visited in descending IoU, ties to the lower OLD then the lower NEW
annotation id, and a pair is taken when both boxes are still free. Classes are compared by category
name, so renumbered ids are not mistaken for class changes.

For the matched pairs: ``unchanged`` (identical box), ``tightened`` (NEW area < OLD area), ``loosened``
(NEW area > OLD area), ``shifted`` (same area, different box), ``class_changed`` (different class name);
``median_iou``, ``median_area_ratio`` (NEW area / OLD area, w*h), ``share_iou_below_0_7`` and ``share_shrunk``
(area ratio < 1) over the matched pairs. Unmatched NEW boxes are ``added``, unmatched OLD boxes ``removed``.
Per class, a pair counts under its OLD class and an added box under its NEW class.

Finally the OLD boxes are scored as predictions (score 1) against the NEW boxes with the thresholded
one-to-one matching of ``aegis score`` at ``pr_iou`` (default 0.5), class by class: precision, recall and F1
say how far a model trained to reproduce the old labels is from the new ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from aegis_data.errors import AegisError
from aegis_data.files.layout import ANNOTATIONS_DIR
from aegis_eval.metrics.matching import (
    PerImageCounts,
    box_iou_xywh,
    match_at_threshold,
    precision_recall_f1,
    rates_from_counts,
    sum_counts,
    to_json_number,
)
from aegis_eval.metrics.types import Detections, GroundTruth
from aegis_eval.protocols.predictions import ground_truth_by_class, read_ground_truth_doc

GT_DIFF_SCHEMA = "aegis-gt-diff/1"
DEFAULT_DIFF_IOU = 0.3
LOOSE_IOU = 0.7  # matched pairs below this IoU are reported as a share: a redrawn box, not a nudge
COUNT_KEYS = (
    "old_boxes",
    "new_boxes",
    "matched",
    "added",
    "removed",
    "unchanged",
    "tightened",
    "loosened",
    "shifted",
    "class_changed",
)


@dataclass(frozen=True)
class _Version:
    """All boxes of one annotation version, flattened over classes: row of the image in ``gt_by_class`` tables,
    box, class name, and the per-class GroundTruths."""

    file_names: tuple[str, ...]
    image_row: np.ndarray
    boxes: np.ndarray
    classes: np.ndarray
    gts: dict[str, GroundTruth]


def _flatten(gts: dict[str, GroundTruth]) -> _Version:
    first = next(iter(gts.values()))
    rows, boxes, classes = [], [], []
    for name, gt in gts.items():
        rows.append(gt.box_image)
        boxes.append(gt.boxes)
        classes.append(np.full(gt.n_boxes, name, dtype=object))
    row = np.concatenate(rows)
    ann_ids = np.concatenate([gt.ann_ids for gt in gts.values()])
    order = np.lexsort((ann_ids, row))  # boxes of one image together, by annotation id (the tie rule's index)
    return _Version(first.file_names, row[order], np.concatenate(boxes)[order], np.concatenate(classes)[order], gts)


def match_versions(
    old_boxes: np.ndarray, new_boxes: np.ndarray, iou: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One image's one-to-one matching (module docstring): (OLD index, NEW index, IoU) of the matched pairs."""
    if not len(old_boxes) or not len(new_boxes):
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    ious = box_iou_xywh(old_boxes, new_boxes)
    i, j = np.nonzero(ious >= iou)
    order = np.lexsort((j, i, -ious[i, j]))
    old_free = np.ones(len(old_boxes), bool)
    new_free = np.ones(len(new_boxes), bool)
    kept = []
    for k in order:
        if old_free[i[k]] and new_free[j[k]]:
            old_free[i[k]] = new_free[j[k]] = False
            kept.append(k)
    keep = np.asarray(kept, dtype=np.int64)
    return i[keep], j[keep], ious[i[keep], j[keep]]


def _stats(
    old_cls: np.ndarray,
    new_cls: np.ndarray,
    pairs: Mapping[str, np.ndarray],
    added: np.ndarray,
    removed: np.ndarray,
    n_old: int,
    n_new: int,
) -> dict[str, Any]:
    """Counts and medians of one subset of boxes (COUNT_KEYS, then the medians and shares); medians None without
    pairs."""
    iou, ratio = pairs["iou"], pairs["area_ratio"]
    finite = ratio[np.isfinite(ratio)]
    n = len(iou)
    out: dict[str, Any] = {
        "old_boxes": n_old,
        "new_boxes": n_new,
        "matched": n,
        "added": int(added.sum()),
        "removed": int(removed.sum()),
        "unchanged": int(pairs["same_box"].sum()),
        "tightened": int((~pairs["same_box"] & (pairs["new_area"] < pairs["old_area"])).sum()),
        "loosened": int((~pairs["same_box"] & (pairs["new_area"] > pairs["old_area"])).sum()),
        "shifted": int((~pairs["same_box"] & (pairs["new_area"] == pairs["old_area"])).sum()),
        "class_changed": int((old_cls != new_cls).sum()),
        "median_iou": float(np.median(iou)) if n else None,
        "median_area_ratio": float(np.median(finite)) if len(finite) else None,
        "share_iou_below_0_7": float(np.mean(iou < LOOSE_IOU)) if n else None,
        "share_shrunk": float(np.mean(finite < 1.0)) if len(finite) else None,
    }
    return out


def _old_as_predictions(old: _Version, new: _Version, old_to_new_row: np.ndarray, pr_iou: float) -> dict[str, Any]:
    """P/R/F1 of the OLD boxes (score 1) against the NEW boxes, class by class, on the common images."""
    names = list(new.gts) + [c for c in old.gts if c not in new.gts]
    common_new_rows = np.zeros(len(new.file_names), bool)
    common_new_rows[old_to_new_row[old_to_new_row >= 0]] = True
    per_class, counts, extra_fp = {}, [], 0
    for name in names:
        old_mask = (old.classes == name) & (old_to_new_row[old.image_row] >= 0)
        if name not in new.gts:  # a class the new version dropped: every old box is a false positive
            fp = int(old_mask.sum())
            extra_fp += fp
            per_class[name] = {"precision": 0.0, "recall": None, "f1": None, "tp": 0, "fp": fp, "fn": 0}
            continue
        gt = new.gts[name]
        dets = Detections(
            det_image=old_to_new_row[old.image_row[old_mask]],
            boxes=old.boxes[old_mask],
            scores=np.ones(int(old_mask.sum())),
        )
        match = match_at_threshold(gt, dets, 1.0, pr_iou)
        # images only in NEW are left out: zero their counts (their GT would read as misses)
        on_common = PerImageCounts(
            **{f.name: np.where(common_new_rows, getattr(match.counts, f.name), 0) for f in fields(PerImageCounts)}
        )
        counts.append(on_common)
        per_class[name] = _pr(rates_from_counts(on_common))
    total = rates_from_counts(sum_counts(counts))  # the NEW version has at least one category
    # The dropped classes' boxes are false positives on top of the matched classes' counts.
    tp, fp, fn = total["tp"], total["fp"] + extra_fp, total["fn"]
    rates = {k: to_json_number(v) for k, v in precision_recall_f1(tp, fp, tp + fn).items()}
    return {**rates, "tp": tp, "fp": fp, "fn": fn, "per_class": per_class}


def _pr(rates: Mapping[str, Any]) -> dict[str, Any]:
    return {k: rates[k] for k in ("precision", "recall", "f1", "tp", "fp", "fn")}


def diff_versions(
    old_gts: dict[str, GroundTruth], new_gts: dict[str, GroundTruth], iou: float = DEFAULT_DIFF_IOU, pr_iou: float = 0.5
) -> dict[str, Any]:
    """The audit of one split from per-class GroundTruths of each version (``ground_truth_by_class(..., "all")``)."""
    for name, value in (("iou", iou), ("pr_iou", pr_iou)):
        if not np.isfinite(value) or not 0.0 < value <= 1.0:
            raise AegisError(f"[gt_diff_iou] {name} must lie in (0, 1]; got {value!r}")
    old, new = _flatten(old_gts), _flatten(new_gts)
    for side, version in (("OLD", old), ("NEW", new)):
        if len(set(version.file_names)) != len(version.file_names):
            repeated = sorted({n for n in version.file_names if version.file_names.count(n) > 1})
            raise AegisError(
                f"[gt_diff_duplicate_file_name] {side} names several images {repeated[0]!r}; "
                "versions are paired by file_name, which must be unique"
            )
    new_row_of = {name: r for r, name in enumerate(new.file_names)}
    old_names = set(old.file_names)
    old_to_new_row = np.array([new_row_of.get(name, -1) for name in old.file_names], dtype=np.int64)
    only_old = sorted(name for name in old.file_names if name not in new_row_of)
    only_new = sorted(name for name in new.file_names if name not in old_names)

    old_parts: list[np.ndarray] = []
    new_parts: list[np.ndarray] = []
    iou_parts: list[np.ndarray] = []
    old_start = np.searchsorted(old.image_row, np.arange(len(old.file_names) + 1))
    new_start = np.searchsorted(new.image_row, np.arange(len(new.file_names) + 1))
    for r_old, r_new in enumerate(old_to_new_row):
        if r_new < 0:
            continue
        o0, o1 = old_start[r_old], old_start[r_old + 1]
        n0, n1 = new_start[r_new], new_start[r_new + 1]
        i, j, v = match_versions(old.boxes[o0:o1], new.boxes[n0:n1], iou)
        old_parts.append(i + o0)
        new_parts.append(j + n0)
        iou_parts.append(v)
    old_idx = np.concatenate(old_parts) if old_parts else np.zeros(0, np.int64)
    new_idx = np.concatenate(new_parts) if new_parts else np.zeros(0, np.int64)
    ious = np.concatenate(iou_parts) if iou_parts else np.zeros(0)

    old_common = old_to_new_row[old.image_row] >= 0
    common_new_rows = np.zeros(len(new.file_names), bool)
    common_new_rows[old_to_new_row[old_to_new_row >= 0]] = True
    new_common = common_new_rows[new.image_row]
    old_matched = np.zeros(len(old.boxes), bool)
    old_matched[old_idx] = True
    new_matched = np.zeros(len(new.boxes), bool)
    new_matched[new_idx] = True
    ob, nb = old.boxes[old_idx], new.boxes[new_idx]
    old_area, new_area = ob[:, 2] * ob[:, 3], nb[:, 2] * nb[:, 3]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(old_area > 0, new_area / np.where(old_area > 0, old_area, 1.0), np.nan)
    pairs = {
        "iou": ious,
        "area_ratio": ratio,
        "old_area": old_area,
        "new_area": new_area,
        "same_box": np.all(ob == nb, axis=1),
    }
    pair_old_cls, pair_new_cls = old.classes[old_idx], new.classes[new_idx]

    def subset(pair_mask: np.ndarray, old_mask: np.ndarray, new_mask: np.ndarray) -> dict[str, Any]:
        return _stats(
            pair_old_cls[pair_mask],
            pair_new_cls[pair_mask],
            {k: v[pair_mask] for k, v in pairs.items()},
            new_mask & new_common & ~new_matched,
            old_mask & old_common & ~old_matched,
            int((old_mask & old_common).sum()),
            int((new_mask & new_common).sum()),
        )

    everything = np.ones(len(ious), bool)
    total = subset(everything, np.ones(len(old.boxes), bool), np.ones(len(new.boxes), bool))
    per_class = {}
    for name in list(old.gts) + [c for c in new.gts if c not in old.gts]:
        per_class[name] = subset(pair_old_cls == name, old.classes == name, new.classes == name)
    return {
        "images": {"common": int((old_to_new_row >= 0).sum()), "only_old": only_old, "only_new": only_new},
        "total": total,
        "per_class": per_class,
        "old_as_predictions": _old_as_predictions(old, new, old_to_new_row, pr_iou),
    }


def _split_files(path: Path) -> dict[str, Path]:
    """{split: annotation file} of a split directory, or {"all": file} for a COCO file."""
    if path.is_dir():
        found = {p.stem: p for p in sorted((path / ANNOTATIONS_DIR).glob("*.json"))}
        if not found:
            raise AegisError(f"[gt_not_found] {path} is a directory without {ANNOTATIONS_DIR}/<split>.json files")
        return found
    return {"all": path}


def undeclared_category_findings(coco: Mapping[str, Any], side: str) -> list[dict[str, Any]]:
    """Annotations whose ``category_id`` the file's ``categories`` do not declare: no class can hold them, so
    the diff cannot count them, and without this finding a NEW box of such a category would read as its OLD
    box "removed". One finding per side: code, count, the ids and the first annotation ids."""
    declared = {c.get("id") for c in coco.get("categories") or [] if isinstance(c, dict)}
    stray = [a for a in coco.get("annotations") or [] if isinstance(a, dict) and a.get("category_id") not in declared]
    if not stray:
        return []
    ids = sorted({str(a.get("category_id")) for a in stray})
    return [
        {
            "code": "undeclared_category",
            "side": side,
            "count": len(stray),
            "category_ids": ids,
            "annotation_ids": [a.get("id") for a in stray[:5]],
            "detail": f"{len(stray)} {side.upper()} annotation(s) have category ids {', '.join(ids[:5])} that the "
            f"file's categories do not declare; they are left out of every count (declare the "
            f"category, or fix the ids)",
        }
    ]


def gt_diff_paths(
    old: str | Path, new: str | Path, iou: float = DEFAULT_DIFF_IOU, pr_iou: float = 0.5
) -> dict[str, Any]:
    """The ``aegis-gt-diff/1`` document for two COCO files or two split directories (splits in both)."""
    old, new = Path(old), Path(new)
    for p in (old, new):
        if not p.exists():
            raise AegisError(f"[gt_not_found] ground truth not found: {p}")
    if old.is_dir() != new.is_dir():
        raise AegisError("[gt_diff_kinds] compare two COCO files or two split directories, not one of each")
    old_files, new_files = _split_files(old), _split_files(new)
    common = [s for s in old_files if s in new_files]
    if not common:
        raise AegisError(
            f"[gt_diff_no_common_split] {old} and {new} share no split ({sorted(old_files)} vs {sorted(new_files)})"
        )
    splits: dict[str, dict[str, Any]] = {}
    sources: dict[str, dict[str, dict[str, str]]] = {"old": {}, "new": {}}
    for split in common:
        docs, findings = {}, []
        for side, f in (("old", old_files[split]), ("new", new_files[split])):
            coco, source = read_ground_truth_doc(f)
            sources[side][split] = {"file": source["path"], "sha256": source["sha256"]}
            docs[side] = ground_truth_by_class(coco, source, "all")
            findings.extend(undeclared_category_findings(coco, side))
        splits[split] = diff_versions(docs["old"], docs["new"], iou, pr_iou)
        splits[split]["findings"] = findings
    return {
        "schema": GT_DIFF_SCHEMA,
        "iou": float(iou),
        "pr_iou": float(pr_iou),
        "old": sources["old"],
        "new": sources["new"],
        "splits_only_old": sorted(set(old_files) - set(new_files)),
        "splits_only_new": sorted(set(new_files) - set(old_files)),
        "splits": splits,
    }
