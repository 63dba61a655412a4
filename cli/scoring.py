"""``aegis freeze-threshold`` and ``aegis score``: the shared scorer's command line (docs/SCORING.md)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from aegis_data.api import check_outputs

from .common import in_flags, out, styled, warn
from .score_run import run_score
from .score_tables import _fmt
from .tables import fit
from .vocabulary import ClassThresholds, CrossCheck, RemapSide, SplitName, Task, add_command, mode, value

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
    run_score(
        preds,
        gt,
        threshold=threshold,
        threshold_file=threshold_file,
        bootstrap=bootstrap,
        seed=seed,
        iou=iou,
        cluster_by=cluster_by,
        label=label,
        split=split,
        json_out=json_out,
        csv_out=csv_out,
        classes=classes,
        class_map=class_map,
        remap_side=remap_side,
        allow_merge=allow_merge,
        remap_version=remap_version,
        task=task,
        cross_check=cross_check,
    )


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
