"""`aegis <command>` imports only the module of that command; the whole app stays what it was."""

from __future__ import annotations

import os
import subprocess
import sys

import typer

from aegis_cli import main as cli_main


def _names(app: typer.Typer) -> list[str]:
    return [c.name for c in app.registered_commands] + [g.name for g in app.registered_groups]


def test_command_table_matches_what_each_module_registers():
    for module, commands in cli_main.COMMAND_MODULES.items():
        assert tuple(_names(cli_main.build_app((module,)))) == commands, module
    assert cli_main.modules_for(["score", "x.json"]) == ("scoring",)
    assert cli_main.modules_for(["--help"]) == tuple(cli_main.COMMAND_MODULES)
    assert cli_main.modules_for([]) == tuple(cli_main.COMMAND_MODULES)
    assert sorted(_names(cli_main.app)) == sorted(c for cs in cli_main.COMMAND_MODULES.values() for c in cs)


def test_score_imports_no_other_command_module(tmp_path):
    """`aegis score --help` loads the scoring commands only: not the baseline, report, engine or split modules."""
    code = (
        "import sys; sys.argv = ['aegis', 'score', '--help']\n"
        "from aegis_cli.main import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('aegis_cli.')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env={**os.environ}, check=True
    )
    loaded = eval(done.stdout.strip().splitlines()[-1])  # noqa: S307 -- our own printout
    assert "aegis_cli.scoring" in loaded
    assert not {f"aegis_cli.{m}" for m in ("baseline", "report", "engine", "splits", "sources")} & set(loaded)
