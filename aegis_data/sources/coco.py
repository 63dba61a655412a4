"""COCO JSON ground truth plus an image folder.

``source`` is the image root; option ``annotations`` the JSON file. Person categories: option
``categories`` ("1" or "1,3", ids or names); default: categories named person/human/people/pedestrian, and an
error when there is none. ``iscrowd`` annotations are crowd regions, not instances: left out and counted.
Images with no person annotation are negatives. ``file_name`` must be a relative path inside the image
root (no "..", not absolute). Everything goes to ``split`` (default "test"); ``val_fraction`` carves val.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from aegis_data.errors import AegisError
from aegis_data.files.readers import read_coco_gt
from aegis_data.sources._common import (
    PERSON_NAMES,
    check_box,
    check_options,
    frame_size,
    opt_follow_links,
    opt_fraction,
    opt_ids,
    opt_max_pixels,
    opt_path,
    portable_path,
    require_dir,
    safe_id,
    xywh_to_xyxy,
)
from aegis_data.sources._dataset import SourceDataset, build_dataset
from aegis_data.sources._groups import apply_groups, groups_description
from aegis_data.sources.records import Record
from aegis_data.sources.yolo import carve_val, opt_split

NAME = "coco"
OPTIONS = ("annotations", "categories", "split", "val_fraction", "max_pixels", "follow_links", "groups")


def safe_relative(file_name: Any, where: str) -> str:
    """A COCO file_name as a safe relative POSIX path; AegisError for absolute paths or '..'."""
    if not isinstance(file_name, str) or not file_name.strip():
        raise AegisError(f"{where}: file_name {file_name!r} must be a non-empty string")
    win = PureWindowsPath(file_name)
    posix = PurePosixPath(file_name.replace("\\", "/"))
    if posix.is_absolute() or win.is_absolute() or win.drive:
        raise AegisError(
            f"{where}: file_name {file_name!r} is an absolute path; expected a path relative to the image root"
        )
    if ".." in posix.parts:
        raise AegisError(f"{where}: file_name {file_name!r} contains '..'; expected a path inside the image root")
    return posix.as_posix()


def _load_json(path: Path) -> dict:
    data = read_coco_gt(path, "COCO annotation", "")[0]
    if not isinstance(data.get("annotations"), list):
        raise AegisError(
            f"COCO annotation file {path}: expected an object with 'images' and 'annotations' lists "
            f'(an image set without persons still needs "annotations": [])'
        )
    cats = data.get("categories", [])
    if not isinstance(cats, list) or not all(isinstance(c, dict) for c in cats):
        raise AegisError(f"COCO annotation file {path}: 'categories' must be a list of objects with 'id' and 'name'")
    for k, c in enumerate(cats):
        if not _is_key(c.get("id")):
            raise AegisError(
                f"COCO annotation file {path}: categories[{k}] has id {c.get('id')!r:.40}; expected an "
                f"integer or a string"
            )
    return data


def _is_key(v: Any) -> bool:
    """COCO ids: integers or strings (never booleans, floats, lists or null)."""
    return isinstance(v, (int, str)) and not isinstance(v, bool)


def load(source: Any, options: Mapping[str, Any]) -> SourceDataset:  # noqa: C901 (predates the limit; split it when it next changes)
    check_options(NAME, options, OPTIONS)
    root = require_dir(Path(source).expanduser(), "COCO image root")
    ann_path = opt_path(options, "annotations", base=root)
    if ann_path is None:
        raise AegisError("dataset 'coco' needs the option annotations=<COCO JSON file>")
    data = _load_json(ann_path)
    split = opt_split(options)
    val_fraction = opt_fraction(options, "val_fraction", 0.0)
    max_pixels = opt_max_pixels(options)
    cats = data.get("categories") or []
    wanted = opt_ids(options, "categories")
    if wanted is None:
        person_ids = {c.get("id") for c in cats if str(c.get("name", "")).lower() in PERSON_NAMES}
        if not person_ids:
            names = ", ".join(f"{c.get('id')}={c.get('name')}" for c in cats[:10]) or "none"
            raise AegisError(f"{ann_path}: no person category (categories: {names}); pass categories=<ids or names>")
    else:
        person_ids = {c.get("id") for c in cats if str(c.get("id")) in wanted or str(c.get("name")) in wanted}
        if not person_ids:
            raise AegisError(f"{ann_path}: categories={','.join(sorted(wanted))} match no category in the file")
    by_image: dict[Any, list[dict]] = {}
    stats: Counter = Counter()
    for k, ann in enumerate(data["annotations"]):
        if not isinstance(ann, dict) or not _is_key(ann.get("image_id")):
            raise AegisError(f"{ann_path}: annotation #{k} is not an object with an integer or string image_id")
        if ann.get("category_id") is not None and not _is_key(ann.get("category_id")):
            raise AegisError(
                f"{ann_path}: annotation #{k} has category_id {ann.get('category_id')!r:.40}; expected "
                f"an integer or a string"
            )
        if ann.get("category_id") not in person_ids:
            stats["ignored_non_person_annotations"] += 1
            continue
        if ann.get("iscrowd"):
            stats["crowd_annotations_left_out"] += 1
            continue
        by_image.setdefault(ann["image_id"], []).append(ann)
    records = []
    seen_ids: set = set()
    for k, img in enumerate(data["images"]):
        where = f"{ann_path} (image #{k}, id {img.get('id') if isinstance(img, dict) else '?'})"
        if not isinstance(img, dict) or not _is_key(img.get("id")):
            raise AegisError(f"{where}: expected an object with an integer or string 'id' and a 'file_name'")
        if img["id"] in seen_ids:
            raise AegisError(f"{where}: image id {img['id']!r} occurs twice")
        seen_ids.add(img["id"])
        rel = safe_relative(img.get("file_name"), where)
        path = root / rel
        if not path.is_file():
            raise AegisError(f"{where}: image file {rel!r} not found under {root}")
        w, h = frame_size(path, max_pixels)
        if img.get("width") not in (None, w) or img.get("height") not in (None, h):
            stats["json_size_disagrees_with_image"] += 1
        boxes = []
        for ann in by_image.pop(img["id"], []):
            awhere = f"{ann_path} (annotation id {ann.get('id')}, image {rel})"
            boxes.append(check_box(*xywh_to_xyxy(ann.get("bbox", ()), awhere), w, h, awhere))
        stem = rel[: -len(PurePosixPath(rel).suffix)] if PurePosixPath(rel).suffix else rel
        records.append(
            Record(
                safe_id(stem.replace("/", "__")),
                str(path),
                w,
                h,
                tuple(boxes),
                split=split,
                meta={"file": rel, "coco_id": img["id"]},
            )
        )
    if by_image:
        some = next(iter(by_image))
        raise AegisError(
            f"{ann_path}: {len(by_image)} image id(s) referenced by annotations are not in 'images' (e.g. {some!r})"
        )
    if not records:
        raise AegisError(f"{ann_path}: the file lists no images")
    records, group_rule = apply_groups(records, options.get("groups"), root)
    records = carve_val(records, val_fraction, salt="coco-val")
    description = {
        "adapter": NAME,
        "root": root.name,  # the folder name only: the manifest must not depend on where a user keeps the data
        "annotations": portable_path(ann_path, root),
        "options": {
            "categories": sorted(wanted) if wanted else None,
            "split": split,
            "val_fraction": val_fraction,
            "max_pixels": max_pixels,
        },
        "person_category_ids": sorted(person_ids, key=str),
        **dict(sorted(stats.items())),
        "rules": {
            "split": f"all images -> {split}"
            + ("; val carved by SHA-256 order of 'coco-val|<image id>'" if val_fraction else ""),
            "crowd": "iscrowd annotations are left out and counted",
            "ids": "image id = file_name without extension, '/' -> '__', unsafe characters -> '_'",
            **groups_description(group_rule),
        },
    }
    return build_dataset(NAME, description, records, roots=(root,), follow_links=opt_follow_links(options))
