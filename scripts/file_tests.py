#!/usr/bin/env python3
"""Which folder of tests/ a test belongs in, and whether every test file already sits in its folder.

The test tree mirrors the package tree (tests/README.md):

    python scripts/file_tests.py aegis_data/engine/scale.py     # -> tests/data/engine/
    python scripts/file_tests.py aegis_eval.protocols.scoring   # -> tests/eval/protocols/
    python scripts/file_tests.py --check                         # list test files outside the layout; exit 1 if any

A test of one module goes in the folder mirroring that module's folder; a test of repo-wide rules (imports,
docs, benchmarks, the test suite itself) goes in tests/project/. ``--check`` is what
tests/project/test_tests_layout.py runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Package folder -> its test folder. cli/ installs as the package aegis_cli, so both spellings map to tests/cli.
PACKAGES = {"aegis_data": "data", "aegis_eval": "eval", "cli": "cli", "aegis_cli": "cli"}
# Folders of tests/ that mirror no package folder but are part of the layout.
SHARED = {"project", "fixtures", "golden"}
# Modules at the top of tests/ that are shared helpers, not tests.
TOP_HELPERS = {"__init__.py", "conftest.py", "adversarial.py", "compiled.py"}


def folder_for(target: str) -> Path:
    """tests/<...>/ for a module given as a path (``aegis_data/engine/scale.py``) or a dotted name."""
    parts = target.removesuffix(".py").replace("\\", "/").replace(".", "/").strip("/").split("/")
    if parts[0] not in PACKAGES:
        raise SystemExit(
            f"error: {target} is not a module of aegis_data, aegis_eval or cli; repo-wide tests go in tests/project/"
        )
    folders = parts[1:]
    # A module's tests go in its package folder's mirror; a subpackage given by name is that folder itself.
    if folders and not (REPO / parts[0] / Path(*folders)).is_dir():
        folders = folders[:-1]
    return Path("tests", PACKAGES[parts[0]], *folders)


def misplaced() -> list[str]:
    """Test files (and helper modules) of tests/ that sit outside the mirrored layout, with why."""
    bad = []
    tests = REPO / "tests"
    for path in sorted(tests.rglob("*.py")):
        rel = path.relative_to(tests)
        if "__pycache__" in rel.parts:
            continue
        if len(rel.parts) == 1:
            if rel.name not in TOP_HELPERS:
                bad.append(f"tests/{rel}: at the top of tests/; file it under the folder of the module it tests")
            continue
        top = rel.parts[0]
        if top in SHARED:
            continue
        package = next((p for p, t in PACKAGES.items() if t == top and (REPO / p).is_dir()), None)
        if package is None:
            bad.append(f"tests/{rel}: tests/{top}/ mirrors no package folder")
        elif not (REPO / package / Path(*rel.parts[1:-1])).is_dir():
            bad.append(f"tests/{rel}: {package}/{'/'.join(rel.parts[1:-1])} is no package folder")
        elif not (path.parent / "__init__.py").is_file():
            bad.append(f"tests/{rel}: its folder has no __init__.py (tests import as tests.<folder>.<module>)")
    return bad


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        bad = misplaced()
        print("\n".join(bad) if bad else "every test file is in its folder")
        return 1 if bad else 0
    if len(argv) != 1 or argv[0].startswith("-"):
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    print(f"{folder_for(argv[0]).as_posix()}/")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
