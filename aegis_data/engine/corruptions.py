"""The corruption engine (docs/CORRUPTIONS.md): nine disaster-imaging corruptions, bit-identical anywhere.

The aegis-v1 models live here; a generation-2 suite (aegis-v2) renders some corruptions with the physical models of
``aegis_data.engine.camera``, ``motion``, ``atmosphere``, ``rain``, ``glint`` and ``flood`` (one row each of
``_SCENE_MODELS``) and every one of them inside the scene's valid pixels (``_render_in_scene``). Three layers, as in
torchvision's transforms: for each corruption a frozen **parameter record** filled from the suite file
(``configs/suites/``); a **draw** function that takes every random value it needs (noise node grids,
angles, streaks, noise indices) from a keyed stream (``aegis_data.engine.seeding``) into a frozen draw record; and a
pure **kernel** ``<name>(image, params, draw) -> image`` that tests can drive with fixed values. The single
entry point :func:`apply_corruption` validates, draws and dispatches.

Images are HxWx3 uint8 RGB in and out; the conceptual domain is [0, 1] and every output is rounded
``floor(clip(x, 0, 1) * 255 + 0.5)``. Pixel-unit parameters (``*_px``) are per 1000 px of the long side.
Numerics are exact by construction (see ``aegis_data.engine.kernels`` and docs/CORRUPTIONS.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import NamedTuple

import cv2
import numpy as np

from aegis_data.conditions import check_severity
from aegis_data.engine import atmosphere as ATM
from aegis_data.engine import budget as B
from aegis_data.engine import kernels as K
from aegis_data.engine import rain as RAIN
from aegis_data.engine.budget import RenderCost
from aegis_data.engine.camera import CameraLowLightParams, auto_exposure, camera_low_light, capture_for, draw_low_light
from aegis_data.engine.config import SuiteConfig, load_config
from aegis_data.engine.flood import (
    FloodParams,
    TurbidWaterParams,
    draw_flood,
    draw_turbid,
    flood_cost,
    inundation_v2,
    submerged_fractions,
    turbid_cost,
    turbid_water,
)
from aegis_data.engine.glint import (
    SunGlintParams,
    beaufort,
    can_glint,
    draw_glint,
    glint_cost,
    slope_variance,
    sun_glint,
)
from aegis_data.engine.motion import Exposure, TrajectoryBlurParams, draw_trajectory, trajectory_blur
from aegis_data.engine.scale import OBJECT, Scale, density_factor, pixel_length, texture_cells
from aegis_data.engine.scene import Scene, estimate_scene, focal_from_hfov, gsd_from_person_px
from aegis_data.engine.seeding import NORMAL_FRAC_BITS, KeyedRandom, keyed_random, normal_table
from aegis_data.errors import AegisError
from aegis_data.files.rgb import check_rgb_image

DEFAULT_SEED = 20260707
LUMA = (0.299, 0.587, 0.114)
_LUMA_F32 = np.asarray(LUMA, dtype=np.float32)

ImageId = str | int


def _px(value: float, height: int, width: int, reference_side: float | None = None) -> float:
    """The suite's pixel unit: ``value`` per 1000 px of the long side, or of the object scale's reference side
    (``aegis_data.engine.scale``; None = frame scale)."""
    return pixel_length(value, height, width, reference_side)


def _unit(image: np.ndarray) -> np.ndarray:
    """uint8 -> float32 in [0, 1] (one correctly rounded multiply: the same bits everywhere)."""
    x = image.astype(np.float32)
    x *= np.float32(1.0 / 255.0)
    return x


def _luma(x: np.ndarray) -> np.ndarray:
    return (x[..., 0] * np.float32(LUMA[0]) + x[..., 1] * np.float32(LUMA[1])) + x[..., 2] * np.float32(LUMA[2])


def _channels3(y: np.ndarray) -> np.ndarray:
    """A contiguous float32 (..., 3) copy of ``y`` (...) repeated over channels.

    Element-wise NumPy ops that broadcast a (..., 1) operand against (..., 3) run three elements per inner
    loop and are several times slower than on two contiguous operands; values are unaffected.
    """
    if y.ndim == 2:
        return cv2.merge([y, y, y])
    return np.repeat(y[..., None], 3, axis=-1)


def _saturate(x: np.ndarray, s: float) -> np.ndarray:
    """``sat(I, s) = clip(Y + s (I - Y))`` on float32 (..., 3)."""
    y = _channels3(_luma(x))
    out = x - y
    out *= np.float32(s)
    out += y
    return np.clip(out, 0.0, 1.0, out=out)


def _screen(base: np.ndarray, layer: np.ndarray) -> np.ndarray:
    """``screen(B, L) = 1 - (1 - B)(1 - L)``."""
    return 1.0 - (1.0 - base) * (1.0 - layer)


def _draw_noise(rng: KeyedRandom, label: str, height: int, width: int, spec: K.NoiseSpec) -> tuple:
    """Uniform node grids for one value-noise field; octave o comes from sub-stream ``<label>|octave=o``."""
    return tuple(
        rng.child(f"{label}|octave={o}").uniform(shape)
        for o, shape in enumerate(K.noise_grid_shapes(height, width, spec))
    )


def _read_only(table: np.ndarray) -> np.ndarray:
    """Mark a cached table read-only, so no caller can alter what later calls read."""
    table.setflags(write=False)
    return table


# Tables below depend only on config constants; they are built once per distinct value (lru_cache) instead of
# per call, which at 0.4 MP cost as much as the pixel work. Same values, so the same bytes either way.
@lru_cache(maxsize=16)
def _transmission_table(mean_t: float, amplitude: float) -> np.ndarray:
    """``t = clip(t_mean + a (2 f - 1), 0.02, 1)`` for each of the 65536 levels of a uint16 noise field."""
    f = np.arange(65536, dtype=np.float64) / K.U16
    return _read_only(np.clip(mean_t + amplitude * (2.0 * f - 1.0), 0.02, 1.0).astype(np.float32))


@lru_cache(maxsize=16)
def _grain_table(grain: float) -> np.ndarray:
    """Dust grain ``grain (2 f - 1)`` for each of the 65536 levels of a uint16 noise field, float32."""
    return _read_only((grain * (2.0 * (np.arange(65536, dtype=np.float64) / K.U16) - 1.0)).astype(np.float32))


@lru_cache(maxsize=16)
def _bloom_table(bloom_weight: float) -> np.ndarray:
    """Glare ``bloom_weight * bloom`` for each of the 65536 levels of a uint16 bloom field, float32."""
    return _read_only((np.arange(65536, dtype=np.float64) * (bloom_weight / K.U16)).astype(np.float32))


def _haze_blend(x: np.ndarray, t: np.ndarray, airlight_row: np.ndarray) -> np.ndarray:
    """Koschmieder haze ``I t + A (1 - t)`` = ``A + t (I - A)`` on float32 (n, w, 3), in place.

    ``airlight_row`` is A tiled over one row of interleaved RGB (3w,) and t is (n, w): both are expanded to
    contiguous operands, since NumPy runs a broadcast over the 3-channel axis element by element.
    """
    flat = x.reshape(x.shape[0], -1)
    flat -= airlight_row
    x *= _channels3(t)
    flat += airlight_row
    return x


# ==========================================================================================================
# Parameter and draw records
# ==========================================================================================================
@dataclass(frozen=True)
class WaterGlareParams:
    coverage: float
    intensity: float
    bloom_sigma_px: float
    noise_octaves: int
    noise_base: float
    bloom_weight: float
    tint: tuple
    # Object scale (aegis_data.engine.scale): the long side whose 1/1000 is the unit of the *_px fields; None = the
    # frame's own (frame scale, aegis-v1). Set by corruption_params, never by the config.
    scale_side: float | None = None


@dataclass(frozen=True)
class TurbidityCastParams:
    alpha: float
    contrast: float
    saturation: float
    cast: tuple


@dataclass(frozen=True)
class InundationParams:
    coverage: float
    opacity: float
    ripple_amplitude_px: float
    noise_octaves: int
    noise_base: float
    feather_sigma_px: float
    water: tuple
    ripple_wavelength_px: float
    sparkle_octaves: int
    sparkle_base: float
    sparkle_coverage: float
    sparkle_strength: float
    # Object scale (aegis_data.engine.scale): the long side whose 1/1000 is the unit of the *_px fields; None = the
    # frame's own (frame scale, aegis-v1). Set by corruption_params, never by the config.
    scale_side: float | None = None


@dataclass(frozen=True)
class HazeParams:
    """smoke_haze and (with ``grain``) dust_haze; fire_warm_tint adds channel gains."""

    transmission: float
    noise_octaves: int
    noise_base: float
    amplitude: float
    airlight: tuple


@dataclass(frozen=True)
class SmokeHazeParams(HazeParams):
    pass


@dataclass(frozen=True)
class FireWarmTintParams(HazeParams):
    red_gain: float = 1.0
    blue_gain: float = 1.0


@dataclass(frozen=True)
class DustHazeParams(HazeParams):
    grain: float = 0.0
    grain_octaves: int = 2
    grain_base: float = 220
    # Object scale (aegis_data.engine.scale): the long side whose 1/1000 is the unit of the *_px fields; None = the
    # frame's own (frame scale, aegis-v1). Set by corruption_params, never by the config.
    scale_side: float | None = None


@dataclass(frozen=True)
class RainStreaksParams:
    density_per_mp: float
    length_px: float
    veil_sigma_px: float
    brightness: float
    saturation: float
    angle_deg: float
    angle_jitter_image_deg: float
    angle_jitter_streak_deg: float
    length_jitter: tuple
    intensity: tuple
    streak_blur_ksize: int
    streak_blur_sigma: float
    # Object scale (aegis_data.engine.scale): the long side whose 1/1000 is the unit of the *_px fields; None = the
    # frame's own (frame scale, aegis-v1). Set by corruption_params, never by the config.
    scale_side: float | None = None


@dataclass(frozen=True)
class MotionBlurParams:
    length_px: float
    min_length: int
    angle_range_deg: tuple
    # Object scale (aegis_data.engine.scale): the long side whose 1/1000 is the unit of the *_px fields; None = the
    # frame's own (frame scale, aegis-v1). Set by corruption_params, never by the config.
    scale_side: float | None = None


@dataclass(frozen=True)
class LowLightParams:
    gain: float
    k_shot: float
    sigma_read: float
    gamma: float
    red_gain: float
    blue_gain: float


@dataclass(frozen=True)
class NoDraw:
    """turbidity_cast draws nothing."""


@dataclass(frozen=True)
class GlareDraw:
    glints: tuple  # value-noise node grids, one float64 array per octave


@dataclass(frozen=True)
class InundationDraw:
    water: tuple
    sparkle: tuple
    phase_turns: float  # ripple phase phi / (2 pi), in [0, 1)


@dataclass(frozen=True)
class HazeDraw:
    density: tuple
    grain: tuple = ()


@dataclass(frozen=True)
class RainDraw:
    """Streaks in frame pixels: centre (x, y), angle from the +x axis (deg, y down), length, intensity."""

    image_angle_deg: float
    x: np.ndarray
    y: np.ndarray
    angle_deg: np.ndarray
    length: np.ndarray
    intensity: np.ndarray


@dataclass(frozen=True)
class MotionDraw:
    angle_deg: float  # direction of the blur line from the +x axis (y down), in [0, 180)


@dataclass(frozen=True)
class LowLightDraw:
    noise: np.ndarray  # (H, W, 3) uint16 indices into seeding.normal_table()


# ==========================================================================================================
# Kernels (pure: image + parameters + draws -> image) and their draw functions
# ==========================================================================================================
def water_glare(image: np.ndarray, params: WaterGlareParams, draw: GlareDraw) -> np.ndarray:
    """Specular sun glint on flood water: bright cores from the top ``coverage`` of a value-noise field,
    a Gaussian bloom around them, screen-blended with a slightly warm tint."""
    h, w = image.shape[:2]
    q = K.value_noise(h, w, K.NoiseSpec(params.noise_octaves, params.noise_base), draw.glints)
    cores = K.top_fraction_mask(q, params.coverage)
    bloom = K.blur_mask(cores, _px(params.bloom_sigma_px, h, w, params.scale_side))
    # g = clip(cores + bw * bloom) * intensity; bw * bloom tabulated over the uint16 levels.
    bloom_table = _bloom_table(params.bloom_weight)
    tint = np.asarray(params.tint, dtype=np.float32) * np.float32(params.intensity)
    out = np.empty_like(image)
    if K.CKERNELS is not None:  # the same float32 operations per pixel, fused (aegis_data/engine/_ckernels.c)
        K.CKERNELS.glare(out, image, h * w, bloom, bloom_table, cores.view(np.uint8), tint)
        return out
    tint_row = np.tile(tint, w)  # the tint for one row of interleaved RGB: contiguous operands throughout
    for rows in K.row_strips(h, w):
        x = _unit(image[rows])
        g = np.take(bloom_table, bloom[rows])
        g += cores[rows]
        np.minimum(g, 1.0, out=g)
        layer = _channels3(g)
        layer.reshape(layer.shape[0], -1)[...] *= tint_row
        out[rows] = K.to_uint8(_screen(x, layer), scratch=True)
    return out


def _draw_water_glare(params: WaterGlareParams, h: int, w: int, rng: KeyedRandom) -> GlareDraw:
    return GlareDraw(_draw_noise(rng, "glints", h, w, K.NoiseSpec(params.noise_octaves, params.noise_base)))


def turbidity_cast(image: np.ndarray, params: TurbidityCastParams, draw: NoDraw) -> np.ndarray:
    """Suspended sediment: mix toward a muddy cast colour, compress contrast toward the per-channel mean,
    then desaturate. No randomness."""
    h, w = image.shape[:2]
    a, k = params.alpha, params.contrast
    cast = np.asarray(params.cast, dtype=np.float64)
    # Per-channel mean of J = (1-a) I + a M, from exact integer sums.
    sums = np.array(cv2.sumElems(image)[:3], dtype=np.float64)  # integer sums < 2**53: exact in float64
    mu = (1.0 - a) * (sums / (255.0 * h * w)) + a * cast
    # mu + k (J - mu) = k(1-a) I + (mu + k (a M - mu)): one scale and a per-channel offset.
    scale = np.float32(k * (1.0 - a))
    offset = (mu + k * (a * cast - mu)).astype(np.float32)
    out = np.empty_like(image)
    if K.CKERNELS is not None:
        K.CKERNELS.turbidity(out, image, h * w, float(scale), offset, _LUMA_F32, float(np.float32(params.saturation)))
        return out
    for rows in K.row_strips(h, w):
        x = _unit(image[rows]) * scale
        x += offset
        out[rows] = K.to_uint8(_saturate(x, params.saturation), scratch=True)
    return out


def _draw_none(params, h: int, w: int, rng: KeyedRandom) -> NoDraw:
    return NoDraw()


def ripple(image: np.ndarray, dx: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """Bilinear resampling at (x + dx[y], y + dy[x]) with clamped edges; uint8 (H, W, 3).

    Offsets are quantised here to 1/32 px (exact integer maps in OpenCV's fixed-point format:
    CV_16SC2 integer parts + CV_16UC1 fraction index), and ``cv2.remap`` interpolates 8-bit data in integer
    arithmetic, so no float rounding is involved.
    """
    h, w = image.shape[:2]
    if max(h, w) > 32000:
        raise AegisError(f"inundation supports frames up to 32000 px per side, got {w}x{h}")
    qx = np.floor(np.asarray(dx, dtype=np.float64) * 32.0 + 0.5).astype(np.int32)  # per row, 1/32 px
    qy = np.floor(np.asarray(dy, dtype=np.float64) * 32.0 + 0.5).astype(np.int32)  # per column
    # The x offset is constant along a row and the y offset along a column, so each map is a broadcast sum.
    shift_x, frac_x = qx >> 5, (qx & 31).astype(np.uint16)
    shift_y, frac_y = qy >> 5, ((qy & 31) << 5).astype(np.uint16)
    # Source coordinates are int16: one beyond 32767 would wrap to a negative column and read the clamped edge.
    lo_x, hi_x = (int(shift_x.min()), int(shift_x.max())) if h else (0, 0)
    lo_y, hi_y = (int(shift_y.min()), int(shift_y.max())) if w else (0, 0)
    if w - 1 + hi_x > 32767 or h - 1 + hi_y > 32767 or min(lo_x, lo_y) < -32768:
        raise AegisError(
            f"inundation: a ripple of up to {max(hi_x, hi_y, -lo_x, -lo_y)} px on a {w}x{h} frame "
            f"reaches beyond the 16-bit coordinates of OpenCV's remap (32767 px)"
        )
    # The int16 pair (x, y) = (c + shift_x[r], r + shift_y[c]) read as one little-endian int32 is
    # y * 65536 + x for x >= 0, the sum of a per-column and a per-row int32: one contiguous add per strip.
    # Columns where x can be negative (the first few; the borrow would reach y) are rewritten directly.
    cols = np.arange(w, dtype=np.int32)
    per_col = cols + shift_y * 65536
    per_row = shift_x + np.arange(h, dtype=np.int32) * 65536
    edge = min(w, max(0, -int(shift_x.min())))
    out = np.empty_like(image)
    for rows in K.row_strips(h, w, 1 << 16):
        n = rows.stop - rows.start
        packed = per_col[None, :] + per_row[rows, None]
        maps = packed.astype("<i4", copy=False).view("<i2").astype(np.int16, copy=False).reshape(n, w, 2)
        if edge:
            maps[:, :edge, 0] = cols[None, :edge] + shift_x[rows, None]
            maps[:, :edge, 1] = np.arange(rows.start, rows.stop, dtype=np.int32)[:, None] + shift_y[None, :edge]
        frac = frac_y[None, :] | frac_x[rows, None]
        cv2.remap(image, maps, frac, cv2.INTER_LINEAR, dst=out[rows], borderMode=cv2.BORDER_REPLICATE)
    return out


def inundation(image: np.ndarray, params: InundationParams, draw: InundationDraw) -> np.ndarray:
    """Standing flood water: a feathered water mask over a rippled, water-tinted copy of the scene, with
    sparse sparkles. The ripple moves content by at most ``ripple_amplitude_px`` (<= 1.4 px at 4000 px)."""
    h, w = image.shape[:2]
    water = K.value_noise(h, w, K.NoiseSpec(params.noise_octaves, params.noise_base), draw.water)
    side = params.scale_side
    mask = K.blur_mask(K.top_fraction_mask(water, params.coverage), _px(params.feather_sigma_px, h, w, side))
    sparkle_field = K.value_noise(h, w, _sparkle_spec(params, h, w), draw.sparkle)
    sparkle = K.top_fraction_mask(sparkle_field, params.sparkle_coverage)
    amp = _px(params.ripple_amplitude_px, h, w, side)
    wavelength = _px(params.ripple_wavelength_px, h, w, side)
    sin_y, _ = K.sin_cos_turns(np.arange(h, dtype=np.float64) / wavelength + draw.phase_turns)
    _, cos_x = K.sin_cos_turns(np.arange(w, dtype=np.float64) / wavelength + draw.phase_turns)
    keep = np.float32(1.0) - np.float32(params.opacity)
    water_tone = np.float32(params.opacity) * np.asarray(params.water, dtype=np.float32)
    strength = np.float32(params.sparkle_strength)
    rippled = ripple(image, amp * sin_y, amp * cos_x)
    clip = _inundation_needs_clip(params.opacity, tuple(params.water), params.sparkle_strength)
    out = np.empty_like(image)
    if K.CKERNELS is not None:  # the same float32 operations per pixel, fused (aegis_data/engine/_ckernels.c)
        K.CKERNELS.inundation(
            out, image, rippled, h * w, mask, sparkle.view(np.uint8), float(keep), water_tone, float(strength), clip
        )
        return out
    # Per-element float32 ops below are those of the documented formulas in a fixed order (bit-identical to a
    # per-pixel evaluation); broadcasts over the channel axis are avoided (NumPy runs them element by element).
    tone_row = np.tile(water_tone, w)  # (3w,): the tone for one row of interleaved RGB
    for rows in K.row_strips(h, w, 1 << 16):
        n = rows.stop - rows.start
        x = _unit(image[rows])
        wet = _unit(rippled[rows])
        wet *= keep
        wet.reshape(n, 3 * w)[...] += tone_row
        sp = np.flatnonzero(sparkle[rows])  # ~2% of pixels; screen(W, 0) is W elsewhere
        if sp.size:
            flat = wet.reshape(-1, 3)
            flat[sp] = _screen(flat[sp], strength)
        # k / 65535 in float32 division equals float32(float64(k) / 65535) for every uint16 k (correct rounding
        # of the exact quotient either way; checked exhaustively), the documented mask value. Divided once per pixel,
        # then repeated over the channels.
        m1 = mask[rows].astype(np.float32)
        m1 /= np.float32(K.U16)
        m = _channels3(m1)
        wet -= x
        wet *= m
        wet += x  # (1 - m) I + m W
        out[rows] = K.to_uint8(wet, scratch=True, clip=clip)
    return out


@lru_cache(maxsize=16)
def _inundation_needs_clip(opacity: float, water: tuple, sparkle_strength: float) -> bool:
    """Whether the inundation blend can leave [0, 1] (then ``to_uint8`` must clip); a property of the
    parameters alone, so it is checked once per parameter set.

    Each float32 op is correctly rounded, hence monotone, so for fixed wet W and scene I the blend
    ``(W - I) m + I`` lies between I (m = 0) and ``(W - I) + I`` (m = 1). Checking those end points for all
    256 x 256 levels per channel, with and without a sparkle, bounds every pixel.
    """
    keep = np.float32(1.0) - np.float32(opacity)  # the same constants as in ``inundation``
    water_tone = np.float32(opacity) * np.asarray(water, dtype=np.float32)
    strength = np.float32(sparkle_strength)
    levels = _unit(np.arange(256, dtype=np.uint8))
    wet = (levels[:, None] * keep) + water_tone[None, :]  # (256, 3)
    wet = np.concatenate([wet, _screen(wet, strength)])  # (512, 3)
    end = (wet[:, None, :] - levels[None, :, None]) + levels[None, :, None]
    ends = np.concatenate([end.ravel(), levels])
    scaled = ends * np.float32(255.0) + np.float32(0.5)  # the ops of K.to_uint8 before its clip
    return bool(scaled.min() < 0.0 or scaled.max() >= 256.0)


def _sparkle_spec(params: InundationParams, h: int, w: int) -> K.NoiseSpec:
    """The sparkle texture: a fine field whose cells follow the person unit under object scale."""
    return K.NoiseSpec(params.sparkle_octaves, texture_cells(params.sparkle_base, h, w, params.scale_side))


def _grain_spec(params: DustHazeParams, h: int, w: int) -> K.NoiseSpec:
    """The dust grain: a fine field whose cells follow the person unit under object scale."""
    return K.NoiseSpec(params.grain_octaves, texture_cells(params.grain_base, h, w, params.scale_side))


def _draw_inundation(params: InundationParams, h: int, w: int, rng: KeyedRandom) -> InundationDraw:
    return InundationDraw(
        water=_draw_noise(rng, "water", h, w, K.NoiseSpec(params.noise_octaves, params.noise_base)),
        sparkle=_draw_noise(rng, "sparkle", h, w, _sparkle_spec(params, h, w)),
        phase_turns=float(rng.child("ripple_phase").uniform(1)[0]),
    )


def _haze(
    image: np.ndarray,
    params: HazeParams,
    draw: HazeDraw,
    gains=None,
    grain: float = 0.0,
    grain_spec: K.NoiseSpec | None = None,
) -> np.ndarray:
    h, w = image.shape[:2]
    density = K.value_noise(h, w, K.NoiseSpec(params.noise_octaves, params.noise_base), draw.density)
    g_field = grain_table = None
    if grain_spec is not None:
        g_field = K.value_noise(h, w, grain_spec, draw.grain)
        grain_table = _grain_table(grain)
    t_table = _transmission_table(params.transmission, params.amplitude)
    gains32 = None if gains is None else np.asarray(gains, dtype=np.float32)
    airlight = np.asarray(params.airlight, dtype=np.float32)
    out = np.empty_like(image)
    if K.CKERNELS is not None:  # the same float32 operations per pixel, fused (aegis_data/engine/_ckernels.c)
        K.CKERNELS.haze(out, image, h * w, density, t_table, airlight, gains32, g_field, grain_table)
        return out
    # Per-channel constants tiled over one row of interleaved RGB, so every op has contiguous operands.
    gain_row = None if gains32 is None else np.tile(gains32, w)
    airlight_row = np.tile(airlight, w)
    for rows in K.row_strips(h, w):
        x = _unit(image[rows])
        if gain_row is not None:
            flat = x.reshape(x.shape[0], -1)
            flat *= gain_row
            np.clip(x, 0.0, 1.0, out=x)
        x = _haze_blend(x, np.take(t_table, density[rows]), airlight_row)
        if grain_table is not None and g_field is not None:  # set together
            x += _channels3(np.take(grain_table, g_field[rows]))
        out[rows] = K.to_uint8(x, scratch=True)
    return out


def smoke_haze(image: np.ndarray, params: SmokeHazeParams, draw: HazeDraw) -> np.ndarray:
    """Wildfire smoke: Koschmieder haze with a patchy transmission map and a neutral grey airlight."""
    return _haze(image, params, draw)


def fire_warm_tint(image: np.ndarray, params: FireWarmTintParams, draw: HazeDraw) -> np.ndarray:
    """Fire light: red up, blue down (clipped), then a warm orange haze."""
    return _haze(image, params, draw, gains=(params.red_gain, 1.0, params.blue_gain))


def dust_haze(image: np.ndarray, params: DustHazeParams, draw: HazeDraw) -> np.ndarray:
    """Collapse dust: a dense fine-structured brown haze plus grain shared by all channels."""
    h, w = image.shape[:2]
    return _haze(image, params, draw, grain=params.grain, grain_spec=_grain_spec(params, h, w))


def _draw_haze(params: HazeParams, h: int, w: int, rng: KeyedRandom) -> HazeDraw:
    density = _draw_noise(rng, "density", h, w, K.NoiseSpec(params.noise_octaves, params.noise_base))
    grain = ()
    if isinstance(params, DustHazeParams):
        grain = _draw_noise(rng, "grain", h, w, _grain_spec(params, h, w))
    return HazeDraw(density, grain)


def _veil_blur(image: np.ndarray, sigma: float) -> np.ndarray:
    """Gaussian blur of the image for the rain veil: uint8 (sigma >= 1) or float32 in [0, 1] (sigma < 1).

    sigma >= 1 px: OpenCV's 8-bit GaussianBlur (fixed-point, kernel built in soft-float: bit-exact), kernel
    size 2 ceil(3 sigma) + 1. sigma < 1 px: the exact integer discrete Gaussian (``K.discrete_gaussian``), so
    even a tiny sigma still blurs (a sampled 3-tap Gaussian would round to the identity below ~1/3 px).
    """
    if sigma >= 1.0:
        ksize = 2 * int(math.ceil(3.0 * sigma)) + 1
        return cv2.GaussianBlur(image, (ksize, ksize), sigmaX=sigma, sigmaY=sigma, borderType=cv2.BORDER_REFLECT)
    k = K.discrete_gaussian(sigma)
    return K.convolve_exact_scaled(image, k, 1.0 / (float(k.sum()) ** 2 * 255.0), max_abs=255)


def _veil_unit(blurred: np.ndarray) -> np.ndarray:
    """A float32 copy in [0, 1] of a ``_veil_blur`` result (or of a strip of one)."""
    return _unit(blurred) if blurred.dtype == np.uint8 else blurred.astype(np.float32, copy=True)


def rain_veil(image: np.ndarray, params: RainStreaksParams) -> np.ndarray:
    """The veil of rain_streaks alone, rounded to uint8: Gaussian blur, times brightness, desaturated.

    ``rain_streaks`` output minus this image is the streak contribution (never negative).
    """
    h, w = image.shape[:2]
    veil = _veil_unit(_veil_blur(image, _px(params.veil_sigma_px, h, w, params.scale_side)))
    veil *= np.float32(params.brightness)
    return K.to_uint8(_saturate(veil, params.saturation))


def rasterize_streaks(h: int, w: int, draw: RainDraw, blur_ksize: int, blur_sigma: float) -> np.ndarray:
    """Anti-aliased 1-px streak layer (float32 (H, W) in [0, 1]) from drawn streak geometry.

    Each streak is a segment through its centre; it is walked one pixel row (steep lines: the rain angles
    are 59-81 deg) or column at a time, and each step's coverage is split between the two pixels straddling
    the exact line in proportion to distance (Xiaolin Wu), with fractional coverage at the end rows. Weights
    are accumulated in 1/4096 units (exact integers), overlapping streaks add, the layer is blurred with an
    integer ``blur_ksize`` kernel of std ``blur_sigma`` and clipped to 1.
    """
    n = draw.x.size
    if n == 0:
        return np.zeros((h, w), dtype=np.float32)
    sin, cos = K.sin_cos_turns(draw.angle_deg / 360.0)
    half = draw.length * 0.5
    steep = np.abs(sin) >= np.abs(cos)
    # Parametrise along the major axis: major coordinate m, minor = c + (m - m_c) * slope.
    major_c = np.where(steep, draw.y, draw.x)
    minor_c = np.where(steep, draw.x, draw.y)
    slope = np.where(steep, cos / np.where(steep, sin, 1.0), sin / np.where(steep, 1.0, cos))
    extent = half * np.where(steep, np.abs(sin), np.abs(cos))
    lo, hi = major_c - extent, major_c + extent
    first = np.floor(lo + 0.5).astype(np.int64)
    last = np.floor(hi + 0.5).astype(np.int64)
    counts = last - first + 1
    k = K.discrete_gaussian(blur_sigma, radius=blur_ksize // 2)
    scale = 1.0 / (4096.0 * float(k.sum()) ** 2)
    if K.CKERNELS is not None:  # the same float64 operations per step, accumulated in place
        layer = np.zeros(h * w, dtype=np.float64)
        f64 = [np.ascontiguousarray(v, dtype=np.float64) for v in (major_c, minor_c, slope, lo, hi, draw.intensity)]
        K.CKERNELS.streaks(
            layer,
            h,
            w,
            n,
            np.ascontiguousarray(first),
            np.ascontiguousarray(counts),
            np.ascontiguousarray(steep).view(np.uint8),
            *f64,
        )
        return K.convolve_exact_scaled(layer.reshape(h, w), k, scale, cap_one=True)
    # Walked in chunks of whole streaks, so the per-step arrays stay bounded (docs/CORRUPTIONS.md, "Render
    # budget"); the weights are integers, so the chunks' sums add up exactly to the one-pass layer.
    layer = np.zeros(h * w, dtype=np.float64)
    ends = np.cumsum(counts)
    chunk, s0 = B.streak_chunk_steps(h, w), 0
    while s0 < n:
        s1 = max(s0 + 1, int(np.searchsorted(ends, ends[s0] - counts[s0] + chunk, side="right")))
        at = slice(s0, s1)
        idx, wq = _streak_steps(
            w,
            h,
            counts[at],
            first[at],
            major_c[at],
            minor_c[at],
            slope[at],
            lo[at],
            hi[at],
            steep[at],
            draw.intensity[at],
        )
        if idx.size:
            base = int(idx.min())
            part = np.bincount(idx - base, weights=wq, minlength=int(idx.max()) - base + 1)
            layer[base : base + part.size] += part
        s0 = s1
    return K.convolve_exact_scaled(layer.reshape(h, w), k, scale, cap_one=True)


def _streak_steps(w: int, h: int, counts, first, major_c, minor_c, slope, lo, hi, steep, intensity):
    """(flat pixel index, integer weight in 1/4096) of both pixels of every step of the given streaks, inside the
    frame: the NumPy twin of the compiled ``streaks`` loop."""
    n = counts.size
    sid = np.repeat(np.arange(n), counts)
    step = np.arange(sid.size) - np.repeat(np.cumsum(counts) - counts, counts)
    m = first[sid] + step
    mf = m.astype(np.float64)
    coverage = np.minimum(mf + 0.5, hi[sid]) - np.maximum(mf - 0.5, lo[sid])  # end rows partially covered
    minor = minor_c[sid] + (mf - major_c[sid]) * slope[sid]
    base = np.floor(minor)
    frac = minor - base
    weight = coverage * intensity[sid]
    minor0 = base.astype(np.int64)
    is_steep = steep[sid]
    # Both pixels of every step in one exact accumulation (integer weights in 1/4096 units).
    minor_px = np.concatenate([minor0, minor0 + 1])
    major_px = np.concatenate([m, m])
    steep2 = np.concatenate([is_steep, is_steep])
    px_x = np.where(steep2, minor_px, major_px)
    px_y = np.where(steep2, major_px, minor_px)
    wq = np.floor(np.concatenate([weight * (1.0 - frac), weight * frac]) * 4096.0 + 0.5)
    ok = (px_x >= 0) & (px_x < w) & (px_y >= 0) & (px_y < h)
    return px_y[ok] * w + px_x[ok], wq[ok]


def rain_streaks(image: np.ndarray, params: RainStreaksParams, draw: RainDraw) -> np.ndarray:
    """Storm rain: a soft, darker, desaturated veil, then thin bright anti-aliased streaks screen-blended.

    Streak pixels are those where the output is brighter than :func:`rain_veil` (rounded). Calibration's
    ``streak_density`` estimates them from (clean, corrupted) pairs alone: pixels whose luma exceeds a bound on
    the veil-only luma by more than 0.03 (see aegis_data.engine.calibration.streak_density).
    """
    h, w = image.shape[:2]
    blurred = _veil_blur(image, _px(params.veil_sigma_px, h, w, params.scale_side))
    layer = rasterize_streaks(h, w, draw, params.streak_blur_ksize, params.streak_blur_sigma)
    out = np.empty_like(image)
    if K.CKERNELS is not None:
        veil_f32 = blurred.dtype != np.uint8
        K.CKERNELS.rain(
            out,
            np.ascontiguousarray(blurred),
            h * w,
            veil_f32,
            np.ascontiguousarray(layer),
            float(np.float32(params.brightness)),
            _LUMA_F32,
            float(np.float32(params.saturation)),
        )
        return out
    for rows in K.row_strips(h, w):
        veil = _veil_unit(blurred[rows])
        veil *= np.float32(params.brightness)
        veil = _saturate(veil, params.saturation)
        # screen(V, L) = 1 - (1 - V)(1 - L), with (1 - L) formed per pixel and repeated over channels.
        veil = np.subtract(1.0, veil, out=veil)
        veil *= _channels3(1.0 - layer[rows])
        veil = np.subtract(1.0, veil, out=veil)
        out[rows] = K.to_uint8(veil, scratch=True)
    return out


def _draw_rain_streaks(params: RainStreaksParams, h: int, w: int, rng: KeyedRandom) -> RainDraw:
    n = rain_streak_count(params, h, w)
    jit = params.angle_jitter_image_deg
    image_angle = params.angle_deg + jit * (2.0 * float(rng.child("image_angle").uniform(1)[0]) - 1.0)
    u = rng.child("streaks").uniform((5, n))
    lj, it = params.length_jitter, params.intensity
    return RainDraw(
        image_angle_deg=image_angle,
        x=u[0] * w - 0.5,
        y=u[1] * h - 0.5,
        angle_deg=image_angle + params.angle_jitter_streak_deg * (2.0 * u[2] - 1.0),
        length=_px(params.length_px, h, w, params.scale_side) * (lj[0] + (lj[1] - lj[0]) * u[3]),
        intensity=it[0] + (it[1] - it[0]) * u[4],
    )


def rain_streak_count(params: RainStreaksParams, h: int, w: int) -> int:
    """Streaks on an ``h x w`` frame: ``density_per_mp`` per megapixel (frame scale), or per the anchor's person
    area under object scale (``aegis_data.engine.scale.density_factor``), rounded half up."""
    # density_factor is exactly 1.0 under frame scale, and x * 1.0 == x: the aegis-v1 count, bit for bit.
    return int(math.floor(params.density_per_mp * h * w / 1e6 * density_factor(params.scale_side) + 0.5))


def motion_kernel_length(params: MotionBlurParams, h: int, w: int) -> int:
    """Odd kernel length ``max(min_length, round(px(length)))``, bumped to the next odd number (centred)."""
    n = max(int(params.min_length), int(math.floor(_px(params.length_px, h, w, params.scale_side) + 0.5)))
    return n if n % 2 == 1 else n + 1


def _runs(values: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) index ranges over which ``values`` is constant."""
    cuts = np.flatnonzero(np.diff(values)) + 1
    return list(zip(np.concatenate([[0], cuts]).tolist(), np.concatenate([cuts, [values.size]]).tolist()))


def _shear_box(image: np.ndarray, length: int, slope: float, band: int = B.MOTION_BAND) -> np.ndarray:
    """Mean along a near-vertical line (|slope| = |dx/dy| <= 1) of ``length`` pixels through each pixel.

    Rows are sheared sideways by ``round(y * slope)`` (contiguous copies), summed down columns with OpenCV's
    integer box filter (8-bit in; 16-bit sums up to 257 px, 32-bit beyond: exact) and unsheared, so each output
    sums one pixel per row of the digital line. That line's rounding phase ``phi = y slope - round(y slope)`` would
    shift row y's result by ~phi (a +-0.5 px sawtooth, seen as seams every 1/slope rows), so the unshear reads the
    sums at ``x - phi`` with 2-tap interpolation (weights in 1/64), and the total is divided by ``64 length`` with
    rounding - all in integers. Works on bands of ``band`` output rows so the sheared buffer stays small.
    """
    h, w = image.shape[:2]
    r = length // 2
    pad_x = int(math.ceil(r * abs(slope))) + 2  # +1 for rounding, +1 for the interpolation neighbour
    padded = cv2.copyMakeBorder(image, r, r, pad_x, pad_x, cv2.BORDER_REFLECT)
    wp = padded.shape[1]
    off = np.floor((np.arange(padded.shape[0], dtype=np.float64) - r) * slope + 0.5).astype(np.int64)
    rows = np.arange(h, dtype=np.float64)
    phase = rows * slope - off[r : r + h]  # in [-0.5, 0.5]
    w_left = np.floor(np.maximum(phase, 0.0) * 64.0 + 0.5).astype(np.uint32)  # weight of column x - 1
    w_right = np.floor(np.maximum(-phase, 0.0) * 64.0 + 0.5).astype(np.uint32)  # weight of column x + 1
    w_mid = 64 - w_left - w_right
    # A column sum reaches 255 * length: 16 bits hold it up to 257 px (every shipped blur, so their bytes stay
    # as they were); beyond that OpenCV's 16-bit sums saturate (a constant 250 frame came out 197 at 333 px), so
    # longer lines sum in 32 bits. The unshear's 64 * 255 * length + 32 * length fits uint32 for length <= 65535.
    wide_sums = length * 255 > 0xFFFF
    out = np.empty((h, w, 3), dtype=np.uint8)
    c = K.CKERNELS
    for r0 in range(0, h, band):
        r1 = min(h, r0 + band)
        e = off[r0 : r1 + 2 * r] - off[r0 : r1 + 2 * r].min()
        span = int(e.max())
        # sheared[v, u] = padded[r0 + v, u - span + e[v]]; rows with the same shift copied together.
        if c is not None:
            sheared = np.empty((e.size, wp + span, 3), dtype=np.uint8)
            c.shear(sheared, padded, padded.shape[0], wp, r0, np.ascontiguousarray(e), e.size, span)
        else:
            sheared = np.zeros((e.size, wp + span, 3), dtype=np.uint8)
            for y0, y1 in _runs(e):
                left = span - int(e[y0])
                sheared[y0:y1, left : left + wp] = padded[r0 + y0 : r0 + y1]
        sums = cv2.boxFilter(
            sheared,
            cv2.CV_32S if wide_sums else cv2.CV_16U,
            (1, length),
            normalize=False,
            borderType=cv2.BORDER_CONSTANT,
        )
        if wide_sums:
            sums = sums.view(np.uint32)  # non-negative: the same bits, and uint32 products below stay unsigned
        # Unsheared sums for output row y sit at sums[y + r, x + pad_x + span - e[y + r]].
        start = pad_x + span - e[r : r + (r1 - r0)]
        if c is not None:  # the same integer operations per element
            c.unshear(
                out,
                h,
                w,
                np.ascontiguousarray(sums),
                sums.shape[0],
                sums.shape[1],
                r0,
                r1,
                r,
                np.ascontiguousarray(start),
                w_mid,
                w_left,
                w_right,
                length,
                sums.dtype.itemsize,
            )
            continue
        for y0, y1 in _runs(start):
            s0 = int(start[y0])
            src = sums[y0 + r : y1 + r]
            acc = src[:, s0 : s0 + w].astype(np.uint32) * w_mid[r0 + y0 : r0 + y1, None, None]
            acc += src[:, s0 - 1 : s0 - 1 + w] * w_left[r0 + y0 : r0 + y1, None, None]
            acc += src[:, s0 + 1 : s0 + 1 + w] * w_right[r0 + y0 : r0 + y1, None, None]
            acc += 32 * length
            acc //= 64 * length
            out[r0 + y0 : r0 + y1] = acc
    return out


def motion_blur(image: np.ndarray, params: MotionBlurParams, draw: MotionDraw) -> np.ndarray:
    """Camera or platform motion: the mean along a centred straight line of odd length at the drawn angle.

    The line is digital (one pixel per column, or per row when steeper than 45 deg), rounded from the exact
    line through each pixel, so every sample lies within 1 px of it; weights 1/L, mirrored border, result
    rounded half up in integers.
    """
    h, w = image.shape[:2]
    length = motion_kernel_length(params, h, w)
    sin, cos = K.sin_cos_turns(draw.angle_deg / 360.0)
    if abs(cos) < abs(sin):  # steeper than 45 deg: one sample per row
        return _shear_box(image, length, cos / sin)
    # cv2.transpose moves the bytes in cache-sized tiles (NumPy's strided copy of 3-byte pixels took ~0.2 s per
    # 12 MP frame); a pure permutation either way.
    return cv2.transpose(_shear_box(cv2.transpose(image), length, sin / cos))


def _draw_motion_blur(params: MotionBlurParams, h: int, w: int, rng: KeyedRandom) -> MotionDraw:
    lo, hi = params.angle_range_deg
    return MotionDraw(float(lo + (hi - lo) * rng.child("angle").uniform(1)[0]))


def render_cost(params, height: int, width: int) -> RenderCost:
    """What rendering with the parameter record ``params`` (after scaling) on a ``height x width`` frame needs:
    effective lengths, streak pixels, filter work and peak memory, from those alone (``aegis_data.engine.budget``;
    docs/CORRUPTIONS.md, "Render budget"). Corruptions whose work only follows the frame cost the frame's share."""
    h, w = int(height), int(width)
    return B.frame_cost(h, w) + _length_cost(params, h, w)


def _length_cost(params, h: int, w: int) -> RenderCost:
    """The part of :func:`render_cost` that grows with a length, a streak count or a noise grid."""
    if isinstance(params, WaterGlareParams):
        return B.noise_cost(h, w, K.NoiseSpec(params.noise_octaves, params.noise_base)) + B.mask_blur_cost(
            h, w, _px(params.bloom_sigma_px, h, w, params.scale_side), "glare bloom kernel"
        )
    if isinstance(params, InundationParams):
        side = params.scale_side
        ripple_px = _px(params.ripple_amplitude_px, h, w, side)
        return (
            B.noise_cost(h, w, K.NoiseSpec(params.noise_octaves, params.noise_base))
            + B.noise_cost(h, w, _sparkle_spec(params, h, w))
            + B.mask_blur_cost(h, w, _px(params.feather_sigma_px, h, w, side), "shoreline feather kernel")
            + RenderCost((("ripple displacement", ripple_px),))
        )
    if isinstance(params, HazeParams):
        cost = B.noise_cost(h, w, K.NoiseSpec(params.noise_octaves, params.noise_base))
        if isinstance(params, DustHazeParams):
            cost = cost + B.noise_cost(h, w, _grain_spec(params, h, w))
        return cost
    if isinstance(params, RainStreaksParams):
        longest = _px(params.length_px, h, w, params.scale_side) * float(params.length_jitter[1])
        return B.veil_blur_cost(h, w, _px(params.veil_sigma_px, h, w, params.scale_side)) + B.streak_cost(
            h, w, rain_streak_count(params, h, w), longest
        )
    if isinstance(params, MotionBlurParams):
        return B.line_blur_cost(h, w, motion_kernel_length(params, h, w))
    return RenderCost()  # turbidity_cast, low_light: frame-sized work only


_LIN_FRAC_BITS = 24
_ENC_BITS = 20


def _pow_table_margin(values: np.ndarray, what: str) -> None:
    frac = values - np.floor(values)
    if np.abs(frac - 0.5).min() < 1e-6:  # a property of the gamma a suite config names
        raise AegisError(
            f"{what}: an entry lies within 1e-6 of a rounding boundary, where libm's last bit could "
            f"decide it; choose a slightly different gamma"
        )


@lru_cache(maxsize=8)
def linear_table(gamma: float) -> np.ndarray:
    """``(v / 255) ** gamma`` for v = 0..255, rounded to multiples of 2**-24 (float64, exact values; read-only).

    ``**`` goes through libm; the rounding is checked to have margin, so an ulp of libm error cannot show.
    """
    scaled = (np.arange(256, dtype=np.float64) / 255.0) ** gamma * float(1 << _LIN_FRAC_BITS)
    _pow_table_margin(scaled[1:-1], "linear table")
    return _read_only(np.floor(scaled + 0.5) * 2.0**-_LIN_FRAC_BITS)


@lru_cache(maxsize=8)
def encode_table(gamma: float) -> np.ndarray:
    """uint8 ``floor(x ** (1/gamma) * 255 + 0.5)`` for x = q / 2**20, q = 0..2**20 (read-only; built once
    per gamma, a 2**20-entry search that cost more than the pixel work of a 0.4 MP frame).

    Built from the 255 decision thresholds ``((k - 0.5) / 255) ** gamma`` (each checked for margin against
    the 2**-20 grid), so no rounding decision rests on a libm last bit.
    """
    k = np.arange(1, 256, dtype=np.float64)
    thresholds = ((k - 0.5) / 255.0) ** gamma * float(1 << _ENC_BITS)
    _pow_table_margin(thresholds + 0.5, "encode table")  # boundaries must sit clear of grid points
    q = np.arange((1 << _ENC_BITS) + 1, dtype=np.float64)
    return _read_only(np.searchsorted(thresholds, q, side="right").astype(np.uint8))


def low_light(image: np.ndarray, params: LowLightParams, draw: LowLightDraw) -> np.ndarray:
    """Dusk: linearise, cut the exposure (slightly red-poor, blue-rich), add shot + read noise, re-encode.

    ``out = clip(L gain + N(0,1) (sqrt(k_shot clip(L gain)) + sigma_read)) ** (1/gamma)`` per channel.
    """
    h, w = image.shape[:2]
    sd_lut, dark_lut = _low_light_tables(params)
    enc = encode_table(params.gamma)
    table = _normal_table_f32()
    grid = float(1 << _ENC_BITS)
    out = np.empty_like(image)
    if K.CKERNELS is not None:
        K.CKERNELS.low_light(
            out,
            image,
            h * w,
            np.ascontiguousarray(draw.noise, dtype=np.uint16),
            table,
            sd_lut,
            dark_lut,
            enc,
            1 << _ENC_BITS,
        )
        return out
    for rows in K.row_strips(h, w):
        # Table reads only: cv2.LUT copies the per-(level, channel) entries, np.take the noise and encode
        # entries (both several times faster than fancy indexing through an index array built per pixel).
        x = np.take(table, draw.noise[rows])
        x *= cv2.LUT(image[rows], sd_lut)
        x += cv2.LUT(image[rows], dark_lut)
        x += np.float32(0.5)
        np.clip(x, 0.0, grid, out=x)
        out[rows] = np.take(enc, x.astype(np.int32))
    return out


@lru_cache(maxsize=1)
def _normal_table_f32() -> np.ndarray:
    """``seeding.normal_table()`` as float32 (exact: the entries are integers below 2**24), read-only."""
    return _read_only(normal_table().astype(np.float32))


@lru_cache(maxsize=16)
def _low_light_tables(params: LowLightParams) -> tuple[np.ndarray, np.ndarray]:
    """Per (level, channel) noise scale and signal of ``low_light``, float32 in 2**-20 units, as (256, 1, 3)
    ``cv2.LUT`` tables (read-only; a property of the parameters)."""
    lin = linear_table(params.gamma)
    gains = np.array([params.red_gain, 1.0, params.blue_gain]) * params.gain
    dark = lin[:, None] * gains[None, :]  # (256, 3) float64
    sd = np.sqrt(params.k_shot * np.clip(dark, 0.0, 1.0)) + params.sigma_read
    grid = float(1 << _ENC_BITS)
    # In units of 2**-20: signal, and noise per normal-table unit (the table is in 2**-20 units too).
    dark_q = (dark * grid).astype(np.float32)
    sd_q = sd.astype(np.float32) * np.float32(grid / (1 << NORMAL_FRAC_BITS))
    return _read_only(sd_q.reshape(256, 1, 3)), _read_only(dark_q.reshape(256, 1, 3))


def _draw_low_light(params: LowLightParams, h: int, w: int, rng: KeyedRandom) -> LowLightDraw:
    return LowLightDraw(rng.child("sensor_noise").normal_indices((h, w, 3)))


# ==========================================================================================================
# Registry and entry point
# ==========================================================================================================
class Corruption(NamedTuple):
    kernel: Callable[..., np.ndarray]
    params_type: type
    draw: Callable[..., object]


_KERNELS: tuple[Corruption, ...] = (
    Corruption(water_glare, WaterGlareParams, _draw_water_glare),
    Corruption(turbidity_cast, TurbidityCastParams, _draw_none),
    Corruption(inundation, InundationParams, _draw_inundation),
    Corruption(smoke_haze, SmokeHazeParams, _draw_haze),
    Corruption(fire_warm_tint, FireWarmTintParams, _draw_haze),
    Corruption(rain_streaks, RainStreaksParams, _draw_rain_streaks),
    Corruption(motion_blur, MotionBlurParams, _draw_motion_blur),
    Corruption(low_light, LowLightParams, _draw_low_light),
    Corruption(dust_haze, DustHazeParams, _draw_haze),
)
_BY_NAME: dict[str, Corruption] = {c.kernel.__name__: c for c in _KERNELS}


class SceneModel(NamedTuple):
    """A generation-2 model: ``kernel(image, params, draw, scene)``, ``draw(params, scene, h, w, rng)``, the render
    ``cost(params, scene, h, w)`` of an ``h x w`` valid region (``aegis_data.engine.budget``), and ``ladder(params,
    camera, gsd)``: one severity in physical terms on the suite's default camera (``gsd``: metres per px of the
    person unit, or None), for ``aegis list``."""

    kernel: Callable[..., np.ndarray]
    params_type: type
    draw: Callable[..., object]
    cost: Callable[..., RenderCost]
    ladder: Callable[..., dict]


def _smear_cost(smear_m: float, jitter_mrad: float, scene: Scene, h: int, w: int) -> RenderCost:
    """A camera model's smear path at the nearest row of an oblique view, plus the jitter's reach."""
    nearest = float(scene.gsd_rows(np.array([scene.valid[3] - 1.0]))[0])
    path = smear_m / nearest + 4.0 * jitter_mrad / 1000.0 * scene.focal_px
    return B.frame_cost(h, w) + B.path_blur_cost(h, w, path)


def _trajectory_cost(params: TrajectoryBlurParams, scene: Scene, h: int, w: int) -> RenderCost:
    smear = Exposure(params.speed_mps, params.exposure_ms, scene.speed_mps, scene.exposure_ms).added_smear_m()
    return _smear_cost(smear, params.jitter_mrad, scene, h, w)


def _low_light_cost(params: CameraLowLightParams, scene: Scene, h: int, w: int) -> RenderCost:
    capture = capture_for(params, scene)
    smear = Exposure(scene.speed_mps, capture.exposure_ms, scene.speed_mps, scene.exposure_ms).added_smear_m()
    return _smear_cost(smear, 0.0, scene, h, w) + B.camera_pipeline_cost(h, w)


def _plus_frame(cost: Callable[..., RenderCost]) -> Callable[..., RenderCost]:
    """``cost`` plus the frame-sized buffers every render holds, for the models whose own cost leaves them out."""
    return lambda params, scene, h, w: B.frame_cost(h, w) + cost(params, scene, h, w)


def _with_smear_px(row: dict, smear_m: float, gsd: float | None) -> dict:
    if gsd is not None:
        row["smear_px"] = round(smear_m / gsd, 2)
    return row


def _low_light_ladder(p: CameraLowLightParams, cam: Mapping, gsd: float | None) -> dict:
    """The exposure, ISO and remaining brightness the auto-exposure chooses, and the smear the exposure adds."""
    cap = auto_exposure(p.ev_loss, cam["base_exposure_ms"], cam["base_iso"], p.shutter_limit_ms, p.iso_cap)
    v = cam["platform_speed_mps"]
    smear = Exposure(v, cap.exposure_ms, v, cam["base_exposure_ms"]).added_smear_m()
    return _with_smear_px(
        {
            "ev_loss": p.ev_loss,
            "exposure_ms": cap.exposure_ms,
            "iso": round(cap.iso, 1),
            "brightness": round(cap.brightness, 4),
            "smear_m": round(smear, 4),
        },
        smear,
        gsd,
    )


def _trajectory_ladder(p: TrajectoryBlurParams, cam: Mapping, gsd: float | None) -> dict:
    """The smear the exposure adds over the clean flight's, and the jitter."""
    smear = Exposure(p.speed_mps, p.exposure_ms, cam["platform_speed_mps"], cam["base_exposure_ms"]).added_smear_m()
    return _with_smear_px(
        {
            "speed_mps": p.speed_mps,
            "exposure_ms": p.exposure_ms,
            "smear_m": round(smear, 4),
            "jitter_mrad": p.jitter_mrad,
        },
        smear,
        gsd,
    )


def _plume_ladder(p: ATM.PlumeParams, cam: Mapping, gsd: float | None) -> dict:
    """The default camera on the anchor's 4000-px frame."""
    return ATM.plume_ladder_row(p, focal_from_hfov(4000, float(cam["hfov_deg"])) if gsd is not None else None, gsd)


_SCENE_MODELS: dict[str, SceneModel] = {
    "trajectory_blur": SceneModel(
        trajectory_blur,
        TrajectoryBlurParams,
        lambda params, scene, h, w, rng: draw_trajectory(params, scene, rng),
        _trajectory_cost,
        _trajectory_ladder,
    ),
    "camera_low_light": SceneModel(
        camera_low_light, CameraLowLightParams, draw_low_light, _low_light_cost, _low_light_ladder
    ),
    # The atmosphere (aegis_data.engine.atmosphere, aegis_data.engine.rain).
    "smoke_plume": SceneModel(
        ATM.plume_haze, ATM.SmokePlumeParams, ATM.draw_plume, _plus_frame(ATM.plume_cost), _plume_ladder
    ),
    "dust_plume": SceneModel(
        ATM.plume_haze, ATM.DustPlumeParams, ATM.draw_plume, _plus_frame(ATM.plume_cost), _plume_ladder
    ),
    "firelight": SceneModel(
        ATM.firelight,
        ATM.FirelightParams,
        ATM.draw_firelight,
        _plus_frame(ATM.firelight_cost),
        lambda p, cam, gsd: ATM.firelight_ladder_row(p, cam["base_exposure_ms"], cam["base_iso"]),
    ),
    "rain_rate": SceneModel(
        RAIN.rain_rate,
        RAIN.RainRateParams,
        RAIN.draw_rain,
        _plus_frame(RAIN.rain_cost),
        lambda p, cam, gsd: RAIN.rain_ladder_row(p),
    ),
    # The water (aegis_data.engine.glint, aegis_data.engine.flood).
    "sun_glint": SceneModel(
        sun_glint,
        SunGlintParams,
        draw_glint,
        lambda p, scene, h, w: glint_cost(p, h, w),
        lambda p, cam, gsd: {
            "wind_speed_mps": p.wind_speed_mps,
            "mean_square_slope": round(slope_variance(p.wind_speed_mps), 5),
            "beaufort": beaufort(p.wind_speed_mps),
        },
    ),
    "turbid_water": SceneModel(
        turbid_water,
        TurbidWaterParams,
        draw_turbid,
        lambda p, scene, h, w: turbid_cost(p, h, w),
        lambda p, cam, gsd: {"sediment_g_m3": p.sediment_g_m3},
    ),
    "flood": SceneModel(
        inundation_v2,
        FloodParams,
        draw_flood,
        flood_cost,
        lambda p, cam, gsd: {
            "rise_m": p.rise_m,
            "flooded_smooth_ground_m": round(p.rise_m / p.bank_slope, 1),
            "submerged_at_shore": round(min(1.0, p.rise_m / 1.7), 3),
        },
    ),
}


def _scene_model_of(params) -> SceneModel | None:
    """The generation-2 model whose parameter record ``params`` is, or None (an aegis-v1 record)."""
    return next((m for m in _SCENE_MODELS.values() if isinstance(params, m.params_type)), None)


def _check_registry() -> tuple[tuple[str, ...], Mapping[str, tuple[str, ...]]]:
    """The default suite's names and families, after checking that every shipped suite names only corruptions this
    engine runs and that the models a suite may name (the schema's, checked when a suite is loaded) are its own."""
    from aegis_data.engine.config import installed_suites
    from aegis_data.engine.config_schema import PARAMETERS

    models = set(_BY_NAME) | set(_SCENE_MODELS)
    if set(PARAMETERS) != models:
        raise AegisError(f"the suite schema's models {sorted(PARAMETERS)} do not match the engine's {sorted(models)}")
    suites = installed_suites()
    for cfg in suites:
        if set(cfg.names) != set(_BY_NAME):
            raise AegisError(
                f"{cfg.path}: corruptions {sorted(cfg.names)} do not match the engine's {sorted(_BY_NAME)}"
            )
    cfg = suites[0]
    return cfg.names, {k: tuple(v) for k, v in cfg.families.items()}


CORRUPTIONS, FAMILIES = _check_registry()


def corruption_names(family: str | None = None) -> tuple[str, ...]:
    """The suite's corruption names in config order; with ``family`` (flood, wildfire, storm, earthquake), that
    family's only."""
    if family is None:
        return CORRUPTIONS
    if family not in FAMILIES:
        raise AegisError(f"unknown family {family!r}; expected one of: {', '.join(FAMILIES)}")
    return FAMILIES[family]


def corruption_params(name: str, severity: int, config: SuiteConfig | None = None, scale: Scale | None = None):
    """The frozen parameter record of ``name`` at ``severity``, filled from ``config`` (default: the default suite,
    aegis-v2). ``scale``: an object :class:`~aegis_data.engine.scale.Scale` sets the record's ``scale_side`` (its
    ``*_px`` fields then follow the person unit); None or frame scale leaves the aegis-v1 record as it is. A
    generation-2 model's record also carries the suite camera's facts it reads (``SuiteConfig.camera``)."""
    suite = config or load_config()
    _check_name(name, suite)
    _check_severity(severity)
    spec = suite.corruptions[name]
    model = spec.model_name
    ptype = _SCENE_MODELS[model].params_type if model in _SCENE_MODELS else _BY_NAME[model].params_type
    values = spec.params(int(severity))
    known = {f.name for f in fields(ptype)}
    unknown = set(values) - known
    if unknown:
        raise AegisError(f"{name}: config keys {sorted(unknown)} are not parameters of {ptype.__name__}")
    if model in _SCENE_MODELS:
        values.update({k: v for k, v in suite.camera.items() if k in known})
    if scale is not None and not isinstance(scale, Scale):
        raise AegisError(f"`scale` must be an aegis_data.engine.scale.Scale, got {type(scale).__name__}", param="scale")
    if scale is not None and scale.is_object and "scale_side" in known:
        values["scale_side"] = scale.reference_side
    return ptype(**values)


def physical_ladder(name: str, config: SuiteConfig, person_px: float | None = None) -> list[dict]:
    """What a generation-2 model's severities mean on the suite's default camera, one dict per severity (the model's
    ``ladder``): e.g. low light's exposure, ISO and remaining brightness chosen by the auto-exposure, and the smear
    (m; px when ``person_px`` is given) the exposure adds; motion blur's added smear and jitter. Empty for an
    aegis-v1 model."""
    model = _SCENE_MODELS.get(config.corruptions[name].model_name)
    if model is None:
        return []
    gsd = gsd_from_person_px(person_px) if person_px is not None else None
    return [model.ladder(corruption_params(name, sev, config), config.camera, gsd) for sev in (1, 2, 3)]


def draw_params(name: str, params, height: int, width: int, rng: KeyedRandom, scene: Scene | None = None):
    """Every random value ``name`` needs for a ``height x width`` frame, from stream ``rng``: the public draw
    layer. ``kernel(image, params, draw_params(...))`` with the stream ``keyed_random(image_id, name, severity,
    seed)`` is exactly :func:`apply_corruption` for an aegis-v1 model; a generation-2 model (a params record of
    its type) also takes the ``scene``. Tests drive kernels with draws from their own streams."""
    _check_name(name)
    model = _scene_model_of(params)
    if model is not None:
        if scene is None:
            raise AegisError(f"{type(params).__name__} draws need the image's scene")
        return model.draw(params, scene, int(height), int(width), rng)
    return _BY_NAME[name].draw(params, int(height), int(width), rng)


def _check_name(name, config: SuiteConfig | None = None) -> None:
    """``name`` is a corruption the engine runs (the installed suite's names are the engine's: _check_registry)
    and, with ``config``, one that suite declares: a config may hold a subset of the nine."""
    load_config().check_corruption(name)
    if config is not None:
        config.check_corruption(name)


def _check_severity(severity) -> None:
    check_severity(severity)


def apply_corruption(
    image: np.ndarray,
    name: str,
    severity: int,
    image_id: ImageId,
    seed: int = DEFAULT_SEED,
    config: SuiteConfig | None = None,
    scale: Scale | None = None,
    scene: Scene | None = None,
) -> np.ndarray:
    """Corrupt one image: HxWx3 uint8 RGB in, a new array of the same shape and dtype out.

    Deterministic in (pixels, name, severity, image_id, seed, suite, scale; an aegis-v2 image's scene, itself a
    function of the pixels, the person unit, the suite's camera and any sidecar facts) alone: the draws come from
    the stream keyed
    ``stream_key(image_id, name, severity, seed, config.key_tag)``, so any image can be regenerated alone, in any
    order or process, with identical bytes on any machine. ``config``: the suite whose parameters apply (default:
    the default suite, aegis-v2; ``load_config("aegis-v1")`` for the first suite; a split's build passes its own).
    ``scale``: the length unit (``aegis_data.engine.scale``; default frame scale, the aegis-v1 behaviour). An
    aegis-v2 suite renders in physical units, so it needs an object scale (``Scale("object", person_px)``) or the
    image's ``scene`` (``aegis_data.engine.scene.estimate_scene``). Raises AegisError for bad input.
    """
    check_rgb_image(image)
    suite = config or load_config()
    _check_name(name, suite)
    _check_severity(severity)
    rng = keyed_random(image_id, name, int(severity), seed, suite.key_tag)
    return corrupt_with_stream(image, name, severity, rng, suite, scale, scene)


def condition_facts(image: np.ndarray, name: str, severity: int, config: SuiteConfig, scene: Scene) -> dict | None:
    """What a build records beside a corrupted file of a generation-2 suite, or None: for a flood model, the
    ground-truth contract's ``submerged_fraction`` of every person of the scene (``flood.submerged_fractions``;
    docs/SCORING.md, "Submerged persons"). A pure function of the clean ``image``, its scene and the suite."""
    if not config.uses_scene or config.corruptions[name].model_name != "flood":
        return None
    params = corruption_params(name, severity, config)
    return {"submerged_fraction": submerged_fractions(image, params, scene)}


def unchanged_reason(name: str, config: SuiteConfig, scene: Scene | None) -> str | None:
    """Why a generation-2 model leaves an image as it is, in words (None when the scene does not say): the water
    models need water, and sun glint a sun above the horizon."""
    if scene is None or not config.uses_scene:
        return None
    model = config.corruptions[name].model_name
    if model in ("sun_glint", "turbid_water") and not scene.water_mask()[scene.valid_slices].any():
        return (
            f"the scene holds no water ({scene.water_source} mask); {name} acts on water only "
            f'(docs/CORRUPTIONS.md, "The water mask")'
        )
    if model == "sun_glint" and not can_glint(scene):  # the model's own test; with water, the sun is what fails it
        sun = scene.sun_elevation_deg
        return (
            "the scene gives no sun elevation: no glint"
            if sun is None
            else f"the sun is at or below the horizon (elevation {sun:g} deg): no glint"
        )
    return None


def scene_for(image: np.ndarray, config: SuiteConfig, scale: Scale | None, persons: Sequence = ()) -> Scene:
    """The scene a generation-2 suite renders ``image`` in when the caller gives none: estimated from its pixels
    with the object scale's person unit and the suite's default camera; ``persons``: the image's person boxes
    ``(x0, y0, x1, y1)`` when known (a flood submerges them as a build does)."""
    if scale is None or not scale.is_object:
        raise AegisError(
            f"suite {config.suite} renders in physical units and needs the person unit: give an object "
            f"scale (`scale` object with `person_px` or `gsd_cm_per_px`) or the image's scene",
            param="scale",
        )
    return estimate_scene(image, scale.unit_px, config.camera, persons=persons)


def corrupt_with_stream(
    image: np.ndarray,
    name: str,
    severity: int,
    rng: KeyedRandom,
    config: SuiteConfig | None = None,
    scale: Scale | None = None,
    scene: Scene | None = None,
) -> np.ndarray:
    """Corrupt one image with every random value drawn from ``rng``: the engine behind :func:`apply_corruption`.

    The benchmark passes the stream keyed by ``stream_key``; training-time augmentation
    (``aegis_data.augment.transform``) passes one from its own key namespace, so both run the same kernels.
    ``config``: the suite whose parameters apply (default: the default suite); ``scale``: the length unit;
    ``scene``: a generation-2 suite's scene of this image (estimated when None).
    """
    check_rgb_image(image)
    suite = config or load_config()
    if not isinstance(rng, KeyedRandom):
        raise AegisError(f"`rng` must be a KeyedRandom stream, got {type(rng).__name__}", param="rng")
    # Checked here too: the scene path reads the suite's entry and formats the severity before any record is made.
    _check_name(name, suite)
    _check_severity(severity)
    if suite.uses_scene:
        if scene is None:
            scene = scene_for(image, suite, scale)
        elif not isinstance(scene, Scene) or (scene.height, scene.width) != image.shape[:2]:
            raise AegisError(
                f"`scene` must be the aegis_data.engine.scene.Scene of this {image.shape[1]}x{image.shape[0]} image",
                param="scene",
            )
        return _render_in_scene(image, name, severity, rng, suite, scene)
    params = corruption_params(name, severity, suite, scale)  # validates name and severity
    h, w = image.shape[:2]
    # Priced before anything is drawn or allocated: a valid config under a large or small person unit can ask for
    # a blur, streak field or buffer no machine holds (docs/CORRUPTIONS.md, "Render budget").
    unit = f" at person unit {scale.person_px:g} px" if scale is not None and scale.is_object else ""
    B.check_render_budget(render_cost(params, h, w), h, w, f"{name} s{int(severity)}{unit} on a {w}x{h} frame")
    draw = draw_params(name, params, h, w, rng)
    return _BY_NAME[name].kernel(np.ascontiguousarray(image), params, draw)


def _render_in_scene(
    image: np.ndarray, name: str, severity: int, rng: KeyedRandom, suite: SuiteConfig, scene: Scene
) -> np.ndarray:
    """A generation-2 render: the model runs on the scene's valid region only (bars and constant borders stay as
    they are, and no statistic of a model sees them); aegis-v1 models there take the scene's person unit."""
    rows, cols = scene.valid_slices
    region = np.ascontiguousarray(image[rows, cols])
    h, w = region.shape[:2]
    model = suite.corruptions[name].model_name
    what = f"{name} s{int(severity)} at person unit {scene.person_px:g} px on a {w}x{h} region"
    if model in _SCENE_MODELS:
        params = corruption_params(name, severity, suite)
        m = _SCENE_MODELS[model]
        B.check_render_budget(m.cost(params, scene, h, w), h, w, what)
        try:
            out_region = m.kernel(region, params, m.draw(params, scene, h, w, rng), scene)
        except AegisError as exc:  # a limit the model checks as it goes (a kernel's reach, a noise variance)
            raise AegisError(f"{what}: {exc}") from None
    else:
        params = corruption_params(name, severity, suite, Scale(OBJECT, scene.person_px, "scene"))
        B.check_render_budget(render_cost(params, h, w), h, w, what)
        out_region = _BY_NAME[model].kernel(region, params, _BY_NAME[model].draw(params, h, w, rng))
    if scene.is_full_frame:
        return out_region
    out = image.copy()
    out[rows, cols] = out_region
    return out
