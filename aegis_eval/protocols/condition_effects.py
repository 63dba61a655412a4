"""What a generation-2 split records about each corrupted condition, read back for the score (docs/SCORE_JSON.md,
"acted_images" and "submerged"; docs/SCORING.md, "Submerged persons").

* ``acted``: on how many test images a condition changed the pixels. A model that needs water (sun glint, turbid
  water) leaves a frame without water unchanged, so its cell rests on fewer images than the split holds; the score
  puts the count next to the cell.
* ``submerged_fraction``: a flood keeps every ground-truth box (the contract: boxes are never moved, shrunk or
  dropped) and records, per box, the share of the person under water. The score stratifies a flood condition's
  recall by that share, beside the clean recall of the same persons.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aegis_data.errors import AegisError
from aegis_eval.metrics.coco import segment_starts
from aegis_eval.metrics.types import GroundTruth

# (low, high] share of the person under water; the first bin holds the dry ones (exactly 0).
SUBMERGED_BINS = ((0.0, 0.0), (0.0, 0.25), (0.25, 0.5), (0.5, 1.0))
SUBMERGED_LABELS = ("dry", "up to 1/4", "1/4 to 1/2", "over 1/2")


@dataclass(frozen=True)
class SplitEffects:
    """acted: {condition: images acted on}; submerged: {condition: {image stem: fraction per GT box (or None)}}."""

    acted: Mapping[str, int]
    submerged: Mapping[str, Mapping[str, list]]


def split_effects(split_dir: str | Path | None) -> SplitEffects | None:
    """The effects a split's manifest records, or None: no split, no manifest, a manifest that is no toolkit
    build's (the ground-truth loader's rule: only a checked manifest counts) or a build that records none
    (aegis-v1)."""
    if split_dir is None:
        return None
    from aegis_data.split.reader import read_manifest_file

    found = read_manifest_file(split_dir)
    if found is None or found.sealed is None or not isinstance(found.data.get("acted"), dict):
        return None
    path, obj, manifest = found.path, found.data, found.sealed
    submerged: dict[str, dict[str, list]] = {}
    n_test: dict[str, int] = {}
    for e in manifest.images():
        if e.get("split") != "test":
            continue
        n_test[e["condition"]] = n_test.get(e["condition"], 0) + 1
        fractions = e.get("submerged_fraction")
        if fractions is not None:
            submerged.setdefault(e["condition"], {})[e["image_id"]] = _checked_fractions(fractions, path, e["path"])
    # The root hash says the manifest is intact, not that a hand-resealed one holds counts and shares.
    for cond, v in obj["acted"].items():
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= n_test.get(cond, 0):
            raise AegisError(
                f"[manifest_invalid] {path}: acted[{str(cond)[:80]!r}] is {v!r:.40}; it must count the "
                f"test images the condition changed, 0 to {n_test.get(cond, 0)}"
            )
    return SplitEffects(dict(obj["acted"]), submerged)


def _checked_fractions(value: Any, path: Path, entry: str) -> list:
    """A manifest entry's ``submerged_fraction``: a list of shares in [0, 1] (null: a person outside the scene);
    AegisError otherwise."""
    ok = isinstance(value, list) and all(
        f is None or (isinstance(f, (int, float)) and not isinstance(f, bool) and 0.0 <= f <= 1.0) for f in value
    )
    if not ok:
        raise AegisError(
            f"[manifest_invalid] {path}: entry {entry[:120]!r} records submerged_fraction {value!r:.60}; "
            f"it must list one share in [0, 1] (or null) per ground-truth box"
        )
    return value


def _bin_of(fraction: float) -> int:
    if fraction <= 0.0:
        return 0
    return next(k for k, (lo, hi) in enumerate(SUBMERGED_BINS) if k and lo < fraction <= hi)


def submerged_strata(
    gt: GroundTruth, matched: np.ndarray, clean_matched: np.ndarray | None, fractions: Mapping[str, list]
) -> dict[str, Any]:
    """Recall of a flood condition per submerged-fraction bin: ``matched`` (G,) bool, whether each GT box is
    matched in that condition (``clean_matched`` the same in clean); ``fractions`` {image stem: the split's
    fractions of its boxes, in annotation order}. Crowd boxes and persons outside the scene (None) are left out.
    AegisError when an image's fractions do not list one per GT box (the split and its GT disagree)."""
    n_bins = len(SUBMERGED_BINS)
    n_gt, tp, tp_clean = [0] * n_bins, [0] * n_bins, [0] * n_bins
    # Each image's boxes in annotation order: a slice of the boxes grouped by image (one sort, not a scan per image).
    order = np.argsort(gt.box_image, kind="stable")
    starts = segment_starts(np.asarray(gt.box_image)[order], gt.n_images)
    for row, name in enumerate(gt.file_names):
        stem = Path(name).stem
        values = fractions.get(stem)
        if values is None:
            continue
        boxes = order[starts[row] : starts[row + 1]]
        if len(values) != boxes.size:
            raise AegisError(
                f"[submerged_mismatch] the split records {len(values)} submerged fractions for image "
                f"{stem!r}, its ground truth {boxes.size} boxes"
            )
        for g, f in zip(boxes, values):
            if f is None or gt.iscrowd[g]:
                continue
            k = _bin_of(float(f))
            n_gt[k] += 1
            tp[k] += int(matched[g])
            if clean_matched is not None:
                tp_clean[k] += int(clean_matched[g])
    out: dict[str, Any] = {
        "bins": [list(b) for b in SUBMERGED_BINS],
        "labels": list(SUBMERGED_LABELS),
        "n_gt": n_gt,
        "tp": tp,
        "recall": [t / n if n else None for t, n in zip(tp, n_gt)],
    }
    if clean_matched is not None:
        out["recall_clean"] = [t / n if n else None for t, n in zip(tp_clean, n_gt)]
    return out
