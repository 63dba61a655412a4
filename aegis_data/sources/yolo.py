"""YOLO txt labels: ``images`` directory plus ``labels`` directory of ``<stem>.txt`` files.

Each line is ``class cx cy w h`` normalised to [0, 1]. Any class id is accepted; option ``classes`` ("0" or
"1,2") picks the person ids, default: every class is a person (recorded in the description). An image
without a label file is a negative (the YOLO convention) and counted; a label file without an image is
skipped and counted. Everything goes to ``split`` (default "test"); ``val_fraction`` carves val from it.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aegis_data.errors import AegisError
from aegis_data.files.imageio import list_images
from aegis_data.sources._common import (
    SPLITS,
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
)
from aegis_data.sources._dataset import SourceDataset, build_dataset, with_split
from aegis_data.sources._groups import apply_groups, groups_description
from aegis_data.sources._split import assign_groups
from aegis_data.sources.records import Box, Record
from aegis_data.sources.yolo_labels import read_yolo_labels

NAME = "yolo"
OPTIONS = ("images", "labels", "classes", "split", "val_fraction", "max_pixels", "follow_links", "groups")
_CANONICAL_ID = re.compile(r"^(0|[1-9][0-9]*)$")  # as a label line's class reads back: '00' never matches


def yolo_boxes(path: Path, width: int, height: int, classes: frozenset[str] | None, stats: Counter) -> tuple[Box, ...]:
    """Person boxes (absolute xyxy) from one YOLO label file; AegisError naming file:line for bad lines."""
    return tuple(
        check_box(*box, width, height, where) for box, where in read_yolo_labels(path, width, height, classes, stats)
    )


def yolo_class_filter(options: Mapping[str, Any], key: str = "classes") -> frozenset[str] | None:
    """Option ``classes`` as canonical YOLO class ids ('0', '3'); AegisError for anything else ('00', 'abc',
    '0.0', '-1'), which no label line could ever match."""
    classes = opt_ids(options, key)
    bad = sorted(c for c in classes or () if not _CANONICAL_ID.match(c))
    if bad:
        raise AegisError(
            f"option {key}: {', '.join(repr(c) for c in bad)} is not a YOLO class id; expected "
            f"non-negative integers written plainly, like 0 or 0,3"
        )
    return classes


def check_classes_matched(classes: frozenset[str] | None, stats: Counter, where: Path, key: str = "classes") -> None:
    """AegisError when ``classes`` names an id no label line carries: the benchmark would silently have no (or
    fewer) ground-truth boxes. Names the ids the labels do hold."""
    if not classes:
        return
    present = {k.split(":", 1)[1] for k in stats if k.startswith(("class:", "ignored_class:")) and stats[k]}
    missing = sorted(classes - present, key=int)
    if missing:
        held = ", ".join(sorted(present, key=int)) or "none (no label lines)"
        raise AegisError(
            f"option {key}: class id {', '.join(missing)} matches no label line under {where}; the "
            f"labels hold class ids: {held}"
        )


def label_folder(
    images_dir: Path,
    labels_dir: Path,
    *,
    classes,
    max_pixels: int,
    stats: Counter,
) -> tuple[list[tuple[Path, int, int, tuple[Box, ...]]], dict[str, int]]:
    """(image, width, height, person boxes) for every image of ``images_dir``, plus the layout counts.

    The label file is ``labels_dir/<stem>.txt``; an image without one is a negative, a label file without an
    image is skipped. Both are counted.
    """
    images = list_images(images_dir)
    labels = {p.stem: p for p in labels_dir.glob("*.txt")} if labels_dir.is_dir() else {}
    items = []
    without_label = 0
    for img in images:
        w, h = frame_size(img, max_pixels)
        txt = labels.get(img.stem)
        if txt is not None and not txt.is_file():  # a folder or FIFO named like a label: not a negative
            raise AegisError(
                f"label path {txt} is not a regular file (a folder, FIFO or broken link); remove or "
                f"replace it: its image would otherwise count as one without persons"
            )
        if txt is None:
            without_label += 1
        items.append((img, w, h, yolo_boxes(txt, w, h, classes, stats) if txt is not None else ()))
    stems = {p.stem for p in images}
    counts = {
        "images_found": len(images),
        "images_without_label_file_negative": without_label,
        "label_files_without_image_skipped": sum(1 for s in labels if s not in stems),
    }
    return items, counts


def yolo_records(
    images_dir: Path,
    labels_dir: Path,
    *,
    split: str,
    classes,
    max_pixels: int,
    stats: Counter,
) -> tuple[list[Record], dict]:
    items, counts = label_folder(images_dir, labels_dir, classes=classes, max_pixels=max_pixels, stats=stats)
    records = [
        Record(safe_id(img.stem), str(img), w, h, boxes, split=split, meta={"file": img.name})
        for img, w, h, boxes in items
    ]
    return records, counts


def class_stats(stats: Counter) -> dict:
    return {
        "boxes_by_class": {k.split(":", 1)[1]: v for k, v in sorted(stats.items()) if k.startswith("class:")},
        "ignored_boxes_by_class": {
            k.split(":", 1)[1]: v for k, v in sorted(stats.items()) if k.startswith("ignored_class:")
        },
    }


def carve_val(records: list[Record], val_fraction: float, salt: str) -> list[Record]:
    """Move round(val_fraction * n) records of the target split (hash order of group keys) to val."""
    if not val_fraction:
        return records
    sizes: Counter = Counter(r.group_key for r in records)
    remainder = records[0].split if records else "test"
    if remainder == "val":
        raise AegisError(f"option val_fraction={val_fraction} cannot carve validation images out of split=val")
    to = assign_groups(sizes, [("val", val_fraction)], remainder, salt=salt)
    return [with_split(r, to[r.group_key]) for r in records]


def opt_split(options: Mapping[str, Any]) -> str:
    split = str(options.get("split", "test"))
    if split not in SPLITS:
        raise AegisError(f"option split={split!r}: expected one of {', '.join(SPLITS)}")
    return split


def _folders_root(options: Mapping[str, Any]) -> Path:
    """What the description is relative to when only ``images=`` and ``labels=`` are given: their common parent
    folder (the images' parent when they share nothing but the filesystem root; the labels are then named)."""
    images, labels = (Path(str(options[k])).expanduser().resolve() for k in ("images", "labels"))
    common = Path(os.path.commonpath([images, labels]))
    if common in (images, labels):
        common = common.parent
    return images.parent if common == Path(common.anchor) else common


def load(source: Any, options: Mapping[str, Any]) -> SourceDataset:
    check_options(NAME, options, OPTIONS)
    root = Path(source).expanduser() if source not in (None, "") else _folders_root(options)
    images_dir = opt_path(options, "images", base=root)
    if images_dir is None:
        images_dir = root / "images" if (root / "images").is_dir() else root
    require_dir(images_dir, "YOLO images directory")
    labels_dir = opt_path(options, "labels", base=root)
    if labels_dir is None:
        sibling = images_dir.parent / "labels" if images_dir.name == "images" else root / "labels"
        labels_dir = sibling if sibling.is_dir() else images_dir
    else:
        require_dir(labels_dir, "YOLO labels directory")
    classes = yolo_class_filter(options)
    split = opt_split(options)
    val_fraction = opt_fraction(options, "val_fraction", 0.0)
    max_pixels = opt_max_pixels(options)
    stats: Counter = Counter()
    records, layout = yolo_records(
        images_dir, labels_dir, split=split, classes=classes, max_pixels=max_pixels, stats=stats
    )
    if not records:
        raise AegisError(f"no images found in {images_dir} (expected .jpg/.png/... files)")
    check_classes_matched(classes, stats, labels_dir)
    records, group_rule = apply_groups(records, options.get("groups"), root)
    records = carve_val(records, val_fraction, salt="yolo-val")
    description = {
        "adapter": NAME,
        "root": root.name,  # the folder name only: the manifest must not depend on where a user keeps the data
        "options": {
            "classes": sorted(classes) if classes else None,
            "split": split,
            "val_fraction": val_fraction,
            "max_pixels": max_pixels,
        },
        "layout": {"images": portable_path(images_dir, root), "labels": portable_path(labels_dir, root), **layout},
        **class_stats(stats),
        "rules": {
            "classes": "every class id is a person" if classes is None else f"class ids {sorted(classes)} are persons",
            "split": f"all images -> {split}"
            + ("; val carved by SHA-256 order of 'yolo-val|<image id>'" if val_fraction else ""),
            "negatives": "an image without a label file has no persons",
            **groups_description(group_rule),
        },
    }
    return build_dataset(NAME, description, records, roots=(root, images_dir), follow_links=opt_follow_links(options))
