"""Referring detection: one box per referring expression, scored with P@θ (the ``referring`` scoring task).

Ground truth (schema ``aegis-refs/1``): ``{"refs": [{"ref_id", "image_id", "bbox": [x, y, w, h],
"expression", "split"}, ...]}``, one entry per expression with exactly one box; ``split`` is optional ("all"
when absent) and any other keys are kept. Predictions: ``[{"ref_id", "bbox", "score"?}, ...]`` (or
``{"predictions": [...]}``), at most one box per expression. Ids are compared as text, so ``12`` and ``"12"``
name the same expression (and are refused as duplicates within one file).

A prediction is correct at θ when IoU(prediction, GT) > θ **strictly** (an IoU of exactly 0.5 fails P@0.5).
P@θ is the share of expressions predicted correctly, with a missing prediction counted as wrong (and listed);
``mp`` is the mean of P@θ over θ = 0.5, 0.6, 0.7, 0.8. Intervals come from resampling expressions (or whole
images, ``cluster_by="image_id"``) with the keyed bootstrap of ``aegis_eval.metrics.bootstrap``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aegis_data import __version__
from aegis_data.errors import AegisError
from aegis_eval.metrics.bootstrap import BootstrapOptions, percentile_interval, resample_weights
from aegis_eval.metrics.localization import paired_iou_xywh
from aegis_eval.protocols.predictions import read_json_file
from aegis_eval.protocols.provenance import git_state, utc_timestamp

REFS_SCHEMA = "aegis-refs/1"
REFERRING_SCHEMA = "aegis-referring/1"
IOU_LEVELS = (0.5, 0.6, 0.7, 0.8)
P_AT_KEYS = tuple(f"p_at_{round(100 * t)}" for t in IOU_LEVELS)
METRIC_KEYS = P_AT_KEYS + ("mp", "mean_iou")
DEFAULT_SPLIT = "all"


def _box(value: Any) -> list[float] | None:
    """A valid COCO box as floats, or None."""
    if not isinstance(value, list) or len(value) != 4:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return None
    if not all(math.isfinite(v) for v in value) or value[2] < 0 or value[3] < 0:
        return None
    return [float(v) for v in value]


def _ref_key(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return None
    return str(value)


def parse_refs(doc: Any, where: str = "refs") -> dict[str, Any]:
    """{"ids": [...], "boxes": (N, 4), "splits": [...], "image_ids": [...]} from an ``aegis-refs/1`` document."""
    refs = doc.get("refs") if isinstance(doc, dict) else None
    if not isinstance(refs, list) or not refs:
        raise AegisError(
            f'[refs_wrong_type] {where}: expected {{"refs": [{{"ref_id", "image_id", "bbox", '
            '"expression"}, ...]}} with at least one expression'
        )
    ids, boxes, splits, images = [], [], [], []
    seen: set[str] = set()
    for k, r in enumerate(refs):
        if not isinstance(r, dict) or "ref_id" not in r or "bbox" not in r:
            raise AegisError(f"[refs_missing_key] {where}: refs[{k}] must be an object with 'ref_id' and 'bbox'")
        key = _ref_key(r["ref_id"])
        if key is None:
            raise AegisError(
                f"[refs_id_type] {where}: refs[{k}].ref_id must be an integer or a string; got {r['ref_id']!r:.40}"
            )
        if key in seen:
            raise AegisError(
                f"[refs_duplicate_id] {where}: ref_id {r['ref_id']!r} appears twice; each expression needs its own id"
            )
        seen.add(key)
        box = _box(r["bbox"])
        if box is None:
            raise AegisError(
                f"[refs_bbox_invalid] {where}: refs[{k}].bbox must be 4 finite numbers [x, y, w, h] "
                f"with w, h >= 0; got {r['bbox']!r:.80}"
            )
        split = r.get("split", DEFAULT_SPLIT)
        if not isinstance(split, str) or not split:
            raise AegisError(f"[refs_split_type] {where}: refs[{k}].split must be a non-empty string")
        ids.append(key)
        boxes.append(box)
        splits.append(split)
        images.append(str(r.get("image_id", key)))
    return {"ids": ids, "boxes": np.asarray(boxes, dtype=np.float64), "splits": splits, "image_ids": images}


def parse_ref_predictions(obj: Any, ids: Sequence[str], where: str = "predictions") -> tuple[np.ndarray, np.ndarray]:
    """((N, 4) predicted box per GT expression, (N,) bool: predicted) in the order of ``ids``."""
    if isinstance(obj, dict) and "predictions" in obj:
        obj = obj["predictions"]
    if not isinstance(obj, list):
        raise AegisError(
            f'[ref_pred_wrong_type] {where}: expected a list [{{"ref_id", "bbox"}}, ...] or {{"predictions": [...]}}'
        )
    row_of = {key: r for r, key in enumerate(ids)}
    boxes = np.zeros((len(ids), 4))
    have = np.zeros(len(ids), dtype=bool)
    for k, p in enumerate(obj):
        if not isinstance(p, dict) or "ref_id" not in p or "bbox" not in p:
            raise AegisError(f"[ref_pred_missing_key] {where}: entry {k} must be an object with 'ref_id' and 'bbox'")
        key = _ref_key(p["ref_id"])
        if key is None or key not in row_of:
            raise AegisError(
                f"[ref_pred_unknown] {where}: entry {k} has ref_id {p['ref_id']!r:.40}, which is not "
                "an expression of the ground truth"
            )
        r = row_of[key]
        if have[r]:
            raise AegisError(
                f"[ref_pred_duplicate] {where}: ref_id {p['ref_id']!r} has more than one prediction; "
                "referring detection takes exactly one box per expression"
            )
        box = _box(p["bbox"])
        if box is None:
            raise AegisError(
                f"[ref_pred_bbox_invalid] {where}: entry {k} has bbox {p['bbox']!r:.80}; expected 4 "
                "finite numbers [x, y, w, h] with w, h >= 0"
            )
        boxes[r] = box
        have[r] = True
    return boxes, have


def referring_ious(gt_boxes: np.ndarray, pred_boxes: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """(N,) IoU of each expression's prediction with its GT box (the localization IoU: pycocotools' formula,
    exactly 1 for an identical box); 0 when not predicted."""
    return np.where(predicted, paired_iou_xywh(pred_boxes, gt_boxes), 0.0)


def _metrics(correct: np.ndarray, ious: np.ndarray, weights: np.ndarray | None = None) -> dict[str, Any]:
    """P@θ, mp and mean IoU from (T, N) correctness and (N,) IoUs; weights (B, N) give (B,) arrays instead."""
    if weights is None:
        n = correct.shape[1]
        if n == 0:
            return {k: None for k in METRIC_KEYS}
        p = correct.mean(axis=1)
        out = {key: float(v) for key, v in zip(P_AT_KEYS, p)}
        out["mp"] = float(p.mean())
        out["mean_iou"] = float(ious.mean())
        return out
    total = weights.sum(axis=1).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = (weights @ correct.T.astype(np.float64)) / total[:, None]  # (B, T)
        out = {key: p[:, t] for t, key in enumerate(P_AT_KEYS)}
        out["mp"] = p.mean(axis=1)
        out["mean_iou"] = (weights @ ious) / total
    return out


def score_referring(
    refs: Mapping[str, Any],
    pred_boxes: np.ndarray,
    predicted: np.ndarray,
    *,
    bootstrap: BootstrapOptions,
    cluster_by: str | None = None,
) -> dict[str, Any]:
    """``overall`` and per-split ``splits`` blocks (n_refs, n_predicted, n_missing, METRIC_KEYS, ci) and the
    list of expressions without a prediction. ``cluster_by``: None (resample expressions) or "image_id"."""
    if cluster_by not in (None, "image_id"):
        raise AegisError(
            f"[referring_cluster] referring scoring resamples expressions or whole images "
            f"(`cluster_by` image_id); got {cluster_by!r}",
            param="cluster_by",
        )
    ious = referring_ious(refs["boxes"], pred_boxes, predicted)
    correct = np.stack([predicted & (ious > t) for t in IOU_LEVELS])  # strict: IoU == θ is wrong
    n = len(refs["ids"])
    clusters = None
    if cluster_by == "image_id":
        _, clusters = np.unique(np.asarray(refs["image_ids"], dtype=str), return_inverse=True)
        clusters = clusters.reshape(-1).astype(np.int64)
    weights = resample_weights(n, bootstrap, clusters).astype(np.int64)
    splits = np.asarray(refs["splits"], dtype=object)

    def block(mask: np.ndarray) -> dict[str, Any]:
        out: dict[str, Any] = {
            "n_refs": int(mask.sum()),
            "n_predicted": int((predicted & mask).sum()),
            "n_missing": int((~predicted & mask).sum()),
        }
        out.update(_metrics(correct[:, mask], ious[mask]))
        samples = _metrics(correct[:, mask], ious[mask], weights[:, mask])
        out["ci"] = {k: list(percentile_interval(v, bootstrap.confidence)) for k, v in samples.items()}
        return out

    return {
        "overall": block(np.ones(n, dtype=bool)),
        "splits": {s: block(splits == s) for s in sorted(set(refs["splits"]))},
        "missing": [refs["ids"][r] for r in np.flatnonzero(~predicted)],
    }


def score_referring_paths(
    preds: str | Path,
    refs_path: str | Path,
    *,
    bootstrap: int = 1000,
    seed: int = 0,
    cluster_by: str | None = None,
    label: str | None = None,
) -> dict[str, Any]:
    """The ``aegis-referring/1`` document (docs/SCORE_JSON.md) for a predictions file and an ``aegis-refs/1``
    file."""
    options = BootstrapOptions(n_bootstrap=bootstrap, seed=seed)
    refs_path, preds = Path(refs_path), Path(preds)
    doc, refs_sha = read_json_file(refs_path, "referring ground truth", "refs_")
    if isinstance(doc, dict) and doc.get("schema", REFS_SCHEMA) != REFS_SCHEMA:
        raise AegisError(f"[refs_schema] {refs_path}: schema {doc.get('schema')!r}, expected {REFS_SCHEMA!r}")
    refs = parse_refs(doc, str(refs_path))
    obj, preds_sha = read_json_file(preds, "predictions")
    boxes, predicted = parse_ref_predictions(obj, refs["ids"], str(preds))
    scored = score_referring(refs, boxes, predicted, bootstrap=options, cluster_by=cluster_by)
    sha, dirty = git_state()
    return {
        "schema": REFERRING_SCHEMA,
        "task": "referring",
        "label": label if label is not None else preds.stem,
        "iou_levels": list(IOU_LEVELS),
        "rule": "correct iff IoU > θ (strict)",
        **scored,
        "provenance": {
            "toolkit_version": __version__,
            "git_sha": sha,
            "git_dirty": dirty,
            "refs_file": str(refs_path),
            "refs_sha256": refs_sha,
            "predictions_file": str(preds),
            "predictions_sha256": preds_sha,
            "seed": int(seed),
            "bootstrap": int(bootstrap),
            "cluster_by": cluster_by,
            "timestamp": utc_timestamp(),
        },
    }


def refs_from_refcoco(refs: Any, instances: Any, where: str = "refcoco") -> dict[str, Any]:
    """An ``aegis-refs/1`` document from RefCOCO-style data: ``refs`` is the list of refs (``ref_id``,
    ``ann_id``, ``image_id``, ``split``, ``sentences: [{"sent_id", "sent"}]``) and ``instances`` the COCO
    instances file holding the referred boxes. Each sentence becomes one expression whose ``ref_id`` is its
    ``sent_id`` (the unit RefCOCO-style benchmarks score); ``ref`` and ``ann_id`` are kept."""
    if (
        not isinstance(refs, list)
        or not isinstance(instances, dict)
        or not isinstance(instances.get("annotations"), list)
    ):
        raise AegisError(f"[refcoco_wrong_type] {where}: expected a list of refs and a COCO instances object")
    box_of = {a.get("id"): a.get("bbox") for a in instances["annotations"] if isinstance(a, dict)}
    image_of = {a.get("id"): a.get("image_id") for a in instances["annotations"] if isinstance(a, dict)}
    images = {im.get("id"): im for im in instances.get("images", []) if isinstance(im, dict)}
    out = []
    for k, r in enumerate(refs):
        if not isinstance(r, dict) or not all(key in r for key in ("ref_id", "ann_id", "image_id", "sentences")):
            raise AegisError(f"[refcoco_missing_key] {where}: refs[{k}] needs ref_id, ann_id, image_id, sentences")
        if r["ann_id"] not in box_of:
            raise AegisError(
                f"[refcoco_unknown_ann] {where}: refs[{k}] refers to annotation {r['ann_id']!r}, "
                "which the instances file does not hold"
            )
        if image_of[r["ann_id"]] is not None and image_of[r["ann_id"]] != r["image_id"]:
            raise AegisError(
                f"[refcoco_image_mismatch] {where}: refs[{k}] names image {r['image_id']!r} but its "
                f"annotation {r['ann_id']!r} lies on image {image_of[r['ann_id']]!r}"
            )
        sentences = r["sentences"]
        if not isinstance(sentences, list) or not all(isinstance(s, dict) for s in sentences):
            raise AegisError(
                f"[refcoco_wrong_type] {where}: refs[{k}].sentences must be a list of objects "
                f'{{"sent_id", "sent"}}, got {sentences!r:.60}'
            )
        # The ref's own file_name (RefCOCO refs carry one) wins over the instances file's.
        file_name = r.get("file_name") or (images[r["image_id"]].get("file_name") if r["image_id"] in images else None)
        for s in sentences:
            out.append(
                {
                    "ref_id": s.get("sent_id"),
                    "image_id": r["image_id"],
                    "bbox": box_of[r["ann_id"]],
                    "expression": s.get("sent", s.get("raw")),
                    "split": r.get("split", DEFAULT_SPLIT),
                    "ref": r["ref_id"],
                    "ann_id": r["ann_id"],
                    **({"file_name": file_name} if file_name else {}),
                }
            )
    doc = {"schema": REFS_SCHEMA, "refs": out}
    parse_refs(doc, where)  # the converted file must pass the same checks as any other
    return doc
