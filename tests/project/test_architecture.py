"""The import rules of docs/ARCHITECTURE.md, checked on the code itself (every import statement, also the ones
inside functions): no cycles, no reaching into another package's private names, and no floor imports a higher
one. A new module must be given a room in ROOMS below (and in the doc) before this test passes."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests import REPO_ROOT

ROOT = REPO_ROOT
PACKAGES = ("aegis_data", "aegis_eval", "cli")

# Room -> floor. A module may import its own room and any room on a lower floor; never a higher floor, and
# never another room on its own floor (siblings stay independent). The package __init__ files are the public
# API: they load names lazily from strings (PEP 562), so they have no import edges to check.
ROOMS = {
    "aegis_data.errors": 0,
    "aegis_data.exports": 0,
    "aegis_data.extras": 1,
    "aegis_data.compiled": 1,
    "aegis_data.conditions": 1,
    "aegis_data.files": 2,
    "aegis_data.engine": 3,
    "aegis_data.executors": 3,
    "aegis_data.sources": 4,
    "aegis_data.split": 5,
    "aegis_data.augment": 5,
    "aegis_data.api": 6,
    "aegis_eval.metrics": 7,
    "aegis_eval.protocols": 8,
    "aegis_eval.runners": 9,
    "aegis_eval.report": 9,
    "aegis_eval.api": 10,
    "cli": 11,
}

# The command line's only doors into the library: the two API modules, the error type and the optional-extras
# messages.
CLI_DOORS = ("aegis_data.api", "aegis_eval.api", "aegis_data.errors", "aegis_data.extras")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _room(module: str) -> str:
    best = max((r for r in ROOMS if module == r or module.startswith(r + ".")), key=len, default=None)
    if best is None:
        raise AssertionError(
            f"{module} has no room in ROOMS of tests/project/test_architecture.py (and docs/ARCHITECTURE.md)"
        )
    return best


def _imports(module: str, path: Path) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) for every import of a project module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, None, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            for a in node.names:
                sub = f"{base}.{a.name}"
                found.append((sub, None, node.lineno) if sub in MODULES else (base, a.name, node.lineno))
    return [(m, n, line) for m, n, line in found if m.split(".")[0] in PACKAGES]


EDGES = {m: _imports(m, p) for m, p in MODULES.items()}


def _is_public_api(module: str) -> bool:
    return module in ("aegis_data", "aegis_eval")


def test_every_module_has_a_room():
    for m in MODULES:
        if not _is_public_api(m) and m not in (
            "aegis_data.engine",
            "aegis_data.files",
            "aegis_data.split",
            "aegis_data.augment",
            "aegis_eval.metrics",
            "aegis_eval.protocols",
        ):
            _room(m)


def test_no_import_cycles():
    graph = {m: {t for t, _, _ in edges if t in MODULES and t != m} for m, edges in EDGES.items()}
    # A package imported for one of its modules is not an edge to the package's own code here.
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                cycle = stack[stack.index(t) :] + [t]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_no_module_imports_another_packages_private_names():
    bad = []
    for m, edges in EDGES.items():
        here = m if MODULES[m].name == "__init__.py" else m.rpartition(".")[0]
        for target, name, line in edges:
            owner = target.rpartition(".")[0] if target in MODULES and MODULES[target].name != "__init__.py" else target
            private_module = any(part.startswith("_") for part in target.split("."))
            private_name = name is not None and name.startswith("_") and not name.startswith("__")
            if (private_module or private_name) and owner != here and not target.startswith(here + "."):
                bad.append(f"{MODULES[m].relative_to(ROOT)}:{line} imports {target}{'.' + name if name else ''}")
    assert not bad, "private names used across packages:\n" + "\n".join(bad)


def test_lower_floors_never_import_upper_ones():
    bad = []
    for m, edges in EDGES.items():
        if _is_public_api(m):
            continue
        mine = _room(m)
        for target, name, line in edges:
            if target in ("aegis_data", "aegis_eval") and name == "__version__":
                continue
            theirs = _room(target)
            if theirs == mine:
                continue
            if ROOMS[theirs] > ROOMS[mine] or ROOMS[theirs] == ROOMS[mine]:
                bad.append(
                    f"{MODULES[m].relative_to(ROOT)}:{line} ({mine}, floor {ROOMS[mine]}) imports {target} "
                    f"({theirs}, floor {ROOMS[theirs]})"
                )
    assert not bad, "imports against the floors of docs/ARCHITECTURE.md:\n" + "\n".join(bad)


def test_the_cli_imports_only_the_two_apis_and_the_error_type():
    bad = []
    for m, edges in EDGES.items():
        if m.split(".")[0] != "cli":
            continue
        for target, name, line in edges:
            if target == "cli" or target.startswith("cli.") or target in CLI_DOORS:
                continue
            bad.append(f"{MODULES[m].relative_to(ROOT)}:{line} imports {target}{'.' + name if name else ''}")
    assert not bad, "the CLI reaches past aegis_data.api / aegis_eval.api:\n" + "\n".join(bad)


# The split's manifest is read in one room: aegis_data/split/ (the sealed reader, reader.py, and the manifest's own
# module); files/layout.py names the file. Everyone else asks the reader.
MANIFEST_ROOMS = ("aegis_data.split", "aegis_data.files.layout")


def _manifest_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for every place a module reaches a split manifest itself: the file's name used outside a
    message (an f-string), the literal name ``manifest.json`` outside a message or docstring, or the manifest
    module's loaders imported."""
    in_message: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            in_message.update(id(n) for n in ast.walk(node))
        elif isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                in_message.add(id(first.value))
    found = []
    for node in ast.walk(tree):
        if id(node) in in_message:
            continue
        if (
            isinstance(node, ast.Name)
            and node.id == "MANIFEST_NAME"
            or isinstance(node, ast.Attribute)
            and node.attr == "MANIFEST_NAME"
        ):
            found.append((node.lineno, "uses MANIFEST_NAME"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "manifest.json" in node.value:
            found.append((node.lineno, f"names {node.value!r}"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").endswith("split.manifest"):
            names = [a.name for a in node.names if a.name in ("load_manifest", "check_manifest")]
            if names:
                found.append((node.lineno, f"imports {', '.join(names)}"))
    return found


def test_only_the_split_room_reads_a_split_manifest():
    """docs/ARCHITECTURE.md: split reading goes through the sealed reader of aegis_data/split/ (``load_split``,
    ``read_manifest_file``); nobody else opens ``<split>/manifest.json`` or checks it themselves."""
    bad = []
    for m, path in MODULES.items():
        if any(m == r or m.startswith(r + ".") for r in MANIFEST_ROOMS):
            continue
        for line, what in _manifest_reads(ast.parse(path.read_text(encoding="utf-8"))):
            bad.append(f"{path.relative_to(ROOT)}:{line} {what}")
    assert not bad, "split manifests read outside aegis_data/split/:\n" + "\n".join(bad)


def test_the_manifest_read_check_sees_a_raw_read():
    """The check above can fail: a raw read, a path built from the name and a direct check are all seen; a
    message naming the file is not."""
    raw = (
        "from aegis_data.files.layout import MANIFEST_NAME\n"
        "from aegis_data.split.manifest import check_manifest\n"
        "def f(root):\n"
        "    '''Reads manifest.json.'''\n"
        "    path = root / MANIFEST_NAME\n"
        "    other = root / 'manifest.json'\n"
        "    raise ValueError(f'{root / MANIFEST_NAME}: bad')\n"
    )
    assert [line for line, _ in _manifest_reads(ast.parse(raw))] == [2, 5, 6]


def _doc_rooms() -> dict[str, int]:
    """The floors table of docs/ARCHITECTURE.md as {room: floor}: every backticked path of a row's room column."""
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    rooms = {}
    for line in doc.splitlines():
        cells = line.split("|")
        if len(cells) > 3 and cells[1].strip().isdigit():
            for path in re.findall(r"`([A-Za-z_/.]+)`", cells[2]):
                rooms[path.removesuffix("/").removesuffix(".py").replace("/", ".")] = int(cells[1])
    return rooms


def test_the_doc_lists_the_rooms_and_floors_of_this_test():
    assert _doc_rooms() == ROOMS


def test_the_doc_table_reader_sees_a_row():
    assert _doc_rooms()["aegis_data.conditions"] == 1 and _doc_rooms()["cli"] == 11
