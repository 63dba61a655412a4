"""Text renderers: ``Table`` -> Markdown / HTML and the report documents (LaTeX: ``aegis_eval.report.latex``).

Everything returns strings; ``build`` writes them. The HTML is self-contained: inline CSS, figures as
``data:image/png;base64`` URIs, no scripts and no external references.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from aegis_eval.metrics.result_keys import LOWER_IS_BETTER
from aegis_eval.report.mitigation import mitigation_tables
from aegis_eval.report.results import DatasetGroup
from aegis_eval.report.tables import (
    Table,
    corruption_table,
    false_alarm_table,
    family_table,
    grid_table,
    headline_table,
    missing_note,
    model_summary_table,
    paired_table,
    ranking_table,
    sample_note,
    submerged_table,
    summary_table,
)
from aegis_eval.report.text import html_text, md_text

if TYPE_CHECKING:  # the gallery module draws with OpenCV; the report only reads its index
    from aegis_eval.report.gallery import GalleryExample

TITLE = "AegisBench robustness report"
GALLERY_TITLE = "Image examples: the worst and best (image, condition) pair per condition"
GALLERY_NOTE = (
    "From the failure gallery's per-condition pictures at each model's frozen threshold: per condition the image "
    "whose recall dropped most vs clean (worst) and the one that kept it best (best); GT found, clean → condition."
)


@dataclass(frozen=True)
class FigureRef:
    """A figure of one dataset: its kind (heatmap, curves, families, localization, false_alarms), caption,
    relative path of the PNG under the report folder, and its PNG, PDF and SVG bytes (the vector files sit
    beside the PNG with the same stem)."""

    dataset: str
    kind: str
    caption: str
    relpath: str
    png: bytes
    pdf: bytes | None = None
    svg: bytes | None = None
    width: int | None = None  # layout width in CSS pixels: the 200-DPI PNG shows at half its pixel width
    height: int | None = None  # layout height in CSS pixels

    def files(self) -> dict[str, bytes]:
        """{relative path: bytes} of every format rendered."""
        stem = self.relpath.rsplit(".", 1)[0]
        out = {self.relpath: self.png}
        out.update({f"{stem}.{ext}": data for ext, data in (("pdf", self.pdf), ("svg", self.svg)) if data})
        return out


def _reading_guide(metric: str) -> list[str]:
    lines = [
        f"Metric: **{metric}** at each model's frozen confidence threshold (IoU 0.5, one-to-one matching).",
        "Relative drop = (clean − condition) / clean: 0 means no loss, 0.25 means a quarter of the clean value "
        "is lost. mPC is the mean over the corrupted conditions present, rPC = mPC / clean.",
    ]
    if metric in LOWER_IS_BETTER:
        lines.append(
            f"Lower {metric} is better, so a worse result has a *negative* drop in the tables; the "
            "figures flip the sign so that larger always means worse."
        )
    return lines


# --- Markdown ------------------------------------------------------------------------------------------------


def markdown_table(t: Table, heading: str = "###") -> str:
    sep = {"l": ":---", "r": "---:", "c": ":---:"}
    lines = [
        f"{heading} {md_text(t.title)}",
        "",
        "| " + " | ".join(md_text(h) for h in t.header) + " |",
        "| " + " | ".join(sep[a] for a in t.align) + " |",
    ]
    lines += [
        "| "
        + " | ".join(f"**{md_text(c)}**" if (i, j) in t.bold and c else md_text(c) for j, c in enumerate(row))
        + " |"
        for i, row in enumerate(t.rows)
    ]
    if t.notes:
        lines += [""] + [f"*{md_text(n)}*  " for n in t.notes]
    return "\n".join(lines) + "\n"


def example_rows(
    g: DatasetGroup, examples: Sequence[GalleryExample]
) -> list[tuple[str, str, dict[str, GalleryExample]]]:
    """(condition, model, {kind: example}) in the report's condition order, then model order."""
    by_key: dict[tuple[str, str], dict[str, GalleryExample]] = {}
    for e in examples:
        by_key.setdefault((e.condition, e.label), {})[e.kind] = e
    order = {c: k for k, c in enumerate(g.grid_conditions)}
    labels = {lab: k for k, lab in enumerate(g.labels)}
    keys = sorted(by_key, key=lambda k: (order.get(k[0], len(order)), k[0], labels.get(k[1], len(labels)), k[1]))
    return [(c, lab, by_key[c, lab]) for c, lab in keys]


def example_text(e: GalleryExample | None) -> str:
    if e is None:
        return ""
    return f"{e.file_name}: {e.found_clean}/{e.n_gt} → {e.found_condition}/{e.n_gt}"


def example_table(g: DatasetGroup, examples: Sequence[GalleryExample]) -> Table:
    """The gallery's per-condition pairs as a plain table (LaTeX: names, no pictures)."""
    rows = tuple(
        (c, lab, example_text(k.get("worst")), example_text(k.get("best"))) for c, lab, k in example_rows(g, examples)
    )
    folders = sorted({str(e.picture.parent) for e in examples})
    return Table(
        f"{g.name}: {GALLERY_TITLE.lower()}",
        ("condition", "model", "worst pair", "best pair"),
        rows,
        ("l", "l", "l", "l"),
        notes=(GALLERY_NOTE, f"Pictures: {', '.join(folders)}."),
    )


def _href(picture: Path, out: Path) -> str:
    """The picture's path relative to the report folder, percent-encoded for a link target."""
    return quote(Path(os.path.relpath(picture.resolve(), out.resolve())).as_posix())


def markdown_examples(g: DatasetGroup, examples: Sequence[GalleryExample], out: Path) -> str:
    def cell(e: GalleryExample | None) -> str:
        return "" if e is None else f"[{md_text(example_text(e))}]({_href(e.picture, out)})"

    lines = [
        f"### {md_text(GALLERY_TITLE)}",
        "",
        "| condition | model | worst pair | best pair |",
        "| :--- | :--- | :--- | :--- |",
    ]
    lines += [
        f"| {md_text(c)} | {md_text(lab)} | {cell(k.get('worst'))} | {cell(k.get('best'))} |"
        for c, lab, k in example_rows(g, examples)
    ]
    return "\n".join(lines + ["", f"*{md_text(GALLERY_NOTE)}*", ""])


def html_examples(g: DatasetGroup, examples: Sequence[GalleryExample], out: Path) -> str:
    def cell(e: GalleryExample | None) -> str:
        return "" if e is None else f'<a href="{_e(_href(e.picture, out))}">{_e(example_text(e))}</a>'

    rows = "".join(
        f'<tr><td class="l">{_e(c)}</td><td class="l">{_e(lab)}</td><td class="l">{cell(k.get("worst"))}</td>'
        f'<td class="l">{cell(k.get("best"))}</td></tr>'
        for c, lab, k in example_rows(g, examples)
    )
    return (
        f'<h3>{_e(GALLERY_TITLE)}</h3><table><thead><tr><th class="l">condition</th><th class="l">model</th>'
        f'<th class="l">worst pair</th><th class="l">best pair</th></tr></thead><tbody>{rows}</tbody></table>'
        f'<p class="note">{_e(GALLERY_NOTE)}</p>'
    )


def with_sample_note(t: Table, note: str) -> Table:
    return replace(t, notes=t.notes + (note,))


def named_tables(g: DatasetGroup, metric: str) -> list[tuple[str, Table]]:
    """(file name, table) of one dataset, in report order (the ranking, false-alarm and mitigation tables only
    when they apply), each ending with the sample-size note. The ranking bootstraps, so ``build_report``
    computes them once and hands them to every format."""
    tables = [
        ("summary", model_summary_table(g, metric)),
        (f"robustness_{metric}", summary_table(g, metric)),
        (f"families_{metric}", family_table(g, metric)),
        (f"corruptions_{metric}", corruption_table(g, metric)),
        (f"grid_{metric}", grid_table(g, metric)),
        ("submerged", submerged_table(g)),
        ("false_alarms", false_alarm_table(g)),
        (f"ranking_{metric}", ranking_table(g, metric)),
        (f"paired_{metric}", paired_table(g, metric)),
    ]
    tables += [(f"mitigation_{k + 1}_{metric}", t) for k, t in enumerate(mitigation_tables(g, metric))]
    note = sample_note(g)
    return [(name, with_sample_note(t, note)) for name, t in tables if t is not None]


def markdown_report(
    groups: Sequence[DatasetGroup],
    metric: str,
    figures: Sequence[FigureRef],
    tables: Mapping[str, Sequence[Table]],
    common: Sequence[Table],
    examples: Mapping[str, Sequence[GalleryExample]] | None = None,
    folder: Path | None = None,
) -> str:
    """report.md. tables: per dataset name its tables (``named_tables``, built once for every format); common:
    the tables across datasets (frozen thresholds, provenance); examples: per dataset name the gallery pictures
    to link, relative to the report folder ``folder``."""
    out = [
        f"# {TITLE}",
        "",
        *_reading_guide(metric),
        "",
        "Datasets: "
        + ", ".join(f"{md_text(g.name)} ({len(g.runs)} model{'s' if len(g.runs) != 1 else ''})" for g in groups)
        + ".",
        "",
    ]
    for g in groups:
        out += [f"## {md_text(g.name)}", ""]
        for note in missing_note(g):
            out += [f"> Partial sweep — {md_text(note)}", ""]
        for f in (f for f in figures if f.dataset == g.name):
            out += [f"### {md_text(f.caption)}", "", f"![{md_text(f.caption)}]({f.relpath})", ""]
        out += [markdown_table(t) for t in tables[g.name]]
        if examples and examples.get(g.name) and folder is not None:
            out.append(markdown_examples(g, examples[g.name], folder))
        for run in g.runs:
            out += [markdown_table(with_sample_note(headline_table(g, run), sample_note(g)), heading="####")]
    out += [markdown_table(t, heading="##") for t in common]
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


_e = html_text  # every heading, cell and caption of report.html


def html_table(t: Table, heading: str = "h3") -> str:
    parts = [f"<{heading}>{_e(t.title)}</{heading}>", "<table>", "<thead><tr>"]
    parts += [f'<th class="{a}">{_e(h)}</th>' for h, a in zip(t.header, t.align)]
    parts += ["</tr></thead>", "<tbody>"]
    for i, row in enumerate(t.rows):
        cls = ' class="break"' if i in t.breaks and i > 0 else ""
        parts.append(
            f"<tr{cls}>"
            + "".join(
                f'<td class="{a}">' + (f"<strong>{_e(c)}</strong>" if (i, j) in t.bold and c else _e(c)) + "</td>"
                for j, (c, a) in enumerate(zip(row, t.align))
            )
            + "</tr>"
        )
    parts += ["</tbody>", "</table>"]
    parts += [f'<p class="note">{_e(n)}</p>' for n in t.notes]
    return "\n".join(parts)


def data_uri(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode("ascii")


HTML_FIGURES = ("png", "svg")


def svg_data_uri(svg: bytes) -> str:
    """An SVG as a data URI without base64 (a third smaller): only what the URL or the HTML attribute would
    misread is percent-encoded."""
    return "data:image/svg+xml;charset=utf-8," + quote(svg.decode("utf-8"), safe=" <>/:=;,.-_'()!*+?@[]{}|~^$`\\")


def _embedded(f: FigureRef, kind: str) -> str:
    """The figure as a data URI: the 200-DPI PNG, or the SVG (vector, and several times smaller)."""
    if kind == "svg" and f.svg:
        return svg_data_uri(f.svg)
    return data_uri(f.png)


def html_report(
    groups: Sequence[DatasetGroup],
    metric: str,
    figures: Sequence[FigureRef],
    tables: Mapping[str, Sequence[Table]],
    common: Sequence[Table],
    figure_format: str = "png",
    examples: Mapping[str, Sequence[GalleryExample]] | None = None,
    folder: Path | None = None,
) -> str:
    """report.html, self-contained (but for the links to gallery pictures, when ``examples`` are given); tables,
    common, examples and folder as for :func:`markdown_report`."""

    def md_inline(s: str) -> str:  # the reading guide uses *emphasis* and **strong** only
        s = _e(s)
        s = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", s)
        return re.sub(r"\*(.+?)\*", r"<em>\1</em>", s)

    body = [f"<h1>{_e(TITLE)}</h1>"] + [f"<p>{md_inline(x)}</p>" for x in _reading_guide(metric)]
    body.append(
        "<p>Datasets: "
        + ", ".join(
            f'<a href="#ds-{i}">{_e(g.name)}</a> ({len(g.runs)} model{"s" if len(g.runs) != 1 else ""})'
            for i, g in enumerate(groups)
        )
        + "</p>"
    )
    for i, g in enumerate(groups):
        body.append(f'<h2 id="ds-{i}">{_e(g.name)}</h2>')
        for note in missing_note(g):
            body.append(f'<p class="partial">Partial sweep — {_e(note)}</p>')
        for f in (f for f in figures if f.dataset == g.name):
            size = f' width="{f.width}"' if f.width else ""
            body.append(
                f'<figure><img alt="{_e(f.caption)}"{size} src="{_embedded(f, figure_format)}">'
                f"<figcaption>{_e(f.caption)}</figcaption></figure>"
            )
        body += [html_table(t) for t in tables[g.name]]
        if examples and examples.get(g.name) and folder is not None:
            body.append(html_examples(g, examples[g.name], folder))
        for run in g.runs:
            body.append(
                f"<details><summary>Headline metrics: {_e(run.label)}</summary>"
                f"{html_table(with_sample_note(headline_table(g, run), sample_note(g)), heading='h4')}</details>"
            )
    body += [html_table(t, heading="h2") for t in common]
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{_e(TITLE)}</title>\n<style>\n{_CSS}\n</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )
