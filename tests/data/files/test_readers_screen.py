"""The compiled byte screen of the strict JSON reader (aegis_data/files/_cjson.c) answers exactly as its Python twin
(``_long_integer_free`` of the folded bytes) on random and adversarial bytes, and parsing gives the same objects and
errors with it and without it (AEGIS_KERNELS=numpy)."""

from __future__ import annotations

import random

import pytest

from aegis_data.errors import AegisError
from aegis_data.files import readers
from tests.compiled import extension

cjson, needs_compiled = extension("aegis_data.files._cjson")


def _twin(data: bytes) -> bool:
    return readers._long_integer_free(data.translate(readers._DIGITS_AS_ZERO, b"+"))


EDGES = [
    b"",
    b"1" * 18,
    b"1" * 19,
    b"." + b"1" * 19,
    b"0." + b"1" * 40,
    b"1." + b"1" * 40 + b"e" + b"1" * 19,
    b"+" + b"1" * 19,
    b".+" + b"1" * 19,  # a '+' is skipped: the run follows the '.'
    b"." + b"1" * 10 + b"+" + b"1" * 10,  # one run across the '+'
    b"x" + b"1" * 10 + b"+" + b"1" * 9,
    b"1" * 10 + b"+" * 30 + b"1" * 9,
    b"+" * 40,
    b"[1.5, 12345678901234567890]",
    b"[0.12345678901234567890123, 1]",
    b'["1234567890123456789012"]',  # inside a string: the screen is conservative
    b"[1E+0000000000000000000001]",
]


@needs_compiled
@pytest.mark.parametrize("data", EDGES)
def test_screen_edges(data):
    assert cjson is not None
    assert cjson.long_integer_free(data) == _twin(data)


@needs_compiled
@pytest.mark.parametrize("seed", range(200))
def test_screen_is_the_twin_on_random_bytes(seed):
    assert cjson is not None
    rng = random.Random(seed)
    alphabet = rng.choice([b"0123456789.+", b"0123456789.+eE ,-[]", b"19.+x"])
    weights = [rng.random() for _ in alphabet]
    for _ in range(20):
        n = rng.choice([1, 19, 20, 40, 200, 2000])
        data = bytes(rng.choices(alphabet, weights, k=n))
        assert cjson.long_integer_free(data) == _twin(data), data


def _read(data: bytes):
    try:
        return "ok", readers.parse_json_bytes(data, "predictions", "x.json")
    except AegisError as exc:
        return "error", str(exc)


@pytest.mark.parametrize("data", [*EDGES, b"[" + b"12345678901234567890, " * 3 + b"1]", b"[1e400]", b"[1, 2"])
def test_parse_is_the_same_without_the_screen(data, monkeypatch):
    compiled = _read(data)
    monkeypatch.setenv("AEGIS_KERNELS", "numpy")
    twin = _read(data)
    assert repr(compiled) == repr(twin)
