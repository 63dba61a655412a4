"""Deterministic frames for the scene model (aegis-v2): a letterboxed frame and an oblique view with a sky.

Integer arithmetic only, like ``frames.py``, so they are identical everywhere. The oblique frame is a flat
ground plane seen by a pinhole camera without roll: its texture cells shrink toward the horizon as 1 / (y - h),
the sky above is a smooth bright gradient, and dark "people" are sized like the ground at their row.
"""

from __future__ import annotations

import numpy as np

from golden.frames import golden_frame

BAR_COLOUR = (0, 0, 0)


def letterboxed_frame(height: int, width: int, bar: int, colour=BAR_COLOUR, jitter: int = 0) -> np.ndarray:
    """``golden_frame`` of ``height - 2 bar`` rows between two bars of ``bar`` rows of ``colour``; ``jitter`` adds a
    deterministic +-jitter DN ripple to the bars (JPEG ringing)."""
    img = np.empty((height, width, 3), dtype=np.uint8)
    img[:] = np.asarray(colour, dtype=np.uint8)
    if jitter:
        y = np.arange(height)[:, None]
        x = np.arange(width)[None, :]
        ripple = ((x * 7 + y * 13) % (2 * jitter + 1)) - jitter
        for c in range(3):
            img[..., c] = np.clip(int(colour[c]) + ripple, 0, 255).astype(np.uint8)
    img[bar: height - bar] = golden_frame(height - 2 * bar, width)
    return img


def oblique_frame(height: int, width: int, horizon_share: tuple[int, int] = (3, 10)) -> tuple[np.ndarray, int]:
    """(frame, horizon row): sky above ``height * num / den`` rows, textured ground below, people on it."""
    horizon = height * horizon_share[0] // horizon_share[1]
    y = np.arange(height, dtype=np.int64)[:, None]
    x = np.arange(width, dtype=np.int64)[None, :]
    img = np.zeros((height, width, 3), dtype=np.int64)
    # Sky: a smooth gradient, brightest at the horizon (haze), no texture.
    t = np.minimum(y, horizon) * 64 // max(horizon, 1)
    sky = np.stack(np.broadcast_arrays(150 + t // 2, 175 + t // 3, 225 + t // 8 + 0 * x), axis=-1)
    # Ground: cells of (y - horizon) // 6 + 1 px, hashed greens and browns.
    below = np.maximum(y - horizon, 0)
    cell = below // 6 + 1
    depth_row = below // cell
    hsh = (((x // cell) * 2654435761 + depth_row * 40503 * 2246822519) & 0xFFFFFFFF) >> 26  # 0..63
    ground = np.stack(np.broadcast_arrays(60 + hsh, 90 + hsh // 2 + 0 * y, 40 + hsh // 3 + 0 * y), axis=-1)
    img = np.where((y < horizon)[..., None], sky, ground)
    # People: dark 1 x 2 boxes of about the ground's cell size, on a lattice below the horizon.
    for k, frac in enumerate((5, 7, 9)):
        row = horizon + (height - horizon) * frac // 10
        size = max(2, (row - horizon) // 5)
        for col in range(width // 6 + k * size, width, width // 3):
            img[row - 2 * size: row, col: col + size] = (30, 25, 35)
    return np.ascontiguousarray(np.clip(img, 0, 255).astype(np.uint8)), horizon
