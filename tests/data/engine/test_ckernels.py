"""The compiled engine loops (aegis_data.engine._ckernels) against the NumPy code they replace: the same bytes for
every corruption, shape and severity; the AEGIS_KERNELS switch; size checks at the C boundary."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from aegis_data.compiled import KERNELS_ENV
from aegis_data.engine import kernels as K
from aegis_data.engine.config import load_config
from aegis_data.engine.corruptions import CORRUPTIONS, apply_corruption
from tests import REPO_ROOT
from tests.data.engine.compiled_twins import both as _both

REPO = REPO_ROOT
COMPILED = K.CKERNELS
V1 = load_config("aegis-v1")  # the kernels' byte contract is aegis-v1's frozen engine, whatever the default suite

needs_compiled = pytest.mark.skipif(COMPILED is None, reason="compiled engine loops not built (no C compiler?)")


def test_the_backend_report_follows_the_loops_in_use(monkeypatch):
    monkeypatch.setattr(K, "CKERNELS", None)
    assert K.kernels_backend() == "numpy"
    monkeypatch.setattr(K, "CKERNELS", object())  # any loaded module
    assert K.kernels_backend() == "compiled"


def _frames(h: int, w: int) -> list[np.ndarray]:
    rng = np.random.default_rng(h * 1000 + w)  # test inputs only
    noise = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    y, x = np.mgrid[0:h, 0:w]
    ramp = np.stack([(x * 255) // max(w - 1, 1), (y * 255) // max(h - 1, 1), (x + y) % 256], axis=2).astype(np.uint8)
    extremes = np.where(noise > 127, 255, 0).astype(np.uint8)  # only 0 and 255: clipping on both sides
    return [noise, ramp, extremes]


# The per-pixel loop each corruption runs compiled (besides the noise, convolution and histogram loops).
V1_LOOPS = {
    "water_glare": ("glare",),
    "turbidity_cast": ("turbidity",),
    "inundation": ("inundation",),
    "smoke_haze": ("haze",),
    "fire_warm_tint": ("haze",),
    "dust_haze": ("haze",),
    "rain_streaks": ("rain",),
    "motion_blur": ("shear", "unshear"),
    "low_light": ("low_light",),
}


@needs_compiled
@pytest.mark.parametrize("shape", [(1, 1), (2, 3), (7, 5), (37, 53), (120, 97), (300, 400)])
def test_every_corruption_matches_the_numpy_code(shape):
    assert set(V1_LOOPS) == set(CORRUPTIONS)
    moved = []
    for i, frame in enumerate(_frames(*shape)):
        for name in CORRUPTIONS:
            for sev in (1, 2, 3):
                a, b = _both(lambda: apply_corruption(frame, name, sev, f"f{i}", config=V1), V1_LOOPS[name])
                if not np.array_equal(a, b):
                    moved.append(f"{name}_s{sev}/frame{i}: {int((a != b).sum())} bytes")
    assert not moved, moved[:5]


@needs_compiled
@pytest.mark.parametrize("sigma", [0.3, 0.8, 2.5, 7.0, "asymmetric"])
@pytest.mark.parametrize("shape", [(1, 1), (1, 9), (9, 1), (3, 4), (40, 57)])
def test_exact_convolution_matches_opencv_including_reflections_beyond_the_frame(sigma, shape):
    rng = np.random.default_rng(5)
    # Radius up to 28 px: reflects several times on the small shapes. The asymmetric kernel takes the loops'
    # general path (Gaussians take the mirrored-pair one).
    k = np.array([1, 7, 3, 0, 2], np.int64) if sigma == "asymmetric" else K.discrete_gaussian(sigma)
    inputs = [
        (rng.random(shape) < 0.2, 1),
        (rng.integers(0, 256, shape, dtype=np.uint8), 255),
        (rng.integers(0, 256, (*shape, 3), dtype=np.uint8), 255),
        (rng.integers(0, 40, shape), 39),
        (np.floor(rng.random(shape) * 20000.0), None),
    ]
    for arr, bound in inputs:
        a, b = _both(lambda: K.convolve_exact(arr, k, max_abs=bound), ("convolve",))
        assert a.dtype == b.dtype == np.float64 and np.array_equal(a, b), (arr.dtype, arr.shape)
        a, b = _both(lambda: K.convolve_exact_scaled(arr, k, 1.0 / 3.0, cap_one=True), ("convolve",))
        assert a.dtype == b.dtype == np.float32 and np.array_equal(a, b)


@needs_compiled
def test_value_noise_matches_for_many_octaves():
    rng = np.random.default_rng(9)
    for h, w, spec in [(5, 7, K.NoiseSpec(2, 2)), (64, 48, K.NoiseSpec(7, 3)), (200, 333, K.NoiseSpec(5, 6))]:
        grids = tuple(rng.random(s) for s in K.noise_grid_shapes(h, w, spec))
        a, b = _both(lambda: K.value_noise(h, w, spec, grids), ("noise_columns", "noise_rows"))
        assert a.dtype == np.uint16 and np.array_equal(a, b)


@needs_compiled
def test_wrong_buffer_sizes_are_refused_at_the_c_boundary():
    img = np.zeros((4, 4, 3), np.uint8)
    out = np.empty_like(img)
    table = np.zeros(65536, np.float32)
    with pytest.raises(ValueError, match="density"):
        COMPILED.haze(out, img, 16, np.zeros(15, np.uint16), table, np.zeros(3, np.float32), None, None, None)
    with pytest.raises(ValueError, match="out"):
        COMPILED.turbidity(np.empty(5, np.uint8), img, 16, 1.0, np.zeros(3, np.float32), np.zeros(3, np.float32), 1.0)
    density = np.zeros(16, np.uint16)
    wide = np.zeros((4, 8, 3), np.uint8)
    with pytest.raises(ValueError, match="contiguous"):  # a strided view is not handed to C as if it were contiguous
        COMPILED.haze(out, wide[:, ::2], 16, density, table, np.zeros(3, np.float32), None, None, None)
    frozen = np.empty_like(img)
    frozen.setflags(write=False)
    with pytest.raises(ValueError, match="read-only|writable"):  # nor is a read-only output
        COMPILED.haze(frozen, img, 16, density, table, np.zeros(3, np.float32), None, None, None)
    with pytest.raises(IndexError):
        COMPILED.noise_rows(
            np.zeros((2, 3), np.float32),
            2,
            3,
            [(np.zeros((2, 3), np.float32), 2, np.full(8, 5, np.int64), np.zeros(8, np.float32))],
        )


def _run(env: dict, code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(REPO),
    )


def test_environment_switch():
    code = "from aegis_data.engine import kernels as K; print(K.kernels_backend())"
    assert _run({KERNELS_ENV: "numpy"}, code).stdout.strip() == "numpy"
    bad = _run({KERNELS_ENV: "fast"}, code)
    assert bad.returncode != 0 and "must be auto, compiled or numpy" in bad.stderr
    if COMPILED is not None:
        assert _run({KERNELS_ENV: "compiled"}, code).stdout.strip() == "compiled"
        assert _run({}, code).stdout.strip() == "compiled"


@needs_compiled
@pytest.mark.parametrize("shape", [(1, 1), (2, 5), (7, 3), (10, 10), (31, 64)])
@pytest.mark.parametrize("factor", [1, 2, 3, 8, 13])
def test_block_sums_and_mask_quantiles_match(shape, factor):
    rng = np.random.default_rng(factor)
    mask = rng.random(shape) < 0.3  # factor 13 > the short sides: the mirroring repeats
    a, b = _both(lambda: K.block_sum(mask, factor), ("block_sum",))
    assert a.dtype == b.dtype == np.int64 and np.array_equal(a, b)
    field = rng.integers(0, 65536, shape).astype(np.uint16)
    for cover in (0.01, 0.3, 1.0):
        a, b = _both(lambda: K.top_fraction_mask(field, cover), ("hist_u16",))
        assert np.array_equal(a, b)
