"""The ``aegis-score/1`` document as its readers rely on it: one validator, shared by ``aegis rank`` and
``aegis report`` (and anything else that reads score JSONs written elsewhere)."""

from __future__ import annotations

import math
from typing import Any

from aegis_data.conditions import SEVERITIES, condition_id
from aegis_data.engine.config import SuiteConfig
from aegis_data.engine.config_schema import CORRUPTION_NAMES
from aegis_data.errors import AegisError
from aegis_eval.metrics.result_keys import AP_METRICS, COUNT_KEYS, LOWER_IS_BETTER, SCHEMA, THRESHOLD_METRICS
from aegis_eval.protocols.provenance import shipped_suite

METRICS = THRESHOLD_METRICS + AP_METRICS
# Every suite declares some of the same nine corruptions, so no score holds more conditions than this (clean plus
# three severities of each: 28); documents whose condition names are free (rank's iid / ood domains) are held to it.
MAX_CONDITIONS = 1 + len(SEVERITIES) * len(CORRUPTION_NAMES)
MAX_CONDITION_NAME = 100


def _fail(where: str, message: str) -> AegisError:
    return AegisError(f"{where}: {message}")


def suite_conditions_of(obj: dict, config: SuiteConfig | None = None) -> tuple[str, frozenset[str]]:
    """(what names the suite, its condition ids) for a score document: ``config`` when given, else the shipped
    suite its ``provenance.config_hash`` names; else (a split built with another suite config) every condition
    the engine can make, which holds every suite's."""
    if config is None and isinstance(obj.get("provenance"), dict):
        config = shipped_suite(obj["provenance"].get("config_hash"))
    if config is not None:
        names, what = config.names, f"suite config {config.config_hash}"
    else:
        names, what = CORRUPTION_NAMES, "any suite (the score's suite config is not a shipped suite's)"
    return what, frozenset(["clean", *(condition_id(n, k) for n in names for k in SEVERITIES)])


def validate_result(  # noqa: C901 (predates the limit; split it when it next changes)
    obj: Any, where: str = "<result>", suite_conditions: bool = True, config: SuiteConfig | None = None
) -> dict:
    """Check the parts of a score JSON that report and rank rely on; returns it unchanged.

    ``suite_conditions``: condition keys must be condition ids of the suite the score was made with
    (``suite_conditions_of``; ``config`` overrides the one the provenance names), the report's grid; rank also
    takes other domains (``iid``, ``ood``), so it passes False and only the number and length of the names are
    bounded. Metric values must be finite and in their range. Raises AegisError naming ``where`` and the first
    problem found.
    """
    if not isinstance(obj, dict):
        raise _fail(
            where,
            f"expected a JSON object written by `aegis score` (schema {SCHEMA!r}), got a JSON {type(obj).__name__}",
        )
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
    if len(conditions) > MAX_CONDITIONS:
        raise _fail(
            where,
            f"'conditions' holds {len(conditions):,} entries; a score has at most {MAX_CONDITIONS} "
            f"(clean and {len(SEVERITIES)} severities of each corruption)",
        )
    allowed = suite_conditions_of(obj, config) if suite_conditions else None
    for cond, block in conditions.items():
        if allowed is not None and cond not in allowed[1]:
            raise _fail(
                where,
                f"not a condition id: {cond!r:.60} (expected 'clean' or "
                f"'<corruption>_s<1-{len(SEVERITIES)}>' with a corruption of {allowed[0]})",
            )
        if not cond or len(cond) > MAX_CONDITION_NAME:
            raise _fail(where, f"condition names are 1 to {MAX_CONDITION_NAME} characters, got {cond!r:.60}")
        if not isinstance(block, dict):
            raise _fail(where, f"conditions[{cond!r}] must be an object, got {type(block).__name__}")
        huge = _beyond_float64(block)
        if huge:
            raise _fail(where, f"conditions[{cond!r}].{huge} is a number that does not fit a 64-bit float")
        for key in (*METRICS, *COUNT_KEYS):  # what rank, report and robustness read: a number or null
            v = block.get(key)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise _fail(where, f"conditions[{cond!r}].{key} must be a number or null, got {v!r:.40}")
            if not _in_range(key, v):
                raise _fail(
                    where, f"conditions[{cond!r}].{key} = {v!r:.40} is out of range ({_RANGE_TEXT[_kind(key)]})"
                )
        severity = block.get("severity")
        if severity is not None and (
            isinstance(severity, bool) or not isinstance(severity, int) or not 0 <= severity <= max(SEVERITIES)
        ):
            raise _fail(
                where,
                f"conditions[{cond!r}].severity must be 0 (clean), 1-{max(SEVERITIES)} or null, got {severity!r:.40}",
            )
        _check_effects(block, f"conditions[{cond!r}]", where)
    for key in ("summary", "provenance", "threshold"):
        if key in obj and obj[key] is not None and not isinstance(obj[key], dict):
            raise _fail(where, f"'{key}' must be an object, got {type(obj[key]).__name__}")
    _check_suite(obj.get("provenance") or {}, where)
    threshold = obj.get("threshold") or {}
    per_class = threshold.get("per_class")
    if per_class is not None and not isinstance(per_class, dict):
        raise _fail(where, f"threshold.per_class must be an object of class -> value, got {per_class!r:.40}")
    for name, value in (
        ("threshold.value", threshold.get("value")),
        *((f"threshold.per_class[{k!r}]", v) for k, v in (per_class or {}).items()),
    ):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, (int, float)) or not _in_range("recall", value)
        ):
            raise _fail(where, f"{name} must be a number in [0, 1] or null, got {value!r:.40}")
    _check_threshold_notes(threshold, where)
    return obj


def _check_threshold_notes(threshold: dict, where: str) -> None:
    """``threshold.validation`` ({n_images, n_gt}: integers >= 0) and ``threshold.warnings`` (strings), both
    optional: a score made with a threshold value, or with an older threshold file, has neither."""
    validation = threshold.get("validation")
    if validation is not None:
        ok = isinstance(validation, dict) and all(
            isinstance(validation.get(k), int) and not isinstance(validation.get(k), bool) and validation[k] >= 0
            for k in ("n_images", "n_gt")
        )
        if not ok:
            raise _fail(where, f"threshold.validation must be {{n_images, n_gt}} integers >= 0, got {validation!r:.60}")
    warnings = threshold.get("warnings")
    if warnings is not None and (not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings)):
        raise _fail(where, f"threshold.warnings must be a list of strings, got {warnings!r:.60}")


def _check_effects(block: dict, at: str, where: str) -> None:
    """``acted_images`` (an integer in [0, n_images]) and ``submerged`` (per bin: label, n_gt, tp <= n_gt, recall
    in [0, 1] or null), as the report reads them (docs/SCORE_JSON.md)."""
    acted = block.get("acted_images")
    if acted is not None:
        n = block.get("n_images")
        ok = isinstance(acted, int) and not isinstance(acted, bool) and acted >= 0
        if not ok or (isinstance(n, int) and not isinstance(n, bool) and acted > n):
            raise _fail(where, f"{at}.acted_images must be an integer in [0, n_images], got {acted!r:.40}")
    sub = block.get("submerged")
    if sub is None:
        return
    if not isinstance(sub, dict):
        raise _fail(where, f"{at}.submerged must be an object, got {type(sub).__name__}")
    labels, n_gt, tp, recall = (sub.get(k) for k in ("labels", "n_gt", "tp", "recall"))
    if (
        not (isinstance(labels, list) and isinstance(n_gt, list) and isinstance(tp, list) and isinstance(recall, list))
        or len({len(x) for x in (labels, n_gt, tp, recall)}) != 1
        or len(labels) > 16
    ):
        raise _fail(where, f"{at}.submerged must hold lists labels, n_gt, tp and recall of one length (at most 16)")
    for k, (lab, n, t, r) in enumerate(zip(labels, n_gt, tp, recall)):
        ok = (
            isinstance(lab, str)
            and len(lab) <= 40
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (n, t))
            and t <= n
            and (r is None or (isinstance(r, (int, float)) and not isinstance(r, bool) and _in_range("recall", r)))
        )
        if not ok:
            raise _fail(
                where, f"{at}.submerged bin {k} is not a label, counts tp <= n_gt and a recall in [0, 1] or null"
            )
    clean = sub.get("recall_clean")
    if clean is not None and (
        not isinstance(clean, list)
        or len(clean) != len(labels)
        or not all(
            r is None or (isinstance(r, (int, float)) and not isinstance(r, bool) and _in_range("recall", r))
            for r in clean
        )
    ):
        raise _fail(where, f"{at}.submerged.recall_clean must list a recall in [0, 1] or null per bin")


def _check_suite(provenance: dict, where: str) -> None:
    """``provenance.suite``: a suite name or null (before suites were recorded), and the suite of
    ``provenance.config_hash`` when that is a shipped suite's (the hash covers the suite's name, so a document
    naming another suite was edited: rank and report would take it for a score of that suite)."""
    named = provenance.get("suite")
    if named is None:
        return
    if not isinstance(named, str) or not named.strip():
        raise _fail(where, f"provenance.suite must be a suite name (a non-empty string) or null, got {named!r:.60}")
    known = shipped_suite(provenance.get("config_hash"))
    if known is not None and named != known.suite:
        raise _fail(
            where,
            f"provenance.suite is {named!r:.60}, but its provenance.config_hash "
            f"{provenance.get('config_hash')} is suite {known.suite}'s; the document was edited",
        )


_RANGE_TEXT = {
    "ap": "an AP in [0, 1], or negative (-1) where COCO has no GT",
    "share": "a share in [0, 1]",
    "rate": "a finite number >= 0",
    "count": "a finite number >= 0",
}


def _kind(key: str) -> str:
    if key in AP_METRICS:
        return "ap"
    if key in COUNT_KEYS:
        return "count"
    return "rate" if key in LOWER_IS_BETTER and key != "false_alarm_image_share" else "share"


def _in_range(key: str, v: int | float) -> bool:
    """A metric as the scorer writes it: finite; shares in [0, 1]; AP in [-1, 1] (negative: no GT, read as
    undefined); rates and counts >= 0."""
    try:
        x = float(v)
    except OverflowError:  # reported as beyond float64 above
        return True
    if not math.isfinite(x):
        return False
    kind = _kind(key)
    if kind in ("ap", "share"):
        return (-1.0 if kind == "ap" else 0.0) <= x <= 1.0
    return x >= 0.0


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
