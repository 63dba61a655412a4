"""Entry point of the ``aegis`` console script. Each command group lives in its own module."""

from __future__ import annotations

import typer

from aegis_data.api import __version__

from . import baseline, engine, report, scoring, sources, splits

app = typer.Typer(
    name="aegis",
    help="AegisBench: frozen disaster-corruption benchmarks for aerial person detection, and one shared scorer.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"aegis {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """AegisBench toolkit."""


for module in (engine, sources, splits, scoring, baseline, report):
    module.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
