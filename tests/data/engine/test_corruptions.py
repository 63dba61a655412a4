"""The corruption engine: registry, the contract every corruption keeps, kernel math, geometry, bad input."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from aegis_data.engine import corruptions as C
from aegis_data.engine import kernels as K
from aegis_data.engine.config import load_config
from aegis_data.engine.corruptions import CORRUPTIONS, FAMILIES, apply_corruption, corruption_params
from aegis_data.engine.seeding import KeyedRandom
from aegis_data.errors import AegisError
from tests.golden.frames import GOLDEN_SIZES, golden_frame

RANDOM_CORRUPTIONS = [n for n in CORRUPTIONS if n != "turbidity_cast"]
# The kernels, parameter records and draws tested here are aegis-v1's (frozen): pinned, whatever the default suite.
V1 = load_config("aegis-v1")


@pytest.fixture(scope="module")
def frame() -> np.ndarray:
    return golden_frame(*GOLDEN_SIZES[0])


def _luma(img: np.ndarray) -> np.ndarray:
    x = img.astype(np.float64) / 255.0
    return 0.299 * x[..., 0] + 0.587 * x[..., 1] + 0.114 * x[..., 2]


def _dot_image(h: int, w: int, points, value=255, background=0) -> np.ndarray:
    img = np.full((h, w, 3), background, dtype=np.uint8)
    for y, x in points:
        img[y, x] = value
    return img


def _centroid(img: np.ndarray, y: int, x: int, r: int) -> tuple[float, float]:
    patch = img[y - r : y + r + 1, x - r : x + r + 1, 1].astype(np.float64)
    patch = patch - np.median(img[..., 1])
    patch[patch < 0] = 0
    ys, xs = np.mgrid[y - r : y + r + 1, x - r : x + r + 1]
    return float((patch * ys).sum() / patch.sum()), float((patch * xs).sum() / patch.sum())


# ---------------------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------------------
def test_registry_matches_the_config_in_order():
    cfg = load_config()
    assert CORRUPTIONS == cfg.names
    assert len(CORRUPTIONS) == 9
    assert FAMILIES == {k: tuple(v) for k, v in cfg.families.items()}
    assert sorted(n for ms in FAMILIES.values() for n in ms) == sorted(CORRUPTIONS)
    for name in CORRUPTIONS:  # the public name is the kernel function's own name
        assert getattr(C, name).__name__ == name


def test_parameter_records_are_frozen_and_filled_from_the_config():
    p = corruption_params("rain_streaks", 2, config=V1)
    assert (p.density_per_mp, p.length_px, p.veil_sigma_px) == (350, 20, 0.8)
    assert p.length_jitter == (0.7, 1.3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.length_px = 3
    assert corruption_params("low_light", 3, config=V1).gain == 0.045


# ---------------------------------------------------------------------------------------------------------
# Contract, for every corruption
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", CORRUPTIONS)
@pytest.mark.parametrize("shape", [(17, 23), (23, 17), (1, 1), (2, 3), (5, 200), (200, 5)])
def test_contract_keeps_shape_and_dtype_on_any_size(name, shape):
    img = golden_frame(*shape)
    before = img.copy()
    out = apply_corruption(img, name, 3, "tiny", config=V1)
    assert out.shape == img.shape and out.dtype == np.uint8
    assert np.array_equal(img, before), "the input must not be modified"


@pytest.mark.parametrize("name", CORRUPTIONS)
def test_contract_same_key_same_bytes_and_severity_1_acts(name, frame):
    a = apply_corruption(frame, name, 1, "img-1", config=V1)
    b = apply_corruption(frame.copy(), name, 1, "img-1", config=V1)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, frame), f"{name} severity 1 leaves the frame unchanged"
    assert not np.array_equal(a, apply_corruption(frame, name, 2, "img-1", config=V1))


@pytest.mark.parametrize("name", CORRUPTIONS)
def test_contract_params_draw_kernel_layers_compose_to_apply(name, frame):
    """The three public layers: parameter record, draw (from the keyed stream) and kernel."""
    from aegis_data.engine.seeding import keyed_random

    params = corruption_params(name, 2, config=V1)
    draw = C.draw_params(name, params, *frame.shape[:2], keyed_random("img-1", name, 2, C.DEFAULT_SEED))
    assert np.array_equal(getattr(C, name)(frame, params, draw), apply_corruption(frame, name, 2, "img-1", config=V1))
    with pytest.raises(AegisError, match="unknown corruption 'fog'"):
        C.draw_params("fog", params, 8, 8, KeyedRandom("x"))


@pytest.mark.parametrize("name", RANDOM_CORRUPTIONS)
def test_contract_image_id_and_seed_change_the_draws(name, frame):
    a = apply_corruption(frame, name, 2, "img-1", config=V1)
    assert not np.array_equal(a, apply_corruption(frame, name, 2, "img-2", config=V1))
    assert not np.array_equal(a, apply_corruption(frame, name, 2, "img-1", seed=1, config=V1))
    assert np.array_equal(
        apply_corruption(frame, name, 2, 7, config=V1), apply_corruption(frame, name, 2, "7", config=V1)
    )


def test_turbidity_cast_draws_nothing(frame):
    a = apply_corruption(frame, "turbidity_cast", 2, "img-1", config=V1)
    assert np.array_equal(a, apply_corruption(frame, "turbidity_cast", 2, "other", seed=3, config=V1))


def test_full_size_4000x3000_frame_every_corruption():
    """One HERIDAL-size frame per corruption (a tiled golden frame, so content is realistic but cheap)."""
    tile = golden_frame(*GOLDEN_SIZES[0])
    big = np.ascontiguousarray(np.tile(tile, (13, 13, 1))[:3000, :4000])
    for name in CORRUPTIONS:
        out = apply_corruption(big, name, 3, "heridal-size", config=V1)
        assert out.shape == big.shape and out.dtype == np.uint8
        assert np.abs(out.astype(np.int16) - big).mean() > 1.0, name


# ---------------------------------------------------------------------------------------------------------
# Bad input: AegisError (a ValueError) with a message that says what was received and what is expected
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "image, match",
    [
        ([[[0, 0, 0]]], "must be a numpy array"),
        (np.zeros((4, 4, 3), np.float32), "dtype uint8.*got float32"),
        (np.zeros((4, 4), np.uint8), r"HxWx3 .*got shape \(4, 4\)"),
        (np.zeros((4, 4, 4), np.uint8), r"got shape \(4, 4, 4\)"),
        (np.zeros((0, 4, 3), np.uint8), "must not be empty"),
    ],
)
def test_bad_images_are_rejected(image, match):
    with pytest.raises(AegisError, match=match):
        apply_corruption(image, "low_light", 1, "x", config=V1)


def test_unknown_name_lists_the_valid_ones(frame):
    with pytest.raises(AegisError, match="unknown corruption 'fog'; expected one of: water_glare, .*dust_haze"):
        apply_corruption(frame, "fog", 1, "x", config=V1)


def test_a_name_the_given_suite_lacks_is_refused_against_that_suite(frame):
    full = V1
    storm_less = dataclasses.replace(full, corruptions={n: c for n, c in full.corruptions.items() if n != "low_light"})
    for call in (
        lambda: apply_corruption(frame, "low_light", 1, "a", config=storm_less),
        lambda: corruption_params("low_light", 1, storm_less),
        lambda: C.corrupt_with_stream(frame, "low_light", 1, KeyedRandom("k"), storm_less),
    ):
        with pytest.raises(
            AegisError, match=r"unknown corruption 'low_light'; expected one of: .*motion_blur, dust_haze$"
        ):
            call()
    assert corruption_params("motion_blur", 1, storm_less) == corruption_params("motion_blur", 1, config=V1)


def test_a_suite_built_in_python_with_a_foreign_parameter_is_refused():
    # A SuiteConfig made in Python skips the file schema; corruption_params' own key check is what stops it.
    full = V1
    spec = dataclasses.replace(
        full.corruptions["motion_blur"], fixed={**full.corruptions["motion_blur"].fixed, "bogus": 1}
    )
    odd = dataclasses.replace(full, corruptions={**full.corruptions, "motion_blur": spec})
    with pytest.raises(
        AegisError, match=r"motion_blur: config keys \['bogus'\] are not parameters of MotionBlurParams"
    ):
        corruption_params("motion_blur", 1, odd)


@pytest.mark.parametrize(
    "name, severity, match",
    [
        ("fog", 1, "unknown corruption 'fog'"),
        ("low_light", None, "`severity` must be 1, 2 or 3, got None"),
        ("water_glare", None, "`severity` must be 1, 2 or 3, got None"),
    ],
)
def test_the_stream_entry_point_refuses_bad_names_and_severities_under_a_scene_suite(frame, name, severity, match):
    # corrupt_with_stream is public (augmentation calls it): a generation-2 suite once let a bad name through to a
    # KeyError and a None severity to a TypeError instead of the one-line AegisError.
    from aegis_data.engine.scale import Scale

    with pytest.raises(AegisError, match=match):
        C.corrupt_with_stream(frame, name, severity, KeyedRandom("k"), load_config("aegis-v2"), Scale("object", 40.0))


@pytest.mark.parametrize("severity", [0, 4, -1, 1.0, True, "2", None])
def test_bad_severity(frame, severity):
    with pytest.raises(AegisError, match="`severity` must be 1, 2 or 3, got"):
        apply_corruption(frame, "smoke_haze", severity, "x", config=V1)


@pytest.mark.parametrize("image_id", [1.5, None, ["a"], False])
def test_bad_image_id(frame, image_id):
    with pytest.raises(AegisError, match="`image_id` must be a str or int"):
        apply_corruption(frame, "smoke_haze", 1, image_id, config=V1)


def test_errors_are_value_errors(frame):
    with pytest.raises(ValueError):
        apply_corruption(frame, "smoke_haze", 9, "x", config=V1)


# ---------------------------------------------------------------------------------------------------------
# Kernel math with fixed draws
# ---------------------------------------------------------------------------------------------------------
def test_to_uint8_rounds_half_up_and_clips():
    x = np.array([-0.2, 0.0, 0.5 / 255, 0.49 / 255, 1.5 / 255, 0.999, 1.0, 1.7])
    assert K.to_uint8(x).tolist() == [0, 0, 1, 0, 2, 255, 255, 255]


def test_turbidity_cast_follows_the_spec_formula(frame):
    p = corruption_params("turbidity_cast", 3, config=V1)
    x = frame.astype(np.float64) / 255.0
    j = (1 - p.alpha) * x + p.alpha * np.array(p.cast)
    mu = j.reshape(-1, 3).mean(axis=0)
    j = mu + p.contrast * (j - mu)
    y = (0.299 * j[..., 0] + 0.587 * j[..., 1] + 0.114 * j[..., 2])[..., None]
    ref = np.floor(np.clip(y + p.saturation * (j - y), 0, 1) * 255 + 0.5)
    got = apply_corruption(frame, "turbidity_cast", 3, "x", config=V1).astype(np.float64)
    assert np.abs(got - ref).max() <= 1


def test_haze_with_uniform_density_is_koschmieder(frame):
    """A constant noise grid gives f = 0.5, so t = t_mean everywhere: out = I t + A (1 - t)."""
    p = corruption_params("smoke_haze", 2, config=V1)
    flat = tuple(np.full(s, 0.3) for s in K.noise_grid_shapes(*frame.shape[:2], K.NoiseSpec(3, 3)))
    got = C.smoke_haze(frame, p, C.HazeDraw(flat)).astype(np.float64)
    ref = np.floor((frame / 255.0 * p.transmission + np.array(p.airlight) * (1 - p.transmission)) * 255 + 0.5)
    assert np.abs(got - ref).max() <= 1


def test_low_light_without_noise_is_the_gamma_model(frame):
    p = corruption_params("low_light", 1, config=V1)
    zero_ish = np.full(frame.shape, 32768, dtype=np.uint16)  # the table's smallest positive quantile
    got = C.low_light(frame, p, C.LowLightDraw(zero_ish)).astype(np.float64)
    lin = (frame / 255.0) ** p.gamma * p.gain * np.array([p.red_gain, 1.0, p.blue_gain])
    ref = np.floor(np.clip(lin, 0, 1) ** (1 / p.gamma) * 255 + 0.5)
    assert np.abs(got - ref).max() <= 1


def test_low_light_tables():
    lin = C.linear_table(2.2)
    assert lin[0] == 0.0 and lin[255] == 1.0 and np.all(np.diff(lin) > 0)
    enc = C.encode_table(2.2)
    assert enc.size == 2**20 + 1 and enc[0] == 0 and enc[-1] == 255 and np.all(np.diff(enc.astype(int)) >= 0)
    # Round trip: encoding the linear value of every level gives the level back.
    assert np.array_equal(enc[np.floor(lin * 2**20 + 0.5).astype(int)], np.arange(256))


def test_motion_blur_horizontal_is_a_box_mean():
    rng = KeyedRandom("mb")
    img = (rng.uniform((30, 40, 3)) * 255).astype(np.uint8)
    p = dataclasses.replace(corruption_params("motion_blur", 1, config=V1), length_px=130)  # 0.13 * 40 -> 5 px
    assert C.motion_kernel_length(p, 30, 40) == 5
    got = C.motion_blur(img, p, C.MotionDraw(0.0))
    pad = np.pad(img.astype(np.int64), ((0, 0), (2, 2), (0, 0)), mode="symmetric")
    ref = (sum(pad[:, k : k + 40] for k in range(5)) + 2) // 5
    assert np.array_equal(got, ref.astype(np.uint8))
    vertical = C.motion_blur(img, p, C.MotionDraw(90.0))
    assert np.array_equal(vertical, C.motion_blur(img.transpose(1, 0, 2), p, C.MotionDraw(0.0)).transpose(1, 0, 2))


@pytest.mark.parametrize("angle", [80.0, 100.0, 70.0, 8.0, 172.0])
def test_motion_blur_has_no_seams(angle):
    """A digital line's rounding phase would shift rows by up to half a pixel and jump every 1/slope rows;
    the phase-compensated unshear keeps the output smooth along the stripes (seams measured ~28 levels)."""
    x = np.arange(300)
    stripes = np.where((x // 6) % 2 == 0, 230, 30).astype(np.uint8)
    img = np.ascontiguousarray(np.broadcast_to(stripes[None, :, None], (240, 300, 3)))
    if abs(math.cos(math.radians(angle))) > 0.5:  # flat line: turn the stripes so the line crosses them
        img = np.ascontiguousarray(img.transpose(1, 0, 2))
    p = dataclasses.replace(corruption_params("motion_blur", 3, config=V1), length_px=100)
    out = C.motion_blur(img, p, C.MotionDraw(angle)).astype(np.float64)[..., 1]
    axis = 0 if abs(math.cos(math.radians(angle))) <= 0.5 else 1
    steps = np.abs(np.diff(out[40:-40, 40:-40], axis=axis)).mean(axis=1 - axis)
    assert steps.max() < 3.0


@pytest.mark.parametrize("size", [(17, 23), (240, 320), (750, 1000), (3000, 4000), (2250, 4000)])
def test_motion_kernel_length_is_odd(size):
    for sev in (1, 2, 3):
        n = C.motion_kernel_length(corruption_params("motion_blur", sev, config=V1), *size)
        assert n % 2 == 1 and n >= 3


@pytest.mark.parametrize("angle", [0.0, 12.0, 30.0, 45.0, 63.0, 90.0, 117.0, 135.0, 160.0, 179.0])
def test_motion_blur_smears_along_the_angle_and_keeps_the_centre(angle):
    img = _dot_image(81, 81, [(40, 40)])
    p = dataclasses.replace(corruption_params("motion_blur", 3, config=V1), length_px=300)  # 0.3 * 81 -> 25 px
    out = C.motion_blur(img, p, C.MotionDraw(angle))[..., 1].astype(np.float64)
    ys, xs = np.nonzero(out)
    wts = out[ys, xs]
    cy, cx = (wts * ys).sum() / wts.sum(), (wts * xs).sum() / wts.sum()
    assert abs(cy - 40) <= 0.75 and abs(cx - 40) <= 0.75  # content stays put
    cov = np.cov(np.stack([xs - cx, ys - cy]), aweights=wts)
    evals, evecs = np.linalg.eigh(cov)
    major = math.degrees(math.atan2(evecs[1, 1], evecs[0, 1])) % 180.0
    assert min(abs(major - angle), 180 - abs(major - angle)) < 4.0
    assert evals[1] > 20 * max(evals[0], 1e-9)  # a line, not a blob


def test_ripple_moves_content_by_at_most_the_amplitude():
    """At the 4000 px amplitude (0.35 px per 1000 -> 1.4 px) each dot moves by (-dx(y), -dy(x)) per axis."""
    h, w = 200, 260
    pts = [(y, x) for y in range(20, h - 20, 37) for x in range(20, w - 20, 41)]
    img = _dot_image(h, w, pts, background=20)
    amp = C._px(0.35, 3000, 4000)
    assert amp <= 1.4 + 1e-12
    lam = 150.0  # long enough that the shift is locally constant around each dot
    sin_y, _ = K.sin_cos_turns(np.arange(h) / lam + 0.3)
    _, cos_x = K.sin_cos_turns(np.arange(w) / lam + 0.3)
    out = C.ripple(img, amp * sin_y, amp * cos_x)
    for y, x in pts:
        cy, cx = _centroid(out, y, x, 3)
        assert abs(cy - y) <= 1.5 and abs(cx - x) <= 1.5
        assert abs(cx - (x - amp * sin_y[y])) < 0.2 and abs(cy - (y - amp * cos_x[x])) < 0.2


def test_inundation_full_water_without_tint_is_the_ripple():
    h, w = 120, 160
    img = _dot_image(h, w, [(60, 80), (30, 40)], background=30)
    p = dataclasses.replace(
        corruption_params("inundation", 3, config=V1), coverage=1.0, opacity=0.0, sparkle_strength=0.0
    )
    draw = C.draw_params("inundation", p, h, w, KeyedRandom("inund"))
    out = C.inundation(img, p, draw)
    amp = C._px(p.ripple_amplitude_px, h, w)
    lam = C._px(p.ripple_wavelength_px, h, w)
    sin_y, _ = K.sin_cos_turns(np.arange(h) / lam + draw.phase_turns)
    _, cos_x = K.sin_cos_turns(np.arange(w) / lam + draw.phase_turns)
    assert np.abs(out.astype(int) - C.ripple(img, amp * sin_y, amp * cos_x)).max() <= 1


def test_rain_without_streaks_is_the_veil_and_keeps_dots_in_place():
    img = _dot_image(101, 121, [(50, 60)], background=40)
    p = corruption_params("rain_streaks", 3, config=V1)
    empty = np.zeros(0)
    out = C.rain_streaks(img, p, C.RainDraw(70.0, empty, empty, empty, empty, empty))
    assert np.array_equal(out, C.rain_veil(img, p))
    cy, cx = _centroid(out, 50, 60, 4)
    assert abs(cy - 50) < 0.05 and abs(cx - 60) < 0.05


def test_rain_streaks_are_anti_aliased_and_conserve_coverage():
    h, w = 120, 100
    one = lambda angle, x: C.RainDraw(
        angle,
        np.array([x]),
        np.array([60.0]),
        np.array([angle]),  # noqa: E731
        np.array([40.0]),
        np.array([0.3]),
    )
    layer = C.rasterize_streaks(h, w, one(70.0, 50.3), 3, 0.6).astype(np.float64)
    # Mass: intensity x rows crossed (length * sin(angle)); the unit-sum blur keeps it.
    assert layer.sum() == pytest.approx(0.3 * 40 * math.sin(math.radians(70)), rel=0.02)
    raw = C.rasterize_streaks(h, w, one(70.0, 50.3), 1, 1e-9)  # effectively unblurred
    levels = np.unique(raw[raw > 0])
    assert levels.size > 10, "an aliased line would have a single level"
    # A vertical streak centred on a pixel column puts all its weight in that column.
    vert = C.rasterize_streaks(h, w, one(90.0, 50.0), 1, 1e-9)
    assert np.count_nonzero(vert.sum(axis=0) > 1e-3) == 1


def test_rain_streak_pixels_grow_with_severity(frame):
    """Streak pixels (luma above the veil-only image by more than 2/255) increase from severity 1 to 3."""
    fractions = []
    for sev in (1, 2, 3):
        out = apply_corruption(frame, "rain_streaks", sev, "rain", config=V1)
        veil = C.rain_veil(frame, corruption_params("rain_streaks", sev, config=V1))
        assert np.all(out >= veil)  # screen blending only brightens
        fractions.append(float(np.mean(_luma(out) - _luma(veil) > 2 / 255)))
    assert 0 < fractions[0] < fractions[1] < fractions[2]


@pytest.mark.parametrize("sigma", [0.009, 0.128, 0.6, 2.0, 4.8])
def test_discrete_gaussian_has_variance_sigma_squared_and_always_blurs(sigma):
    k = K.discrete_gaussian(sigma)
    n = np.arange(k.size) - k.size // 2
    assert k[k.size // 2 + 1] >= 1  # any sigma > 0 blurs
    var = float((k * n * n).sum() / k.sum())
    assert var == pytest.approx(sigma * sigma, rel=0.05, abs=3e-5)
    assert np.array_equal(k, k[::-1])


@pytest.mark.parametrize("sigma", [2.5, 6.0, 20.0, 47.0])
def test_blur_mask_matches_a_gaussian_edge(sigma):
    m = np.zeros((300, 400), bool)
    m[:, 200:] = True
    got = K.blur_mask(m, sigma)[150].astype(np.float64) / 65535
    ref = np.array([0.5 * (1 + math.erf((x - 199.5) / (sigma * math.sqrt(2)))) for x in range(400)])
    assert np.abs(got - ref)[50:350].max() < 0.01


@pytest.mark.parametrize("sigma", [0.4, 2.0, 5.1])
def test_convolve_exact_float32_row_pass_gives_the_float64_integers(sigma):
    rng = np.random.default_rng(9)
    k = K.discrete_gaussian(sigma)
    mask = rng.random((97, 131)) < 0.3
    image = rng.integers(0, 256, (61, 83, 3), dtype=np.uint8)
    blocks = K.block_sum(mask, 4)  # integers <= 16
    for arr, bound in ((mask, 1), (image, 255), (blocks, 16)):
        assert bound * k.sum() <= 2**24  # the float32 path is taken
        assert np.array_equal(K.convolve_exact(arr, k, max_abs=bound), K.convolve_exact(arr, k))


def test_cached_tables_are_read_only():
    p = corruption_params("low_light", 2, config=V1)
    tables = (
        C.encode_table(p.gamma),
        C.linear_table(p.gamma),
        *C._low_light_tables(p),
        C._normal_table_f32(),
        C._transmission_table(0.5, 0.2),
        C._grain_table(0.03),
        C._bloom_table(0.6),
    )
    for table in tables:
        with pytest.raises(ValueError):
            table[0] = 0


def test_value_noise_spans_the_unit_range_and_masks_hit_their_coverage():
    spec = K.NoiseSpec(4, 6)
    grids = C._draw_noise(KeyedRandom("vn"), "n", 300, 400, spec)
    q = K.value_noise(300, 400, spec, grids)
    assert K.noise_work_factor(300, 400, spec) == 2  # evaluated at half resolution, upsampled bilinearly
    assert q.dtype == np.uint16 and q.min() < 650 and q.max() > 65535 - 650
    small = K.value_noise(90, 120, spec, C._draw_noise(KeyedRandom("vn"), "n", 90, 120, spec))
    assert small.min() == 0 and small.max() == 65535  # evaluated at every pixel: exact min-max
    for c in (0.02, 0.18, 0.6):
        assert np.mean(K.top_fraction_mask(q, c)) == pytest.approx(c, abs=0.002)


def test_sin_cos_turns_matches_libm():
    t = np.linspace(-2.0, 2.0, 10001)
    s, c = K.sin_cos_turns(t)
    assert np.abs(s - np.sin(2 * np.pi * t)).max() < 1e-14
    assert np.abs(c - np.cos(2 * np.pi * t)).max() < 1e-14


def test_dust_and_smoke_differ_by_airlight_chromaticity():
    """At severity 3 dust's brown airlight lifts R/B far above smoke's neutral grey on every golden frame."""
    for h, w in GOLDEN_SIZES:
        f = golden_frame(h, w)
        ratio = {}
        for name in ("smoke_haze", "dust_haze"):
            o = apply_corruption(f, name, 3, "chroma", config=V1).reshape(-1, 3).astype(np.float64)
            ratio[name] = o[:, 0].mean() / o[:, 2].mean()
        assert ratio["smoke_haze"] < 1.05 and ratio["dust_haze"] > 1.4


def test_the_unchanged_note_of_sun_glint_names_a_missing_sun_instead_of_failing():
    # A Scene made in Python may lack the sun's elevation (estimate_scene always draws one): the note formatted None
    # with :g, a TypeError where `aegis corrupt` prints why an image came out unchanged.
    from aegis_data.engine.scene import estimate_scene

    v2 = load_config("aegis-v2")
    glare = next(n for n in v2.names if v2.corruptions[n].model_name == "sun_glint")
    water = np.zeros((60, 80), bool)
    water[30:] = True
    scene = estimate_scene(golden_frame(60, 80), 40.0, v2.camera, water_mask=water)
    low = dataclasses.replace(scene, sun_elevation_deg=-5.0)
    assert C.unchanged_reason(glare, v2, low) == "the sun is at or below the horizon (elevation -5 deg): no glint"
    unknown = dataclasses.replace(scene, sun_elevation_deg=None)
    assert C.unchanged_reason(glare, v2, unknown) == "the scene gives no sun elevation: no glint"
    assert C.unchanged_reason(glare, v2, dataclasses.replace(scene, sun_elevation_deg=30.0)) is None


def test_every_generation_2_model_lists_its_physical_ladder():
    # One row of corruptions._SCENE_MODELS per model serves the kernel, draw, cost and ladder; aegis-v2 uses them all.
    from aegis_data.engine.scene import gsd_from_person_px

    v2 = load_config("aegis-v2")
    assert {v2.corruptions[n].model_name for n in v2.names} == set(C._SCENE_MODELS)
    for name in v2.names:
        plain, at_unit = C.physical_ladder(name, v2), C.physical_ladder(name, v2, 60.0)
        assert len(plain) == len(at_unit) == 3 and all(plain), name
        for a, b in zip(plain, at_unit):  # a person unit adds the smear in px, where there is a smear
            assert ("smear_px" in b) == ("smear_m" in a) and "smear_px" not in a, name
            if "smear_m" in a:
                assert b["smear_px"] == round(a["smear_m"] / gsd_from_person_px(60.0), 2)
    assert C.physical_ladder("motion_blur", load_config("aegis-v1")) == []
