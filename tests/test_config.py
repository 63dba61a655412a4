import hashlib
from pathlib import Path

import pytest

from aegis_data.config import SEVERITIES, condition_id, load_config, parse_condition
from aegis_data.errors import AegisError

ROOT = Path(__file__).resolve().parent.parent


def test_config_matches_spec_shape():
    cfg = load_config()
    assert cfg.seed == 20260707
    assert len(cfg.names) == 9
    assert {f: set(m) for f, m in cfg.families.items()} == {
        "flood": {"water_glare", "turbidity_cast", "inundation"},
        "wildfire": {"smoke_haze", "fire_warm_tint"},
        "storm": {"rain_streaks", "motion_blur", "low_light"},
        "earthquake": {"dust_haze"},
    }
    assert all(cfg.corruptions[n].family in cfg.families for n in cfg.names)
    conds = cfg.conditions()
    assert len(conds) == 28 and conds[0] == "clean" and conds[1] == "water_glare_s1"
    assert cfg.corruptions["low_light"].params(3)["gain"] == 0.045
    assert cfg.corruptions["smoke_haze"].params(1)["airlight"] == (0.78, 0.78, 0.80)


def test_config_hash_is_the_file_sha256_prefix():
    data = (ROOT / "configs" / "corruptions.yaml").read_bytes()
    assert load_config().config_hash == hashlib.sha256(data).hexdigest()[:12]


def test_packaged_copy_is_the_same_bytes():
    # Wheels carry aegis_data/corruptions.yaml; in the checkout it must be the very same file.
    packaged = ROOT / "aegis_data" / "corruptions.yaml"
    assert packaged.read_bytes() == (ROOT / "configs" / "corruptions.yaml").read_bytes()


def test_condition_ids_round_trip():
    for sev in SEVERITIES:
        assert parse_condition(condition_id("low_light", sev)) == ("low_light", sev)
    assert parse_condition("clean") == (None, 0)
    with pytest.raises(AegisError, match="not a condition id"):
        parse_condition("low_light")


def test_bad_severity_and_bad_file(tmp_path):
    with pytest.raises(AegisError, match="severity"):
        load_config().corruptions["low_light"].params(4)
    bad = tmp_path / "c.yaml"
    bad.write_text("seed: [1\n")
    with pytest.raises(AegisError, match="YAML"):
        load_config(bad)
    bad.write_text("seed: 1\ncorruptions: {}\n")
    with pytest.raises(AegisError, match="families must be a mapping"):
        load_config(bad)
