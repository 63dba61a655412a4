"""The condition vocabulary every side of the toolkit speaks: severities and condition ids.

A test condition is ``clean`` or ``<corruption>_s<severity>`` (``low_light_s3``), severity 1, 2 or 3. The engine,
the split, the scorer and the report all name conditions this way; the words live here, below all of them, so a
report module need not import the corruption engine to read a condition id.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

from aegis_data.errors import AegisError

SEVERITIES = (1, 2, 3)
CLEAN = "clean"


def check_severity(severity: Any, param: str = "severity") -> int:
    """``severity`` as int when it is 1, 2 or 3 (an integer, not a bool); else AegisError naming ``param``."""
    if isinstance(severity, bool) or not isinstance(severity, Integral) or int(severity) not in SEVERITIES:
        raise AegisError(f"`{param}` must be 1, 2 or 3, got {severity!r}", param=param)
    return int(severity)


def check_severities(severities: Any) -> tuple[int, ...]:
    """A non-empty subset of 1, 2, 3, sorted and deduplicated; else AegisError."""
    given = list(severities)
    if not given or any(isinstance(s, bool) or not isinstance(s, Integral) or int(s) not in SEVERITIES for s in given):
        raise AegisError(f"`severities` must be a non-empty subset of 1, 2, 3; got {given!r}", param="severities")
    return tuple(sorted({int(s) for s in given}))


def condition_id(corruption: str, severity: int) -> str:
    return f"{corruption}_s{int(severity)}"


def parse_condition(cond: str) -> tuple[str | None, int]:
    """``'low_light_s3' -> ('low_light', 3)``; ``'clean' -> (None, 0)``."""
    if cond == CLEAN:
        return None, 0
    name, sep, sev = cond.rpartition("_s")
    if not sep or not sev.isdigit() or not name:
        raise AegisError(f"not a condition id: {cond!r} (expected 'clean' or '<corruption>_s<1-3>')")
    return name, int(sev)
