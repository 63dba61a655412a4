"""The atmosphere of aegis-v2 (docs/CORRUPTIONS.md, "The atmosphere (aegis-v2)"): smoke and dust plumes whose
haze follows the distance of every pixel (Koschmieder's law), and firelight under a smoke canopy.

**Sight lines.** A pinhole camera without roll looks down by the pitch p (90 degrees in a near-nadir view; from the
scene's horizon row otherwise: ``tan p = (c_y - y_h) / f``). A ray through pixel (x, y) has the slant factor
``rho = sqrt(1 + u**2 + v**2)`` (u, v its offsets from the principal point in focal lengths), and its path to the
flat ground is ``rho z(y)`` with ``z(y) = gsd(y) f`` the scene's depth along the optical axis (the altitude in a
near-nadir view). A sky pixel's path through a layer of height H is ``rho H f / (cos p (y_h - y))``. Ground above the
horizon line (a building, a far hill) takes the depth of the farthest ground row.

**Haze.** ``L = t S L0 + (1 - t) A`` in linear light, per channel, with ``t = exp(-beta_c m d)``: ``beta_c`` the
extinction (``3.912 / visibility`` at 550 nm, scaled per channel by the Angstrom law), m the plume's density
(wind-elongated value noise, mean about 1), d the sight-line path (capped at the plume's size for a local plume),
S the relative sunlight the ground still receives under the plume's shadow, A the airlight: the plume's albedo
times the horizon sky's colour where a sky is visible, else times the scene's white level. Dust also coats the ground it
settles on. **Firelight**: the sun through a smoke canopy of optical depth tau reddens and dims; the camera's white
balance corrects part of the colour, and its auto-exposure, noise and chroma path are those of low_light
(``aegis_data.engine.camera``) with the canopy's light loss as the exposure loss.

Exactness: ``exp`` and ``log`` are evaluated here with basic IEEE operations only (:func:`exp_neg`,
:func:`log_pos`), so every table and per-image scalar built from them is the same on every machine; scalars from
``pow`` pass ``photometry.stable``; per pixel only + - * / and sqrt in float64 in a fixed order, then integers
(transmission, shadow and coat in 2**-15 units, linear light in 15 bits). The compiled loops
(``_ckernels.atmos_haze``, ``atmos_cast``) perform the same operations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import cast, overload

import cv2
import numpy as np

from aegis_data.engine import budget as B
from aegis_data.engine import camera as CAM
from aegis_data.engine import kernels as K
from aegis_data.engine.camera import CameraLowLightParams
from aegis_data.engine.motion import Exposure
from aegis_data.engine.photometry import LINEAR_MAX, decode_table, encode_table, srgb_to_linear, stable
from aegis_data.engine.scene import NADIR, Scene
from aegis_data.engine.seeding import KeyedRandom
from aegis_data.errors import AegisError

KOSCHMIEDER = 3.912  # -ln(0.02): meteorological visibility is where a black object keeps 2 % contrast
# Effective wavelengths (nm) of the sRGB primaries (their dominant wavelengths), and the reference of the
# visibility and optical depths (550 nm, mid-visible).
CHANNEL_NM = (611.0, 549.0, 464.0)
REFERENCE_NM = 550.0
ONE = 1 << 15  # 1.0 in the fixed point of transmissions, shadows and coats
TAU_STEPS = 1024  # optical depth quantised to 1/1024 (transmission error < 0.05 %)
TAU_MAX = 20.0  # exp(-20) = 2e-9: no trace of the scene
NO_CAP = 1e300  # a path cap that never applies (a regional layer)
LUMA_LINEAR = (0.2126, 0.7152, 0.0722)  # luminance of linear sRGB (ITU-R BT.709)
MAX_WB_GAIN = 8.0  # the largest white-balance correction a camera applies to one channel
MAX_EV_LOSS = 20.0  # the low-light camera's range (config_schema: camera_low_light.ev_loss)
MIN_SUN_ELEVATION_DEG = 5.0  # a sun lower than this lights nothing directly (no shadow; the canopy's path is capped)

_LN2 = 0.6931471805599453
_LN2_HI = 6.93147180369123816490e-01  # ln 2 split so that n * _LN2_HI is exact for |n| < 2**20
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.4426950408889634


# ----------------------------------------------------------------------------------------------------------
# exp and log from basic operations (the same bits on every machine)
# ----------------------------------------------------------------------------------------------------------
@overload
def exp_neg(x: float) -> float: ...
@overload
def exp_neg(x: np.ndarray) -> np.ndarray: ...
def exp_neg(x: float | np.ndarray) -> float | np.ndarray:
    """``exp(-x)`` for float64 ``x >= 0`` (array or scalar), relative error about 1e-16, from + - * / and exact
    scaling only: ``x = n ln 2 + r`` (|r| <= ln 2 / 2, the product split in two exact parts), ``exp(-r)`` by its
    Taylor series to r**13 in Horner form (truncation below 4e-18), times ``2**-n`` (``ldexp``, exact); 0 beyond
    x = 1000."""
    a = np.minimum(np.asarray(x, dtype=np.float64), 1000.0)
    if (a < 0.0).any() or np.isnan(a).any():
        raise AegisError("exp_neg takes x >= 0")
    n = np.floor(a * _INV_LN2 + 0.5)
    r = (a - n * _LN2_HI) - n * _LN2_LO
    p = np.ones_like(r)
    for k in range(13, 0, -1):
        p = 1.0 - (r / float(k)) * p
    out = np.ldexp(p, -n.astype(np.int64))
    return float(out) if np.ndim(x) == 0 else out


def exp_signed(x: float) -> float:
    """``exp(x)`` of a float64 scalar of either sign, through :func:`exp_neg`."""
    return exp_neg(-x) if x <= 0.0 else 1.0 / exp_neg(x)


@overload
def log_pos(x: float) -> float: ...
@overload
def log_pos(x: np.ndarray) -> np.ndarray: ...
def log_pos(x: float | np.ndarray) -> float | np.ndarray:
    """``ln x`` for float64 ``x > 0``, absolute error about 1e-16, from basic operations: ``x = m 2**e`` exactly
    (``frexp``, m in [sqrt(1/2), sqrt(2))), ``ln m = 2 atanh(s)`` with ``s = (m - 1) / (m + 1)`` by its series
    to s**25, plus ``e ln 2`` in two exact parts."""
    a = np.asarray(x, dtype=np.float64)
    if not (a > 0.0).all() or not np.isfinite(a).all():
        raise AegisError("log_pos takes finite x > 0")
    m, e = np.frexp(a)
    low = m < 0.7071067811865476
    m = np.where(low, m * 2.0, m)
    e = (e - low.astype(np.int64)).astype(np.float64)
    s = (m - 1.0) / (m + 1.0)
    s2 = s * s
    p = np.full_like(s, 1.0 / 25.0)
    for k in range(23, 0, -2):
        p = 1.0 / float(k) + s2 * p
    out = e * _LN2_HI + (2.0 * s * p + e * _LN2_LO)
    return float(out) if np.ndim(x) == 0 else out


@lru_cache(maxsize=1)
def transmission_table() -> np.ndarray:
    """uint16 (TAU_MAX * TAU_STEPS + 1,): ``round(exp(-k / TAU_STEPS) * 2**15)`` (read-only)."""
    k = np.arange(int(TAU_MAX * TAU_STEPS) + 1, dtype=np.float64)
    table = np.floor(exp_neg(k / float(TAU_STEPS)) * ONE + 0.5).astype(np.uint16)
    table.setflags(write=False)
    return table


def channel_factors(angstrom: float) -> tuple[float, float, float]:
    """Extinction per channel relative to 550 nm, ``(lambda_c / 550) ** -angstrom`` (stable scalars)."""
    r, g, b = (stable((nm / REFERENCE_NM) ** -float(angstrom), "Angstrom factor") for nm in CHANNEL_NM)
    return r, g, b


def linear_colour(srgb) -> tuple[float, float, float]:
    """An sRGB colour in [0, 1] as linear light in LINEAR_MAX units (stable scalars)."""
    # srgb: a validated 3-item colour of the suite
    return cast(
        tuple[float, float, float], tuple(stable(srgb_to_linear(float(v)) * LINEAR_MAX, "linear colour") for v in srgb)
    )


def sun_direction(scene: Scene, rng: KeyedRandom, elevation_range: tuple) -> tuple[float, float]:
    """(elevation, azimuth) of the sun in degrees: the scene's where known, else drawn uniformly in
    ``elevation_range`` and in [0, 360) (keyed sub-streams ``sun_elevation``, ``sun_azimuth``)."""
    lo, hi = elevation_range
    drawn_e = float(lo + (hi - lo) * rng.child("sun_elevation").uniform(1)[0])
    drawn_a = float(360.0 * rng.child("sun_azimuth").uniform(1)[0])
    known_e, known_a = sidecar_sun(scene)
    return (drawn_e if known_e is None else known_e), (drawn_a if known_a is None else known_a)


def sidecar_sun(scene: Scene) -> tuple[float | None, float | None]:
    """(elevation, azimuth) as the image's sidecar gives them (None where it does not). The sun a scene draws for an
    image without one serves the water models; the atmosphere models draw theirs from each model's own elevation
    range instead, the heights at which their severity ladders were set (docs/CORRUPTIONS.md, "Sun")."""

    def known(value, name):
        return None if value is None or name in scene.sun_drawn else float(value)

    return known(scene.sun_elevation_deg, "elevation"), known(scene.sun_azimuth_deg, "azimuth")


# ----------------------------------------------------------------------------------------------------------
# Sight lines of the valid region
# ----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sightlines:
    """Per-row and per-column geometry of an ``h x w`` valid region (region coordinates).

    cu (w,), cv (h,): squared offsets from the principal point in focal lengths (``rho = sqrt(1 + cu + cv)``);
    ground (h,): depth along the optical axis of each row's ground, m; sky (h,): a sky pixel's path per metre of
    layer height, before rho; sky_rows (w,) int32: how many rows from the top of each column are sky (None: no sky)."""

    cu: np.ndarray
    cv: np.ndarray
    ground: np.ndarray
    sky: np.ndarray
    sky_rows: np.ndarray | None

    def path(self, rows: slice | None = None) -> np.ndarray:
        """The sight-line path (m) of every pixel of ``rows`` with a layer of 1 m for the sky (tests, tools)."""
        rows = rows or slice(0, self.cv.size)
        rho = np.sqrt(1.0 + (self.cu[None, :] + self.cv[rows, None]))
        base = np.broadcast_to(self.ground[rows, None], rho.shape)
        if self.sky_rows is not None:
            y = np.arange(self.cv.size)[rows, None]
            base = np.where(y < self.sky_rows[None, :], self.sky[rows, None], base)
        return rho * base


def pitch_cos_sin(scene: Scene) -> tuple[float, float]:
    """(cos p, sin p) of the camera's pitch below the horizontal: (0, 1) in a near-nadir view, else from the horizon
    row, ``tan p = (c_y - y_h) / f`` (basic operations)."""
    if scene.view == NADIR or scene.horizon_row is None:
        return 0.0, 1.0
    tan_p = ((scene.height - 1) / 2.0 - float(scene.horizon_row)) / float(scene.focal_px)
    cos_p = 1.0 / math.sqrt(1.0 + tan_p * tan_p)
    return cos_p, tan_p * cos_p


def sightlines(scene: Scene, h: int, w: int) -> Sightlines:
    """The sight lines of the scene's valid region (``h x w``, starting at ``scene.valid``'s corner)."""
    x0, y0 = scene.valid[0], scene.valid[1]
    f = float(scene.focal_px)
    cx, cy = (scene.width - 1) / 2.0, (scene.height - 1) / 2.0
    u = (np.arange(w, dtype=np.float64) + (x0 - cx)) / f
    v = (np.arange(h, dtype=np.float64) + (y0 - cy)) / f
    rows = np.arange(h, dtype=np.float64) + y0
    if scene.view == NADIR or scene.horizon_row is None:
        depth = float(scene.gsd_m) * f
        return Sightlines(u * u, v * v, np.full(h, depth), np.zeros(h), None)
    yh = float(scene.horizon_row)
    cos_p, _ = pitch_cos_sin(scene)
    far = math.floor(yh + 0.5) + 1.0  # the farthest ground row the model resolves (at least 0.5 px below y_h)
    ground = scene.gsd_rows(np.maximum(rows, far)) * f
    # A horizon at or below the reference row (sky detected down to the region's bottom) leaves the ground plane no
    # positive depth: such rows take the reference depth, as a near-nadir view would.
    ground = np.where(np.isfinite(ground) & (ground > 0.0), ground, float(scene.gsd_m) * f)
    sky = f / (cos_p * np.maximum(yh - rows, 0.5))
    sky_rows = None
    if scene.sky_depth and max(scene.sky_depth) > 0:
        sky_rows = np.ascontiguousarray(np.minimum(np.asarray(scene.sky_depth, dtype=np.int64), h), dtype=np.int32)
    return Sightlines(u * u, v * v, np.ascontiguousarray(ground), sky, sky_rows)


# ----------------------------------------------------------------------------------------------------------
# Wind-elongated plume structure
# ----------------------------------------------------------------------------------------------------------
PLUME_PERIOD = 4.0  # the node grids repeat every 4 long sides: farther than any frame (and its shadow offset) reaches


def plume_grid_shapes(octaves: int, base: float, elongation: float) -> list[tuple[int, int]]:
    """Node grid (across-wind rows, along-wind columns) per octave: ``base 2**o`` cells per long side across the
    wind, ``elongation`` times fewer along it, over ``PLUME_PERIOD`` long sides (periodic)."""
    out = []
    for o in range(int(octaves)):
        across = float(base) * 2.0**o
        along = across / float(elongation)
        out.append((max(4, int(math.ceil(PLUME_PERIOD * across))), max(4, int(math.ceil(PLUME_PERIOD * along)))))
    return out


def plume_work_factor(h: int, w: int, octaves: int, base: float) -> int:
    """Frame px per work-grid sample: at least 2.5 samples per finest across-wind cell (the cubic makes the samples
    smooth; the bilinear upsampling between them is within a few percent of the field's range), and at least 8
    samples on the long side."""
    finest = float(base) * 2.0 ** (int(octaves) - 1)
    return max(1, min(max(h, w) // 8, int(max(h, w) // (2.5 * finest))))


def _catmull_rom(t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    t2 = t * t
    t3 = t2 * t
    return (
        (-0.5 * t3 + t2) - 0.5 * t,
        (1.5 * t3 - 2.5 * t2) + 1.0,
        (-1.5 * t3 + 2.0 * t2) + 0.5 * t,
        0.5 * t3 - 0.5 * t2,
    )


def rotated_noise(
    xs: np.ndarray,
    ys: np.ndarray,
    long_side: int,
    wind_deg: float,
    octaves: int,
    base: float,
    elongation: float,
    grids: tuple,
) -> np.ndarray:
    """Value noise at points (xs, ys) (frame px, float64 arrays of one shape), elongated along ``wind_deg``: octave
    o reads its periodic node grid at ``(a, b) = ((x, y) rotated to the wind) / long_side x cells`` with a
    separable Catmull-Rom cubic, weighted 0.55**o and summed (float64, fixed order)."""
    sin, cos = K.sin_cos_turns(wind_deg / 360.0)
    xn = xs / float(long_side)
    yn = ys / float(long_side)
    along = xn * cos + yn * sin
    across = yn * cos - xn * sin
    total = np.zeros(xs.shape, dtype=np.float64)
    weight = 1.0
    for o, grid in enumerate(grids):
        gb, ga = grid.shape
        cells_b = float(base) * 2.0**o
        cells_a = cells_b / float(elongation)
        # Coordinates made positive (the frame and its shadow offset lie within +-PLUME_PERIOD / 2 long sides).
        pa = (along + PLUME_PERIOD / 2.0) * cells_a
        pb = (across + PLUME_PERIOD / 2.0) * cells_b
        ia = np.floor(pa)
        ib = np.floor(pb)
        wa = _catmull_rom(pa - ia)
        wb = _catmull_rom(pb - ib)
        ia = ia.astype(np.int64)
        ib = ib.astype(np.int64)
        value = np.zeros(xs.shape, dtype=np.float64)
        for j in range(4):
            row = (ib + (j - 1)) % gb
            acc = grid[row, (ia - 1) % ga] * wa[0]
            for i in (1, 2, 3):
                acc = acc + grid[row, (ia + (i - 1)) % ga] * wa[i]
            value = value + wb[j] * acc
        total = total + value * weight
        weight *= 0.55
    return total


def _work_points(h: int, w: int, f: int) -> tuple[np.ndarray, np.ndarray]:
    """Frame-px centres of the work grid's samples, (i + 0.5) f - 0.5 (the upsampling's geometry)."""
    ys = (np.arange(-(-h // f), dtype=np.float64) + 0.5) * f - 0.5
    xs = (np.arange(-(-w // f), dtype=np.float64) + 0.5) * f - 0.5
    x_grid, y_grid = np.broadcast_arrays(xs[None, :], ys[:, None])
    return x_grid, y_grid


def _quantise_unit(values: np.ndarray) -> np.ndarray:
    """float64 values in [0, 1] as uint16 levels ``floor(v 65535 + 0.5)``."""
    return np.floor(np.clip(values, 0.0, 1.0) * K.U16 + 0.5).astype(np.uint16)


# ----------------------------------------------------------------------------------------------------------
# smoke_haze and dust_haze: plumes
# ----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PlumeParams:
    """A plume of particles between the camera and the scene (docs/CORRUPTIONS.md): its visibility (m), where it
    lies (a layer of ``layer_height_m``; a local plume also of ``plume_size_m`` and ``plume_radius_m``), what it
    is (single-scattering ``albedo`` per channel, Angstrom exponent), how it is structured (density noise elongated
    by the wind, its largest eddies ``structure_m`` across) and what it does to the light on the ground (its shadow;
    a dust ``coat``)."""

    visibility_m: float
    layer_height_m: float
    albedo: tuple
    angstrom: float
    density_amplitude: float
    noise_octaves: int
    structure_m: float
    elongation: float
    scene_reflectance: float
    direct_fraction: float
    shadow_height_m: float
    sun_elevation_range_deg: tuple
    plume_size_m: float = 0.0  # 0: a regional layer, paths not capped
    plume_radius_m: float = 0.0  # 0: fills the view; else the local plume's across-wind std over the ground, m
    coat: float = 0.0  # share of the ground the settled particles cover at the plume's core
    coat_colour: tuple = (0.7, 0.7, 0.7)


@dataclass(frozen=True)
class SmokePlumeParams(PlumeParams):
    """smoke_haze (aegis-v2): a regional smoke layer."""


@dataclass(frozen=True)
class DustPlumeParams(PlumeParams):
    """dust_haze (aegis-v2): a local dust cloud that also coats the ground."""


@dataclass(frozen=True)
class PlumeDraw:
    wind_deg: float  # direction of the wind in the image, degrees from +x (y down)
    sun_elevation_deg: float
    sun_azimuth_deg: float  # toward the sun in the image, degrees from +x (y down)
    source: tuple  # a local plume's centre as shares (x, y) of the region's width and height
    cells: float  # across-wind cells of the coarsest structure per long side of the region
    grids: tuple  # uniform node grids, one per octave


def draw_plume(params: PlumeParams, scene: Scene, h: int, w: int, rng: KeyedRandom) -> PlumeDraw:
    """Wind direction (uniform; a plume's streaks have no sign), sun (the scene's or drawn), a local plume's
    centre (uniform over the middle 60 % of the region) and the density's node grids."""
    wind = float(180.0 * rng.child("wind").uniform(1)[0])
    elevation, azimuth = sun_direction(scene, rng, params.sun_elevation_range_deg)
    u = rng.child("source").uniform(2)
    source = (float(0.2 + 0.6 * u[0]), float(0.2 + 0.6 * u[1]))
    cells = structure_cells(params, scene, h, w)
    grids = tuple(
        rng.child(f"density|octave={o}").uniform(shape)
        for o, shape in enumerate(plume_grid_shapes(params.noise_octaves, cells, params.elongation))
    )
    return PlumeDraw(wind, elevation, azimuth, source, cells, grids)


MAX_FINEST_CELLS = 512  # the finest structure never has more cells per long side (a bound on the grids' size)


def structure_cells(params: PlumeParams, scene: Scene, h: int, w: int) -> float:
    """Across-wind cells of the coarsest structure per long side of the region: its ground span at the reference
    row's sampling distance over ``structure_m``; at most ``MAX_FINEST_CELLS / 2**(octaves - 1)``."""
    span = max(h, w) * float(scene.gsd_m)
    limit = MAX_FINEST_CELLS / 2.0 ** (int(params.noise_octaves) - 1)
    return min(limit, span / float(params.structure_m))


def beta_550(visibility_m: float) -> float:
    """Extinction coefficient (1/m) at 550 nm of a meteorological visibility (Koschmieder)."""
    return KOSCHMIEDER / float(visibility_m)


def _density_bounds(params: PlumeParams) -> tuple[float, float]:
    """(m at level 0, m at level 65535) of the density field: a regional layer spans 1 -+ a; a local plume
    0 .. 1 + a (its footprint times the same texture)."""
    a = float(params.density_amplitude)
    return (0.0, 1.0 + a) if params.plume_radius_m > 0 else (1.0 - a, 1.0 + a)


def plume_density(
    params: PlumeParams, draw: PlumeDraw, scene: Scene, h: int, w: int, shift: tuple[float, float] = (0.0, 0.0)
) -> tuple[np.ndarray, np.ndarray]:
    """(uint16 (h, w) density levels of the region, the work grid's levels) sampled ``shift`` px away (the shadow
    reads the plume toward the sun).

    The texture ``n`` is the wind-elongated noise over its octaves' weight sum, in [0, 1] (mean 1/2; a view much
    smaller than the largest eddies sees a small part of its range). Regional layer: ``m = 1 - a + 2 a n``.
    Local plume: an elliptical Gaussian footprint around the source (std ``plume_radius_m`` over the ground across
    the wind, ``elongation`` times that along it) times ``1 - a + 2 a n``, over ``1 + a``; the field's level 65535
    stands for ``m = 1 + a``."""
    f = plume_work_factor(h, w, params.noise_octaves, draw.cells)
    xs, ys = _work_points(h, w, f)
    long_side = max(h, w)
    xs = xs + shift[0]
    ys = ys + shift[1]
    noise = rotated_noise(
        xs, ys, long_side, draw.wind_deg, params.noise_octaves, draw.cells, params.elongation, draw.grids
    )
    n = np.clip(noise / _octave_weights(params.noise_octaves), 0.0, 1.0)
    a = float(params.density_amplitude)
    texture = (1.0 - a) + (2.0 * a) * n
    if params.plume_radius_m > 0:
        sin, cos = K.sin_cos_turns(draw.wind_deg / 360.0)
        dx = xs - draw.source[0] * w
        dy = ys - draw.source[1] * h
        s_b = float(params.plume_radius_m) / float(scene.gsd_m)
        s_a = s_b * float(params.elongation)
        da = (dx * cos + dy * sin) / s_a
        db = (dy * cos - dx * sin) / s_b
        unit = exp_neg(0.5 * (da * da + db * db)) * texture / (1.0 + a)
    else:
        unit = n
    q = _quantise_unit(unit)
    return K.upsample_u16(q, f, h, w), q


def _octave_weights(octaves: int) -> float:
    """The sum of the octaves' weights 0.55**o (fixed order)."""
    total, weight = 0.0, 1.0
    for _ in range(int(octaves)):
        total += weight
        weight *= 0.55
    return total


@lru_cache(maxsize=16)
def _density_table(m_lo: float, m_hi: float) -> np.ndarray:
    """float64 (65536,): the density m of each field level, ``m_lo + (m_hi - m_lo) (q / 65535)``."""
    q = np.arange(65536, dtype=np.float64)
    table = m_lo + (m_hi - m_lo) * (q / K.U16)
    table.setflags(write=False)
    return table


@lru_cache(maxsize=16)
def _coat_table(coat: float) -> np.ndarray:
    """int64 (65536,): the share of the ground coated at each density level, ``coat (q / 65535)``, in 2**-15."""
    q = np.arange(65536, dtype=np.float64)
    table = np.floor(coat * (q / K.U16) * ONE + 0.5).astype(np.int64)
    table.setflags(write=False)
    return table


def shadow_table(params: PlumeParams, elevation_deg: float, levels: np.ndarray) -> np.ndarray | None:
    """int64 (65536,) in 2**-15 units: the light a ground point under plume density m receives, relative to the
    frame's mean (the auto-exposure keeps the mean; ``levels``: the shadow field's work-grid levels):
    ``(f_d exp(-tau_s m) + 1 - f_d) / mean``, ``tau_s = beta H / sin(elevation)`` the sun's path through the
    layer, m at the middle level of each run of 16; capped at 4. None without direct light (no sun, or a sun below
    5 degrees)."""
    if params.direct_fraction <= 0.0 or elevation_deg < MIN_SUN_ELEVATION_DEG:
        return None
    sin_e, _ = K.sin_cos_turns(elevation_deg / 360.0)
    tau_s = beta_550(params.visibility_m) * float(params.layer_height_m) / sin_e
    m_lo, m_hi = _density_bounds(params)
    # The light at the middle level of each run of 16 levels (a shadow needs no finer steps), repeated.
    m = _density_table(m_lo, m_hi)[8::SHADOW_STEP]
    fd = float(params.direct_fraction)
    light = fd * exp_neg(tau_s * m) + (1.0 - fd)
    mean = math.fsum(light[levels.ravel() // SHADOW_STEP].tolist()) / levels.size
    return np.repeat(np.minimum(np.floor(light / mean * ONE + 0.5), 4 * ONE).astype(np.int64), SHADOW_STEP)


SHADOW_STEP = 16


def shadow_offset(params: PlumeParams, scene: Scene, elevation_deg: float, azimuth_deg: float) -> tuple[float, float]:
    """Where (px, toward the sun) the plume that shades a ground pixel lies: ``shadow_height_m / tan(elevation)``
    metres over the ground, in px at the reference row."""
    sin_e, cos_e = K.sin_cos_turns(elevation_deg / 360.0)
    reach = float(params.shadow_height_m) * cos_e / sin_e / float(scene.gsd_m)
    reach = min(reach, 2.0 * max(scene.width, scene.height))  # a grazing sun: the shadow comes from far away
    sin_a, cos_a = K.sin_cos_turns(azimuth_deg / 360.0)
    return reach * cos_a, reach * sin_a


def _count_sky(image: np.ndarray, sky_rows: np.ndarray, channel: int, band: bool) -> np.ndarray:
    """Histogram (256,) of one channel over the sky pixels (``band``: only the lowest quarter of each column's
    sky, the sky just above the horizon)."""
    h = image.shape[0]
    y = np.arange(h)[:, None]
    top = sky_rows - np.maximum(1, sky_rows // 4) if band else np.zeros_like(sky_rows)
    mask = (y < sky_rows[None, :]) & (y >= top[None, :])
    return np.bincount(image[..., channel][mask], minlength=256)


def sky_colour(image: np.ndarray, lines: Sightlines) -> tuple[float, float, float] | None:
    """Mean linear colour (LINEAR_MAX units) of the sky just above the horizon (the lowest quarter of each
    column's sky), from exact integer sums; None without a sky. Koschmieder's horizon sky is the airlight."""
    if lines.sky_rows is None:
        return None
    table = decode_table().astype(np.int64)
    out = []
    for c in range(3):
        counts = _count_sky(image, lines.sky_rows, c, band=True)
        n = int(counts.sum())
        if n == 0:
            return None
        out.append(float(int(counts @ table)) / n)
    return out[0], out[1], out[2]


def channel_histograms(image: np.ndarray) -> np.ndarray:
    """int64 (3, 256): how many pixels of a uint8 RGB image hold each level, per channel. OpenCV counts in integers
    and returns float32, exact below 2**24 per bin: strips of at most 2**22 pixels keep every count below that."""
    h, w = image.shape[:2]
    counts = np.zeros((3, 256), dtype=np.int64)
    for rows in K.row_strips(h, w, 1 << 22):
        strip = np.ascontiguousarray(image[rows])
        for c in range(3):
            counts[c] += cv2.calcHist([strip], [c], None, [256], [0, 256]).ravel().astype(np.int64)
    return counts


def mean_linear(image: np.ndarray) -> tuple[float, float, float]:
    """Mean linear colour (LINEAR_MAX units) of a uint8 sRGB image, from exact integer sums."""
    sums = channel_histograms(image) @ decode_table().astype(np.int64)
    n = image.shape[0] * image.shape[1]
    return tuple(float(int(v)) / n for v in sums)


def white_level(mean: tuple, reflectance: float) -> tuple[float, float, float]:
    """The light level of a view without sky, as the linear value a white surface would read: the region's mean
    luminance (from its mean linear colour ``mean``) over the mean reflectance the camera exposed for (grey
    world), at most LINEAR_MAX, neutral."""
    lum = math.fsum(wt * v for wt, v in zip(LUMA_LINEAR, mean))
    level = min(float(LINEAR_MAX), lum / float(reflectance))
    return level, level, level


def plume_airlight(params: PlumeParams, image: np.ndarray, lines: Sightlines) -> np.ndarray:
    """int64 (3,) linear airlight: albedo times the horizon sky's colour (sky visible) or the scene's white level."""
    light = sky_colour(image, lines) or white_level(mean_linear(image), params.scene_reflectance)
    return np.array(
        [min(LINEAR_MAX, math.floor(float(a) * float(e) + 0.5)) for a, e in zip(params.albedo, light)], dtype=np.int64
    )


def plume_haze(image: np.ndarray, params: PlumeParams, draw: PlumeDraw, scene: Scene) -> np.ndarray:
    """smoke_haze / dust_haze (aegis-v2) of the valid region ``image`` (uint8 RGB)."""
    h, w = image.shape[:2]
    lines = sightlines(scene, h, w)
    density, _ = plume_density(params, draw, scene, h, w)
    shadow, stab = None, None
    if params.direct_fraction > 0.0 and draw.sun_elevation_deg >= MIN_SUN_ELEVATION_DEG:
        shadow, levels = plume_density(
            params, draw, scene, h, w, shadow_offset(params, scene, draw.sun_elevation_deg, draw.sun_azimuth_deg)
        )
        stab = shadow_table(params, draw.sun_elevation_deg, levels)
    coat_tab = None
    coat_rgb = np.zeros(3, dtype=np.int64)
    if params.coat > 0:
        coat_tab = _coat_table(float(params.coat))
        coat_rgb = np.array([math.floor(v + 0.5) for v in linear_colour(params.coat_colour)], dtype=np.int64)
    beta = beta_550(params.visibility_m)
    cap = beta * float(params.plume_size_m) if params.plume_size_m > 0 else NO_CAP
    air = plume_airlight(params, image, lines)
    m_lo, m_hi = _density_bounds(params)
    return haze_render(
        image,
        lines,
        beta,
        float(params.layer_height_m),
        cap,
        channel_factors(params.angstrom),
        air,
        density,
        _density_table(m_lo, m_hi),
        shadow,
        stab,
        coat_tab,
        coat_rgb,
    )


# ----------------------------------------------------------------------------------------------------------
# The haze pass (compiled loop or NumPy reference)
# ----------------------------------------------------------------------------------------------------------
def haze_render(
    image: np.ndarray,
    lines: Sightlines,
    beta: float,
    layer_m: float,
    cap: float,
    kch,
    air,
    density=None,
    mtab=None,
    shadow=None,
    stab=None,
    coat_tab=None,
    coat_rgb=None,
    linear_out: bool = False,
) -> np.ndarray:
    """The haze of every pixel of the region (uint8 sRGB in; uint8 sRGB out, or uint16 linear with ``linear_out``).

    Per pixel, float64 in this order: ``rho = sqrt(1 + (cu + cv))``; ``d = rho * (beta z | beta H sky)``;
    ``d = min(d, cap)``; ``tau = d * m[q]``; per channel ``k = floor(min(tau * k_c, TAU_MAX) * TAU_STEPS + 0.5)``,
    ``t = T[k]``. Then integers: ``v = decode(I)``; shadow ``v = min((v S + 2**14) >> 15, LINEAR_MAX)``; coat (not
    on the sky) ``v = (v (2**15 - c) + C c + 2**14) >> 15``; ``(t v + (2**15 - t) A + 2**14) >> 15``; encode."""
    h, w = image.shape[:2]
    rows = np.ascontiguousarray(np.stack([lines.cv, beta * lines.ground, (beta * layer_m) * lines.sky]))
    kch = np.ascontiguousarray(kch, dtype=np.float64)
    air = np.ascontiguousarray(air, dtype=np.int64)
    coat_rgb = np.ascontiguousarray(coat_rgb if coat_rgb is not None else np.zeros(3), dtype=np.int64)
    tables = None
    if stab is not None or coat_tab is not None:
        tables = np.stack(
            [
                stab if stab is not None else np.full(65536, ONE, np.int64),
                coat_tab if coat_tab is not None else np.zeros(65536, np.int64),
            ]
        ).astype(np.int64)
    ttab = transmission_table()
    c = K.CKERNELS
    if c is not None and hasattr(c, "atmos_haze") and h > 0 and w > 0:
        out = np.empty((h, w, 3), dtype=np.uint16 if linear_out else np.uint8)
        c.atmos_haze(
            out,
            int(linear_out),
            np.ascontiguousarray(image),
            h,
            w,
            decode_table(),
            encode_table(),
            rows,
            np.ascontiguousarray(lines.cu),
            lines.sky_rows,
            density,
            mtab,
            float(cap),
            *(float(k) for k in kch),
            float(TAU_STEPS),
            float(TAU_MAX),
            ttab.size - 1,
            ttab,
            shadow,
            None if tables is None else np.ascontiguousarray(tables),
            int(shadow is not None),
            int(coat_tab is not None),
            *(int(v) for v in coat_rgb),
            *(int(v) for v in air),
        )
        return out
    return _haze_numpy(
        image,
        rows,
        lines.cu,
        lines.sky_rows,
        cap,
        kch,
        ttab,
        air,
        density,
        mtab,
        shadow,
        stab,
        coat_tab,
        coat_rgb,
        linear_out,
    )


def _haze_numpy(
    image, rows, cu, sky_rows, cap, kch, ttab, air, density, mtab, shadow, stab, coat_tab, coat_rgb, linear_out
):
    h, w = image.shape[:2]
    out = np.empty((h, w, 3), dtype=np.uint16 if linear_out else np.uint8)
    dec = decode_table().astype(np.int64)
    enc = encode_table()
    cv, ground, sky = rows
    for strip in K.row_strips(h, w, 1 << 15):
        y = np.arange(strip.start, strip.stop)
        rho = np.sqrt(1.0 + (cu[None, :] + cv[strip, None]))
        base = np.broadcast_to(ground[strip, None], rho.shape)
        is_sky = None
        if sky_rows is not None:
            is_sky = y[:, None] < sky_rows[None, :]
            base = np.where(is_sky, sky[strip, None], base)
        d = rho * base
        d = np.minimum(d, cap)
        tau = d * mtab[density[strip]] if density is not None else d
        v = dec[image[strip]]  # (n, w, 3) int64
        if shadow is not None:
            s = stab[shadow[strip]][..., None]
            v = np.minimum((v * s + (1 << 14)) >> 15, LINEAR_MAX)
        if coat_tab is not None:
            cf = coat_tab[density[strip]]
            if is_sky is not None:
                cf = np.where(is_sky, 0, cf)
            cf = cf[..., None]
            v = (v * (ONE - cf) + coat_rgb[None, None, :] * cf + (1 << 14)) >> 15
        res = np.empty(v.shape, dtype=np.int64)
        for ch in range(3):
            tc = np.minimum(tau * kch[ch], TAU_MAX)
            t = ttab[np.floor(tc * float(TAU_STEPS) + 0.5).astype(np.int64)].astype(np.int64)
            res[..., ch] = (t * v[..., ch] + (ONE - t) * air[ch] + (1 << 14)) >> 15
        out[strip] = res if linear_out else enc[res]
    return out


# ----------------------------------------------------------------------------------------------------------
# fire_warm_tint: firelight under a smoke canopy
# ----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FirelightParams(CAM.CameraFacts):
    """fire_warm_tint (aegis-v2): the smoke canopy's optical depth at 550 nm and its particles (Angstrom exponent,
    albedo, asymmetry), the camera's white-balance correction, a local fire's glow, and the low-light camera's
    limits plus the suite camera's sensor facts."""

    canopy_aod: float
    fire_glow: float
    angstrom: float
    canopy_albedo: float
    asymmetry: float
    white_balance_correction: float
    flame_colour: tuple
    glow_reach: float
    sun_elevation_range_deg: tuple


@dataclass(frozen=True)
class FirelightDraw:
    sun_elevation_deg: float
    fire: tuple  # the fire's position as shares (x, y) of the region (may lie outside it: -0.25 .. 1.25)
    heading_deg: float  # direction of the longer exposure's smear
    noise: np.ndarray  # (h, w) uint16 indices into seeding.normal_table(): one normal deviate per Bayer site


@dataclass(frozen=True)
class CanopyLight:
    """What the canopy does to the light: per-channel transmission of the global light, the luminance share left,
    the exposure loss (EV), the camera's white-balance gains and the recorded colour gains (G kept)."""

    transmission: tuple
    luminance: float
    ev_loss: float
    wb_gains: tuple
    cast: tuple


def canopy_light(params: FirelightParams, elevation_deg: float) -> CanopyLight:
    """The global (direct + diffuse) light under the canopy, two-stream style: ``T_c = exp(-k tau_c / mu)`` with
    ``tau_c = AOD (lambda_c / 550)**-alpha``, ``k = 1 - omega (1 + g) / 2`` (the share of extinction that is
    absorbed or scattered back up), ``mu`` the sine of the sun's elevation (at least 5 degrees). The camera's
    white balance divides the colour by ``(T_c / T_G)**kappa`` (partial correction); the auto-exposure wins back
    ``ev_loss = -log2(T_Y)``, T_Y the luminance of ``T``. The recorded gains ``T_c (T_G / T_c)**kappa / T_Y``."""
    e = max(float(elevation_deg), MIN_SUN_ELEVATION_DEG)
    mu, _ = K.sin_cos_turns(e / 360.0)
    k = 1.0 - float(params.canopy_albedo) * (1.0 + float(params.asymmetry)) / 2.0
    factors = channel_factors(params.angstrom)
    trans = tuple(exp_neg(k * float(params.canopy_aod) * fc / mu) for fc in factors)
    lum = math.fsum(wt * t for wt, t in zip(LUMA_LINEAR, trans))
    # Beyond 20 EV the frame is black whatever the camera does (and 2**EV stays far inside a float).
    ev = min(MAX_EV_LOSS, stable(-log_pos(lum) / _LN2, "canopy light loss")) if lum < 1.0 else 0.0
    kappa = float(params.white_balance_correction)
    # A camera's white balance stays within 8x either way per channel (the suite's raw gains are bounded the same).
    wb = tuple(
        min(MAX_WB_GAIN, max(1.0 / MAX_WB_GAIN, exp_signed(kappa * (log_pos(trans[1]) - log_pos(t))))) for t in trans
    )
    cast = tuple(t * g / lum for t, g in zip(trans, wb))
    return CanopyLight(trans, lum, ev, wb, cast)


def draw_firelight(params: FirelightParams, scene: Scene, h: int, w: int, rng: KeyedRandom) -> FirelightDraw:
    elevation, _ = sun_direction(scene, rng, params.sun_elevation_range_deg)  # the canopy's light ignores azimuth
    u = rng.child("fire").uniform(2)
    heading = float(180.0 * rng.child("heading").uniform(1)[0]) if scene.heading_deg is None else scene.heading_deg
    return FirelightDraw(
        elevation,
        (float(-0.25 + 1.5 * u[0]), float(-0.25 + 1.5 * u[1])),
        heading,
        rng.child("sensor_noise").normal_indices((h, w)),
    )


def glow_field(params: FirelightParams, draw: FirelightDraw, h: int, w: int) -> np.ndarray | None:
    """uint16 (h, w): a local fire's extra light relative to its peak, ``1 / (1 + d**2 / R**2)`` (a point source's
    inverse square law, softened at R = ``glow_reach`` long sides); None without glow."""
    if params.fire_glow <= 0:
        return None
    f = max(1, max(h, w) // 128)
    xs, ys = _work_points(h, w, f)
    reach = float(params.glow_reach) * max(h, w)
    dx = (xs - draw.fire[0] * w) / reach
    dy = (ys - draw.fire[1] * h) / reach
    return K.upsample_u16(_quantise_unit(1.0 / (1.0 + (dx * dx + dy * dy))), f, h, w)


def cast_gains(params: FirelightParams, light: CanopyLight) -> tuple[np.ndarray, np.ndarray]:
    """int64 (3,) recorded colour gains in 2**-15 units, and (3,) the glow's per-channel boost at full field (the
    flame's linear colour, luminance 1, through the camera's white balance, times ``fire_glow``) in 2**-15."""
    gains = np.array([math.floor(g * ONE + 0.5) for g in light.cast], dtype=np.int64)
    flame = linear_colour(params.flame_colour)
    lum = math.fsum(wt * v for wt, v in zip(LUMA_LINEAR, flame))
    if not lum > 0.0:
        return gains, np.zeros(3, dtype=np.int64)  # a black flame adds no light
    boost = np.array(
        [math.floor(float(params.fire_glow) * (v / lum) * g * ONE + 0.5) for v, g in zip(flame, light.wb_gains)],
        dtype=np.int64,
    )
    if gains.max() > 1 << 20 or boost.max() > 1 << 30:  # beyond the integer blend's bounds (int64, the C loop's)
        raise AegisError(
            f"firelight's colour gains {light.cast} or glow {params.fire_glow:g} in "
            f"{tuple(params.flame_colour)} exceed what the camera records; lower them"
        )
    return gains, boost


def cast_linear(image: np.ndarray, gains: np.ndarray, glow: np.ndarray | None, boost: np.ndarray) -> np.ndarray:
    """uint16 linear (h, w, 3): ``v = min((decode(I) g_c + 2**14) >> 15, LINEAR_MAX)``, then with a glow level q
    ``v = min((v (2**15 + ((q b_c + 2**15) >> 16)) + 2**14) >> 15, LINEAR_MAX)`` (integers)."""
    h, w = image.shape[:2]
    c = K.CKERNELS
    if c is not None and hasattr(c, "atmos_cast") and h > 0 and w > 0:
        out = np.empty((h, w, 3), dtype=np.uint16)
        c.atmos_cast(
            out,
            np.ascontiguousarray(image),
            h * w,
            decode_table(),
            *(int(g) for g in gains),
            glow,
            *(int(b) for b in boost),
        )
        return out
    out = np.empty((h, w, 3), dtype=np.uint16)
    dec = decode_table().astype(np.int64)
    for strip in K.row_strips(h, w, 1 << 15):
        v = np.minimum((dec[image[strip]] * gains + (1 << 14)) >> 15, LINEAR_MAX)
        if glow is not None:
            extra = (glow[strip].astype(np.int64)[..., None] * boost + (1 << 15)) >> 16
            v = np.minimum((v * (ONE + extra) + (1 << 14)) >> 15, LINEAR_MAX)
        out[strip] = v
    return out


def firelight_camera(params: FirelightParams, light: CanopyLight) -> CameraLowLightParams:
    """The low-light camera model's parameters for this light: the canopy's loss as the exposure loss, and the
    camera's daylight raw white balance times its firelight correction (the raw channels it amplifies more)."""
    wb = tuple(stable(a * b, "white balance") for a, b in zip(params.white_balance, light.wb_gains))
    return CameraLowLightParams(ev_loss=light.ev_loss, **{**params.camera_facts(), "white_balance": wb})


def firelight(image: np.ndarray, params: FirelightParams, draw: FirelightDraw, scene: Scene) -> np.ndarray:
    """fire_warm_tint (aegis-v2) of the valid region: the canopy's reddened light with the camera's partial white
    balance and a local fire's glow in linear light, then the low-light camera (auto-exposure for the canopy's light
    loss, the smear of its longer exposure, raw noise, demosaic, tone curve, chroma path)."""
    h, w = image.shape[:2]
    light = canopy_light(params, draw.sun_elevation_deg)
    gains, boost = cast_gains(params, light)
    # The cast light goes straight into the camera (no local name): record_linear drops it once smeared, so
    # a 12 MP frame holds one linear buffer less at its peak (72 MB).
    return CAM.record_linear(
        cast_linear(image, gains, glow_field(params, draw, h, w), boost),
        firelight_camera(params, light),
        scene,
        CAM.CameraLowLightDraw(draw.heading_deg, draw.noise),
    )


# ----------------------------------------------------------------------------------------------------------
# Render cost (aegis_data.engine.budget) and the physical ladder (`aegis list`)
# ----------------------------------------------------------------------------------------------------------
def plume_cost(params: PlumeParams, scene: Scene, h: int, w: int) -> B.RenderCost:
    """A plume render: the periodic node grids and their draw, the work grid's cubic reads (16 per octave and
    point, two fields), two uint16 fields upsampled to the region, the NumPy strips (about 40 float64 or int64
    values per pixel of a 2**15-pixel strip) and the output."""
    cells = structure_cells(params, scene, h, w)
    shapes = plume_grid_shapes(params.noise_octaves, cells, params.elongation)
    nodes = float(sum(a * b for a, b in shapes))
    f = plume_work_factor(h, w, params.noise_octaves, cells)
    points = float(-(-h // f) * -(-w // f))
    work = 2.0 * (16.0 * len(shapes) * points + h * w) + nodes
    peak = 32.0 * nodes + 2.0 * 16.0 * 8.0 * points + 2.0 * 2.0 * h * w + 40.0 * 8.0 * (1 << 15) * 3
    return B.RenderCost((), 0.0, work, peak)


def firelight_cost(params: FirelightParams, scene: Scene, h: int, w: int) -> B.RenderCost:
    """A firelight render: the glow field, the linear cast image, and the low-light camera's smear path (at the
    nearest row, for the exposure the auto-exposure chooses) and pipeline."""
    light = canopy_light(params, max(float(params.sun_elevation_range_deg[0]), MIN_SUN_ELEVATION_DEG))
    cam = firelight_camera(params, light)
    capture = CAM.capture_for(cam, scene)
    smear_m = Exposure(scene.speed_mps, capture.exposure_ms, scene.speed_mps, scene.exposure_ms).added_smear_m()
    nearest = float(scene.gsd_rows(np.array([scene.valid[3] - 1.0]))[0])
    return (
        B.path_blur_cost(h, w, smear_m / nearest)
        + B.camera_pipeline_cost(h, w)
        + B.RenderCost((), 0.0, float(h * w), float(8 * h * w))
    )


def plume_ladder_row(params: PlumeParams, focal_px: float | None, gsd_m: float | None) -> dict:
    """One severity of smoke or dust in physical terms: visibility, extinction, and (with a person unit) the share
    of contrast a nadir view at the default camera's altitude keeps at mean density."""
    beta = beta_550(params.visibility_m)
    row = {"visibility_m": params.visibility_m, "extinction_per_km": round(beta * 1000.0, 4)}
    if focal_px is not None and gsd_m is not None:
        altitude = gsd_m * focal_px
        row["nadir_altitude_m"] = round(altitude, 2)
        row["nadir_transmission"] = round(exp_neg(beta * altitude), 4)
    return row


def firelight_ladder_row(params: FirelightParams, base_exposure_ms: float, base_iso: float) -> dict:
    """One severity of firelight in physical terms, the sun at the middle of its range: the canopy's optical
    depth, the light it leaves (EV), what the auto-exposure chooses, and the recorded red/blue cast."""
    lo, hi = params.sun_elevation_range_deg
    light = canopy_light(params, (float(lo) + float(hi)) / 2.0)
    cam = firelight_camera(params, light)
    cap = CAM.auto_exposure(cam.ev_loss, base_exposure_ms, base_iso, cam.shutter_limit_ms, cam.iso_cap)
    # The light loss is a stable 10-digit scalar, left unrounded as the exposure is: rounded to 3 decimals here and
    # to 3 digits by `aegis list`, 1.5453 EV read 1.54.
    return {
        "canopy_aod": params.canopy_aod,
        "light_loss_ev": light.ev_loss,
        "exposure_ms": cap.exposure_ms,
        "iso": round(cap.iso, 1),
        "brightness": round(cap.brightness, 4),
        "red_blue_cast": round(light.cast[0] / light.cast[2], 3),
        "fire_glow": params.fire_glow,
    }
