"""The synthetic aerial set: determinism (golden hashes, order, process, SIMD path), exact boxes, coverage."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import cv2
import numpy as np
import pytest

from aegis_data.engine.calibration import compute_statistic
from aegis_data.engine.config import load_config
from aegis_data.engine.corruptions import apply_corruption
from aegis_data.errors import AegisError
from aegis_data.files.imageio import pixel_sha256
from aegis_data.sources import load_source, read_rgb
from aegis_data.sources import synthetic as syn

# pixel_sha256 of render_scene(index, w, h, seed=20260707).rgb; a change here means every synthetic
# benchmark built before it is different: bump synthetic.VERSION and update these on purpose.
GOLDEN = {
    (0, 160, 120): "5f236fc3582203be4b447bbcb077924db064f46fba4d281a30b775724e26432e",
    (5, 96, 64): "0ef037ad21884b9df5714c1d5a839aff56936cb7acb8d8e34f17e8113f8d0c20",  # a negative (index % 6 == 5)
    (2, 200, 200): "8ed29b5dac20c081d634ef1f68a608245f969ac454fb2cb7bc09b59b927f1489",
}


def _hash(index, w, h):
    return pixel_sha256(syn.render_scene(index, w, h).rgb)


@pytest.mark.parametrize("key", sorted(GOLDEN))
def test_golden_pixel_hashes(key):
    assert _hash(*key) == GOLDEN[key]


def test_same_bytes_in_any_order_unoptimised_and_single_threaded():
    forward = [_hash(i, 128, 96) for i in (0, 1, 2)]
    backward = [_hash(i, 128, 96) for i in (2, 1, 0)][::-1]
    assert forward == backward
    assert len(set(forward)) == 3  # different indices are different images
    was, threads = cv2.useOptimized(), cv2.getNumThreads()
    try:
        cv2.setUseOptimized(False)
        cv2.setNumThreads(1)
        assert [_hash(i, 128, 96) for i in (0, 1, 2)] == forward
    finally:
        cv2.setUseOptimized(was)
        cv2.setNumThreads(threads)


def test_same_bytes_in_another_process_with_simd_paths_disabled():
    # A fresh process with OpenCV's and NumPy's wide-vector kernels switched off (the determinism test matrix,
    # docs/REPRODUCIBILITY.md).
    code = (
        "from aegis_data.sources import synthetic as s; from aegis_data.files.imageio import pixel_sha256;"
        "print(pixel_sha256(s.render_scene(4, 150, 110).rgb)); print(pixel_sha256(s.render_scene(1, 640, 360).rgb))"
    )
    env = dict(
        os.environ,
        OPENCV_CPU_DISABLE="AVX512-SKX,AVX2,FMA3,AVX,FP16",
        NPY_DISABLE_CPU_FEATURES="X86_V3 X86_V4 AVX512_ICL AVX512_SPR",
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if proc.returncode != 0 and "NPY_DISABLE_CPU_FEATURES" in proc.stderr:  # a CPU without those features
        env.pop("NPY_DISABLE_CPU_FEATURES")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [_hash(4, 150, 110), _hash(1, 640, 360)]


def test_seed_and_size_change_the_image():
    base = _hash(0, 128, 96)
    assert pixel_sha256(syn.render_scene(0, 128, 96, seed=1).rgb) != base
    assert _hash(0, 96, 128) != base


@pytest.mark.parametrize("index,size", [(0, (640, 640)), (1, (640, 640)), (3, (1280, 720)), (7, (400, 300))])
def test_boxes_are_the_painted_extent_of_each_person(index, size):
    scene = syn.render_scene(index, *size)
    bare = syn.render_scene(index, *size, persons=False)
    assert scene.boxes, "these indices hold persons"
    for k, box in enumerate(scene.boxes):
        ys, xs = np.nonzero(scene.person_labels == k + 1)
        # tight: the painted extent touches all four sides of its box
        assert (xs.min(), ys.min(), xs.max() + 1, ys.max() + 1) == box
        x0, y0, x1, y1 = (int(v) for v in box)
        assert (scene.rgb[y0:y1, x0:x1] != bare.rgb[y0:y1, x0:x1]).any()
        assert 0 <= x0 < x1 <= size[0] and 0 <= y0 < y1 <= size[1]
    # outside persons and their (blurred) shadows, the scene is untouched by the persons
    changed = (scene.rgb != bare.rgb).any(axis=2)
    shadow_reach = cv2.dilate(scene.shadow_mask.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0
    assert not (changed & ~(scene.person_labels > 0) & ~shadow_reach).any()
    # and the shadow is not part of any box's person pixels
    assert scene.shadow_mask.any()


def test_boxes_stay_inside_frames_smaller_than_a_person():
    # At 44 px/m a lying person spans ~90 px: in a 64 px frame such persons are left out, never cut off.
    for index in range(12):
        for w, h in ((64, 64), (96, 64)):
            boxes, _ = syn.synthetic_boxes(index, w, h)
            assert all(0 <= b[0] < b[2] <= w and 0 <= b[1] < b[3] <= h for b in boxes), (index, w, h, boxes)


def test_boxes_without_painting_match_render():
    for index in range(6):
        boxes, kinds = syn.synthetic_boxes(index, 320, 240)
        scene = syn.render_scene(index, 320, 240)
        assert boxes == scene.boxes and kinds == scene.kinds


def test_default_set_has_splits_negatives_and_size_bins():
    ds = load_source("synthetic")
    assert {s: len(r) for s, r in ds.splits.items()} == {"test": 16, "val": 8, "train": 8}
    for split in ("test", "val"):
        assert any(not r.boxes for r in ds.splits[split]), f"{split} needs negatives"
    areas = [(b[2] - b[0]) * (b[3] - b[1]) for r in ds.records() for b in r.boxes]
    assert any(a < 32**2 for a in areas) and any(32**2 <= a < 96**2 for a in areas)
    assert all(r.path.startswith("synthetic:") for r in ds.records())
    assert ds.description["options"]["n"] == 32
    sizes = {r.image_id: (r.width, r.height) for r in ds.records()}
    assert sizes["synthetic-00003"] == (1280, 720) and sizes["synthetic-00000"] == (640, 640)
    assert sum(1 for v in sizes.values() if v == (1280, 720)) == 4


@pytest.fixture(scope="module")
def default_test_split():
    """(image_id, rgb) of the default set's test split, the images `aegis calibrate` measures."""
    ds = load_source("synthetic")
    return [(r.image_id, read_rgb(r)) for r in ds.splits["test"]]


def _luma(rgb):
    return rgb.astype(np.float64) @ np.array([0.299, 0.587, 0.114]) / 255.0


def test_default_images_have_bright_ground_that_glare_saturates(default_test_split):
    # Sunlit limestone, dry sand and pale gravel (luma 0.80-0.93) are common on real SAR imagery; without them
    # the weakest glare (screen with 0.70) saturates nothing and its calibration ladder cannot leave clean.
    bright = [float(((y >= 0.80) & (y <= 0.93)).mean()) for y in (_luma(rgb) for _, rgb in default_test_split)]
    assert np.mean(bright) > 0.02
    assert sum(b > 0.005 for b in bright) >= 12, bright  # most images, not a single outlier
    assert max(bright) < 0.25
    clean_sat = [compute_statistic("saturated_fraction", rgb, rgb) for _, rgb in default_test_split]
    assert np.mean(clean_sat) < 1e-4  # bright, but not clipped
    v1 = load_config("aegis-v1")  # the frame-scale glare ladder these images were tuned for
    glare = [
        compute_statistic("saturated_fraction", apply_corruption(rgb, "water_glare", 1, iid, config=v1), rgb)
        for iid, rgb in default_test_split
    ]
    assert np.mean(glare) > np.mean(clean_sat) + 1e-4


def test_persons_keep_off_the_cores_of_bright_ground():
    for index in range(4):
        plan = syn._plan(index, 640, 640, syn.DEFAULT_SEED)
        assert all(plan.bright_alpha[p.cy, p.cx] < 96 for p in plan.persons)
    assert any(syn._plan(i, 640, 640, syn.DEFAULT_SEED).bright_alpha.max() == 255 for i in range(4))


def test_read_rgb_regenerates_the_record_pixels():
    ds = load_source("synthetic", n=3, size="128x96")
    rec = ds.splits["test"][0]
    rgb = read_rgb(rec)
    assert rgb.shape == (96, 128, 3) and rgb.dtype == np.uint8
    assert pixel_sha256(rgb) == _hash(0, 128, 96)
    with pytest.raises(AegisError, match="record says"):
        read_rgb(dataclasses.replace(rec, width=100))
    with pytest.raises(AegisError, match="above the limit"):
        read_rgb(rec, max_pixels=1000)


def test_options_sizes_and_fractions():
    ds = load_source("synthetic", n="7", size="128,160x96", test_fraction="0.4", val_fraction=0.2)
    sizes = [(r.width, r.height) for r in sorted(ds.records(), key=lambda r: r.image_id)]
    assert sizes == [(128, 128), (160, 96)] * 3 + [(128, 128)]
    assert {s: len(r) for s, r in ds.splits.items()} == {"test": 3, "val": 1, "train": 3}


@pytest.mark.parametrize(
    "options,message",
    [
        ({"size": "big"}, "expected N, WxH"),
        ({"size": "32"}, "between 64 and 8192"),
        ({"n": "0"}, "integer >= 1"),
        ({"n": "two"}, "expected an integer"),
        ({"val_fraction": "1.5"}, r"number in \[0, 1\)"),
        ({"test_fraction": 0.8, "val_fraction": 0.5}, "exceed 1"),
        ({"sise": "640"}, "did you mean 'size'"),
        ({"size": "640", "max_pixels": 1000}, "above max_pixels=1,000"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(AegisError, match=message):
        load_source("synthetic", **options)


def test_uri_round_trip_and_rejections():
    uri = syn.image_uri(12, 640, 480, 7)
    assert syn.parse_uri(uri) == (12, 640, 480, 7)
    with pytest.raises(AegisError, match="not a synthetic image reference"):
        syn.parse_uri("synthetic:v1/x/640x480/1")
    with pytest.raises(AegisError, match="made by generator v0"):
        syn.parse_uri("synthetic:v0/7/640x480/1")


def test_cosine_table_is_exact_and_margined():
    import math

    for d in range(0, 360, 7):
        assert abs(syn._COS[d] - math.cos(math.radians(d)) * 65536) <= 0.5
    assert syn._COS[0] == 65536 and syn._COS[90] == 0 and syn._COS[180] == -65536
