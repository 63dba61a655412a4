"""The strict JSON reader gives the same objects and the same one-line errors with orjson as with the standard
library's json (the fallback where orjson is not installed)."""

from __future__ import annotations

import json
import random
import struct

import pytest

from aegis_data.errors import AegisError
from aegis_data.files import readers

orjson = pytest.importorskip("orjson")

DOCUMENTS = [
    b'[{"image_id": 1, "category_id": 1, "bbox": [1.5, 2, 3e2, 4.25e-3], "score": 0.98765}]',
    b'{"a": 1, "a": 2, "b": [true, false, null], "c": "\\u00e9\\/"}',
    b"\xef\xbb\xbf[1, 2]",  # a BOM: json accepts it, orjson does not
    b'["\\ud800"]',  # a lone surrogate: the same
    b"[9223372036854775807, -9223372036854775808, 18446744073709551615]",
    b"[-9223372036854775809, 18446744073709551616, 123456789012345678901234567890]",  # orjson would make floats
    b"[1e-400, 5e-324, -0, -0.0, 1E2, 0.1e1]",
    b"[" * 3000 + b"]" * 3000,  # deeper than orjson's limit, within json's
    b"[NaN]",
    b"[Infinity]",
    b"[1e400]",
    b"[" + b"9" * 400 + b"]",
    b"[1, 2",
    b"[1,]",
    b"\xc0\x80",
    b"",
]


def _read(data: bytes):
    try:
        return "ok", readers.parse_json_bytes(data, "predictions", "x.json")
    except AegisError as exc:
        return "error", str(exc)


@pytest.mark.parametrize("data", DOCUMENTS, ids=range(len(DOCUMENTS)))
def test_same_objects_and_errors_with_and_without_orjson(data, monkeypatch):
    with_orjson = _read(data)
    monkeypatch.setattr(readers, "_orjson", None)
    without = _read(data)
    assert repr(with_orjson) == repr(without)  # repr: int stays int, -0.0 stays -0.0


def test_floats_read_bit_identically():
    rng = random.Random(20261202)
    # every bit pattern with an exponent below 2**100 (3-digit decimal exponents take the strict path), and
    # fractions written in full (0.000123...: long digit runs after the point stay on the orjson path)
    values = [struct.unpack("<d", rng.randbytes(8))[0] for _ in range(20000)]
    values = [x for x in values if x == x and 1e-99 < abs(x) < 1e99]
    small = [rng.uniform(0, 0.01) for _ in range(5000)]
    texts = [t for x in values + small for t in (repr(x), f"{x:.17g}", f"{x:.15e}")] + [f"{x:.25f}" for x in small]
    data = ("[" + ",".join(texts) + "]").encode()
    assert not readers._may_overflow(data) and readers._plain_integers(data)  # the orjson path is under test
    ours = readers.parse_json_bytes(data, "predictions", "x.json")
    assert [struct.pack("<d", v) for v in ours] == [struct.pack("<d", float(v)) for v in json.loads(data)]


def test_orjson_parses_plain_files(monkeypatch):
    """A results file without long digit runs is parsed by orjson when it is installed (the fast path is taken)."""
    calls = []

    class Spy:
        JSONDecodeError = orjson.JSONDecodeError

        @staticmethod
        def loads(data):
            calls.append(len(data))
            return orjson.loads(data)

    monkeypatch.setattr(readers, "_orjson", Spy)
    assert readers.parse_json_bytes(b'[{"score": 0.5}]', "predictions", "x.json") == [{"score": 0.5}]
    assert calls == [16]
    # 19 digits in a row: json reads it, keeping a big integer an integer
    assert readers.parse_json_bytes(b"[12345678901234567890]", "predictions", "x.json") == [12345678901234567890]
    assert calls == [16]
