"""Text renderers: ``Table`` -> Markdown / HTML, the main grid -> LaTeX (booktabs), and the report documents.

Everything returns strings; ``build`` writes them. The HTML is self-contained: inline CSS, figures as
``data:image/png;base64`` URIs, no scripts and no external references.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from aegis_eval.report.mitigation import mitigation_tables
from aegis_eval.report.results import DatasetGroup
from aegis_eval.report.tables import (
    Table,
    absent_conditions,
    corruption_table,
    family_table,
    fmt_percent,
    fmt_value,
    grid_rows,
    grid_table,
    headline_table,
    missing_note,
    provenance_table,
    ranking_table,
    summary_table,
    threshold_table,
)
from aegis_eval.result_keys import LOWER_IS_BETTER

TITLE = "AegisBench robustness report"


@dataclass(frozen=True)
class FigureRef:
    """A figure of one dataset: its kind (heatmap, curves, families, localization), caption, relative path
    under the report folder and PNG bytes."""

    dataset: str
    kind: str
    caption: str
    relpath: str
    png: bytes


def _reading_guide(metric: str) -> list[str]:
    lines = [
        f"Metric: **{metric}** at each model's frozen confidence threshold (IoU 0.5, one-to-one matching).",
        "Relative drop = (clean − condition) / clean: 0 means no loss, 0.25 means a quarter of the clean value "
        "is lost. mPC is the mean over the corrupted conditions present, rPC = mPC / clean.",
    ]
    if metric in LOWER_IS_BETTER:
        lines.append(f"Lower {metric} is better, so a worse result has a *negative* drop in the tables; the "
                     "figures flip the sign so that larger always means worse.")
    return lines


# --- Markdown ------------------------------------------------------------------------------------------------

def _md_cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def markdown_table(t: Table, heading: str = "###") -> str:
    sep = {"l": ":---", "r": "---:", "c": ":---:"}
    lines = [f"{heading} {t.title}", "", "| " + " | ".join(_md_cell(h) for h in t.header) + " |",
             "| " + " | ".join(sep[a] for a in t.align) + " |"]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in t.rows]
    if t.notes:
        lines += [""] + [f"*{_md_cell(n)}*  " for n in t.notes]
    return "\n".join(lines) + "\n"


def group_tables(g: DatasetGroup, metric: str) -> list:
    """The tables of one dataset, in report order (the ranking and mitigation tables only when they apply).
    The ranking bootstraps, so ``build_report`` computes them once and hands them to every format."""
    tables = (summary_table(g, metric), family_table(g, metric), corruption_table(g, metric),
              grid_table(g, metric), ranking_table(g, metric), *mitigation_tables(g, metric))
    return [t for t in tables if t is not None]


def markdown_report(groups: Sequence[DatasetGroup], metric: str, figures: Sequence[FigureRef],
                    tables: Mapping[str, list] | None = None) -> str:
    out = [f"# {TITLE}", "", *_reading_guide(metric), "",
           "Datasets: " + ", ".join(f"{g.name} ({len(g.runs)} model{'s' if len(g.runs) != 1 else ''})"
                                   for g in groups) + ".", ""]
    for g in groups:
        out += [f"## {g.name}", ""]
        for note in missing_note(g):
            out += [f"> Partial sweep — {note}", ""]
        for f in (f for f in figures if f.dataset == g.name):
            out += [f"### {f.caption}", "", f"![{f.caption}]({f.relpath})", ""]
        out += [markdown_table(t) for t in (tables[g.name] if tables is not None else group_tables(g, metric))]
        for run in g.runs:
            out += [markdown_table(headline_table(g, run), heading="####")]
    out += [markdown_table(threshold_table(groups), heading="##"), markdown_table(provenance_table(groups), heading="##")]
    return "\n".join(out)


# --- HTML ----------------------------------------------------------------------------------------------------

_CSS = """
body { font-family: "DejaVu Sans", "Helvetica Neue", Arial, sans-serif; margin: 2rem auto; max-width: 1100px;
       color: #1a1a1a; line-height: 1.45; padding: 0 1rem; }
h1 { font-size: 1.6rem; } h2 { border-bottom: 2px solid #0072B2; padding-bottom: .2rem; margin-top: 2.5rem; }
h3 { font-size: 1.05rem; margin-top: 1.6rem; }
table { border-collapse: collapse; margin: .6rem 0; font-size: .82rem; font-variant-numeric: tabular-nums; }
th, td { padding: .2rem .55rem; border-bottom: 1px solid #ddd; }
th { border-bottom: 2px solid #555; background: #f4f4f4; }
td.r, th.r { text-align: right; } td.l, th.l { text-align: left; } td.c, th.c { text-align: center; }
tr.break td { border-top: 1.5px solid #777; }
figure { margin: 1rem 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: .85rem; color: #444; }
.note { font-size: .8rem; color: #444; margin: .1rem 0; }
.partial { background: #fff4e0; border-left: 4px solid #E69F00; padding: .4rem .8rem; }
details { margin: .5rem 0; } summary { cursor: pointer; }
""".strip()


def _e(s: str) -> str:
    return html.escape(s, quote=True)


def html_table(t: Table, heading: str = "h3") -> str:
    parts = [f"<{heading}>{_e(t.title)}</{heading}>", "<table>", "<thead><tr>"]
    parts += [f'<th class="{a}">{_e(h)}</th>' for h, a in zip(t.header, t.align)]
    parts += ["</tr></thead>", "<tbody>"]
    for i, row in enumerate(t.rows):
        cls = ' class="break"' if i in t.breaks and i > 0 else ""
        parts.append(f"<tr{cls}>" + "".join(f'<td class="{a}">{_e(c)}</td>' for c, a in zip(row, t.align)) + "</tr>")
    parts += ["</tbody>", "</table>"]
    parts += [f'<p class="note">{_e(n)}</p>' for n in t.notes]
    return "\n".join(parts)


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def html_report(groups: Sequence[DatasetGroup], metric: str, figures: Sequence[FigureRef],
                tables: Mapping[str, list] | None = None) -> str:
    def md_inline(s: str) -> str:  # the reading guide uses *emphasis* and **strong** only
        s = _e(s)
        s = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", s)
        return re.sub(r"\*(.+?)\*", r"<em>\1</em>", s)

    body = [f"<h1>{_e(TITLE)}</h1>"] + [f"<p>{md_inline(x)}</p>" for x in _reading_guide(metric)]
    body.append("<p>Datasets: " + ", ".join(f'<a href="#ds-{i}">{_e(g.name)}</a> ({len(g.runs)} model'
                                             f"{'s' if len(g.runs) != 1 else ''})" for i, g in enumerate(groups))
                + "</p>")
    for i, g in enumerate(groups):
        body.append(f'<h2 id="ds-{i}">{_e(g.name)}</h2>')
        for note in missing_note(g):
            body.append(f'<p class="partial">Partial sweep — {_e(note)}</p>')
        for f in (f for f in figures if f.dataset == g.name):
            body.append(f'<figure><img alt="{_e(f.caption)}" src="{data_uri(f.png)}">'
                        f"<figcaption>{_e(f.caption)}</figcaption></figure>")
        body += [html_table(t) for t in (tables[g.name] if tables is not None else group_tables(g, metric))]
        for run in g.runs:
            body.append(f"<details><summary>Headline metrics: {_e(run.label)}</summary>"
                        f"{html_table(headline_table(g, run), heading='h4')}</details>")
    body += [html_table(threshold_table(groups), heading="h2"), html_table(provenance_table(groups), heading="h2")]
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{_e(TITLE)}</title>\n<style>\n{_CSS}\n</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")


# --- LaTeX ---------------------------------------------------------------------------------------------------

_LATEX_ESCAPES = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
    "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}",
}


def latex_escape(s: str) -> str:
    """Escape LaTeX's special characters so any label or name typesets literally."""
    return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in s)


def _label_key(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", s).strip("-") or "x"


def latex_grid(group: DatasetGroup, metric: str) -> str:
    """One booktabs table: a clean row, then one row per corruption/severity present, families separated by
    ``\\midrule``; per model the metric and its relative drop in percent. Needs ``\\usepackage{booktabs}``."""
    n_m = len(group.runs)
    cols = "llr" + "rr" * n_m
    lines = [
        "\\begin{table}[t]",
        "\\centering",
        "\\small",
        f"\\caption{{{latex_escape(group.name)}: {latex_escape(metric)} per condition and relative drop "
        f"vs clean (\\%).}}",
        f"\\label{{tab:aegis-{_label_key(group.name)}-{_label_key(metric)}}}",
        f"\\begin{{tabular}}{{{cols}}}",
        "\\toprule",
        " & & " + "".join(f" & \\multicolumn{{2}}{{c}}{{{latex_escape(r.label)}}}" for r in group.runs) + " \\\\",
        " ".join(f"\\cmidrule(lr){{{4 + 2 * j}-{5 + 2 * j}}}" for j in range(n_m)),
        "Family & Corruption & Sev." + f" & {latex_escape(metric)} & $\\Delta$\\%" * n_m + " \\\\",
        "\\midrule",
    ]
    last_family = None
    for r in grid_rows(group, metric):
        fam = r.family or "clean"
        if last_family is not None and fam != last_family:
            lines.append("\\midrule")
        cells = []
        for cell in r.cells:
            if not cell.present:
                cells += ["", ""]
            else:
                cells += [fmt_value(cell.value, metric), fmt_percent(cell.drop)]
        first = fam != last_family
        lines.append(" & ".join([latex_escape(fam) if first else "", latex_escape(r.corruption or "clean"),
                                 str(r.severity)] + cells) + " \\\\")
        last_family = fam
    lines += ["\\bottomrule", "\\end{tabular}"]
    notes = list(missing_note(group))
    absent = absent_conditions(group)
    if absent:
        notes.append(f"No run has {', '.join(absent)}; those rows are omitted.")
    if notes:
        lines += ["\\par\\smallskip", "{\\footnotesize " + latex_escape(" ".join(notes)) + "}"]
    lines.append("\\end{table}")
    return "\n".join(lines) + "\n"


def latex_report(groups: Sequence[DatasetGroup], metric: str) -> str:
    head = ("% AegisBench main grid, written by `aegis report`. Requires \\usepackage{booktabs}.\n"
            "% Empty cells: condition missing from that run; n/a: undefined value.\n")
    return head + "\n".join(latex_grid(g, metric) for g in groups)
