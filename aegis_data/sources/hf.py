"""A Hugging Face ``datasets`` dataset with an image column and COCO-style objects.

``source``: a directory written by ``save_to_disk`` (Dataset or DatasetDict), a local directory that
``load_dataset`` understands (imagefolder with metadata.jsonl, parquet files), or a hub id for users who are
online (the download is the ``datasets`` library's, cached by it). Columns: ``image`` (option
``image_column``), ``objects`` (option ``objects_column``) with ``bbox`` = [[x, y, w, h], ...] in pixels and
``category`` = [...]. Option ``categories`` picks person category ids or ClassLabel names; default: every
object is a person. Image ids: column ``image_id`` when present, else the image file stem, else
``<split>-<row>``; when ids repeat across the HF splits loaded, every id is prefixed ``<hf split>-``. HF splits map
train -> train, validation/valid/val -> val, test -> test; option ``split`` takes one HF split and puts it in our "test"
(or use ``target_split``); ``val_fraction`` carves.

Record paths are ``hf:<source>::<hf split>::<row>``; ``read_image`` reloads the dataset (cached per process)
and decodes the stored bytes, so the pixels are the dataset's own.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from aegis_data.errors import AegisError
from aegis_data.files.imageio import DEFAULT_MAX_PIXELS, decode_image_bytes, header_size
from aegis_data.sources._common import (
    SPLITS,
    check_box,
    check_options,
    opt_fraction,
    opt_ids,
    opt_max_pixels,
    safe_id,
    xywh_to_xyxy,
)
from aegis_data.sources._dataset import SourceDataset, build_dataset
from aegis_data.sources._groups import apply_groups, groups_description
from aegis_data.sources.frame_hash import frame_hash
from aegis_data.sources.records import Record
from aegis_data.sources.yolo import carve_val

NAME = "hf"
OPTIONS = (
    "split",
    "target_split",
    "image_column",
    "objects_column",
    "categories",
    "val_fraction",
    "max_pixels",
    "groups",
)
_SPLIT_MAP = {
    "train": "train",
    "training": "train",
    "validation": "val",
    "valid": "val",
    "val": "val",
    "dev": "val",
    "test": "test",
    "testing": "test",
}


@functools.lru_cache(maxsize=8)
def _open(source: str):
    """The dataset (Dataset or DatasetDict) at ``source``; cached per process."""
    try:
        import datasets
    except ImportError as exc:  # a core dependency; this would be a broken install
        raise AegisError(f"the 'datasets' package is needed for dataset 'hf' ({exc})") from None
    path = Path(source).expanduser()
    try:
        if path.is_dir() and (
            (path / "dataset_info.json").exists()
            or (path / "dataset_dict.json").exists()
            or (path / "state.json").exists()
        ):
            return datasets.load_from_disk(str(path))
        if path.is_dir():
            return datasets.load_dataset(str(path))
        if path.exists():
            raise AegisError(f"HF source {source} is a file; expected a dataset directory or a hub id")
        if source.startswith((".", "/", "~")) or source.count("/") > 1 or "\\" in source:
            raise AegisError(f"HF dataset directory not found: {source}")
        return datasets.load_dataset(source)
    except AegisError:
        raise
    except Exception as exc:  # the datasets library raises many types; report one line
        raise AegisError(
            f"cannot load Hugging Face dataset {source!r}: {type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}"
        ) from None


def _splits_of(ds) -> dict[str, Any]:
    import datasets

    if isinstance(ds, datasets.DatasetDict):
        return dict(ds)
    if isinstance(ds, datasets.Dataset):
        return {"train": ds} if ds.split is None else {str(ds.split): ds}
    raise AegisError(f"unsupported Hugging Face dataset type {type(ds).__name__} (expected Dataset or DatasetDict)")


def _raw_images(ds, column: str):
    import datasets

    if column not in ds.column_names:
        raise AegisError(
            f"HF dataset has no image column {column!r} (columns: {', '.join(ds.column_names)}); pass image_column="
        )
    if isinstance(ds.features[column], datasets.Image):
        return ds.cast_column(column, datasets.Image(decode=False))
    raise AegisError(f"HF column {column!r} is {type(ds.features[column]).__name__}, expected an Image feature")


def _image_bytes(value: Any, where: str) -> bytes:
    if isinstance(value, dict):
        if value.get("bytes"):
            return value["bytes"]
        if value.get("path"):
            try:
                return Path(value["path"]).read_bytes()
            except OSError as exc:
                raise AegisError(f"{where}: image file {value['path']} unreadable ({exc.strerror})") from None
    raise AegisError(f"{where}: the image cell holds neither bytes nor a readable path")


def _category_names(feature: Any) -> list[str] | None:
    """ClassLabel names of the objects' category, when the dataset declares them."""
    inner = feature.feature if hasattr(feature, "feature") else feature
    cat = inner.get("category") if isinstance(inner, dict) else None
    cat = getattr(cat, "feature", cat)
    return list(cat.names) if cat is not None and hasattr(cat, "names") else None


@functools.lru_cache(maxsize=16)
def _raw_split(source: str, split: str, column: str):
    """One split with its image column left undecoded; cached per process."""
    splits = _splits_of(_open(source))
    if split not in splits:
        raise AegisError(f"HF dataset {source} has no split {split!r}")
    return _raw_images(splits[split], column)


def image_bytes(uri: str) -> bytes:
    """The stored (encoded) image bytes of an ``hf:<source>::<split>::<row>::<column>`` record path."""
    try:
        source, split, row, column = uri[len("hf:") :].rsplit("::", 3)
        row_i = int(row)
    except ValueError:
        raise AegisError(
            f"not an HF image reference: {uri!r} (expected hf:<source>::<split>::<row>::<column>)"
        ) from None
    ds = _raw_split(source, split, column)
    if not 0 <= row_i < len(ds):
        raise AegisError(f"{uri}: row {row_i} is outside the split (0..{len(ds) - 1})")
    return _image_bytes(ds[row_i][column], uri)


def read_image(uri: str, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Decode the image of an HF record path to HxWx3 uint8 RGB."""
    return decode_image_bytes(image_bytes(uri), what=uri, max_pixels=max_pixels)


@functools.lru_cache(maxsize=1 << 16)
def image_frame_hash(uri: str) -> int | None:
    """:func:`~aegis_data.sources.frame_hash.frame_hash` of an HF record's image, remembered per record path (its
    split is cached per process too): the frames rule and the audit of one build decode each image once between
    them."""
    return frame_hash(read_image(uri))


def load(source: Any, options: Mapping[str, Any]) -> SourceDataset:
    check_options(NAME, options, OPTIONS)
    src = str(source)
    image_col = str(options.get("image_column", "image"))
    objects_col = str(options.get("objects_column", "objects"))
    categories = opt_ids(options, "categories")
    val_fraction = opt_fraction(options, "val_fraction", 0.0)
    max_pixels = opt_max_pixels(options)
    available = _splits_of(_open(src))
    chosen = options.get("split")
    target = options.get("target_split")
    plan = _split_plan(src, available, chosen, target)
    stats: Counter = Counter()
    records = []
    for hf_split, ours in plan.items():
        records += _split_records(
            src, available[hf_split], hf_split, ours, image_col, objects_col, categories, max_pixels, stats
        )
    if not records:
        raise AegisError(f"HF dataset {src} holds no rows")
    if len({r.image_id for r in records}) < len(records) and len(plan) > 1:
        # File stems repeat across HF splits (e.g. 0001.jpg in train and test): name ids by split too.
        records = [dataclasses.replace(r, image_id=f"{safe_id(r.meta['hf_split'])}-{r.image_id}") for r in records]
    records, group_rule = apply_groups(records, options.get("groups"), None, lambda r: image_frame_hash(r.path))
    if val_fraction:
        records = _carve_val(records, val_fraction)
    description = {
        "adapter": NAME,
        # a hub id as given; a local folder by its name only (the manifest must not depend on where it lives)
        "root": Path(src).name if Path(src).exists() else src,
        "options": {
            "split": chosen,
            "target_split": target,
            "image_column": image_col,
            "objects_column": objects_col,
            "categories": sorted(categories) if categories else None,
            "val_fraction": val_fraction,
            "max_pixels": max_pixels,
        },
        "split_map": plan,
        "ignored_objects_by_category": {k.split(":", 1)[1]: v for k, v in sorted(stats.items())},
        "rules": {
            "categories": "every object is a person" if categories is None else f"categories {sorted(categories)}",
            "bbox": "COCO [x, y, w, h] in pixels",
            **groups_description(group_rule),
        },
    }
    return build_dataset(NAME, description, records)


def _split_plan(src: str, available: Mapping[str, Any], chosen: Any, target: Any) -> dict[str, str]:
    """HF split name -> our split: the one chosen (as ``target`` or test), else every split by its usual role."""
    if target is not None and target not in SPLITS:
        raise AegisError(f"option target_split={target!r}: expected one of {', '.join(SPLITS)}")
    if chosen is not None:
        if chosen not in available:
            raise AegisError(f"HF dataset {src} has no split {chosen!r} (splits: {', '.join(available)})")
        return {chosen: target or "test"}
    plan = {}
    for name in available:
        ours = _SPLIT_MAP.get(name.lower())
        if ours is None:
            raise AegisError(f"HF split {name!r} has no obvious role (train/validation/test); pass split=<name>")
        plan[name] = ours
    return plan


def _split_records(
    src: str,
    ds: Any,
    hf_split: str,
    ours: str,
    image_col: str,
    objects_col: str,
    categories: frozenset[str] | None,
    max_pixels: int,
    stats: Counter,
) -> list[Record]:
    """One record per row of one HF split (image size from the header, person boxes checked)."""
    if objects_col not in ds.column_names:
        raise AegisError(
            f"HF dataset has no objects column {objects_col!r} (columns: {', '.join(ds.column_names)}); "
            "pass objects_column="
        )
    names = _category_names(ds.features[objects_col])
    raw = _raw_images(ds, image_col)
    id_col = "image_id" if "image_id" in ds.column_names else None
    records = []
    for row, item in enumerate(raw):
        where = f"{src} [{hf_split} row {row}]"
        w, h = _row_size(item[image_col], where, max_pixels)
        boxes = _row_boxes(item.get(objects_col) or {}, names, categories, w, h, where, stats)
        if id_col is not None:
            iid = safe_id(str(item[id_col]))
        elif isinstance(item[image_col], dict) and item[image_col].get("path"):
            iid = safe_id(Path(item[image_col]["path"]).stem)
        else:
            iid = f"{safe_id(hf_split)}-{row:06d}"
        records.append(
            Record(
                iid,
                f"hf:{src}::{hf_split}::{row}::{image_col}",
                w,
                h,
                tuple(boxes),
                split=ours,
                meta={"hf_split": hf_split, "row": row},
            )
        )
    return records


def _row_size(value: Any, where: str, max_pixels: int) -> tuple[int, int]:
    """(width, height) of a row's image: from the header when possible, else by decoding (under max_pixels)."""
    data = _image_bytes(value, where)
    size = header_size(data)
    if size is None:
        rgb = decode_image_bytes(data, what=where, max_pixels=max_pixels)
        size = (rgb.shape[1], rgb.shape[0])
    w, h = size
    if w * h > max_pixels:
        raise AegisError(f"{where}: image is {w}x{h}, above the limit of {max_pixels:,} pixels")
    return w, h


def _row_boxes(
    objs: Any, names: Any, categories: frozenset[str] | None, w: int, h: int, where: str, stats: Counter
) -> list:
    """A row's person boxes (xyxy, checked against the frame); other categories are counted in ``stats``."""
    if isinstance(objs, list):  # a list of {bbox, category} rows
        bboxes = [o.get("bbox") for o in objs]
        cats = [o.get("category") for o in objs]
    else:
        bboxes = list(objs.get("bbox") or [])
        cats = list(objs.get("category") or [None] * len(bboxes))
    if len(cats) != len(bboxes):
        raise AegisError(f"{where}: objects have {len(bboxes)} bbox entries but {len(cats)} categories")
    boxes = []
    for k, (bb, cat) in enumerate(zip(bboxes, cats)):
        label = names[cat] if names is not None and isinstance(cat, int) and 0 <= cat < len(names) else cat
        if categories is not None and str(cat) not in categories and str(label) not in categories:
            stats[f"ignored_category:{label}"] += 1
            continue
        bwhere = f"{where} object {k}"
        boxes.append(check_box(*xywh_to_xyxy(bb, bwhere), w, h, bwhere))
    return boxes


def _carve_val(records: list[Record], val_fraction: float) -> list[Record]:
    """A validation share carved from train (from test when the source has test only), by keyed order."""
    grouped: dict[str, list[Record]] = {}
    for r in records:
        grouped.setdefault(r.split, []).append(r)
    base = "test" if "test" in grouped and "train" not in grouped else "train"
    return [r for s, rs in grouped.items() if s != base for r in rs] + carve_val(
        grouped.get(base, []), val_fraction, salt="hf-val"
    )
