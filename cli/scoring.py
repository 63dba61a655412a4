"""CLI commands (filled in by the owner of this command group)."""

import typer


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root app."""
