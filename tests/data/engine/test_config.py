import hashlib
import math

import pytest

from aegis_data.conditions import SEVERITIES, condition_id, parse_condition
from aegis_data.engine.config import load_config
from aegis_data.errors import AegisError
from tests import REPO_ROOT

ROOT = REPO_ROOT
SUITES = ROOT / "configs" / "suites"
# aegis-v1 is frozen forever (its values, hash and bytes are checked here); aegis-v2 is the default of new builds.
V1 = load_config("aegis-v1")


def test_config_matches_spec_shape():
    cfg = V1
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
    # The default suite keeps the conditions (names, families, order, seed): scores stay comparable by condition.
    v2 = load_config()
    assert v2.suite == "aegis-v2" and v2.generation == 2 and cfg.generation == 1
    assert (v2.names, dict(v2.families), v2.seed, v2.conditions()) == (cfg.names, dict(cfg.families), cfg.seed, conds)


def test_the_shipped_suites_are_the_files_of_configs_suites():
    from aegis_data.engine.config import DEFAULT_SUITE, SUITE_NAMES, installed_suites, suite_path

    assert sorted(p.stem for p in SUITES.glob("*.yaml")) == sorted(SUITE_NAMES) and DEFAULT_SUITE == "aegis-v2"
    for name in SUITE_NAMES:
        cfg = load_config(name)
        assert cfg.suite == name and suite_path(name).resolve() == (SUITES / f"{name}.yaml").resolve()
        assert cfg.raw == (SUITES / f"{name}.yaml").read_bytes()
    assert load_config() is load_config("aegis-v2") and [s.suite for s in installed_suites()] == [
        "aegis-v2",
        "aegis-v1",
    ]


def test_config_hash_is_the_canonical_content_sha256_prefix():
    import json

    from aegis_data.engine.config import canonical_suite_bytes

    cfg = V1
    data = (SUITES / "aegis-v1.yaml").read_bytes()
    canonical = canonical_suite_bytes(
        cfg.suite, cfg.seed, cfg.families, cfg.corruptions, cfg.calibration_threshold, cfg.scale
    )
    assert cfg.config_hash == hashlib.sha256(canonical).hexdigest()[:12]
    assert cfg.config_hash == "939fc3c23420"  # the shipped aegis-v1 suite (docs/REPRODUCIBILITY.md): pinned
    assert cfg.bytes_hash == hashlib.sha256(data).hexdigest()[:12]  # the identity before 0.3, still accepted
    doc = json.loads(canonical)
    assert doc["corruption_order"][0] == "water_glare" and doc["seed"] == 20260707
    assert doc["corruptions"]["motion_blur"]["severities"]["length_px"] == [9.0, 17.0, 25.0]  # numbers as floats


def test_packaged_copy_is_the_same_bytes():
    # Wheels carry aegis_data/suites/*.yaml; in the checkout that folder is a symlink to configs/suites.
    packaged = ROOT / "aegis_data" / "suites"
    assert packaged.is_symlink() and packaged.resolve() == SUITES.resolve()
    for path in SUITES.glob("*.yaml"):
        assert (packaged / path.name).read_bytes() == path.read_bytes()


def test_the_wheel_carries_every_shipped_suite_and_policy():
    """pyproject's package-data globs (setuptools: relative to the package, '*' never crosses a '/') must match
    every file of the packaged folders: an installed wheel without its suites cannot even import the engine."""
    import glob

    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    package = ROOT / "aegis_data"
    shipped = {
        str(p.relative_to(package))
        for folder in ("suites", "augment_policies")
        for p in (package / folder).glob("*.yaml")
    }
    assert any(name.startswith("suites/") for name in shipped)
    matched = {
        m for pattern in [*data.get("*", []), *data.get("aegis_data", [])] for m in glob.glob(pattern, root_dir=package)
    }
    assert shipped <= matched, sorted(shipped - matched)


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


# --- identity by content ------------------------------------------------------------------------------------
def test_the_config_hash_covers_content_not_bytes(tmp_path):
    from aegis_data.engine.config import config_bytes_hash, config_from_bytes, load_config

    base = load_config("aegis-v1")  # frozen: its text is what the edits below look for
    data = base.raw
    reformatted = b"# a comment a user added\n" + data.replace(
        b"bloom_sigma_px: [8, 12, 16]", b"bloom_sigma_px: [8.0, 12.00, 16.0]  # same"
    )
    assert reformatted != data and b"[8.0, 12.00, 16.0]" in reformatted
    same = config_from_bytes(reformatted, "reformatted.yaml")
    assert same.config_hash == base.config_hash and same.bytes_hash != base.bytes_hash
    assert base.bytes_hash == config_bytes_hash(data)
    changed = config_from_bytes(data.replace(b"bloom_sigma_px: [8, 12, 16]", b"bloom_sigma_px: [8, 12, 17]"), "c")
    assert changed.config_hash != base.config_hash
    # The order of the corruptions is the order of the conditions: it is part of the identity.
    swapped = data.replace(b"suite: aegis-v1", b"suite: aegis-v1")  # unchanged text, then a real reorder below
    head, rest = swapped.split(b"corruptions:\n", 1)
    first, second = rest.split(b"  turbidity_cast:\n", 1)
    reordered = config_from_bytes(
        head
        + b"corruptions:\n  turbidity_cast:\n"
        + second.split(b"  inundation:\n", 1)[0]
        + first
        + b"  inundation:\n"
        + second.split(b"  inundation:\n", 1)[1],
        "r",
    )
    assert reordered.names[:2] == ("turbidity_cast", "water_glare") and reordered.config_hash != base.config_hash


def test_a_split_recorded_with_the_byte_hash_still_resolves(tmp_path):
    from aegis_data.engine.config import load_config, split_config
    from aegis_data.files.layout import SUITE_CONFIG_NAME

    base = load_config()
    (tmp_path / SUITE_CONFIG_NAME).write_bytes(base.raw)
    assert split_config(tmp_path, base.bytes_hash).config_hash == base.config_hash  # built by aegisbench 0.2
    assert split_config(tmp_path, base.config_hash).config_hash == base.config_hash
    with pytest.raises(AegisError, match="the file was changed"):
        split_config(tmp_path, "0123456789ab")
    (tmp_path / SUITE_CONFIG_NAME).unlink()
    assert split_config(tmp_path, base.bytes_hash) is base  # no copy: the installed suite, by either hash


@pytest.mark.parametrize(
    "old, new, match",
    [
        (
            b"bloom_sigma_px: [8, 12, 16]",
            b"bloom_sigma_px: [8, 12, 1" + b"0" * 400 + b"]",
            r"bloom_sigma_px\[s3\] must be",
        ),
        (b"saturated_luma: 0.94", b"saturated_luma: 9" + b"9" * 399, "calibration_threshold.saturated_luma must be"),
        (
            b"suite: aegis-v1",
            b"suite: aegis-v1\nscale: {mode: object, person_px: 1" + b"0" * 400 + b"}",
            r"scale.person_px must lie in \[4, 2000\]",
        ),
        (
            b"suite: aegis-v1",
            b"suite: aegis-v1\nscale: {mode: object, gsd_cm_per_px: 1" + b"0" * 400 + b"}",
            "must lie in",
        ),
        (b"  wildfire: [smoke_haze", b"  1: [smoke_haze", "family names must be non-empty strings, got 1"),
        (b"  wildfire: [smoke_haze", b"  '': [smoke_haze", "family names must be non-empty strings"),
        # _parse reads these blocks without guards of its own: the schema must refuse them first.
        (b"bloom_sigma_px: [8, 12, 16]", b"bloom_sigma_px: [8, 12]", r"bloom_sigma_px must list 3 values"),
        (b"bloom_sigma_px: [8, 12, 16]", b"bloom_sigma_px: 8", r"bloom_sigma_px must list 3 values"),
        (b"  flood: [water_glare, turbidity_cast, inundation]", b"  flood: water_glare", "family 'flood' must list"),
        (b"  flood: [water_glare, turbidity_cast, inundation]", b"  flood: {a: 1}", "family 'flood' must list"),
        (b"    family: flood\n", b"", r"water_glare.family must be a non-empty string, got None"),
    ],
)
def test_malformed_suite_configs_are_one_line_refusals(old, new, match):
    from aegis_data.engine.config import config_from_bytes

    data = V1.raw
    assert old in data
    with pytest.raises(AegisError, match=match) as err:
        config_from_bytes(data.replace(old, new, 1), "big.yaml")
    assert "\n" not in str(err.value) and len(str(err.value)) < 300


def test_a_streak_count_is_the_aegis_v1_expression_under_frame_scale():
    from aegis_data.engine.corruptions import corruption_params, rain_streak_count

    for sev in (1, 2, 3):
        p = corruption_params("rain_streaks", sev, V1)
        for h, w in ((3000, 4000), (1080, 1920), (37, 53), (640, 640)):
            assert rain_streak_count(p, h, w) == int(math.floor(p.density_per_mp * h * w / 1e6 + 0.5))
