"""A cheap, exact image hash for finding near-identical frames (docs/DATA.md, "Sequences and near-duplicates").

``frame_hash(rgb)`` is a 64-bit difference hash computed with integer arithmetic only, so the same decoded pixels
give the same hash on every machine and NumPy version:

1. the frame is cut into 8 rows x 9 columns of cells (row k spans pixel rows [k H // 8, (k + 1) H // 8), column j
   spans [j W // 9, (j + 1) W // 9));
2. each cell's gray level is (299 R + 587 G + 114 B) summed over its pixels, // (1000 x its pixel count): the
   mean of the BT.601 luma, floored;
3. bit 8 r + c (c = 0..7) is 1 when cell (r, c) is brighter than cell (r, c + 1).

Two frames are near-identical when their hashes differ in at most ``NEAR_DISTANCE`` of the 64 bits. A frame
with fewer than ``MIN_EDGES`` of its 64 neighbouring cell pairs differing by at least ``EDGE_LEVELS`` gray levels
(fog, night, open water, a flat test image), or smaller than 9 x 8 pixels, has no reliable hash (None): its bits
are noise, and such frames would match each other whatever they show.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

ROWS, COLS = 8, 9
NEAR_DISTANCE = 10  # of 64 bits: consecutive video frames differ in a few, unrelated frames in about 32
EDGE_LEVELS = 2  # gray levels between two neighbouring cells for their bit to count as structure
MIN_EDGES = 16  # of 64 neighbouring pairs; fewer: a flat frame without a reliable hash
_POPCOUNT = np.array([bin(b).count("1") for b in range(256)], dtype=np.uint8)


def frame_hash(rgb: np.ndarray) -> int | None:
    """The 64-bit difference hash of an HxWx3 uint8 RGB frame (module doc), or None for a flat or tiny frame."""
    h, w = int(rgb.shape[0]), int(rgb.shape[1])
    if h < ROWS or w < COLS:
        return None
    rows = np.arange(ROWS) * h // ROWS
    cols = np.arange(COLS) * w // COLS
    # Channel sums per cell straight from the uint8 pixels (exact in int64), weighted once per cell.
    sums = np.add.reduceat(np.add.reduceat(rgb, rows, axis=0, dtype=np.int64), cols, axis=1, dtype=np.int64)
    luma = sums[..., 0] * 299 + sums[..., 1] * 587 + sums[..., 2] * 114
    counts = np.diff(np.append(rows, h))[:, None] * np.diff(np.append(cols, w))[None, :]
    means = luma // (1000 * counts)
    if int((np.abs(means[:, :-1] - means[:, 1:]) >= EDGE_LEVELS).sum()) < MIN_EDGES:
        return None
    bits = (means[:, :-1] > means[:, 1:]).reshape(-1)
    return int(sum(1 << k for k, b in enumerate(bits.tolist()) if b))


def distance(a: int, b: int) -> int:
    """How many of the 64 bits two hashes differ in."""
    return bin(a ^ b).count("1")


def near_pairs(left: Sequence[int], right: Sequence[int], max_distance: int = NEAR_DISTANCE) -> Iterable[tuple]:
    """(i, j, distance) for every hash ``left[i]`` within ``max_distance`` bits of ``right[j]``, in (i, j) order.

    All pairs are compared, a block of rows at a time, by a byte-wise popcount table (NumPy 1 has no bit count).
    """
    if not len(left) or not len(right):
        return
    b = np.array(right, dtype=np.uint64)
    for start in range(0, len(left), 256):
        a = np.array(left[start : start + 256], dtype=np.uint64)
        x = np.bitwise_xor(a[:, None], b[None, :])
        d = _POPCOUNT[x.view(np.uint8)].reshape(len(a), len(b), 8).sum(axis=2, dtype=np.int64)
        for i, j in zip(*np.nonzero(d <= max_distance)):
            yield start + int(i), int(j), int(d[i, j])
