"""In-memory ground truth and detections shared by the loaders, the matchers and the metrics.

One category per GroundTruth (person by default; multi-class scoring holds one per class). Arrays are flat over all
boxes of a split, with an index into the image table, so per-image work is a slice and whole-split work is vectorised.
Boxes are COCO ``[x, y, w, h]`` float64 pixels.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class GroundTruth:
    """COCO ground truth for one split, restricted to one category (``category_id``; person by default).

    image_ids: (I,) int64 COCO image ids, ascending; row i of every per-image table is image_ids[i].
    file_names: (I,) the GT ``file_name`` of each image (resolution of string/stem prediction ids uses it).
    widths, heights: (I,) int64.
    box_image: (G,) int64 row into image_ids for each GT box.
    boxes: (G, 4) float64 xywh.
    areas: (G,) float64, the annotation's COCO ``area`` field (pycocotools bins sizes by it, not by w*h);
        w*h when the field is absent.
    iscrowd: (G,) bool.
    ann_ids: (G,) int64.
    category_id: the COCO id of the category kept (the person category unless another was asked for).
    attributes: per-image extra attributes from the GT ``images`` entries (e.g. a group key), by row.
    category_ids: every category id the GT file declares (detections of other known ids are dropped, unknown
        ids refused).
    warnings: loader findings that do not invalidate the GT (``[code] message`` lines).
    dataset: the dataset name from the split's manifest (None for a bare COCO file).
    split_dir, config_hash: the split directory and its manifest's suite config hash (None for a bare COCO file).
    source: description of where it came from (path, sha256, manifest hashes) for provenance.
    """

    image_ids: np.ndarray
    file_names: tuple[str, ...]
    widths: np.ndarray
    heights: np.ndarray
    box_image: np.ndarray
    boxes: np.ndarray
    areas: np.ndarray
    iscrowd: np.ndarray
    ann_ids: np.ndarray
    category_id: int = 1
    attributes: tuple[Mapping[str, Any], ...] = ()
    category_ids: tuple[int, ...] = ()
    warnings: tuple[str, ...] = ()
    dataset: str | None = None
    split_dir: str | None = None
    config_hash: str | None = None
    source: Mapping[str, Any] = field(default_factory=dict)

    @property
    def n_images(self) -> int:
        return int(len(self.image_ids))

    @property
    def n_boxes(self) -> int:
        return int(len(self.boxes))


@dataclass(frozen=True)
class Detections:
    """Detections for one condition, resolved against a GroundTruth.

    det_image: (D,) int64 row into the GroundTruth's image table.
    boxes: (D, 4) float64 xywh.
    scores: (D,) float64 in [0, 1].
    source: path / sha256 / warnings for provenance.
    """

    det_image: np.ndarray
    boxes: np.ndarray
    scores: np.ndarray
    source: Mapping[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(len(self.scores))
