"""Keyed random streams: every random draw of the suite, reproducible alone, in any order, on any machine.

A stream is named by a canonical UTF-8 key string. Its SHA-256 digest seeds an explicitly constructed
counter-based bit generator (NumPy's Philox4x64-10, keyed directly with two 64-bit words of the digest, so
NumPy's ``SeedSequence`` plays no part). Only the generator's raw 64-bit output is used: NumPy keeps
BitGenerator streams stable, while ``Generator`` distribution methods may change between releases. The
conversion of raw bits to uniforms, normals and integers is done here with exact operations only
(integer shifts, multiplication by powers of two, table lookups), so the values are the same wherever the
raw bits are.

Key format (``stream_key``)::

    aegis-v1|<image_id>|<corruption>|<severity>|<seed>

(``aegis-v2|...`` for suites of engine generation 2: the tag names the generation, not the suite.)

``image_id`` is written with ``str()`` (so the int ``7`` and the string ``"7"`` name the same image, matching
file stems that detectors report as ints). Fields after the id contain no ``|``, so the key parses
unambiguously from the right even if an id contains ``|``. Sub-streams append ``|<label>`` (``child``), so a
new draw in one part of a corruption never shifts the values drawn in another.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

import numpy as np

from aegis_data.errors import AegisError

SUITE_TAG = "aegis-v1"

# Normal deviates come from a 2**16-entry table of standard-normal quantiles at the cell midpoints
# (i + 0.5) / 2**16, stored as integers in units of 2**-NORMAL_FRAC_BITS. The tails are therefore truncated
# at +-4.33 sigma, which is immaterial for sensor noise.
NORMAL_TABLE_BITS = 16
NORMAL_FRAC_BITS = 20
# Every table entry must lie at least this far (in table units) from a rounding boundary, so a 1-ulp
# difference in the platform's libm log/sqrt can never change an entry.
NORMAL_TABLE_MARGIN = 1e-6

Shape = int | tuple


def stream_key(image_id: str | int, corruption: str, severity: int, seed: int, tag: str = SUITE_TAG) -> str:
    """The canonical key of one image's draws for one corruption and severity (format in the module doc).

    ``tag``: the engine generation's key tag (``SuiteConfig.key_tag``): ``aegis-v1`` (default) or ``aegis-v2``."""
    if isinstance(image_id, bool) or not isinstance(image_id, (str, int, np.integer)):
        raise AegisError(
            f"`image_id` must be a str or int, got {type(image_id).__name__} {image_id!r}", param="image_id"
        )
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise AegisError(f"`seed` must be an int, got {type(seed).__name__} {seed!r}", param="seed")
    if isinstance(image_id, str) and not image_id.isascii():  # the key is hashed as UTF-8: no lone surrogate
        try:
            image_id.encode("utf-8")
        except UnicodeEncodeError:
            raise AegisError(
                f"image_id {image_id!r} is not valid text (a lone surrogate, as a non-UTF-8 file name decodes to)"
            ) from None
    return f"{tag}|{image_id}|{corruption}|{int(severity)}|{int(seed)}"


@lru_cache(maxsize=1)
def normal_table() -> np.ndarray:
    """Standard-normal quantiles at (i + 0.5) / 65536 as int32 in units of 2**-20 (read-only, 65536 entries).

    Built once from ``statistics.NormalDist.inv_cdf`` (pure Python over libm ``log``/``sqrt``) and rounded to
    the fixed-point grid; the build refuses if any value lies within ``NORMAL_TABLE_MARGIN`` of a rounding
    boundary, so the table is identical wherever libm errs by an ulp. Its SHA-256 is pinned by a test.
    """
    from statistics import NormalDist  # here: the scorer imports this module and never draws a normal

    n = 1 << NORMAL_TABLE_BITS
    inv = NormalDist().inv_cdf
    scale = float(1 << NORMAL_FRAC_BITS)
    scaled = np.array([inv((i + 0.5) / n) * scale for i in range(n)], dtype=np.float64)
    nearest_boundary = np.abs(scaled - np.floor(scaled) - 0.5)
    if nearest_boundary.min() < NORMAL_TABLE_MARGIN:  # pragma: no cover - a property of this libm
        raise RuntimeError("normal quantile table: an entry is too close to a rounding boundary")
    table = np.floor(scaled + 0.5).astype(np.int32)
    table.setflags(write=False)
    return table


def _size(shape: Shape) -> tuple[tuple, int]:
    shp = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    if any(s < 0 for s in shp):
        raise AegisError(f"`shape` must be non-negative, got {shp}", param="shape")
    return shp, int(np.prod(shp, dtype=np.int64))


class KeyedRandom:
    """A random stream named by ``key``; the same key gives the same values everywhere.

    Every method consumes the stream, so two calls return different values; for independent purposes derive
    a sub-stream with :meth:`child` instead of relying on call order.
    """

    def __init__(self, key: str):
        if not isinstance(key, str):
            raise AegisError(f"stream key must be a str, got {type(key).__name__}")
        self.key = key
        digest = hashlib.sha256(key.encode("utf-8")).digest()
        words = np.frombuffer(digest, dtype="<u8").astype(np.uint64)
        # Philox is keyed directly (128-bit key) with a zero counter: no seeding algorithm in between.
        self._bitgen = np.random.Philox(key=words[:2].copy(), counter=np.zeros(4, dtype=np.uint64))

    def __repr__(self) -> str:
        return f"KeyedRandom({self.key!r})"

    def child(self, label: str) -> KeyedRandom:
        """An independent stream keyed ``<key>|<label>``."""
        return KeyedRandom(f"{self.key}|{label}")

    def bits(self, shape: Shape) -> np.ndarray:
        """Raw uint64 words from the bit generator."""
        shp, n = _size(shape)
        return np.asarray(self._bitgen.random_raw(n), dtype=np.uint64).reshape(shp)

    def uniform(self, shape: Shape) -> np.ndarray:
        """float64 in [0, 1): the top 53 bits times 2**-53 (exact)."""
        return (self.bits(shape) >> np.uint64(11)).astype(np.float64) * (2.0**-53)

    def integers(self, low: int, high: int, shape: Shape) -> np.ndarray:
        """int64 in [low, high) (``high - low`` < 2**52); floor of a scaled uniform, bias below 2**-40."""
        span = int(high) - int(low)
        if span <= 0 or span >= 1 << 52:
            raise AegisError(f"integers: need 0 < high - low < 2**52, got [{low}, {high})")
        scaled = np.floor(self.uniform(shape) * span).astype(np.int64)
        return np.minimum(scaled, span - 1) + int(low)

    def normal_indices(self, shape: Shape) -> np.ndarray:
        """uint16 indices into :func:`normal_table` (four per 64-bit word, little-endian order)."""
        shp, n = _size(shape)
        words = self.bits((n + 3) // 4)
        # An explicit little-endian view keeps the split independent of the machine's byte order; on a
        # little-endian machine neither conversion copies (the indices are a view of the drawn words).
        idx = words.astype("<u8", copy=False).view("<u2")[:n]
        return idx.astype(np.uint16, copy=False).reshape(shp)

    def normal(self, shape: Shape) -> np.ndarray:
        """Standard-normal float64 deviates (table values times 2**-20, exact)."""
        return normal_table()[self.normal_indices(shape)].astype(np.float64) * (2.0**-NORMAL_FRAC_BITS)


def keyed_random(image_id: str | int, corruption: str, severity: int, seed: int, tag: str = SUITE_TAG) -> KeyedRandom:
    """The stream for one (image, corruption, severity, seed) of the engine generation ``tag``."""
    return KeyedRandom(stream_key(image_id, corruption, severity, seed, tag))
