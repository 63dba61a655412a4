"""Names and paths of a frozen split on disk (docs/SPLITS.md, "Layout on disk"). Declared once; every stage reads them
from here."""

from __future__ import annotations

import re
from pathlib import Path

MANIFEST_NAME = "manifest.json"
# The exact bytes of the suite config a split was built with (its SHA-256 prefix is the manifest's config_hash).
SUITE_CONFIG_NAME = "corruptions.yaml"
ANNOTATIONS_DIR = "annotations"
# Generation-2 builds keep here what an image's scene read that is not in the image: a sidecar's water mask
# (``scenes/<split>/<image_id>.water.png``), so that verify can re-derive the scene and re-render from the split.
SCENES_DIR = "scenes"
WATER_MASK_SUFFIX = ".water.png"
SPLIT_NAMES = ("test", "val", "train")
YOLO_DIR = "yolo"  # the YOLO view: label files, image lists, data.yaml files and links into the split folders
# Every folder a split's files live in: a manifest names files under these only; verify walks them for unlisted
# files and links leaving the split; a build clears them of a killed run's temp files.
SPLIT_DIRS = (*SPLIT_NAMES, ANNOTATIONS_DIR, YOLO_DIR, SCENES_DIR)
# An image id names its file (<id>.png) in every condition folder: no separators, no leading dot.
SAFE_IMAGE_ID = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$")
# A dataset name: it names the default output folder (<name>-c), the manifest's dataset and every report heading.
DATASET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
PERSON_CATEGORY = {"id": 1, "name": "person", "supercategory": "person"}


def annotation_path(root: str | Path, split: str = "test") -> Path:
    return Path(root) / ANNOTATIONS_DIR / f"{split}.json"


def condition_dir(root: str | Path, split: str, condition: str) -> Path:
    return Path(root) / split / condition


def image_file_name(image_id: str) -> str:
    return f"{image_id}.png"


def water_mask_relpath(split: str, image_id: str) -> str:
    """Where a split keeps the sidecar water mask an image's scene used, relative to the split root."""
    return f"{SCENES_DIR}/{split}/{image_id}{WATER_MASK_SUFFIX}"


def link_target(path: str | Path) -> Path | None:
    """Where ``path`` leads with every symbolic link followed (``Path.resolve``), or None when the links form a
    loop (``resolve`` raises then: a received folder may hold one)."""
    try:
        return Path(path).resolve()
    except (RuntimeError, OSError):
        return None
