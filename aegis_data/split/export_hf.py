"""Exporting a frozen split as a Hugging Face ``datasets`` dataset with the PNG bytes embedded.

Output under ``out``::

    dataset/            DatasetDict.save_to_disk (splits test, validation[, train]); load with load_from_disk
    data/<split>-<condition>.parquet   the same rows as parquet, image bytes embedded, one file per condition
    README.md           dataset card: suite, config hash, manifest root hash, columns

Each row is one image file of the split: ``image`` (Image feature, PNG bytes), ``condition``, ``image_id``
(the stem), ``coco_id``, ``width``, ``height``, ``objects`` {``bbox``: [[x, y, w, h], ...] in pixels,
``category``: person = 0}. Every file's bytes are checked against the manifest while they are read, so an
export never publishes a file that ``aegis verify`` would reject.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aegis_data.errors import AegisError
from aegis_data.files.layout import MANIFEST_NAME
from aegis_data.files.readers import coco_boxes_by_stem, parse_json_bytes
from aegis_data.split.manifest import Manifest, load_manifest

HF_SPLIT_NAMES = {"test": "test", "val": "validation", "train": "train"}
# HERIDAL and SARD may not be redistributed, and neither may frames derived from them (docs/DATA.md, docs/SPLITS.md).
NOT_REDISTRIBUTABLE = frozenset({"heridal", "sard"})


@dataclass(frozen=True)
class ExportResult:
    out: Path
    dataset_dir: Path
    parquet_dir: Path
    rows: Mapping[str, int]  # HF split name -> rows (images x conditions)


def hf_features():
    from datasets import ClassLabel, Features, Image, List, Value

    return Features(
        {
            "image": Image(),
            "condition": Value("string"),
            "image_id": Value("string"),
            "coco_id": Value("int64"),
            "width": Value("int32"),
            "height": Value("int32"),
            "objects": {"bbox": List(List(Value("float64"), length=4)), "category": List(ClassLabel(names=["person"]))},
        }
    )


def _gt_by_stem(root: Path, manifest: Manifest, split: str) -> dict[str, list[list[float]]]:
    rel = f"annotations/{split}.json"
    entry = manifest.entries.get(rel)
    if entry is None:
        raise AegisError(f"{root}: the manifest lists no {rel}; expected one per exported split")
    data = (root / rel).read_bytes()
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise AegisError(f"{root / rel} does not match the manifest; run `aegis verify {root}` first")
    return coco_boxes_by_stem(parse_json_bytes(data, "COCO ground truth", root / rel), root / rel)


def _rows(root: str, entries: list[dict], boxes: dict[str, list[list[float]]]) -> Iterator[dict[str, Any]]:
    for e in entries:
        data = (Path(root) / e["path"]).read_bytes()
        if hashlib.sha256(data).hexdigest() != e["sha256"]:
            raise AegisError(f"{Path(root) / e['path']} does not match the manifest; run `aegis verify {root}` first")
        b = boxes[e["image_id"]]
        yield {
            "image": {"bytes": data, "path": e["path"]},
            "condition": e["condition"],
            "image_id": e["image_id"],
            "coco_id": e["coco_id"],
            "width": e["width"],
            "height": e["height"],
            "objects": {"bbox": b, "category": [0] * len(b)},
        }


def _condition_order(manifest: Manifest) -> dict[str, int]:
    return {c: i for i, c in enumerate(manifest.data.get("conditions") or ["clean"])}


def dataset_card(manifest: Manifest, rows: Mapping[str, int]) -> str:
    d = manifest.data
    files = "\n".join(f"  - split: {s}\n    path: data/{s}-*.parquet" for s in rows)
    return (
        f"---\nconfigs:\n- config_name: default\n  data_files:\n{files}\n---\n\n"
        f"# {d['dataset']}-C (AegisBench frozen split)\n\n"
        f"Corruption suite `{d['suite']}` (config `{d['config_hash']}`, seed {d['seed']}); manifest root hash "
        f"`{d['root_hash']}`. One row per image file: `condition` is `clean` or `<corruption>_s<k>`; "
        f"`objects.bbox` are COCO `[x, y, w, h]` pixels, identical for every condition. Rows: "
        + ", ".join(f"{s} {n}" for s, n in rows.items())
        + ".\n\nCheck a local copy with `aegis verify DIR --against manifest.json`.\n"
    )


def export_split(root: str | Path, out_dir: str | Path) -> ExportResult:
    """Write the split under ``root`` (must hold a manifest) as a DatasetDict and as parquet under ``out_dir``."""
    import datasets.utils as hf_tqdm
    from datasets import Dataset, DatasetDict
    from datasets.exceptions import DatasetGenerationError

    root, out = Path(root), Path(out_dir)
    manifest = load_manifest(root / MANIFEST_NAME)
    if out.resolve() == root.resolve() or root.resolve() in out.resolve().parents:
        raise AegisError(f"`out_dir` {out} is inside the split {root}; choose a directory outside it", param="out_dir")
    if out.exists() and any(out.iterdir()):
        raise AegisError(f"`out_dir` {out} exists and is not empty; choose a new directory", param="out_dir")
    order = _condition_order(manifest)
    images = manifest.images()
    features = hf_features()
    out.parent.mkdir(parents=True, exist_ok=True)
    # Everything is written into a staging folder beside ``out`` and renamed at the end: no half export.
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    final, out = out, stage
    cache = Path(tempfile.mkdtemp(prefix=".hf-cache-", dir=stage))
    done = False
    rows: dict[str, int] = {}
    bars_were_on = not hf_tqdm.are_progress_bars_disabled()
    hf_tqdm.disable_progress_bars()  # one line per shard otherwise; the CLI prints its own summary
    try:
        splits = {}
        for split in ("test", "val", "train"):
            entries = sorted(
                (e for e in images if e["split"] == split),
                key=lambda e: (order.get(e["condition"], len(order)), e["coco_id"]),
            )
            if not entries:
                continue
            boxes = _gt_by_stem(root, manifest, split)
            name = HF_SPLIT_NAMES[split]
            try:
                ds = Dataset.from_generator(
                    _rows,
                    features=features,
                    cache_dir=str(cache),
                    split=name,
                    gen_kwargs={"root": str(root), "entries": entries, "boxes": boxes},
                    fingerprint=hashlib.sha256(f"{manifest.root_hash}:{split}".encode()).hexdigest()[:16],
                )
            except DatasetGenerationError as exc:
                # datasets wraps errors raised by the generator; surface our one-line message.
                if isinstance(exc.__cause__, (AegisError, OSError)):
                    raise exc.__cause__ from None
                raise
            splits[name] = ds
            rows[name] = len(ds)
            start = 0
            while start < len(entries):  # entries are grouped by condition: one contiguous slice each
                cond = entries[start]["condition"]
                stop = start
                while stop < len(entries) and entries[stop]["condition"] == cond:
                    stop += 1
                ds.select(range(start, stop)).to_parquet(str(out / "data" / f"{name}-{cond}.parquet"))
                start = stop
        DatasetDict(splits).save_to_disk(str(out / "dataset"))
        (out / "README.md").write_text(dataset_card(manifest, rows), encoding="utf-8")
        shutil.copyfile(root / MANIFEST_NAME, out / MANIFEST_NAME)
        shutil.rmtree(cache, ignore_errors=True)
        if final.exists():
            final.rmdir()  # checked empty above
        os.replace(stage, final)
        done = True
    finally:
        if not done:
            shutil.rmtree(stage, ignore_errors=True)
        if bars_were_on:
            hf_tqdm.enable_progress_bars()
    return ExportResult(out=final, dataset_dir=final / "dataset", parquet_dir=final / "data", rows=rows)


def push_split(export_dir: str | Path, repo_id: str, api: Any) -> str:
    """Upload an ``export_split`` directory (parquet files, card, manifest) to a HF dataset repo.

    ``api`` is an ``huggingface_hub.HfApi``-like object (``create_repo``, ``upload_folder``); tests pass a fake.
    Refuses datasets whose licence forbids redistribution (HERIDAL, SARD). Returns the repo URL.
    """
    export_dir = Path(export_dir)
    manifest = load_manifest(export_dir / MANIFEST_NAME)
    dataset = str(manifest.data.get("dataset", "")).lower()
    if dataset in NOT_REDISTRIBUTABLE:
        raise AegisError(
            f"refusing to push {dataset}-C: the {dataset.upper()} licence forbids redistribution; publish the "
            f"manifest instead (others rebuild with `aegis build-splits` and check it with `aegis verify`)"
        )
    if "/" not in repo_id or repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise AegisError(f"`repo_id` expects a repo id like 'user/name', got {repo_id!r}", param="repo_id")
    if not (export_dir / "data").is_dir():
        raise AegisError(f"{export_dir} holds no data/ folder; expected the output of `aegis export-hf`")
    api.create_repo(repo_id, repo_type="dataset", exist_ok=True)
    api.upload_folder(
        repo_id=repo_id,
        repo_type="dataset",
        folder_path=str(export_dir),
        allow_patterns=["data/*.parquet", "README.md", MANIFEST_NAME],
        commit_message=f"AegisBench {manifest.data.get('dataset')}-C, manifest root {manifest.root_hash[:12]}, "
        f"suite config {manifest.data.get('config_hash')}",
    )
    return f"https://huggingface.co/datasets/{repo_id}"
