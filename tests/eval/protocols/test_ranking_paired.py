"""`aegis rank` / `ae.rank` paired differences: per condition, mPC, rPC and family, from the samples files; the
same resamples as the scores (checked against the samples themselves); clustered plans; refusals of differing plans;
"unpaired" without samples; ties as "=" (the 0.0 vs 0.0 case); Kendall's tau only with three or more models."""

from __future__ import annotations

import json

import numpy as np
import pytest

import aegis_eval.api as ae
from aegis_data.errors import AegisError
from aegis_eval.metrics.bootstrap import percentile_interval
from aegis_eval.metrics.robustness import summary_samples
from aegis_eval.protocols.ranking import rank_models, tied_order
from tests.eval.protocols.paired_fixture import CONDITIONS, make_predictions, make_split


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    root = tmp_path_factory.mktemp("paired")
    split = make_split(root)
    preds = {name: make_predictions(root, split, name, seed) for name, seed in (("a", 2), ("b", 7), ("c", 11))}
    out = {}
    for name, folder in preds.items():
        result = ae.score(folder, split, threshold=0.5, bootstrap=50, seed=3, label=name, cluster_by="none")
        out[name] = result
        result.to_json(root / f"{name}.json")
    grouped = ae.score(preds["b"], split, threshold=0.5, bootstrap=50, seed=3, label="bg", cluster_by="group")
    grouped.to_json(root / "bg.json")
    grouped_a = ae.score(preds["a"], split, threshold=0.5, bootstrap=50, seed=3, label="ag", cluster_by="group")
    grouped_a.to_json(root / "ag.json")
    return {"root": root, "split": split, "preds": preds, "results": out}


def test_paired_intervals_are_percentiles_of_the_per_resample_differences(scored):
    root = scored["root"]
    doc = ae.rank([root / "a.json", root / "b.json"], "recall")
    block = doc["paired"]
    assert block["status"] == "paired" and block["difference"] == "a - b"
    pair = block["pairs"]["a - b"]
    assert pair["status"] == "paired" and pair["resampling_unit"] == "image" and pair["n_units"] == 24
    sa, sb = scored["results"]["a"].samples.samples, scored["results"]["b"].samples.samples
    for cond in CONDITIONS:
        cell = pair["conditions"][cond]
        diff = sa[cond]["recall"] - sb[cond]["recall"]
        assert cell["ci"] == list(percentile_interval(diff))
        assert cell["value"] == pytest.approx(doc["values"][cond]["a"] - doc["values"][cond]["b"])
        assert cell["excludes_zero"] == (cell["ci"][0] > 0 or cell["ci"][1] < 0)
    ra, rb = summary_samples(sa), summary_samples(sb)
    assert pair["mpc"]["ci"] == list(percentile_interval(ra["mpc"]["recall"] - rb["mpc"]["recall"]))
    assert pair["rpc"]["ci"] == list(percentile_interval(ra["rpc"]["recall"] - rb["rpc"]["recall"]))
    fam = ra["per_family"]["storm"]["recall"] - rb["per_family"]["storm"]["recall"]
    assert pair["per_family"]["storm"]["ci"] == list(percentile_interval(fam))
    assert set(pair["per_family"]) == {"storm", "wildfire"}
    n_cells = len(CONDITIONS) + 2 + 2
    assert block["n_tests"] == n_cells and block["correction"] == "holm"
    assert all("p_holm" in c for c in pair["conditions"].values())
    # in memory: ScoreResults carry the same samples, so ae.rank gives the same block
    in_memory = ae.rank([scored["results"]["a"], scored["results"]["b"]], "recall")
    assert in_memory["paired"] == block


def test_a_model_against_itself_differs_by_exactly_zero(scored):
    root = scored["root"]
    doc = ae.rank([root / "a.json", root / "a.json"], "map50")
    pair = doc["paired"]["pairs"]["a#1 - a#2"]
    for cell in pair["conditions"].values():
        assert cell["value"] == 0.0 and cell["ci"] == [0.0, 0.0] and cell["excludes_zero"] is False
        assert cell["p"] == 1.0
    assert doc["order"]["clean"] == "a#1 = a#2"  # a tie, never "a#1 > a#2"


def test_clustered_scores_pair_whole_groups(scored):
    root = scored["root"]
    doc = ae.rank([root / "ag.json", root / "bg.json"], "recall")
    pair = doc["paired"]["pairs"]["ag - bg"]
    assert pair["status"] == "paired" and pair["resampling_unit"] == "cluster" and pair["n_units"] == 6
    image_level = ae.rank([root / "a.json", root / "b.json"], "recall")["paired"]["pairs"]["a - b"]
    assert pair["conditions"]["clean"]["value"] == image_level["conditions"]["clean"]["value"]
    assert pair["conditions"]["clean"]["ci"] != image_level["conditions"]["clean"]["ci"]  # other resamples


@pytest.mark.parametrize("other", ["bg.json", "b_seed.json", "b_b.json"])
def test_differing_resampling_plans_are_refused(scored, other):
    root = scored["root"]
    if other == "b_seed.json":
        ae.score(scored["preds"]["b"], scored["split"], threshold=0.5, bootstrap=50, seed=4).to_json(root / other)
    if other == "b_b.json":
        ae.score(scored["preds"]["b"], scored["split"], threshold=0.5, bootstrap=40, seed=3).to_json(root / other)
    with pytest.raises(AegisError, match=r"^\[rank_unpaired_plans\].*`paired`") as info:
        ae.rank([root / "a.json", root / other], "recall")
    assert info.value.param == "paired"
    unpaired = ae.rank([root / "a.json", root / other], "recall", paired=False)
    assert unpaired["paired"]["status"] == "unpaired" and unpaired["paired"]["n_tests"] == 0


def test_without_samples_the_difference_is_unpaired(scored):
    root = scored["root"]
    doc_b = json.loads((root / "b.json").read_text())
    doc = ae.rank([root / "a.json", doc_b], "recall")  # a plain document carries no samples
    pair = doc["paired"]["pairs"]["a - b"]
    assert doc["paired"]["status"] == "unpaired" and pair["status"] == "unpaired"
    assert "'b'" in pair["reason"]
    assert pair["conditions"]["clean"]["ci"] == [None, None] and pair["conditions"]["clean"]["value"] is not None
    one = ae.score(scored["preds"]["b"], scored["split"], threshold=0.5, bootstrap=1, label="b1")
    one.to_json(root / "b1.json")
    assert ae.rank([root / "a.json", root / "b1.json"], "recall")["paired"]["status"] == "unpaired"
    # a metric without bootstrap samples (map75) has differences but no intervals
    map75 = ae.rank([root / "a.json", root / "b.json"], "map75")["paired"]["pairs"]["a - b"]
    assert map75["conditions"]["clean"]["ci"] == [None, None] and map75["conditions"]["clean"]["value"] is not None


def test_three_models_pair_every_pair_and_get_tau(scored):
    root = scored["root"]
    doc = ae.rank([root / "a.json", root / "b.json", root / "c.json"], "recall")
    assert list(doc["paired"]["pairs"]) == ["a - b", "a - c", "b - c"]
    assert doc["paired"]["n_tests"] == 3 * (len(CONDITIONS) + 4)
    assert doc["kendall_tau"]["low_light_s2"]["tau"] is not None
    two = ae.rank([root / "a.json", root / "b.json"], "recall")
    assert all(t["tau"] is None and t["ci"] == [None, None] for t in two["kendall_tau"].values())


def _doc(label: str, values: dict) -> dict:
    return {"schema": "aegis-score/1", "label": label, "conditions": {c: {"recall": v} for c, v in values.items()}}


def test_zero_against_zero_is_a_tie_in_the_order():
    # the case: both recalls 0.0 in a condition; rank.json said 1.5 / 1.5 while the text said "a > b"
    tiles = [_doc("tile640", {"clean": 0.3, "fog_s1": 0.0}), _doc("tile416", {"clean": 0.2, "fog_s1": 0.0})]
    doc = rank_models(tiles, "recall")
    assert doc["ranks"]["fog_s1"] == {"tile640": 1.5, "tile416": 1.5}
    assert doc["order"]["fog_s1"] == "tile640 = tile416" and doc["order"]["clean"] == "tile640 > tile416"
    assert tied_order({"a": 2.5, "b": 1.0, "c": 2.5, "d": 4.0}) == "b > a = c > d"


def test_merged_labels_pair_when_their_files_share_a_plan(scored, tmp_path):
    root = scored["root"]
    for name in ("a", "b"):  # one label scored in two runs of one plan (its conditions split across files)
        doc = json.loads((root / f"{name}.json").read_text())
        for part, conds in (("p1", ["clean", "low_light_s1"]), ("p2", ["low_light_s2"])):
            (tmp_path / f"{name}_{part}.json").write_text(
                json.dumps({**doc, "conditions": {c: doc["conditions"][c] for c in conds}})
            )
            (tmp_path / f"{name}_{part}.samples.npz").write_bytes((root / f"{name}.samples.npz").read_bytes())
    files = [tmp_path / f"{n}_{p}.json" for n in ("a", "b") for p in ("p1", "p2")]
    doc = ae.rank(files, "recall", merge_same_label=True)
    pair = doc["paired"]["pairs"]["a - b"]
    assert pair["status"] == "paired" and set(pair["conditions"]) == {"clean", "low_light_s1", "low_light_s2"}
    assert np.isfinite(pair["conditions"]["low_light_s2"]["ci"][0])


def test_a_partial_sweep_is_compared_on_the_conditions_both_models_have(scored, tmp_path):
    root = scored["root"]
    doc_b = json.loads((root / "b.json").read_text())
    del doc_b["conditions"]["low_light_s2"]  # b lacks one condition: mPC over the other two only
    (tmp_path / "b.json").write_text(json.dumps(doc_b))
    (tmp_path / "b.samples.npz").write_bytes((root / "b.samples.npz").read_bytes())
    doc = ae.rank([root / "a.json", tmp_path / "b.json"], "recall")
    pair = doc["paired"]["pairs"]["a - b"]
    shared = ("low_light_s1", "smoke_haze_s1")
    doc_a = json.loads((root / "a.json").read_text())
    mean_a = np.mean([doc_a["conditions"][c]["recall"] for c in shared])
    mean_b = np.mean([doc_b["conditions"][c]["recall"] for c in shared])
    assert pair["mpc"]["value"] == pytest.approx(mean_a - mean_b)
    assert pair["mpc"]["value"] != pytest.approx(doc_a["summary"]["mpc"]["recall"] - doc_b["summary"]["mpc"]["recall"])
    sa, sb = scored["results"]["a"].samples.samples, scored["results"]["b"].samples.samples
    per_resample = np.mean([sa[c]["recall"] - sb[c]["recall"] for c in shared], axis=0)
    assert pair["mpc"]["ci"] == pytest.approx(list(percentile_interval(per_resample)))
    assert "low_light_s2" not in pair["conditions"] or pair["conditions"]["low_light_s2"]["value"] is None
