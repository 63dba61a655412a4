"""cli/tables.py packs a wide table's columns into parts from each column's width, measured once; the parts are the
ones measuring every candidate part gives (the way it was done before, kept here as the reference)."""

from __future__ import annotations

import io
import random

import pytest
from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from aegis_cli import tables
from aegis_cli.plain_tables import column_groups
from aegis_cli.tables import fit


def _natural(table: Table, console: Console) -> int:
    return Measurement.get(console, console.options.update_width(1 << 20), table).maximum


def reference_groups(table: Table, keys: int, width: int, console: Console) -> list[list[int]]:
    """The greedy packing with each candidate part built and measured whole (what ``fit`` replaced by adding up
    widths measured once per column)."""
    return column_groups(
        len(table.columns), keys, lambda cols: _natural(tables._part(table, cols, 0, 1), console), width
    )


def random_table(rng: random.Random) -> Table:
    kind = rng.choice(["heavy", "none", "no_edge", "simple"])
    table = Table(
        title=" ".join("w" * rng.randint(1, 12) for _ in range(rng.randint(0, 12))) or None,
        box=None if kind == "none" else box.SIMPLE if kind == "simple" else box.HEAVY_HEAD,
        show_edge=kind != "no_edge",
        show_header=rng.random() < 0.9,
    )
    for _ in range(rng.randint(1, 12)):
        table.add_column(
            "h" * rng.randint(1, 14) + (" x" * rng.randint(0, 2)),
            justify=rng.choice(["left", "right", "center"]),
            no_wrap=rng.random() < 0.5,
        )
    for _ in range(rng.randint(0, 6)):
        table.add_row(*(rng.choice(["", "–", "0.5 (≤ 0.6)", "x" * rng.randint(1, 25)]) for _ in table.columns))
    return table


@pytest.mark.parametrize("seed", range(40))
def test_parts_and_text_equal_the_measured_reference(seed):
    rng = random.Random(seed)
    table = random_table(rng)
    keys = rng.randint(0, 3)
    for width in (30, 50, 80, 120, 200):
        console = Console(width=width, file=io.StringIO(), force_terminal=False, color_system=None)
        options = console.options
        widths = tables._column_widths(table, console, options)
        if table.rows or table.show_header:  # (a table without cells measures as wide as it may be)
            assert tables._width_of(table, widths) == _natural(table, console)
        assert tables._column_groups(table, keys, widths, width) == reference_groups(table, keys, width, console)
        for group in tables._column_groups(table, keys, widths, width):
            part = [*range(min(keys, len(table.columns))), *group]
            if table.rows or table.show_header:
                measured = _natural(tables._part(table, part, 0, 1), console)
                assert tables._width_of(table, [widths[i] for i in part], part=True) == measured
        console.print(fit(table, keys))
        ours = console.file.getvalue()
        reference = Console(width=width, file=io.StringIO(), force_terminal=False, color_system=None)
        if _natural(table, reference) <= width:
            reference.print(table)
        else:
            groups = reference_groups(table, keys, width, reference)
            for i, group in enumerate(groups):
                reference.print(tables._part(table, [*range(min(keys, len(table.columns))), *group], i, len(groups)))
        assert ours == reference.file.getvalue()


def test_each_column_is_measured_once(monkeypatch):
    """Measuring every candidate part measured the first columns again for each column added (0.2 s of a
    28-condition score's tables); now each column is measured once."""
    measured: list[int] = []
    real = tables._natural_width
    monkeypatch.setattr(tables, "_natural_width", lambda t, c, o: measured.append(len(t.columns)) or real(t, c, o))
    table = Table(title="wide")
    for k in range(12):
        table.add_column(f"metric {k}", justify="right")
    for r in range(28):
        table.add_row(*(f"0.{k}{r:02d} (0.{k}0–0.{k}3)" for k in range(12)))
    console = Console(width=80, file=io.StringIO(), force_terminal=False, color_system=None)
    console.print(fit(table, 1))
    assert "(part 2 of" in console.file.getvalue()
    assert sum(measured) == len(table.columns), measured
