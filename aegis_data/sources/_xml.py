"""Pascal-VOC style XML labels as HERIDAL, SARD and VOC write them, tolerant of their real quirks.

Quirks handled: ``<bndbox>`` children in any order (HERIDAL writes xmin, xmax, ymin, ymax); ``<size>``
missing or zero (the caller reads the image header instead); ``<object>`` before or after ``<size>``; an
empty or whitespace-only file, or an ``<annotation>`` without objects (a negative image).
Coordinates are taken as continuous pixel coordinates as written (no 1-based shift), like the
publishers' own tools.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from aegis_data.errors import AegisError
from aegis_data.sources._common import plain_number


@dataclass(frozen=True)
class VocObject:
    name: str  # class name as written (stripped)
    box: tuple[float, float, float, float]  # xmin, ymin, xmax, ymax as written


@dataclass(frozen=True)
class VocLabel:
    path: Path
    filename: str | None  # <filename>, if present
    size: tuple[int, int] | None  # (width, height) from <size>, None if missing or zero
    objects: tuple[VocObject, ...]


def _text(el: ET.Element | None) -> str | None:
    if el is None or el.text is None:
        return None
    t = el.text.strip()
    return t or None


def _number(el: ET.Element, tag: str, where: str) -> float:
    raw = _text(el.find(tag))
    if raw is None:
        raise AegisError(f"{where}: <bndbox> has no <{tag}>")
    return plain_number(raw, where, f"<{tag}>")


def parse_voc_xml(path: Path) -> VocLabel:
    """Parse one VOC XML file; AegisError (naming the file) when it is malformed."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise AegisError(f"cannot read label file {path}: {exc.strerror}") from None
    if not data.strip():
        return VocLabel(path, None, None, ())
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise AegisError(f"label file {path} is not valid XML ({exc})") from None
    size = None
    size_el = root.find("size")
    if size_el is not None:
        # <size> is a hint (the image header decides): one that is not a plain finite number is ignored.
        try:
            w, h = (int(plain_number(_text(size_el.find(t)) or "0", str(path), f"<{t}>")) for t in ("width", "height"))
        except AegisError:
            w = h = 0
        if w > 0 and h > 0:
            size = (w, h)
    objects = []
    for k, obj in enumerate(root.iter("object")):
        name = _text(obj.find("name")) or ""
        bb = obj.find("bndbox")
        where = f"{path} (object {k}, {name or 'unnamed'})"
        if bb is None:
            raise AegisError(f"{where}: <object> has no <bndbox>")
        # Children looked up by tag, so their order in the file does not matter.
        box = tuple(_number(bb, t, where) for t in ("xmin", "ymin", "xmax", "ymax"))
        objects.append(VocObject(name, box))  # type: ignore[arg-type]
    return VocLabel(path, _text(root.find("filename")), size, tuple(objects))
