"""The shape of a COCO ground-truth document: the checks every reader of one shares.

Below both the prediction loader and the class remaps (which need the category names before loading), so
neither imports the other.
"""

from __future__ import annotations

from typing import Any

from aegis_data.errors import AegisError


def is_int64(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and -(2**63) <= x < 2**63


def check_coco_shape(coco: Any, where: str) -> None:
    if not isinstance(coco, dict):
        raise AegisError(
            f"[gt_wrong_type] {where}: expected a COCO object with 'images', 'annotations' and "
            f"'categories'; got a JSON {type(coco).__name__}"
        )
    missing = [k for k in ("images", "annotations", "categories") if k not in coco]
    if missing:
        raise AegisError(f"[gt_missing_key] {where}: COCO ground truth lacks {', '.join(map(repr, missing))}")


def category_names(coco: Any, where: str = "ground truth") -> dict[int, str]:
    """{category id: name} of a parsed COCO GT, in file order; a category without a name is named by its id.
    AegisError when the list is malformed."""
    check_coco_shape(coco, where)
    cats = coco["categories"]
    if not isinstance(cats, list) or not cats:
        raise AegisError(f"[gt_no_category] {where}: 'categories' must be a non-empty list; got {cats!r:.60}")
    names: dict[int, str] = {}
    for k, c in enumerate(cats):
        if not isinstance(c, dict) or not is_int64(c.get("id")):
            raise AegisError(f"[gt_bad_category] {where}: categories[{k}] must be an object with an integer 'id'")
        names[int(c["id"])] = str(c.get("name", c["id"])).strip()
    return names
