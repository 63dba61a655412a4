"""Camera-realism statistics of one image (docs/CORRUPTIONS.md, "Checking the physics against real footage").

Four measurements that tell a camera's picture from a rendered one, each a deterministic function of one uint8 RGB
image (HxWx3), computed in float64 on luma in DN (digital numbers, the 0-255 scale):
``Y = 0.299 R + 0.587 G + 0.114 B``; chroma is BT.601 ``Cb = -0.168736 R - 0.331264 G + 0.5 B``,
``Cr = 0.5 R - 0.418688 G - 0.081312 B`` (the JPEG matrix), also in DN.

- :func:`noise_curve` / :func:`noise_sigma`: noise standard deviation of luma (DN) against brightness (DN).
- :func:`noise_autocorrelation`: lag-1 correlation of that noise, horizontal and vertical (dimensionless).
- :func:`chroma_luma_noise_ratio`: noise std of Cb and Cr over that of luma (dimensionless).
- :func:`edge_width` / :func:`edge_widths`: the 10-90 % rise distance across strong edges (px), in the most
  blurred edge orientation.

**Flat blocks.** The three noise statistics share one estimator. The frame is cut into 8x8 blocks (the last
partial row and column of blocks are left out). In each block a least-squares plane ``a + b x + c y`` is fitted to
luma and removed; for white noise the residual keeps 61 of the 64 degrees of freedom, so ``sum(residual^2) / 61``
is an unbiased estimate of the noise variance, whatever the block's brightness gradient. Scene texture
also lands in the residual, so only flat blocks are used: per brightness bin (16 bins of 16 DN, by the block's mean
luma) the quarter of the blocks whose *neighbourhood* is flattest, where a block's flatness score is the largest
residual energy among its 8 neighbouring blocks. The score deliberately leaves out the block's own pixels: for
white noise it is then independent of the block's own residual, so picking low scores does not pick low noise
(picking the quarter of blocks with the lowest energy of their own would read white noise 12 % low). Of the picked
blocks, those whose own energy exceeds 4x the median of the picked ones are dropped (a textured block amid flat ones;
for white noise that drops fewer than one block in a million). Blocks with more than 4 pixels at luma 0 or 255 (all
three channels clipped: black bars, blown-out sky) are never used, nor scored as flat neighbours. In a brightness range
that holds no flat surface at all the estimate includes texture and is an upper bound.

The plane takes out only the block's mean and tilt, so the residual holds the noise at all spatial frequencies
above the 8-px block; but correlated noise has more of its power at low frequencies, which the plane absorbs (61
degrees of freedom would read noise smoothed by a 3x3 binomial kernel 10 % low). The noise's correlation is
therefore measured too (:func:`noise_autocorrelation`) and the degrees of freedom follow from it exactly; sigma is
then unbiased for white noise and for noise correlated over up to 2 px.

Each function takes an optional ``region = (x, y, w, h)`` in px: the valid pixels (letterbox bars outside it are
ignored). :func:`letterbox_region` finds it for near-black bars. On a 12-MP frame :func:`realism_statistics`, all four
together, takes about 2 s of one core (1.8 s CPU, measured on a HERIDAL frame); the edge search measures at most
:data:`MAX_EDGES` edge points, by a fixed stride.

The disk edge is :func:`compare_realism` (``aegis_data.split.measure.realism_report`` passes it what the split's
manifest records), used by ``aegis realism``: the statistics of a folder of real frames beside
those of a split's rendering of one condition and of its clean images, with one distance per statistic.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from aegis_data.engine.config import SuiteConfig
from aegis_data.engine.realism_atmosphere import (
    ATMOSPHERE_DISTANCES,
    AtmosphereSet,
    atmosphere_distances,
    atmosphere_statistics,
    crop_region,
    finite_median,
    log_rms,
    summarize_atmosphere,
)
from aegis_data.engine.scale import Scale
from aegis_data.errors import AegisError
from aegis_data.files.imageio import IMAGE_SUFFIXES, list_images, read_rgb
from aegis_data.files.layout import condition_dir, link_target
from aegis_data.files.rgb import check_rgb_image

BLOCK = 8
BIN_WIDTH_DN = 16
N_BINS = 256 // BIN_WIDTH_DN
FLAT_SHARE = 0.25  # share of each brightness bin's blocks kept as flat
TRIM_FACTOR = 4.0  # a kept block whose energy exceeds this many times the bin's median is texture
MAX_CLIPPED = 4  # a block with more pixels at luma 0 or 255 is not used
MIN_BIN_BLOCKS = 4  # fewer flat blocks: the bin's sigma is NaN
# BT.601 full-range (JPEG) chroma rows.
CB_WEIGHTS = (-0.168736, -0.331264, 0.5)
CR_WEIGHTS = (0.5, -0.418688, -0.081312)
# Lags (dx, dy) whose noise correlation the autocorrelation estimate solves for: one half of the 5x5 window.
LAGS = tuple((dx, dy) for dy in range(3) for dx in range(-2, 3) if dy > 0 or dx > 0)

# Edge width.
MIN_GRADIENT = 2.0  # candidate edge points: gradient maxima of at least this many DN/px
MIN_CONTRAST_DN = 20.0  # a strong edge: the step between its two plateaus

PROFILE_HALF_PX = 24  # the profile runs +-24 px along the gradient; widths up to ~24 px are measured
PROFILE_STEP_PX = 0.5
EXTENT_SLOPE = 0.1  # the edge ends where the profile's slope falls to this share of its slope at the centre
MAX_EDGES = 12000  # candidate edge points measured, by a fixed stride
N_ORIENTATIONS = 4  # edge normals binned by 45 degrees
MIN_ORIENTATION_EDGES = 20  # an orientation's median counts with at least this many edges ...
MIN_ORIENTATION_SHARE = 0.05  # ... and this share of all measured edges
DETECT_SIGMA_PX = 1.0  # Gaussian smoothing before the gradient used to find edges (not for the profile)


# --- input ---------------------------------------------------------------------------------------------------
def _luma_clipped(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Luma in DN (float64) and the mask of pixels at luma 0 or 255 (all three channels clipped), from integer
    arithmetic so that "clipped" is exact."""
    y1000 = 299 * rgb[:, :, 0].astype(np.int32)
    y1000 += 587 * rgb[:, :, 1].astype(np.int32)
    y1000 += 114 * rgb[:, :, 2].astype(np.int32)
    clipped = (y1000 == 0) | (y1000 == 255000)
    return y1000 / 1000.0, clipped


def letterbox_region(rgb: np.ndarray, level: int = 16) -> tuple[int, int, int, int]:
    """``(x, y, w, h)`` of the frame without its letterbox: the outer rows and columns in which no pixel's luma
    exceeds ``level`` DN (near-black bars) are cut off. The whole frame when there are none; a frame that is dark
    everywhere is returned whole."""
    y, _ = _luma_clipped(check_rgb_image(rgb, "image"))
    lit_rows = np.flatnonzero(y.max(axis=1) > level)
    lit_cols = np.flatnonzero(y.max(axis=0) > level)
    if lit_rows.size == 0 or lit_cols.size == 0:
        return 0, 0, rgb.shape[1], rgb.shape[0]
    return (
        int(lit_cols[0]),
        int(lit_rows[0]),
        int(lit_cols[-1] - lit_cols[0] + 1),
        int(lit_rows[-1] - lit_rows[0] + 1),
    )


# --- flat blocks ---------------------------------------------------------------------------------------------
_OFFSETS = np.arange(BLOCK, dtype=np.float64) - (BLOCK - 1) / 2.0  # pixel coordinate within a block, centred
_OFFSET_SS = BLOCK * float(_OFFSETS @ _OFFSETS)  # sum of x^2 over a block (336)


def _plane_energy(blocks: np.ndarray) -> np.ndarray:
    """Residual energy after removing each block's least-squares plane; ``blocks`` is (..., 8, 8)."""
    total = blocks.sum(axis=(-2, -1))
    sx = blocks.sum(axis=-2) @ _OFFSETS
    sy = blocks.sum(axis=-1) @ _OFFSETS
    sq = np.einsum("...ij,...ij->...", blocks, blocks)
    return np.maximum(sq - total * total / (BLOCK * BLOCK) - (sx * sx + sy * sy) / _OFFSET_SS, 0.0)


def _plane_residual(blocks: np.ndarray) -> np.ndarray:
    mean = blocks.mean(axis=(-2, -1))
    bx = (blocks.sum(axis=-2) @ _OFFSETS) / _OFFSET_SS
    by = (blocks.sum(axis=-1) @ _OFFSETS) / _OFFSET_SS
    return (
        blocks
        - mean[..., None, None]
        - bx[..., None, None] * _OFFSETS[None, :]
        - by[..., None, None] * _OFFSETS[:, None]
    )


@dataclass(frozen=True)
class _Flat:
    """The flat blocks of one image: block row/column indices and luma residual energies; per bin totals."""

    rows: np.ndarray
    cols: np.ndarray
    energy: np.ndarray
    bin_energy: np.ndarray  # per bin: summed energy of its kept blocks
    bin_count: np.ndarray  # per bin: kept blocks


def _flat_blocks(y: np.ndarray, clipped: np.ndarray) -> _Flat:
    nby, nbx = y.shape[0] // BLOCK, y.shape[1] // BLOCK
    empty = np.zeros(0, np.int64)
    if nby == 0 or nbx == 0:
        return _Flat(empty, empty, np.zeros(0), np.zeros(N_BINS), np.zeros(N_BINS, np.int64))
    y4 = y[: nby * BLOCK, : nbx * BLOCK].reshape(nby, BLOCK, nbx, BLOCK)
    total = y4.sum(axis=(1, 3))
    sx = y4.sum(axis=1) @ _OFFSETS  # (nby, nbx)
    sy = np.einsum("aibj,i->ab", y4, _OFFSETS)
    sq = np.einsum("aibj,aibj->ab", y4, y4)
    energy = np.maximum(sq - total * total / (BLOCK * BLOCK) - (sx * sx + sy * sy) / _OFFSET_SS, 0.0)
    n_clipped = clipped[: nby * BLOCK, : nbx * BLOCK].reshape(nby, BLOCK, nbx, BLOCK).sum(axis=(1, 3))
    usable = n_clipped <= MAX_CLIPPED
    # Flatness score: the largest energy among the 8 neighbours (a clipped neighbour counts as textured; a missing
    # one, beyond the frame, does not count).
    padded = np.full((nby + 2, nbx + 2), -np.inf)
    padded[1:-1, 1:-1] = np.where(usable, energy, np.inf)
    score = np.full((nby, nbx), -np.inf)
    for dy in range(3):
        for dx in range(3):
            if dy != 1 or dx != 1:
                np.maximum(score, padded[dy : dy + nby, dx : dx + nbx], out=score)
    bins = np.clip((total / (BLOCK * BLOCK * BIN_WIDTH_DN)).astype(np.int64), 0, N_BINS - 1)
    flat_energy, flat_score, flat_bins = energy.ravel(), score.ravel(), bins.ravel()
    usable_flat = usable.ravel()
    kept: list[np.ndarray] = []
    bin_energy = np.zeros(N_BINS)
    bin_count = np.zeros(N_BINS, np.int64)
    for k in range(N_BINS):
        idx = np.flatnonzero(usable_flat & (flat_bins == k))
        if idx.size == 0:
            continue
        idx = idx[np.argsort(flat_score[idx], kind="stable")][: math.ceil(FLAT_SHARE * idx.size)]
        med = float(np.median(flat_energy[idx]))
        if med > 0.0:
            idx = idx[flat_energy[idx] <= TRIM_FACTOR * med]
        kept.append(np.sort(idx))
        bin_energy[k] = float(flat_energy[idx].sum())
        bin_count[k] = idx.size
    chosen = np.concatenate(kept) if kept else empty
    return _Flat(chosen // nbx, chosen % nbx, flat_energy[chosen], bin_energy, bin_count)


def _gather(plane: np.ndarray, flat: _Flat) -> np.ndarray:
    """The kept 8x8 blocks of an HxW(xC) array, as (n, 8, 8(, C))."""
    nby, nbx = plane.shape[0] // BLOCK, plane.shape[1] // BLOCK
    shaped = plane[: nby * BLOCK, : nbx * BLOCK].reshape(nby, BLOCK, nbx, BLOCK, *plane.shape[2:])
    return shaped[flat.rows, :, flat.cols]


# --- correlation model ----------------------------------------------------------------------------------
def _shift_matrix(dx: int, dy: int) -> np.ndarray:
    """64x64 Q with Q[i, j] = 1 where pixel j is pixel i moved by (dx, dy) inside the block."""
    q = np.zeros((BLOCK * BLOCK, BLOCK * BLOCK))
    for y in range(BLOCK):
        for x in range(BLOCK):
            if 0 <= x + dx < BLOCK and 0 <= y + dy < BLOCK:
                q[y * BLOCK + x, (y + dy) * BLOCK + x + dx] = 1.0
    return q


@lru_cache(maxsize=1)
def _lag_moments() -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """Expected residual sums under the noise covariance ``C = s^2 (I + sum_m rho_m (Q_m + Q_m^T))`` (correlated
    only within :data:`LAGS`), per unit ``s^2``: ``E[sum r^2] = a0 + a . rho`` and
    ``E[sum_lag l r_i r_j] = b0_l + (B rho)_l``, for the plane residual ``r = M n`` (``M = I - H``, H the plane's
    hat matrix). White noise: ``a0 = 61``."""
    xs = np.tile(_OFFSETS, BLOCK)
    ys = np.repeat(_OFFSETS, BLOCK)
    design = np.stack([np.ones(BLOCK * BLOCK), xs, ys], axis=1)
    hat = design @ np.linalg.inv(design.T @ design) @ design.T
    m = np.eye(BLOCK * BLOCK) - hat
    q = [_shift_matrix(dx, dy) for dx, dy in LAGS]
    sym = [qm + qm.T for qm in q]
    a0 = float(np.trace(m))
    a = np.array([np.trace(m @ s) for s in sym])
    b0 = np.array([np.trace(ql @ m) for ql in q])
    b = np.array([[np.trace(ql @ m @ s @ m) for s in sym] for ql in q])
    return a0, a, b0, b


def _lag_sums(r: np.ndarray) -> np.ndarray:
    """Per lag in :data:`LAGS`: sum over the blocks of ``r[y, x] * r[y + dy, x + dx]``."""
    out = np.empty(len(LAGS))
    for k, (dx, dy) in enumerate(LAGS):
        a = r[:, : BLOCK - dy, max(0, -dx) : BLOCK - max(0, dx)]
        b = r[:, dy:, max(0, dx) : BLOCK - max(0, -dx)]
        out[k] = float(np.einsum("nij,nij->", a, b))
    return out


def _solve_correlation(blocks: np.ndarray) -> tuple[np.ndarray, float]:
    """(noise correlation per lag of :data:`LAGS`, residual degrees of freedom ``a0 + a . rho``) from the plane
    residuals of (n, 8, 8) blocks; (NaNs, 61) when they hold no residual.

    The measured ratios ``R_l = sum r_i r_(i+l) / sum r_i^2`` equal ``(b0_l + B_l . rho) / (a0 + a . rho)`` in
    expectation, which is linear in rho once multiplied out: ``(B - R a^T) rho = R a0 - b0``.
    """
    a0, a, b0, b = _lag_moments()
    r = _plane_residual(blocks)
    s0 = float(np.einsum("nij,nij->", r, r))
    if r.shape[0] == 0 or s0 <= 0.0:
        return np.full(len(LAGS), np.nan), a0
    ratio = _lag_sums(r) / s0
    try:
        rho = np.linalg.solve(b - ratio[:, None] * a[None, :], ratio * a0 - b0)
    except np.linalg.LinAlgError:  # only for residuals no noise could produce
        rho = np.full(len(LAGS), np.nan)
    if not np.all(np.isfinite(rho)):
        return np.full(len(LAGS), np.nan), a0
    # A correlation beyond [-1, 1] is texture, not noise; clipped, the degrees of freedom stay above 22.
    return rho, a0 + float(a @ np.clip(rho, -1.0, 1.0))


@dataclass(frozen=True)
class _Analysis:
    rgb: np.ndarray
    y: np.ndarray
    flat: _Flat
    rho: np.ndarray  # luma noise correlation per lag
    dof: float  # the luma residual's degrees of freedom per block under that correlation


def _analyse(rgb: np.ndarray, region: Sequence[int] | None) -> _Analysis:
    rgb = crop_region(rgb, region)
    y, clipped = _luma_clipped(rgb)
    flat = _flat_blocks(y, clipped)
    rho, dof = _solve_correlation(_gather(y, flat))
    return _Analysis(rgb, y, flat, rho, dof)


# --- 1. noise curve -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NoiseCurve:
    """Luma noise against brightness. ``centres``: bin centres (DN, 16 bins of 16 DN by block mean luma);
    ``sigma``: noise std per bin (DN; NaN with fewer than 4 flat blocks); ``counts``: flat blocks per bin;
    ``noise_sigma``: the summary (DN), the median of sigma over the flat blocks (each block counts with its bin's
    sigma, i.e. the block-count-weighted median of the bins' sigma); NaN when no bin has a sigma."""

    centres: tuple[float, ...]
    sigma: tuple[float, ...]
    counts: tuple[int, ...]
    noise_sigma: float


BIN_CENTRES = tuple(BIN_WIDTH_DN * (k + 0.5) for k in range(N_BINS))


def _weighted_median(values: Sequence[float], weights: Sequence[int]) -> float:
    pairs = sorted((v, w) for v, w in zip(values, weights) if math.isfinite(v) and w > 0)
    total = sum(w for _, w in pairs)
    acc = 0
    for v, w in pairs:
        acc += w
        if 2 * acc >= total:
            return float(v)
    return math.nan  # no finite value


def _curve(variance_sums: Iterable[float], counts: Iterable[int]) -> NoiseCurve:
    counts_t = tuple(int(c) for c in counts)
    sigma = tuple(math.sqrt(v / c) if c >= MIN_BIN_BLOCKS else math.nan for v, c in zip(variance_sums, counts_t))
    return NoiseCurve(BIN_CENTRES, sigma, counts_t, _weighted_median(sigma, counts_t))


def _noise_curve(an: _Analysis) -> NoiseCurve:
    return _curve(an.flat.bin_energy / an.dof, an.flat.bin_count)


def pool_noise_curves(curves: Iterable[NoiseCurve]) -> NoiseCurve:
    """The noise curve of several images together: per bin the flat blocks' variances pooled
    (``sqrt(sum n_i sigma_i^2 / sum n_i)`` over the images with a sigma there), then the same summary."""
    sums, counts = np.zeros(N_BINS), np.zeros(N_BINS, np.int64)
    for c in curves:
        for k, (s, n) in enumerate(zip(c.sigma, c.counts)):
            if math.isfinite(s):
                sums[k] += s * s * n
                counts[k] += n
    return _curve(sums, counts)


def noise_curve(rgb: np.ndarray, region: Sequence[int] | None = None) -> NoiseCurve:
    """Noise standard deviation of luma (DN) per brightness bin, in flat blocks.

    Per bin ``sigma^2 = sum(E) / (n * dof)`` over its ``n`` flat blocks' plane-residual energies ``E`` (module
    docstring), where ``dof`` is the residual's degrees of freedom per block for the measured noise correlation
    (:func:`noise_autocorrelation`): 61 for white noise, fewer for correlated noise, whose low frequencies the plane
    partly absorbs. So sigma is the noise's per-pixel std, unbiased for white noise and for noise correlated over
    up to 2 px (a 3x3 kernel); noise correlated further reads low (-19 % for white noise blurred by a Gaussian of
    std 1.5 px).
    """
    return _noise_curve(_analyse(rgb, region))


def noise_sigma(rgb: np.ndarray, region: Sequence[int] | None = None) -> float:
    """The median luma noise std over the flat blocks, in DN (:class:`NoiseCurve` ``noise_sigma``)."""
    return noise_curve(rgb, region).noise_sigma


# --- 2. noise autocorrelation -------------------------------------------------------------------------------
@dataclass(frozen=True)
class NoiseCorrelation:
    """Lag-1 correlation coefficient of the luma noise: ``horizontal`` (x, x+1), ``vertical`` (y, y+1) and their
    ``mean``; ``n_blocks`` flat blocks were used. NaN when there are none or they hold no noise."""

    horizontal: float
    vertical: float
    mean: float
    n_blocks: int


def _noise_correlation(an: _Analysis) -> NoiseCorrelation:
    h, v = float(an.rho[LAGS.index((1, 0))]), float(an.rho[LAGS.index((0, 1))])
    return NoiseCorrelation(h, v, (h + v) / 2.0, int(an.flat.rows.size))


def noise_autocorrelation(rgb: np.ndarray, region: Sequence[int] | None = None) -> NoiseCorrelation:
    """Lag-1 autocorrelation of the luma noise in the flat blocks, horizontal and vertical.

    Measured on the plane residual ``r`` of the flat blocks: the ratios ``sum r_i r_(i+l) / sum r_i^2`` for the
    12 lags l of half a 5x5 window (pooled over the blocks, so weighted by their noise energy). Removing the plane
    biases these ratios (white noise reads -0.039 at lag 1, not 0); the bias is exact linear algebra on the
    64-pixel block, so the noise correlations are solved for from the measured ratios under the model "the noise
    is correlated over at most 2 px in x and y" (12 unknowns, 12 equations). The result is unbiased for such noise:
    white noise reads 0, noise blurred by a kernel of up to 3x3 its kernel's own correlation (2/3 for the binomial
    [1 2 1]/4 in x and y). Noise correlated further reads a little low (0.84 for 0.89 under a Gaussian blur of std
    1.5 px). Texture left in the flat blocks reads as positive correlation.
    """
    return _noise_correlation(_analyse(rgb, region))


# --- 3. chroma / luma noise ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ChromaNoise:
    """Noise std of ``cb`` and ``cr`` over that of luma, and ``ratio = sqrt((s_cb^2 + s_cr^2) / 2) / s_y``, in
    the same flat blocks (``n_blocks``); NaN when there are none or luma holds no noise."""

    cb: float
    cr: float
    ratio: float
    n_blocks: int


# i.i.d. noise of equal std in R, G and B: each std is its BT.601 matrix row's norm times the channel std.
_Y_NORM = math.sqrt(0.299**2 + 0.587**2 + 0.114**2)
_CB_NORM = math.sqrt(sum(c * c for c in CB_WEIGHTS))
_CR_NORM = math.sqrt(sum(c * c for c in CR_WEIGHTS))
IID_RGB_RATIO = math.sqrt((_CB_NORM**2 + _CR_NORM**2) / 2.0) / _Y_NORM


def _chroma(an: _Analysis) -> ChromaNoise:
    n = int(an.flat.rows.size)
    var_y = float(an.flat.energy.sum()) / an.dof
    if n == 0 or var_y <= 0.0:
        return ChromaNoise(math.nan, math.nan, math.nan, n)
    blocks = _gather(an.rgb, an.flat).astype(np.float64)  # (n, 8, 8, 3)
    var = []
    for weights in (CB_WEIGHTS, CR_WEIGHTS):
        channel = blocks @ np.array(weights)
        _, dof = _solve_correlation(channel)  # chroma is often far more correlated than luma (subsampling)
        var.append(float(_plane_energy(channel).sum()) / dof)
    return ChromaNoise(
        math.sqrt(var[0] / var_y), math.sqrt(var[1] / var_y), math.sqrt((var[0] + var[1]) / 2 / var_y), n
    )


def chroma_luma_noise_ratio(rgb: np.ndarray, region: Sequence[int] | None = None) -> ChromaNoise:
    """Noise std of BT.601 Cb and Cr over luma's, in luma's flat blocks.

    Each channel's variance is estimated as luma's is (:func:`noise_curve`: plane residual, degrees of freedom for
    that channel's own measured correlation), pooled over the flat blocks. I.i.d. noise of equal std in R, G and B
    gives ``ratio`` = :data:`IID_RGB_RATIO` (0.958; cb 0.932, cr 0.983); noise added equally to the three channels
    (luma only) gives 0. A camera's chroma is subsampled and denoised, so its ratio is usually well below the
    i.i.d. value.
    """
    return _chroma(_analyse(rgb, region))


# --- 4. edge width ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EdgeWidths:
    """The measured strong edges (at most :data:`MAX_EDGES`): their 10-90 % rise distances ``widths`` (px) and
    ``orientations`` (0..3: the edge normal within 22.5 degrees of 0, 45, 90 or 135 degrees); ``median`` over all of
    them; ``by_orientation``: the median per orientation (NaN with fewer than max(20, 5 %) of the edges);
    ``width``: the largest of those, the blur measure (NaN when no orientation has enough edges);
    ``candidates``: the edge points (gradient maxima) found, before sampling and the profile checks."""

    widths: tuple[float, ...]
    orientations: tuple[int, ...]
    median: float
    by_orientation: tuple[float, ...]
    width: float
    candidates: int


def summarize_edges(
    widths: Sequence[float] | np.ndarray, orientations: Sequence[int] | np.ndarray, candidates: int = 0
) -> EdgeWidths:
    """:class:`EdgeWidths` of measured edges (one image's, or several images' together)."""
    w = np.asarray(widths, dtype=np.float64)
    o = np.asarray(orientations, dtype=np.int64)
    enough = max(MIN_ORIENTATION_EDGES, math.ceil(MIN_ORIENTATION_SHARE * w.size))
    by = tuple(
        float(np.median(w[o == k])) if np.count_nonzero(o == k) >= enough else math.nan for k in range(N_ORIENTATIONS)
    )
    finite = [v for v in by if math.isfinite(v)]
    return EdgeWidths(
        tuple(float(v) for v in w),
        tuple(int(v) for v in o),
        float(np.median(w)) if w.size else math.nan,
        by,
        max(finite) if finite else math.nan,
        int(candidates),
    )


def _gaussian_kernel(sigma: float) -> np.ndarray:
    radius = max(1, int(math.ceil(3.0 * sigma)))
    t = np.arange(-radius, radius + 1, dtype=np.float64)
    k = np.exp(-0.5 * (t / sigma) ** 2)
    return k / k.sum()


def _bilinear(img: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    x0 = np.floor(xs).astype(np.int64)
    y0 = np.floor(ys).astype(np.int64)
    x0 = np.clip(x0, 0, img.shape[1] - 2)
    y0 = np.clip(y0, 0, img.shape[0] - 2)
    fx, fy = xs - x0, ys - y0
    top = img[y0, x0] * (1 - fx) + img[y0, x0 + 1] * fx
    bottom = img[y0 + 1, x0] * (1 - fx) + img[y0 + 1, x0 + 1] * fx
    return top * (1 - fy) + bottom * fy


_TAN_22_5 = math.tan(math.radians(22.5))
# The neighbour (dx, dy) along the gradient for each orientation: 0, 45, 90 and 135 degrees.
_SECTOR_STEPS = ((1, 0), (1, 1), (0, 1), (-1, 1))


def _sectors(gx: np.ndarray, gy: np.ndarray) -> np.ndarray:
    """The gradient's orientation, 0..3: within 22.5 degrees of 0, 45, 90 or 135 degrees (mod 180)."""
    ax, ay = np.abs(gx), np.abs(gy)
    return np.where(ay <= _TAN_22_5 * ax, 0, np.where(ax <= _TAN_22_5 * ay, 2, np.where(gx * gy > 0, 1, 3)))


def _edge_points(
    y: np.ndarray, margin: int, limit: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Edge points at least ``margin`` px inside the frame: local maxima of the gradient magnitude along the
    gradient (Canny's non-maximum suppression over 4 directions) of at least MIN_GRADIENT DN/px. Returns rows,
    columns, unit gradient (nx, ny), orientation (0..3) and how many there were; at most ``limit`` of them, by a
    fixed stride through the raster order.

    No relative threshold: a blurred edge has a weaker gradient than a sharp one of the same step, so choosing the
    strongest gradients would choose the sharpest edges; strong edges are chosen by their step afterwards."""
    k = _gaussian_kernel(DETECT_SIGMA_PX)
    smooth = cv2.sepFilter2D(y, cv2.CV_64F, k, k, borderType=cv2.BORDER_REFLECT)
    gx = cv2.Sobel(smooth, cv2.CV_64F, 1, 0, ksize=3, borderType=cv2.BORDER_REFLECT) / 8.0
    gy = cv2.Sobel(smooth, cv2.CV_64F, 0, 1, ksize=3, borderType=cv2.BORDER_REFLECT) / 8.0
    mag2 = gx * gx + gy * gy
    h, w = y.shape
    m = margin
    centre = mag2[m : h - m, m : w - m]
    sector = _sectors(gx[m : h - m, m : w - m], gy[m : h - m, m : w - m])
    keep = centre >= MIN_GRADIENT * MIN_GRADIENT
    suppressed = np.zeros_like(keep)
    for k_sector, (dx, dy) in enumerate(_SECTOR_STEPS):
        ahead = mag2[m + dy : h - m + dy, m + dx : w - m + dx]
        behind = mag2[m - dy : h - m - dy, m - dx : w - m - dx]
        # one of two equal neighbours wins, never both
        suppressed |= (sector == k_sector) & ((centre <= ahead) | (centre < behind))
    keep &= ~suppressed
    rows, cols = np.nonzero(keep)
    found = int(rows.size)
    if found > limit:
        pick = (np.arange(limit) * found) // limit
        rows, cols = rows[pick], cols[pick]
    rows, cols = rows + m, cols + m
    gxs, gys = gx[rows, cols], gy[rows, cols]
    norm = np.sqrt(gxs * gxs + gys * gys)
    return rows, cols, gxs / norm, gys / norm, _sectors(gxs, gys), found


def _first(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the index of the first True and whether there is one."""
    return np.argmax(mask, axis=1), np.asarray(mask.any(axis=1))


def _last(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the index of the last True and whether there is one."""
    return mask.shape[1] - 1 - np.argmax(mask[:, ::-1], axis=1), np.asarray(mask.any(axis=1))


def _crossings(
    p: np.ndarray, t: np.ndarray, level: np.ndarray, centre: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    """Per row of rising profiles ``p`` (sampled at ``t``): where it crosses ``level`` nearest ``centre`` within
    samples [lo, hi], interpolated linearly between the samples on either side; NaN where it does not."""
    idx = np.arange(p.shape[1])[None, :]
    rows = np.arange(p.shape[0])
    at_or_left = p[rows, centre] > level  # the crossing lies left of the centre (or at it)
    below = p <= level[:, None]
    left_a, left_ok = _last(below & (idx >= lo[:, None]) & (idx < centre[:, None]))
    right_b, right_ok = _first(~below & (idx > centre[:, None]) & (idx <= hi[:, None]))
    a = np.where(at_or_left, left_a, right_b - 1)  # p[a] <= level < p[a + 1]
    ok = np.where(at_or_left, left_ok, right_ok)
    a = np.clip(a, 0, p.shape[1] - 2)
    pa, pb = p[rows, a], p[rows, a + 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        out = t[a] + (level - pa) / (pb - pa) * (t[a + 1] - t[a])
    return np.where(ok & (pb > pa), out, np.nan)


def _profile_widths(y: np.ndarray, rows, cols, nx, ny) -> tuple[np.ndarray, np.ndarray]:
    """(10-90 % rise distance, step height) of each edge point's luma profile along (nx, ny); NaN width where it is
    not a clean rising step inside the profile."""
    t = np.arange(-PROFILE_HALF_PX, PROFILE_HALF_PX + PROFILE_STEP_PX / 2, PROFILE_STEP_PX)
    n, size, mid = rows.size, t.size, t.size // 2
    # Three parallel profiles, 1 px apart along the edge, averaged: a third of the noise variance.
    p = np.zeros((n, size))
    for s in (-1.0, 0.0, 1.0):
        xs = cols[:, None] + t[None, :] * nx[:, None] - s * ny[:, None]
        ys = rows[:, None] + t[None, :] * ny[:, None] + s * nx[:, None]
        p += _bilinear(y, xs, ys)
    p /= 3.0
    # Slope over a 1-px baseline, smoothed by [1 2 1] / 4 (about 1 px more); NaN where incomplete.
    d = np.full_like(p, np.nan)
    raw = (p[:, 2:] - p[:, :-2]) / (2 * PROFILE_STEP_PX)
    d[:, 2:-2] = (raw[:, :-2] + 2 * raw[:, 1:-1] + raw[:, 2:]) / 4
    rows_i = np.arange(n)
    # The centre: the steepest sample within 1 px of the edge point.
    centre = mid - 2 + np.argmax(d[:, mid - 2 : mid + 3], axis=1)
    peak = d[rows_i, centre]
    idx = np.arange(size)[None, :]
    with np.errstate(invalid="ignore"):
        flat = d <= (EXTENT_SLOPE * peak)[:, None]  # NaN (incomplete) is never flat
    hi, hi_ok = _first(flat & (idx >= centre[:, None]))
    lo, lo_ok = _last(flat & (idx <= centre[:, None]))
    contrast = p[rows_i, hi] - p[rows_i, lo]
    ok = (peak > 0) & hi_ok & lo_ok  # else the edge runs past the profile, or it is no rising step
    base = p[rows_i, lo]
    t10 = _crossings(p, t, base + 0.1 * contrast, centre, lo, hi)
    t90 = _crossings(p, t, base + 0.9 * contrast, centre, lo, hi)
    widths = np.where(ok & (t90 > t10), t90 - t10, np.nan)
    return widths, np.where(ok, contrast, np.nan)


def _edge_widths(y: np.ndarray) -> EdgeWidths:
    margin = PROFILE_HALF_PX + 2  # the whole profile lies inside the frame
    if min(y.shape) <= 2 * margin:
        return summarize_edges((), ())
    rows, cols, nx, ny, sector, candidates = _edge_points(y, margin, MAX_EDGES)
    widths, contrast = _profile_widths(y, rows, cols, nx, ny)
    with np.errstate(invalid="ignore"):
        strong = np.isfinite(widths) & (contrast >= MIN_CONTRAST_DN)
    return summarize_edges(widths[strong], sector[strong], candidates)


def edge_widths(rgb: np.ndarray, region: Sequence[int] | None = None) -> EdgeWidths:
    """The 10-90 % rise distance (px) across each strong edge point of the luma, and their summaries.

    Edge points: local maxima of the gradient magnitude along the gradient direction (Canny's non-maximum
    suppression; gradient of the luma smoothed by a Gaussian of 1 px) of at least 2 DN/px (no relative threshold:
    a blurred edge has a weaker gradient than a sharp one of the same step); at most :data:`MAX_EDGES`, by a fixed
    stride. At each point the raw luma is sampled along the gradient, +-24 px in 0.5-px steps (bilinear; three
    parallel profiles 1 px apart, averaged). The edge extends from the centre out to where the profile's slope (over
    1 px, smoothed) falls to 10 % of its slope at the centre; the profile there gives the two plateaus, and steps
    under :data:`MIN_CONTRAST_DN` (20 DN) are skipped. The width is the distance between the
    10 % and the 90 % crossing nearest the centre (linear interpolation). A step blurred by a box of L px reads
    0.8 L (a sharp step 0.8 px), a Gaussian blur of std s about 2.5 s; widths beyond ~24 px are not measured.

    The blur measure ``width`` is the largest per-orientation median: a linear motion smear widens only the edges
    across the motion, so the median over all edges mixes blurred and untouched edges and is not monotone in the
    smear's length (on the aegis-v1 golden frames it fell from severity 1 to 2); for isotropic blur the two agree.
    """
    y, _ = _luma_clipped(crop_region(rgb, region))
    return _edge_widths(y)


def edge_width(rgb: np.ndarray, region: Sequence[int] | None = None) -> float:
    """The blur measure in px: the largest per-orientation median 10-90 % rise distance over the strong edges
    (:func:`edge_widths` ``width``); NaN when no orientation has enough edges."""
    return edge_widths(rgb, region).width


# --- all four at once ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RealismStats:
    """The four statistics of one image (one luma, one flat-block selection)."""

    noise: NoiseCurve
    correlation: NoiseCorrelation
    chroma: ChromaNoise
    edges: EdgeWidths


def realism_statistics(rgb: np.ndarray, region: Sequence[int] | None = None) -> RealismStats:
    """:func:`noise_curve`, :func:`noise_autocorrelation`, :func:`chroma_luma_noise_ratio` and
    :func:`edge_widths` of one image, sharing the luma and the flat blocks."""
    an = _analyse(rgb, region)
    return RealismStats(_noise_curve(an), _noise_correlation(an), _chroma(an), _edge_widths(an.y))


# --- image sets and the comparison with real footage (the disk edge of `aegis realism`) ----------------------
@dataclass(frozen=True)
class SetStatistics:
    """The four statistics over a set of images: ``noise`` pooled over the images (:func:`pool_noise_curves`);
    the lag-1 noise correlation (``correlation_h``, ``correlation_v``, ``correlation`` their mean) and the chroma
    ``chroma_ratio``: medians of the per-image values; ``edges``: all the images' measured edges together
    (:func:`summarize_edges`), whose ``width`` is ``edge_width``."""

    n_images: int
    noise: NoiseCurve
    correlation_h: float
    correlation_v: float
    correlation: float
    chroma_ratio: float
    edges: EdgeWidths
    # The atmosphere (aegis_data.engine.realism_atmosphere): contrast and dark channel by depth band, airlight, streaks.
    atmosphere: AtmosphereSet | None = None

    @property
    def edge_width(self) -> float:
        return self.edges.width

    def to_dict(self) -> dict:
        return {
            "n_images": self.n_images,
            "noise_sigma": _num(self.noise.noise_sigma),
            "noise_curve": {
                "centres": list(self.noise.centres),
                "sigma": [_num(v) for v in self.noise.sigma],
                "counts": list(self.noise.counts),
            },
            "noise_autocorrelation": {
                "horizontal": _num(self.correlation_h),
                "vertical": _num(self.correlation_v),
                "mean": _num(self.correlation),
            },
            "chroma_luma_noise_ratio": _num(self.chroma_ratio),
            "edge_width": _num(self.edge_width),
            "edge_width_all_orientations": _num(self.edges.median),
            "edge_width_by_orientation": dict(
                zip(("0", "45", "90", "135"), (_num(v) for v in self.edges.by_orientation))
            ),
            "n_edges": len(self.edges.widths),
            **({"atmosphere": self.atmosphere.to_dict()} if self.atmosphere is not None else {}),
        }


def _num(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def set_statistics(images: Iterable[np.ndarray]) -> SetStatistics:
    """:class:`SetStatistics` of a stream of RGB images, each measured inside its :func:`letterbox_region`."""
    curves, corr_h, corr_v, chroma, atmos = [], [], [], [], []
    widths: list[float] = []
    orientations: list[int] = []
    candidates = 0
    n = 0
    for rgb in images:
        region = letterbox_region(rgb)
        st = realism_statistics(rgb, region)
        atmos.append(atmosphere_statistics(rgb, region))
        n += 1
        curves.append(st.noise)
        corr_h.append(st.correlation.horizontal)
        corr_v.append(st.correlation.vertical)
        chroma.append(st.chroma.ratio)
        widths.extend(st.edges.widths)
        orientations.extend(st.edges.orientations)
        candidates += st.edges.candidates
    h, v = finite_median(corr_h), finite_median(corr_v)
    return SetStatistics(
        n,
        pool_noise_curves(curves),
        h,
        v,
        (h + v) / 2.0,
        finite_median(chroma),
        summarize_edges(widths, orientations, candidates),
        summarize_atmosphere(atmos),
    )


# How each statistic of a set is compared with the real frames' (docs/CORRUPTIONS.md).
DISTANCES = {
    "noise_curve": "RMS over the brightness bins both curves have of ln(sigma / sigma_real); 0 = same curve",
    "noise_sigma": "sigma / sigma_real; 1 = same",
    "noise_autocorrelation": "|rho - rho_real| of the mean lag-1 correlation; 0 = same",
    "chroma_luma_noise_ratio": "|ratio - ratio_real|; 0 = same",
    "edge_width": "width / width_real; 1 = same",
    **ATMOSPHERE_DISTANCES,
}


def curve_distance(real: NoiseCurve, other: NoiseCurve) -> tuple[float, int]:
    """(RMS of ``ln(sigma_other / sigma_real)`` over the bins where both curves have a positive sigma, the number
    of such bins); NaN with no shared bin."""
    return log_rms(real.sigma, other.sigma)


def _ratio(a: float, b: float) -> float:
    return a / b if math.isfinite(a) and math.isfinite(b) and b > 0 else math.nan


def set_distances(real: SetStatistics, other: SetStatistics) -> dict[str, float]:
    """Distance of ``other`` from ``real`` per statistic (:data:`DISTANCES`), plus ``noise_curve_bins``."""
    curve, shared = curve_distance(real.noise, other.noise)
    return {
        "noise_curve": curve,
        "noise_curve_bins": shared,
        "noise_sigma": _ratio(other.noise.noise_sigma, real.noise.noise_sigma),
        "noise_autocorrelation": abs(other.correlation - real.correlation),
        "chroma_luma_noise_ratio": abs(other.chroma_ratio - real.chroma_ratio),
        "edge_width": _ratio(other.edge_width, real.edge_width),
        **(
            atmosphere_distances(real.atmosphere, other.atmosphere)
            if real.atmosphere is not None and other.atmosphere is not None
            else {}
        ),
    }


# --- sun glint: where the saturated pixels fall, and how big the sparkles are ---------------------------------
GLINT_LUMA = 0.94  # a pixel is saturated glare above this luma (the calibration's saturated_luma)


@dataclass(frozen=True)
class GlintStats:
    """Glint of one image or a set: the saturated pixels (luma > 0.94; with a clean image, only those it made
    saturated) and where they fall. ``on_water``: their share on the frame's water (the rest is land, sky or
    anything else; the water with its holes filled and 2 px around it, since the mask leaves out the saturated
    pixels a sparkle lands on, and the lens spreads a sparkle by a pixel or two); ``water_share`` /
    ``land_share``: the share of the water's (the land's) pixels that glint;
    ``sparkle_px``: the median area of a sparkle (an 8-connected group of glinting pixels), ``sparkles``: their
    number; ``per_mp_water``: sparkles per megapixel of water."""

    n_images: int
    glint_px: int
    water_px: int
    land_px: int
    glint_on_water_px: int
    sparkle_areas: tuple[int, ...]

    @property
    def on_water(self) -> float:
        return self.glint_on_water_px / self.glint_px if self.glint_px else math.nan

    @property
    def water_share(self) -> float:
        return self.glint_on_water_px / self.water_px if self.water_px else math.nan

    @property
    def land_share(self) -> float:
        return (self.glint_px - self.glint_on_water_px) / self.land_px if self.land_px else math.nan

    @property
    def sparkles(self) -> int:
        return len(self.sparkle_areas)

    @property
    def sparkle_px(self) -> float:
        return float(np.median(self.sparkle_areas)) if self.sparkle_areas else math.nan

    @property
    def per_mp_water(self) -> float:
        return self.sparkles / (self.water_px / 1e6) if self.water_px else math.nan

    def to_dict(self) -> dict:
        return {
            "n_images": self.n_images,
            "glint_px": self.glint_px,
            "glint_on_water": _num(self.on_water),
            "water_glint_share": _num(self.water_share),
            "land_glint_share": _num(self.land_share),
            "sparkles": self.sparkles,
            "sparkle_px": _num(self.sparkle_px),
            "sparkles_per_mp_water": _num(self.per_mp_water),
        }


def glint_statistics(rgb: np.ndarray, water: np.ndarray, clean: np.ndarray | None = None) -> GlintStats:
    """:class:`GlintStats` of one image with its water mask (bool, the image's size); ``clean``: count only the
    pixels the rendering saturated that the clean image did not."""
    rgb = check_rgb_image(rgb, "image")
    water = np.asarray(water, dtype=bool)
    if water.shape != rgb.shape[:2]:
        raise AegisError(f"water mask is {water.shape[1]}x{water.shape[0]}, the image {rgb.shape[1]}x{rgb.shape[0]}")
    glint = _saturated(rgb)
    if clean is not None:
        glint &= ~_saturated(check_rgb_image(clean, "clean image"))
    water = _water_region(water)
    n, _, stats, _ = cv2.connectedComponentsWithStats(glint.view(np.uint8), connectivity=8)
    areas = tuple(int(a) for a in stats[1:, cv2.CC_STAT_AREA])
    water_px = int(water.sum())
    return GlintStats(1, int(glint.sum()), water_px, int(water.size - water_px), int((glint & water).sum()), areas)


def _water_region(water: np.ndarray) -> np.ndarray:
    """The water with every hole filled (what its outside cannot reach, 4-connected) and grown by 2 px."""
    if not water.any():
        return water
    outside = (~water).astype(np.uint8)
    padded = np.pad(outside, 1, constant_values=1)
    cv2.floodFill(padded, None, (0, 0), 2)
    filled = water | (padded[1:-1, 1:-1] == 1)
    return cv2.dilate(filled.view(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)


def _saturated(rgb: np.ndarray) -> np.ndarray:
    r, g, b = (rgb[..., k].astype(np.float64) for k in range(3))
    return (0.299 * r + 0.587 * g + 0.114 * b) / 255.0 > GLINT_LUMA


def pool_glint(stats: Iterable[GlintStats]) -> GlintStats:
    """The glint of a set: every image's pixels and sparkles together."""
    items = list(stats)
    return GlintStats(
        sum(s.n_images for s in items),
        sum(s.glint_px for s in items),
        sum(s.water_px for s in items),
        sum(s.land_px for s in items),
        sum(s.glint_on_water_px for s in items),
        tuple(a for s in items for a in s.sparkle_areas),
    )


@dataclass(frozen=True)
class RealismReport:
    """Real frames of one condition beside the split's rendering of it and the split's clean images; for a sun-glint
    condition also where the glint falls (``glint``: real, rendered and clean, :class:`GlintStats`)."""

    condition: str
    real_dir: str
    split_dir: str
    real: SetStatistics
    rendered: SetStatistics
    clean: SetStatistics
    glint: Mapping[str, GlintStats] | None = None

    @property
    def rendered_distance(self) -> dict[str, float]:
        return set_distances(self.real, self.rendered)

    @property
    def clean_distance(self) -> dict[str, float]:
        return set_distances(self.real, self.clean)

    def to_dict(self) -> dict:
        def dist(d: dict[str, float]) -> dict:
            return {k: (v if isinstance(v, int) else _num(v)) for k, v in d.items()}

        return {
            "condition": self.condition,
            "real_dir": self.real_dir,
            "split_dir": self.split_dir,
            "real": self.real.to_dict(),
            "rendered": self.rendered.to_dict(),
            "clean": self.clean.to_dict(),
            "distance": {"rendered": dist(self.rendered_distance), "clean": dist(self.clean_distance)},
            "distance_definitions": dict(DISTANCES),
            **({"glint": {k: v.to_dict() for k, v in self.glint.items()}} if self.glint is not None else {}),
        }


def _split_images(split_dir: Path, condition: str, limit: int | None) -> list[Path]:
    """The split's ``test/<condition>/*.png`` to read (the first ``limit`` by name); AegisError for none, and for a
    file that is a link leaving the split or not a regular file: a received split is read only inside itself
    (docs/SECURITY.md), and a FIFO would block the read."""
    folder = condition_dir(split_dir, "test", condition)
    files = sorted(folder.glob("*.png")) if folder.is_dir() else []
    if not files:
        raise AegisError(
            f"{split_dir} holds no rendering of {condition} ({folder.relative_to(split_dir)}/*.png); "
            f"build the split with that condition"
        )
    files = files if limit is None else files[:limit]
    root = split_dir.resolve()
    for f in files:
        real = link_target(f)
        if real is None:
            raise AegisError(f"{f} is a symbolic link loop; not read")
        if not real.is_relative_to(root):
            raise AegisError(f"{f} resolves outside the split, to {real}; not read (`aegis verify` reports such links)")
        if not f.is_file():
            raise AegisError(f"{f} is not a regular file (a folder, FIFO, socket or device); not read")
    return files


def compare_realism(
    real_dir: str | Path,
    split_dir: str | Path,
    condition: str,
    limit: int | None = None,
    *,
    config: SuiteConfig,
    scale: Scale,
    scenes: Mapping[str, Any],
) -> RealismReport:
    """The four statistics on every image of ``real_dir`` (real frames of ``condition``), on the split's rendering
    ``<split_dir>/test/<condition>/*.png`` and on its clean images ``test/clean/*.png``; ``limit``: at most that
    many images of each set, by name. AegisError (one line) for a folder without images, a folder that is not a
    split, a condition the split's suite does not have, or a split without that condition on disk.

    ``config``, ``scale`` and ``scenes`` (test image id -> the scene record of its clean entry) are what the split's
    manifest records: ``aegis_data.split.measure.realism_report`` reads them through the sealed reader (the engine
    reads no manifest)."""
    real_dir, split_dir = Path(real_dir), Path(split_dir)
    if limit is not None and (isinstance(limit, bool) or limit < 1):
        raise AegisError(f"`limit` must be at least 1, got {limit}", param="limit")
    if not real_dir.is_dir():
        raise AegisError(f"REAL_DIR {real_dir} is not a folder")
    real_files = list_images(real_dir)
    if not real_files:
        raise AegisError(f"no images in {real_dir} (looked for {', '.join(IMAGE_SUFFIXES)})")
    known = config.conditions()
    if condition not in known:
        raise AegisError(
            f"unknown condition {condition!r} in suite {config.suite}; expected clean or "
            f"<corruption>_s<1-3> with a corruption among: {', '.join(config.names)}"
        )
    rendered_files = _split_images(split_dir, condition, limit)
    clean_files = _split_images(split_dir, "clean", limit)
    if limit is not None:
        real_files = real_files[:limit]
    name = condition.rpartition("_s")[0]
    glint = None
    if config.uses_scene and name in config.corruptions and config.corruptions[name].model_name == "sun_glint":
        glint = _glint_sets(split_dir, config, scale, scenes, real_files, rendered_files)
    return RealismReport(
        condition,
        str(real_dir),
        str(split_dir),
        real=set_statistics(read_rgb(f) for f in real_files),
        rendered=set_statistics(read_rgb(f) for f in rendered_files),
        clean=set_statistics(read_rgb(f) for f in clean_files),
        glint=glint,
    )


def _glint_sets(
    split_dir: Path,
    config: SuiteConfig,
    scale: Scale,
    scenes: Mapping[str, Any],
    real_files: Sequence[Path],
    rendered_files: Sequence[Path],
) -> dict:
    """Glint statistics of the real frames (their saturated pixels, on the water their pixels show), of the
    rendering (the pixels it saturated beyond its clean image, on the water of that image's scene) and of the clean
    images. The water of a frame: the scene's (``aegis_data.engine.scene``), with the split's person unit (the
    real frames: the same unit) and, for a split image, its recorded sidecar facts and stored water mask."""
    from aegis_data.engine.scene import check_sidecar, estimate_scene, read_water_mask
    from aegis_data.files.layout import water_mask_relpath

    unit = scale.unit_px if scale.is_object else 60.0

    def split_water(image_id: str, clean: np.ndarray) -> np.ndarray:
        raw = scenes.get(image_id)
        record: dict[str, Any] = raw if isinstance(raw, dict) else {}
        facts = check_sidecar(dict(record.get("given") or {}), f"manifest scene of test/{image_id}")
        mask = None
        if "water_mask" in facts:
            mask = read_water_mask(split_dir / water_mask_relpath("test", image_id), *clean.shape[:2])
        return estimate_scene(clean, unit, config.camera, facts, mask).water_mask()

    real = []
    for f in real_files:
        rgb = read_rgb(f)
        real.append(glint_statistics(rgb, estimate_scene(rgb, unit, config.camera).water_mask()))
    rendered, clean_stats = [], []
    for f in rendered_files:
        clean = read_rgb(condition_dir(split_dir, "test", "clean") / f.name)
        water = split_water(f.stem, clean)
        rendered.append(glint_statistics(read_rgb(f), water, clean))
        clean_stats.append(glint_statistics(clean, water))
    return {"real": pool_glint(real), "rendered": pool_glint(rendered), "clean": pool_glint(clean_stats)}
