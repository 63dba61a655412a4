"""The report's figures: each a pure function ``DatasetGroup -> FigurePlan`` (size + drawing), rendered by
:func:`render` to PNG (200 DPI, for the HTML and Markdown) and to PDF and SVG (vector, for papers).

matplotlib is used through ``Figure`` objects with an explicit Agg canvas, never pyplot, so no global figure
state exists and nothing needs closing. Rendering runs inside ``rc_context(RC_PARAMS)``, which restores the
caller's settings afterwards. Layout sizes are fixed in *layout pixels* at ``palette.DPI`` (100) and saved
without ``bbox_inches="tight"``, so each figure's size follows from the number of models and corruptions alone
(see ``*_size`` below); the PNG is drawn at ``palette.PNG_DPI`` (200), i.e. twice those pixel sizes. Offsets
inside a figure are in points, which scale with the DPI. The same input gives the same bytes: PNGs carry no
"Software" chunk, PDFs and SVGs no creator, producer or date, and SVG ids are salted with a fixed string.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import cast

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.backends.backend_pdf import FigureCanvasPdf
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.text import Text
from matplotlib.textpath import TextToPath
from matplotlib.ticker import FuncFormatter

from aegis_data.conditions import condition_id
from aegis_data.files.png import encode_png
from aegis_eval.metrics.result_keys import LOWER_IS_BETTER
from aegis_eval.report import palette
from aegis_eval.report.results import (
    DatasetGroup,
    confidence_interval,
    degradation,
    drop_interval,
    false_alarm_confidence,
    false_alarm_record,
    family_drop_interval,
    localization,
    metric_value,
    per_family_drop,
)

# Metrics bounded to [0, 1]; the others (fp_per_image) get an automatic upper limit.
_UNBOUNDED = ("fp_per_image",)
_PANEL_COLS = 3

# Heatmap geometry, pixels.
_HM_LEFT, _HM_RIGHT, _HM_TOP, _HM_BOTTOM = 215, 100, 78, 46
_HM_CELL_W, _HM_CELL_H = 46, 34
# Small-multiple geometry, pixels: three panels make 720 px (7.2 in), which report.pdf shows at 0.88 of its size
# on a 16 cm line, so 8 pt tick labels print at 7 pt (960 px printed them at 5.3 pt).
_PANEL_W, _PANEL_H, _SM_EXTRA_W, _SM_EXTRA_H = 220, 165, 60, 100
# Height of one more legend row, pixels (8 pt text and matplotlib's label spacing at 100 DPI).
_LEGEND_ROW_PX = 18


def heatmap_size(n_models: int, n_corruptions: int, n_severities: int = 3) -> tuple[int, int]:
    """(width, height) in layout pixels of the heatmap (the PNG is twice as large)."""
    return (
        _HM_LEFT + _HM_CELL_W * n_severities * n_models + _HM_RIGHT,
        _HM_TOP + _HM_CELL_H * n_corruptions + _HM_BOTTOM,
    )


def small_multiples_size(n_corruptions: int, labels: Sequence[str] = (), title: str = "") -> tuple[int, int]:
    """(width, height) in layout pixels of the severity-curve and localization figures (3 panels per row), with
    room for a legend of ``labels`` below them (one row when none are given) and for ``title`` above."""
    rows = max(1, math.ceil(n_corruptions / _PANEL_COLS))
    return _with_legend(_PANEL_COLS * _PANEL_W + _SM_EXTRA_W, rows * _PANEL_H + _SM_EXTRA_H, labels, title)


_TEXT_PATHS = TextToPath()
_TITLE_PT, _MIN_TITLE_PT = 10.5, 6.0
_LEGEND_MAX_COLS = 6


@lru_cache(maxsize=4096)  # a plan sizes its title and legend, and draws them: each string is measured once
def text_width_px(text: str, size_pt: float, bold: bool = False) -> float:
    """Width in layout pixels of one line of ``text`` in the report's font: the advance widths the PNG, PDF and SVG
    backends lay it out with (within a pixel of what Agg measures)."""
    prop = FontProperties(family=palette.FONT_FAMILY, size=size_pt, weight="bold" if bold else "normal")
    return float(_TEXT_PATHS.get_text_width_height_descent(text, prop, ismath=False)[0]) / _PT


_TITLE_LINE_PX = 16  # one more line of a 10.5 pt title


@lru_cache(maxsize=256)
def title_lines(title: str, width_px: float) -> str:
    """``title`` as a figure of ``width_px`` shows it: on as many lines as it takes at 10.5 pt, each filled with
    words while it fits (:func:`fit_title` shrinks a line that is one word too long)."""
    room = width_px - 16
    lines: list[str] = []
    for word in title.split(" "):
        if lines and text_width_px(f"{lines[-1]} {word}", _TITLE_PT, bold=True) <= room:
            lines[-1] += f" {word}"
        else:
            lines.append(word)
    return "\n".join(lines)


def title_extra_px(title: str, width_px: float) -> int:
    """The height a title takes beyond one line in a figure of ``width_px``."""
    return _TITLE_LINE_PX * title_lines(title, width_px).count("\n")


def fit_title(fig: Figure, title: str, y: float) -> Text:
    """The figure's bold title at ``y`` (top aligned), on the lines :func:`title_lines` gives: 10.5 pt, or smaller
    (not below 6 pt) when a line would be wider than the figure less 8 px a side. Measured as drawn by the figure's
    Agg canvas, whose hinted glyphs come out a little wider than the PDF's and SVG's at small sizes."""
    text_lines = title_lines(title, fig.get_figwidth() * palette.DPI)
    text = fig.suptitle(text_lines, fontsize=_TITLE_PT, fontweight="bold", y=y, va="top")
    renderer = cast(FigureCanvasAgg, fig.canvas).get_renderer()  # drawn() gave the figure an Agg canvas
    room = fig.bbox.width * (1 - 16 / (fig.get_figwidth() * palette.DPI))
    size = _TITLE_PT
    for _ in range(4):  # the width is nearly proportional to the size: a step or two settles it
        need = text.get_window_extent(renderer).width
        if need <= room or size <= _MIN_TITLE_PT:
            break
        size = max(_MIN_TITLE_PT, size * room / need * 0.995)
        text.set_fontsize(size)
    return text


def _legend_width_px(labels: Sequence[str], cols: int) -> float:
    """Width of a legend of ``labels`` in ``cols`` columns, each as wide as the widest entry (matplotlib's handle
    length, handle padding, column spacing and border padding at the legend's font size), plus 8 px of margin."""
    em = palette.LEGEND_PT / _PT  # px
    entry = (2.0 + 0.8) * em + max(text_width_px(label, palette.LEGEND_PT) for label in labels)
    return cols * entry + (cols - 1) * 2.0 * em + 0.8 * em + 8


def legend_grid(labels: Sequence[str], width_px: float, max_cols: int = _LEGEND_MAX_COLS) -> tuple[int, int]:
    """(columns, rows) of a figure legend of ``labels`` that fits ``width_px``: as many columns as fit (at most
    ``max_cols``; one even when that does not fit)."""
    cols = min(len(labels), max_cols)
    while cols > 1 and _legend_width_px(labels, cols) > width_px:
        cols -= 1
    return cols, math.ceil(len(labels) / cols)


def _with_legend(
    width: int, height: int, labels: Sequence[str], title: str = "", max_cols: int = _LEGEND_MAX_COLS
) -> tuple[int, int]:
    """A figure's (width, height) with room for its legend of ``labels`` and its ``title``: at least one legend
    entry wide, one legend row higher for each row beyond the first and one title line higher for a title on two
    (``height`` has room for one of each)."""
    if labels:
        width = max(width, math.ceil(_legend_width_px(labels, 1)))
        height += _LEGEND_ROW_PX * (legend_grid(labels, width, max_cols)[1] - 1)
    return width, height + title_extra_px(title, width)


def _legend_labels(group: DatasetGroup) -> list[str]:
    return [_short(run.label, 40) for run in group.runs]


# Points per layout pixel: offsets are given in points so that they scale with the output DPI.
_PT = 72.0 / palette.DPI
# No creator, producer or date: vector files depend on their input only.
_VECTOR_METADATA = {
    "pdf": {"Creator": None, "Producer": None, "CreationDate": None},
    "svg": {"Creator": None, "Date": None},
}


@dataclass(frozen=True)
class FigurePlan:
    """A figure's size in layout pixels and the function that draws it onto a fresh ``Figure``."""

    width: int
    height: int
    draw: Callable[[Figure], None]


@dataclass(frozen=True)
class Rendered:
    """One figure's bytes: PNG always, PDF and SVG when asked for (``render(..., vector=True)``)."""

    png: bytes
    pdf: bytes | None = None
    svg: bytes | None = None


@contextmanager
def drawn(plan: FigurePlan) -> Iterator[Figure]:
    """The plan's figure, drawn at ``PNG_DPI`` with the report's rc settings active (tests measure text boxes)."""
    with matplotlib.rc_context(palette.RC_PARAMS):  # type: ignore[arg-type]  # the stubs want literal rc keys
        fig = Figure(figsize=(plan.width / palette.DPI, plan.height / palette.DPI), dpi=palette.PNG_DPI)
        FigureCanvasAgg(fig)
        plan.draw(fig)
        fig.canvas.draw()
        yield fig


def render(plan: FigurePlan, vector: bool = True) -> Rendered:
    """PNG (``PNG_DPI``) and, with ``vector``, PDF and SVG bytes of a figure."""
    with drawn(plan) as fig:
        png = _png_bytes(np.asarray(cast(FigureCanvasAgg, fig.canvas).buffer_rgba()))  # drawn() gave it an Agg canvas
        if not vector:
            return Rendered(png)
        out = {}
        # The vector backends' own canvases (the PNG above is the toolkit's writer); each attaches itself.
        for fmt, canvas in (("pdf", FigureCanvasPdf), ("svg", FigureCanvasSVG)):
            buf = io.BytesIO()
            getattr(canvas(fig), f"print_{fmt}")(buf, metadata=_VECTOR_METADATA[fmt])
            out[fmt] = buf.getvalue()
    return Rendered(png, **out)


def _png_bytes(rgba: np.ndarray) -> bytes:
    # The toolkit's own PNG writer, so figure bytes do not depend on the host's zlib either; Agg renders
    # straight (not premultiplied) RGBA, composited over white with exact integer rounding.
    alpha = rgba[:, :, 3:4].astype(np.uint32)
    rgb = (rgba[:, :, :3].astype(np.uint32) * alpha + 255 * (255 - alpha) + 127) // 255
    return encode_png(np.ascontiguousarray(rgb.astype(np.uint8)))


def _short(label: str, limit: int) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def _percent(v, _pos=None) -> str:
    return f"{100 * v:.0f}"


def data_top(ymax: float, bounded: bool) -> float:
    """Upper y limit scaled to the data (values and interval ends) rather than a fixed 0-1 axis, so a recall of
    0.15 fills the panel; at most just above 1 for a metric bounded to [0, 1], never a flat zero-height axis."""
    top = max(ymax * 1.08, 0.05)
    return min(top, 1.02) if bounded else top


def _drop_phrase(metric: str) -> str:
    if metric in LOWER_IS_BETTER:
        return f"relative increase of {metric} vs clean (%)"
    return f"relative drop of {metric} vs clean (%)"


# --- heatmap -----------------------------------------------------------------------------------------------


def heatmap(group: DatasetGroup, metric: str) -> FigurePlan:
    """Rows = corruptions grouped by family, columns = models x severities, cell = degradation (%).

    Missing conditions are hatched; an undefined drop (clean value 0 or null) reads "n/a"; a cell whose paired
    bootstrap interval of the drop (``ci_drop``) includes 0 is faded, so the brightest cells cannot be noise.
    """
    rows, sevs, runs = group.corruptions, group.severities, group.runs
    n_r, n_s, n_m = len(rows), len(sevs), len(runs)
    values, state = _heatmap_cells(group, metric)
    finite = values[np.isfinite(values)]
    vmin = min(0.0, math.floor(finite.min() * 10) / 10) if finite.size else 0.0
    vmax = max(0.1, math.ceil(finite.max() * 10) / 10) if finite.size else 1.0
    width, height = heatmap_size(n_m, n_r, n_s)
    grid_w, grid_h = _HM_CELL_W * n_s * n_m, _HM_CELL_H * n_r

    def draw(fig: Figure) -> None:
        ax = fig.add_axes((_HM_LEFT / width, _HM_BOTTOM / height, grid_w / width, grid_h / height))
        cmap = matplotlib.colormaps[palette.HEATMAP_CMAP].with_extremes(bad="white")
        norm = matplotlib.colors.Normalize(vmin=vmin, vmax=vmax)
        im = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, norm=norm, aspect="auto", interpolation="nearest")
        _heatmap_cell_marks(ax, values, state, cmap, norm)
        for j in range(1, n_m):
            ax.axvline(j * n_s - 0.5, color="white", linewidth=3)
        _heatmap_family_labels(ax, group)
        _heatmap_ticks(ax, group)
        cax = fig.add_axes(((_HM_LEFT + grid_w + 18) / width, _HM_BOTTOM / height, 14 / width, grid_h / height))
        cbar = fig.colorbar(im, cax=cax, format=FuncFormatter(_percent))
        cbar.outline.set_linewidth(0.5)
        cbar.set_label("%", rotation=0, labelpad=8)
        fig.text(
            8 / width,
            1 - 8 / height,
            f"{group.name}: {_drop_phrase(metric)}",
            ha="left",
            va="top",
            fontsize=10,
            fontweight="bold",
        )
        notes = _heatmap_notes(state, metric)
        if notes:
            fig.text(8 / width, 8 / height, "; ".join(notes), ha="left", va="bottom", fontsize=7.5, color="#333333")

    return FigurePlan(width, height, draw)


def _heatmap_cells(group: DatasetGroup, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(values, state), both (corruptions, models x severities): the degradation, and 0 value / 1 missing
    condition / 2 undefined drop / 3 value whose drop interval includes 0 (no interval: state 0)."""
    rows, sevs, runs = group.corruptions, group.severities, group.runs
    n_s = len(sevs)
    values = np.full((len(rows), len(runs) * n_s), np.nan)
    state = np.zeros(values.shape, dtype=np.int8)
    for i, c in enumerate(rows):
        for j, run in enumerate(runs):
            for k, s in enumerate(sevs):
                cond = condition_id(c, s)
                if not run.has(cond):
                    state[i, j * n_s + k] = 1
                    continue
                v = degradation(run.result, cond, metric)
                if v is None:
                    state[i, j * n_s + k] = 2
                    continue
                values[i, j * n_s + k] = v
                ci = drop_interval(run.result, cond, metric)
                if ci is not None and ci[0] <= 0 <= ci[1]:
                    state[i, j * n_s + k] = _CI_HAS_ZERO
    return values, state


_CI_HAS_ZERO = 3
# How much of a cell's colour a white veil hides when the cell's interval includes 0 (the value stays legible).
_FADE = 0.62


def _hatch_cell(ax, row: int, col: int, hatch: str, edge: str) -> None:
    """A hatch over heatmap cell (row, col), no fill: missing cells and cells whose interval includes 0."""
    ax.add_patch(Rectangle((col - 0.5, row - 0.5), 1, 1, fill=False, hatch=hatch, edgecolor=edge, linewidth=0))


def _heatmap_cell_marks(ax, values: np.ndarray, state: np.ndarray, cmap, norm) -> None:
    """Hatch missing cells, "n/a" undefined ones, fade those whose interval includes 0, and print each value in a
    colour readable on its (faded) cell."""
    for (i, col), st in np.ndenumerate(state):
        if st == 1:
            _hatch_cell(ax, i, col, palette.MISSING_HATCH, palette.MISSING_EDGE)
        elif st == 2:
            ax.text(col, i, "n/a", ha="center", va="center", fontsize=7, color="#555555")
        else:
            v = values[i, col]
            r, g, b, _ = cmap(norm(v))
            if st == _CI_HAS_ZERO:
                ax.add_patch(
                    Rectangle((col - 0.5, i - 0.5), 1, 1, facecolor="white", alpha=_FADE, linewidth=0, gid="ci-zero")
                )
                # A hatch too: faded light cells would otherwise look like any light cell, and in greyscale.
                _hatch_cell(ax, i, col, palette.UNCERTAIN_HATCH, palette.UNCERTAIN_EDGE)
                r, g, b = (c + (1 - c) * _FADE for c in (r, g, b))
            dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5
            ax.text(
                col, i, f"{100 * v:.0f}", ha="center", va="center", fontsize=7.5, color="white" if dark else "black"
            )


def _heatmap_family_labels(ax, group: DatasetGroup) -> None:
    """Family names left of their rows, with white separators and grey rules between families."""
    n_r = len(group.corruptions)
    start = 0
    for fam in group.family_order:
        members = group.family_members(fam)
        centre = start + (len(members) - 1) / 2
        ax.annotate(
            fam,
            xy=(0, centre),
            xycoords=("axes fraction", "data"),
            xytext=(-150 * _PT, 0),
            textcoords="offset points",
            ha="left",
            va="center",
            fontsize=8.5,
            fontweight="bold",
        )
        start += len(members)
        if start < n_r:
            ax.axhline(start - 0.5, color="white", linewidth=3)
            ax.annotate(
                "",
                xy=(0, start - 0.5),
                xycoords=("axes fraction", "data"),
                xytext=(-205 * _PT, 0),
                textcoords="offset points",
                arrowprops={"arrowstyle": "-", "color": "#bbbbbb", "linewidth": 0.8},
            )


def _heatmap_ticks(ax, group: DatasetGroup) -> None:
    """Corruption names on the rows, severities on top, each model's label above its block of columns."""
    rows, sevs, runs = group.corruptions, group.severities, group.runs
    n_s = len(sevs)
    ax.set_yticks(range(len(rows)), [c.replace("_", " ") for c in rows])
    ax.set_xticks(range(len(runs) * n_s), [f"s{s}" for _ in runs for s in sevs])
    ax.xaxis.tick_top()
    ax.tick_params(length=0, pad=3)
    for spine in ax.spines.values():
        spine.set_visible(False)
    for j, run in enumerate(runs):
        ax.annotate(
            _short(run.label, 7 * n_s),
            xy=(j * n_s + (n_s - 1) / 2, 1),
            xycoords=("data", "axes fraction"),
            xytext=(0, 20 * _PT),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=8.5,
            fontweight="bold",
        )


def _heatmap_notes(state: np.ndarray, metric: str) -> list[str]:
    notes = []
    if (state == 1).any():
        notes.append(f"hatched: condition missing from the input ({int((state == 1).sum())} cells)")
    if (state == 2).any():
        notes.append("n/a: drop undefined (clean value 0 or null)")
    if (state == _CI_HAS_ZERO).any():
        n_zero = int((state == _CI_HAS_ZERO).sum())
        notes.append(f"faded, hatched (value shown): 95% CI of the drop includes 0, {n_zero} cells")
    if metric in LOWER_IS_BETTER:
        notes.append(f"larger = more {metric}")
    return notes


# --- severity curves and localization: one panel per corruption -----------------------------------------


def _legend_handles(labels: Sequence[str]) -> list[Line2D]:
    handles = []
    for j, label in enumerate(labels):
        st = palette.model_style(j)
        handles.append(
            Line2D(
                [],
                [],
                color=st.colour,
                marker=st.marker,
                linestyle=st.dash,
                linewidth=1.6,
                markersize=5,
                label=label,
            )
        )
    return handles


def _margins(fig: Figure, left: int, right: int, top: int, bottom: int, **spacing) -> None:
    """Fixed margins in pixels. Cheaper than matplotlib's constrained layout (which measured every tick label
    of every panel on each draw) and safe here because every size and label length is known in advance."""
    w, h = fig.get_size_inches() * palette.DPI
    fig.subplots_adjust(left=left / w, right=1 - right / w, top=1 - top / h, bottom=bottom / h, **spacing)


def _suptitle_and_legend(fig: Figure, title: str, handles: list, ncols: int) -> None:
    """The title on top (smaller when it would not fit) and the legend below, in ``ncols`` columns
    (:func:`legend_grid`; the size function made room for its rows)."""
    w, h = fig.get_size_inches() * palette.DPI
    fit_title(fig, title, 1 - 8 / h)
    fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 4 / h), ncols=ncols, frameon=False)


def _panels(fig: Figure, n: int, legend_rows: int, title: str):
    rows = max(1, math.ceil(n / _PANEL_COLS))
    axes = fig.subplots(rows, _PANEL_COLS, sharex=True, sharey=True, squeeze=False)
    bottom = 84 + _LEGEND_ROW_PX * (legend_rows - 1)
    top = 48 + title_extra_px(title, fig.get_figwidth() * palette.DPI)
    _margins(fig, left=62, right=14, top=top, bottom=bottom, wspace=0.12, hspace=0.42)
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        ax.set_visible(False)
    for idx, ax in enumerate(flat[:n]):
        if idx % _PANEL_COLS == 0:
            ax.tick_params(labelleft=True)
        ax.tick_params(labelbottom=True)
        ax.grid(axis="y")
    return flat[:n]


def severity_curves(group: DatasetGroup, metric: str) -> FigurePlan:
    """Metric vs severity (0 = clean, 1-3), one panel per corruption, one line per model, CI bands when
    the scorer wrote ``ci`` for the metric."""
    sevs = (0,) + tuple(group.severities)
    any_band = False
    ymax = 0.0
    series = {}
    for c in group.corruptions:
        conds = ["clean"] + [condition_id(c, s) for s in group.severities]
        for j, run in enumerate(group.runs):
            ys = np.array([np.nan if (v := metric_value(run.result, k, metric)) is None else v for k in conds])
            cis = [confidence_interval(run.result, k, metric) for k in conds]
            lo = np.array([np.nan if ci is None else ci[0] for ci in cis])
            hi = np.array([np.nan if ci is None else ci[1] for ci in cis])
            any_band = any_band or bool(np.isfinite(hi).any())
            ymax = max(ymax, float(np.nanmax(np.concatenate([ys, hi, [0.0]]))))
            series[c, j] = (ys, lo, hi)
    title = f"{group.name}: {metric} vs severity" + (" (bands: bootstrap 95% CI)" if any_band else "")
    labels = _legend_labels(group)
    width, height = small_multiples_size(len(group.corruptions), labels, title)
    legend_cols, legend_rows = legend_grid(labels, width)

    def draw(fig: Figure) -> None:
        axes = _panels(fig, len(group.corruptions), legend_rows, title)
        for ax, c in zip(axes, group.corruptions):
            for j, _run in enumerate(group.runs):
                st = palette.model_style(j)
                ys, lo, hi = series[c, j]
                band = np.isfinite(lo) & np.isfinite(hi)
                if band.any():
                    ax.fill_between(
                        sevs,
                        np.where(band, lo, 0),
                        np.where(band, hi, 0),
                        where=band,
                        color=st.colour,
                        alpha=0.16,
                        linewidth=0,
                    )
                ax.plot(sevs, ys, color=st.colour, marker=st.marker, linestyle=st.dash, linewidth=1.6, markersize=5)
            if all(not np.isfinite(series[c, j][0][1:]).any() for j in range(len(group.runs))):
                ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", color="#777777")
            ax.set_title(f"{c.replace('_', ' ')}  ·  {group.families[c]}")
            ax.set_xticks(sevs, ["clean"] + [str(s) for s in group.severities])
            ax.set_xlim(-0.25, sevs[-1] + 0.25)
        axes[0].set_ylim(0, data_top(ymax, metric not in _UNBOUNDED))
        for idx, ax in enumerate(axes):
            if idx % _PANEL_COLS == 0:
                ax.set_ylabel(metric)
            if idx >= len(axes) - _PANEL_COLS:
                ax.set_xlabel("severity")
        _suptitle_and_legend(fig, title, _legend_handles(labels), legend_cols)

    return FigurePlan(width, height, draw)


def has_localization(group: DatasetGroup) -> bool:
    return any(localization(run.result, k) is not None for run in group.runs for k in group.present_conditions)


def localization_plot(group: DatasetGroup) -> FigurePlan:
    """Mean IoU between a GT's clean and corrupted matched boxes vs severity; point area ∝ matched count."""
    sevs = (0,) + tuple(group.severities)
    n_m = len(group.runs)
    points = {}
    n_max, y_min = 1, 1.0
    for c in group.corruptions:
        conds = ["clean"] + [condition_id(c, s) for s in group.severities]
        for j, run in enumerate(group.runs):
            locs = [localization(run.result, k) for k in conds]
            ys = np.array([np.nan if loc is None else loc[0] for loc in locs])
            ns = np.array([0 if loc is None else loc[1] for loc in locs])
            n_max = max(n_max, int(ns.max()))
            if np.isfinite(ys).any():
                y_min = min(y_min, float(np.nanmin(ys)))
            points[c, j] = (ys, ns)
    bottom = max(0.0, math.floor((y_min - 0.02) * 20) / 20)
    title = f"{group.name}: localization stability (point area ∝ GT matched in both, max {n_max})"
    labels = _legend_labels(group)
    width, height = small_multiples_size(len(group.corruptions), labels, title)
    legend_cols, legend_rows = legend_grid(labels, width)

    def draw(fig: Figure) -> None:
        axes = _panels(fig, len(group.corruptions), legend_rows, title)
        for ax, c in zip(axes, group.corruptions):
            for j in range(n_m):
                st = palette.model_style(j)
                ys, ns = points[c, j]
                xs = np.array(sevs, dtype=float) + (j - (n_m - 1) / 2) * 0.07  # side by side, not on top
                ax.plot(xs, ys, color=st.colour, linestyle=st.dash, linewidth=1.2)
                ok = np.isfinite(ys)
                ax.scatter(
                    xs[ok],
                    ys[ok],
                    s=10 + 190 * ns[ok] / n_max,
                    color=st.colour,
                    marker=st.marker,
                    edgecolors="white",
                    linewidths=0.5,
                    zorder=3,
                )
            if all(not np.isfinite(points[c, j][0][1:]).any() for j in range(n_m)):
                ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", color="#777777")
            ax.set_title(f"{c.replace('_', ' ')}  ·  {group.families[c]}")
            ax.set_xticks(sevs, ["clean"] + [str(s) for s in group.severities])
            ax.set_xlim(-0.3, sevs[-1] + 0.3)
        axes[0].set_ylim(bottom, 1.01)
        for ax in axes[-_PANEL_COLS:]:
            ax.set_xlabel("severity")
        # One label for all rows: a panel row is shorter than the phrase.
        y0, y1 = min(ax.get_position().y0 for ax in axes), max(ax.get_position().y1 for ax in axes)
        fig.supylabel("IoU, clean vs corrupted box", x=4 / width, ha="left", y=(y0 + y1) / 2, fontsize=9.0)
        _suptitle_and_legend(fig, title, _legend_handles(labels), legend_cols)

    return FigurePlan(width, height, draw)


# --- family summary -----------------------------------------------------------------------------------------

_BAR_LABEL_PT = 7.5
_BAR_LEGEND_MAX_COLS = 4


def family_bars_size(n_models: int, n_families: int, labels: Sequence[str] = (), title: str = "") -> tuple[int, int]:
    """(width, height) in layout pixels of the family bar chart (the PNG is twice as large), with room for a legend
    of ``labels`` above the axes (one row when none are given) and for ``title`` above it."""
    width = 160 + n_families * (70 + 36 * n_models)
    return _with_legend(width, 420 + _LEGEND_ROW_PX, labels, title, max_cols=_BAR_LEGEND_MAX_COLS)


def family_bars(group: DatasetGroup, metric: str) -> FigurePlan:
    """Mean degradation per family, one bar per model (colour and hatch), value labels in % at the outer end
    of each bar. The legend sits above the axes, so it never covers a bar or a label; labels turn vertical
    when a horizontal one would be wider than its bar, so neighbours never touch."""
    fams = group.family_order
    n_m = len(group.runs)
    flip = -1.0 if metric in LOWER_IS_BETTER else 1.0
    vals, errs = [], []
    for run in group.runs:
        fam_drop = per_family_drop(group, run, metric)
        vals.append([None if (drop := fam_drop[f]) is None else flip * drop for f in fams])
        # The interval of the family's mean drop, sign-flipped with the value (larger = worse); None when absent.
        cis = [family_drop_interval(run, f, metric) for f in fams]
        errs.append(
            [
                None if v is None or ci is None else tuple(sorted((flip * ci[0], flip * ci[1])))
                for v, ci in zip(vals[-1], cis)
            ]
        )
    any_err = any(ci is not None for row in errs for ci in row)
    # With whiskers the title names them instead of "per family" (the axis names the families): same length.
    title = f"{group.name}: mean {_drop_phrase(metric)}" + (", 95% CI" if any_err else " per family")
    labels = _legend_labels(group)
    width, height = family_bars_size(n_m, len(fams), labels, title)
    legend_cols, legend_rows = legend_grid(labels, width, _BAR_LEGEND_MAX_COLS)
    legend_top = 28 + title_extra_px(title, width)  # below the title
    bar_w = 0.8 / n_m
    left, right, top, bottom = 62, 14, legend_top + 10 + _LEGEND_ROW_PX * legend_rows, 44  # the legend clears the axes
    texts = [["n/a" if v is None else f"{100 * v:.0f}" for v in row] for row in vals]
    # A DejaVu Sans digit or minus is about 0.64 em wide; the bar's width in points follows from the layout.
    bar_pt = bar_w * 0.92 * (width - left - right) / len(fams) * _PT
    widest_pt = max(len(t) for row in texts for t in row) * 0.64 * _BAR_LABEL_PT
    vertical = widest_pt + 2 > bar_pt
    finite = [v for row in vals for v in row if v is not None]
    finite += [end for row in errs for ci in row if ci is not None for end in ci]
    lo, hi = min([0.0] + finite), max([0.05] + finite)
    # Room beyond the longest bars for a label: a share of the span, larger for vertical labels.
    pad = (hi - lo) * (0.22 if vertical else 0.12)

    def draw(fig: Figure) -> None:
        ax = fig.add_subplot()
        _margins(fig, left=left, right=right, top=top, bottom=bottom)
        x = np.arange(len(fams), dtype=float)
        handles = []
        for j, label in enumerate(labels):
            st = palette.model_style(j)
            pos = x + (j - (n_m - 1) / 2) * bar_w
            heights = np.array([0.0 if v is None else v for v in vals[j]])
            ax.bar(
                pos,
                heights,
                width=bar_w * 0.92,
                color=st.colour,
                hatch=st.hatch,
                edgecolor="black",
                linewidth=0.6,
                gid="bar",
            )
            ok = [k for k, ci in enumerate(errs[j]) if ci is not None]
            if ok:
                # Centre +- half-width draws exactly [low, high], even when the bar's value falls outside it.
                ends = np.array([errs[j][k] for k in ok], dtype=float)
                ax.errorbar(
                    pos[ok],
                    ends.mean(axis=1),
                    yerr=(ends[:, 1] - ends[:, 0]) / 2,
                    fmt="none",
                    ecolor="black",
                    elinewidth=0.9,
                    capsize=2.5,
                    capthick=0.9,
                    gid="bar-ci",
                )
            for p, v, text, ci in zip(pos, vals[j], texts[j], errs[j]):
                y = 0.0 if v is None else v
                up = y >= 0
                # The label sits past the whisker's end, so the interval never runs through the number.
                tip = y if ci is None else (max(y, ci[1]) if up else min(y, ci[0]))
                ax.annotate(
                    text,
                    xy=(p, tip),
                    xytext=(0, 3 if up else -3),
                    textcoords="offset points",
                    ha="center",
                    va="bottom" if up else "top",
                    fontsize=_BAR_LABEL_PT,
                    rotation=90 if vertical else 0,
                    gid="bar-label",
                )
            handles.append(Patch(facecolor=st.colour, hatch=st.hatch, edgecolor="black", linewidth=0.6, label=label))
        ax.axhline(0, color="black", linewidth=0.8)
        counts = [len(group.family_members(f)) for f in fams]
        ax.set_xticks(x, [f"{f}\n({n} corruption{'s' if n != 1 else ''})" for f, n in zip(fams, counts)])
        ax.set_xlim(-0.5, len(fams) - 0.5)
        ax.yaxis.set_major_formatter(FuncFormatter(_percent))
        ax.set_ylabel(f"mean {_drop_phrase(metric)}")
        ax.set_ylim(lo - pad if lo < 0 else 0, hi + pad)
        ax.grid(axis="y")
        ax.set_axisbelow(True)
        fit_title(fig, title, 1 - 6 / height)
        anchor = (0.5, 1 - legend_top / height)
        fig.legend(handles=handles, loc="upper center", bbox_to_anchor=anchor, ncols=legend_cols, frameon=False)

    return FigurePlan(width, height, draw)


# --- false alarms ---------------------------------------------------------------------------------------------


def false_alarm_size(n_conditions: int, labels: Sequence[str] = (), title: str = "") -> tuple[int, int]:
    """(width, height) in layout pixels of the false-alarm share figure (the PNG is twice as large), with room for
    a legend of ``labels`` below it (one row when none are given) and for ``title`` above."""
    return _with_legend(140 + 30 * max(n_conditions, 4), 460, labels, title)


def has_false_alarms(group: DatasetGroup) -> bool:
    return any(false_alarm_record(run.result, c) is not None for run in group.runs for c in group.present_conditions)


def false_alarm_shares(group: DatasetGroup) -> FigurePlan:
    """Per condition and model: the share of images with at least one false alarm (marker) and its exact
    one-sided upper bound (the top of the bar from the marker), conditions along x in report order."""
    conds = [
        c for c in group.present_conditions if any(false_alarm_record(r.result, c) is not None for r in group.runs)
    ]
    n_m = len(group.runs)
    conf = next((false_alarm_confidence(r.result) for r in group.runs if false_alarm_confidence(r.result)), None)
    bound = f"{100 * conf:.0f}% " if conf else ""
    title = (
        f"{group.name}: share of images with a false alarm (marker) and its exact "
        f"{bound}upper bound (Clopper–Pearson, line top)"
    )
    labels = _legend_labels(group)
    width, height = false_alarm_size(len(conds), labels, title)
    legend_cols, legend_rows = legend_grid(labels, width)
    points = []
    for run in group.runs:
        recs = [false_alarm_record(run.result, c) for c in conds]
        share = np.array(
            [
                np.nan if r is None or r.get("false_alarm_image_share") is None else r["false_alarm_image_share"]
                for r in recs
            ],
            dtype=float,
        )
        upper = np.array(
            [
                np.nan
                if r is None or r.get("false_alarm_image_share_upper") is None
                else r["false_alarm_image_share_upper"]
                for r in recs
            ],
            dtype=float,
        )
        points.append((share, upper))
    step = 0.7 / max(n_m, 1)
    ymax = max([0.0] + [float(np.nanmax(np.concatenate([s, u, [0.0]]))) for s, u in points])

    def draw(fig: Figure) -> None:
        ax = fig.add_subplot()
        top = 48 + title_extra_px(title, width)
        _margins(fig, left=62, right=14, top=top, bottom=150 + _LEGEND_ROW_PX * (legend_rows - 1))
        x = np.arange(len(conds), dtype=float)
        for j, (share, upper) in enumerate(points):
            st = palette.model_style(j)
            xs = x + (j - (n_m - 1) / 2) * step
            ok = np.isfinite(share) & np.isfinite(upper)
            ax.vlines(xs[ok], share[ok], upper[ok], color=st.colour, linewidth=1.4)
            ax.scatter(xs[ok], upper[ok], marker="_", s=60, color=st.colour, linewidths=1.4)
            ax.scatter(
                xs[ok], share[ok], marker=st.marker, s=22, color=st.colour, edgecolors="white", linewidths=0.5, zorder=3
            )
        ax.set_xticks(x, [c.replace("_", " ") for c in conds], rotation=60, ha="right", rotation_mode="anchor")
        ax.set_xlim(-0.6, len(conds) - 0.4)
        ax.set_ylim(0, data_top(ymax, bounded=True))
        ax.yaxis.set_major_formatter(FuncFormatter(_percent))
        ax.set_ylabel("images with a false alarm (%)")
        ax.grid(axis="y")
        ax.set_axisbelow(True)
        _suptitle_and_legend(fig, title, _legend_handles(labels), legend_cols)

    return FigurePlan(width, height, draw)
