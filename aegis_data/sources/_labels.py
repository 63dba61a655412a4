"""Turning parsed XML labels into records: class filtering, box checks, counters for the description."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from aegis_data.sources._common import PERSON_NAMES, check_box, frame_size, safe_id
from aegis_data.sources._xml import parse_voc_xml
from aegis_data.sources.records import Box, Record


def xml_record(
    image: Path,
    xml: Path | None,
    *,
    split: str,
    group: str = "",
    image_id: str | None = None,
    max_pixels: int,
    stats: Counter,
    meta: dict | None = None,
    person_names: frozenset[str] | set[str] = PERSON_NAMES,
    seen: set[str] | None = None,
) -> Record:
    """One record from an image and its VOC XML (None = no label file: a negative).

    The image header is the size authority; a disagreeing ``<size>`` is counted, not trusted. Objects whose
    class (lower-cased) is not in ``person_names`` (default: the person aliases) are counted per class name in
    ``stats`` and left out. ``seen``: when given, every object's class name is added to it (class filters
    are checked against it).
    """
    width, height = frame_size(image, max_pixels)
    boxes: list[Box] = []
    if xml is not None:
        label = parse_voc_xml(xml)
        if label.size is None:
            stats["xml_without_size"] += 1
        elif label.size != (width, height):
            stats["xml_size_disagrees_with_image"] += 1
        if not label.objects:
            stats["empty_label_files"] += 1
        for k, obj in enumerate(label.objects):
            if seen is not None:
                seen.add(obj.name)
            if obj.name.lower() not in person_names:
                stats[f"ignored_class:{obj.name or '<empty>'}"] += 1
                continue
            boxes.append(check_box(*obj.box, width, height, f"{xml} (object {k})"))
    return Record(
        image_id=image_id or safe_id(image.stem),
        path=str(image),
        width=width,
        height=height,
        boxes=tuple(boxes),
        group=group,
        split=split,
        meta=dict(meta or {}, file=image.name),
    )


def split_stats(stats: Counter) -> dict:
    """Counter -> JSON-able dict with ignored classes grouped under one key."""
    out: dict = {}
    ignored = {}
    for k, v in sorted(stats.items()):
        if k.startswith("ignored_class:"):
            ignored[k.split(":", 1)[1]] = v
        else:
            out[k] = v
    if ignored:
        out["ignored_objects_by_class"] = ignored
    return out
