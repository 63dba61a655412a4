"""aegis-v2's water models (docs/CORRUPTIONS.md): sun glint only on water and only where the sun is mirrored,
spreading with the wind as Cox & Munk's slopes do; floods that rise over low, smooth ground with a shoreline and
people standing in them; turbid water that colours the water only. Ladders, the visibility floor, the compiled
loops against their NumPy twins."""

from __future__ import annotations

import math
from dataclasses import replace

import cv2
import numpy as np
import pytest

from aegis_data.engine import flood as F
from aegis_data.engine import glint as G
from aegis_data.engine import kernels as K
from aegis_data.engine import water as W
from aegis_data.engine.calibration import calibrate, check_monotone, check_visibility_floor, glint_area
from aegis_data.engine.config import load_config
from aegis_data.engine.corruptions import apply_corruption, corruption_params, physical_ladder
from aegis_data.engine.scale import Scale
from aegis_data.engine.scene import check_sidecar, estimate_scene
from aegis_data.engine.seeding import KeyedRandom
from aegis_data.engine.visibility import person_visibility
from tests.golden.scenes import coast_frame, lake_oblique_frame


def mean_glint(geo: G.GlintGeometry, water: np.ndarray) -> np.ndarray:
    """float64 (h, w): the mean glint G of every water pixel in units of the frame's white (what the sparkles carry
    on average; 0 elsewhere): Cox & Munk's glitter pattern without the sparkle lottery."""
    out = np.zeros(water.shape, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ys, xs = np.nonzero(water)
        if ys.size:
            ok, g, _, _ = G._glint_terms(geo, ys, xs)
            out[ys, xs] = np.where(ok, g, 0.0)
    return out


V2 = load_config("aegis-v2")
COMPILED = K.CKERNELS


def _scene(img, sun=None, persons=(), unit=30.0):
    facts = check_sidecar({"sun_elevation_deg": sun[0], "sun_azimuth_deg": sun[1]}, "t") if sun else None
    return estimate_scene(img, unit, V2.camera, facts, persons=persons)


def _v2(img, name, sev, scene, image_id="w"):
    return apply_corruption(img, name, sev, image_id, config=V2, scene=scene)


def _grass(h=240, w=320):
    y, x = np.mgrid[0:h, 0:w]
    hsh = ((x * 2654435761 + y * 40503 * 2246822519) & 0xFFFFFFFF) >> 27
    return np.stack([58 + hsh, 96 + hsh // 2, 38 + hsh // 3], axis=-1).astype(np.uint8)


def _sea(h=240, w=320):
    y, x = np.mgrid[0:h, 0:w]
    wave = ((x * 3 + y * 5) % 16) - 8
    return np.stack([28 + wave // 4, 92 + wave // 2, 124 + wave // 2], axis=-1).astype(np.uint8)


# --- sun glint ---------------------------------------------------------------------------------------------
def test_on_a_frame_of_land_glare_does_nothing_and_says_so():
    land = _grass()
    scene = _scene(land, (60.0, 0.0))
    assert not scene.water_mask().any() and not G.can_glint(scene)
    for sev in (1, 2, 3):
        assert np.array_equal(_v2(land, "water_glare", sev, scene), land)


def test_glint_falls_on_water_only():
    img, truth, boxes = coast_frame(300, 400)
    scene = _scene(img, (58.0, 175.0), boxes)
    reach = 4 * math.ceil(V2.corruptions["water_glare"].fixed["bloom_sigma"]) + 8
    near_water = cv2.dilate(scene.water_mask().astype(np.uint8), np.ones((2 * reach + 1,) * 2, np.uint8)) > 0
    for sev in (1, 2, 3):
        out = _v2(img, "water_glare", sev, scene)
        changed = (out != img).any(axis=2)
        assert changed.sum() > 100  # it glints
        assert not (changed & ~near_water).any()  # and nowhere off the water beyond the lens's spread


def test_no_glint_with_the_sun_at_or_below_the_horizon():
    sea = _sea()
    for elevation in (0.0, -3.0):
        scene = _scene(sea, (elevation, 90.0))
        assert scene.water_mask().all() and not G.can_glint(scene)
        assert np.array_equal(_v2(sea, "water_glare", 3, scene), sea)


def test_on_a_frame_of_sea_the_glint_sparkles_where_the_sun_is_mirrored():
    """Nadir camera, calm sea: the sun's reflection lies f cot(e) from the principal point, toward the sun."""
    sea = _sea(480, 640)
    for elevation, azimuth in ((72.0, 0.0), (70.0, 90.0)):
        scene = _scene(sea, (elevation, azimuth))
        params = replace(corruption_params("water_glare", 1, V2), wind_speed_mps=1.0)
        energy = mean_glint(G.glint_geometry(params, scene, 480, 640), scene.water_mask())
        ys, xs = np.mgrid[0:480, 0:640]
        total = energy.sum()
        cx, cy = (xs * energy).sum() / total, (ys * energy).sum() / total
        d = scene.focal_px / math.tan(math.radians(elevation))
        ex, ey = 319.5 + d * math.cos(math.radians(azimuth)), 239.5 + d * math.sin(math.radians(azimuth))
        assert abs(cx - ex) < 0.08 * 640 and abs(cy - ey) < 0.08 * 480, (cx, cy, ex, ey)


def test_the_wind_spreads_the_glint_as_the_cox_munk_slopes_do():
    assert G.slope_variance(5.0) == pytest.approx(0.003 + 0.00512 * 5.0)
    sea = _sea(480, 640)
    scene = _scene(sea, (80.0, 0.0))
    spreads, areas = [], []
    for sev in (1, 2, 3):
        params = corruption_params("water_glare", sev, V2)
        energy = mean_glint(G.glint_geometry(params, scene, 480, 640), scene.water_mask())
        ys, xs = np.mgrid[0:480, 0:640]
        w = energy / energy.sum()
        spreads.append(math.sqrt(((xs - (xs * w).sum()) ** 2 * w).sum()))
        out = _v2(sea, "water_glare", sev, scene)
        areas.append(glint_area(out, sea))
    assert spreads[0] < spreads[1] < spreads[2]
    assert areas[0] < areas[1] < areas[2]


def test_the_peak_density_is_cox_munks():
    params = corruption_params("water_glare", 2, V2)
    s2 = G.slope_variance(params.wind_speed_mps)
    sea = _sea(64, 64)
    geo = G.glint_geometry(params, _scene(sea, (40.0, 10.0)), 64, 64)
    assert geo.constants[3] == 1.0 / s2 and geo.constants[4] == pytest.approx(1.0 / (math.pi * s2), rel=1e-9)


def test_sparkles_are_keyed_draws():
    img, _, boxes = coast_frame(240, 320)
    scene = _scene(img, (50.0, 180.0), boxes)
    a = _v2(img, "water_glare", 2, scene, "one")
    assert np.array_equal(a, _v2(img.copy(), "water_glare", 2, scene, "one"))
    assert not np.array_equal(a, _v2(img, "water_glare", 2, scene, "two"))


def test_the_physical_ladders_are_listed():
    glare = physical_ladder("water_glare", V2)
    assert [r["beaufort"] for r in glare] == [2, 4, 5]
    assert [r["wind_speed_mps"] for r in glare] == [2.5, 5.5, 9.5]
    flood = physical_ladder("inundation", V2)
    assert [r["rise_m"] for r in flood] == [0.2, 0.5, 1.0]


# --- inundation ------------------------------------------------------------------------------------------
def test_the_flood_has_a_shoreline_and_rises_with_the_severity():
    img, truth, boxes = coast_frame(300, 400)
    scene = _scene(img, persons=boxes)
    outs = {s: _v2(img, "inundation", s, scene) for s in (1, 2, 3)}
    wet = {s: (np.abs(outs[s].astype(int) - img).sum(axis=2) > 24) for s in outs}
    assert wet[1].sum() < wet[2].sum() < wet[3].sum()
    assert wet[1][truth].mean() > 0.95  # the sea became floodwater
    assert not wet[1][:, -40:].any()  # the far grass stays dry at s1
    # A shoreline: along a row, the water ends and dry ground begins (the flooded share falls from 1 to 0).
    row = wet[2][60]  # a row without persons (they stand above the water)
    edge = int(np.argmin(row))
    assert row[:edge].all() and not row[edge + 20 :].any()


def test_people_standing_in_the_water_are_partly_submerged_and_their_boxes_kept():
    img, truth, boxes = coast_frame(300, 400, person_px=40.0)
    scene = _scene(img, persons=boxes, unit=40.0)
    fractions = [F.submerged_fractions(img, corruption_params("inundation", s, V2), scene) for s in (1, 2, 3)]
    for k in range(len(boxes)):
        f = [fr[k] for fr in fractions]
        assert 0.0 <= f[0] <= f[1] <= f[2] <= 1.0 and f[2] > 0.3
    out = _v2(img, "inundation", 3, scene)
    x0, y0, x1, y1 = (int(v) for v in boxes[1])
    h = y1 - y0
    head = slice(y0 + 1, y0 + h // 6)
    cx = (x0 + x1) // 2
    assert np.array_equal(out[head, cx - 1 : cx + 2], img[head, cx - 1 : cx + 2])  # the head stays above the water
    submerged = int(h * fractions[2][1])
    legs = out[y1 - submerged // 2 : y1 - 2, cx - 1 : cx + 2].astype(int)
    assert np.abs(legs - img[y1 - submerged // 2 : y1 - 2, cx - 1 : cx + 2]).sum(axis=2).min() > 30  # under water
    # A person on the far grass stays dry at s1 (this frame is 12 m wide: at s3 the water reaches everyone).
    dry = [(370.0, 20.0, 390.0, 60.0)]
    assert (
        F.submerged_fractions(img, corruption_params("inundation", 1, V2), _scene(img, persons=boxes + dry, unit=40.0))[
            -1
        ]
        == 0.0
    )


def test_a_frame_without_persons_derives_no_height_proxy_for_the_contract(monkeypatch):
    """submerged_fractions runs for every flood file of a build and of verify; with nobody to submerge it returns at
    once (the height proxy costs a chamfer and a full-frame upsampling, and the block statistics with a sidecar
    mask)."""
    img, _, _ = coast_frame(120, 160)
    scene = _scene(img)

    def no_terrain(*args):
        raise AssertionError("terrain derived for a frame without persons")

    monkeypatch.setattr(F, "terrain", no_terrain)
    assert F.submerged_fractions(img, corruption_params("inundation", 3, V2), scene) == []


def test_the_height_proxy_is_derived_once_per_scene_for_every_severity_and_the_contract(monkeypatch):
    """A build renders three floods of an image and records the persons' submerged fractions for each: six height
    proxies (a chamfer and a full-frame upsampling each) of the same pixels and slopes; one is derived, the others
    read it. A scene of other facts (here: other persons) derives its own."""
    img, _, boxes = coast_frame(120, 160)
    scene = _scene(img, persons=boxes)
    calls = []
    real = F.chamfer
    monkeypatch.setattr(F, "chamfer", lambda *a: calls.append(1) or real(*a))
    outs = [_v2(img, "inundation", sev, scene) for sev in (1, 2, 3)]
    facts = [F.submerged_fractions(img, corruption_params("inundation", sev, V2), scene) for sev in (1, 2, 3)]
    assert len(calls) == 1
    fresh = _scene(img, persons=boxes)
    monkeypatch.setattr(F, "chamfer", real)
    assert all(
        np.array_equal(o, _v2(img, "inundation", sev, _scene(img, persons=boxes))) for o, sev in zip(outs, (1, 2, 3))
    )
    assert facts == [F.submerged_fractions(img, corruption_params("inundation", sev, V2), fresh) for sev in (1, 2, 3)]
    other = replace(scene, persons=boxes[:1])
    assert not other.derived and scene.derived


def test_the_sky_never_floods_and_grazing_water_reflects_it():
    img, truth, horizon = lake_oblique_frame(479, 641)
    scene = _scene(img)
    assert scene.view == "oblique"
    out = _v2(img, "inundation", 3, scene)
    assert np.array_equal(out[: horizon - 2], img[: horizon - 2])
    refl = F.row_reflectance(scene, 479, 641, 1.34)
    assert refl[horizon + 5] > 0.3 > 0.05 > refl[-1] > 0.0  # grazing rows mirror the sky, near rows do not


def test_a_camera_looking_level_at_the_horizon_gets_the_water_models():
    """A sidecar may give pitch_deg 0 (its range is [0, 90]): the horizon is the frame's centre row and the ground
    lies below it. The view rays refused it ("the camera looks at or above the horizon"), so the three water models
    failed on an image the atmosphere models render."""
    img = lake_oblique_frame(240, 320)[0]
    y, x = np.mgrid[0:240, 0:320]
    sea = (y >= 140) & (y < 200) & (x < 200)
    facts = check_sidecar(
        {"pitch_deg": 0.0, "water_mask": "m.png", "sun_elevation_deg": 8.0, "sun_azimuth_deg": 270.0}, "t"
    )  # ahead: its mirror image lies on the sea
    scene = estimate_scene(img, 30.0, V2.camera, facts, sea)
    assert scene.view == "oblique" and scene.horizon_row == 119.5
    refl = F.row_reflectance(scene, 240, 320, 1.34)
    assert (refl[:120] == 0.0).all() and refl[121] > 0.5 > refl[-1] > 0.02  # grazing near the horizon
    for name in ("water_glare", "turbidity_cast", "inundation"):
        out = _v2(img, name, 3, scene)
        changed = (out != img).any(axis=2)
        assert changed.any() and not changed[:100].any(), name
    assert not ((_v2(img, "turbidity_cast", 2, scene) != img).any(axis=2) & ~sea).any()


def test_without_water_the_flood_starts_on_the_smoothest_ground():
    land = _grass(240, 320)
    land[150:200, 40:120] = (120, 118, 110)  # a smooth, flat yard: low ground
    scene = _scene(land)
    out = _v2(land, "inundation", 1, scene)
    wet = np.abs(out.astype(int) - land).sum(axis=2) > 24
    assert wet[160:190, 50:110].mean() > 0.9 and wet[:60].mean() < 0.05


def test_the_chamfer_heights_are_exact_integers():
    cost = np.full((5, 7), 10, np.int64)
    seeds = np.zeros((5, 7), bool)
    seeds[2, 0] = True
    d = F.chamfer(cost, seeds)
    assert d[2].tolist() == [0, 10, 20, 30, 40, 50, 60]
    assert d[0, 2] == 2 * (10 * 181 // 128)  # two diagonal steps
    blocked = cost.copy()
    blocked[:, 3] = F.UNREACHED
    assert (F.chamfer(blocked, seeds)[:, 4:] == F.UNREACHED).all()
    assert np.array_equal(F.chamfer(cost.T.copy(), seeds.T.copy()), d.T)  # no direction is favoured


# --- turbidity -------------------------------------------------------------------------------------------
def test_turbidity_colours_the_water_only():
    img, truth, boxes = coast_frame(240, 320)
    scene = _scene(img, persons=boxes)
    ratios = []
    for sev in (1, 2, 3):
        out = _v2(img, "turbidity_cast", sev, scene)
        changed = (out != img).any(axis=2)
        assert not (changed & ~scene.water_mask()).any()
        ratios.append(out[truth][:, 0].mean() / out[truth][:, 2].mean())
    assert img[truth][:, 0].mean() / img[truth][:, 2].mean() < ratios[0] < ratios[1] < ratios[2]
    land = _grass()
    assert np.array_equal(_v2(land, "turbidity_cast", 3, _scene(land)), land)


# --- ladders and visibility --------------------------------------------------------------------------------
SIZES = [(240, 320), (250, 330), (260, 340), (270, 360), (280, 370), (300, 400), (320, 420), (330, 440)]


@pytest.fixture(scope="module")
def coasts():
    out, boxes = [], {}
    for i, (h, w) in enumerate(SIZES):
        img, _, bx = coast_frame(h, w, person_px=25.0)
        out.append((f"c{i}", img))
        boxes[f"c{i}"] = [(x0, y0, x1 - x0, y1 - y0) for x0, y0, x1, y1 in bx]
    return out, boxes


def test_the_water_ladders_are_monotone_and_keep_people_visible_at_s3(coasts):
    images, boxes = coasts
    table = calibrate(
        images,
        ["water_glare", "turbidity_cast", "inundation"],
        config=V2,
        scale=Scale("object", 25.0, "t"),
        boxes=boxes,
    )
    assert not check_monotone(table), check_monotone(table)
    assert not check_visibility_floor(table), check_visibility_floor(table)


def test_glint_keeps_the_persons_visible_at_s3(coasts):
    images, boxes = coasts
    clean, glare = [], []
    for image_id, img in images:
        people = boxes[image_id]
        scene = estimate_scene(img, 25.0, V2.camera, persons=[(x, y, x + w, y + h) for x, y, w, h in people])
        clean += person_visibility(img, people)
        glare += person_visibility(_v2(img, "water_glare", 3, scene, image_id), people)
    assert np.nanmedian(glare) >= 0.5 * np.nanmedian(clean)


# --- compiled loops == NumPy ------------------------------------------------------------------------------
needs_compiled = pytest.mark.skipif(
    COMPILED is None or not hasattr(COMPILED, "glint"), reason="compiled engine loops not built (no C compiler?)"
)


@needs_compiled
@pytest.mark.parametrize("frame", ["coast", "lake"])
def test_the_compiled_glint_loop_writes_the_numpy_bytes(frame):
    img = coast_frame(240, 320)[0] if frame == "coast" else lake_oblique_frame(240, 320)[0]
    scene = _scene(img, (35.0, 250.0) if frame == "lake" else (55.0, 170.0))
    h, w = scene.valid[3] - scene.valid[1], scene.valid[2] - scene.valid[0]
    for sev in (1, 3):
        params = corruption_params("water_glare", sev, V2)
        lottery = G.draw_glint(params, scene, h, w, KeyedRandom(f"t{sev}")).lottery
        geo = G.glint_geometry(params, scene, h, w)
        water = np.ascontiguousarray(scene.water_mask()[scene.valid_slices])
        for pad in (0, 3):
            compiled, box = G.glint_energy(geo, water, lottery, pad)
            numpy = G.glint_energy_numpy(geo, water, lottery, pad)
            assert compiled.any() and np.array_equal(compiled, numpy)
            assert box == G.lit_box(numpy[pad : pad + h, pad : pad + w])


def _swap(fn):
    saved = K.CKERNELS
    try:
        a = fn()
        K.CKERNELS = None
        b = fn()
    finally:
        K.CKERNELS = saved
    return a, b


@needs_compiled
@pytest.mark.parametrize("name", ["water_glare", "inundation", "turbidity_cast"])
def test_every_water_model_writes_the_same_bytes_with_and_without_the_compiled_loops(name):
    img, _, boxes = coast_frame(240, 320)
    scene = _scene(img, (55.0, 170.0), boxes)
    for sev in (1, 3):
        a, b = _swap(lambda: _v2(img, name, sev, scene))
        assert not np.array_equal(a, img) and np.array_equal(a, b), (name, sev)
    obl, _, _ = lake_oblique_frame(240, 320)
    oscene = _scene(obl, (30.0, 260.0))
    a, b = _swap(lambda: _v2(obl, name, 2, oscene))
    assert np.array_equal(a, b)


# --- the render budget -----------------------------------------------------------------------------------
@pytest.mark.parametrize("compiled", [True, False])
def test_the_priced_memory_bounds_what_the_water_models_hold(compiled):
    import tracemalloc

    from aegis_data.engine.corruptions import _scene_model_of

    img, _, boxes = coast_frame(600, 800, person_px=40.0)
    cases = [(img, _scene(img, (62.0, 180.0), boxes, unit=40.0)), (_sea(600, 800), _scene(_sea(600, 800), (80.0, 0.0)))]
    saved = K.CKERNELS
    try:
        K.CKERNELS = saved if compiled else None
        for frame, scene in cases:
            for name in ("water_glare", "turbidity_cast", "inundation"):
                params = corruption_params(name, 3, V2)
                predicted = _scene_model_of(params).cost(params, scene, 600, 800).peak_bytes
                tracemalloc.start()
                try:
                    _v2(frame, name, 3, scene)
                    peak = tracemalloc.get_traced_memory()[1]
                finally:
                    tracemalloc.stop()
                assert peak <= predicted, (name, peak, predicted)
    finally:
        K.CKERNELS = saved


@needs_compiled
def test_the_compiled_chamfer_makes_the_numpy_sweeps():
    rng = np.random.default_rng(5)
    for h, w in ((1, 1), (1, 9), (7, 1), (23, 31), (64, 48)):
        cost = rng.integers(1, 500, (h, w)).astype(np.int64)
        cost[rng.random((h, w)) < 0.15] = F.UNREACHED
        seeds = rng.random((h, w)) < 0.03
        seeds[0, 0] = True
        c0 = np.minimum(cost, F.UNREACHED)
        d0 = np.where(seeds & (c0 < F.UNREACHED), 0, F.UNREACHED).astype(np.int64)
        numpy = F._chamfer_numpy(d0.copy(), c0)
        compiled = d0.copy()
        COMPILED.chamfer(
            compiled, np.ascontiguousarray(c0), h, w, F.CHAMFER_PASSES, F.UNREACHED, F.DIAGONAL_NUM, F.DIAGONAL_DEN
        )
        assert np.array_equal(compiled, numpy), (h, w)
        assert np.array_equal(F.chamfer(cost, seeds), numpy)


def test_the_chamfer_heights_are_the_shortest_paths_of_the_step_costs():
    """Against Dijkstra on the same graph: the backward sweep once charged a corner step the cost of the other
    diagonal (an asymmetric, wrong height); uniform costs could not show it."""
    import heapq

    rng = np.random.default_rng(11)
    for trial in range(6):
        h, w = 9 + trial, 12 - trial
        cost = rng.integers(1, 1000, (h, w)).astype(np.int64)
        seeds = np.zeros((h, w), bool)
        seeds[rng.integers(0, h), rng.integers(0, w)] = True
        dist = np.full((h, w), F.UNREACHED, np.int64)
        heap = [(0, y, x) for y, x in zip(*np.nonzero(seeds))]
        for _, y, x in heap:
            dist[y, x] = 0
        while heap:
            d, y, x = heapq.heappop(heap)
            if d > dist[y, x]:
                continue
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    ny, nx = y + dy, x + dx
                    if (dy or dx) and 0 <= ny < h and 0 <= nx < w:
                        step = (int(cost[y, x]) + int(cost[ny, nx])) // 2
                        if dy and dx:
                            step = step * F.DIAGONAL_NUM // F.DIAGONAL_DEN
                        if d + step < dist[ny, nx]:
                            dist[ny, nx] = d + step
                            heapq.heappush(heap, (d + step, ny, nx))
        saved = K.CKERNELS
        try:
            for ck in (saved, None):
                K.CKERNELS = ck
                assert np.array_equal(F.chamfer(cost, seeds), dist), (trial, ck is None)
        finally:
            K.CKERNELS = saved


def test_the_glitter_near_the_horizon_stays_within_the_suns_own_reflection():
    """Cox & Munk's relation diverges at the horizon (1 / cos theta_v); a pixel mirrors at most all of its area:
    G <= rho pi / (Omega_sun sin e). One grazing pixel (cos theta_v = 1e-4) looking at the sun's mirror image."""
    e = math.atan(1e-4)
    s2 = G.slope_variance(0.5)
    k_g = math.pi / (4.0 * math.sin(e))
    consts = [0.0, math.cos(e), math.sin(e), 1.0 / s2, 1.0 / (math.pi * s2), k_g, 1.0, 1000.0, 1.34, k_g, G.Q_MAX]
    one = np.ones(1)
    geo = G.GlintGeometry(np.zeros(1), one * 1e4, -one, one * 1e-4, one * 1e3, np.asarray(consts))
    ok, g, _, _ = G._glint_terms(geo, np.zeros(1, np.int64), np.zeros(1, np.int64))
    rho = W.fresnel(math.sqrt((1.0 + math.cos(2 * (math.pi / 2 - e))) / 2.0))
    bound = rho * math.pi / (G.SUN_SOLID_ANGLE_SR * math.sin(e))
    assert ok[0] and g[0] == pytest.approx(bound, rel=1e-3)  # capped: all of the pixel mirrors the sun
    uncapped = G.GlintGeometry(
        geo.ray_x, geo.ray_y, geo.ray_z, geo.gsd2, geo.inv_footprint, np.asarray(consts[:-1] + [np.inf])
    )
    assert G._glint_terms(uncapped, np.zeros(1, np.int64), np.zeros(1, np.int64))[1][0] > 5 * bound
