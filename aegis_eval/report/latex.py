"""LaTeX output of the report: booktabs tables a paper can ``\\input`` as they are, and a standalone report.tex.

Every table is one file (``tables/<dataset>_<name>.tex``) holding one ``table`` float; the tables need
``\\usepackage{booktabs}`` and ``\\usepackage{graphicx}``. Tables stay at a readable size: long header cells wrap
onto several lines, a tabular wider than the line turns sideways (a page-high float, graphicx's ``\\rotatebox``), and a
table that would not fit even sideways is split into parts by columns (its key columns repeated), each its own float
in the same file. ``report.tex`` is a complete ``article`` (Latin Modern vector fonts) that inputs every table and
includes the PDF figures, each at its own size or shrunk to the line, and turned sideways like a wide table when that
shows it larger (a figure shrunk below 80 %; a section's first figure then sits below the heading); it compiles
with pdflatex from TeX Live's base, recommended and font packages. Everything returns strings; ``build`` writes
them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from aegis_eval.report.tables import Table
from aegis_eval.report.text import one_line

_LATEX_ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    # Characters the tables and notes use beyond ASCII: pdflatex's default input encoding has no glyph for them.
    "≤": r"$\leq$",
    "≥": r"$\geq$",
    "τ": r"$\tau$",
    "Δ": r"$\Delta$",
    "−": r"$-$",
    "–": "--",
    "—": "---",
    "…": r"\dots{}",
    "×": r"$\times$",
    "·": r"$\cdot$",
    "∝": r"$\propto$",
    "→": r"$\rightarrow$",
    "²": r"\textsuperscript{2}",
    "é": r"\'e",
    "ö": r"\"o",
    "ü": r"\"u",
}


def latex_escape(s: str) -> str:
    """Escape LaTeX's special characters so any label or name typesets literally, on one line (a blank line
    would end a paragraph inside a caption, a control character stops pdflatex); the few non-ASCII characters
    the report writes become their LaTeX commands, any other one a ``?``."""
    return "".join(_LATEX_ESCAPES.get(ch, ch if ord(ch) < 128 else "?") for ch in one_line(s))


def label_key(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", s).strip("-") or "x"


def table_label(slug: str, name: str) -> str:
    """``tab:aegis-<dataset>-<table>``: the dataset's file-name slug is unique within a report and holds only
    characters a label may hold, so it goes in as it is (two names differing only in punctuation keep apart)."""
    return f"tab:aegis-{slug}-{label_key(name)}"


# Sizes, in points, of report.tex's page (16 cm x 23 cm text block) and of \\small text (lmodern at 9 pt): a
# table's width is estimated from its longest cell per column to split it before LaTeX would have to shrink it.
# Targets: what the float accepts (1.12 x the line; 0.95 x the page height, shrunk by 12 % at most) over 1.07, the
# most the estimate fell short of pdflatex's width on the report's tables.
_PAGE_PT, _UPRIGHT_PT = 0.95 * 652.0 * 1.12 / 1.07, 454.0 * 1.12 / 1.07
_CHAR_PT, _NARROW_PT, _COLSEP_PT = 4.6, 2.6, 12.0  # a digit or letter; a space or punctuation; both column sides
_NARROW = frozenset(" .,:;[]()'|!il-")
_BOLD = 1.15  # bold digits are about 15 % wider
_WIDE, _WIDE_PT = frozenset("≤≥→×Δ"), 7.8  # math symbols with their spacing
_HEADER_WRAP = 16  # characters per header line

# The float's body: the tabular in a box, set as it is when it fits the line, scaled down to the line when at most
# 12 % too wide (9 pt text stays >= 8 pt), else sideways (a page-high float whose caption turns with it); only a
# tabular wider than the page height is scaled further, and ``split_columns`` keeps that to estimation slack.
# Box 0 is TeX's scratch box, local to the float's group. Needs graphicx only.
_SIDEWAYS = "0.95\\textheight"
_MAX_SHRINK = "1.12\\linewidth"


def _float(caption: str, label: str, tabular: list[str], notes: Sequence[str]) -> str:
    note = (
        ["\\par\\smallskip", "\\parbox{\\linewidth}{\\footnotesize " + latex_escape(" ".join(notes)) + "}"]
        if notes
        else []
    )
    lines = [
        "\\begin{table}[!htbp]",
        "\\centering",
        "\\small",
        "\\sbox0{%",
        *tabular,
        "}%",
        f"\\ifdim\\wd0>{_MAX_SHRINK}\\def\\aegiswidth{{{_SIDEWAYS}}}\\else\\def\\aegiswidth{{\\linewidth}}\\fi",
        "\\sbox2{\\begin{minipage}{\\aegiswidth}\\centering",
        f"\\caption{{{caption}}}",
        f"\\label{{{label}}}",
        "\\ifdim\\wd0>\\linewidth\\resizebox{\\linewidth}{!}{\\usebox0}\\else\\usebox0\\fi",
        *note,
        "\\end{minipage}}%",
        f"\\ifdim\\wd0>{_MAX_SHRINK}\\rotatebox{{90}}{{\\usebox2}}\\else\\usebox2\\fi",
        "\\end{table}",
    ]
    return "\n".join(lines) + "\n"


def _header_cell(h: str, align: str) -> str:
    """A header cell; a long one wraps onto lines of about ``_HEADER_WRAP`` characters (a nested tabular;
    ``\\relax`` after each ``\\\\`` so a line starting with "[" is not read as its optional skip)."""
    lines = _wrap(h)
    if len(lines) == 1:
        return latex_escape(h)
    return (
        f"\\begin{{tabular}}[b]{{@{{}}{align}@{{}}}}"
        + "\\\\\\relax ".join(latex_escape(x) for x in lines)
        + "\\end{tabular}"
    )


def _wrap(text: str) -> list[str]:
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= _HEADER_WRAP:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def _text_pt(text: str) -> float:
    return sum(_NARROW_PT if ch in _NARROW else _WIDE_PT if ch in _WIDE else _CHAR_PT for ch in text)


def _width_pt(t: Table, columns: Sequence[int], header: bool = True) -> float:
    """Estimated width of the tabular made of ``columns`` of ``t``: longest cell (or header line) per column;
    ``header=False`` for the grid, whose short two-level header replaces ``t.header``."""
    total = 0.0
    for j in columns:
        cells = [_text_pt(row[j]) * (_BOLD if (i, j) in t.bold else 1.0) for i, row in enumerate(t.rows)]
        heads = [_text_pt(x) for x in _wrap(t.header[j])] if header else []
        total += max(heads + cells) + _COLSEP_PT
    return total


def _key_columns(t: Table) -> int:
    """Leading text columns (condition, family, ...) that name a row: every part of a split table repeats them."""
    if all(a == "l" for a in t.align):  # a text table (provenance: field, then one column per run)
        return 1
    k = 0
    while k < len(t.align) - 1 and t.align[k] == "l":
        k += 1
    return max(k, 1)


def _greedy(t: Table, keys: list[int], width_pt: float) -> list[list[int]]:
    parts: list[list[int]] = [[]]
    for j in range(len(keys), len(t.header)):
        if parts[-1] and _width_pt(t, keys + parts[-1] + [j]) > width_pt:
            parts.append([])
        parts[-1].append(j)
    return parts


def _parts(t: Table, keys: list[int], width_pt: float) -> list[list[int]]:
    """The fewest runs of columns that fit ``width_pt``, as even as that count allows (the narrowest limit that
    still gives it), so a split does not leave one column alone in its last part."""
    parts = _greedy(t, keys, width_pt)
    n = len(parts)
    if n > 1:
        rest = _width_pt(t, range(len(keys), len(t.header)))
        limit = _width_pt(t, keys) + rest / n
        while limit < width_pt:
            even = _greedy(t, keys, limit)
            if len(even) == n:
                return even
            limit += 4.0
    return parts


def split_columns(t: Table) -> list[Table]:
    """``t`` as one table when it fits the line, else as parts, each with the key columns first and the next run of
    columns in order, titled "(part k of n)": parts that fit upright when that costs at most one more part than
    parts that fit a page turned sideways, else those (one sideways table: ``t`` itself)."""
    keys = list(range(_key_columns(t)))
    parts = _parts(t, keys, _UPRIGHT_PT)
    if len(parts) == 1:
        return [t]
    sideways = _parts(t, keys, _PAGE_PT)
    if len(parts) > len(sideways) + 1:
        if len(sideways) == 1:
            return [t]
        parts = sideways
    out = []
    for k, cols in enumerate(parts, start=1):
        sel = keys + cols
        out.append(
            replace(
                _select(t, sel),
                title=f"{t.title} (part {k} of {len(parts)})",
                header=tuple(t.header[j] for j in sel),
                align=tuple(t.align[j] for j in sel),
                notes=t.notes if k == len(parts) else (),
            )
        )
    return out


def _select(t: Table, columns: Sequence[int]) -> Table:
    """``t``'s rows cut to ``columns`` (in that order), its bold markers renumbered to match."""
    return replace(
        t,
        rows=tuple(tuple(row[j] for j in columns) for row in t.rows),
        bold=frozenset((i, columns.index(j)) for i, j in t.bold if j in columns),
    )


def _body(t: Table) -> list[str]:
    """The tabular's rows: bold cells as ``\\textbf``, a ``\\midrule`` before each family break."""
    lines = []
    for i, row in enumerate(t.rows):
        if i in t.breaks and i > 0:
            lines.append("\\midrule")
        cells = [
            f"\\textbf{{{latex_escape(c)}}}" if (i, j) in t.bold and c else latex_escape(c) for j, c in enumerate(row)
        ]
        lines.append(" & ".join(cells) + " \\\\")
    return lines


def latex_table(t: Table, label: str) -> str:
    """A ``Table`` as a booktabs float: bold cells as ``\\textbf``, family breaks as ``\\midrule``, notes in
    a footnote-size paragraph under the tabular; split into several floats (``split_columns``) when too wide."""
    floats = []
    for k, part in enumerate(split_columns(t)):
        tabular = [
            f"\\begin{{tabular}}{{{''.join(part.align)}}}",
            "\\toprule",
            " & ".join(_header_cell(h, a) for h, a in zip(part.header, part.align)) + " \\\\",
            "\\midrule",
            *_body(part),
            "\\bottomrule",
            "\\end{tabular}",
        ]
        floats.append(_float(latex_escape(part.title) + ".", label + (f"-{k + 1}" if k else ""), tabular, part.notes))
    return "".join(floats)


def latex_grid(grid: Table, models: Sequence[str], metric: str, label: str) -> str:
    """The per-condition grid (``tables.grid_table``: its rows, family breaks and notes) under a two-level
    header: per model (``models``, in column order) the metric and its relative drop in percent. Models go into
    as many parts (floats) as needed to fit a page turned sideways, never split between two parts."""

    def chunked(width_pt: float) -> list[list[int]]:
        per_part = len(models)
        while per_part > 1 and _width_pt(grid, range(3 + 2 * per_part), header=False) > width_pt:
            per_part -= 1
        return [list(range(k, min(k + per_part, len(models)))) for k in range(0, len(models), per_part)]

    chunks, sideways = chunked(_UPRIGHT_PT), chunked(_PAGE_PT)  # as in split_columns
    if len(chunks) > len(sideways) + 1:
        chunks = sideways
    floats = []
    for k, chunk in enumerate(chunks):
        cols = [0, 1, 2] + [c for m in chunk for c in (3 + 2 * m, 4 + 2 * m)]
        part = _select(grid, cols)
        n_m = len(chunk)
        tabular = [
            f"\\begin{{tabular}}{{llr{'rr' * n_m}}}",
            "\\toprule",
            " & & " + "".join(f" & \\multicolumn{{2}}{{c}}{{{latex_escape(models[m])}}}" for m in chunk) + " \\\\",
            " ".join(f"\\cmidrule(lr){{{4 + 2 * j}-{5 + 2 * j}}}" for j in range(n_m)),
            "Family & Corruption & Sev." + f" & {latex_escape(metric)} & $\\Delta$\\%" * n_m + " \\\\",
            "\\midrule",
            *_body(part),
            "\\bottomrule",
            "\\end{tabular}",
        ]
        title = f"{grid.title} and relative drop vs clean (%)"
        if len(chunks) > 1:
            title += f" (part {k + 1} of {len(chunks)})"
        notes = grid.notes if k == len(chunks) - 1 else ()
        floats.append(_float(latex_escape(title + "."), label + (f"-{k + 1}" if k else ""), tabular, notes))
    return "".join(floats)


def latex_grid_file(grids: Sequence[str]) -> str:
    """report_table.tex: the per-condition grid of the report metric for every dataset (``latex_grid``'s floats)."""
    head = (
        "% AegisBench main grid, written by `aegis report`. Requires \\usepackage{booktabs} and "
        "\\usepackage{graphicx}.\n% Empty cells: condition missing from that run; n/a: undefined value.\n"
    )
    return head + "\n".join(grids)


_FLOATS_PER_PAGE = 4


@dataclass(frozen=True)
class LatexFigure:
    """A figure for report.tex: its PDF path relative to the report folder, its caption and the PDF's page size in
    PostScript points, 1/72 in (None: shown at the line's width)."""

    pdf: str
    caption: str
    width_pt: float | None = None
    height_pt: float | None = None


# report.tex's text block (the preamble sets it from these) and the room a caption takes below a figure, in
# PostScript points (1/72 in, a PDF's unit; TeX's bp).
_LINE_CM, _TEXT_HEIGHT_CM = 16, 23
_CM_PT = 72 / 2.54
_CAPTION_PT = 40.0
# A figure shrunk below this share of its size (8 pt text below 6.4 pt) turns sideways when that shows it larger.
_MIN_UPRIGHT_SCALE = 0.8


def figure_placement(width_pt: float, height_pt: float, first: bool = False) -> tuple[float, bool]:
    """(scale, sideways) of a figure of this size in report.tex: its own size where it fits (never enlarged), else
    shrunk to the text block; turned sideways (a page-high float, like a wide table) when upright would shrink it
    below 80 % and sideways shows it at least 15 % larger. A section's ``first`` figure shares its page with the
    heading, so sideways it is kept to 88 % of the page's height (set below the heading, never on a page of its
    own, which would leave the heading alone)."""
    line, height = _LINE_CM * _CM_PT, _TEXT_HEIGHT_CM * _CM_PT
    upright = min(1.0, line / width_pt, (height - _CAPTION_PT) / height_pt)
    room = 0.88 if first else 0.95  # 0.95: as a sideways table
    sideways = min(1.0, room * height / width_pt, (line - _CAPTION_PT) / height_pt)
    if upright < _MIN_UPRIGHT_SCALE and sideways > 1.15 * upright:
        return sideways, True
    return upright, False


def _figure(f: LatexFigure, first: bool) -> tuple[list[str], bool]:
    """The figure's lines in report.tex, and whether it is turned sideways."""
    sideways = False
    width = "\\linewidth"
    if f.width_pt is not None and f.height_pt is not None:
        scale, sideways = figure_placement(f.width_pt, f.height_pt, first)
        width = f"{scale * f.width_pt:.1f}bp"
    body = [f"\\includegraphics[width={width}]{{{f.pdf}}}", f"\\caption{{{latex_escape(f.caption)}}}"]
    if sideways:
        body = [f"\\rotatebox{{90}}{{\\begin{{minipage}}{{{width}}}\\centering", *body, "\\end{minipage}}"]
    # A section's first figure, sideways, goes below its heading ("!": whatever share of the page it takes).
    where = "[!b]" if first and sideways else "[!htbp]"
    return [f"\\begin{{figure}}{where}", "\\centering", *body, "\\end{figure}"], sideways


def latex_document(
    title: str, sections: Sequence[tuple[str, Sequence[LatexFigure], Sequence[str]]], preamble_notes: Sequence[str]
) -> str:
    """A standalone article: per dataset a section with its figures and the ``\\input`` of each table file.

    sections: (dataset name, figures, table files relative to the report folder)."""
    lines = [
        "% Written by `aegis report`; compile with `pdflatex report.tex` in this folder.",
        "\\documentclass[10pt]{article}",
        "\\usepackage[T1]{fontenc}",
        "\\usepackage{lmodern}",  # vector Type 1 fonts; T1 without it falls back to bitmap Type 3
        "\\usepackage{booktabs}",
        "\\usepackage{graphicx}",
        f"\\setlength{{\\textwidth}}{{{_LINE_CM}cm}}\\setlength{{\\oddsidemargin}}{{0cm}}"
        "\\setlength{\\evensidemargin}{0cm}",
        f"\\setlength{{\\textheight}}{{{_TEXT_HEIGHT_CM}cm}}\\setlength{{\\topmargin}}{{-1.5cm}}",
        f"\\title{{{latex_escape(title)}}}",
        "\\author{}",
        "\\date{}",
        "\\begin{document}",
        "\\maketitle",
    ]
    lines += [latex_escape(n) + "\n" for n in preamble_notes]
    for name, figures, tables in sections:
        # Every section starts a page (the previous one ends with \\clearpage) and no page break follows its heading;
        # the first section too when its first figure turns sideways, which needs the page below the heading.
        placed = [_figure(f, first=k == 0) for k, f in enumerate(figures)]
        if placed and placed[0][1]:
            lines.append("\\clearpage")
        lines.append(f"\\section{{{latex_escape(name)}}}")
        for figure_lines, _ in placed:
            lines += figure_lines
        if figures:  # never right after the heading: that would leave it alone at the bottom of a page
            lines.append("\\clearpage")
        for k, t in enumerate(tables):  # a page break every few floats keeps LaTeX's float queue short
            lines.append(f"\\input{{{t}}}" + ("\n\\clearpage" if k % _FLOATS_PER_PAGE == _FLOATS_PER_PAGE - 1 else ""))
        lines.append("\\clearpage")
    lines.append("\\end{document}")
    return "\n".join(lines) + "\n"
