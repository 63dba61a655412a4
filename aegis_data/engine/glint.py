"""Sun glint on water (generation 2: water_glare of aegis-v2; docs/CORRUPTIONS.md, "water_glare (aegis-v2): sun glint").

The sun is mirrored into the camera by the facets of a wind-roughened water surface whose normal bisects the
directions to the sun and to the camera. For every water pixel the model finds that facet's slope from the sun
and view geometry (the scene's camera: focal length, pitch from the horizon, principal point at the frame centre,
no roll; the sun from the sidecar or the scene's per-image draw), and reads how probable it is from the isotropic
Cox & Munk (1954) slope distribution for a wind speed W:

    p(zx, zy) = exp(-tan^2(beta) / s2) / (pi s2),    s2 = 0.003 + 0.00512 W     (W in m/s)

Cox & Munk's glitter relation gives the share of the pixel's apparent area that mirrors the sun,
``f = p Omega_sun / (4 cos(theta_v) cos^4(beta))`` (Omega_sun the sun's solid angle), so the mean glint
radiance, in units of a white Lambertian surface lit by the sun (the frame's white), is

    G = rho(omega) p pi / (4 sin(e) cos(theta_v) cos^4(beta))

with rho the Fresnel reflectance at the facet (incidence omega) and e the sun elevation. That light arrives in
discrete sparkles: each glint patch of apparent area ``a`` (``glint_patch_mm2``) carries the energy
``E = rho pi a / (Omega_sun sin(e) A_px)`` (white x px; A_px the pixel's ground footprint), so a pixel holds
``lambda = G / E = f A_px / a`` sparkles on average. Where lambda >= 1 the glitter is dense and the pixel receives
G; below, a keyed uniform per pixel decides whether it holds a sparkle of energy E (mean G either way). The
energies are spread by the lens's point-spread function (an exact integer Gaussian), added in linear light and
clipped at white: the saturated pixels are the sparkle cores, around which the existing exact bloom
(``kernels.blur_mask`` of the cores, screen-blended with the sun's tint) spreads. Nothing happens off water, on a
frame without water or with the sun at or below the horizon.

Exactness: per pixel only + - * / and sqrt in float64 in a fixed order, ``exp`` from basic operations
(``water.exp_neg``), the Fresnel reflectance from sqrt (``water.fresnel``); energies are rounded to integers and
convolved exactly; the compiled loop (``_ckernels.glint``) does the same operations in the same order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from aegis_data.engine import budget as B
from aegis_data.engine import kernels as K
from aegis_data.engine.budget import RenderCost
from aegis_data.engine.photometry import LINEAR_MAX, decode_table, encode_table, stable, to_linear, to_srgb
from aegis_data.engine.scene import OBLIQUE, Scene
from aegis_data.engine.seeding import KeyedRandom
from aegis_data.engine.water import exp_neg, fresnel

# The sun's solid angle: a disc of 0.533 degrees' apparent diameter (mean; 0.524-0.542 over the year).
SUN_RADIUS_RAD = 0.533 / 2.0 * math.pi / 180.0
SUN_SOLID_ANGLE_SR = math.pi * SUN_RADIUS_RAD * SUN_RADIUS_RAD
# Cox & Munk (1954), clean surface: mean square slope = 0.003 + 0.00512 W (W wind speed at 12.5 m, m/s).
COX_MUNK_BASE = 0.003
COX_MUNK_PER_MPS = 0.00512
SLOPE_CUT = 50.0  # tan^2(beta) / s2 beyond this: p < 2e-22 / s2, no sparkle in any frame
# Cox & Munk's relation grows without bound toward the horizon (1 / cos(theta_v); Zeisse 1995, "Radiance of the
# ocean horizon", JOSA A 12: 2022); a pixel cannot mirror more than all of its area: f = q Omega_sun / 4 <= 1.
Q_MAX = stable(4.0 / SUN_SOLID_ANGLE_SR, "glitter bound")
MIN_VIEW_COS = 1e-6  # a ray that does not reach the ground (at or above the horizon) sees no water
ENERGY_CAP = float(1 << 40)  # linear units per pixel: far above any glint; keeps every sum exact in float64
FOOTPRINT_CAP = 1e12  # m^2: rows at the horizon (an infinite ground sample) count as this much ground


@dataclass(frozen=True)
class SunGlintParams:
    """water_glare of a generation-2 suite: the condition (wind) and the water, lens and sun constants."""

    wind_speed_mps: float
    glint_patch_mm2: float
    refractive_index: float
    psf_sigma: float
    bloom_sigma: float
    bloom_weight: float
    tint: tuple


@dataclass(frozen=True)
class SunGlintDraw:
    """One uint32 per pixel of the valid region (the sparkle lottery), or an empty array when nothing can glint
    (no water, or the sun at or below the horizon: nothing is drawn)."""

    lottery: np.ndarray


# Upper wind speeds (m/s, at 10 m) of Beaufort forces 0-11 (WMO); 12 beyond.
BEAUFORT_UPPER_MPS = (0.2, 1.5, 3.3, 5.4, 7.9, 10.7, 13.8, 17.1, 20.7, 24.4, 28.4, 32.6)


def beaufort(wind_speed_mps: float) -> int:
    """The Beaufort force of a wind speed (m/s at 10 m)."""
    return next((k for k, top in enumerate(BEAUFORT_UPPER_MPS) if wind_speed_mps <= top + 0.05), 12)


def slope_variance(wind_speed_mps: float) -> float:
    """Cox & Munk's mean square slope of a clean sea surface for a wind speed (m/s)."""
    return COX_MUNK_BASE + COX_MUNK_PER_MPS * float(wind_speed_mps)


def can_glint(scene: Scene) -> bool:
    """Whether the sun can glint on this scene's water: the sun above the horizon and some water in the valid region."""
    rows, cols = scene.valid_slices
    return (
        scene.sun_elevation_deg is not None
        and scene.sun_elevation_deg > 0.0
        and bool(scene.water_mask()[rows, cols].any())
    )


def draw_glint(params: SunGlintParams, scene: Scene, height: int, width: int, rng: KeyedRandom) -> SunGlintDraw:
    if not can_glint(scene):
        return SunGlintDraw(np.zeros((0, 0), dtype=np.uint32))
    n = height * width
    words = rng.child("sparkles").bits((n + 1) // 2)
    lottery = words.astype("<u8", copy=False).view("<u4")[:n].astype(np.uint32, copy=False)
    return SunGlintDraw(lottery.reshape(height, width))


# ----------------------------------------------------------------------------------------------------------
# Geometry (per image, per row, per column)
# ----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GlintGeometry:
    """What the per-pixel loop reads: the view ray of each region row (its y and z components) and column (x),
    the squared ground sampling distance per row, and the scalars of the sun and the surface."""

    ray_x: np.ndarray  # (w,) float64
    ray_y: np.ndarray  # (h,)
    ray_z: np.ndarray  # (h,)
    gsd2: np.ndarray  # (h,) m^2
    inv_footprint: np.ndarray  # (h,) 1 / (gsd^2 f), per m^2 and px
    constants: np.ndarray  # float64: sx, sy, sz, 1/s2, 1/(pi s2), k_g, k_lambda, f, n, k_g / k_lambda, q_max


def _unit(turns: float) -> tuple[float, float]:
    s, c = K.sin_cos_turns(turns)
    return float(s), float(c)


def view_rays(scene: Scene, height: int, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ray_x per column, ray_y and ray_z per row) of the view rays of the scene's valid region (``height x width``):
    World X right, Y forward (the camera's heading on the ground), Z up; the camera pitched ``p`` below the
    horizontal (90 degrees in a near-nadir view; in an oblique one from the horizon row, ``tan p = (c_y - y_h) /
    f``, 0 or below for a level or raised camera), principal point at the frame centre, no roll; a pixel's ray is
    ``(x - c_x) X + (y - c_y) down + f forward`` with ``down = (0, -sin p, -cos p)`` and
    ``forward = (0, cos p, -sin p)``. Basic operations only."""
    x0, y0, _, _ = scene.valid
    f = float(scene.focal_px)
    cx, cy = (scene.width - 1) / 2.0, (scene.height - 1) / 2.0
    if scene.view == OBLIQUE and scene.horizon_row is not None:
        # A level (p = 0) or raised camera is still a camera: the rows below the horizon see the ground.
        t = (cy - float(scene.horizon_row)) / f
        norm = math.sqrt(1.0 + t * t)
        sin_p, cos_p = t / norm, 1.0 / norm
    else:
        sin_p, cos_p = 1.0, 0.0
    rows = np.arange(y0, y0 + height, dtype=np.float64) - cy
    ray_y = rows * (-sin_p) + f * cos_p
    ray_z = rows * (-cos_p) + f * (-sin_p)
    ray_x = np.arange(x0, x0 + width, dtype=np.float64) - cx
    return ray_x, ray_y, ray_z


def glint_geometry(params: SunGlintParams, scene: Scene, height: int, width: int) -> GlintGeometry:
    """The per-row, per-column and scalar inputs of the glint loop for the scene's valid region (``height x
    width``; rays from :func:`view_rays`). The sun's azimuth is measured in the image from +x with y down, on the
    ground plane: ``s = (cos e cos a, -cos e sin a, sin e)``."""
    ray_x, ray_y, ray_z = view_rays(scene, height, width)
    y0 = scene.valid[1]
    gsd = scene.gsd_rows(np.arange(y0, y0 + height))
    gsd2 = np.minimum(gsd * gsd, FOOTPRINT_CAP)
    elevation, azimuth = scene.sun_elevation_deg, scene.sun_azimuth_deg
    assert elevation is not None and azimuth is not None  # a scene that can glint has its sun (can_glint)
    sin_e, cos_e = _unit(float(elevation) / 360.0)
    sin_a, cos_a = _unit(float(azimuth) / 360.0)
    s2 = slope_variance(params.wind_speed_mps)
    patch_m2 = float(params.glint_patch_mm2) * 1e-6
    k_g = stable(math.pi / (4.0 * sin_e), "glint scale")
    k_lambda = stable(SUN_SOLID_ANGLE_SR / (4.0 * patch_m2), "sparkle density scale")
    f = float(scene.focal_px)
    constants = np.array(
        [
            cos_e * cos_a,
            -(cos_e * sin_a),
            sin_e,
            1.0 / s2,
            stable(1.0 / (math.pi * s2)),
            k_g,
            k_lambda,
            f,
            float(params.refractive_index),
            k_g / k_lambda,
            Q_MAX,
        ],
        dtype=np.float64,
    )
    return GlintGeometry(ray_x, ray_y, ray_z, gsd2, 1.0 / (gsd2 * f), constants)


def glint_energy_numpy(geo: GlintGeometry, water: np.ndarray, lottery: np.ndarray, pad: int = 0) -> np.ndarray:
    """int64 (h + 2 pad, w + 2 pad): each water pixel's glint energy in linear units (``LINEAR_MAX`` = a white
    pixel) at ``[pad + y, pad + x]``, zeros around, rounded half up: G where sparkles are dense (lambda >= 1), else
    E = G / lambda where the lottery (uint32) falls below lambda 2**32. The NumPy reference of the compiled
    ``glint`` loop (the same float64 operations in the same order), in row strips so its temporaries stay
    bounded."""
    h, w = water.shape
    padded = np.zeros((h + 2 * pad, w + 2 * pad), dtype=np.int64)
    out = padded[pad : pad + h, pad : pad + w]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # only pixels masked out by ``ok``
        for rows in K.row_strips(h, w, 1 << 16):
            _energy_strip(geo, water, lottery, rows, out)
    return padded


def _glint_terms(geo: GlintGeometry, ys: np.ndarray, xs: np.ndarray):
    """(ok, G, lambda, E) of the pixels (ys, xs): whether a facet there can mirror the sun into the camera, the mean
    glint in units of the frame's white, the sparkles per pixel and one sparkle's energy (white x px); the loop's
    float64 operations in order. With ``t2 = tan^2(beta)`` and ``1 / cos^2(beta) = 1 + t2``:
    ``q = min(p (1 + t2)**2 / cos(theta_v), 4 / Omega_sun)`` (the glittering share of a pixel at most 1),
    ``G = rho q k_g``, ``lambda = q k_lambda A_px`` with the footprint
    ``A_px = gsd^2 f / (|ray| cos(theta_v))``, and ``E = G / lambda = rho (k_g / k_lambda) / A_px``."""
    sx, sy, sz, inv_s2, norm_p, k_g, k_lam, f, n_w, k_e, q_max = (float(v) for v in geo.constants)
    rx, ry, rz = geo.ray_x[xs], geo.ray_y[ys], geo.ray_z[ys]
    norm = np.sqrt((rx * rx + ry * ry) + rz * rz)
    inv = 1.0 / norm
    vx, vy, vz = -(rx * inv), -(ry * inv), -(rz * inv)
    hx, hy, hz = sx + vx, sy + vy, sz + vz
    t2 = (hx * hx + hy * hy) / (hz * hz)
    x = t2 * inv_s2
    ok = (vz > MIN_VIEW_COS) & (x <= SLOPE_CUT)
    p = exp_neg(np.where(ok, x, 0.0)) * norm_p
    sdotv = (sx * vx + sy * vy) + sz * vz
    rho = fresnel(np.sqrt((1.0 + np.where(ok, sdotv, 0.0)) * 0.5), n_w)
    vz_ok = np.where(ok, vz, 1.0)
    inv_vz = 1.0 / vz_ok
    sec2 = 1.0 + t2
    q = np.minimum((p * (sec2 * sec2)) * inv_vz, q_max)
    g = (rho * q) * k_g
    lam = (q * k_lam) * ((geo.gsd2[ys] * f) * (inv * inv_vz))
    energy = (rho * k_e) * ((vz_ok * norm) * geo.inv_footprint[ys])
    return ok, g, lam, energy


def _energy_strip(geo: GlintGeometry, water: np.ndarray, lottery: np.ndarray, rows: slice, out: np.ndarray) -> None:
    ys, xs = np.nonzero(water[rows])
    if ys.size == 0:
        return
    ys = ys + rows.start
    ok, g, lam, sparkle = _glint_terms(geo, ys, xs)
    u = lottery[ys, xs].astype(np.float64)
    hit = np.where(u < lam * 4294967296.0, 1.0, 0.0)
    energy = np.where(lam >= 1.0, g, hit * sparkle)
    energy = np.where(ok, energy, 0.0)
    out[ys, xs] = np.floor(np.minimum(energy * float(LINEAR_MAX), ENERGY_CAP) + 0.5).astype(np.int64)


Box = tuple  # (slice of rows, slice of columns)


def lit_box(energy: np.ndarray) -> Box | None:
    """The bounding box of the non-zero energies (None when there is none), from their positions in row strips."""
    h, w = energy.shape
    y0, y1, x0, x1 = h, 0, w, 0
    for rows in K.row_strips(h, w, 1 << 18):
        ys, xs = np.nonzero(energy[rows])
        if ys.size:
            y0, y1 = min(y0, rows.start + int(ys.min())), max(y1, rows.start + int(ys.max()) + 1)
            x0, x1 = min(x0, int(xs.min())), max(x1, int(xs.max()) + 1)
    return None if y1 == 0 else (slice(y0, y1), slice(x0, x1))


def glint_energy(
    geo: GlintGeometry, water: np.ndarray, lottery: np.ndarray, pad: int = 0
) -> tuple[np.ndarray, Box | None]:
    """(:func:`glint_energy_numpy`, the bounding box of the lit pixels in region coordinates or None), by the
    compiled loop when it is built."""
    c = K.CKERNELS
    h, w = water.shape
    if c is not None and hasattr(c, "glint"):
        out = np.zeros((h + 2 * pad, w + 2 * pad), dtype=np.int64)
        box = c.glint(
            out,
            np.ascontiguousarray(water).view(np.uint8),
            np.ascontiguousarray(lottery, dtype=np.uint32),
            h,
            w,
            np.ascontiguousarray(geo.ray_x),
            np.ascontiguousarray(geo.ray_y),
            np.ascontiguousarray(geo.ray_z),
            np.ascontiguousarray(geo.gsd2),
            np.ascontiguousarray(geo.inv_footprint),
            np.ascontiguousarray(geo.constants),
            SLOPE_CUT,
            MIN_VIEW_COS,
            float(LINEAR_MAX),
            ENERGY_CAP,
            int(pad),
        )
        return out, (None if box is None else (slice(box[0], box[1]), slice(box[2], box[3])))
    out = glint_energy_numpy(geo, water, lottery, pad)
    return out, lit_box(out[pad : pad + h, pad : pad + w])


# ----------------------------------------------------------------------------------------------------------
# Light: the point-spread function, saturation, bloom
# ----------------------------------------------------------------------------------------------------------
def _grow(box: Box, r: int, h: int, w: int) -> Box:
    """``box`` grown by ``r`` px on every side, within an ``h x w`` region."""
    return (
        slice(max(0, box[0].start - r), min(h, box[0].stop + r)),
        slice(max(0, box[1].start - r), min(w, box[1].stop + r)),
    )


def psf_kernel(psf_sigma: float) -> np.ndarray:
    """The lens's point-spread function: Lindeberg's discrete Gaussian of std ``psf_sigma`` px, reaching 2.5 sigma
    (at least 1 px), integer weights (``kernels.discrete_gaussian``)."""
    return K.discrete_gaussian(psf_sigma, radius=max(1, math.ceil(2.5 * psf_sigma)))


@dataclass(frozen=True)
class Spread:
    """The glint energy spread by the lens: ``sums`` (float64, exact integers) over region rows ``row0`` ..
    ``row0 + sums.shape[0]`` and region columns ``-reach`` .. ``w + reach``; a pixel's light in linear units is
    ``sums[y - row0, x + reach] * scale``."""

    sums: np.ndarray
    row0: int
    reach: int
    scale: float


def spread_energy(energy: np.ndarray, box: Box, psf_sigma: float) -> Spread:
    """The energy (``glint_energy`` padded by the kernel's reach) spread by the lens's point-spread function: the
    band of the lit rows and the kernel's reach above and below (a contiguous block of the padded array, zeros
    around the lit pixels), convolved exactly (integers), with the kernel's squared sum as the scale."""
    k = psf_kernel(psf_sigma) if psf_sigma > 0.0 else np.ones(1, dtype=np.int64)
    r = len(k) // 2
    band = energy[box[0].start : box[0].stop + 2 * r]  # padded rows = region rows + r
    sums = K.convolve_exact(band, k) if r else band.astype(np.float64)
    return Spread(sums, box[0].start - r, r, 1.0 / (float(k.sum()) ** 2))


def add_glint(image: np.ndarray, spread: Spread, tint: tuple) -> tuple[np.ndarray, np.ndarray, Box | None]:
    """(uint8 image with the glint added in linear light and clipped at white, bool cores: the pixels any channel of
    which the glint pushed beyond white, the cores' bounding box or None). Per lit pixel (light > 0) and channel:
    ``L + floor(light tint_c + 0.5)``, clipped at ``LINEAR_MAX``, encoded with the exact sRGB table; the compiled
    loop (``_ckernels.glint_add``) does the same."""
    out = image.copy()
    h, w = image.shape[:2]
    cores = np.zeros((h, w), dtype=bool)
    tint64 = np.asarray(tint, dtype=np.float64)
    sums = np.ascontiguousarray(spread.sums)
    c = K.CKERNELS
    if c is not None and hasattr(c, "glint_add"):
        got = c.glint_add(
            out,
            sums,
            sums.shape[0],
            sums.shape[1],
            spread.row0,
            spread.reach,
            float(spread.scale),
            h,
            w,
            tint64,
            decode_table(),
            encode_table(),
            float(LINEAR_MAX),
            cores.view(np.uint8),
        )
        return out, cores, (None if got is None else (slice(got[0], got[1]), slice(got[2], got[3])))
    k0, k1 = max(0, -spread.row0), min(sums.shape[0], h - spread.row0)
    if k0 >= k1:
        return out, cores, None
    light = sums[k0:k1, spread.reach : spread.reach + w] * spread.scale
    ys, xs = np.nonzero(light > 0.0)
    if ys.size == 0:
        return out, cores, None
    ys_f = ys + (spread.row0 + k0)
    lin = to_linear(image[ys_f, xs]).astype(np.float64)  # (n, 3)
    total = np.floor(light[ys, xs][:, None] * tint64[None, :] + 0.5) + lin
    cores[ys_f, xs] = (total > float(LINEAR_MAX)).any(axis=1)
    np.minimum(total, float(LINEAR_MAX), out=total)
    out[ys_f, xs] = to_srgb(total.astype(np.int64))
    return out, cores, lit_box(cores)


def bloom_screen(
    image: np.ndarray, cores: np.ndarray, sigma: float, weight: float, tint: tuple, box: Box | None
) -> np.ndarray:
    """The exact bloom of aegis-v1's glare around the saturated cores, ``g = min(cores + weight * blur(cores), 1)``
    (``kernels.blur_mask``, std ``sigma`` px), screen-blended ``1 - (1 - I)(1 - g tint)``; computed over the
    cores' bounding box ``box`` and the blur's reach (the kernel's 4-sigma radius and one block), where it can be
    non-zero. The image is changed in place and returned."""
    h, w = image.shape[:2]
    if box is None:
        return image
    reach = 4 * max(1, math.ceil(sigma)) + 2 * max(1, int(sigma // 3.0)) + 2
    region = _grow(box, reach, h, w)
    part = np.ascontiguousarray(image[region])
    c = np.ascontiguousarray(cores[region])
    ph, pw = c.shape
    bloom = K.blur_mask(c, sigma) if sigma > 0.0 else np.zeros((ph, pw), dtype=np.uint16)
    table = _bloom_table(float(weight))
    tint32 = np.asarray(tint, dtype=np.float32)
    out = image
    if K.CKERNELS is not None:  # the glare blend of aegis-v1 (aegis_data/engine/_ckernels.c)
        done = np.empty_like(part)
        K.CKERNELS.glare(done, part, ph * pw, bloom, table, c.view(np.uint8), tint32)
        out[region] = done
        return out
    tint_row = np.tile(tint32, pw)
    for rows in K.row_strips(ph, pw):
        x = part[rows].astype(np.float32)
        x *= np.float32(1.0 / 255.0)
        g = np.take(table, bloom[rows])
        g += c[rows]
        np.minimum(g, 1.0, out=g)
        layer = np.repeat(g[..., None], 3, axis=-1)
        layer.reshape(layer.shape[0], -1)[...] *= tint_row
        screened = 1.0 - (1.0 - x) * (1.0 - layer)
        r = slice(region[0].start + rows.start, region[0].start + rows.stop)
        out[r, region[1]] = K.to_uint8(screened, scratch=True)
    return out


@lru_cache(maxsize=8)
def _bloom_table(weight: float) -> np.ndarray:
    """``weight * bloom`` for each of the 65536 levels of a uint16 bloom field, float32 (read-only)."""
    table = (np.arange(65536, dtype=np.float64) * (weight / K.U16)).astype(np.float32)
    table.setflags(write=False)
    return table


def sun_glint(image: np.ndarray, params: SunGlintParams, draw: SunGlintDraw, scene: Scene) -> np.ndarray:
    """water_glare (aegis-v2) of the valid region ``image``: sparkles of sun glint on the scene's water, saturated
    cores, bloom. The image is returned unchanged (a copy) when nothing can glint."""
    h, w = image.shape[:2]
    if draw.lottery.size == 0 or not can_glint(scene):
        return image.copy()
    water = np.ascontiguousarray(scene.water_mask()[scene.valid_slices])
    reach = len(psf_kernel(params.psf_sigma)) // 2 if params.psf_sigma > 0.0 else 0
    energy, box = glint_energy(glint_geometry(params, scene, h, w), water, draw.lottery, reach)
    if box is None:
        return image.copy()
    lit, cores, core_box = add_glint(image, spread_energy(energy, box, params.psf_sigma), params.tint)
    return bloom_screen(lit, cores, params.bloom_sigma, params.bloom_weight, params.tint, core_box)


def glint_cost(params: SunGlintParams, h: int, w: int) -> RenderCost:
    """The render cost of sun glint on an ``h x w`` region: the lottery and energy images, the exact PSF
    convolution over the region at most, the linear copy and the bloom."""
    taps = len(psf_kernel(params.psf_sigma)) if params.psf_sigma > 0 else 1
    psf = float(taps)
    cost = B.frame_cost(h, w) + B.mask_blur_cost(h, w, params.bloom_sigma, "glint bloom kernel")
    extra = RenderCost(
        (("glint point-spread kernel", psf),), 0.0, float(2 * taps * h * w), float(h * w * (4 + 8 + 8 + 8 + 3 * 8 + 1))
    )
    return cost + extra
