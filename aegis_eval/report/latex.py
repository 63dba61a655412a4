"""LaTeX output of the report: booktabs tables a paper can ``\\input`` as they are, and a standalone report.tex.

Every table is one file (``tables/<dataset>_<name>.tex``) holding one ``table`` float; the tables need
``\\usepackage{booktabs}`` and ``\\usepackage{graphicx}`` (wide tables shrink to the line width with
``\\resizebox``, never grow). ``report.tex`` is a complete ``article`` that inputs every table and includes the
PDF figures; it compiles with pdflatex from texlive-latex-base plus booktabs. Everything returns strings;
``build`` writes them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

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


# Shrink a tabular to the line width only when it is wider (graphicx's \resizebox measures it as \width).
_FIT_OPEN = r"\resizebox{\ifdim\width>\linewidth\linewidth\else\width\fi}{!}{%"


def _float(caption: str, label: str, tabular: list[str], notes: Sequence[str]) -> str:
    lines = [
        "\\begin{table}[!htbp]",
        "\\centering",
        "\\small",
        f"\\caption{{{caption}}}",
        f"\\label{{{label}}}",
        _FIT_OPEN,
        *tabular,
        "}",
    ]
    if notes:
        lines += ["\\par\\smallskip", "\\parbox{\\linewidth}{\\footnotesize " + latex_escape(" ".join(notes)) + "}"]
    lines.append("\\end{table}")
    return "\n".join(lines) + "\n"


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
    """A ``Table`` as one booktabs float: bold cells as ``\\textbf``, family breaks as ``\\midrule``, notes in
    a footnote-size paragraph under the tabular."""
    tabular = [
        f"\\begin{{tabular}}{{{''.join(t.align)}}}",
        "\\toprule",
        " & ".join(latex_escape(h) for h in t.header) + " \\\\",
        "\\midrule",
        *_body(t),
        "\\bottomrule",
        "\\end{tabular}",
    ]
    return _float(latex_escape(t.title) + ".", label, tabular, t.notes)


def latex_grid(grid: Table, models: Sequence[str], metric: str, label: str) -> str:
    """The per-condition grid (``tables.grid_table``: its rows, family breaks and notes) under a two-level
    header: per model (``models``, in column order) the metric and its relative drop in percent."""
    n_m = len(models)
    tabular = [
        f"\\begin{{tabular}}{{llr{'rr' * n_m}}}",
        "\\toprule",
        " & & " + "".join(f" & \\multicolumn{{2}}{{c}}{{{latex_escape(m)}}}" for m in models) + " \\\\",
        " ".join(f"\\cmidrule(lr){{{4 + 2 * j}-{5 + 2 * j}}}" for j in range(n_m)),
        "Family & Corruption & Sev." + f" & {latex_escape(metric)} & $\\Delta$\\%" * n_m + " \\\\",
        "\\midrule",
        *_body(grid),
        "\\bottomrule",
        "\\end{tabular}",
    ]
    return _float(latex_escape(f"{grid.title} and relative drop vs clean (%)."), label, tabular, grid.notes)


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
    """A figure for report.tex: its PDF path relative to the report folder and its caption."""

    pdf: str
    caption: str


def latex_document(
    title: str, sections: Sequence[tuple[str, Sequence[LatexFigure], Sequence[str]]], preamble_notes: Sequence[str]
) -> str:
    """A standalone article: per dataset a section with its figures and the ``\\input`` of each table file.

    sections: (dataset name, figures, table files relative to the report folder)."""
    lines = [
        "% Written by `aegis report`; compile with `pdflatex report.tex` in this folder.",
        "\\documentclass[10pt]{article}",
        "\\usepackage[T1]{fontenc}",
        "\\usepackage{booktabs}",
        "\\usepackage{graphicx}",
        "\\setlength{\\textwidth}{16cm}\\setlength{\\oddsidemargin}{0cm}\\setlength{\\evensidemargin}{0cm}",
        "\\setlength{\\textheight}{23cm}\\setlength{\\topmargin}{-1.5cm}",
        f"\\title{{{latex_escape(title)}}}",
        "\\author{}",
        "\\date{}",
        "\\begin{document}",
        "\\maketitle",
    ]
    lines += [latex_escape(n) + "\n" for n in preamble_notes]
    for name, figures, tables in sections:
        lines.append(f"\\section{{{latex_escape(name)}}}")
        for f in figures:
            lines += [
                "\\begin{figure}[!htbp]",
                "\\centering",
                f"\\includegraphics[width=\\linewidth]{{{f.pdf}}}",
                f"\\caption{{{latex_escape(f.caption)}}}",
                "\\end{figure}",
            ]
        lines.append("\\clearpage")
        for k, t in enumerate(tables):  # a page break every few floats keeps LaTeX's float queue short
            lines.append(f"\\input{{{t}}}" + ("\n\\clearpage" if k % _FLOATS_PER_PAGE == _FLOATS_PER_PAGE - 1 else ""))
        lines.append("\\clearpage")
    lines.append("\\end{document}")
    return "\n".join(lines) + "\n"
