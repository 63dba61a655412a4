"""Adversarial repros against the engine (aegis_data/engine): every suite-config value is validated on load
(and a split whose config holds NaN is a verify finding), the compiled loops refuse overflowing sizes, the
documented parameter table is the validators'. Shared inputs: tests/adversarial.py.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests import REPO_ROOT
from tests.adversarial import _flip_pixel, _reseal, build_yolo, invoke, yolo_source

# --- 1. suite-config values are validated; the compiled loops check sizes ---------------------------------
CONFIG_EDITS = [
    (b"sigma_read: [0.010, 0.018, 0.028]", b"sigma_read: [.nan, .nan, .nan]", "low_light.severities.sigma_read"),
    (b"gain: [0.330, 0.130, 0.045]", b"gain: [.inf, 0.130, 0.045]", "low_light.severities.gain[s1]"),
    (b"noise_base: 6", b"noise_base: 0", "water_glare.fixed.noise_base"),
    (b"noise_octaves: 4\n      noise_base: 6", b"noise_octaves: 1e9\n      noise_base: 6", "noise_octaves"),
    (b"tint: [1.00, 0.98, 0.92]", b"tint: 0", "water_glare.fixed.tint"),
    (b"bloom_sigma_px: [8, 12, 16]", b"bloom_sigma_px: [8, 12, 1e9]", "bloom_sigma_px[s3]"),
    (b"seed: 20260707", b"seed: -1", "seed"),
    (b"direction: increase", b"direction: sideways", "direction"),
    (b"suite: aegis-v1", b"suite: aegis-v1\nextra_key: 1", "extra_key"),
]


# The same for aegis-v2's own blocks: its models' physical parameters, the camera, the model names.
CONFIG_EDITS_V2 = [
    (b"ev_loss: [4.6, 8.0, 11.6]", b"ev_loss: [.nan, .nan, .nan]", "low_light.severities.ev_loss"),
    (b"ev_loss: [4.6, 8.0, 11.6]", b"ev_loss: [.inf, 8.0, 11.6]", "low_light.severities.ev_loss[s1]"),
    (b"exposure_ms: [2.0, 8.3, 33.3]", b"exposure_ms: [2.0, 8.3, 1e9]", "motion_blur.severities.exposure_ms[s3]"),
    (b"model: trajectory_blur", b"model: warp_drive", "motion_blur.model"),
    (b"hfov_deg: 71.5", b"hfov_deg: 0", "camera.hfov_deg"),
    (b"white_balance: [2.0, 1.0, 1.7]", b"white_balance: [2.0, 1.0]", "camera.white_balance"),
    (b"  base_iso: 100\n", b"", "camera.base_iso is missing"),
    (b"\nscale: object\n", b"\nscale: frame\n", "declare scale: object"),
]


@pytest.mark.parametrize(
    "suite,old,new,names",
    [("aegis-v1", *c) for c in CONFIG_EDITS] + [("aegis-v2", *c) for c in CONFIG_EDITS_V2],
    ids=[f"v1-{c[2]}" for c in CONFIG_EDITS] + [f"v2-{c[2]}" for c in CONFIG_EDITS_V2],
)
def test_every_suite_config_value_is_checked_on_load(suite, old, new, names):
    from aegis_data.engine.config import config_from_bytes, suite_path
    from aegis_data.errors import AegisError

    data = suite_path(suite).read_bytes()
    assert old in data
    with pytest.raises(AegisError, match=names.replace("[", r"\[").replace("]", r"\]")) as info:
        config_from_bytes(data.replace(old, new, 1), "edited.yaml")
    assert "\n" not in str(info.value) and "edited.yaml" in str(info.value)


def test_a_suite_config_may_carry_a_scale_block():
    from aegis_data.engine.config import config_from_bytes, load_config, suite_path
    from aegis_data.errors import AegisError

    v1 = suite_path("aegis-v1").read_bytes()  # a suite without a scale block (frame scale) gets one
    cfg = config_from_bytes(v1 + b"scale: {mode: object, person_px: 30}\n")
    assert cfg.corruptions == load_config("aegis-v1").corruptions and cfg.scale == {"mode": "object", "person_px": 30.0}
    with pytest.raises(AegisError, match="scale must be"):
        config_from_bytes(v1 + b"scale: {reference: 1}\n")


@pytest.mark.parametrize(
    "suite,old,new,names",
    [
        ("aegis-v1", *CONFIG_EDITS[0]),
        ("aegis-v1", *CONFIG_EDITS[1]),
        ("aegis-v2", *CONFIG_EDITS_V2[0]),
        ("aegis-v2", *CONFIG_EDITS_V2[1]),
    ],
    ids=["v1-nan", "v1-inf", "v2-nan", "v2-inf"],
)
def test_verify_of_a_split_whose_config_holds_nan_is_one_finding_not_a_crash(tmp_path, suite, old, new, names):
    from aegis_data.engine.config import config_bytes_hash

    src, out = yolo_source(tmp_path / "src"), tmp_path / "out"
    m = build_yolo(src, out, "--suite", suite)
    data = (out / "corruptions.yaml").read_bytes().replace(old, new, 1)
    (out / "corruptions.yaml").write_bytes(data)
    m["config_hash"] = config_bytes_hash(data)  # a config that does not parse has only a byte hash
    _reseal(out, m)
    _flip_pixel(out / "test" / "low_light_s1" / "f0.png")  # verify would regenerate this file from the config
    r = invoke("verify", out, "--json", tmp_path / "v.json")
    assert r.exit_code == 1, r.output
    doc = json.loads((tmp_path / "v.json").read_text())
    assert any(f["path"] == "corruptions.yaml" and names.split("[")[0] in f["detail"] for f in doc["findings"])
    flipped = [f for f in doc["findings"] if f["path"] == "test/low_light_s1/f0.png"]
    assert flipped and flipped[0]["kind"] == "pixels" and "not available" in flipped[0]["detail"]


def test_compiled_loops_refuse_sizes_that_overflow():
    from aegis_data.engine import kernels as K

    c = K.CKERNELS
    if c is None:
        pytest.skip("the compiled loops are not built here (the NumPy fallback has no C sizes to overflow)")
    out, grid = np.zeros((2, 4), np.float32), np.zeros((2, 4))
    taps, weights = np.zeros((4, 4), np.int64), np.zeros((4, 4))
    with pytest.raises(ValueError, match="sizes out of range"):
        c.noise_columns(out, grid, 2, 4, taps, weights, 1 << 62, 1.0)
    with pytest.raises(ValueError, match="sizes out of range"):
        c.noise_columns(out, grid, 1 << 62, 4, taps, weights, 4, 1.0)
    with pytest.raises(ValueError, match="padded area overflows"):
        c.block_sum(np.zeros((1, 1), np.int64), np.zeros((4, 4), np.uint8), 4, 4, 1 << 62)
    c.noise_columns(out, grid, 2, 4, taps, weights, 4, 1.0)  # the same call with true sizes runs


def test_the_documented_parameter_table_is_the_validators():
    from aegis_data.engine.config_schema import CAMERA, PARAMETERS

    doc = (REPO_ROOT / "docs" / "CORRUPTIONS.md").read_text()
    for name, params in PARAMETERS.items():  # every model, aegis-v1's and generation 2's
        for key, p in params.items():
            assert f"| `{name}` | `{key}` | {p.describe()}" in doc, (name, key)
    for key, p in CAMERA.items():
        assert f"| `camera` | `{key}` | {p.describe()}" in doc, key
    # ... and the tables document nothing the validators do not know.
    section = doc.split("## Allowed parameter values", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:3] for line in section.splitlines() if line.startswith("| `")]
    known = {(m, k) for m, ps in PARAMETERS.items() for k in ps} | {("camera", k) for k in CAMERA}
    documented = {(a.strip().strip("`"), b.strip().strip("`")) for a, b in rows}
    assert documented == known and len(rows) == len(known)
