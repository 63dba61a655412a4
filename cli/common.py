"""What every command shares: consoles, and turning library errors into one line and an exit code."""

from __future__ import annotations

import functools
import sys
from typing import Callable, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from aegis_data.errors import AegisError

# Results go to stdout, diagnostics to stderr.
out = Console()
err = Console(stderr=True)

F = TypeVar("F", bound=Callable)


def fail(message: str, code: int = 1) -> "typer.Exit":
    """Print one error line to stderr and return the Exit to raise."""
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code=code)


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/] {escape(message)}", highlight=False, soft_wrap=True)


def handle_errors(fn: F) -> F:
    """Wrap a command so bad input ends as one line on stderr and a non-zero exit, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except AegisError as exc:
            raise fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
        except FileNotFoundError as exc:
            raise fail(f"file not found: {exc.filename or exc}") from None
        except PermissionError as exc:
            raise fail(f"permission denied: {exc.filename or exc}") from None
        except KeyboardInterrupt:
            err.print("interrupted", highlight=False)
            sys.exit(130)

    return wrapper  # type: ignore[return-value]
