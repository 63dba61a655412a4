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
- Windows slid 1 px apart overlap, so ``s_N`` underestimates the spread of independent windows (by 4-11 % for
  16- to 64-px boxes): for white noise the median V reads 8-11 % high (measured on 160 such boxes each).

V is NaN when the windows that fit cover less than :data:`MIN_SURROUND_BOXES` box areas, half of the full
surround's 8 (a person at a frame corner, or crowded by other people: the few windows left are too alike to
measure a spread), or when the box is empty after rounding; it is +inf when the surround is perfectly uniform and
the person differs from it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from aegis_data.errors import AegisError
from aegis_data.files.rgb import check_rgb_image

ROSE_K = 5.0  # Rose's detectability threshold
MIN_SURROUND_BOXES = 4  # the windows used must cover at least this many box areas
# Persons measured per image: far more than any aerial frame holds; a ground-truth file listing more (a hostile or
# broken one) leaves the rest unmeasured instead of multiplying the work.
MAX_MEASURED_PERSONS = 1000


def _luma_dn(rgb: np.ndarray) -> np.ndarray:
    return (
        299 * rgb[:, :, 0].astype(np.int32) + 587 * rgb[:, :, 1].astype(np.int32) + 114 * rgb[:, :, 2].astype(np.int32)
    ) / 1000.0


def pixel_box(box: Sequence[float], width: int, height: int) -> tuple[int, int, int, int] | None:
    """``(x0, y0, x1, y1)`` in whole px of a COCO box ``(x, y, w, h)``: edges rounded half up, clipped to the frame;
    None when nothing of it is left."""
    try:
        x, y, w, h = (float(v) for v in box)
    except (TypeError, ValueError):
        raise AegisError(f"a person box must be 4 numbers (x, y, w, h), got {box!r:.80}") from None
    if not all(math.isfinite(v) for v in (x, y, w, h)):
        raise AegisError(f"a person box must be 4 finite numbers (x, y, w, h), got {box!r:.80}")

    def edge(v: float, side: int) -> int:  # floor(v), clipped to [0, side]; x + w may overflow to inf
        return math.floor(min(max(v, 0.0), float(side)))

    x0, y0 = edge(x + 0.5, width), edge(y + 0.5, height)
    x1, y1 = edge(x + w + 0.5, width), edge(y + h + 0.5, height)
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


def _intervals(starts: np.ndarray, length: int) -> np.ndarray:
    """The union of the intervals [s, s + length) of integer ``starts`` as disjoint (begin, end) rows, sorted."""
    s = np.unique(starts)
    if s.size == 0:
        return np.zeros((0, 2), np.int64)
    breaks = np.flatnonzero(np.diff(s) > length) + 1  # a gap: the next interval starts after this one ends
    begin = s[np.concatenate([[0], breaks])]
    end = s[np.concatenate([breaks - 1, [s.size - 1]])] + length
    return np.stack([begin, end], axis=1).astype(np.int64)


def _measure(runs: np.ndarray, lo: int | None = None, hi: int | None = None) -> int:
    """Length of the union ``runs`` (from :func:`_intervals`), clipped to [lo, hi) when given."""
    if runs.size == 0:
        return 0
    b, e = runs[:, 0], runs[:, 1]
    if lo is not None and hi is not None:  # given together
        b, e = np.maximum(b, lo), np.minimum(e, hi)
    return int(np.maximum(e - b, 0).sum())


def _covered_area(u: np.ndarray, v: np.ndarray, w: int, h: int, x0: int, y0: int) -> int:
    """Pixels covered by the union of the w x h windows at (u, v), which lie on the border of the neighbourhood of
    the box at (x0, y0) (:func:`_border_windows`), in time linear in their number.

    The windows form four strips: top (v = y0 - h) and bottom (v = y0 + h) rows of windows sliding in x, left
    (u = x0 - w) and right (u = x0 + w) columns sliding in y. Each strip is a product of a union of intervals and
    one band, top and bottom share no row and left and right no column, so the union is the four strips' areas
    less the four corner overlaps (top-left, top-right, bottom-left, bottom-right) by inclusion-exclusion."""
    top, bottom = v == y0 - h, v == y0 + h
    left, right = (u == x0 - w) & ~top & ~bottom, (u == x0 + w) & ~top & ~bottom
    xt, xb = _intervals(u[top], w), _intervals(u[bottom], w)
    yl, yr = _intervals(v[left], h), _intervals(v[right], h)
    area = h * (_measure(xt) + _measure(xb)) + w * (_measure(yl) + _measure(yr))
    for xs, band_y in ((xt, (y0 - h, y0)), (xb, (y0 + h, y0 + 2 * h))):
        for ys, band_x in ((yl, (x0 - w, x0)), (yr, (x0 + w, x0 + 2 * w))):
            area -= _measure(xs, *band_x) * _measure(ys, *band_y)
    return area


def _people_integral(present: np.ndarray, height: int, width: int) -> np.ndarray:
    """Integral image ((h + 1, w + 1) int64) of the number of person boxes covering each pixel: a window overlaps
    some person box exactly when its sum is not zero (a difference array, O(frame + boxes))."""
    diff = np.zeros((height + 1, width + 1), np.int64)
    np.add.at(diff, (present[:, 1], present[:, 0]), 1)
    np.add.at(diff, (present[:, 1], present[:, 2]), -1)
    np.add.at(diff, (present[:, 3], present[:, 0]), -1)
    np.add.at(diff, (present[:, 3], present[:, 2]), 1)
    return _integral(np.cumsum(np.cumsum(diff, axis=0), axis=1)[:height, :width])


def person_visibility(rgb: np.ndarray, boxes: Sequence[Sequence[float]]) -> tuple[float, ...]:
    """V (module docstring) of each person box ``(x, y, w, h)`` (COCO, px) of one image, in the given order. Every
    box given is a person whose pixels no other person's windows may use.

    Bounded work whatever the boxes (a ground-truth file is not trusted): one pass over the frame, then per person
    work linear in its surround's windows (at most about twice the frame's width plus height); only the first
    :data:`MAX_MEASURED_PERSONS` boxes of an image are measured (the rest are NaN, not measured), every box still
    excludes its pixels from the others' surrounds."""
    rgb = check_rgb_image(rgb, "image")
    height, width = rgb.shape[:2]
    pboxes = [pixel_box(b, width, height) for b in boxes]
    if not pboxes:
        return ()
    ii = _integral(_luma_dn(rgb))
    present = np.array([b for b in pboxes if b is not None], dtype=np.int64).reshape(-1, 4)
    people = _people_integral(present, height, width)
    out: list[float] = []
    for k, box in enumerate(pboxes):
        if box is None or k >= MAX_MEASURED_PERSONS:
            out.append(math.nan)
            continue
        x0, y0, x1, y1 = box
        w, h = x1 - x0, y1 - y0
        u, v = _border_windows(x0, y0, w, h)
        keep = (u >= 0) & (v >= 0) & (u + w <= width) & (v + h <= height)
        u, v = u[keep], v[keep]
        # Drop windows overlapping any person box (the own box never does: these windows only touch it).
        hit = (people[v + h, u + w] - people[v, u + w] - people[v + h, u] + people[v, u]) != 0
        u, v = u[~hit], v[~hit]
        if u.size == 0 or _covered_area(u, v, w, h, x0, y0) < MIN_SURROUND_BOXES * w * h:
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

        return {
            "n_persons": self.n_persons,
            "n_measured": self.n_measured,
            "median": num(self.median),
            "detectable_share": num(self.detectable_share),
        }


def summarize_visibility(values: Iterable[float]) -> VisibilitySummary:
    """:class:`VisibilitySummary` of per-person V values (NaN = not measured; +inf counts as detectable)."""
    vals = [float(v) for v in values]
    measured = np.array([v for v in vals if not math.isnan(v)], dtype=np.float64)
    if measured.size == 0:
        return VisibilitySummary(len(vals), 0, math.nan, math.nan)
    return VisibilitySummary(
        len(vals), int(measured.size), float(np.median(measured)), float(np.mean(measured >= ROSE_K))
    )
