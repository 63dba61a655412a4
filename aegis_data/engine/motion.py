"""Motion blur in physical units (generation 2; docs/CORRUPTIONS.md, "motion_blur (aegis-v2)").

During an exposure of T the platform moves v·T over the ground; divided by the ground sampling distance that is
the smear in pixels. The blur is the image integrated along the camera's path during the exposure (in linear
light), so its kernel is that path drawn on the pixel grid: a *trajectory kernel* in the manner of Boracchi &
Foi (2012, "Modeling the performance of image restoration from motion blur"): translation along the flight
heading, a small heading change (yaw) that bends it, and a random walk of angular jitter (gusts, vibration the
gimbal does not remove). With a rolling shutter, row y is exposed ``y / H`` of the readout time later than row
0, so the content of each row band is offset along the heading (skew). In an oblique view the smear follows the
ground sampling distance row by row (1/depth); sky rows get no translation, only the angular jitter.

Exactness: the path comes from basic IEEE operations (``kernels.sin_cos_turns`` for the heading), its samples are
counted into pixels (nearest pixel) and turned into integer weights summing to ``2**WEIGHT_BITS``; the
convolution sums integer products of 15-bit linear values and those weights in int64 (order-free), rounds half
up and re-encodes through the exact sRGB tables (``aegis_data.engine.photometry``). Content moves by at most the
suite's ``max_content_shift_px`` (the kernel is centred on its centroid; the skew is clamped), so boxes stay valid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from aegis_data.engine import kernels as K
from aegis_data.engine.budget import MAX_LENGTH_PX
from aegis_data.engine.photometry import LINEAR_MAX, decode_table, encode_table, to_linear, to_srgb
from aegis_data.engine.scene import OBLIQUE, Scene
from aegis_data.engine.seeding import KeyedRandom
from aegis_data.errors import AegisError

WEIGHT_BITS = 15  # kernel weights sum to 2**15; with 15-bit linear values every partial sum fits in int32
SAMPLES_PER_PX = 4  # path samples per pixel of path length: each pixel the path crosses gets several
MIN_SAMPLES = 16
JITTER_STEPS = 64  # random-walk steps of the jitter over one exposure (interpolated to the path samples)
SKEW_STEP_PX = 0.25  # rolling-shutter skew changes by at most this much between row bands
BAND_ROWS = 32  # oblique views: the smear length is evaluated per band of this many rows
# A path longer than the render budget's longest length is refused here too, for direct callers of this module;
# apply_corruption prices the whole render first (aegis_data.engine.budget, docs/CORRUPTIONS.md "Render budget").
MAX_PATH_PX = float(MAX_LENGTH_PX)


@dataclass(frozen=True)
class TrajectoryBlurParams:
    """motion_blur of a generation-2 suite: the condition's flight and shutter, plus the suite camera's facts."""

    speed_mps: float
    exposure_ms: float
    jitter_mrad: float
    yaw_rate_dps: float
    heading_range_deg: tuple
    readout_ms: float = 0.0
    max_content_shift_px: float = 1.5


@dataclass(frozen=True)
class TrajectoryDraw:
    """The random parts of one exposure's path: the heading (when the scene does not know it) and the jitter's
    random-walk steps (standard normal, (JITTER_STEPS, 2))."""

    heading_deg: float
    jitter_steps: np.ndarray


@dataclass(frozen=True)
class Exposure:
    """One exposure as the blur needs it: platform speed (m/s), exposure (ms) and the clean capture's own
    (speed, exposure), whose smear the clean image already holds."""

    speed_mps: float
    exposure_ms: float
    base_speed_mps: float
    base_exposure_ms: float

    def added_smear_m(self) -> float:
        """Ground smear (m) to add: the condition's ``v T`` and the clean capture's ``v0 T0`` are box blurs whose
        variances (``L**2 / 12``) add, so the added box has ``L = sqrt((v T)**2 - (v0 T0)**2)`` (0 when the clean
        capture already smeared as much)."""
        cond = self.speed_mps * self.exposure_ms / 1000.0
        base = self.base_speed_mps * self.base_exposure_ms / 1000.0
        return math.sqrt(max(0.0, cond * cond - base * base))


def draw_trajectory(params: TrajectoryBlurParams, scene: Scene, rng: KeyedRandom) -> TrajectoryDraw:
    """The heading (the scene's, else uniform in ``heading_range_deg``) and the jitter steps."""
    lo, hi = params.heading_range_deg
    drawn = float(lo + (hi - lo) * rng.child("heading").uniform(1)[0])
    heading = drawn if scene.heading_deg is None else float(scene.heading_deg)
    return TrajectoryDraw(heading, rng.child("jitter").normal((JITTER_STEPS, 2)))


def path_samples(
    length_px: float, heading_deg: float, yaw_deg: float, jitter_px: float, jitter_steps: np.ndarray
) -> np.ndarray:
    """(n, 2) float64 sample positions (x, y; y down) of one exposure's path, centred on their mean.

    Translation of ``length_px`` along ``heading_deg`` whose direction turns by ``yaw_deg`` over the exposure
    (cumulative sums of equal steps), plus a random walk (``jitter_steps`` summed, interpolated linearly to the
    samples, detrended to start and end at zero and scaled to an RMS of ``jitter_px``).
    """
    if not length_px + 4.0 * jitter_px <= MAX_PATH_PX:
        raise AegisError(
            f"motion path of {length_px:.4g} px with {jitter_px:.4g} px jitter exceeds the render budget "
            f'({MAX_PATH_PX:g} px); lower the speed or the exposure (docs/CORRUPTIONS.md, "Render budget")'
        )
    n = max(MIN_SAMPLES, int(math.ceil(SAMPLES_PER_PX * (length_px + 4.0 * jitter_px))))
    u = (np.arange(n, dtype=np.float64) + 0.5) / n
    turns = (heading_deg + yaw_deg * (u - 0.5)) / 360.0
    sin, cos = K.sin_cos_turns(turns)
    step = length_px / n
    pos = np.empty((n, 2), dtype=np.float64)
    pos[:, 0] = np.cumsum(cos * step)
    pos[:, 1] = np.cumsum(sin * step)
    if jitter_px > 0.0:
        walk = np.cumsum(np.asarray(jitter_steps, dtype=np.float64), axis=0)
        m = walk.shape[0]
        walk = walk - (np.arange(1, m + 1, dtype=np.float64)[:, None] / m) * walk[-1]  # a bridge: 0 at both ends
        at = u * (m - 1)
        i0 = np.minimum(np.floor(at).astype(np.int64), m - 2)
        f = (at - i0)[:, None]
        wig = walk[i0] * (1.0 - f) + walk[i0 + 1] * f
        wig = wig - _mean_rows(wig)
        rms = math.sqrt(math.fsum((wig * wig).ravel().tolist()) / n)
        if rms > 0.0:
            pos += wig * (jitter_px / rms)
    return pos - _mean_rows(pos)


def _mean_rows(a: np.ndarray) -> np.ndarray:
    """Column means of (n, 2) float64 through ``math.fsum`` (exact sums, correctly rounded): NumPy's reductions
    may associate differently on another CPU's SIMD path."""
    return np.array([math.fsum(a[:, k].tolist()) / a.shape[0] for k in range(a.shape[1])])


def rasterise(pos: np.ndarray, shift: tuple[float, float] = (0.0, 0.0)) -> tuple[np.ndarray, ...]:
    """Integer taps (dy, dx, weight) of a path: each sample counts into its nearest pixel (after ``shift``);
    weights are the counts scaled to sum exactly ``2**WEIGHT_BITS`` (round half up, the remainder to the
    heaviest tap, first in (dy, dx) order)."""
    xs = np.floor(pos[:, 0] + shift[0] + 0.5).astype(np.int64)
    ys = np.floor(pos[:, 1] + shift[1] + 0.5).astype(np.int64)
    keys = np.unique(np.stack([ys, xs], axis=1), axis=0, return_counts=True)
    (cells, counts) = keys
    total = 1 << WEIGHT_BITS
    weights = (counts * total + pos.shape[0] // 2) // pos.shape[0]
    weights[int(np.argmax(weights))] += total - int(weights.sum())
    return cells[:, 0].copy(), cells[:, 1].copy(), weights.astype(np.int64)


def _tap_reach(h: int, w: int, bands: list[tuple[int, int, tuple]]) -> tuple[int, int]:
    """The largest |dy| and |dx| of the bands' taps; AegisError beyond four frames (the cost budget)."""
    ry = max(int(np.abs(t[0]).max()) for _, _, t in bands)
    rx = max(int(np.abs(t[1]).max()) for _, _, t in bands)
    if ry > 4 * max(h, w) or rx > 4 * max(h, w):
        raise AegisError("motion blur kernel is larger than four frames")
    return ry, rx


def _bounded_weights(wt: np.ndarray) -> bool:
    """Whether integer weights are those ``rasterise`` makes: >= 0, summing (exactly, in Python integers) to at
    most 2**WEIGHT_BITS. Then every partial sum of 16-bit values times weights stays below 2**31."""
    values = np.asarray(wt).tolist()
    return all(isinstance(v, int) and v >= 0 for v in values) and sum(values) <= 1 << WEIGHT_BITS


def _compiled_bands(shape: tuple, bands: list[tuple[int, int, tuple]]):
    """The bands packed for the compiled loop (rows (nb, 2), tap starts (nb + 1), dy, dx, w, nb, nt, bits), or
    None where it does not run them: not built, or taps outside its proven bounds (integer taps with weights in
    [0, 2**15] summing to at most 2**15 per band, which ``rasterise`` always makes; see ``_ckernels.c``)."""
    c = K.CKERNELS
    if c is None or not hasattr(c, "taps") or len(shape) != 3 or shape[2] != 3 or min(shape) < 1 or not bands:
        return None
    rows, starts, dys, dxs, wts = [], [0], [], [], []
    for r0, r1, (dy, dx, wt) in bands:
        dy, dx, wt = np.asarray(dy), np.asarray(dx), np.asarray(wt)
        if not all(a.ndim == 1 and a.dtype.kind in "iu" for a in (dy, dx, wt)) or not len(dy) == len(dx) == len(wt):
            return None
        if not 0 <= int(r0) <= int(r1) <= shape[0] or not _bounded_weights(wt):
            return None
        rows.append((int(r0), int(r1)))
        starts.append(starts[-1] + len(wt))
        dys.append(dy)
        dxs.append(dx)
        wts.append(wt)
    dy, dx, wt = (np.ascontiguousarray(np.concatenate(parts), dtype=np.int64) for parts in (dys, dxs, wts))
    return (
        np.array(rows, dtype=np.int64),
        np.array(starts, dtype=np.int64),
        dy,
        dx,
        wt,
        len(rows),
        starts[-1],
        WEIGHT_BITS,
    )


def convolve_taps(linear: np.ndarray, bands: list[tuple[int, int, tuple]]) -> np.ndarray:
    """Each row band ``(r0, r1, (dy, dx, w))`` of ``linear`` (uint16 (h, w, 3), values <= LINEAR_MAX) convolved
    with its integer taps: ``(sum w I(y + dy, x + dx) + 2**14) >> 15`` with a mirrored border; uint16 out.

    The compiled loop (``_ckernels.taps``) sums the same integers; this NumPy code is the reference."""
    h, w = linear.shape[:2]
    ry, rx = _tap_reach(h, w, bands)
    packed = _compiled_bands(linear.shape, bands) if linear.dtype == np.uint16 else None
    if packed is not None:
        out = np.empty_like(linear)
        K.CKERNELS.taps(out, 0, np.ascontiguousarray(linear), 0, h, w, None, None, *packed)
        return out
    padded = cv2.copyMakeBorder(np.ascontiguousarray(linear), ry, ry, rx, rx, cv2.BORDER_REFLECT)
    out = np.empty_like(linear)
    for r0, r1, (dy, dx, wt) in bands:
        # Integers, so any accumulator that holds every partial sum gives the same result: uint32 (twice as fast)
        # when the weights are those rasterise makes (>= 0, summing to at most 2**15; with uint16 values every sum
        # is below 65535 * 2**15 + 2**14 < 2**32), else int64.
        narrow = linear.dtype == np.uint16 and _bounded_weights(wt)
        acc_type = np.uint32 if narrow else np.int64
        for s0 in range(r0, r1, 16):
            s1 = min(r1, s0 + 16)
            acc = np.full((s1 - s0, w, 3), 1 << (WEIGHT_BITS - 1), dtype=acc_type)
            for a, b, k in zip(dy.tolist(), dx.tolist(), wt.tolist()):
                acc += np.multiply(padded[ry + s0 + a : ry + s1 + a, rx + b : rx + b + w], k, dtype=acc_type)
            out[s0:s1] = acc >> WEIGHT_BITS
    return out


def convolve_taps_srgb(image: np.ndarray, bands: list[tuple[int, int, tuple]]) -> np.ndarray:
    """uint8 sRGB ``image`` decoded to linear light, convolved as :func:`convolve_taps`, clipped to LINEAR_MAX
    and encoded (the compiled loop does all four row by row)."""
    h, w = image.shape[:2]
    _tap_reach(h, w, bands)
    packed = _compiled_bands(image.shape, bands) if image.dtype == np.uint8 else None
    if packed is not None:
        out = np.empty_like(image)
        K.CKERNELS.taps(out, 1, np.ascontiguousarray(image), 1, h, w, decode_table(), encode_table(), *packed)
        return out
    return to_srgb(np.minimum(convolve_taps(to_linear(image), bands), LINEAR_MAX))


def _skew_px(params: TrajectoryBlurParams, speed_px_per_ms: float, rows: int) -> float:
    """Half the rolling-shutter skew (px, signed along the heading) between the first and last row, clamped to the
    content-shift budget."""
    half = 0.5 * speed_px_per_ms * params.readout_ms * (rows - 1) / max(rows, 1)
    return max(-params.max_content_shift_px, min(half, params.max_content_shift_px))


def blur_bands(
    params: TrajectoryBlurParams, scene: Scene, draw: TrajectoryDraw, exposure: Exposure, height: int
) -> list[tuple[int, int, tuple]]:
    """The row bands of a valid region ``height`` rows tall (scene coordinates: the region starts at row
    ``scene.valid[1]``) and each band's taps."""
    y0 = scene.valid[1]
    smear_m = exposure.added_smear_m()
    jitter_px = params.jitter_mrad / 1000.0 * scene.focal_px
    yaw = params.yaw_rate_dps * exposure.exposure_ms / 1000.0
    if scene.view == OBLIQUE:
        spans = [(s, min(height, s + BAND_ROWS)) for s in range(0, height, BAND_ROWS)]
    else:
        spans = [(0, height)]
    # Each band's ground sample at its centre row (inf in the sky: no translation there).
    band_gsd = [float(g) for g in scene.gsd_rows(np.array([y0 + (s + e - 1) / 2.0 for s, e in spans]))]
    bands_len = [(s, e, smear_m / g if math.isfinite(g) else 0.0) for (s, e), g in zip(spans, band_gsd)]
    # Rolling-shutter skew: rows later in the readout are displaced along the heading. The clean frame was read out
    # by the same shutter at its own speed and holds that skew already; what a faster (or slower) flight adds is
    # (v - v0) times the readout, at the finest ground sample of the region.
    gsds = [g for g in band_gsd if math.isfinite(g)]
    rel_speed = exposure.speed_mps - exposure.base_speed_mps
    speed_px_per_ms = rel_speed / 1000.0 / min(gsds) if gsds else 0.0
    half_skew = _skew_px(params, speed_px_per_ms, height) if params.readout_ms > 0 else 0.0
    sin, cos = K.sin_cos_turns(draw.heading_deg / 360.0)
    out: list[tuple[int, int, tuple]] = []
    for s, e, length in bands_len:
        pos = path_samples(length, draw.heading_deg, yaw, jitter_px, draw.jitter_steps)
        n_skew = 1 if half_skew == 0.0 else int(math.ceil(2.0 * abs(half_skew) / SKEW_STEP_PX)) + 1
        edges = [s + (e - s) * i // n_skew for i in range(n_skew + 1)]
        for a, b in zip(edges, edges[1:]):
            if a == b:
                continue
            if n_skew == 1:
                shift = (0.0, 0.0)
            else:
                centre = (a + b - 1) / 2.0
                frac = 2.0 * centre / max(height - 1, 1) - 1.0  # -1 at the first row, +1 at the last
                off = half_skew * frac
                shift = (off * cos, off * sin)
            taps = rasterise(pos, shift)
            if out and out[-1][1] == a and all(np.array_equal(p, q) for p, q in zip(out[-1][2], taps)):
                out[-1] = (out[-1][0], b, taps)
            else:
                out.append((a, b, taps))
    return out


def _still(bands: list[tuple[int, int, tuple]]) -> bool:
    """Whether every band's path lies inside one pixel (nothing moves)."""
    return all(len(t[2]) == 1 and t[0][0] == 0 and t[1][0] == 0 for _, _, t in bands)


def smear_linear(
    linear: np.ndarray, params: TrajectoryBlurParams, scene: Scene, draw: TrajectoryDraw, exposure: Exposure
) -> np.ndarray:
    """The valid region's linear image (uint16 (h, w, 3)) blurred along the exposure's path."""
    bands = blur_bands(params, scene, draw, exposure, linear.shape[0])
    if _still(bands):
        return linear
    return convolve_taps(linear, bands)


def trajectory_blur(image: np.ndarray, params: TrajectoryBlurParams, draw: TrajectoryDraw, scene: Scene) -> np.ndarray:
    """motion_blur (aegis-v2) of the valid region ``image``: decode to linear light, blur along the path of the
    condition's exposure (speed x exposure over the ground, minus the clean capture's own smear), encode."""
    exposure = Exposure(params.speed_mps, params.exposure_ms, scene.speed_mps, scene.exposure_ms)
    bands = blur_bands(params, scene, draw, exposure, image.shape[0])
    if _still(bands):
        return image.copy()
    return convolve_taps_srgb(image, bands)
