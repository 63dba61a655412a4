"""Lazy public names (PEP 562) for the two package roots: ``import aegis_data`` / ``import aegis_eval`` load
nothing until a name is used, so the CLI's help and ``import aegis_eval`` never pull in OpenCV, torch or Dask."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_exports(
    package: str, namespace: dict[str, Any], exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """(``__getattr__``, ``__dir__``) for ``package`` whose public ``exports`` map a name to its module;
    a name loaded once is stored in ``namespace`` (the package's globals), so later lookups skip the hook."""

    def getattr_(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return getattr_, dir_
