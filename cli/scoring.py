"""``aegis freeze-threshold`` and ``aegis score``: the shared scorer's command line (SPEC §6)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Mapping, Optional

import typer
from rich.table import Table

from aegis_data.config import SEVERITIES, load_config
from aegis_eval.predictions import load_ground_truth, load_predictions
from aegis_eval.threshold import DEFAULT_RULE, freeze_threshold, parse_grid, write_threshold_file
from cli.common import check_outputs, handle_errors, out, warn


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


def conditions_table(result: Mapping[str, Any]) -> Table:
    """One row per condition: AP, AP50, P, R, F1, FP/img (with 95% CIs) and recall by size."""
    conf = f"{result['threshold']['value']:g}"
    table = Table(title=f"{result.get('label') or 'predictions'} @ threshold {conf} (IoU {result['iou']:g}); "
                        "(lo–hi) = 95% bootstrap CI")
    for col in ("condition", "AP", "AP50", "P", "R", "F1", "FP/img", "R small", "R med", "R large"):
        table.add_column(col, justify="left" if col == "condition" else "right", no_wrap=col == "condition")
    for cond, e in result["conditions"].items():
        table.add_row(cond, _with_ci(e, "map50_95"), _with_ci(e, "map50"), _with_ci(e, "precision"),
                      _with_ci(e, "recall"), _with_ci(e, "f1"), _with_ci(e, "fp_per_image", 2),
                      _fmt(e.get("recall_small")), _fmt(e.get("recall_medium")), _fmt(e.get("recall_large")))
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


def recall_matrix(result: Mapping[str, Any], metric: str = "recall") -> Table | None:
    """Corruption x severity matrix of ``metric``, coloured by relative drop vs clean; None without a sweep."""
    conds = result["conditions"]
    names = [n for n in load_config().names if any(f"{n}_s{s}" in conds for s in SEVERITIES)]
    if not names:
        return None
    clean = conds.get("clean", {}).get(metric)
    table = Table(title=f"{metric} by corruption and severity (clean {_fmt(clean)})",
                  caption="colour = relative drop vs clean: green < 5%, yellow < 20%, orange < 50%, red >= 50%")
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
                cells.append("[dim]missing[/]")
                continue
            drop = e["rel_drop"].get(metric)
            cells.append(f"[{_drop_style(drop)}]{_fmt(e.get(metric))}[/]")
        mean_drop = per_corruption.get(n, {}).get(metric)
        table.add_row(n, load_config().corruptions[n].family, *cells,
                      "–" if mean_drop is None else f"{100 * mean_drop:.1f}%")
    return table


def _summary_line(result: Mapping[str, Any]) -> str:
    s = result["summary"]
    parts = []
    for m in ("map50", "recall", "f1"):
        parts.append(f"{m}: clean {_fmt(s['clean'].get(m))}, mPC {_fmt(s['mpc'].get(m))}, rPC {_fmt(s['rpc'].get(m))}")
    missing = s["missing_conditions"]
    tail = f"; {len(missing)} of 28 canonical conditions missing" if missing else ""
    return " | ".join(parts) + tail


def freeze_threshold_cmd(
    val_preds: Annotated[Path, typer.Argument(help="Clean validation predictions (COCO results JSON).")],
    gt: Annotated[Path, typer.Option("--gt", help="Validation GT: a COCO JSON file or a split directory "
                                                  "(then annotations/val.json is used).")],
    out_path: Annotated[Path, typer.Option("--out", help="Where to write the threshold JSON.")] = Path("threshold.json"),
    rule: Annotated[str, typer.Option(help="'max-f1' (ties -> lowest threshold), 'precision>=X' (lowest "
                                           "threshold reaching X) or 'recall>=X' (highest threshold keeping X).")] = DEFAULT_RULE,
    grid: Annotated[Optional[str], typer.Option(help="Threshold grid: 'start:stop:step' or a comma list. "
                                                     "Default 0.00..0.99 step 0.01 plus 0.995, 0.999.")] = None,
    iou: Annotated[float, typer.Option(help="IoU for one-to-one matching.")] = 0.5,
) -> None:
    """Choose the confidence threshold once, on clean validation predictions, and store it with its val metrics."""
    check_outputs({"--out": out_path}, [val_preds, gt])
    grid_values = parse_grid(grid) if grid is not None else None
    ground_truth = load_ground_truth(gt, "val")
    dets = load_predictions(val_preds, ground_truth)
    for w in dets.source.get("warnings", ()):
        warn(w)
    frozen = freeze_threshold(ground_truth, dets, rule=rule, grid=grid_values, iou=iou)
    for w in frozen.warnings:
        warn(w)
    write_threshold_file(frozen, out_path, val_preds, gt)
    m = frozen.metrics
    out.print(f"threshold {frozen.value:g} ({frozen.rule}) on {m['n_images']} val images, {m['n_gt']} GT boxes: "
              f"P {_fmt(m['precision'])}  R {_fmt(m['recall'])}  F1 {_fmt(m['f1'])}  "
              f"FP/img {_fmt(m['fp_per_image'], 2)}", highlight=False, soft_wrap=True)
    out.print(f"wrote {out_path}", highlight=False, soft_wrap=True)


def score_cmd(
    preds: Annotated[Path, typer.Argument(help="A COCO results JSON (one condition, named after its stem) or a "
                                               "directory of <condition>.json files.")],
    gt: Annotated[Path, typer.Option("--gt", help="Test GT: a COCO JSON file or a split directory.")],
    threshold: Annotated[Optional[float], typer.Option(help="Frozen confidence threshold in [0, 1].")] = None,
    threshold_file: Annotated[Optional[Path], typer.Option(help="Threshold JSON from 'aegis freeze-threshold'.")] = None,
    bootstrap: Annotated[int, typer.Option(help="Bootstrap resamples B (1 = point estimate only, zero-width intervals).")] = 1000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
    iou: Annotated[float, typer.Option(help="IoU for one-to-one matching at the threshold.")] = 0.5,
    cluster_by: Annotated[Optional[str], typer.Option(help="Resample whole groups: a GT image attribute name "
                                                           "(e.g. 'group') or a JSON file {image_id or file_name: group}.")] = None,
    label: Annotated[Optional[str], typer.Option(help="Model / run label (default: the predictions name).")] = None,
    split: Annotated[str, typer.Option(help="Split to read when --gt is a split directory.")] = "test",
    json_out: Annotated[Optional[Path], typer.Option("--json", help="Write the aegis-score/1 JSON here.")] = None,
    csv_out: Annotated[Optional[Path], typer.Option("--csv", help="Write one CSV row per condition here.")] = None,
) -> None:
    """Score predictions at a frozen threshold: COCO AP, P/R/F1, size recall, drops vs clean, bootstrap CIs."""
    # Imported here so the other commands (and --help) start without loading the AP engine and bootstrap.
    from aegis_eval.scoring import score_paths, write_score_csv, write_score_json

    cluster_file = Path(cluster_by) if cluster_by and Path(cluster_by).is_file() else None
    check_outputs({"--json": json_out, "--csv": csv_out}, [preds, gt, threshold_file, cluster_file])
    result = score_paths(preds, gt, threshold=threshold, threshold_file=threshold_file, bootstrap=bootstrap,
                         seed=seed, iou=iou, cluster_by=cluster_by, label=label, split=split, on_warning=warn)
    out.print(conditions_table(result))
    matrix = recall_matrix(result)
    if matrix is not None:
        out.print(matrix)
    if len(result["conditions"]) > 1:
        out.print(_summary_line(result), highlight=False, soft_wrap=True)
    if json_out is not None:
        write_score_json(result, json_out)
        out.print(f"wrote {json_out}", highlight=False, soft_wrap=True)
    if csv_out is not None:
        write_score_csv(result, csv_out)
        out.print(f"wrote {csv_out}", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add ``freeze-threshold`` and ``score`` to the root app."""
    app.command("freeze-threshold")(handle_errors(freeze_threshold_cmd))
    app.command("score")(handle_errors(score_cmd))
