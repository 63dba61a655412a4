"""HERIDAL (University of Split): ``ROOT/trainImages`` and ``ROOT/testImages`` with VOC XML labels.

Label files are looked for, per split directory ``S``, in ``ROOT/S/labels/``, ``ROOT/labels/S/``,
``ROOT/labels/`` and beside the images in ``ROOT/S/`` (first match by file stem wins). Splits: every image of
``testImages`` -> "test" (the official test set); ``trainImages`` -> "train", with a validation part carved
deterministically: images ordered by SHA-256 of ``heridal-val|<image id>``, the first
round(val_fraction * n_train) go to "val". Images without any XML are skipped and counted; XML files without
an image are skipped and counted; XMLs with no objects are negatives and kept.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aegis_data.errors import AegisError
from aegis_data.files.imageio import list_images
from aegis_data.sources._common import (
    check_options,
    opt_follow_links,
    opt_fraction,
    opt_max_pixels,
    require_dir,
)
from aegis_data.sources._dataset import SourceDataset, build_dataset, with_split
from aegis_data.sources._groups import apply_groups, groups_description
from aegis_data.sources._labels import split_stats, xml_record
from aegis_data.sources._split import assign_groups

NAME = "heridal"
OPTIONS = ("val_fraction", "max_pixels", "follow_links", "groups")
DEFAULT_VAL_FRACTION = 0.1
SPLIT_DIRS = (("trainImages", "train"), ("testImages", "test"))


def _label_dirs(root: Path, split_dir: str) -> list[Path]:
    cands = [root / split_dir / "labels", root / "labels" / split_dir, root / "labels", root / split_dir]
    return [c for c in cands if c.is_dir()]


def _xml_index(dirs: list[Path]) -> dict[str, Path]:
    """stem -> XML path; earlier directories win."""
    out: dict[str, Path] = {}
    for d in dirs:
        for p in sorted(d.iterdir()):
            if p.is_file() and p.suffix.lower() == ".xml" and not p.name.startswith("."):
                out.setdefault(p.stem, p)
    return out


def load(source: Any, options: Mapping[str, Any]) -> SourceDataset:
    check_options(NAME, options, OPTIONS)
    val_fraction = opt_fraction(options, "val_fraction", DEFAULT_VAL_FRACTION)
    max_pixels = opt_max_pixels(options)
    root = require_dir(Path(source).expanduser(), "HERIDAL root")
    missing = [d for d, _ in SPLIT_DIRS if not (root / d).is_dir()]
    if missing:
        raise AegisError(
            f"{root} is not a HERIDAL root: missing {', '.join(missing)}/ "
            "(expected trainImages/ and testImages/ with VOC XML labels)"
        )
    records = []
    stats: Counter[str] = Counter()
    per_split: dict[str, dict[str, Any]] = {}
    for split_dir, split in SPLIT_DIRS:
        images = list_images(root / split_dir)
        xmls = _xml_index(_label_dirs(root, split_dir))
        image_stems = {p.stem for p in images}
        orphan_xml = sorted(s for s in xmls if s not in image_stems)
        no_xml = [p for p in images if p.stem not in xmls]
        split_stats_c: Counter[str] = Counter()
        for img in images:
            if img.stem not in xmls:
                continue
            records.append(xml_record(img, xmls[img.stem], split=split, max_pixels=max_pixels, stats=split_stats_c))
        per_split[split_dir] = {
            "images_found": len(images),
            "images_without_xml_skipped": len(no_xml),
            "xml_without_image_skipped": len(orphan_xml),
            "examples_skipped": [p.name for p in no_xml[:5]] + [f"{s}.xml" for s in orphan_xml[:5]],
            **split_stats(split_stats_c),
        }
        stats.update(split_stats_c)
    if not records:
        raise AegisError(f"no labelled images found under {root}/trainImages or {root}/testImages")
    records, group_rule = apply_groups(records, options.get("groups"), root)
    train_groups = Counter(r.group_key for r in records if r.split == "train")  # one image each without groups
    if val_fraction:
        to_val = assign_groups(train_groups, [("val", val_fraction)], "train", salt="heridal-val")
        records = [with_split(r, to_val[r.group_key]) if r.split == "train" else r for r in records]
    description = {
        "adapter": NAME,
        "root": root.name,  # the folder name only: the manifest must not depend on where a user keeps the data
        "options": {"val_fraction": val_fraction, "max_pixels": max_pixels},
        "layout": per_split,
        "rules": {
            "test": "every labelled image of testImages/ (the official test set)",
            "val": "trainImages/ images ordered by SHA-256 of 'heridal-val|<image id>'; the first "
            "round(val_fraction * n_train) -> val, the rest -> train",
            "classes": "objects named human/person/people/pedestrian (any case) are persons; "
            "others ignored and counted",
            "skipped": "images without XML and XML without image are skipped and counted; empty XML = negative, kept",
            "size": "taken from the image header; <size> is not trusted",
            **groups_description(group_rule),
        },
    }
    return build_dataset(NAME, description, records, roots=(root,), follow_links=opt_follow_links(options))
