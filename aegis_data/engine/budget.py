"""The render budget: what one corruption render may cost, predicted before any pixel work (docs/CORRUPTIONS.md,
"Render budget").

The suite config's ranges (``config_schema``) bound each parameter per unit. Under frame scale that bounds the
work, since the unit follows the frame; under object scale the unit follows the person, and a valid value can
ask for far more than any frame-scale render: ``length_px`` 500 at a 2000-px person unit is a 66,667-px motion
blur (23 GB), a veil of ``veil_sigma_px`` 50 a 40,001-px Gaussian (a minute on a 64x64 image), 20,000 streaks
per MP of 133 px at a 4-px unit 600 streak pixels per frame pixel. So every render is first priced: a pure
function of the parameters (after scaling) and the frame's height and width predicts the render's effective
lengths, streak pixels, filter work and peak memory (:class:`RenderCost`, built per corruption by
``corruptions.render_cost`` from the helpers here), and :func:`check_render_budget` refuses, with one line,
anything over the budget below. ``apply_corruption`` checks before it draws, so build, verify, corrupt, grid,
calibrate and augmentation all inherit it.

The predictions are upper estimates of the engine's own arithmetic (the larger of the compiled and the NumPy
path), not measurements: they depend on nothing but the parameters and the frame size, so the same render is
refused or allowed on every machine. The shipped suite at realistic sizes stays far inside (tested).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from aegis_data.engine import kernels as K
from aegis_data.errors import AegisError

# The budget. Lengths: every effective blur kernel, line, streak and ripple displacement, in px; the veil's and the
# masks' Gaussian kernels count as 2 ceil(3 sigma) + 1 px. 16384 px is 4x the anchor frame's long side; the longest
# the shipped suite asks for is 12,801 px (the glare bloom of s3 at the largest person unit, 2000 px), 385 px at
# the anchor.
MAX_LENGTH_PX = 16384
# Streak pixels (one per streak per major-axis step, the rasteriser's unit of work): at most this many per frame
# pixel, or STREAK_PX_FLOOR on small frames. The shipped suite needs 2.2 per pixel at a 4-px person unit.
STREAK_PX_PER_PIXEL = 8
STREAK_PX_FLOOR = 1 << 22
# Filter work (multiply-adds of the veil's Gaussian, element steps of the motion blur's line sums, block sums
# and noise passes): at most this many per frame pixel, or WORK_FLOOR on small frames (1 to 3 ns per step, so
# seconds per megapixel at most). The shipped suite at the anchor needs under 200 per pixel.
WORK_PER_PIXEL = 8192
WORK_FLOOR = 1 << 30
# Peak memory of the render's buffers: at most 1 GiB plus 256 bytes per frame pixel (room for the frame-sized
# buffers every corruption holds: input, output and a few full-frame fields; the frame itself is bounded by the
# readers' pixel limit).
MEMORY_FIXED_BYTES = 1 << 30
MEMORY_PER_PIXEL = 256

# Bytes per drawn value of KeyedRandom.uniform (raw words, shifted words, float64 and the product in flight) and
# per streak record (5 drawn uniforms, the 5-field draw, the rasteriser's per-streak geometry, sin/cos terms).
_DRAW_BYTES = 32
_STREAK_RECORD_BYTES = 320
_FRAME_BYTES_PER_PIXEL = 32
_FIXED_BYTES = 16 << 20
# The NumPy rasteriser walks the streaks in chunks (streak_chunk_steps), about this many bytes per step in flight.
_STREAK_STEP_BYTES = 256  # ~200 measured
MOTION_BAND = 256  # the motion blur renders bands of this many output rows (corruptions._shear_box)


@dataclass(frozen=True)
class RenderCost:
    """What one render needs: ``lengths`` ((what, px) of every effective kernel, line or streak), ``streak_px``
    (streak pixels rasterised), ``work`` (filter steps whose count grows with a length or a noise grid) and
    ``peak_bytes`` (an upper estimate of the render's buffers)."""

    lengths: tuple[tuple[str, float], ...] = ()
    streak_px: float = 0.0
    work: float = 0.0
    peak_bytes: float = 0.0

    def __add__(self, other: RenderCost) -> RenderCost:
        # Stages are summed, memory too: an upper bound whatever a stage frees before the next one starts.
        return RenderCost(
            self.lengths + other.lengths,
            self.streak_px + other.streak_px,
            self.work + other.work,
            self.peak_bytes + other.peak_bytes,
        )


def frame_cost(h: int, w: int) -> RenderCost:
    """What every render holds besides its length-dependent buffers: the input copy, the output, frame-sized draws
    and fields (at most ~32 bytes per pixel, measured) and the cached tables and row-strip temporaries (16 MiB)."""
    return RenderCost((), 0.0, 0.0, float(_FRAME_BYTES_PER_PIXEL * h * w + _FIXED_BYTES))


@dataclass(frozen=True)
class Limits:
    """The budget for one ``height x width`` frame."""

    length_px: float
    streak_px: float
    work: float
    peak_bytes: float


def limits(height: int, width: int) -> Limits:
    pixels = int(height) * int(width)
    return Limits(
        float(MAX_LENGTH_PX),
        float(max(STREAK_PX_FLOOR, STREAK_PX_PER_PIXEL * pixels)),
        float(max(WORK_FLOOR, WORK_PER_PIXEL * pixels)),
        float(MEMORY_FIXED_BYTES + MEMORY_PER_PIXEL * pixels),
    )


def budget_problem(cost: RenderCost, height: int, width: int) -> str | None:
    """The first bound ``cost`` exceeds on a ``height x width`` frame, in words; None when it fits."""
    lim = limits(height, width)
    for what, px in cost.lengths:
        if not px <= lim.length_px:  # also refuses NaN
            return f"{what} {_n(px)} px (at most {_n(lim.length_px)} px)"
    if not cost.streak_px <= lim.streak_px:
        return (
            f"{_n(cost.streak_px)} streak pixels (at most {_n(lim.streak_px)} on this frame: "
            f"{STREAK_PX_PER_PIXEL} per pixel, never under {_n(STREAK_PX_FLOOR)})"
        )
    if not cost.work <= lim.work:
        return (
            f"{_n(cost.work)} filter steps (at most {_n(lim.work)} on this frame: {WORK_PER_PIXEL} per pixel, "
            f"never under {_n(WORK_FLOOR)})"
        )
    if not cost.peak_bytes <= lim.peak_bytes:
        return (
            f"about {_mb(cost.peak_bytes)} of memory (at most {_mb(lim.peak_bytes)} on this frame: 1 GiB + "
            f"{MEMORY_PER_PIXEL} bytes per pixel)"
        )
    return None


def check_render_budget(cost: RenderCost, height: int, width: int, what: str) -> None:
    """AegisError, one line starting with ``what`` (the render: corruption, severity, unit, frame), when ``cost``
    exceeds the budget on a ``height x width`` frame."""
    problem = budget_problem(cost, height, width)
    if problem is not None:
        raise AegisError(
            f"{what} exceeds the render budget: {problem}; lower the parameter, the person unit or "
            f'the frame size (docs/CORRUPTIONS.md, "Render budget")'
        )


def _n(value: float) -> str:
    return f"{value:,.0f}" if math.isfinite(value) and abs(value) < 1e18 else f"{value:.3g}"


def _mb(nbytes: float) -> str:
    return f"{nbytes / 2**20:,.0f} MB" if math.isfinite(nbytes) else str(nbytes)


# ----------------------------------------------------------------------------------------------------------
# Costs of the engine's building blocks (``h x w`` frames, 3 channels)
# ----------------------------------------------------------------------------------------------------------
def gaussian_kernel_px(sigma: float) -> float:
    """The length a Gaussian blur of std ``sigma`` px counts as: its 3-sigma kernel, 2 ceil(3 sigma) + 1."""
    return 2.0 * math.ceil(3.0 * sigma) + 1.0 if math.isfinite(sigma) else math.inf


def line_blur_cost(h: int, w: int, length: int) -> RenderCost:
    """``corruptions.motion_blur`` with an odd kernel ``length``: the worse of the two orientations (the angle is
    drawn later) at the steepest shear (|slope| 1).

    Per band of 256 output rows the sheared buffer holds ``band + 2r`` rows of ``w + 2 pad + span`` pixels, and
    its box sums 2 (or, beyond 257 px, 4) bytes per value; the padded frame is ``(h + 2r) x (w + 2 pad)``."""
    if not math.isfinite(length) or length > 1 << 40:
        return RenderCost((("motion blur length", float(length)),))

    def one(rows_h: int, cols_w: int) -> RenderCost:
        r = length // 2
        pad = r + 2
        band = min(MOTION_BAND, rows_h)
        rows = band + 2 * r
        wide = cols_w + 2 * pad + rows + 1
        sum_bytes = 4 if length * 255 > 0xFFFF else 2
        frame = rows_h * cols_w * 3
        peak = (
            (rows_h + 2 * r) * (cols_w + 2 * pad) * 3
            + rows * wide * 3 * (1 + sum_bytes)
            + band * cols_w * 3 * 12
            + 3 * frame
        )  # + the unshear's uint32 terms, transposes and output
        work = math.ceil(rows_h / band) * rows * wide * 3 * 4  # shear copy, box rows, box columns, unshear read
        return RenderCost((), 0.0, float(work), float(peak))

    a, b = one(h, w), one(w, h)
    worst = a if a.peak_bytes >= b.peak_bytes else b
    return RenderCost((("motion blur length", float(length)),), 0.0, max(a.work, b.work), worst.peak_bytes)


def veil_blur_cost(h: int, w: int, sigma: float, what: str = "veil blur kernel") -> RenderCost:
    """``corruptions._veil_blur``: OpenCV's 8-bit Gaussian (sigma >= 1 px; its row pass runs over the frame's rows
    and the kernel's border rows), or the exact discrete Gaussian of radius ceil(4 sigma) <= 4 px below that."""
    frame = h * w * 3
    if not sigma >= 1.0:
        taps = 2 * max(1, math.ceil(4.0 * sigma)) + 1
        return RenderCost((), 0.0, float(2 * taps * frame), float(frame * (4 + 8 + 8)))  # float32 out, float64 pass
    k = gaussian_kernel_px(sigma)
    if not math.isfinite(k) or k > 1 << 40:
        return RenderCost(((what, k),))
    work = 3.0 * k * (w * (h + k) + h * w)
    peak = frame + k * w * 3 * 4 + (w + k) * 3 * 4  # the uint8 output, OpenCV's ring of rows and its border row
    return RenderCost(((what, k),), 0.0, work, float(peak))


def mask_blur_cost(h: int, w: int, sigma: float, what: str) -> RenderCost:
    """``kernels.blur_mask``: f x f block sums (f = floor(sigma / 3)) over the frame mirrored to whole blocks, a
    small discrete Gaussian, and the bilinear upsampling to whole blocks, cropped."""
    k = gaussian_kernel_px(sigma)
    if not math.isfinite(k) or k > 1 << 40:
        return RenderCost(((what, k),))
    f = max(1, int(sigma // 3.0))
    hb, wb = -(-h // f), -(-w // f)
    area = (hb * f) * (wb * f)
    s_lr = math.sqrt(max(sigma * sigma - (f * f - 1) / 4.0, 0.25 * f * f)) / f
    taps = 2 * max(1, math.ceil(4.0 * s_lr)) + 1
    small = hb * wb
    work = area + 2 * taps * small + area  # block sums, the small blur, the upsampling
    peak = 2 * area + 2 * h * w + small * (8 + 8 + 2) + (8 * wb * f if f > 1 else 0)
    return RenderCost(((what, k),), 0.0, float(work), float(peak))


def noise_cost(h: int, w: int, spec: K.NoiseSpec) -> RenderCost:
    """``kernels.value_noise`` and its draw: the node grids (drawn as float64), the x pass (float32, node rows x
    working columns) kept per octave, the y pass and the uint16 field upsampled to the frame."""
    shapes = K.noise_grid_shapes(h, w, spec)
    f = K.noise_work_factor(h, w, spec)
    hw, ww = -(-h // f), -(-w // f)
    nodes = sum(gy * gx for gy, gx in shapes)
    rows = sum(gy for gy, _ in shapes) * ww
    work = 4 * rows + 4 * len(shapes) * hw * ww + nodes
    peak = _DRAW_BYTES * nodes + 4 * rows + (4 + 2) * hw * ww + 2 * h * w + 16 * 4 * (hw + ww)
    return RenderCost((), 0.0, float(work), float(peak))


def streak_chunk_steps(h: int, w: int) -> int:
    """Steps per chunk of the NumPy streak walk on an ``h x w`` frame: 2**18, or 1/32 of the frame's pixels when
    larger (each chunk also sums into a frame-sized layer, so chunks stay few: at most 256 within the budget)."""
    return max(1 << 18, (int(h) * int(w)) // 32)


def streak_cost(h: int, w: int, count: int, longest: float) -> RenderCost:
    """``corruptions.rasterize_streaks`` for ``count`` streaks of at most ``longest`` px: at most longest + 2 steps
    each; the per-streak records, the float64 layer and its blur, and the NumPy walk's chunk of steps."""
    steps = float(count) * (longest + 2.0) if count else 0.0
    chunk = min(steps, streak_chunk_steps(h, w) + longest + 2.0)  # a chunk ends after the streak that fills it
    peak = _STREAK_RECORD_BYTES * count + h * w * (8 + 8 + 8 + 4) + _STREAK_STEP_BYTES * chunk
    return RenderCost((("rain streak length", float(longest)),), steps, 0.0, float(peak))


def path_blur_cost(h: int, w: int, path_px: float, what: str = "motion path") -> RenderCost:
    """``motion.convolve_taps`` for a trajectory of ``path_px`` px (aegis-v2): one tap per path sample at most
    (``motion.SAMPLES_PER_PX`` per px of path), each a multiply-add per pixel and channel; the padded 16-bit copy
    ``(h + 2r) x (w + 2r)`` (r the path length, its worst radius) and the 64-row int64 strip of the NumPy path."""
    if not math.isfinite(path_px) or path_px > 1 << 40:
        return RenderCost(((what, float(path_px)),))
    taps = 4.0 * path_px + 16.0
    r = math.ceil(path_px) + 1
    peak = (h + 2 * r) * (w + 2 * r) * 3 * 2 + 64 * w * 3 * 8 + h * w * 3 * 2
    return RenderCost(((what, float(path_px)),), 0.0, float(taps * h * w * 3), float(peak))


def camera_pipeline_cost(h: int, w: int) -> RenderCost:
    """``camera.camera_low_light`` besides its smear: the NumPy path's int64 chroma planes and the raw-noise bands
    (measured 86 bytes per pixel at 12 MP under tracemalloc; the compiled path 17), so 96 bytes per pixel plus a
    band of 64 rows of float64 planes."""
    return RenderCost((), 0.0, 0.0, float(96 * h * w + 64 * 8 * 24 * w))
