"""Deterministic frames for the scene model (aegis-v2): a letterboxed frame and an oblique view with a sky.

Integer arithmetic only, like ``frames.py``, so they are identical everywhere. The oblique frame is a flat
ground plane seen by a pinhole camera without roll: its texture cells shrink toward the horizon as 1 / (y - h),
the sky above is a smooth bright gradient, and dark "people" are sized like the ground at their row.
"""

from __future__ import annotations

import numpy as np

from tests.golden.frames import golden_frame

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
    img[bar : height - bar] = golden_frame(height - 2 * bar, width)
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
            img[row - 2 * size : row, col : col + size] = (30, 25, 35)
    return np.ascontiguousarray(np.clip(img, 0, 255).astype(np.uint8)), horizon


def coast_frame(height: int, width: int, person_px: float = 30.0) -> tuple[np.ndarray, np.ndarray, list]:
    """(frame, true water mask, person boxes xyxy): a near-nadir coast. Sea on the left (blue, gentle integer
    waves), a wavy shoreline, a sand beach, textured grass on the right, a small blue tarp on the grass (not
    water), one person on the beach and one standing in the shallow water near the shore. Integer arithmetic."""
    y = np.arange(height, dtype=np.int64)[:, None]
    x = np.arange(width, dtype=np.int64)[None, :]
    hsh = ((x * 2654435761 + y * 40503 * 2246822519) & 0xFFFFFFFF) >> 27  # 0..31
    shore = width * 2 // 5 + y // 6 + ((y // 9) % 7) - 3  # the waterline's column per row
    beach_end = shore + width // 6
    wave = ((x * 3 + y * 5) % 16) - 8  # +-8 DN ripples, ~4 px apart
    sea = np.stack(np.broadcast_arrays(28 + wave // 4, 92 + wave // 2, 124 + wave // 2), axis=-1)
    sand = np.stack(np.broadcast_arrays(188 + hsh // 4, 172 + hsh // 4, 124 + hsh // 5), axis=-1)
    grass = np.stack(np.broadcast_arrays(58 + hsh, 96 + hsh // 2 + 0 * y, 38 + hsh // 3 + 0 * y), axis=-1)
    water = np.broadcast_to(x < shore, (height, width))
    img = np.where(water[..., None], sea, np.where((x < beach_end)[..., None], sand, grass))
    # A blue tarp on the grass (3% of the short side square): blue, smooth, small: not water.
    t = max(4, min(height, width) * 3 // 100)
    ty, tx = height // 5, width * 17 // 20
    img[ty : ty + t, tx : tx + t] = (40, 80, 170)
    # Persons: about sqrt(w h) = person_px, twice as tall as wide; dark clothes, a skin-tone head.
    pw, ph = int(person_px / 1.42 + 0.5), int(person_px * 1.42 + 0.5)
    boxes = []
    for row, col in ((height * 3 // 5, None), (height * 4 // 5, "sea")):
        line = int(width * 2 // 5 + row // 6)
        cx = line + width // 12 if col is None else line - pw  # on the beach, or in the water by the shore
        x0, y0 = cx - pw // 2, row - ph
        img[y0:row, x0 : x0 + pw] = (45, 38, 52)
        img[y0 : y0 + ph // 5, x0 + pw // 4 : x0 + pw - pw // 4] = (205, 160, 130)
        boxes.append([float(x0), float(y0), float(x0 + pw), float(row)])
    truth = water.copy()
    for x0, y0, x1, y1 in boxes:
        truth[int(y0) : int(y1), int(x0) : int(x1)] = False
    return np.ascontiguousarray(np.clip(img, 0, 255).astype(np.uint8)), truth, boxes


def lake_oblique_frame(height: int, width: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(frame, true water mask, horizon row): ``oblique_frame`` with a lake on the ground below the horizon
    (blue-green water with integer ripples that shrink toward the horizon); its people stay where they stand, some
    of them in the lake."""
    img, horizon = oblique_frame(height, width)
    y = np.arange(height, dtype=np.int64)[:, None]
    x = np.arange(width, dtype=np.int64)[None, :]
    top, bottom = horizon + (height - horizon) // 6, horizon + (height - horizon) * 3 // 5
    lake = (y >= top) & (y < bottom) & (x >= width // 5) & (x < width * 7 // 10)
    person = (img == np.array([30, 25, 35], dtype=np.uint8)).all(axis=2)
    ripple = ((x * 5 + y * 11) % 12) - 6
    water = np.stack(np.broadcast_arrays(34 + ripple // 3, 78 + ripple // 2, 104 + ripple // 2), axis=-1)
    truth = lake & ~person
    img = np.where(truth[..., None], water, img).astype(np.uint8)
    return np.ascontiguousarray(img), truth, horizon
