"""Cutting large frames into overlapping tiles, assigning boxes to tiles, and mapping boxes back.

Used by training (tiles of big HERIDAL frames) and tiled inference. Corruptions are always applied to the
full frame first; tiling happens afterwards, so no corruption statistic depends on the tile grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aegis_data.errors import AegisError

DEFAULT_TILE = 1024
DEFAULT_OVERLAP = 256


def tile_starts(length: int, tile: int = DEFAULT_TILE, overlap: int = DEFAULT_OVERLAP) -> list[int]:
    """Start offsets covering ``[0, length)`` with tiles of ``tile`` px overlapping by at least ``overlap``.

    A length that fits one tile gives ``[0]``. Otherwise starts step by ``tile - overlap`` and the last
    tile is placed flush with the far edge (its overlap with the previous one may be larger), so every
    tile is full-size and none is padded.
    """
    if length < 1:
        raise AegisError(f"`length` must be >= 1, got {length}", param="length")
    if tile < 1:
        raise AegisError(f"`tile` must be >= 1, got {tile}", param="tile")
    if not 0 <= overlap < tile:
        raise AegisError(f"`overlap` must be in [0, `tile` {tile}), got {overlap}", param="overlap")
    if length <= tile:
        return [0]
    stride = tile - overlap
    starts = list(range(0, length - tile, stride))
    if starts[-1] != length - tile:
        starts.append(length - tile)
    return starts


@dataclass(frozen=True)
class Tile:
    """A tile's pixel extent in frame coordinates: columns [x0, x1), rows [y0, y1)."""

    x0: int
    y0: int
    x1: int
    y1: int

    @property
    def width(self) -> int:
        return self.x1 - self.x0

    @property
    def height(self) -> int:
        return self.y1 - self.y0


def tile_grid(width: int, height: int, tile: int = DEFAULT_TILE, overlap: int = DEFAULT_OVERLAP) -> list[Tile]:
    """Row-major tiles covering a ``width`` x ``height`` frame; a frame that fits is a single tile."""
    xs = tile_starts(width, tile, overlap)
    ys = tile_starts(height, tile, overlap)
    return [Tile(x, y, min(x + tile, width), min(y + tile, height)) for y in ys for x in xs]


def _as_boxes(boxes) -> np.ndarray:
    arr = np.asarray(boxes, dtype=np.float64)
    if arr.size == 0:
        return arr.reshape(0, 4)
    if arr.ndim != 2 or arr.shape[1] != 4:
        raise AegisError(f"`boxes_xyxy` must have shape (N, 4), got {arr.shape}", param="boxes_xyxy")
    return arr


def assign_boxes(boxes_xyxy, tile: Tile, min_visibility: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Boxes that belong to ``tile``: clipped to it and expressed in tile coordinates.

    A box is kept when the fraction of its area inside the tile is at least ``min_visibility`` (so a
    person cut by a seam is trained on in the tile that shows most of them). Returns the clipped boxes
    (M, 4) in tile coordinates and the indices (M,) of the kept input boxes.
    """
    if not 0.0 < min_visibility <= 1.0:
        raise AegisError(f"`min_visibility` must be in (0, 1], got {min_visibility}", param="min_visibility")
    b = _as_boxes(boxes_xyxy)
    if len(b) == 0:
        return b.copy(), np.zeros(0, dtype=np.int64)
    cx0 = np.clip(b[:, 0], tile.x0, tile.x1)
    cy0 = np.clip(b[:, 1], tile.y0, tile.y1)
    cx1 = np.clip(b[:, 2], tile.x0, tile.x1)
    cy1 = np.clip(b[:, 3], tile.y0, tile.y1)
    inside = np.maximum(cx1 - cx0, 0.0) * np.maximum(cy1 - cy0, 0.0)
    area = np.maximum(b[:, 2] - b[:, 0], 0.0) * np.maximum(b[:, 3] - b[:, 1], 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        visibility = np.where(area > 0, inside / area, 0.0)
    keep = np.flatnonzero((visibility >= min_visibility) & (inside > 0))
    clipped = np.stack([cx0 - tile.x0, cy0 - tile.y0, cx1 - tile.x0, cy1 - tile.y0], axis=1)[keep]
    return clipped, keep


def boxes_to_frame(boxes_xyxy, tile: Tile) -> np.ndarray:
    """Shift boxes from tile coordinates back to frame coordinates (exact: integer offsets)."""
    b = _as_boxes(boxes_xyxy)
    return b + np.array([tile.x0, tile.y0, tile.x0, tile.y0], dtype=np.float64)


def crop(image: np.ndarray, tile: Tile) -> np.ndarray:
    """The tile's pixels as a view of ``image`` (HxWxC)."""
    return image[tile.y0 : tile.y1, tile.x0 : tile.x1]
