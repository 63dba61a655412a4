"""Water for the generation-2 flood models (docs/CORRUPTIONS.md, "The water mask" and the sections after it).

Three things the flood family needs and nothing else provides:

* **the water mask** of a frame (:func:`estimate_water`), without a neural network: integer colour and texture
  statistics over blocks, thresholds from order statistics of integer histograms, connected regions of a minimum
  ground area, refined per pixel; the scene's sky and the pixels outside its valid rectangle are never water. A
  sidecar's mask overrides it (``aegis_data.engine.scene``);
* **the optics of a water surface**: the exact unpolarised Fresnel reflectance (:func:`fresnel`) and an
  ``exp(-x)`` built from basic IEEE operations only (:func:`exp_neg`), so per-pixel optics give the same bits on
  every machine;
* **the colour of turbid water** (:func:`turbid_reflectance`): water-leaving reflectance that saturates with the
  suspended sediment concentration, the single-band form of Nechad et al. (2010) per channel.

Everything is a pure function of the pixels and the scene's facts; nothing here draws a random value.
"""

from __future__ import annotations

import math
from typing import cast

import cv2
import numpy as np

from aegis_data.errors import AegisError

# ----------------------------------------------------------------------------------------------------------
# The water mask
# ----------------------------------------------------------------------------------------------------------
# Blocks of about 1/128 of the valid region's short side (the sky detector's size; at least 4 px).
MIN_BLOCK = 4
# A block is smooth when its mean absolute neighbour difference of luma (DN) is at most twice the frame's median
# block texture, kept within these bounds: open water is smooth at the block scale on land frames (median texture
# 8-15 DN on HERIDAL crops) and the frame's own median on sea frames, whose waves are the texture.
SMOOTH_MIN_DN = 4
SMOOTH_MAX_DN = 10
# Colour: water reflects the sky and absorbs red, so its blocks are bluer than red by at least this much (mean
# B - R, DN) and by at least BLOCK_BLUE_SHARE of their mean luma; vegetation (B < R or B ~ R), soil and sand
# (B < R) are not, nor are grey paths and shadows in evening light (B - R up to a third of the luma on HERIDAL
# frames, measured). Bright blocks (mean luma above this) are clouds' reflections, glint or roofs.
BLOCK_BLUE_DN = 20
BLOCK_BLUE_SHARE = 0.4
BLOCK_MAX_LUMA_DN = 200
# A water body covers at least this much ground (m^2): a blue tarp, car or jacket does not.
MIN_AREA_M2 = 9.0
# Per pixel, inside water blocks and one block around them: B - R at least a third of the water blocks' median
# B - R (and at least 2 DN), luma at most this, no channel saturated; then a 3 x 3 majority vote.
PIXEL_MAX_LUMA_DN = 225
PIXEL_SATURATED = 250
MAJORITY = 5


def water_block_size(height: int, width: int) -> int:
    """The block side (px) of the mask's statistics for a valid region of ``height x width`` px."""
    return max(MIN_BLOCK, min(height, width) // 128)


def _median_u(values: np.ndarray, levels: int) -> int:
    """The lower median of non-negative integers below ``levels``, from their integer histogram."""
    counts = np.bincount(values.ravel(), minlength=levels)
    return int(np.searchsorted(np.cumsum(counts), (values.size + 1) // 2))


def _block_stats(region: np.ndarray, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(texture sums, luma sums in thousandths, B - R sums) per b x b block of ``region`` (edge rows and columns
    repeated to whole blocks), and the number of pixels per block. Integers throughout."""
    h, w = region.shape[:2]
    nby, nbx = -(-h // b), -(-w // b)
    pad = ((0, nby * b - h), (0, nbx * b - w), (0, 0))
    crop = np.pad(region, pad, mode="edge") if pad[0][1] or pad[1][1] else region
    rgb = crop.astype(np.int32)
    luma = rgb[..., 0] * 299 + rgb[..., 1] * 587 + rgb[..., 2] * 114  # DN x 1000
    tex = np.zeros((nby, nbx), dtype=np.int64)
    tex += np.pad(np.abs(np.diff(luma, axis=1)), ((0, 0), (0, 1))).reshape(nby, b, nbx, b).sum(axis=(1, 3))
    tex += np.pad(np.abs(np.diff(luma, axis=0)), ((0, 1), (0, 0))).reshape(nby, b, nbx, b).sum(axis=(1, 3))
    lum = luma.reshape(nby, b, nbx, b).sum(axis=(1, 3), dtype=np.int64)
    blue = (rgb[..., 2] - rgb[..., 0]).reshape(nby, b, nbx, b).sum(axis=(1, 3), dtype=np.int64)
    return tex, lum, blue, b * b


def estimate_water(
    rgb: np.ndarray,
    valid: tuple[int, int, int, int],
    sky: np.ndarray | None,
    row_gsd_m: np.ndarray,
    with_texture: bool = False,
):
    """bool (H, W): the water of a frame, estimated from its pixels (docs/CORRUPTIONS.md, "The water mask").

    ``valid``: the scene rectangle (x0, y0, x1, y1); nothing outside it is water. ``sky``: bool (H, W) sky mask or
    None; sky is never water. ``row_gsd_m``: ground sampling distance (m/px) of every frame row (inf in the sky),
    which turns block counts into ground area.

    1. Blocks (:func:`water_block_size`): luma in thousandths of a DN (299 R + 587 G + 114 B), its mean absolute
       neighbour difference (texture), mean luma and mean B - R, all integer sums.
    2. A block is water-like when it is smooth (texture at most twice the median block texture, bounded to
       [4, 10] DN; the median from the integer histogram of block textures), bluer than red by 20 DN and by 0.4 of
       its luma, no brighter than 200 DN, and not mostly sky.
    3. 8-connected regions of water-like blocks covering at least 9 m^2 of ground are kept.
    4. Per pixel, within the kept blocks and one block around them: water when B - R is at least a third of the
       kept blocks' median B - R (at least 2 DN), luma at most 225 DN and no channel at 250 or above, confirmed
       by a 3 x 3 majority (at least 5 of 9). A person, a boat or a glint on the water is not water.

    ``with_texture``: return ``(mask, (b, texture sums per block))``, the block textures the flood model reuses
    (None when the region is too small for blocks).
    """
    height, width = rgb.shape[:2]
    out = np.zeros((height, width), dtype=bool)
    x0, y0, x1, y1 = valid
    region = rgb[y0:y1, x0:x1]
    h, w = region.shape[:2]
    if h < 2 or w < 2:
        return (out, None) if with_texture else out
    b = water_block_size(h, w)
    tex, lum, blue, n = _block_stats(region, b)
    texture = (b, tex)
    mask = _water_from_blocks(region, out, valid, sky, row_gsd_m, b, tex, lum, blue, n)
    return (mask, texture) if with_texture else mask


def _water_from_blocks(region, out, valid, sky, row_gsd_m, b, tex, lum, blue, n) -> np.ndarray:
    x0, y0, x1, y1 = valid
    h, w = region.shape[:2]
    nby, nbx = tex.shape
    pairs = 2 * n
    sky_r = sky[y0:y1, x0:x1] if sky is not None else np.zeros((h, w), dtype=bool)
    # A block is sky when most of its pixels are (sums of a 0/1 mask: integers).
    sky_pad = np.pad(sky_r, ((0, nby * b - h), (0, nbx * b - w)), mode="edge")
    sky_blocks = sky_pad.reshape(nby, b, nbx, b).sum(axis=(1, 3)) * 2 > n
    tex_dn = tex // pairs  # whole DN x 1000 per difference, floored
    median_tex = _median_u(np.minimum(tex_dn, 255_999), 256_000)
    limit = min(SMOOTH_MAX_DN * 1000, max(SMOOTH_MIN_DN * 1000, 2 * median_tex))
    share = int(round(BLOCK_BLUE_SHARE * 1000))  # B - R >= share/1000 of luma; luma sums are in thousandths
    candidate = (
        (tex <= limit * pairs)
        & (blue >= BLOCK_BLUE_DN * n)
        & (blue * 1_000_000 >= share * lum)
        & (lum <= BLOCK_MAX_LUMA_DN * 1000 * n)
        & ~sky_blocks
    )
    if not candidate.any():
        return out
    # Ground area per block in cm^2 (its row's sampling distance; sky rows are inf and never candidates).
    rows = np.minimum(np.arange(nby) * b + b // 2, h - 1) + y0
    gsd = np.asarray(row_gsd_m, dtype=np.float64)[rows]
    area_cm2 = np.where(np.isfinite(gsd), np.floor((gsd * b * 100.0) ** 2 + 0.5), 0).astype(np.int64)
    count, labels = cv2.connectedComponents(candidate.astype(np.uint8), connectivity=8, ltype=cv2.CV_32S)
    per_label = np.bincount(labels.ravel(), weights=None, minlength=count)  # blocks per region
    cm2 = np.zeros(count, dtype=np.int64)
    np.add.at(cm2, labels.ravel(), np.repeat(area_cm2, nbx))
    keep = (cm2 >= int(MIN_AREA_M2 * 10_000)) & (per_label >= 2)
    keep[0] = False
    blocks = keep[labels]
    if not blocks.any():
        return out
    # The kept blocks' median B - R (per block mean, DN, floored: non-negative here) sets the pixel threshold.
    mean_blue = blue[blocks] // n
    threshold = max(2, _median_u(np.clip(mean_blue, 0, 255), 256) // 3)
    near = cv2.dilate(blocks.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
    near_px = np.repeat(np.repeat(near, b, axis=0), b, axis=1)[:h, :w]
    px = region.astype(np.int16)
    luma = px[..., 0].astype(np.int32) * 299 + px[..., 1].astype(np.int32) * 587 + px[..., 2].astype(np.int32) * 114
    # Channel by channel: NumPy's max over a length-3 last axis is ~20x slower at 12 MP (the same values).
    brightest = np.maximum(np.maximum(region[..., 0], region[..., 1]), region[..., 2])
    wet = (
        ((px[..., 2] - px[..., 0]) >= threshold)
        & (luma <= PIXEL_MAX_LUMA_DN * 1000)
        & (brightest < PIXEL_SATURATED)
        & near_px
        & ~sky_r
    )
    votes = cv2.boxFilter(wet.view(np.uint8), cv2.CV_16U, (3, 3), normalize=False, borderType=cv2.BORDER_REPLICATE)
    out[y0:y1, x0:x1] = wet & (votes >= MAJORITY)
    return out


# ----------------------------------------------------------------------------------------------------------
# Optics with basic IEEE operations
# ----------------------------------------------------------------------------------------------------------
LN2 = 0.6931471805599453  # the float64 nearest ln 2: only multiplied, never passed to libm
EXP_ARG_MAX = 700.0


EXP_DEGREE = 13
# 1/n for the Horner steps, each correctly rounded (the compiled loop divides the same 1.0 by the same n).
_RECIPROCALS = tuple(1.0 / n for n in range(EXP_DEGREE, 0, -1))


def exp_neg(x):
    """``exp(-x)`` for x >= 0 (float64, a NumPy array or a float), from + - * and an exact power of two only, so
    the bits are the same on every machine: ``x = (k + f) ln 2`` with k = floor(x / ln 2), ``exp(-x) =
    2**-k exp(-f ln 2)``, the second factor a Taylor polynomial of degree 13 in Horner form with the reciprocals
    1/n as constants (relative error below 2e-13). Arguments above 700 give 0."""
    a = np.asarray(x, dtype=np.float64)
    t = a * (1.0 / LN2)
    k = np.floor(t)
    r = (t - k) * LN2  # in [0, ln 2)
    p = np.ones_like(r)
    for c in _RECIPROCALS:
        p = 1.0 - (r * c) * p
    out = np.ldexp(p, -np.minimum(k, 1100.0).astype(np.int64))
    out = np.where(a > EXP_ARG_MAX, 0.0, out)
    return float(out) if np.ndim(x) == 0 else out


def fresnel(cos_i, n: float = 1.34):
    """Unpolarised Fresnel reflectance of a water surface (refractive index ``n``) for light arriving at an angle
    whose cosine is ``cos_i`` (in (0, 1]): with ``g = sqrt(n**2 - 1 + c**2)``,
    ``R = 1/2 ((g - c)/(g + c))**2 (1 + ((c (g + c) - 1)/(c (g - c) + 1))**2)``, the exact result for both
    polarisations averaged (Born & Wolf, "Principles of Optics"; this form as in Cook & Torrance 1982), evaluated
    with one division: ``R = (1/2) (g - c)**2 (v**2 + u**2) / ((g + c)**2 v**2)``, u and v the numerator and
    denominator of the second ratio. Only + - * / and sqrt: the same bits everywhere. 0.021 at normal
    incidence, 1 at grazing."""
    c = np.asarray(cos_i, dtype=np.float64)
    g = np.sqrt((n * n - 1.0) + c * c)
    gm, gp = g - c, g + c
    u = c * gp - 1.0
    v = c * gm + 1.0
    r = ((0.5 * (gm * gm)) * (v * v + u * u)) / ((gp * gp) * (v * v))
    return float(r) if np.ndim(cos_i) == 0 else r


# ----------------------------------------------------------------------------------------------------------
# Turbid water
# ----------------------------------------------------------------------------------------------------------
def turbid_reflectance(sediment_g_m3: float, saturation: tuple, half_g_m3: tuple) -> tuple[float, float, float]:
    """Water-leaving irradiance reflectance (R, G, B) of water carrying ``sediment_g_m3`` of suspended sediment:
    ``rho_c = C_c S / (S_c + S)`` per channel, which rises linearly at low concentration and saturates at ``C_c``
    (the single-band model of Nechad, Ruddick & Park 2010, written with its half-saturation concentration
    ``S_c = A_c C_c``). A scalar per image: the same on every machine (+, *, / only)."""
    if not (math.isfinite(sediment_g_m3) and sediment_g_m3 >= 0.0):
        raise AegisError(f"suspended sediment must be a finite concentration >= 0 g/m^3, got {sediment_g_m3!r}")
    # saturation and half_g_m3: validated (R, G, B) triples of the suite
    return cast(
        tuple[float, float, float],
        tuple(float(c) * sediment_g_m3 / (float(s) + sediment_g_m3) for c, s in zip(saturation, half_g_m3)),
    )


def water_share(mask: np.ndarray, valid: tuple[int, int, int, int]) -> float:
    """The share of the valid rectangle a water mask covers, rounded to 6 decimals (an integer count over an area)."""
    x0, y0, x1, y1 = valid
    area = max(1, (x1 - x0) * (y1 - y0))
    return round(int(np.count_nonzero(mask[y0:y1, x0:x1])) / area, 6)
