"""`aegis score --json` writes the samples file; `aegis rank` prints ties as "=", Kendall's tau only with three or
more models, the paired differences with the Holm line, refuses differing plans in one line naming --no-paired, and
says "unpaired" without samples."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from aegis_cli.main import app
from tests.conftest import assert_one_line_error
from tests.eval.protocols.paired_fixture import make_predictions, make_split


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli_paired")
    split = make_split(root)
    runner = CliRunner()
    out = {}
    for name, seed, extra in (("a", 2, []), ("b", 7, []), ("c", 11, []), ("bseed", 7, ["--seed", "9"])):
        folder = make_predictions(root, split, name, seed)
        path = root / f"{name}.json"
        args = ["score", str(folder), "--split-dir", str(split), "--threshold", "0.5", "--bootstrap", "30"]
        res = runner.invoke(app, [*args, "--label", name, "--json", str(path), *extra])
        assert res.exit_code == 0, res.output
        out[name] = (path, res.output)
    return root, out


def test_score_writes_and_names_the_samples_file(files):
    root, out = files
    path, output = out["a"]
    assert (root / "a.samples.npz").is_file() and f"wrote {root / 'a.samples.npz'}" in output.replace("\n", "")
    assert "samples_sha256" in json.loads(path.read_text())["provenance"]


def test_rank_prints_paired_differences_and_no_tau_for_two_models(files, tmp_path):
    root, out = files
    rank_json = tmp_path / "rank.json"
    args = ["rank", str(out["a"][0]), str(out["b"][0]), "--metric", "recall", "--json", str(rank_json)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "Kendall" not in res.output and "paired differences A − B of recall" in res.output
    assert re.search(r"\d+ of \d+ paired intervals exclude 0; \d+ remain after Holm's adjustment", res.output)
    # the fixture split holds 24 images in 6 groups of 4, which scoring resamples by default
    assert "n: B = 30 paired resamples of 6 groups of images (clustered)" in res.output
    doc = json.loads(rank_json.read_text())
    cell = doc["paired"]["pairs"]["a - b"]["conditions"]["clean"]
    assert f"[{cell['ci'][0]:+.3f}, {cell['ci'][1]:+.3f}]" in res.output
    three = CliRunner().invoke(app, ["rank", *(str(out[n][0]) for n in ("a", "b", "c")), "--metric", "recall"])
    assert three.exit_code == 0 and "Kendall" in three.output


def test_rank_prints_ties_with_equals(files):
    root, out = files
    res = CliRunner().invoke(app, ["rank", str(out["a"][0]), str(out["a"][0]), "--metric", "recall"])
    assert res.exit_code == 0, res.output
    assert "a#1 = a#2" in res.output and "a#1 > a#2" not in res.output


def test_rank_refuses_differing_plans_and_no_paired_ranks_anyway(files):
    root, out = files
    res = CliRunner().invoke(app, ["rank", str(out["a"][0]), str(out["bseed"][0])])
    assert_one_line_error(res, "[rank_unpaired_plans]", "--no-paired", "--seed")
    res = CliRunner().invoke(app, ["rank", str(out["a"][0]), str(out["bseed"][0]), "--no-paired"])
    assert res.exit_code == 0, res.output
    assert "paired differences: unpaired" in res.output
