"""Pascal VOC: images plus one XML per image.

``source`` is the root. Images: option ``images`` or ``ROOT/JPEGImages`` or ``ROOT/images`` or ROOT.
XML: option ``annotations`` or ``ROOT/Annotations`` or ``ROOT/labels``, else beside the images; matched by
stem. Person classes: names person/human/people/pedestrian (any case), or option ``classes`` ("person,rider").
Images without XML are skipped and counted. Everything -> ``split`` (default "test"); ``val_fraction`` carves.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aegis_data.errors import AegisError
from aegis_data.files.imageio import list_images
from aegis_data.sources import _labels
from aegis_data.sources._common import (
    PERSON_NAMES,
    check_names_matched,
    check_options,
    opt_follow_links,
    opt_fraction,
    opt_ids,
    opt_max_pixels,
    opt_path,
    portable_path,
    require_dir,
)
from aegis_data.sources._dataset import SourceDataset, build_dataset
from aegis_data.sources._groups import apply_groups, groups_description
from aegis_data.sources.yolo import carve_val, opt_split

NAME = "voc"
OPTIONS = ("images", "annotations", "classes", "split", "val_fraction", "max_pixels", "follow_links", "groups")


def _first_dir(*cands: Path) -> Path | None:
    return next((c for c in cands if c.is_dir()), None)


def load(source: Any, options: Mapping[str, Any]) -> SourceDataset:
    check_options(NAME, options, OPTIONS)
    root = require_dir(Path(source).expanduser(), "VOC root")
    images_dir = opt_path(options, "images", base=root) or _first_dir(root / "JPEGImages", root / "images") or root
    require_dir(images_dir, "VOC images directory")
    ann_dir = (
        opt_path(options, "annotations", base=root) or _first_dir(root / "Annotations", root / "labels") or images_dir
    )
    require_dir(ann_dir, "VOC annotations directory")
    classes = opt_ids(options, "classes")
    names = {c.lower() for c in classes} if classes else None
    split = opt_split(options)
    val_fraction = opt_fraction(options, "val_fraction", 0.0)
    max_pixels = opt_max_pixels(options)
    xmls = {p.stem: p for p in sorted(ann_dir.glob("*.xml")) if p.is_file()}
    images = list_images(images_dir)
    stats: Counter[str] = Counter()
    seen: set[str] = set()
    records = []
    skipped = []
    for img in images:
        xml = xmls.get(img.stem)
        if xml is None:
            skipped.append(img.name)
            continue
        records.append(
            _labels.xml_record(
                img,
                xml,
                split=split,
                max_pixels=max_pixels,
                stats=stats,
                seen=seen,
                person_names=PERSON_NAMES if names is None else names,
            )
        )
    if not records:
        raise AegisError(f"no images with VOC XML found (images in {images_dir}, XML in {ann_dir})")
    check_names_matched(classes, seen, ann_dir)
    stems = {p.stem for p in images}
    records, group_rule = apply_groups(records, options.get("groups"), root)
    records = carve_val(records, val_fraction, salt="voc-val")
    description = {
        "adapter": NAME,
        "root": root.name,  # the folder name only: the manifest must not depend on where a user keeps the data
        "options": {
            "images": portable_path(images_dir, root),
            "annotations": portable_path(ann_dir, root),
            "classes": sorted(classes) if classes else None,
            "split": split,
            "val_fraction": val_fraction,
            "max_pixels": max_pixels,
        },
        "layout": {
            "images_found": len(images),
            "images_without_xml_skipped": len(skipped),
            "xml_without_image_skipped": sum(1 for s in xmls if s not in stems),
        },
        **_labels.split_stats(stats),
        "rules": {
            "classes": "person/human/people/pedestrian" if not classes else f"classes {sorted(classes)}",
            "split": f"all images -> {split}"
            + ("; val carved by SHA-256 order of 'voc-val|<image id>'" if val_fraction else ""),
            **groups_description(group_rule),
        },
    }
    return build_dataset(NAME, description, records, roots=(root, images_dir), follow_links=opt_follow_links(options))
