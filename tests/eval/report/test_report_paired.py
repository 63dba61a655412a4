"""The report says only what the paired intervals support: the summary's best value bold only where its paired
interval against every other model excludes 0 (the issue's 0.084 vs 0.083 is not bold); the paired-differences
table with Holm's count; ties as "="; Kendall's tau only with three or more models; the n line with the number of
groups when the bootstrap is clustered; samples files found beside the JSONs."""

from __future__ import annotations

import re

import numpy as np
import pytest

import aegis_eval.api as ae
from aegis_eval.protocols.samples_file import ScoreSamples
from aegis_eval.report.latex import latex_table
from aegis_eval.report.render import markdown_table
from aegis_eval.report.results import SAMPLES_KEY, group_by_dataset, load_results
from aegis_eval.report.tables import model_summary_table, paired_table, ranking_table, sample_note
from tests.eval.protocols.paired_fixture import make_predictions, make_split

PLAN = {
    "n_bootstrap": 200,
    "seed": 0,
    "n_images": 50,
    "image_ids_sha256": "x",
    "clusters_sha256": None,
    "gt_sha256": "y",
    "resampling_unit": "image",
    "n_units": 50,
}
CONDS = ("clean", "low_light_s1", "low_light_s2")


def _run(label: str, shift: float, noise: np.ndarray, own: np.ndarray, plan: dict = PLAN) -> dict:
    """A score document whose map50 per resample is a shared image noise + the model's own + ``shift``."""
    samples = {}
    conditions = {}
    for k, c in enumerate(CONDS):
        values = 0.5 - 0.1 * k + shift + noise + own
        samples[c] = {"map50": values, "recall": values}
        point = 0.5 - 0.1 * k + shift
        conditions[c] = {"map50": point, "recall": point}
    return {
        "schema": "aegis-score/1",
        "label": label,
        "dataset": "synthetic",
        "conditions": conditions,
        SAMPLES_KEY: ScoreSamples(plan, samples),
    }


@pytest.fixture
def noise():
    rng = np.random.default_rng(7)
    return rng.normal(0, 0.08, 200), rng.normal(0, 0.002, 200), rng.normal(0, 0.002, 200)


def _bold_columns(table, row: int) -> set[int]:
    return {j for i, j in table.bold if i == row}


def test_best_is_bold_only_where_the_paired_interval_excludes_zero(noise):
    shared, own_a, own_b = noise
    # 0.03 apart under a shared image noise of 0.08: the separate intervals overlap, the paired ones exclude 0
    clear = group_by_dataset([_run("a", 0.03, shared, own_a), _run("b", 0.0, shared, own_b)])[0]
    table = model_summary_table(clear, "recall")
    assert _bold_columns(table, 0) == {1, 2, 3, 4, 5, 6} and not _bold_columns(table, 1)
    tex = latex_table(table, "summary")
    assert tex.count("\\textbf{") == 6 and "\\textbf{0.530}" in tex
    md = markdown_table(table)
    assert md.count("**") == 12
    # a partial sweep: its mPC and rPC average other conditions, so only the clean columns can be bold
    partial = _run("b", 0.0, shared, own_b)
    partial["conditions"] = {c: v for c, v in partial["conditions"].items() if c != "low_light_s2"}
    table = model_summary_table(group_by_dataset([_run("a", 0.03, shared, own_a), partial])[0], "recall")
    assert _bold_columns(table, 0) == {1, 4}
    # lower is better (FP per image): the bold value is the lower one, and only when the interval says so
    fp = group_by_dataset([_run("a", 0.03, shared, own_a), _run("b", 0.0, shared, own_b)])[0]
    for run in fp.runs:
        for entry in run.result["conditions"].values():
            entry["fp_per_image"] = entry["recall"]
        for per_metric in run.result[SAMPLES_KEY].samples.values():
            per_metric["fp_per_image"] = per_metric["recall"]
    table = model_summary_table(fp, "fp_per_image")
    assert _bold_columns(table, 1) == {4, 5, 6} and _bold_columns(table, 0) == {1, 2, 3}  # map50: a; FP: b
    # equal to 3 decimals (both "best" in print) but b is surely higher: only b is bold, never both
    close = group_by_dataset([_run("a", 0.0001, shared, own_a / 100), _run("b", 0.0004, shared, own_b / 100)])[0]
    table = model_summary_table(close, "recall")
    assert _bold_columns(table, 1) >= {1, 4} and not _bold_columns(table, 0)
    # the case: a difference inside the noise is not bold, however the rounding falls
    noisy = group_by_dataset(
        [_run("a", 0.001, shared, own_a * 20), _run("b", 0.0, shared, own_b * 20)]  # model noise of 0.04
    )[0]
    assert model_summary_table(noisy, "recall").bold == frozenset()
    # without samples nothing is bold, and the note says why
    runs = (_run("a", 0.03, shared, own_a), _run("b", 0.0, shared, own_b))
    bare = [{k: v for k, v in run.items() if k != SAMPLES_KEY} for run in runs]
    unpaired = model_summary_table(group_by_dataset(bare)[0], "recall")
    assert unpaired.bold == frozenset() and any("no run has a samples file" in n for n in unpaired.notes)
    # different plans: not paired either
    other = dict(PLAN, seed=1)
    mixed = group_by_dataset([_run("a", 0.03, shared, own_a), _run("b", 0.0, shared, own_b, other)])[0]
    table = model_summary_table(mixed, "recall")
    assert table.bold == frozenset() and any("different resampling plans" in n for n in table.notes)


def test_paired_table_bolds_cells_excluding_zero_and_counts_holm(noise):
    shared, own_a, own_b = noise
    group = group_by_dataset([_run("a", 0.03, shared, own_a), _run("b", 0.0, shared, own_b)])[0]
    table = paired_table(group, "recall")
    assert table is not None and table.header == ("", "a − b")
    labels = [r[0] for r in table.rows]
    assert labels[:3] == list(CONDS) and "mPC recall" in labels and "rPC recall" in labels
    assert any(label.startswith("storm: mean drop") for label in labels)
    for i, row in enumerate(table.rows[:3]):
        assert row[1].startswith("+0.030 [+0.02") and (i, 1) in table.bold
    note = next(n for n in table.notes if n.startswith("Multiplicity"))
    assert re.search(r"(\d+) of (\d+) cells have an interval excluding 0; after Holm's adjustment", note)
    assert paired_table(group_by_dataset([_run("a", 0.0, shared, own_a)])[0], "recall") is None


def test_ranking_table_ties_and_tau_only_with_three_models(noise):
    shared, own_a, own_b = noise
    two = group_by_dataset([_run("a", 0.0, shared, own_a), _run("b", 0.0, shared, own_b)])[0]
    table = ranking_table(two, "recall")
    assert table is not None and "Kendall τ-b" not in table.header
    assert all(row[-1] == "a = b" for row in table.rows)  # equal values: "=", not "a > b"
    assert any("three" in n or "3 or more" in n for n in table.notes)
    three = group_by_dataset(
        [_run("a", 0.0, shared, own_a), _run("b", 0.01, shared, own_b), _run("c", 0.02, shared, own_b)]
    )[0]
    table = ranking_table(three, "recall")
    assert table is not None and table.header[2] == "Kendall τ-b" and table.rows[0][-1] == "c > b > a"


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = tmp_path_factory.mktemp("report_paired")
    split = make_split(root)
    paths = []
    for name, seed in (("a", 2), ("b", 7)):
        folder = make_predictions(root, split, name, seed)
        result = ae.score(folder, split, threshold=0.5, bootstrap=30, seed=1, label=name, cluster_by="group")
        paths.append(result.to_json(root / f"{name}.json"))
    return paths


def test_samples_files_are_read_beside_the_jsons_and_the_n_line_counts_groups(written):
    results = load_results(written)
    assert all(isinstance(r[SAMPLES_KEY], ScoreSamples) for r in results)
    group = group_by_dataset(results)[0]
    note = sample_note(group)
    assert "24 images in 6 groups" in note and "resamples of 6 groups of images (clustered" in note
    table = paired_table(group, "recall")
    assert table is not None and not any(n.startswith("Paired intervals:") for n in table.notes)
    assert re.search(r"\[[+-]\d\.\d{3}, [+-]\d\.\d{3}\]", table.rows[0][1])
    # a samples file moved away: the report still builds, unpaired
    (written[1].parent / "b.samples.npz").rename(written[1].parent / "b.moved")
    try:
        group = group_by_dataset(load_results(written))[0]
        table = paired_table(group, "recall")
        assert table is not None and any("b: no samples file" in n for n in table.notes)
        assert table.bold == frozenset()
    finally:
        (written[1].parent / "b.moved").rename(written[1].parent / "b.samples.npz")
