"""benchmarks/bench_score.py: --whole-process times `aegis score` of a given checkout, so every package it imports,
the CLI included, must come from that checkout (the CLI installs as aegis_cli, so the working directory alone
does not decide which tree's CLI runs); --tools; the sweep fixture."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from aegis_data.api import load_config
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
    # The Ultralytics form (stem ids and file_name) is timed like a one-condition process, and its AP is among the
    # values the exit status compares.
    assert sum(": aegis one, stem ids:" in line for line in rounds) == 2
    assert any(line.startswith("The same condition as Ultralytics writes it") for line in done.stdout.splitlines())


def _digest(folder):
    files = folder.rglob("*.json")
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def test_sweep_fixture_is_deterministic_and_complete(tmp_path):
    """The sweep fixture: the same files every time (the benchmark's numbers compare runs and tools on identical
    inputs), one results file per condition of the default suite over one GT, clean = the one-condition fixture."""
    bench = _bench()
    gt_a, preds_a = bench.write_sweep_fixture(tmp_path / "a", 6, 3, 8)
    bench.write_sweep_fixture(tmp_path / "b", 6, 3, 8)
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    assert sorted(p.stem for p in preds_a.glob("*.json")) == sorted(load_config().conditions())
    gt, clean = bench.make_condition(6, 3, 8, 1)
    assert json.loads((preds_a / "clean.json").read_text()) == bench.coco_dicts(gt, clean)[1]
    doc = json.loads(gt_a.read_text())
    assert len(doc["images"]) == 6 and len(doc["annotations"]) == 18
    counts = {p.stem: len(json.loads(p.read_text())) for p in preds_a.glob("*.json")}
    assert set(counts.values()) == {48}  # every condition: 8 detections on each of the 6 images
    # the conditions differ from one another (each keyed on its own)
    assert len({_digest(tmp_path / "a")[f"preds/{c}.json"] for c in counts}) == len(counts)
