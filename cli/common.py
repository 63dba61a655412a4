"""What every command shares: consoles, and turning library errors into one line and an exit code."""

from __future__ import annotations

import errno
import functools
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Callable, Iterable, Mapping, Optional, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from aegis_data.errors import AegisError
from aegis_data.extras import MissingExtra

# Results go to stdout, diagnostics to stderr.
out = Console()
err = Console(stderr=True)

F = TypeVar("F", bound=Callable)


class ScaleMode(str, Enum):
    """The length unit of the corruption parameters (docs/CORRUPTIONS.md, "Scale")."""

    frame = "frame"
    object = "object"


# The scale choice, shared by build-splits, list, corrupt and calibrate (declared once).
_SCALE = "Scale (docs/CORRUPTIONS.md)"
ScaleOpt = Annotated[Optional[ScaleMode], typer.Option(
    "--scale", help="Length unit of blur, streak, ripple and feather sizes: frame = per 1000 px of each frame's long "
    "side; object = per person (the median test person box, or --person-px / --gsd), the same for full frames and "
    "crops. Default: the suite config's scale (frame for aegis-v1).", rich_help_panel=_SCALE)]
PersonPxOpt = Annotated[Optional[float], typer.Option(
    "--person-px", help="--scale object: the person unit in px (median sqrt(w*h) of a person box).",
    rich_help_panel=_SCALE)]
GsdOpt = Annotated[Optional[float], typer.Option(
    "--gsd", metavar="CM_PER_PX", help="--scale object: ground sampling distance in cm/px; the unit is then a "
    "1.7 m person's box (170 / gsd * sqrt(1/2) px).", rich_help_panel=_SCALE)]


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
        except MissingExtra as exc:  # an optional extra is not installed: nothing ran, as for a usage error
            raise fail(str(exc), code=2) from None
        except AegisError as exc:
            raise fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
        except FileNotFoundError as exc:
            raise fail(f"file not found: {exc.filename or exc}") from None
        except PermissionError as exc:
            raise fail(f"permission denied: {exc.filename or exc}") from None
        except OSError as exc:  # disk full, a parent that is a file, ...: one line naming the path
            from aegis_data.imageio import write_error

            if exc.filename and exc.errno in (errno.ENOSPC, errno.ENOTDIR, errno.EISDIR, errno.EEXIST):
                raise fail(str(write_error(Path(exc.filename), exc))) from None
            where = f" ({exc.filename})" if exc.filename else ""
            raise fail(f"{exc.strerror or type(exc).__name__}{where}") from None
        except ImportError as exc:  # an optional extra (torch, matplotlib, Dask, ...) is not installed
            from aegis_data.extras import missing_module_message

            message = missing_module_message(exc.name or "") if isinstance(exc, ModuleNotFoundError) else None
            if message is None:
                raise
            raise fail(message, code=2) from None
        except KeyboardInterrupt:
            err.print("interrupted", highlight=False)
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


def check_outputs(outputs: Mapping[str, Path | None], inputs: Iterable[Path | None] = ()) -> None:
    """Before any long work: every output file can be written, no two options name the same file, and none
    replaces (or lands inside) an input of the same command. Raises AegisError in one line naming the option.

    ``outputs`` maps an option name (``--json``) to its path or None; ``inputs`` are the files and folders the
    command reads (a folder protects every file under it).
    """
    from aegis_data.errors import AegisError

    given = {opt: Path(p) for opt, p in outputs.items() if p is not None}
    seen: dict[Path, str] = {}
    for opt, path in given.items():
        real = path.resolve()
        if real in seen:
            raise AegisError(f"{seen[real]} and {opt} both name {path}; give each output its own file")
        seen[real] = opt
        if path.is_dir():
            raise AegisError(f"{opt} {path} is a folder; expected a file name")
        blocker = next((d for d in path.parents if d.exists() and not d.is_dir()), None)
        if blocker is not None:
            raise AegisError(f"{opt} {path} cannot be written: {blocker} is a file, not a folder")
        existing = next((d for d in path.parents if d.exists()), Path("."))
        if not os.access(existing, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
            raise AegisError(f"{opt} {path} cannot be written: no permission in {existing}")
        for src in inputs:
            if src is None or not Path(src).exists():
                continue
            src_real = Path(src).resolve()
            if real == src_real or (src_real.is_dir() and src_real in real.parents):
                what = "is" if real == src_real else "lies inside"
                raise AegisError(f"{opt} {path} {what} the input {src}; write the output somewhere else")


def check_output_dirs(outputs: Mapping[str, Path | None], inputs: Iterable[Path | None] = ()) -> None:
    """Output folders: each may exist (as a folder) or be creatable, and is neither an input folder nor inside
    one (``inputs``); AegisError in one line otherwise."""
    from aegis_data.errors import AegisError

    inputs = [Path(p).resolve() for p in inputs if p is not None and Path(p).is_dir()]

    for opt, path in outputs.items():
        if path is None:
            continue
        path = Path(path)
        if path.exists() and not path.is_dir():
            raise AegisError(f"{opt} must be a directory, got an existing file: {path}")
        blocker = next((d for d in path.parents if d.exists() and not d.is_dir()), None)
        if blocker is not None:
            raise AegisError(f"{opt} {path} cannot be created: {blocker} is a file, not a folder")
        existing = next((d for d in (path, *path.parents) if d.exists()), Path("."))
        if not os.access(existing, os.W_OK | os.X_OK):
            raise AegisError(f"{opt} {path} cannot be written: no permission in {existing}")
        real = path.resolve()
        for src in inputs:
            if real == src or src in real.parents:
                raise AegisError(f"{opt} {path} {'is' if real == src else 'lies inside'} the input folder {src}; "
                                 f"write the output somewhere else")
