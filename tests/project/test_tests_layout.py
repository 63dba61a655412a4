"""The test tree mirrors the package tree (tests/README.md): scripts/file_tests.py --check finds every test file
in the folder of the package it tests, and names the ones that are not."""

from __future__ import annotations

import subprocess
import sys

from tests import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "file_tests.py"


def test_every_test_file_is_in_the_folder_of_what_it_tests():
    r = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, cwd=REPO_ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_check_names_a_test_file_outside_the_layout(tmp_path):
    # The script judges the tree it sits in: a copy of the layout with one test at the top and one in a folder
    # that mirrors nothing.
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "file_tests.py").write_bytes(SCRIPT.read_bytes())
    (tmp_path / "aegis_data" / "engine").mkdir(parents=True)
    for folder in ("tests", "tests/data", "tests/data/engine", "tests/data/nowhere"):
        (tmp_path / folder).mkdir(exist_ok=True)
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "tests" / "data" / "engine" / "test_ok.py").write_text("")
    (tmp_path / "tests" / "test_loose.py").write_text("")
    (tmp_path / "tests" / "data" / "nowhere" / "test_lost.py").write_text("")
    r = subprocess.run(
        [sys.executable, str(tmp_path / "scripts" / "file_tests.py"), "--check"], capture_output=True, text=True
    )
    assert r.returncode == 1
    assert "tests/test_loose.py" in r.stdout and "tests/data/nowhere/test_lost.py" in r.stdout
    assert "test_ok.py" not in r.stdout


def test_a_module_is_filed_beside_its_package_folder():
    def folder(target):
        return subprocess.run(
            [sys.executable, str(SCRIPT), target], capture_output=True, text=True, check=True
        ).stdout.strip()

    assert folder("aegis_data/engine/scale.py") == "tests/data/engine/"
    assert folder("aegis_eval.protocols.scoring") == "tests/eval/protocols/"
    assert folder("aegis_eval/api.py") == "tests/eval/"
    assert folder("cli/splits.py") == "tests/cli/"
