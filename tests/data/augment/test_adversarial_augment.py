"""Adversarial repros against augmentation (aegis_data/augment): severity weights must be finite and positive
and keep their proportions when huge.
"""

from __future__ import annotations

import pytest


# --- 4. augmentation weights -------------------------------------------------------------------------------
@pytest.mark.parametrize("weights", [[float("nan"), 1, 1], [float("inf"), 1, 1], [-1, 1, 1], [0, 1, 1]])
def test_severity_weights_must_be_finite_and_positive(weights):
    from aegis_data.augment.transform import resolve_policy
    from aegis_data.errors import AegisError

    with pytest.raises(AegisError, match="finite positive number"):
        resolve_policy({"name": "w", "p_clean": 0.0, "severity_weights": weights}, "p.yaml")


def test_huge_severity_weights_keep_their_proportions():
    from aegis_data.augment.transform import DisasterAugment, resolve_policy

    def severities(weights):
        policy = resolve_policy({"name": "w", "p_clean": 0.0, "severity_weights": weights}, suite="aegis-v1")
        aug = DisasterAugment(policy, seed=3)
        return [aug.choose(0, i).severity for i in range(300)]

    huge, plain = severities([1e308, 1e308, 1e308]), severities([1, 1, 1])
    assert huge == plain and {1, 2, 3} <= set(huge)
