"""Keyed random streams: key format, stability of the raw bits, exact conversions, independence of sub-streams."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest

from aegis_data.engine.seeding import (
    NORMAL_FRAC_BITS,
    NORMAL_TABLE_MARGIN,
    KeyedRandom,
    keyed_random,
    normal_table,
    stream_key,
)
from aegis_data.errors import AegisError
from tests import REPO_ROOT

# Pinned digests: if one changes, every corrupted split changes. Update only deliberately.
PHILOX_BITS_SHA256 = "116b194c6bc3d1116bd55ece54ec15bc621e63bf307500857fa095e8ef866e83"
NORMAL_TABLE_SHA256 = "7030c40868edff0a36b70d4a06ceacbf25ac02eb87069f34786f8258a1e9a44d"


def _sha(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def test_stream_key_format_is_canonical():
    assert stream_key("frame_01", "low_light", 3, 20260707) == "aegis-v1|frame_01|low_light|3|20260707"
    # An int id and its decimal string name the same image (detectors report numeric stems as ints).
    assert stream_key(7, "inundation", 1, 5) == stream_key("7", "inundation", 1, 5)
    assert keyed_random("a", "motion_blur", 2, 1).key == "aegis-v1|a|motion_blur|2|1"


@pytest.mark.parametrize("bad", [1.5, None, b"x", True, ("a",)])
def test_stream_key_rejects_non_str_int_ids(bad):
    with pytest.raises(AegisError, match="`image_id` must be a str or int"):
        stream_key(bad, "low_light", 1, 0)


def test_stream_key_rejects_non_int_seed():
    with pytest.raises(AegisError, match="`seed` must be an int"):
        stream_key("a", "low_light", 1, 1.0)


def test_raw_bits_are_pinned():
    """The Philox stream keyed from a SHA-256 digest: a NumPy change to it would show here first."""
    bits = KeyedRandom("aegis-v1|golden|stream|1|20260707").bits(4096)
    assert bits.dtype == np.uint64
    assert _sha(bits.astype("<u8")) == PHILOX_BITS_SHA256


def test_same_key_same_values_and_different_keys_differ():
    a, b, c = KeyedRandom("k"), KeyedRandom("k"), KeyedRandom("k2")
    assert np.array_equal(a.bits(100), b.bits(100))
    assert not np.array_equal(KeyedRandom("k").bits(100), c.bits(100))


def test_uniform_is_the_exact_top_53_bits():
    bits = KeyedRandom("u").bits(1000)
    u = KeyedRandom("u").uniform(1000)
    expected = np.array([(int(b) >> 11) / 2**53 for b in bits])
    assert np.array_equal(u, expected)
    assert u.min() >= 0.0 and u.max() < 1.0


def test_children_are_independent_of_draw_order():
    """Drawing more from one sub-stream never shifts another: each is keyed, not positional."""
    parent = KeyedRandom("p")
    first = parent.child("octave=1").uniform(10)
    parent.child("octave=0").uniform(10_000)
    again = KeyedRandom("p").child("octave=1").uniform(10)
    assert np.array_equal(first, again)
    assert parent.child("x").key == "p|x"


def test_normal_table_is_pinned_symmetric_and_has_margin():
    t = normal_table()
    assert t.dtype == np.int32 and t.size == 65536
    assert _sha(t) == NORMAL_TABLE_SHA256
    assert np.array_equal(t, -t[::-1])  # exact symmetry of the midpoint quantiles
    assert np.all(np.diff(t) > 0)
    assert not t.flags.writeable
    # The float quantiles sit well clear of the rounding boundaries (libm ulps cannot flip an entry).
    from statistics import NormalDist

    scaled = np.array([NormalDist().inv_cdf((i + 0.5) / 65536) for i in range(0, 65536, 97)]) * 2.0**20
    assert np.abs(scaled - np.floor(scaled) - 0.5).min() >= NORMAL_TABLE_MARGIN


def test_normal_deviates_have_unit_moments_and_exact_values():
    z = KeyedRandom("n").normal(400_000)
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1.0) < 0.01
    assert np.abs(z).max() <= normal_table()[-1] * 2.0**-NORMAL_FRAC_BITS < 4.33  # table tails
    idx = KeyedRandom("n").normal_indices(400_000)
    assert np.array_equal(z, normal_table()[idx] * 2.0**-NORMAL_FRAC_BITS)


def test_normal_indices_split_words_little_endian():
    word = int(KeyedRandom("w").bits(1)[0])
    idx = KeyedRandom("w").normal_indices(4)
    assert idx.tolist() == [(word >> (16 * i)) & 0xFFFF for i in range(4)]


def test_integers_range_and_shapes():
    v = KeyedRandom("i").integers(-3, 4, (50, 40))
    assert v.shape == (50, 40) and v.dtype == np.int64
    assert v.min() == -3 and v.max() == 3
    with pytest.raises(AegisError, match="need 0 < high - low"):
        KeyedRandom("i").integers(5, 5, 3)
    with pytest.raises(AegisError, match="non-negative"):
        KeyedRandom("i").uniform((2, -1))


def test_key_must_be_a_string():
    with pytest.raises(AegisError, match="stream key must be a str"):
        KeyedRandom(123)


def test_no_global_rng_in_the_engine():
    """The rule is structural: no engine module reaches for a global or unkeyed generator."""
    forbidden = re.compile(
        r"np\.random\.(seed|rand|randn|randint|random|choice|shuffle|normal|uniform|default_rng|RandomState)\b"
        r"|^\s*import random\b|^\s*from random import",
        re.M,
    )
    root = REPO_ROOT / "aegis_data" / "engine"
    engine = [root / "seeding.py", root / "corruptions.py", root / "kernels.py"]
    offenders = [p.name for p in engine if forbidden.search(p.read_text())]
    assert offenders == []
