"""The command line's one vocabulary (docs/CLI.md): the modes as Enums, the old option spellings as hidden
aliases, and the one way every command is registered.

An old spelling is rewritten to its new name before Click parses the arguments, with one warning line on
stderr, so scripts written against an older release keep running.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Callable, Optional, Sequence

import typer
from typer.core import TyperCommand

from .common import handle_errors


# --- modes: the accepted values of each mode option, shown in --help --------------------------------------
# The values mirror the library's own tuples (tests/cli/test_cli_vocabulary.py checks they agree); they are spelled
# here so that `aegis --help` imports no runner, report or scoring module.
class Task(str, Enum):
    detection = "detection"
    referring = "referring"


class RankBy(str, Enum):
    condition = "condition"
    version = "version"


class RemapSide(str, Enum):
    gt = "gt"
    preds = "preds"


class ClassThresholds(str, Enum):
    per_class = "per-class"
    shared = "shared"


class SplitName(str, Enum):
    test = "test"
    val = "val"
    train = "train"


class ListFormat(str, Enum):
    table = "table"
    json = "json"


class HtmlFigures(str, Enum):
    png = "png"
    svg = "svg"


class CrossCheck(str, Enum):
    pycocotools = "pycocotools"


class Dataset(str, Enum):
    synthetic = "synthetic"
    heridal = "heridal"
    sard = "sard"
    coco = "coco"
    yolo = "yolo"
    voc = "voc"
    hf = "hf"


class Model(str, Enum):
    yolo11 = "yolo11"
    rtdetr = "rtdetr"
    fasterrcnn = "fasterrcnn"


class Arch(str, Enum):
    resnet50_v2 = "resnet50_v2"
    mobilenet_v3 = "mobilenet_v3"


class Optimizer(str, Enum):
    SGD = "SGD"
    AdamW = "AdamW"


REPORT_FORMATS = ("md", "html", "latex")


def _lenient(enum: type[Enum]) -> Callable[[str], Any]:
    """Parse a mode: a known value becomes its Enum member; anything else passes through unchanged so the
    library refuses it with its own one-line message (and exit 1), as before the modes were Enums."""

    def parse(value: Any) -> Any:
        if isinstance(value, enum):
            return value
        try:
            return enum(value)
        except ValueError:
            return value

    return parse


def mode(enum: type[Enum], *decls: str, help: str, **kwargs: Any) -> Any:
    """A typer.Option for a mode: its choices in the metavar, parsed to ``enum``."""
    choices = "|".join(str(m.value) for m in enum)
    return typer.Option(*decls, help=help, parser=_lenient(enum), metavar=f"[{choices}]", **kwargs)


def value(mode_value: Any) -> Any:
    """The plain string of a parsed mode (a member's value; an unknown string or None unchanged)."""
    return mode_value.value if isinstance(mode_value, Enum) else mode_value


# --- the scale options, shared by build-splits, list, corrupt and calibrate ----------------------------------
class ScaleMode(str, Enum):
    """The length unit of the corruption parameters (docs/CORRUPTIONS.md, "Scale")."""

    frame = "frame"
    object = "object"


_SCALE = "Scale (docs/CORRUPTIONS.md)"
ScaleOpt = Annotated[Optional[ScaleMode], mode(
    ScaleMode, "--scale", help="Length unit of blur, streak, ripple and feather sizes: frame = per 1000 px of "
    "each frame's long side; object = per person (the median test person box, or --person-px / --gsd), the same "
    "for full frames and crops. Default: the suite's scale (object for aegis-v2, which needs it; frame for "
    "aegis-v1).", rich_help_panel=_SCALE)]
AllowMixedSuitesOpt = Annotated[bool, typer.Option(
    "--allow-mixed-suites", help="Compare scores made on different corruption suites (aegis-v1, aegis-v2) "
    "anyway; by default that is refused, as one condition id names a different corruption in each.")]
SuiteOpt = Annotated[Optional[str], typer.Option(
    "--suite", metavar="NAME|PATH", help="Corruption suite: aegis-v2 (the default: physical units through a scene "
    "and camera model per image), aegis-v1 (the first suite, frozen), or the path of a suite config file.",
    rich_help_panel=_SCALE)]
PersonPxOpt = Annotated[Optional[float], typer.Option(
    "--person-px", help="--scale object: the person unit in px (median sqrt(w*h) of a person box).",
    rich_help_panel=_SCALE)]
GsdOpt = Annotated[Optional[float], typer.Option(
    "--gsd", metavar="CM_PER_PX", help="--scale object: ground sampling distance in cm/px; the unit is then a "
    "1.7 m person's box (170 / gsd * sqrt(1/2) px).", rich_help_panel=_SCALE)]


# --- old spellings ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Alias:
    """An old spelling of a command's option: ``old`` becomes ``new`` (plus ``value`` for a flag that became an
    option with a value). ``takes_value``: the old spelling is followed by a value."""

    old: str
    new: str
    value: str | None = None
    takes_value: bool = True

    @property
    def replacement(self) -> str:
        return self.new if self.value is None else f"{self.new} {self.value}"


_OUT_DIR = Alias("--out", "--out-dir")
_SPLIT_DIR = Alias("--split", "--split-dir")

# command path (as typed after `aegis`) -> its old spellings
ALIASES: dict[str, tuple[Alias, ...]] = {
    "list": (Alias("--json", "--format", "json", takes_value=False),),
    "calibrate": (Alias("-n", "--limit"),),
    "audit": (Alias("-o", "--option"),),
    "build-splits": (_OUT_DIR, Alias("-o", "--option")),
    "export-hf": (_OUT_DIR,),
    "freeze-threshold": (Alias("--gt", "--split-dir"),),
    "score": (Alias("--gt", "--split-dir"), Alias("--split", "--split-name")),
    "report": (_OUT_DIR,),
    "gallery": (_OUT_DIR,),
    "baseline predict": (_SPLIT_DIR, _OUT_DIR),
    "baseline train": (_SPLIT_DIR, _OUT_DIR),
    "baseline sweep": (_SPLIT_DIR, _OUT_DIR),
    "baseline ablate": (_SPLIT_DIR, _OUT_DIR),
}
# `aegis gallery SPLIT_DIR --preds PREDS` (the old order) is `aegis gallery PREDS --split-dir SPLIT_DIR`.
GALLERY_PREDS = "--preds"


def _deprecated(old: str, new: str) -> None:
    from .common import warn

    warn(f"{old} is deprecated, use {new}")


def rewrite(path: str, args: Sequence[str], value_options: set[str]) -> list[str]:
    """``args`` of the command at ``path`` with every old spelling replaced by its new name, one warning line
    per old spelling used. ``value_options``: the command's option names that take a value (so a value that
    happens to look like an old option is left alone)."""
    aliases = {a.old: a for a in ALIASES.get(path, ())}
    gallery = path == "gallery"
    if not aliases and not gallery:
        return list(args)
    takes_value = value_options | {a.old for a in aliases.values() if a.takes_value}
    if gallery:
        takes_value.add(GALLERY_PREDS)
    result: list[str] = []
    positionals: list[int] = []  # indices in result of positional tokens (for the old gallery order)
    old_preds: str | None = None
    warned: set[str] = set()
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--":
            result.extend(args[i:])
            break
        name, eq, attached = token.partition("=") if token.startswith("--") else (token, "", "")
        if not token.startswith("--") and token[:2] in aliases and len(token) > 2:  # -oVALUE
            name, eq, attached = token[:2], "=", token[2:]
        needs_value = name in takes_value and not eq
        following = args[i + 1] if needs_value and i + 1 < len(args) else None
        step = 2 if following is not None else 1
        if gallery and name == GALLERY_PREDS:
            if name not in warned:
                warned.add(name)
                from .common import warn

                warn("gallery SPLIT_DIR --preds PREDS is deprecated, use gallery PREDS --split-dir SPLIT_DIR")
            old_preds = attached if eq else following
        elif name in aliases:
            alias = aliases[name]
            if name not in warned:
                warned.add(name)
                _deprecated(name, alias.replacement)
            result.append(alias.new)
            if alias.value is not None:
                result.append(alias.value)
            elif eq:
                result.append(attached)
            elif following is not None:
                result.append(following)
        elif token.startswith("-") and token != "-":
            result.append(token)
            if following is not None:
                result.append(following)
        else:
            positionals.append(len(result))
            result.append(token)
        i += step
    if old_preds is not None:
        if positionals:  # the old positional was the split folder
            k = positionals[0]
            result[k:k + 1] = ["--split-dir", result[k]]
        result.insert(0, old_preds)
    return result


class AegisCommand(TyperCommand):
    """A command that accepts its old option spellings (rewritten, with one deprecation line each)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        names, c = [], ctx
        while c.parent is not None:  # the root's name is the program's (maybe "python -m aegis_cli.main")
            names.append(c.info_name)
            c = c.parent
        path = " ".join(reversed(names))
        value_options = {o for p in self.params if getattr(p, "param_type_name", "") == "option"
                         and not getattr(p, "is_flag", False) for o in (*p.opts, *p.secondary_opts)}
        return super().parse_args(ctx, rewrite(path, args, value_options))


def add_command(app: typer.Typer, name: str, fn: Callable[..., Any]) -> None:
    """Register ``fn`` as ``name`` the one way every command is registered: errors as one line, old spellings
    accepted."""
    app.command(name, cls=AegisCommand)(handle_errors(fn))


__all__ = ["ALIASES", "Alias", "AegisCommand", "Arch", "ClassThresholds", "CrossCheck", "Dataset", "HtmlFigures",
           "ListFormat", "Model", "Optimizer", "REPORT_FORMATS", "RankBy", "RemapSide", "SplitName", "Task",
           "add_command", "mode", "rewrite", "value"]
