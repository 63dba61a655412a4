"""benchmarks/bench_score.py --whole-process times `aegis score` of a given checkout: every package it imports,
the CLI included, must come from that checkout (the CLI installs as aegis_cli, so the working directory alone
does not decide which tree's CLI runs)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from tests import REPO_ROOT

REPO = REPO_ROOT


def _bench():
    spec = importlib.util.spec_from_file_location("bench_score", REPO / "benchmarks" / "bench_score.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_timed_process_imports_every_package_from_the_checkout(tmp_path):
    env = _bench().tree_env(REPO, tmp_path / "links")
    probe = (
        "import aegis_cli.main, aegis_data, aegis_eval; "
        "print(aegis_cli.main.__file__, aegis_data.__file__, aegis_eval.__file__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    )
    files = [Path(p).resolve() for p in done.stdout.split()]
    assert files == [REPO / "cli" / "main.py", REPO / "aegis_data" / "__init__.py", REPO / "aegis_eval" / "__init__.py"]
