"""verify_split: every kind of difference is found, classified, and measured where possible."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest

from aegis_data.errors import AegisError
from aegis_data.files.imageio import file_sha256, read_rgb, write_png_atomic
from aegis_data.split.build import build_splits
from aegis_data.split.manifest import build_manifest, load_manifest, write_manifest
from aegis_data.split.verify import pixel_difference, verify_split
from tests.data.split.test_splits_doubles import build_kwargs, fake_corrupt, fake_dataset


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("verify") / "fake-c"
    build_splits(fake_dataset(n_test=3, n_val=1), out, **build_kwargs())
    return out


@pytest.fixture
def split(pristine, tmp_path) -> Path:
    dst = tmp_path / "copy"
    shutil.copytree(pristine, dst, symlinks=True)
    return dst


def _verify(root, **kw):
    return verify_split(root, corrupt=fake_corrupt, **kw)


def _kinds(report) -> dict[str, str]:
    return {f.path: f.kind for f in report.findings}


def test_an_untouched_split_verifies(split):
    report = _verify(split)
    assert report.ok and report.findings == () and report.checked == len(load_manifest(split).entries)
    assert report.expected_root_hash == report.local_root_hash


def test_a_flipped_byte_in_any_image_is_found(split):
    p = split / "test" / "water_glare_s2" / "img001.png"
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0x01
    p.write_bytes(bytes(data))
    report = _verify(split)
    assert not report.ok and _kinds(report) == {"test/water_glare_s2/img001.png": "pixels"}


def test_a_deleted_file_and_an_extra_file_are_found(split):
    (split / "val" / "clean" / "img100.png").unlink()
    (split / "test" / "clean" / "stray.png").write_bytes(b"x")
    (split / "annotations" / "notes.json").write_text("{}")
    report = _verify(split)
    assert _kinds(report) == {
        "val/clean/img100.png": "missing",
        "test/clean/stray.png": "extra",
        "annotations/notes.json": "extra",
    }


def test_a_changed_gt_box_names_the_image(split):
    p = split / "annotations" / "test.json"
    gt = json.loads(p.read_text())
    gt["annotations"][2]["bbox"][0] += 1.0  # the box of the second image (img001)
    p.write_text(json.dumps(gt))
    report = _verify(split)
    (f,) = report.findings
    assert f.kind == "annotations" and f.path == "annotations/test.json"
    assert "annotations changed for 1: img001" in f.detail


def _reencode_with_opencv(p: Path) -> None:
    rgb = read_rgb(p)
    ok, buf = cv2.imencode(".png", rgb[:, :, ::-1].copy(), [cv2.IMWRITE_PNG_COMPRESSION, 9])
    assert ok and buf.tobytes() != p.read_bytes()
    p.write_bytes(buf.tobytes())


def test_a_reencoded_png_fails_against_its_own_manifest(split):
    _reencode_with_opencv(split / "test" / "low_light_s1" / "img000.png")
    report = _verify(split)
    assert _kinds(report) == {"test/low_light_s1/img000.png": "bytes-only"} and not report.ok


def test_a_changed_image_is_read_from_disk_once_while_hashing(split, monkeypatch):
    import aegis_data.split.verify as verify
    from aegis_data.files.imageio import pixel_sha256

    rel = "test/low_light_s1/img000.png"
    _reencode_with_opencv(split / rel)
    reads: list[str] = []
    real_read_bytes = Path.read_bytes

    def counting_read_bytes(self):
        reads.append(self.name)
        return real_read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", counting_read_bytes)
    monkeypatch.setattr(verify, "file_sha256", lambda p: reads.append(f"stream {Path(p).name}") or file_sha256(p))
    sha, pixels, problem = verify.hash_item(str(split), 10**8, (rel, "0" * 64, True))
    assert reads == ["img000.png"]
    assert sha == file_sha256(split / rel) and pixels == pixel_sha256(read_rgb(split / rel)) and problem is None
    # The decode from the bytes keeps read_rgb's refusal of a truncated PNG: no pixel hash, not a crash.
    (split / rel).write_bytes(real_read_bytes(split / rel)[:-12])
    assert verify.hash_item(str(split), 10**8, (rel, "0" * 64, True))[1:] == (None, None)


def _as_if_built_elsewhere(split: Path, tmp_path: Path) -> Path:
    """Keep the pristine manifest as the reference; re-encode one file and re-seal the local manifest, as a
    machine whose PNG encoder writes other bytes for the same pixels would have produced."""
    ref = tmp_path / "reference.json"
    shutil.copyfile(split / "manifest.json", ref)
    rel = "test/low_light_s1/img000.png"
    _reencode_with_opencv(split / rel)
    m = load_manifest(split).data
    entries = [dict(e, sha256=file_sha256(split / rel)) if e["path"] == rel else e for e in m["entries"]]
    local = build_manifest(
        dataset=m["dataset"],
        source=m["source"],
        suite=m["suite"],
        config_hash=m["config_hash"],
        seed=m["seed"],
        conditions=m["conditions"],
        splits=m["splits"],
        entries=entries,
        encoder={"name": "another-encoder", "version": "0"},
        scale=m.get("scale"),
    )
    write_manifest(split / "manifest.json", local)
    assert local["root_hash"] == m["root_hash"] and local["files_hash"] != m["files_hash"]
    return ref


def test_bytes_only_differences_against_a_reference_are_information(split, tmp_path):
    ref = _as_if_built_elsewhere(split, tmp_path)
    assert _verify(split).ok  # the copy matches its own (re-sealed) manifest
    report = _verify(split, against=ref)
    assert report.ok and report.roots_match
    assert [(f.path, f.kind) for f in report.information] == [("test/low_light_s1/img000.png", "bytes-only")]
    assert report.to_dict()["findings"][0]["failure"] is False
    strict = _verify(split, against=ref, strict_bytes=True)
    assert not strict.ok and [f.kind for f in strict.failures] == ["bytes-only"]


def test_changed_pixels_are_counted_against_the_regenerated_image(split):
    p = split / "test" / "water_glare_s1" / "img002.png"
    rgb = read_rgb(p)
    rgb[0, 0, 0] = (int(rgb[0, 0, 0]) + 5) % 256
    rgb[3, 7, :] = (rgb[3, 7, :].astype(int) + 2) % 256
    rgb[10, 1, 2] = (int(rgb[10, 1, 2]) + 1) % 256
    write_png_atomic(p, rgb)
    (f,) = _verify(split).findings
    assert (f.kind, f.pixels_differing, f.max_abs_delta) == ("pixels", 3, 5)
    assert f.detail == "3 pixels differ, max |delta| 5"


def test_without_a_clean_reference_pixels_are_reported_uncounted(split):
    p = split / "test" / "clean" / "img002.png"
    rgb = read_rgb(p)
    rgb[1, 1] = 255 - rgb[1, 1]
    write_png_atomic(p, rgb)
    (f,) = _verify(split).findings
    assert f.kind == "pixels" and f.pixels_differing is None and "no reference copy" in f.detail


def test_against_a_reference_with_other_source_pixels_reports_a_source_difference(split, tmp_path):
    m = load_manifest(split).data
    # A reference whose image img001 came from a differently decoded source (as if another machine's decoder).
    entries = []
    for e in m["entries"]:
        e = dict(e)
        if e.get("image_id") == "img001":
            e["source_pixel_sha256"] = "0" * 64
            e["pixel_sha256"] = "1" * 64
            e["sha256"] = "2" * 64
        entries.append(e)
    ref = build_manifest(
        dataset=m["dataset"],
        source=m["source"],
        suite=m["suite"],
        config_hash=m["config_hash"],
        seed=m["seed"],
        conditions=m["conditions"],
        splits=m["splits"],
        entries=entries,
        scale=m.get("scale"),
    )  # the same benchmark: an object-scale build records its unit
    write_manifest(tmp_path / "ref.json", ref)
    report = _verify(split, against=tmp_path / "ref.json")
    kinds = _kinds(report)
    assert kinds["test/clean/img001.png"] == "source"
    assert {k for p, k in kinds.items() if p != "test/clean/img001.png"} == {"pixels"}
    assert all("img001" in p for p in kinds)
    assert "decoder" in next(f.detail for f in report.findings if f.kind == "source")


def test_against_a_reference_of_another_benchmark_says_so(split, tmp_path):
    m = load_manifest(split).data
    ref = build_manifest(
        dataset=m["dataset"],
        source=m["source"],
        suite=m["suite"],
        config_hash=m["config_hash"],
        seed=m["seed"] + 1,
        conditions=m["conditions"],
        splits=m["splits"],
        entries=m["entries"],
        scale=m.get("scale"),
    )  # only the seed differs
    write_manifest(tmp_path / "ref.json", ref)
    report = _verify(split, against=tmp_path / "ref.json")
    assert [f.kind for f in report.findings] == ["manifest"] and "seed" in report.findings[0].detail


def test_an_unfinished_build_cannot_verify(split):
    (split / "manifest.json").unlink()
    with pytest.raises(AegisError, match="not a finished build"):
        verify_split(split)


def test_an_edited_manifest_is_refused(split):
    p = split / "manifest.json"
    data = json.loads(p.read_text())
    data["entries"][0]["sha256"] = "f" * 64
    p.write_text(json.dumps(data))
    with pytest.raises(AegisError, match="internally inconsistent"):
        verify_split(split)


def test_pixel_difference_counts_positions_and_max_delta():
    a = np.zeros((2, 3, 3), np.uint8)
    b = a.copy()
    b[1, 2, 1] = 9
    assert pixel_difference(a, b) == (1, 9)


def test_report_json_round_trip(split):
    (split / "test" / "clean" / "img000.png").unlink()
    d = _verify(split).to_dict()
    assert json.loads(json.dumps(d))["counts"] == {"missing": 1} and d["ok"] is False


def test_a_partial_build_checks_against_a_full_reference_with_subset(pristine, tmp_path):
    part = tmp_path / "part"
    build_splits(fake_dataset(n_test=3, n_val=1), part, limit=2, **build_kwargs(severities=(1,)))
    ref = pristine / "manifest.json"
    assert _verify(part, against=ref, subset=True).ok
    full = _verify(part, against=ref)
    assert not full.ok and {f.kind for f in full.findings} >= {"missing", "annotations"}
    p = part / "annotations" / "test.json"
    gt = json.loads(p.read_text())
    gt["annotations"][0]["bbox"][3] += 1.0
    p.write_text(json.dumps(gt))
    (f,) = _verify(part, against=ref, subset=True).findings
    assert f.kind == "annotations" and "img000" in f.detail
