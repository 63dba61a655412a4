"""The ``aegis-score/1`` document as its readers rely on it: one validator, shared by ``aegis rank`` and
``aegis report`` (and anything else that reads score JSONs written elsewhere)."""

from __future__ import annotations

from typing import Any

from aegis_data.engine.config import parse_condition
from aegis_data.errors import AegisError
from aegis_eval.metrics.result_keys import AP_METRICS, COUNT_KEYS, SCHEMA, THRESHOLD_METRICS

METRICS = THRESHOLD_METRICS + AP_METRICS


def _fail(where: str, message: str) -> AegisError:
    return AegisError(f"{where}: {message}")


def validate_result(obj: Any, where: str = "<result>", suite_conditions: bool = True) -> dict:
    """Check the parts of a score JSON that report and rank rely on; returns it unchanged.

    ``suite_conditions``: condition keys must be suite condition ids (the report's grid); rank also takes
    other domains (``iid``, ``ood``), so it passes False. Raises AegisError naming ``where`` and the first
    problem found.
    """
    if not isinstance(obj, dict):
        raise _fail(where, f"expected a JSON object written by `aegis score --json` (schema {SCHEMA!r}), "
                           f"got a JSON {type(obj).__name__}")
    schema = obj.get("schema")
    if schema != SCHEMA:
        raise _fail(where, f"expected an `aegis score` JSON with schema {SCHEMA!r}, got schema {schema!r}")
    label = obj.get("label")
    if not isinstance(label, str) or not label.strip():
        raise _fail(where, f"'label' must be a non-empty string, got {label!r}")
    dataset = obj.get("dataset")
    if dataset is not None and not isinstance(dataset, str):
        raise _fail(where, f"'dataset' must be a string or null, got {dataset!r}")
    conditions = obj.get("conditions")
    if not isinstance(conditions, dict) or not conditions:
        raise _fail(where, "'conditions' must be a non-empty object of condition id -> metrics")
    for cond, block in conditions.items():
        try:
            if suite_conditions:
                parse_condition(cond)
        except AegisError as exc:
            raise _fail(where, str(exc)) from None
        if not isinstance(block, dict):
            raise _fail(where, f"conditions[{cond!r}] must be an object, got {type(block).__name__}")
        huge = _beyond_float64(block)
        if huge:
            raise _fail(where, f"conditions[{cond!r}].{huge} is a number that does not fit a 64-bit float")
        for key in (*METRICS, *COUNT_KEYS):  # what rank, report and robustness read: a number or null
            v = block.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise _fail(where, f"conditions[{cond!r}].{key} must be a number or null, got {v!r:.40}")
    for key in ("summary", "provenance", "threshold"):
        if key in obj and obj[key] is not None and not isinstance(obj[key], dict):
            raise _fail(where, f"'{key}' must be an object, got {type(obj[key]).__name__}")
    return obj


def _beyond_float64(value: Any, path: str = "") -> str | None:
    """Dotted path of the first integer in ``value`` too large for a float64 (JSON allows ``10**400``)."""
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            float(value)
        except OverflowError:
            return path or "value"
        return None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        found = _beyond_float64(v, f"{path}.{k}" if path else str(k))
        if found:
            return found
    return None


