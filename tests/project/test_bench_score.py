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


def test_side_by_side_times_short_processes_more_often_and_skips_pycocotools_on_request():
    """--tools: the one-condition processes run --one-rounds times, the sweeps --rounds times; --skip-pycocotools
    leaves pycocotools out; the table reports every aegis cell with its range. A tiny fixture: a few seconds."""
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "bench_score.py"),
            "--tools",
            "--images", "12", "--gt", "3", "--dets", "6",
            "--rounds", "1", "--one-rounds", "2", "--boot-b", "20", "--skip-pycocotools",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    rounds = [line for line in done.stdout.splitlines() if line.startswith("round ")]
    assert sum(": aegis one:" in line for line in rounds) == 2
    assert sum(": aegis sweep:" in line for line in rounds) == 1
    assert not any("pycocotools" in line for line in rounds)
    row = next(line for line in done.stdout.splitlines() if line.startswith("| **`aegis score`**"))
    assert row.count("–") == 3  # one condition, sweep, sweep with B: each a median with its range
