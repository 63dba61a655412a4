"""Shared pieces of the source adapters: option parsing, box checks, safe ids, image discovery."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from aegis_data.errors import AegisError
from aegis_data.files.imageio import DEFAULT_MAX_PIXELS, image_size
from aegis_data.files.readers import json_number
from aegis_data.sources.records import Box

# Class names counted as "person" by the XML adapters (compared case-insensitively).
PERSON_NAMES = frozenset({"human", "person", "people", "pedestrian"})
# Labels may overshoot the frame by this much (rounding in annotation tools); they are clipped, not rejected.
EDGE_TOLERANCE_PX = 1.0
SPLITS = ("train", "val", "test")

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
# A plain decimal number as label files write it: no '_' separators, no 'nan'/'inf', no hex.
_DECIMAL = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_CLASS_ID = re.compile(r"^\d+$")


def check_options(adapter: str, options: Mapping[str, Any], allowed: Iterable[str]) -> None:
    """Reject option keys the adapter does not know, with a did-you-mean hint."""
    allowed = sorted(allowed)
    for key in options:
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise AegisError(
                f"unknown option {key!r} for dataset {adapter!r}{hint} (known: {', '.join(allowed) or 'none'})"
            )


def opt_int(options: Mapping[str, Any], key: str, default: int, *, minimum: int | None = None) -> int:
    value = options.get(key, default)
    try:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError
        out = int(value)
    except (TypeError, ValueError):
        raise AegisError(f"option {key}={value!r}: expected an integer") from None
    if minimum is not None and out < minimum:
        raise AegisError(f"option {key}={value!r}: expected an integer >= {minimum}")
    return out


def opt_fraction(options: Mapping[str, Any], key: str, default: float) -> float:
    value = options.get(key, default)
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise AegisError(f"option {key}={value!r}: expected a number in [0, 1)") from None
    if not (0.0 <= out < 1.0):
        raise AegisError(f"option {key}={value!r}: expected a number in [0, 1)")
    return out


def opt_path(options: Mapping[str, Any], key: str, *, base: Path | None = None) -> Path | None:
    value = options.get(key)
    if value is None or value == "":
        return None
    p = Path(value).expanduser()
    if base is not None and not p.is_absolute() and not p.exists() and (base / p).exists():
        p = base / p
    return p


def opt_ids(options: Mapping[str, Any], key: str) -> frozenset[str] | None:
    """A class filter given as "0", "1,2" or a list; values kept as strings (ids or names)."""
    value = options.get(key)
    if value is None or value == "":
        return None
    items = value if isinstance(value, (list, tuple, set, frozenset)) else str(value).split(",")
    out = frozenset(str(v).strip() for v in items if str(v).strip())
    if not out:
        raise AegisError(f"option {key}={value!r}: expected a comma-separated list of class ids or names")
    return out


def _shown_name(name: str) -> str:
    return name if name.isprintable() else repr(name)


def check_names_matched(
    classes: Iterable[str] | None,
    seen: Iterable[str],
    where: Path | str,
    *,
    key_of: Callable[[str], str] = str.lower,
    option: str = "classes",
) -> None:
    """AegisError when a class name of the ``classes`` filter matches no label (``seen``: every class name the
    labels carry, compared through ``key_of``): the benchmark would silently have fewer or no ground-truth
    boxes ("persn", or "person" on a copy labelled with postures). One line naming the classes present."""
    if not classes:
        return
    present: dict[str, str] = {}
    for name in seen:
        present.setdefault(key_of(name), name)
    missing = [c for c in sorted(classes) if key_of(c) not in present]
    if not missing:
        return
    held = sorted(present.values())
    listed = ", ".join(_shown_name(n) for n in held[:20]) + (f", ... ({len(held)} classes)" if len(held) > 20 else "")
    what = f"class {missing[0]!r} matches" if len(missing) == 1 else f"classes {', '.join(map(repr, missing))} match"
    raise AegisError(
        f"option {option}: {what} no label under {where}; the labels hold classes: "
        f"{listed or 'none (no labelled objects)'}"
    )


def opt_bool(options: Mapping[str, Any], key: str, default: bool = False) -> bool:
    value = options.get(key, default)
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise AegisError(f"option {key}={value!r}: expected true or false")


def opt_follow_links(options: Mapping[str, Any]) -> bool:
    """``follow_links``: read images that are symlinks leaving the source folder (default: skip and count)."""
    return opt_bool(options, "follow_links")


def opt_max_pixels(options: Mapping[str, Any]) -> int:
    return opt_int(options, "max_pixels", DEFAULT_MAX_PIXELS, minimum=1)


def require_dir(path: Path | None, what: str) -> Path:
    if path is None:
        raise AegisError(f"{what}: no directory given")
    if not path.exists():
        raise AegisError(f"{what} not found: {path}")
    if not path.is_dir():
        raise AegisError(f"{what} must be a directory, got a file: {path}")
    return path


def safe_id(name: str) -> str:
    """A filesystem-safe image id: characters outside [A-Za-z0-9._-] become '_', no leading dot."""
    out = _UNSAFE.sub("_", name).lstrip(".")
    if not out:
        raise AegisError(f"cannot make an image id from the name {name!r}")
    return out


def frame_size(path: Path, max_pixels: int) -> tuple[int, int]:
    """(width, height) from the image header (decoding only formats without a parsable header)."""
    w, h = image_size(path, max_pixels)
    if w <= 0 or h <= 0:
        raise AegisError(f"image {path} reports an empty size {w}x{h}")
    if w * h > max_pixels:
        raise AegisError(
            f"image {path} is {w}x{h} = {w * h:,} pixels, above the limit of {max_pixels:,} "
            "(raise `max_pixels` if this is intended)",
            param="max_pixels",
        )
    return w, h


def check_box(x0: float, y0: float, x1: float, y1: float, width: int, height: int, where: str) -> Box:
    """Validate one xyxy pixel box against a width x height frame; clip overshoot within the tolerance.

    Raises AegisError naming ``where`` (file and box) for non-finite, inverted, zero-area boxes or boxes
    reaching more than ``EDGE_TOLERANCE_PX`` outside the frame.
    """
    coords = (x0, y0, x1, y1)
    shown = "[" + ", ".join(f"{c:g}" for c in coords) + "]"
    if not all(math.isfinite(c) for c in coords):
        raise AegisError(f"{where}: box {shown} has a non-finite coordinate")
    if x1 <= x0 or y1 <= y0:
        kind = "zero-area" if (x1 == x0 or y1 == y0) else "inverted"
        raise AegisError(f"{where}: box {shown} is {kind} (expected x_max > x_min and y_max > y_min)")
    tol = EDGE_TOLERANCE_PX
    if x0 < -tol or y0 < -tol or x1 > width + tol or y1 > height + tol:
        raise AegisError(f"{where}: box {shown} lies outside the {width}x{height} frame by more than {tol:g} px")
    cx0, cy0 = min(max(x0, 0.0), float(width)), min(max(y0, 0.0), float(height))
    cx1, cy1 = min(max(x1, 0.0), float(width)), min(max(y1, 0.0), float(height))
    if cx1 <= cx0 or cy1 <= cy0:
        raise AegisError(f"{where}: box {shown} has no area inside the {width}x{height} frame")
    return (float(cx0), float(cy0), float(cx1), float(cy1))


def plain_number(raw: str, where: str, what: str) -> float:
    """A plain decimal number from label text ('12', '0.5', '1e-3'); AegisError naming ``where`` for anything
    else ('1_0', 'nan', 'inf', '0x10') and for values that do not fit a float64 ('1e400')."""
    text = raw.strip()
    if not _DECIMAL.match(text):
        raise AegisError(f"{where}: {what} is {text[:40]!r}, expected a number (plain decimal, like 12 or 0.5)")
    value = float(text)
    if not math.isfinite(value):
        raise AegisError(f"{where}: {what} {text[:40]!r} does not fit a 64-bit float")
    return value


def class_id(raw: str, where: str) -> int:
    """A YOLO class id: a non-negative integer written without sign, point or exponent ('0', '3')."""
    if not _CLASS_ID.match(raw):
        raise AegisError(
            f"{where}: class {raw[:40]!r} is not a class id; expected numbers 'class cx cy w h' with "
            f"a non-negative integer class like 0"
        )
    return int(raw)


def xywh_to_xyxy(b: Any, where: str) -> tuple[float, float, float, float]:
    if isinstance(b, np.ndarray):
        b = b.tolist()
    if not isinstance(b, (list, tuple)) or len(b) != 4:
        raise AegisError(f"{where}: bbox {b!r:.80} must be a list of 4 numbers [x, y, w, h]")
    x, y, w, h = (json_number(v, where, "bbox value") for v in b)
    if w < 0 or h < 0:
        raise AegisError(f"{where}: bbox {list(b)!r} has a negative width or height")
    return x, y, x + w, y + h


def portable_path(path: Path, root: Path) -> str:
    """A path for a source description: relative to the source root when inside it, else just its name.

    Descriptions go into the manifest, which must not depend on where a user keeps their data.
    """
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return Path(path).name


def relative_to(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)
