"""Linear light for the generation-2 models: the sRGB transfer curve as exact tables, and stable scalars.

Physics happens in linear light (photons add; a blur integrates radiance; sensor noise grows with the signal),
while images are stored display-encoded. The generation-2 models therefore decode uint8 sRGB to 15-bit linear
integers (``LINEAR_MAX`` = 32767 is white), work there, and encode back to uint8. Both directions are lookup
tables built once with a checked margin to every rounding decision, so an ulp of libm error in ``pow`` can never
change an entry (the same rule as ``aegis_data.engine.seeding.normal_table``): decode is one table of 256 entries,
encode one of 32768, and encode(decode(v)) == v for every v (tested).

``stable`` does the same for the few scalars a model derives through ``exp``/``log``/``pow`` (an EV's light
factor, a read-noise variance): rounded to 10 significant digits, refused within 1e-5 of a digit of a rounding
boundary (which no shipped value comes near).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from aegis_data.engine import kernels as K
from aegis_data.errors import AegisError

LINEAR_BITS = 15
LINEAR_MAX = (1 << LINEAR_BITS) - 1  # 32767: white; products with 15-bit weights stay inside int32
_MARGIN = 1e-6


def srgb_to_linear(v: float) -> float:
    """The sRGB decoding curve (IEC 61966-2-1) of a value in [0, 1]."""
    return v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4


def _read_only(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@lru_cache(maxsize=1)
def decode_table() -> np.ndarray:
    """uint16 (256,): ``round(srgb_to_linear(v / 255) * LINEAR_MAX)`` for v = 0..255 (read-only)."""
    scaled = np.array([srgb_to_linear(v / 255.0) * LINEAR_MAX for v in range(256)])
    frac = scaled - np.floor(scaled)
    if np.abs(frac - 0.5).min() < _MARGIN:  # a property of the curve and LINEAR_BITS; checked, never hit
        raise AegisError("sRGB decode table: an entry lies on a rounding boundary")
    return _read_only(np.floor(scaled + 0.5).astype(np.uint16))


@lru_cache(maxsize=1)
def encode_table() -> np.ndarray:
    """uint8 (LINEAR_MAX + 1,): the uint8 sRGB code whose decoded value is nearest each linear level, i.e. the
    number of decision thresholds ``srgb_to_linear((k - 0.5) / 255) * LINEAR_MAX`` (k = 1..255) at or below it
    (read-only). The thresholds are checked to lie clear of every integer."""
    thresholds = np.array([srgb_to_linear((k - 0.5) / 255.0) * LINEAR_MAX for k in range(1, 256)])
    frac = thresholds - np.floor(thresholds)
    if np.minimum(frac, 1.0 - frac).min() < _MARGIN:
        raise AegisError("sRGB encode table: a threshold lies on an integer")
    levels = np.arange(LINEAR_MAX + 1, dtype=np.float64)
    return _read_only(np.searchsorted(thresholds, levels, side="right").astype(np.uint8))


def to_linear(image: np.ndarray) -> np.ndarray:
    """uint8 sRGB (..., 3) -> uint16 linear in [0, LINEAR_MAX] (a table read; the compiled loops' when built)."""
    c = K.CKERNELS
    if c is not None and hasattr(c, "lut_u8_u16") and isinstance(image, np.ndarray) and image.dtype == np.uint8:
        out = np.empty(image.shape, dtype=np.uint16)
        c.lut_u8_u16(out, np.ascontiguousarray(image), image.size, decode_table())
        return out
    return np.take(decode_table(), image)


def to_srgb(linear: np.ndarray) -> np.ndarray:
    """Integer linear levels in [0, LINEAR_MAX] -> uint8 sRGB (a table read; clip first). A uint16 RGB image goes
    through the compiled loop where built (``atmos_blend`` without a layer: the same table read)."""
    c = K.CKERNELS
    if (
        c is not None
        and hasattr(c, "atmos_blend")
        and isinstance(linear, np.ndarray)
        and linear.dtype == np.uint16
        and linear.ndim >= 1
        and linear.shape[-1] == 3
        and linear.size > 0
    ):
        out = np.empty(linear.shape, dtype=np.uint8)
        c.atmos_blend(out, 1, np.ascontiguousarray(linear), None, linear.size // 3, 0, 0, 0, encode_table())
        return out
    return np.take(encode_table(), linear)


STABLE_DIGITS = 10  # far more than any physical quantity here is known to
_STABLE_MARGIN = 1e-5  # of the last digit: ~2e-16 relative, a few ulps of libm error


def stable(value: float, what: str = "value") -> float:
    """``value`` rounded to ``STABLE_DIGITS`` significant digits, so that every machine gets the same float from a
    formula with ``exp``/``log``/``pow``; AegisError (naming ``what``) when it lies within 1e-5 of a last digit of a
    rounding boundary, where a few ulps of libm error could flip it (about one value in 50,000)."""
    if value == 0.0 or not math.isfinite(value):
        return value
    exponent = math.floor(math.log10(abs(value)))
    scaled = abs(value) / 10.0 ** (exponent - (STABLE_DIGITS - 1))
    if abs(scaled - math.floor(scaled) - 0.5) < _STABLE_MARGIN:
        raise AegisError(
            f"{what} = {value!r} lies on a rounding boundary of its {STABLE_DIGITS}th digit; choose a "
            f"slightly different parameter"
        )
    return float(f"{value:.{STABLE_DIGITS - 1}e}")
