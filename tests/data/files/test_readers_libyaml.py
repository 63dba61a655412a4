"""The YAML reader gives the same values and the same one-line errors through libyaml's parser (ASCII inputs, where
PyYAML has it) as through the pure-Python parser."""

from __future__ import annotations

from pathlib import Path

import pytest

from aegis_data.errors import AegisError
from aegis_data.files import readers
from tests import REPO_ROOT

needs_libyaml = pytest.mark.skipif(readers._StrictCYamlLoader is None, reason="PyYAML built without libyaml")

SHIPPED = sorted(p for p in REPO_ROOT.glob("**/*.yaml") if ".venv" not in p.parts and "build" not in p.parts)

TRICKY = [
    b"a: 1\na: 2\n",  # a key twice
    b"a: &x [1, 2]\nb: *x\nc: {<<: {d: 1}, e: 2}\n",  # aliases and a merge key
    b"a: [" + b"[" * 200 + b"]" * 200 + b"]\n",
    b"a: !!python/object:os.system x\n",  # not a safe tag
    b"a: [1, 2\n",  # unclosed
    b"\ta: 1\n",  # a tab
    b"a: 'x\n",
    b"- 1\n- 1.5e3\n- .inf\n- 0x1F\n- 0o17\n- 2001-12-14\n- yes\n- ~\n- '007'\n",
    b"x: " + b"&a [" + b"*b, " * 0 + b"1]\n",
    b"",
    b"# only a comment\n",
    b"a: b\n---\nc: d\n",  # two documents
]
BOMB = b'a: &a ["x","x","x","x","x","x","x","x","x"]\n' + b"".join(
    b"%s: &%s [*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s]\n" % ((bytes([c]),) * 2 + (bytes([c - 1]),) * 9)
    for c in range(ord("b"), ord("j"))
)


def _read(data: bytes, loader) -> tuple:
    try:
        return "ok", repr(readers._parse_yaml(loader, data, "config", "x.yaml"))
    except AegisError as exc:
        return "error", str(exc)


@needs_libyaml
@pytest.mark.parametrize("path", SHIPPED, ids=[str(p.relative_to(REPO_ROOT)) for p in SHIPPED])
def test_shipped_yaml_reads_the_same_with_libyaml(path: Path):
    data = path.read_bytes()
    assert _read(data, readers._StrictCYamlLoader) == _read(data, readers._StrictYamlLoader)


@pytest.mark.parametrize("data", [*TRICKY, BOMB], ids=range(len(TRICKY) + 1))
def test_reader_gives_what_the_pure_python_parser_gives(data: bytes):
    python = _read(data, readers._StrictYamlLoader)
    try:
        ours = "ok", repr(readers.parse_yaml_bytes(data, "config", "x.yaml"))
    except AegisError as exc:
        ours = "error", str(exc)
    assert ours == python


@needs_libyaml
def test_suite_files_take_the_libyaml_parser(monkeypatch):
    calls = []
    real = readers._parse_yaml

    def spy(loader, *args):
        calls.append(loader)
        return real(loader, *args)

    monkeypatch.setattr(readers, "_parse_yaml", spy)
    readers.parse_yaml_bytes((REPO_ROOT / "configs/suites/aegis-v2.yaml").read_bytes(), "config", "x.yaml")
    assert calls == [readers._StrictCYamlLoader]
