"""The tables and lines `aegis score` prints: conditions, false alarms, the recall matrix, classes, GT versions,
referring detection. Each table is built as a :class:`~cli.plain_tables.TableSpec`; on a terminal Rich draws it
(``conditions_table`` etc. give the Rich ``Table``), elsewhere (a pipe, a file) cli/plain_tables.py writes the same
characters without importing Rich."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aegis_data.api import SEVERITIES

from . import common
from .common import in_flags, warn
from .plain_tables import TableSpec, plain_line, plain_text, plain_width, rich_table

if TYPE_CHECKING:
    from rich.table import Table

Block = tuple[TableSpec, int] | str  # a table and the leading columns its parts repeat, or a line


def _fmt(x: Any, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _with_ci(entry: Mapping[str, Any], key: str, digits: int = 3) -> str:
    value = entry.get(key)
    if value is None or value == -1.0:
        return "–"
    ci = entry.get("ci", {}).get(key)
    if ci and ci[0] is not None and ci[1] is not None:
        # one digit less on the bounds keeps the ten columns within a 160-column terminal
        return f"{value:.{digits}f} ({ci[0]:.{digits - 1}f}–{ci[1]:.{digits - 1}f})"
    return f"{value:.{digits}f}"


def _ci_cells(e: Mapping[str, Any]) -> list[str]:
    """AP, AP50, P, R, F1 and FP/img of one condition entry, each with its interval."""
    return [
        _with_ci(e, m, 2 if m == "fp_per_image" else 3)
        for m in ("map50_95", "map50", "precision", "recall", "f1", "fp_per_image")
    ]


def _threshold_text(result: Mapping[str, Any]) -> str:
    value = result["threshold"]["value"]
    return "per class" if value is None else f"{value:g}"


def conditions_spec(result: Mapping[str, Any]) -> TableSpec:
    """One row per condition: AP, AP50, P, R, F1, FP/img (with 95% CIs) and recall by size."""
    conf = _threshold_text(result)
    table = TableSpec(
        title=f"{result.get('label') or 'predictions'} @ threshold {conf} (IoU {result['iou']:g}); "
        "(lo–hi) = 95% bootstrap CI"
    )
    for col in ("condition", "AP", "AP50", "P", "R", "F1", "FP/img", "R small", "R med", "R large"):
        table.add_column(col, justify="left" if col == "condition" else "right", no_wrap=col == "condition")
    for cond, e in result["conditions"].items():
        table.add_row(
            cond,
            *_ci_cells(e),
            _fmt(e.get("recall_small")),
            _fmt(e.get("recall_medium")),
            _fmt(e.get("recall_large")),
        )
    return table


def false_alarm_spec(result: Mapping[str, Any]) -> TableSpec | None:
    """One row per condition: FP count and exposure, FP/img, FP/MP and the image share, each with its exact
    one-sided upper bound; None for a result without the false-alarm block."""
    block = result.get("false_alarm")
    if not block:
        return None
    conf = f"{100 * block['confidence']:g}%"
    table = TableSpec(
        title=f"false alarms @ threshold {_threshold_text(result)}; (≤ x) = exact one-sided "
        f"{conf} upper bound (Garwood for counts, Clopper–Pearson for the share)"
    )
    for col in ("condition", "FP", "images", "MP", "FP/img", "FP/MP", "images with FP"):
        table.add_column(col, justify="left" if col == "condition" else "right", no_wrap=col == "condition")

    def bounded(e: Mapping[str, Any], key: str, digits: int) -> str:
        if e.get(key) is None:
            return "–"
        return f"{e[key]:.{digits}f} (≤ {e[key + '_upper']:.{digits}f})"

    for cond, e in block["conditions"].items():
        table.add_row(
            cond,
            str(e["fp"]),
            str(e["n_images"]),
            _fmt(e.get("megapixels"), 1),
            bounded(e, "fp_per_image", 2),
            bounded(e, "fp_per_megapixel", 2),
            bounded(e, "false_alarm_image_share", 3),
        )
    return table


def _drop_style(drop: float | None) -> str:
    if drop is None:
        return "dim"
    if drop < 0.05:
        return "green"
    if drop < 0.20:
        return "yellow"
    if drop < 0.50:
        return "dark_orange"
    return "bold red"


def recall_spec(result: Mapping[str, Any], metric: str = "recall") -> TableSpec | None:
    """Corruption x severity matrix of ``metric``, coloured by relative drop vs clean; None without a sweep."""
    conds = result["conditions"]
    # Corruptions and families as the scorer labelled them, in its (the split's suite config) order.
    family_of = {e["corruption"]: e.get("family") for e in conds.values() if e.get("corruption")}
    names = list(family_of)
    if not names:
        return None
    clean = conds.get("clean", {}).get(metric)
    table = TableSpec(
        title=f"{metric} by corruption and severity (clean {_fmt(clean)})",
        caption="colour = relative drop vs clean: green < 5%, yellow < 20%, orange < 50%, red >= 50%",
    )
    table.add_column("corruption", no_wrap=True)
    table.add_column("family", no_wrap=True)
    for s in SEVERITIES:
        table.add_column(f"s{s}", justify="right")
    table.add_column("mean drop", justify="right")
    per_corruption = result["summary"]["per_corruption"]
    for n in names:
        cells = []
        for s in SEVERITIES:
            e = conds.get(f"{n}_s{s}")
            if e is None:
                cells.append(("missing", "dim"))
                continue
            drop = e["rel_drop"].get(metric)
            cells.append((_fmt(e.get(metric)), _drop_style(drop)))
        mean_drop = per_corruption.get(n, {}).get(metric)
        table.add_row(n, family_of[n] or "–", *cells, "–" if mean_drop is None else f"{100 * mean_drop:.1f}%")
    return table


def _summary_line(result: Mapping[str, Any]) -> str:
    s = result["summary"]
    parts = []
    for m in ("map50", "recall", "f1"):
        parts.append(f"{m}: clean {_fmt(s['clean'].get(m))}, mPC {_fmt(s['mpc'].get(m))}, rPC {_fmt(s['rpc'].get(m))}")
    missing = s["missing_conditions"]
    tail = f"; {len(missing)} of 28 canonical conditions missing" if missing else ""
    return " | ".join(parts) + tail


def classes_spec(result: Mapping[str, Any]) -> TableSpec | None:
    """Multi-class runs: one row per (class, condition) with the class's threshold, AP, AP50, P, R, F1, FP/img."""
    classes = result.get("classes")
    if not classes:
        return None
    table = TableSpec(title="per class (each at its frozen threshold); the condition table above holds macro means")
    for col in ("class", "threshold", "condition", "AP", "AP50", "P", "R", "F1", "FP/img"):
        table.add_column(col, justify="left" if col in ("class", "condition") else "right", no_wrap=True)
    for name, block in classes.items():
        for cond, e in block["conditions"].items():
            table.add_row(
                name,
                f"{block['threshold']:g}",
                cond,
                *_ci_cells(e),
            )
    return table


def versions_spec(result: Mapping[str, Any]) -> TableSpec | None:
    """Cross-version runs: per condition and metric, the value under each GT version and each version's
    difference to the first with its paired 95% interval."""
    block = result.get("versions")
    if not block:
        return None
    names = list(block["gt"])
    ref = block["reference"]
    table = TableSpec(
        title=f"the same predictions against {len(names)} GT versions; Δ = version − {ref} "
        "(paired 95% bootstrap CI, the same images resampled for every version)"
    )
    table.add_column("condition", no_wrap=True)
    table.add_column("metric", no_wrap=True)
    for name in names:
        table.add_column(name, justify="right")
    for name in names[1:]:
        table.add_column(f"Δ {name}", justify="right")
    for cond, row in block["matrix"].items():
        for metric in ("map50", "map50_95", "precision", "recall", "f1"):
            cells = [_fmt(None if row[n][metric] == -1.0 else row[n][metric]) for n in names]
            for name in names[1:]:
                d = block["differences"][name][cond][metric]
                lo, hi = d["ci"]
                ci = "" if lo is None else f" [{lo:+.3f}, {hi:+.3f}]"
                cells.append("–" if d["value"] is None else f"{d['value']:+.3f}{ci}")
            table.add_row(cond, metric, *cells)
    return table


def score_blocks(result: Mapping[str, Any]) -> list[Block]:
    """What :func:`print_score` prints: conditions, then whatever the options added (cross-check, classes, false
    alarms, the recall matrix, the robustness summary, GT versions)."""
    blocks: list[Block] = [(conditions_spec(result), 1)]
    checked = result["provenance"].get("cross_check")
    if checked:
        blocks.append(
            f"cross-check: {checked['tool']} {checked['version'] or ''} agrees on {checked['conditions']} "
            f"condition(s) x 6 AP metrics (max |difference| {checked['max_abs_diff']:.3g} <= "
            f"{checked['tolerance']:g})"
        )
    for table, keys in ((classes_spec(result), 3), (false_alarm_spec(result), 1), (recall_spec(result), 2)):
        if table is not None:
            blocks.append((table, keys))
    if len(result["conditions"]) > 1:
        blocks.append(_summary_line(result))
    versions = versions_spec(result)
    if versions is not None:
        blocks.append((versions, 2))
    return blocks


def emit(blocks: list[Block]) -> None:
    """Print ``blocks`` on stdout: a table as ``fit`` draws it (cli/tables.py), a line as it is. Output that is no
    terminal is written by cli/plain_tables.py (the same characters, without importing Rich) unless something in
    ``blocks`` is outside what it draws exactly; then, and on a terminal, Rich draws all of them."""
    width = plain_width()
    if width is not None:
        texts = [plain_line(b) if isinstance(b, str) else plain_text(b[0], b[1], width) for b in blocks]
        if all(t is not None for t in texts):
            for text in texts:  # one write and flush per block, as Rich's print: stdout and stderr stay in order
                sys.stdout.write(text or "")
                sys.stdout.flush()
            return
    from .tables import fit

    for block in blocks:
        if isinstance(block, str):
            common.out.print(block, highlight=False, soft_wrap=True)
        else:
            common.out.print(fit(rich_table(block[0]), block[1]))


def print_score(result: Mapping[str, Any]) -> None:
    """The score's tables and lines on stdout (:func:`score_blocks`)."""
    emit(score_blocks(result))


def print_threshold_notes(threshold: Mapping[str, Any]) -> None:
    """What the threshold file says of its own choice: the validation set's size and its warnings."""
    validation = threshold.get("validation")
    if validation:
        emit(
            [
                f"threshold frozen on {validation['n_images']} validation images, {validation['n_gt']} GT boxes "
                f"({threshold.get('file')})"
            ]
        )
    for w in threshold.get("warnings") or ():
        warn(f"threshold file: {in_flags(w)}")


def referring_spec(doc: Mapping[str, Any]) -> TableSpec:
    """One row per split and one overall: expressions, missing, P@θ and mP with 95% intervals."""
    table = TableSpec(
        title=f"{doc['label']}: referring detection, correct iff IoU > θ (strict); (lo–hi) = 95% bootstrap CI"
    )
    for col in ("split", "expressions", "missing", "P@0.5", "P@0.6", "P@0.7", "P@0.8", "mP"):
        table.add_column(col, justify="left" if col == "split" else "right", no_wrap=col == "split")
    rows = list(doc["splits"].items()) + ([("all splits", doc["overall"])] if len(doc["splits"]) > 1 else [])
    for name, e in rows:
        table.add_row(
            name,
            str(e["n_refs"]),
            str(e["n_missing"]),
            *(_with_ci(e, k) for k in ("p_at_50", "p_at_60", "p_at_70", "p_at_80", "mp")),
        )
    return table


# The Rich tables (a terminal's, and what other commands and the tests take).
def conditions_table(result: Mapping[str, Any]) -> Table:
    return rich_table(conditions_spec(result))


def false_alarm_table(result: Mapping[str, Any]) -> Table | None:
    spec = false_alarm_spec(result)
    return None if spec is None else rich_table(spec)


def recall_matrix(result: Mapping[str, Any], metric: str = "recall") -> Table | None:
    spec = recall_spec(result, metric)
    return None if spec is None else rich_table(spec)
