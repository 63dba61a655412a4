"""Issue 33, scoring: one options type, one path (load -> evaluate -> accumulate -> summarize) from every entry
point, each input checked once and before any file is read, library messages naming parameters, and a CLI that
reaches scoring only through ``aegis_eval.api``."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import aegis_eval.api as ae
from aegis_cli.common import in_flags
from aegis_cli.main import app
from aegis_data.engine.config import load_config
from aegis_data.errors import AegisError
from aegis_eval.protocols import scoring
from tests import REPO_ROOT
from tests.conftest import assert_one_line_error

runner = CliRunner()
ROOT = REPO_ROOT


def _gt(n: int) -> dict:
    images = [
        {"id": i + 1, "file_name": f"f{i}.png", "width": 200, "height": 200, "group": f"g{i // 2}"} for i in range(n)
    ]
    anns = [
        {"id": i + 1, "image_id": i + 1, "category_id": 1, "bbox": [10.0 + i, 20.0, 30.0, 50.0], "area": 1500.0}
        for i in range(n)
    ]
    return {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "person"}]}


def _preds(n: int, found: int) -> list[dict]:
    rows = [
        {"image_id": i + 1, "category_id": 1, "bbox": [10.0 + i, 20.0, 30.0, 50.0], "score": 0.9} for i in range(found)
    ]
    return rows + [
        {"image_id": i + 1, "category_id": 1, "bbox": [150.0, 150.0, 20.0, 20.0], "score": 0.4} for i in range(n)
    ]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("i33_scoring")
    split = root / "split"
    (split / "annotations").mkdir(parents=True)
    (split / "annotations" / "test.json").write_text(json.dumps(_gt(8)))
    (split / "annotations" / "val.json").write_text(json.dumps(_gt(6)))
    (split / "manifest.json").write_text(
        json.dumps({"dataset": "synthetic", "config_hash": load_config().config_hash, "root_hash": "2" * 64})
    )
    preds = root / "preds"
    preds.mkdir()
    (preds / "clean.json").write_text(json.dumps(_preds(8, 7)))
    (preds / "low_light_s2.json").write_text(json.dumps(_preds(8, 4)))
    (preds / "notes.json").write_text("{}")  # not a condition: a loader warning
    v2 = root / "v2.json"
    v2.write_text(json.dumps(_gt(8)))
    return {"root": root, "split": split, "preds": preds, "v2": v2, "val": split / "annotations" / "val.json"}


@pytest.fixture()
def evaluations(monkeypatch) -> list:
    """Every call of the scorer's evaluate verb (the one path's middle)."""
    calls: list = []
    real = scoring.evaluate

    def spy(loaded, options):
        calls.append(options)
        return real(loaded, options)

    monkeypatch.setattr(scoring, "evaluate", spy)
    return calls


def test_the_scorer_has_one_entry_point_and_one_options_type():
    gone = (
        "score_paths",
        "score_paths_detailed",
        "score_loaded",
        "score_conditions",
        "score_conditions_by_class",
        "score_conditions_with_samples",
        "score_conditions_by_class_with_samples",
        "PathOptions",
        "PathScore",
        "frozen_threshold",
        "check_threshold_choice",
    )
    assert [name for name in gone if hasattr(scoring, name)] == []
    for verb in (scoring.load, scoring.evaluate, scoring.accumulate, scoring.summarize, scoring.score):
        assert callable(verb)


def test_every_front_door_takes_the_one_path(files, evaluations, tmp_path):
    ae.score(files["preds"], files["split"], threshold=0.5, bootstrap=2)
    assert len(evaluations) == 1
    ae.score({"clean": _preds(8, 8)}, files["split"], threshold=0.5, bootstrap=2)
    assert len(evaluations) == 2
    ae.score(files["preds"], [files["split"] / "annotations" / "test.json", files["v2"]], threshold=0.5, bootstrap=2)
    assert len(evaluations) == 4  # one per GT version
    res = runner.invoke(
        app,
        [
            "score",
            str(files["preds"]),
            "--split-dir",
            str(files["split"]),
            "--threshold",
            "0.5",
            "--bootstrap",
            "2",
            "--json",
            str(tmp_path / "s.json"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert len(evaluations) == 5
    # the CLI's --threshold reaches the comparison as the value the options hold
    assert {o.threshold for o in evaluations} == {0.5}


@pytest.mark.parametrize("threshold", [1.5, float("nan"), "0.5", True])
def test_a_bad_threshold_is_refused_before_any_file_is_read(tmp_path, threshold):
    warnings: list[str] = []
    with pytest.raises(AegisError, match=r"^`threshold` must be a number in \[0, 1\]") as exc:
        ae.score(
            tmp_path / "no-such-predictions", tmp_path / "no-such-gt", threshold=threshold, on_warning=warnings.append
        )
    assert exc.value.param == "threshold" and warnings == []


def test_the_cli_checks_the_threshold_first(files):
    res = runner.invoke(app, ["score", str(files["preds"]), "--split-dir", str(files["split"]), "--threshold", "1.5"])
    assert_one_line_error(res, "--threshold must be a number in [0, 1]; got 1.5")
    assert "not_a_condition" not in res.stderr  # no predictions were listed


def test_library_messages_name_parameters_and_the_cli_prints_flags(files):
    with pytest.raises(AegisError) as exc:
        ae.score(files["preds"], files["split"])
    assert "`threshold`" in str(exc.value) and "`threshold_file`" in str(exc.value) and exc.value.param == "threshold"
    assert "(--threshold)" in in_flags(str(exc.value)) and "(--threshold-file," in in_flags(str(exc.value))
    with pytest.raises(AegisError, match=r"^\[cross_check_versions\] `cross_check` applies to one `gt`") as exc:
        ae.score(files["preds"], [files["split"], files["v2"]], threshold=0.5, cross_check="pycocotools")
    assert in_flags(str(exc.value)).endswith("--cross-check applies to one --split-dir")
    with pytest.raises(AegisError, match=r"^\[class_map_versions\] `remap_versions`") as exc:
        ae.score(files["preds"], files["split"], threshold=0.5, remap_versions=[1])
    assert exc.value.param == "remap_versions" and "--remap-version applies" in in_flags(str(exc.value))
    with pytest.raises(AegisError, match=r"^\[class_map_missing\]") as exc:
        ae.score(files["preds"], files["split"], threshold=0.5, allow_merge=True)
    assert in_flags(str(exc.value)).endswith("--remap-side and --allow-merge only apply with --class-map")
    from aegis_eval.protocols.versions import score_versions

    with pytest.raises(AegisError, match=r"^\[versions_too_few\].*two `gts`") as exc:
        score_versions(files["preds"], [files["v2"]], scoring.ScoreOptions(threshold=0.5))
    assert exc.value.param == "gts" and "two --split-dir" in in_flags(str(exc.value))


def test_api_results_are_the_cli_files_byte_for_byte(files, tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    gts = [files["split"] / "annotations" / "test.json", files["v2"]]
    res = runner.invoke(
        app,
        [
            "score",
            str(files["preds"]),
            *sum((["--split-dir", str(g)] for g in gts), []),
            "--threshold",
            "0.5",
            "--bootstrap",
            "5",
            "--json",
            str(tmp_path / "cli.json"),
            "--csv",
            str(tmp_path / "cli.csv"),
        ],
    )
    assert res.exit_code == 0, res.output
    result = ae.score(files["preds"], gts, threshold=0.5, bootstrap=5, label="preds")
    assert result.to_json(tmp_path / "api.json").read_bytes() == (tmp_path / "cli.json").read_bytes()
    assert result.to_csv(tmp_path / "api.csv").read_bytes() == (tmp_path / "cli.csv").read_bytes()
    assert set(result.document["versions"]["differences"]) == {"v2"}
    val_preds = files["root"] / "val_preds.json"
    val_preds.write_text(json.dumps(_preds(6, 5)))
    res = runner.invoke(
        app,
        [
            "freeze-threshold",
            str(val_preds),
            "--split-dir",
            str(files["split"]),
            "--class-map",
            "1:1",
            "--out",
            str(tmp_path / "cli_thr.json"),
        ],
    )
    assert res.exit_code == 0, res.output
    ae.freeze_threshold(val_preds, files["split"], class_map="1:1", out=tmp_path / "api_thr.json")
    assert (tmp_path / "api_thr.json").read_bytes() == (tmp_path / "cli_thr.json").read_bytes()


def test_cli_scoring_commands_reach_the_library_only_through_the_api():
    tree = ast.parse((ROOT / "cli" / "scoring.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 0}
    imported |= {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    library = {m for m in imported if m.startswith(("aegis_eval", "aegis_data"))}
    assert library <= {"aegis_eval.api", "aegis_data.api", "aegis_data.errors"}, library
