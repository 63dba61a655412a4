"""Low light as a camera records it (generation 2; docs/CORRUPTIONS.md, "low_light (aegis-v2)").

The scene loses ``ev_loss`` stops of light. The camera's auto-exposure (:func:`auto_exposure`) wins light back,
first by a longer exposure up to ``shutter_limit_ms`` (which smears the moving scene: the same path model as
motion_blur, ``aegis_data.engine.motion``), then by analogue gain up to ``iso_cap``; what it cannot win back
darkens the frame. The sensor adds noise in raw space: Poisson shot noise (variance proportional to the raw
signal) and Gaussian read noise, variances added, with the shot and read levels of a published calibration
(Brooks et al. 2019, "Unprocessing images for learned raw denoising": ``lambda_shot`` grows with the gain from
``shot_noise_base`` at base ISO, ``log lambda_read = a log lambda_shot + b``). Only the noise the low-light
capture has beyond the clean capture's own is added. The noise lives on the RGGB Bayer mosaic, is demosaiced
bilinearly (so it is spatially correlated), white-balanced (raw red and blue are weaker, so their noise grows),
added to the signal in linear light and tone-mapped with the sRGB curve; then the image goes through the camera's
chroma path: BT.601 YCbCr, a mild chroma denoise and 4:2:0 chroma subsampling with triangle upsampling. The
result's noise is mostly luminance and correlated over a few pixels, as a real camera's is.

Exactness: scalars derived through exp/log/pow pass ``photometry.stable``; per pixel only IEEE + - * / and sqrt in
float64, in a fixed order, then integer arithmetic (tables, fixed-point colour transforms, exact convolutions).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from aegis_data.engine import kernels as K
from aegis_data.engine.motion import Exposure, TrajectoryBlurParams, TrajectoryDraw, smear_linear
from aegis_data.engine.photometry import LINEAR_MAX, encode_table, stable, to_linear, to_srgb
from aegis_data.engine.scene import Scene
from aegis_data.engine.seeding import NORMAL_FRAC_BITS, KeyedRandom, normal_table
from aegis_data.errors import AegisError

# ln of the largest read-noise variance computed: exp() of more overflows a float64 (exp(709.78) is the largest).
_MAX_LOG_VARIANCE = 709.0


@dataclass(frozen=True, kw_only=True)
class CameraFacts:
    """What every model that records through the low-light camera reads: the condition's auto-exposure limits and
    chroma denoise, and the suite camera's sensor facts. Keyword-only, so a model's own fields come first."""

    shutter_limit_ms: float
    iso_cap: float
    chroma_denoise_sigma: float
    base_iso: float = 100.0
    shot_noise_base: float = 1e-4
    read_noise_line: tuple = (2.18, 1.20)
    white_balance: tuple = (2.0, 1.0, 1.7)
    readout_ms: float = 0.0
    max_content_shift_px: float = 1.5

    def camera_facts(self) -> dict:
        """The camera's fields by name (to build another record that records through the same camera)."""
        return {f.name: getattr(self, f.name) for f in fields(CameraFacts)}


@dataclass(frozen=True)
class CameraLowLightParams(CameraFacts):
    """low_light of a generation-2 suite: the light lost (EV) plus the camera's facts."""

    ev_loss: float


@dataclass(frozen=True)
class LowLightCapture:
    """What the auto-exposure chose: exposure (ms), ISO, and the share of the clean frame's brightness that
    remains (1 when the camera recovered all the light)."""

    exposure_ms: float
    iso: float
    brightness: float


@dataclass(frozen=True)
class CameraLowLightDraw:
    heading_deg: float  # direction of the exposure's smear (the scene's heading when known)
    noise: np.ndarray  # (h, w) uint16 indices into seeding.normal_table(): one normal deviate per Bayer site


def auto_exposure(
    ev_loss: float, exposure_ms: float, iso: float, shutter_limit_ms: float, iso_cap: float
) -> LowLightCapture:
    """The camera's answer to a scene ``ev_loss`` stops darker than the clean capture (``exposure_ms``, ``iso``):
    exposure first, up to ``shutter_limit_ms`` (never shorter than the clean one), then ISO up to ``iso_cap``
    (never lower than the clean one); the brightness that remains is ``(t / t0) (iso / iso0) / 2**ev_loss``."""
    need = stable(2.0**ev_loss, "2**ev_loss")
    t = max(exposure_ms, min(shutter_limit_ms, exposure_ms * need))
    t = stable(t, "exposure")
    remaining = need * exposure_ms / t
    if iso * remaining <= max(iso, iso_cap):  # the gain the exposure left to win is within reach: all recovered
        return LowLightCapture(t, stable(max(iso, iso * remaining), "ISO"), 1.0)
    gain_iso = stable(max(iso, iso_cap), "ISO")
    return LowLightCapture(t, gain_iso, min(1.0, stable((t / exposure_ms) * (gain_iso / iso) / need, "brightness")))


def noise_levels(params: CameraLowLightParams, iso: float) -> tuple[float, float]:
    """(lambda_shot, lambda_read) of the raw noise at ``iso``: variance = lambda_shot x + lambda_read for a raw
    signal x in [0, 1] (Brooks et al. 2019's heteroscedastic Gaussian model)."""
    shot = stable(params.shot_noise_base * iso / params.base_iso, "shot noise")
    slope, intercept = params.read_noise_line
    if not (math.isfinite(shot) and shot > 0.0):  # a shot_noise_base so small that it underflows at this ISO
        raise AegisError(
            f"the shot-noise variance at ISO {iso:g} is {shot!r}, which has no logarithm; raise camera.shot_noise_base"
        )
    exponent = slope * math.log(shot) + intercept
    if exponent > _MAX_LOG_VARIANCE:
        raise AegisError(
            f"the read-noise variance exp({slope:g} ln {shot:.4g} + {intercept:g}) = exp({exponent:.4g}) "
            f"at ISO {iso:g} does not fit a 64-bit float; lower camera.read_noise_line"
        )
    read = stable(math.exp(exponent), "read noise")
    return shot, read


def added_noise_coefficients(
    params: CameraLowLightParams, capture: LowLightCapture, clean_iso: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per channel (R, G, B) ``a``, ``b`` with the added noise's variance ``a S + b`` for a display-linear signal
    S (in LINEAR_MAX units) of that channel at its Bayer site.

    A raw site of channel c reads ``x = S / (LINEAR_MAX wb_c)``. The low-light capture's variance there is
    ``shot x + read``; the clean frame, darkened by the remaining brightness d, already carries
    ``d shot0 x + d**2 read0``; the difference, scaled to display-linear units by ``LINEAR_MAX wb_c``, is added.
    """
    shot, read = noise_levels(params, capture.iso)
    shot0, read0 = noise_levels(params, clean_iso)
    d = capture.brightness
    wb = np.asarray(params.white_balance, dtype=np.float64)
    scale = LINEAR_MAX * wb
    a = scale * max(0.0, shot - d * shot0)
    b = scale * scale * max(0.0, read - d * d * read0)
    if not (np.isfinite(a).all() and np.isfinite(b).all()):  # the per-pixel std would be inf, then NaN
        raise AegisError(
            f"the added sensor-noise variance (read {read:.4g}, shot {shot:.4g} in raw units) does not "
            f"fit a 64-bit float in display units; lower camera.read_noise_line or shot_noise_base"
        )
    return a, b


def draw_low_light(
    params: CameraLowLightParams, scene: Scene, height: int, width: int, rng: KeyedRandom
) -> CameraLowLightDraw:
    heading = float(180.0 * rng.child("heading").uniform(1)[0]) if scene.heading_deg is None else scene.heading_deg
    return CameraLowLightDraw(heading, rng.child("sensor_noise").normal_indices((height, width)))


# ----------------------------------------------------------------------------------------------------------
# The raw-noise path (float64 per pixel, fixed order)
# ----------------------------------------------------------------------------------------------------------
class _ClassNeighbours:
    """``at(dy, dx)``: the neighbours at offset (dy, dx) of the sites with row parity ``ys`` and column parity
    ``xs``, as a strided view of the mosaic ``p`` padded by one pixel."""

    def __init__(self, p: np.ndarray, ys: int, xs: int):
        self.p, self.ys, self.xs = p, ys, xs

    def __call__(self, dy: int, dx: int) -> np.ndarray:
        h, w = self.p.shape[0] - 2, self.p.shape[1] - 2
        return self.p[1 + self.ys + dy : h + 1 + dy : 2, 1 + self.xs + dx : w + 1 + dx : 2]


def _demosaic_padded(p: np.ndarray) -> np.ndarray:
    """Bilinear demosaic of one float64 value per RGGB site, given padded by one pixel on every side ((h + 2,
    w + 2), its first inner row an even row), into (h, w, 3): each channel is the site's own value where it was
    sampled, else the mean of its 2 or 4 nearest samples of that channel, summed in a fixed order
    ((a + b) * 0.5, ((a + b) + c) + d) * 0.25). The caller mirrors the mosaic about its edge pixels (reflect-101,
    which keeps the colour pattern; edge repeat for a mosaic one site thin)."""
    h, w = p.shape[0] - 2, p.shape[1] - 2
    out = np.empty((h, w, 3), dtype=np.float64)
    # Each of the four site classes (row parity ys, column parity xs) is computed on its own strided view, so
    # every value is formed only where it is used (the same operations on the same operands as over the whole
    # mosaic).
    for ys in (0, 1):
        for xs in (0, 1):
            o = out[ys::2, xs::2]
            if o.size == 0:
                continue
            at = _ClassNeighbours(p, ys, xs)
            if ys == xs:  # R (0, 0) or B (1, 1) site: itself, green across, the other colour diagonally
                own = 0 if ys == 0 else 2
                o[..., own] = at(0, 0)
                o[..., 1] = (((at(-1, 0) + at(1, 0)) + at(0, -1)) + at(0, 1)) * 0.25
                o[..., 2 - own] = (((at(-1, -1) + at(-1, 1)) + at(1, -1)) + at(1, 1)) * 0.25
            else:  # G site: on an R row R is left/right and B up/down; on a B row the other way round
                horiz = (at(0, -1) + at(0, 1)) * 0.5
                vert = (at(-1, 0) + at(1, 0)) * 0.5
                o[..., 0] = horiz if ys == 0 else vert
                o[..., 1] = at(0, 0)
                o[..., 2] = vert if ys == 0 else horiz
    return out


# The compiled loop's bound on the noise variance (``_ckernels.c``, raw_noise): far above any camera's, and it keeps
# every float64 value finite.
_RAW_VARIANCE_LIMIT = 1e300


def _compiled_raw_noise(linear: np.ndarray, d: float, a: np.ndarray, b: np.ndarray, noise: np.ndarray):
    """The compiled raw-noise loop's result, or None where it does not run: not built, or values outside its
    preconditions (brightness and coefficients finite, >= 0 and bounded, so no NaN or infinity can arise)."""
    c = K.CKERNELS
    if c is None or not hasattr(c, "raw_noise") or linear.dtype != np.uint16 or linear.ndim != 3:
        return None
    h, w, ch = linear.shape
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    noise = np.asarray(noise)
    if ch != 3 or h < 1 or w < 1 or a.shape != (3,) or b.shape != (3,) or noise.shape != (h, w):
        return None
    if noise.dtype != np.uint16 or not (math.isfinite(d) and d >= 0.0):
        return None
    if not (np.isfinite(a).all() and np.isfinite(b).all() and (a >= 0.0).all() and (b >= 0.0).all()):
        return None
    if not all(65535.0 * d * float(a[k]) + float(b[k]) <= _RAW_VARIANCE_LIMIT for k in range(3)):
        return None
    out = np.empty((h, w, 3), dtype=np.uint8)
    c.raw_noise(
        out,
        np.ascontiguousarray(linear),
        h,
        w,
        float(d),
        np.ascontiguousarray(a),
        np.ascontiguousarray(b),
        np.ascontiguousarray(noise),
        normal_table(),
        encode_table(),
    )
    return out


def raw_noise_image(
    linear: np.ndarray, capture: LowLightCapture, a: np.ndarray, b: np.ndarray, noise: np.ndarray
) -> np.ndarray:
    """uint8 sRGB: the darkened linear image (uint16 (h, w, 3)) plus the demosaiced raw noise, tone-mapped.

    The compiled loop (``_ckernels.raw_noise``) does the same float64 operations in the same order, fused; this
    NumPy code is the reference."""
    h, w = linear.shape[:2]
    d = capture.brightness
    fused = _compiled_raw_noise(linear, d, a, b, noise)
    if fused is not None:
        return fused
    # Bands of an even number of rows (so each band's first row is an R/G row, as the whole mosaic's), each with
    # the mosaic rows just above and below it (mirrored at the frame's edges as np.pad does): the same operations
    # on the same operands as over the whole frame, in bounded memory.
    out = np.empty((h, w, 3), dtype=np.uint8)
    thin = min(h, w) <= 1
    table = normal_table()
    for r0 in range(0, h, _RAW_BAND_ROWS):
        r1 = min(h, r0 + _RAW_BAND_ROWS)
        rows = np.arange(r0 - 1, r1 + 1)
        rows = np.clip(rows, 0, h - 1) if thin else np.abs(rows) - 2 * np.maximum(rows - (h - 1), 0)
        signal = linear[rows].astype(np.float64) * d
        chan = (rows % 2)[:, None] + (np.arange(w) % 2)[None, :]  # each row's own Bayer pattern
        site_signal = np.take_along_axis(signal, chan[..., None], axis=2)[..., 0]
        sd = np.sqrt(site_signal * a[chan] + b[chan])
        z = table[noise[rows]].astype(np.float64) * (2.0**-NORMAL_FRAC_BITS)
        site = sd * z
        padded = np.pad(site, ((0, 0), (1, 1)), mode="edge" if thin else "reflect")
        noisy = signal[1:-1] + _demosaic_padded(padded)
        q = np.floor(noisy + 0.5)
        np.clip(q, 0.0, float(LINEAR_MAX), out=q)
        out[r0:r1] = np.take(encode_table(), q.astype(np.int64))
    return out


_RAW_BAND_ROWS = 64  # even: a band starts on an R/G row


# ----------------------------------------------------------------------------------------------------------
# The chroma path (integers)
# ----------------------------------------------------------------------------------------------------------
_OFFSET = 1 << 30  # added before a right shift so every shifted value is non-negative (C's >> on negatives)


def _shift16(x: np.ndarray) -> np.ndarray:
    """``floor(x / 65536)`` for int64 x of magnitude < 2**30."""
    return ((x + _OFFSET) >> 16) - (_OFFSET >> 16)


def to_ycbcr(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """uint8 RGB -> BT.601 full-range Y, Cb, Cr (int64, 16-bit fixed-point coefficients, round half up; Cb and
    Cr in [0, 256])."""
    r, g, b_ = (rgb[..., k].astype(np.int64) for k in range(3))
    y = (19595 * r + 38470 * g + 7471 * b_ + 32768) >> 16
    cb = (-11059 * r - 21709 * g + 32768 * b_ + (128 << 16) + 32768) >> 16
    cr = (32768 * r - 27439 * g - 5329 * b_ + (128 << 16) + 32768) >> 16
    return y, cb, cr


def from_ycbcr(y: np.ndarray, cb: np.ndarray, cr: np.ndarray) -> np.ndarray:
    """BT.601 full-range YCbCr (int64) -> uint8 RGB (16-bit fixed point, rounded, clipped)."""
    u, v = cb - 128, cr - 128
    r = y + _shift16(91881 * v + 32768)
    g = y + _shift16(-22554 * u - 46802 * v + 32768)
    b_ = y + _shift16(116130 * u + 32768)
    out = np.empty(np.shape(y) + (3,), dtype=np.uint8)
    for k, channel in enumerate((r, g, b_)):  # clipped into place: no (h, w, 3) int64 stack
        out[..., k] = np.clip(channel, 0, 255)
    return out


def subsample_chroma(c: np.ndarray, sigma_px: float) -> np.ndarray:
    """A chroma plane (int64 (h, w)) averaged over 2 x 2 blocks (round half up; odd sides repeat their last row or
    column) and, for ``sigma_px`` > 0, blurred there with a discrete Gaussian of std ``sigma_px / 2`` (the same
    width in full-resolution pixels; exact integer convolution, mirrored border, rounded)."""
    h, w = c.shape
    if h % 2 or w % 2:
        c = np.pad(c, ((0, h % 2), (0, w % 2)), mode="edge")
    hh, ww = c.shape[0] // 2, c.shape[1] // 2
    half = (c.reshape(hh, 2, ww, 2).sum(axis=(1, 3)) + 2) >> 2
    k = _chroma_kernel(sigma_px)
    if k is not None:
        total = int(k.sum()) ** 2
        blurred = K.convolve_exact(half, k).astype(np.int64)  # exact integers (< 2**53)
        half = (blurred * 2 + total) // (2 * total)
    return half


def upsample_chroma(half: np.ndarray, height: int, width: int) -> np.ndarray:
    """Triangle ("fancy") upsampling of a 2x-subsampled chroma plane: each pixel takes 9/16 of its own block,
    3/16 of each of the two nearest neighbours and 1/16 of the diagonal one (edges repeat), rounded."""
    hh, ww = half.shape
    yi = np.arange(height) // 2
    xi = np.arange(width) // 2
    yn = np.clip(np.where(np.arange(height) % 2 == 0, yi - 1, yi + 1), 0, hh - 1)
    xn = np.clip(np.where(np.arange(width) % 2 == 0, xi - 1, xi + 1), 0, ww - 1)
    own = half[yi][:, xi]
    return (9 * own + 3 * half[yn][:, xi] + 3 * half[yi][:, xn] + half[yn][:, xn] + 8) >> 4


def _chroma_kernel(sigma_px: float):
    """The chroma blur's integer kernel (None for no blur), as :func:`subsample_chroma` makes it."""
    return K.discrete_gaussian(sigma_px / 2.0) if sigma_px > 0.0 else None


def chroma_path(rgb: np.ndarray, sigma_px: float) -> np.ndarray:
    """The camera's chroma path on uint8 RGB: YCbCr, chroma denoise and 4:2:0, triangle upsampling, RGB.

    The compiled loop (``_ckernels.chroma``) computes the same integers, fused; the stages below are the
    reference."""
    h, w = rgb.shape[:2]
    c = K.CKERNELS
    if (
        c is not None
        and hasattr(c, "chroma")
        and rgb.dtype == np.uint8
        and rgb.ndim == 3
        and rgb.shape[2] == 3
        and h > 0
        and w > 0
    ):
        k = _chroma_kernel(sigma_px)
        # The loop's bounds (_ckernels.c): weights >= 0 summing to at most 2**20 (a Gaussian's sum about 2**16).
        if k is None or (int(k.min()) >= 0 and 1 <= int(k.sum()) <= 1 << 20):
            out = np.empty_like(rgb)
            taps = np.zeros(0, dtype=np.int64) if k is None else np.ascontiguousarray(k, dtype=np.int64)
            c.chroma(out, np.ascontiguousarray(rgb), h, w, taps, taps.size)
            return out
    y, cb, cr = to_ycbcr(rgb)
    cb = upsample_chroma(subsample_chroma(cb, sigma_px), h, w)
    cr = upsample_chroma(subsample_chroma(cr, sigma_px), h, w)
    return from_ycbcr(y, cb, cr)


# ----------------------------------------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------------------------------------
def capture_for(params: CameraLowLightParams, scene: Scene) -> LowLightCapture:
    """The auto-exposure's choice for this scene's clean capture (its exposure and ISO)."""
    return auto_exposure(params.ev_loss, scene.exposure_ms, scene.iso, params.shutter_limit_ms, params.iso_cap)


def camera_low_light(
    image: np.ndarray, params: CameraLowLightParams, draw: CameraLowLightDraw, scene: Scene
) -> np.ndarray:
    """low_light (aegis-v2) of the valid region ``image`` (uint8 RGB): auto-exposure, the smear of its longer
    exposure at the scene's platform speed, raw shot + read noise on the Bayer mosaic, demosaic, white balance,
    tone curve, chroma denoise and 4:2:0."""
    return record_linear(to_linear(image), params, scene, draw)


def record_linear(
    linear: np.ndarray, params: CameraLowLightParams, scene: Scene, draw: CameraLowLightDraw
) -> np.ndarray:
    """uint8 sRGB: the scene's linear light (uint16 (h, w, 3)) as the camera records it after losing
    ``params.ev_loss``: the auto-exposure's choice, the smear of its longer exposure at the scene's platform speed,
    raw noise, demosaic, tone curve and chroma path (low_light, and firelight's light under its canopy)."""
    capture = capture_for(params, scene)
    smear = TrajectoryBlurParams(
        scene.speed_mps, capture.exposure_ms, 0.0, 0.0, (0.0, 180.0), params.readout_ms, params.max_content_shift_px
    )
    exposure = Exposure(scene.speed_mps, capture.exposure_ms, scene.speed_mps, scene.exposure_ms)
    path = TrajectoryDraw(draw.heading_deg, np.zeros((2, 2)))
    linear = smear_linear(linear, smear, scene, path, exposure)
    a, b = added_noise_coefficients(params, capture, scene.iso)
    if capture.brightness == 1.0 and not a.any() and not b.any():
        # The camera recovered all the light at the clean frame's ISO: the raw-noise pass would return
        # round(signal * 1 + 0), the signal itself; encoded directly (the same bytes, faster).
        noisy = to_srgb(linear)
    else:
        noisy = raw_noise_image(linear, capture, a, b, draw.noise)
    return chroma_path(noisy, params.chroma_denoise_sigma)
