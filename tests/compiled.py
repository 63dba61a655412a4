"""The compiled extensions in tests: each built one, or None where no C compiler built it (its NumPy or Python
twin alone then runs), with the marker that skips the tests needing it. That CI builds every extension is checked
once, for all of them, by tests/project/test_extensions_built.py."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest


def extension(module: str) -> tuple[ModuleType | None, pytest.MarkDecorator]:
    """(``module`` imported, or None when it is not built; a skipif marker for the tests that need it)."""
    try:
        built: ModuleType | None = importlib.import_module(module)
    except ImportError:
        built = None
    return built, pytest.mark.skipif(built is None, reason=f"{module} not built (no C compiler?)")
