"""Class remaps: rewrite category ids of the ground truth or of the predictions before scoring.

A map is ``"0:1,1:0"`` (source:target pairs) or a JSON file ``{"0": 1, "1": 0}``. It is total and one-to-one
by default, because a remap that silently drops or merges classes changes every number it touches:

* every category id of the remapped side must have an entry (``[class_map_unmapped]``): for the GT side the
  ids of ``categories``, for the prediction side the ids its detections carry;
* two ids onto one target is refused unless ``allow_merge`` (``[class_map_merge]``);
* on the GT side every target must be a GT category id (``[class_map_unknown_target]``); on the prediction
  side the loader checks targets against the GT as for any prediction file.

Remapping returns new objects; the caller's parsed JSON is not modified. The applied map is recorded in the
score's provenance (:meth:`ClassMap.record`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aegis_data.errors import AegisError
from aegis_data.files.readers import parse_json_bytes, read_file_bytes
from aegis_eval.protocols.coco_doc import category_names

SIDES = ("gt", "preds")
_PAIR_RE = re.compile(r"^\s*(-?\d+)\s*:\s*(-?\d+)\s*$")


@dataclass(frozen=True)
class ClassMap:
    """source id -> target id, the side it applies to, whether merges are allowed and where it came from."""

    mapping: Mapping[int, int]
    side: str
    allow_merge: bool = False
    origin: Mapping[str, Any] | None = None

    def record(self) -> dict[str, Any]:
        """The provenance entry: side, mapping (string keys, as JSON needs), allow_merge and origin."""
        return {
            "side": self.side,
            "mapping": {str(k): int(v) for k, v in sorted(self.mapping.items())},
            "allow_merge": self.allow_merge,
            **dict(self.origin or {}),
        }


def _as_int(value: Any, what: str, spec: str) -> int:
    if isinstance(value, bool):
        raise AegisError(f"[class_map_syntax] {spec}: {what} {value!r} is not an integer category id")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        return int(value)
    raise AegisError(f"[class_map_syntax] {spec}: {what} {value!r} is not an integer category id")


def parse_class_map(spec: str, side: str = "gt", allow_merge: bool = False) -> ClassMap:
    """A ClassMap from ``"0:1,1:0"`` or the path of a JSON object file; AegisError on bad syntax or a repeated
    source id. Totality and merges are checked against the data by :func:`check_class_map`."""
    if side not in SIDES:
        raise AegisError(f"[class_map_side] remap side must be one of {', '.join(SIDES)}; got {side!r}")
    text = str(spec).strip()
    if not text:
        raise AegisError("[class_map_syntax] empty class map; expected 'SRC:DST,...' or a JSON file")
    path = Path(text)
    mapping: dict[int, int] = {}
    if text.endswith(".json") or (":" not in text and path.exists()):
        data = read_file_bytes(path, "class map", "class_map_")
        obj = parse_json_bytes(data, "class map", path, "class_map_")  # the shared checks (one error vocabulary)
        if not isinstance(obj, dict) or not obj:
            raise AegisError(f'[class_map_syntax] {path}: expected a non-empty JSON object {{"0": 1, ...}}')
        # Every key as written: a parsed dict keeps only the last of a repeated key, and "01" is id 1 as well.
        written: dict[int, str] = {}
        for key, value in json.loads(data, object_pairs_hook=lambda pairs: pairs):
            src = _as_int(key, "source", str(path))
            if src in written:
                raise AegisError(
                    f"[class_map_syntax] {path} maps id {src} twice (keys {written[src]!r} and "
                    f"{key!r}); give each source id once"
                )
            written[src] = key
            mapping[src] = _as_int(value, "target", str(path))
        origin: dict[str, Any] = {"file": str(path), "sha256": hashlib.sha256(data).hexdigest()}
    else:
        pairs = [p for p in text.split(",") if p.strip()]
        if not pairs:
            raise AegisError(f"[class_map_syntax] empty class map {spec!r}; expected 'SRC:DST,...' or a JSON file")
        for pair in pairs:
            m = _PAIR_RE.match(pair)
            if not m:
                raise AegisError(
                    f"[class_map_syntax] cannot read {pair.strip()!r} in class map {spec!r}; expected "
                    "'SRC:DST' pairs of integer category ids, e.g. '0:1,1:0'"
                )
            src, dst = int(m.group(1)), int(m.group(2))
            if src in mapping:  # '01' and '1' are one id too
                raise AegisError(f"[class_map_syntax] class map {spec!r} maps id {src} twice; give each source id once")
            mapping[src] = dst
        origin = {"text": text}
    return ClassMap(mapping=mapping, side=side, allow_merge=allow_merge, origin=origin)


def check_class_map(
    cmap: ClassMap, source_ids: Iterable[int], where: str, target_ids: Iterable[int] | None = None
) -> None:
    """Refuse a map that leaves one of ``source_ids`` unmapped, merges ids without ``allow_merge`` or (when
    ``target_ids`` is given) maps onto an id outside it."""
    ids = sorted(set(int(i) for i in source_ids))
    unmapped = [i for i in ids if i not in cmap.mapping]
    if unmapped:
        raise AegisError(
            f"[class_map_unmapped] {where}: the class map leaves category ids {unmapped[:5]} unmapped; "
            "give every id a target (map an id to itself to keep it)"
        )
    by_target: dict[int, list[int]] = {}
    for src in ids:
        by_target.setdefault(cmap.mapping[src], []).append(src)
    merged = {t: s for t, s in by_target.items() if len(s) > 1}
    if merged and not cmap.allow_merge:
        target, sources = next(iter(sorted(merged.items())))
        raise AegisError(
            f"[class_map_merge] {where}: the class map sends ids {sources} onto one id {target}; "
            "pass `allow_merge` to merge classes on purpose",
            param="allow_merge",
        )
    if target_ids is not None:
        allowed = set(int(t) for t in target_ids)
        outside = sorted({cmap.mapping[i] for i in ids} - allowed)
        if outside:
            raise AegisError(
                f"[class_map_unknown_target] {where}: the class map targets ids {outside[:5]}, which "
                f"are not GT categories (known: {sorted(allowed)[:8]})"
            )


def remap_ground_truth(coco: Mapping[str, Any], cmap: ClassMap, where: str) -> dict[str, Any]:
    """A copy of a parsed COCO GT whose annotations carry the remapped category ids (categories unchanged:
    their names belong to the target ids)."""
    ids = category_names(coco, where)
    check_class_map(cmap, ids, where, target_ids=ids)
    anns = []
    for a in coco["annotations"]:
        cat = a.get("category_id") if isinstance(a, dict) else None
        if isinstance(cat, int) and not isinstance(cat, bool) and cat in cmap.mapping:
            a = {**a, "category_id": cmap.mapping[a["category_id"]]}
        anns.append(a)
    return {**coco, "annotations": anns}


def remap_predictions(obj: Any, cmap: ClassMap, where: str) -> Any:
    """A copy of a parsed COCO results list with remapped category ids. Entries that are not objects with an
    integer category id are left for the loader to report."""
    wrapped = isinstance(obj, dict) and "annotations" in obj
    entries = obj["annotations"] if wrapped else obj
    if not isinstance(entries, list):
        return obj

    def integer_category(e: Any) -> bool:  # JSON true is not the id 1
        return isinstance(e, dict) and isinstance(e.get("category_id"), int) and not isinstance(e["category_id"], bool)

    present = {e["category_id"] for e in entries if integer_category(e)}
    check_class_map(cmap, present, where)
    out = [{**e, "category_id": cmap.mapping[e["category_id"]]} if integer_category(e) else e for e in entries]
    return {**obj, "annotations": out} if wrapped else out
