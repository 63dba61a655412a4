"""Measuring a frozen split with the engine's statistics: ``aegis calibrate`` and ``aegis realism`` on a split.

The engine measures images; which suite and length unit they were rendered with (and, for aegis-v2, each
image's recorded scene) is written in the split's manifest. This module reads that manifest through the sealed
reader (:func:`aegis_data.split.reader.load_split`: format, confined paths, root and files hashes) and passes what
the engine needs down, so no engine module reads a manifest itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from aegis_data.engine.calibration import CalibrationTable, calibrate_clean_folder, calibrate_rendered
from aegis_data.engine.realism import RealismReport, compare_realism
from aegis_data.engine.scale import Scale
from aegis_data.errors import AegisError
from aegis_data.files.layout import MANIFEST_NAME
from aegis_data.split.reader import load_split


def is_split_dir(path: str | Path) -> bool:
    """True for a directory written by ``aegis build-splits`` (it holds a manifest)."""
    return (Path(path) / MANIFEST_NAME).is_file()


def calibrate_split(
    root: str | Path, corruptions: Iterable[str] | None = None, limit: int | None = None
) -> CalibrationTable:
    """Calibrate on a frozen split (``test/clean`` against ``test/<corruption>_s<k>``) with the suite and the unit
    its manifest records (:func:`aegis_data.engine.calibration.calibrate_rendered`)."""
    split = load_split(root)
    return calibrate_rendered(root, corruptions, limit, config=split.suite_config(), scale=split.scale)


def calibrate_path(
    path: str | Path,
    corruptions: Iterable[str] | None = None,
    limit: int | None = None,
    scale: str | Scale | None = None,
    *,
    person_px: float | None = None,
    gsd_cm_per_px: float | None = None,
    suite: str | Path | None = None,
) -> CalibrationTable:
    """:func:`calibrate_split` for a split directory (has ``manifest.json``), else
    :func:`aegis_data.engine.calibration.calibrate_clean_folder`.

    A split's manifest fixes the suite and the unit its images were built with, so it takes none of ``suite`` /
    ``scale`` / ``person_px`` / ``gsd_cm_per_px``; a folder takes them (``suite`` a name or file, default
    aegis-v2; the scale as ``aegis_data.engine.scale.resolve_scale`` does, default the suite's; object scale
    needs the unit, as a folder carries no boxes).
    """
    if is_split_dir(path):
        if scale is not None or person_px is not None or gsd_cm_per_px is not None or suite is not None:
            raise AegisError(
                f"{path} is a split: its manifest fixes the suite and scale its images were built with; "
                f"`suite`, `scale`, `person_px` and `gsd_cm_per_px` apply to folders of clean images",
                param="suite"
                if suite is not None
                else "scale"
                if scale is not None
                else "person_px"
                if person_px is not None
                else "gsd_cm_per_px",
            )
        return calibrate_split(path, corruptions, limit)
    return calibrate_clean_folder(
        path, corruptions, limit, scale, person_px=person_px, gsd_cm_per_px=gsd_cm_per_px, suite=suite
    )


def realism_report(
    real_dir: str | Path, split_dir: str | Path, condition: str, limit: int | None = None
) -> RealismReport:
    """:func:`aegis_data.engine.realism.compare_realism` of the real frames in ``real_dir`` with the split's
    rendering of ``condition``, given the suite, unit and scenes the split's manifest records."""
    split_dir = Path(split_dir)
    if not is_split_dir(split_dir):
        raise AegisError(
            f"{split_dir} is not a split folder (no {MANIFEST_NAME}); give the folder `aegis build-splits` wrote"
        )
    split = load_split(split_dir)
    scenes: dict[str, Any] = {
        e.get("image_id"): e.get("scene")
        for e in split.manifest.data.get("entries") or []
        if e.get("condition") == "clean" and e.get("split") == "test"
    }
    return compare_realism(
        real_dir, split_dir, condition, limit, config=split.suite_config(), scale=split.scale, scenes=scenes
    )
