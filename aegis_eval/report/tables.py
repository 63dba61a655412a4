"""The report's tables as plain data (``Table``: header + rows of strings), rendered by ``render``.

Cell conventions, the same in Markdown, HTML and LaTeX: an empty cell means the condition is missing from
that run's JSON (a partial sweep); ``n/a`` means the value is undefined (e.g. a drop with a clean value of 0).
Relative drops are printed in percent as the scorer stores them, ``(clean - condition) / clean``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aegis_data.conditions import condition_id
from aegis_eval.metrics.paired import ALPHA, paired_cell
from aegis_eval.metrics.result_keys import CI_METRICS, LOWER_IS_BETTER
from aegis_eval.metrics.robustness import summary_samples
from aegis_eval.protocols.provenance import score_suite
from aegis_eval.protocols.ranking import MIN_TAU_MODELS, paired_block, suite_config, tied_order
from aegis_eval.protocols.samples_file import ScoreSamples
from aegis_eval.report.results import (
    DatasetGroup,
    Run,
    SampleSize,
    confidence_interval,
    drop_interval,
    false_alarm_confidence,
    false_alarm_record,
    family_drop_interval,
    metric_value,
    per_corruption_drop,
    per_family_drop,
    relative_drop,
    robustness_summary,
    sample_size,
    summary_interval,
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
    bold: frozenset[tuple[int, int]] = frozenset()  # (row, column) cells that hold the best value of a column


def fmt_value(v: float | None, metric: str = "") -> str:
    if v is None:
        return UNDEFINED
    return f"{v:.2f}" if metric == "fp_per_image" else f"{v:.3f}"


def fmt_percent(v: float | None) -> str:
    return UNDEFINED if v is None else f"{100 * v:.1f}"


def fmt_ci(ci: tuple[float, float] | None, metric: str) -> str:
    return "" if ci is None else f" [{fmt_value(ci[0], metric)}, {fmt_value(ci[1], metric)}]"


def fmt_value_ci(v: float | None, ci: tuple[float, float] | None, metric: str = "") -> str:
    """``0.412 [0.371, 0.455]``; the bracket only when the value and its interval exist."""
    return fmt_value(v, metric) + (fmt_ci(ci, metric) if v is not None else "")


def fmt_percent_ci(v: float | None, ci: tuple[float, float] | None) -> str:
    """A relative drop in percent with its interval: ``23.6 [19.0, 28.1]``."""
    if v is None or ci is None:
        return fmt_percent(v)
    return f"{fmt_percent(v)} [{fmt_percent(ci[0])}, {fmt_percent(ci[1])}]"


def _thousands(n: int | None) -> str:
    return "?" if n is None else f"{n:,}"


def _sample_phrase(s: SampleSize) -> str:
    bins = (s.n_gt_small, s.n_gt_medium, s.n_gt_large)
    # Frames of one group (a video sequence) are not independent: the group count is the effective n.
    groups = f" in {_thousands(s.n_units)} groups" if s.resampling_unit == "cluster" and s.n_units is not None else ""
    text = f"{_thousands(s.n_images)} images{groups}, {_thousands(s.n_gt)} GT boxes"
    if all(b is not None for b in bins):
        text += f" (small {_thousands(bins[0])}, medium {_thousands(bins[1])}, large {_thousands(bins[2])})"
    return text


def _bootstrap_phrase(s: SampleSize) -> str:
    if s.n_bootstrap is None:
        return "bootstrap settings not recorded"
    if s.n_bootstrap == 1:
        return "no bootstrap (B = 1: intervals collapse to the point value)"
    unit = {"image": "images", "cluster": "groups of images (clustered: whole groups drawn)"}.get(
        s.resampling_unit or "", "images"
    )
    units = f"{_thousands(s.n_units)} " if s.n_units is not None else ""
    seed = f", seed {s.seed}" if s.seed is not None else ""
    return f"B = {s.n_bootstrap:,} bootstrap resamples of {units}{unit}{seed}"


def sample_note(group: DatasetGroup) -> str:
    """One sentence stating what the group's numbers rest on: images, GT boxes (per size bin), conditions,
    models, and how the intervals were resampled; per model when the runs differ."""
    sizes = [sample_size(run.result) for run in group.runs]
    n_models = len(group.runs)
    head = f"n: {len(group.present_conditions)} conditions, {n_models} model{'s' if n_models != 1 else ''}; "
    if all(s == sizes[0] for s in sizes):
        return head + f"{_sample_phrase(sizes[0])} per condition; {_bootstrap_phrase(sizes[0])}."
    parts = [f"{run.label}: {_sample_phrase(s)}, {_bootstrap_phrase(s)}" for run, s in zip(group.runs, sizes)]
    return head + "; ".join(parts) + "."


@dataclass(frozen=True)
class GridCell:
    present: bool
    value: float | None
    drop: float | None
    ci: tuple[float, float] | None
    drop_ci: tuple[float, float] | None = None


@dataclass(frozen=True)
class GridRow:
    """One condition of the main grid. family/corruption are None and severity 0 for clean."""

    condition: str
    family: str | None
    corruption: str | None
    severity: int
    cells: tuple[GridCell, ...]  # one per run, in group order
    acted: tuple[int, int] | None = None  # (images the corruption changed, images), when the split records it


def acted_images(group: DatasetGroup, condition: str) -> tuple[int, int] | None:
    """(images a condition acted on, images scored) from the first run whose score records it (a property of the
    split, the same for every run on it), or None."""
    for run in group.runs:
        entry = run.result["conditions"].get(condition) or {}
        acted, n = entry.get("acted_images"), entry.get("n_images")
        if isinstance(acted, int) and isinstance(n, int):
            return acted, n
    return None


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
            GridCell(
                run.has(cond),
                metric_value(run.result, cond, metric),
                relative_drop(run.result, cond, metric),
                confidence_interval(run.result, cond, metric),
                drop_interval(run.result, cond, metric) if cond != "clean" else None,
            )
            for run in group.runs
        )
        rows.append(GridRow(cond, fam, corr, sev, cells, acted_images(group, cond) if cond != "clean" else None))
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
            notes.append(
                f"{run.label}: {len(miss)} of {1 + len(group.grid_conditions)} conditions missing "
                f"({', '.join(miss)}); their cells are blank."
            )
    return tuple(notes)


def grid_table(group: DatasetGroup, metric: str) -> Table:
    """Main grid: one row per condition, per model the metric (with its CI) and the relative drop in %."""
    header = ["family", "corruption", "severity"]
    for run in group.runs:
        header += [f"{run.label} {metric}", f"{run.label} drop %"]
    grid = grid_rows(group, metric)
    rows: list[tuple[str, ...]] = []
    breaks: list[int] = []
    last_family = "clean"
    for r in grid:
        fam = r.family or "clean"
        if fam != last_family:
            breaks.append(len(rows))
        first = fam != last_family
        last_family = fam
        severity = str(r.severity)
        if r.acted is not None and r.acted[0] < r.acted[1]:
            severity += f" (acted {r.acted[0]}/{r.acted[1]})"
        row = [fam if first or r.condition == "clean" else "", r.corruption or "clean", severity]
        for cell in r.cells:
            if not cell.present:
                row += [MISSING, MISSING]
                continue
            row += [fmt_value_ci(cell.value, cell.ci, metric), fmt_percent_ci(cell.drop, cell.drop_ci)]
        rows.append(tuple(row))
    notes = list(missing_note(group))
    absent = absent_conditions(group)
    if absent:
        notes.append(f"No run has {', '.join(absent)}; those rows are omitted.")
    if any(c.ci for r in grid for c in r.cells):
        notes.append(
            "Brackets: percentile 95% bootstrap interval; for the drop, paired with clean over the same resamples."
        )
    if any(r.acted is not None and r.acted[0] < r.acted[1] for r in grid):
        notes.append(
            "(acted a/n): the corruption changed the pixels of a of the n test images (sun glint and turbid "
            "water need water in the frame; the others were scored unchanged). The cell still covers all n."
        )
    return Table(
        f"{group.name}: {metric} per condition",
        tuple(header),
        tuple(rows),
        ("l", "l", "r") + ("r",) * (2 * len(group.runs)),
        tuple(breaks),
        tuple(notes),
    )


def summary_table(group: DatasetGroup, metric: str) -> Table:
    """Clean value, mPC (mean over corrupted conditions), rPC = mPC / clean, mean relative drop (each with its
    bootstrap interval when the JSON has one) and coverage."""
    rows = []
    notes = [
        "mPC: mean over the corrupted conditions present; rPC = mPC / clean. Brackets: percentile 95% "
        "bootstrap intervals, every summary recomputed in each resample."
    ]
    if any(group.missing(run) for run in group.runs):
        notes.append(
            "A partial sweep's mPC averages only the conditions it has; compare it with a full sweep "
            "only on those conditions (see the per-condition table)."
        )
    for run in group.runs:
        s = robustness_summary(group, run, metric)
        rows.append(
            (
                run.label,
                fmt_value_ci(s.clean, s.clean_ci, metric),
                fmt_value_ci(s.mpc, s.mpc_ci, metric),
                fmt_value_ci(s.rpc, s.rpc_ci),
                fmt_percent_ci(s.mean_rel_drop, s.mean_rel_drop_ci),
                f"{s.n_corrupted}/{len(group.grid_conditions)}",
            )
        )
    return Table(
        f"{group.name}: robustness summary ({metric})",
        ("model", f"clean {metric}", "mPC", "rPC", "mean drop %", "corrupted conditions"),
        tuple(rows),
        ("l", "r", "r", "r", "r", "r"),
        notes=tuple(notes),
    )


def summary_metrics(metric: str) -> tuple[str, ...]:
    """The metrics of the cross-model summary: AP50 and the report metric (recall by default)."""
    return tuple(dict.fromkeys(("map50", metric)))


def _best_cells(
    values: Sequence[Sequence[float | None]], lower_is_better: Sequence[bool], first_col: int
) -> frozenset[tuple[int, int]]:
    """(row, column) of the best value of every column (all tied ones), only with two or more rows."""
    if len(values) < 2:
        return frozenset()
    best = set()
    for j, lower in enumerate(lower_is_better):
        col = [(round(value, 3), i) for i, row in enumerate(values) if (value := row[j]) is not None]
        if len(col) < 2:
            continue
        target = (min if lower else max)(v for v, _ in col)
        best |= {(i, first_col + j) for v, i in col if v == target}
    return frozenset(best)


def paired_samples(group: DatasetGroup) -> tuple[list[ScoreSamples | None], str | None]:
    """(per run its samples when the runs can be paired, else None; why some or all cells have no paired
    interval, None when every run pairs). Runs pair when their samples were drawn with one resampling plan."""
    samples = [run.samples for run in group.runs]
    present = [s for s in samples if s is not None]
    if not present:
        return [None] * len(samples), (
            "no run has a samples file (scored with B = 1, before samples files existed, or the file was not "
            "kept beside its JSON), so no difference between models has an interval"
        )
    if len({s.fingerprint for s in present}) > 1:
        return [None] * len(samples), (
            "the runs were bootstrapped with different resampling plans (seed, B, images or groups), so their "
            "resamples are not the same images and no difference between models has a paired interval"
        )
    if len(present) < len(samples):
        missing = ", ".join(run.label for run, s in zip(group.runs, samples) if s is None)
        return samples, f"{missing}: no samples file, so differences with it have no interval"
    return samples, None


def _summary_resamples(run_samples: ScoreSamples | None, metrics: Sequence[str], config: Any) -> list[Any]:
    """Per (metric, clean/mPC/rPC) column of the summary table: the run's per-resample values, or None."""
    if run_samples is None:
        return [None] * (3 * len(metrics))
    per_resample = summary_samples(run_samples.samples, config)
    clean = run_samples.samples.get("clean") or {}
    out: list[Any] = []
    for m in metrics:
        known = m in CI_METRICS
        out += [clean.get(m) if known else None] + [per_resample[k].get(m) if known else None for k in ("mpc", "rpc")]
    return out


def _paired_best_cells(
    values: Sequence[Sequence[float | None]],
    resamples: Sequence[Sequence[Any]],
    lower_is_better: Sequence[bool],
    first_col: int,
) -> frozenset[tuple[int, int]]:
    """(row, column) of the best value of a column only where its paired interval against every other model of
    that column lies wholly on the better side of 0: a "best" within the noise is not marked, and neither is a tie
    (their difference is 0)."""

    def better(cell: Mapping[str, Any], lower: bool) -> bool:
        lo, hi = cell["ci"]
        return bool(cell["excludes_zero"]) and (hi < 0 if lower else lo > 0)

    keep = set()
    for i, col in _best_cells(values, lower_is_better, first_col):
        j = col - first_col
        others = [k for k in range(len(values)) if k != i and values[k][j] is not None]
        cells = [paired_cell(values[i][j], values[k][j], resamples[i][j], resamples[k][j]) for k in others]
        if others and all(better(c, lower_is_better[j]) for c in cells):
            keep.add((i, col))
    return frozenset(keep)


def model_summary_table(group: DatasetGroup, metric: str) -> Table:
    """The table a paper prints: per model clean value, mPC and rPC of AP50 and of the report metric, each with
    its bootstrap interval; the best value of a column in bold only where its paired interval against every other
    model excludes 0 (markers in ``Table.bold``)."""
    metrics = summary_metrics(metric)
    header = ["model"]
    for m in metrics:
        header += [f"clean {m}", f"mPC {m}", f"rPC {m}"]
    samples, why_unpaired = paired_samples(group)
    config = suite_config(score_suite(group.runs[0].result)) if group.runs else None
    rows, raw = [], []
    resamples = [_summary_resamples(run_samples, metrics, config) for run_samples in samples]
    other_conditions = len({frozenset(run.result["conditions"]) for run in group.runs}) > 1
    if other_conditions:  # mPC over different conditions is no paired comparison: those columns are never bold
        resamples = [[r if k % 3 == 0 else None for k, r in enumerate(row)] for row in resamples]
    for run in group.runs:
        row, vals = [run.label], []
        for m in metrics:
            s = robustness_summary(group, run, m)
            row += [
                fmt_value_ci(s.clean, s.clean_ci, m),
                fmt_value_ci(s.mpc, s.mpc_ci, m),
                fmt_value_ci(s.rpc, s.rpc_ci),
            ]
            vals += [s.clean, s.mpc, s.rpc]
        rows.append(tuple(row))
        raw.append(vals)
    lower = [m in LOWER_IS_BETTER for m in metrics for _ in range(3)]
    notes = [
        "Bold: the best value of a column, only where the paired 95% bootstrap interval of its difference to "
        "every other model excludes 0 (same resampled images for both; per cell, not adjusted for the number of "
        "cells: the paired-differences table gives Holm's adjustment). Brackets: percentile 95% bootstrap "
        "intervals (clean: of the clean value; mPC and rPC: recomputed in each resample). mPC: mean over the "
        "corrupted conditions present; rPC = mPC / clean."
    ]
    if len(group.runs) > 1 and why_unpaired:
        notes.append(f"Paired intervals: {why_unpaired}.")
    if any(group.missing(run) for run in group.runs):
        notes.append(
            "A partial sweep's mPC and rPC average only the conditions it has"
            + (" (so they are not bold: the models cover different conditions)." if other_conditions else ".")
        )
    return Table(
        f"{group.name}: summary across models",
        tuple(header),
        tuple(rows),
        ("l",) + ("r",) * (len(header) - 1),
        notes=tuple(notes),
        bold=_paired_best_cells(raw, resamples, lower, 1),
    )


# The ranking table's interval: models resampled this many times with a fixed seed, so a report is reproducible.
RANKING_BOOTSTRAP = 1000


def fmt_tau(tau: Mapping[str, Any], undefined: str = UNDEFINED) -> str:
    """One ``kendall_tau`` entry of an aegis-rank document: ``+0.67 [+0.33, +1.00]``, the bracket only when the
    interval exists; ``undefined`` when tau is (fewer than two models, or no variation)."""
    if tau["tau"] is None:
        return undefined
    lo, hi = tau["ci"]
    return f"{tau['tau']:+.2f}" + ("" if lo is None else f" [{lo:+.2f}, {hi:+.2f}]")


def rank_order(ranks: Mapping[str, float]) -> str:
    """Models best first, ``a = b > c``: tied models (one shared rank) joined by ``=``, in the document's order."""
    return tied_order(ranks)


def ranking_table(group: DatasetGroup, metric: str) -> Table | None:
    """With two or more models: per condition, Kendall's tau-b between the clean ranking and the condition's
    (95% interval over resampled models), the number of rank flips and the order (``aegis_eval.protocols.ranking``)."""
    if len(group.runs) < 2 or not any(r.has("clean") for r in group.runs):
        return None
    from aegis_eval.metrics.bootstrap import BootstrapOptions
    from aegis_eval.protocols.ranking import rank_models

    doc = rank_models(
        [r.result for r in group.runs],
        metric,
        labels=list(group.labels),
        bootstrap=BootstrapOptions(n_bootstrap=RANKING_BOOTSTRAP, seed=0),
    )
    with_tau = len(group.runs) >= MIN_TAU_MODELS
    rows = []
    for cond in (c for c in group.present_conditions if c in doc["ranks"]):
        t = doc["kendall_tau"][cond]
        tau = (fmt_tau(t),) if with_tau else ()
        rows.append((cond, str(t["n_models"]), *tau, str(len(doc["rank_flips"][cond])), rank_order(doc["ranks"][cond])))
    notes = [
        "Order: best first; '=' joins models with equal values. A rank flip is a pair of models whose order "
        "differs from clean. An order says nothing about noise: the paired-differences table does."
    ]
    if with_tau:
        notes.insert(
            0, "Brackets: 95% interval over resampled models (which detectors are in the study), not over images."
        )
    else:
        notes.append(
            f"Kendall's τ is shown with {MIN_TAU_MODELS} or more models (with two it is ±1 whatever the data)."
        )
    return Table(
        f"{group.name}: model ranking on {metric} vs clean",
        ("condition", "models", *(("Kendall τ-b",) if with_tau else ()), "rank flips", "order (best first)"),
        tuple(rows),
        ("l", "r", *(("r",) if with_tau else ()), "r", "l"),
        notes=tuple(notes),
    )


def fmt_signed(v: float | None, metric: str = "") -> str:
    if v is None:
        return UNDEFINED
    return f"{v:+.2f}" if metric == "fp_per_image" else f"{v:+.3f}"


def fmt_difference(cell: Mapping[str, Any], metric: str = "", percent: bool = False) -> str:
    """A paired difference with its interval: ``+0.012 [-0.010, +0.034]`` (``percent``: in percentage points);
    the bracket only when the interval exists."""
    scale = 100.0 if percent else 1.0

    def one(v: float | None) -> str:
        if v is None:
            return UNDEFINED
        return f"{scale * v:+.1f}" if percent else fmt_signed(v, metric)

    lo, hi = cell.get("ci") or (None, None)
    text = one(cell.get("value"))
    return text if cell.get("value") is None or lo is None else f"{text} [{one(lo)}, {one(hi)}]"


def paired_table(group: DatasetGroup, metric: str) -> Table | None:
    """With two or more models: per pair of models, the difference A - B of ``metric`` per condition, of its mPC
    and rPC and of each family's mean relative drop, with paired 95% bootstrap intervals (the same resampled
    images, whole groups when clustered, for both models: ``aegis_eval.protocols.ranking.paired_block``). Bold
    only where the interval excludes 0; the notes give Holm's adjustment over every cell of the table."""
    if len(group.runs) < 2:
        return None
    samples, why_unpaired = paired_samples(group)
    config = suite_config(score_suite(group.runs[0].result))
    block = paired_block(
        [r.result for r in group.runs], list(group.labels), samples, metric, list(group.present_conditions), config
    )
    pairs = list(block["pairs"].values())
    families = list(dict.fromkeys(f for e in pairs for f in e["per_family"]))
    row_keys: list[tuple[str, str, str | None]] = [("condition", c, c) for c in group.present_conditions]
    row_keys += [("mpc", f"mPC {metric}", None), ("rpc", f"rPC {metric}", None)]
    row_keys += [("family", f"{f}: mean drop (pp)", f) for f in families]
    rows, bold = [], set()
    for i, (kind, label, key) in enumerate(row_keys):
        row = [label]
        for j, e in enumerate(pairs):
            if kind == "condition":
                cell = e["conditions"].get(key)
            elif kind == "family":
                cell = e["per_family"].get(key)
            else:
                cell = e[kind]
            if cell is None:
                row.append(MISSING)
                continue
            row.append(fmt_difference(cell, metric if kind != "rpc" else "", percent=kind == "family"))
            if cell.get("excludes_zero"):
                bold.add((i, j + 1))
        rows.append(tuple(row))
    breaks = (len(group.present_conditions),) if families or len(row_keys) > len(group.present_conditions) else ()
    n_tests = block["n_tests"]
    notes = [
        "Paired difference A - B: both models on the same resampled images (whole groups when the bootstrap is "
        "clustered); brackets: percentile 95% interval of the per-resample differences. Bold: the interval "
        "excludes 0. Family rows: difference of the mean relative drop, in percentage points (positive: A drops "
        "more)."
    ]
    if n_tests:
        notes.append(
            f"Multiplicity: {block['n_excluding_zero']} of {n_tests} cells have an interval excluding 0; after "
            f"Holm's adjustment over all {n_tests} (family-wise error {ALPHA:.0%}), {block['n_significant']} "
            "remain. With many cells some intervals exclude 0 by chance; trust the ones that survive Holm."
        )
    if why_unpaired:
        notes.append(f"Paired intervals: {why_unpaired}.")
    return Table(
        f"{group.name}: paired differences between models ({metric})",
        ("", *(f"{e['a']} − {e['b']}" for e in pairs)),
        tuple(rows),
        ("l",) + ("r",) * len(pairs),
        breaks,
        tuple(notes),
        bold=frozenset(bold),
    )


def _has_any(group: DatasetGroup, run: Run, corruptions: Sequence[str]) -> bool:
    return any(run.has(condition_id(c, s)) for c in corruptions for s in group.severities)


def family_table(group: DatasetGroup, metric: str) -> Table:
    """Mean relative drop (%) per family, one row per model."""
    fams = group.family_order
    rows = []
    for run in group.runs:
        d = per_family_drop(group, run, metric)
        rows.append(
            (run.label,)
            + tuple(
                fmt_percent_ci(d[f], family_drop_interval(run, f, metric))
                if _has_any(group, run, group.family_members(f))
                else MISSING
                for f in fams
            )
        )
    return Table(
        f"{group.name}: mean relative drop of {metric} per family (%)",
        ("model",) + fams,
        tuple(rows),
        ("l",) + ("r",) * len(fams),
        notes=(
            "Brackets: percentile 95% bootstrap interval of the family mean, over the same resamples "
            "as every other interval.",
        ),
    )


def corruption_table(group: DatasetGroup, metric: str) -> Table:
    """Mean relative drop (%) over each corruption's severities; rows = corruptions, columns = models."""
    drops = [per_corruption_drop(group, run, metric) for run in group.runs]
    rows = tuple(
        (group.families[c], c)
        + tuple(
            fmt_percent_ci(d[c], summary_interval(run.result, "per_corruption", metric, key=c))
            if _has_any(group, run, (c,))
            else MISSING
            for d, run in zip(drops, group.runs)
        )
        for c in group.corruptions
    )
    return Table(
        f"{group.name}: mean relative drop of {metric} per corruption (%)",
        ("family", "corruption") + group.labels,
        rows,
        ("l", "l") + ("r",) * len(group.runs),
        notes=("Brackets: percentile 95% bootstrap interval of the mean over the corruption's severities.",),
    )


def headline_table(group: DatasetGroup, run: Run) -> Table:
    """All headline metrics of one run, one row per condition it has, plus TP/FP/FN counts."""
    rows = []
    for cond in group.present_conditions:
        if not run.has(cond):
            continue
        block = run.result["conditions"][cond]
        counts = tuple(str(block.get(k, "")) for k in ("tp", "fp", "fn"))
        rows.append((cond,) + tuple(fmt_value(metric_value(run.result, cond, m), m) for m in HEADLINE_METRICS) + counts)
    return Table(
        f"{group.name} / {run.label}: headline metrics",
        ("condition",) + HEADLINE_METRICS + ("tp", "fp", "fn"),
        tuple(rows),
        ("l",) + ("r",) * (len(HEADLINE_METRICS) + 3),
    )


def _with_upper(rec: Any, key: str, fmt) -> str:
    """``1.97 (≤ 2.22)``: a false-alarm rate and its exact upper bound (``n/a`` when the rate is undefined)."""
    v, up = (rec.get(key), rec.get(f"{key}_upper")) if isinstance(rec, dict) else (None, None)
    if not isinstance(v, (int, float)):
        return UNDEFINED
    return fmt(v) + (f" (≤ {fmt(up)})" if isinstance(up, (int, float)) else "")


# (key, column name, format): FP per megapixel is small on large frames, so it keeps three significant digits.
_FALSE_ALARM_COLUMNS = (
    ("fp_per_image", "FP/image", lambda x: f"{x:.2f}"),
    ("fp_per_megapixel", "FP/MP", lambda x: f"{x:.3g}"),
    ("false_alarm_image_share", "images with a false alarm %", fmt_percent),
)


def risk_rule_note(group: DatasetGroup) -> tuple[str, ...]:
    """One sentence per run whose threshold was frozen by a false-alarm risk rule (``fp_per_image<=A``)."""
    notes = []
    for run in group.runs:
        t = run.result.get("threshold") or {}
        rule = t.get("rule")
        if isinstance(rule, str) and "<=" in rule:
            value = t.get("value")
            at = f" {value:g}" if isinstance(value, (int, float)) else ""
            notes.append(
                f"{run.label}: threshold{at} frozen by the risk rule {rule} — the lowest threshold whose "
                "exact upper bound on clean validation stays within the budget."
            )
    return tuple(notes)


def false_alarm_table(group: DatasetGroup) -> Table | None:
    """Per condition and model: FP per image, FP per megapixel and the share of images with a false alarm, each
    with its exact one-sided upper bound (the score's ``false_alarm`` block); None when no run has one."""
    conds = [
        c for c in group.present_conditions if any(false_alarm_record(r.result, c) is not None for r in group.runs)
    ]
    if not conds:
        return None
    header = ["condition"]
    for run in group.runs:
        header += [f"{run.label} {name}" for _, name, _ in _FALSE_ALARM_COLUMNS]
    rows = []
    for c in conds:
        row = [c]
        for run in group.runs:
            rec = false_alarm_record(run.result, c)
            row += [MISSING if rec is None else _with_upper(rec, key, fmt) for key, _, fmt in _FALSE_ALARM_COLUMNS]
        rows.append(tuple(row))
    conf = next((v for r in group.runs if (v := false_alarm_confidence(r.result)) is not None), None)
    level = f"{100 * conf:.0f}% " if conf is not None else ""
    notes = (
        f"(≤ x): exact one-sided {level}upper bound — Garwood (Poisson) on the false-positive count over "
        "the images or megapixels, Clopper–Pearson on the number of images with at least one false alarm.",
        *risk_rule_note(group),
    )
    return Table(
        f"{group.name}: false alarms at the frozen threshold",
        tuple(header),
        tuple(rows),
        ("l",) + ("r",) * (len(header) - 1),
        notes=notes,
    )


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
    """The frozen operating point of every run, with the validation sample it was frozen on and its warnings
    (``threshold.validation`` / ``threshold.warnings``, in score JSONs that record them)."""
    rows, warnings = [], []
    for g in groups:
        for run in g.runs:
            t = run.result.get("threshold") or {}
            value = t.get("value")
            warnings += [f"{g.name} / {run.label}: {w}" for w in t.get("warnings") or () if isinstance(w, str)]
            rows.append(
                (
                    g.name,
                    run.label,
                    UNDEFINED if not isinstance(value, (int, float)) else f"{value:.4g}",
                    _text(t.get("rule")) or "given value",
                    validation_text(t.get("validation")),
                    _text(t.get("file")),
                    _text(t.get("file_sha256"), short=True),
                    _text(run.result.get("iou")),
                )
            )
    return Table(
        "Frozen confidence thresholds",
        ("dataset", "model", "threshold", "rule", "validation", "file", "sha256", "IoU"),
        tuple(rows),
        ("l", "l", "r", "l", "l", "l", "l", "r"),
        notes=(
            "Each threshold was frozen once on clean validation data and applied unchanged to every condition."
            + (
                " Blank validation: the threshold file does not record its sample."
                if any(not r[4] for r in rows)
                else ""
            ),
            *(f"Warning, {w}" for w in warnings),
        ),
    )


def validation_text(v: Any) -> str:
    """``120 images, 431 GT`` from a threshold's ``validation`` block; blank when absent or malformed."""
    if not isinstance(v, dict):
        return ""
    counts = [(v.get(k), unit) for k, unit in (("n_images", "images"), ("n_gt", "GT"))]
    return ", ".join(
        f"{_thousands(n)} {unit}" for n, unit in counts if isinstance(n, int) and not isinstance(n, bool) and n >= 0
    )


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
        if keys == ("git_dirty",):  # the suite first among the benchmark's identity rows
            rows.append(("corruption suite",) + tuple(_text(score_suite(r.result)) for _, r in runs))
    rows.append(("corruption scale",) + tuple(_scale_text(r.result.get("provenance") or {}) for _, r in runs))
    rows.append(
        ("prediction files",)
        + tuple(
            _text(len(p)) if isinstance(p := _get(r.result.get("provenance"), "predictions"), dict) else ""
            for _, r in runs
        )
    )
    rows.append(("score JSON",) + tuple(r.source for _, r in runs))
    return Table(
        "Provenance",
        ("",) + tuple(f"{g.name} / {r.label}" for g, r in runs),
        tuple(rows),
        ("l",) * (1 + len(runs)),
        notes=("Hashes are shortened to their first 12 hex digits.",),
    )


def submerged_table(group: DatasetGroup) -> Table | None:
    """Recall of the persons a flood reaches, by the share of them under water (the split's ``submerged_fraction``
    per GT box), per run in that condition and in clean; None when no run's score records it."""
    conds = [condition_id(c, s) for c in group.corruptions for s in group.severities]
    blocks: dict[str, dict[str, dict]] = {}
    for cond in conds:
        for run in group.runs:
            sub = (run.result["conditions"].get(cond) or {}).get("submerged")
            if isinstance(sub, dict):
                blocks.setdefault(cond, {})[run.label] = sub
    if not blocks:
        return None
    header = ["condition", "under water", "persons"] + [f"{run.label} recall (clean)" for run in group.runs]
    rows: list[tuple[str, ...]] = []
    breaks: list[int] = []
    for cond, per_run in blocks.items():
        breaks.append(len(rows))
        first = next(iter(per_run.values()))
        for k, label in enumerate(first["labels"]):
            row = [cond if k == 0 else "", label, _thousands(first["n_gt"][k])]
            for run in group.runs:
                sub = per_run.get(run.label)
                if sub is None:
                    row.append(MISSING)
                    continue
                clean = (sub.get("recall_clean") or [None] * len(sub["labels"]))[k]
                row.append(f"{fmt_value(sub['recall'][k], 'recall')} ({fmt_value(clean, 'recall')})")
            rows.append(tuple(row))
    notes = (
        "Ground-truth contract of a flood: every person's box is kept as it is, also when the water reaches "
        "them; the split records per box the share of the person under water (submerged_fraction = depth at "
        "the feet / 1.7 m). A detector is asked to find partly submerged persons; this table shows how it does "
        "by that share, beside its clean recall of the same persons.",
    )
    return Table(
        f"{group.name}: recall of persons by the share under water",
        tuple(header),
        tuple(rows),
        ("l", "l", "r") + ("r",) * len(group.runs),
        tuple(breaks[1:]),
        notes,
    )
