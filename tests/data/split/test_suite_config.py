"""The split's suite config is the one source of truth: the build renders with the config it is given and stores
its bytes; scoring, robustness, calibration and verify read the split's config, not the installed one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from aegis_data.engine.config import SUITE_NAMES, config_from_bytes, load_config, suite_path
from aegis_data.errors import AegisError
from aegis_data.files.imageio import read_rgb
from aegis_data.files.layout import SUITE_CONFIG_NAME
from aegis_data.split.build import build_splits
from aegis_data.split.manifest import load_manifest
from aegis_data.split.measure import calibrate_split
from aegis_data.split.reader import load_split
from aegis_data.split.verify import verify_split
from tests.data.split.test_splits_doubles import build_kwargs, fake_dataset
from tests.eval.protocols.scoring_memory import score_paths

CONDS = ("low_light", "dust_haze")
# Each shipped suite's low_light severity 1, and a darker one (aegis-v1: a lower gain; aegis-v2: more light lost).
LOW_LIGHT_S1 = {"aegis-v1": (b"gain: [0.330,", b"gain: [0.250,"), "aegis-v2": (b"ev_loss: [4.6,", b"ev_loss: [5.6,")}


@pytest.fixture(scope="module", params=SUITE_NAMES)
def suite(request) -> str:
    """Every shipped suite: a split's own config is the source of truth whichever suite built it."""
    return request.param


def modified_config_bytes(suite: str) -> bytes:
    """The shipped suite with the earthquake family renamed and a darker low_light severity 1."""
    data = suite_path(suite).read_bytes()
    old, new = LOW_LIGHT_S1[suite]
    assert data.count(old) == 1 and data.count(b"earthquake") == 2
    return data.replace(b"earthquake", b"seismic").replace(old, new)


def _build(out: Path, config) -> Path:
    kw = build_kwargs(corruptions=CONDS, severities=(1,), corrupt=None)
    build_splits(fake_dataset(n_test=3, n_val=0), out, config=config, **kw)
    return out


@pytest.fixture(scope="module")
def splits(tmp_path_factory, suite) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("suite")
    modified = config_from_bytes(modified_config_bytes(suite), "modified.yaml")
    return {"default": _build(root / "default", load_config(suite)), "modified": _build(root / "modified", modified)}


def test_build_renders_with_the_given_config_and_records_its_hash_and_bytes(splits, suite):
    default, modified = load_config(suite), config_from_bytes(modified_config_bytes(suite))
    assert default.config_hash != modified.config_hash
    for name, cfg in (("default", default), ("modified", modified)):
        root = splits[name]
        assert load_manifest(root).data["config_hash"] == cfg.config_hash
        assert (root / SUITE_CONFIG_NAME).read_bytes() == cfg.raw
    img = "test/low_light_s1/img001.png"
    assert not np.array_equal(read_rgb(splits["default"] / img), read_rgb(splits["modified"] / img))
    # the parameter that did not change renders identically
    same = "test/dust_haze_s1/img001.png"
    assert np.array_equal(read_rgb(splits["default"] / same), read_rgb(splits["modified"] / same))


def test_split_config_prefers_the_split_copy(splits, suite):
    cfg = load_split(splits["modified"]).suite_config()
    assert cfg.config_hash == config_from_bytes(modified_config_bytes(suite)).config_hash
    assert "seismic" in cfg.families and "earthquake" not in cfg.families
    assert load_split(splits["default"]).suite_config().config_hash == load_config(suite).config_hash


def _preds(tmp_path: Path, split: Path) -> Path:
    coco = json.loads((split / "annotations" / "test.json").read_text())
    dets = [{"image_id": a["image_id"], "category_id": 1, "bbox": a["bbox"], "score": 0.9} for a in coco["annotations"]]
    preds = tmp_path / "preds"
    preds.mkdir()
    for cond in ("clean", "low_light_s1", "dust_haze_s1"):
        (preds / f"{cond}.json").write_text(json.dumps(dets[: len(dets) - (cond != "clean")]))
    return preds


def test_scoring_uses_the_manifest_table(splits, tmp_path):
    result = score_paths(_preds(tmp_path, splits["modified"]), splits["modified"], threshold=0.5, bootstrap=1)
    assert result["conditions"]["dust_haze_s1"]["family"] == "seismic"
    assert set(result["summary"]["per_family"]) == {"storm", "seismic"}
    assert result["provenance"]["config_hash"] == load_split(splits["modified"]).suite_config().config_hash


def test_scoring_refuses_a_split_whose_config_is_not_available(splits, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(splits["modified"], copy, symlinks=True)
    (copy / SUITE_CONFIG_NAME).unlink()
    with pytest.raises(AegisError) as err:
        score_paths(_preds(tmp_path, copy), copy, threshold=0.5, bootstrap=1)
    msg = str(err.value)
    # The message lists every installed suite's hash.
    assert "\n" not in msg and "was built with suite config" in msg
    assert all(load_config(name).config_hash in msg for name in SUITE_NAMES)


def test_an_edited_split_config_is_refused(splits, suite, tmp_path):
    copy = tmp_path / "edited"
    shutil.copytree(splits["modified"], copy, symlinks=True)
    (copy / SUITE_CONFIG_NAME).write_bytes(modified_config_bytes(suite).replace(b"seed: 20260707", b"seed: 20260708"))
    with pytest.raises(AegisError, match="the file was changed"):
        load_split(copy).suite_config()
    # A comment is no change of the suite: its identity is its parsed content.
    (copy / SUITE_CONFIG_NAME).write_bytes(modified_config_bytes(suite) + b"# a note\n")
    assert load_split(copy).suite_config().config_hash == load_split(splits["modified"]).suite_config().config_hash


@pytest.mark.parametrize("recorded", [5, None])
def test_calibration_refuses_a_manifest_without_a_string_config_hash(splits, tmp_path, recorded):
    """Calibration reads the manifest through the sealed reader: an edited config hash breaks the seal."""
    copy = tmp_path / "nohash"
    shutil.copytree(splits["modified"], copy, symlinks=True)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["config_hash"] = recorded
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(AegisError, match=r"manifest.json is internally inconsistent: .*\(the file was edited\)"):
        calibrate_split(copy)


def test_calibration_and_verify_use_the_split_config(splits):
    table = calibrate_split(splits["modified"])
    assert table.config_hash == load_split(splits["modified"]).suite_config().config_hash
    assert {r.family for r in table.rows} >= {"seismic"}
    assert verify_split(splits["modified"]).ok


def test_verify_regenerates_with_the_split_config(splits, tmp_path):
    from aegis_data.files.imageio import write_png_atomic

    copy = tmp_path / "tampered"
    shutil.copytree(splits["modified"], copy, symlinks=True)
    rel = "test/low_light_s1/img001.png"
    img = read_rgb(copy / rel)
    img[0, 0] ^= 1
    write_png_atomic(copy / rel, img)
    (finding,) = verify_split(copy).failures
    # expected pixels regenerated with the split's (modified) config: exactly the one tampered pixel differs
    assert (finding.path, finding.kind, finding.pixels_differing, finding.max_abs_delta) == (rel, "pixels", 1, 1)


def test_verify_flags_an_edited_split_config(splits, suite, tmp_path):
    copy = tmp_path / "edited-verify"
    shutil.copytree(splits["modified"], copy, symlinks=True)
    (copy / SUITE_CONFIG_NAME).write_bytes(modified_config_bytes(suite).replace(b"seed: 20260707", b"seed: 20260708"))
    report = verify_split(copy)
    assert not report.ok
    assert [(f.path, f.kind) for f in report.failures] == [(SUITE_CONFIG_NAME, "manifest")]
    assert "the file was changed" in report.failures[0].detail


def test_report_and_cli_tables_use_the_labels_the_scorer_took_from_the_split(splits, tmp_path):
    from aegis_cli.score_tables import recall_matrix
    from aegis_eval.report.results import group_by_dataset

    result = score_paths(_preds(tmp_path, splits["modified"]), splits["modified"], threshold=0.5, bootstrap=1)
    (group,) = group_by_dataset([result])
    assert group.families["dust_haze"] == "seismic" and "seismic" in group.family_order
    assert "earthquake" not in group.family_order
    table = recall_matrix(result)
    assert "seismic" in [str(c) for c in table.columns[1].cells]
