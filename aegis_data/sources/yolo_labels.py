"""YOLO label files (``class cx cy w h`` per line, normalised to the frame): the one writer and the one reader.

Written by the split builder (``yolo/`` view) and the training dataset writer; read by the YOLO source adapter
and the Faster R-CNN training loader. Boxes are absolute ``(x0, y0, x1, y1)`` pixels on both sides.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from aegis_data.errors import AegisError
from aegis_data.sources._common import class_id, plain_number

PERSON_CLASS = 0


def yolo_label_text(boxes: Iterable[Iterable[float]], width: int, height: int) -> str:
    """Ultralytics label lines ``0 cx cy w h`` (normalised to [0, 1], 6 decimals); '' for no boxes."""
    lines = []
    for box in boxes:
        x0, y0, x1, y1 = (float(v) for v in box)
        cx, cy = (x0 + x1) / 2 / width, (y0 + y1) / 2 / height
        w, h = (x1 - x0) / width, (y1 - y0) / height
        lines.append(f"{PERSON_CLASS} {cx:.6f} {cy:.6f} {w:.6f} {h:.6f}")
    return "".join(line + "\n" for line in lines)


def parse_yolo_labels(
    text: str,
    width: int,
    height: int,
    where: str,
    classes: frozenset[str] | None = None,
    stats: Counter[str] | None = None,
) -> list[tuple[tuple[float, float, float, float], str]]:
    """``[((x0, y0, x1, y1), "file:line"), ...]`` in pixels, for the lines whose class is in ``classes`` (None =
    all); AegisError naming file:line for a malformed line or a negative size. ``stats`` counts
    ``class:<k>`` and ``ignored_class:<k>``."""
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        at = f"{where}:{n}"
        if len(parts) != 5:
            raise AegisError(f"{at}: expected 5 values 'class cx cy w h', got {len(parts)} ({line.strip()[:60]!r})")
        # Strict: a class is a plain non-negative integer ('-1', '0.0', '1_0' are refused), coordinates are
        # plain finite decimals ('nan', '1e400', '1_0' are refused).
        cls = class_id(parts[0], at)
        cx, cy, bw, bh = (plain_number(v, at, name) for v, name in zip(parts[1:], ("cx", "cy", "w", "h")))
        if classes is not None and str(cls) not in classes:
            if stats is not None:
                stats[f"ignored_class:{cls}"] += 1
            continue
        if bw < 0 or bh < 0:
            raise AegisError(f"{at}: box 'cx={cx:g} cy={cy:g} w={bw:g} h={bh:g}' has a negative size")
        out.append((((cx - bw / 2) * width, (cy - bh / 2) * height, (cx + bw / 2) * width, (cy + bh / 2) * height), at))
        if stats is not None:
            stats[f"class:{cls}"] += 1
    return out


def read_yolo_labels(
    path: str | Path, width: int, height: int, classes: frozenset[str] | None = None, stats: Counter[str] | None = None
) -> list[tuple[tuple[float, float, float, float], str]]:
    """:func:`parse_yolo_labels` of one label file; AegisError when it cannot be read as UTF-8 text."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AegisError(f"cannot read label file {p}: {exc}") from None
    return parse_yolo_labels(text, width, height, str(p), classes, stats)
