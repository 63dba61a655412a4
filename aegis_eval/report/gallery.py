"""The failure gallery: the (image, condition) pairs whose recall drops most versus clean, drawn side by side.

Per pair one PNG: clean | corrupted, each with the predictions kept at the frozen threshold (vermillion) and
the ground truth on top (bluish green; solid = found, dashed and thicker = missed), under a header naming the image, the
condition and both recalls. Drawn with OpenCV on uint8 arrays (integer rasterisation, so the same inputs give the same
bytes), then indexed in ``index.md`` and ``index.html``.

Ranking (pure, see ``rank_pairs``): per-image recall = matched GT / GT boxes in that image, at the frozen
threshold with the scorer's one-to-one matching (``aegis_eval.metrics.matching``). Only images with GT and a strictly
positive drop qualify; order is drop descending, then more GT lost, then condition order, then image order.

With ``per_condition`` the gallery also draws, for every condition, its worst pair (the same order, within the
condition) and its best pair (``condition_extremes``: smallest drop, then more GT found, then image order), and
``gallery.json`` lists every picture for ``build_report(..., galleries=...)``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import cv2
import numpy as np

from aegis_data.conditions import parse_condition
from aegis_data.engine.config import SuiteConfig, load_config
from aegis_data.errors import AegisError
from aegis_data.files.imageio import read_rgb, write_bytes_atomic, write_png_atomic
from aegis_data.files.layout import condition_dir
from aegis_eval.metrics.matching import DEFAULT_IOU, PerImageCounts, ThresholdMatch, match_at_threshold
from aegis_eval.metrics.types import Detections, GroundTruth
from aegis_eval.report import palette
from aegis_eval.report.text import html_text, md_text

DEFAULT_N = 8
DEFAULT_MAX_WIDTH = 1600  # of the whole side-by-side picture; 4000x3000 frames become 796x597 panels
MIN_PANEL_WIDTH = 320  # small frames are enlarged (nearest neighbour) so the header text fits
GAP = 8  # white gutter between the two panels, pixels
HEADER = 46  # header strip height, pixels
_FONT = cv2.FONT_HERSHEY_SIMPLEX
_FONT_BOLD = cv2.FONT_HERSHEY_DUPLEX  # double-stroke: reads as bold without thick, blobby strokes
_DASH, _DASH_GAP = 8, 7
LEGEND = (
    "Pairs ranked by per-image recall drop vs clean. Boxes: thin bluish green = GT found, thick dashed "
    "bluish green = GT missed (drawn just outside small boxes), vermillion = prediction at or above the threshold."
)


@dataclass(frozen=True)
class GalleryPair:
    """One ranked (image, condition) pair. ``row`` indexes the GroundTruth image table."""

    rank: int
    row: int
    image_id: int
    file_name: str
    condition: str
    n_gt: int
    found_clean: int
    found_condition: int

    @property
    def recall_clean(self) -> float:
        return self.found_clean / self.n_gt

    @property
    def recall_condition(self) -> float:
        return self.found_condition / self.n_gt

    @property
    def drop(self) -> float:
        return self.recall_clean - self.recall_condition


@dataclass(frozen=True)
class GalleryFiles:
    out: Path
    threshold: float
    pairs: tuple[GalleryPair, ...]
    images: tuple[Path, ...]  # one per pair, same order
    index_md: Path
    index_html: Path
    notes: tuple[str, ...]
    index_json: Path | None = None
    # condition -> (worst, best) pair (None: no image of the condition qualifies), with ``per_condition``.
    extremes: Mapping[str, tuple[GalleryPair | None, GalleryPair | None]] | None = None


GALLERY_SCHEMA = "aegis-gallery/1"
GALLERY_JSON = "gallery.json"


def rank_pairs(
    clean: PerImageCounts, conditions: Mapping[str, PerImageCounts], gt: GroundTruth, n: int = DEFAULT_N
) -> list[GalleryPair]:
    """The ``n`` pairs with the largest per-image recall drop (see the module docstring for the order).

    ``conditions`` maps condition id -> per-image counts at the frozen threshold, in the order that breaks ties.
    """
    if n < 1:
        raise AegisError(f"`n` must be at least 1, got {n}", param="n")
    candidates = []
    n_gt = clean.n_gt.astype(np.int64)
    for c_index, (cond, counts) in enumerate(conditions.items()):
        if counts.n_images != clean.n_images:
            raise AegisError(f"condition {cond!r} has counts for {counts.n_images} images, clean for {clean.n_images}")
        for image_row in np.flatnonzero(n_gt > 0):
            lost = int(clean.tp[image_row]) - int(counts.tp[image_row])
            drop = lost / int(n_gt[image_row])
            if drop > 0:
                candidates.append((-drop, -lost, c_index, int(image_row), cond))
    candidates.sort()
    return [
        _pair(rank, row, gt, cond, clean, conditions[cond])
        for rank, (_d, _l, _c, row, cond) in enumerate(candidates[:n], start=1)
    ]


def _pair(
    rank: int, row: int, gt: GroundTruth, cond: str, clean: PerImageCounts, counts: PerImageCounts
) -> GalleryPair:
    """The pair of image ``row`` under ``cond``: what the GT table and the two count tables say of it."""
    return GalleryPair(
        rank,
        row,
        int(gt.image_ids[row]),
        gt.file_names[row],
        cond,
        int(clean.n_gt[row]),
        int(clean.tp[row]),
        int(counts.tp[row]),
    )


def condition_extremes(
    clean: PerImageCounts, conditions: Mapping[str, PerImageCounts], gt: GroundTruth
) -> dict[str, tuple[GalleryPair | None, GalleryPair | None]]:
    """Per condition (in the given order) its worst pair, the largest strictly positive recall drop as in
    ``rank_pairs`` (None when no image loses recall), and its best pair: the smallest drop (a gain counts),
    then more GT found under the condition, then image order (None when no image has GT)."""
    out = {}
    n_gt = clean.n_gt.astype(np.int64)
    rows = np.flatnonzero(n_gt > 0)
    for cond, counts in conditions.items():
        worst = rank_pairs(clean, {cond: counts}, gt, n=1)
        best = None
        if rows.size:
            keys = [((int(clean.tp[r]) - int(counts.tp[r])) / int(n_gt[r]), -int(counts.tp[r]), int(r)) for r in rows]
            _d, _f, row = min(keys)
            best = _pair(1, row, gt, cond, clean, counts)
        out[cond] = (worst[0] if worst else None, best)
    return out


# --- drawing ------------------------------------------------------------------------------------------------


def panel_scale(width: int, max_width: int = DEFAULT_MAX_WIDTH) -> float:
    """Scale of each panel: fit two panels and the gutter in ``max_width``, but never below MIN_PANEL_WIDTH."""
    if max_width < 2 * MIN_PANEL_WIDTH + GAP:
        raise AegisError(f"max width must be at least {2 * MIN_PANEL_WIDTH + GAP} px, got {max_width}")
    fit = (max_width - GAP) // 2
    if width > fit:
        return fit / width
    if width < MIN_PANEL_WIDTH:
        return MIN_PANEL_WIDTH / width
    return 1.0


def _dashed_rect(img: np.ndarray, p0: tuple[int, int], p1: tuple[int, int], colour: tuple[int, int, int]) -> None:
    """A dashed outline. A small box (a downscaled person is often ~10 px) gets its dashed frame 3 px outside
    it with thinner dashes, so the gaps stay visible and the person is not painted over; OpenCV's thick lines
    overhang each dash end by about half the thickness."""
    (x0, y0), (x1, y1) = p0, p1
    small = min(x1 - x0, y1 - y0) < 24
    dash, gap, thickness = (5, 4, 2) if small else (_DASH, _DASH_GAP, 3)
    if small:
        h, w = img.shape[:2]
        x0, y0, x1, y1 = max(0, x0 - 3), max(0, y0 - 3), min(w - 1, x1 + 3), min(h - 1, y1 + 3)
    for a, b, fixed, horizontal in ((x0, x1, y0, True), (x0, x1, y1, True), (y0, y1, x0, False), (y0, y1, x1, False)):
        t = a
        while t <= b:
            e = min(t + dash, b)
            q0, q1 = ((t, fixed), (e, fixed)) if horizontal else ((fixed, t), (fixed, e))
            cv2.line(img, q0, q1, colour, thickness, cv2.LINE_8)
            t += dash + gap


def _scaled_rects(boxes_xywh: np.ndarray, s: float, w: int, h: int) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    out = []
    for x, y, bw, bh in np.asarray(boxes_xywh, dtype=np.float64).reshape(-1, 4):
        x0 = int(np.clip(round(x * s), 0, w - 1))
        y0 = int(np.clip(round(y * s), 0, h - 1))
        x1 = int(np.clip(round((x + bw) * s), 0, w - 1))
        y1 = int(np.clip(round((y + bh) * s), 0, h - 1))
        out.append(((x0, y0), (x1, y1)))
    return out


def draw_panel(
    rgb: np.ndarray, scale: float, gt_boxes: np.ndarray, gt_found: np.ndarray, pred_boxes: np.ndarray
) -> np.ndarray:
    """A resized copy of ``rgb`` with boxes drawn: predictions in vermillion (2 px), then GT in bluish green on
    top (found: solid 1 px; missed: dashed 3 px, so it reads in greyscale too). Boxes are COCO xywh in the
    frame's pixels."""
    h, w = rgb.shape[:2]
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    interp = cv2.INTER_AREA if scale < 1 else cv2.INTER_NEAREST
    img = np.ascontiguousarray(rgb if scale == 1 else cv2.resize(rgb, size, interpolation=interp))
    ph, pw = img.shape[:2]
    # Predictions first: where one sits exactly on its GT box, the GT outline (the reference) stays visible.
    for p0, p1 in _scaled_rects(pred_boxes, scale, pw, ph):
        cv2.rectangle(img, p0, p1, palette.PRED_RGB, 2, cv2.LINE_8)
    for (p0, p1), found in zip(_scaled_rects(gt_boxes, scale, pw, ph), np.asarray(gt_found, dtype=bool)):
        if found:
            cv2.rectangle(img, p0, p1, palette.GT_RGB, 1, cv2.LINE_8)
        else:
            _dashed_rect(img, p0, p1, palette.GT_MISSED_RGB)
    return img


def _fit(text: str, max_w: int, font: int, scale: float, thickness: int) -> str:
    """``text``, cut and ended with ".." when wider than ``max_w`` pixels (Hershey fonts are ASCII-only)."""

    def width(t: str) -> int:
        return cv2.getTextSize(t, font, scale, thickness)[0][0]

    if width(text) <= max_w:
        return text
    while len(text) > 1 and width(text + "..") > max_w:
        text = text[:-1]
    return text + ".."


def _put(img: np.ndarray, text: str, x: int, y: int, max_w: int, bold: bool = False) -> None:
    font, scale = (_FONT_BOLD, 0.5) if bold else (_FONT, 0.45)
    cv2.putText(img, _fit(text, max_w, font, scale, 1), (x, y), font, scale, (20, 20, 20), 1, cv2.LINE_AA)


def compose_pair(
    clean_panel: np.ndarray, cond_panel: np.ndarray, header_left: Sequence[str], header_right: Sequence[str]
) -> np.ndarray:
    """Two equal-size panels side by side under a white header with two text lines per panel."""
    if clean_panel.shape != cond_panel.shape:
        raise AegisError(
            f"clean and corrupted frames differ in size: {clean_panel.shape[:2]} vs {cond_panel.shape[:2]}"
        )
    ph, pw = clean_panel.shape[:2]
    canvas = np.full((HEADER + ph, 2 * pw + GAP, 3), 255, dtype=np.uint8)
    canvas[HEADER:, :pw] = clean_panel
    canvas[HEADER:, pw + GAP :] = cond_panel
    for x0, lines in ((0, header_left), (pw + GAP, header_right)):
        for k, line in enumerate(lines[:2]):
            _put(canvas, line, x0 + 6, 18 + 20 * k, pw - 12, bold=(k == 0))
    return canvas


def render_pair(
    split_dir: Path,
    split: str,
    gt: GroundTruth,
    pair: GalleryPair,
    clean: ThresholdMatch,
    cond: ThresholdMatch,
    clean_dets: Detections,
    cond_dets: Detections,
    max_width: int = DEFAULT_MAX_WIDTH,
    clean_panels: dict[int, tuple[tuple[int, ...], np.ndarray]] | None = None,
    tag: str | None = None,
) -> np.ndarray:
    """Read both frames of a pair from the split and draw them (see ``draw_panel`` / ``compose_pair``).

    clean_panels: optional cache, GT row -> (clean frame shape, drawn clean panel), shared across the pairs of
    one gallery so an image ranked under several conditions has its clean frame decoded and drawn once.
    tag: the header's first word instead of ``#rank`` (``worst``/``best`` for the per-condition pairs).
    """
    cached = clean_panels.get(pair.row) if clean_panels is not None else None
    if cached is None:
        clean_rgb = read_rgb(condition_dir(split_dir, split, "clean") / pair.file_name)
        clean_shape = clean_rgb.shape
    else:
        clean_shape = cached[0]
    cond_rgb = read_rgb(condition_dir(split_dir, split, pair.condition) / pair.file_name)
    if clean_shape != cond_rgb.shape:
        raise AegisError(
            f"{pair.file_name}: clean frame is {clean_shape[1]}x{clean_shape[0]}, "
            f"{pair.condition} frame is {cond_rgb.shape[1]}x{cond_rgb.shape[0]}; the split is inconsistent"
        )
    s = panel_scale(clean_shape[1], max_width)
    gt_sel = gt.box_image == pair.row
    gt_boxes = gt.boxes[gt_sel]

    def panel(rgb: np.ndarray, match: ThresholdMatch, dets: Detections) -> np.ndarray:
        found = match.gt_matched_det[gt_sel] >= 0
        pred = dets.boxes[(dets.det_image == pair.row) & match.kept]
        return draw_panel(rgb, s, gt_boxes, found, pred)

    if cached is None:
        clean_panel = panel(clean_rgb, clean, clean_dets)
        if clean_panels is not None:
            clean_panels[pair.row] = (clean_shape, clean_panel)
    else:
        clean_panel = cached[1]
    cond_panel = panel(cond_rgb, cond, cond_dets)
    n_pred_clean = int(((clean_dets.det_image == pair.row) & clean.kept).sum())
    n_pred_cond = int(((cond_dets.det_image == pair.row) & cond.kept).sum())
    left = [
        f"{tag or f'#{pair.rank}'} clean  recall {pair.found_clean}/{pair.n_gt} = {pair.recall_clean:.2f}",
        f"{pair.file_name}   predictions: {n_pred_clean}",
    ]
    right = [
        f"{pair.condition}  recall {pair.found_condition}/{pair.n_gt} = {pair.recall_condition:.2f}",
        f"recall drop {pair.drop:.2f}   predictions: {n_pred_cond}",
    ]
    return compose_pair(clean_panel, cond_panel, left, right)


# --- orchestration ------------------------------------------------------------------------------------------


def resolve_threshold(threshold: float | None, threshold_file: str | Path | None) -> tuple[float, str]:
    """(value, description) from exactly one of ``threshold`` / ``threshold_file``."""
    if (threshold is None) == (threshold_file is None):
        raise AegisError(
            "give exactly one of `threshold` X or `threshold_file` F (the frozen operating point), "
            f"got {'both' if threshold is not None else 'neither'}",
            param="threshold",
        )
    if threshold_file is not None:
        from aegis_eval.protocols.threshold import read_threshold_file

        value, _info = read_threshold_file(threshold_file)
        return float(value), f"{value:g} (from {threshold_file})"
    assert threshold is not None  # exactly one of the two was given
    if not (0.0 <= float(threshold) <= 1.0):
        raise AegisError(f"`threshold` must be in [0, 1], got {threshold}", param="threshold")
    return float(threshold), f"{threshold:g} (given)"


def select_conditions(
    available: Sequence[str], requested: str | Sequence[str] = "all", config: SuiteConfig | None = None
) -> list[str]:
    """Corrupted conditions to rank, in canonical order (which also breaks ranking ties).

    available: condition ids with a predictions file; requested: ``"all"``, a comma-separated string or a list;
    config: the split's suite config (default: the installed one).
    """
    order = {c: i for i, c in enumerate((config or load_config()).conditions())}
    avail = sorted((c for c in available if c != "clean"), key=lambda c: (order.get(c, len(order)), c))
    if isinstance(requested, str):
        if requested.strip().lower() == "all":
            requested = avail
        else:
            requested = [r.strip() for r in requested.split(",") if r.strip()]
    for r in requested:
        parse_condition(r)
        if r == "clean":
            raise AegisError(
                "`conditions` lists the corrupted conditions to compare with clean; 'clean' is implicit",
                param="conditions",
            )
        if r not in avail:
            raise AegisError(f"no predictions for condition {r!r}; available: {', '.join(avail) or 'none'}")
    chosen = [c for c in avail if c in set(requested)]
    if not chosen:
        raise AegisError(
            "no corrupted-condition predictions to compare with clean "
            "(expected <corruption>_s<k>.json beside clean.json)"
        )
    return chosen


def _index_md(
    files: Sequence[tuple[GalleryPair, str]], threshold_text: str, split_dir: Path, notes: Sequence[str]
) -> str:
    # File names come from the split's GT file, which anyone can edit: Markdown text, as in report.md.
    lines = [
        "# Failure gallery",
        "",
        f"Split {md_text(str(split_dir))}; frozen threshold {threshold_text}; one-to-one matching at IoU "
        f"{DEFAULT_IOU:g}.",
        LEGEND,
        "",
    ]
    lines += [f"*{md_text(n)}*  " for n in notes] + ([""] if notes else [])
    lines += [
        "| rank | image | condition | GT | recall clean | recall condition | drop | picture |",
        "| ---: | :--- | :--- | ---: | ---: | ---: | ---: | :--- |",
    ]
    for p, rel in files:
        lines.append(
            f"| {p.rank} | {md_text(p.file_name)} | {md_text(p.condition)} | {p.n_gt} | "
            f"{p.recall_clean:.2f} | {p.recall_condition:.2f} | {p.drop:.2f} | [{md_text(rel)}]({quote(rel)}) |"
        )
    lines.append("")
    # Link targets percent-encoded: a file name's ")" or space would end the target early.
    lines += [f"![#{p.rank} {md_text(p.file_name)} {md_text(p.condition)}]({quote(rel)})\n" for p, rel in files]
    return "\n".join(lines)


def _index_html(
    files: Sequence[tuple[GalleryPair, str]], threshold_text: str, split_dir: Path, notes: Sequence[str]
) -> str:
    e = html_text  # file names come from the split's GT file: text on one line, as in report.html
    rows = "\n".join(
        f"<tr><td>{p.rank}</td><td>{e(p.file_name)}</td><td>{e(p.condition)}</td><td>{p.n_gt}</td>"
        f"<td>{p.recall_clean:.2f}</td><td>{p.recall_condition:.2f}</td><td>{p.drop:.2f}</td></tr>"
        for p, _ in files
    )
    figs = "\n".join(
        f'<figure id="pair-{p.rank}"><img src="{e(rel)}" alt="{e(p.file_name)} {e(p.condition)}">'
        f"<figcaption>#{p.rank} {e(p.file_name)} — {e(p.condition)}: recall {p.recall_clean:.2f} → "
        f"{p.recall_condition:.2f}</figcaption></figure>"
        for p, rel in files
    )
    note_html = "".join(f"<p><em>{e(n)}</em></p>" for n in notes)
    return f"""<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>Failure gallery</title>
<style>
body {{ font-family: "DejaVu Sans", Arial, sans-serif; margin: 2rem auto; max-width: 1650px; padding: 0 1rem; }}
table {{ border-collapse: collapse; font-size: .85rem; }} \
td, th {{ padding: .2rem .6rem; border-bottom: 1px solid #ddd; text-align: right; }}
th {{ border-bottom: 2px solid #555; }} figure {{ margin: 1.2rem 0; }} img {{ max-width: 100%; height: auto; }}
</style></head>
<body>
<h1>Failure gallery</h1>
<p>Split <code>{e(str(split_dir))}</code>; frozen threshold {e(threshold_text)}; \
one-to-one matching at IoU {DEFAULT_IOU:g}.
{e(LEGEND)}</p>
{note_html}
<table><thead><tr><th>rank</th><th>image</th><th>condition</th><th>GT</th>\
<th>recall clean</th><th>recall condition</th><th>drop</th></tr></thead>
<tbody>
{rows}
</tbody></table>
{figs}
</body>
</html>
"""


def build_gallery(
    split_dir: str | Path,
    preds_dir: str | Path,
    out: str | Path,
    *,
    threshold: float | None = None,
    threshold_file: str | Path | None = None,
    conditions: str | Sequence[str] = "all",
    n: int = DEFAULT_N,
    max_width: int = DEFAULT_MAX_WIDTH,
    split: str = "test",
    per_condition: bool = False,
    label: str | None = None,
) -> GalleryFiles:
    """Rank (image, condition) pairs by recall drop and write their pictures plus index.md / index.html.

    split_dir: a frozen split (docs/SPLITS.md); preds_dir: ``clean.json`` and ``<condition>.json`` COCO results.
    Pictures go to ``out/pairs/<rank>_<condition>_<stem>.png``; with ``per_condition`` also each condition's worst
    and best pair to ``out/conditions/<condition>_{worst,best}_<stem>.png``. ``gallery.json`` indexes them with the
    model's ``label`` (default: the predictions folder's name) and the split's dataset name, for
    ``build_report(..., galleries=...)``. Raises AegisError for a missing clean.json, an unknown requested condition, a
    threshold given both or neither way, or unreadable frames.
    """
    from aegis_eval.protocols.predictions import load_ground_truth, load_predictions, suite_config_of
    from aegis_eval.protocols.scoring import prediction_files

    split_dir, out = Path(split_dir), Path(out)
    value, threshold_text = resolve_threshold(threshold, threshold_file)
    panel_scale(1, max_width)  # validates max_width before any work
    if n < 1:
        raise AegisError(f"`n` must be at least 1, got {n}", param="n")
    notes: list[str] = []
    files = prediction_files(preds_dir, on_warning=notes.append)
    if "clean" not in files:
        raise AegisError(f"{preds_dir} has no clean.json; the gallery compares every condition with clean")
    gt = load_ground_truth(split_dir, split=split)
    chosen = select_conditions(list(files), conditions, suite_config_of(gt))
    dets = {c: load_predictions(files[c], gt) for c in ["clean"] + chosen}
    matches = {c: match_at_threshold(gt, d, value) for c, d in dets.items()}
    pairs = rank_pairs(matches["clean"].counts, {c: matches[c].counts for c in chosen}, gt, n)
    if len(pairs) < n:
        notes.append(f"only {len(pairs)} (image, condition) pairs lose recall vs clean; asked for {n}")
    written: list[tuple[GalleryPair, str]] = []
    # Small drawn panels: at most n, and two more per condition with per_condition.
    clean_panels: dict[int, tuple[tuple[int, ...], np.ndarray]] = {}
    for p in pairs:
        rel = f"pairs/{p.rank:03d}_{p.condition}_{Path(p.file_name).stem}.png"
        rgb = render_pair(
            split_dir,
            split,
            gt,
            p,
            matches["clean"],
            matches[p.condition],
            dets["clean"],
            dets[p.condition],
            max_width,
            clean_panels,
        )
        write_png_atomic(out / rel, rgb)
        written.append((p, rel))
    extremes = None
    extreme_files: dict[str, dict[str, tuple[GalleryPair, str] | None]] = {}
    if per_condition:
        extremes = condition_extremes(matches["clean"].counts, {c: matches[c].counts for c in chosen}, gt)
        for cond, ends in extremes.items():
            extreme_files[cond] = {}
            for kind, end in zip(("worst", "best"), ends):
                if end is None:
                    extreme_files[cond][kind] = None
                    continue
                rel = f"conditions/{cond}_{kind}_{Path(end.file_name).stem}.png"
                rgb = render_pair(
                    split_dir,
                    split,
                    gt,
                    end,
                    matches["clean"],
                    matches[cond],
                    dets["clean"],
                    dets[cond],
                    max_width,
                    clean_panels,
                    tag=kind,
                )
                write_png_atomic(out / rel, rgb)
                extreme_files[cond][kind] = (end, rel)
    index_md, index_html, index_json = out / "index.md", out / "index.html", out / GALLERY_JSON
    write_bytes_atomic(index_md, _index_md(written, threshold_text, split_dir, notes).encode("utf-8"))
    write_bytes_atomic(index_html, _index_html(written, threshold_text, split_dir, notes).encode("utf-8"))
    doc = _index_doc(label or Path(preds_dir).resolve().name, gt.dataset, value, written, extreme_files, split)
    write_bytes_atomic(index_json, (json.dumps(doc, indent=1, ensure_ascii=False) + "\n").encode("utf-8"))
    return GalleryFiles(
        out,
        value,
        tuple(pairs),
        tuple(out / rel for _, rel in written),
        index_md,
        index_html,
        tuple(notes),
        index_json,
        extremes,
    )


def _pair_doc(p: GalleryPair, rel: str) -> dict[str, Any]:
    return {
        "file_name": p.file_name,
        "condition": p.condition,
        "n_gt": p.n_gt,
        "found_clean": p.found_clean,
        "found_condition": p.found_condition,
        "picture": rel,
    }


def _index_doc(
    label: str,
    dataset: str | None,
    threshold: float,
    ranked: Sequence[tuple[GalleryPair, str]],
    extremes: Mapping[str, Mapping[str, tuple[GalleryPair, str] | None]],
    split: str,
) -> dict[str, Any]:
    """gallery.json: what ``build_report(..., galleries=...)`` links (pictures relative to the gallery folder)."""
    doc: dict[str, Any] = {
        "schema": GALLERY_SCHEMA,
        "label": label,
        "dataset": dataset,
        "split": split,
        "threshold": threshold,
        "pairs": [{"rank": p.rank, **_pair_doc(p, rel)} for p, rel in ranked],
    }
    if extremes:
        doc["per_condition"] = {
            cond: {kind: None if got is None else _pair_doc(*got) for kind, got in ends.items()}
            for cond, ends in extremes.items()
        }
    return doc


# --- reading a gallery back (aegis report --gallery) -----------------------------------------------------------


@dataclass(frozen=True)
class GalleryExample:
    """One per-condition picture of a gallery: the condition's worst or best (image, condition) pair."""

    label: str
    condition: str
    kind: str  # "worst" or "best"
    file_name: str
    n_gt: int
    found_clean: int
    found_condition: int
    picture: Path  # the gallery folder joined with the picture's relative path


@dataclass(frozen=True)
class GalleryIndex:
    folder: Path
    label: str
    dataset: str | None
    examples: tuple[GalleryExample, ...]


def load_gallery_index(folder: str | Path) -> GalleryIndex:
    """The per-condition pictures of a gallery folder written by ``build_gallery(..., per_condition=True)``.

    Raises AegisError (one line) for a folder without gallery.json, a file that is not an aegis-gallery/1
    document, or a gallery drawn without per-condition pictures."""
    folder = Path(folder)
    path = folder / GALLERY_JSON
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AegisError(f"{folder} holds no {GALLERY_JSON}; give a folder written by `aegis gallery`") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise AegisError(f"{path}: not a readable gallery index ({type(exc).__name__})") from None
    if not isinstance(doc, dict) or doc.get("schema") != GALLERY_SCHEMA:
        raise AegisError(f"{path}: expected a {GALLERY_SCHEMA} document (written by `aegis gallery`)")
    per = doc.get("per_condition")
    if not isinstance(per, dict):
        raise AegisError(
            f"{folder} was drawn without per-condition pictures; draw it again with `per_condition` (`aegis gallery`)"
        )
    label, dataset = doc.get("label"), doc.get("dataset")
    if not isinstance(label, str) or not (dataset is None or isinstance(dataset, str)):
        raise AegisError(f"{path}: 'label' must be a string and 'dataset' a string or null")
    examples = []
    for cond, ends in per.items():
        for kind in ("worst", "best"):
            e = ends.get(kind) if isinstance(ends, dict) else None
            if e is None:
                continue
            try:
                examples.append(
                    GalleryExample(
                        label,
                        str(cond),
                        kind,
                        str(e["file_name"]),
                        int(e["n_gt"]),
                        int(e["found_clean"]),
                        int(e["found_condition"]),
                        folder / str(e["picture"]),
                    )
                )
            except (KeyError, TypeError, ValueError):
                raise AegisError(f"{path}: per_condition[{cond!r}][{kind!r}] is malformed") from None
    return GalleryIndex(folder, label, dataset, tuple(examples))
