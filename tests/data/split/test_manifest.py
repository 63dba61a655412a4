"""The manifest: canonical hashing, a root hash over pixels/GT/identity (never file bytes), a files hash sealing
the rest, environment kept out of both, loading checks."""

from __future__ import annotations

import json

import pytest

from aegis_data.errors import AegisError
from aegis_data.split.manifest import (
    build_manifest,
    canonical_json,
    files_hash,
    gt_digest,
    identity_of,
    load_manifest,
    manifest_chunks,
    root_hash,
    sealed_header,
    write_manifest,
)


def manifest_bytes(manifest) -> bytes:
    return b"".join(manifest_chunks(manifest))


_IMAGE = {
    "kind": "image",
    "split": "test",
    "condition": "clean",
    "coco_id": 1,
    "width": 4,
    "height": 3,
    "source_pixel_sha256": "7" * 64,
}
ENTRIES = [
    {**_IMAGE, "path": "test/clean/b.png", "image_id": "b", "sha256": "1" * 64, "pixel_sha256": "2" * 64},
    {
        "path": "annotations/test.json",
        "kind": "annotations",
        "split": "test",
        "sha256": "3" * 64,
        "gt": {"b": "4" * 64},
    },
    {**_IMAGE, "path": "test/clean/a.png", "image_id": "a", "sha256": "5" * 64, "pixel_sha256": "6" * 64},
]


ENCODER = {"name": "aegis-png", "version": "1"}
IDENTITY = dict(
    dataset="synthetic",
    source={"n": 2},
    suite="aegis-v1",
    config_hash="abc123abc123",
    seed=20260707,
    conditions=["clean"],
    splits={"test": 2},
)


def _manifest(entries=ENTRIES, environment=None, encoder=ENCODER, **over):
    kw = dict(IDENTITY, entries=entries, environment=environment, encoder=encoder)
    kw.update(over)
    return build_manifest(**kw)


def test_canonical_json_is_key_order_independent():
    assert canonical_json({"b": 1, "a": [1.5, "é"]}) == canonical_json({"a": [1.5, "é"], "b": 1})
    assert canonical_json({"a": 1}) == b'{"a":1}'
    with pytest.raises(ValueError):
        canonical_json({"a": float("nan")})


def test_root_hash_ignores_entry_order_but_not_content():
    assert root_hash(IDENTITY, ENTRIES) == root_hash(IDENTITY, list(reversed(ENTRIES)))
    changed = [dict(e) for e in ENTRIES]
    changed[0]["pixel_sha256"] = "9" * 64
    assert root_hash(IDENTITY, changed) != root_hash(IDENTITY, ENTRIES)
    with pytest.raises(AegisError, match="twice"):
        root_hash(IDENTITY, ENTRIES + [ENTRIES[0]])


def test_root_hash_covers_pixels_gt_and_identity_but_not_file_bytes():
    base = root_hash(IDENTITY, ENTRIES)
    rebytes = [dict(e, sha256="f" * 64) if e["kind"] in ("image", "annotations") else e for e in ENTRIES]
    assert root_hash(IDENTITY, rebytes) == base  # another encoder: same identity
    regt = [dict(e, gt={"b": "0" * 64}) if e["kind"] == "annotations" else e for e in ENTRIES]
    assert root_hash(IDENTITY, regt) != base
    for key, value in [
        ("dataset", "sard"),
        ("source", {"n": 3}),
        ("suite", "x"),
        ("config_hash", "0" * 12),
        ("seed", 1),
        ("conditions", ["clean", "low_light_s1"]),
        ("splits", {"test": 3}),
    ]:
        assert root_hash(dict(IDENTITY, **{key: value}), ENTRIES) != base, key
    yolo = [{"path": "yolo/test_clean.txt", "kind": "yolo", "sha256": "1" * 64}]
    assert root_hash(IDENTITY, ENTRIES + yolo) != root_hash(IDENTITY, ENTRIES + [dict(yolo[0], sha256="2" * 64)])


def test_files_hash_seals_file_bytes_and_encoder():
    a = _manifest(environment={})
    rebytes = [dict(e, sha256="f" * 64) for e in ENTRIES]
    b = _manifest(entries=rebytes, environment={})
    c = _manifest(environment={}, encoder={"name": "other", "version": "9"})
    assert a["root_hash"] == b["root_hash"] == c["root_hash"]
    assert len({a["files_hash"], b["files_hash"], c["files_hash"]}) == 3
    assert a["files_hash"] == files_hash(a["root_hash"], ENCODER, ENTRIES, sealed_header(a))


def test_environment_is_recorded_but_outside_the_root_hash():
    a = _manifest(environment={"numpy": "2.4.6"})
    b = _manifest(environment={"numpy": "1.26.4"})
    assert a["root_hash"] == b["root_hash"] and a["environment"] != b["environment"]
    real = _manifest()
    assert {"python", "numpy", "opencv", "aegisbench"} <= set(real["environment"])


def test_manifest_is_deterministic_and_sorted():
    a = _manifest(environment={})
    b = _manifest(entries=list(reversed(ENTRIES)), environment={})
    assert manifest_bytes(a) == manifest_bytes(b)
    assert [e["path"] for e in a["entries"]] == sorted(e["path"] for e in ENTRIES)
    assert a["root_hash"] == root_hash(IDENTITY, ENTRIES) and a["format"] == "aegis-manifest/2"
    assert a["encoder"] == ENCODER
    assert "created" not in manifest_bytes(a).decode()


def test_unknown_entry_kind_is_refused():
    with pytest.raises(AegisError, match="kind 'weird'"):
        _manifest(entries=[{"path": "x", "kind": "weird"}])


def test_write_and_load_round_trip(tmp_path):
    m = _manifest()
    write_manifest(tmp_path / "manifest.json", m)
    loaded = load_manifest(tmp_path)  # a directory means its manifest.json
    assert loaded.root_hash == m["root_hash"] and set(loaded.entries) == {e["path"] for e in ENTRIES}
    assert [e["path"] for e in loaded.images()] == ["test/clean/a.png", "test/clean/b.png"]
    assert identity_of(loaded.data) == {
        "dataset": "synthetic",
        "source": {"n": 2},
        "suite": "aegis-v1",
        "config_hash": "abc123abc123",
        "seed": 20260707,
    }


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "no manifest at .*not a finished build"),
        (b"{not json", "not valid JSON"),
        (b'{"format": "other"}', "not an AegisBench manifest"),
        (b'{"format": "aegis-manifest/2", "entries": 3}', "'entries' must be a list"),
        (b'{"format": "aegis-manifest/2", "entries": []}', "'encoder' must be an object"),
        (b'{"format": "aegis-manifest/1", "entries": []}', "aegis-manifest/1 manifest .*re-run the same"),
    ],
)
def test_bad_manifest_files_are_one_clear_error(tmp_path, content, message):
    p = tmp_path / "manifest.json"
    if content is not None:
        p.write_bytes(content)
    with pytest.raises(AegisError, match=message):
        load_manifest(p)


@pytest.mark.parametrize(
    "edit",
    [
        lambda m: m["entries"][0].__setitem__("sha256", "0" * 64),  # a file-byte hash: only the files hash sees it
        lambda m: m["entries"][0].__setitem__("pixel_sha256", "0" * 64),
        lambda m: m.__setitem__("seed", 1),
        lambda m: m.__setitem__("dataset", "sard"),
        lambda m: m.__setitem__("encoder", {"name": "x"}),
        lambda m: m.__setitem__("splits", {"test": 9}),
    ],
)
def test_a_tampered_manifest_is_detected(tmp_path, edit):
    m = _manifest()
    edit(m)
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(AegisError, match="internally inconsistent"):
        load_manifest(tmp_path / "manifest.json")


def test_environment_edits_are_not_an_inconsistency(tmp_path):
    m = _manifest()
    m["environment"]["numpy"] = "0.0"
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    assert load_manifest(tmp_path / "manifest.json").root_hash == m["root_hash"]


def test_gt_digest_depends_on_boxes():
    assert gt_digest([[1, 2, 3, 4]]) == gt_digest([[1.0, 2.0, 3.0, 4.0]])
    assert gt_digest([[1, 2, 3, 4]]) != gt_digest([[1, 2, 3, 4.5]])
    assert gt_digest([]) != gt_digest([[0, 0, 1, 1]])
