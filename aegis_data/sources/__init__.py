"""Source adapters: turn a dataset on disk (or the built-in synthetic set) into records per split.

``load_source(dataset, source=..., **options) -> SourceDataset`` is the one entry point; ``read_rgb(record)``
decodes a record's pixels wherever they come from. See docs/DATA.md for layouts, options and split rules.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np

from aegis_data.errors import AegisError
from aegis_data.files.imageio import DEFAULT_MAX_PIXELS
from aegis_data.sources._common import PERSON_NAMES
from aegis_data.sources._dataset import SourceDataset
from aegis_data.sources.records import Record

# name -> module implementing ``load(source, options) -> SourceDataset`` and ``OPTIONS``.
_ADAPTERS = {
    "synthetic": "aegis_data.sources.synthetic",
    "heridal": "aegis_data.sources.heridal",
    "sard": "aegis_data.sources.sard",
    "coco": "aegis_data.sources.coco",
    "yolo": "aegis_data.sources.yolo",
    "voc": "aegis_data.sources.voc",
    "hf": "aegis_data.sources.hf",
}
DATASETS: tuple[str, ...] = tuple(_ADAPTERS)

__all__ = [
    "DATASETS",
    "PERSON_NAMES",
    "SourceDataset",
    "adapter_options",
    "load_source",
    "parse_option_pairs",
    "read_rgb",
]


def _adapter(dataset: str):
    if dataset not in _ADAPTERS:
        raise AegisError(f"unknown dataset {dataset!r}; expected one of {', '.join(DATASETS)}")
    return importlib.import_module(_ADAPTERS[dataset])


def adapter_options(dataset: str) -> tuple[str, ...]:
    """Option names the adapter accepts."""
    return tuple(_adapter(dataset).OPTIONS)


def load_source(dataset: str, *, source: str | Path | None = None, **options: Any) -> SourceDataset:
    """Load a dataset through its adapter.

    dataset: one of ``DATASETS``. source: the dataset root (or image root, or HF path/id); ignored by
    ``synthetic``. options: adapter-specific (strings are accepted and converted, so CLI ``key=value``
    pairs can be passed straight through). Raises AegisError for a missing or malformed source.
    """
    mod = _adapter(dataset)
    no_source = source is None or str(source) == ""
    # YOLO folders given directly (images= and labels=) need no root.
    folders_given = dataset == "yolo" and bool(options.get("images")) and bool(options.get("labels"))
    if dataset != "synthetic" and no_source and not folders_given:
        hint = " (or, for yolo, both `images` and `labels`)" if dataset == "yolo" else ""
        raise AegisError(f"dataset {dataset!r} needs a source (the dataset root or path){hint}; none was given")
    return mod.load(source, {k: v for k, v in options.items() if v is not None})


def read_rgb(record: Record, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Decoded HxWx3 uint8 RGB pixels of a record; synthetic records are regenerated deterministically.

    AegisError when the file is missing/undecodable, above max_pixels, or its size differs from the
    record's width x height.
    """
    path = record.path
    if path.startswith("synthetic:"):
        from aegis_data.sources import synthetic

        if record.width * record.height > max_pixels:
            raise AegisError(
                f"synthetic image {record.image_id} is {record.width}x{record.height}, "
                f"above the limit of {max_pixels:,} pixels"
            )
        rgb = synthetic.render_rgb(path)
    elif path.startswith("hf:"):
        from aegis_data.sources import hf

        rgb = hf.read_image(path, max_pixels=max_pixels)
    else:
        from aegis_data.files import imageio

        rgb = imageio.read_rgb(path, max_pixels=max_pixels)
    if rgb.shape[1] != record.width or rgb.shape[0] != record.height:
        raise AegisError(
            f"image {record.path} decodes to {rgb.shape[1]}x{rgb.shape[0]}, but its record says "
            f"{record.width}x{record.height}"
        )
    return rgb


def parse_option_pairs(pairs: list[str] | tuple[str, ...] | None) -> dict[str, str]:
    """CLI ``key=value`` strings -> a dict (later keys win); AegisError for a pair without '='."""
    out: dict[str, str] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise AegisError(f"option {pair!r} is not key=value (e.g. val_fraction=0.1)")
        out[key] = value.strip()
    return out
