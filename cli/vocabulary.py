"""The command line's one vocabulary (docs/CLI.md): the modes as Enums, the options several commands share, and
the one way every command is registered. Renamed options are listed in CHANGELOG.md; the old names are gone."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Annotated, Any

import typer

from . import usage
from .common import handle_errors
from .modes import (
    Arch,
    ClassThresholds,
    CrossCheck,
    Dataset,
    HtmlFigures,
    ListFormat,
    Model,
    Optimizer,
    RankBy,
    RemapSide,
    SplitName,
    Task,
    value,
)

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


# --- the scale options, shared by build-splits, list, corrupt and calibrate ----------------------------------
class ScaleMode(str, Enum):
    """The length unit of the corruption parameters (docs/CORRUPTIONS.md, "Scale")."""

    frame = "frame"
    object = "object"


_SCALE = "Scale (docs/CORRUPTIONS.md)"
ScaleOpt = Annotated[
    ScaleMode | None,
    mode(
        ScaleMode,
        "--scale",
        help="Length unit of blur, streak, ripple and feather sizes: frame = per 1000 px of "
        "each frame's long side; object = per person (the median test person box, or --person-px / --gsd), the same "
        "for full frames and crops. Default: the suite's scale (object for aegis-v2, which needs it; frame for "
        "aegis-v1).",
        rich_help_panel=_SCALE,
    ),
]
AllowMixedSuitesOpt = Annotated[
    bool,
    typer.Option(
        "--allow-mixed-suites",
        help="Compare scores made on different corruption suites (aegis-v1, aegis-v2) "
        "anyway; by default that is refused, as one condition id names a different corruption in each.",
    ),
]
SuiteOpt = Annotated[
    str | None,
    typer.Option(
        "--suite",
        metavar="NAME|PATH",
        help="Corruption suite: aegis-v2 (the default: physical units through a scene "
        "and camera model per image), aegis-v1 (the first suite, frozen), or the path of a suite config file.",
        rich_help_panel=_SCALE,
    ),
]
PersonPxOpt = Annotated[
    float | None,
    typer.Option(
        "--person-px",
        help="--scale object: the person unit in px (median sqrt(w*h) of a person box).",
        rich_help_panel=_SCALE,
    ),
]
GsdOpt = Annotated[
    float | None,
    typer.Option(
        "--gsd",
        metavar="CM_PER_PX",
        help="--scale object: ground sampling distance in cm/px; the unit is then a "
        "1.7 m person's box (170 / gsd * sqrt(1/2) px).",
        rich_help_panel=_SCALE,
    ),
]


def add_command(app: typer.Typer, name: str, fn: Callable[..., Any]) -> None:
    """Register ``fn`` as ``name`` the one way every command is registered: library errors and command-line
    mistakes end as one line."""
    app.command(name, cls=usage.Command)(handle_errors(fn))


__all__ = [
    "Arch",
    "ClassThresholds",
    "CrossCheck",
    "Dataset",
    "HtmlFigures",
    "ListFormat",
    "Model",
    "Optimizer",
    "REPORT_FORMATS",
    "RankBy",
    "RemapSide",
    "SplitName",
    "Task",
    "add_command",
    "mode",
    "value",
]
