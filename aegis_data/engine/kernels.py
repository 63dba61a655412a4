"""Exact numeric building blocks of the aegis-v1 corruptions (private; used by ``aegis_data.engine.corruptions``).

Bit-identity rules followed throughout (see docs/CORRUPTIONS.md, "Determinism design"):

* Only IEEE-754 float64/float32 ``+ - * /`` and ``sqrt`` (correctly rounded, so identical on every CPU and
  SIMD path) in element-wise NumPy code, in a fixed order; no ``exp/log/pow/sin`` on pixel data. Sines and
  Bessel series are evaluated here with those basic operations.
* Convolutions run in OpenCV on float64 arrays holding *integers* with *integer* kernels: every product and
  partial sum is an exact integer below 2**53, so the result cannot depend on summation order, FMA or SIMD.
* Resampling uses OpenCV's fixed-point ``INTER_LINEAR_EXACT`` on uint16, or exact integer block sums.
* Noise fields and masks are carried as uint16 fixed point (value / 65535).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import cv2
import numpy as np

from aegis_data.compiled import load_extension

U16 = 65535.0
# Read at call time (tests swap it to compare both paths).
CKERNELS = load_extension("aegis_data.engine._ckernels", "engine loops")


def kernels_backend() -> str:
    """``compiled`` or ``numpy``: which implementation of the engine's inner loops this process runs."""
    return "numpy" if CKERNELS is None else "compiled"


TWO_PI = 2.0 * math.pi  # the float64 constant; only ever multiplied, never passed to libm


# ----------------------------------------------------------------------------------------------------------
# Rounding and strips
# ----------------------------------------------------------------------------------------------------------
def to_uint8(x: np.ndarray, scratch: bool = False, clip: bool = True) -> np.ndarray:
    """The suite's rounding ``floor(clip(x, 0, 1) * 255 + 0.5)`` for x in the [0, 1] domain.

    Implemented as a clip of ``x*255 + 0.5`` to [0, 255] followed by truncation, which equals that
    formula for every x (truncation is floor for non-negative values). ``scratch=True`` lets it overwrite
    ``x`` (a temporary of the caller) instead of allocating. ``clip=False`` skips the clip; only for callers
    that have proven ``x*255 + 0.5`` (float32 ops) lies in [0, 256) for every element, so it is a no-op.
    """
    if scratch:
        y = x
        y *= 255.0
    else:
        y = x * 255.0
    y += 0.5
    if clip:
        np.clip(y, 0.0, 255.0, out=y)
    return y.astype(np.uint8)


def row_strips(height: int, width: int, target_pixels: int = 1 << 17) -> Iterator[slice]:
    """Row slices covering ``height`` rows, each about ``target_pixels`` pixels (keeps temporaries in cache)."""
    rows = max(1, target_pixels // max(1, width))
    for r0 in range(0, height, rows):
        yield slice(r0, min(height, r0 + rows))


# ----------------------------------------------------------------------------------------------------------
# Exact elementary functions (basic IEEE operations only)
# ----------------------------------------------------------------------------------------------------------
def sin_cos_turns(turns):
    """(sin, cos) of an angle given in turns (1 turn = 2*pi rad), float64, |error| about 1e-16
    (at most 1.2e-16 against 30-digit references over [0, 1) turns, measured).

    Range reduction ``r - floor(r)`` is exact; the reduced angle |x| <= pi/4 is fed to Taylor polynomials
    (terms to x**17 / x**16) evaluated with Horner's rule, so the result is bit-identical on any machine.
    """
    r = np.asarray(turns, dtype=np.float64)
    r = r - np.floor(r)
    quadrant = np.floor(r * 4.0 + 0.5)
    x = (r - quadrant * 0.25) * TWO_PI
    x2 = x * x
    # Horner from the highest term: sin x = x (1 - x2/6 (1 - x2/20 (1 - x2/42 (...)))), cos likewise.
    s = np.ones_like(x2)
    c = np.ones_like(x2)
    for k in range(8, 0, -1):
        s = 1.0 - (x2 / float((2 * k) * (2 * k + 1))) * s
        c = 1.0 - (x2 / float((2 * k - 1) * (2 * k))) * c
    s = x * s
    q = quadrant.astype(np.int64) % 4
    sin = np.select([q == 0, q == 1, q == 2], [s, c, -s], -c)
    cos = np.select([q == 0, q == 1, q == 2], [c, -s, -c], s)
    if np.ndim(turns) == 0:
        return float(sin), float(cos)
    return sin, cos


def discrete_gaussian(sigma: float, radius: int | None = None, scale: int = 1 << 16) -> np.ndarray:
    """Integer 1-D kernel (int64, length 2R+1) approximating a Gaussian of standard deviation ``sigma`` px.

    Lindeberg's discrete Gaussian ``T(n, t) = exp(-t) I_n(t)`` with ``t = sigma**2`` has variance exactly
    ``sigma**2`` on the integer grid and stays a true blur for any sigma > 0 (neighbour weight ~ sigma**2/2),
    unlike a sampled Gaussian that collapses to a 1x1 identity below ~1/3 px. The Bessel values come from their
    power series (basic operations only; the ``exp(-t)`` factor cancels in the normalisation). Weights are
    normalised over ``|n| <= R`` (default ``R = max(1, ceil(4 sigma))``) and rounded to integers summing to
    about ``scale``; the first neighbour is kept >= 1 so a positive sigma never rounds to the identity.
    """
    if not sigma > 0:
        raise ValueError(f"sigma must be > 0, got {sigma}")
    t = float(sigma) * float(sigma)
    r = max(1, int(math.ceil(4.0 * sigma))) if radius is None else max(0, int(radius))
    half = t / 2.0
    q = half * half
    vals = []
    for n in range(r + 1):
        term = 1.0
        for i in range(1, n + 1):
            term = term * half / i
        total = term
        m = 0
        while m < 400:
            m += 1
            term = term * q / (m * (m + n))
            total += term
            if term < total * 1e-18:
                break
        vals.append(total)
    norm = vals[0] + 2.0 * sum(vals[1:])
    w = [math.floor(v / norm * scale + 0.5) for v in vals]
    if r >= 1:
        w[1] = max(w[1], 1)
    return np.array(w[:0:-1] + w, dtype=np.int64)


def convolve_exact_scaled(
    arr: np.ndarray, kernel: np.ndarray, scale: float, cap_one: bool = False, max_abs: float | None = None
) -> np.ndarray:
    """``convolve_exact(arr, kernel) * scale`` (float64 product), optionally ``np.minimum(., 1.0)``, as float32.

    The compiled loops store that straight from the exact sums; the NumPy code forms the same float64 products.
    """
    if _compiled_takes(arr, kernel):
        out = np.empty(arr.shape, dtype=np.float32)
        _convolve_compiled(out, arr, kernel, 2 if cap_one else 1, scale)
        return out
    blurred = convolve_exact(arr, kernel, max_abs=max_abs)
    blurred *= scale
    if cap_one:
        np.minimum(blurred, 1.0, out=blurred)
    return blurred.astype(np.float32)


def _compiled_takes(arr: np.ndarray, kernel: np.ndarray) -> bool:
    """Whether the compiled loops run this convolution: built, a non-empty (H, W) or (H, W, C) array, odd kernel."""
    return CKERNELS is not None and arr.ndim in (2, 3) and arr.size > 0 and len(kernel) % 2 == 1


def _convolve_compiled(out: np.ndarray, arr: np.ndarray, kernel: np.ndarray, out_kind: int, scale: float) -> None:
    if arr.dtype in (np.bool_, np.uint8):
        src, kind = np.ascontiguousarray(arr).view(np.uint8), 0
    elif np.issubdtype(arr.dtype, np.integer):
        src, kind = np.ascontiguousarray(arr, dtype=np.int64), 1
    else:
        src, kind = np.ascontiguousarray(arr, dtype=np.float64), 2
    taps = np.ascontiguousarray(kernel, dtype=np.float64).ravel()
    CKERNELS.convolve(
        out,
        src,
        kind,
        arr.shape[0],
        arr.shape[1],
        1 if arr.ndim == 2 else arr.shape[2],
        taps,
        taps.size,
        out_kind,
        float(scale),
    )


def convolve_exact(arr: np.ndarray, kernel: np.ndarray, max_abs: float | None = None) -> np.ndarray:
    """Separable 2-D convolution of an integer-valued array with an integer kernel, reflect border.

    ``arr`` holds integers (any numeric dtype); the result is float64 integers (not normalised). Every partial
    sum is an integer < 2**53 for the sizes used here, so OpenCV's SIMD/FMA/threading cannot change a bit.

    ``max_abs``, a bound on ``|arr|`` the caller knows, lets the row pass run in float32 (twice the SIMD
    width) when ``max_abs * sum|kernel| <= 2**24``: every partial sum of the row pass is then an integer of
    magnitude <= 2**24, exact in float32 too. The column pass then runs on those exact integers in float64,
    so the result is the same integers as with both passes in float64.
    """
    if _compiled_takes(arr, kernel):
        out = np.empty(arr.shape, dtype=np.float64)
        _convolve_compiled(out, arr, kernel, 0, 1.0)
        return out
    k = np.asarray(kernel, dtype=np.float64).reshape(-1, 1)
    if max_abs is not None and max_abs * float(np.abs(k).sum()) <= float(1 << 24):
        one = np.ones((1, 1), dtype=np.float64)
        if arr.dtype == np.bool_:
            src = arr.view(np.uint8)  # OpenCV reads 8-bit integers directly
        elif arr.dtype == np.uint8:
            src = arr
        else:
            src = arr.astype(np.float32)  # integers of magnitude <= max_abs <= 2**24: exact
        rows = cv2.sepFilter2D(np.ascontiguousarray(src), cv2.CV_32F, k, one, borderType=cv2.BORDER_REFLECT)
        rows = rows.astype(np.float64)  # rebinding frees the float32 pass before the float64 output exists
        return cv2.sepFilter2D(rows, cv2.CV_64F, one, k, borderType=cv2.BORDER_REFLECT)
    src = np.ascontiguousarray(arr, dtype=np.float64)
    return cv2.sepFilter2D(src, cv2.CV_64F, k, k, borderType=cv2.BORDER_REFLECT)


def upsample_u16(field: np.ndarray, factor: int, height: int, width: int) -> np.ndarray:
    """Bilinear upsampling of a uint16 field by an integer factor, cropped to (height, width).

    Sample i of ``field`` sits at full-resolution coordinate ``(i + 0.5) * factor - 0.5`` (the pixel-centre
    convention of ``block_sum``), which is OpenCV's resize geometry; ``INTER_LINEAR_EXACT`` is fixed-point.
    """
    if factor == 1:
        return np.ascontiguousarray(field[:height, :width])
    h, w = field.shape
    up = cv2.resize(field, (w * factor, h * factor), interpolation=cv2.INTER_LINEAR_EXACT)
    return np.ascontiguousarray(up[:height, :width])


def block_sum(mask: np.ndarray, factor: int) -> np.ndarray:
    """Sums over ``factor x factor`` blocks (int64); edges padded by mirroring to a whole number of blocks."""
    h, w = mask.shape
    hb, wb = -(-h // factor), -(-w // factor)
    c = CKERNELS
    if c is not None and mask.dtype in (np.bool_, np.uint8) and mask.size:
        out = np.empty((hb, wb), dtype=np.int64)
        c.block_sum(out, np.ascontiguousarray(mask).view(np.uint8), h, w, int(factor))
        return out
    # A bool mask is summed from its bytes (no int32 copy of the frame); integer sums are exact either way.
    a: np.ndarray = mask.view(np.uint8) if mask.dtype == np.bool_ else mask.astype(np.int32)
    if hb * factor != h or wb * factor != w:
        a = np.pad(a, ((0, hb * factor - h), (0, wb * factor - w)), mode="symmetric")
    # Rows of each block band first (contiguous adds), then the columns of each block.
    band = a.reshape(hb, factor, wb * factor).sum(axis=1, dtype=np.int32 if mask.dtype == np.bool_ else np.int64)
    return band.reshape(hb, wb, factor).sum(axis=2, dtype=np.int64)


def blur_mask(mask: np.ndarray, sigma: float) -> np.ndarray:
    """Gaussian blur (std ``sigma`` px) of a 0/1 mask, as a uint16 field (value / 65535), same shape.

    For sigma >= 6 px the mask is first summed over ``f x f`` blocks, f = floor(sigma / 3); the small field is
    blurred with a discrete Gaussian of std ``sqrt(sigma**2 - (f**2 - 1)/4) / f`` and upsampled bilinearly. The
    block average (variance (f**2-1)/12) and the bilinear upsampling (about (f**2-1)/6) add their variances,
    so the total is sigma**2; the shape is box * Gaussian * tent, within a few percent of a Gaussian's profile.
    """
    h, w = mask.shape
    f = max(1, int(sigma // 3.0))
    small = block_sum(mask, f) if f > 1 else mask
    s_lr = math.sqrt(max(sigma * sigma - (f * f - 1) / 4.0, 0.25 * f * f)) / f
    k = discrete_gaussian(s_lr)
    blurred = convolve_exact(small, k, max_abs=f * f)  # a block sum of a 0/1 mask is at most f * f
    denom = float(f * f) * float(k.sum()) ** 2
    q = _quantize_u16(blurred, U16 / denom)
    return upsample_u16(q, f, h, w)


def _quantize_u16(values: np.ndarray, scale: float, offset: float = 0.0) -> np.ndarray:
    """``floor((values - offset) * scale + 0.5)`` as uint16, for float64-evaluated values in [0, 65535.5].

    Evaluated in float64 in cache-sized strips; the cast's truncation is the floor, the operand being >= 0.
    """
    q = np.empty(values.shape, dtype=np.uint16)
    c = CKERNELS
    if c is not None and values.dtype in (np.float32, np.float64) and values.size:
        src = np.ascontiguousarray(values)
        c.quantize_u16(q, src, src.size, src.dtype == np.float64, float(scale), float(offset))
        return q
    for strip in row_strips(values.shape[0], values.shape[1], 1 << 15):
        v = values[strip].astype(np.float64)
        if offset:
            v -= offset
        v *= scale
        v += 0.5
        q[strip] = v
    return q


# ----------------------------------------------------------------------------------------------------------
# Value noise
# ----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NoiseSpec:
    """``noise(octaves, base)`` of docs/CORRUPTIONS.md ("The corruptions", helpers)."""

    octaves: int
    base: float


def noise_grid_shapes(height: int, width: int, spec: NoiseSpec) -> list[tuple[int, int]]:
    """Node-grid shape (rows, cols) per octave: ``round(base * 2**o)`` cells on the long side, the short side
    in proportion, at least 2 cells per axis, plus one node."""
    long_side = max(height, width)
    shapes = []
    for o in range(spec.octaves):
        cells = spec.base * (2**o)
        cy = max(2, int(math.floor(cells * height / long_side + 0.5)))
        cx = max(2, int(math.floor(cells * width / long_side + 0.5)))
        shapes.append((cy + 1, cx + 1))
    return shapes


def noise_work_factor(height: int, width: int, spec: NoiseSpec) -> int:
    """Integer factor between the frame and the grid on which the cubic is evaluated exactly.

    The finest octave keeps at least 4 evaluated samples per cell; in between, bilinear upsampling of the
    smooth field deviates from the bicubic by about 1% of the field's range at most.
    """
    finest = spec.base * 2 ** (spec.octaves - 1)
    return max(1, int(max(height, width) // (4.0 * finest)))


def _cubic_taps(positions: np.ndarray, cells: int):
    """Catmull-Rom (Keys a = -1/2) tap indices (4, n) and weights (4, n) for grid coordinates in [0, cells]."""
    j = np.minimum(np.floor(positions), cells - 1).astype(np.int64)
    t = positions - j
    t2 = t * t
    t3 = t2 * t
    w = np.stack(
        [
            (-0.5 * t3 + t2) - 0.5 * t,
            (1.5 * t3 - 2.5 * t2) + 1.0,
            (-1.5 * t3 + 2.0 * t2) + 0.5 * t,
            0.5 * t3 - 0.5 * t2,
        ]
    )
    idx = np.clip(np.stack([j - 1, j, j + 1, j + 2]), 0, cells)
    return idx, w, j


def _grid_positions(n_work: int, factor: int, n_full: int, cells: int) -> np.ndarray:
    """Grid coordinate of each work sample: its full-resolution pixel centre mapped so pixel 0 is node 0
    and pixel n_full-1 is the last node."""
    x = (np.arange(n_work, dtype=np.float64) + 0.5) * factor - 0.5
    return np.clip(x * (cells / max(n_full - 1, 1)), 0.0, float(cells))


def _cubic_columns(grid: np.ndarray, xi: np.ndarray, xw: np.ndarray, weight: float) -> np.ndarray:
    """The x pass: ``(((g[:, xi0] w0 + g[:, xi1] w1) + g[:, xi2] w2) + g[:, xi3] w3) * weight`` in float64,
    returned as float32 (node rows, output columns).

    Evaluated on the transposed grid, where each tap gathers whole rows (a memcpy each; gathering columns goes
    element by element), in strips that stay in cache. The element-wise operations are the same.
    """
    grid_t = np.ascontiguousarray(grid.T)
    n_out, n_nodes = xi.shape[1], grid_t.shape[1]
    rows_t = np.empty((n_out, n_nodes), dtype=np.float32)
    for strip in row_strips(n_out, n_nodes, 1 << 14):
        acc = grid_t[xi[0, strip]] * xw[0, strip, None]
        for k in (1, 2, 3):
            tap = grid_t[xi[k, strip]]
            tap *= xw[k, strip, None]
            acc += tap
        np.multiply(acc, weight, out=rows_t[strip])  # float64 product, rounded to float32 as astype does
    return np.ascontiguousarray(rows_t.T)


def _sum_cubic_rows(octaves: list, n_rows: int, n_cols: int) -> np.ndarray:
    """The y pass, summed over octaves: ``total[r] = sum_o ((rows[yi0] w0 + rows[yi1] w1) + rows[yi2] w2) +
    rows[yi3] w3`` in float32, added octave by octave onto zeros (``octaves``: (rows, yi, yw) per octave).

    Works strip by strip of output rows, all octaves per strip, so the running sum stays in cache; the four
    node rows of each output row are gathered for the whole strip (one broadcast block per grid interval cost
    a Python round trip per interval, which dominated on fine grids). Per element these are the same float32
    operations in the same order as octave after octave over the whole field.
    """
    total = np.empty((n_rows, n_cols), dtype=np.float32)
    for strip in row_strips(n_rows, n_cols, 1 << 15):
        acc = np.zeros((strip.stop - strip.start, n_cols), dtype=np.float32)
        for rows, yi, yw in octaves:
            block = rows[yi[0, strip]]
            block *= yw[0, strip, None]
            for k in (1, 2, 3):
                tap = rows[yi[k, strip]]
                tap *= yw[k, strip, None]
                block += tap
            acc += block
        total[strip] = acc
    return total


def value_noise(height: int, width: int, spec: NoiseSpec, grids: tuple[np.ndarray, ...]) -> np.ndarray:
    """The suite's value noise (docs/CORRUPTIONS.md) from pre-drawn uniform node grids: uint16 field (H, W), value /
    65535 in [0, 1].

    Octave o's grid is upsampled with separable Catmull-Rom cubic interpolation in float64 (fixed operation
    order), weighted 0.55**o and summed; the sum is min-max normalised. (The documented division by the weight sum
    cancels under the min-max normalisation and is omitted.) A constant field (range below 1e-5 of its
    magnitude) maps to 0.5.
    """
    f = noise_work_factor(height, width, spec)
    hw, ww = -(-height // f), -(-width // f)
    octaves = []
    weight = 1.0
    c = CKERNELS
    for grid in grids:
        gy, gx = grid.shape
        cy, cx = gy - 1, gx - 1
        xi, xw, _ = _cubic_taps(_grid_positions(ww, f, width, cx), cx)
        if c is not None:
            rows = np.empty((gy, ww), dtype=np.float32)
            c.noise_columns(
                rows,
                np.ascontiguousarray(grid, dtype=np.float64),
                gy,
                gx,
                np.ascontiguousarray(xi),
                np.ascontiguousarray(xw),
                ww,
                weight,
            )
        else:
            rows = _cubic_columns(grid, xi, xw, weight)
        yi, yw, _ = _cubic_taps(_grid_positions(hw, f, height, cy), cy)
        octaves.append((rows, yi, yw.astype(np.float32)))
        weight *= 0.55
    if c is not None:
        total = np.zeros((hw, ww), dtype=np.float32)
        for first in range(0, len(octaves), 3):  # the compiled y pass takes up to three octaves per call
            c.noise_rows(
                total,
                hw,
                ww,
                [(rows, rows.shape[0], np.ascontiguousarray(yi), yw) for rows, yi, yw in octaves[first : first + 3]],
            )
    else:
        total = _sum_cubic_rows(octaves, hw, ww)
    lo, hi = float(total.min()), float(total.max())
    # A range at float32 rounding level means a constant field (only possible with hand-made grids):
    # normalising it would blow rounding noise up to [0, 1].
    if hi - lo > 1e-5 * max(abs(hi), abs(lo), 1e-30):
        q = _quantize_u16(total, U16 / (hi - lo), lo)
    else:
        q = np.full(total.shape, 32768, dtype=np.uint16)
    return upsample_u16(q, f, height, width)


def top_fraction_mask(field: np.ndarray, coverage: float) -> np.ndarray:
    """``mask(f, c)``: True where a uint16 field is at or above its (1 - c) quantile (bool, same shape).

    The threshold is the ``ceil(c * N)``-th largest value, found exactly from the integer histogram; ties at
    the threshold are included, so at least that many pixels are set.
    """
    n = field.size
    k = max(1, int(math.ceil(coverage * n)))
    counts = np.zeros(65536, dtype=np.int64)
    c = CKERNELS
    if c is not None and field.dtype == np.uint16:
        flat = np.ascontiguousarray(field)
        c.hist_u16(counts, flat, flat.size)
    else:
        # OpenCV counts uint16 levels in integers (bin = level exactly for the range [0, 65536)) and returns
        # them as float32, exact while a strip has fewer than 2**24 pixels.
        for rows in row_strips(field.shape[0], field.shape[1], 1 << 20):
            strip = np.ascontiguousarray(field[rows], dtype=np.uint16)
            counts += cv2.calcHist([strip], [0], None, [65536], [0, 65536]).ravel().astype(np.int64)
    from_top = np.cumsum(counts[::-1])
    threshold = 65535 - int(np.searchsorted(from_top, k))
    return field >= threshold
