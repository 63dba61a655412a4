"""``aegis freeze-threshold`` and ``aegis score``: the shared scorer's command line (docs/SCORING.md)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from aegis_data.api import SEVERITIES, check_outputs
from aegis_data.errors import AegisError

from .common import in_flags, out, styled, warn
from .tables import fit
from .vocabulary import ClassThresholds, CrossCheck, RemapSide, SplitName, Task, add_command, mode, value


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


def _threshold_text(result: Mapping[str, Any]) -> str:
    value = result["threshold"]["value"]
    return "per class" if value is None else f"{value:g}"


def conditions_table(result: Mapping[str, Any]) -> Table:
    """One row per condition: AP, AP50, P, R, F1, FP/img (with 95% CIs) and recall by size."""
    conf = _threshold_text(result)
    table = Table(
        title=f"{result.get('label') or 'predictions'} @ threshold {conf} (IoU {result['iou']:g}); "
        "(lo–hi) = 95% bootstrap CI"
    )
    for col in ("condition", "AP", "AP50", "P", "R", "F1", "FP/img", "R small", "R med", "R large"):
        table.add_column(col, justify="left" if col == "condition" else "right", no_wrap=col == "condition")
    for cond, e in result["conditions"].items():
        table.add_row(
            cond,
            _with_ci(e, "map50_95"),
            _with_ci(e, "map50"),
            _with_ci(e, "precision"),
            _with_ci(e, "recall"),
            _with_ci(e, "f1"),
            _with_ci(e, "fp_per_image", 2),
            _fmt(e.get("recall_small")),
            _fmt(e.get("recall_medium")),
            _fmt(e.get("recall_large")),
        )
    return table


def false_alarm_table(result: Mapping[str, Any]) -> Table | None:
    """One row per condition: FP count and exposure, FP/img, FP/MP and the image share, each with its exact
    one-sided upper bound; None for a result without the false-alarm block."""
    block = result.get("false_alarm")
    if not block:
        return None
    conf = f"{100 * block['confidence']:g}%"
    table = Table(
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


def recall_matrix(result: Mapping[str, Any], metric: str = "recall") -> Table | None:
    """Corruption x severity matrix of ``metric``, coloured by relative drop vs clean; None without a sweep."""
    conds = result["conditions"]
    # Corruptions and families as the scorer labelled them, in its (the split's suite config) order.
    family_of = {e["corruption"]: e.get("family") for e in conds.values() if e.get("corruption")}
    names = list(family_of)
    if not names:
        return None
    clean = conds.get("clean", {}).get(metric)
    table = Table(
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
                cells.append(styled(("missing", "dim")))
                continue
            drop = e["rel_drop"].get(metric)
            cells.append(styled((_fmt(e.get(metric)), _drop_style(drop))))
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


def classes_table(result: Mapping[str, Any]) -> Table | None:
    """Multi-class runs: one row per (class, condition) with the class's threshold, AP, AP50, P, R, F1, FP/img."""
    classes = result.get("classes")
    if not classes:
        return None
    table = Table(title="per class (each at its frozen threshold); the condition table above holds macro means")
    for col in ("class", "threshold", "condition", "AP", "AP50", "P", "R", "F1", "FP/img"):
        table.add_column(col, justify="left" if col in ("class", "condition") else "right", no_wrap=True)
    for name, block in classes.items():
        for cond, e in block["conditions"].items():
            table.add_row(
                name,
                f"{block['threshold']:g}",
                cond,
                _with_ci(e, "map50_95"),
                _with_ci(e, "map50"),
                _with_ci(e, "precision"),
                _with_ci(e, "recall"),
                _with_ci(e, "f1"),
                _with_ci(e, "fp_per_image", 2),
            )
    return table


def versions_table(result: Mapping[str, Any]) -> Table | None:
    """Cross-version runs: per condition and metric, the value under each GT version and each version's
    difference to the first with its paired 95% interval."""
    block = result.get("versions")
    if not block:
        return None
    names = list(block["gt"])
    ref = block["reference"]
    table = Table(
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


ClassesOption = Annotated[
    str | None,
    typer.Option(
        "--classes",
        help="Score several GT categories: 'all' or comma-separated category names. Without it only "
        "'person' (or the file's single category) is scored.",
    ),
]
ClassMapOption = Annotated[
    str | None,
    typer.Option(
        "--class-map",
        help="Remap category ids before scoring: 'SRC:DST,...' (e.g. '0:1,1:0') or a JSON file "
        '{"0": 1, ...}. Every id must be mapped; recorded in provenance.',
    ),
]
RemapSideOption = Annotated[
    RemapSide,
    mode(
        RemapSide, "--remap-side", help="Apply --class-map to the ground truth ('gt') or to the predictions ('preds')."
    ),
]
AllowMergeOption = Annotated[bool, typer.Option("--allow-merge", help="Let --class-map send several ids onto one.")]


def freeze_threshold_cmd(
    val_preds: Annotated[
        Path,
        typer.Argument(metavar="PREDS", help="Clean validation predictions (COCO results JSON).", show_default=False),
    ],
    gt: Annotated[
        Path,
        typer.Option(
            "--split-dir",
            help="The split folder (its annotations/<--split-name>.json is used), or a validation GT COCO JSON file.",
            show_default=False,
        ),
    ],
    out_path: Annotated[Path, typer.Option("--out", "-o", help="Where to write the threshold JSON.")] = Path(
        "threshold.json"
    ),
    rule: Annotated[
        str,
        typer.Option(
            help="'max-f1' (ties -> lowest threshold), 'precision>=X' (lowest "
            "threshold reaching X), 'recall>=X' (highest threshold keeping X), or a "
            "false-alarm budget 'fp_per_image<=A' / 'false_alarm_image_share<=A' "
            "(lowest threshold whose exact upper bound meets A)."
        ),
    ] = "max-f1",
    delta: Annotated[
        float | None,
        typer.Option(
            help="Risk level of a false-alarm rule: the upper bound holds with probability 1 - delta (default 0.05)."
        ),
    ] = None,
    grid: Annotated[
        str | None,
        typer.Option(
            help="Threshold grid: 'start:stop:step' or a comma list. Default 0.00..0.99 step 0.01 plus 0.995, 0.999."
        ),
    ] = None,
    iou: Annotated[float, typer.Option(help="IoU for one-to-one matching.")] = 0.5,
    classes: ClassesOption = None,
    class_thresholds: Annotated[
        ClassThresholds | None,
        mode(
            ClassThresholds,
            "--class-thresholds",
            help="With --classes: 'per-class' (the default: the rule applied to "
            "each class) or 'shared' (one threshold, the rule applied to all classes' counts added).",
        ),
    ] = None,
    class_map: ClassMapOption = None,
    remap_side: RemapSideOption = RemapSide.gt,
    allow_merge: AllowMergeOption = False,
    split: Annotated[
        SplitName,
        mode(SplitName, "--split-name", help="The split whose GT is read from a --split-dir folder (val: clean only)."),
    ] = SplitName.val,
) -> None:
    """Choose the confidence threshold once, on clean validation predictions, and store it with its val metrics."""
    from aegis_eval.api import freeze_threshold

    check_outputs({"--out": out_path}, [val_preds, gt, *(Path(v) for v in (class_map,) if v and Path(v).is_file())])
    frozen = freeze_threshold(
        val_preds,
        gt,
        rule=rule,
        grid=grid,
        iou=iou,
        delta=delta,
        out=out_path,
        classes=classes,
        class_thresholds=value(class_thresholds),
        class_map=class_map,
        remap_side=value(remap_side),
        allow_merge=allow_merge,
        split=value(split),
        on_warning=warn,
    )
    if classes is not None:
        _print_class_thresholds(frozen, out_path)
        return
    for w in frozen.warnings:
        warn(in_flags(w))
    m = frozen.metrics
    out.print(
        f"threshold {frozen.value:g} ({frozen.rule}) on {m['n_images']} {value(split)} images, {m['n_gt']} GT boxes: "
        f"P {_fmt(m['precision'])}  R {_fmt(m['recall'])}  F1 {_fmt(m['f1'])}  "
        f"FP/img {_fmt(m['fp_per_image'], 2)}",
        highlight=False,
        soft_wrap=True,
    )
    if frozen.risk is not None:
        r = frozen.risk
        out.print(
            f"{r['metric']} {100 * r['confidence']:g}% upper bound ({r['bound']}) {r['upper_bound']:.4g} "
            f"<= budget {r['budget']:g}",
            highlight=False,
            soft_wrap=True,
        )
    out.print(f"wrote {out_path}", highlight=False, soft_wrap=True)


def _print_threshold_notes(threshold: Mapping[str, Any]) -> None:
    """What the threshold file says of its own choice: the validation set's size and its warnings."""
    validation = threshold.get("validation")
    if validation:
        out.print(
            f"threshold frozen on {validation['n_images']} validation images, {validation['n_gt']} GT boxes "
            f"({threshold.get('file')})",
            highlight=False,
            soft_wrap=True,
        )
    for w in threshold.get("warnings") or ():
        warn(f"threshold file: {in_flags(w)}")


def _print_class_thresholds(frozen, out_path: Path) -> None:
    for name, f in frozen.per_class.items():
        for w in f.warnings:
            warn(f"{name}: {in_flags(w)}")
    if frozen.pooled is not None:
        for w in frozen.pooled.warnings:
            warn(in_flags(w))
    for name, f in frozen.per_class.items():
        m = f.metrics
        out.print(
            f"{name}: threshold {f.value:g} ({f.rule}, {frozen.mode}) on {m['n_images']} val images, "
            f"{m['n_gt']} GT boxes: P {_fmt(m['precision'])}  R {_fmt(m['recall'])}  F1 {_fmt(m['f1'])}",
            highlight=False,
            soft_wrap=True,
        )
    out.print(f"wrote {out_path}", highlight=False, soft_wrap=True)


def score_cmd(
    preds: Annotated[
        Path,
        typer.Argument(
            metavar="PREDS",
            help="A COCO results JSON (one condition, named after its stem) or a folder of <condition>.json files.",
            show_default=False,
        ),
    ],
    gt: Annotated[
        list[Path],
        typer.Option(
            "--split-dir",
            help="The split folder (its annotations/<--split-name>.json "
            "is used), or a GT COCO JSON file. Repeat it to re-score "
            "the same predictions against several annotation "
            "versions of the same images.",
            show_default=False,
        ),
    ],
    threshold: Annotated[float | None, typer.Option(help="Frozen confidence threshold in [0, 1].")] = None,
    threshold_file: Annotated[Path | None, typer.Option(help="Threshold JSON from 'aegis freeze-threshold'.")] = None,
    bootstrap: Annotated[
        int, typer.Option(help="Bootstrap resamples B (1 = point estimate only, zero-width intervals).")
    ] = 1000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
    iou: Annotated[float, typer.Option(help="IoU for one-to-one matching at the threshold.")] = 0.5,
    cluster_by: Annotated[
        str | None,
        typer.Option(
            help="Resample whole groups: a GT image attribute name "
            "(e.g. 'group') or a JSON file {image_id or file_name: group}; 'none' resamples single images. "
            "Default: the split's groups when some group holds several images, else single images."
        ),
    ] = None,
    label: Annotated[str | None, typer.Option(help="Model / run label (default: the predictions name).")] = None,
    split: Annotated[
        SplitName, mode(SplitName, "--split-name", help="The split whose GT is read from a --split-dir folder.")
    ] = SplitName.test,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the aegis-score/1 JSON here.")] = None,
    csv_out: Annotated[Path | None, typer.Option("--csv", help="Write one CSV row per condition here.")] = None,
    classes: ClassesOption = None,
    class_map: ClassMapOption = None,
    remap_side: RemapSideOption = RemapSide.gt,
    allow_merge: AllowMergeOption = False,
    remap_version: Annotated[
        list[int] | None,
        typer.Option(
            help="With several --split-dir: apply the GT-side --class-map only to this version (1-based; repeatable)."
        ),
    ] = None,
    task: Annotated[
        Task,
        mode(
            Task,
            "--task",
            help="'detection' (COCO results per condition) or 'referring' (one box "
            "per referring expression, scored with P@0.5..0.8; --split-dir is "
            "an aegis-refs/1 file).",
        ),
    ] = Task.detection,
    cross_check: Annotated[
        CrossCheck | None,
        mode(
            CrossCheck,
            "--cross-check",
            help="Also compute COCO AP with this reference implementation ('pycocotools') on the same "
            "inputs; exit 1 on any difference above 1e-12.",
        ),
    ] = None,
) -> None:
    """Score predictions at a frozen threshold: COCO AP, P/R/F1, size recall, false-alarm bounds, drops vs clean,
    bootstrap CIs; several classes (--classes), GT versions (repeat --split-dir) or referring expressions (--task)."""
    # Imported here so the other commands (and --help) start without loading the AP engine and bootstrap.
    from aegis_eval.api import score

    task, split, cross_check = value(task), value(split), value(cross_check)
    inputs = [preds, *gt, threshold_file, *(Path(v) for v in (cluster_by, class_map) if v and Path(v).is_file())]
    check_outputs({"--json": json_out, "--csv": csv_out}, inputs)
    if task == "referring":
        detection_only = {
            "--threshold": threshold,
            "--threshold-file": threshold_file,
            "--classes": classes,
            "--class-map": class_map,
            "--csv": csv_out,
            "--cross-check": cross_check,
        }
        given = [name for name, value in detection_only.items() if value is not None]
        if given or len(gt) != 1 or iou != 0.5 or split != "test":
            raise AegisError(
                f"[referring_option] --task referring takes one --split-dir (an aegis-refs/1 file), "
                f"--bootstrap, --seed, --cluster-by image_id, --label and --json; not "
                f"{', '.join(given) or '--iou/--split-name or several --split-dir'}"
            )
        _score_referring(preds, gt[0], bootstrap, seed, cluster_by, label, json_out)
        return
    if task != "detection":
        raise AegisError(f"[task_unknown] --task must be 'detection' or 'referring'; got {task!r}")
    result = score(
        preds,
        gt if len(gt) > 1 else gt[0],
        threshold=threshold,
        threshold_file=threshold_file,
        bootstrap=bootstrap,
        seed=seed,
        iou=iou,
        split=split,
        classes=classes,
        class_map=class_map,
        remap_side=value(remap_side),
        allow_merge=allow_merge,
        remap_versions=remap_version or None,
        cluster_by=cluster_by,
        label=label,
        cross_check=cross_check,
        on_warning=warn,
    )
    # The files first: whatever happens while printing (a closed pipe), the score that took minutes is kept.
    written = [result.to_json(json_out)] if json_out is not None else []
    samples_file = result.samples_path(json_out) if json_out is not None else None
    if samples_file is not None:  # the per-resample values `aegis rank` pairs models with
        written.insert(0, samples_file)
    if csv_out is not None:
        written.append(result.to_csv(csv_out))
    _print_score(result.document)
    _print_threshold_notes(result.document["threshold"])
    for path in written:
        out.print(f"wrote {path}", highlight=False, soft_wrap=True)


def _print_score(result: dict) -> None:
    """The score's tables on stdout: conditions, then whatever the options added (cross-check, classes, false
    alarms, the recall matrix, the robustness summary, GT versions)."""
    out.print(fit(conditions_table(result)))
    checked = result["provenance"].get("cross_check")
    if checked:
        out.print(
            f"cross-check: {checked['tool']} {checked['version'] or ''} agrees on {checked['conditions']} "
            f"condition(s) x 6 AP metrics (max |difference| {checked['max_abs_diff']:.3g} <= "
            f"{checked['tolerance']:g})",
            highlight=False,
            soft_wrap=True,
        )
    for table, keys in ((classes_table(result), 3), (false_alarm_table(result), 1), (recall_matrix(result), 2)):
        if table is not None:
            out.print(fit(table, keys))
    if len(result["conditions"]) > 1:
        out.print(_summary_line(result), highlight=False, soft_wrap=True)
    versions = versions_table(result)
    if versions is not None:
        out.print(fit(versions, 2))


def _pct(x: Any) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def gt_diff_tables(doc: Mapping[str, Any]) -> list[Table]:
    """Per split: one row per class and a total row of the revision counts and medians, then P/R/F1."""
    tables = []
    for split, d in doc["splits"].items():
        imgs = d["images"]
        table = Table(
            title=f"{split}: OLD → NEW on {imgs['common']} common images (one-to-one at IoU ≥ "
            f"{doc['iou']:g}; only in OLD {len(imgs['only_old'])}, only in NEW {len(imgs['only_new'])})"
        )
        cols = (
            "class",
            "old",
            "new",
            "match",
            "added",
            "rem.",
            "tight",
            "loose",
            "shift",
            "cls Δ",
            "med IoU",
            "med area",
            "IoU<.7",
            "shrunk",
        )
        for col in cols:
            table.add_column(col, justify="left" if col == "class" else "right", no_wrap=col == "class")
        rows = list(d["per_class"].items()) + [("all", d["total"])]
        for name, r in rows:
            table.add_row(
                styled((name, "bold")) if name == "all" else name,
                *(
                    str(r[k])
                    for k in (
                        "old_boxes",
                        "new_boxes",
                        "matched",
                        "added",
                        "removed",
                        "tightened",
                        "loosened",
                        "shifted",
                        "class_changed",
                    )
                ),
                _fmt(r["median_iou"]),
                _fmt(r["median_area_ratio"]),
                _pct(r["share_iou_below_0_7"]),
                _pct(r["share_shrunk"]),
            )
        p = d["old_as_predictions"]
        table.caption = (
            f"OLD as predictions vs NEW (IoU ≥ {doc['pr_iou']:g}): P {_fmt(p['precision'])}  "
            f"R {_fmt(p['recall'])}  F1 {_fmt(p['f1'])}"
        )
        tables.append(table)
    return tables


def gt_diff_cmd(
    old: Annotated[
        Path,
        typer.Argument(
            metavar="OLD",
            show_default=False,
            help="The older annotation version: a COCO JSON file or a split directory.",
        ),
    ],
    new: Annotated[
        Path,
        typer.Argument(
            metavar="NEW", show_default=False, help="The newer version of the same images (same kind as OLD)."
        ),
    ],
    iou: Annotated[float, typer.Option(help="IoU for the one-to-one OLD/NEW box matching.")] = 0.3,
    pr_iou: Annotated[float, typer.Option(help="IoU for scoring OLD as predictions against NEW.")] = 0.5,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the aegis-gt-diff/1 JSON here.")] = None,
) -> None:
    """Audit a label revision: added, removed, tightened, loosened and class-changed boxes, per split and class."""
    from aegis_eval.api import gt_diff, write_json

    check_outputs({"--json": json_out}, [old, new])
    doc = gt_diff(old, new, iou=iou, pr_iou=pr_iou)
    for table in gt_diff_tables(doc):
        out.print(fit(table))
    for split, d in doc["splits"].items():
        for finding in d.get("findings", ()):
            warn(f"{split}: [{finding['code']}] {finding['detail']}")
        for side in ("only_old", "only_new"):
            names = d["images"][side]
            if names:
                shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
                out.print(
                    f"{split}: {len(names)} images {side.replace('_', ' in ').upper()}: {shown}",
                    highlight=False,
                    soft_wrap=True,
                )
    if json_out is not None:
        write_json(doc, json_out)  # the one JSON result writer (NaN -> null, atomic)
        out.print(f"wrote {json_out}", highlight=False, soft_wrap=True)


def referring_table(doc: Mapping[str, Any]) -> Table:
    """One row per split and one overall: expressions, missing, P@θ and mP with 95% intervals."""
    table = Table(
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


def _score_referring(
    preds: Path, refs: Path, bootstrap: int, seed: int, cluster_by: str | None, label: str | None, json_out: Path | None
) -> None:
    from aegis_eval.api import score_referring, write_json

    doc = score_referring(preds, refs, bootstrap=bootstrap, seed=seed, cluster_by=cluster_by, label=label)
    out.print(fit(referring_table(doc)))
    if doc["missing"]:
        shown = ", ".join(doc["missing"][:8]) + (", ..." if len(doc["missing"]) > 8 else "")
        warn(f"[ref_pred_missing] {len(doc['missing'])} expressions have no prediction (counted as wrong): {shown}")
    if json_out is not None:
        write_json(doc, json_out)
        out.print(f"wrote {json_out}", highlight=False, soft_wrap=True)


def convert_refs_cmd(
    refs: Annotated[
        Path,
        typer.Argument(
            metavar="REFS",
            show_default=False,
            help="RefCOCO-style refs as JSON: a list of {ref_id, ann_id, image_id, "
            "split, sentences: [{sent_id, sent}]}.",
        ),
    ],
    instances: Annotated[Path, typer.Option("--instances", help="The COCO instances JSON holding the referred boxes.")],
    out_path: Annotated[Path, typer.Option("--out", "-o", help="Where to write the aegis-refs/1 JSON.")],
) -> None:
    """Convert RefCOCO-style refs to the aegis-refs/1 ground truth of 'aegis score --task referring'."""
    from aegis_eval.api import convert_refs

    check_outputs({"--out": out_path}, [refs, instances])
    doc = convert_refs(refs, instances, out_path)
    out.print(f"wrote {out_path}: {len(doc['refs'])} expressions", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add ``freeze-threshold``, ``score``, ``gt-diff`` and ``convert-refs`` to the root app."""
    add_command(app, "freeze-threshold", freeze_threshold_cmd)
    add_command(app, "score", score_cmd)
    add_command(app, "gt-diff", gt_diff_cmd)
    add_command(app, "convert-refs", convert_refs_cmd)
