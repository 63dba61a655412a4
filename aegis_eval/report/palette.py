"""Visual constants of every report figure and gallery picture, declared once.

Colours are the Okabe–Ito palette (distinguishable with the common colour-vision deficiencies). Because a
printout may be greyscale, models also differ by marker, dash pattern and bar hatch, and the heatmap uses
``cividis`` (monotone lightness). Fonts are DejaVu Sans, which ships with matplotlib, so nothing downloads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Okabe & Ito (2008), "Color Universal Design".
OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
}

# Model order: the first colours differ most in hue *and* lightness; yellow (too light on white) comes last.
_MODEL_COLOURS = ("blue", "vermillion", "bluish_green", "reddish_purple", "orange", "black", "sky_blue", "yellow")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
# A matplotlib line style: a named one, or (offset, on-off pattern) in points.
Dash = Literal["solid"] | tuple[float, tuple[float, ...]]
_DASHES: tuple[Dash, ...] = (
    "solid",
    (0, (5, 2)),
    (0, (1, 1.5)),
    (0, (5, 1.5, 1, 1.5)),
    (0, (8, 2, 2, 2)),
    (0, (3, 3)),
    (0, (1, 3)),
    (0, (6, 1, 1, 1, 1, 1)),
)
# Line hatches only, two strokes per cell: dot and circle hatches cost a vector path per dot in PDF and SVG.
_HATCHES = ("", "//", "\\\\", "xx", "--", "||", "++", "..")

# Sequential, lightness increasing with the value in cividis; reversed so a larger drop reads darker.
HEATMAP_CMAP = "cividis_r"
MISSING_HATCH = "////"
MISSING_EDGE = "#9a9a9a"
# Heatmap cells whose interval of the drop includes 0: faded and hatched the other way from missing cells.
UNCERTAIN_HATCH = "\\\\"
UNCERTAIN_EDGE = "#8a8a8a"

DPI = 100  # layout unit: every figure size is given in pixels at this DPI, so its size is known in advance
PNG_DPI = 200  # the PNGs are drawn at this DPI, i.e. at twice the layout pixel size
FONT_FAMILY = "DejaVu Sans"
LEGEND_PT = 8.0  # legend text (figures.legend_grid sizes legends with it)

# Gallery drawing colours as RGB tuples (cv2 draws on RGB arrays here).
GT_RGB = (0, 158, 115)  # bluish green: ground truth
GT_MISSED_RGB = (0, 158, 115)  # same hue; missed GT are told apart by a dashed, thicker outline
PRED_RGB = (213, 94, 0)  # vermillion: predictions at the frozen threshold

RC_PARAMS = {
    "font.family": "sans-serif",
    "font.sans-serif": [FONT_FAMILY, "Helvetica", "Arial", "sans-serif"],
    "font.size": 9.0,
    "axes.titlesize": 9.5,
    "axes.labelsize": 9.0,
    "xtick.labelsize": 8.0,
    "ytick.labelsize": 8.0,
    "legend.fontsize": LEGEND_PT,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": False,
    "grid.color": "#d9d9d9",
    "grid.linewidth": 0.6,
    "hatch.linewidth": 0.7,
    "svg.hashsalt": "aegisbench-report",  # fixed ids inside SVGs, so the same figure gives the same bytes
    # SVG text stays text (editable, searchable, a fraction of the size of glyph outlines), set in DejaVu Sans
    # with the usual sans-serif fallbacks; the PDFs embed the font.
    "svg.fonttype": "none",
    # TrueType (Type 42) in the PDFs, not matplotlib's default Type 3: many venues' font checks reject Type 3.
    "pdf.fonttype": 42,
    "ps.fonttype": 42,
    # Labels and names are user text: a label "$\foo$" is drawn as it is, never parsed as mathtext (and failing).
    "text.parse_math": False,
}


@dataclass(frozen=True)
class ModelStyle:
    colour: str
    marker: str
    dash: Dash
    hatch: str


def model_style(index: int) -> ModelStyle:
    """The style of the index-th model of a figure (cycles after 8 models; marker and dash cycle too)."""
    i = index % len(_MODEL_COLOURS)
    return ModelStyle(
        OKABE_ITO[_MODEL_COLOURS[i]],
        _MARKERS[index % len(_MARKERS)],
        _DASHES[index % len(_DASHES)],
        _HATCHES[index % len(_HATCHES)],
    )
