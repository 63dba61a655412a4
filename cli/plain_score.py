"""`aegis score` on a plain command line, without Typer's option parsing.

Typer builds a pydantic validator for every option of the command it runs, which imports pydantic: about a tenth
of a one-condition `aegis score`; importing Typer (and Rich, which it loads) costs as much again. So this module and
what it runs (cli/score_run.py) import neither: Rich loads to print the tables, Typer only for an error's exit.

:func:`plain_score_args` reads only a plain `aegis score` line: one PREDS path and options of :data:`FLAGS`, each
a plain value (an unsigned decimal number, a path or label that does not start with '-'), no option twice but
--split-dir. Anything else (--help, another option, an unusual value) returns None, and Typer parses the line as
always. tests/cli/test_plain_score.py checks that both give the command the same arguments.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from .common import handle_errors
from .score_run import run_score

_FLOAT = re.compile(r"[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_INT = re.compile(r"[0-9]{1,9}")

# flag -> (parameter of score_cmd and run_score, how its value reads)
FLAGS = {
    "--split-dir": ("gt", "path"),
    "--threshold": ("threshold", "float"),
    "--threshold-file": ("threshold_file", "path"),
    "--bootstrap": ("bootstrap", "int"),
    "--seed": ("seed", "int"),
    "--iou": ("iou", "float"),
    "--label": ("label", "str"),
    "--json": ("json_out", "path"),
    "--csv": ("csv_out", "path"),
}


def _value(kind: str, text: str) -> Any:
    """The value Typer gives the parameter for ``text``, or None when only Typer should read it."""
    if not text or text.startswith("-"):
        return None
    if kind == "float":
        return float(text) if _FLOAT.fullmatch(text) else None
    if kind == "int":
        return int(text) if _INT.fullmatch(text) else None
    return Path(text) if kind == "path" else text


def plain_score_args(argv: list[str]) -> dict[str, Any] | None:
    """score_cmd's keyword arguments for the command line ``argv`` (after ``score``), or None (see the module
    docstring)."""
    given: dict[str, Any] = {}
    preds: list[str] = []
    gts: list[Path] = []
    k = 0
    while k < len(argv):
        token = argv[k]
        if not token.startswith("-"):
            preds.append(token)
            k += 1
            continue
        flag, eq, text = token.partition("=")
        if flag not in FLAGS:
            return None
        if not eq:
            if k + 1 >= len(argv):
                return None
            text = argv[k + 1]
            k += 1
        k += 1
        name, kind = FLAGS[flag]
        value = _value(kind, text)
        if value is None:
            return None
        if name == "gt":
            gts.append(value)
        elif name in given:
            return None
        else:
            given[name] = value
    if len(preds) != 1 or not gts:
        return None
    kwargs = dict(run_score.__kwdefaults__ or {})  # score_cmd's defaults (the tests hold them equal)
    kwargs.update(given, preds=Path(preds[0]), gt=gts)
    return kwargs


def run(argv: list[str]) -> bool:
    """Run `aegis score` for ``argv`` (after ``score``) when it is a plain line; False when Typer must parse it."""
    kwargs = plain_score_args(argv)
    if kwargs is None:
        return False
    try:  # wrapped as add_command wraps every command: library errors end as one line and an exit status
        handle_errors(run_score)(**kwargs)
    except Exception as exc:
        typer = sys.modules.get("typer")  # an error line's exit is a typer.Exit (common.fail imported it)
        if typer is not None and isinstance(exc, typer.Exit):
            sys.exit(exc.exit_code)
        raise
    return True
