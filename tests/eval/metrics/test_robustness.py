"""Relative drops, per-corruption / per-family means, mPC and rPC on a hand-computed example."""

from __future__ import annotations

import pytest

from aegis_data.engine.config import load_config
from aegis_eval.metrics.robustness import defined, relative_drop, relative_drops, summarize_robustness


def test_relative_drop_and_undefined_cases():
    assert relative_drop(0.8, 0.6) == pytest.approx(0.25)
    assert relative_drop(0.8, 0.8) == 0.0
    assert relative_drop(1.0, 1.5) == pytest.approx(-0.5)  # worse FP/img -> negative drop
    assert relative_drop(0.0, 0.3) is None  # clean 0
    assert relative_drop(None, 0.3) is None and relative_drop(0.5, None) is None
    assert relative_drop(float("nan"), 0.3) is None
    assert relative_drop(-1.0, 0.3) is None and relative_drop(0.4, -1.0) is None  # COCO "no GT" sentinel
    assert defined(-1.0) is None and defined(0.25) == 0.25


def example():
    return {
        "clean": {"recall": 0.8, "fp_per_image": 1.0, "map50": 0.5, "map_large": -1.0},
        "low_light_s1": {"recall": 0.6, "fp_per_image": 1.5, "map50": 0.4, "map_large": -1.0},
        "low_light_s2": {"recall": 0.4, "fp_per_image": 2.0, "map50": 0.25, "map_large": -1.0},
        "low_light_s3": {"recall": 0.2, "fp_per_image": 3.0, "map50": 0.1, "map_large": -1.0},
        "motion_blur_s1": {"recall": 0.8, "fp_per_image": 1.0, "map50": 0.5, "map_large": -1.0},
        "smoke_haze_s2": {"recall": 0.72, "fp_per_image": 1.2, "map50": None, "map_large": -1.0},
        "mystery": {"recall": 0.0, "fp_per_image": 9.0, "map50": 0.0, "map_large": -1.0},  # not a condition id
    }


def test_summary_on_hand_computed_example():
    s = summarize_robustness(example(), metrics=("recall", "fp_per_image", "map50", "map_large"))
    assert s["clean"] == {"recall": 0.8, "fp_per_image": 1.0, "map50": 0.5, "map_large": None}
    # mPC over the 5 corrupted conditions (the non-condition 'mystery' is left out).
    assert s["mpc"]["recall"] == pytest.approx((0.6 + 0.4 + 0.2 + 0.8 + 0.72) / 5)
    assert s["rpc"]["recall"] == pytest.approx(0.544 / 0.8)
    assert s["mean_rel_drop"]["recall"] == pytest.approx((0.25 + 0.5 + 0.75 + 0.0 + 0.1) / 5)
    assert s["per_corruption"]["low_light"]["recall"] == pytest.approx(0.5)
    assert s["per_corruption"]["motion_blur"]["recall"] == 0.0
    assert s["per_family"]["storm"]["recall"] == pytest.approx((0.25 + 0.5 + 0.75 + 0.0) / 4)
    assert s["per_family"]["wildfire"]["recall"] == pytest.approx(0.1)
    assert set(s["per_family"]) == {"storm", "wildfire"}
    # FP per image: (1 - 1.5)/1, (1 - 2)/1, (1 - 3)/1; a drop of exactly -1 is a value, not COCO's sentinel
    assert s["per_corruption"]["low_light"]["fp_per_image"] == pytest.approx((-0.5 - 1.0 - 2.0) / 3)
    # undefined values are skipped, and all-undefined gives None
    assert s["mpc"]["map50"] == pytest.approx((0.4 + 0.25 + 0.1 + 0.5) / 4)
    assert s["per_corruption"]["smoke_haze"]["map50"] is None
    assert s["mpc"]["map_large"] is None and s["rpc"]["map_large"] is None
    assert s["n_conditions"] == 7
    canonical = load_config().conditions()
    assert s["missing_conditions"] == [
        c
        for c in canonical
        if c not in ("clean", "low_light_s1", "low_light_s2", "low_light_s3", "motion_blur_s1", "smoke_haze_s2")
    ]
    assert len(s["missing_conditions"]) == 22


def test_relative_drops_for_a_condition():
    d = relative_drops(example()["clean"], example()["low_light_s2"], ("recall", "map_large", "absent"))
    assert d["recall"] == pytest.approx(0.5) and d["map_large"] is None and d["absent"] is None


def test_summary_without_clean_has_no_drops():
    conds = {k: v for k, v in example().items() if k != "clean"}
    s = summarize_robustness(conds, metrics=("recall",))
    assert s["mpc"]["recall"] == pytest.approx(0.544)
    assert s["rpc"]["recall"] is None and s["mean_rel_drop"]["recall"] is None
    assert "clean" in s["missing_conditions"]


def test_full_sweep_has_no_missing_conditions_and_all_families():
    conds = {c: {"recall": 0.5} for c in load_config().conditions()}
    conds["clean"] = {"recall": 1.0}
    s = summarize_robustness(conds, metrics=("recall",))
    assert s["missing_conditions"] == [] and s["n_conditions"] == 28
    assert set(s["per_family"]) == {"flood", "wildfire", "storm", "earthquake"}
    assert all(v["recall"] == 0.5 for v in s["per_corruption"].values())
    assert s["rpc"]["recall"] == 0.5
