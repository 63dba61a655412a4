"""The scene and camera model of aegis-v2 (docs/CORRUPTIONS.md, "Scene and camera model"): valid pixels, view,
horizon and sky, ground sampling distance, sidecars; and that every aegis-v2 corruption leaves bars alone."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from aegis_data.engine.config import load_config
from aegis_data.engine.corruptions import apply_corruption
from aegis_data.engine.scale import Scale
from aegis_data.engine.scene import (
    MAX_SIDECAR_BYTES,
    NADIR,
    OBLIQUE,
    check_sidecar,
    estimate_scene,
    gsd_from_person_px,
    read_sidecar,
    valid_region,
    water_mask_digest,
)
from aegis_data.errors import AegisError
from tests import REPO_ROOT
from tests.golden.frames import golden_frame
from tests.golden.scenes import letterboxed_frame, oblique_frame

V2 = load_config("aegis-v2")
CAMERA = V2.camera
REAL = REPO_ROOT.parent / "shared" / "real-frames" / "heridal"


# --- valid pixels ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("bar", [2, 24, 60])
def test_letterbox_bars_are_found_to_the_row(bar):
    img = letterboxed_frame(240, 320, bar)
    assert valid_region(img) == (0, bar, 320, 240 - bar)


def test_bars_with_jpeg_ringing_and_any_constant_colour_are_bars():
    assert valid_region(letterboxed_frame(240, 320, 30, jitter=3)) == (0, 30, 320, 210)
    assert valid_region(letterboxed_frame(240, 320, 30, colour=(255, 255, 255))) == (0, 30, 320, 210)
    assert valid_region(letterboxed_frame(240, 320, 30, colour=(90, 90, 92))) == (0, 30, 320, 210)


def test_pillarbox_bars_are_found_beside_letterbox_bars():
    img = np.zeros((240, 400, 3), np.uint8)
    img[20:220, 50:350] = golden_frame(200, 300)
    assert valid_region(img) == (50, 20, 350, 220)


def test_one_uniform_edge_row_is_scene_not_a_bar_and_a_flat_frame_is_all_valid():
    img = golden_frame(240, 320)
    img[0] = (128, 128, 128)  # a single uniform row (a road edge, a roof line)
    assert valid_region(img) == (0, 0, 320, 240)
    assert valid_region(np.full((50, 60, 3), 77, np.uint8)) == (0, 0, 60, 50)


def test_every_aegis_v2_corruption_leaves_bars_untouched_and_renders_the_content_alone():
    bar = 30
    img = letterboxed_frame(240, 320, bar, jitter=2)
    content = np.ascontiguousarray(img[bar : 240 - bar])
    unit = Scale("object", 20.0, "test")
    for name in V2.names:
        for sev in (1, 3):
            out = apply_corruption(img, name, sev, "lb", config=V2, scale=unit)
            assert np.array_equal(out[:bar], img[:bar]) and np.array_equal(out[240 - bar :], img[240 - bar :]), name
            alone = apply_corruption(content, name, sev, "lb", config=V2, scale=unit)
            assert np.array_equal(out[bar : 240 - bar], alone), f"{name} s{sev} saw the bars"


# --- view, horizon, sky --------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [(240, 320), (479, 641), (750, 1000)])
def test_an_oblique_view_is_found_with_its_horizon_within_one_block(size):
    img, horizon = oblique_frame(*size)
    scene = estimate_scene(img, 30.0, CAMERA)
    block = max(4, min(size) // 128)
    assert scene.view == OBLIQUE
    assert abs(scene.horizon_row - horizon) <= block
    sky = scene.sky_mask()
    assert sky[: horizon - block].all() and not sky[horizon + block :].any()


def test_nadir_frames_have_no_sky():
    for size in ((240, 320), (479, 641)):
        scene = estimate_scene(golden_frame(*size), 30.0, CAMERA)
        assert scene.view == NADIR and scene.horizon_row is None and scene.sky_depth == ()


@pytest.mark.skipif(not REAL.is_dir(), reason="../shared/real-frames is not on this machine")
def test_real_heridal_frames_are_nadir_without_bars():
    import cv2

    for path in sorted(REAL.glob("*.jpg")):
        rgb = cv2.cvtColor(cv2.imread(str(path)), cv2.COLOR_BGR2RGB)
        scene = estimate_scene(rgb, 60.0, CAMERA)
        assert scene.view == NADIR and scene.valid == (0, 0, rgb.shape[1], rgb.shape[0]), path.name


def test_ground_sampling_distance_follows_inverse_depth_in_an_oblique_view():
    img, _ = oblique_frame(479, 641)
    scene = estimate_scene(img, 30.0, CAMERA)
    rows = np.array([scene.reference_row, scene.horizon_row + 10, scene.horizon_row + 100, 478.0])
    gsd = scene.gsd_rows(rows)
    assert gsd[0] == pytest.approx(gsd_from_person_px(30.0))
    # gsd (y - horizon) is the same on every ground row: a flat ground plane, inverse depth linear in the row.
    assert np.allclose(gsd[1:] * (rows[1:] - scene.horizon_row), gsd[0] * (rows[0] - scene.horizon_row))
    assert np.isinf(scene.gsd_rows(np.array([scene.horizon_row - 5.0]))).all()
    nadir = estimate_scene(golden_frame(240, 320), 30.0, CAMERA)
    assert np.all(nadir.gsd_rows(np.arange(240)) == gsd_from_person_px(30.0))


# --- sidecars ------------------------------------------------------------------------------------------
def test_a_sidecar_overrides_the_estimates_and_joins_the_record():
    img = golden_frame(240, 320)
    facts = check_sidecar(
        {"gsd_cm": 2.5, "speed_mps": 12.0, "exposure_ms": 2.0, "iso": 400, "heading_deg": 30, "altitude_m": 60}, "test"
    )
    scene = estimate_scene(img, 30.0, CAMERA, facts)
    assert scene.gsd_m == pytest.approx(gsd_from_person_px(48.08), rel=1e-3)  # the gsd's person unit, not 30 px
    assert (scene.speed_mps, scene.exposure_ms, scene.iso, scene.heading_deg) == (12.0, 2.0, 400.0, 30.0)
    assert scene.focal_px == pytest.approx(60.0 / scene.gsd_m, abs=0.01)  # nadir: altitude = gsd x focal length
    record = scene.record()
    assert record["given"] == facts and json.loads(json.dumps(record)) == record
    assert estimate_scene(img, 30.0, CAMERA, facts).record() == record  # pure


def test_a_sidecar_pitch_makes_the_view_and_places_the_horizon():
    img = golden_frame(240, 320)
    nadir = estimate_scene(img, 30.0, CAMERA, check_sidecar({"pitch_deg": 85}, "t"))
    assert nadir.view == NADIR
    oblique = estimate_scene(img, 30.0, CAMERA, check_sidecar({"pitch_deg": 30, "focal_px": 300}, "t"))
    assert oblique.view == OBLIQUE
    assert oblique.horizon_row == pytest.approx(119.5 - 300 * math.tan(math.radians(30)), abs=0.01)


@pytest.mark.parametrize(
    "doc, match",
    [
        ([1], "JSON object"),
        ({"altitude": 50}, "unknown key"),
        ({"speed_mps": -1}, "speed_mps must be a number"),
        ({"speed_mps": float("nan")}, "speed_mps must be a number"),
        ({"iso": True}, "iso must be a number"),
        ({"gsd_cm": 1000}, "gsd_cm must be a number"),
        ({"valid": [0, 0, 10]}, "valid must be"),
        ({"valid": [5, 0, 5, 10]}, "valid must be"),
        ({"water_mask": "../outside.png"}, "water_mask must be the name of a file"),
        ({"water_mask": "sub/mask.png"}, "water_mask must be the name of a file"),
        ({"water_mask": ".."}, "water_mask must be the name of a file"),
    ],
)
def test_bad_sidecars_are_one_line(doc, match):
    with pytest.raises(AegisError, match=match):
        check_sidecar(doc, "frame.scene.json")


def test_sidecar_files_are_bounded_and_parsed_strictly(tmp_path):
    big = tmp_path / "big.scene.json"
    big.write_text(json.dumps({"speed_mps": 1.0}) + " " * MAX_SIDECAR_BYTES)
    with pytest.raises(AegisError, match="at most"):
        read_sidecar(big)
    bad = tmp_path / "bad.scene.json"
    bad.write_text("{not json")
    with pytest.raises(AegisError):
        read_sidecar(bad)
    dup = tmp_path / "dup.scene.json"
    dup.write_text('{"speed_mps": 1, "speed_mps": 2}')
    with pytest.raises(AegisError):
        read_sidecar(dup)


def test_a_valid_rectangle_outside_the_image_is_refused_and_the_water_mask_digest_names_its_shape():
    with pytest.raises(AegisError, match="outside"):
        estimate_scene(golden_frame(240, 320), 30.0, CAMERA, check_sidecar({"valid": [0, 0, 400, 240]}, "t"))
    mask = np.zeros((4, 6), bool)
    assert water_mask_digest(mask) != water_mask_digest(np.zeros((6, 4), bool))
    mask[1, 2] = True
    assert water_mask_digest(mask) != water_mask_digest(np.zeros((4, 6), bool))


def test_sky_block_sums_are_the_plain_integer_definition():
    """The sky's block statistics (built in place, in int32 bands for speed) equal the definition in int64: per b x b
    block the luma sum (299 R + 587 G + 114 B) and the sum of |right difference| + |lower difference| of each pixel,
    0 past the crop's last column and row."""
    from aegis_data.engine.scene import _luma_block_sums

    rng = np.random.default_rng(7)
    for h, w, b in ((16, 16, 4), (60, 44, 4), (46, 69, 23)):
        crop = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        crop[: h // 2] = 255  # the largest values as well: no overflow
        c = crop.astype(np.int64)
        luma = c[..., 0] * 299 + c[..., 1] * 587 + c[..., 2] * 114
        tex = np.zeros_like(luma)
        tex[:, :-1] += np.abs(np.diff(luma, axis=1))
        tex[:-1] += np.abs(np.diff(luma, axis=0))
        got_tex, got_luma = _luma_block_sums(crop, b)
        assert got_tex.dtype == got_luma.dtype == np.int64
        assert np.array_equal(got_tex, tex.reshape(h // b, b, w // b, b).sum(axis=(1, 3)))
        assert np.array_equal(got_luma, luma.reshape(h // b, b, w // b, b).sum(axis=(1, 3)))


def test_the_water_mask_digest_is_the_sha256_of_shape_and_bytes():
    import hashlib

    for mask in (np.random.default_rng(3).random((7, 5)) < 0.5, np.zeros((0, 4), bool)):
        head = np.asarray(mask.shape, dtype="<u4").tobytes()
        assert water_mask_digest(mask) == hashlib.sha256(head + mask.view(np.uint8).tobytes()).hexdigest()
    strided = (np.arange(60).reshape(6, 10) % 3 == 0)[:, ::2]  # not contiguous: hashed as its row-major copy
    assert water_mask_digest(strided) == water_mask_digest(np.ascontiguousarray(strided))


def test_a_sidecar_pitch_with_the_horizon_in_the_frame_is_never_refused_as_a_rounding_boundary():
    """The reference row is the mean of the horizon (2 decimals) and the last valid row: with an odd last digit the
    mean ends in 5 at the third decimal, which 2 decimals cannot hold. It is kept exactly (3 decimals), not refused
    as a rounding boundary (which refused about half of the in-frame horizons of a pitch sidecar)."""
    img = golden_frame(480, 640)
    in_frame = 0
    for pitch in range(5, 60):
        for focal in (300.0, 500.0, 800.0):
            scene = estimate_scene(img, 30.0, CAMERA, check_sidecar({"pitch_deg": pitch, "focal_px": focal}, "t"))
            if scene.view == OBLIQUE and scene.horizon_row > 0:
                in_frame += 1
                assert scene.reference_row == round((scene.horizon_row + 479) / 2.0, 3)
                assert scene.gsd_rows(np.array([scene.reference_row]))[0] == pytest.approx(scene.gsd_m)
    assert in_frame > 40
