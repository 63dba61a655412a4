"""``build_report``: score JSONs in, figures + report.md / report.html / report_table.tex out.

The report's only writer (the gallery has its own). Every file is written atomically (temp file + rename), so
an interrupted run never leaves a half-written artefact.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from aegis_data.config import SuiteConfig
from aegis_data.errors import AegisError
from aegis_data.imageio import write_bytes_atomic
from aegis_eval.report.render import FigureRef, group_tables, html_report, latex_report, markdown_report
from aegis_eval.report.results import (
    SOURCE_KEY,
    DatasetGroup,
    check_metric,
    group_by_dataset,
    validate_result,
)
from aegis_eval.report.tables import missing_note

FORMATS = ("md", "html", "latex")
FIGURES_DIR = "figures"
REPORT_MD, REPORT_HTML, REPORT_TEX = "report.md", "report.html", "report_table.tex"


@dataclass(frozen=True)
class ReportFiles:
    """What ``build_report`` wrote: paths under ``out`` (as given, not resolved); None for formats not asked."""

    out: Path
    figures: tuple[Path, ...]
    markdown: Path | None
    html: Path | None
    latex: Path | None
    notes: tuple[str, ...]  # partial sweeps and skipped figures, one sentence each

    @property
    def files(self) -> tuple[Path, ...]:
        return self.figures + tuple(p for p in (self.markdown, self.html, self.latex) if p is not None)


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
            raise AegisError(f"unknown report format {item!r}; expected a comma-separated subset of {', '.join(FORMATS)}")
        if f not in out:
            out.append(f)
    if not out:
        raise AegisError(f"no report format given; expected a comma-separated subset of {', '.join(FORMATS)}")
    return tuple(out)


_SLUG_MAX = 64  # figure names hold the slug plus a suffix; file systems allow 255 bytes per name


def _slug(name: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "dataset"
    if len(slug) > _SLUG_MAX:  # a long dataset name: a prefix plus a hash of the whole name keeps it unique
        slug = f"{slug[:_SLUG_MAX - 13].rstrip('-.')}-{hashlib.sha256(name.encode()).hexdigest()[:12]}"
    return slug


def render_figures(groups: Sequence[DatasetGroup], metric: str) -> list[FigureRef]:
    """Every figure of every dataset, in report order (PNG bytes, not yet written)."""
    from aegis_data.extras import require

    require("matplotlib", "`aegis report`")  # the optional "report" extra
    from aegis_eval.report import figures as F
    refs: list[FigureRef] = []
    used: set[str] = set()
    for g in groups:
        slug, k = _slug(g.name), 2
        while slug in used:  # two dataset names that differ only in punctuation
            slug, k = f"{_slug(g.name)}-{k}", k + 1
        used.add(slug)
        rel = f"{FIGURES_DIR}/{slug}"
        refs.append(FigureRef(g.name, "heatmap", f"Relative drop of {metric} per condition and model",
                              f"{rel}_heatmap_{metric}.png", F.heatmap_png(g, metric)))
        refs.append(FigureRef(g.name, "curves", f"{metric} vs severity per corruption",
                              f"{rel}_curves_{metric}.png", F.severity_curves_png(g, metric)))
        refs.append(FigureRef(g.name, "families", f"Mean relative drop of {metric} per family",
                              f"{rel}_families_{metric}.png", F.family_bars_png(g, metric)))
        if F.has_localization(g):
            refs.append(FigureRef(g.name, "localization", "Localization stability vs severity",
                                  f"{rel}_localization.png", F.localization_png(g)))
    return refs


def build_report(results: Sequence[Mapping], out: str | Path, formats: str | Iterable[str] = FORMATS,
                 metric: str = "recall", config: SuiteConfig | None = None) -> ReportFiles:
    """Write the report for validated score results (see ``load_results``) into ``out``.

    Results are grouped by ``dataset`` (null -> "unknown"), models by ``label``. Figures go to
    ``out/figures/<dataset>_<kind>[_<metric>].png``; ``formats`` chooses report.md, report.html (self-contained)
    and report_table.tex. Raises AegisError for an unknown metric or format, an invalid result or a duplicate
    (dataset, label). config: the suite config of the scored splits (row order and the full grid; default the
    installed one); each condition's family is the one the scorer recorded in the result.
    """
    metric = check_metric(metric)
    formats = parse_formats(formats)
    if not results:
        raise AegisError("no score results given (expected one or more `aegis score --json` outputs)")
    for i, r in enumerate(results):
        validate_result(r, str(r.get(SOURCE_KEY) or f"results[{i}]") if isinstance(r, Mapping) else f"results[{i}]")
    groups = group_by_dataset(results, config)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise AegisError(f"--out must be a directory, got an existing file: {out}")
    refs = render_figures(groups, metric)
    for ref in refs:
        write_bytes_atomic(out / ref.relpath, ref.png)
    md = html = tex = None
    tables = {g.name: group_tables(g, metric) for g in groups} if {"md", "html"} & set(formats) else {}
    if "md" in formats:
        md = out / REPORT_MD
        write_bytes_atomic(md, markdown_report(groups, metric, refs, tables).encode("utf-8"))
    if "html" in formats:
        html = out / REPORT_HTML
        write_bytes_atomic(html, html_report(groups, metric, refs, tables).encode("utf-8"))
    if "latex" in formats:
        tex = out / REPORT_TEX
        write_bytes_atomic(tex, latex_report(groups, metric).encode("utf-8"))
    notes = [f"{g.name}: {n}" for g in groups for n in missing_note(g)]
    kinds = {(r.dataset, r.kind) for r in refs}
    notes += [f"{g.name}: no localization data in any result; the stability plot is skipped"
              for g in groups if (g.name, "localization") not in kinds]
    return ReportFiles(out, tuple(out / r.relpath for r in refs), md, html, tex, tuple(notes))
