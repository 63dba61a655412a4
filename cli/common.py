"""What every command shares: consoles, and turning library errors into one line and an exit code."""

from __future__ import annotations

import errno
import functools
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from aegis_data import api
from aegis_data.errors import AegisError
from aegis_data.extras import MissingExtra

if TYPE_CHECKING:
    import typer
    from rich.console import Console
    from rich.text import Text

    out: Console
    err: Console

F = TypeVar("F", bound=Callable)


# Results go to stdout (``out``), diagnostics to stderr (``err``). Markup and emoji codes are off: labels, dataset and
# class names, paths and messages are user text ("m[/]", "yolo[v8]", ":smile:") and print as they are; the few styled
# words are Text objects (``styled``), never markup strings. The two consoles (and Rich) load on first use, so a
# plain `aegis score` scores before it imports Rich, and Typer only for an error's exit.
@functools.cache
def _consoles() -> dict[str, Console]:
    from rich.console import Console

    made = {"out": Console(markup=False, emoji=False), "err": Console(stderr=True, markup=False, emoji=False)}
    globals().update(made)  # later lookups find them without __getattr__
    return made


def __getattr__(name: str) -> Any:  # `from .common import out`, `common.err`: the consoles, made on first use
    if name in ("out", "err"):
        return _consoles()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def styled(*parts: str | tuple[str, str]) -> Text:
    """A line of plain strings and (text, style) pairs: styling without markup, so no part is ever parsed."""
    from rich.text import Text

    return Text.assemble(*parts)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print one error line to stderr and return the Exit to raise."""
    import typer

    _consoles()["err"].print(styled(("error:", "bold red"), " ", message), highlight=False, soft_wrap=True)
    return typer.Exit(code=code)


def warn(message: str) -> None:
    _consoles()["err"].print(styled(("warning:", "yellow"), " ", message), highlight=False, soft_wrap=True)


# The one place a library parameter becomes a flag. A parameter not listed here is spelled as its flag by the
# Typer rule (``out_dir`` -> ``--out-dir``); the entries are the parameters whose flag reads differently.
PARAM_FLAGS: dict[str, str] = {
    # The folder a command writes into is --out-dir whatever its function calls it (a library `out` is a file:
    # --out).
    "run_dir": "--out-dir",
    "results_dir": "--out-dir",
    "gt": "--split-dir",
    "gts": "--split-dir",  # repeated: one per ground-truth version (the old --gt)
    "remap_versions": "--remap-version",  # repeated
    "gsd_cm_per_px": "--gsd",
    "n_bootstrap": "--bootstrap",
    "repo_id": "--push",
    "paired": "--no-paired",  # named only to turn pairing off (rank's messages: "leave them out with `paired`")
}

_BACKTICKED = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)`")


def flag_for(param: str) -> str:
    """The CLI flag that sets the library parameter ``param``."""
    return PARAM_FLAGS.get(param) or "--" + param.replace("_", "-")


def in_flags(message: str) -> str:
    """A library message as the CLI prints it: every backticked `parameter` becomes its flag."""
    return _BACKTICKED.sub(lambda m: flag_for(m.group(1)), message)


def handle_errors(fn: F) -> F:
    """Wrap a command so bad input ends as one line on stderr and a non-zero exit, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except MissingExtra as exc:  # an optional extra is not installed: nothing ran, as for a usage error
            raise fail(in_flags(str(exc)), code=2) from None
        except AegisError as exc:
            raise fail(in_flags(str(exc).splitlines()[0]) if str(exc) else type(exc).__name__) from None
        except FileNotFoundError as exc:
            raise fail(f"file not found: {exc.filename or exc}") from None
        except PermissionError as exc:
            raise fail(f"permission denied: {exc.filename or exc}") from None
        except OSError as exc:  # disk full, a parent that is a file, ...: one line naming the path
            if exc.filename and exc.errno in (errno.ENOSPC, errno.ENOTDIR, errno.EISDIR, errno.EEXIST):
                raise fail(str(api.write_error(Path(exc.filename), exc))) from None
            where = f" ({exc.filename})" if exc.filename else ""
            raise fail(f"{exc.strerror or type(exc).__name__}{where}") from None
        except ImportError as exc:  # an optional extra (torch, matplotlib, Dask, ...) is not installed
            from aegis_data.extras import missing_module_message

            message = missing_module_message(exc.name or "") if isinstance(exc, ModuleNotFoundError) else None
            if message is None:
                raise
            raise fail(message, code=2) from None
        except KeyboardInterrupt:
            _consoles()["err"].print("interrupted", highlight=False)
            sys.exit(130)

    return wrapper  # type: ignore[return-value]
