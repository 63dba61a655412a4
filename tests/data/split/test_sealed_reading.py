"""Rooms that match their names: the condition vocabulary in a low-floor module, split reading through
the sealed reader, the C sources beside their NumPy twins."""

from __future__ import annotations

import ast
from pathlib import Path

from tests import REPO_ROOT

ROOT = REPO_ROOT
VOCABULARY = {"SEVERITIES", "CLEAN", "check_severity", "check_severities", "condition_id", "parse_condition"}


def _imported_names(module: str) -> list[tuple[Path, int, str]]:
    found = []
    for pkg in ("aegis_data", "aegis_eval", "cli", "benchmarks", "scripts", "tests"):
        for path in (ROOT / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.module == module:
                    found += [(path.relative_to(ROOT), node.lineno, a.name) for a in node.names]
    return found


def test_the_condition_vocabulary_is_imported_from_its_own_module():
    from aegis_data import conditions
    from aegis_data.engine import config

    assert VOCABULARY <= set(vars(conditions))
    # The engine's suite config uses the words but does not define them.
    for name in VOCABULARY:
        assert getattr(config, name, None) is None or getattr(config, name) is getattr(conditions, name), name
    via_config = [f"{p}:{line} {n}" for p, line, n in _imported_names("aegis_data.engine.config") if n in VOCABULARY]
    assert not via_config, "import the condition vocabulary from aegis_data.conditions:\n" + "\n".join(via_config)


def test_the_condition_vocabulary_round_trips():
    from aegis_data.conditions import SEVERITIES, condition_id, parse_condition

    assert parse_condition("clean") == (None, 0)
    for sev in SEVERITIES:
        assert parse_condition(condition_id("water_glare", sev)) == ("water_glare", sev)


# --- split reading only through the sealed reader -------------------------------------------------------------
def test_no_engine_module_reads_a_manifest():
    """The engine (floor 3) takes a split's suite, unit and scenes from its caller; only split/ reads manifests."""
    bad = []
    for path in sorted((ROOT / "aegis_data" / "engine").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "aegis_data.files.readers":
                bad += [f"{path.name}:{node.lineno} {a.name}" for a in node.names if a.name.startswith("read_json")]
            if (
                isinstance(node, ast.BinOp)
                and isinstance(node.op, ast.Div)
                and isinstance(node.right, ast.Name)
                and node.right.id == "MANIFEST_NAME"
                and not _in_raise(path, node)
            ):
                bad.append(f"{path.name}:{node.lineno} opens <split>/MANIFEST_NAME")
    assert not bad, "the engine reads a manifest:\n" + "\n".join(bad)


def _in_raise(path: Path, target: ast.AST) -> bool:
    """Whether ``target`` is part of a raise statement (a message naming the manifest reads nothing)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Raise):
            if any(
                getattr(n, "lineno", None) == target.lineno and getattr(n, "col_offset", None) == target.col_offset
                for n in ast.walk(node)
            ):
                return True
    return False


def _tiny_split(out: Path) -> Path:
    from tests.data.engine.test_realism import tiny_split

    return tiny_split(out)


def _edited(split: Path, tmp_path: Path) -> Path:
    """A copy of ``split`` whose manifest's seed was edited: its seal no longer holds."""
    import json
    import shutil

    copy = tmp_path / "edited"
    shutil.copytree(split, copy, symlinks=True)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["seed"] += 1
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return copy


def test_calibration_and_realism_read_the_split_through_the_sealed_reader(tmp_path):
    """Old code read ``manifest.json`` raw in the engine and calibrated/compared an edited manifest's split."""
    import pytest

    from aegis_data.errors import AegisError
    from aegis_data.split import measure

    split = _tiny_split(tmp_path / "split")
    table = measure.calibrate_path(split, ["low_light"], 1)
    assert table.config_hash == measure.load_split(split).suite_config().config_hash
    real = tmp_path / "real"
    real.mkdir()
    for f in sorted((split / "test" / "low_light_s1").glob("*.png"))[:1]:
        (real / f.name).write_bytes(f.read_bytes())
    assert measure.realism_report(real, split, "low_light_s1").real.n_images == 1
    edited = _edited(split, tmp_path)
    for call in (
        lambda: measure.calibrate_path(edited, ["low_light"], 1),
        lambda: measure.realism_report(real, edited, "low_light_s1"),
    ):
        with pytest.raises(AegisError, match="internally inconsistent"):
            call()


def test_config_for_reads_a_split_through_the_sealed_reader(tmp_path):
    import pytest

    from aegis_data.engine.config import load_config
    from aegis_data.errors import AegisError
    from aegis_data.split.reader import config_for

    split = _tiny_split(tmp_path / "split")
    assert config_for(split).config_hash == config_for(split, config_for(split).config_hash).config_hash
    assert config_for(tmp_path) is load_config()  # no manifest: the installed default
    with pytest.raises(AegisError, match="internally inconsistent"):
        config_for(_edited(split, tmp_path))


def test_read_manifest_file_checks_a_builds_manifest_and_passes_a_hand_written_one(tmp_path):
    """The scorer's provenance read: no manifest -> None; a hand-written provenance record (no ``format``) as is;
    a build's manifest checked, ``[manifest_invalid]`` when its seal does not hold."""
    import hashlib
    import json

    import pytest

    from aegis_data.errors import AegisError
    from aegis_data.split.reader import read_manifest_file

    assert read_manifest_file(tmp_path) is None
    split = _tiny_split(tmp_path / "split")
    found = read_manifest_file(split)
    raw = (split / "manifest.json").read_bytes()
    assert found.path == split / "manifest.json" and found.sha256 == hashlib.sha256(raw).hexdigest()
    assert found.sealed is not None
    assert found.sealed.root_hash == found.data["root_hash"] == json.loads(raw)["root_hash"]
    loose = tmp_path / "loose"
    loose.mkdir()
    (loose / "manifest.json").write_text(json.dumps({"dataset": "mine", "config_hash": "abc123"}))
    assert read_manifest_file(loose).data == {"dataset": "mine", "config_hash": "abc123"}
    assert read_manifest_file(loose).sealed is None
    (loose / "manifest.json").write_text("[1, 2]")
    assert read_manifest_file(loose).data == [1, 2]  # the caller says what a non-object means to it
    (loose / "manifest.json").write_text("{not json")
    with pytest.raises(AegisError, match=r"^\[manifest_not_json\]"):
        read_manifest_file(loose)
    with pytest.raises(AegisError, match=r"^\[manifest_invalid\] .*internally inconsistent"):
        read_manifest_file(_edited(split, tmp_path))


def test_the_training_hooks_read_the_split_through_the_sealed_reader(tmp_path):
    """Old code (aegis_eval/runners/augment_hooks.py) read ``manifest.json`` raw: an edited build's suite and
    person unit were trusted. Now they count only when the manifest's seal holds, as for the scorer."""
    import pytest

    from aegis_data.errors import AegisError
    from aegis_data.split.reader import load_split
    from aegis_eval.runners.augment_hooks import policy_suite_for, training_scale

    split = _tiny_split(tmp_path / "split")
    assert policy_suite_for(split) == load_split(split).suite
    edited = _edited(split, tmp_path)
    for call in (lambda: policy_suite_for(edited), lambda: training_scale(edited)):
        with pytest.raises(AegisError, match=r"^\[manifest_invalid\] .*internally inconsistent"):
            call()
    (edited / "manifest.json").write_text("[]")
    with pytest.raises(AegisError, match=r"^\[manifest_wrong_type\] split manifest file .*got a JSON list"):
        policy_suite_for(edited)
