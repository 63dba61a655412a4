"""One CLI vocabulary (docs/CLI.md): every command's parameters walked and held to the documented table; old
spellings accepted with one deprecation line; modes list their choices; help renders literally."""

from __future__ import annotations

import json
import re
from enum import Enum
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_cli.vocabulary import ALIASES, AegisCommand, rewrite
from tests import REPO_ROOT

runner = CliRunner()
DOC = REPO_ROOT / "docs" / "CLI.md"


def _commands(command=None, prefix=()):
    command = command or typer.main.get_command(app)
    subs = getattr(command, "commands", None)
    if subs:
        for name, sub in subs.items():
            yield from _commands(sub, (*prefix, name))
    else:
        yield " ".join(prefix), command


COMMANDS = dict(_commands())


def _names(param) -> list[str]:
    """A parameter's spellings: its option strings, or the metavar of a positional."""
    if param.param_type_name == "argument":
        return [param.metavar]
    return [*param.opts, *param.secondary_opts]


def _doc_table(heading: str) -> list[list[str]]:
    section = DOC.read_text().split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("|")][2:]
    return [[c.strip() for c in row.strip("|").split("|")] for row in rows]


def _commands_cell(cell: str) -> set[str]:
    """'baseline predict, train' -> {'baseline predict', 'baseline train'}."""
    found, group = set(), ""
    for part in (p.strip() for p in cell.split(",")):
        if part.startswith("baseline "):
            group, part = "baseline ", part[len("baseline "):]
        found.add(group + part if group and f"{group}{part}" in COMMANDS else part)
    return found


def test_the_walk_finds_every_command_including_the_baseline_group():
    assert {"score", "gallery", "verify", "list", "baseline predict", "baseline ablate"} <= set(COMMANDS)


@pytest.mark.parametrize("row", _doc_table("Vocabulary"), ids=lambda r: r[1])
def test_each_documented_name_is_taken_by_exactly_the_documented_commands(row):
    concept, name_cell, commands = row
    names = re.findall(r"`([^`]+)`", name_cell)
    having = {path for path, cmd in COMMANDS.items() for p in cmd.params if names[0] in _names(p)}
    assert having == _commands_cell(commands), f"{names[0]} ({concept})"
    for short in names[1:]:  # a short flag given with the name belongs to it wherever it appears
        for path, cmd in COMMANDS.items():
            for p in cmd.params:
                if short in _names(p):
                    assert names[0] in _names(p), (path, short)


def test_every_split_folder_and_prediction_input_uses_the_one_name():
    """No parameter outside the vocabulary reads a split folder or predictions: the old spellings are gone from
    every signature (they live on only as rewritten aliases)."""
    for path, cmd in COMMANDS.items():
        for p in cmd.params:
            for name in _names(p):
                assert name not in ("--gt", "--split", "--preds", "DIRECTORY", "PATH", "SPLIT"), (path, name)
            if p.param_type_name == "argument":
                assert p.metavar and p.metavar == p.metavar.upper(), (path, p.name)


def _kind(param) -> str:
    """flag, mode (choices shown), path, or the value type (a repeatable option: its element type)."""
    if param.is_flag:
        return "flag"
    annotation = param.type_descriptor.annotation
    args = getattr(annotation, "__args__", None)
    element = args[0] if args else annotation
    if (isinstance(element, type) and issubclass(element, Enum)) or str(param.metavar or "").startswith("["):
        return "mode"
    return "path" if isinstance(element, type) and issubclass(element, Path) else getattr(element, "__name__", "?")


def test_one_meaning_per_name_and_short_flag():
    """The same option name has the same kind of value everywhere (a flag, a path, a mode, a number, a string),
    and a short flag stands for one long name."""
    kinds: dict[str, set[str]] = {}
    shorts: dict[str, set[str]] = {}
    for cmd in COMMANDS.values():
        for p in cmd.params:
            if p.param_type_name != "option":
                continue
            kind = _kind(p)
            longs = [o for o in p.opts if o.startswith("--")]
            for o in longs:
                kinds.setdefault(o, set()).add(kind)
            for o in p.opts:
                if not o.startswith("--"):
                    shorts.setdefault(o, set()).update(longs)
    assert {o: k for o, k in kinds.items() if len(k) > 1} == {}
    assert {s: ls for s, ls in shorts.items() if len(ls) > 1} == {"-c": {"--corruption", "--corruptions"}}


@pytest.mark.parametrize("row", _doc_table("Modes"), ids=lambda r: r[0])
def test_every_mode_lists_its_choices_in_help(row):
    option = row[0].strip("`")
    for path in _commands_cell(row[2]):
        params = [p for p in COMMANDS[path].params if option in _names(p)]
        assert params, (path, option)
        help_text = " ".join(runner.invoke(app, [*path.split(), "--help"], env={"COLUMNS": "200"}).stdout.split())
        if option == "--format" and path == "report":
            assert "[md|html|latex]" in help_text
            continue
        annotation = params[0].type_descriptor.annotation
        assert isinstance(annotation, type) and issubclass(annotation, Enum), (path, option)
        choices = "|".join(m.value for m in annotation)
        assert f"{option} [{choices}]" in help_text or f"{option} <{choices}>" in help_text, (path, option)


def test_mode_values_match_the_library():
    from aegis_data.engine.scale import SCALE_MODES
    from aegis_data.sources import DATASETS
    from aegis_eval.protocols.class_map import SIDES
    from aegis_eval.protocols.crosscheck import CROSS_CHECKERS
    from aegis_eval.protocols.ranking import RANK_AXES
    from aegis_eval.report.build import FORMATS
    from aegis_eval.report.render import HTML_FIGURES
    from aegis_eval.runners import FASTERRCNN_ARCHS, MODELS
    from aegis_eval.runners.config import OPTIMIZERS
    from aegis_eval.protocols.threshold import CLASS_THRESHOLD_MODES
    from aegis_cli import vocabulary as v

    pairs = [(v.Dataset, DATASETS), (v.RemapSide, SIDES), (v.CrossCheck, CROSS_CHECKERS), (v.RankBy, RANK_AXES),
             (v.HtmlFigures, HTML_FIGURES), (v.Model, MODELS), (v.Arch, FASTERRCNN_ARCHS), (v.Optimizer, OPTIMIZERS),
             (v.ClassThresholds, CLASS_THRESHOLD_MODES), (v.ScaleMode, SCALE_MODES)]
    for enum, values in pairs:
        assert tuple(m.value for m in enum) == tuple(values), enum
    assert v.REPORT_FORMATS == FORMATS


def test_an_unknown_mode_value_is_still_the_library_one_line_error(tmp_path):
    from tests.conftest import assert_one_line_error

    assert_one_line_error(runner.invoke(app, ["build-splits", "--dataset", "kitti", "--out-dir", str(tmp_path / "o")]),
                          "unknown dataset 'kitti'")
    assert_one_line_error(runner.invoke(app, ["list", "--suite", "aegis-v1", "--scale", "tile"]),
                          "--scale must be one of frame, object")
    # aegis-v2 (the default) names an unknown mode the same way, and takes object scale only.
    assert_one_line_error(runner.invoke(app, ["list", "--scale", "tile"]), "--scale must be one of frame, object")
    assert_one_line_error(runner.invoke(app, ["list", "--scale", "frame"]), "takes --scale object only")


def test_every_command_is_registered_the_one_way():
    for path, cmd in COMMANDS.items():
        assert isinstance(cmd, AegisCommand), path
        assert hasattr(cmd.callback, "__wrapped__"), path  # through handle_errors: errors end as one line


def test_help_renders_brackets_literally_and_baseline_lists_ablate():
    text = runner.invoke(app, ["build-splits", "--help"], env={"COLUMNS": "80"}).stdout
    flat = " ".join(text.split())
    assert "'aegisbench[distributed]'" in flat
    base = runner.invoke(app, ["baseline", "--help"], env={"COLUMNS": "80"}).stdout
    assert "ablate" in base.split("Commands", 1)[1] and "sweep, ablate" in " ".join(base.split())


def test_every_alias_is_documented_and_points_at_a_real_option():
    documented = DOC.read_text()
    for path, aliases in ALIASES.items():
        names = {n for p in COMMANDS[path].params for n in _names(p)}
        for alias in aliases:
            assert alias.new in names, (path, alias.new)
            assert alias.old not in names, (path, alias.old)  # hidden: not a declared option
            assert f"`{alias.old}" in documented and alias.new in documented


# --- old spellings: rewritten, one warning line each -------------------------------------------------------
@pytest.mark.parametrize("path,args,expected", [
    ("score", ["p.json", "--gt", "s", "--split", "val"], ["p.json", "--split-dir", "s", "--split-name", "val"]),
    ("score", ["p.json", "--gt=s"], ["p.json", "--split-dir", "s"]),
    ("score", ["p.json", "--label", "--gt", "--split-dir", "s"], ["p.json", "--label", "--gt", "--split-dir", "s"]),
    ("baseline sweep", ["--split", "s", "--out", "o", "--model", "yolo11"],
     ["--split-dir", "s", "--out-dir", "o", "--model", "yolo11"]),
    ("build-splits", ["-o", "val_fraction=0.1", "-on=3", "--out", "x"],
     ["--option", "val_fraction=0.1", "--option", "n=3", "--out-dir", "x"]),
    ("list", ["--json", "--scale", "object"], ["--format", "json", "--scale", "object"]),
    ("gallery", ["split", "--preds", "p", "--out", "g", "--n", "2"],
     ["p", "--split-dir", "split", "--out-dir", "g", "--n", "2"]),
    ("corrupt", ["img.png", "-o", "x.png"], ["img.png", "-o", "x.png"]),
    ("score", ["p.json", "--", "--gt"], ["p.json", "--", "--gt"]),
])
def test_rewrite(path, args, expected):
    value_options = {"--label", "--split-dir", "--model", "--n", "-o", "--option", "--out-dir", "--scale"}
    assert rewrite(path, args, value_options) == expected


def _stderr_lines(result) -> list[str]:
    return [ln for ln in result.stderr.splitlines() if ln.strip()]


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    from tests.cli.test_cli_scoring import gt_doc, preds_doc

    root = tmp_path_factory.mktemp("vocab")
    (root / "split" / "annotations").mkdir(parents=True)
    (root / "split" / "annotations" / "test.json").write_text(json.dumps(gt_doc(6)))
    (root / "split" / "annotations" / "val.json").write_text(json.dumps(gt_doc(6)))
    (root / "preds").mkdir()
    (root / "preds" / "clean.json").write_text(json.dumps(preds_doc(6, 5)))
    return root


def test_old_score_spellings_give_the_same_result_and_one_warning_each(scored, tmp_path):
    common = ["--threshold", "0.5", "--bootstrap", "1"]
    new = runner.invoke(app, ["score", str(scored / "preds"), "--split-dir", str(scored / "split"), "--split-name",
                              "test", *common, "--json", str(tmp_path / "new.json")])
    old = runner.invoke(app, ["score", str(scored / "preds"), "--gt", str(scored / "split"), "--split", "test",
                              *common, "--json", str(tmp_path / "old.json")])
    assert new.exit_code == old.exit_code == 0, old.output
    assert _stderr_lines(new) == []
    assert _stderr_lines(old) == ["warning: --gt is deprecated, use --split-dir",
                                  "warning: --split is deprecated, use --split-name"]
    # Byte-equal but for the provenance timestamp: two runs may straddle a second boundary.
    stamp = re.compile(rb'"timestamp": "[0-9TZ:-]+"')
    new_bytes, old_bytes = ((tmp_path / name).read_bytes() for name in ("new.json", "old.json"))
    assert len(stamp.findall(new_bytes)) == 1
    assert stamp.sub(b"", new_bytes) == stamp.sub(b"", old_bytes)


def test_old_freeze_threshold_and_list_spellings(scored, tmp_path):
    val = scored / "preds" / "clean.json"
    old = runner.invoke(app, ["freeze-threshold", str(val), "--gt", str(scored / "split"), "--out",
                              str(tmp_path / "t.json")])
    assert old.exit_code == 0 and _stderr_lines(old) == ["warning: --gt is deprecated, use --split-dir"]
    listed = runner.invoke(app, ["list", "--json"])
    assert listed.exit_code == 0 and _stderr_lines(listed) == ["warning: --json is deprecated, use --format json"]
    assert json.loads(listed.stdout) == json.loads(runner.invoke(app, ["list", "--format", "json"]).stdout)


def test_old_build_splits_spellings(tmp_path):
    args = ["build-splits", "--n", "1", "--size", "64", "--corruptions", "low_light", "--severities", "1",
            "--workers", "1"]
    old = runner.invoke(app, [*args, "--out", str(tmp_path / "old"), "-o", "val_fraction=0.5"])
    new = runner.invoke(app, [*args, "--out-dir", str(tmp_path / "new"), "--option", "val_fraction=0.5"])
    assert old.exit_code == new.exit_code == 0, old.output
    assert [ln for ln in _stderr_lines(old) if "deprecated" in ln] == [
        "warning: --out is deprecated, use --out-dir", "warning: -o is deprecated, use --option"]
    assert not [ln for ln in _stderr_lines(new) if "deprecated" in ln]
    m_old = json.loads((tmp_path / "old" / "manifest.json").read_text())
    m_new = json.loads((tmp_path / "new" / "manifest.json").read_text())
    assert m_old["root_hash"] == m_new["root_hash"]


def test_old_baseline_spellings_reach_the_command(tmp_path):
    """The runner itself needs torch; the old names must get as far as the settings check either way."""
    from tests.conftest import assert_one_line_error

    (tmp_path / "split").mkdir()
    for split_opt, out_opt in (("--split", "--out"), ("--split-dir", "--out-dir")):
        result = runner.invoke(app, ["baseline", "predict", split_opt, str(tmp_path / "split"), out_opt,
                                     str(tmp_path / "o")])
        assert_one_line_error(result, "no model given")


def test_library_refusals_name_the_folder_option_as_it_is_spelled_now(tmp_path):
    from tests.conftest import assert_one_line_error

    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("x")
    assert_one_line_error(runner.invoke(app, ["build-splits", "--n", "1", "--out-dir", str(tmp_path / "full")]),
                          "choose an empty or new --out-dir")
