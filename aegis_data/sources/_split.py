"""Deterministic, group-aware split assignment by SHA-256 order.

Rule (documented in docs/DATA.md): groups are ordered by the SHA-256 hex digest of ``"<salt>|<group key>"``;
walking that order, whole groups go to the first target split until it holds at least its fraction of all
images (rounded half up), then to the next target; what remains goes to the remainder split. The order
depends only on the group keys, so adding a dataset file never reshuffles unrelated groups' relative order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence

from aegis_data.errors import AegisError


def hash_order(keys: Iterable[str], salt: str) -> list[str]:
    """Keys sorted by SHA-256 of ``salt|key`` (ties, impossible in practice, broken by the key)."""
    return sorted(keys, key=lambda k: (hashlib.sha256(f"{salt}|{k}".encode()).hexdigest(), k))


def target_count(fraction: float, total: int) -> int:
    """round-half-up(fraction * total), at least 1 when fraction > 0 and total > 1."""
    n = int(fraction * total + 0.5)
    if fraction > 0 and n == 0 and total > 1:
        n = 1
    return n


def assign_groups(
    group_sizes: Mapping[str, int],
    targets: Sequence[tuple[str, float]],
    remainder: str,
    salt: str,
) -> dict[str, str]:
    """Map every group key to a split name.

    group_sizes: group key -> number of images. targets: ``[(split, fraction), ...]`` filled in order.
    Returns ``{group: split}``. Raises AegisError when the fractions leave nothing for the remainder while
    there are images, or when a target cannot get any group.
    """
    total = sum(group_sizes.values())
    if sum(f for _, f in targets) >= 1.0:
        raise AegisError(f"split fractions {dict(targets)} add up to 1 or more; the {remainder!r} split would be empty")
    order = hash_order(group_sizes, salt)
    out: dict[str, str] = {}
    i = 0
    for split, fraction in targets:
        want = target_count(fraction, total)
        have = 0
        while have < want and i < len(order):
            out[order[i]] = split
            have += group_sizes[order[i]]
            i += 1
    for g in order[i:]:
        out[g] = remainder
    return out
