"""A missing optional extra ends in one line naming the extra and its quoted install command, exit 2, never a
traceback: each of torch, torchvision, ultralytics (runners), matplotlib (report), Dask (distributed) and
datasets (core) is hidden from a fresh interpreter and the command that needs it is run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import REPO_ROOT

ROOT = REPO_ROOT


@pytest.fixture(scope="module")
def split(tmp_path_factory) -> Path:
    from aegis_data.sources import load_source
    from aegis_data.split.build import build_splits

    out = tmp_path_factory.mktemp("extras") / "split"
    build_splits(load_source("synthetic", n=3, size="96"), out, corruptions=["low_light"], severities=[1], workers=1)
    return out


@pytest.fixture(scope="module")
def score_json(split, tmp_path_factory) -> Path:
    from aegis_eval.api import score

    path = tmp_path_factory.mktemp("extras_score") / "score.json"
    score({"clean": [], "low_light_s1": []}, split, threshold=0.5, bootstrap=1).to_json(path)
    return path


def _run_without(module: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    code = (
        f"import sys; sys.modules[{module!r}] = None; sys.argv = ['aegis'] + {args!r}; "
        "from aegis_cli.main import main; main()"
    )
    env = {
        "PYTHONPATH": str(ROOT),
        "PATH": "/usr/bin:/bin",
        "HOME": str(cwd),
        "COLUMNS": "200",
        "YOLO_OFFLINE": "1",
        "YOLO_CONFIG_DIR": str(cwd),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
    }
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def _predict_fasterrcnn(s, o, j):
    """Faster R-CNN's predict, which needs torch and torchvision (the runners extra)."""
    return ["baseline", "predict", "--split-dir", str(s), "--out-dir", str(o / "p"), "--model", "fasterrcnn",
            "--weights", "none", "--conditions", "clean"]  # fmt: skip


CASES = {
    "torch": (
        "runners",
        _predict_fasterrcnn,
    ),
    "torchvision": (
        "runners",
        _predict_fasterrcnn,
    ),
    "ultralytics": (
        "runners",
        lambda s, o, j: [
            "baseline",
            "predict",
            "--split-dir",
            str(s),
            "--out-dir",
            str(o / "p"),
            "--model",
            "yolo11",
            "--weights",
            "yolo11n.yaml",
            "--conditions",
            "clean",
        ],
    ),
    "matplotlib": ("report", lambda s, o, j: ["report", str(j), "--out-dir", str(o / "r")]),
    "distributed": (
        "distributed",
        lambda s, o, j: [
            "build-splits",
            "--n",
            "2",
            "--out-dir",
            str(o / "d"),
            "--scheduler",
            "local",
            "--workers",
            "1",
        ],
    ),
    "datasets": (None, lambda s, o, j: ["export-hf", str(s), "--out-dir", str(o / "hf")]),
}


@pytest.mark.parametrize("module", sorted(CASES))
def test_a_missing_extra_is_one_line_naming_it(module, split, score_json, tmp_path):
    extra, args = CASES[module]
    r = _run_without(module, args(split, tmp_path, score_json), tmp_path)
    assert r.returncode == 2, (r.returncode, r.stdout[-800:], r.stderr[-2000:])
    assert "Traceback" not in r.stderr + r.stdout
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), r.stderr
    want = (
        "pip install -c constraints.txt -e '.'" if extra is None else f"pip install -c constraints.txt -e '.[{extra}]'"
    )
    assert want in lines[0] and module in lines[0], lines[0]
