"""Entry point of the ``aegis`` console script. Each command group lives in its own module."""

from __future__ import annotations

import gc
import importlib
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import typer

# The command group modules in help order, with the top-level commands each one registers. `aegis <command> ...`
# imports and registers only that command's module (the others cost start-up time: Rich's progress bars, the
# baseline tables); anything else (--help, --version, a mistyped command) registers them all.
# tests/cli/test_main_lazy.py checks this table against what the modules register.
COMMAND_MODULES = {
    "engine": ("list", "corrupt", "grid", "calibrate", "realism"),
    "sources": ("audit",),
    "splits": ("build-splits", "verify", "export-hf"),
    "scoring": ("freeze-threshold", "score", "gt-diff", "convert-refs"),
    "baseline": ("baseline",),
    "report": ("report", "gallery", "rank"),
}


def _version(value: bool) -> None:
    import typer

    from aegis_data.api import __version__

    if value:
        typer.echo(f"aegis {__version__}")
        raise typer.Exit()


def build_app(modules: tuple[str, ...] = tuple(COMMAND_MODULES)) -> typer.Typer:
    """The ``aegis`` app with the commands of ``modules`` (all of them by default). Typer is imported here, not
    with this module: a plain `aegis score` line (cli/plain_score.py) never loads it."""
    import typer

    from . import usage

    def _root(
        version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
    ) -> None:
        """AegisBench toolkit."""

    app = typer.Typer(
        name="aegis",
        help="AegisBench: frozen disaster-corruption benchmarks for aerial person detection, and one shared scorer.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_show_locals=False,
        rich_markup_mode=None,
        cls=usage.Group,
    )
    app.callback()(_root)
    for name in modules:
        importlib.import_module(f"{__package__}.{name}").register(app)
    return app


def modules_for(argv: list[str]) -> tuple[str, ...]:
    """The modules to register for the command line ``argv`` (without the program name)."""
    if argv:
        for name, commands in COMMAND_MODULES.items():
            if argv[0] in commands:
                return (name,)
    return tuple(COMMAND_MODULES)


def __getattr__(name: str) -> Any:  # `from aegis_cli.main import app`: the whole app, built on first use
    if name == "app":
        app = build_app()
        globals()["app"] = app
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The cycle collector's first threshold in a scoring process (Python's default: 700 new objects). The imports and a
# parsed GT leave some 10^5 objects that live to the end, which the default walked over and over: 62 passes, 40-60 ms
# of CPU in a one-condition score of the 1,000-image benchmark fixture (measured with gc.callbacks), 2 passes with
# this threshold. The scorer's garbage is freed by reference counting, and cycles are still collected.
SCORE_GC_THRESHOLD = 100_000


def main() -> None:
    """The console script: one command, then the process ends."""
    argv = sys.argv[1:]
    if argv[:1] != ["score"]:
        build_app(modules_for(argv))()
        return
    gc.set_threshold(SCORE_GC_THRESHOLD, *gc.get_threshold()[1:])
    try:
        from . import plain_score

        if not plain_score.run(argv[1:]):  # a plain scoring line skips Typer's option parsing (cli/plain_score.py)
            build_app(modules_for(argv))()
    finally:
        gc.freeze()  # the process ends: its last collection need not walk everything it held (10-16 ms there)


if __name__ == "__main__":
    main()
