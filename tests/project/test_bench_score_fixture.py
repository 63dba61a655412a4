"""benchmarks/bench_score.py's sweep fixture: the same files every time (the benchmark's numbers compare runs and
tools on identical inputs), one results file per condition of the default suite over one GT, clean = the
one-condition fixture."""

from __future__ import annotations

import hashlib
import importlib.util
import json

from aegis_data.api import load_config
from tests import REPO_ROOT


def _bench():
    spec = importlib.util.spec_from_file_location("bench_score", REPO_ROOT / "benchmarks" / "bench_score.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _digest(folder):
    files = folder.rglob("*.json")
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def test_sweep_fixture_is_deterministic_and_complete(tmp_path):
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
