"""Issue 33, rooms that match their names: the condition vocabulary in a low-floor module, split reading through
the sealed reader, the C sources beside their NumPy twins."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VOCABULARY = {"SEVERITIES", "CLEAN", "check_severity", "check_severities", "condition_id", "parse_condition"}


def _imported_names(module: str) -> list[tuple[Path, int, str]]:
    found = []
    for pkg in ("aegis_data", "aegis_eval", "cli", "benchmarks", "scripts", "tests"):
        for path in (ROOT / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.module == module:
                    found += [(path.relative_to(ROOT), node.lineno, a.name) for a in node.names]
    return found


def test_the_condition_vocabulary_is_imported_from_its_own_module():
    from aegis_data import conditions
    from aegis_data.engine import config

    assert VOCABULARY <= set(vars(conditions))
    # The engine's suite config uses the words but does not define them.
    for name in VOCABULARY:
        assert getattr(config, name, None) is None or getattr(config, name) is getattr(conditions, name), name
    via_config = [f"{p}:{line} {n}" for p, line, n in _imported_names("aegis_data.engine.config") if n in VOCABULARY]
    assert not via_config, "import the condition vocabulary from aegis_data.conditions:\n" + "\n".join(via_config)


def test_the_condition_vocabulary_round_trips():
    from aegis_data.conditions import SEVERITIES, condition_id, parse_condition

    assert parse_condition("clean") == (None, 0)
    for sev in SEVERITIES:
        assert parse_condition(condition_id("water_glare", sev)) == ("water_glare", sev)
