"""A plain `aegis score` line skips Typer's option parsing (cli/plain_score.py) and gives the command exactly the
arguments Typer gives it; any other line is left to Typer."""

from __future__ import annotations

import functools
import os
import subprocess
import sys

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from aegis_cli import main as cli_main
from aegis_cli import plain_score, scoring

PLAIN = [
    ["p.json", "--split-dir", "gt.json", "--threshold", "0.25"],
    ["p.json", "--split-dir", "gt.json", "--threshold", "0.25", "--bootstrap", "1", "--json", "out.json"],
    ["--split-dir=gt", "--threshold=1", "preds", "--seed", "7", "--iou", "0.75", "--label", "run 1", "--csv", "c.csv"],
    ["p.json", "--split-dir", "a", "--split-dir", "b", "--threshold-file", "thr.json", "--bootstrap", "1000"],
    ["p.json", "--split-dir", "gt.json", "--threshold", "1e-1", "--iou", "0.5"],
]
NOT_PLAIN = [
    ["--help"],
    ["p.json", "--split-dir", "gt.json", "--threshold", "0.25", "--help"],
    ["p.json", "--split-dir", "gt.json", "--classes", "all", "--threshold", "0.3"],
    ["p.json", "--split-dir", "gt.json", "--threshold", "0.25", "--threshold", "0.5"],
    ["p.json", "--split-dir", "gt.json", "--threshold", "-0.5"],
    ["p.json", "--split-dir", "gt.json", "--threshold", "nan"],
    ["p.json", "--split-dir", "gt.json", "--threshold", ".5"],
    ["p.json", "--split-dir", "gt.json", "--seed", "-1", "--threshold", "0.5"],
    ["p.json", "--split-dir", "gt.json", "--bootstrap", "1_000", "--threshold", "0.5"],
    ["p.json", "--split-dir", "gt.json", "--label", "", "--threshold", "0.5"],
    ["p.json", "--threshold", "0.5"],
    ["p.json", "q.json", "--split-dir", "gt.json", "--threshold", "0.5"],
    ["p.json", "--split-dir", "gt.json", "--threshold"],
    ["p.json", "--split-dir", "gt.json", "--", "--threshold", "0.5"],
    ["-", "--split-dir", "gt.json", "--threshold", "0.5"],
]


def _typer_args(argv: list[str], monkeypatch) -> dict:
    """The arguments Typer passes to score_cmd for ``argv``."""
    seen: dict = {}

    @functools.wraps(scoring.score_cmd)
    def record(**kwargs):
        seen.update(kwargs)

    monkeypatch.setattr(scoring, "score_cmd", record)
    result = CliRunner().invoke(cli_main.build_app(("scoring",)), ["score", *argv])
    assert result.exit_code == 0, result.output
    return seen


@pytest.mark.parametrize("argv", PLAIN, ids=range(len(PLAIN)))
def test_plain_lines_give_the_command_what_typer_gives(argv, monkeypatch):
    plain = plain_score.plain_score_args(argv)
    typer_args = _typer_args(argv, monkeypatch)
    assert plain is not None
    assert {k: (type(v), v) for k, v in plain.items()} == {k: (type(v), v) for k, v in typer_args.items()}


@pytest.mark.parametrize("argv", NOT_PLAIN, ids=range(len(NOT_PLAIN)))
def test_other_lines_are_left_to_typer(argv):
    assert plain_score.plain_score_args(argv) is None


def test_every_plain_flag_is_that_parameter_s_option():
    command = typer.main.get_command(cli_main.build_app(("scoring",))).commands["score"]  # type: ignore[attr-defined]
    opts = {p.name: p.opts for p in command.params}
    for flag, (name, _kind) in plain_score.FLAGS.items():
        assert flag in opts[name], (flag, name, opts.get(name))


def test_a_plain_line_does_not_import_pydantic(tmp_path):
    code = (
        "import sys; sys.argv = ['aegis', 'score', 'missing.json', '--split-dir', 'gt.json', '--threshold', '0.5']\n"
        "from aegis_cli.main import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    print('exit', e.code)\n"
        "print('pydantic' in sys.modules)"
    )
    env = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert done.stdout.split()[-3:] == ["exit", "1", "False"], done.stdout + done.stderr
    assert "not found" in done.stderr
