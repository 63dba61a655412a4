"""The adapters' common result type and its invariants."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from aegis_data.errors import AegisError
from aegis_data.files.layout import DATASET_NAME, SAFE_IMAGE_ID
from aegis_data.sources._common import SPLITS
from aegis_data.sources.records import Record

_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# Adapters of one published dataset keep its name whatever folder holds it, so a rebuild of HERIDAL-C or SARD-C
# from ~/data/HERIDAL stays 'heridal' (and its root hash that of the published benchmark).
NAMED_DATASETS = frozenset({"synthetic", "heridal", "sard"})


@dataclass(frozen=True)
class SourceDataset:
    """A loaded source: records per split plus a JSON-serialisable description for the manifest.

    name: adapter name ("heridal", "synthetic", ...).
    description: adapter, root path, options, counts and the rules applied (JSON-serialisable).
    splits: keys among "train", "val", "test"; each list sorted by image_id. Image ids are unique across
        the whole dataset and match ``[A-Za-z0-9._-]+`` without a leading dot.
    warnings: one line each about what the adapter dropped or doubted (the CLI prints them); not part of the
        description, so they never reach the manifest.
    """

    name: str
    description: Mapping[str, Any]
    splits: Mapping[str, list[Record]]
    warnings: tuple[str, ...] = ()

    @property
    def default_name(self) -> str:
        """The dataset's name when none is given: for the generic adapters (coco, yolo, voc, hf) the source
        folder's name (a Hugging Face id's last part) made safe by :data:`DATASET_NAME`; the adapter's name for
        the synthetic set, HERIDAL and SARD, or when nothing safe is left."""
        root = self.description.get("root")
        if self.name in NAMED_DATASETS or not isinstance(root, str):
            return self.name
        cleaned = _NAME_UNSAFE.sub("_", root.rstrip("/").rsplit("/", 1)[-1]).strip("._-")[:64]
        return cleaned if DATASET_NAME.match(cleaned) else self.name

    def records(self) -> list[Record]:
        """All records, split by split in the order test, val, train."""
        return [r for s in ("test", "val", "train") for r in self.splits.get(s, [])]


def build_dataset(
    name: str,
    description: dict[str, Any],
    records: Iterable[Record],
    *,
    roots: Iterable[Path] = (),
    follow_links: bool = False,
    warnings: Iterable[str] = (),
) -> SourceDataset:
    """Group records by their ``split``, sort by image id, and enforce the id invariants.

    ``roots``: the folders a file source reads (its root, an explicitly given image folder). An image whose
    path resolves outside all of them -- a symlink leaving the source -- is skipped and counted as
    ``links_outside_root_skipped`` unless ``follow_links``.
    """
    records = list(records)
    real_roots = [Path(r).resolve() for r in roots]
    if real_roots and not follow_links:
        kept = [r for r in records if _inside_any(r.path, real_roots)]
        if len(kept) != len(records):
            description = {**description, "links_outside_root_skipped": len(records) - len(kept)}
            if not kept:
                raise AegisError(
                    f"every image of the source is a link leaving its folder ({real_roots[0]}); "
                    f"set `follow_links` to read them",
                    param="follow_links",
                )
        records = kept
    by_split: dict[str, list[Record]] = {}
    seen: dict[str, str] = {}
    for r in records:
        if r.split not in SPLITS:
            raise AegisError(f"record {r.image_id!r} has split {r.split!r}; expected one of {', '.join(SPLITS)}")
        if not SAFE_IMAGE_ID.match(r.image_id):
            raise AegisError(
                f"image id {r.image_id!r} is not filesystem-safe (expected [A-Za-z0-9._-], no leading dot)"
            )
        if r.image_id in seen:
            raise AegisError(
                f"image id {r.image_id!r} occurs twice ({seen[r.image_id]} and {r.path}); image ids must be unique"
            )
        seen[r.image_id] = r.path
        by_split.setdefault(r.split, []).append(r)
    splits = {s: sorted(by_split[s], key=lambda r: r.image_id) for s in SPLITS if s in by_split}
    desc = dict(description)
    desc.setdefault("adapter", name)
    desc["counts"] = {s: {"images": len(rs), "boxes": sum(len(r.boxes) for r in rs)} for s, rs in splits.items()}
    return SourceDataset(name=name, description=desc, splits=splits, warnings=tuple(warnings))


def _inside_any(path: str, roots: list[Path]) -> bool:
    real = Path(path).resolve()
    return any(real == r or r in real.parents for r in roots)


def with_split(record: Record, split: str) -> Record:
    return replace(record, split=split)
