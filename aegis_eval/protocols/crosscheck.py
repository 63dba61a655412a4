"""The ``pycocotools`` cross-check of scoring: recompute COCO AP with the reference implementation on the same
validated inputs and refuse the result on any difference above 1e-12 -- a trust switch for published numbers.

The scorer's AP engine (``aegis_eval.metrics.coco``) reproduces pycocotools' ``COCOeval`` (quirks included, see
docs/SCORING.md); this runs the real thing beside it. Undefined values agree when both sides are undefined
(pycocotools' -1 sentinel, our None/NaN).
"""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Mapping
from typing import Any

from aegis_data.errors import AegisError
from aegis_eval.metrics.result_keys import AP_METRICS
from aegis_eval.metrics.types import Detections, GroundTruth

CROSS_CHECKERS = ("pycocotools",)
TOLERANCE = 1e-12
# pycocotools' ``stats`` positions of AP_METRICS (all IoUs / .50 / .75 / small / medium / large, maxDets 100).
_STAT_INDEX = dict(zip(AP_METRICS, range(6)))


def pycocotools_ap(gt: GroundTruth, dets: Detections) -> dict[str, float]:
    """The six AP_METRICS from pycocotools' COCOeval on in-memory COCO objects built from ``gt``/``dets``."""
    try:
        from pycocotools.coco import COCO
        from pycocotools.cocoeval import COCOeval
    except ImportError:  # pragma: no cover - a declared dependency
        raise AegisError(
            "`cross_check` pycocotools needs the pycocotools package (pip install pycocotools)", param="cross_check"
        ) from None
    cat = int(gt.category_id)
    images = [
        {
            "id": int(gt.image_ids[i]),
            "width": int(gt.widths[i]),
            "height": int(gt.heights[i]),
            "file_name": gt.file_names[i],
        }
        for i in range(gt.n_images)
    ]
    anns = [
        {
            "id": int(gt.ann_ids[g]),
            "image_id": int(gt.image_ids[gt.box_image[g]]),
            "category_id": cat,
            "bbox": [float(v) for v in gt.boxes[g]],
            "area": float(gt.areas[g]),
            "iscrowd": int(gt.iscrowd[g]),
        }
        for g in range(gt.n_boxes)
    ]
    results = []
    for k in range(dets.n):  # the way COCO.loadRes builds result annotations
        x, y, w, h = (float(v) for v in dets.boxes[k])
        results.append(
            {
                "id": k + 1,
                "image_id": int(gt.image_ids[dets.det_image[k]]),
                "category_id": cat,
                "bbox": [x, y, w, h],
                "score": float(dets.scores[k]),
                "area": w * h,
                "iscrowd": 0,
            }
        )
    cats = [{"id": cat, "name": "person"}]
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints every stage
        coco_gt, coco_dt = COCO(), COCO()
        coco_gt.dataset = {"images": images, "annotations": anns, "categories": cats}
        coco_dt.dataset = {"images": images, "annotations": results, "categories": cats}
        coco_gt.createIndex()
        coco_dt.createIndex()
        ev = COCOeval(coco_gt, coco_dt, "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return {m: float(ev.stats[i]) for m, i in _STAT_INDEX.items()}


def check_tool(tool: str) -> str:
    if tool not in CROSS_CHECKERS:
        raise AegisError(
            f"`cross_check` must be one of: {', '.join(CROSS_CHECKERS)}; got {tool!r}", param="cross_check"
        )
    return tool


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:  # pragma: no cover
        return None


def _undefined(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or v == -1.0


def cross_check(
    result: Mapping[str, Any],
    gt: GroundTruth,
    predictions: Mapping[str, Detections],
    tool: str = "pycocotools",
    tolerance: float = TOLERANCE,
) -> dict[str, Any]:
    """Compare every condition's AP_METRICS in ``result`` with ``tool``'s; returns a summary for provenance
    (tool, version, tolerance, conditions, max_abs_diff). AegisError ``[cross_check_mismatch]`` naming the
    condition, metric and both values on the first difference above ``tolerance``."""
    check_tool(tool)
    worst = 0.0
    for cond, entry in result["conditions"].items():
        ref = pycocotools_ap(gt, predictions[cond])
        for m in AP_METRICS:
            ours, theirs = entry.get(m), ref[m]
            if _undefined(ours) and _undefined(theirs):
                continue
            diff = math.inf if _undefined(ours) or _undefined(theirs) else abs(float(ours) - theirs)
            if not diff <= tolerance:
                raise AegisError(
                    f"[cross_check_mismatch] {cond}: {m} is {ours!r} here but {theirs!r} with {tool} "
                    f"(|difference| {diff:.3g} > {tolerance:g}); do not publish these numbers -- "
                    f"please report this with the inputs"
                )
            worst = max(worst, diff)
    return {
        "tool": tool,
        "version": _version(tool),
        "tolerance": tolerance,
        "conditions": len(result["conditions"]),
        "max_abs_diff": worst,
    }
