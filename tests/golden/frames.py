"""Deterministic synthetic frames for the corruption golden hashes, and the hash computation itself.

The frames are built with integer arithmetic only (no RNG, no floats), so they are identical everywhere:
a smooth colour ramp, a hashed fine texture, flat dark / bright / mid-grey patches, hard-edged stripes and
small bright "person-sized" dots, so that every corruption has something to act on.

Run ``python tests/golden/frames.py [--small]`` to print the pixel hashes of every corruption x severity x
frame as JSON (used by the determinism matrix in subprocesses); ``tests/golden/regen.py`` rewrites
``hashes.json`` deliberately.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from aegis_data.files.imageio import pixel_sha256 as pixel_hash  # the manifests' rule: b"HxWx3:" + pixel bytes

GOLDEN_SIZES = ((240, 320), (479, 641), (750, 1000))  # (height, width)
HASHES_PATH = Path(__file__).with_name("hashes.json")
# The golden hashes are aegis-v1's, frozen forever: named here, never the default suite (aegis-v2).
GOLDEN_SUITE = "aegis-v1"


def golden_frame(height: int, width: int) -> np.ndarray:
    """An HxWx3 uint8 RGB test frame (integer arithmetic only)."""
    y = np.arange(height, dtype=np.int64)[:, None]
    x = np.arange(width, dtype=np.int64)[None, :]
    # Smooth ramps with a hashed fine texture (Knuth multiplicative hash, kept in 32 bits).
    hsh = ((x * 2654435761 + y * 40503 * 2246822519) & 0xFFFFFFFF) >> 27  # 0..31
    r = 40 + (x * 150) // max(width - 1, 1) + hsh
    g = 60 + (y * 120) // max(height - 1, 1) + (hsh >> 1)
    b = 90 + ((x + y) * 60) // max(width + height - 2, 1) + (31 - hsh)
    img = np.stack(np.broadcast_arrays(r, g, b), axis=-1)
    # Hard-edged stripes in the lower right quarter.
    stripes = ((x // 6) % 2 == 0) & (y > height // 2) & (x > width // 2)
    img = np.where(stripes[..., None], np.array([235, 230, 220]), img)
    # Flat patches: near-black, near-white, mid grey.
    img[height // 8 : height // 8 + height // 5, width // 10 : width // 10 + width // 6] = (8, 10, 12)
    img[height // 8 : height // 8 + height // 5, width // 2 : width // 2 + width // 6] = (250, 250, 248)
    img[height * 5 // 8 : height * 5 // 8 + height // 6, width // 10 : width // 10 + width // 5] = (128, 128, 128)
    # Small bright dots (3x3) on a coarse lattice, like distant people in an aerial frame.
    for cy in range(height // 12, height, max(height // 6, 1)):
        for cx in range(width // 14, width, max(width // 7, 1)):
            img[max(cy - 1, 0) : cy + 2, max(cx - 1, 0) : cx + 2] = (255, 200, 40)
    return np.ascontiguousarray(img.astype(np.uint8))


def compute_hashes(sizes=GOLDEN_SIZES) -> dict[str, str]:
    """``{"<H>x<W>/<corruption>_s<k>": sha256}`` for every golden frame, corruption and severity."""
    from aegis_data.engine.config import load_config
    from aegis_data.engine.corruptions import CORRUPTIONS, apply_corruption

    config = load_config(GOLDEN_SUITE)
    out = {}
    for h, w in sizes:
        frame = golden_frame(h, w)
        image_id = f"golden-{h}x{w}"
        for name in CORRUPTIONS:
            for sev in (1, 2, 3):
                out[f"{h}x{w}/{name}_s{sev}"] = pixel_hash(apply_corruption(frame, name, sev, image_id, config=config))
    return out


def load_golden() -> dict[str, str]:
    return json.loads(HASHES_PATH.read_text())["hashes"]


def runtime_report() -> dict:
    """What this process actually runs with (proof that a determinism-matrix setting took effect)."""
    import cv2

    try:
        from numpy._core._multiarray_umath import __cpu_features__ as npy
    except ImportError:  # NumPy 1.x
        from numpy.core._multiarray_umath import __cpu_features__ as npy

    return {
        "cv2_version": cv2.__version__,
        "cv2_optimized": bool(cv2.useOptimized()),
        "cv2_threads": int(cv2.getNumThreads()),
        "cv2_avx2": bool(cv2.checkHardwareSupport(11)),  # CV_CPU_AVX2
        "numpy_version": np.__version__,
        "numpy_enabled": sorted(k for k, v in npy.items() if v),
        "kernels": _kernels_report(),
    }


def _kernels_report() -> str:
    from aegis_data.engine import kernels as K

    return "numpy" if K.CKERNELS is None else f"compiled:{Path(K.CKERNELS.__file__).resolve()}"


def use_compiled_from(path: str) -> None:
    """Run the engine with a compiled-loops module built elsewhere (e.g. without its AVX2 variants)."""
    import importlib.util

    from aegis_data.engine import kernels as K

    spec = importlib.util.spec_from_file_location("aegis_data.engine._ckernels", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    K.CKERNELS = mod


def apply_matrix_flags(argv: list[str]) -> None:
    """The determinism matrix's in-process settings: ``--ckernels=SO`` (compiled loops built elsewhere),
    ``--cv2-noopt`` (OpenCV's optimised paths off), ``--cv2-threads=N``."""
    import cv2

    for a in argv:
        if a.startswith("--ckernels="):
            use_compiled_from(a.split("=", 1)[1])
    if "--cv2-noopt" in argv:
        cv2.setUseOptimized(False)
    for a in argv:
        if a.startswith("--cv2-threads="):
            cv2.setNumThreads(int(a.split("=", 1)[1]))


def main(argv: list[str]) -> None:
    """``frames.py [--small] [--only=<HxW/condition>] [--cv2-noopt] [--cv2-threads=N] [--ckernels=SO]`` -> JSON."""
    apply_matrix_flags(argv)
    only = [a.split("=", 1)[1] for a in argv if a.startswith("--only=")]
    if only:
        from aegis_data.engine.config import load_config
        from aegis_data.engine.corruptions import apply_corruption

        config = load_config(GOLDEN_SUITE)
        hashes = {}
        for key in only:
            size, cond = key.split("/")
            h, w = (int(v) for v in size.split("x"))
            name, _, sev = cond.rpartition("_s")
            hashes[key] = pixel_hash(
                apply_corruption(golden_frame(h, w), name, int(sev), f"golden-{h}x{w}", config=config)
            )
    else:
        hashes = compute_hashes(GOLDEN_SIZES[:1] if "--small" in argv else GOLDEN_SIZES)
    print(json.dumps({"hashes": hashes, "runtime": runtime_report()}, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1:])
