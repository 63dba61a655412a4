"""Every ``aegis ...`` command line in README.md and docs/*.md parses against the real CLI.

The docs are what a new user types first, so a renamed or removed option must fail here, not in their shell. Each
command line (fenced code, with ``\\`` continuations joined, and inline code spans) is split into tokens and checked
against the Typer app's Click commands: the command exists, every option exists on it, an option that takes a value
gets one, a mode option's literal value is one of its choices, no more positional arguments than the command takes,
and no spelling the CHANGELOG's rename tables list as gone. Placeholders (``SPLIT``, ``<split>``, ``...``) stand
for any value; a fenced line is also parsed by Click itself (``make_context`` without running the command).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.core import TyperArgument, TyperOption

from aegis_cli.main import app
from tests import REPO_ROOT

DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
ROOT = typer.main.get_command(app)

# A doc's "..." or "…" stands for options left out; "<x>", "[x]" and ALL_CAPS words stand for a value.
_ELLIPSIS = {"...", "…"}
_PLACEHOLDER = re.compile(r"<[^>]*>|\.\.\.|…|^\[.*\]$|^[A-Z][A-Z0-9_]*(/.*)?$")


@dataclass(frozen=True)
class DocCommand:
    where: str  # file:line
    text: str
    fenced: bool  # from a code block (a whole command line), not an inline fragment


def _fenced_lines(path: Path) -> list[DocCommand]:
    found, in_code, pending, start = [], False, "", 0
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if raw.lstrip().startswith("```"):
            in_code, pending = not in_code, ""
            continue
        if not in_code:
            continue
        line = raw.strip()
        if line.startswith("$ "):
            line = line[2:]
        if pending:
            line = pending + " " + line
        elif not line.startswith("aegis "):
            continue
        else:
            start = n
        if line.endswith("\\"):
            pending = line[:-1].rstrip()
            continue
        pending = ""
        found.append(DocCommand(f"{path.name}:{start}", line, True))
    return found


def _inline_spans(path: Path) -> list[DocCommand]:
    found, in_code = [], False
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if raw.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        for span in re.findall(r"`(aegis [^`]+)`", raw):
            found.append(DocCommand(f"{path.name}:{n}", span, False))
    return found


def doc_commands() -> list[DocCommand]:
    return [c for path in DOCS for c in (*_fenced_lines(path), *_inline_spans(path))]


def _tokens(text: str) -> list[str]:
    """The command's words, without a trailing comment and whatever a shell operator adds after it."""
    text = re.sub(r"\s#\s.*$|\s#$", "", text)
    # "[--n 8]" marks an optional part and "[--a x | --b y]" alternatives: check the part, the first alternative.
    text = re.sub(r"\[(-[^\[\]]*)\]", lambda m: m.group(1).split(" | ")[0], text)
    try:
        words = shlex.split(text, comments=False)
    except ValueError:  # an inline fragment with one quote: split on blanks
        words = text.split()
    for k, word in enumerate(words):
        if word in {"&&", "||", "|", ";", ">", "2>", ">>"} or word.startswith(("|", ">")):
            return words[:k]
    return words


def _gone_spellings() -> dict[str, set[str]]:
    """{command: options the CHANGELOG's rename tables list under "before"} (a renamed name is gone)."""
    gone: dict[str, set[str]] = {}
    for line in (REPO_ROOT / "CHANGELOG.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 3 or cells[0] in {"command", "---"}:
            continue
        before = re.findall(r"`(-{1,2}[a-z][a-z-]*)", cells[1])
        now = re.findall(r"`([^`]*)`", cells[2])  # the first code span is the new spelling; the rest is prose
        after = set(re.findall(r"(-{1,2}[a-z][a-z-]*)", now[0] if now else ""))
        for command in (c.strip() for c in cells[0].split(",")):
            for option in before:
                if option not in after:
                    gone.setdefault(command.split()[-1], set()).add(option)
    return gone


GONE = _gone_spellings()


def _resolve(words: list[str]) -> tuple[Any, list[str], str]:
    """(the Click command, its arguments, its name) of ``aegis ...`` words; AssertionError for no such command."""
    command, rest, name = ROOT, words[1:], "aegis"
    while hasattr(command, "commands"):  # a group (Typer ships its own Click, so no isinstance)
        if not rest or rest[0].startswith("-"):
            break
        sub = command.commands.get(rest[0])
        assert sub is not None, f"no command {rest[0]!r} under {name!r} (has {sorted(command.commands)})"
        command, rest, name = sub, rest[1:], f"{name} {rest[0]}"
    return command, rest, name


def _is_placeholder(word: str) -> bool:
    return bool(_PLACEHOLDER.search(word)) or word in _ELLIPSIS


def _choices(param: Any) -> list[str] | None:
    """The accepted values of a mode option (its annotation is an Enum: cli/vocabulary.py), else None."""
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return [str(m.value) for m in annotation]
    return None


def _is_value(word: str) -> bool:
    return not word.startswith("-") or word == "-" or bool(re.match(r"^-\d", word))


def _check_value(opt: str, param: Any, value: str, name: str) -> list[str]:
    choices = _choices(param)
    alternatives = value.split("|") if choices else []  # "png|svg": either
    return [
        f"{opt} {v!r} of `{name}` is not one of {choices}"
        for v in alternatives
        if not _is_placeholder(v) and v not in (choices or ())
    ]


def _check_words(cmd: DocCommand, command: Any, args: list[str], name: str, loose: bool) -> tuple[list[str], int]:
    """(problems, number of positional words) of the words after the command's name."""
    options = {opt: p for p in command.params if isinstance(p, TyperOption) for opt in (*p.opts, *p.secondary_opts)}
    options["--help"] = None
    gone = GONE.get(name.split()[-1], set())
    problems, positional, k = [], 0, 0
    while k < len(args):
        word = args[k]
        k += 1
        if word in _ELLIPSIS or _is_value(word):
            positional += word not in _ELLIPSIS
            continue
        opt, eq, attached = word.partition("=")
        if opt not in options:
            renamed = opt in gone
            problems.append(
                f"{opt} is a renamed spelling (CHANGELOG.md) of `{name}`"
                if renamed
                else f"`{name}` has no option {opt} (it has {', '.join(sorted(options))})"
            )
            continue
        param = options[opt]
        if param is None or param.is_flag or param.count:
            continue
        if eq:
            problems += _check_value(opt, param, attached, name)
        elif k < len(args) and _is_value(args[k]):
            problems += _check_value(opt, param, args[k], name)
            k += 1
        elif cmd.fenced and not loose:  # an inline fragment may name an option without its value
            problems.append(f"{opt} of `{name}` needs a value")
    return problems, positional


def check_command(cmd: DocCommand) -> list[str]:
    """The problems of one documented command line (empty when it parses)."""
    words = _tokens(cmd.text)
    if len(words) < 2 or words[0] != "aegis" or not re.match(r"^[a-z-]+$", words[1]) and not words[1].startswith("-"):
        return []  # prose such as "aegis is ..." or a bare product name
    try:
        command, args, name = _resolve(words)
    except AssertionError as e:
        return [str(e)]
    loose = any(w in _ELLIPSIS for w in args)  # "..." leaves out words, so a count of positionals means nothing
    problems, positional = _check_words(cmd, command, args, name, loose)
    strict = cmd.fenced and not loose
    takes = sum(a.nargs if a.nargs >= 0 else 10**6 for a in command.params if isinstance(a, TyperArgument))
    if positional > takes and strict:
        problems.append(f"`{name}` takes {takes} positional argument(s), the line gives {positional}")
    if strict and not problems and not hasattr(command, "commands"):
        try:  # Click's own parser, without running the command
            command.make_context(name, list(args))
        except Exception as e:  # Click's UsageError family (Typer ships its own copy of Click: no import)
            # A placeholder that is no number, or a required value left out of an example, is not drift.
            if not hasattr(e, "format_message") or type(e).__name__ not in {"BadParameter", "MissingParameter", "Exit"}:
                problems.append(f"click refuses it: {type(e).__name__}: {e}")
    return problems


COMMANDS = doc_commands()


def test_the_docs_have_command_lines():
    # The extraction itself is checked: a change of fence style must not make this test vacuous.
    assert len([c for c in COMMANDS if c.fenced]) >= 60
    assert len([c for c in COMMANDS if not c.fenced]) >= 30
    names = {_resolve(_tokens(c.text))[2] for c in COMMANDS if c.fenced and not check_command(c)}
    assert {"aegis build-splits", "aegis score", "aegis freeze-threshold", "aegis baseline predict"} <= names


@pytest.mark.parametrize("cmd", COMMANDS, ids=[f"{c.where}" for c in COMMANDS])
def test_doc_command_parses(cmd):
    assert check_command(cmd) == [], f"{cmd.where}: {cmd.text}"


@pytest.mark.parametrize(
    "line",
    [
        "aegis freeze-threshold preds.json --split val",  # issue 31: SCORING.md named --split
        "aegis build-splits --dataset yolo -o val_fraction=0.1",  # issue 31: DATA.md's old -o KEY=VALUE
        "aegis score preds/ --gt split/ --threshold 0.5",  # 0.2's --gt
        "aegis list --json",
        "aegis score preds/ --split-dir s --split-name validation --threshold 0.5",  # not a choice
        "aegis no-such-command --x",
        "aegis baseline predict --model yolo11 --out runs/",
        "aegis verify a b c",
    ],
)
def test_a_stale_line_is_caught(line):
    assert check_command(DocCommand("doc.md:1", line, True)), line


def test_placeholders_and_fragments_are_accepted():
    for line, fenced in [
        ("aegis score PREDS --split-dir <split> --threshold-file T.json --split-name val", True),
        ("aegis baseline train ... --augment all", True),
        ("aegis score --threshold-file", False),
        ("aegis report score.json --out-dir report/   # md + html", True),
    ]:
        assert check_command(DocCommand("doc.md:1", line, fenced)) == [], line


def test_the_changelog_renames_are_read():
    assert "--gt" in GONE["score"] and "--split" in GONE["score"] and "-o" in GONE["build-splits"]


# Options the docs name in prose that no aegis command has, each for a stated reason: another tool's option, or a
# gone spelling named as gone.
NOT_AEGIS = {
    ("ARCHITECTURE.md", "--flag"): "a generic flag in the CLI rules",
    ("CLI.md", "--split"): "the gone spelling, named as gone",
    ("MITIGATION.md", "--render-only"): "benchmarks/bench_mitigation.py",
    ("PERFORMANCE.md", "--per-image"): "benchmarks/bench_score_sweep.py",
    ("PERFORMANCE.md", "--sweep-pycocotools"): "benchmarks/bench_score.py",
    ("REPRODUCIBILITY.md", "--no-deps"): "pip",
}
# A code span that is another program's command line (its options are that program's).
_OTHER_PROGRAM = re.compile(r"^(\S*python\S*|pip|ruff|pytest|helm|make|yolo|\S+\.py)\b")


def _every_option() -> set[str]:
    found: set[str] = {"--help"}

    def walk(command: Any) -> None:
        for sub in getattr(command, "commands", {}).values():
            walk(sub)
        for p in command.params:
            found.update(p.opts)
            found.update(getattr(p, "secondary_opts", None) or ())

    walk(ROOT)
    return found


def test_options_named_in_prose_exist():
    # Issue 31: SCORING.md told freeze-threshold users to pass `--split`, an option no command has.
    every, stale = _every_option(), []
    for path in DOCS:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for span in re.findall(r"`([^`]+)`", line):
                if span.startswith("aegis ") or _OTHER_PROGRAM.match(span):
                    continue
                for option in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", span):
                    if option not in every and (path.name, option) not in NOT_AEGIS:
                        stale.append(f"{path.name}:{n}: {option}")
    assert stale == []
