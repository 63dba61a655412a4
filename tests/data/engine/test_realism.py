"""Camera-realism statistics (aegis_data.engine.realism) on synthetic images with known answers, and the
real-versus-rendered report on a tiny split (plus a smoke test on real HERIDAL frames when they are on this
machine). The `aegis realism` command: tests/cli/test_cli_realism.py."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.engine import realism as R
from aegis_data.errors import AegisError
from aegis_data.split import measure

runner = CliRunner()
REAL_FRAMES = Path("/work/shared/real-frames/heridal")
# Luma of i.i.d. per-channel noise of std s has std s * |(.299, .587, .114)|; rounding to uint8 adds 1/12 DN^2
# per channel.
Y_NORM = math.sqrt(0.299**2 + 0.587**2 + 0.114**2)


def normal(seed: int, shape) -> np.ndarray:
    return np.random.Generator(np.random.PCG64(seed)).standard_normal(shape)


def to_uint8(values: np.ndarray) -> np.ndarray:
    v = np.clip(np.floor(values + 0.5), 0, 255).astype(np.uint8)
    return np.repeat(v[..., None], 3, axis=2) if v.ndim == 2 else v


def grey_noise(sigma: float, level: float = 120.0, size: int = 512, seed: int = 1) -> np.ndarray:
    """The same noise in R, G and B: luma noise of std sigma, no chroma noise."""
    return to_uint8(level + sigma * normal(seed, (size, size)))


def textured_background(size: int = 512) -> np.ndarray:
    """Edges (a grid of flat grey patches), a smooth gradient and, on a quarter of the frame, a fine texture."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
    base = 40 + 80 * xx / size + 30 * np.sin(yy / 90.0)
    cells = (np.arange(64).reshape(8, 8) * 37 % 5) * 25.0
    base += np.kron(cells, np.ones((size // 8, size // 8)))
    texture = 25 * np.sin(2 * np.pi * xx / 5.0) * np.sin(2 * np.pi * yy / 7.0)
    base[: size * 3 // 5, size // 2 :] += texture[: size * 3 // 5, size // 2 :]
    return base


# --- 1. noise curve -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("sigma", [1.0, 3.0, 8.0])
def test_noise_sigma_of_white_noise_on_a_flat_field(sigma):
    expected = math.sqrt(sigma**2 + 1 / 12)  # + the uint8 rounding
    curve = R.noise_curve(grey_noise(sigma))
    assert curve.noise_sigma == pytest.approx(expected, rel=0.03)
    k = int(120 // R.BIN_WIDTH_DN)
    assert curve.centres[k] == 120.0 and curve.counts[k] > 100
    assert curve.sigma[k] == pytest.approx(expected, rel=0.03)
    assert R.noise_sigma(grey_noise(sigma)) == curve.noise_sigma


def test_noise_sigma_of_per_channel_noise_is_the_luma_std():
    rgb = to_uint8(120 + 4.0 * normal(2, (512, 512, 3)))
    assert R.noise_sigma(rgb) == pytest.approx(math.sqrt(16 + 1 / 12) * Y_NORM, rel=0.03)


@pytest.mark.parametrize("sigma", [1.0, 2.0, 4.0])
def test_noise_sigma_on_a_textured_background_ignores_edges_gradients_and_texture(sigma):
    base = textured_background()
    rgb = to_uint8(base + sigma * normal(3, base.shape))
    assert R.noise_sigma(rgb) == pytest.approx(math.sqrt(sigma**2 + 1 / 12), rel=0.05)
    # The textured brightness range has no flat block: there the curve is an upper bound, far above the noise.
    assert np.nanmax(R.noise_curve(rgb).sigma) > 3 * sigma


def test_noise_sigma_is_monotone_in_the_noise():
    base = textured_background()
    field = normal(4, base.shape)
    values = [R.noise_sigma(to_uint8(base + s * field)) for s in (0.5, 1, 2, 3, 5, 8, 13)]
    assert all(a < b for a, b in zip(values, values[1:])), values


def test_the_curve_follows_signal_dependent_noise():
    """Shot-noise-like sigma = 0.5 sqrt(level): each bin reads the sigma of its brightness."""
    yy, xx = np.mgrid[0:512, 0:1024].astype(np.float64)
    level = 20 + 200 * xx / 1024  # a horizontal ramp: every bin gets blocks
    rgb = to_uint8(level + 0.5 * np.sqrt(level) * normal(5, level.shape))
    curve = R.noise_curve(rgb)
    for centre, sigma, count in zip(curve.centres, curve.sigma, curve.counts):
        if count >= 50:
            assert sigma == pytest.approx(math.sqrt(0.25 * centre + 1 / 12), rel=0.08), centre


def test_clipped_blocks_and_letterbox_bars_are_not_flat_blocks():
    noisy = grey_noise(3.0, size=256)
    padded = np.zeros((256 + 2 * 64, 256, 3), np.uint8)
    padded[64:-64] = noisy
    padded[:16, :, :] = 255  # a blown-out strip as well
    assert R.noise_sigma(padded) == pytest.approx(R.noise_sigma(noisy), rel=0.05)
    assert R.letterbox_region(padded) == (0, 0, 256, 256 + 64)  # the white strip is lit: only the bottom bar goes
    bars = np.zeros_like(padded)
    bars[64:-64] = noisy
    assert R.letterbox_region(bars) == (0, 64, 256, 256)
    assert R.noise_curve(bars, (0, 64, 256, 256)) == R.noise_curve(noisy)


def test_region_is_checked():
    rgb = grey_noise(2.0, size=64)
    for bad in [(0, 0, 65, 64), (-1, 0, 10, 10), (0, 0, 0, 5), (0.5, 0, 10, 10), "abcd", (1, 2, 3)]:
        with pytest.raises(AegisError, match="`region` must be 4 integers"):
            R.noise_curve(rgb, bad)
    with pytest.raises(AegisError, match="HxWx3 uint8"):
        R.noise_sigma(np.zeros((8, 8), np.uint8))


def test_tiny_and_noise_free_images():
    assert math.isnan(R.noise_sigma(grey_noise(2.0, size=7)))  # no whole block
    flat = np.full((64, 64, 3), 90, np.uint8)
    assert R.noise_sigma(flat) == 0.0
    corr = R.noise_autocorrelation(flat)
    assert math.isnan(corr.mean) and corr.n_blocks > 0
    assert math.isnan(R.chroma_luma_noise_ratio(flat).ratio)
    assert math.isnan(R.edge_width(flat))


def test_pooled_curves_weight_bins_by_their_blocks():
    a, b = R.noise_curve(grey_noise(2.0, size=256, seed=6)), R.noise_curve(grey_noise(6.0, size=512, seed=7))
    pooled = R.pool_noise_curves([a, b])
    k = int(120 // R.BIN_WIDTH_DN)
    na, nb = a.counts[k], b.counts[k]
    assert pooled.counts[k] == na + nb
    assert pooled.sigma[k] == pytest.approx(math.sqrt((na * a.sigma[k] ** 2 + nb * b.sigma[k] ** 2) / (na + nb)))


# --- 2. autocorrelation -------------------------------------------------------------------------------------
def test_white_noise_has_no_lag1_correlation():
    for sigma in (2.0, 8.0):
        corr = R.noise_autocorrelation(grey_noise(sigma, size=1024))
        assert abs(corr.horizontal) < 0.015 and abs(corr.vertical) < 0.015, corr
        assert corr.mean == pytest.approx((corr.horizontal + corr.vertical) / 2)


def test_the_plane_residual_alone_would_read_white_noise_as_negatively_correlated():
    """The bias the estimator corrects: the raw lag-1 ratio of the plane residual is -0.039 for white noise."""
    a0, a, b0, b = R._lag_moments()
    assert a0 == pytest.approx(61.0)
    assert b0[R.LAGS.index((1, 0))] / a0 == pytest.approx(-0.0389, abs=1e-3)


def test_binomially_blurred_noise_reads_its_analytic_correlation():
    """White noise blurred by [1 2 1]/4 in x and y: lag-1 correlation (k*k)(1) / (k*k)(0) = 4/6 per axis, diluted
    by the uint8 rounding (1/12 DN^2 of white noise)."""
    sigma = 20.0
    k = np.array([1.0, 2.0, 1.0]) / 4.0
    noise = cv2.sepFilter2D(sigma * normal(8, (1024, 1024)), cv2.CV_64F, k, k, borderType=cv2.BORDER_REFLECT)
    var = (sigma * 6 / 16) ** 2
    expected = (2 / 3) * var / (var + 1 / 12)
    rgb = to_uint8(128 + noise)
    corr = R.noise_autocorrelation(rgb)
    assert corr.horizontal == pytest.approx(expected, abs=0.02)
    assert corr.vertical == pytest.approx(expected, abs=0.02)
    # and sigma is the per-pixel std of that correlated noise, not only its high frequencies
    assert R.noise_sigma(rgb) == pytest.approx(math.sqrt(var + 1 / 12), rel=0.03)


def test_a_horizontal_pair_blur_correlates_only_horizontally():
    sigma = 20.0
    n = sigma * normal(9, (1024, 1025))
    pair = (n[:, 1:] + n[:, :-1]) / 2  # correlation 1/2 at lag (1, 0), none elsewhere
    var = sigma**2 / 2
    corr = R.noise_autocorrelation(to_uint8(128 + pair))
    assert corr.horizontal == pytest.approx(0.5 * var / (var + 1 / 12), abs=0.02)
    assert abs(corr.vertical) < 0.02


# --- 3. chroma / luma -----------------------------------------------------------------------------------------
def test_iid_rgb_noise_gives_the_bt601_ratio():
    cb = math.sqrt(0.168736**2 + 0.331264**2 + 0.5**2) / Y_NORM
    cr = math.sqrt(0.5**2 + 0.418688**2 + 0.081312**2) / Y_NORM
    assert R.IID_RGB_RATIO == pytest.approx(math.sqrt((cb**2 + cr**2) / 2), rel=1e-12)
    assert R.IID_RGB_RATIO == pytest.approx(0.958, abs=5e-4)
    chroma = R.chroma_luma_noise_ratio(to_uint8(120 + 6.0 * normal(10, (768, 768, 3))))
    assert chroma.ratio == pytest.approx(R.IID_RGB_RATIO, rel=0.03)
    assert chroma.cb == pytest.approx(cb, rel=0.03) and chroma.cr == pytest.approx(cr, rel=0.03)


def test_luma_only_noise_has_no_chroma_noise():
    chroma = R.chroma_luma_noise_ratio(grey_noise(6.0))
    assert chroma.ratio < 1e-9 and chroma.n_blocks > 100


def test_subsampled_chroma_noise_is_measured_per_pixel():
    """Chroma noise at half resolution (4:2:0, nearest-neighbour upsampled) on top of luma noise: the ratio is
    the per-pixel one, though the plane removes more of such correlated noise."""
    size, s_y, s_c = 512, 4.0, 6.0
    y = 120 + s_y * normal(11, (size, size))
    cb = np.kron(s_c * normal(12, (size // 2, size // 2)), np.ones((2, 2)))
    cr = np.kron(s_c * normal(13, (size // 2, size // 2)), np.ones((2, 2)))
    rgb = np.stack([y + 1.402 * cr, y - 0.344136 * cb - 0.714136 * cr, y + 1.772 * cb], axis=2)
    chroma = R.chroma_luma_noise_ratio(to_uint8(rgb))
    assert chroma.ratio == pytest.approx(s_c / s_y, rel=0.06)


# --- 4. edge width --------------------------------------------------------------------------------------------
def step(size: int = 256, lo: float = 60, hi: float = 190) -> np.ndarray:
    img = np.full((size, size), float(lo))
    img[:, size // 2 :] = hi
    return img


@pytest.mark.parametrize("length", [3, 5, 7, 11, 15])
def test_a_box_blurred_step_is_08_of_the_box(length):
    blurred = cv2.filter2D(step(), cv2.CV_64F, np.ones((1, length)) / length, borderType=cv2.BORDER_REFLECT)
    assert R.edge_width(to_uint8(blurred)) == pytest.approx(0.8 * length, abs=0.15)


def test_a_sharp_step_is_about_one_pixel():
    assert R.edge_width(to_uint8(step())) == pytest.approx(0.8, abs=0.1)


@pytest.mark.parametrize("angle", [0.0, 30.0, 45.0, 100.0])
def test_a_gaussian_blurred_edge_at_any_angle(angle):
    """A step edge at ``angle`` blurred by a Gaussian of std 3 px: 10-90 % width 2.563 * 3."""
    size, sigma = 256, 3.0
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
    c, s = math.cos(math.radians(angle)), math.sin(math.radians(angle))
    d = (xx - size / 2) * c + (yy - size / 2) * s
    profile = 0.5 * (1 + np.vectorize(math.erf)(d / (sigma * math.sqrt(2))))
    widths = R.edge_widths(to_uint8(60 + 130 * profile))
    assert widths.median == pytest.approx(2 * 1.2816 * sigma, rel=0.08)
    assert widths.width == pytest.approx(2 * 1.2816 * sigma, rel=0.08)
    assert len(widths.widths) > 100


def test_a_motion_smear_is_measured_across_the_motion():
    """Flat bricks 64 px wide and 16 tall (four times more horizontal than vertical edges), smeared horizontally
    by L px: only the vertical edges widen, to 0.8 L. The median over all edges stays near the sharp value; the
    blur measure is the widest orientation's."""
    yy, xx = np.mgrid[0:512, 0:512]
    bricks = 60.0 + 100.0 * (((xx // 64) + (yy // 16)) % 2)
    widths = []
    for length in (3, 7, 11, 15):
        smeared = cv2.filter2D(bricks, cv2.CV_64F, np.ones((1, length)) / length, borderType=cv2.BORDER_REFLECT)
        e = R.edge_widths(to_uint8(smeared))
        assert e.width == pytest.approx(0.8 * length, abs=0.2), length
        assert e.by_orientation[0] == e.width and e.by_orientation[2] == pytest.approx(0.8, abs=0.1)
        assert e.median < 0.5 * e.width or length == 3
        widths.append(e.width)
    assert widths == sorted(widths)


def test_summarize_edges_needs_enough_edges_per_orientation():
    e = R.summarize_edges([1.0] * 100 + [9.0] * 4, [0] * 100 + [2] * 4)
    assert e.by_orientation[0] == 1.0 and math.isnan(e.by_orientation[2]) and e.width == 1.0
    e = R.summarize_edges([1.0] * 100 + [9.0] * 20, [0] * 100 + [2] * 20)
    assert e.width == 9.0 and e.median == 1.0
    assert math.isnan(R.summarize_edges([], []).width)


def test_edge_width_grows_with_blur_and_survives_noise():
    box = [
        R.edge_width(to_uint8(cv2.filter2D(step(), cv2.CV_64F, np.ones((1, n)) / n, borderType=cv2.BORDER_REFLECT)))
        for n in (1, 3, 5, 9, 13, 19)
    ]
    assert all(a < b for a, b in zip(box, box[1:])), box
    noisy = cv2.filter2D(step(), cv2.CV_64F, np.ones((1, 7)) / 7, borderType=cv2.BORDER_REFLECT)
    assert R.edge_width(to_uint8(noisy + 3.0 * normal(14, noisy.shape))) == pytest.approx(5.6, rel=0.15)


def test_a_noisy_flat_field_has_no_strong_edges():
    assert math.isnan(R.edge_width(grey_noise(0.5)))


def test_edge_samples_are_capped_by_a_fixed_stride():
    stripes = np.kron((np.arange(60) % 2)[None, :] * 120.0 + 60, np.ones((600, 10)))  # 59 sharp edges
    widths = R.edge_widths(to_uint8(stripes))
    assert widths.candidates > R.MAX_EDGES and 0 < len(widths.widths) <= R.MAX_EDGES
    assert widths.width == pytest.approx(0.8, abs=0.1)


# --- all four, and determinism --------------------------------------------------------------------------------
def test_realism_statistics_share_one_pass_and_repeat_exactly():
    base = textured_background(256)
    rgb = to_uint8(np.repeat(base[..., None], 3, axis=2) + 3.0 * normal(15, (256, 256, 3)))
    a, b = R.realism_statistics(rgb), R.realism_statistics(rgb.copy())
    assert a == b
    assert a.noise == R.noise_curve(rgb) and a.correlation == R.noise_autocorrelation(rgb)
    assert a.chroma == R.chroma_luma_noise_ratio(rgb) and a.edges == R.edge_widths(rgb)


# --- aegis realism ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def split(tmp_path_factory) -> Path:
    return tiny_split(tmp_path_factory.mktemp("realism") / "split")


def tiny_split(out: Path) -> Path:
    """Four synthetic images, low_light severity 1 only."""
    result = runner.invoke(
        app,
        [
            "build-splits",
            "--n",
            "4",
            "--size",
            "160",
            "--corruptions",
            "low_light",
            "--severities",
            "1",
            "--workers",
            "1",
            "--out-dir",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    return out


def real_dir_of(tmp_path: Path, split: Path, condition: str) -> Path:
    """Stand-in "real" frames: copies of the split's own rendering of ``condition``."""
    real = tmp_path / "real"
    real.mkdir()
    for f in sorted((split / "test" / condition).glob("*.png")):
        shutil.copy(f, real / f.name)
    return real


def test_realism_report_of_the_rendering_itself_is_at_distance_zero(split, tmp_path):
    real = real_dir_of(tmp_path, split, "low_light_s1")
    report = measure.realism_report(real, split, "low_light_s1")
    assert report.real == report.rendered and report.real.n_images >= 1
    d = report.rendered_distance
    assert d["noise_curve"] == 0.0 and d["noise_sigma"] == 1.0 and d["edge_width"] == 1.0
    assert d["noise_autocorrelation"] == 0.0 and d["chroma_luma_noise_ratio"] == 0.0
    assert report.clean.n_images == report.rendered.n_images
    assert report.clean_distance["noise_curve"] > 0.1  # the clean images are not low-light
    doc = report.to_dict()
    assert set(doc) == {
        "condition",
        "real_dir",
        "split_dir",
        "real",
        "rendered",
        "clean",
        "distance",
        "distance_definitions",
    }
    json.dumps(doc, allow_nan=False)


def test_realism_report_refusals(split, tmp_path):
    real = real_dir_of(tmp_path, split, "low_light_s1")
    empty = tmp_path / "empty"
    empty.mkdir()
    for args, fragment in [
        ((empty, split, "low_light_s1"), "no images in"),
        ((real, split, "fog_s1"), "unknown condition 'fog_s1'"),
        ((real, split, "low_light_s3"), "holds no rendering of low_light_s3"),
        ((real, split / "test", "low_light_s1"), "is not a split folder"),
    ]:
        with pytest.raises(AegisError, match=fragment):
            measure.realism_report(*args)


def test_limit_takes_the_first_images_of_each_set(split, tmp_path):
    real = real_dir_of(tmp_path, split, "low_light_s1")
    report = measure.realism_report(real, split, "low_light_s1", limit=1)
    assert report.real.n_images == report.rendered.n_images == report.clean.n_images == 1


@pytest.mark.skipif(not REAL_FRAMES.is_dir(), reason=f"real HERIDAL frames not on this machine ({REAL_FRAMES})")
def test_real_heridal_frames_smoke(split):
    """Four real 4000x3000 HERIDAL JPEGs (daylight, evening): camera-like values, far from the v1 rendering."""
    report = measure.realism_report(REAL_FRAMES, split, "low_light_s1")
    real = report.real
    assert real.n_images == len(list(REAL_FRAMES.glob("*.jpg")))
    assert 0.5 < real.noise.noise_sigma < 8.0
    assert 0.5 < real.correlation < 0.9  # demosaicing, denoising, JPEG: correlated noise
    assert real.chroma_ratio < 0.25  # subsampled, denoised chroma
    assert 1.2 < real.edge_width < 4.0 and len(real.edges.widths) > 1000
