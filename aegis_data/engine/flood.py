"""Floods and turbid water (generation 2: inundation and turbidity_cast of aegis-v2; docs/CORRUPTIONS.md,
"inundation (aegis-v2): the water rises", "turbidity_cast (aegis-v2): the colour of the water").

**inundation.** No terrain model comes with a frame, so the ground's height is a proxy: the water's edge is at
height 0 and the ground rises with distance from it, by ``bank_slope`` per metre over smooth ground and faster over
rough ground (``1 + texture / roughness_dn`` times, texture the block's mean absolute luma difference): roads,
lawns and fields flood first, tree crowns, buildings and rubble last. Distances are metres on the ground (the
scene's ground sampling distance per row), accumulated over 8-connected blocks with an exact integer chamfer
transform from the *seeds*: the scene's water, or, on a frame with none, the smoothest ground (the largest
connected region of blocks whose texture is at or below the ``seed_quantile`` order statistic of the frame's block
textures: the widest flat open ground, where the water spreads first). The water rises by ``rise_m``: a pixel is
flooded to the depth ``rise - height``. Sky never floods, and the scene's existing water becomes flood water
(deep).

Seen from above, flood water (per channel c, linear light):

    out = (1 - R) (T I + (1 - T) W) + R S,     T = exp(-2 K depth),  K = 1.7 / secchi_depth   (Poole & Atkins 1929)

T is the two-way transmission of the turbid water over the ground it covers (so the shoreline is soft: the ground
shows through the first centimetres); W the light of optically deep turbid water, ``rho_w(S_sed) x white``
(``water.turbid_reflectance``: Nechad et al. 2010's saturating form; ``white`` the frame's white, estimated as its
median linear luma over an 18 % grey world); R the Fresnel reflectance at the view angle of the row (``water.fresnel``;
2 % from above, most of the light at grazing angles in an oblique view) and S the sky: the mean of the scene's sky
pixels, or ``sky`` x white when the frame shows none. Above the waterline a band of ``wet_band_m`` of height is wet
soil, darkened toward ``wet_darkening`` at the water (Twomey, Bohren & Mergenthaler 1986).

**People in the water.** The scene's persons (the image's ground-truth boxes) stand on the ground at the bottom
centre of their box. Where the water there is d deep, the person is submerged to ``d / 1.7 m`` of their height:
inside an ellipse inscribed in the box (the body), a row z metres above the feet is under ``d - z`` of water, so
the waterline across the body is soft (``T`` of that depth); outside the ellipse the box is ground. The box is kept
(the ground-truth contract, docs/SCORING.md "Submerged persons"), and ``submerged_fractions`` gives each box's
``submerged_fraction``, which the build records and the scorer stratifies by.

**turbidity_cast.** The colour of the water only: on the scene's water, sediment (``sediment_g_m3``) hides the
clear water's own light by ``t = exp(-S / clear_g_m3)`` and replaces it with that of turbid water, keeping the
surface's modulation (waves, glints: the pixel's luma over the water's median luma) and the Fresnel reflection of
the sky: ``out = t I + (1 - t) ((1 - R) W m + R S)``; nothing changes off water.

Exactness: integer block statistics, an integer chamfer transform and histograms; per pixel float64 + - * / in a
fixed order, tables of exact values (``water.exp_neg``), the exact sRGB tables; the compiled loop (``_ckernels``
``flood``) does the same operations in the same order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from aegis_data.engine import budget as B
from aegis_data.engine import kernels as K
from aegis_data.engine.budget import RenderCost
from aegis_data.engine.glint import view_rays
from aegis_data.engine.photometry import LINEAR_MAX, decode_table, encode_table, to_linear
from aegis_data.engine.scale import PERSON_HEIGHT_CM
from aegis_data.engine.scene import Scene
from aegis_data.engine.seeding import KeyedRandom
from aegis_data.engine.water import _block_stats, exp_neg, fresnel, turbid_reflectance, water_block_size

PERSON_HEIGHT_MM = int(PERSON_HEIGHT_CM * 10)
DEEP_MM = 5000  # the scene's existing water: this deep below the old waterline
HEIGHT_CAP_MM = 60000  # heights are carried as uint16 mm; the ground never rises further (no flood reaches it)
UNREACHED = 1 << 40  # chamfer distance of blocks no seed reaches (sky)
CHAMFER_PASSES = 64  # forward + backward sweeps at most; they stop as soon as one changes nothing
DIAGONAL_NUM, DIAGONAL_DEN = 181, 128  # sqrt(2) ~ 181 / 128 (0.004 % low)
GREY_WORLD = 0.18  # the frame's median linear luma as a share of its white
WHITE_RANGE = (0.25, 1.0)  # the white estimate's bounds, as shares of LINEAR_MAX
# Linear luminance weights (Rec. 709 / sRGB primaries) in 1/32768: the frame's median luma for its white.
LUMA_Q15 = (6966, 23436, 2366)


@dataclass(frozen=True)
class FloodParams:
    """inundation of a generation-2 suite."""

    rise_m: float
    bank_slope: float
    roughness_dn: float
    seed_quantile: float
    sediment_g_m3: float
    reflectance_saturation: tuple
    reflectance_half_g_m3: tuple
    secchi_depth_m: float
    wet_band_m: float
    wet_darkening: float
    micro_relief_m: float
    micro_relief_cell_m: float
    refractive_index: float
    sky: tuple


@dataclass(frozen=True)
class TurbidWaterParams:
    """turbidity_cast of a generation-2 suite."""

    sediment_g_m3: float
    clear_g_m3: float
    reflectance_saturation: tuple
    reflectance_half_g_m3: tuple
    refractive_index: float
    sky: tuple


@dataclass(frozen=True)
class FloodDraw:
    relief: tuple  # value-noise node grids of the micro-relief, one float64 array per octave


@dataclass(frozen=True)
class TurbidDraw:
    """turbidity_cast draws nothing."""


RELIEF_OCTAVES = 2


def _relief_spec(params: FloodParams, scene: Scene, height: int, width: int) -> K.NoiseSpec:
    """The micro-relief's value noise: cells of ``micro_relief_cell_m`` on the ground at the scene's reference
    sampling distance, at most ``config_schema.MAX_NOISE_CELLS / 2`` on the long side (the finer octave doubles)."""
    long_m = max(height, width) * scene.gsd_m
    cells = min(1024.0, max(1.0, long_m / float(params.micro_relief_cell_m)))
    return K.NoiseSpec(RELIEF_OCTAVES, float(cells))


def draw_flood(params: FloodParams, scene: Scene, height: int, width: int, rng: KeyedRandom) -> FloodDraw:
    spec = _relief_spec(params, scene, height, width)
    return FloodDraw(
        tuple(
            rng.child(f"relief|octave={o}").uniform(shape)
            for o, shape in enumerate(K.noise_grid_shapes(height, width, spec))
        )
    )


def draw_turbid(params: TurbidWaterParams, scene: Scene, height: int, width: int, rng: KeyedRandom) -> TurbidDraw:
    return TurbidDraw()


# ----------------------------------------------------------------------------------------------------------
# The ground's height
# ----------------------------------------------------------------------------------------------------------
def chamfer(cost: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """Integer geodesic distance (int64) over an 8-connected grid from the ``seeds`` (bool): entering a block
    across an edge costs the mean of the two blocks' costs (floored), across a corner that times 181/128
    (~sqrt 2); blocks of cost >= ``UNREACHED`` are never entered. Forward and backward raster sweeps (each row:
    the rows before it, then left to right, then right to left), repeated until a sweep pair changes nothing (at
    most ``CHAMFER_PASSES``): exact integers. The compiled loop (``_ckernels.chamfer``) makes the same sweeps."""
    h, w = cost.shape
    big = np.int64(UNREACHED)
    c = np.ascontiguousarray(np.minimum(cost.astype(np.int64), big))
    d = np.ascontiguousarray(np.where(seeds & (c < big), 0, big).astype(np.int64))
    if K.CKERNELS is not None and hasattr(K.CKERNELS, "chamfer"):
        K.CKERNELS.chamfer(d, c, h, w, CHAMFER_PASSES, int(big), DIAGONAL_NUM, DIAGONAL_DEN)
        return d
    return _chamfer_numpy(d, c)


def _chamfer_numpy(d: np.ndarray, c: np.ndarray) -> np.ndarray:
    h, w = c.shape
    big = np.int64(UNREACHED)
    blocked = c >= big
    # Step costs: horizontal (x to x + 1), vertical (y to y + 1), main diagonal ((y, x) to (y + 1, x + 1)) and
    # anti-diagonal ((y, x + 1) to (y + 1, x)).
    step_h = (c[:, 1:] + c[:, :-1]) // 2
    step_v = (c[1:] + c[:-1]) // 2
    step_main = ((c[1:, 1:] + c[:-1, :-1]) // 2) * DIAGONAL_NUM // DIAGONAL_DEN
    step_anti = ((c[1:, :-1] + c[:-1, 1:]) // 2) * DIAGONAL_NUM // DIAGONAL_DEN

    def scan(row: np.ndarray, steps: np.ndarray) -> np.ndarray:
        # Left to right: d[x] = min(d[x], d[x - 1] + steps[x - 1]) in sequence is min over k <= x of
        # d[k] + (P[x] - P[k]), P the prefix sums of the steps: a running minimum (exact integers).
        prefix = np.concatenate([[0], np.cumsum(steps)])
        return np.minimum(row, np.minimum.accumulate(row - prefix) + prefix)

    for _ in range(CHAMFER_PASSES):
        before = d.copy()
        for forward in (True, False):
            for y in range(h) if forward else range(h - 1, -1, -1):
                row = d[y].copy()
                prev = y - 1 if forward else y + 1
                if 0 <= prev < h:
                    p = d[prev]
                    edge = y - 1 if forward else y  # the step arrays' row between y and prev
                    row = np.minimum(row, p + step_v[edge])
                    if w > 1:
                        if forward:  # from up-left (main diagonal) and up-right (anti-diagonal)
                            row[1:] = np.minimum(row[1:], p[:-1] + step_main[edge])
                            row[:-1] = np.minimum(row[:-1], p[1:] + step_anti[edge])
                        else:  # from down-right (main diagonal) and down-left (anti-diagonal)
                            row[:-1] = np.minimum(row[:-1], p[1:] + step_main[edge])
                            row[1:] = np.minimum(row[1:], p[:-1] + step_anti[edge])
                if w > 1:
                    row = scan(row, step_h[y])
                    row = scan(row[::-1], step_h[y][::-1])[::-1]
                d[y] = np.where(blocked[y], big, np.minimum(row, big))
        if np.array_equal(d, before):
            break
    return d


def terrain(region: np.ndarray, params: FloodParams, scene: Scene) -> np.ndarray:
    """uint16 (h, w): the height proxy (mm, before the micro-relief and the water override) of the scene's valid
    region ``region`` (uint8 RGB): block textures (:func:`scene_block_textures`) give each block's slope, the seeds
    its zero, :func:`chamfer` the heights (mm; ``UNREACHED``, capped at ``HEIGHT_CAP_MM``, where no seed reaches),
    bilinear upsampling (exact fixed point, ``kernels.upsample_u16``) the per-pixel ground. Derived once per scene
    and set of slope parameters (read-only; kept in ``scene.derived``): the render of every severity and the
    ground-truth facts share it."""
    h, w = region.shape[:2]
    key = ("terrain", h, w, float(params.bank_slope), float(params.roughness_dn), float(params.seed_quantile))
    kept = scene.derived.get(key)
    if kept is not None:
        return kept
    b = water_block_size(h, w)
    tex, n = scene_block_textures(scene, region, b)
    nby, nbx = tex.shape
    rows, cols = scene.valid_slices
    water = np.ascontiguousarray(scene.water_mask()[rows, cols])
    sky = np.ascontiguousarray(scene.sky_mask()[rows, cols])
    # Pixels per block of each mask (edges mirrored to whole blocks, kernels.block_sum): a block is water when at
    # least half of it is, sky when more than half is.
    water_blocks = K.block_sum(water, b)[:nby, :nbx] * 2 >= n
    sky_blocks = K.block_sum(sky, b)[:nby, :nbx] * 2 > n
    tex_dn = tex.astype(np.float64) / float(2 * n * 1000)
    centre_rows = np.minimum(np.arange(nby) * b + b // 2, h - 1) + scene.valid[1]
    gsd = scene.gsd_rows(centre_rows)[:, None]
    slope = float(params.bank_slope) * (1.0 + tex_dn / float(params.roughness_dn))
    with np.errstate(over="ignore", invalid="ignore"):
        cost_mm = np.floor(slope * (float(b) * gsd) * 1000.0 + 0.5)
    cost = np.where(np.isfinite(cost_mm) & ~sky_blocks, np.minimum(cost_mm, float(UNREACHED)), float(UNREACHED))
    cost = cost.astype(np.int64)
    seeds = water_blocks & ~sky_blocks
    if not seeds.any():
        seeds = _smooth_seeds(tex, sky_blocks, float(params.seed_quantile))
    small = np.minimum(chamfer(cost, seeds), HEIGHT_CAP_MM).astype(np.uint16)
    ground = K.upsample_u16(np.ascontiguousarray(small), b, h, w)
    ground.setflags(write=False)
    scene.derived[key] = ground
    return ground


def scene_block_textures(scene: Scene, region: np.ndarray, b: int) -> tuple[np.ndarray, int]:
    """(texture sums per block, pixels per block) of the valid region: the scene's own, computed with its water
    estimate from the same clean pixels, else computed here (``water._block_stats``)."""
    cached = scene.block_texture
    if cached is not None and cached[0] == b:
        return cached[1], b * b
    tex, _, _, n = _block_stats(region, b)
    return tex, n


def _smooth_seeds(tex: np.ndarray, sky_blocks: np.ndarray, quantile: float) -> np.ndarray:
    """The low, smooth ground a flood starts from in a frame without water: of the blocks whose texture is at or
    below the ``quantile`` order statistic of the non-sky blocks' textures, the largest 8-connected region (the
    widest flat open ground: a field, a lawn, a road; the first in row order among equals)."""
    ground = tex[~sky_blocks]
    if ground.size == 0:
        return np.zeros(tex.shape, dtype=bool)
    ordered = np.sort(ground)
    k = min(ordered.size - 1, max(0, int(math.ceil(quantile * ordered.size)) - 1))
    smooth = (tex <= ordered[k]) & ~sky_blocks
    count, labels = cv2.connectedComponents(smooth.astype(np.uint8), connectivity=8, ltype=cv2.CV_32S)
    if count <= 1:
        return smooth
    sizes = np.bincount(labels.ravel(), minlength=count)
    sizes[0] = 0
    return labels == int(np.argmax(sizes))


# ----------------------------------------------------------------------------------------------------------
# Light of the water
# ----------------------------------------------------------------------------------------------------------
def frame_white(region: np.ndarray, sky: np.ndarray) -> float:
    """The frame's white in linear units: the median linear luma (Rec. 709 weights in 1/32768, integers) of every
    second pixel of every second row outside the sky (an order statistic of the integer histogram), over an 18 %
    grey world, within ``WHITE_RANGE`` of ``LINEAR_MAX``."""
    sub = np.ascontiguousarray(region[::2, ::2])
    keep = ~sky[::2, ::2]
    luma = _water_luma(sub)
    values = luma[keep] if keep.any() else luma.ravel()
    if values.size == 0:
        return float(LINEAR_MAX)
    counts = np.bincount(values.ravel(), minlength=LINEAR_MAX + 1)
    median = int(np.searchsorted(np.cumsum(counts), (values.size + 1) // 2))
    lo, hi = WHITE_RANGE
    return min(hi * LINEAR_MAX, max(lo * LINEAR_MAX, median / GREY_WORLD))


def sky_light(region: np.ndarray, sky: np.ndarray, default: tuple, white: float) -> np.ndarray:
    """float64 (3,): the sky's linear light, the mean of the sky pixels (exact integer sums), or ``default`` x
    white when the frame shows no sky."""
    if sky.any():
        lin = to_linear(region[sky]).astype(np.int64)
        return lin.sum(axis=0).astype(np.float64) / float(lin.shape[0])
    return np.asarray(default, dtype=np.float64) * white


def row_reflectance(scene: Scene, height: int, width: int, n: float) -> np.ndarray:
    """float64 (height,): the Fresnel reflectance of a water surface seen along each row's central ray (0 where the
    ray does not reach the ground)."""
    ray_x, ray_y, ray_z = view_rays(scene, height, width)
    rx = ray_x[width // 2]
    vz = -ray_z / np.sqrt((rx * rx + ray_y * ray_y) + ray_z * ray_z)
    return np.where(vz > 0.0, fresnel(np.maximum(vz, 1e-12), n), 0.0)


def transmission_table(secchi_depth_m: float, max_mm: int) -> np.ndarray:
    """float64 (max_mm + 1,): the two-way transmission ``exp(-2 K d)`` of turbid water d mm deep, K = 1.7 /
    Secchi depth (Poole & Atkins 1929), exact values (``water.exp_neg``)."""
    k_per_mm = 2.0 * (1.7 / float(secchi_depth_m)) / 1000.0
    return exp_neg(np.arange(max_mm + 1, dtype=np.float64) * k_per_mm)


# ----------------------------------------------------------------------------------------------------------
# Persons
# ----------------------------------------------------------------------------------------------------------
def person_feet(scene: Scene, height: int, width: int) -> list[tuple[int, int] | None]:
    """Each person's feet in region pixels (the bottom-centre of the box, clamped into the region), or None for a
    box that lies wholly outside the valid region."""
    x0, y0, x1, y1 = scene.valid
    out: list[tuple[int, int] | None] = []
    for bx0, by0, bx1, by1 in scene.persons:
        if bx1 <= x0 or bx0 >= x1 or by1 <= y0 or by0 >= y1:
            out.append(None)
            continue
        fx = int(math.floor((bx0 + bx1) / 2.0)) - x0
        fy = int(math.ceil(by1)) - 1 - y0
        out.append((min(height - 1, max(0, fy)), min(width - 1, max(0, fx))))
    return out


def submerged_depths_mm(ground: np.ndarray, scene: Scene, rise_mm: int) -> list[int | None]:
    """Each person's water depth at the feet (mm; 0 when dry), None for a person outside the valid region. From the
    ground's height proxy alone (no micro-relief, no draw): a person standing in the scene's existing water counts
    as standing at its old edge."""
    h, w = ground.shape
    return [None if feet is None else max(0, rise_mm - int(ground[feet])) for feet in person_feet(scene, h, w)]


def submerged_fractions(image: np.ndarray, params: FloodParams, scene: Scene) -> list[float | None]:
    """The ground-truth contract's ``submerged_fraction`` of every person of the scene for inundation with
    ``params`` on the frame ``image`` (the full frame, as the engine receives it): the water's depth at the feet
    over a person's height (1.7 m), within [0, 1], rounded to 4 decimals; None for a person outside the valid
    region. A pure function of the clean pixels, the scene and the parameters (no random draw)."""
    if not scene.persons:  # nobody to submerge: no height proxy to derive
        return []
    region = np.ascontiguousarray(image[scene.valid_slices])
    ground = terrain(region, params, scene)
    depths = submerged_depths_mm(ground, scene, rise_to_mm(params.rise_m))
    return [None if d is None else round(min(1.0, d / PERSON_HEIGHT_MM), 4) for d in depths]


def rise_to_mm(rise_m: float) -> int:
    return int(math.floor(float(rise_m) * 1000.0 + 0.5))


def _body_depths(depth: np.ndarray, ground: np.ndarray, scene: Scene, rise_mm: int) -> None:
    """Overwrite ``depth`` (int32 mm, region) inside every person's body ellipse with the water's depth over that
    part of the body: the feet's depth less the height of the row above the feet (the box's height is 1.7 m)."""
    h, w = depth.shape
    x0, y0 = scene.valid[0], scene.valid[1]
    for (bx0, by0, bx1, by1), feet in zip(scene.persons, person_feet(scene, h, w)):
        if feet is None:
            continue
        foot_depth = rise_mm - int(ground[feet])
        r0, r1 = max(0, int(math.floor(by0)) - y0), min(h, int(math.ceil(by1)) - y0)
        c0, c1 = max(0, int(math.floor(bx0)) - x0), min(w, int(math.ceil(bx1)) - x0)
        if r0 >= r1 or c0 >= c1:
            continue
        ys = np.arange(r0, r1, dtype=np.float64)[:, None] + (y0 + 0.5)  # pixel centres, frame rows
        xs = np.arange(c0, c1, dtype=np.float64)[None, :] + (x0 + 0.5)
        cy, cx = (by0 + by1) / 2.0, (bx0 + bx1) / 2.0
        ay, ax = (by1 - by0) / 2.0, (bx1 - bx0) / 2.0
        inside = ((xs - cx) / ax) ** 2 + ((ys - cy) / ay) ** 2 <= 1.0
        above_mm = np.floor((by1 - ys) * (float(PERSON_HEIGHT_MM) / (by1 - by0))).astype(np.int64)
        body = np.broadcast_to(foot_depth - above_mm, inside.shape)
        block = depth[r0:r1, c0:c1]
        block[inside] = np.clip(body[inside], -(1 << 30), 1 << 30).astype(np.int32)


# ----------------------------------------------------------------------------------------------------------
# Compositing (linear light, float64 per pixel)
# ----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WaterLight:
    """What the per-pixel blend reads: deep water W and sky S (linear units, 3 each), the Fresnel reflectance per
    row, the transmission table by depth (mm), the wet band (mm) and darkening."""

    water: np.ndarray
    sky: np.ndarray
    reflectance: np.ndarray
    transmission: np.ndarray
    wet_mm: int
    wet_darkening: float


def blend_numpy(image: np.ndarray, depth: np.ndarray, light: WaterLight) -> np.ndarray:
    """The flood blend of ``image`` (uint8 RGB region) with per-pixel depths (int32 mm): flooded pixels (depth >
    0) ``(1 - R) (T I + (1 - T) W) + R S``, wet ones (``-wet < depth <= 0``) ``I (1 - (1 - dark)(1 + depth /
    wet))``, the rest unchanged; rounded half up, clipped, encoded. The NumPy reference of the compiled ``flood``
    loop (the same float64 operations in the same order)."""
    h, w = depth.shape
    out = image.copy()
    dec = decode_table().astype(np.float64)
    enc = encode_table()
    tmax = light.transmission.size - 1
    for rows in K.row_strips(h, w, 1 << 16):
        d = depth[rows]
        ys, xs = np.nonzero(d > -light.wet_mm)
        if ys.size == 0:
            continue
        dd = d[ys, xs].astype(np.int64)
        lin = dec[image[rows][ys, xs]]  # (n, 3)
        wet = dd > 0
        t = light.transmission[np.minimum(np.maximum(dd, 0), tmax)][:, None]
        r = light.reflectance[ys + rows.start][:, None]
        flooded = (1.0 - r) * (t * lin + (1.0 - t) * light.water[None, :]) + r * light.sky[None, :]
        frac = 1.0 + dd.astype(np.float64) / float(light.wet_mm) if light.wet_mm > 0 else np.zeros(dd.shape)
        damp = (1.0 - (1.0 - light.wet_darkening) * frac)[:, None]
        value = np.where(wet[:, None], flooded, lin * damp)
        q = np.minimum(np.maximum(np.floor(value + 0.5), 0.0), float(LINEAR_MAX)).astype(np.int64)
        strip = out[rows]
        strip[ys, xs] = enc[q]
    return out


def blend(image: np.ndarray, depth: np.ndarray, light: WaterLight) -> np.ndarray:
    """:func:`blend_numpy`, by the compiled loop when it is built."""
    c = K.CKERNELS
    if c is not None and hasattr(c, "flood"):
        h, w = depth.shape
        out = np.empty_like(image)
        c.flood(
            out,
            np.ascontiguousarray(image),
            np.ascontiguousarray(depth, dtype=np.int32),
            h,
            w,
            np.ascontiguousarray(light.water),
            np.ascontiguousarray(light.sky),
            np.ascontiguousarray(light.reflectance),
            np.ascontiguousarray(light.transmission),
            light.transmission.size,
            int(light.wet_mm),
            float(light.wet_darkening),
            decode_table(),
            encode_table(),
            float(LINEAR_MAX),
        )
        return out
    return blend_numpy(image, depth, light)


def water_light(
    region: np.ndarray,
    scene: Scene,
    sediment: float,
    saturation: tuple,
    half: tuple,
    n: float,
    sky_default: tuple,
    secchi_m: float | None,
    max_depth_mm: int,
    wet_mm: int = 0,
    wet_darkening: float = 1.0,
) -> WaterLight:
    h, w = region.shape[:2]
    sky = np.ascontiguousarray(scene.sky_mask()[scene.valid_slices])
    white = frame_white(region, sky)
    rho_w = np.asarray(turbid_reflectance(float(sediment), tuple(saturation), tuple(half)), dtype=np.float64)
    table = transmission_table(secchi_m, max_depth_mm) if secchi_m is not None else np.zeros(1)
    return WaterLight(
        rho_w * white,
        sky_light(region, sky, sky_default, white),
        row_reflectance(scene, h, w, n),
        table,
        int(wet_mm),
        float(wet_darkening),
    )


# ----------------------------------------------------------------------------------------------------------
# The models
# ----------------------------------------------------------------------------------------------------------
def inundation_v2(image: np.ndarray, params: FloodParams, draw: FloodDraw, scene: Scene) -> np.ndarray:
    """inundation (aegis-v2) of the valid region ``image``: the water rises ``rise_m`` over the height proxy, with
    its shoreline, wet band, turbid colour, sky reflection and the persons it reaches partly submerged."""
    h, w = image.shape[:2]
    ground = terrain(image, params, scene)
    rise_mm = rise_to_mm(params.rise_m)
    spec = _relief_spec(params, scene, h, w)
    amp = int(math.floor(float(params.micro_relief_m) * 1000.0 + 0.5))  # <= 1000 mm: products fit int32
    relief = K.value_noise(h, w, spec, draw.relief).astype(np.int32)
    relief *= 2 * amp
    relief += 32767
    relief //= 65535
    # depth = rise - (ground + relief - amp): uniform unevenness in [-amp, amp] mm, exact integers.
    depth = np.int32(rise_mm + amp) - relief
    depth -= ground
    rows, cols = scene.valid_slices
    np.putmask(depth, scene.water_mask()[rows, cols], np.int32(rise_mm + DEEP_MM))
    np.putmask(depth, scene.sky_mask()[rows, cols], np.int32(-(1 << 30)))
    _body_depths(depth, ground, scene, rise_mm)
    max_depth = rise_mm + DEEP_MM + amp
    light = water_light(
        image,
        scene,
        params.sediment_g_m3,
        params.reflectance_saturation,
        params.reflectance_half_g_m3,
        params.refractive_index,
        params.sky,
        params.secchi_depth_m,
        max_depth,
        int(math.floor(float(params.wet_band_m) * 1000.0 + 0.5)),
        params.wet_darkening,
    )
    return blend(image, depth, light)


def turbid_water(image: np.ndarray, params: TurbidWaterParams, draw: TurbidDraw, scene: Scene) -> np.ndarray:
    """turbidity_cast (aegis-v2) of the valid region ``image``: on the scene's water only, the clear water's light
    fades by ``t = exp(-S / clear_g_m3)`` into that of sediment-laden water (``sediment_g_m3``) modulated by the
    pixel's luma over the water's median luma (times the median's reciprocal, at most 2: waves and glints stay),
    plus the Fresnel reflection of the sky. Unchanged where there is no water."""
    rows, cols = scene.valid_slices
    water = np.ascontiguousarray(scene.water_mask()[rows, cols])
    if not water.any():
        return image.copy()
    light = water_light(
        image,
        scene,
        params.sediment_g_m3,
        params.reflectance_saturation,
        params.reflectance_half_g_m3,
        params.refractive_index,
        params.sky,
        None,
        1,
    )
    h, w = water.shape
    counts = np.zeros(LINEAR_MAX + 1, dtype=np.int64)
    c = K.CKERNELS
    q15 = np.asarray(LUMA_Q15, dtype=np.int64)
    if c is not None and hasattr(c, "luma_hist"):
        c.luma_hist(counts, np.ascontiguousarray(image), water.view(np.uint8), h * w, decode_table(), q15, LINEAR_MAX)
    else:
        for rows in K.row_strips(h, w, 1 << 16):  # strips: the temporaries stay small whatever the frame
            counts += np.bincount(_water_luma(image[rows][water[rows]]), minlength=LINEAR_MAX + 1)
    median = max(1, int(np.searchsorted(np.cumsum(counts), (int(counts.sum()) + 1) // 2)))
    inv_median = 1.0 / float(median)
    t = exp_neg(float(params.sediment_g_m3) / float(params.clear_g_m3))
    if c is not None and hasattr(c, "turbid"):
        out = np.empty_like(image)
        c.turbid(
            out,
            np.ascontiguousarray(image),
            water.view(np.uint8),
            h,
            w,
            np.ascontiguousarray(light.water),
            np.ascontiguousarray(light.sky),
            np.ascontiguousarray(light.reflectance),
            float(t),
            inv_median,
            decode_table(),
            encode_table(),
            float(LINEAR_MAX),
            q15,
        )
        return out
    out = image.copy()
    enc = encode_table()
    for rows in K.row_strips(h, w, 1 << 16):
        ys, xs = np.nonzero(water[rows])
        if ys.size == 0:
            continue
        pixels = image[rows][ys, xs]
        lin = to_linear(pixels).astype(np.float64)
        mod = np.minimum(_water_luma(pixels).astype(np.float64) * inv_median, 2.0)[:, None]
        r = light.reflectance[ys + rows.start][:, None]
        turbid = (1.0 - r) * (light.water[None, :] * mod) + r * light.sky[None, :]
        value = t * lin + (1.0 - t) * turbid
        q = np.minimum(np.floor(value + 0.5), float(LINEAR_MAX)).astype(np.int64)  # value >= 0
        strip = out[rows]
        strip[ys, xs] = enc[q]
    return out


def _water_luma(pixels: np.ndarray) -> np.ndarray:
    """int32 linear luma (Rec. 709 weights in 1/32768, rounded) of uint8 RGB pixels (..., 3)."""
    lin = to_linear(pixels).astype(np.int32)  # products below 2**31: 32767 x 23436 and the sum of three
    return (lin[..., 0] * LUMA_Q15[0] + lin[..., 1] * LUMA_Q15[1] + lin[..., 2] * LUMA_Q15[2] + (1 << 14)) >> 15


def flood_cost(params: FloodParams, scene: Scene, h: int, w: int) -> RenderCost:
    """The render cost of inundation on an ``h x w`` region: the micro-relief's noise, the block statistics and
    chamfer (frame-sized integer passes), the per-pixel height, depth and linear buffers."""
    spec = _relief_spec(params, scene, h, w)
    return (
        B.frame_cost(h, w)
        + B.noise_cost(h, w, spec)
        + RenderCost((), 0.0, float(16 * h * w), float(h * w * (4 * 3 + 8 * 4 + 2 + 1 + 1)))
    )


def turbid_cost(params: TurbidWaterParams, h: int, w: int) -> RenderCost:
    """turbidity_cast: the white's linear copy (a quarter of the frame), the masks and strip temporaries."""
    return B.frame_cost(h, w) + RenderCost((), 0.0, float(4 * h * w), float(h * w * (4 * 3 + 8) + (1 << 22)))
