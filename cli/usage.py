"""A mistyped command line (an unknown option or command, a missing argument, a value of the wrong type) ends as
one error line and exit status 2, like every other refusal of the tool, instead of Click's usage block."""

from __future__ import annotations

from typing import Any

import typer
import typer.core

try:  # Typer 0.29 parses with its own copy of Click; earlier releases with the click package
    from typer._click.exceptions import NoArgsIsHelpError, UsageError
except ImportError:  # pragma: no cover - the pinned Typer has the copy
    from click.exceptions import NoArgsIsHelpError, UsageError  # type: ignore[no-redef]


class UsageLine(UsageError):
    """Click's usage error, shown as ``error: <Click's message>; see '<command> --help'.`` on one line."""

    def show(self, file: Any = None) -> None:
        message = " ".join(self.format_message().split()).rstrip(".")
        hint = f"; see '{self.ctx.command_path} --help'." if self.ctx is not None else "."
        prefix = typer.style("error:", fg="red", bold=True)
        typer.echo(f"{prefix} {message}{hint}", file=file, err=file is None, color=self.ctx.color if self.ctx else None)


def _one_line(exc: UsageError) -> UsageError:
    if isinstance(exc, UsageLine | NoArgsIsHelpError):  # a bare group still prints its help
        return exc
    return UsageLine(exc.format_message(), exc.ctx)


class _OneLineUsage:
    """The parser step of a command or group, its usage errors turned into :class:`UsageLine`."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)  # type: ignore[misc]  # the Typer class follows in the MRO
        except UsageError as exc:
            raise _one_line(exc) from None


class Command(_OneLineUsage, typer.core.TyperCommand):
    """Every ``aegis`` command (cli/vocabulary.py add_command registers it with this class)."""


class Group(_OneLineUsage, typer.core.TyperGroup):
    """``aegis`` and ``aegis baseline``: an unknown command, or an option of theirs, is one line too."""

    def resolve_command(self, ctx: typer.Context, args: list[str]) -> tuple[str | None, Any, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except UsageError as exc:
            raise _one_line(exc) from None
