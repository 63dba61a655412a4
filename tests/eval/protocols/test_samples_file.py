"""The samples file beside a score JSON (aegis_eval.protocols.samples_file): the score's numbers untouched, only
provenance.samples_sha256 added; the file's values are the ones the intervals came from; its bytes are deterministic;
a file of another run is refused; B = 1 writes none."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

import aegis_eval.api as ae
from aegis_data.errors import AegisError
from aegis_eval.metrics.bootstrap import percentile_interval
from aegis_eval.protocols import samples_file
from aegis_eval.protocols.samples_file import (
    PLAN_KEYS,
    parse_samples,
    read_samples,
    samples_bytes,
    sidecar_path,
)
from aegis_eval.protocols.scoring import ScoreOptions, score
from tests.eval.protocols.paired_fixture import make_predictions, make_split


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("samples")
    split = make_split(root)
    return {"root": root, "split": split, "a": make_predictions(root, split, "a", 2)}


def test_score_numbers_unchanged_and_only_the_hash_added(data, tmp_path):
    options = ScoreOptions(threshold=0.5, bootstrap=30, seed=4)
    plain = score(data["a"], data["split"], options).result
    result = ae.score(data["a"], data["split"], threshold=0.5, bootstrap=30, seed=4)
    doc = result.to_dict()
    prov = doc.pop("provenance")
    plain_prov = dict(plain.pop("provenance"))
    assert json.dumps(doc) == json.dumps(json.loads(json.dumps(plain)))  # every number, in the same order
    assert set(prov) - set(plain_prov) == {"samples_sha256"}
    path = result.to_json(tmp_path / "a.json")
    side = sidecar_path(path)
    assert side == tmp_path / "a.samples.npz" and result.samples_path(path) == side
    assert hashlib.sha256(side.read_bytes()).hexdigest() == prov["samples_sha256"]


def test_the_file_holds_the_values_the_intervals_came_from(data, tmp_path):
    result = ae.score(data["a"], data["split"], threshold=0.5, bootstrap=30, seed=4, cluster_by="group")
    path = result.to_json(tmp_path / "a.json")
    with np.load(sidecar_path(path)) as z:  # an ordinary npz
        values = z["values"]
        meta = json.loads(bytes(z["meta"]).decode())
    assert values.shape == (len(meta["conditions"]), len(meta["metrics"]), 30)
    doc = json.loads(path.read_text())
    for i, cond in enumerate(meta["conditions"]):
        for j, m in enumerate(meta["metrics"]):
            assert list(percentile_interval(values[i, j])) == pytest.approx(doc["conditions"][cond]["ci"][m])
    plan = meta["plan"]
    assert set(PLAN_KEYS) <= set(plan) and plan["n_bootstrap"] == 30 and plan["seed"] == 4
    assert plan["resampling_unit"] == "cluster" and plan["n_units"] == 6 and plan["clusters_sha256"]
    assert plan["gt_sha256"] == doc["provenance"]["gt_sha256"]
    back = read_samples(path, doc)
    assert back is not None and back.fingerprint == result.samples.fingerprint


def test_bytes_are_deterministic(data, tmp_path):
    one = ae.score(data["a"], data["split"], threshold=0.5, bootstrap=20, seed=1)
    two = ae.score(data["a"], data["split"], threshold=0.5, bootstrap=20, seed=1)
    assert samples_bytes(one.samples) == samples_bytes(two.samples)
    one.to_json(tmp_path / "x.json")
    two.to_json(tmp_path / "y.json")
    assert (tmp_path / "x.samples.npz").read_bytes() == (tmp_path / "y.samples.npz").read_bytes()


def test_a_samples_file_of_another_run_is_refused_and_an_absent_one_is_none(data, tmp_path):
    first = ae.score(data["a"], data["split"], threshold=0.5, bootstrap=20, seed=1)
    other = ae.score(data["a"], data["split"], threshold=0.5, bootstrap=20, seed=2)
    path = first.to_json(tmp_path / "a.json")
    doc = json.loads(path.read_text())
    sidecar_path(path).write_bytes(samples_bytes(other.samples))
    with pytest.raises(AegisError, match=r"^\[samples_stale\]"):
        read_samples(path, doc)
    sidecar_path(path).unlink()
    assert read_samples(path, doc) is None
    with pytest.raises(AegisError, match=r"^\[samples_file\]"):
        parse_samples(b"not a zip", "x.samples.npz")


def test_one_resample_writes_no_samples_file(data, tmp_path):
    result = ae.score(data["a"], data["split"], threshold=0.5, bootstrap=1)
    assert result.samples is None and "samples_sha256" not in result.provenance
    result.to_json(tmp_path / "a.json")
    assert not (tmp_path / "a.samples.npz").exists()


def test_sidecar_names():
    assert sidecar_path("runs/m.json").as_posix() == "runs/m.samples.npz"
    assert sidecar_path("runs/m.score").as_posix() == "runs/m.score.samples.npz"


def test_write_json_of_a_score_result_keeps_its_samples_file(data, tmp_path):
    # ae.write_json(result, path) is what a script writes a score with: a report or rank of it must still pair.
    result = ae.score(data["a"], data["split"], threshold=0.5, bootstrap=30, seed=4)
    path = ae.write_json(result, tmp_path / "a.json")
    assert path.read_bytes() == result.to_json(tmp_path / "b.json").read_bytes()
    assert (tmp_path / "a.samples.npz").read_bytes() == (tmp_path / "b.samples.npz").read_bytes()


def test_score_and_to_json_build_the_file_once(data, tmp_path, monkeypatch):
    # The hash ae.score records and the file to_json writes are one build of the bytes (each build writes 2 arrays).
    built = []
    real = samples_file._npy
    monkeypatch.setattr(samples_file, "_npy", lambda array: built.append(1) or real(array))
    result = ae.score(data["a"], data["split"], threshold=0.5, bootstrap=20, seed=1)
    result.to_json(tmp_path / "a.json")
    assert len(built) == 2
