"""One CLI vocabulary (docs/CLI.md): every command's parameters walked and held to the documented table; the old
spellings (CHANGELOG.md) refused; modes list their choices; help renders literally."""

from __future__ import annotations

import re
from enum import Enum
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from aegis_cli.main import app
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
            group, part = "baseline ", part[len("baseline ") :]
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
    every signature."""
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
    from aegis_cli import vocabulary as v
    from aegis_data.engine.scale import SCALE_MODES
    from aegis_data.sources import DATASETS
    from aegis_eval.protocols.class_map import SIDES
    from aegis_eval.protocols.crosscheck import CROSS_CHECKERS
    from aegis_eval.protocols.ranking import RANK_AXES
    from aegis_eval.protocols.threshold import CLASS_THRESHOLD_MODES
    from aegis_eval.report.build import FORMATS
    from aegis_eval.report.render import HTML_FIGURES
    from aegis_eval.runners import FASTERRCNN_ARCHS, MODELS
    from aegis_eval.runners.config import OPTIMIZERS

    pairs = [
        (v.Dataset, DATASETS),
        (v.RemapSide, SIDES),
        (v.CrossCheck, CROSS_CHECKERS),
        (v.RankBy, RANK_AXES),
        (v.HtmlFigures, HTML_FIGURES),
        (v.Model, MODELS),
        (v.Arch, FASTERRCNN_ARCHS),
        (v.Optimizer, OPTIMIZERS),
        (v.ClassThresholds, CLASS_THRESHOLD_MODES),
        (v.ScaleMode, SCALE_MODES),
    ]
    for enum, values in pairs:
        assert tuple(m.value for m in enum) == tuple(values), enum
    assert v.REPORT_FORMATS == FORMATS


def test_an_unknown_mode_value_is_still_the_library_one_line_error(tmp_path):
    from tests.conftest import assert_one_line_error

    assert_one_line_error(
        runner.invoke(app, ["build-splits", "--dataset", "kitti", "--out-dir", str(tmp_path / "o")]),
        "unknown dataset 'kitti'",
    )
    assert_one_line_error(
        runner.invoke(app, ["list", "--suite", "aegis-v1", "--scale", "tile"]), "--scale must be one of frame, object"
    )
    # aegis-v2 (the default) names an unknown mode the same way, and takes object scale only.
    assert_one_line_error(runner.invoke(app, ["list", "--scale", "tile"]), "--scale must be one of frame, object")
    assert_one_line_error(runner.invoke(app, ["list", "--scale", "frame"]), "takes --scale object only")


def test_every_command_is_registered_the_one_way():
    for path, cmd in COMMANDS.items():
        assert hasattr(cmd.callback, "__wrapped__"), path  # through handle_errors: errors end as one line


def test_help_renders_brackets_literally_and_baseline_lists_ablate():
    text = runner.invoke(app, ["build-splits", "--help"], env={"COLUMNS": "80"}).stdout
    flat = " ".join(text.split())
    assert "'aegisbench[distributed]'" in flat
    base = runner.invoke(app, ["baseline", "--help"], env={"COLUMNS": "80"}).stdout
    assert "ablate" in base.split("Commands", 1)[1] and "sweep, ablate" in " ".join(base.split())


# --- old spellings: gone, and recorded in CHANGELOG.md ----------------------------------------------------
# (command, an old spelling, its replacement): the table of renames the argv rewriting served until issue 33.
OLD_SPELLINGS = [
    ("score", "--gt", "--split-dir"),
    ("freeze-threshold", "--gt", "--split-dir"),
    ("score", "--split", "--split-name"),
    ("baseline predict", "--split", "--split-dir"),
    ("baseline train", "--split", "--split-dir"),
    ("baseline sweep", "--split", "--split-dir"),
    ("baseline ablate", "--split", "--split-dir"),
    ("build-splits", "--out", "--out-dir"),
    ("export-hf", "--out", "--out-dir"),
    ("report", "--out", "--out-dir"),
    ("gallery", "--out", "--out-dir"),
    ("baseline predict", "--out", "--out-dir"),
    ("baseline train", "--out", "--out-dir"),
    ("baseline sweep", "--out", "--out-dir"),
    ("baseline ablate", "--out", "--out-dir"),
    ("gallery", "--preds", "PREDS"),
    ("build-splits", "-o", "--option"),
    ("audit", "-o", "--option"),
    ("list", "--json", "--format"),
    ("calibrate", "-n", "--limit"),
]


@pytest.mark.parametrize("path,old,new", OLD_SPELLINGS, ids=lambda v: v if isinstance(v, str) else None)
def test_an_old_spelling_is_no_option_and_the_changelog_names_its_replacement(path, old, new):
    names = {n for p in COMMANDS[path].params for n in _names(p)}
    assert old not in names and new in names, (path, old, new)
    changelog = (DOC.parents[1] / "CHANGELOG.md").read_text(encoding="utf-8")
    rows = [ln for ln in changelog.splitlines() if ln.startswith("|") and f"`{old}" in ln and f"`{new}" in ln]
    assert rows, (path, old, new)


def test_an_old_spelling_is_refused_not_rewritten(tmp_path):
    result = runner.invoke(app, ["score", str(tmp_path), "--gt", str(tmp_path)])
    assert result.exit_code == 2 and "No such option: --gt" in result.output
    assert "deprecated" not in result.output
    listed = runner.invoke(app, ["list", "--json"])
    assert listed.exit_code == 2 and "No such option: --json" in listed.output


def test_library_refusals_name_the_folder_option_as_it_is_spelled_now(tmp_path):
    from tests.conftest import assert_one_line_error

    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("x")
    assert_one_line_error(
        runner.invoke(app, ["build-splits", "--n", "1", "--out-dir", str(tmp_path / "full")]),
        "choose an empty or new --out-dir",
    )


@pytest.mark.parametrize(
    "argv,fragments",
    [
        (["score", "p.json", "--bogus"], ("No such option: --bogus", "see 'aegis score --help'.")),
        (["nosuch"], ("No such command 'nosuch'", "see 'aegis --help'.")),
        (["--bogus"], ("No such option: --bogus", "see 'aegis --help'.")),
        (["verify"], ("Missing argument 'SPLIT_DIR'", "see 'aegis verify --help'.")),
        (["score", "p.json", "--iou", "abc"], ("Invalid value for '--iou'",)),
        (["baseline", "nosuch"], ("No such command 'nosuch'", "see 'aegis baseline --help'.")),
        (["baseline", "predict", "--bogus"], ("No such option: --bogus", "see 'aegis baseline predict --help'.")),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_a_mistyped_command_line_is_one_error_line_with_exit_2(argv, fragments):
    """Click's usage block (usage, hint, blank line, message) is one line like every other refusal (cli/usage.py)."""
    from tests.conftest import assert_one_line_error

    assert_one_line_error(runner.invoke(app, argv, prog_name="aegis"), *fragments, exit_code=2)


def test_a_bare_group_still_prints_its_help():
    result = runner.invoke(app, ["baseline"], prog_name="aegis")
    assert "Usage: aegis baseline" in result.output and "predict" in result.output
    assert "error:" not in result.output


def test_the_console_script_prints_one_line_for_a_mistyped_option():
    import subprocess
    import sys

    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.argv[0] = 'aegis'; from aegis_cli.main import main; main()",
            "list",
            "--bogus",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2 and run.stdout == ""
    line = run.stderr.strip()
    assert "\n" not in line and line.startswith("error: No such option: --bogus"), run.stderr
    assert line.endswith("; see 'aegis list --help'."), run.stderr


def test_list_refuses_an_unknown_format():
    from tests.conftest import assert_one_line_error

    assert_one_line_error(runner.invoke(app, ["list", "--format", "yaml"]), "unknown format 'yaml'", "table, json")
