"""The severity contact sheet (``aegis grid``): clean + every corruption at severities 1-3 on one image.

The visual counterpart of a calibration ladder (``aegis_data.engine.calibration``): pure, array in and array out;
the CLI reads the image and writes the PNG. Cells are corrupted at full resolution, like the split, and only then
cropped and downscaled: a corruption rendered at cell size would show other pixels than the split holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import cv2
import numpy as np

from aegis_data.conditions import SEVERITIES, condition_id
from aegis_data.engine.calibration import Corruptor, resolve_corruptions
from aegis_data.engine.config import SuiteConfig, load_config
from aegis_data.engine.corruptions import scene_for
from aegis_data.engine.corruptor import SuiteCorruptor
from aegis_data.engine.scale import Scale
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


def people_region(
    boxes: Iterable[Sequence[float]], height: int, width: int, aspect: float | None = None
) -> tuple[int, int, int, int]:
    """The window ``(x, y, w, h)`` around the person boxes ``(x0, y0, x1, y1)`` that a grid crops to.

    The boxes' union, widened by the largest box side on every side (so each person keeps some context), then
    grown to ``aspect`` (w / h; default the image's) and kept inside the image. Integer pixel edges, so the crop
    is exact. AegisError when there is no box to crop around."""
    rows = [tuple(float(v) for v in b) for b in boxes]
    if not rows:
        raise AegisError("no person box to crop around: the image has no boxes in `boxes`", param="boxes")
    x0, y0 = min(b[0] for b in rows), min(b[1] for b in rows)
    x1, y1 = max(b[2] for b in rows), max(b[3] for b in rows)
    margin = max(max(b[2] - b[0], b[3] - b[1]) for b in rows)
    x0, y0, x1, y1 = x0 - margin, y0 - margin, x1 + margin, y1 + margin
    ratio = aspect if aspect is not None else width / height
    w, h = x1 - x0, y1 - y0
    if w / max(h, 1e-9) < ratio:
        w = h * ratio
    else:
        h = w / ratio
    w, h = min(max(1.0, w), width), min(max(1.0, h), height)
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    left = int(round(min(max(cx - w / 2, 0.0), width - w)))
    top = int(round(min(max(cy - h / 2, 0.0), height - h)))
    return left, top, max(1, int(round(w))), max(1, int(round(h)))


def _check_region(region: Sequence[int], height: int, width: int) -> tuple[int, int, int, int]:
    if len(region) != 4:
        raise AegisError(f"a crop region is x,y,w,h (4 integers), got {list(region)[:6]}", param="crop")
    x, y, w, h = (int(v) for v in region)
    if w < 1 or h < 1 or x < 0 or y < 0 or x + w > width or y + h > height:
        raise AegisError(
            f"crop region x={x}, y={y}, w={w}, h={h} does not lie inside the {width}x{height} image", param="crop"
        )
    return x, y, w, h


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
    region: Sequence[int] | None = None,
    persons: Sequence[Sequence[float]] = (),
) -> np.ndarray:
    """A contact sheet of the suite on one image: HxWx3 uint8 RGB, ``width`` px wide.

    The first row shows the clean image and a legend (suite, seed, config hash, families); then one row per
    corruption in config order, columns severity 1-3, every cell labelled with its condition id. Every cell is
    corrupted at the image's **full resolution** with ``image_id`` (as a build renders the split) and only then
    cut to ``region`` (``x, y, w, h`` in full-resolution px; default the whole image, ``people_region`` for a
    window around the people) and resized to the cell width, so a cell shows what the split holds. ``config``:
    the suite (default aegis-v2); ``scale``: the length unit of the full image; ``persons``: the image's person
    boxes ``(x0, y0, x1, y1)`` when known (an aegis-v2 flood submerges them, as in a build).
    """
    if width < 480:
        raise AegisError(f"grid width must be at least 480 px, got {width}")
    check_rgb_image(image, "image")
    cfg = config or load_config()
    names = resolve_corruptions(corruptions, cfg)
    pad = max(4, width // 256)
    cw = (width - 4 * pad) // 3
    full_h, full_w = image.shape[:2]
    x, y, rw, rh = _check_region(region, full_h, full_w) if region is not None else (0, 0, full_w, full_h)

    def shown(full: np.ndarray) -> np.ndarray:
        return fit_width(np.ascontiguousarray(full[y : y + rh, x : x + rw]), cw)

    small = shown(image)
    extra: dict[str, Any] = {}
    if corrupt is None:
        corrupt = SuiteCorruptor(cfg, scale, seed)
        if cfg.uses_scene:  # one scene for every cell, as a build derives one per image (not one per condition)
            extra = {"scene": scene_for(image, cfg, scale, persons)}
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
    view = f"crop {rw}x{rh} at ({x}, {y})" if region is not None else "whole frame"
    legend = [
        "rows: corruption   columns: severity 1, 2, 3",
        f"input {full_w}x{full_h} corrupted at full size; {view}, shown at {cw}x{ch}",
        "",
    ]
    legend += [f"{fam}: {', '.join(ms)}" for fam, ms in cfg.families.items()]
    for i, line in enumerate(legend):
        ly = title_h + line_h * (i + 1)
        if ly > title_h + ch:
            break
        _text(sheet, line, (lx, ly), text_scale, _MUTED if i < 2 else _FG)
    for r, name in enumerate(names, start=1):
        for c, sev in enumerate(SEVERITIES):
            out = corrupt(image, name, sev, str(image_id), **extra)
            if out is None:
                raise AegisError(f"no image for condition {condition_id(name, sev)}")
            place(r, c, shown(out), condition_id(name, sev))
    return sheet
