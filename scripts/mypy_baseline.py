"""Prints the [[tool.mypy.overrides]] blocks that silence, per module, the error codes a mypy run reports.

The baseline pyproject.toml had when mypy was adopted (166 errors in 54 modules, all fixed since) was made this way:
each module keeps only the codes it already had, so any other kind of error, and every error in the other modules,
still fails. To shrink one, fix a module, drop its block and run `make typecheck`.
Usage: .venv/bin/python -m mypy | .venv/bin/python scripts/mypy_baseline.py
"""

import re
import sys
from collections import defaultdict

ERROR = re.compile(r"^(?P<path>[\w/]+)\.py:\d+: error: .*\[(?P<code>[a-z-]+)\]$")


def module_of(path: str) -> str:
    parts = path.split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def main() -> None:
    codes: dict[str, set[str]] = defaultdict(set)
    for line in sys.stdin:
        match = ERROR.match(line.rstrip("\n"))
        if match:
            codes[module_of(match["path"])].add(match["code"])
    by_codes: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for module, found in codes.items():
        by_codes[tuple(sorted(found))].append(module)
    for found, modules in sorted(by_codes.items(), key=lambda item: sorted(item[1])):
        print("[[tool.mypy.overrides]]")
        print("module = [" + ", ".join(f'"{m}"' for m in sorted(modules)) + "]")
        print("disable_error_code = [" + ", ".join(f'"{c}"' for c in found) + "]")
        print()


if __name__ == "__main__":
    main()
