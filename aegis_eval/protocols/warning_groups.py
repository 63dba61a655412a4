"""Repeated warnings of one kind as one line: the count and the first few examples.

A sweep warns per condition, so one cause (say, a detector that writes every box twice) would otherwise print
28 near-identical lines. Warnings are grouped by their ``[code]`` (the first bracketed lower-case word); a kind
seen once is passed on unchanged, a repeated kind becomes
``[code] 28 warnings, e.g. clean: ...; low_light_s1: ...; smoke_haze_s2: ... (and 25 more)``.
Lines without a code are passed on as they come.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_CODE = re.compile(r"\[([a-z0-9_]+)\]\s*")
EXAMPLES = 3


def group_lines(messages: list[str], examples: int = EXAMPLES) -> list[str]:
    """The grouped lines for ``messages``, kinds in order of first appearance."""
    kinds: dict[str, list[str]] = {}
    order: list[tuple[str | None, str]] = []  # (code, message) for a message without a code
    for msg in messages:
        m = _CODE.search(msg)
        if m is None:
            order.append((None, msg))
        elif m.group(1) not in kinds:
            kinds[m.group(1)] = [msg]
            order.append((m.group(1), ""))
        else:
            kinds[m.group(1)].append(msg)
    out = []
    for code, msg in order:
        msgs = kinds[code] if code is not None else [msg]
        if len(msgs) == 1:
            out.append(msgs[0])
            continue
        shown = "; ".join(_CODE.sub("", m, count=1) for m in msgs[:examples])
        rest = f" (and {len(msgs) - examples} more)" if len(msgs) > examples else ""
        out.append(f"[{code}] {len(msgs)} warnings, e.g. {shown}{rest}")
    return out


@contextmanager
def grouped(on_warning: Callable[[str], None] | None) -> Iterator[Callable[[str], None] | None]:
    """A warning callback that collects, and on leaving the block passes the grouped lines to ``on_warning``
    (also when the block raises). None stays None."""
    if on_warning is None:
        yield None
        return
    collected: list[str] = []
    try:
        yield collected.append
    finally:
        for line in group_lines(collected):
            on_warning(line)
