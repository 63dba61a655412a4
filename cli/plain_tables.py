"""The score's tables as plain data (:class:`TableSpec`), drawn either by Rich or, for output that is no terminal,
by :func:`plain_text`: the same characters Rich prints there (no styles), without importing Rich, which costs a
one-condition `aegis score` more than drawing its tables. Anything outside what :func:`plain_text` draws exactly (a
terminal, a character that is not one cell wide, a title word wider than its table, a part that still does not fit)
goes to Rich. tests/cli/test_plain_tables.py compares both on random tables and on real scores."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.table import Table

Cell = str | tuple[str, str]  # text, or (text, style): Rich draws the style, plain text drops it

# Characters one cell wide everywhere (Rich's cell_len agrees): printable ASCII and the few symbols the tables use.
_NARROW = re.compile(r"[\x20-\x7e–—−≤≥Δθ→×±·…°µ]*")
_WORD = re.compile(r"\s*\S+\s*")  # Rich's word: a run of non-space with the spaces around it


@dataclass
class TableSpec:
    """A table as Rich's ``Table`` is given it: title, caption, columns (header, justify, no_wrap) and rows."""

    title: str | None = None
    caption: str | None = None
    columns: list[tuple[str, str, bool]] = field(default_factory=list)
    rows: list[list[Cell]] = field(default_factory=list)

    def add_column(self, header: str, justify: str = "left", no_wrap: bool = False) -> None:
        self.columns.append((header, justify, no_wrap))

    def add_row(self, *cells: Cell) -> None:
        self.rows.append(list(cells))


def rich_table(spec: TableSpec) -> Table:
    """The Rich ``Table`` of ``spec`` (a styled cell as ``Text.assemble((text, style))``)."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=spec.title, caption=spec.caption)
    for header, justify, no_wrap in spec.columns:
        table.add_column(header, justify=justify, no_wrap=no_wrap)  # type: ignore[arg-type]
    for row in spec.rows:
        table.add_row(*(Text.assemble(c) if isinstance(c, tuple) else c for c in row))
    return table


def plain_width() -> int | None:
    """The width Rich's console gives stdout when it is no terminal (then Rich writes no styles), or None when Rich
    is to draw: a terminal (or one forced by TTY_COMPATIBLE / FORCE_COLOR), Windows, an unusual COLUMNS."""
    env = os.environ
    if sys.platform == "win32" or env.get("TTY_COMPATIBLE", "") == "1" or env.get("FORCE_COLOR"):
        return None
    if env.get("TTY_COMPATIBLE", "") != "0":
        try:
            if sys.stdout.isatty():
                return None
        except (AttributeError, ValueError, OSError):
            return None
    columns = env.get("COLUMNS")
    if columns is not None and columns.isdigit():
        width = int(columns)
        return width if 20 <= width <= 10_000 else None
    width = 0
    for fd in (0, 1, 2):  # Rich takes the first standard stream that is a terminal
        try:
            width = os.get_terminal_size(fd).columns
        except (AttributeError, ValueError, OSError):
            continue
        break
    return width or 80


def plain_line(text: str) -> str | None:
    """``text`` as Rich prints it with ``soft_wrap`` and no markup (a line as it is), or None if it holds a
    character Rich would not print as one cell (a tab, a control character, a wide or combining character)."""
    return text + "\n" if _NARROW.fullmatch(text) else None


def _plain(cell: Cell) -> str:
    return cell[0] if isinstance(cell, tuple) else cell


def _content_width(spec: TableSpec, column: int) -> int:
    return max(len(_plain(c)) for c in [spec.columns[column][0], *(row[column] for row in spec.rows)])


def _justified(text: str, width: int, justify: str) -> str:
    if justify == "right":
        return text.rjust(width)
    if justify == "center":
        left = (width - len(text)) // 2
        return " " * left + text + " " * (width - len(text) - left)
    return text.ljust(width)


def _annotation(text: str, width: int) -> list[str] | None:
    """A title or caption wrapped at words to ``width`` and centred, as Rich draws it; None when a word is wider."""
    lines: list[str] = []
    current, used = "", 0
    for match in _WORD.finditer(text):
        word = match.group(0)
        if len(word.rstrip()) > width:
            return None
        if used and width - used < len(word.rstrip()):
            lines.append(current)
            current, used = "", 0
        current += word
        used += len(word)
    lines.append(current)
    return [_justified(line.rstrip(), width, "center") for line in lines]


def _draw(spec: TableSpec, columns: Sequence[int], title: str | None, caption: str | None) -> list[str] | None:
    """The lines of ``spec`` with only ``columns`` (Rich's default table: heavy head box, one space of padding)."""
    widths = [_content_width(spec, i) for i in columns]
    table_width = sum(widths) + 2 * len(widths) + len(widths) + 1
    lines = []
    if title:
        wrapped = _annotation(title, table_width)
        if wrapped is None:
            return None
        lines += wrapped
    rules = ["━" * (w + 2) for w in widths]
    lines.append("┏" + "┳".join(rules) + "┓")
    header = [_justified(spec.columns[i][0], w, spec.columns[i][1]) for i, w in zip(columns, widths)]
    lines.append("┃ " + " ┃ ".join(header) + " ┃")
    lines.append("┡" + "╇".join(rules) + "┩")
    for row in spec.rows:
        cells = [_justified(_plain(row[i]), w, spec.columns[i][1]) for i, w in zip(columns, widths)]
        lines.append("│ " + " │ ".join(cells) + " │")
    lines.append("└" + "┴".join("─" * (w + 2) for w in widths) + "┘")
    if caption:
        wrapped = _annotation(caption, table_width)
        if wrapped is None:
            return None
        lines += wrapped
    return lines


def column_groups(n: int, keys: int, width_of: Callable[[list[int]], int], width: int) -> list[list[int]]:
    """The non-key column indices of an ``n``-column table packed greedily, in order, into parts whose width
    (``width_of`` the part's column indices, the ``keys`` leading ones included) fits ``width``: cli/tables.py's
    packing for Rich and :func:`plain_text`'s."""
    key_cols = list(range(min(keys, n)))
    groups: list[list[int]] = []
    current: list[int] = []
    for index in range(len(key_cols), n):
        if current and width_of([*key_cols, *current, index]) > width:
            groups.append(current)
            current = []
        current.append(index)
    if current or not groups:
        groups.append(current)
    return groups


def plain_text(spec: TableSpec, keys: int, width: int) -> str | None:
    """What ``out.print(fit(rich_table(spec), keys))`` writes on a console ``width`` wide that is no terminal
    (cli/tables.py: the whole table when it fits, else parts that repeat the ``keys`` leading columns); None where
    Rich must draw it."""
    n = len(spec.columns)
    texts = [spec.title or "", spec.caption or ""] + [c[0] for c in spec.columns]
    texts += [_plain(c) for row in spec.rows for c in row]
    if not n or any(len(r) != n for r in spec.rows) or not all(_NARROW.fullmatch(t) for t in texts):
        return None
    column_width = [_content_width(spec, i) + 2 for i in range(n)]

    def width_of(part: Sequence[int]) -> int:
        return sum(column_width[i] for i in part) + len(part) + 1

    if width_of(range(n)) <= width:
        parts = [list(range(n))]
    else:
        key_cols = list(range(min(keys, n)))
        parts = [[*key_cols, *group] for group in column_groups(n, keys, width_of, width)]
        if any(width_of(part) > width for part in parts):
            return None  # Rich wraps cells here
    lines: list[str] = []
    for k, part in enumerate(parts):
        title = spec.title if len(parts) == 1 or spec.title is None else f"{spec.title} (part {k + 1} of {len(parts)})"
        drawn = _draw(spec, part, title, spec.caption if k == len(parts) - 1 else None)
        if drawn is None:
            return None
        lines += drawn
    return "".join(line + "\n" for line in lines)
