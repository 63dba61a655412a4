"""Reading a frozen split back: its conditions, images, COCO ground truth and manifest facts.

``load_split(root)`` checks the manifest (format, seal, confined paths) and returns a :class:`FrozenSplit`;
``split.images("low_light_s3")`` yields ``(image_id, rgb, boxes)`` one image at a time, decoded from the PNG
files (boxes as float64 ``(N, 4)`` ``x0, y0, x1, y1`` pixels, the person boxes of that image). Reading checks
nothing beyond the manifest itself: ``aegis verify`` / :func:`aegis_data.split.verify.verify_split` proves the files.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aegis_data.engine.config import SuiteConfig, load_config, split_config
from aegis_data.engine.scale import Scale, scale_from_record
from aegis_data.errors import AegisError
from aegis_data.files.imageio import read_rgb
from aegis_data.files.layout import (
    MANIFEST_NAME,
    SPLIT_NAMES,
    annotation_path,
    condition_dir,
    image_file_name,
    link_target,
)
from aegis_data.files.readers import coco_boxes_by_stem, read_coco_gt, read_json
from aegis_data.split.manifest import Manifest, check_manifest, load_manifest


@dataclass(frozen=True)
class FrozenSplit:
    """A split on disk written by ``aegis build-splits`` (see docs/SPLITS.md for the layout)."""

    root: Path
    manifest: Manifest
    # split -> (COCO GT, {stem: boxes}): annotations/<split>.json is read and parsed once per object, not once
    # per call (iterating the 28 test conditions would otherwise parse test.json 28 times).
    _gt: dict[str, tuple[dict[str, Any], dict[str, list[list[float]]]]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @property
    def dataset(self) -> str:
        return str(self.manifest.data.get("dataset"))

    @property
    def conditions(self) -> tuple[str, ...]:
        """Test conditions in canonical order (``clean`` first)."""
        return tuple(self.manifest.data.get("conditions") or ())

    @property
    def splits(self) -> dict[str, int]:
        """Images per written split (``test``, ``val``, ``train``)."""
        return dict(self.manifest.data.get("splits") or {})

    @property
    def root_hash(self) -> str:
        return self.manifest.root_hash

    @property
    def config_hash(self) -> str:
        return str(self.manifest.data.get("config_hash"))

    @property
    def seed(self) -> int:
        return int(self.manifest.data["seed"])  # a root identity key: every sealed manifest has it

    @property
    def suite(self) -> str:
        return str(self.manifest.data.get("suite"))

    @property
    def scale(self) -> Scale:
        return scale_from_record(self.manifest.data.get("scale"), self.manifest.path)

    def suite_config(self) -> SuiteConfig:
        """The suite config the split was built with (its own ``corruptions.yaml`` copy, or the installed suite
        with the manifest's config hash; see :func:`aegis_data.engine.config.split_config`)."""
        return split_config(self.root, self.manifest.data.get("config_hash"))

    def ground_truth(self, split: str = "test") -> dict[str, Any]:
        """The split's COCO ground truth (``annotations/<split>.json``) as a dict (the caller's own copy)."""
        return copy.deepcopy(self._read_gt(split)[0])

    def image_ids(self, split: str = "test") -> list[str]:
        """Image stems of ``split`` in COCO id order."""
        return list(self._boxes(split))

    def _boxes(self, split: str) -> dict[str, list[list[float]]]:
        """{stem: person boxes [x, y, w, h]} of ``split``, in COCO id order."""
        return self._read_gt(split)[1]

    def _read_gt(self, split: str) -> tuple[dict[str, Any], dict[str, list[list[float]]]]:
        """(COCO GT, {stem: boxes}) of ``split``, read from its file on first use only."""
        split = self._check_split(split)
        if split not in self._gt:
            where = annotation_path(self.root, split)
            coco, _ = read_coco_gt(where)
            self._gt[split] = (coco, coco_boxes_by_stem(coco, where))
        return self._gt[split]

    def images(self, condition: str = "clean", split: str = "test") -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
        """``(image_id, rgb, boxes)`` for every image of ``condition`` (val and train hold ``clean`` only), one
        decoded at a time: rgb HxWx3 uint8, boxes float64 (N, 4) ``x0, y0, x1, y1`` in pixels."""
        split = self._check_split(split)
        available = self.conditions if split == "test" else ("clean",)
        if condition not in available:
            raise AegisError(
                f"{self.root}: no condition {condition!r} in the {split} split; it has "
                f"{', '.join(available[:6])}{', ...' if len(available) > 6 else ''}"
            )
        folder = condition_dir(self.root, split, condition)
        real_root = link_target(self.root)
        for image_id, boxes in self._boxes(split).items():
            xywh = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
            xyxy = np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], axis=1)
            path = folder / image_file_name(image_id)
            # A received split may link a file (or folder) elsewhere: nothing outside it is read (docs/SECURITY.md).
            target = link_target(path)
            if target is None or real_root is None or not target.is_relative_to(real_root):
                raise AegisError(
                    f"{path} resolves outside the split ({'a link loop' if target is None else target}); not read"
                )
            yield image_id, read_rgb(path), xyxy

    def __iter__(self) -> Iterator[tuple[str, Iterator[tuple[str, np.ndarray, np.ndarray]]]]:
        """``(condition, images(condition))`` for every test condition."""
        for condition in self.conditions:
            yield condition, self.images(condition)

    def facts(self) -> dict[str, Any]:
        """What the manifest says about the build (dataset, suite, config, seed, scale, conditions, splits, root)."""
        data: Mapping[str, Any] = self.manifest.data
        return {
            "dataset": self.dataset,
            "suite": self.suite,
            "config_hash": self.config_hash,
            "seed": self.seed,
            "scale": self.scale.describe(),
            "conditions": list(self.conditions),
            "splits": self.splits,
            "root_hash": self.root_hash,
            "toolkit": dict(data.get("toolkit") or {}),
        }

    def _check_split(self, split: str) -> str:
        if split not in SPLIT_NAMES or split not in self.splits:
            raise AegisError(f"{self.root}: no {split!r} split; it has {', '.join(self.splits) or 'none'}")
        return split


def load_split(root: str | Path) -> FrozenSplit:
    """A frozen split folder, its manifest checked; AegisError when it is not one (or not finished)."""
    root = Path(root)
    if not root.is_dir():
        raise AegisError(f"split folder not found: {root}")
    return FrozenSplit(root, load_manifest(root / MANIFEST_NAME))


@dataclass(frozen=True)
class ManifestFile:
    """A split folder's manifest file as read for provenance (:func:`read_manifest_file`)."""

    path: Path
    data: Any  # the parsed JSON, whatever its type: each caller says what a non-object means to it
    sha256: str  # of the file's bytes
    sealed: Manifest | None  # the checked manifest when the file names a ``format`` (a build's); else None


def read_manifest_file(root: str | Path) -> ManifestFile | None:
    """``<root>/manifest.json`` read for provenance, or None when the folder has none.

    Looser than :func:`load_split`: the scorer also takes a folder whose manifest is a hand-written provenance
    record (no ``format``). A file that names a ``format`` claims to be a build's manifest and counts only when it
    passes the same checks (format, confined paths, seal): AegisError ``[manifest_invalid]`` otherwise. Read
    errors carry the ``[manifest_...]`` codes of :func:`aegis_data.files.readers.read_json`.
    """
    path = Path(root) / MANIFEST_NAME
    if not path.is_file():
        return None
    data, sha = read_json(path, "split manifest", "manifest_")
    sealed = None
    if isinstance(data, dict) and "format" in data:
        try:
            sealed = check_manifest(data, path)
        except AegisError as exc:
            raise AegisError(f"[manifest_invalid] {exc}") from None
    return ManifestFile(path, data, sha, sealed)


def config_for(path: str | Path | None, config_hash: str | None = None) -> SuiteConfig:
    """The suite config of the conditions under ``path``: the split's when ``path`` is a split folder (it holds a
    manifest; ``config_hash`` is its manifest's when the caller already read it, else the manifest is read here),
    else the installed default (no split: a bare image folder or COCO file)."""
    if path is None or not (Path(path) / MANIFEST_NAME).is_file():
        return load_config()
    if config_hash is not None:
        return split_config(path, config_hash)
    return load_split(path).suite_config()
