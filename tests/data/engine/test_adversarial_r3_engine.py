"""Reliability round 3, the corruption engine's bounds (issue 28, items 2, 4 and the engine part of 11).

Each case reproduces what an adversarial user saw: a long motion blur that lost brightness (16-bit sums), schema-valid
configs that an object-scale unit turned into an OOM, a minute-long render or a traceback, and a person unit the
docs allow that the engine refused. Small frames throughout; the hostile cases must fail before any pixel work.
"""

from __future__ import annotations

import math
import re
import tracemalloc

import cv2
import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.engine import corruptions as C
from aegis_data.engine import kernels as K
from aegis_data.engine.config import config_from_bytes, load_config
from aegis_data.engine.corruptions import CORRUPTIONS, apply_corruption
from aegis_data.engine.scale import Scale, resolve_scale
from aegis_data.errors import AegisError
from tests import REPO_ROOT
from tests.conftest import assert_one_line_error

REPO = REPO_ROOT
COMPILED = K.CKERNELS
# These repros and budget bounds are aegis-v1's shipped suite and kernels (frame scale included): pinned.
V1 = load_config("aegis-v1")
SUITE_V1 = ["--suite", "aegis-v1"]
runner = CliRunner()


def _backends():
    """The backends this build has: the compiled loops (when built) and the NumPy code."""
    return [COMPILED, None] if COMPILED is not None else [None]


def _on_each_backend(fn):
    """fn() once per backend (compiled, NumPy), the results in that order."""
    results = []
    try:
        for backend in _backends():
            K.CKERNELS = backend
            results.append(fn())
    finally:
        K.CKERNELS = COMPILED
    return results


def _suite(name: str, **fixed) -> object:
    """The installed suite with ``name``'s parameters in ``fixed`` set for every severity (schema-valid values)."""
    raw = yaml.safe_load(V1.raw)
    spec = raw["corruptions"][name]
    for key, value in fixed.items():
        spec["severities"].pop(key, None)
        spec["fixed"][key] = value
    return config_from_bytes(yaml.safe_dump(raw, sort_keys=False).encode(), f"hostile-{name}.yaml")


# ==========================================================================================================
# Item 2: motion_blur beyond 257 px summed in 16 bits (saturated), so long blurs lost brightness
# ==========================================================================================================
def _shear_box_reference(image: np.ndarray, length: int, slope: float) -> np.ndarray:
    """``_shear_box`` written out from its definition, in int64 (no 16-bit step anywhere): the sum along the digital
    line through each pixel of a mirrored frame, read at x - 1, x, x + 1 with the phase weights in 1/64, divided
    by 64 L rounding half up."""
    h, w = image.shape[:2]
    r = length // 2
    pad_x = int(math.ceil(r * abs(slope))) + 2
    padded = np.pad(image, ((r, r), (pad_x, pad_x), (0, 0)), mode="symmetric").astype(np.int64)
    off = np.floor((np.arange(h + 2 * r, dtype=np.float64) - r) * slope + 0.5).astype(np.int64)
    ys = np.arange(h)
    phase = ys * slope - off[r + ys]
    w_left = np.floor(np.maximum(phase, 0.0) * 64.0 + 0.5).astype(np.int64)
    w_right = np.floor(np.maximum(-phase, 0.0) * 64.0 + 0.5).astype(np.int64)
    w_mid = 64 - w_left - w_right
    cols = np.arange(-1, w + 1)  # x - 1 .. x + 1 for every x
    sums = np.zeros((h, w + 2, 3), dtype=np.int64)
    for j in range(2 * r + 1):
        rows = ys + j
        at = pad_x + cols[None, :] + (off[rows] - off[ys + r])[:, None]
        sums += padded[rows[:, None], at]
    acc = sums[:, 1:-1] * w_mid[:, None, None] + sums[:, :-2] * w_left[:, None, None]
    acc += sums[:, 2:] * w_right[:, None, None] + 32 * length
    return (acc // (64 * length)).astype(np.uint8)


@pytest.mark.parametrize(
    "length,slope", [(9, 0.37), (255, 0.41), (257, -0.6), (259, 0.81), (333, -1.0), (601, 0.2), (999, 0.66)]
)
def test_the_line_sums_are_exact_at_every_length_on_both_backends(length, slope):
    # Bright (mean 253.5): from 259 px on, a 16-bit sum overflows. The texture keeps every phase weight in play; bands
    # of 16 rows make several sheared bands per frame.
    img = np.random.default_rng(length).integers(252, 256, (23, 31, 3), dtype=np.uint8)
    want = _shear_box_reference(img, length, slope)
    for band in (256, 16):
        for got in _on_each_backend(lambda: C._shear_box(img, length, slope, band=band)):
            assert np.array_equal(got, want), (band, int((got != want).sum()))


def test_a_long_motion_blur_keeps_a_constant_frame_constant():
    """The issue's repro: a constant 250 frame came out 197 at --person-px 200 s3 (333 px), 20 at 2000 (3333 px),
    218 on a 12,000-px frame at frame scale (301 px)."""
    flat = np.full((96, 128, 3), 250, np.uint8)
    for person_px in (200.0, 2000.0):
        scale = Scale("object", person_px)
        for out in _on_each_backend(lambda: apply_corruption(flat, "motion_blur", 3, "a", scale=scale, config=V1)):
            assert np.unique(out).tolist() == [250], person_px
    wide = np.full((8, 12000, 3), 250, np.uint8)
    for out in _on_each_backend(lambda: apply_corruption(wide, "motion_blur", 3, "a", config=V1)):
        assert np.unique(out).tolist() == [250]


# ==========================================================================================================
# Item 11 (engine part): the largest person unit on a tiny frame, and the documented gsd bounds
# ==========================================================================================================
def test_aegis_corrupt_runs_on_a_32px_image_at_the_largest_person_unit(tmp_path):
    """At P = 2000 the shipped inundation s3 feathers its shore over 2000 px, a block sum of 666 px blocks on a
    32x32 image: the compiled block sum refused factors above 16x the frame (a ValueError traceback)."""
    src = tmp_path / "tiny.png"
    cv2.imwrite(str(src), np.random.default_rng(1).integers(0, 256, (32, 32, 3), dtype=np.uint8))
    for name in ("inundation", "water_glare"):
        r = runner.invoke(
            app,
            [
                "corrupt",
                str(src),
                *SUITE_V1,
                "-c",
                name,
                "-s",
                "3",
                "-o",
                str(tmp_path / f"{name}.png"),
                "--scale",
                "object",
                "--person-px",
                "2000",
            ],
        )
        assert r.exit_code == 0, r.output
        assert cv2.imread(str(tmp_path / f"{name}.png")).shape == (32, 32, 3)


@pytest.mark.parametrize("shape", [(1, 1), (32, 32), (3, 90)])
def test_every_shipped_corruption_renders_tiny_frames_at_both_ends_of_the_person_unit(shape):
    img = np.random.default_rng(shape[1]).integers(0, 256, (*shape, 3), dtype=np.uint8)
    for person_px in (4.0, 2000.0):
        for name in CORRUPTIONS:
            for sev in (1, 3):
                outs = _on_each_backend(
                    lambda: apply_corruption(img, name, sev, "t", config=V1, scale=Scale("object", person_px))
                )
                assert all(o.shape == img.shape and np.array_equal(o, outs[0]) for o in outs), (name, sev, person_px)


def test_block_sums_far_beyond_the_frame_match_on_both_backends():
    mask = np.random.default_rng(3).random((32, 29)) < 0.4
    for factor in (512, 700, 2001):  # past the compiled loop's old limit of 16x the long side (512)
        a = _on_each_backend(lambda: K.block_sum(mask, factor))
        assert all(x.dtype == np.int64 and np.array_equal(x, a[0]) for x in a)
        # One block covering the mirrored tiling of the frame: every pixel counted by its multiplicity.
        assert a[0].shape == (1, 1)


def test_the_documented_gsd_bounds_are_the_codes_and_inclusive():
    text = (REPO / "docs" / "CORRUPTIONS.md").read_text()
    lo, hi = (
        float(v)
        for v in re.search(r"The gsd must give a unit of 4 to 2000 px: ([\d.]+) to ([\d.]+) cm/px", text).groups()
    )
    for gsd, unit in ((lo, 2000.0), (hi, 4.0)):
        assert resolve_scale("object", gsd_cm_per_px=gsd).person_px == unit
    for bad in (lo - 1e-6, hi + 1e-6):
        with pytest.raises(AegisError, match=rf"^`gsd_cm_per_px` must lie in \[{lo}, {hi}\] cm per px"):
            resolve_scale("object", gsd_cm_per_px=bad)


# ==========================================================================================================
# Item 4: schema-valid configs that an object-scale unit turned into an OOM, minutes of work or a traceback
# ==========================================================================================================
HOSTILE = {
    # name: (corruption, fixed parameters, person unit, frame (h, w), what the refusal names)
    "motion length_px 500 at P=2000 (23 GB)": (
        "motion_blur",
        {"length_px": 500},
        2000.0,
        (64, 64),
        "motion blur length 66,667 px",
    ),
    "rain veil_sigma_px 50 at P=2000 (17-60 s on 64x64)": (
        "rain_streaks",
        {"veil_sigma_px": 50},
        2000.0,
        (64, 64),
        "veil blur kernel 40,001 px",
    ),
    "rain density 20000, length 500 at P=4 (5 s/MP compiled, 260 s/MP NumPy)": (
        "rain_streaks",
        {"density_per_mp": 20000, "length_px": 500},
        4.0,
        (1000, 1000),
        "streak pixels",
    ),
    "bloom 200 at P=2000 (ValueError traceback)": (
        "water_glare",
        {"bloom_sigma_px": 200},
        2000.0,
        (64, 64),
        "glare bloom kernel 160,001 px",
    ),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_each_hostile_render_is_refused_before_any_work_with_one_line(case, monkeypatch):
    name, fixed, person_px, (h, w), named = HOSTILE[case]
    cfg = _suite(name, **fixed)
    img = np.zeros((h, w, 3), np.uint8)

    def no_draw(*args, **kwargs):
        raise AssertionError("drew before the budget check")

    monkeypatch.setattr(C, "draw_params", no_draw)
    with pytest.raises(AegisError) as err:
        apply_corruption(img, name, 1, "h", config=cfg, scale=Scale("object", person_px))
    msg = str(err.value)
    assert (
        "\n" not in msg
        and msg.startswith(f"{name} s1 at person unit {person_px:g} px on a {w}x{h} frame exceeds the render budget: ")
        and named in msg
    ), msg


def test_a_hostile_build_stops_on_its_first_render_with_one_line(tmp_path):
    from aegis_data.sources import load_source
    from aegis_data.split.build import build_splits

    ds = load_source("synthetic", n=2, size="64")
    with pytest.raises(
        AegisError,
        match="^motion_blur s1 at person unit 2000 px on a 64x64 frame exceeds the render budget: motion blur length",
    ):
        build_splits(
            ds,
            tmp_path / "o",
            corruptions=["motion_blur"],
            severities=(1,),
            workers=1,
            limit=1,
            config=_suite("motion_blur", length_px=500),
            scale="object",
            person_px=2000,
        )
    assert not (tmp_path / "o" / "manifest.json").exists()


def _budget_ratios(scale, h: int, w: int) -> dict:
    from aegis_data.engine import budget as B

    lim = B.limits(h, w)
    worst = {"length": 0.0, "streak": 0.0, "work": 0.0, "memory": 0.0}
    for name in CORRUPTIONS:
        for sev in (1, 2, 3):
            cost = C.render_cost(C.corruption_params(name, sev, scale=scale, config=V1), h, w)
            ratios = {
                "length": max([px for _, px in cost.lengths], default=0.0) / lim.length_px,
                "streak": cost.streak_px / lim.streak_px,
                "work": cost.work / lim.work,
                "memory": cost.peak_bytes / lim.peak_bytes,
            }
            worst = {k: max(worst[k], ratios[k]) for k in worst}
    return worst


@pytest.mark.parametrize("person_px", [None, 10.0, 20.0, 60.0, 120.0, 300.0, 500.0])
@pytest.mark.parametrize("shape", [(3000, 4000), (1080, 1920), (640, 640), (32, 32)])
def test_the_shipped_suite_at_realistic_sizes_stays_far_inside_the_budget(person_px, shape):
    """Frame scale on frames up to 4000x3000, object scale with person units up to a few hundred px: every length,
    streak count and filter step under a quarter of its bound; memory (an upper estimate, 2-30x the arrays a render
    allocates in test_the_predicted_memory_bounds_what_a_render_allocates) under half of it."""
    scale = Scale() if person_px is None else Scale("object", person_px)
    worst = _budget_ratios(scale, *shape)
    assert worst["length"] < 0.25 and worst["streak"] < 0.25 and worst["work"] < 0.25, worst
    assert worst["memory"] < 0.5, worst


def test_frame_scale_stays_inside_the_budget_up_to_the_readers_pixel_limit():
    """Large frames at frame scale, up to the readers' 200 MP, keep rendering."""
    for shape in [(9000, 12000), (10000, 20000), (4000, 50000), (14000, 14000)]:
        assert max(_budget_ratios(Scale(), *shape).values()) < 1.0, shape


@pytest.mark.parametrize(
    "case",
    [
        ("motion_blur", 3, 2000.0, (32, 32)),
        ("motion_blur", 3, 300.0, (120, 90)),
        ("rain_streaks", 3, 4.0, (300, 400)),
        ("water_glare", 1, 2000.0, (200, 150)),
        ("inundation", 3, 4.0, (300, 400)),
        ("dust_haze", 3, 4.0, (300, 400)),
        ("low_light", 1, None, (300, 400)),
        ("rain_streaks", 1, 1000.0, (100, 700)),
    ],
)
def test_the_predicted_memory_bounds_what_a_render_allocates(case):
    """The prediction is an upper estimate: at least the peak of the NumPy arrays a render allocates (traced), on
    both backends."""
    name, sev, person_px, (h, w) = case
    scale = Scale() if person_px is None else Scale("object", person_px)
    predicted = C.render_cost(C.corruption_params(name, sev, scale=scale, config=V1), h, w).peak_bytes
    img = np.random.default_rng(h).integers(0, 256, (h, w, 3), dtype=np.uint8)
    # Cached tables are built once, outside the measure.
    apply_corruption(img, name, sev, "warm", scale=scale, config=V1)
    for backend in _backends():
        try:
            K.CKERNELS = backend
            tracemalloc.start()
            apply_corruption(img, name, sev, "m", scale=scale, config=V1)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            K.CKERNELS = COMPILED
        assert peak <= predicted, (backend, peak, predicted)


def test_the_chunked_numpy_streak_walk_gives_the_one_pass_layer(monkeypatch):
    """The NumPy rasteriser walks streaks in chunks to bound its memory; the integer weights add up to the same
    layer as one pass (and as the compiled loop) whatever the chunk size."""
    from aegis_data.engine import budget as B

    params = C.corruption_params("rain_streaks", 3, scale=Scale("object", 10.0), config=V1)
    h, w = 120, 160
    draw = C.draw_params("rain_streaks", params, h, w, C.KeyedRandom("chunks"))
    assert draw.x.size > 100

    def layer():
        return C.rasterize_streaks(h, w, draw, params.streak_blur_ksize, params.streak_blur_sigma)

    one_pass = _on_each_backend(layer)
    monkeypatch.setattr(B, "streak_chunk_steps", lambda h, w: 7)  # a chunk per streak or two
    for got in _on_each_backend(layer):
        assert all(np.array_equal(got, ref) for ref in one_pass)


def test_the_documented_budget_is_the_codes():
    from aegis_data.engine import budget as B

    text = (REPO / "docs" / "CORRUPTIONS.md").read_text()
    section = text.split("## Render budget", 1)[1].split("\n## ", 1)[0]
    rows = {
        line.split("|")[1].strip(): line.split("|")[2].strip()
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith("| bound")
    }
    assert rows["length"] == f"{B.MAX_LENGTH_PX:,} px"
    assert rows["streak pixels"] == f"{B.STREAK_PX_PER_PIXEL} per frame pixel (never under {B.STREAK_PX_FLOOR:,})"
    assert rows["filter work"] == f"{B.WORK_PER_PIXEL:,} steps per frame pixel (never under 2³⁰)"
    assert B.WORK_FLOOR == 1 << 30 and B.MEMORY_FIXED_BYTES == 1 << 30
    assert rows["peak memory"] == f"1 GiB + {B.MEMORY_PER_PIXEL} bytes per frame pixel"
    splits = (REPO / "docs" / "SPLITS.md").read_text()
    assert f"no length beyond {B.MAX_LENGTH_PX:,} px" in splits
    assert f"at most 1 GiB + {B.MEMORY_PER_PIXEL} bytes per pixel of memory" in splits


def test_a_ripple_reaching_past_16_bit_coordinates_is_refused_not_wrapped():
    """The remap's int16 source columns wrapped past 32767: a 32000-px frame rippled by 1600 px (ripple_amplitude_px
    50, schema-valid, at frame scale) read its right edge from the clamped left edge, silently."""
    img = np.zeros((2, 32000, 3), np.uint8)
    img[:, -1000:] = 200
    with pytest.raises(AegisError, match=r"^inundation: a ripple of up to 1600 px on a 32000x2 frame reaches beyond"):
        C.ripple(img, np.array([1600.0, 1600.0]), np.zeros(32000))
    out = C.ripple(img, np.array([700.0, -700.0]), np.zeros(32000))  # within 32767: as before
    assert out[0, -1].tolist() == [200] * 3 and out[1, 0].tolist() == [0] * 3


def test_aegis_corrupt_prints_the_budget_refusal_as_one_line(tmp_path):
    """The shipped rain s3 at the largest unit on a 640x640 image: a 961-px veil kernel, beyond the work bound."""
    src = tmp_path / "f.png"
    cv2.imwrite(str(src), np.zeros((640, 640, 3), np.uint8))
    r = runner.invoke(
        app,
        [
            "corrupt",
            str(src),
            *SUITE_V1,
            "-c",
            "rain_streaks",
            "-s",
            "3",
            "-o",
            str(tmp_path / "o.png"),
            "--scale",
            "object",
            "--person-px",
            "2000",
        ],
    )
    assert_one_line_error(
        r, "rain_streaks s3 at person unit 2000 px on a 640x640 frame exceeds the render budget", "filter steps"
    )
    assert not (tmp_path / "o.png").exists()
