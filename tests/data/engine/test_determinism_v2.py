"""Bit-identity of aegis-v2 (docs/CORRUPTIONS.md, "Determinism of aegis-v2"): golden hashes of every cell on
near-nadir, letterboxed and oblique frames, the same hashes under every CPU and thread setting of the
determinism matrix (``test_determinism._settings``), in any order and in a fresh process; the exact tables pinned.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from aegis_data.engine.config import load_config
from aegis_data.engine.photometry import decode_table, encode_table
from aegis_data.engine.scene import estimate_scene
from tests import REPO_ROOT
from tests.data.engine.test_determinism import (
    _present_npy_groups,
    _settings,
    baseline_so,  # noqa: F401 (a fixture)
    run_matrix,
)
from tests.golden.frames import pixel_hash
from tests.golden.v2 import PERSON_PX, compute_hashes_v2, load_golden_v2, v2_frames

REPO = REPO_ROOT
V2_SCRIPT = REPO / "tests" / "golden" / "v2.py"
V2 = load_config("aegis-v2")

# The sRGB tables of linear light: pinned, so a change shows up as itself, not as moved pixel hashes.
DECODE_TABLE_SHA256 = "1fabd10cbcb6eeb8e669dcacd38493c0976f82a10be2212a5aacafb0e9ccd3a1"
ENCODE_TABLE_SHA256 = "255429c7df6ccd847a3ae3064b7d03275d80f388f2d004e73d1aeda67213745d"


@pytest.fixture(scope="module")
def golden() -> dict[str, str]:
    return load_golden_v2()


def test_the_golden_file_covers_every_frame_corruption_and_severity_of_the_suite(golden):
    frames = v2_frames()
    assert len(golden) == len(frames) * len(V2.names) * 3
    assert json.loads((REPO / "tests" / "golden" / "hashes_v2.json").read_text())["config_hash"] == V2.config_hash


def test_golden_hashes_in_process(golden):
    got = compute_hashes_v2()
    moved = sorted(k for k in golden if got.get(k) != golden[k])
    assert not moved, f"{len(moved)} aegis-v2 golden cells changed: {moved[:6]} (regenerate only on purpose)"


def test_matrix_of_cpu_and_thread_settings_gives_the_v2_golden_hashes(golden, baseline_so):
    results = run_matrix(V2_SCRIPT, _settings(baseline_so), timeout=600)
    for name, res in results.items():
        moved = sorted(k for k in golden if res["hashes"].get(k) != golden[k])
        assert not moved, f"setting {name!r} changed {len(moved)} aegis-v2 hashes, e.g. {moved[:4]}"
    rt = {k: v["runtime"] for k, v in results.items()}
    assert rt["numpy_kernels"]["kernels"] == "numpy" and not rt["cv2_no_optimizations"]["cv2_optimized"]
    if baseline_so is not None:
        assert rt["compiled_baseline"]["kernels"] == f"compiled:{baseline_so.resolve()}"
    if "numpy_cpu_disable" in rt:
        assert not set(_present_npy_groups()) & set(rt["numpy_cpu_disable"]["numpy_enabled"])


def test_one_cell_regenerates_alone_after_others_and_in_any_order(golden):
    from aegis_data.engine.corruptions import apply_corruption

    frames = v2_frames()
    other = frames["240x320"]
    for name in V2.names:
        apply_corruption(other, name, 3, "other", config=V2, scene=estimate_scene(other, PERSON_PX, V2.camera))
    frame = frames["oblique-479x641"]
    out = apply_corruption(
        frame, "motion_blur", 3, "golden-oblique-479x641", config=V2, scene=estimate_scene(frame, PERSON_PX, V2.camera)
    )
    assert pixel_hash(out) == golden["oblique-479x641/motion_blur_s3"]


def test_the_linear_light_tables_are_pinned_and_round_trip():
    assert hashlib.sha256(decode_table().tobytes()).hexdigest() == DECODE_TABLE_SHA256
    assert hashlib.sha256(encode_table().tobytes()).hexdigest() == ENCODE_TABLE_SHA256
    levels = np.arange(256, dtype=np.uint8)
    assert np.array_equal(encode_table()[decode_table()[levels]], levels)
