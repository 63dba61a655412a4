"""``build_report``: score JSONs in, figures (PNG, PDF, SVG) + report.md / report.html / LaTeX out.

The report's only writer (the gallery has its own). Every file is written atomically (temp file + rename), so
an interrupted run never leaves a half-written artefact.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aegis_data.engine.config import SUITE_NAMES, SuiteConfig, load_config
from aegis_data.errors import AegisError
from aegis_data.files.imageio import write_bytes_atomic
from aegis_eval.protocols.provenance import check_one_suite
from aegis_eval.protocols.score_doc import validate_result
from aegis_eval.report import palette
from aegis_eval.report.latex import (
    LatexFigure,
    label_key,
    latex_document,
    latex_grid,
    latex_grid_file,
    latex_table,
    table_label,
)
from aegis_eval.report.render import (
    HTML_FIGURES,
    TITLE,
    FigureRef,
    example_table,
    html_report,
    markdown_report,
    named_tables,
    with_sample_note,
)
from aegis_eval.report.results import (
    SOURCE_KEY,
    UNKNOWN_DATASET,
    DatasetGroup,
    check_metric,
    group_by_dataset,
)
from aegis_eval.report.tables import Table, grid_table, missing_note, provenance_table, sample_note, threshold_table

FORMATS = ("md", "html", "latex")
FIGURES_DIR = "figures"
TABLES_DIR = "tables"
REPORT_MD, REPORT_HTML, REPORT_TEX, REPORT_DOC = "report.md", "report.html", "report_table.tex", "report.tex"


@dataclass(frozen=True)
class ReportFiles:
    """What ``build_report`` wrote: paths under ``out`` (as given, not resolved); None / () for formats not
    asked. figures: the PNGs; vector_figures: their PDF and SVG twins; latex: the per-condition grid
    (report_table.tex); latex_tables: one ``\\input``-able file per table; latex_document: report.tex."""

    out: Path
    figures: tuple[Path, ...]
    markdown: Path | None
    html: Path | None
    latex: Path | None
    notes: tuple[str, ...]  # partial sweeps and skipped figures, one sentence each
    vector_figures: tuple[Path, ...] = ()
    latex_tables: tuple[Path, ...] = ()
    latex_document: Path | None = None

    @property
    def files(self) -> tuple[Path, ...]:
        docs = tuple(p for p in (self.markdown, self.html, self.latex, self.latex_document) if p is not None)
        return self.figures + self.vector_figures + self.latex_tables + docs


def parse_formats(spec: str | Iterable[str]) -> tuple[str, ...]:
    """``"md,html"`` or ``["md", "html"]`` -> ordered unique formats; AegisError for an unknown one."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    out: list[str] = []
    for item in items:
        f = str(item).strip().lower()
        if f == "tex":
            f = "latex"
        if f == "markdown":
            f = "md"
        if f not in FORMATS:
            raise AegisError(
                f"unknown report format {item!r}; expected a comma-separated subset of {', '.join(FORMATS)}"
            )
        if f not in out:
            out.append(f)
    if not out:
        raise AegisError(f"no report format given; expected a comma-separated subset of {', '.join(FORMATS)}")
    return tuple(out)


_SLUG_MAX = 64  # figure names hold the slug plus a suffix; file systems allow 255 bytes per name


def _slug(name: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "dataset"
    if len(slug) > _SLUG_MAX:  # a long dataset name: a prefix plus a hash of the whole name keeps it unique
        slug = f"{slug[: _SLUG_MAX - 13].rstrip('-.')}-{hashlib.sha256(name.encode()).hexdigest()[:12]}"
    return slug


def render_figures(groups: Sequence[DatasetGroup], slugs: Sequence[str], metric: str) -> list[FigureRef]:
    """Every figure of every dataset (slugs: ``_slugs(groups)``), in report order (bytes, not yet written): PNG,
    PDF and SVG whatever the formats, since docs/REPORT.md promises all three files for every figure."""
    from aegis_data.extras import require

    require("matplotlib", "`aegis report`")  # the optional "report" extra
    from aegis_eval.report import figures as F

    refs: list[FigureRef] = []
    for g, slug in zip(groups, slugs):
        rel = f"{FIGURES_DIR}/{slug}"
        plans = [
            (
                "heatmap",
                f"Relative drop of {metric} per condition and model",
                f"heatmap_{metric}",
                F.heatmap(g, metric),
            ),
            ("curves", f"{metric} vs severity per corruption", f"curves_{metric}", F.severity_curves(g, metric)),
            ("families", f"Mean relative drop of {metric} per family", f"families_{metric}", F.family_bars(g, metric)),
        ]
        if F.has_localization(g):
            plans.append(("localization", "Localization stability vs severity", "localization", F.localization_plot(g)))
        if F.has_false_alarms(g):
            plans.append(
                (
                    "false_alarms",
                    "Share of images with a false alarm and its exact upper bound",
                    "false_alarms",
                    F.false_alarm_shares(g),
                )
            )
        for kind, caption, name, plan in plans:
            r = F.render(plan)
            refs.append(
                FigureRef(g.name, kind, caption, f"{rel}_{name}.png", r.png, r.pdf, r.svg, plan.width, plan.height)
            )
    return refs


def _slugs(groups: Sequence[DatasetGroup]) -> list[str]:
    """One file-name slug per dataset, unique within the report."""
    out: list[str] = []
    for g in groups:
        slug, k = _slug(g.name), 2
        while slug in out:  # two dataset names that differ only in punctuation
            slug, k = f"{_slug(g.name)}-{k}", k + 1
        out.append(slug)
    return out


def grid_metrics(metric: str) -> tuple[str, ...]:
    """Metrics that get a per-condition grid in LaTeX: the report metric, AP50 and recall."""
    return tuple(dict.fromkeys((metric, "map50", "recall")))


def _grid_tables(g: DatasetGroup, metric: str, named: Sequence[tuple[str, Table]]) -> dict[str, Table]:
    """{grid metric: grid table with its sample note}; the report metric's is the one the other formats show."""
    shown = dict(named)
    return {
        m: shown.get(f"grid_{m}") or with_sample_note(grid_table(g, m), sample_note(g)) for m in grid_metrics(metric)
    }


def _latex_files(
    groups: Sequence[DatasetGroup],
    slugs: Sequence[str],
    metric: str,
    tables: Mapping[str, list[tuple[str, Table]]],
    common: Sequence[tuple[str, Table]],
    refs: Sequence[FigureRef],
    examples: Mapping[str, Sequence[Any]] | None = None,
) -> dict[str, str]:
    """{relative path: text} of report_table.tex, every LaTeX table file and report.tex."""
    files: dict[str, str] = {}
    sections, main_grids = [], []
    for g, slug in zip(groups, slugs):
        names = []
        for name, t in tables[g.name]:
            if name.startswith("grid_"):  # the grid has its own two-level header, one per grid metric
                continue
            rel = f"{TABLES_DIR}/{slug}_{name}.tex"
            files[rel] = latex_table(t, table_label(slug, name))
            names.append(rel)
        for m, t in _grid_tables(g, metric, tables[g.name]).items():
            rel = f"{TABLES_DIR}/{slug}_grid_{m}.tex"
            files[rel] = latex_grid(t, g.labels, m, table_label(slug, f"grid_{m}"))
            names.append(rel)
            if m == metric:
                main_grids.append(files[rel])
        if examples and examples.get(g.name):
            rel = f"{TABLES_DIR}/{slug}_gallery.tex"
            files[rel] = latex_table(example_table(g, examples[g.name]), table_label(slug, "gallery"))
            names.append(rel)
        figures = [
            LatexFigure(r.relpath.rsplit(".", 1)[0] + ".pdf", f"{g.name}: {r.caption}", *_pdf_size(r))
            for r in refs
            if r.dataset == g.name and r.pdf
        ]
        sections.append((g.name, figures, names))
    files[REPORT_TEX] = latex_grid_file(main_grids)
    common_files = []
    for name, t in common:
        rel = f"{TABLES_DIR}/{name}.tex"
        files[rel] = latex_table(t, f"tab:aegis-{label_key(name)}")
        common_files.append(rel)
    sections.append(("Thresholds and provenance", [], common_files))
    files[REPORT_DOC] = latex_document(
        TITLE,
        sections,
        [f"Metric: {metric} at each model's frozen confidence threshold (IoU 0.5, one-to-one matching)."],
    )
    return files


def _pdf_size(ref: FigureRef) -> tuple[float | None, float | None]:
    """A figure PDF's page size in points: its layout pixels at ``palette.DPI`` (figures.render draws it so)."""
    if ref.width is None or ref.height is None:
        return None, None
    return ref.width * 72 / palette.DPI, ref.height * 72 / palette.DPI


def _gallery_examples(galleries: Sequence[str | Path], groups: Sequence[DatasetGroup]) -> dict[str, list[Any]]:
    """{dataset name: per-condition gallery pictures} of the given gallery folders (AegisError for a bad one)."""
    if not galleries:
        return {}
    from aegis_eval.report.gallery import load_gallery_index

    names = [g.name for g in groups]
    out: dict[str, list[Any]] = {}
    for folder in galleries:
        index = load_gallery_index(folder)
        dataset = index.dataset if index.dataset is not None else UNKNOWN_DATASET
        if dataset not in names:
            raise AegisError(
                f"gallery {folder} shows dataset {dataset!r}; the score results are of {', '.join(map(repr, names))}"
            )
        out.setdefault(dataset, []).extend(index.examples)
    return out


def build_report(
    results: Sequence[Mapping[str, Any]],
    out: str | Path,
    formats: str | Iterable[str] = FORMATS,
    metric: str = "recall",
    config: SuiteConfig | None = None,
    html_figures: str = "png",
    allow_mixed_suites: bool = False,
    galleries: Sequence[str | Path] = (),
) -> ReportFiles:
    """Write the report for validated score results (see ``load_results``) into ``out``.

    Results are grouped by ``dataset`` (null -> "unknown"), models by ``label``. Figures go to
    ``out/figures/<dataset>_<kind>[_<metric>].{png,pdf,svg}``; ``formats`` chooses report.md, report.html
    (self-contained) and the LaTeX files (report_table.tex, tables/*.tex, report.tex). Raises AegisError for an unknown
    metric or format, an invalid result or a duplicate (dataset, label). config: the suite config of the scored splits
    (row order and the full grid; default the installed one); each condition's family is the one the scorer recorded.
    html_figures: what report.html embeds, ``png`` (200 DPI) or ``svg`` (vector; several times smaller, since
    the toolkit's PNG writer compresses without back-references).
    Results scored on different suites (aegis-v1, aegis-v2) are refused unless ``allow_mixed_suites``; the suite
    of one-suite results gives the default ``config``.
    galleries: folders written by ``build_gallery(..., per_condition=True)``; each dataset's section links (md, html)
    or lists (LaTeX) their worst and best pair per condition. A gallery of a dataset the results lack is refused.
    """
    metric = check_metric(metric)
    if html_figures not in HTML_FIGURES:
        raise AegisError(f"unknown HTML figure format {html_figures!r}; expected one of {', '.join(HTML_FIGURES)}")
    formats = parse_formats(formats)
    if not results:
        raise AegisError("no score results given (expected one or more score documents, as `aegis score` writes them)")
    for i, r in enumerate(results):
        validate_result(
            r, str(r.get(SOURCE_KEY) or f"results[{i}]") if isinstance(r, Mapping) else f"results[{i}]", config=config
        )
    suite = check_one_suite(results, [str(r.get(SOURCE_KEY) or r.get("label")) for r in results], allow_mixed_suites)
    if config is None and suite in SUITE_NAMES:
        config = load_config(suite)
    groups = group_by_dataset(results, config)
    examples = _gallery_examples(galleries, groups)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise AegisError(f"the report folder must be a directory, got an existing file: {out}")
    # Every table before any write (a bad block writes nothing), each built once for all formats.
    tables = {g.name: named_tables(g, metric) for g in groups}
    common = [("thresholds", threshold_table(groups)), ("provenance", provenance_table(groups))]
    slugs = _slugs(groups)
    refs = render_figures(groups, slugs, metric)
    pngs: list[Path] = []
    vectors: list[Path] = []
    for ref in refs:
        for rel, data in ref.files().items():
            write_bytes_atomic(out / rel, data)
            (pngs if rel == ref.relpath else vectors).append(out / rel)
    plain = {name: [t for _, t in named] for name, named in tables.items()}
    plain_common = [t for _, t in common]
    md = html = tex = doc = None
    tex_tables: list[Path] = []
    if "md" in formats:
        md = out / REPORT_MD
        text = markdown_report(groups, metric, refs, plain, plain_common, examples, out)
        write_bytes_atomic(md, text.encode("utf-8"))
    if "html" in formats:
        html = out / REPORT_HTML
        text = html_report(groups, metric, refs, plain, plain_common, html_figures, examples, out)
        write_bytes_atomic(html, text.encode("utf-8"))
    if "latex" in formats:
        for rel, text in _latex_files(groups, slugs, metric, tables, common, refs, examples).items():
            write_bytes_atomic(out / rel, text.encode("utf-8"))
            if rel == REPORT_TEX:
                tex = out / rel
            elif rel == REPORT_DOC:
                doc = out / rel
            else:
                tex_tables.append(out / rel)
    notes = [f"{g.name}: {n}" for g in groups for n in missing_note(g)]
    kinds = {(r.dataset, r.kind) for r in refs}
    notes += [
        f"{g.name}: no localization data in any result; the stability plot is skipped"
        for g in groups
        if (g.name, "localization") not in kinds
    ]
    return ReportFiles(out, tuple(pngs), md, html, tex, tuple(notes), tuple(vectors), tuple(tex_tables), doc)
