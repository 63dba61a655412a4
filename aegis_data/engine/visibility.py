"""Person visibility without a detector (docs/CORRUPTIONS.md, "Severity calibration", "Visibility").

For a person box in an image, the Rose-style detectability index

    V = |mu_P - m_N| / s_N

where ``mu_P`` is the mean luma (DN, ``Y = 0.299 R + 0.587 G + 0.114 B``) inside the box, and ``m_N`` and ``s_N``
are the median and the standard deviation (ddof=0) of the mean luma of every box-sized window in the person's
neighbourhood (the box grown by one box width left and right and one box height up and down, clipped to the frame)
that overlaps neither this person's box nor any other person box of the image. Such a window overlaps the person's
own box unless it lies flush against the neighbourhood's border, so the windows are those slid along that border,
one px apart; window means come from an integral image.

- With white noise of std sigma on a uniform background, ``s_N = sigma / sqrt(w h)`` and V is Rose's
  signal-to-noise ratio of the person against its surround; Rose's criterion calls an object reliably detectable
  at ``V >= 5`` (:data:`ROSE_K`).
- With scene clutter, ``s_N`` is the clutter's variation at the person's own scale, so V is a signal-to-clutter
  ratio; correlated noise is accounted for by construction (it is measured, not modelled).
- Windows slid 1 px apart overlap, so ``s_N`` slightly underestimates the spread of independent windows: for white
  noise V reads about 6 % high (measured on 64-px boxes).

V is NaN when the windows that fit cover less than :data:`MIN_SURROUND_BOXES` box areas, half of the full
surround's 8 (a person at a frame corner, or crowded by other people: the few windows left are too alike to
measure a spread), or when the box is empty after rounding; it is +inf when the surround is perfectly uniform and
the person differs from it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from aegis_data.errors import AegisError
from aegis_data.files.rgb import check_rgb_image

ROSE_K = 5.0  # Rose's detectability threshold
MIN_SURROUND_BOXES = 4  # the windows used must cover at least this many box areas


def _luma_dn(rgb: np.ndarray) -> np.ndarray:
    return (299 * rgb[:, :, 0].astype(np.int32) + 587 * rgb[:, :, 1].astype(np.int32)
            + 114 * rgb[:, :, 2].astype(np.int32)) / 1000.0


def pixel_box(box: Sequence[float], width: int, height: int) -> tuple[int, int, int, int] | None:
    """``(x0, y0, x1, y1)`` in whole px of a COCO box ``(x, y, w, h)``: edges rounded half up, clipped to the frame;
    None when nothing of it is left."""
    try:
        x, y, w, h = (float(v) for v in box)
    except (TypeError, ValueError):
        raise AegisError(f"a person box must be 4 numbers (x, y, w, h), got {box!r:.80}") from None
    if not all(math.isfinite(v) for v in (x, y, w, h)):
        raise AegisError(f"a person box must be 4 finite numbers (x, y, w, h), got {box!r:.80}")
    x0, y0 = max(0, math.floor(x + 0.5)), max(0, math.floor(y + 0.5))
    x1, y1 = min(width, math.floor(x + w + 0.5)), min(height, math.floor(y + h + 0.5))
    return (x0, y0, x1, y1) if x1 > x0 and y1 > y0 else None


def _integral(y: np.ndarray) -> np.ndarray:
    ii = np.zeros((y.shape[0] + 1, y.shape[1] + 1))
    np.cumsum(np.cumsum(y, axis=0), axis=1, out=ii[1:, 1:])
    return ii


def _window_means(ii: np.ndarray, u: np.ndarray, v: np.ndarray, w: int, h: int) -> np.ndarray:
    return (ii[v + h, u + w] - ii[v, u + w] - ii[v + h, u] + ii[v, u]) / (w * h)


def _border_windows(x0: int, y0: int, w: int, h: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-left corners of the windows flush with the border of the neighbourhood [x0 - w, x0 + 2w) x
    [y0 - h, y0 + 2h), each once."""
    us = np.arange(x0 - w, x0 + w + 1)
    vs = np.arange(y0 - h + 1, y0 + h)  # the side columns without the corners the rows already hold
    u = np.concatenate([us, us, np.full(vs.size, x0 - w), np.full(vs.size, x0 + w)])
    v = np.concatenate([np.full(us.size, y0 - h), np.full(us.size, y0 + h), vs, vs])
    return u, v


def _covered_area(u: np.ndarray, v: np.ndarray, w: int, h: int) -> int:
    """Pixels covered by the union of the w x h windows at (u, v) (a difference array over their bounding box)."""
    u0, v0 = int(u.min()), int(v.min())
    diff = np.zeros((int(v.max()) - v0 + h + 1, int(u.max()) - u0 + w + 1), np.int64)
    np.add.at(diff, (v - v0, u - u0), 1)
    np.add.at(diff, (v - v0, u - u0 + w), -1)
    np.add.at(diff, (v - v0 + h, u - u0), -1)
    np.add.at(diff, (v - v0 + h, u - u0 + w), 1)
    return int(np.count_nonzero(np.cumsum(np.cumsum(diff, axis=0), axis=1)))


def person_visibility(rgb: np.ndarray, boxes: Sequence[Sequence[float]]) -> tuple[float, ...]:
    """V (module docstring) of each person box ``(x, y, w, h)`` (COCO, px) of one image, in the given order. Every
    box given is a person whose pixels no other person's windows may use."""
    rgb = check_rgb_image(rgb, "image")
    height, width = rgb.shape[:2]
    pboxes = [pixel_box(b, width, height) for b in boxes]
    if not pboxes:
        return ()
    ii = _integral(_luma_dn(rgb))
    present = np.array([b for b in pboxes if b is not None], dtype=np.int64).reshape(-1, 4)
    out: list[float] = []
    for box in pboxes:
        if box is None:
            out.append(math.nan)
            continue
        x0, y0, x1, y1 = box
        w, h = x1 - x0, y1 - y0
        u, v = _border_windows(x0, y0, w, h)
        keep = (u >= 0) & (v >= 0) & (u + w <= width) & (v + h <= height)
        u, v = u[keep], v[keep]
        # Drop windows overlapping any person box (the own box never does: these windows only touch it).
        hit = ((u[:, None] < present[None, :, 2]) & (u[:, None] + w > present[None, :, 0])
               & (v[:, None] < present[None, :, 3]) & (v[:, None] + h > present[None, :, 1])).any(axis=1)
        u, v = u[~hit], v[~hit]
        if u.size == 0 or _covered_area(u, v, w, h) < MIN_SURROUND_BOXES * w * h:
            out.append(math.nan)
            continue
        surround = _window_means(ii, u, v, w, h)
        mu = float(_window_means(ii, np.array([x0]), np.array([y0]), w, h)[0])
        diff = abs(mu - float(np.median(surround)))
        spread = float(np.std(surround))
        out.append(diff / spread if spread > 0 else (math.inf if diff > 0 else 0.0))
    return tuple(out)


@dataclass(frozen=True)
class VisibilitySummary:
    """Over a set of persons: ``n_persons`` given, ``n_measured`` with a V (not NaN), the ``median`` V and the
    ``detectable_share`` with V >= 5 (Rose's k), both over the measured ones (NaN when none is)."""

    n_persons: int
    n_measured: int
    median: float
    detectable_share: float

    def to_dict(self) -> dict:
        def num(v: float):
            return v if math.isfinite(v) else None

        return {"n_persons": self.n_persons, "n_measured": self.n_measured, "median": num(self.median),
                "detectable_share": num(self.detectable_share)}


def summarize_visibility(values: Iterable[float]) -> VisibilitySummary:
    """:class:`VisibilitySummary` of per-person V values (NaN = not measured; +inf counts as detectable)."""
    vals = [float(v) for v in values]
    measured = np.array([v for v in vals if not math.isnan(v)], dtype=np.float64)
    if measured.size == 0:
        return VisibilitySummary(len(vals), 0, math.nan, math.nan)
    return VisibilitySummary(len(vals), int(measured.size), float(np.median(measured)),
                             float(np.mean(measured >= ROSE_K)))
