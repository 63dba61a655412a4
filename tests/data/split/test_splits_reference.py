"""This machine reproduces the committed reference manifest of the synthetic split (manifests/), an aegis-v1 build.

Rebuilds the first two test and val images in all 28 conditions with the real source adapter and corruption
engine, in two worker processes, and requires every entry (file bytes, decoded pixels, decoded source) to equal
the reference's. When the corruption suite or the synthetic generator changes on purpose, regenerate the
reference as docs/SPLITS.md describes.
"""

from __future__ import annotations

import json

import pytest

from aegis_data.engine.config import load_config
from aegis_data.sources import load_source
from aegis_data.split.build import build_splits
from aegis_data.split.manifest import gt_digest, load_manifest
from tests import REPO_ROOT

REFERENCE = REPO_ROOT / "manifests" / "synthetic-c.json"
# The reference is `aegis build-splits --suite aegis-v1`: frozen with that suite, whatever the default.
V1 = load_config("aegis-v1")


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    out = tmp_path_factory.mktemp("ref") / "synthetic-c"
    build_splits(load_source("synthetic"), out, limit=2, workers=2, config=V1)
    return load_manifest(out / "manifest.json"), out


def test_reference_describes_this_suite():
    ref = load_manifest(REFERENCE)
    config = V1
    assert (ref.data["dataset"], ref.data["suite"], ref.data["config_hash"], ref.data["seed"]) == (
        "synthetic",
        config.suite,
        config.config_hash,
        config.seed,
    )
    assert len(ref.data["conditions"]) == 28


def test_rebuilt_images_equal_the_reference_entries(rebuilt):
    local, _ = rebuilt
    ref = load_manifest(REFERENCE)
    images = local.images()
    assert len(images) == 2 * 28 + 2
    differing = [e for e in images if ref.entries.get(e["path"]) != e]
    conditions = sorted({e["condition"] for e in differing})
    sources = sorted(
        {
            e["image_id"]
            for e in differing
            if ref.entries.get(e["path"], {}).get("source_pixel_sha256") != e["source_pixel_sha256"]
        }
    )
    assert not differing, (
        f"{len(differing)} files differ from {REFERENCE.name} in conditions {conditions}; decoded sources differ for "
        f"{sources or 'none'} (if the suite or generator changed on purpose, regenerate it: see docs/SPLITS.md)"
    )


def test_rebuilt_ground_truth_equals_the_reference(rebuilt):
    local, out = rebuilt
    ref = load_manifest(REFERENCE)
    for split in ("test", "val"):
        want = ref.entries[f"annotations/{split}.json"]["gt"]
        gt = json.loads((out / "annotations" / f"{split}.json").read_text())
        stems = {im["id"]: im["stem"] for im in gt["images"]}
        boxes = {s: [] for s in stems.values()}
        for a in gt["annotations"]:
            boxes[stems[a["image_id"]]].append(a["bbox"])
        assert {s: gt_digest(b) for s, b in boxes.items()} == {s: want[s] for s in boxes}


def test_verify_subset_against_the_reference(rebuilt):
    from aegis_data.split.verify import verify_split

    _, out = rebuilt
    report = verify_split(out, against=REFERENCE, subset=True)
    assert report.ok, report.findings[:3]
