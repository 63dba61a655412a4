"""Training-time disaster augmentation: key namespace disjoint from the frozen test draws by construction,
determinism per (seed, epoch, sample), variation across epochs, boxes untouched, policies as data, and the
torchvision-v2 adapter."""

from __future__ import annotations

import collections

import numpy as np
import pytest
import torch
from torchvision import tv_tensors
from torchvision.transforms import v2

from aegis_data.augment.torchvision_v2 import DisasterAugmentV2
from aegis_data.augment.transform import (
    POLICY_DIR,
    TRAIN_TAG,
    DisasterAugment,
    available_policies,
    load_policy,
    resolve_policy,
    train_key,
)
from aegis_data.engine.config import load_config
from aegis_data.engine.corruptions import CORRUPTIONS, apply_corruption
from aegis_data.engine.scale import Scale
from aegis_data.engine.seeding import SUITE_TAG, KeyedRandom, stream_key
from aegis_data.errors import AegisError


def key_namespace(key: str) -> str:
    """The namespace tag of a stream key: its first ``|``-separated field."""
    return key.split("|", 1)[0]


UNIT = Scale("object", 20.0, "test")  # aegis-v2 policies take the training frames' person unit

# Ids chosen to break a naive key format: separators, the other namespace's tag, empty strings, unicode.
HOSTILE_IDS = [
    0,
    7,
    "7",
    "",
    "|",
    "a|b",
    f"{SUITE_TAG}|x",
    f"{TRAIN_TAG}|0|0|0",
    "aegis-v1",
    "aegis-train",
    "ünï|cødé",
    "-1",
    " 3 ",
]


def _frame(h=48, w=64):
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([(x * 4) % 256, (y * 5) % 256, ((x + y) * 3) % 256], axis=-1)
    return img.astype(np.uint8)


def test_namespace_tags_differ_and_hold_no_separator():
    assert TRAIN_TAG != SUITE_TAG and "|" not in TRAIN_TAG and "|" not in SUITE_TAG


@pytest.mark.parametrize("ident", HOSTILE_IDS)
def test_train_and_test_keys_cannot_collide_by_construction(ident):
    """A key's namespace is its first '|' field, and each derivation writes its tag there as a literal prefix.

    Because neither tag contains '|', the first field of every test key is exactly SUITE_TAG and of every train
    key exactly TRAIN_TAG, whatever the id/seed/epoch fields hold; the two tags differ, so the strings differ
    (and so do their SHA-256-keyed streams, child streams included since they only append).
    """
    for corruption in CORRUPTIONS:
        for severity in (1, 2, 3):
            for seed in (0, 20260707, -5):
                test = stream_key(ident, corruption, severity, seed)
                assert test.startswith(SUITE_TAG + "|") and key_namespace(test) == SUITE_TAG
                train = train_key(seed, severity, ident)
                assert train.startswith(TRAIN_TAG + "|") and key_namespace(train) == TRAIN_TAG
                child = KeyedRandom(train).child(f"{corruption}|s{severity}").key
                assert key_namespace(child) == TRAIN_TAG and child != test


def test_train_draws_come_from_train_namespace_only(monkeypatch):
    """Every stream DisasterAugment opens, for any sample, is in the training namespace."""
    opened = []
    real_init = KeyedRandom.__init__

    def spy(self, key):
        opened.append(key)
        real_init(self, key)

    monkeypatch.setattr(KeyedRandom, "__init__", spy)
    aug = DisasterAugment(load_policy("all"), seed=20260707, scale=UNIT)
    img = _frame()
    for i, ident in enumerate(HOSTILE_IDS):
        aug(img, None, epoch=i % 3, sample=ident)
    assert opened and {key_namespace(k) for k in opened} == {TRAIN_TAG}


def test_same_seed_epoch_sample_same_bytes_any_order():
    img = _frame()
    a, b = DisasterAugment("all", seed=3, scale=UNIT), DisasterAugment("all", seed=3, scale=UNIT)
    forward = [a(img, None, epoch=1, sample=i)[0] for i in range(12)]
    backward = [b(img, None, epoch=1, sample=i)[0] for i in reversed(range(12))][::-1]
    for x, y in zip(forward, backward):
        assert x.dtype == np.uint8 and x.shape == img.shape and np.array_equal(x, y)


def test_draws_vary_across_epochs_and_seeds():
    aug = DisasterAugment("all", seed=0, scale=UNIT)
    by_epoch = [[aug.choose(e, i).condition for i in range(40)] for e in range(3)]
    assert by_epoch[0] != by_epoch[1] != by_epoch[2]
    assert by_epoch[0] != [DisasterAugment("all", seed=1, scale=UNIT).choose(0, i).condition for i in range(40)]
    # The same cell in two epochs still gets new random draws (a new key), so different pixels.
    img = _frame(96, 128)
    same = [
        i
        for i in range(500)
        if aug.choose(0, i).condition == aug.choose(1, i).condition
        and aug.choose(0, i).corruption not in (None, "turbidity_cast")
    ]  # turbidity draws nothing
    assert same
    i = same[0]
    assert not np.array_equal(aug(img, epoch=0, sample=i)[0], aug(img, epoch=1, sample=i)[0])


def test_training_draw_differs_from_frozen_test_draw_on_same_cell():
    img = _frame(96, 128)
    aug = DisasterAugment("all", seed=20260707, scale=UNIT)
    sample = next(i for i in range(200) if aug.choose(0, i).condition == "rain_streaks_s2")
    train = aug(img, epoch=0, sample=sample)[0]
    # The same kernels (aegis-v1, augmentation's suite) under the frozen test key: other pixels.
    frozen = apply_corruption(img, "rain_streaks", 2, sample, 20260707, config=load_config("aegis-v1"))
    assert not np.array_equal(train, frozen)


def test_a_policy_renders_with_its_suite_and_aegis_v2_takes_the_person_unit():
    """A policy renders with one suite (docs/MITIGATION.md): aegis-v1 by name keeps the hash runs trained before
    aegis-v2 recorded; aegis-v2 (the default) needs the frames' person unit and refuses in one line without it."""
    from aegis_data.engine.corruptions import corrupt_with_stream

    v1, v2 = load_config("aegis-v1"), load_config("aegis-v2")
    old = DisasterAugment(load_policy("all", "aegis-v1"), seed=0)
    assert old.policy.suite_config_hash == v1.config_hash == "939fc3c23420" and old.policy.hash == "a46b2cea4cff"
    with pytest.raises(AegisError, match="person unit"):
        DisasterAugment("all", seed=0)
    new = DisasterAugment("all", seed=0, scale=UNIT)
    assert new.policy.suite == "aegis-v2" and new.policy.suite_config_hash == v2.config_hash
    img = _frame(96, 128)
    for aug, cfg, scale in ((old, v1, None), (new, v2, UNIT)):
        sample = next(i for i in range(200) if aug.choose(0, i).condition == "low_light_s2")
        choice = aug.choose(0, sample)
        rng = KeyedRandom(choice.key).child(f"{choice.corruption}|s{choice.severity}")
        assert np.array_equal(
            aug(img, epoch=0, sample=sample)[0], corrupt_with_stream(img, "low_light", 2, rng, cfg, scale)
        )
    with pytest.raises(AegisError, match="suite"):
        resolve_policy({"name": "x", "suite": "aegis-v9"})
    with pytest.raises(AegisError, match="renders with suite aegis-v1"):
        resolve_policy({"name": "x", "suite": "aegis-v1"}, suite="aegis-v2")


def test_boxes_are_passed_through_unchanged():
    boxes = np.array([[1.0, 2.0, 10.0, 12.0]])
    keep = boxes.copy()
    aug = DisasterAugment("all", seed=0, scale=UNIT)
    for i in range(10):
        out, b = aug(_frame(), boxes, epoch=0, sample=i)
        assert b is boxes and np.array_equal(b, keep)


def test_clean_choice_returns_a_copy_and_p_clean_is_respected():
    always_clean = resolve_policy({"name": "clean", "p_clean": 1.0, "corruptions": []})
    aug = DisasterAugment(always_clean, seed=0, scale=UNIT)
    img = _frame()
    out, _ = aug(img, epoch=0, sample=0)
    assert np.array_equal(out, img) and out is not img
    never = DisasterAugment(resolve_policy({"name": "n", "p_clean": 0.0}), seed=0, scale=UNIT)
    assert all(never.choose(0, i).corruption is not None for i in range(50))
    half = collections.Counter(
        DisasterAugment("all", 0, scale=UNIT).choose(0, i).corruption is None for i in range(1000)
    )
    assert 400 < half[True] < 600


def test_shipped_policies_resolve_to_their_declared_cells():
    names = available_policies()
    for required in (
        "all",
        "loo-flood",
        "loo-wildfire",
        "loo-storm",
        "loo-earthquake",
        "holdout-low-light-s3",
        "photometric-only",
        "blur-only",
    ):
        assert required in names
    cfg = load_config()
    everything = {f"{c}_s{s}" for c in cfg.names for s in (1, 2, 3)}
    assert set(load_policy("all").trained_conditions) == everything | {"clean"}
    loo = load_policy("loo-flood")
    assert not set(loo.corruptions) & set(cfg.families["flood"]) and len(loo.cells) == 18
    hold = load_policy("holdout-low-light-s3")
    assert "low_light_s3" not in hold.trained_conditions and "low_light_s2" in hold.trained_conditions
    assert load_policy("blur-only").corruptions == ("motion_blur",)
    hashes = {load_policy(n).hash for n in names}
    assert len(hashes) == len(names)
    # Only the chosen cells are ever drawn.
    aug = DisasterAugment(hold, seed=0, scale=UNIT)
    assert all(aug.choose(0, i).condition != "low_light_s3" for i in range(2000))
    assert load_policy(POLICY_DIR / "all.yaml").hash == load_policy("all").hash


@pytest.mark.parametrize(
    "raw, fragment",
    [
        ({"name": "x", "p_clean": 1.5}, "p_clean"),
        ({"name": "x", "familes": ["flood"]}, "unknown key 'familes'"),
        ({"name": "x", "families": ["fire"]}, "unknown 'fire'"),
        ({"name": "x", "severities": [0, 4]}, "severities"),
        ({"name": "x", "severities": [1, 2], "severity_weights": [1]}, "severity_weights"),
        ({"name": "x", "exclude_families": ["flood"], "per_corruption_severities": {"inundation": [1]}}, "inundation"),
        ({"name": "x", "corruptions": [], "p_clean": 0.5}, "draws no corruption"),
        ({"p_clean": 0.5}, "name"),
    ],
)
def test_bad_policies_are_one_clear_error(raw, fragment):
    with pytest.raises(AegisError, match=fragment.replace("(", r"\(")):
        resolve_policy(raw, "p.yaml")


def test_unknown_policy_name_lists_the_shipped_ones():
    with pytest.raises(AegisError, match="loo-flood"):
        load_policy("no-such-policy")


def test_bad_augment_arguments():
    aug = DisasterAugment("all", 0, scale=UNIT)
    with pytest.raises(AegisError, match="epoch"):
        aug(_frame(), epoch=-1, sample=0)
    with pytest.raises(AegisError, match="sample"):
        aug(_frame(), epoch=0, sample=1.5)
    with pytest.raises(AegisError, match="uint8"):
        aug(_frame().astype(np.float32), epoch=0, sample=next(i for i in range(50) if aug.choose(0, i).corruption))


# --- torchvision v2 ---------------------------------------------------------------------------------------------
def test_v2_pipeline_round_trip_with_bounding_boxes():
    img = _frame(96, 128)
    image = tv_tensors.Image(torch.from_numpy(img).permute(2, 0, 1).contiguous())
    boxes = tv_tensors.BoundingBoxes(torch.tensor([[10.0, 12.0, 40.0, 50.0]]), format="XYXY", canvas_size=(96, 128))
    aug = DisasterAugmentV2("all", seed=0, epoch=2, scale=UNIT)
    target = {"boxes": boxes, "labels": torch.tensor([1]), "image_id": 5}
    pipeline = v2.Compose([aug, v2.ToDtype(torch.float32, scale=True)])
    out_img, out_target = pipeline(image, target)
    assert isinstance(out_img, tv_tensors.Image) and out_img.dtype == torch.float32
    assert out_target["boxes"] is boxes and out_target["image_id"] == 5
    expected = DisasterAugment("all", 0, scale=UNIT)(img, epoch=2, sample=5)[0]
    assert torch.equal((out_img * 255).round().to(torch.uint8).permute(1, 2, 0), torch.from_numpy(expected))


def test_v2_plain_tensor_and_ndarray_agree_with_the_core():
    img = _frame()
    aug = DisasterAugmentV2("photometric-only", seed=4, scale=UNIT)
    core = DisasterAugment("photometric-only", 4, scale=UNIT)
    for i in range(6):
        expected = core(img, epoch=0, sample=i)[0]
        t = aug(torch.from_numpy(img).permute(2, 0, 1).contiguous(), sample=i)
        assert type(t) is torch.Tensor and torch.equal(t.permute(1, 2, 0), torch.from_numpy(expected))
        assert np.array_equal(aug(img, sample=i), expected)
    aug.set_epoch(1)
    assert any(not np.array_equal(aug(img, sample=i), core(img, epoch=0, sample=i)[0]) for i in range(6))


def test_v2_needs_a_sample_id():
    aug = DisasterAugmentV2("all", seed=0, scale=UNIT)
    with pytest.raises(AegisError, match="image_id"):
        aug(torch.zeros(3, 8, 8, dtype=torch.uint8))
    with pytest.raises(AegisError, match="epoch"):
        aug.set_epoch(-2)
