"""The report's tables as plain data (``Table``: header + rows of strings), rendered by ``render``.

Cell conventions, the same in Markdown, HTML and LaTeX: an empty cell means the condition is missing from
that run's JSON (a partial sweep); ``n/a`` means the value is undefined (e.g. a drop with a clean value of 0).
Relative drops are printed in percent as the scorer stores them, ``(clean - condition) / clean``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from aegis_data.config import condition_id
from aegis_eval.report.results import (
    DatasetGroup,
    Run,
    confidence_interval,
    metric_value,
    per_corruption_drop,
    per_family_drop,
    relative_drop,
    robustness_summary,
)

MISSING = ""
UNDEFINED = "n/a"
HEADLINE_METRICS = ("precision", "recall", "f1", "fp_per_image", "map50", "map50_95")


@dataclass(frozen=True)
class Table:
    """A rectangular table of strings.

    align: one of "l"/"r"/"c" per column. breaks: row indices before which a separator goes (family groups).
    notes: sentences printed under the table.
    """

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    align: tuple[str, ...]
    breaks: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()


def fmt_value(v: float | None, metric: str = "") -> str:
    if v is None:
        return UNDEFINED
    return f"{v:.2f}" if metric == "fp_per_image" else f"{v:.3f}"


def fmt_percent(v: float | None) -> str:
    return UNDEFINED if v is None else f"{100 * v:.1f}"


def fmt_ci(ci: tuple[float, float] | None, metric: str) -> str:
    return "" if ci is None else f" [{fmt_value(ci[0], metric)}, {fmt_value(ci[1], metric)}]"


@dataclass(frozen=True)
class GridCell:
    present: bool
    value: float | None
    drop: float | None
    ci: tuple[float, float] | None


@dataclass(frozen=True)
class GridRow:
    """One condition of the main grid. family/corruption are None and severity 0 for clean."""

    condition: str
    family: str | None
    corruption: str | None
    severity: int
    cells: tuple[GridCell, ...]  # one per run, in group order


def grid_rows(group: DatasetGroup, metric: str) -> list[GridRow]:
    """Clean, then every grid condition at least one run has, in row order."""
    present = set(group.present_conditions)
    rows = []
    conds = [("clean", None, None, 0)] + [
        (condition_id(c, s), group.families[c], c, s) for c in group.corruptions for s in group.severities
    ]
    for cond, fam, corr, sev in conds:
        if cond not in present:
            continue
        cells = tuple(
            GridCell(run.has(cond), metric_value(run.result, cond, metric), relative_drop(run.result, cond, metric),
                     confidence_interval(run.result, cond, metric))
            for run in group.runs
        )
        rows.append(GridRow(cond, fam, corr, sev, cells))
    return rows


def absent_conditions(group: DatasetGroup) -> list[str]:
    """Grid conditions no run of the group has (they get no row)."""
    present = set(group.present_conditions)
    return [c for c in ("clean",) + group.grid_conditions if c not in present]


def missing_note(group: DatasetGroup) -> tuple[str, ...]:
    notes = []
    for run in group.runs:
        miss = group.missing(run)
        if miss:
            notes.append(f"{run.label}: {len(miss)} of {1 + len(group.grid_conditions)} conditions missing "
                         f"({', '.join(miss)}); their cells are blank.")
    return tuple(notes)


def grid_table(group: DatasetGroup, metric: str, with_ci: bool = True) -> Table:
    """Main grid: one row per condition, per model the metric (with its CI) and the relative drop in %."""
    header = ["family", "corruption", "severity"]
    for run in group.runs:
        header += [f"{run.label} {metric}", f"{run.label} drop %"]
    rows, breaks = [], []
    last_family = "clean"
    for r in grid_rows(group, metric):
        fam = r.family or "clean"
        if fam != last_family:
            breaks.append(len(rows))
        first = fam != last_family
        last_family = fam
        row = [fam if first or r.condition == "clean" else "", r.corruption or "clean", str(r.severity)]
        for cell in r.cells:
            if not cell.present:
                row += [MISSING, MISSING]
                continue
            row.append(fmt_value(cell.value, metric) + (fmt_ci(cell.ci, metric) if with_ci else ""))
            row.append(fmt_percent(cell.drop))
        rows.append(tuple(row))
    notes = list(missing_note(group))
    absent = absent_conditions(group)
    if absent:
        notes.append(f"No run has {', '.join(absent)}; those rows are omitted.")
    if with_ci and any(c.ci for r in grid_rows(group, metric) for c in r.cells):
        notes.append("Brackets: percentile 95% bootstrap interval.")
    return Table(f"{group.name}: {metric} per condition", tuple(header), tuple(rows),
                 ("l", "l", "r") + ("r",) * (2 * len(group.runs)), tuple(breaks), tuple(notes))


def summary_table(group: DatasetGroup, metric: str) -> Table:
    """mPC (mean over corrupted conditions), rPC = mPC / clean, mean relative drop, coverage."""
    rows = []
    notes = ["mPC: mean over the corrupted conditions present; rPC = mPC / clean."]
    if any(group.missing(run) for run in group.runs):
        notes.append("A partial sweep's mPC averages only the conditions it has; compare it with a full sweep "
                     "only on those conditions (see the per-condition table).")
    for run in group.runs:
        s = robustness_summary(group, run, metric)
        rows.append((run.label, fmt_value(s.clean, metric), fmt_value(s.mpc, metric),
                     UNDEFINED if s.rpc is None else f"{s.rpc:.3f}", fmt_percent(s.mean_rel_drop),
                     f"{s.n_corrupted}/{len(group.grid_conditions)}"))
    return Table(f"{group.name}: robustness summary ({metric})",
                 ("model", f"clean {metric}", "mPC", "rPC", "mean drop %", "corrupted conditions"),
                 tuple(rows), ("l", "r", "r", "r", "r", "r"),
                 notes=tuple(notes))


# The ranking table's interval: models resampled this many times with a fixed seed, so a report is reproducible.
RANKING_BOOTSTRAP = 1000


def ranking_table(group: DatasetGroup, metric: str) -> Table | None:
    """With two or more models: per condition, Kendall's tau-b between the clean ranking and the condition's
    (95% interval over resampled models), the number of rank flips and the order (``aegis_eval.ranking``)."""
    if len(group.runs) < 2 or not any(r.has("clean") for r in group.runs):
        return None
    from aegis_eval.bootstrap import BootstrapOptions
    from aegis_eval.ranking import rank_models

    doc = rank_models([r.result for r in group.runs], metric, labels=list(group.labels),
                      bootstrap=BootstrapOptions(n_bootstrap=RANKING_BOOTSTRAP, seed=0))
    rows = []
    for cond in (c for c in group.present_conditions if c in doc["ranks"]):
        t = doc["kendall_tau"][cond]
        lo, hi = t["ci"]
        tau = UNDEFINED if t["tau"] is None else f"{t['tau']:+.2f}" + ("" if lo is None else f" [{lo:+.2f}, {hi:+.2f}]")
        order = " > ".join(name for name, _ in sorted(doc["ranks"][cond].items(), key=lambda kv: kv[1]))
        rows.append((cond, str(t["n_models"]), tau, str(len(doc["rank_flips"][cond])), order))
    return Table(f"{group.name}: model ranking on {metric} vs clean", ("condition", "models", "Kendall τ-b",
                                                                       "rank flips", "order (best first)"),
                 tuple(rows), ("l", "r", "r", "r", "l"),
                 notes=("Brackets: 95% interval over resampled models (which detectors are in the study), "
                        "not over images.", "A rank flip is a pair of models whose order differs from clean."))


def _has_any(group: DatasetGroup, run: Run, corruptions: Sequence[str]) -> bool:
    return any(run.has(condition_id(c, s)) for c in corruptions for s in group.severities)


def family_table(group: DatasetGroup, metric: str) -> Table:
    """Mean relative drop (%) per family, one row per model."""
    fams = group.family_order
    rows = []
    for run in group.runs:
        d = per_family_drop(group, run, metric)
        rows.append((run.label,) + tuple(
            fmt_percent(d[f]) if _has_any(group, run, group.family_members(f)) else MISSING for f in fams))
    return Table(f"{group.name}: mean relative drop of {metric} per family (%)", ("model",) + fams, tuple(rows),
                 ("l",) + ("r",) * len(fams))


def corruption_table(group: DatasetGroup, metric: str) -> Table:
    """Mean relative drop (%) over each corruption's severities; rows = corruptions, columns = models."""
    drops = [per_corruption_drop(group, run, metric) for run in group.runs]
    rows = tuple((group.families[c], c) + tuple(fmt_percent(d[c]) if _has_any(group, run, (c,)) else MISSING
                                                for d, run in zip(drops, group.runs))
                 for c in group.corruptions)
    return Table(f"{group.name}: mean relative drop of {metric} per corruption (%)",
                 ("family", "corruption") + group.labels, rows, ("l", "l") + ("r",) * len(group.runs))


def headline_table(group: DatasetGroup, run: Run) -> Table:
    """All headline metrics of one run, one row per condition it has, plus TP/FP/FN counts."""
    rows = []
    for cond in group.present_conditions:
        if not run.has(cond):
            continue
        block = run.result["conditions"][cond]
        counts = tuple(str(block.get(k, "")) for k in ("tp", "fp", "fn"))
        rows.append((cond,) + tuple(fmt_value(metric_value(run.result, cond, m), m) for m in HEADLINE_METRICS) + counts)
    return Table(f"{group.name} / {run.label}: headline metrics", ("condition",) + HEADLINE_METRICS + ("tp", "fp", "fn"),
                 tuple(rows), ("l",) + ("r",) * (len(HEADLINE_METRICS) + 3))


def _get(d: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def _text(v: Any, short: bool = False) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    s = str(v)
    return s[:12] if short and len(s) > 12 else s


def threshold_table(groups: Sequence[DatasetGroup]) -> Table:
    """The frozen operating point of every run."""
    rows = []
    for g in groups:
        for run in g.runs:
            t = run.result.get("threshold") or {}
            value = t.get("value")
            rows.append((g.name, run.label, UNDEFINED if not isinstance(value, (int, float)) else f"{value:.4g}",
                         _text(t.get("rule")) or "given (--threshold)", _text(t.get("file")),
                         _text(t.get("file_sha256"), short=True), _text(run.result.get("iou"))))
    return Table("Frozen confidence thresholds", ("dataset", "model", "threshold", "rule", "file", "sha256", "IoU"),
                 tuple(rows), ("l", "l", "r", "l", "l", "l", "r"),
                 notes=("Each threshold was frozen once on clean validation data and applied unchanged to every "
                        "condition.",))


_PROVENANCE_FIELDS = (
    ("toolkit version", ("toolkit_version",), False),
    ("git SHA", ("git_sha",), True),
    ("git dirty", ("git_dirty",), False),
    ("corruption config hash", ("config_hash",), False),
    ("manifest root hash", ("manifest_root_hash",), True),
    ("GT file", ("gt_file",), False),
    ("GT sha256", ("gt_sha256",), True),
    ("threshold sha256", ("threshold_sha256",), True),
    ("bootstrap seed", ("seed",), False),
    ("bootstrap resamples", ("bootstrap",), False),
    ("cluster by", ("cluster_by",), False),
    ("timestamp", ("timestamp",), False),
)


def _scale_text(provenance: Mapping[str, Any]) -> str:
    """``object, person unit N px (basis)`` for an object-scale split, ``frame`` for any other split (no key)."""
    scale = provenance.get("scale")
    if isinstance(scale, dict) and scale.get("mode") == "object":
        return f"object, person unit {_text(scale.get('person_px'))} px ({_text(scale.get('basis'))})"
    return "frame" if provenance.get("manifest_root_hash") else ""


def provenance_table(groups: Sequence[DatasetGroup]) -> Table:
    """Rows = provenance fields, columns = runs (``dataset / label``). Hashes shortened to 12 hex."""
    runs = [(g, r) for g in groups for r in g.runs]
    rows = []
    for name, keys, short in _PROVENANCE_FIELDS:
        rows.append((name,) + tuple(_text(_get(r.result.get("provenance"), *keys), short) for _, r in runs))
    rows.append(("corruption scale",) + tuple(_scale_text(r.result.get("provenance") or {}) for _, r in runs))
    rows.append(("prediction files",) + tuple(
        _text(len(p)) if isinstance(p := _get(r.result.get("provenance"), "predictions"), dict) else ""
        for _, r in runs))
    rows.append(("score JSON",) + tuple(r.source for _, r in runs))
    return Table("Provenance", ("",) + tuple(f"{g.name} / {r.label}" for g, r in runs), tuple(rows),
                 ("l",) * (1 + len(runs)), notes=("Hashes are shortened to their first 12 hex digits.",))
