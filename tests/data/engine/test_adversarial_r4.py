"""Reliability round 4 (issue 28, after round 3): the inputs aegis-v2 added, attacked as a hostile and as a careless
user -- scene sidecars and the water masks they name, suite files (YAML) and their generation-2 camera and models,
the scene records of a split's manifest, ``aegis realism``'s folders, ``aegis calibrate``'s person boxes, the suite
a score file names and the suite key of an augmentation policy.

Each test reproduces one finding of the round and the behaviour docs/SECURITY.md ("aegis-v2 inputs") now promises:
one line and a non-zero exit (or a finding of ``aegis verify``), no traceback, no read outside the folder a file
was found in, no wait on a FIFO, and bounded time and memory. Inputs are tiny; builds use one corruption.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import struct
import threading
import tracemalloc
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.engine import visibility as V
from aegis_data.engine.config import load_config
from aegis_data.engine.corruptions import apply_corruption
from aegis_data.engine.scale import Scale
from aegis_data.engine.scene import check_sidecar, read_water_mask
from aegis_data.errors import AegisError
from aegis_data.files.imageio import write_png_atomic
from tests.conftest import assert_one_line_error

runner = CliRunner()
V1, V2 = load_config("aegis-v1"), load_config("aegis-v2")


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def rgb(height: int = 32, width: int = 48, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


def no_wait(fn, fifo: Path, seconds: float = 5.0):
    """``fn()``'s outcome (its value or the exception it raised); the test fails when it is still blocked after
    ``seconds`` -- reading the FIFO ``fifo`` -- and the FIFO is then given an end so the reader comes back."""
    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 -- handed to the test
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    blocked = t.is_alive()
    if blocked:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # a writer that closes at once: the reader sees EOF
        os.close(fd)
        t.join(10)
    assert not blocked, f"still reading the FIFO {fifo} after {seconds} s"
    return box


def png_bytes(
    width: int,
    height: int,
    *,
    depth: int = 8,
    colour: int = 0,
    rows: list[bytes] | None = None,
    palette: bytes | None = None,
) -> bytes:
    """A PNG written by hand (any size without allocating it: rows of zeros compress to almost nothing)."""

    def chunk(tag: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body) & 0xFFFFFFFF)

    comp = zlib.compressobj(9)
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[colour]
    zero = b"\x00" + b"\x00" * (width * channels * depth // 8)
    body = (
        b"".join(comp.compress(r) for r in rows)
        if rows is not None
        else b"".join(comp.compress(zero) for _ in range(height))
    )
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0))
    if palette is not None:
        out += chunk(b"PLTE", palette)
    return out + chunk(b"IDAT", body + comp.flush()) + chunk(b"IEND", b"")


# ==========================================================================================================
# Scene sidecars: a bad one is one line, a file of the wrong kind is refused, a link out of its folder not read
# ==========================================================================================================
@pytest.fixture
def image(tmp_path) -> Path:
    path = tmp_path / "data" / "img.png"
    path.parent.mkdir()
    write_png_atomic(path, rgb())
    return path


def corrupt(image: Path, *extra):
    return invoke(
        "corrupt",
        image,
        "-c",
        "motion_blur",
        "-s",
        "1",
        "-o",
        image.parent.parent / "out.png",
        "--person-px",
        "10",
        *extra,
    )


@pytest.mark.parametrize("name", ["a\u0000b.png", "..\\mask.png", "m\nask.png", "x" * 300])
def test_a_water_mask_name_no_file_can_have_is_refused_in_the_sidecar(image, name):
    """A NUL in ``water_mask`` passed the check and crashed the open() (ValueError: embedded null byte)."""
    (image.parent / "img.scene.json").write_text(json.dumps({"water_mask": name}))
    assert_one_line_error(corrupt(image), "water_mask must be the name of a file", "no separator")
    with pytest.raises(AegisError, match="no separator, backslash or control"):
        check_sidecar({"water_mask": name}, "s")


@pytest.mark.parametrize("kind", ["folder", "fifo", "dangling link"])
def test_something_else_named_like_the_sidecar_is_refused_not_ignored(image, kind):
    """A folder or a FIFO named ``img.scene.json`` was skipped silently by ``aegis corrupt`` (and by a build): the
    image rendered with estimated facts, the flight log's ones lost without a word."""
    side = image.parent / "img.scene.json"
    if kind == "folder":
        side.mkdir()
    elif kind == "fifo":
        os.mkfifo(side)
    else:
        side.symlink_to(image.parent / "gone.scene.json")
    assert_one_line_error(
        no_wait(lambda: corrupt(image), side)["value"] if kind == "fifo" else corrupt(image), "scene sidecar"
    )
    assert not (image.parent.parent / "out.png").exists()


def test_a_build_refuses_a_folder_named_like_a_sidecar(tmp_path):
    src = yolo_source(tmp_path / "src")
    (src / "images" / "f1.scene.json").mkdir()
    r = invoke("build-splits", "--source", src, "--out-dir", tmp_path / "out", *BUILD)
    assert_one_line_error(r, "f1.scene.json", "directory")


def test_a_sidecar_found_beside_an_image_that_links_out_of_its_folder_is_not_read(image, tmp_path):
    secret = tmp_path / "elsewhere" / "flight.json"
    secret.parent.mkdir()
    secret.write_text(json.dumps({"pitch_deg": 30.0}))
    (image.parent / "img.scene.json").symlink_to(secret)
    assert_one_line_error(corrupt(image), "link leaving its folder", "not read")
    src = yolo_source(tmp_path / "src")
    (src / "images" / "f0.scene.json").symlink_to(secret)
    assert_one_line_error(
        invoke("build-splits", "--source", src, "--out-dir", tmp_path / "out", *BUILD), "link leaving its folder"
    )
    # A sidecar you name on the command line is yours: read wherever it is.
    r = corrupt(image, "--scene", secret)
    assert r.exit_code == 0, r.output


def test_a_sidecar_that_is_a_symbolic_link_loop_is_one_line(image):
    """A sidecar that is a link loop was skipped silently (it is no file); the link check reads it as a loop."""
    (image.parent / "img.scene.json").symlink_to(image.parent / "other.scene.json")
    (image.parent / "other.scene.json").symlink_to(image.parent / "img.scene.json")
    assert_one_line_error(corrupt(image), "symbolic link loop")


def test_a_sidecar_that_does_not_fit_its_image_names_the_image_in_a_build(tmp_path):
    src = yolo_source(tmp_path / "src")
    (src / "images" / "f1.scene.json").write_text(json.dumps({"valid": [0, 0, 4000, 4000]}))
    r = invoke("build-splits", "--source", src, "--out-dir", tmp_path / "out", *BUILD)
    assert_one_line_error(r, "test image f1:", "lies outside the 48x32 image")


# ==========================================================================================================
# Water masks: their own size from the header, their stored values, never a FIFO or a link out
# ==========================================================================================================
def write_sidecar_with_mask(image: Path, mask_bytes: bytes | None = None, name: str = "water.png") -> Path:
    (image.parent / "img.scene.json").write_text(json.dumps({"water_mask": name}))
    mask = image.parent / name
    if mask_bytes is not None:
        mask.write_bytes(mask_bytes)
    return mask


def test_a_water_mask_bomb_is_refused_from_its_header_before_decoding(image, tmp_path):
    """A 30 KB PNG of 6000 x 6000 px was decoded in full (108 MB as RGB; a 190 KB one of 14,000 px took 1.4 GB and
    7 s) before its size was compared with the image's."""
    mask = write_sidecar_with_mask(image, png_bytes(6000, 6000))
    tracemalloc.start()
    try:
        with pytest.raises(AegisError, match="6000x6000, the image 48x32"):
            read_water_mask(mask, 32, 48)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak
    assert_one_line_error(corrupt(image), "water mask is 6000x6000")


def test_a_16_bit_water_mask_marks_water_where_its_samples_are_not_zero(tmp_path):
    """Decoded as a picture, 16-bit samples were scaled to 8 bits: a label mask of 0 and 1 (water) read as dry."""
    mask = np.zeros((8, 10), np.uint16)
    mask[2:5, 3:7] = 1
    mask[6, 1] = 65535
    assert cv2.imwrite(str(tmp_path / "m16.png"), mask)
    got = read_water_mask(tmp_path / "m16.png", 8, 10)
    assert got.sum() == 13 and got[2:5, 3:7].all() and got[6, 1]


def test_water_mask_formats_read_as_their_colours_and_transparency_is_refused(tmp_path):
    # 8-bit grey, RGB and an opaque RGBA read as before: any non-zero colour sample is water.
    grey = np.zeros((6, 7), np.uint8)
    grey[1, 2] = 1
    for data in (grey, np.dstack([grey, grey * 0, grey * 0]), np.dstack([grey * 0, grey * 0, grey, grey * 0 + 255])):
        assert cv2.imwrite(str(tmp_path / "m.png"), data)
        assert read_water_mask(tmp_path / "m.png", 6, 7).sum() == 1
    # A palette PNG by its colours: index 1 is black (dry), index 0 white (water).
    rows = [b"\x00" + bytes([1] * 7) for _ in range(6)]
    rows[3] = b"\x00" + bytes([1, 1, 0, 1, 1, 1, 1])
    (tmp_path / "p.png").write_bytes(png_bytes(7, 6, colour=3, rows=rows, palette=b"\xff\xff\xff\x00\x00\x00"))
    got = read_water_mask(tmp_path / "p.png", 6, 7)
    assert got.sum() == 1 and got[3, 2]
    # Water painted on a transparent layer: which pixels the alpha marks would be a guess.
    rgba = np.full((6, 7, 4), 255, np.uint8)
    rgba[..., 3] = 0
    assert cv2.imwrite(str(tmp_path / "t.png"), rgba)
    with pytest.raises(AegisError, match="transparent"):
        read_water_mask(tmp_path / "t.png", 6, 7)


def test_a_water_mask_that_is_a_fifo_is_refused_not_waited_on(image):
    mask = write_sidecar_with_mask(image)
    os.mkfifo(mask)
    assert_one_line_error(no_wait(lambda: corrupt(image), mask)["value"], "FIFO")


def test_a_water_mask_linking_out_of_the_sidecar_folder_is_not_read(image, tmp_path):
    private = tmp_path / "private.png"
    write_png_atomic(private, rgb(seed=7))
    mask = write_sidecar_with_mask(image)
    mask.symlink_to(private)
    assert_one_line_error(corrupt(image), "link leaving its folder", "not read")
    with pytest.raises(AegisError, match="link leaving its folder"):
        read_water_mask(mask, 32, 48)


# ==========================================================================================================
# Suite files: YAML bounded in size and expansion, no key twice; a generation-2 camera that overflows is one line
# ==========================================================================================================
def alias_bomb(levels: int) -> str:
    """A flow list whose aliases expand to 9**levels values (the 'billion laughs')."""
    parts = ["&a0 [1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    parts += [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return "[" + ", ".join(parts) + "]"


@pytest.mark.parametrize("key", ["seed", "suite", "scale"])
def test_a_yaml_alias_bomb_in_a_suite_is_refused_at_once(tmp_path, key):
    """6 KB of aliases in any value whose error message printed it took 25 s (9 levels; 10 levels: minutes and
    gigabytes): the message's repr walked the 387 million values."""
    text = V2.raw.decode()
    text = {
        "seed": text.replace("\nseed: 20260707\n", f"\nseed: {alias_bomb(8)}\n"),
        "suite": text.replace("\nsuite: aegis-v2\n", f"\nsuite: {alias_bomb(8)}\n"),
        "scale": text.replace("\nscale: object\n", f"\nscale: {alias_bomb(8)}\n"),
    }[key]
    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    assert_one_line_error(invoke("list", "--suite", path), "aliases expand")


def test_an_alias_cycle_and_a_bomb_in_a_policy_are_refused(tmp_path):
    for body in (f"name: p\nfamilies: {alias_bomb(8)}\n", "name: p\nfamilies: &f [*f]\n"):
        (tmp_path / "p.yaml").write_text(body)
        with pytest.raises(AegisError, match="aliases expand"):
            from aegis_data.augment.transform import load_policy

            load_policy(tmp_path / "p.yaml")


def test_a_huge_yaml_is_refused_before_it_is_parsed(tmp_path):
    """A suite file is a few KB; 300 KB of YAML took seconds to parse before its first unknown key was refused
    (the pure-Python parser reads ~200 KB/s: 100 MB were ten minutes)."""
    path = tmp_path / "big.yaml"
    path.write_text(V2.raw.decode() + "# " + "x" * (300 << 10) + "\n")
    assert_one_line_error(invoke("list", "--suite", path), "at most")


def test_a_key_given_twice_in_a_yaml_input_is_refused(tmp_path):
    """YAML keeps the last of two equal keys silently: a suite's seed, or a policy's suite, was replaced unseen."""
    suite = tmp_path / "twice.yaml"
    suite.write_text(V2.raw.decode() + "seed: 5\n")
    assert_one_line_error(invoke("list", "--suite", suite), "'seed' is given twice")
    from aegis_data.augment.transform import load_policy

    policy = tmp_path / "p.yaml"
    policy.write_text("name: p\nsuite: aegis-v1\nsuite: aegis-v2\n")
    with pytest.raises(AegisError, match="'suite' is given twice"):
        load_policy(policy)


def test_a_fifo_or_folder_given_as_the_suite_is_named_as_such(tmp_path):
    os.mkfifo(tmp_path / "s.yaml")
    (tmp_path / "d.yaml").mkdir()
    for path in (tmp_path / "s.yaml", tmp_path / "d.yaml"):
        assert_one_line_error(invoke("list", "--suite", path), "not a regular file")


def suite_with(**camera) -> Path:
    raw = yaml.safe_load(V2.raw)
    raw["camera"].update(camera)
    return yaml.safe_dump(raw, sort_keys=False)


@pytest.mark.parametrize(
    "camera,named",
    [
        ({"read_noise_line": [-100.0, 100.0]}, "read-noise variance"),  # exp(914): OverflowError
        ({"read_noise_line": [-100.0, -100.0]}, "read-noise variance"),
        ({"shot_noise_base": 5e-324, "base_iso": 409600}, "shot-noise variance"),  # log(0): ValueError
    ],
)
def test_a_schema_valid_camera_whose_noise_leaves_float64_is_one_line(image, tmp_path, camera, named):
    path = tmp_path / "camera.yaml"
    path.write_text(suite_with(**camera))
    (image.parent / "img.scene.json").write_text(json.dumps({"iso": 1.0}))
    r = invoke(
        "corrupt", image, "-c", "low_light", "-s", "1", "-o", tmp_path / "o.png", "--person-px", "10", "--suite", path
    )
    assert_one_line_error(r, "low_light s1", named)


def test_a_generation_2_refusal_inside_a_model_names_the_render():
    """The shipped motion blur s3 at the largest person unit on a 64 x 48 frame is longer than four frames; the
    refusal said only 'motion blur kernel is larger than four frames'."""
    with pytest.raises(AegisError, match=r"^motion_blur s3 at person unit 2000 px on a 64x48 region: .*four frames"):
        apply_corruption(rgb(48, 64), "motion_blur", 3, "x", config=V2, scale=Scale("object", 2000.0))


# ==========================================================================================================
# A split's scene records: every shape an attacker can reseal is a finding
# ==========================================================================================================
BUILD = ("--dataset", "yolo", "--corruptions", "motion_blur", "--severities", "1", "--workers", "1")


def yolo_source(root: Path, n: int = 3) -> Path:
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    for i in range(n):
        write_png_atomic(root / "images" / f"f{i}.png", rgb(seed=i))
        (root / "labels" / f"f{i}.txt").write_text("0 0.5 0.5 0.25 0.25\n")
    return root


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """An aegis-v2 split (one image with a sidecar) and an aegis-v1 split under object scale, as built."""
    base = tmp_path_factory.mktemp("r4")
    src = yolo_source(base / "src")
    (src / "images" / "f0.scene.json").write_text(json.dumps({"pitch_deg": 30.0, "speed_mps": 5.0}))
    out = {}
    for suite in ("aegis-v2", "aegis-v1"):
        out[suite] = base / suite
        r = invoke(
            "build-splits", "--source", src, "--out-dir", out[suite], *BUILD, "--suite", suite, "--scale", "object"
        )
        assert r.exit_code == 0, r.output
    return out


@pytest.fixture
def v2(built, tmp_path) -> Path:
    dst = tmp_path / "v2"
    shutil.copytree(built["aegis-v2"], dst, symlinks=True)
    return dst


def reseal(split: Path, edit) -> dict:
    """Edit the manifest (``edit(manifest, split)``) and seal it again, as an attacker can."""
    from aegis_data.split.manifest import files_hash, root_hash, sealed_header

    m = json.loads((split / "manifest.json").read_text())
    edit(m, split)
    m["root_hash"] = root_hash(m, m["entries"])
    m["files_hash"] = files_hash(m["root_hash"], m["encoder"], m["entries"], sealed_header(m))
    (split / "manifest.json").write_text(json.dumps(m))
    return m


def entry(m: dict, condition: str = "clean", image_id: str = "f0") -> dict:
    return next(e for e in m["entries"] if e.get("condition") == condition and e["image_id"] == image_id)


def verify_failures(split: Path, *extra) -> list[dict]:
    report = split.parent / "verify.json"
    r = invoke("verify", split, "--json", report, *extra)
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in r.output
    found = [f for f in json.loads(report.read_text())["findings"] if f["failure"]]
    assert (r.exit_code == 1) == bool(found), r.output
    return found


def flip_a_pixel(split: Path, rel: str) -> None:
    from aegis_data.files.imageio import read_rgb

    img = read_rgb(split / rel)
    img[0, 0] ^= 1
    write_png_atomic(split / rel, img)


def test_the_built_v2_split_verifies(v2):
    assert verify_failures(v2) == []


def set_scene(value, condition="clean"):
    def edit(m, _):
        if value is None:
            entry(m).pop("scene")
        else:
            entry(m, condition)["scene"] = value

    return edit


def set_annotations_scene(m, _):
    next(e for e in m["entries"] if e["kind"] == "annotations")["scene"] = {"view": "nadir"}


RECORD_EDITS = {  # a resealed manifest that passed verify, and what the finding says
    "scene dropped": (set_scene(None), "test/clean/f0.png", "records no scene"),
    "scene a string": (set_scene("nadir"), "test/clean/f0.png", "a string, not an object"),
    "scene a list": (set_scene([1, 2]), "test/clean/f0.png", "a list, not an object"),
    "scene on a corrupted entry": (
        set_scene({"view": "nadir"}, "motion_blur_s1"),
        "test/motion_blur_s1/f0.png",
        "only an image's clean entry",
    ),
    "scene on the GT entry": (set_annotations_scene, "annotations/test.json", "only an image's clean entry"),
}


@pytest.mark.parametrize("case", list(RECORD_EDITS))
def test_a_resealed_scene_record_of_the_wrong_shape_is_a_scene_finding(v2, case):
    edit, path, detail = RECORD_EDITS[case]
    reseal(v2, edit)
    found = verify_failures(v2)
    assert any(f["path"] == path and f["kind"] == "scene" and detail in f["detail"] for f in found), found


@pytest.mark.parametrize("digest", [[1] * 1000, "A" * 64, "0" * 63, 7])
def test_a_water_mask_digest_that_is_no_digest_is_a_scene_finding(v2, digest):
    """The recorded ``water_mask_sha256`` was copied into the re-derived scene, so any value compared equal."""

    def edit(m, _):
        entry(m)["scene"]["water_mask_sha256"] = digest

    reseal(v2, edit)
    found = verify_failures(v2)
    assert any(f["kind"] == "scene" and "water_mask_sha256" in f["detail"] for f in found), found


def test_a_water_mask_named_without_its_digest_is_a_scene_finding(v2):
    """The scene is re-derived with the mask the split keeps for it: none here, so it cannot be; with a mask placed
    there, its digest is not the recorded None."""

    def edit(m, _):
        entry(m)["scene"]["given"]["water_mask"] = "water.png"

    reseal(v2, edit)
    found = verify_failures(v2)
    assert any(
        f["path"] == "test/clean/f0.png" and f["kind"] == "scene" and "water mask file not found" in f["detail"]
        for f in found
    ), found
    write_png_atomic(v2 / "scenes" / "test" / "f0.water.png", rgb())
    found = verify_failures(v2)
    assert any(
        f["path"] == "test/clean/f0.png" and f["kind"] == "scene" and "water_mask_sha256" in f["detail"] for f in found
    ), found


def test_unusable_sidecar_facts_and_a_changed_file_give_a_report_not_an_abort(v2):
    """The clean entry's scene could not be re-derived (a hostile ``given``) and verify stopped at the first changed
    corrupted file with that error, instead of reporting both."""

    def edit(m, _):
        entry(m)["scene"]["given"] = {"evil": 1}

    reseal(v2, edit)
    flip_a_pixel(v2, "test/motion_blur_s1/f0.png")
    found = verify_failures(v2)
    assert {(f["path"], f["kind"]) for f in found} >= {
        ("test/clean/f0.png", "scene"),
        ("test/motion_blur_s1/f0.png", "pixels"),
    }, found


def test_a_scene_record_on_an_aegis_v1_split_is_a_finding_not_a_traceback(built, tmp_path):
    """On a v1 split built under object scale, a scene record plus one changed corrupted file crashed verify with
    KeyError: 'hfov_deg' (the v1 suite has no camera)."""
    v1 = tmp_path / "v1"
    shutil.copytree(built["aegis-v1"], v1, symlinks=True)
    scene = entry(json.loads((built["aegis-v2"] / "manifest.json").read_text()), image_id="f1")["scene"]

    def edit(m, _):
        entry(m, image_id="f1")["scene"] = scene

    reseal(v1, edit)
    flip_a_pixel(v1, "test/motion_blur_s1/f1.png")
    found = verify_failures(v1)
    assert any(
        f["path"] == "test/clean/f1.png" and f["kind"] == "scene" and "generation 1" in f["detail"] for f in found
    ), found
    assert any(f["path"] == "test/motion_blur_s1/f1.png" and f["kind"] == "pixels" for f in found), found


def test_a_v2_split_whose_config_copy_was_swapped_for_aegis_v1_fails_verify(built, v2):
    """The copy replaced by aegis-v1's and the manifest's config hash resealed: verify passed."""

    def swap(m, split):
        shutil.copyfile(built["aegis-v1"] / "corruptions.yaml", split / "corruptions.yaml")
        m["config_hash"] = V1.config_hash  # the copy is named by its hash, not listed as an entry

    reseal(v2, swap)
    found = verify_failures(v2)
    assert any(f["path"] == "manifest.json" and "suite 'aegis-v2'" in f["detail"] for f in found), found
    assert any(f["kind"] == "scene" and "generation 1" in f["detail"] for f in found), found


def test_against_a_reference_a_local_scene_that_differs_is_named(v2, tmp_path):
    ref = tmp_path / "reference.json"
    shutil.copyfile(v2 / "manifest.json", ref)

    def edit(m, _):
        entry(m)["scene"]["given"]["speed_mps"] = 6.0

    reseal(v2, edit)
    found = verify_failures(v2, "--against", ref)
    assert any(
        f["path"] == "test/clean/f0.png" and f["kind"] == "manifest" and "scene" in f["detail"] for f in found
    ), found


# ==========================================================================================================
# aegis realism: a received split is read inside itself and never waited on
# ==========================================================================================================
def real_frames(tmp_path: Path) -> Path:
    real = tmp_path / "real"
    real.mkdir()
    write_png_atomic(real / "r.png", rgb(64, 64, seed=3))
    return real


def test_realism_refuses_a_fifo_in_the_split_instead_of_waiting(v2, tmp_path):
    fifo = v2 / "test" / "clean" / "a.png"
    os.mkfifo(fifo)
    r = no_wait(
        lambda: invoke("realism", real_frames(tmp_path), "--condition", "motion_blur_s1", "--split-dir", v2), fifo
    )["value"]
    assert_one_line_error(r, "a.png")


def test_realism_does_not_read_a_frame_linking_out_of_the_split(v2, tmp_path):
    outside = tmp_path / "private.png"
    write_png_atomic(outside, rgb(seed=9))
    (v2 / "test" / "clean" / "a.png").symlink_to(outside)
    r = invoke("realism", real_frames(tmp_path), "--condition", "motion_blur_s1", "--split-dir", v2)
    assert_one_line_error(r, "resolves outside the split", "not read")


def test_a_symbolic_link_loop_in_a_split_is_a_link_finding_and_one_line_for_realism(v2, tmp_path):
    """A link loop in a received split crashed verify and realism (RuntimeError: Symlink loop)."""
    (v2 / "test" / "clean" / "f1.png").unlink()
    (v2 / "test" / "clean" / "f1.png").symlink_to("f1.png")
    found = verify_failures(v2)
    assert any(f["path"] == "test/clean/f1.png" and f["kind"] == "link" and "loop" in f["detail"] for f in found)
    r = invoke("realism", real_frames(tmp_path), "--condition", "motion_blur_s1", "--split-dir", v2)
    assert_one_line_error(r, "f1.png", "symbolic link loop")


# ==========================================================================================================
# aegis calibrate: hostile person boxes
# ==========================================================================================================
def test_a_box_whose_edge_overflows_float64_is_no_traceback(v2, tmp_path):
    """``x + w`` of a box at 1.7e308 is inf: OverflowError (cannot convert float infinity to integer)."""
    assert V.person_visibility(rgb(), [[1.7e308, 0.0, 1.7e308, 10.0], [-1e308, 0, 1.7e308, 1.7e308]])
    gt = json.loads((v2 / "annotations" / "test.json").read_text())
    gt["annotations"][0]["bbox"] = [1.7e308, 0.0, 1.7e308, 10.0]
    (v2 / "annotations" / "test.json").write_text(json.dumps(gt))
    r = invoke("calibrate", v2, "--json", tmp_path / "c.json")
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in r.output


def _covered_area_reference(u, v, w, h) -> int:
    """The union of w x h windows at (u, v) counted pixel by pixel (a difference array over their bounding box)."""
    u0, v0 = int(u.min()), int(v.min())
    diff = np.zeros((int(v.max()) - v0 + h + 1, int(u.max()) - u0 + w + 1), np.int64)
    for du, dv, s in ((0, 0, 1), (w, 0, -1), (0, h, -1), (w, h, 1)):
        np.add.at(diff, (v - v0 + dv, u - u0 + du), s)
    return int(np.count_nonzero(np.cumsum(np.cumsum(diff, axis=0), axis=1)))


def test_the_linear_time_covered_area_counts_what_the_pixel_count_counts():
    rng = np.random.default_rng(4)
    for _ in range(300):
        x0, y0, w, h = (int(v) for v in rng.integers(0, 40, 2).tolist() + rng.integers(1, 25, 2).tolist())
        u, v = V._border_windows(x0, y0, w, h)
        keep = rng.random(u.size) < rng.random()
        if keep.any():
            assert V._covered_area(u[keep], v[keep], w, h, x0, y0) == _covered_area_reference(u[keep], v[keep], w, h)


def test_visibility_work_stays_bounded_with_thousands_of_boxes():
    """Each box's surround windows were tested against every box ((4 (w + h)) x N comparisons per box) and its
    covered area counted over an array of its neighbourhood: work quadratic in the boxes (6,000 boxes of 30 px on a
    300 x 400 frame: 13 s), and a file may list any number. Now one pass over the frame, work per box linear in its
    windows, and at most MAX_MEASURED_PERSONS measured per image (the rest NaN)."""
    img = rgb(300, 400, seed=5)
    rng = np.random.default_rng(6)
    boxes = [[float(x), float(y), 30.0, 30.0] for x, y in zip(rng.integers(0, 370, 6000), rng.integers(0, 270, 6000))]
    values = V.person_visibility(img, boxes)
    assert len(values) == 6000 and all(math.isnan(x) for x in values[V.MAX_MEASURED_PERSONS :])


# ==========================================================================================================
# Scores: the suite a score names must be the one its config hash names
# ==========================================================================================================
def test_a_score_claiming_another_suite_than_its_config_hash_is_refused(v2, tmp_path):
    """A v1 score relabelled 'aegis-v2' ranked beside a v2 score without --allow-mixed-suites: the same condition
    id names a different corruption in each."""
    preds = tmp_path / "preds"
    preds.mkdir()
    for cond in ("clean", "motion_blur_s1"):
        (preds / f"{cond}.json").write_text(
            json.dumps([{"image_id": 1, "category_id": 1, "bbox": [18, 12, 12, 8], "score": 0.9}])
        )
    docs = []
    for k in range(2):
        path = tmp_path / f"s{k}.json"
        r = invoke(
            "score",
            preds,
            "--split-dir",
            v2,
            "--threshold",
            "0.5",
            "--bootstrap",
            "1",
            "--label",
            f"m{k}",
            "--json",
            path,
        )
        assert r.exit_code == 0, r.output
        docs.append(path)
    spoof = json.loads(docs[1].read_text())
    spoof["provenance"]["config_hash"] = V1.config_hash  # a v1 score, its name field edited
    spoof["provenance"]["suite"] = "aegis-v2"
    docs[1].write_text(json.dumps(spoof))
    assert_one_line_error(invoke("rank", *docs, "--bootstrap", "10"), "provenance.suite", "aegis-v1")
    from aegis_eval.protocols.score_doc import validate_result

    spoof["provenance"]["suite"] = ["aegis-v2"]
    with pytest.raises(AegisError, match="provenance.suite"):
        validate_result(spoof, "s.json")


def test_a_score_suite_is_the_one_its_shipped_config_hash_names():
    from aegis_eval.protocols.provenance import score_suite

    assert score_suite({"provenance": {"suite": "aegis-v2", "config_hash": V1.config_hash}}) == "aegis-v1"
    assert score_suite({"provenance": {"suite": "mine", "config_hash": "0" * 12}}) == "mine"


def test_load_split_reads_no_frame_linked_out_of_the_split(tmp_path):
    """Round 4, noticed: FrozenSplit.images (calibrate, gallery, the runners) followed a clean frame linked outside
    the split; like verify and realism, it now refuses to read it."""
    import aegis_data as ad

    out = tmp_path / "split"
    ad.build_splits(
        ad.load_source("synthetic", n=2),
        out,
        corruptions=["low_light"],
        severities=[1],
        workers=1,
        config=ad.load_config("aegis-v1"),
    )
    frame = next((out / "test" / "clean").glob("*.png"))
    outside = tmp_path / "elsewhere.png"
    outside.write_bytes(frame.read_bytes())
    frame.unlink()
    frame.symlink_to(outside)
    with pytest.raises(AegisError, match="resolves outside the split"):
        list(ad.load_split(out).images("clean"))
