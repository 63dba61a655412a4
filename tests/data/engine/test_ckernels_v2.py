"""The compiled loops of the generation-2 models (aegis_data.engine._ckernels: taps, raw_noise, chroma, lut_u8_u16)
against the NumPy code they replace: the same bytes for the trajectory blur's taps, the raw sensor noise and the
camera's chroma path, on every shape and instruction set; each comparison also checks that the compiled loop ran."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest

from aegis_data.compiled import KERNELS_ENV
from aegis_data.engine import camera, motion
from aegis_data.engine import kernels as K
from aegis_data.engine.camera import LowLightCapture
from aegis_data.engine.config import load_config
from aegis_data.engine.corruptions import apply_corruption
from aegis_data.engine.photometry import LINEAR_MAX, decode_table, encode_table, to_linear
from aegis_data.engine.scale import Scale
from aegis_data.engine.seeding import normal_table
from tests import REPO_ROOT
from tests.data.engine.compiled_twins import Recorder
from tests.data.engine.compiled_twins import both as _both
from tests.golden.frames import golden_frame

REPO = REPO_ROOT
COMPILED = K.CKERNELS

needs_compiled = pytest.mark.skipif(
    COMPILED is None or not hasattr(COMPILED, "taps"), reason="compiled engine loops not built (no C compiler?)"
)


@pytest.fixture(params=[2, 1, 0], ids=["avx2", "sse2", "plain"])
def isa(request):
    """Each instruction-set path of the taps loop (clamped to what this build and CPU have)."""
    if COMPILED is None or not hasattr(COMPILED, "set_isa"):
        pytest.skip("compiled engine loops not built")
    best = COMPILED.set_isa(99)
    level = COMPILED.set_isa(request.param)
    if level != request.param:
        COMPILED.set_isa(best)
        pytest.skip(f"instruction set level {request.param} not available here")
    yield level
    COMPILED.set_isa(best)


# ----------------------------------------------------------------------------------------------------------
# Trajectory blur taps
# ----------------------------------------------------------------------------------------------------------
def _random_bands(rng, h: int, w: int, n_bands: int, max_len: float):
    """Row bands covering [0, h), each with the taps of a random path (rasterise: weights summing to 2**15)."""
    cuts = sorted(set([0, h] + rng.integers(0, h + 1, n_bands - 1).tolist()))
    bands = []
    for r0, r1 in zip(cuts, cuts[1:]):
        length = float(rng.uniform(0.0, max_len))
        heading = float(rng.uniform(0.0, 360.0))
        jitter = float(rng.uniform(0.0, 0.2 * max_len))
        pos = motion.path_samples(length, heading, float(rng.uniform(-30, 30)), jitter, rng.normal(size=(64, 2)))
        bands.append((r0, r1, motion.rasterise(pos, (float(rng.uniform(-1, 1)), float(rng.uniform(-1, 1))))))
    return bands


def _reference_taps(linear: np.ndarray, bands) -> np.ndarray:
    """An independent, literal reading of convolve_taps: per output pixel, mirrored indices (fedcba|abcdef)."""
    h, w = linear.shape[:2]

    def mirror(p: int, n: int) -> int:
        if n == 1:
            return 0
        while p < 0 or p >= n:
            p = -p - 1 if p < 0 else 2 * n - 1 - p
        return p

    out = np.zeros_like(linear)
    for r0, r1, (dy, dx, wt) in bands:
        for y in range(r0, r1):
            acc = np.full((w, 3), 1 << 14, dtype=np.int64)
            for a, b, k in zip(dy.tolist(), dx.tolist(), wt.tolist()):
                cols = [mirror(x + b, w) for x in range(w)]
                acc += k * linear[mirror(y + a, h), cols].astype(np.int64)
            out[y] = acc >> 15
    return out


@needs_compiled
@pytest.mark.parametrize("shape", [(1, 1), (1, 9), (9, 1), (2, 3), (5, 7), (37, 53), (64, 130)])
def test_taps_match_the_numpy_code(shape, isa):
    h, w = shape
    rng = np.random.default_rng(h * 131 + w)
    for trial in range(4):
        # Paths up to ~40 px: far beyond the small frames (the border mirrors several times).
        bands = _random_bands(rng, h, w, 1 + trial, max_len=min(40.0, 4.0 * max(h, w)))
        # Linear values as decoded (<= LINEAR_MAX) and, once, the full uint16 range (the SIMD loops' 16-bit
        # products need values below 2**15: such rows take the plain loop).
        top = 65536 if trial == 3 else LINEAR_MAX + 1
        lin = rng.integers(0, top, (h, w, 3)).astype(np.uint16)
        a, b = _both(lambda: motion.convolve_taps(lin, bands), ("taps",))
        assert a.dtype == b.dtype == np.uint16 and np.array_equal(a, b), trial
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        a, b = _both(lambda: motion.convolve_taps_srgb(img, bands), ("taps",))
        assert a.dtype == b.dtype == np.uint8 and np.array_equal(a, b), trial


@needs_compiled
def test_taps_long_paths_and_single_full_weight_taps(isa):
    rng = np.random.default_rng(3)
    h, w = 48, 70
    lin = rng.integers(0, LINEAR_MAX + 1, (h, w, 3)).astype(np.uint16)
    long_path = _random_bands(rng, h, w, 3, max_len=150.0)  # ~600 samples, up to ~100 taps per band
    assert max(len(t[2]) for _, _, t in long_path) > 60
    # A lone tap of weight 2**15 (a pure shift) does not fit the 16-bit products: the plain loop runs it.
    shift = [
        (0, 20, (np.array([3]), np.array([-5]), np.array([1 << 15]))),
        (20, h, (np.array([0, -2]), np.array([0, 7]), np.array([1 << 14, 1 << 14]))),
    ]
    for bands in (long_path, shift):
        a, b = _both(lambda: motion.convolve_taps(lin, bands), ("taps",))
        assert np.array_equal(a, b)


@needs_compiled
@pytest.mark.parametrize("shape", [(1, 1), (1, 6), (6, 1), (3, 4), (11, 8)])
def test_taps_agree_with_a_literal_reference(shape):
    h, w = shape
    rng = np.random.default_rng(11 * h + w)
    bands = _random_bands(rng, h, w, 2, max_len=min(25.0, 4.0 * max(h, w)))
    lin = rng.integers(0, LINEAR_MAX + 1, (h, w, 3)).astype(np.uint16)
    ref = _reference_taps(lin, bands)
    a, b = _both(lambda: motion.convolve_taps(lin, bands), ("taps",))
    assert np.array_equal(a, ref) and np.array_equal(b, ref)


@needs_compiled
def test_taps_outside_the_compiled_bounds_run_the_numpy_code():
    rng = np.random.default_rng(5)
    lin = rng.integers(0, LINEAR_MAX + 1, (9, 12, 3)).astype(np.uint16)
    heavy = [(0, 9, (np.array([0, 1]), np.array([0, 1]), np.array([1 << 15, 100])))]  # sums above 2**15
    negative = [(0, 9, (np.array([0, 1]), np.array([0, 1]), np.array([40000, -7232])))]
    wrapping = [(0, 9, (np.zeros(4, np.int64), np.zeros(4, np.int64), np.full(4, 1 << 62)))]  # int64 sum wraps to 0
    for bands in (heavy, negative, wrapping):
        rec = Recorder(COMPILED)
        K.CKERNELS = rec
        try:
            a = motion.convolve_taps(lin, bands)
        finally:
            K.CKERNELS = COMPILED
        assert "taps" not in rec.calls
        K.CKERNELS = None
        try:
            assert np.array_equal(a, motion.convolve_taps(lin, bands))
        finally:
            K.CKERNELS = COMPILED


@needs_compiled
def test_taps_arguments_are_checked_at_the_c_boundary():
    lin = np.zeros((4, 5, 3), np.uint16)
    out = np.empty_like(lin)
    one = np.zeros(1, np.int64)

    def call(bands, starts, wt, dy=one, out=out, bits=15):
        COMPILED.taps(
            out,
            0,
            lin,
            0,
            4,
            5,
            None,
            None,
            np.asarray(bands, np.int64),
            np.asarray(starts, np.int64),
            dy,
            np.zeros(len(wt), np.int64),
            np.asarray(wt, np.int64),
            len(bands),
            len(wt),
            bits,
        )

    call([[0, 4]], [0, 1], [1 << 15])  # valid
    with pytest.raises(ValueError, match="band rows"):
        call([[0, 5]], [0, 1], [1 << 15])
    with pytest.raises(ValueError, match="tap ranges"):  # a range past the taps, though the last one is in range
        call([[0, 2], [2, 4]], [0, 100, 1], [1 << 15])
    with pytest.raises(ValueError, match="weights"):
        call([[0, 4]], [0, 1], [-1])
    with pytest.raises(ValueError, match="sum above"):
        call([[0, 4]], [0, 2], [1 << 15, 1], dy=np.zeros(2, np.int64))
    with pytest.raises(ValueError, match="offset"):
        call([[0, 4]], [0, 1], [1], dy=np.array([21], np.int64))
    with pytest.raises(ValueError, match="out"):
        call([[0, 4]], [0, 1], [1], out=np.empty((4, 4, 3), np.uint16))
    with pytest.raises(ValueError, match="bad arguments"):
        call([[0, 4]], [0, 1], [1], bits=14)


@needs_compiled
def test_decode_table_lookup_matches():
    rng = np.random.default_rng(2)
    for shape in [(1, 1, 3), (0, 4, 3), (7, 9, 3), (5,)]:
        img = rng.integers(0, 256, shape, dtype=np.uint8)
        a, b = _both(lambda: to_linear(img), ("lut_u8_u16",) if img.size else ())
        assert a.dtype == b.dtype == np.uint16 and a.shape == b.shape and np.array_equal(a, b)
    assert np.array_equal(to_linear(np.arange(256, dtype=np.uint8)), decode_table())


# ----------------------------------------------------------------------------------------------------------
# Raw sensor noise
# ----------------------------------------------------------------------------------------------------------
RAW_SHAPES = [(1, 1), (1, 2), (2, 1), (2, 2), (3, 3), (1, 7), (7, 1), (4, 5), (5, 4), (9, 12), (300, 400)]

COEFFICIENTS = {
    "camera": ((3.2, 1.6, 2.7), (5.0, 1.2, 3.3)),  # about the s3 condition's size, in LINEAR_MAX units
    "none": ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0)),
    "read_only": ((0.0, 0.0, 0.0), (4e3, 1e3, 2.5e3)),
    "extreme": ((6.5e4, 3.3e4, 5.5e4), (4.3e9, 1.1e9, 3.1e9)),  # sd far beyond white: every value clips
    "tiny": ((1e-300, 0.0, 5e-320), (1e-310, 1e-300, 0.0)),  # subnormals
}


def _linear_frames(rng, h: int, w: int) -> dict[str, np.ndarray]:
    return {
        "random": rng.integers(0, LINEAR_MAX + 1, (h, w, 3)).astype(np.uint16),
        "black": to_linear(np.zeros((h, w, 3), np.uint8)),
        "white": to_linear(np.full((h, w, 3), 255, np.uint8)),
    }


@needs_compiled
@pytest.mark.parametrize("shape", RAW_SHAPES)
def test_raw_noise_matches_the_numpy_code(shape):
    h, w = shape
    rng = np.random.default_rng(h * 1009 + w)
    noise = rng.integers(0, 65536, (h, w)).astype(np.uint16)
    noise.flat[:2] = (0, 65535)  # both ends of the normal table
    moved = []
    for fname, lin in _linear_frames(rng, h, w).items():
        for brightness in (1.0, 0.37, 1.0 / 3.0):
            capture = LowLightCapture(8.3, 3200.0, brightness)
            for cname, (a, b) in COEFFICIENTS.items():
                a, b = np.array(a), np.array(b)
                x, y = _both(lambda: camera.raw_noise_image(lin, capture, a, b, noise), ("raw_noise",))
                if not (x.dtype == y.dtype == np.uint8 and np.array_equal(x, y)):
                    moved.append(f"{fname}/{brightness}/{cname}: {int((x != y).sum())} bytes")
    assert not moved, moved[:5]


@needs_compiled
def test_raw_noise_outside_the_compiled_bounds_runs_the_numpy_code():
    rng = np.random.default_rng(8)
    lin = rng.integers(0, LINEAR_MAX + 1, (6, 5, 3)).astype(np.uint16)
    noise = rng.integers(0, 65536, (6, 5)).astype(np.uint16)
    capture = LowLightCapture(8.3, 3200.0, 0.5)
    a, b = np.array([1e299, 1.0, 1.0]), np.array([1.0, 1.0, 1.0])  # variance beyond the loop's 1e300 bound
    rec = Recorder(COMPILED)
    K.CKERNELS = rec
    try:
        x = camera.raw_noise_image(lin, capture, a, b, noise)
    finally:
        K.CKERNELS = COMPILED
    assert "raw_noise" not in rec.calls
    K.CKERNELS = None
    try:
        assert np.array_equal(x, camera.raw_noise_image(lin, capture, a, b, noise))
    finally:
        K.CKERNELS = COMPILED
    # The C side refuses what the wrapper would not pass.
    out = np.empty((6, 5, 3), np.uint8)
    for bad_a, bad_d in (
        (np.array([np.nan, 1.0, 1.0]), 0.5),
        (np.array([-1.0, 1.0, 1.0]), 0.5),
        (a, 0.5),
        (np.ones(3), np.inf),
    ):
        with pytest.raises(ValueError, match="finite"):
            COMPILED.raw_noise(out, lin, 6, 5, bad_d, bad_a, b, noise, normal_table(), encode_table())


# ----------------------------------------------------------------------------------------------------------
# Chroma path
# ----------------------------------------------------------------------------------------------------------
def _rgb_frames(rng, h: int, w: int) -> dict[str, np.ndarray]:
    blue = np.zeros((h, w, 3), np.uint8)
    blue[..., 2] = 255  # Cb = 256, the top of the chroma range
    return {
        "random": rng.integers(0, 256, (h, w, 3), dtype=np.uint8),
        "extremes": np.where(rng.random((h, w, 3)) < 0.5, 0, 255).astype(np.uint8),
        "black": np.zeros((h, w, 3), np.uint8),
        "white": np.full((h, w, 3), 255, np.uint8),
        "blue": blue,
    }


@needs_compiled
@pytest.mark.parametrize("shape", RAW_SHAPES)
def test_chroma_path_matches_the_numpy_code(shape):
    h, w = shape
    rng = np.random.default_rng(h * 7 + w)
    moved = []
    for fname, rgb in _rgb_frames(rng, h, w).items():
        for sigma in (0.0, 1.5, 3.0, 0.01, 25.0):  # 25 px: a kernel far wider than the small frames
            x, y = _both(lambda: camera.chroma_path(rgb, sigma), ("chroma",))
            if not (x.dtype == y.dtype == np.uint8 and np.array_equal(x, y)):
                moved.append(f"{fname}/sigma {sigma}: {int((x != y).sum())} bytes")
    assert not moved, moved[:5]


@needs_compiled
def test_chroma_kernel_is_checked_at_the_c_boundary():
    rgb = np.zeros((4, 4, 3), np.uint8)
    out = np.empty_like(rgb)
    with pytest.raises(ValueError, match="kernel"):
        COMPILED.chroma(out, rgb, 4, 4, np.array([1, -1, 1], np.int64), 3)
    with pytest.raises(ValueError, match="kernel"):
        COMPILED.chroma(out, rgb, 4, 4, np.array([0, 1 << 21, 0], np.int64), 3)
    with pytest.raises(ValueError, match="bad arguments"):
        COMPILED.chroma(out, rgb, 4, 4, np.array([1, 1], np.int64), 2)


# ----------------------------------------------------------------------------------------------------------
# Values that become table indices
# ----------------------------------------------------------------------------------------------------------
# Each loop below turns a computed double into an index of its encode table. A NaN passed both comparisons of the
# old clamps and converted to an index far outside the table: a segfault, not an error (seen with a NaN
# reflectance, tint or noise level, and a negative tint). Run in a fresh process, so a regression fails this test
# instead of killing the test session.
_NAN_INDEX_CALLS = """
import numpy as np
from aegis_data.engine import kernels as K
from aegis_data.engine.photometry import LINEAR_MAX, decode_table, encode_table
c, h, w, nan = K.CKERNELS, 4, 5, float("nan")
img, dec, enc, lmax = np.full((h, w, 3), 128, np.uint8), decode_table(), encode_table(), float(LINEAR_MAX)
outs = [np.empty_like(img) for _ in range(5)]
c.flood(outs[0], img, np.ones((h, w), np.int32), h, w, np.zeros(3), np.zeros(3), np.full(h, nan), np.ones(4), 4, 0,
        0.5, dec, enc, lmax)
c.turbid(outs[1], img, np.ones((h, w), np.uint8), h, w, np.zeros(3), np.zeros(3), np.full(h, nan), 0.5, 1.0, dec,
         enc, lmax, np.array([6966, 23436, 2366], np.int64))
for out, tint, scale in ((outs[2], [nan, 1.0, 1.0], 1.0), (outs[3], [-1.0, 1.0, 1.0], 1e12)):
    out[:] = img
    c.glint_add(out, np.ones((1, w)), 1, w, 0, 0, scale, h, w, np.array(tint), dec, enc, lmax,
                np.zeros((h, w), np.uint8))
grid = 1 << 20
c.low_light(outs[4], img, h * w, np.zeros((h * w, 3), np.uint16), np.ones(65536, np.float32),
            np.full(768, nan, np.float32), np.zeros(768, np.float32), np.zeros(grid + 1, np.uint8), grid)
print(" ".join(str(int(o[0, 0, 0])) for o in outs))
"""


@needs_compiled
def test_a_nan_that_becomes_a_table_index_reads_inside_the_table():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    got = subprocess.run(
        [sys.executable, "-c", _NAN_INDEX_CALLS], env=env, capture_output=True, text=True, timeout=60, cwd=str(REPO)
    )
    assert got.returncode == 0, (got.returncode, got.stderr[-500:])
    assert got.stdout.split() == ["0", "0", "0", "0", "0"]  # NaN, or a value below 0, clamps to the table's start


@needs_compiled
def test_tables_that_would_lead_outside_the_encode_table_are_refused_at_the_c_boundary():
    h, w, kmax = 3, 4, 100
    img = np.full((h, w, 3), 200, np.uint8)

    def haze(dec=None, ttab=None):
        out = np.empty_like(img)
        ttab = np.full(kmax + 1, 1 << 15, np.uint16) if ttab is None else ttab
        COMPILED.atmos_haze(
            out,
            0,
            img,
            h,
            w,
            decode_table() if dec is None else dec,
            encode_table(),
            np.zeros((3, h)),
            np.zeros(w),
            None,
            None,
            None,
            1.0,
            1.0,
            1.0,
            1.0,
            100.0,
            1.0,
            kmax,
            ttab,
            None,
            None,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        )
        return out

    assert np.array_equal(haze(), img)  # full transmission: the pixels as they were
    high = decode_table().copy()
    high[255] = 65535  # decoded beyond LINEAR_MAX: the blend would read past the encode table
    with pytest.raises(ValueError, match="decode table"):
        haze(dec=high)
    over = np.full(kmax + 1, 1 << 15, np.uint16)
    over[0] = 65535  # a transmission above 1: a negative share of the air light
    with pytest.raises(ValueError, match="transmission table"):
        haze(ttab=over)
    with pytest.raises(ValueError, match="grid"):  # an empty encode table, read at -1
        COMPILED.low_light(
            np.empty_like(img),
            img,
            h * w,
            np.zeros((h * w, 3), np.uint16),
            np.ones(65536, np.float32),
            np.zeros(768, np.float32),
            np.zeros(768, np.float32),
            np.zeros(0, np.uint8),
            -1,
        )


# ----------------------------------------------------------------------------------------------------------
# End to end
# ----------------------------------------------------------------------------------------------------------
V2_EXPECT = {"motion_blur": ("taps",), "low_light": ("lut_u8_u16", "raw_noise", "chroma")}


def _v2_frames() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(17)
    return {
        "golden240x320": golden_frame(240, 320),
        "golden61x83": golden_frame(61, 83),
        "random97x131": rng.integers(0, 256, (97, 131, 3), dtype=np.uint8),
    }


@needs_compiled
@pytest.mark.parametrize("name", sorted(V2_EXPECT))
def test_aegis_v2_corruptions_match_the_numpy_code(name):
    config = load_config("aegis-v2")
    scale = Scale("object", 60.0, "test")
    moved = []
    for fname, frame in _v2_frames().items():
        for sev in (1, 2, 3):
            a, b = _both(lambda: apply_corruption(frame, name, sev, fname, config=config, scale=scale), V2_EXPECT[name])
            if not np.array_equal(a, b):
                moved.append(f"{name}_s{sev}/{fname}: {int((a != b).sum())} bytes")
    assert not moved, moved


@needs_compiled
def test_numpy_switch_gives_the_compiled_bytes():
    """AEGIS_KERNELS=numpy runs the NumPy code in a fresh process, with the same result."""
    frame = golden_frame(61, 83)
    config = load_config("aegis-v2")
    scale = Scale("object", 60.0, "test")
    want = [
        hashlib.sha256(apply_corruption(frame, n, 3, "switch", config=config, scale=scale)).hexdigest()
        for n in ("motion_blur", "low_light")
    ]
    code = (
        "import hashlib\n"
        "from aegis_data.engine import kernels as K\n"
        "from aegis_data.engine.config import load_config\n"
        "from aegis_data.engine.corruptions import apply_corruption\n"
        "from aegis_data.engine.scale import Scale\n"
        "from tests.golden.frames import golden_frame\n"
        "assert K.CKERNELS is None\n"
        "f = golden_frame(61, 83)\n"
        "for n in ('motion_blur', 'low_light'):\n"
        "    print(hashlib.sha256(apply_corruption(f, n, 3, 'switch', config=load_config('aegis-v2'),\n"
        "                                          scale=Scale('object', 60.0, 'test'))).hexdigest())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), KERNELS_ENV: "numpy"}
    got = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=str(REPO)
    )
    assert got.returncode == 0, got.stderr[-500:]
    assert got.stdout.split() == want
