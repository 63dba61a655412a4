"""Bit-identity (docs/CORRUPTIONS.md, "Determinism design"): golden pixel hashes, the same hashes under every CPU/thread
setting, in any order.

Each matrix setting runs ``tests/golden/frames.py`` in its own subprocess (environment variables such as
``NPY_DISABLE_CPU_FEATURES`` act only at import), which computes all 81 golden hashes (3 frames x 9
corruptions x 3 severities) and reports the runtime it actually got, so a setting that silently failed to
apply is caught too.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from aegis_data.compiled import KERNELS_ENV
from aegis_data.engine import corruptions as C
from aegis_data.engine import kernels as K
from aegis_data.engine.config import load_config
from aegis_data.engine.corruptions import apply_corruption
from tests import REPO_ROOT
from tests.data.engine import cbuild
from tests.golden.frames import GOLDEN_SIZES, GOLDEN_SUITE, compute_hashes, golden_frame, load_golden, pixel_hash

REPO = REPO_ROOT
V1 = load_config(GOLDEN_SUITE)  # the golden hashes are aegis-v1's
FRAMES = REPO / "tests" / "golden" / "frames.py"

# Tables every corruption leans on; pinned so a change shows up as itself, not as 81 moved hashes.
LINEAR_TABLE_SHA256 = "067ac9ee17276112d76ed78e982e7a166481db8fdfb7c051c54ada5e8d5d06da"
ENCODE_TABLE_SHA256 = "06438dbf01079f0866304946488f5fe06a4c1f305078fccad37c9bad42649e2f"

# OpenCV's names for OPENCV_CPU_DISABLE and its feature ids for cv2.checkHardwareSupport.
_CV2_FEATURES = {"AVX512-SKX": 256, "AVX2": 11, "FMA3": 12, "AVX": 10, "FP16": 9}


def _sha(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def _present_cv2_features() -> list[str]:
    return [name for name, fid in _CV2_FEATURES.items() if cv2.checkHardwareSupport(fid)]


def _present_npy_groups() -> list[str]:
    """The build's SIMD dispatch targets this CPU has (NumPy 2.x: X86_V3 = AVX2 group, X86_V4, AVX512_*)."""
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    except ImportError:  # NumPy 1.x
        from numpy.core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    return [g for g in __cpu_dispatch__ if __cpu_features__.get(g) and ("AVX" in g or g.startswith("X86_V"))]


def _settings(baseline_so: Path | None = None) -> dict[str, tuple[dict, list[str]]]:
    single = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    out = {
        "default": ({}, []),
        # The engine's inner loops: the NumPy code, and (below) the compiled loops without their AVX2 variants.
        "numpy_kernels": ({KERNELS_ENV: "numpy"}, []),
        "cv2_no_optimizations": ({}, ["--cv2-noopt"]),
        "one_thread": (single, ["--cv2-threads=1"]),
        "two_threads": ({"OMP_NUM_THREADS": "2"}, ["--cv2-threads=2"]),
    }
    if _present_cv2_features():
        out["opencv_cpu_disable"] = ({"OPENCV_CPU_DISABLE": ",".join(_present_cv2_features())}, [])
    if _present_npy_groups():
        out["numpy_cpu_disable"] = ({"NPY_DISABLE_CPU_FEATURES": " ".join(_present_npy_groups())}, [])
    if baseline_so is not None:
        out["compiled_baseline"] = ({}, [f"--ckernels={baseline_so}"])
    return out


@pytest.fixture(scope="module")
def baseline_so(tmp_path_factory) -> Path | None:
    """The compiled loops built without the AVX2 variants (x86-64 baseline vectors), when they can be built."""
    if K.CKERNELS is None or cbuild.compiler() is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run the determinism matrix with the compiled engine loops and a C compiler")
        return None
    so = cbuild.build_ckernels(tmp_path_factory.mktemp("ckernels"), "AEGIS_NO_CLONES")
    # The define took effect: GCC names target_clones variants "<function>.avx2"; the baseline build has none.
    assert b".avx2" not in so.read_bytes()
    return so


@pytest.fixture(scope="module")
def golden() -> dict[str, str]:
    return load_golden()


def test_golden_file_covers_every_frame_corruption_and_severity(golden):
    assert (
        GOLDEN_SUITE == "aegis-v1"
        and json.loads((REPO / "tests" / "golden" / "hashes.json").read_text())["suite"] == GOLDEN_SUITE
    )
    assert len(golden) == 81
    assert {k.split("/")[0] for k in golden} == {f"{h}x{w}" for h, w in GOLDEN_SIZES}


def test_golden_hashes_in_process(golden):
    got = compute_hashes()
    moved = sorted(k for k in golden if got.get(k) != golden[k])
    assert not moved, f"{len(moved)} corrupted golden frames changed: {moved[:6]} (regen only on purpose)"


def run_matrix(script: Path, settings: dict[str, tuple[dict, list[str]]], timeout: int = 300) -> dict[str, dict]:
    """``script``'s JSON output under every matrix setting, all run concurrently, each in a fresh interpreter."""
    procs = {}
    for name, (extra_env, args) in settings.items():
        env = {**os.environ, **extra_env, "PYTHONPATH": str(REPO)}
        procs[name] = subprocess.Popen(
            [sys.executable, str(script), *args],
            env=env,
            cwd=str(REPO),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    results = {}
    for name, p in procs.items():
        stdout, stderr = p.communicate(timeout=timeout)
        assert p.returncode == 0, f"{name}: {stderr.strip().splitlines()[-1:]}"
        results[name] = json.loads(stdout)
    return results


def test_matrix_of_cpu_and_thread_settings_gives_the_golden_hashes(golden, baseline_so):
    """All settings run concurrently, each in a fresh interpreter, and must all reproduce the golden file."""
    settings = _settings(baseline_so)
    assert {"default", "cv2_no_optimizations", "one_thread", "two_threads"} <= set(settings)
    results = run_matrix(FRAMES, settings)
    for name, res in results.items():
        moved = sorted(k for k in golden if res["hashes"].get(k) != golden[k])
        assert not moved, f"setting {name!r} changed {len(moved)} hashes, e.g. {moved[:4]}"
    # Each setting really applied.
    rt = {k: v["runtime"] for k, v in results.items()}
    assert rt["default"]["cv2_optimized"] and not rt["cv2_no_optimizations"]["cv2_optimized"]
    assert rt["one_thread"]["cv2_threads"] == 1 and rt["two_threads"]["cv2_threads"] == 2
    if "opencv_cpu_disable" in rt and "AVX2" in _present_cv2_features():
        assert rt["default"]["cv2_avx2"] and not rt["opencv_cpu_disable"]["cv2_avx2"]
    assert rt["numpy_kernels"]["kernels"] == "numpy"
    if baseline_so is not None:
        assert rt["default"]["kernels"].startswith("compiled:")
        assert rt["compiled_baseline"]["kernels"] == f"compiled:{baseline_so.resolve()}"
        assert rt["default"]["kernels"] != rt["compiled_baseline"]["kernels"]
    if "numpy_cpu_disable" in rt:
        disabled = set(_present_npy_groups())
        assert disabled <= set(rt["default"]["numpy_enabled"])
        assert not disabled & set(rt["numpy_cpu_disable"]["numpy_enabled"])


def test_order_independence_in_process(golden):
    """Corrupting B alone, or after A with other corruptions in between, gives B's golden bytes."""
    h, w = GOLDEN_SIZES[1]
    key = f"{h}x{w}/inundation_s2"
    a = golden_frame(*GOLDEN_SIZES[0])
    for name in C.CORRUPTIONS:
        apply_corruption(a, name, 3, "image-A", config=V1)
    b = apply_corruption(golden_frame(h, w), "inundation", 2, f"golden-{h}x{w}", config=V1)
    assert pixel_hash(b) == golden[key]


def test_single_image_regenerates_alone_in_a_fresh_process(golden):
    keys = [f"{h}x{w}/{n}" for (h, w), n in ((GOLDEN_SIZES[2], "rain_streaks_s3"), (GOLDEN_SIZES[1], "low_light_s1"))]
    out = subprocess.run(
        [sys.executable, str(FRAMES), *(f"--only={k}" for k in keys)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=str(REPO),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    got = json.loads(out.stdout)["hashes"]
    assert got == {k: golden[k] for k in keys}


def test_lookup_tables_are_pinned():
    assert _sha(C.linear_table(2.2)) == LINEAR_TABLE_SHA256
    assert _sha(C.encode_table(2.2)) == ENCODE_TABLE_SHA256


def test_exact_kernels_do_not_depend_on_opencv_optimizations():
    """The OpenCV calls the engine makes, run here with and without OpenCV's optimised paths."""
    img = golden_frame(97, 131)
    mask = K.top_fraction_mask(
        K.value_noise(97, 131, K.NoiseSpec(3, 4), C._draw_noise(C.KeyedRandom("t"), "n", 97, 131, K.NoiseSpec(3, 4))),
        0.3,
    )

    def run():
        return [
            _sha(K.blur_mask(mask, 2.5)),
            _sha(K.blur_mask(mask, 13.0)),
            _sha(K.convolve_exact(img, K.discrete_gaussian(0.7))),
            _sha(C._veil_blur(img, 2.3)),
            _sha(C._veil_blur(img, 0.4)),
            _sha(C.ripple(img, 1.3 * np.sin(np.arange(97) / 7.0), 1.1 * np.cos(np.arange(131) / 5.0))),
            _sha(C._shear_box(img, 9, 0.37)),
            _sha(C._shear_box(img, 31, -0.93, band=16)),
            _sha(K.upsample_u16(np.arange(48 * 40, dtype=np.uint16).reshape(40, 48) * 31, 7, 270, 330)),
        ]

    was = cv2.useOptimized()
    try:
        cv2.setUseOptimized(True)
        fast = run()
        cv2.setUseOptimized(False)
        slow = run()
    finally:
        cv2.setUseOptimized(was)
    assert fast == slow
