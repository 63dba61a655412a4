"""Rain as a drone camera records it (aegis-v2; docs/CORRUPTIONS.md, "rain_streaks (aegis-v2)").

Severity is the rain rate R (mm/h). Drop sizes follow Marshall & Palmer (1948), ``N(D) = N0 exp(-Lambda D)`` with
``N0 = 8000 m^-3 mm^-1`` and ``Lambda = 4.1 R^-0.21 mm^-1``; terminal velocities Atlas, Srivastava & Sekhon
(1973), ``v(D) = 9.65 - 10.3 exp(-0.6 D)`` m/s (D in mm). Three effects, as Garg & Nayar ("When does a camera see
rain?", 2005) separate them:

- **far drops** are too small and too defocused to resolve: they extinguish and scatter light like a haze. Drops
  much larger than the wavelength have an extinction efficiency of 2, so ``beta = integral N(D) 2 pi D**2 / 4 dD =
  pi N0 / Lambda**3`` (per m, with D in m), neutral in colour; the veil is Koschmieder's blend toward the sky's
  colour (or the scene's white level) along each pixel's sight line (``aegis_data.engine.atmosphere``);
- **near drops**, from ``nearest_drop_m`` to the depth where a drop's defocus blur shrinks to one pixel (the
  aperture diameter times the focal length in px), are drawn one by one: their number from the drop density above
  ``min_drop_mm`` and the volume of the view's frustum, their depth with density proportional to z**2 (the
  frustum's cross-section), their size from the distribution. Each is a motion streak: during the exposure (the
  scene's) it moves by ``T (f V_xy - p V_z) / z`` px, V its velocity relative to the camera (falling at v(D), the
  platform flying at the scene's speed and heading, both in camera coordinates of the view's pitch), p its offset
  from the principal point: from a nadir view a vertical fall points toward the nadir point and the platform's
  motion adds a uniform sweep. Its image is widened by its size ``f D / z`` and by the defocus blur
  ``A f |1/z - 1/z_focus|`` (A the aperture, focus on the scene); since all three shrink as 1/z, the share of the
  exposure a drop covers each pixel of its streak does not depend on its depth, and it is small: near drops make
  faint, wide streaks. A drop refracts light from a wide cone around the view, so its radiance is about the
  scene's mean, plus a share of the sky's light it reflects;
- **drops on the lens** (``lens_drops``, the worst level only): large soft discs that blur what lies behind them.

Exactness: drop geometry in float64 from basic operations (``atmosphere.exp_neg`` / ``log_pos`` for the
exponentials and logarithms), integer weights accumulated per pixel (saturating, order-free), integer blends in
15-bit linear light; the compiled loops (``_ckernels.atmos_drops``, ``atmos_blend``) perform the same operations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from aegis_data.engine import kernels as K
from aegis_data.engine.atmosphere import (
    KOSCHMIEDER,
    NO_CAP,
    ONE,
    Sightlines,
    exp_neg,
    haze_render,
    log_pos,
    mean_linear,
    pitch_cos_sin,
    sightlines,
    sky_colour,
    white_level,
)
from aegis_data.engine.budget import RenderCost, limits
from aegis_data.engine.photometry import LINEAR_MAX, encode_table, stable, to_srgb
from aegis_data.engine.scene import Scene
from aegis_data.engine.seeding import KeyedRandom
from aegis_data.errors import AegisError

MP_N0 = 8000.0  # m^-3 mm^-1 (Marshall & Palmer 1948)
MP_SCALE = 4.1  # Lambda = 4.1 R^-0.21 mm^-1
MP_EXPONENT = -0.21
MAX_DROP_MM = 6.0  # drops larger than this break up
LAYER_ONE = 1 << 16  # 1.0 in the drop layer's fixed point
LAYER_CAP = 1 << 24  # the layer saturates here (anything above 1.0 blends the same)
MAX_NEAR_DROPS = 4_000_000  # a render drawing more is refused (the render budget refuses sooner)


@dataclass(frozen=True)
class RainRateParams:
    """rain_streaks (aegis-v2): the rain rate, drops on the lens, and the camera and rain facts the model uses."""

    rain_mm_h: float
    lens_drops: int
    rain_height_m: float
    focal_mm: float
    f_number: float
    min_drop_mm: float
    nearest_drop_m: float
    sky_reflection: float
    scene_reflectance: float
    lens_drop_radius: tuple
    heading_range_deg: tuple


@dataclass(frozen=True)
class RainRateDraw:
    heading_deg: float  # the platform's direction in the image (the scene's where known)
    drops: np.ndarray  # (6, n) uniforms: depth (3, the largest of which), x, y, size
    lens: np.ndarray  # (3, k) uniforms: x, y, radius


def mp_slope(rain_mm_h: float) -> float:
    """Marshall-Palmer Lambda (1/mm) of a rain rate (mm/h)."""
    return stable(MP_SCALE * float(rain_mm_h) ** MP_EXPONENT, "Marshall-Palmer slope")


def drop_density(rain_mm_h: float, min_drop_mm: float) -> float:
    """Drops of at least ``min_drop_mm`` per m^3: ``N0 / Lambda exp(-Lambda D_min)``, 0 without rain."""
    if rain_mm_h <= 0:
        return 0.0
    lam = mp_slope(rain_mm_h)
    return MP_N0 / lam * exp_neg(lam * float(min_drop_mm))


def rain_extinction(rain_mm_h: float) -> float:
    """Extinction coefficient (1/m) of the rain: ``pi N0 / Lambda**3`` (extinction efficiency 2), 0 without rain."""
    if rain_mm_h <= 0:
        return 0.0
    lam = mp_slope(rain_mm_h)
    return math.pi * MP_N0 * 1e-6 / (lam * lam * lam)


def terminal_velocity(d_mm: float | np.ndarray) -> np.ndarray:
    """Atlas et al. (1973): ``9.65 - 10.3 exp(-0.6 D)`` m/s, D in mm (clipped at 0 for the tiniest drops)."""
    return np.maximum(9.65 - 10.3 * exp_neg(0.6 * np.asarray(d_mm, dtype=np.float64)), 0.0)


def aperture_m(params: RainRateParams) -> float:
    """The entrance pupil's diameter (m): focal length over f-number."""
    return float(params.focal_mm) / float(params.f_number) / 1000.0


def near_range(params: RainRateParams, scene: Scene) -> tuple[float, float]:
    """(nearest, farthest) depth (m) of the drops drawn one by one: the farthest is where a drop's defocus blur is
    one pixel, ``A f_px`` (focus far away)."""
    return float(params.nearest_drop_m), aperture_m(params) * float(scene.focal_px)


def near_drop_count(params: RainRateParams, scene: Scene, h: int, w: int) -> int:
    """Expected number of drops of at least ``min_drop_mm`` in the view's frustum from the camera to the far end of
    the near range (those nearer than ``nearest_drop_m`` are drawn, then left out), rounded:
    ``N0 / Lambda exp(-Lambda D_min) x (w h / f**2) z_far**3 / 3``."""
    if params.rain_mm_h <= 0:
        return 0
    density = drop_density(params.rain_mm_h, params.min_drop_mm)
    _, z_far = near_range(params, scene)
    f = float(scene.focal_px)
    volume = (float(w) * float(h) / (f * f)) * z_far * z_far * z_far / 3.0
    expected = density * volume
    if not expected <= MAX_NEAR_DROPS:
        raise AegisError(
            f"rain of {params.rain_mm_h:g} mm/h puts {expected:.3g} drops in the near range of this "
            f"view (at most {MAX_NEAR_DROPS:,}); check the focal length and aperture"
        )
    return int(math.floor(expected + 0.5))


def draw_rain(params: RainRateParams, scene: Scene, h: int, w: int, rng: KeyedRandom) -> RainRateDraw:
    lo, hi = params.heading_range_deg
    drawn = float(lo + (hi - lo) * rng.child("heading").uniform(1)[0])
    heading = drawn if scene.heading_deg is None else float(scene.heading_deg)
    n = near_drop_count(params, scene, h, w)
    return RainRateDraw(
        heading, rng.child("drops").uniform((6, n)), rng.child("lens").uniform((3, int(params.lens_drops)))
    )


@dataclass(frozen=True)
class NearDrops:
    """The near drops' streaks in region px: start (ax, ay), extent (ex, ey), 1/length**2 (0 for a point),
    1/radius**2, peak weight in 2**-16, and the bounding boxes [x0, x1) x [y0, y1) (int64)."""

    ax: np.ndarray
    ay: np.ndarray
    ex: np.ndarray
    ey: np.ndarray
    inv_len2: np.ndarray
    inv_r2: np.ndarray
    peak: np.ndarray
    x0: np.ndarray
    x1: np.ndarray
    y0: np.ndarray
    y1: np.ndarray
    depth_m: np.ndarray
    length_px: np.ndarray
    radius_px: np.ndarray

    @property
    def covered_px(self) -> int:
        return int(np.sum((self.x1 - self.x0) * (self.y1 - self.y0)))


def near_drops(
    params: RainRateParams, draw: RainRateDraw, scene: Scene, lines: Sightlines, h: int, w: int
) -> NearDrops:
    """Geometry and weight of every near drop (float64, basic operations; docs/CORRUPTIONS.md)."""
    u = draw.drops
    z_near, z_far = near_range(params, scene)
    z = z_far * np.maximum(np.maximum(u[0], u[1]), u[2])  # density proportional to z**2 on [0, z_far]
    keep = z >= z_near
    u = u[:, keep]
    z = z[keep]
    lam = mp_slope(params.rain_mm_h) if params.rain_mm_h > 0 else math.inf  # no rain: no drops drawn
    d_mm = np.minimum(float(params.min_drop_mm) - log_pos(1.0 - u[5]) / lam, MAX_DROP_MM)
    x = u[3] * w - 0.5
    y = u[4] * h - 0.5
    f = float(scene.focal_px)
    xp = x + (scene.valid[0] - (scene.width - 1) / 2.0)
    yp = y + (scene.valid[1] - (scene.height - 1) / 2.0)
    cos_p, sin_p = pitch_cos_sin(scene)
    sin_h, cos_h = K.sin_cos_turns(draw.heading_deg / 360.0)
    s = float(scene.speed_mps)
    vt = terminal_velocity(d_mm)
    # Velocity relative to the camera, camera coordinates (x right, y down, z forward): the fall along the world's
    # down (0, cos p, sin p) less the platform's (s cos h, s sin h sin p, -s sin h cos p).
    vx = np.full(z.shape, -s * cos_h)
    vy = vt * cos_p - s * sin_h * sin_p
    vz = vt * sin_p + s * sin_h * cos_p
    t_exp = float(scene.exposure_ms) / 1000.0
    ex = t_exp * ((f * vx - xp * vz) / z)
    ey = t_exp * ((f * vy - yp * vz) / z)
    rows = np.clip(np.floor(y + 0.5).astype(np.int64), 0, h - 1)
    focus = lines.ground[rows]
    if lines.sky_rows is not None:
        cols = np.clip(np.floor(x + 0.5).astype(np.int64), 0, w - 1)
        focus = np.where(rows < lines.sky_rows[cols], np.inf, focus)
    pupil = aperture_m(params)
    blur = pupil * f * np.abs(1.0 / z - 1.0 / focus)
    size = f * (d_mm / 1000.0) / z
    radius = 0.6 * np.sqrt(size * size + blur * blur) + 0.5
    length2 = ex * ex + ey * ey
    length = np.sqrt(length2)
    area = (math.pi / 4.0) * (size * size)
    spread = length * (16.0 / 15.0) * radius + (math.pi / 3.0) * (radius * radius)
    peak = np.minimum(area / spread, 1.0) * float(LAYER_ONE)
    inv_len2 = np.where(length2 > 0.0, 1.0 / np.where(length2 > 0.0, length2, 1.0), 0.0)
    ax = x - 0.5 * ex
    ay = y - 0.5 * ey
    bx0 = np.minimum(ax, ax + ex) - radius
    bx1 = np.maximum(ax, ax + ex) + radius
    by0 = np.minimum(ay, ay + ey) - radius
    by1 = np.maximum(ay, ay + ey) + radius
    x0 = np.clip(np.ceil(bx0), 0, w).astype(np.int64)
    x1 = np.clip(np.floor(bx1) + 1, 0, w).astype(np.int64)
    y0 = np.clip(np.ceil(by0), 0, h).astype(np.int64)
    y1 = np.clip(np.floor(by1) + 1, 0, h).astype(np.int64)
    x1 = np.maximum(x1, x0)
    y1 = np.maximum(y1, y0)
    return NearDrops(ax, ay, ex, ey, inv_len2, 1.0 / (radius * radius), peak, x0, x1, y0, y1, z, length, radius)


def drop_layer(drops: NearDrops, h: int, w: int) -> np.ndarray:
    """uint32 (h, w): per pixel the summed share of the exposure the near drops cover it, in 2**-16, saturating at
    2**24. Per drop and pixel of its box, float64: ``t = clip(((px - ax) ex + (py - ay) ey) / len**2, 0, 1)``,
    ``u2 = (|p - a - t e|**2) / r**2``, weight ``floor(peak (1 - u2)**2 + 0.5)`` where ``u2 < 1``."""
    layer = np.zeros((h, w), dtype=np.uint32)
    n = drops.ax.size
    if n == 0:
        return layer
    c = K.CKERNELS
    if c is not None and hasattr(c, "atmos_drops"):
        f64 = [
            np.ascontiguousarray(v, dtype=np.float64)
            for v in (drops.ax, drops.ay, drops.ex, drops.ey, drops.inv_len2, drops.inv_r2, drops.peak)
        ]
        boxes = np.ascontiguousarray(np.stack([drops.x0, drops.x1, drops.y0, drops.y1]), dtype=np.int64)
        c.atmos_drops(layer, h, w, n, *f64, boxes)
        return layer
    for k in range(n):
        xa, xb, ya, yb = int(drops.x0[k]), int(drops.x1[k]), int(drops.y0[k]), int(drops.y1[k])
        if xa >= xb or ya >= yb:
            continue
        dx = np.arange(xa, xb, dtype=np.float64)[None, :] - drops.ax[k]
        dy = np.arange(ya, yb, dtype=np.float64)[:, None] - drops.ay[k]
        ex, ey = drops.ex[k], drops.ey[k]
        t = np.clip((dx * ex + dy * ey) * drops.inv_len2[k], 0.0, 1.0)
        qx = dx - t * ex
        qy = dy - t * ey
        u2 = (qx * qx + qy * qy) * drops.inv_r2[k]
        g = 1.0 - u2
        wgt = np.where(u2 < 1.0, np.floor(drops.peak[k] * (g * g) + 0.5), 0.0).astype(np.int64)
        box = layer[ya:yb, xa:xb]
        box[...] = np.minimum(box.astype(np.int64) + wgt, LAYER_CAP)
    return layer


def blend_drops(linear: np.ndarray, layer: np.ndarray | None, drop_rgb: np.ndarray, srgb_out: bool) -> np.ndarray:
    """``(v (2**16 - a) + L_drop a + 2**15) >> 16`` with ``a = min(layer, 2**16)`` per pixel and channel (integers;
    no layer: a = 0, the image itself); uint8 sRGB (``srgb_out``) or uint16 linear out."""
    h, w = linear.shape[:2]
    c = K.CKERNELS
    if c is not None and hasattr(c, "atmos_blend") and h > 0 and w > 0:
        out = np.empty((h, w, 3), dtype=np.uint8 if srgb_out else np.uint16)
        r, g, b = (int(v) for v in drop_rgb)
        c.atmos_blend(
            out,
            int(srgb_out),
            np.ascontiguousarray(linear),
            None if layer is None else np.ascontiguousarray(layer),
            h * w,
            r,
            g,
            b,
            encode_table(),
        )
        return out
    out = np.empty((h, w, 3), dtype=np.uint8 if srgb_out else np.uint16)
    enc = encode_table()
    for strip in K.row_strips(h, w, 1 << 15):
        if layer is None:
            out[strip] = enc[linear[strip]] if srgb_out else linear[strip]
            continue
        a = np.minimum(layer[strip].astype(np.int64), LAYER_ONE)[..., None]
        v = (linear[strip].astype(np.int64) * (LAYER_ONE - a) + drop_rgb[None, None, :] * a + (1 << 15)) >> 16
        out[strip] = enc[v] if srgb_out else v
    return out


def drop_radiance(params: RainRateParams, mean: tuple, air: np.ndarray) -> np.ndarray:
    """int64 (3,) linear radiance of a near drop: ``(1 - kappa)`` times the region's mean linear colour ``mean``
    (the wide cone a drop refracts) plus ``kappa`` times the sky's light it reflects (the airlight)."""
    kappa = float(params.sky_reflection)
    return np.array(
        [min(LINEAR_MAX, math.floor((1.0 - kappa) * m + kappa * float(a) + 0.5)) for m, a in zip(mean, air)],
        dtype=np.int64,
    )


def _soft_blur(crop: np.ndarray, sigma: float) -> np.ndarray:
    """uint16 (hh, ww, 3) linear blurred by about ``sigma`` px in exact integers: block means over b x b
    (b = max(1, sigma // 3), edges repeated), a discrete Gaussian of sigma / b there, bilinear upsampling."""
    hh, ww = crop.shape[:2]
    b = max(1, int(sigma // 3.0))
    ph, pw = -(-hh // b) * b, -(-ww // b) * b
    padded = np.pad(crop.astype(np.int64), ((0, ph - hh), (0, pw - ww), (0, 0)), mode="edge")
    small = (padded.reshape(ph // b, b, pw // b, b, 3).sum(axis=(1, 3)) + (b * b) // 2) // (b * b)
    k = K.discrete_gaussian(max(sigma / b, 0.5))
    total = float(k.sum()) ** 2
    out = np.empty((hh, ww, 3), dtype=np.uint16)
    for ch in range(3):
        blurred = np.floor(K.convolve_exact(small[..., ch], k) / total + 0.5)
        q = np.clip(blurred, 0, LINEAR_MAX).astype(np.uint16)
        out[..., ch] = K.upsample_u16(q, b, hh, ww)
    return out


def lens_drops(linear: np.ndarray, params: RainRateParams, draw: RainRateDraw) -> np.ndarray:
    """Drops on the lens (in place on uint16 linear): each a disc of radius r (shares of the short side drawn in
    ``lens_drop_radius``) whose content is the scene blurred by r / 2, blended with weight ``0.9 (1 - d**2/r**2)**2``
    in 2**-15 (a drop on the glass defocuses what lies behind it; its rim fades)."""
    h, w = linear.shape[:2]
    lo, hi = params.lens_drop_radius
    for k in range(draw.lens.shape[1]):
        cx = float(draw.lens[0, k]) * w - 0.5
        cy = float(draw.lens[1, k]) * h - 0.5
        r = max(2.0, (float(lo) + (float(hi) - float(lo)) * float(draw.lens[2, k])) * min(h, w))
        x0, x1 = max(0, int(math.ceil(cx - r))), min(w, int(math.floor(cx + r)) + 1)
        y0, y1 = max(0, int(math.ceil(cy - r))), min(h, int(math.floor(cy + r)) + 1)
        if x0 >= x1 or y0 >= y1:
            continue
        pad = int(math.ceil(r))
        bx0, bx1, by0, by1 = max(0, x0 - pad), min(w, x1 + pad), max(0, y0 - pad), min(h, y1 + pad)
        blurred = _soft_blur(linear[by0:by1, bx0:bx1], r / 2.0)[y0 - by0 : y1 - by0, x0 - bx0 : x1 - bx0]
        dx = np.arange(x0, x1, dtype=np.float64)[None, :] - cx
        dy = np.arange(y0, y1, dtype=np.float64)[:, None] - cy
        u2 = (dx * dx + dy * dy) / (r * r)
        g = 1.0 - u2
        a = np.where(u2 < 1.0, np.floor((0.9 * ONE) * (g * g) + 0.5), 0.0).astype(np.int64)[..., None]
        box = linear[y0:y1, x0:x1].astype(np.int64)
        linear[y0:y1, x0:x1] = (box * (ONE - a) + blurred.astype(np.int64) * a + (1 << 14)) >> 15
    return linear


def rain_airlight(params: RainRateParams, image: np.ndarray, lines: Sightlines, mean: tuple) -> np.ndarray:
    """int64 (3,) linear airlight of the rain veil: the horizon sky's colour (sky visible) or the scene's white
    level (water drops are neutral scatterers, albedo 1); ``mean``: the region's mean linear colour."""
    light = sky_colour(image, lines) or white_level(mean, params.scene_reflectance)
    return np.array([min(LINEAR_MAX, math.floor(float(e) + 0.5)) for e in light], dtype=np.int64)


def rain_rate(image: np.ndarray, params: RainRateParams, draw: RainRateDraw, scene: Scene) -> np.ndarray:
    """rain_streaks (aegis-v2) of the valid region ``image``: the veil of the far drops, the near drops' faint
    streaks, and (worst level) drops on the lens."""
    h, w = image.shape[:2]
    lines = sightlines(scene, h, w)
    beta = rain_extinction(params.rain_mm_h)
    mean = mean_linear(image)
    air = rain_airlight(params, image, lines, mean)
    linear = haze_render(image, lines, beta, float(params.rain_height_m), NO_CAP, (1.0, 1.0, 1.0), air, linear_out=True)
    drops = near_drops(params, draw, scene, lines, h, w)
    covered, allowed = drops.covered_px, limits(h, w).streak_px
    if covered > allowed:
        raise AegisError(
            f"the near raindrops cover {covered:,} px of streak boxes (at most {allowed:,.0f} on this "
            f'frame; docs/CORRUPTIONS.md, "Render budget")'
        )
    layer = drop_layer(drops, h, w)
    lens = draw.lens.shape[1] > 0
    out = blend_drops(linear, layer, drop_radiance(params, mean, air), srgb_out=not lens)
    if not lens:
        return out
    return to_srgb(lens_drops(out, params, draw))


# ----------------------------------------------------------------------------------------------------------
# Render cost and the physical ladder
# ----------------------------------------------------------------------------------------------------------
def rain_cost(params: RainRateParams, scene: Scene, h: int, w: int) -> RenderCost:
    """A rain render, priced before any draw: four times the expected streak-box pixels of the near drops (the
    drawn boxes are counted again before rasterising, ``rain_rate``). A drop at depth z has a box of about
    ``(K / z + 3)**2`` px, K from a drop of mean size falling at its speed seen at 0.6 of the frame's half-diagonal
    from the centre, and depths follow ``3 z**2 / z_far**3``; plus the linear images, the layer and the lens drops'
    blur."""
    n = near_drop_count(params, scene, h, w)
    z_near, z_far = near_range(params, scene)
    mean_box = 0.0
    if n and z_far > z_near > 0:
        lam = mp_slope(params.rain_mm_h)
        d_mean = min(float(params.min_drop_mm) + 1.0 / lam, MAX_DROP_MM)
        fall = float(terminal_velocity(d_mean))
        cos_p, sin_p = pitch_cos_sin(scene)
        s = float(scene.speed_mps)
        f = float(scene.focal_px)
        offset = 0.6 * math.hypot(scene.width, scene.height) / 2.0
        k_len = float(scene.exposure_ms) / 1000.0 * (f * (s + fall * cos_p) + offset * (fall * sin_p + s * cos_p))
        k_rad = 0.6 * math.hypot(d_mean / 1000.0, aperture_m(params)) * f
        k = k_len + 2.0 * k_rad
        mean_box = (
            3.0
            / z_far**3
            * (k * k * (z_far - z_near) + 3.0 * k * (z_far**2 - z_near**2) + 3.0 * (z_far**3 - z_near**3))
        )
    boxes = 4.0 * n * mean_box
    lens_r = float(params.lens_drop_radius[1]) * min(h, w)
    lens_work = float(params.lens_drops) * (4.0 * lens_r + 1.0) ** 2 * 60.0
    peak = (6.0 + 6.0 + 4.0) * h * w + 200.0 * n + float(params.lens_drops) * (4.0 * lens_r + 1.0) ** 2 * 64.0
    return RenderCost((), boxes, lens_work, peak)


RAIN_CLASSES = ((2.5, "light"), (7.6, "moderate"), (math.inf, "heavy"))  # American Meteorological Society


def rain_ladder_row(params: RainRateParams) -> dict:
    """One severity of rain in physical terms: rate, its AMS class, the veil's extinction and visibility, the
    density of drops of at least ``min_drop_mm`` and the fall speed of a 2 mm drop."""
    beta = rain_extinction(params.rain_mm_h)
    density = drop_density(params.rain_mm_h, params.min_drop_mm)
    return {
        "rain_mm_h": params.rain_mm_h,
        "class": next(name for top, name in RAIN_CLASSES if params.rain_mm_h < top),
        "extinction_per_km": round(beta * 1000.0, 4),
        "visibility_m": round(KOSCHMIEDER / beta, 1) if beta > 0 else None,
        "drops_per_m3": round(density, 1),
        "fall_speed_2mm_mps": round(float(terminal_velocity(2.0)), 3),
        "lens_drops": params.lens_drops,
    }
