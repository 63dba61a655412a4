"""`aegis rank`: fractional ranks, Kendall tau-b against a brute-force pair count (with ties and repeated
models), the model bootstrap, rank flips, cross-version columns, the CLI and the report table."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.errors import AegisError
from aegis_eval.metrics.bootstrap import BootstrapOptions
from aegis_eval.protocols.ranking import fractional_ranks, kendall_tau_b, rank_models, rank_paths
from tests.conftest import assert_one_line_error


def brute_force_tau_b(x: list[float], y: list[float]) -> float:
    """tau-b from an explicit loop over all pairs of the (possibly repeated) sample."""
    concordant = discordant = tied_x = tied_y = 0
    for (x1, y1), (x2, y2) in itertools.combinations(zip(x, y), 2):
        dx, dy = x1 - x2, y1 - y2
        if dx == 0:
            tied_x += 1
        if dy == 0:
            tied_y += 1
        if dx * dy > 0:
            concordant += 1
        elif dx * dy < 0:
            discordant += 1
    n0 = len(x) * (len(x) - 1) / 2
    return (concordant - discordant) / math.sqrt((n0 - tied_x) * (n0 - tied_y))


@pytest.mark.parametrize("seed", range(12))
def test_kendall_tau_b_equals_a_brute_force_pair_count(seed):
    rng = np.random.default_rng([seed, 5])
    n = int(rng.integers(3, 12))
    x = rng.integers(0, 5, n).astype(float)  # few levels: many ties
    y = rng.integers(0, 5, n).astype(float)
    if len(set(x)) < 2 or len(set(y)) < 2:
        x[0], y[0] = 10.0, 10.0
    assert kendall_tau_b(x, y) == pytest.approx(brute_force_tau_b(list(x), list(y)), abs=1e-12)
    mult = rng.integers(0, 4, n)
    mult[0] = max(mult[0], 1)
    mult[1] = max(mult[1], 1)
    expanded_x = [v for v, m in zip(x, mult) for _ in range(m)]
    expanded_y = [v for v, m in zip(y, mult) for _ in range(m)]
    if len(set(expanded_x)) > 1 and len(set(expanded_y)) > 1:
        assert kendall_tau_b(x, y, mult) == pytest.approx(brute_force_tau_b(expanded_x, expanded_y), abs=1e-12)


def test_tau_of_identical_and_reversed_orders_and_ties():
    assert kendall_tau_b([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert kendall_tau_b([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(kendall_tau_b([1, 1, 1], [1, 2, 3]))
    assert fractional_ranks([0.9, 0.5, 0.9, 0.1], lower_is_better=False) == [1.5, 3.0, 1.5, 4.0]
    assert fractional_ranks([0.9, 0.5, 0.1], lower_is_better=True) == [3.0, 2.0, 1.0]


def score(label: str, values: dict[str, float | None], metric: str = "map50") -> dict:
    return {"schema": "aegis-score/1", "label": label, "conditions": {c: {metric: v} for c, v in values.items()}}


MODELS = [
    score("a", {"clean": 0.9, "fog_s1": 0.5, "rain_s1": 0.8}),
    score("b", {"clean": 0.8, "fog_s1": 0.6, "rain_s1": 0.7}),
    score("c", {"clean": 0.7, "fog_s1": 0.7, "rain_s1": 0.6}),
    score("d", {"clean": 0.6, "fog_s1": None, "rain_s1": 0.5}),
]


def test_rankings_taus_and_flips():
    doc = rank_models(MODELS, "map50", bootstrap=BootstrapOptions(n_bootstrap=200, seed=1))
    assert doc["reference"] == "clean" and doc["models"] == ["a", "b", "c", "d"]
    assert doc["ranks"]["clean"] == {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}
    assert doc["ranks"]["fog_s1"] == {"c": 1.0, "b": 2.0, "a": 3.0}  # d undefined: left out
    assert doc["kendall_tau"]["clean"]["tau"] == pytest.approx(1.0)
    assert doc["kendall_tau"]["rain_s1"]["tau"] == pytest.approx(1.0)
    fog = doc["kendall_tau"]["fog_s1"]
    assert fog["tau"] == pytest.approx(-1.0) and fog["n_models"] == 3
    assert sorted(doc["rank_flips"]["fog_s1"]) == [["a", "b"], ["a", "c"], ["b", "c"]]
    assert doc["rank_flips"]["rain_s1"] == []
    lo, hi = fog["ci"]
    assert lo == pytest.approx(-1.0) and hi == pytest.approx(-1.0)  # any resample of a reversed order
    assert doc == rank_models(MODELS, "map50", bootstrap=BootstrapOptions(n_bootstrap=200, seed=1))


def test_lower_is_better_metrics_rank_ascending():
    models = [
        score("a", {"clean": 0.1, "fog_s1": 2.0}, "fp_per_image"),
        score("b", {"clean": 0.5, "fog_s1": 1.0}, "fp_per_image"),
    ]
    doc = rank_models(models, "fp_per_image", bootstrap=BootstrapOptions(n_bootstrap=1))
    assert doc["ranks"]["clean"] == {"a": 1.0, "b": 2.0}
    # two models: the flip is reported, Kendall's tau (+-1 by construction) is not
    assert doc["rank_flips"]["fog_s1"] == [["a", "b"]] and doc["kendall_tau"]["fog_s1"]["tau"] is None


def test_version_columns():
    def with_versions(label, v1, v2):
        return {
            "schema": "aegis-score/1",
            "label": label,
            "conditions": {"clean": {"map50": v1}},
            "versions": {"reference": "v1", "matrix": {"clean": {"v1": {"map50": v1}, "v2": {"map50": v2}}}},
        }

    doc = rank_models(
        [with_versions("a", 0.4, 0.9), with_versions("b", 0.5, 0.8), with_versions("c", 0.3, 0.7)],
        by="version",
        bootstrap=BootstrapOptions(n_bootstrap=1),
    )
    assert doc["reference"] == "v1" and doc["ranks"]["v2"] == {"a": 1.0, "b": 2.0, "c": 3.0}
    assert doc["kendall_tau"]["v2"]["tau"] == pytest.approx(1 / 3)
    # GT-version columns carry no per-model samples: every pair unpaired, nothing tested
    paired = doc["paired"]
    assert paired["status"] == "unpaired" and paired["n_tests"] == 0
    assert all(e["mpc"] is None and e["conditions"] == {} for e in paired["pairs"].values())
    assert "GT-version" in paired["pairs"]["a - b"]["reason"]
    with pytest.raises(AegisError, match=r"^\[rank_no_versions\]"):
        rank_models(MODELS, by="version")


@pytest.mark.parametrize(
    "kwargs, code",
    [
        ({"metric": "speed"}, "rank_metric"),
        ({"by": "domain"}, "rank_axis"),
        ({"reference": "snow_s9"}, "rank_no_reference"),
    ],
)
def test_rank_refusals(kwargs, code):
    with pytest.raises(AegisError, match=rf"^\[{code}\]"):
        rank_models(MODELS, **kwargs)
    with pytest.raises(AegisError, match=r"^\[rank_too_few\]"):
        rank_models(MODELS[:1])


def test_cli_rank_and_repeated_labels(tmp_path):
    paths = []
    for k, m in enumerate(MODELS):
        p = tmp_path / f"m{k}.json"
        p.write_text(json.dumps({**m, "label": "same" if k < 2 else m["label"]}))
        paths.append(p)
    doc = rank_paths(paths, bootstrap=10)
    assert doc["models"][:2] == ["same#1", "same#2"] and doc["files"]["c"] == [str(paths[2])]
    runner = CliRunner()
    out = tmp_path / "rank.json"
    res = runner.invoke(app, ["rank", *map(str, paths), "--bootstrap", "20", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "Kendall" in res.output and json.loads(out.read_text())["schema"] == "aegis-rank/1"
    from aegis_eval.report.tables import fmt_tau, rank_order  # the report's ranking table writes the same cells

    written = json.loads(out.read_text())
    for col, ranks in written["ranks"].items():
        line = next(line for line in res.output.splitlines() if line.lstrip("│ ").startswith(col + " "))
        assert fmt_tau(written["kendall_tau"][col], undefined="–") in line and rank_order(ranks) in line, line
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert_one_line_error(runner.invoke(app, ["rank", str(paths[0]), str(bad)]), "[score_schema]")
    assert_one_line_error(runner.invoke(app, ["rank", str(paths[0])]), "[rank_too_few]")


def test_report_has_a_ranking_table_with_several_models():
    from aegis_eval.report.results import group_by_dataset
    from aegis_eval.report.tables import ranking_table

    def full(label: str, clean: float, fog: float) -> dict:
        entry = {"recall": clean, "map50": clean}
        return {
            "schema": "aegis-score/1",
            "label": label,
            "dataset": "synthetic",
            "conditions": {"clean": entry, "smoke_haze_s1": {"recall": fog, "map50": fog}},
        }

    groups = group_by_dataset([full("a", 0.9, 0.3), full("b", 0.8, 0.5), full("c", 0.7, 0.7)])
    table = ranking_table(groups[0], "recall")
    assert table is not None and table.header[2] == "Kendall τ-b"
    rows = {r[0]: r for r in table.rows}
    assert rows["clean"][2].startswith("+1.00") and rows["smoke_haze_s1"][2].startswith("-1.00")
    assert rows["smoke_haze_s1"][3] == "3" and rows["smoke_haze_s1"][4] == "c > b > a"
    assert ranking_table(group_by_dataset([full("a", 0.9, 0.3)])[0], "recall") is None


def test_domains_scored_separately_merge_by_label(tmp_path):
    # SULAND-style: every model scored on an IID and an OOD test set in two runs (conditions named by file stem)
    paths = []
    for label, iid, ood in (("a", 0.9, 0.2), ("b", 0.8, 0.4), ("c", 0.7, 0.6)):
        for domain, value in (("iid", iid), ("ood", ood)):
            p = tmp_path / f"{label}_{domain}.json"
            p.write_text(json.dumps(score(label, {domain: value})))
            paths.append(p)
    doc = rank_paths(paths, reference="iid", bootstrap=1, merge_same_label=True)
    assert doc["models"] == ["a", "b", "c"] and doc["files"]["a"] == [str(paths[0]), str(paths[1])]
    assert doc["kendall_tau"]["ood"]["tau"] == pytest.approx(-1.0) and len(doc["rank_flips"]["ood"]) == 3
    with pytest.raises(AegisError, match=r"^\[rank_duplicate_condition\]"):
        rank_paths([paths[0], paths[0], paths[2]], merge_same_label=True)
