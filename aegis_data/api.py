"""The data side in one module: sources, the corruption engine and its suites, frozen splits, their verification.

Every ``aegis`` data command (``list``, ``corrupt``, ``grid``, ``calibrate``, ``realism``, ``audit``,
``build-splits``, ``verify``, ``export-hf``) is parsing and rendering around one function here, so a new option
is one parameter of the CLI command and one of its function. Functions take parameters and return typed results;
bad input raises :class:`~aegis_data.errors.AegisError` whose message names the parameter in backticks (the CLI
prints the flag). Importing this module is light: each function loads its room on first call, and the names
re-exported from the rooms below load on first use (PEP 562). docs/API.md shows one runnable example per task.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from aegis_data.errors import AegisError
from aegis_data.exports import lazy_exports
from aegis_data.files.outputs import check_output_dirs, check_outputs

if TYPE_CHECKING:  # the types of the results below, for readers and type checkers only
    from aegis_data.engine.calibration import CalibrationTable, Violation
    from aegis_data.engine.config import SuiteConfig
    from aegis_data.engine.realism import RealismReport
    from aegis_data.engine.scale import Scale
    from aegis_data.sources import SourceDataset
    from aegis_data.split.export_hf import ExportResult

PathLike = str | Path

__all__ = [
    "AegisError",
    "PathLike",
    "check_outputs",
    "check_output_dirs",
    "write_json",
    "source_options",
    "open_source",
    "audit_source",
    "describe_suite",
    "choose_scale",
    "list_suite",
    "corrupt_file",
    "CorruptResult",
    "grid_file",
    "GridResult",
    "calibrate",
    "Calibration",
    "realism",
    "export_hf",
    "push_hf",
]

# Names re-exported unchanged from the room that defines them -> that module (loaded on first use).
_EXPORTS = {
    "__version__": "aegis_data",
    "apply_corruption": "aegis_data.engine.corruptions",
    "corruption_names": "aegis_data.engine.corruptions",
    "load_config": "aegis_data.engine.config",
    "SEVERITIES": "aegis_data.conditions",
    "check_severity": "aegis_data.conditions",
    "condition_id": "aegis_data.conditions",
    "parse_condition": "aegis_data.conditions",
    "SuiteConfig": "aegis_data.engine.config",
    "Scale": "aegis_data.engine.scale",
    "load_source": "aegis_data.sources",
    "SourceDataset": "aegis_data.sources",
    "build_splits": "aegis_data.split.build",
    "BuildResult": "aegis_data.split.build",
    "BuildProgress": "aegis_data.split.build",
    "verify_split": "aegis_data.split.verify",
    "VerifyReport": "aegis_data.split.verify",
    "load_split": "aegis_data.split.reader",
    "FrozenSplit": "aegis_data.split.reader",
    "ExportResult": "aegis_data.split.export_hf",
    "DisasterAugment": "aegis_data.augment.transform",
    "load_policy": "aegis_data.augment.transform",
    "CalibrationTable": "aegis_data.engine.calibration",
    "VISIBILITY_FLOOR": "aegis_data.engine.calibration",
    "DISTANCES": "aegis_data.engine.realism",
    "DEFAULT_MAX_PIXELS": "aegis_data.files.imageio",
    "default_workers": "aegis_data.executors",
    "write_bytes_atomic": "aegis_data.files.imageio",
    "write_error": "aegis_data.files.imageio",
}
__all__ += list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)


def write_json(
    document: Any, path: PathLike, *, sort_keys: bool = False, default: Callable[[Any], Any] | None = None
) -> Path:
    """``document`` as indented JSON plus a newline, written atomically (the form of every JSON report of the data
    side); returns the path. The argument order is ``aegis_eval.api.write_json``'s."""
    from aegis_data.files.imageio import write_bytes_atomic

    text = json.dumps(document, indent=2, sort_keys=sort_keys, default=default)
    write_bytes_atomic(path, (text + "\n").encode())
    return Path(path)


# --- sources ------------------------------------------------------------------------------------------------------
def source_options(dataset: str, pairs: list[str] | None = None, **given: Any) -> dict[str, Any]:
    """Only the adapter options actually given (each adapter applies its own defaults).

    ``classes`` becomes the adapter's ``categories`` where it has no ``classes``; ``hf_split`` is the hf adapter's
    ``split``; ``pairs`` (``["key=value", ...]``) pass through unchanged and win. An option the adapter does not
    know is left in, so the adapter rejects it with its own message.
    """
    from aegis_data.sources import adapter_options, parse_option_pairs

    known = set(adapter_options(dataset))
    opts = {k: v for k, v in given.items() if v is not None}
    if "classes" in opts and "classes" not in known and "categories" in known:
        opts["categories"] = opts.pop("classes")
    if "hf_split" in opts and dataset == "hf":
        opts["split"] = opts.pop("hf_split")
    opts.update(parse_option_pairs(pairs))
    return opts


def open_source(
    dataset: str, source: PathLike | None = None, *, pairs: list[str] | None = None, **given: Any
) -> SourceDataset:
    """The source dataset ``dataset`` (an adapter name) at ``source``, with the adapter options of
    :func:`source_options`; its ``warnings`` list what the adapter skipped."""
    from aegis_data.sources import load_source

    return load_source(dataset, source=source, **source_options(dataset, pairs, **given))


def audit_source(dataset: SourceDataset, *, hash_files: bool = True) -> dict[str, Any]:
    """What a source dataset holds (counts, box sizes, resolutions, duplicates) and whether its splits leak: the
    ``aegis audit`` report, with the source's description under ``source``."""
    from aegis_data.sources.audit import audit_dataset

    report = audit_dataset(dataset, hash_files=hash_files)
    report["source"] = dataset.description
    return report


# --- the suite and its scale ----------------------------------------------------------------------------------------
@overload
def choose_scale(
    config: SuiteConfig,
    scale: str | None = None,
    person_px: float | None = None,
    gsd_cm_per_px: float | None = None,
    *,
    required: Literal[True] = True,
) -> Scale: ...
@overload
def choose_scale(
    config: SuiteConfig,
    scale: str | None = None,
    person_px: float | None = None,
    gsd_cm_per_px: float | None = None,
    *,
    required: bool,
) -> Scale | None: ...
def choose_scale(
    config: SuiteConfig,
    scale: str | None = None,
    person_px: float | None = None,
    gsd_cm_per_px: float | None = None,
    *,
    required: bool = True,
) -> Scale | None:
    """The scale a call on ``config`` uses (``aegis_data.engine.scale.suite_call_scale``); None when the suite's
    mode is object, neither the call nor the suite gives a unit and ``required`` is False (nothing to measure a
    person on, nothing needed)."""
    from aegis_data.engine.scale import OBJECT, suite_call_scale

    mode = scale if scale is not None else config.scale.get("mode", "frame")
    if (
        not required
        and mode == OBJECT
        and person_px is None
        and gsd_cm_per_px is None
        and config.scale.get("person_px") is None
        and config.scale.get("gsd_cm_per_px") is None
    ):
        return None
    return suite_call_scale(
        config.scale,
        mode,
        None,
        person_px=person_px,
        gsd_cm_per_px=gsd_cm_per_px,
        physical_suite=config.suite if config.uses_scene else None,
    )


def describe_suite(
    scale: Scale | None = None, long_side: int | None = None, suite: PathLike | None = None
) -> dict[str, Any]:
    """The suite as plain data: seed, config hash, families and every corruption's declaration (and model); with a
    ``scale`` (and, for frame scale, a ``long_side``), the effective pixel values of the parameters that follow it.
    ``suite``: a suite name or file (default aegis-v2)."""
    from aegis_data.engine.config import load_config
    from aegis_data.engine.corruptions import physical_ladder
    from aegis_data.engine.scale import effective_parameters

    cfg = load_config(suite)
    effective = scale is not None and (scale.is_object or long_side is not None)
    desc = {
        "suite": cfg.suite,
        "generation": cfg.generation,
        "seed": cfg.seed,
        "config_hash": cfg.config_hash,
        "config_sha256": cfg.config_sha256,
        "families": {k: list(v) for k, v in cfg.families.items()},
        "corruptions": [
            {
                "name": s.name,
                "model": s.model_name,
                "family": s.family,
                "statistic": s.statistic,
                "direction": s.direction,
                "severities": {k: list(v) for k, v in s.severities.items()},
                "fixed": {k: (list(v) if isinstance(v, tuple) else v) for k, v in s.fixed.items()},
                **({"effective": effective_parameters(s, scale, long_side)} if effective and scale is not None else {}),
                **(
                    {
                        "physical": physical_ladder(
                            s.name, cfg, scale.person_px if scale is not None and scale.is_object else None
                        )
                    }
                    if s.model
                    else {}
                ),
            }
            for s in cfg.corruptions.values()
        ],
    }
    if cfg.uses_scene:
        desc["camera"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in cfg.camera.items()}
    if effective and scale is not None:  # (effective implies a scale)
        desc["scale"] = scale.describe() + ("" if scale.is_object else f", on a {long_side}-px long side")
    return desc


def list_suite(
    suite: PathLike | None = None,
    *,
    scale: str | None = None,
    person_px: float | None = None,
    gsd_cm_per_px: float | None = None,
    long_side: int | None = None,
) -> dict[str, Any]:
    """:func:`describe_suite` of ``suite`` under the scale the call gives (``aegis list``): with object scale and a
    unit, or frame scale and a ``long_side``, also the effective pixel values of every scaled parameter."""
    from aegis_data.engine.config import load_config

    cfg = load_config(suite)
    if long_side is not None and (long_side < 1 or scale == "object" or cfg.uses_scene):
        raise AegisError(
            "`long_side` takes a positive number of px and applies to `scale` frame only", param="long_side"
        )
    chosen = choose_scale(cfg, scale, person_px, gsd_cm_per_px, required=False)
    return describe_suite(chosen, long_side, suite)


# --- one image --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CorruptResult:
    """What :func:`corrupt_file` wrote: the PNG, the SHA-256 of its pixels, and why the image came out
    unchanged when it did (``unchanged`` True; ``unchanged_reason`` None when no reason is known)."""

    path: Path
    pixel_sha256: str
    unchanged: bool
    unchanged_reason: str | None


def corrupt_file(
    image: PathLike,
    corruption: str,
    severity: int,
    out: PathLike,
    *,
    image_id: str | None = None,
    suite: PathLike | None = None,
    scale: str | None = None,
    person_px: float | None = None,
    gsd_cm_per_px: float | None = None,
    scene: PathLike | None = None,
) -> CorruptResult:
    """Apply one corruption at one severity to the image file ``image`` and write the lossless PNG ``out``.

    ``image_id`` keys the random draws (default: the file stem). ``scene``: aegis-v2, the image's scene sidecar
    (default: ``<stem>.scene.json`` beside the image when present, read only from the image's folder).
    """
    from aegis_data.conditions import check_severity
    from aegis_data.engine.config import load_config
    from aegis_data.engine.corruptions import apply_corruption, unchanged_reason
    from aegis_data.engine.scene import estimate_scene, found_sidecar, read_sidecar, read_water_mask, sidecar_path
    from aegis_data.files.imageio import pixel_sha256, read_rgb, write_png_atomic

    image, out = Path(image), Path(out)
    cfg = load_config(suite)
    cfg.check_corruption(corruption)
    check_severity(severity)
    if scene is not None and not cfg.uses_scene:
        raise AegisError(f"`scene` gives a scene sidecar, which suite {cfg.suite} does not read", param="scene")
    chosen = choose_scale(cfg, scale, person_px, gsd_cm_per_px, required=True)
    if out.suffix.lower() != ".png":
        raise AegisError(f"`out` must be a .png file (lossless), got {str(out)!r}", param="out")
    check_outputs({"`out`": out}, [image])
    rgb = read_rgb(image)
    image_scene = None
    if cfg.uses_scene:
        side = Path(scene) if scene is not None else sidecar_path(image)
        # A sidecar named by the caller is theirs; one found beside the image is read only from the image's folder.
        facts = (
            read_sidecar(side)
            if scene is not None
            else read_sidecar(side, confined=True)
            if found_sidecar(side) is not None
            else None
        )
        mask = None
        if facts and facts.get("water_mask"):
            mask = read_water_mask(side.parent / facts["water_mask"], *rgb.shape[:2])
        image_scene = estimate_scene(rgb, chosen.unit_px, cfg.camera, facts, mask)
    result = apply_corruption(
        rgb,
        corruption,
        severity,
        image_id if image_id is not None else image.stem,
        config=cfg,
        scale=chosen,
        scene=image_scene,
    )
    write_png_atomic(out, result)
    unchanged = result.shape == rgb.shape and bool((result == rgb).all())
    why = unchanged_reason(corruption, cfg, image_scene) if unchanged else None
    return CorruptResult(out, pixel_sha256(result), unchanged, why)


@dataclass(frozen=True)
class GridResult:
    """The severity grid :func:`grid_file` wrote, and its size in px."""

    path: Path
    width: int
    height: int


def grid_file(
    image: PathLike,
    out: PathLike,
    *,
    width: int = 1536,
    image_id: str | None = None,
    suite: PathLike | None = None,
    scale: str | None = None,
    person_px: float | None = None,
    gsd_cm_per_px: float | None = None,
    crop: str | None = None,
    boxes: PathLike | None = None,
) -> GridResult:
    """Render clean + every corruption at severities 1-3 of the image file ``image`` as one labelled PNG ``out``.

    Every cell is corrupted at the image's full resolution (as a build renders the split), then cropped and
    resized to the cell width. ``crop``: ``"people"`` (a window around the person boxes) or ``"x,y,w,h"`` (px of
    the full image); default the whole frame. ``boxes``: the image's person boxes, a YOLO label file (``.txt``)
    or a COCO JSON (the image whose ``file_name`` has this image's stem); default, for an image inside a split
    (``<split>/<name>/<condition>/<stem>.png``), that split's ``annotations/<name>.json``."""
    from aegis_data.engine.config import load_config
    from aegis_data.engine.grid import people_region, severity_grid
    from aegis_data.files.imageio import read_rgb, write_png_atomic

    image, out = Path(image), Path(out)
    if out.suffix.lower() != ".png":
        raise AegisError(f"`out` must be a .png file, got {str(out)!r}", param="out")
    if width < 480:
        raise AegisError(f"`width` must be at least 480 px, got {width}", param="width")
    cfg = load_config(suite)
    chosen = choose_scale(cfg, scale, person_px, gsd_cm_per_px, required=True)
    check_outputs({"`out`": out}, [image, *([Path(boxes)] if boxes is not None else [])])
    rgb = read_rgb(image)
    height, full_width = rgb.shape[:2]
    persons = _grid_persons(image, boxes, full_width, height, needed=crop is not None and crop.strip() == "people")
    region = None
    if crop is not None:
        region = people_region(persons, height, full_width) if crop.strip() == "people" else _crop_numbers(crop)
    sheet = severity_grid(
        rgb,
        image_id if image_id is not None else image.stem,
        width,
        config=cfg,
        scale=chosen,
        region=region,
        persons=persons,
    )
    write_png_atomic(out, sheet)
    return GridResult(out, sheet.shape[1], sheet.shape[0])


def _crop_numbers(crop: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in crop.split(","))
    except ValueError:
        values = ()
    if len(values) != 4:
        raise AegisError(f"`crop` is 'people' or 'x,y,w,h' (4 integers, px), got {crop[:60]!r}", param="crop")
    return values


def _grid_persons(
    image: Path, boxes: PathLike | None, width: int, height: int, needed: bool
) -> list[tuple[float, float, float, float]]:
    """The person boxes (x0, y0, x1, y1) of ``image`` for a grid: from ``boxes`` or the split the image lies in."""
    from aegis_data.sources.yolo_labels import read_yolo_labels
    from aegis_data.split.measure import is_split_dir

    source = Path(boxes) if boxes is not None else None
    if source is None:
        # <root>/<split name>/<condition>/<stem>.png, the layout of a split (docs/SPLITS.md)
        guess = image.resolve().parent.parent.parent / "annotations" / f"{image.resolve().parent.parent.name}.json"
        if guess.is_file() and is_split_dir(guess.parent.parent):
            source = guess
    if source is None:
        if needed:
            raise AegisError(
                "`crop` people needs the image's person boxes: give `boxes` (a YOLO label .txt or a COCO JSON), "
                "or pass an image of a split folder",
                param="boxes",
            )
        return []
    if source.suffix.lower() == ".txt":
        return [box for box, _ in read_yolo_labels(source, width, height)]
    try:
        doc = json.loads(source.read_text(encoding="utf-8"))
        ids = [im["id"] for im in doc["images"] if Path(str(im["file_name"])).stem == image.stem]
        found = [a["bbox"] for a in doc["annotations"] if ids and a["image_id"] == ids[0]]
        persons = [(float(x), float(y), float(x) + float(w), float(y) + float(h)) for x, y, w, h in found]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise AegisError(f"cannot read person boxes from {source} (a COCO JSON): {exc}", param="boxes") from None
    if not ids:
        raise AegisError(f"{source} has no image named {image.stem!r}", param="boxes")
    return persons


# --- calibration and realism ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Calibration:
    """A calibration table with its checks: the ladders not strictly monotone (``violations``), and, where
    person visibility was measured, the ladders whose highest severity falls below ``floor`` x clean
    (``below_floor``)."""

    table: CalibrationTable
    violations: list[Violation]
    below_floor: list[Violation]
    floor: float

    def to_dict(self) -> dict[str, Any]:
        """The JSON document of ``aegis calibrate`` (the table, with the visibility floor when measured)."""
        doc = self.table.to_dict()
        if self.table.clean_visibility is not None:
            below = {v.corruption: v.message for v in self.below_floor}
            doc["visibility_floor"] = {"ratio": self.floor, "below": below}
        return doc


def calibrate(
    path: PathLike,
    corruptions: Iterable[str] | None = None,
    limit: int | None = None,
    *,
    scale: str | None = None,
    person_px: float | None = None,
    gsd_cm_per_px: float | None = None,
    suite: PathLike | None = None,
) -> Calibration:
    """Every corruption's statistic against severity on a split (read from disk) or a folder of images (corrupted
    in memory, image id = file stem), with the monotonicity and visibility-floor checks."""
    from aegis_data.engine.calibration import VISIBILITY_FLOOR, check_monotone, check_visibility_floor
    from aegis_data.split.measure import calibrate_path

    table = calibrate_path(
        path, corruptions, limit, scale=scale, person_px=person_px, gsd_cm_per_px=gsd_cm_per_px, suite=suite
    )
    return Calibration(table, check_monotone(table), check_visibility_floor(table), VISIBILITY_FLOOR)


def realism(real_dir: PathLike, split_dir: PathLike, condition: str, limit: int | None = None) -> RealismReport:
    """The camera statistics of real frames of ``condition`` beside the split's rendered and clean test images,
    with each set's distance from the real frames (``aegis realism``; docs/CORRUPTIONS.md)."""
    from aegis_data.split.measure import realism_report

    return realism_report(real_dir, split_dir, condition, limit)


# --- publishing ---------------------------------------------------------------------------------------------------
def export_hf(split_dir: PathLike, out_dir: PathLike) -> ExportResult:
    """Export a verified frozen split as a Hugging Face ``datasets`` dataset with embedded images (save_to_disk
    and parquet); returns the :class:`~aegis_data.split.export_hf.ExportResult`."""
    from aegis_data.split.export_hf import export_split

    return export_split(split_dir, out_dir)


def push_hf(export_dir: PathLike, repo_id: str, hub: Any = None) -> str:
    """Upload an export's parquet files to the Hugging Face dataset repo ``repo_id``; returns its URL. ``hub``:
    the client (default ``huggingface_hub.HfApi()``)."""
    from aegis_data.split.export_hf import push_split

    if hub is None:
        from huggingface_hub import HfApi

        hub = HfApi()
    return push_split(export_dir, repo_id, hub)
