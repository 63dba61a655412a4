"""``aegis report`` (figures and tables from score JSONs) and ``aegis gallery`` (worst recall drops, drawn)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from aegis_data.api import check_outputs
from aegis_eval import api

from .common import out, warn
from .tables import fit
from .vocabulary import REPORT_FORMATS, AllowMixedSuitesOpt, HtmlFigures, RankBy, add_command, mode, value


def report(
    results: Annotated[
        list[Path],
        typer.Argument(
            metavar="SCORE_JSON...",
            help="Score JSONs written by `aegis score --json` (one per model and dataset).",
            show_default=False,
        ),
    ],
    out_dir: Annotated[
        Path, typer.Option("--out-dir", help="Folder for the report, its figures/ and tables.", show_default=False)
    ],
    formats: Annotated[
        str,
        typer.Option(
            "--format",
            metavar=f"[{'|'.join(REPORT_FORMATS)}],...",
            help=f"The report files to write: a comma-separated subset of {', '.join(REPORT_FORMATS)}.",
        ),
    ] = ",".join(REPORT_FORMATS),
    metric: Annotated[
        str,
        typer.Option(
            "--metric",
            help="Metric whose relative drop the figures and the main table show (recall, precision, f1, map50, ...).",
        ),
    ] = "recall",
    html_figures: Annotated[
        HtmlFigures,
        mode(
            HtmlFigures,
            "--html-figures",
            help="Figures embedded in report.html: png (200 DPI) or svg (vector, smaller file).",
        ),
    ] = HtmlFigures.png,
    allow_mixed_suites: AllowMixedSuitesOpt = False,
    gallery: Annotated[
        list[Path] | None,
        typer.Option(
            "--gallery",
            metavar="DIR",
            help="A folder of `aegis gallery --per-condition` (repeatable): the report links its worst and best "
            "pair per condition.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Render heatmaps, severity curves, family bars, localization and false-alarm plots (PNG, PDF, SVG) and
    report.md/html, LaTeX tables and report.tex from score JSONs."""
    files = api.write_report(
        results,
        out_dir,
        formats=formats,
        metric=metric,
        html_figures=value(html_figures),
        allow_mixed_suites=allow_mixed_suites,
        galleries=gallery or [],
    )
    for note in files.notes:
        warn(note)
    table = Table(title=f"aegis report → {files.out}")
    table.add_column("file")
    table.add_column("bytes", justify="right")
    for path in files.files:
        table.add_row(str(path.relative_to(files.out)), f"{path.stat().st_size:,}")
    out.print(fit(table))


def gallery(
    preds: Annotated[
        Path,
        typer.Argument(
            metavar="PREDS", help="Folder with clean.json and <condition>.json COCO results.", show_default=False
        ),
    ],
    split_dir: Annotated[
        Path,
        typer.Option(
            "--split-dir",
            help="The frozen split folder (annotations/test.json, test/<condition>/).",
            show_default=False,
        ),
    ],
    out_dir: Annotated[
        Path, typer.Option("--out-dir", help="Folder for pairs/*.png, index.md and index.html.", show_default=False)
    ],
    threshold: Annotated[
        float | None, typer.Option("--threshold", help="Frozen confidence threshold in [0, 1].", show_default=False)
    ] = None,
    threshold_file: Annotated[
        Path | None,
        typer.Option(
            "--threshold-file", help="Threshold JSON written by `aegis freeze-threshold`.", show_default=False
        ),
    ] = None,
    conditions: Annotated[
        str,
        typer.Option(
            "--conditions", help="'all' or a comma-separated list of condition ids, e.g. low_light_s3,smoke_haze_s2."
        ),
    ] = "all",
    n: Annotated[int, typer.Option("--n", help="How many (image, condition) pairs to draw.")] = 8,
    max_width: Annotated[int, typer.Option("--max-width", help="Width limit of each side-by-side picture, px.")] = 1600,
    per_condition: Annotated[
        bool,
        typer.Option(
            "--per-condition",
            help="Also draw each condition's worst and best pair (for `aegis report --gallery`).",
        ),
    ] = False,
    label: Annotated[
        str | None,
        typer.Option(
            "--label", help="The model's name in gallery.json (default: the PREDS folder's name).", show_default=False
        ),
    ] = None,
) -> None:
    """Draw the (image, condition) pairs whose recall drops most vs clean: clean | corrupted, GT and predictions."""
    files = api.write_gallery(
        preds,
        split_dir,
        out_dir,
        threshold=threshold,
        threshold_file=threshold_file,
        conditions=conditions,
        n=n,
        max_width=max_width,
        per_condition=per_condition,
        label=label,
    )
    for note in files.notes:
        warn(note)
    table = Table(title=f"aegis gallery → {files.out} (threshold {files.threshold:g})")
    for col in ("rank", "image", "condition", "recall clean → cond.", "drop"):
        table.add_column(col, justify="left" if col in ("image", "condition") else "right")
    for p in files.pairs:
        table.add_row(
            str(p.rank), p.file_name, p.condition, f"{p.recall_clean:.2f} → {p.recall_condition:.2f}", f"{p.drop:.2f}"
        )
    out.print(fit(table))
    out.print(f"index: {files.index_html}")


def rank(
    results: Annotated[
        list[Path],
        typer.Argument(
            metavar="SCORE_JSON...",
            help="Score JSONs of two or more models (`aegis score --json`).",
            show_default=False,
        ),
    ],
    metric: Annotated[
        str, typer.Option("--metric", help="Metric to rank on (map50, map50_95, recall, f1, fp_per_image, ...).")
    ] = "map50",
    by: Annotated[
        RankBy,
        mode(
            RankBy,
            "--by",
            help="'condition' (columns: conditions, reference clean) or 'version' "
            "(columns: the GT versions of a cross-version score).",
        ),
    ] = RankBy.condition,
    condition: Annotated[
        str, typer.Option("--condition", help="With --by version: the condition whose versions are ranked.")
    ] = "clean",
    reference: Annotated[
        str | None,
        typer.Option(
            "--reference", help="Reference column (default: clean, or the first GT version).", show_default=False
        ),
    ] = None,
    bootstrap: Annotated[
        int, typer.Option("--bootstrap", help="Model resamples for the interval of Kendall's tau.")
    ] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed.")] = 0,
    merge_same_label: Annotated[
        bool,
        typer.Option(
            "--merge-same-label",
            help="Files with the same label are one "
            "model (e.g. its IID and OOD scores); their conditions become "
            "columns.",
        ),
    ] = False,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write the aegis-rank/1 JSON here.", show_default=False)
    ] = None,
    allow_mixed_suites: AllowMixedSuitesOpt = False,
    paired: Annotated[
        bool,
        typer.Option(
            "--paired/--no-paired",
            help="Paired differences between models from each score's samples file (<name>.samples.npz beside "
            "its JSON); --no-paired ranks without them.",
        ),
    ] = True,
) -> None:
    """Rank models per condition (or GT version): the order (ties as '='), Kendall's tau to the reference ranking
    with three or more models, rank flips, and paired differences with intervals (Holm-adjusted count)."""
    from aegis_eval.api import fmt_difference, fmt_tau, rank_order

    check_outputs({"--json": json_out}, results)
    doc = api.rank(
        results,
        metric,
        by=value(by),
        condition=condition,
        reference=reference,
        bootstrap=bootstrap,
        seed=seed,
        merge_same_label=merge_same_label,
        allow_mixed_suites=allow_mixed_suites,
        paired=paired,
    )
    with_tau = len(doc["models"]) >= 3  # with two models tau is +-1 whatever the data: not shown
    table = Table(
        title=f"ranking on {doc['metric']} vs {doc['reference']}: "
        + ("Kendall's tau-b (95% CI over resampled models), " if with_tau else "")
        + "rank flips, order ('=' ties)"
    )
    columns = ("column", "models", *(("Kendall τ",) if with_tau else ()), "flips", "order (best first)")
    for col in columns:
        table.add_column(col, justify="right" if col in ("models", "Kendall τ", "flips") else "left")
    for col, ranks in doc["ranks"].items():
        t = doc["kendall_tau"][col]
        tau = (fmt_tau(t, undefined="–"),) if with_tau else ()
        table.add_row(col, str(t["n_models"]), *tau, str(len(doc["rank_flips"][col])), rank_order(ranks))
    out.print(fit(table))
    _print_paired(doc, fmt_difference)
    if json_out is not None:
        api.write_json(doc, json_out)
        out.print(f"wrote {json_out}", highlight=False, soft_wrap=True)


def _print_paired(doc: dict, fmt_difference) -> None:
    """The paired differences A - B per column, mPC and rPC (bold where the interval excludes 0), and the
    multiplicity line; one line saying why when there are none."""
    block = doc["paired"]
    pairs = list(block["pairs"].values())
    if block["status"] == "unpaired":
        out.print(f"paired differences: unpaired ({pairs[0]['reason']})", highlight=False)
        return
    metric = doc["metric"]
    table = Table(title=f"paired differences A − B of {metric}, 95% paired intervals (bold: excludes 0)")
    table.add_column("column")
    for e in pairs:
        table.add_column(f"{e['a']} − {e['b']}", justify="right")
    rows = [(c, [e["conditions"][c] for e in pairs], metric, False) for c in pairs[0]["conditions"]]
    rows += [("mPC", [e["mpc"] for e in pairs], metric, False), ("rPC", [e["rpc"] for e in pairs], "", False)]
    families = dict.fromkeys(f for e in pairs for f in e["per_family"])
    rows += [(f"{f}: mean drop (pp)", [e["per_family"].get(f) for e in pairs], "", True) for f in families]
    for label, cells, unit, percent in rows:
        texts = [
            Text(
                "" if c is None else fmt_difference(c, unit, percent=percent),
                style="bold" if c is not None and c.get("excludes_zero") else "",
            )
            for c in cells
        ]
        table.add_row(label, *texts)
    out.print(fit(table))
    first = next(e for e in pairs if e["status"] == "paired")
    unit = "groups of images (clustered)" if first["resampling_unit"] == "cluster" else "images"
    out.print(f"n: B = {first['n_bootstrap']:,} paired resamples of {first['n_units']:,} {unit}", highlight=False)
    out.print(
        f"{block['n_excluding_zero']} of {block['n_tests']} paired intervals exclude 0; {block['n_significant']} "
        f"remain after Holm's adjustment (family-wise {block['alpha']:.0%}). Unpaired pairs: "
        + (", ".join(f"{e['a']} − {e['b']} ({e['reason']})" for e in pairs if e["status"] != "paired") or "none"),
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    """Add ``report``, ``gallery`` and ``rank`` to the root app."""
    add_command(app, "report", report)
    add_command(app, "gallery", gallery)
    add_command(app, "rank", rank)
