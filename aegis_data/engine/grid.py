"""The severity contact sheet (``aegis grid``): clean + every corruption at severities 1-3 on one image.

The visual counterpart of a calibration ladder (``aegis_data.engine.calibration``): pure, array in and array out;
the CLI reads the image and writes the PNG.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import cv2
import numpy as np

from aegis_data.conditions import SEVERITIES, condition_id
from aegis_data.engine.calibration import Corruptor, resolve_corruptions
from aegis_data.engine.config import SuiteConfig, load_config
from aegis_data.engine.corruptions import scene_for
from aegis_data.engine.corruptor import SuiteCorruptor
from aegis_data.engine.scale import OBJECT, PERSON_PX_RANGE, Scale
from aegis_data.errors import AegisError
from aegis_data.files.rgb import check_rgb_image

_BG = (24, 24, 28)
_FG = (235, 235, 235)
_MUTED = (160, 160, 170)
_FONT = cv2.FONT_HERSHEY_SIMPLEX


def fit_width(rgb: np.ndarray, width: int) -> np.ndarray:
    """Resize to ``width`` px wide keeping the aspect ratio (uint8 INTER_AREA down, INTER_LINEAR up).

    Both are OpenCV's fixed-point uint8 paths, so the result does not depend on the CPU's SIMD target.
    """
    check_rgb_image(rgb, "image")
    h, w = rgb.shape[:2]
    if w == width:
        return rgb.copy()
    height = max(1, round(h * width / w))
    interp = cv2.INTER_AREA if width < w else cv2.INTER_LINEAR
    return cv2.resize(rgb, (width, height), interpolation=interp)


def _text(img: np.ndarray, text: str, org: tuple[int, int], scale: float, color=_FG, thick: int = 1) -> None:
    cv2.putText(img, text, org, _FONT, scale, color, thick, cv2.LINE_AA)


def _label(cell: np.ndarray, text: str, scale: float) -> None:
    """Draw ``text`` on a darkened band across the top of ``cell`` (in place)."""
    (tw, th), base = cv2.getTextSize(text, _FONT, scale, 1)
    band_h = min(cell.shape[0], th + base + 8)
    band = cell[:band_h, : min(cell.shape[1], tw + 12)]
    band[...] = (band.astype(np.uint16) * 90 // 256).astype(np.uint8)  # ~35% brightness, integer only
    _text(cell, text, (6, th + 4), scale)


def severity_grid(
    image: np.ndarray,
    image_id: str,
    width: int = 1536,
    corruptions: Iterable[str] | None = None,
    *,
    seed: int | None = None,
    corrupt: Corruptor | None = None,
    config: SuiteConfig | None = None,
    scale: Scale | None = None,
) -> np.ndarray:
    """A contact sheet of the suite on one image: HxWx3 uint8 RGB, ``width`` px wide.

    The first row shows the clean image and a legend (suite, seed, config hash, families); then one row per
    corruption in config order, columns severity 1-3, every cell labelled with its condition id. The input is
    first resized to the cell width and then corrupted at that size with ``image_id``, so a grid is
    deterministic and cheap even for 12 MP frames. ``config``: the suite (default aegis-v2); ``scale``: the
    length unit of the *full* image (an object scale's person unit shrinks with the resize, so each cell shows
    what the full image would show).
    """
    if width < 480:
        raise AegisError(f"grid width must be at least 480 px, got {width}")
    check_rgb_image(image, "image")
    cfg = config or load_config()
    names = resolve_corruptions(corruptions, cfg)
    pad = max(4, width // 256)
    cw = (width - 4 * pad) // 3
    small = fit_width(image, cw)
    extra: dict[str, Any] = {}
    if corrupt is None:
        cell_scale = None
        if scale is not None and scale.is_object:
            # The resize shrinks people by cw / w; the unit follows (never below the engine's smallest unit).
            unit = max(PERSON_PX_RANGE[0], round(scale.unit_px * cw / image.shape[1], 2))
            cell_scale = Scale(OBJECT, unit, f"{scale.basis}, x {cw}/{image.shape[1]} for the grid cell")
        corrupt = SuiteCorruptor(cfg, cell_scale, seed)
        if cfg.uses_scene:  # one scene for every cell, as a build derives one per image (not one per condition)
            extra = {"scene": scene_for(small, cfg, cell_scale)}
    ch = small.shape[0]
    text_scale = max(0.35, cw / 900)
    title_h = int(44 * text_scale / 0.55)
    rows = 1 + len(names)
    height = title_h + rows * (ch + pad) + pad
    sheet = np.empty((height, width, 3), np.uint8)
    sheet[...] = _BG
    used_seed = cfg.seed if seed is None else int(seed)
    _text(
        sheet,
        f"{cfg.suite}  |  image {image_id}  |  seed {used_seed}  |  config {cfg.config_hash}",
        (pad, int(title_h * 0.62)),
        text_scale * 1.25,
        _FG,
        2 if text_scale > 0.6 else 1,
    )

    def place(r: int, c: int, tile: np.ndarray, text: str) -> None:
        y0 = title_h + r * (ch + pad)
        x0 = pad + c * (cw + pad)
        cell = sheet[y0 : y0 + ch, x0 : x0 + cw]
        cell[...] = tile
        _label(cell, text, text_scale)

    place(0, 0, small, "clean")
    # Legend in the two cells beside the clean image.
    lx = pad + (cw + pad) + pad
    line_h = int(30 * text_scale / 0.55)
    legend = [
        "rows: corruption   columns: severity 1, 2, 3",
        f"input {image.shape[1]}x{image.shape[0]}, corrupted at cell size {cw}x{ch}",
        "",
    ]
    legend += [f"{fam}: {', '.join(ms)}" for fam, ms in cfg.families.items()]
    for i, line in enumerate(legend):
        y = title_h + line_h * (i + 1)
        if y > title_h + ch:
            break
        _text(sheet, line, (lx, y), text_scale, _MUTED if i < 2 else _FG)
    for r, name in enumerate(names, start=1):
        for c, sev in enumerate(SEVERITIES):
            out = corrupt(small, name, sev, str(image_id), **extra)
            if out is None:
                raise AegisError(f"no image for condition {condition_id(name, sev)}")
            place(r, c, out, condition_id(name, sev))
    return sheet
