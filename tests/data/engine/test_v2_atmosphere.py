"""aegis-v2's atmosphere (docs/CORRUPTIONS.md, "The atmosphere (aegis-v2)"): haze that follows each pixel's distance
(Koschmieder), airlight from the sky, smoke's shadow and dust's coat, firelight through the low-light camera, rain by
rain rate (Marshall-Palmer drops, Atlas velocities, faint defocused streaks in the view's direction, a veil); their
ladders, the visibility floor, the valid region, and the compiled loops against their NumPy references."""

from __future__ import annotations

import dataclasses
import hashlib
import math

import numpy as np
import pytest

from aegis_data.engine import atmosphere as ATM
from aegis_data.engine import kernels as K
from aegis_data.engine import rain as RAIN
from aegis_data.engine.calibration import calibrate, check_monotone, local_contrast, luma, luma_snr, red_blue_ratio
from aegis_data.engine.config import config_from_bytes, load_config
from aegis_data.engine.corruptions import apply_corruption, corruption_params, physical_ladder
from aegis_data.engine.photometry import to_srgb
from aegis_data.engine.scale import Scale
from aegis_data.engine.scene import check_sidecar, estimate_scene
from aegis_data.engine.seeding import KeyedRandom
from aegis_data.engine.visibility import person_visibility
from aegis_data.errors import AegisError
from tests.data.engine.test_ckernels_v2 import _both

# synthetic_people: the module-scoped fixture of persons and their boxes
from tests.data.engine.test_v2_models import synthetic_people  # noqa: F401
from tests.golden.frames import golden_frame
from tests.golden.scenes import letterboxed_frame, oblique_frame

V1 = load_config("aegis-v1")
V2 = load_config("aegis-v2")
ATMOSPHERE = ("smoke_haze", "dust_haze", "fire_warm_tint", "rain_streaks")
COMPILED = K.CKERNELS


def _v2(img, name, sev, scene, image_id="atm"):
    return apply_corruption(img, name, sev, image_id, config=V2, scene=scene)


def _scene(img, person_px=30.0, **facts):
    return estimate_scene(img, person_px, V2.camera, check_sidecar(facts, "test") if facts else None)


@pytest.fixture(scope="module")
def oblique():
    frame, horizon = oblique_frame(479, 641)
    return frame, horizon, _scene(frame)


def _band_contrast(y: np.ndarray, rows: tuple[int, int]) -> float:
    """Mean over 4x8 blocks of luma's std within ``rows``: the contrast of detail."""
    a, b = rows
    band = y[a : a + (b - a) // 4 * 4, : y.shape[1] // 8 * 8]
    return float(band.reshape(band.shape[0] // 4, 4, -1, 8).std(axis=(1, 3)).mean())


def _retention_by_depth(clean: np.ndarray, out: np.ndarray, horizon: int) -> list[float]:
    """Share of the clean frame's contrast of detail left, in five bands of rows from the horizon (far) down
    (near)."""
    yc, yo = luma(clean), luma(out)
    edges = np.linspace(horizon + 2, clean.shape[0], 6).astype(int)
    return [_band_contrast(yo, (a, b)) / _band_contrast(yc, (a, b)) for a, b in zip(edges, edges[1:])]


# --- exp and log from basic operations ------------------------------------------------------------------
def test_exp_and_log_from_basic_operations_are_accurate_and_the_transmission_table_is_pinned():
    x = np.linspace(0.0, 60.0, 20001)
    assert np.max(np.abs(ATM.exp_neg(x) / np.exp(-x) - 1.0)) < 1e-15
    y = np.exp(np.linspace(-40.0, 40.0, 20001))
    assert np.max(np.abs(ATM.log_pos(y) - np.log(y))) < 1e-14
    assert ATM.exp_neg(0.0) == 1.0 and ATM.exp_neg(2000.0) == 0.0
    with pytest.raises(AegisError):
        ATM.exp_neg(-1.0)
    with pytest.raises(AegisError):
        ATM.log_pos(0.0)
    table = ATM.transmission_table()
    assert table[0] == 1 << 15 and table[-1] == 0 and np.all(np.diff(table.astype(np.int64)) <= 0)
    # The bits of the table every machine builds (basic IEEE operations only).
    assert hashlib.sha256(table.tobytes()).hexdigest() == TRANSMISSION_TABLE_SHA256


TRANSMISSION_TABLE_SHA256 = "5bd129aa2af5f27858cd0cab48308594a853693d06584b1df742c6118a900921"


# --- sight lines ---------------------------------------------------------------------------------------
def test_a_nadir_view_sees_the_altitude_everywhere_and_a_little_more_toward_the_corners():
    img = golden_frame(240, 320)
    scene = _scene(img)
    lines = ATM.sightlines(scene, 240, 320)
    altitude = scene.gsd_m * scene.focal_px
    assert np.allclose(lines.ground, altitude) and lines.sky_rows is None
    path = lines.path()
    centre, corner = path[120, 160], path[0, 0]
    assert centre == pytest.approx(altitude, rel=1e-4)
    f = scene.focal_px
    assert corner == pytest.approx(altitude * math.sqrt(1 + (159.5 / f) ** 2 + (119.5 / f) ** 2), rel=1e-9)
    assert corner / centre < 1.4  # nearly uniform, as physics says (the 71.5-degree lens's corner ray: 1 / cos 42)


def test_an_oblique_view_sees_farther_toward_the_horizon_and_through_the_layer_above_it(oblique):
    frame, horizon, scene = oblique
    lines = ATM.sightlines(scene, *frame.shape[:2])
    ground = lines.ground[horizon + 2 :]
    assert np.all(np.diff(ground) < 0)  # nearer rows lie lower in the frame
    assert lines.sky_rows is not None and int(np.median(lines.sky_rows)) == int(scene.horizon_row)
    horizon = int(scene.horizon_row)
    path = lines.path()  # the sky's per metre of layer height
    assert 1500.0 * path[horizon - 20, 320] > path[horizon + 20, 320] > path[-1, 320]
    assert path[horizon - 20, 320] > path[5, 320]  # lower sky rays cross more of the layer
    # Koschmieder: at the visibility distance a black object keeps 2 % contrast.
    assert ATM.exp_neg(ATM.beta_550(800.0) * 800.0) == pytest.approx(0.02, rel=1e-3)


def test_a_horizon_at_the_bottom_of_the_view_leaves_every_model_a_positive_depth():
    """A flat frame whose sky detection reaches the last row (a 64x48 HERIDAL-like test image at a 10-px unit)
    put the reference row above the horizon, and the ground plane's depth came out negative: the haze loop refused
    it and a build failed. Such rows now take the reference depth."""
    from aegis_data.engine.scene import OBLIQUE

    img = golden_frame(48, 64)
    scene = dataclasses.replace(
        _scene(img, 10.0), view=OBLIQUE, horizon_row=48.0, reference_row=47.5, sky_depth=(24,) * 64
    )
    lines = ATM.sightlines(scene, 48, 64)
    assert np.all(np.isfinite(lines.ground)) and np.all(lines.ground > 0)
    for name in ATMOSPHERE:
        assert _v2(img, name, 3, scene).shape == img.shape


# --- haze by distance ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["smoke_haze", "rain_streaks"])
def test_on_an_oblique_frame_contrast_loss_grows_with_depth(oblique, name):
    """The horizon fades before the foreground (Koschmieder); aegis-v1's haze takes the same share everywhere."""
    frame, horizon, scene = oblique
    for sev in (2, 3):
        kept = _retention_by_depth(frame, _v2(frame, name, sev, scene), horizon)
        assert kept[0] < kept[-1] - 0.15, (sev, kept)  # the far band loses much more than the near one
        assert all(a <= b + 0.02 for a, b in zip(kept, kept[1:])), (sev, kept)  # and loss falls with nearness
    v1 = apply_corruption(frame, name, 3, "atm", config=V1, scale=Scale("object", 30.0, "t"))
    kept_v1 = _retention_by_depth(frame, v1, horizon)
    assert kept_v1[0] > kept_v1[-1] - 0.15 or name == "rain_streaks"


def test_dust_is_a_local_plume_whose_paths_are_capped_at_its_size(oblique):
    frame, horizon, scene = oblique
    p = corruption_params("dust_haze", 3, V2)
    draw = ATM.draw_plume(p, scene, *frame.shape[:2], KeyedRandom("dust"))
    density, _ = ATM.plume_density(p, draw, scene, *frame.shape[:2])
    sx, sy = int(draw.source[0] * frame.shape[1]), int(draw.source[1] * frame.shape[0])
    core = density[max(0, sy - 40) : sy + 40, max(0, sx - 40) : sx + 40].mean()
    rim = np.concatenate([density[:8].ravel(), density[-8:].ravel(), density[:, :8].ravel(), density[:, -8:].ravel()])
    assert core > rim.mean()  # densest around its source
    # A sight line never crosses more than plume_size_m of dust. With a uniform density (no texture, no footprint,
    # shadow, coat or colour), every ground pixel whose path is longer keeps exactly the transmission of that size.
    even = dataclasses.replace(
        p, plume_radius_m=0.0, density_amplitude=0.0, direct_fraction=0.0, coat=0.0, angstrom=0.0
    )
    out = ATM.plume_haze(frame, even, draw, scene)
    lines = ATM.sightlines(scene, *frame.shape[:2])
    beta = ATM.beta_550(p.visibility_m)
    cap = beta * p.plume_size_m
    ground = np.arange(frame.shape[0])[:, None] >= lines.sky_rows[None, :]
    beyond = ground & (beta * lines.path() > 1.01 * cap)
    t = int(ATM.transmission_table()[math.floor(cap * ATM.TAU_STEPS + 0.5)])
    air = ATM.plume_airlight(even, frame, lines)
    capped = (t * ATM.decode_table()[frame].astype(np.int64) + (ATM.ONE - t) * air + (1 << 14)) >> 15
    assert beyond.sum() > 1000 and np.array_equal(out[beyond], ATM.encode_table()[capped][beyond])


def test_the_airlight_is_the_horizon_sky_times_the_albedo_or_the_scene_white_level(oblique):
    frame, horizon, scene = oblique
    p = corruption_params("smoke_haze", 3, V2)
    lines = ATM.sightlines(scene, *frame.shape[:2])
    sky = ATM.sky_colour(frame, lines)
    air = ATM.plume_airlight(p, frame, lines)
    assert all(a == math.floor(w * s + 0.5) for a, w, s in zip(air, p.albedo, sky))
    assert all(a < s for a, s in zip(air, sky))  # smoke absorbs: albedo < 1
    out = _v2(frame, "smoke_haze", 3, scene)
    # The sky just above the horizon, seen through kilometres of smoke, is the airlight.
    near_horizon = out[horizon - 3, 100:540].astype(np.int64).mean(axis=0)
    expected = [ATM.encode_table()[a] for a in air]
    assert np.all(np.abs(near_horizon - expected) <= 3), (near_horizon, expected)
    # No sky: albedo times the light a white surface would read (mean luminance over the grey world's 18 %).
    flat = np.full((64, 64, 3), 60, np.uint8)
    flat_lines = ATM.sightlines(_scene(flat), 64, 64)
    white = ATM.white_level(ATM.mean_linear(flat), p.scene_reflectance)
    assert white == (ATM.decode_table()[60] / p.scene_reflectance,) * 3  # a grey frame: its own level over 18 %
    assert ATM.plume_airlight(p, flat, flat_lines)[1] == math.floor(p.albedo[1] * white[1] + 0.5)


def test_smoke_structure_is_elongated_along_the_wind_and_casts_a_shadow():
    img = golden_frame(256, 256)
    scene = _scene(img, sun_elevation_deg=40.0, sun_azimuth_deg=0.0)
    p = corruption_params("smoke_haze", 1, V2)
    p = dataclasses.replace(p, structure_m=256 * scene.gsd_m / 4.0)  # four large eddies across the view
    drawn = ATM.draw_plume(p, scene, 256, 256, KeyedRandom("w"))
    draw = dataclasses.replace(drawn, wind_deg=0.0, sun_elevation_deg=40.0, sun_azimuth_deg=0.0)
    density, levels = ATM.plume_density(p, draw, scene, 256, 256)
    d = density.astype(np.float64)
    along, across = np.var(np.diff(d, axis=1)), np.var(np.diff(d, axis=0))  # wind along +x
    assert across > 4.0 * along
    stab = ATM.shadow_table(p, 40.0, levels)
    light = stab[levels.ravel()] / float(1 << 15)
    assert abs(light.mean() - 1.0) < 0.01 and light.std() > 0.02  # mean kept by the exposure, patches remain
    assert stab[0] > stab[-1]  # thin smoke lets more sun through
    assert ATM.shadow_table(p, 2.0, levels) is None  # no direct sun, no shadow
    dx, dy = ATM.shadow_offset(p, scene, 40.0, 0.0)
    assert dx > 0 and abs(dy) < 1e-9  # the shading plume lies toward the sun


def test_dust_coats_the_ground_but_not_the_sky_and_adds_no_grain_there(oblique):
    frame, horizon, scene = oblique
    sky = (slice(5, horizon - 12), slice(0, frame.shape[1]))

    def sky_texture(img):
        y = luma(img)[sky]
        return float(np.abs(np.diff(y, axis=1)).mean() + np.abs(np.diff(y, axis=0)).mean())

    clean = sky_texture(frame)
    for sev in (1, 2, 3):
        assert sky_texture(_v2(frame, "dust_haze", sev, scene)) <= clean * 1.1 + 1e-4, sev
    v1 = apply_corruption(frame, "dust_haze", 3, "atm", config=V1, scale=Scale("object", 30.0, "t"))
    assert sky_texture(v1) > 1.5 * clean  # aegis-v1's grain: what this test would catch
    # The coat without haze: the sky is untouched, the ground moves toward the dust's colour.
    p = dataclasses.replace(corruption_params("dust_haze", 3, V2), visibility_m=100000.0, direct_fraction=0.0)
    draw = ATM.draw_plume(p, scene, *frame.shape[:2], KeyedRandom("coat"))
    out = ATM.plume_haze(frame, p, draw, scene)
    lines = ATM.sightlines(scene, *frame.shape[:2])
    is_sky = np.arange(frame.shape[0])[:, None] < lines.sky_rows[None, :]
    assert np.abs(out[is_sky].astype(int) - frame[is_sky].astype(int)).max() <= 1
    coat = np.asarray([v * 255 for v in p.coat_colour])
    ground = ~is_sky
    before = np.abs(frame[ground].astype(float) - coat).mean()
    after = np.abs(out[ground].astype(float) - coat).mean()
    assert after < 0.9 * before


def test_every_atmosphere_model_leaves_letterbox_bars_alone():
    img = letterboxed_frame(240, 320, 24, jitter=2)
    scene = _scene(img)
    assert scene.valid == (0, 24, 320, 216)
    for name in ATMOSPHERE:
        out = _v2(img, name, 3, scene)
        assert np.array_equal(out[:24], img[:24]) and np.array_equal(out[216:], img[216:]), name
        assert not np.array_equal(out[24:216], img[24:216]), name


# --- firelight -----------------------------------------------------------------------------------------
def test_firelight_reddens_the_light_and_the_camera_corrects_only_part_of_it():
    p = corruption_params("fire_warm_tint", 3, V2)
    light = ATM.canopy_light(p, 40.0)
    tr, tg, tb = light.transmission
    assert 1.0 > tr > tg > tb > 0.0  # fine smoke takes blue first (Angstrom)
    kappa = p.white_balance_correction
    assert light.cast[0] / light.cast[2] == pytest.approx((tr / tb) ** (1.0 - kappa), rel=1e-9)
    assert light.cast[0] / light.cast[2] > 1.2
    assert light.ev_loss == pytest.approx(
        -math.log2(sum(w * t for w, t in zip(ATM.LUMA_LINEAR, (tr, tg, tb)))), rel=1e-8
    )
    # Not a bare channel gain: the camera amplifies its weaker raw blue more, so that channel gets noisier.
    cam = ATM.firelight_camera(p, light)
    assert cam.ev_loss == light.ev_loss and cam.white_balance[2] > p.white_balance[2]
    casts = [ATM.canopy_light(corruption_params("fire_warm_tint", s, V2), 40.0) for s in (1, 2, 3)]
    assert casts[0].ev_loss < casts[1].ev_loss < casts[2].ev_loss
    assert casts[0].cast[0] / casts[0].cast[2] < casts[2].cast[0] / casts[2].cast[2]


def test_the_canopy_light_loss_goes_to_the_low_light_camera_so_noise_follows():
    img = golden_frame(240, 320)
    low = _scene(img, sun_elevation_deg=12.0, heading_deg=0.0)
    high = dataclasses.replace(low, sun_elevation_deg=60.0)
    p = corruption_params("fire_warm_tint", 3, V2)
    assert ATM.canopy_light(p, 12.0).ev_loss > 4.0 > ATM.canopy_light(p, 60.0).ev_loss
    dim, bright = _v2(img, "fire_warm_tint", 3, low), _v2(img, "fire_warm_tint", 3, high)
    # Low sun: the auto-exposure runs out of shutter and raises the ISO, so sensor noise is added.
    assert luma_snr(dim, img) < 0.5 * luma_snr(bright, img)
    assert red_blue_ratio(dim) > red_blue_ratio(img) and red_blue_ratio(bright) > red_blue_ratio(img)


@pytest.mark.parametrize("name", ("smoke_haze", "dust_haze", "fire_warm_tint"))
def test_a_drawn_image_sun_leaves_the_atmosphere_to_its_own_range_and_a_sidecar_sun_sets_it(name):
    img = golden_frame(240, 320)
    drawn = _scene(img)
    assert drawn.sun_drawn == ("elevation", "azimuth") and drawn.sun_elevation_deg is not None
    unknown = dataclasses.replace(drawn, sun_elevation_deg=None, sun_azimuth_deg=None, sun_drawn=())
    assert ATM.sidecar_sun(drawn) == (None, None)
    # The water models' per-image sun does not reach the atmosphere: the same bytes as a scene without a sun.
    assert np.array_equal(_v2(img, name, 2, drawn), _v2(img, name, 2, unknown))
    # A sidecar's sun does (a low one here, below every model's own range).
    given = _scene(img, sun_elevation_deg=8.0, sun_azimuth_deg=90.0)
    assert ATM.sidecar_sun(given) == (8.0, 90.0)
    assert not np.array_equal(_v2(img, name, 2, given), _v2(img, name, 2, drawn))


# --- rain --------------------------------------------------------------------------------------------------
def test_marshall_palmer_and_atlas_facts():
    assert RAIN.mp_slope(1.0) == pytest.approx(4.1)
    assert RAIN.mp_slope(10.0) == pytest.approx(4.1 * 10**-0.21, rel=1e-9)
    # beta = integral N0 exp(-L D) 2 (pi D^2 / 4) dD, numerically.
    lam = RAIN.mp_slope(6.0)
    d = np.linspace(0.0, 20.0, 200001)
    numeric = np.trapezoid(8000.0 * np.exp(-lam * d) * 2.0 * math.pi * d * d / 4.0, d) * 1e-6
    assert RAIN.rain_extinction(6.0) == pytest.approx(numeric, rel=1e-6)
    assert RAIN.rain_extinction(12.0) > RAIN.rain_extinction(6.0) > RAIN.rain_extinction(2.0) > 0.0
    v = RAIN.terminal_velocity(np.array([0.0, 1.0, 2.0, 5.0, 50.0]))
    assert v[0] == 0.0 and v[2] == pytest.approx(9.65 - 10.3 * math.exp(-1.2), rel=1e-12) and v[-1] < 9.65
    assert np.all(np.diff(v) > 0)


def _drops(scene, h, w, sev=3, rng="drops", **changes):
    p = dataclasses.replace(corruption_params("rain_streaks", sev, V2), **changes)
    draw = RAIN.draw_rain(p, scene, h, w, KeyedRandom(rng))
    return p, draw, RAIN.near_drops(p, draw, scene, ATM.sightlines(scene, h, w), h, w)


def test_near_drops_are_few_faint_wide_and_sized_by_depth_and_aperture():
    img = golden_frame(479, 641)
    scene = _scene(img, 60.0, heading_deg=0.0)
    p, _, d = _drops(scene, 479, 641)
    z_near, z_far = RAIN.near_range(p, scene)
    assert z_far == pytest.approx(p.focal_mm / p.f_number / 1000.0 * scene.focal_px)
    assert d.depth_m.min() >= z_near and d.depth_m.max() <= z_far
    assert np.median(d.peak) / 65536 < 0.2 and d.peak.max() <= 65536  # faint: a drop covers a pixel briefly
    # Width: the drop's own size and the defocus blur, both ~ 1/z, so nearer drops are wider.
    assert np.corrcoef(d.radius_px, 1.0 / d.depth_m)[0, 1] > 0.9
    # The streak's length follows the exposure (the scene's).
    _, _, d2 = _drops(dataclasses.replace(scene, exposure_ms=2.0 * scene.exposure_ms), 479, 641)
    assert np.allclose(d2.length_px, 2.0 * d.length_px)


def test_streak_direction_follows_the_view_geometry_and_the_platform_velocity():
    img = golden_frame(479, 641)
    # Hovering over a nadir view: vertical rain falls away from the camera, so it streams toward the nadir point.
    hover = _scene(img, 60.0, heading_deg=0.0, speed_mps=0.0)
    _, _, d = _drops(hover, 479, 641)
    cx, cy = (641 - 1) / 2.0, (479 - 1) / 2.0
    px, py = d.ax + 0.5 * d.ex - cx, d.ay + 0.5 * d.ey - cy
    far = np.hypot(px, py) > 100
    assert np.all((d.ex * px + d.ey * py)[far] < 0)
    # Flying along +x: the drops sweep back across the image, along -x.
    fly = dataclasses.replace(hover, speed_mps=10.0)
    _, _, d = _drops(fly, 479, 641)
    assert np.mean(d.ex < 0) > 0.95 and np.median(np.abs(d.ex)) > 3 * np.median(np.abs(d.ey))


def test_lens_drops_come_at_the_worst_level_only():
    img = golden_frame(240, 320)
    scene = _scene(img)
    for sev, count in ((1, 0), (2, 0), (3, 2)):
        p = corruption_params("rain_streaks", sev, V2)
        assert RAIN.draw_rain(p, scene, 240, 320, KeyedRandom("l")).lens.shape == (3, count)
    p = corruption_params("rain_streaks", 3, V2)
    draw = RAIN.RainRateDraw(0.0, np.zeros((6, 0)), np.array([[0.5], [0.5], [1.0]]))
    lin = ATM.CAM.to_linear(img)
    out = RAIN.lens_drops(lin.copy(), p, draw)
    r = p.lens_drop_radius[1] * 240
    assert not np.array_equal(out[120, 160], lin[120, 160]) and np.array_equal(out[0, 0], lin[0, 0])
    assert (
        np.abs(np.diff(out[100:140, 140:180, 1].astype(int), axis=1)).mean()
        < np.abs(np.diff(lin[100:140, 140:180, 1].astype(int), axis=1)).mean()
    )  # blurred behind the drop
    assert r > 10


def test_a_rain_view_whose_drops_would_exceed_the_budget_is_refused_in_one_line():
    img = golden_frame(64, 64)
    text = V2.raw.decode().replace("rain_mm_h: [2.0, 6.0, 12.0]", "rain_mm_h: [2.0, 6.0, 500.0]")
    text = text.replace("f_number: 4.0 ", "f_number: 0.5 ").replace("min_drop_mm: 1.0", "min_drop_mm: 0.1")
    suite = config_from_bytes(text.encode(), "wide-open.yaml")
    scene = dataclasses.replace(_scene(img), focal_px=100000.0)  # a long lens wide open: its near range reaches far
    with pytest.raises(AegisError, match="drops") as err:
        apply_corruption(img, "rain_streaks", 3, "atm", config=suite, scene=scene)
    assert "\n" not in str(err.value)
    assert apply_corruption(img, "rain_streaks", 2, "atm", config=suite, scene=_scene(img)).shape == img.shape


# --- ladders and the visibility floor ------------------------------------------------------------------
def test_the_atmosphere_ladders_are_monotone_and_persons_stay_visible_at_s3(synthetic_people):
    images = [(i, rgb) for i, rgb, _ in synthetic_people[:6]]
    boxes = {i: b for i, _, b in synthetic_people[:6]}
    table = calibrate(images, list(ATMOSPHERE), config=V2, scale=Scale("object", 25.0, "t"), boxes=boxes)
    assert not check_monotone(table), check_monotone(table)
    from aegis_data.engine.calibration import check_visibility_floor

    assert not check_visibility_floor(table), check_visibility_floor(table)
    assert {r.corruption: r.statistic for r in table.rows} == {
        "smoke_haze": "local_contrast",
        "dust_haze": "local_contrast",
        "fire_warm_tint": "red_blue_ratio",
        "rain_streaks": "local_contrast",
    }


def test_local_contrast_ignores_large_scale_gradients_that_rms_contrast_counts():
    img = golden_frame(240, 320)
    ramp = np.clip(img.astype(np.int64) + np.linspace(-60, 60, 240).astype(np.int64)[:, None, None], 0, 255)
    ramp = ramp.astype(np.uint8)
    assert abs(local_contrast(ramp) - local_contrast(img)) < 0.15 * local_contrast(img)
    assert abs(float(np.std(luma(ramp))) - float(np.std(luma(img)))) > 0.15 * float(np.std(luma(img)))
    half = (img.astype(np.float64) * 0.5 + 64).astype(np.uint8)
    assert local_contrast(half) < 0.6 * local_contrast(img)


def test_each_level_has_a_physical_unit():
    rows = {n: physical_ladder(n, V2, 60.0) for n in ATMOSPHERE}
    assert [r["visibility_m"] for r in rows["smoke_haze"]] == [5000, 1500, 800]
    assert [r["visibility_m"] for r in rows["dust_haze"]] == [3000, 1500, 500]
    assert [r["class"] for r in rows["rain_streaks"]] == ["light", "moderate", "heavy"]
    assert [r["canopy_aod"] for r in rows["fire_warm_tint"]] == [1.0, 2.5, 4.0]
    trans = [r["nadir_transmission"] for r in rows["smoke_haze"]]
    assert 1.0 > trans[0] > trans[1] > trans[2] > 0.5  # a nadir view at 56 m: nearly clear, as physics says


def test_bad_atmosphere_parameters_are_one_line():
    text = V2.raw.decode()
    bad = text.replace("visibility_m: [5000, 1500, 800]", "visibility_m: [0, 1500, 800]")
    with pytest.raises(AegisError, match="smoke_haze.severities.visibility_m") as err:
        config_from_bytes(bad.encode(), "bad.yaml")
    assert "\n" not in str(err.value)
    bad = text.replace("rain_mm_h: [2.0, 6.0, 12.0]", "rain_mm_h: [2.0, 6.0, .nan]")
    with pytest.raises(AegisError, match="rain_mm_h"):
        config_from_bytes(bad.encode(), "bad.yaml")


# --- compiled loops against the NumPy reference ------------------------------------------------------------
COMPILED_LOOPS = {
    "smoke_haze": ("atmos_haze",),
    "dust_haze": ("atmos_haze",),
    "fire_warm_tint": ("atmos_cast",),
    "rain_streaks": ("atmos_haze", "atmos_drops", "atmos_blend"),
}


@pytest.mark.skipif(COMPILED is None or not hasattr(COMPILED, "atmos_haze"), reason="compiled loops not built")
@pytest.mark.parametrize("frame", ["nadir", "oblique", "letterbox"])
def test_the_compiled_atmosphere_loops_write_the_numpy_bytes(frame):
    img = {
        "nadir": golden_frame(240, 320),
        "oblique": oblique_frame(240, 320)[0],
        "letterbox": letterboxed_frame(240, 320, 24, jitter=2),
    }[frame]
    scene = _scene(img, 30.0, sun_elevation_deg=35.0, speed_mps=12.0, exposure_ms=4.0, sun_azimuth_deg=20.0)
    for name, loops in COMPILED_LOOPS.items():
        for sev in (1, 3):
            a, b = _both(lambda: _v2(img, name, sev, scene), loops)
            assert np.array_equal(a, b), (frame, name, sev, int((a != b).sum()))


@pytest.mark.skipif(COMPILED is None or not hasattr(COMPILED, "atmos_haze"), reason="compiled loops not built")
def test_the_compiled_drop_layer_saturates_like_the_numpy_one():
    h, w, n = 40, 50, 400
    u = np.random.default_rng(3).random((10, n))
    drops = RAIN.NearDrops(
        u[0] * w,
        u[1] * h,
        (u[2] - 0.5) * 20,
        (u[3] - 0.5) * 20,
        1.0 / np.maximum(((u[2] - 0.5) * 20) ** 2 + ((u[3] - 0.5) * 20) ** 2, 1e-9),
        1.0 / (1.0 + 9 * u[4]) ** 2,
        np.full(n, 65536.0),
        np.zeros(n, np.int64),
        np.full(n, w, np.int64),
        np.zeros(n, np.int64),
        np.full(n, h, np.int64),
        u[5],
        u[6],
        u[7],
    )
    a, b = _both(lambda: RAIN.drop_layer(drops, h, w), ("atmos_drops",))
    assert np.array_equal(a, b) and a.max() > 65536


def test_the_atmosphere_stays_deterministic_for_an_image_and_key(oblique):
    frame, _, scene = oblique
    for name in ATMOSPHERE:
        a = _v2(frame, name, 2, scene, "k1")
        assert np.array_equal(a, _v2(frame.copy(), name, 2, scene, "k1"))
        assert not np.array_equal(a, _v2(frame, name, 2, scene, "k2")) or name == "fire_warm_tint"


def test_a_person_keeps_its_visibility_in_the_haze_on_an_oblique_frame(oblique):
    frame, horizon, scene = oblique
    row = horizon + (frame.shape[0] - horizon) * 9 // 10
    size = max(2, (row - horizon) // 5)
    col = frame.shape[1] // 6 + 2 * size
    box = [(col, row - 2 * size, size, 2 * size)]
    base = person_visibility(frame, box)[0]
    for name in ("smoke_haze", "dust_haze", "rain_streaks"):
        assert person_visibility(_v2(frame, name, 3, scene), box)[0] >= 0.5 * base, name


def test_the_camera_skips_the_raw_noise_pass_only_where_it_would_add_nothing():
    """With the light all recovered at the clean ISO the raw-noise pass returns the signal itself: the shortcut
    (``camera.record_linear``, for firelight and low light) writes the same bytes, compiled or not."""
    img = golden_frame(240, 320)
    lin = ATM.CAM.to_linear(img)
    zero = np.zeros(3)
    full = ATM.CAM.raw_noise_image(
        lin, ATM.CAM.LowLightCapture(1.0, 100.0, 1.0), zero, zero, np.zeros((240, 320), np.uint16)
    )
    assert np.array_equal(to_srgb(lin), full)
    try:
        K.CKERNELS = None
        assert np.array_equal(to_srgb(lin), full)
    finally:
        K.CKERNELS = COMPILED


def test_aegis_list_shows_the_atmosphere_in_physical_units():
    from typer.testing import CliRunner

    from aegis_cli.main import app

    result = CliRunner().invoke(app, ["list", "--person-px", "60"], env={"COLUMNS": "220"})
    assert result.exit_code == 0, result.output
    for text in (
        "visibility 5000 / 1500 / 800 m",
        "visibility 3000 / 1500 / 500 m",
        "rain light / moderate / heavy",
        "light loss 0.621 / 1.55 / 2.46 EV",
        "nadir transmission 0.957 / 0.865 / 0.762",
    ):
        assert text in result.stdout, text


@pytest.mark.parametrize(
    "changes",
    [
        {
            "canopy_aod": 10.0,
            "angstrom": 4.0,
            "white_balance_correction": 1.0,
            "flame_colour": (0.0, 0.0, 1.0),
            "fire_glow": 4.0,
            "sun_elevation_range_deg": (0.0, 0.0),
        },
        {"canopy_aod": 10.0, "canopy_albedo": 0.0, "flame_colour": (0.0, 0.0, 0.0), "fire_glow": 4.0},
    ],
)
def test_extreme_firelight_renders_or_is_one_line(changes):
    img = golden_frame(64, 64)
    scene = _scene(img)
    p = dataclasses.replace(corruption_params("fire_warm_tint", 3, V2), **changes)
    draw = ATM.draw_firelight(p, scene, 64, 64, KeyedRandom("x"))
    try:
        out = ATM.firelight(img, p, draw, scene)
    except AegisError as exc:
        assert "\n" not in str(exc)
    else:
        assert out.shape == img.shape and out.dtype == np.uint8
    light = ATM.canopy_light(p, 0.0)
    assert all(1 / 8 <= g <= 8 for g in light.wb_gains) and light.ev_loss <= 20.0


def test_no_rain_renders_the_frame_through_the_camera_unchanged():
    """rain_mm_h 0 is a valid value (the schema's lower bound); its drop geometry asked Marshall-Palmer for 0**-0.21."""
    img = golden_frame(64, 64)
    scene = _scene(img)
    p = dataclasses.replace(corruption_params("rain_streaks", 2, V2), rain_mm_h=0.0)
    out = RAIN.rain_rate(img, p, RAIN.draw_rain(p, scene, 64, 64, KeyedRandom("dry")), scene)
    assert np.array_equal(out, img)
