"""This machine reproduces the committed aegis-v2 reference manifest of the default synthetic split
(``manifests/synthetic-c-v2.json``, what ``aegis build-splits`` with no options writes).

Rebuilds the first two test and val images in all 28 conditions, in two worker processes, and requires every entry
(file bytes, decoded pixels, decoded source, and each image's scene record) to equal the reference's. When aegis-v2
or the synthetic generator changes on purpose, regenerate the reference as docs/SPLITS.md describes.
"""

from __future__ import annotations

import pytest

from aegis_data.engine.config import load_config
from aegis_data.sources import load_source
from aegis_data.split.build import build_splits
from aegis_data.split.manifest import load_manifest
from aegis_data.split.verify import verify_split
from tests import REPO_ROOT

REFERENCE = REPO_ROOT / "manifests" / "synthetic-c-v2.json"
V2 = load_config("aegis-v2")


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    out = tmp_path_factory.mktemp("ref") / "synthetic-c"
    build_splits(load_source("synthetic"), out, limit=2, workers=2)  # the defaults: aegis-v2, object scale
    return load_manifest(out / "manifest.json"), out


def test_the_reference_is_the_default_build_of_aegis_v2():
    ref = load_manifest(REFERENCE)
    assert (ref.data["dataset"], ref.data["suite"], ref.data["config_hash"], ref.data["seed"]) == (
        "synthetic",
        "aegis-v2",
        V2.config_hash,
        V2.seed,
    )
    assert ref.data["scale"]["mode"] == "object" and len(ref.data["conditions"]) == 28
    clean = [e for e in ref.images() if e["condition"] == "clean"]
    assert clean and all(isinstance(e.get("scene"), dict) for e in clean)
    assert all("scene" not in e for e in ref.images() if e["condition"] != "clean")


def test_rebuilt_images_and_scenes_equal_the_reference_entries(rebuilt):
    local, _ = rebuilt
    ref = load_manifest(REFERENCE)
    images = local.images()
    assert len(images) == 2 * 28 + 2
    differing = [e for e in images if ref.entries.get(e["path"]) != e]
    assert not differing, (
        f"{len(differing)} files differ from {REFERENCE.name}, e.g. "
        f"{[e['path'] for e in differing[:4]]} (regenerate on purpose only: docs/SPLITS.md)"
    )


def test_verify_subset_against_the_v2_reference_rederives_every_scene(rebuilt, monkeypatch):
    from aegis_data.split import verify as VF

    local, out = rebuilt
    derived = []
    real = VF.estimate_scene

    def counting(clean, *args, **kwargs):
        derived.append(clean.shape)
        return real(clean, *args, **kwargs)

    monkeypatch.setattr(VF, "estimate_scene", counting)
    report = verify_split(out, against=REFERENCE, subset=True)
    assert report.ok, report.findings[:3]
    # Each clean image this build holds, once: its scene re-derived and found equal to the reference's record.
    assert len(derived) == sum(e["condition"] == "clean" for e in local.images()) == 4
