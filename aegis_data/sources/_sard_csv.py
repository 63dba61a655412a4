"""SARD's CSV layout: folders of frames, each with one labels CSV ``filename,width,height,class,xmin,ymin,xmax,ymax``.

This is the copy most users download: ``Sard/train/`` with ``train_labels.csv``, ``Sard/val/`` with
``val_labels.csv``. Its quirks, handled here:
- augmented copies sit beside the frames; their stem no longer ends in the frame number (see ``copy_origins``);
- some rows are degenerate (a zero-size box, a corner outside the image, a width/height column that is not the
  image's size): they are dropped and counted, not fatal (see ``row_problem``);
- a row repeated exactly (same file, size, class and corners) would be a second GT box on the same person: the
  repeats are dropped and counted;
- a frame without a row has no person;
- the class column holds ``person`` or the original posture names (``SARD_PERSON_CLASSES``).
The group rule and the split are the SARD adapter's own (``aegis_data.sources.sard``).
"""

from __future__ import annotations

import csv
import io
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from aegis_data.errors import AegisError
from aegis_data.files.imageio import check_text_path, list_images
from aegis_data.sources._common import (
    EDGE_TOLERANCE_PX,
    check_box,
    check_names_matched,
    frame_size,
    plain_number,
    portable_path,
    safe_id,
)
from aegis_data.sources.records import Box, Record

CSV_COLUMNS = ("filename", "width", "height", "class", "xmin", "ymin", "xmax", "ymax")
# The six posture classes of the original annotations, and the single class of the CSV copy.
SARD_PERSON_CLASSES = ("Standing", "Walking", "Running", "Sitting", "Lying", "Not Defined", "person")
DEGENERATE_KINDS = ("size_disagrees", "zero_or_negative_size", "outside_image")
_EXAMPLES = 5


def class_key(name: str) -> str:
    """Class names compare case-insensitively with runs of white space collapsed ('Not  defined' = 'Not Defined')."""
    return " ".join(name.split()).casefold()


_SARD_KEYS = frozenset(class_key(c) for c in SARD_PERSON_CLASSES)


@dataclass(frozen=True)
class CsvRow:
    line: int
    filename: str
    width: float
    height: float
    cls: str
    box: tuple[float, float, float, float]


@dataclass
class CsvLayout:
    """What the CSV folders hold: records (copies marked in ``meta``), counts, and the dropped rows."""

    records: list[Record]
    layout: dict
    copies: dict[str, str]  # copy stem -> frame stem
    degenerate: Counter = field(default_factory=Counter)  # kind -> rows
    degenerate_examples: list[str] = field(default_factory=list)  # the first ones, in file and line order
    duplicates: int = 0  # rows dropped as exact repeats of an earlier row of the same CSV
    duplicate_examples: list[str] = field(default_factory=list)


def label_csvs(root: Path, exclude: Path | None = None) -> list[Path]:
    """Every ``*.csv`` below ROOT (hidden files ignored), except ``exclude`` (the groups file). AegisError for a
    CSV that is a link resolving outside ROOT: it is not read (its lines would end up in messages)."""
    skip = exclude.resolve() if exclude is not None else None
    found = sorted(
        check_text_path(p, "labels CSV")
        for p in root.rglob("*.csv")
        if p.is_file() and not p.name.startswith(".") and (skip is None or p.resolve() != skip)
    )
    inside = root.resolve()
    for p in found:
        if not p.resolve().is_relative_to(inside):
            raise AegisError(
                f"labels CSV {p} resolves outside the dataset root {root}; refusing to read it (copy "
                "the file into the dataset folder)"
            )
    return found


def is_csv_layout(root: Path, exclude: Path | None = None) -> bool:
    """CSV layout: labels CSVs below ROOT and no VOC XML (with XML present the original layout is read)."""
    if not label_csvs(root, exclude):
        return False
    return not any(p.is_file() for p in root.rglob("*.xml"))


def read_label_csv(path: Path) -> list[CsvRow]:
    """The rows of one labels CSV; AegisError naming the file (and line) for a missing column or a bad value."""
    rows = read_csv_records(path, "labels CSV")
    if not rows:
        raise AegisError(f"labels CSV {path} is empty (expected the header {','.join(CSV_COLUMNS)})")
    header_line, header = rows[0]
    column: dict[str, int] = {}
    for k, name in enumerate(header):
        column.setdefault(name.strip().lower(), k)
    missing = [c for c in CSV_COLUMNS if c not in column]
    if missing:
        raise AegisError(
            f"labels CSV {path} has no column {missing[0]!r} (header line {header_line}: "
            f"{','.join(h.strip() for h in header)[:120]}; expected {','.join(CSV_COLUMNS)})"
        )
    need = max(column[c] for c in CSV_COLUMNS) + 1
    out = []
    for n, row in rows[1:]:
        where = f"{path}:{n}"
        if len(row) < need:
            raise AegisError(f"{where}: expected {len(header)} values ({','.join(CSV_COLUMNS)}), got {len(row)}")
        value = {c: row[column[c]].strip() for c in CSV_COLUMNS}
        if not value["filename"]:
            raise AegisError(f"{where}: the filename is empty")
        num = {c: plain_number(value[c], where, c) for c in ("width", "height", "xmin", "ymin", "xmax", "ymax")}
        out.append(
            CsvRow(
                n,
                value["filename"],
                num["width"],
                num["height"],
                value["class"],
                (num["xmin"], num["ymin"], num["xmax"], num["ymax"]),
            )
        )
    return out


def read_csv_records(path: Path, what: str) -> list[tuple[int, list[str]]]:
    """(first line, fields) of every non-blank record of a UTF-8 CSV file (``what``: its name in messages), parsed
    as the csv module reads a file: a quoted field may hold a comma or a line break ("Not\nDefined" is one class),
    so records are not lines. A byte-order mark, which spreadsheet programs write, is dropped."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise AegisError(f"{what} {path} is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise AegisError(f"cannot read {what} {path}: {exc.strerror}") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    out = []
    start = 1
    try:
        for row in reader:
            if "".join(row).strip():
                out.append((start, row))
            start = reader.line_num + 1
    except csv.Error as exc:  # an unclosed quote, a field beyond the csv module's size limit
        raise AegisError(f"{path}:{start}: not a valid CSV record ({exc})") from None
    return out


def row_problem(row: CsvRow, width: int, height: int) -> str | None:
    """Why a row is degenerate (one of ``DEGENERATE_KINDS``), or None for a usable box.

    Checked in this order: the width/height columns against the decoded image's size (the corners of a row
    written for another size mean nothing in this image), then a zero or negative width/height, then corners
    more than ``EDGE_TOLERANCE_PX`` outside the image or no area left inside it.
    """
    if (row.width, row.height) != (width, height):
        return "size_disagrees"
    x0, y0, x1, y1 = row.box
    if x1 <= x0 or y1 <= y0:
        return "zero_or_negative_size"
    tol = EDGE_TOLERANCE_PX
    if x0 < -tol or y0 < -tol or x1 > width + tol or y1 > height + tol:
        return "outside_image"
    if min(x1, width) <= max(x0, 0) or min(y1, height) <= max(y0, 0):
        return "outside_image"
    return None


def copy_origins(stems) -> dict[str, str]:
    """Augmented copies: ``{copy stem: frame stem}``.

    Rule: a stem that does not end in a digit is a copy of frame F when F is the stem of another image that
    does end in a digit, the stem starts with F, and the character after F is not a digit (``gss0012_flip``
    and ``gss0012a`` are copies of ``gss0012``; ``gss00123x`` is not). The longest such F wins.
    """
    stems = set(stems)
    frames = {s for s in stems if s[-1:].isdigit()}
    out = {}
    for s in sorted(stems - frames):
        for k in range(len(s) - 1, 0, -1):
            if s[:k] in frames and not s[k].isdigit():
                out[s] = s[:k]
                break
    return out


def read_csv_layout(
    root: Path, *, classes: frozenset[str] | None, max_pixels: int, stats: Counter, exclude: Path | None = None
) -> CsvLayout:
    """Records of every folder below ROOT that holds images and one labels CSV.

    ``classes``: the class names counted as persons (others left out and counted); None = the SARD names,
    and any other name is refused. Images in folders without a CSV are skipped and counted.
    """
    by_folder: dict[Path, list[Path]] = defaultdict(list)
    for p in label_csvs(root, exclude):
        by_folder[p.parent].append(p)
    for folder, found in sorted(by_folder.items()):
        if len(found) > 1:
            raise AegisError(
                f"folder {folder} holds {len(found)} CSV files ({', '.join(p.name for p in found[:4])}); "
                "the SARD CSV layout expects exactly one labels CSV per folder of images"
            )
    folder_images = {folder: list_images(folder) for folder in sorted(by_folder)}
    all_images = list_images(root, recursive=True)
    labelled = [img for imgs in folder_images.values() for img in imgs]
    labelled_set = set(labelled)
    without_csv = [img for img in all_images if img not in labelled_set]
    stem_count = Counter(img.stem for img in labelled)
    copies = copy_origins(stem_count)
    person = None if classes is None else {class_key(c) for c in classes}

    result = CsvLayout([], {}, copies)
    seen_classes: set[str] = set()
    negatives = rows_total = 0
    csv_files, empty_csv_folders = [], []
    for folder, images in folder_images.items():
        csv_path = by_folder[folder][0]
        shown = portable_path(csv_path, root)
        if not images:
            empty_csv_folders.append(shown)
            continue
        csv_files.append(shown)
        rows = _without_repeats(read_label_csv(csv_path), shown, result)
        seen_classes.update(row.cls for row in rows)
        rows_total += len(rows)
        dropped: list[tuple[int, str]] = []
        by_name = {img.name: img for img in images}
        rows_of: dict[str, list[CsvRow]] = defaultdict(list)
        for row in rows:
            if row.filename not in by_name:
                raise AegisError(f"{csv_path}:{row.line}: file {row.filename!r} not found in {folder}")
            rows_of[row.filename].append(row)
        for img in images:
            width, height = frame_size(img, max_pixels)
            boxes = _row_boxes(
                rows_of.get(img.name, ()), width, height, person, shown, csv_path, stats, result.degenerate, dropped
            )
            if img.name not in rows_of:
                negatives += 1
            result.records.append(
                Record(
                    image_id=folder_image_id(img, root, stem_count),
                    path=str(img),
                    width=width,
                    height=height,
                    boxes=tuple(boxes),
                    split="test",
                    meta={
                        "file": img.name,
                        "original_stem": copies.get(img.stem, img.stem),
                        "augmented_copy": img.stem in copies,
                    },
                )
            )
        need = _EXAMPLES - len(result.degenerate_examples)
        result.degenerate_examples += [text for _, text in sorted(dropped)[:need]]
    check_names_matched(classes, seen_classes, root, key_of=class_key)
    result.layout = {
        "csv_files": csv_files,
        "images_found": len(all_images),
        "csv_rows": rows_total,
        "images_without_rows_negative": negatives,
        "images_without_csv_skipped": len(without_csv),
        "csv_without_images_skipped": len(empty_csv_folders),
        "stems_in_several_folders": sum(1 for c in stem_count.values() if c > 1),
        "examples_skipped": [portable_path(p, root) for p in without_csv[:5]] + empty_csv_folders[:5],
    }
    return result


def _without_repeats(rows: list[CsvRow], shown: str, found: CsvLayout) -> list[CsvRow]:
    """``rows`` without exact repeats of an earlier row (counted, with the first few in ``found``)."""
    first_line: dict[tuple, int] = {}
    kept = []
    for row in rows:
        key = (row.filename, row.width, row.height, row.cls, row.box)
        if key in first_line:
            found.duplicates += 1
            if len(found.duplicate_examples) < _EXAMPLES:
                found.duplicate_examples.append(f"{shown}:{row.line} {row.filename} (as line {first_line[key]})")
            continue
        first_line[key] = row.line
        kept.append(row)
    return kept


def _row_boxes(
    rows: Iterable[CsvRow],
    width: int,
    height: int,
    person: set[str] | None,
    shown: str,
    csv_path: Path,
    stats: Counter,
    degenerate: Counter,
    dropped: list[tuple[int, str]],
) -> list[Box]:
    """Person boxes of one image's rows; degenerate rows counted by kind and appended to ``dropped``."""
    boxes: list[Box] = []
    for row in rows:
        key = class_key(row.cls)
        if person is None and key not in _SARD_KEYS:
            raise AegisError(
                f"{csv_path}:{row.line}: class {row.cls!r} is not a SARD person class "
                f"({', '.join(SARD_PERSON_CLASSES)}); pass classes=... to name this copy's person classes"
            )
        if person is not None and key not in person:
            stats[f"ignored_class:{row.cls or '<empty>'}"] += 1
            continue
        kind = row_problem(row, width, height)
        if kind is not None:
            degenerate[kind] += 1
            corners = ", ".join(f"{c:g}" for c in row.box)
            dropped.append(
                (
                    row.line,
                    f"{shown}:{row.line} {row.filename} [{corners}] {kind}"
                    + (
                        f" ({row.width:g}x{row.height:g} in the CSV, {width}x{height} decoded)"
                        if kind == "size_disagrees"
                        else ""
                    ),
                )
            )
            continue
        stats[f"class:{row.cls}"] += 1
        boxes.append(check_box(*row.box, width, height, f"{csv_path}:{row.line}"))
    return boxes


def folder_image_id(img: Path, root: Path, stem_count: Counter) -> str:
    """The stem; the folder path too (``train__gss7``) when the stem occurs in several folders."""
    if stem_count[img.stem] > 1:
        return safe_id(img.relative_to(root).with_suffix("").as_posix().replace("/", "__"))
    return safe_id(img.stem)
