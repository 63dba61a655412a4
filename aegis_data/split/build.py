"""Building a frozen split on disk (layout: docs/SPLITS.md): records -> decoded source -> corruption engine -> PNG
files.

Flow: ``build_splits`` validates and plans (pure), then renders one *unit* per source image -- decode once,
write ``clean`` and every corrupted condition -- in worker processes; the parent collects each unit's file
hashes into a journal, writes the COCO/YOLO annotation files, and writes ``manifest.json`` last. A directory
without a manifest is therefore always an unfinished build.

Resume: ``<out>/.aegis-build/journal.jsonl`` holds one JSON line per finished unit (file hashes), appended
and fsynced by the parent only after the unit's files are on disk. A re-run decodes every source again, skips
every file whose bytes still hash to the journalled value while its source still decodes to the journalled
pixels, and re-renders the rest (all files of a changed source); ``state.json`` records the source folder, and
a resume from another folder is refused. Each file is written atomically (temp file + rename), so a build
killed at any point (even ``kill -9``, of the parent alone or of the whole group) and re-run produces the
same files and manifest as an uninterrupted one. The previous manifest is removed only once a file is
rewritten.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aegis_data import __version__
from aegis_data.conditions import SEVERITIES, check_severities, parse_condition
from aegis_data.engine.config import SuiteConfig, load_config
from aegis_data.engine.config_schema import MAX_SEED
from aegis_data.engine.corruptor import SuiteCorruptor
from aegis_data.engine.scale import FRAME_SCALE, Scale, suite_call_scale
from aegis_data.engine.scene import (
    SIDECAR_SUFFIX,
    Scene,
    estimate_scene,
    found_sidecar,
    read_sidecar,
    read_water_mask,
    scene_digest,
    sidecar_path,
    water_mask_digest,
)
from aegis_data.errors import AegisError
from aegis_data.executors import Placement, map_units
from aegis_data.files.imageio import (
    DEFAULT_MAX_PIXELS,
    encode_png,
    file_sha256,
    pixel_sha256,
    write_bytes_atomic,
)
from aegis_data.files.layout import (
    ANNOTATIONS_DIR,
    DATASET_NAME,
    MANIFEST_NAME,
    PERSON_CATEGORY,
    SAFE_IMAGE_ID,
    SPLIT_DIRS,
    SPLIT_NAMES,
    SUITE_CONFIG_NAME,
    YOLO_DIR,
    image_file_name,
    water_mask_relpath,
)
from aegis_data.files.png import check_png_writer
from aegis_data.files.readers import read_json
from aegis_data.files.rgb import check_rgb_image
from aegis_data.sources.records import Record
from aegis_data.sources.yolo_labels import yolo_label_text as yolo_lines
from aegis_data.split.manifest import (
    box_xywh,
    build_manifest,
    canonical_json,
    gt_digest,
    identity_of,
    load_manifest,
    write_manifest,
)

JOURNAL_DIR = ".aegis-build"
STATE_NAME = "state.json"
JOURNAL_NAME = "journal.jsonl"
NO_TRAIN_LIST = "no_train.txt"  # the empty list ``train:`` names when neither train nor val was built
_BOX_TOLERANCE = 1e-6  # boxes may touch the frame edge up to float noise

ReadImage = Callable[..., np.ndarray]  # (record, max_pixels) -> HxWx3 uint8 RGB
Corrupt = Callable[..., np.ndarray]  # (image, name, severity, image_id, seed) -> HxWx3 uint8 RGB


# ----------------------------------------------------------------------------------------------------------
# Plan (pure)


@dataclass(frozen=True)
class Unit:
    """One source image and the condition files to produce from it; with a generation-2 suite, the facts of the
    image's scene sidecar (``aegis_data.engine.scene``) and the folder it came from (for its water mask)."""

    split: str
    record: Record
    conditions: tuple[str, ...]
    sidecar: Mapping[str, Any] | None = None
    sidecar_dir: str | None = None


@dataclass(frozen=True)
class BuildPlan:
    dataset: str
    source: Mapping[str, Any]
    suite: str
    config_hash: str
    seed: int
    conditions: tuple[str, ...]  # test-split conditions, canonical order
    records: Mapping[str, tuple[Record, ...]]  # split -> records in image_id order (after limit)
    units: tuple[Unit, ...]
    scale: Scale = FRAME_SCALE  # the length unit of the *_px parameters (aegis_data.engine.scale)

    @property
    def identity(self) -> dict:
        return json.loads(canonical_json(identity_of({**self.__dict__, "scale": self.scale.identity()})))


@dataclass(frozen=True)
class BuildProgress:
    """Passed to the progress callback after each finished source image."""

    done: int  # source images finished
    total: int
    files_written: int
    files_skipped: int
    megapixels: float  # pixels rendered so far (all conditions), in MP


@dataclass(frozen=True)
class BuildResult:
    out: Path
    manifest_path: Path
    root_hash: str
    conditions: tuple[str, ...]
    images: Mapping[str, int]  # split -> number of source images
    files_written: int
    files_skipped: int
    seconds: float
    megapixels: float  # pixels of every rendered (not skipped) image file, MP
    seconds_corrupt: float  # summed over workers
    seconds_encode: float  # PNG encode, summed over workers
    seconds_read: float  # source decode, summed over workers
    seconds_hash: float = 0.0  # pixel and file SHA-256, summed over workers
    seconds_write: float = 0.0  # atomic write (temp file, fsync, rename), summed over workers
    sources_changed: int = 0  # source images whose decoded pixels differ from the journal (re-rendered)
    scale: Scale = FRAME_SCALE  # the length unit the corruptions were rendered with
    warnings: tuple[str, ...] = ()  # what the build found but did not refuse (near-identical images across splits)

    @property
    def images_per_s(self) -> float:
        """Image files rendered and written per second of wall time (skipped files not counted)."""
        return self.files_written / self.seconds if self.seconds > 0 else 0.0

    @property
    def mp_per_s(self) -> float:
        """Megapixels of rendered image files per second of wall time."""
        return self.megapixels / self.seconds if self.seconds > 0 else 0.0


def resolve_selection(
    config: SuiteConfig, corruptions: Sequence[str] | None, severities: Iterable[int]
) -> tuple[str, ...]:
    """Validate the corruption/severity selection and return the test conditions in canonical order."""
    wanted = config.select(corruptions)
    names = tuple(n for n in config.names if n in wanted)  # canonical order
    return tuple(config.conditions(names, check_severities(severities)))


def split_conditions(split: str, conditions: tuple[str, ...]) -> tuple[str, ...]:
    """The conditions written for ``split``: all of them for test, the clean image only for val and train."""
    return conditions if split == "test" else ("clean",)


def _check_record(r: Record, split: str) -> None:
    if not isinstance(r.image_id, str) or not SAFE_IMAGE_ID.match(r.image_id):
        raise AegisError(
            f"{split} image id {r.image_id!r} is not a safe file stem (expected letters, digits, '.', '_', '-')"
        )
    if int(r.width) <= 0 or int(r.height) <= 0:
        raise AegisError(f"{split} image {r.image_id}: size {r.width}x{r.height}; expected positive width and height")
    for b in r.boxes:
        x0, y0, x1, y1 = (float(v) for v in b)
        if not all(np.isfinite((x0, y0, x1, y1))) or not (x1 > x0 and y1 > y0):
            raise AegisError(f"{split} image {r.image_id}: box {list(b)} is empty or not finite; expected x1>x0, y1>y0")
        t = _BOX_TOLERANCE
        if x0 < -t or y0 < -t or x1 > r.width + t or y1 > r.height + t:
            raise AegisError(f"{split} image {r.image_id}: box {list(b)} leaves the {r.width}x{r.height} frame")


def plan_build(
    dataset: Any,
    config: SuiteConfig,
    *,
    corruptions: Sequence[str] | None = None,
    severities: Iterable[int] = SEVERITIES,
    limit: int | None = None,
    with_train: bool = False,
    seed: int | None = None,
    scale: str | Scale | None = None,
    person_px: float | None = None,
    gsd_cm_per_px: float | None = None,
    scene_dir: str | Path | None = None,
    name: str | None = None,
) -> BuildPlan:
    """Decide what to write (pure but for reading scene sidecars). ``dataset`` is a SourceDataset (name,
    description, splits).

    scale / person_px / gsd_cm_per_px: the length unit (``aegis_data.engine.scale.resolve_scale``; scale None: the
    suite config's mode, frame for aegis-v1); under object scale without a given unit, it is the unit the suite
    config declares, else the median person box of the test records (before ``limit``, so a ``limit`` build
    corrupts its images exactly as the full build does).
    scene_dir: where a generation-2 suite looks for each image's sidecar ``<stem>.scene.json`` (default: beside the
    image file); a sidecar's facts override the scene estimates and join the image's identity.
    name: the dataset's name in the manifest, annotations and score JSONs (default: the source's
    ``default_name``, its folder's name; the adapter's name for the synthetic set).
    """
    dataset_name = _dataset_name(dataset, name)
    conditions = resolve_selection(config, corruptions, severities)
    if scene_dir is not None and not config.uses_scene:
        raise AegisError(
            f"`scene_dir` gives scene sidecars, which suite {config.suite} does not read (it has no "
            f"scene model; use `suite` aegis-v2)",
            param="scene_dir",
        )
    if scene_dir is not None and not Path(scene_dir).is_dir():
        raise AegisError(f"`scene_dir` {scene_dir} is not a folder", param="scene_dir")
    # Integers only: True would read as 1 and 2.5 as 2, silently.
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 1):
        raise AegisError(f"`limit` must be at least 1, an integer; got {limit!r:.40}", param="limit")
    if seed is not None and (
        isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed <= MAX_SEED
    ):
        raise AegisError(
            f"`seed` must be an integer in [0, 2**63), as in a suite config; got {seed!r:.40}", param="seed"
        )
    splits_in = dict(getattr(dataset, "splits", {}) or {})
    unknown = [s for s in splits_in if s not in SPLIT_NAMES]
    if unknown:
        raise AegisError(f"dataset {dataset.name!r} has split(s) {unknown}; expected only {SPLIT_NAMES}")
    if not splits_in.get("test"):
        raise AegisError(f"dataset {dataset.name!r} has no test images; nothing to build")
    wanted = ["test", "val"] + (["train"] if with_train else [])
    if with_train and not splits_in.get("train"):
        raise AegisError(f"`with_train` was given but dataset {dataset.name!r} has no train images", param="with_train")
    records: dict[str, tuple[Record, ...]] = {}
    units: list[Unit] = []
    for split in wanted:
        recs = sorted(splits_in.get(split) or (), key=lambda r: r.image_id)
        if not recs:
            continue
        seen: set[str] = set()
        for r in recs:
            _check_record(r, split)
            if r.image_id in seen:
                raise AegisError(f"{split} image id {r.image_id!r} occurs twice in dataset {dataset.name!r}")
            seen.add(r.image_id)
        if limit is not None:
            recs = recs[: int(limit)]
        records[split] = tuple(recs)
        for r in recs:
            facts, where = _sidecar_of(r, scene_dir) if config.uses_scene else (None, None)
            units.append(Unit(split, r, split_conditions(split, conditions), facts, where))
    # The mode is the call's, else the suite's (frame for aegis-v1); the unit the call's, else the suite's, else
    # the median person box.
    build_scale = suite_call_scale(
        config.scale,
        scale,
        {s: splits_in.get(s) or () for s in wanted},
        person_px=person_px,
        gsd_cm_per_px=gsd_cm_per_px,
        physical_suite=config.suite if config.uses_scene else None,
    )
    return BuildPlan(
        dataset=dataset_name,
        source=json.loads(canonical_json(dict(getattr(dataset, "description", {}) or {}))),
        suite=config.suite,
        config_hash=config.config_hash,
        seed=int(config.seed if seed is None else seed),
        conditions=conditions,
        records=records,
        units=tuple(units),
        scale=build_scale,
    )


def _dataset_name(dataset: Any, name: str | None) -> str:
    """``name`` checked, or the source's default name (a stand-in dataset without one: its ``name``)."""
    if name is None:
        return str(getattr(dataset, "default_name", None) or dataset.name)
    if not isinstance(name, str) or not DATASET_NAME.match(name):
        raise AegisError(
            f"`name` must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit; got {name!r:.80}",
            param="name",
        )
    return name


def _sidecar_of(record: Record, scene_dir: str | Path | None) -> tuple[dict | None, str | None]:
    """(the checked facts of ``record``'s scene sidecar, its folder), or (None, None) when it has none."""
    if record.path.startswith(("synthetic:", "hf:")):
        if scene_dir is None:
            return None, None
        path = Path(scene_dir) / f"{record.image_id}{SIDECAR_SUFFIX}"
    else:
        path = sidecar_path(record.path, scene_dir)
    if found_sidecar(path) is None:
        return None, None
    return read_sidecar(path, confined=True), str(path.parent)


# ----------------------------------------------------------------------------------------------------------
# Annotation files (pure: records -> bytes)


# Stems at or above this are not used as ids (docs/DATA.md, "Image ids"): exact in any JSON reader, and the fresh
# ids counted on above them stay far inside int64.
_MAX_STEM_ID = 2**53


def coco_image_ids(records: Sequence[Record]) -> tuple[int, ...]:
    """The COCO ``id`` of each record (docs/DATA.md, "Image ids"), so that a detector naming an image by its GT id
    and one naming it by its file stem as an integer (Ultralytics) name the same image.

    A record whose stem is a decimal number no other stem shares (``7``, ``0042``; not ``7`` beside ``007``) gets
    that number; the others get the numbers after the largest such stem, in image id order. With no numbered stem
    (or one at or above 2**53), ids are 1..N in image id order.
    """
    numbers = [int(r.image_id) if r.image_id.isascii() and r.image_id.isdecimal() else None for r in records]
    if not any(n is not None for n in numbers) or max(n for n in numbers if n is not None) >= _MAX_STEM_ID:
        return tuple(range(1, len(records) + 1))
    counts = Counter(n for n in numbers if n is not None)
    # Fresh ids start above every numbered stem, shared ones included, so no id is another image's stem number.
    fresh = max(counts) + 1
    ids = []
    for n in numbers:
        if n is not None and counts[n] == 1:
            ids.append(n)
        else:
            ids.append(fresh)
            fresh += 1
    return tuple(ids)


def coco_ground_truth(plan: BuildPlan, split: str) -> dict:
    """COCO GT dict for one split: image ids by :func:`coco_image_ids`, images in image_id order, person =
    category 1.

    Each image carries ``stem`` and ``group`` besides the COCO fields; ``area`` is w*h; ``iscrowd`` is 0.
    """
    images, anns = [], []
    ann_id = 0
    for coco_id, r in zip(coco_image_ids(plan.records[split]), plan.records[split]):
        images.append(
            {
                "id": coco_id,
                "file_name": image_file_name(r.image_id),
                "width": int(r.width),
                "height": int(r.height),
                "stem": r.image_id,
                "group": r.group_key,
            }
        )
        for box in r.boxes:
            ann_id += 1
            x, y, w, h = box_xywh(box)
            anns.append(
                {
                    "id": ann_id,
                    "image_id": coco_id,
                    "category_id": PERSON_CATEGORY["id"],
                    "bbox": [x, y, w, h],
                    "area": w * h,
                    "iscrowd": 0,
                }
            )
    info = {
        "description": f"AegisBench {plan.dataset}-C, {split} split",
        "dataset": plan.dataset,
        "split": split,
        "suite": plan.suite,
        "config_hash": plan.config_hash,
        "seed": plan.seed,
        "version": __version__,
        "conditions": list(split_conditions(split, plan.conditions)),
    }
    return {"info": info, "licenses": [], "categories": [dict(PERSON_CATEGORY)], "images": images, "annotations": anns}


def coco_bytes(gt: Mapping[str, Any]) -> bytes:
    return (json.dumps(gt, indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def yolo_label_text(record: Record) -> str:
    """Ultralytics label lines of a record's boxes (see :func:`aegis_data.sources.yolo_labels.yolo_label_text`)."""
    return yolo_lines(record.boxes, record.width, record.height)


def yolo_files(plan: BuildPlan) -> dict[str, bytes]:
    """Relative path -> bytes of every regular YOLO file (labels of clean images, image lists, data yamls).

    Ultralytics derives a label path from an image path by replacing its last ``/images/`` component with
    ``/labels/``. The lists therefore name images through ``yolo/images/<split>`` (a symlink to ``<split>``),
    so ``yolo/images/test/fog_s1/a.png`` finds ``yolo/labels/test/fog_s1/a.txt``; ``yolo/labels/<split>/<cond>``
    are symlinks to ``clean`` (see ``link_yolo_dirs``), so labels are stored once per split.
    """
    files: dict[str, bytes] = {}
    for split, recs in plan.records.items():
        for r in recs:
            files[f"{YOLO_DIR}/labels/{split}/clean/{r.image_id}.txt"] = yolo_label_text(r).encode()
        conds = split_conditions(split, plan.conditions)
        for cond in conds:
            lines = "".join(f"./images/{split}/{cond}/{image_file_name(r.image_id)}\n" for r in recs)
            files[f"{YOLO_DIR}/{split}_{cond}.txt"] = lines.encode()
    train_list = "train_clean.txt" if "train" in plan.records else ("val_clean.txt" if "val" in plan.records else None)
    if train_list is None:
        # Without train and val, `train:` names an empty list: never the test images, which a data yaml would
        # otherwise invite someone to train on.
        files[f"{YOLO_DIR}/{NO_TRAIN_LIST}"] = b""
    for split in plan.records:
        conds = split_conditions(split, plan.conditions)
        for cond in conds:
            own = f"{split}_{cond}.txt"
            train = train_list or NO_TRAIN_LIST
            # These bytes are part of every split's manifest (root hash): the note keeps the flag it was
            # written with (test_i33_params lists it as a frozen artefact string).
            note = (
                ""
                if train_list == "train_clean.txt"
                else "  # no train split built (--with-train); clean images only"
                if train_list
                else "  # no train or val split: an empty list"
            )
            text = (
                f"# AegisBench {plan.dataset}-C, split {split}, condition {cond} (suite {plan.suite}, "
                f"config {plan.config_hash}).\n"
                f"# Usage: yolo val data=<this file>   (paths resolve relative to this file)\n"
                f"train: {train}{note}\n"
                f"val: {own}\n"
                f"test: {own}\n"
                f"nc: 1\n"
                f"names:\n  0: person\n"
            )
            files[f"{YOLO_DIR}/{split}_{cond}.yaml"] = text.encode()
    return files


def link_yolo_dirs(out: Path, plan: BuildPlan) -> None:
    """Create the relative symlinks the YOLO lists rely on (idempotent); copies labels where links fail."""
    for split in plan.records:
        _ensure_link(out / YOLO_DIR / "images" / split, Path("..") / ".." / split, copy_from=None)
        conds = split_conditions(split, plan.conditions)
        for cond in conds:
            if cond != "clean":
                _ensure_link(
                    out / YOLO_DIR / "labels" / split / cond,
                    Path("clean"),
                    copy_from=out / YOLO_DIR / "labels" / split / "clean",
                )


def _ensure_link(link: Path, target: Path, copy_from: Path | None) -> None:
    if link.is_symlink():
        if Path(os.readlink(link)) == target:
            return
        link.unlink()
    elif link.is_dir():
        shutil.rmtree(link)
    link.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.symlink(target, link, target_is_directory=True)
    except OSError as err:
        if copy_from is None:
            raise AegisError(
                f"cannot create symlink {link}; the YOLO lists need it (filesystem without symlinks?)"
            ) from err
        shutil.copytree(copy_from, link)  # e.g. Windows without symlink rights


# ----------------------------------------------------------------------------------------------------------
# Rendering one source image (runs in worker processes; must stay importable and picklable)


@dataclass(frozen=True)
class UnitTask:
    unit: Unit
    out: str
    seed: int
    max_pixels: int
    known: Mapping[str, Mapping[str, str]]  # relative path -> {"sha256", "pixel_sha256"} from the journal
    known_source: str | None
    read_image: ReadImage | None
    corrupt: Corrupt | None
    config: SuiteConfig | None = None  # the suite the default corruption renders with
    scale: Scale | None = None  # the length unit the default corruption renders with (None: frame)
    known_scene: str | None = None  # the journalled scene digest (generation 2): a changed scene re-renders all


@dataclass
class UnitResult:
    split: str
    image_id: str
    source_pixel_sha256: str
    files: dict[str, dict[str, str]] = field(default_factory=dict)  # path -> {condition, sha256, pixel_sha256}
    written: int = 0
    skipped: int = 0
    megapixels: float = 0.0
    seconds_corrupt: float = 0.0
    seconds_encode: float = 0.0
    seconds_read: float = 0.0
    seconds_hash: float = 0.0
    seconds_write: float = 0.0
    source_changed: bool = False  # the source decoded to other pixels than the journal recorded
    scene: dict | None = None  # generation 2: the image's scene record (``Scene.record``)
    water_mask: dict | None = None  # generation 2: the stored sidecar water mask {path, sha256, mask_sha256}


def unit_water_mask(unit: Unit, source: np.ndarray) -> np.ndarray | None:
    """The water mask a unit's sidecar names (read from the sidecar's folder), or None."""
    if unit.sidecar and unit.sidecar.get("water_mask"):
        return read_water_mask(Path(unit.sidecar_dir or ".") / unit.sidecar["water_mask"], *source.shape[:2])
    return None


def unit_scene(
    unit: Unit, source: np.ndarray, suite: SuiteConfig, scale: Scale | None, mask: np.ndarray | None
) -> Scene:
    """The scene of a unit's source image: estimated with the build's person unit, the suite's camera, the
    unit's sidecar with its water ``mask`` (:func:`unit_water_mask`) and its record's person boxes (the ground
    truth)."""
    if scale is None or not scale.is_object:
        raise AegisError(f"suite {suite.suite} needs an object scale (a person unit) to derive scenes")
    try:
        return estimate_scene(source, scale.unit_px, suite.camera, unit.sidecar, mask, persons=unit.record.boxes)
    except AegisError as exc:  # e.g. a sidecar's valid rectangle outside this image: say which image
        raise AegisError(f"{unit.split} image {unit.record.image_id}: {exc}") from None


def _store_water_mask(root: Path, unit: Unit, mask: np.ndarray) -> dict:
    """Write the sidecar water mask a scene used into the split (white = water, the toolkit's PNG writer; rewritten
    only when its bytes change) and return its manifest fields."""
    rel = water_mask_relpath(unit.split, unit.record.image_id)
    rgb = np.repeat((np.asarray(mask, dtype=bool).view(np.uint8) * 255)[..., None], 3, axis=2)
    data = encode_png(np.ascontiguousarray(rgb))
    path, sha = root / rel, hashlib.sha256(data).hexdigest()
    if not (path.is_file() and not path.is_symlink() and file_sha256(path) == sha):
        write_bytes_atomic(path, data)
    return {"path": rel, "sha256": sha, "mask_sha256": water_mask_digest(mask)}


def image_relpath(split: str, condition: str, image_id: str) -> str:
    return f"{split}/{condition}/{image_file_name(image_id)}"


def _default_read(record: Record, max_pixels: int) -> np.ndarray:
    from aegis_data.sources import read_rgb

    return read_rgb(record, max_pixels=max_pixels)


def render_unit(task: UnitTask) -> UnitResult:  # noqa: C901 (predates the limit; split it when it next changes)
    """Write the unit's condition files that are missing or changed; return every file's hashes.

    The source is always decoded, also on a resume where every file still matches the journal: a file is
    kept only when its bytes hash to the journalled value *and* the source still decodes to the journalled
    pixels. When the source changed, every file of the unit is rendered again (``source_changed``), so a
    resumed build equals a fresh one. The corruption always sees the full decoded frame (never a tile).
    """
    u, root = task.unit, Path(task.out)
    rec = u.record
    res = UnitResult(u.split, rec.image_id, task.known_source or "")
    todo: list[str] = []
    for cond in u.conditions:
        rel = image_relpath(u.split, cond, rec.image_id)
        k = task.known.get(rel)
        p = root / rel
        if k and task.known_source and p.is_file() and not p.is_symlink() and file_sha256(p) == k["sha256"]:
            res.files[rel] = {"condition": cond, "sha256": k["sha256"], "pixel_sha256": k["pixel_sha256"]}
            res.skipped += 1
        else:
            todo.append(cond)
    read = task.read_image or _default_read
    if task.corrupt is not None:
        corrupt = task.corrupt
    else:
        corrupt = SuiteCorruptor(task.config, task.scale)
    t_read = time.perf_counter()
    source = read(rec, task.max_pixels)
    res.seconds_read = time.perf_counter() - t_read
    check_rgb_image(source, f"source image {rec.image_id} (as the reader returned it)")
    if source.shape[:2] != (rec.height, rec.width):
        raise AegisError(
            f"source image {rec.image_id} decodes to {source.shape[1]}x{source.shape[0]} but its record says "
            f"{rec.width}x{rec.height}"
        )
    res.source_pixel_sha256 = pixel_sha256(source)
    if task.known_source and res.source_pixel_sha256 != task.known_source:
        # The source changed since those files were written: none of them can be trusted.
        res.source_changed = bool(res.skipped or task.known)
        todo, res.files, res.skipped = list(u.conditions), {}, 0
    scene = None
    suite = task.config or load_config()
    if suite.uses_scene:
        mask = unit_water_mask(u, source)
        scene = unit_scene(u, source, suite, task.scale, mask)
        res.scene = scene.record()
        if mask is not None:  # verify re-derives the scene from the split alone: it must hold the mask
            res.water_mask = _store_water_mask(root, u, mask)
        if task.known_scene is not None and scene_digest(res.scene) != task.known_scene:
            # The scene (a sidecar, the person unit) changed: every corrupted file depends on it.
            todo, res.files, res.skipped = list(u.conditions), {}, 0
    mp = source.shape[0] * source.shape[1] / 1e6
    for cond in todo:
        name, severity = parse_condition(cond)
        t0 = time.perf_counter()
        if name is None:
            img = source  # clean: the decoded source, re-encoded losslessly
        elif scene is not None and task.corrupt is None:
            img = corrupt(source, name, severity, rec.image_id, task.seed, scene=scene)
        else:
            img = corrupt(source, name, severity, rec.image_id, task.seed)
            if not (isinstance(img, np.ndarray) and img.dtype == np.uint8 and img.shape == source.shape):
                raise AegisError(
                    f"corruption {name} returned {getattr(img, 'shape', None)} "
                    f"{getattr(img, 'dtype', type(img))} for {rec.image_id}; expected {source.shape} uint8"
                )
        t1 = time.perf_counter()
        rel = image_relpath(u.split, cond, rec.image_id)
        data = encode_png(img)
        t2 = time.perf_counter()
        sha = hashlib.sha256(data).hexdigest()
        pixels = res.source_pixel_sha256 if img is source else pixel_sha256(img)  # clean: hashed above
        t3 = time.perf_counter()
        write_bytes_atomic(root / rel, data)
        res.files[rel] = {"condition": cond, "sha256": sha, "pixel_sha256": pixels}
        res.seconds_corrupt += t1 - t0
        res.seconds_encode += t2 - t1
        res.seconds_hash += t3 - t2
        res.seconds_write += time.perf_counter() - t3
        res.written += 1
        res.megapixels += mp
    if scene is not None:
        from aegis_data.engine.corruptions import condition_facts

        # The GT contract of a flood: every file of a flood condition records how deep each person stands
        # (kept files too: a pure function of the clean pixels, the scene and the suite).
        for file in res.files.values():
            name, severity = parse_condition(file["condition"])
            facts = condition_facts(source, name, severity, suite, scene) if name is not None else None
            if facts:
                file.update(facts)
    return res


# ----------------------------------------------------------------------------------------------------------
# Journal (parent only)


def _journal_key(split: str, image_id: str) -> str:
    return f"{split}/{image_id}"


def read_journal(out: Path) -> dict[str, dict]:
    """``split/image_id`` -> {"source_pixel_sha256", "files": {path: {...}}}; later lines win; a torn last line
    (a crash mid-append) is ignored."""
    path = out / JOURNAL_DIR / JOURNAL_NAME
    known: dict[str, dict] = {}
    if not path.is_file():
        return known
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            item = json.loads(line)
            _remember(
                known,
                _journal_key(item["split"], item["image_id"]),
                item["source_pixel_sha256"],
                item["files"],
                item.get("scene_sha256"),
            )
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
    return known


def _known_from_manifest(out: Path) -> dict[str, dict]:
    """Resume knowledge from a finished build's manifest (used when the journal was deleted)."""
    try:
        m = load_manifest(out / MANIFEST_NAME)
    except AegisError:
        return {}
    known: dict[str, dict] = {}
    for e in m.images():
        file = {"condition": e["condition"], "sha256": e["sha256"], "pixel_sha256": e["pixel_sha256"]}
        scene = scene_digest(e["scene"]) if isinstance(e.get("scene"), dict) else None
        _remember(known, _journal_key(e["split"], e["image_id"]), e["source_pixel_sha256"], {e["path"]: file}, scene)
    return known


def _remember(
    known: dict[str, dict],
    key: str,
    source_pixel_sha256: str,
    files: Mapping[str, Any],
    scene_sha256: str | None = None,
) -> None:
    """Merge one unit's hashes into ``known`` (see ``read_journal``); the later source (and scene) hash wins."""
    entry = known.setdefault(key, {"source_pixel_sha256": source_pixel_sha256, "files": {}})
    entry["source_pixel_sha256"] = source_pixel_sha256
    if scene_sha256 is not None:
        entry["scene_sha256"] = scene_sha256
    entry["files"].update(files)


class _Journal:
    def __init__(self, out: Path):
        self.path = out / JOURNAL_DIR / JOURNAL_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a", encoding="utf-8")
        # Start on a fresh line in case a crash left a torn one.
        if self._fh.tell() > 0:
            self._fh.write("\n")

    def append(self, res: UnitResult) -> None:
        item = {
            "split": res.split,
            "image_id": res.image_id,
            "source_pixel_sha256": res.source_pixel_sha256,
            "files": res.files,
        }
        if res.scene is not None:
            item["scene_sha256"] = scene_digest(res.scene)
        line = json.dumps(item, sort_keys=True)
        self._fh.write(line + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        self._fh.close()


# ----------------------------------------------------------------------------------------------------------
# Output directory checks


def _differences(found: Mapping[str, Any], wanted: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Dotted paths where two identities differ, e.g. ``source.options.n: 32 != 5`` (leaves only)."""
    diffs = []
    for key in sorted(set(found) | set(wanted)):
        a, b = found.get(key), wanted.get(key)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            diffs += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            diffs.append(f"{prefix}{key}: {json.dumps(a, sort_keys=True)} here vs {json.dumps(b, sort_keys=True)} now")
    return diffs


def _describe(found: Mapping[str, Any], wanted: Mapping[str, Any]) -> str:
    # Derived counts follow from the settings; name the settings first.
    diffs = sorted(_differences(found, wanted), key=lambda d: ".counts." in d)
    shown = "; ".join(d if len(d) <= 120 else d[:117] + "..." for d in diffs[:3])
    more = f" (+{len(diffs) - 3} more)" if len(diffs) > 3 else ""
    return f"dataset {found.get('dataset')!r} built with different settings ({shown}{more})"


def check_output_dir(out: Path, identity: Mapping[str, Any]) -> None:
    """Refuse a directory that holds something else: another dataset's split, or unrelated files."""
    if out.exists() and not out.is_dir():
        raise AegisError(f"`out_dir` {out} exists and is not a directory", param="out_dir")
    if not out.exists() or not any(out.iterdir()):
        return
    found = None
    manifest = out / MANIFEST_NAME
    state = out / JOURNAL_DIR / STATE_NAME
    for p in (state, manifest):
        if p.is_file():
            try:
                found = json.loads(canonical_json(identity_of(read_json(p, "build record")[0])))
            except (AegisError, AttributeError):
                raise AegisError(
                    f"{p} is unreadable; refusing to build into {out} (remove it or choose another `out_dir`)",
                    param="out_dir",
                ) from None
            if found != identity:
                raise AegisError(
                    f"refusing to build into {out}: it holds a split of {_describe(found, identity)}; "
                    "choose another `out_dir` or remove that directory",
                    param="out_dir",
                )
    if found is None:
        raise AegisError(
            f"refusing to build into {out}: the directory is not empty and holds no AegisBench build "
            f"(no {MANIFEST_NAME} or {JOURNAL_DIR}/); choose an empty or new `out_dir`",
            param="out_dir",
        )


def source_location(plan: BuildPlan) -> str | None:
    """The folder this machine reads the source images from (resolved), or None for generated sources.

    Kept in the journal's state only -- never in the manifest, which must not depend on where data lives --
    so a resume can tell that the same description now comes from another folder.
    """
    paths = [r.path for recs in plan.records.values() for r in recs if ":" not in r.path.split("/", 1)[0]]
    if not paths:
        return None
    try:
        return os.path.commonpath([str(Path(p).resolve().parent) for p in paths])
    except ValueError:  # different drives
        return None


def check_source_location(out: Path, location: str | None) -> None:
    """Refuse to resume from another source folder: the journalled files were rendered from the first one."""
    state = out / JOURNAL_DIR / STATE_NAME
    try:
        before = json.loads(state.read_text(encoding="utf-8")).get("source_location")
    except (OSError, ValueError, AttributeError):
        return
    if before is not None and location is not None and before != location:
        fix = (
            f"remove {out / JOURNAL_DIR} to re-check every image against the new one"
            if (out / MANIFEST_NAME).is_file()
            else f"remove the unfinished build {out} to start again"
        )
        raise AegisError(
            f"refusing to resume {out}: its files were rendered from source folder {before}, this run reads {location} "
            f"(same description); use that folder, or {fix}"
        )


def _remove_stale_temp_files(out: Path) -> None:
    """Delete temp files left by a killed build (``.<name>.<random>.tmp``, see imageio.write_bytes_atomic)."""
    for top in SPLIT_DIRS:
        d = out / top
        if d.is_dir():
            for p in d.rglob(".*.tmp"):
                if p.is_file() and not p.is_symlink():
                    p.unlink()
    for p in out.glob(".*.tmp"):
        if p.is_file() and not p.is_symlink():  # a user's folder that happens to end in .tmp is left alone
            p.unlink()


# ----------------------------------------------------------------------------------------------------------
# The build


def _default_audit(dataset: Any) -> Mapping[str, Any]:
    from aegis_data.sources.audit import audit_dataset

    return audit_dataset(dataset)


def _leak_summary(report: Mapping[str, Any]) -> str:
    """One phrase from the audit's ``leakage_details`` (see aegis_data.sources.audit)."""
    d = report.get("leakage_details") or {}
    parts = []
    if d.get("groups_in_several_splits"):
        ex = d.get("group_examples") or [{}]
        parts.append(
            f"{d['groups_in_several_splits']} group(s) in several splits, e.g. {ex[0].get('group')!r} in "
            f"{', '.join(ex[0].get('splits', []))}"
        )
    if d.get("duplicates_in_several_splits"):
        ex = d.get("duplicate_examples") or [{}]
        parts.append(
            f"{d['duplicates_in_several_splits']} identical image set(s) across splits, e.g. "
            f"{', '.join(ex[0].get('images', [])[:3])}"
        )
    if d.get("near_duplicates_in_several_splits"):
        ex = d.get("near_duplicate_examples") or [{}]
        shown = " ~ ".join(f"{i} ({s})" for i, s in zip(ex[0].get("images", []), ex[0].get("splits", [])))
        parts.append(
            f"{d['near_duplicates_in_several_splits']} near-identical image pair(s) across splits, e.g. {shown}"
        )
    return "; ".join(parts) or "details in the audit report"


def _render_key(task: UnitTask) -> str:
    return f"render-{task.unit.split}-{task.unit.record.image_id}"


def build_splits(
    dataset: Any,
    out_dir: str | Path,
    *,
    corruptions: Sequence[str] | None = None,
    severities: Iterable[int] = SEVERITIES,
    workers: int | None = None,
    limit: int | None = None,
    with_train: bool = False,
    seed: int | None = None,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    progress: Callable[[BuildProgress], None] | None = None,
    config: SuiteConfig | None = None,
    read_image: ReadImage | None = None,
    corrupt: Corrupt | None = None,
    audit: Callable[[Any], Mapping[str, Any]] | None = None,
    scheduler: str | None = None,
    on_cluster: Callable[[Mapping[str, Any]], None] | None = None,
    scale: str | Scale | None = None,
    person_px: float | None = None,
    gsd_cm_per_px: float | None = None,
    timeout: float | None = None,
    scene_dir: str | Path | None = None,
    name: str | None = None,
) -> BuildResult:
    """Write the frozen split of ``dataset`` (a SourceDataset) under ``out_dir`` and return a summary.

    corruptions: names to build (default all of the suite); severities: subset of 1, 2, 3.
    limit: first N images (by image_id) of each written split. workers: processes (default: all cores).
    read_image(record, max_pixels) / corrupt(image, name, severity, image_id, seed) / audit(dataset) default
    to ``aegis_data.sources.read_rgb``, ``aegis_data.engine.corruptions.apply_corruption`` and
    ``aegis_data.sources.audit.audit_dataset``; replacements must be module-level functions when workers > 1.
    config: the suite config (default: the installed one): the default corruption renders with its parameters,
    the manifest records its hash and ``<out_dir>/corruptions.yaml`` its exact bytes.
    scheduler: None (a local process pool), ``"local"`` (a Dask LocalCluster of ``workers`` processes) or the
    address of a Dask scheduler whose workers see ``out_dir`` at the same path; the manifest is the same in all
    three. on_cluster(info) is called once with the cluster's address, worker count and dashboard link.
    timeout: seconds a scheduler address has to answer (default 10). name: the dataset's name (:func:`plan_build`).
    scale: ``"frame"`` (lengths per 1000 px of each frame; the default of aegis-v1, whose suite config declares
    no ``scale``) or ``"object"`` (lengths per person unit: the
    median test person box, or ``person_px``, or the unit of ``gsd_cm_per_px``); recorded in the manifest and,
    for object scale, in the root hash (``aegis_data.engine.scale``).
    AegisError: empty source, leakage found by the audit, bad selection, or ``out_dir`` holding something else.
    """
    t_start = time.perf_counter()
    config = config or load_config()
    # Cluster workers resolve a relative path against their own working directory: send them an absolute one.
    out = Path(out_dir) if scheduler is None else Path(out_dir).resolve()
    if workers is not None and int(workers) < 1:
        raise AegisError(f"`workers` must be at least 1, got {workers}", param="workers")
    if scheduler is not None:
        from aegis_data.executors import check_scheduler, check_timeout

        check_scheduler(scheduler, workers)
        check_timeout(timeout)
    plan = plan_build(
        dataset,
        config,
        corruptions=corruptions,
        severities=severities,
        limit=limit,
        with_train=with_train,
        seed=seed,
        scale=scale,
        person_px=person_px,
        gsd_cm_per_px=gsd_cm_per_px,
        scene_dir=scene_dir,
        name=name,
    )
    warnings = _refuse_leakage(plan, (audit or _default_audit)(dataset))
    known, journalled = _prepare_output(out, plan)
    tasks = []
    for u in plan.units:
        k = known.get(_journal_key(u.split, u.record.image_id), {})
        tasks.append(
            UnitTask(
                u,
                str(out),
                plan.seed,
                int(max_pixels),
                k.get("files", {}),
                k.get("source_pixel_sha256"),
                read_image,
                corrupt,
                config,
                plan.scale if plan.scale.is_object else None,
                k.get("scene_sha256"),
            )
        )
    placement = Placement(
        workers=workers,
        scheduler=scheduler,
        timeout=timeout,
        on_cluster=on_cluster,
        shared=(out / JOURNAL_DIR / STATE_NAME, "`out_dir`"),
    )
    finished = (result for _, result in map_units(render_unit, tasks, placement, name=_render_key))
    run = _render_into_journal(out, tasks, journalled, progress, finished)
    if scheduler is not None:
        _remove_stale_temp_files(out)  # left by workers killed mid-write; their tasks were re-run elsewhere

    stages = ("corrupt", "encode", "read", "hash", "write")
    seconds_split = {k: sum(getattr(r, f"seconds_{k}") for r in run.results) for k in stages}  # _finish drops results
    manifest = _write_outputs(out, plan, run.results, config)
    return BuildResult(
        out=out,
        manifest_path=out / MANIFEST_NAME,
        root_hash=manifest["root_hash"],
        conditions=plan.conditions,
        images={s: len(r) for s, r in plan.records.items()},
        files_written=run.written,
        files_skipped=run.skipped,
        seconds=time.perf_counter() - t_start,
        megapixels=run.megapixels,
        seconds_corrupt=seconds_split["corrupt"],
        seconds_encode=seconds_split["encode"],
        seconds_read=seconds_split["read"],
        seconds_hash=seconds_split["hash"],
        seconds_write=seconds_split["write"],
        sources_changed=run.sources_changed,
        scale=plan.scale,
        warnings=warnings,
    )


def _refuse_leakage(plan: BuildPlan, report: Mapping[str, Any]) -> tuple[str, ...]:
    """Refuse a build whose splits share a group or byte-identical images; near-identical pairs across splits (a
    hash match, and possibly the source's own fixed split, which no `groups` can move) are a warning line."""
    d = report.get("leakage_details") or {}
    if d.get("groups_in_several_splits") or d.get("duplicates_in_several_splits"):
        raise AegisError(
            f"refusing to build {plan.dataset!r}: the audit found leakage between splits ({_leak_summary(report)}); "
            f"fix the source split first, or keep each clip in one split by declaring `groups` (a file of "
            f"stem,group lines, or frames for numbered video frames; docs/DATA.md)",
            param="groups",
        )
    if report.get("leakage"):
        return (
            f"[near_duplicates_across_splits] {_leak_summary(report)}: consecutive frames of one clip in two splits "
            f"make the test set easier than it looks; keep each clip in one split by declaring `groups` (a file of "
            f"stem,group lines, or frames for numbered video frames; docs/DATA.md), or check the pairs with "
            f"'aegis audit'",
        )
    return ()


def _prepare_output(out: Path, plan: BuildPlan) -> tuple[dict[str, dict], dict[str, dict]]:
    """Check the writer and the output directory, then mark it as a build in progress; returns (everything known
    from an earlier manifest and the journal, the journal alone)."""
    check_png_writer()  # before anything is written: a writer that misses its known answer must not make a reference
    identity = plan.identity
    check_output_dir(out, identity)
    out.mkdir(parents=True, exist_ok=True)
    known = _known_from_manifest(out)
    journalled = read_journal(out)
    for key, val in journalled.items():
        _remember(known, key, val["source_pixel_sha256"], val["files"], val.get("scene_sha256"))
    location = source_location(plan)
    check_source_location(out, location)
    _remove_stale_temp_files(out)
    state = {**identity, "source_location": location}
    write_bytes_atomic(out / JOURNAL_DIR / STATE_NAME, (json.dumps(state, sort_keys=True, indent=2) + "\n").encode())
    return known, journalled


@dataclass
class _RenderRun:
    results: list[UnitResult] = field(default_factory=list)
    written: int = 0
    skipped: int = 0
    megapixels: float = 0.0
    sources_changed: int = 0


def _render_into_journal(
    out: Path,
    tasks: list[UnitTask],
    journalled: Mapping[str, Any],
    progress: Callable[[BuildProgress], None] | None,
    finished: Iterable[UnitResult],
) -> _RenderRun:
    """Journal every finished unit (``finished`` yields them as workers complete) and report progress."""
    run = _RenderRun()
    journal = _Journal(out)
    try:
        for res in finished:
            if res.written:
                # A file of the previous build was rewritten: its manifest no longer describes this directory.
                # Until then it stays, so a re-run that fails early (or changes nothing) never leaves a split
                # without one.
                (out / MANIFEST_NAME).unlink(missing_ok=True)
            run.sources_changed += res.source_changed
            if res.written or _journal_key(res.split, res.image_id) not in journalled:
                journal.append(res)  # a fully skipped unit is already in the journal: keep it from growing
            run.results.append(res)
            run.written += res.written
            run.skipped += res.skipped
            run.megapixels += res.megapixels
            if progress is not None:
                progress(BuildProgress(len(run.results), len(tasks), run.written, run.skipped, run.megapixels))
    except BrokenProcessPool:
        raise AegisError(
            f"a worker process died while building {out} (killed, or out of memory?); the images finished so far "
            f"are kept: re-run the same command to resume, with fewer `workers` if memory is short",
            param="workers",
        ) from None
    finally:
        journal.close()
    return run


def _write_outputs(out: Path, plan: BuildPlan, results: list[UnitResult], config: SuiteConfig) -> dict:
    """Annotations, YOLO view, the suite config copy and, last, the manifest (its presence means complete)."""
    entries = _finish(out, plan, results)
    # The exact suite config bytes, named (and so checked) by the manifest's config_hash: readers of the split
    # take families, order and parameters from here, not from whatever suite is installed.
    _write_if_changed(out / SUITE_CONFIG_NAME, config.raw or Path(config.path).read_bytes())
    manifest = build_manifest(
        dataset=plan.dataset,
        source=plan.source,
        suite=plan.suite,
        config_hash=plan.config_hash,
        seed=plan.seed,
        conditions=plan.conditions,
        splits={s: len(r) for s, r in plan.records.items()},
        entries=entries,
        scale=plan.scale.identity(),
    )
    write_manifest(out / MANIFEST_NAME, manifest)
    return manifest


def _write_if_changed(path: Path, data: bytes) -> None:
    try:
        if path.read_bytes() == data:
            return
    except FileNotFoundError:
        pass
    write_bytes_atomic(path, data)


def _finish(out: Path, plan: BuildPlan, results: list[UnitResult]) -> list[dict]:
    """Write annotation and YOLO files; return every manifest entry."""
    by_key = {_journal_key(r.split, r.image_id): r for r in results}
    results.clear()  # each result is dropped once its entries exist, so both are never held in full at once
    entries: list[dict] = []
    for split, recs in plan.records.items():
        for coco_id, rec in zip(coco_image_ids(recs), recs):
            res = by_key.pop(_journal_key(split, rec.image_id))
            for rel, f in res.files.items():
                entry = {
                    # Interned: a condition name arrives as a fresh string with every unit's result.
                    "path": rel,
                    "kind": "image",
                    "split": split,
                    "condition": sys.intern(f["condition"]),
                    "image_id": rec.image_id,
                    "coco_id": coco_id,
                    "width": int(rec.width),
                    "height": int(rec.height),
                    "sha256": f["sha256"],
                    "pixel_sha256": f["pixel_sha256"],
                    "source_pixel_sha256": res.source_pixel_sha256,
                }
                if res.scene is not None and f["condition"] == "clean":
                    entry["scene"] = res.scene  # once per source image: the clean file's entry
                if f.get("submerged_fraction") is not None:
                    entry["submerged_fraction"] = f["submerged_fraction"]
                entries.append(entry)
            if res.water_mask is not None:
                entries.append({"kind": "water_mask", "split": split, "image_id": rec.image_id, **res.water_mask})
        gt = coco_ground_truth(plan, split)
        data = coco_bytes(gt)
        rel = f"{ANNOTATIONS_DIR}/{split}.json"
        _write_if_changed(out / rel, data)
        entries.append(
            {
                "path": rel,
                "kind": "annotations",
                "split": split,
                "sha256": hashlib.sha256(data).hexdigest(),
                "gt": {r.image_id: gt_digest(box_xywh(b) for b in r.boxes) for r in recs},
            }
        )
    for rel, data in yolo_files(plan).items():
        _write_if_changed(out / rel, data)
        entries.append({"path": rel, "kind": "yolo", "sha256": hashlib.sha256(data).hexdigest()})
    link_yolo_dirs(out, plan)
    return entries
