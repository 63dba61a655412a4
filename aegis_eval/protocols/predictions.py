"""Loading and validating COCO ground truth and COCO-results predictions (docs/SCORING.md, "Inputs").

Every rejection is an :class:`AegisError` whose one-line message starts with a stable finding code in
brackets (``[bbox_negative] ...``), names what was received and what was expected. Findings that do not
invalidate the file (duplicate detections, zero-size boxes, other-category detections dropped) are returned
as warning lines in ``Detections.source["warnings"]`` (``GroundTruth.warnings`` for the GT); the CLI prints them.

Image id resolution (predictions -> GT rows), in this order:

* an ``int`` id that is a GT image id resolves to that image;
* an id (int or string) equal to the ``file_name`` stem of a GT image resolves to it; this covers Ultralytics
  ``save_json`` output, whose ``image_id`` is the file stem, converted to ``int`` when all digits
  (``"000123"`` -> ``123``, so numeric stems are also matched by their integer value);
* a digit string equal to a GT image id resolves to it.

An id that resolves to two *different* images (an int that is the id of one image and the numeric stem of
another) is ambiguous and refused, unless the entry carries a ``file_name`` (Ultralytics writes one) whose stem
names one of the candidates. Splits built by ``aegis build-splits`` give an image whose stem is a number that
number as its GT id (docs/DATA.md, "Image ids"), so on them the two conventions agree and nothing is ambiguous.
"""

from __future__ import annotations

import hashlib
import math
import os
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import replace
from itertools import chain
from pathlib import Path, PurePath
from typing import Any, NoReturn, TypeGuard

import numpy as np

from aegis_data.compiled import load_extension
from aegis_data.engine.config import SuiteConfig
from aegis_data.errors import AegisError
from aegis_data.files.layout import annotation_path
from aegis_data.files.readers import (
    image_name_problem,
    parse_json_bytes,
    read_file_bytes,
    read_json,
)
from aegis_data.split.reader import config_for
from aegis_eval.metrics.types import Detections, GroundTruth
from aegis_eval.protocols.class_map import ClassMap, remap_ground_truth, remap_predictions
from aegis_eval.protocols.coco_doc import category_names, check_coco_shape, is_int64
from aegis_eval.protocols.results_file import (
    Columns,
    PredictionsFile,
    _results_reader,
    read_predictions_file,
)

REQUIRED_DET_KEYS = ("image_id", "category_id", "bbox", "score")
_STANDARD_IMAGE_KEYS = ("id", "file_name", "width", "height")
_STANDARD_KEY_SET = frozenset(_STANDARD_IMAGE_KEYS)


# --- small helpers -------------------------------------------------------------------------------------
def read_json_file(path: Path, what: str, code_prefix: str = "") -> tuple[Any, str]:
    """(parsed JSON, SHA-256 of the bytes): the toolkit's one JSON reader (:func:`aegis_data.files.readers.read_json`),
    with finding codes ``[<code_prefix>not_found]``, ``wrong_type``, ``unreadable``, ``not_json``, ``json_nonfinite``,
    ``json_number_overflow`` and ``json_too_deep``."""
    return read_json(path, what, code_prefix)


def _first(items: Sequence, n: int = 3) -> str:
    shown = ", ".join(repr(x) for x in list(items)[:n])
    return shown + (", ..." if len(items) > n else "")


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def as_float(x: Any) -> float:
    """float(x) for a JSON number; an integer too large for float64 (``10**400``) becomes +-inf, so the
    finiteness checks refuse it as a finding instead of an OverflowError."""
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def _is_finite_number(x: Any) -> TypeGuard[float]:
    return _is_number(x) and math.isfinite(as_float(x))


# --- ground truth --------------------------------------------------------------------------------------
def _person_category(categories: Any, where: str) -> tuple[int, tuple[int, ...]]:
    if not isinstance(categories, list) or not categories:
        raise AegisError(f"[gt_no_category] {where}: 'categories' must be a non-empty list; got {categories!r:.60}")
    ids = []
    person = []
    for k, c in enumerate(categories):
        if not isinstance(c, dict) or not isinstance(c.get("id"), int) or isinstance(c.get("id"), bool):
            raise AegisError(f"[gt_bad_category] {where}: categories[{k}] must be an object with an integer 'id'")
        ids.append(int(c["id"]))
        if str(c.get("name", "")).strip().lower() == "person":
            person.append(int(c["id"]))
    if len(person) == 1:
        return person[0], tuple(ids)
    if not person and len(ids) == 1:
        return ids[0], tuple(ids)
    names = [c.get("name") for c in categories]
    raise AegisError(
        f"[gt_no_person_category] {where}: expected one category named 'person' or a single category; "
        f"got {len(ids)} categories ({_first(names, 5)})"
    )


def ground_truth_from_coco(
    coco: Any,
    source: Mapping[str, Any] | None = None,
    category_id: int | None = None,
    annotation_columns: tuple[np.ndarray, ...] | None = None,
) -> GroundTruth:
    """A GroundTruth from a parsed COCO GT dict, keeping one category: the person category by default,
    or ``category_id`` when given.

    Images are sorted by id; annotations keep their file order within each image (the matching tie rule
    uses it). ``area`` comes from the annotation (COCO's size field) and falls back to w*h.
    ``annotation_columns``: the compiled GT reader's columns standing for ``coco["annotations"]`` (see
    :func:`_compiled_gt_doc`).
    """
    where = str((source or {}).get("path", "ground truth"))
    check_coco_shape(coco, where)
    if category_id is None:
        category_id, _ = _person_category(coco["categories"], where)
    return ground_truths_from_coco(coco, source, (category_id,), annotation_columns)[int(category_id)]


def ground_truths_from_coco(
    coco: Any,
    source: Mapping[str, Any] | None,
    category_ids: Sequence[int],
    annotation_columns: tuple[np.ndarray, ...] | None = None,
) -> dict[int, GroundTruth]:
    """{category id: GroundTruth} for several categories of one parsed COCO GT, in one pass over the
    annotations (what multi-class scoring needs; :func:`ground_truth_from_coco` is the one-category case).

    An annotation without ``category_id`` belongs to the wanted category when only one is wanted, and is
    refused (``[gt_missing_key]``) otherwise.
    """
    source = dict(source or {})
    where = str(source.get("path", "ground truth"))
    check_coco_shape(coco, where)
    all_cats = tuple(category_names(coco, where))
    wanted = [int(c) for c in category_ids]
    unknown = [c for c in wanted if c not in all_cats]
    if unknown:
        raise AegisError(
            f"[gt_category_unknown] {where}: no category with id {unknown[0]!r} (known: {_first(list(all_cats), 5)})"
        )
    default_cat = wanted[0] if len(wanted) == 1 else None
    keep = set(wanted)
    images, anns = coco["images"], coco["annotations"]
    if not isinstance(images, list) or not isinstance(anns, list):
        raise AegisError(f"[gt_wrong_type] {where}: 'images' and 'annotations' must be lists")
    rows = _gt_image_rows(images, where)
    image_ids = np.array([im["id"] for im in rows], dtype=np.int64)
    steps = np.diff(image_ids)
    if (steps == 0).any():  # sorted: a repeated id sits beside its twin (np.unique's first call imports numpy.ma)
        dup = image_ids[1:][steps == 0]
        raise AegisError(f"[gt_duplicate_image_id] {where}: image ids repeat ({_first(dup.tolist())})")
    file_names = tuple(str(im.get("file_name", im["id"])) for im in rows)
    widths = np.array([int(im.get("width") or 0) for im in rows], dtype=np.int64)
    heights = np.array([int(im.get("height") or 0) for im in rows], dtype=np.int64)
    attributes = tuple(
        {} if im.keys() <= _STANDARD_KEY_SET else {k: v for k, v in im.items() if k not in _STANDARD_IMAGE_KEYS}
        for im in rows
    )
    box_cat, box_image, boxes, areas, crowd, ann_ids = _gt_boxes(
        anns, keep, default_cat, image_ids, where, annotation_columns
    )

    cat_arr = np.array(box_cat, dtype=np.int64)
    box_image_arr = np.array(box_image, dtype=np.int64)
    boxes_arr = np.array(boxes, dtype=np.float64).reshape(-1, 4)
    areas_arr = np.array(areas, dtype=np.float64)
    crowd_arr = np.array(crowd, dtype=bool)
    ann_arr = np.array(ann_ids, dtype=np.int64)
    source.setdefault("category_ids", all_cats)
    out = {}
    for cat_id in wanted:
        mine = np.flatnonzero(cat_arr == cat_id)
        # Group boxes by image row but keep file order inside each image (stable).
        order = mine[np.argsort(box_image_arr[mine], kind="stable")]
        warnings = list(source.get("warnings", []))
        if (ann_arr[mine] == 0).any():
            # pycocotools marks matches by annotation id, so a match to id 0 reads as "unmatched": that box can
            # be matched again and its detection counts as a false positive. Our AP reproduces pycocotools
            # exactly, quirk included; the thresholded metrics do not depend on ids.
            warnings.append(
                "[gt_annotation_id_zero] the GT has an annotation with id 0; COCO AP (like pycocotools) treats "
                "matches to it as misses — renumber annotation ids from 1"
            )
        class_source = {k: v for k, v in source.items() if k != "warnings"}
        if warnings:
            class_source["warnings"] = warnings
        out[cat_id] = GroundTruth(
            image_ids=image_ids,
            file_names=file_names,
            widths=widths,
            heights=heights,
            box_image=box_image_arr[order],
            boxes=boxes_arr[order],
            areas=areas_arr[order],
            iscrowd=crowd_arr[order],
            ann_ids=ann_arr[order],
            category_id=cat_id,
            attributes=attributes,
            category_ids=all_cats,
            warnings=tuple(warnings),
            dataset=source.get("dataset"),
            split_dir=source.get("split_dir"),
            config_hash=source.get("config_hash"),
            source=class_source,
        )
    return out


def _gt_image_rows(images: list, where: str) -> list[dict]:
    """The ``images`` entries, each checked (integer id, non-negative size), sorted by id."""
    if not set(map(type, images)) - {dict}:  # the common file: the checks below on whole columns
        ids = [im.get("id") for im in images]
        sizes = [v for im in images for v in (im.get("width"), im.get("height")) if v is not None]
        if (
            not set(map(type, ids)) - {int}
            and not set(map(type, sizes)) - {int}
            and (not ids or (-(2**63) <= min(ids) and max(ids) < 2**63))
            and (not sizes or (min(sizes) >= 0 and max(sizes) < 2**31))
        ):
            if all(a <= b for a, b in zip(ids, ids[1:])):
                return list(images)  # sorted already: what the stable sort below keeps
            return sorted(images, key=lambda im: im["id"])
    return _gt_image_rows_each(images, where)


def _gt_image_rows_each(images: list, where: str) -> list[dict]:
    """:func:`_gt_image_rows` one entry at a time (the definition), naming the first problem."""
    rows = []
    for k, im in enumerate(images):
        if not isinstance(im, dict) or "id" not in im:
            raise AegisError(f"[gt_missing_key] {where}: images[{k}] lacks 'id'")
        if not is_int64(im["id"]):
            raise AegisError(f"[gt_image_id_type] {where}: images[{k}].id must be an integer; got {im['id']!r:.40}")
        for key in ("width", "height"):
            v = im.get(key)
            if v is not None and not (_is_number(v) and 0 <= v < 2**31):  # NaN fails the range test too
                raise AegisError(
                    f"[gt_image_size] {where}: images[{k}].{key} must be a non-negative number; got {v!r:.40}"
                )
        rows.append(im)
    rows.sort(key=lambda im: im["id"])
    return rows


_ABSENT = object()  # a key's default that no JSON value can equal


def _gt_boxes(
    anns: list,
    keep: set[int],
    default_cat: int | None,
    image_ids: np.ndarray,
    where: str,
    columns: tuple[np.ndarray, ...] | None = None,
) -> tuple[Any, Any, Any, Any, Any, Any]:
    """(category, image row, xywh box, area, iscrowd, annotation id) of every annotation of a kept category,
    in file order, as lists or arrays (the caller makes arrays of them); other categories are skipped, malformed
    annotations refused."""
    fast = _gt_boxes_well_formed(anns, keep, default_cat, image_ids, columns)
    if fast is not None:
        return fast
    if columns is not None:  # anns is the [] that stood in for the array: the checks below need the entries
        raise _FullReadNeeded
    row_of = {int(i): r for r, i in enumerate(image_ids)}
    # Something is unusual: the per-annotation checks below name the first problem (or accept the file).
    box_cat, box_image, boxes, areas, crowd, ann_ids = [], [], [], [], [], []
    for k, a in enumerate(anns):
        if not isinstance(a, dict):
            raise AegisError(f"[gt_wrong_type] {where}: annotations[{k}] is not an object")
        cat = a.get("category_id", default_cat)
        if cat is None:
            raise AegisError(
                f"[gt_missing_key] {where}: annotations[{k}] lacks 'category_id' (needed to score several classes)"
            )
        if isinstance(cat, (list, dict)):  # unhashable: no category set can hold it
            raise AegisError(
                f"[gt_bad_category] {where}: annotations[{k}].category_id must be an integer; got {cat!r:.40}"
            )
        if cat not in keep:
            continue
        miss = [key for key in ("image_id", "bbox") if key not in a]
        if miss:
            raise AegisError(f"[gt_missing_key] {where}: annotations[{k}] lacks {', '.join(map(repr, miss))}")
        if not is_int64(a["image_id"]) or a["image_id"] not in row_of:
            raise AegisError(
                f"[gt_unknown_image] {where}: annotations[{k}].image_id {a['image_id']!r:.40} is not an id in 'images'"
            )
        if "id" in a and not is_int64(a["id"]):
            raise AegisError(f"[gt_annotation_id] {where}: annotations[{k}].id must be an integer; got {a['id']!r:.40}")
        b = a["bbox"]
        if not isinstance(b, list) or len(b) != 4 or not all(_is_finite_number(v) for v in b) or b[2] < 0 or b[3] < 0:
            raise AegisError(
                f"[gt_bbox_invalid] {where}: annotations[{k}].bbox must be 4 finite numbers "
                f"[x, y, w, h] with w, h >= 0; got {b!r:.80}"
            )
        area = a.get("area")
        box_cat.append(int(cat))
        box_image.append(row_of[a["image_id"]])
        boxes.append([float(v) for v in b])
        areas.append(float(area) if _is_finite_number(area) else float(b[2]) * float(b[3]))
        crowd.append(bool(a.get("iscrowd", 0)))
        ann_ids.append(int(a["id"]) if "id" in a else k + 1)
    return box_cat, box_image, boxes, areas, crowd, ann_ids


def _gt_boxes_well_formed(
    anns: list,
    keep: set[int],
    default_cat: int | None,
    image_ids: np.ndarray,
    all_columns: tuple[np.ndarray, ...] | None = None,
):
    """:func:`_gt_boxes` for the common file, columns first and checks on whole columns (a GT holds tens of
    thousands of boxes): exact-int categories, image ids and annotation ids, lists of four int/float box values,
    finite with w, h >= 0, every image id listed. Returns None for anything else; the per-annotation checks then
    decide, so what is accepted or refused, and the values returned, do not depend on which path ran.
    ``all_columns``: the compiled GT reader's columns of every annotation, read instead of ``anns``."""
    if all_columns is not None:
        kept = np.flatnonzero(np.isin(all_columns[0], np.array(sorted(keep), dtype=np.int64)))
        columns: tuple[np.ndarray, ...] | None = (kept, *(column[kept] for column in all_columns))
    else:
        columns = _gt_columns(anns, keep, default_cat)
    if columns is None:
        return None
    kept, cats, keys, boxes, given_area, crowd, ann_ids = columns
    rows = np.searchsorted(image_ids, keys)  # image_ids: sorted and distinct
    if len(keys) and ((rows >= len(image_ids)).any() or (image_ids[rows.clip(0, len(image_ids) - 1)] != keys).any()):
        return None  # an image id not listed
    if not np.isfinite(boxes).all() or (boxes[:, 2:] < 0).any():
        return None
    areas = np.where(np.isfinite(given_area), given_area, boxes[:, 2] * boxes[:, 3])
    return cats, rows, boxes, areas, crowd, ann_ids


def _inputs_kernels() -> Any:
    """The compiled conversions of parsed inputs (``_cinputs.c``), or None (``AEGIS_KERNELS=numpy`` or not built)."""
    return load_extension("aegis_eval.protocols._cinputs", "input conversions")


def _gt_columns(anns: list, keep: set[int], default_cat: int | None) -> tuple[np.ndarray, ...] | None:
    """:func:`_gt_columns_py`, compiled where built (the same arrays, without a Python object per value)."""
    kernels = _inputs_kernels()
    if kernels is None:
        return _gt_columns_py(anns, keep, default_cat)
    raw = kernels.gt_columns(anns, tuple(sorted(keep)), default_cat)
    if raw is None:
        return None
    kept, cats, keys = (np.frombuffer(b, dtype=np.int64) for b in raw[:3])
    boxes = np.frombuffer(raw[3], dtype=np.float64).reshape(-1, 4)
    given_area = np.frombuffer(raw[4], dtype=np.float64)
    crowd = np.frombuffer(raw[5], dtype=np.uint8).astype(bool)
    return kept, cats, keys, boxes, given_area, crowd, np.frombuffer(raw[6], dtype=np.int64)


def _gt_columns_py(anns: list, keep: set[int], default_cat: int | None) -> tuple[np.ndarray, ...] | None:
    """(index in ``anns``, category, image id, xywh box, given area, iscrowd, annotation id) of the annotations of
    a kept category, as arrays, when every annotation is a dict with an exact-int category (``default_cat`` where
    absent) and every kept one has an exact-int image id, a list of four exact int/float box values and an
    exact-int id or none (its index + 1 then), all inside int64 / float64; else None. The given area is NaN where
    absent or not an int/float. The definition of the compiled ``gt_columns``."""
    try:
        if set(map(type, anns)) - {dict}:
            return None
        cats = [a.get("category_id", default_cat) for a in anns]
        if set(map(type, cats)) - {int}:
            return None
        cat_arr = np.array(cats, dtype=np.int64)
        kept = np.flatnonzero(np.isin(cat_arr, np.array(sorted(keep), dtype=np.int64)))
        mine = [anns[k] for k in kept.tolist()]
        image_keys = [a["image_id"] for a in mine]
        bboxes = [a["bbox"] for a in mine]
        ids = [a.get("id", _ABSENT) for a in mine]
        if set(map(type, image_keys)) - {int} or set(map(type, bboxes)) - {list} or set(map(len, bboxes)) - {4}:
            return None
        if set(map(type, ids)) - {int, object} or set(map(type, chain.from_iterable(bboxes))) - {int, float}:
            return None
        keys = np.array(image_keys, dtype=np.int64)
        boxes = np.array(bboxes, dtype=np.float64).reshape(-1, 4)
        absent = np.array([i is _ABSENT for i in ids], dtype=bool)
        ann_ids = np.array([0 if i is _ABSENT else i for i in ids], dtype=np.int64)
        given_area = np.array(
            [v if type(v) in (int, float) else np.nan for v in (a.get("area") for a in mine)], dtype=np.float64
        )
    except (KeyError, OverflowError):  # a missing key; an integer beyond int64 / float64
        return None
    ann_ids = np.where(absent, kept + 1, ann_ids)
    crowd = np.array([bool(a.get("iscrowd", 0)) for a in mine], dtype=bool)
    return kept, cat_arr[kept], keys, boxes, given_area, crowd, ann_ids


def _read_manifest(root: Path) -> dict[str, Any]:
    """Provenance fields of a split directory's manifest (empty when there is none). A build's manifest (it names
    a ``format``) counts only if its provenance fields hash to its root: the sealed reader checks it."""
    from aegis_data.split.reader import read_manifest_file

    found = read_manifest_file(root)
    if found is None:
        return {}
    path, obj, sha = found.path, found.data, found.sha256
    if not isinstance(obj, dict):
        raise AegisError(f"[manifest_wrong_type] {path}: expected a JSON object")
    dataset = obj.get("dataset")
    if isinstance(dataset, dict):
        dataset = dataset.get("name")
    scale = obj.get("scale")
    if scale is not None and not isinstance(scale, dict):
        raise AegisError(
            f"[manifest_invalid] {path}: 'scale' must be an object (the length unit of an object-scale "
            f"build) or absent, got a JSON {type(scale).__name__}"
        )
    return {
        "manifest": str(path),
        "manifest_sha256": sha,
        "config_hash": obj.get("config_hash"),
        "suite": obj.get("suite") if isinstance(obj.get("suite"), str) else None,
        "manifest_root_hash": obj.get("root_hash"),
        "dataset": dataset,
        # The length unit of an object-scale build (aegis_data.engine.scale); frame-scale builds have none.
        **({"scale": scale} if scale else {}),
    }


def resolve_gt_path(path: str | Path, split: str = "test") -> tuple[Path, Path | None]:
    """(annotation file, split root or None) for a COCO file or a split directory."""
    if not isinstance(path, (str, os.PathLike)):
        raise AegisError(
            f"[gt_not_found] the ground truth must be a split folder or a COCO JSON file path, got "
            f"{type(path).__name__}"
        )
    path = Path(path)
    if path.is_dir():
        ann = annotation_path(path, split)
        if not ann.is_file():
            raise AegisError(
                f"[gt_not_found] {path} is a directory but has no annotations/{split}.json; "
                "expected a split directory from 'aegis build-splits' or a COCO JSON file"
            )
        return ann, path
    if not path.exists():
        raise AegisError(f"[gt_not_found] ground truth not found: {path}")
    return path, None


def _check_split_image_names(coco: Any, where: str) -> None:
    """A split's GT names frames a reader opens (the gallery, the runners): none may lead out of its folder."""
    images = coco.get("images") if isinstance(coco, dict) else None
    for k, im in enumerate(images if isinstance(images, list) else []):
        problem = image_name_problem(im) if isinstance(im, dict) else None
        if problem is not None:
            raise AegisError(f"[gt_image_name] {where}: images[{k}] {problem}")


def read_ground_truth_doc(
    path: str | Path, split: str = "test", class_map: ClassMap | None = None
) -> tuple[Any, dict[str, Any]]:
    """(parsed COCO GT, source record) from a COCO file or a split directory, with a GT-side class map applied."""
    coco, source, _, _ = _read_ground_truth(path, split, class_map, compiled=False)
    return coco, source


class _FullReadNeeded(Exception):
    """The compiled reader's annotation columns cannot settle the GT (a value the checks must name): the file's
    bytes are parsed again as JSON. Caught in :func:`load_ground_truth`; never leaves the module."""


def _compiled_gt_doc(data: bytes, where: Path) -> tuple[Any, tuple[np.ndarray, ...]] | None:
    """(the COCO GT with ``"annotations": []``, the annotations' columns) when the compiled reader takes the file's
    annotations array (``gt_annotations`` in ``_cresults.c``: plain keys and values only) and the rest parses as
    strict JSON; else None (the caller parses the whole file). The columns are (category, image id, box, given area
    (NaN where absent), iscrowd, annotation id (index + 1 where absent)), what :func:`_gt_columns_py` reads."""
    reader = _results_reader()
    got = reader.gt_annotations(data) if reader is not None else None
    if got is None:
        return None
    start, stop = got[0], got[1]
    try:  # the array's bytes replaced by [] (a valid value there): the whole is valid JSON exactly when this is
        coco = parse_json_bytes(data[:start] + b"[]" + data[stop:], "ground truth", where, "gt_")
    except AegisError:  # the whole file's read names the problem with its own line and column
        return None
    ids, images, cats = (np.frombuffer(b, dtype=np.int64) for b in got[2:5])
    boxes = np.frombuffer(got[5], dtype=np.float64).reshape(-1, 4)
    areas = np.frombuffer(got[6], dtype=np.float64)
    crowd = np.frombuffer(got[7], dtype=np.uint8).astype(bool)
    return coco, (cats, images, boxes, areas, crowd, ids)


def _read_ground_truth(
    path: str | Path, split: str, class_map: ClassMap | None, compiled: bool
) -> tuple[Any, dict[str, Any], tuple[np.ndarray, ...] | None, bytes]:
    """:func:`read_ground_truth_doc` and the file's bytes, with ``compiled`` (and no GT-side class map) through
    :func:`_compiled_gt_doc` where it takes the file: then the annotations come as columns and the document holds
    ``"annotations": []`` (:func:`_parsed_whole` parses the bytes whole when the columns cannot settle the GT)."""
    ann, root = resolve_gt_path(path, split)
    data = read_file_bytes(ann, "ground truth", "gt_")
    remaps_gt = class_map is not None and class_map.side == "gt"  # a remap rewrites the annotations: JSON path
    fast = _compiled_gt_doc(data, ann) if compiled and not remaps_gt else None
    coco, columns = fast if fast is not None else (parse_json_bytes(data, "ground truth", ann, "gt_"), None)
    sha = hashlib.sha256(data).hexdigest()
    source: dict[str, Any] = {"path": str(ann), "sha256": sha, "split": split if root else None}
    if root is not None:
        source["split_dir"] = str(root)
        source.update(_read_manifest(root))
        _check_split_image_names(coco, str(ann))
    if class_map is not None and class_map.side == "gt":
        check_coco_shape(coco, str(ann))
        coco = remap_ground_truth(coco, class_map, str(ann))
    return coco, source, columns, data


def _parsed_whole(data: bytes, source: Mapping[str, Any]) -> Any:
    """The GT document of :func:`_read_ground_truth`'s bytes parsed whole, annotations included (columns were
    read only without a GT-side class map, and the split's image names were checked on the same images)."""
    return parse_json_bytes(data, "ground truth", source["path"], "gt_")


def load_ground_truth(path: str | Path, split: str = "test", class_map: ClassMap | None = None) -> GroundTruth:
    """Ground truth from a COCO JSON file, or from a split directory (``annotations/<split>.json``, with the
    split's manifest read for provenance: config_hash, manifest_root_hash, dataset). The annotations go through the
    compiled reader where it takes them; a value only the per-annotation checks can name reads the file again as
    JSON (:class:`_FullReadNeeded`), so messages are the JSON path's."""
    coco, source, columns, data = _read_ground_truth(path, split, class_map, compiled=True)
    if columns is not None:
        try:
            return ground_truth_from_coco(coco, source, annotation_columns=columns)
        except _FullReadNeeded:
            coco = _parsed_whole(data, source)
    return ground_truth_from_coco(coco, source)


def select_classes(names: Mapping[int, str], classes: str, where: str) -> dict[str, int]:
    """{class name: category id} chosen by ``classes``: ``"all"`` (file order) or comma-separated names.
    Classes are chosen by name, so two categories sharing a name are refused."""
    seen: set[str] = set()
    for name in names.values():
        if name in seen:
            raise AegisError(
                f"[gt_duplicate_category_name] {where}: two categories are named {name!r}; class "
                "names must be unique to choose classes by name"
            )
        seen.add(name)
    if classes.strip() == "all":
        return {name: cid for cid, name in names.items()}
    wanted = [c.strip() for c in classes.split(",") if c.strip()]
    if not wanted:
        raise AegisError(
            f"[classes_empty] `classes` {classes!r} names no class; expected 'all' or NAME,NAME", param="classes"
        )
    by_name = {name: cid for cid, name in names.items()}
    unknown = [c for c in wanted if c not in by_name]
    if unknown:
        raise AegisError(
            f"[classes_unknown] {where}: no category named {_first(unknown)} (known: {_first(list(by_name), 8)})"
        )
    if len(set(wanted)) != len(wanted):
        raise AegisError(f"[classes_repeated] `classes` {classes!r} names a class twice", param="classes")
    return {c: by_name[c] for c in wanted}


def ground_truth_by_class(
    coco: Any,
    source: Mapping[str, Any] | None,
    classes: str,
    annotation_columns: tuple[np.ndarray, ...] | None = None,
) -> dict[str, GroundTruth]:
    """{class name: GroundTruth of that category} for multi-class scoring; ``classes`` as :func:`select_classes`;
    ``annotation_columns`` as in :func:`ground_truth_from_coco`."""
    where = str((source or {}).get("path", "ground truth"))
    chosen = select_classes(category_names(coco, where), classes, where)
    by_id = ground_truths_from_coco(coco, source, list(chosen.values()), annotation_columns)
    return {name: replace(by_id[cid], source={**by_id[cid].source, "class": name}) for name, cid in chosen.items()}


def load_ground_truth_by_class(
    path: str | Path, classes: str, split: str = "test", class_map: ClassMap | None = None
) -> dict[str, GroundTruth]:
    """:func:`ground_truth_by_class` of a COCO file or split directory (GT-side class map applied first)."""
    coco, source, columns, data = _read_ground_truth(path, split, class_map, compiled=True)
    if columns is not None:
        try:
            return ground_truth_by_class(coco, source, classes, columns)
        except _FullReadNeeded:
            coco = _parsed_whole(data, source)
    return ground_truth_by_class(coco, source, classes)


def suite_config_of(gt: GroundTruth) -> SuiteConfig:
    """The suite config the GT's conditions belong to: the split's (see :func:`aegis_data.split.reader.config_for`,
    which refuses when that config is not available) for GT read from a split directory, else the installed one."""
    return config_for(gt.split_dir, gt.config_hash)


# --- predictions ---------------------------------------------------------------------------------------
class _IdResolver:
    """Maps prediction image ids (int or str) to GT rows, following the module docstring's rules."""

    def __init__(self, gt: GroundTruth):
        self.by_id = {int(i): r for r, i in enumerate(gt.image_ids)}
        self.by_stem: dict[str, int] = {}
        self.by_num_stem: dict[int, int] = {}
        clashing: set[int] = set()
        for r, name in enumerate(gt.file_names):
            stem = _stem(name)
            self.by_stem.setdefault(stem, r)
            if stem.isdecimal():  # what int() reads; isdigit also takes "²"
                n = int(stem)
                if n in self.by_num_stem and self.by_num_stem[n] != r:
                    clashing.add(n)  # "1" and "01" both map to 1
                self.by_num_stem.setdefault(n, r)
        self.clashing = clashing
        self.file_names = gt.file_names
        self._int_rows: dict[int, int] | None = None

    def int_rows(self) -> dict[int, int]:
        """{integer id: the row it resolves to, or -2 when ambiguous} for every integer id :meth:`candidates` finds
        anything for (any other integer is unknown); made once per GT, so a sweep's files look ids up directly."""
        if self._int_rows is None:
            self._int_rows = {key: _resolved_row(self.candidates(key)) for key in chain(self.by_id, self.by_num_stem)}
        return self._int_rows

    def candidates(self, image_id: Any) -> set[int]:
        found: set[int] = set()
        if isinstance(image_id, int):
            if image_id in self.by_id:
                found.add(self.by_id[image_id])
            if image_id in self.by_num_stem:
                found.add(self.by_num_stem[image_id])
                if image_id in self.clashing:
                    found.add(-2)  # marks a stem clash: always ambiguous
        else:
            if image_id in self.by_stem:
                found.add(self.by_stem[image_id])
            if image_id.isdecimal():
                n = int(image_id)
                if n in self.by_id:
                    found.add(self.by_id[n])
                if n in self.by_num_stem and not found:
                    found.add(self.by_num_stem[n])
        return found


def _stem(name: str) -> str:
    """``PurePath(name).stem``, without making a path of a plain file name (a GT lists thousands of them)."""
    if name == "." or "/" in name or "\\" in name or ":" in name:
        return PurePath(name).stem
    dot = name.rfind(".")
    return name[:dot] if 0 < dot < len(name) - 1 else name


# The last GT's resolver: a sweep resolves every condition against one GT (GroundTruth is frozen; a weak reference,
# so the cache never keeps a GT alive). Built and read on the thread that resolves (scoring resolves in order).
_LAST_RESOLVER: tuple[weakref.ref[GroundTruth], _IdResolver] | None = None


def _resolver_of(gt: GroundTruth) -> _IdResolver:
    global _LAST_RESOLVER
    if _LAST_RESOLVER is not None and _LAST_RESOLVER[0]() is gt:
        return _LAST_RESOLVER[1]
    resolver = _IdResolver(gt)
    _LAST_RESOLVER = (weakref.ref(gt), resolver)
    return resolver


def _validated_arrays(
    obj: Any, where: str, warnings: list[str]
) -> tuple[list, list, np.ndarray, np.ndarray, np.ndarray]:
    """(entries, image id keys, category ids, boxes, scores) of a parsed COCO results list, every value checked."""
    if isinstance(obj, dict) and "annotations" in obj:
        obj = obj["annotations"]
    if not isinstance(obj, list):
        got = (
            f"an object with keys {_first(sorted(obj), 4)}" if isinstance(obj, dict) else f"a JSON {type(obj).__name__}"
        )
        raise AegisError(
            f"[wrong_type] {where}: expected a COCO results list "
            f'[{{image_id, category_id, bbox, score}}, ...] or {{"annotations": [...]}}; got {got}'
        )
    n = len(obj)
    try:  # the fast path: one comprehension per key (files hold millions of detections)
        image_keys = [e["image_id"] for e in obj]
        cats = [e["category_id"] for e in obj]
        bboxes = [e["bbox"] for e in obj]
        scores = [e["score"] for e in obj]
    except (KeyError, TypeError):
        _raise_entry_problem(obj, where)
    boxes = _numeric_array(bboxes, where, "bbox", (4,))
    score_arr = _numeric_array(scores, where, "score", ())
    cat_arr = _category_array(cats, where)
    bad: np.ndarray | list[int] = np.flatnonzero(~np.isfinite(boxes).all(axis=1)) if n else []
    if len(bad):
        raise AegisError(
            f"[bbox_nonfinite] {where}: {len(bad)} boxes have NaN/inf values or numbers beyond float64 "
            f"(first at entry {bad[0]}: {bboxes[bad[0]]!r:.80})"
        )
    bad = np.flatnonzero((boxes[:, 2] < 0) | (boxes[:, 3] < 0)) if n else []
    if len(bad):
        raise AegisError(
            f"[bbox_negative] {where}: {len(bad)} boxes have negative width or height "
            f"(first at entry {bad[0]}: {bboxes[bad[0]]!r:.80}); expected [x, y, w, h] with w, h >= 0"
        )
    bad = np.flatnonzero(~np.isfinite(score_arr) | (score_arr < 0) | (score_arr > 1)) if n else []
    if len(bad):
        raise AegisError(
            f"[score_out_of_range] {where}: {len(bad)} scores are outside [0, 1] "
            f"(first at entry {bad[0]}: {scores[bad[0]]!r:.40})"
        )
    zero = int(((boxes[:, 2] == 0) | (boxes[:, 3] == 0)).sum()) if n else 0
    if zero:
        warnings.append(f"[bbox_degenerate] {zero} boxes have zero width or height; they can never match")
    return obj, image_keys, cat_arr, boxes, score_arr


def _warn_duplicates(det_image: np.ndarray, boxes: np.ndarray, scores: np.ndarray, warnings: list[str]) -> None:
    kernels = _inputs_kernels()
    if kernels is None:
        repeats = _duplicate_rows_py(det_image, boxes, scores)
    else:
        repeats = kernels.duplicate_rows(
            np.ascontiguousarray(det_image, dtype=np.int64),
            np.ascontiguousarray(boxes, dtype=np.float64),
            np.ascontiguousarray(scores, dtype=np.float64),
        )
    if repeats:
        warnings.append(
            f"[duplicate_detection] {repeats} detections repeat an identical "
            "detection (same image, box and score); kept as given"
        )


def _duplicate_rows_py(det_image: np.ndarray, boxes: np.ndarray, scores: np.ndarray) -> int:
    """How many detections repeat an earlier one bit for bit (image row as a float64, box, score). The definition
    of the compiled ``duplicate_rows``."""
    if not len(scores):
        return 0
    # Rows as opaque 48-byte records: identical detections have bitwise equal floats. A 64-bit mix of each
    # row's words settles the common case (all mixes distinct: no two rows are equal) without sorting the
    # records; only when mixes repeat does one sort of the records count the identical rows.
    table = np.ascontiguousarray(np.column_stack([det_image.astype(np.float64), boxes, scores]))
    words = table.view(np.uint64)
    mix = np.zeros(len(table), dtype=np.uint64)
    for k in range(words.shape[1]):
        mix = (mix ^ words[:, k]) * np.uint64(0x9E3779B97F4A7C15)
        mix ^= mix >> np.uint64(29)
    mix.sort()
    if not (mix[1:] == mix[:-1]).any():
        return 0
    return len(table) - len(np.unique(table.view(np.dtype((np.void, table.shape[1] * 8))).ravel()))


def detections_from_results(obj: Any, gt: GroundTruth, source: Mapping[str, Any] | None = None) -> Detections:
    """Validate a parsed COCO results list (or ``{"annotations": [...]}``) and resolve it against ``gt``.

    Raises AegisError with a finding code on the first invalid finding; returns warnings in
    ``source["warnings"]``. An empty list is valid (zero detections).
    """
    source = dict(source or {})
    where = str(source.get("path", "predictions"))
    warnings: list[str] = []
    entries, image_keys, cat_arr, boxes, score_arr = _validated_arrays(obj, where, warnings)
    keep, offset = _resolve_categories(cat_arr, gt, where, warnings)
    det_image = _resolve_image_ids(entries, image_keys, gt, where)
    return _detections(det_image, keep, offset, boxes, score_arr, warnings, source)


def _detections(
    det_image: np.ndarray,
    keep: np.ndarray,
    offset: int,
    boxes: np.ndarray,
    score_arr: np.ndarray,
    warnings: list[str],
    source: dict[str, Any],
) -> Detections:
    if not keep.all():  # all kept (the usual file): the arrays are the caller's own copies already
        det_image, boxes, score_arr = det_image[keep], boxes[keep], score_arr[keep]
    _warn_duplicates(det_image, boxes, score_arr, warnings)
    source.update(warnings=warnings, n_detections=int(len(score_arr)), category_offset=offset)
    return Detections(det_image=det_image, boxes=boxes, scores=score_arr, source=source)


def _detections_from_parsed(columns: Columns | None, gt: GroundTruth, source: Mapping[str, Any]) -> Detections | None:
    """:func:`detections_from_results` of a results file's columns (the compiled reader's); None when there are
    none (the reader is absent or the file is not in the plain form it reads) or a value needs the entries
    themselves (one the checks refuse, an image id only a file_name settles): the caller then reads the file as
    JSON and takes the full path, which accepts it or names the problem in the same words as always. Errors found
    on the columns (an unknown category or image id) are the full path's, raised at the same step."""
    if columns is None:
        return None
    image_ids, cat_arr = (np.frombuffer(c, dtype=np.int64) for c in columns[:2])
    boxes = np.frombuffer(columns[2], dtype=np.float64).reshape(-1, 4)
    score_arr = np.frombuffer(columns[3], dtype=np.float64)
    # the checks of _validated_arrays that can fail on such values: failing ones take the full path
    if (boxes[:, 2:] < 0).any() or (score_arr < 0).any() or (score_arr > 1).any():
        return None
    source = dict(source)
    where = str(source.get("path", "predictions"))
    warnings: list[str] = []
    zero = int(((boxes[:, 2] == 0) | (boxes[:, 3] == 0)).sum())
    if zero:
        warnings.append(f"[bbox_degenerate] {zero} boxes have zero width or height; they can never match")
    keep, offset = _resolve_categories(cat_arr, gt, where, warnings)
    names = columns[4]
    if names is None:
        det_image = _resolve_image_ids(None, None, gt, where, int_keys=image_ids)
    else:  # file-name stems: the column indexes the distinct names
        resolver = _resolver_of(gt)
        rows = np.array([_resolved_row(resolver.candidates(name)) for name in names], dtype=np.int64)
        if (rows < 0).any():  # an unknown or ambiguous name: the full path names it in its own words
            return None
        det_image = rows[image_ids]
    if (det_image == -2).any():
        return None
    return _detections(det_image, keep, offset, boxes.copy(), score_arr.copy(), warnings, source)


def detections_by_class(
    obj: Any, gts: Mapping[str, GroundTruth], source: Mapping[str, Any] | None = None
) -> dict[str, Detections]:
    """{class name: Detections} of one results list for multi-class scoring, parsed and resolved once.

    ``gts`` are the per-class GroundTruths of one file (same image table). Every category id must be one of the
    GT's; detections of classes not in ``gts`` are dropped with a ``[category_other]`` warning. 0-based ids are
    not guessed with several classes: map them with a class map (``parse_class_map("0:1,1:2", side="preds")``).
    """
    if not gts:
        raise AegisError("[classes_empty] no classes to score")
    source = dict(source or {})
    where = str(source.get("path", "predictions"))
    warnings: list[str] = []
    entries, image_keys, cat_arr, boxes, score_arr = _validated_arrays(obj, where, warnings)
    first = next(iter(gts.values()))
    known = set(int(c) for c in first.source.get("category_ids", ()))
    present = set(np.unique(cat_arr).tolist())
    unknown = sorted(present - known)
    if unknown:
        hint = " (0-based class indices? map them with `class_map`)" if 0 in unknown else ""
        raise AegisError(
            f"[category_unknown] {where}: category_id {_first(unknown)} not in the ground truth "
            f"(known: {_first(sorted(known), 5)}){hint}"
        )
    det_image = _resolve_image_ids(entries, image_keys, first, where)
    _warn_duplicates(det_image, boxes, score_arr, warnings)
    wanted = {int(gt.category_id) for gt in gts.values()}
    other = sorted(present - wanted)
    if other:
        warnings.append(
            f"[category_other] dropped {int(np.isin(cat_arr, other).sum())} detections of GT "
            f"categories not scored {_first(other)}"
        )
    out = {}
    for name, gt in gts.items():
        keep = cat_arr == gt.category_id
        out[name] = Detections(
            det_image=det_image[keep],
            boxes=boxes[keep],
            scores=score_arr[keep],
            source={
                **source,
                "warnings": warnings,
                "n_detections": int(keep.sum()),
                "category_offset": 0,
                "category_id": int(gt.category_id),
            },
        )
    return out


def _raise_entry_problem(obj: list, where: str) -> NoReturn:
    """Find and report the first entry that is not an object or lacks a required key."""
    for k, e in enumerate(obj):
        if not isinstance(e, dict):
            raise AegisError(f"[entry_type] {where}: entry {k} is a {type(e).__name__}, expected an object")
        missing = [key for key in REQUIRED_DET_KEYS if key not in e]
        if missing:
            count = sum(1 for x in obj if isinstance(x, dict) and any(key not in x for key in REQUIRED_DET_KEYS))
            raise AegisError(
                f"[missing_key] {where}: entry {k} lacks {', '.join(map(repr, missing))} "
                f"({count} entries incomplete; each needs {', '.join(REQUIRED_DET_KEYS)})"
            )
    raise AegisError(f"[entry_type] {where}: malformed entries")  # pragma: no cover - the loop always finds one


def _numeric_array(values: list, where: str, key: str, shape: tuple[int, ...]) -> np.ndarray:
    """values as a float64 array of shape (n, *shape), or AegisError naming the first bad entry."""
    n = len(values)
    if n == 0:
        return np.zeros((0, *shape), dtype=np.float64)
    try:
        arr = np.array(values)
    except (ValueError, TypeError):
        arr = None
    # np.array silently turns True into 1.0 next to floats; JSON booleans are not numbers here.
    if (
        arr is not None
        and arr.shape == (n, *shape)
        and arr.dtype.kind in "iuf"
        and (shape or bool not in set(map(type, values)))
    ):
        return arr.astype(np.float64)
    for k, v in enumerate(values):
        ok = (
            (all(_is_number(x) for x in v) and len(v) == shape[0])
            if shape and isinstance(v, list)
            else (not shape and _is_number(v))
        )
        if not ok:
            code = "bbox_invalid" if key == "bbox" else "score_not_numeric"
            want = "a list of 4 numbers [x, y, w, h]" if key == "bbox" else "a number in [0, 1]"
            raise AegisError(f"[{code}] {where}: entry {k} has {key} {v!r:.80}; expected {want}")
    # Numbers numpy kept as objects (very large ints): those beyond float64 become inf, refused by the caller.
    if shape:
        return np.array([[as_float(x) for x in v] for v in values], dtype=np.float64)
    return np.array([as_float(v) for v in values], dtype=np.float64)


def _category_array(cats: list, where: str) -> np.ndarray:
    try:
        arr = np.array(cats)
    except (ValueError, TypeError, OverflowError):
        arr = None
    if arr is not None and arr.shape == (len(cats),) and arr.dtype.kind in "iu":
        return arr.astype(np.int64)
    if arr is not None and len(cats) == 0:
        return np.zeros(0, dtype=np.int64)
    for k, c in enumerate(cats):
        if not isinstance(c, int) or isinstance(c, bool) or not -(2**63) <= c < 2**63:
            raise AegisError(f"[category_invalid] {where}: entry {k} has category_id {c!r:.40}; expected an integer")
    return np.array(cats, dtype=np.int64)


def _resolve_categories(cats: np.ndarray, gt: GroundTruth, where: str, warnings: list[str]) -> tuple[np.ndarray, int]:
    """(keep mask, offset applied): person detections kept; 0-based single-class ids accepted; others refused."""
    if len(cats) == 0:
        return np.ones(0, dtype=bool), 0
    person = int(gt.category_id)
    known = set(int(c) for c in (gt.category_ids or (person,)))
    lo, hi = int(cats.min()), int(cats.max())
    present = {lo} if lo == hi else set(np.unique(cats).tolist())  # one category: no sort
    if present == {person}:
        return np.ones(len(cats), dtype=bool), 0
    if present == {0} and person == 1 and 0 not in known:
        warnings.append(
            "[category_zero_based] all detections have category_id 0 and the GT person id is 1; "
            "read as 0-based class indices"
        )
        return np.ones(len(cats), dtype=bool), 1
    if person == 1 and 0 not in known and 0 in present and person in present:
        raise AegisError(
            f"[category_mixed] {where}: detections mix category_id 0 and 1; expected all {person} "
            "(the GT person id) or all 0 (0-based class index)"
        )
    unknown = sorted(present - known)
    if unknown:
        raise AegisError(
            f"[category_unknown] {where}: category_id {_first(unknown)} not in the ground truth "
            f"(known: {_first(sorted(known), 5)}; person is {person})"
        )
    keep = cats == person
    warnings.append(
        f"[category_other] dropped {int((~keep).sum())} detections of non-person GT categories "
        f"{_first(sorted(present - {person}))}"
    )
    return keep, 0


def _resolve_image_ids(
    entries: list | None, keys: list | None, gt: GroundTruth, where: str, int_keys: np.ndarray | None = None
) -> np.ndarray:
    """(D,) GT rows of the detections' image ids; resolves each distinct id once. ``int_keys``: the ids as an int64
    array instead of ``keys`` (the compiled reader's column; without ``entries``, -2 marks a row whose id is
    ambiguous, which only an entry's file_name can settle)."""
    resolver = _resolver_of(gt)
    n = len(int_keys) if int_keys is not None else len(keys or ())
    rows = np.empty(n, dtype=np.int64)
    if not n:
        return rows
    # Group entries by their distinct id; (type, value) so that 7 and "7" stay apart.
    first_of: dict[tuple[type, Any], int] = {}
    key_array = int_keys
    kind: type = int
    if keys is not None:
        types = set(map(type, keys))
        if len(types) == 1 and types <= {int, str}:  # the common case, vectorised
            kind = types.pop()
            try:
                key_array = np.array(keys, dtype=np.int64 if kind is int else str)
            except OverflowError:  # ints beyond int64 cannot be GT ids; the loop below reports them as unknown
                key_array = None
    if key_array is not None:
        values, group = _distinct(key_array)
        distinct = values.tolist()
    else:
        assert keys is not None
        group = np.empty(len(keys), dtype=np.int64)
        for k, key in enumerate(keys):
            if isinstance(key, bool) or not isinstance(key, (int, str)):
                raise AegisError(
                    f"[image_id_type] {where}: entry {k} has image_id {key!r}; expected an integer "
                    "id or a file-name stem string"
                )
            group[k] = first_of.setdefault((type(key), key), len(first_of))
        distinct = [key for _, key in first_of]
    if kind is int and key_array is not None:  # one lookup per distinct id in the GT's table
        table = resolver.int_rows()
        resolved = np.array([table.get(key, -1) for key in distinct], dtype=np.int64)
    else:  # -2: settled per entry by its file_name below
        resolved = np.array([_resolved_row(resolver.candidates(key)) for key in distinct], dtype=np.int64)
    if (resolved == -1).any():
        unknown = [key for key, row in zip(distinct, resolved.tolist()) if row == -1]
        n_dets = int(np.isin(group, np.flatnonzero(resolved == -1)).sum())
        raise AegisError(
            f"[image_id_unknown] {where}: {n_dets} detections reference {len(unknown)} image ids not "
            f"in the ground truth (first: {_first(unknown)}); expected GT image ids or "
            "file-name stems"
        )
    rows[:] = resolved[group]
    if entries is None or keys is None:
        return rows
    for ambiguous in np.flatnonzero(rows == -2):  # only entries with an ambiguous id need their file_name
        key = keys[ambiguous]
        rows[ambiguous] = _disambiguate(
            entries[ambiguous], key, resolver.candidates(key), resolver, where, int(ambiguous)
        )
    return rows


def _resolved_row(found: set[int]) -> int:
    """The row of an id whose :meth:`_IdResolver.candidates` are ``found``: -1 for none, -2 when ambiguous."""
    if len(found) == 1 and -2 not in found:
        return found.pop()
    return -2 if found else -1


def _distinct(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_inverse=True)`` (sorted distinct values, each key's index among them), for integer
    keys spanning a small range by a table instead of a sort (a file holds 100 detections per image id)."""
    if keys.dtype.kind == "i" and len(keys):
        lo, hi = int(keys.min()), int(keys.max())
        if hi - lo <= 4 * len(keys) + 1024:
            offsets = keys - lo
            present = np.zeros(hi - lo + 1, dtype=bool)
            present[offsets] = True
            distinct = np.flatnonzero(present)
            index = np.zeros(hi - lo + 1, dtype=np.int64)
            index[distinct] = np.arange(len(distinct), dtype=np.int64)
            return distinct + lo, index[offsets]
    values, group = np.unique(keys, return_inverse=True)
    return values, group.reshape(-1).astype(np.int64)


def _disambiguate(entry: Mapping, key: Any, found: set[int], resolver: _IdResolver, where: str, k: int) -> int:
    found.discard(-2)
    name = entry.get("file_name")
    if isinstance(name, str):
        row = resolver.by_stem.get(PurePath(name).stem)
        if row is not None and row in found:
            return row
    names = sorted(resolver.file_names[r] for r in found)
    raise AegisError(
        f"[image_id_ambiguous] {where}: entry {k} has image_id {key!r}, which matches several GT "
        f"images ({_first(names)}) by id and by file-name stem; give each entry the 'file_name' of its image "
        "(Ultralytics writes it), or build the split again: a split built now gives an image whose stem is a "
        "number that number as its id, so both conventions name the same image"
    )


def _read_predictions_doc(path: Path, class_map: ClassMap | None) -> tuple[Any, str]:
    obj, sha = read_json_file(path, "predictions")
    if class_map is not None and class_map.side == "preds":
        obj = remap_predictions(obj, class_map, str(path))
    return obj, sha


def load_predictions(path: str | Path, gt: GroundTruth, class_map: ClassMap | None = None) -> Detections:
    """Detections from a COCO results JSON file, validated and resolved against ``gt`` (a prediction-side class
    map applied first).

    ``source`` carries path, sha256 and warnings for provenance.
    """
    return resolve_predictions(read_predictions_file(path, class_map is None), gt, class_map)


def resolve_predictions(read: PredictionsFile, gt: GroundTruth, class_map: ClassMap | None = None) -> Detections:
    """:func:`load_predictions` of a file :func:`read_predictions_file` read (with ``parse`` when ``class_map`` is
    None: the columns it then holds, or None when the compiled reader declined the file, are not parsed again)."""
    path, data = read.path, read.data
    source = {"path": str(path), "sha256": read.sha256}
    if class_map is None:
        dets = _detections_from_parsed(read.columns, gt, source)
        if dets is not None:
            return dets
    obj = parse_json_bytes(data, "predictions", path)
    if class_map is not None and class_map.side == "preds":
        obj = remap_predictions(obj, class_map, str(path))
    return detections_from_results(obj, gt, source)


def load_predictions_by_class(
    path: str | Path, gts: Mapping[str, GroundTruth], class_map: ClassMap | None = None
) -> dict[str, Detections]:
    """:func:`detections_by_class` of a COCO results JSON file."""
    path = Path(path)
    obj, sha = _read_predictions_doc(path, class_map)
    return detections_by_class(obj, gts, {"path": str(path), "sha256": sha})
