"""``aegis baseline predict | train | sweep | ablate``: the reference runners' command line (docs/BASELINES.md).

Every setting can come from ``--config configs/baselines/<dataset>-<model>.yaml``; a flag given on the command
line overrides the config, which overrides the built-in defaults (aegis_eval.runners.config). Each command calls
one function of ``aegis_eval.api`` (``predict``, ``train``, ``sweep``, ``ablate``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from aegis_eval import api

from . import usage
from .common import err, out, warn
from .tables import fit
from .vocabulary import Arch, Model, Optimizer, SplitName, SuiteOpt, add_command, mode, value

baseline_app = typer.Typer(
    help="Reference detectors (YOLO11, RT-DETR, Faster R-CNN): predict, train, sweep, ablate.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
    cls=usage.Group,
)

# Shared option declarations (None = not given: the config file or the default decides).
ModelOpt = Annotated[Model | None, mode(Model, "--model", help="The detector.")]
WeightsOpt = Annotated[
    str | None,
    typer.Option(
        "--weights",
        help="Local weights file; for Ultralytics also a model yaml (yolo11n.yaml: random init); "
        "'none' = random Faster R-CNN.",
    ),
]
SplitOpt = Annotated[
    Path, typer.Option("--split-dir", help="Split folder written by `aegis build-splits`.", show_default=False)
]
ConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="Baseline config yaml (configs/baselines/*.yaml); flags override it.")
]
ArchOpt = Annotated[Arch | None, mode(Arch, "--arch", help="Faster R-CNN backbone (default resnet50_v2).")]
ImgszOpt = Annotated[int | None, typer.Option("--imgsz", help="Network input size in px (config default 1024).")]
DeviceOpt = Annotated[str | None, typer.Option("--device", help="auto (CUDA when available) | cpu | cuda | cuda:N.")]
SeedOpt = Annotated[int | None, typer.Option("--seed", help="Seed for torch and data order (default 0).")]
DownloadOpt = Annotated[
    bool,
    typer.Option(
        "--allow-download",
        help="Let the backend library download a named "
        "weights file (e.g. yolo11m.pt). Off by default: nothing downloads.",
    ),
]
ForceOpt = Annotated[
    bool, typer.Option("--force", help="Recompute finished conditions (and, for sweep, re-freeze the threshold).")
]
ConditionsOpt = Annotated[str, typer.Option("--conditions", help="'all' or a comma list (clean,low_light_s3).")]
TileOpt = Annotated[bool | None, typer.Option("--tile/--no-tile", help="Tiled inference of large frames (default on).")]
TileSizeOpt = Annotated[int | None, typer.Option("--tile-size", help="Tile side in px (default 1024).")]
OverlapOpt = Annotated[int | None, typer.Option("--overlap", help="Tile overlap in px (default 256).")]
LimitOpt = Annotated[int | None, typer.Option("--limit", help="Only the first N images (by GT id).")]
BatchOpt = Annotated[int | None, typer.Option("--batch", help="Images (tiles) per forward pass (default 8).")]
FloorOpt = Annotated[float | None, typer.Option("--score-floor", help="Lowest score kept (default 0.001).")]
MaxDetOpt = Annotated[int | None, typer.Option("--max-det", help="Detections kept per image (default 300).")]
EpochsOpt = Annotated[int | None, typer.Option("--epochs", help="Training epochs.")]
LrOpt = Annotated[float | None, typer.Option("--lr0", help="Initial learning rate.")]
OptimizerOpt = Annotated[Optimizer | None, mode(Optimizer, "--optimizer", help="The optimizer (default SGD).")]
BootstrapOpt = Annotated[int | None, typer.Option("--bootstrap", help="Bootstrap resamples (default 1000).")]
AugmentOpt = Annotated[
    str | None,
    typer.Option(
        "--augment",
        help="Disaster-augmentation policy: a name from configs/augment (all, loo-flood, ...) or a yaml "
        "path. Default: clean training only.",
    ),
]
NmsOpt = Annotated[
    float | None, typer.Option("--nms-iou", help="IoU of the class-agnostic NMS merging tiles (default 0.5).")
]


def _progress(stage: str, status: str) -> None:
    err.print(f"{stage}: {status}", highlight=False)


def _run_table(record: dict, title: str) -> Table:
    table = Table(title=title)
    for col in ("condition", "images", "detections", "seconds", "images/s"):
        table.add_column(col, justify="left" if col == "condition" else "right")
    for cond, e in record["conditions"].items():
        table.add_row(
            cond,
            str(e.get("n_images")),
            str(e.get("n_detections")),
            f"{e.get('seconds', 0):.2f}",
            f"{e['images_per_s']:.2f}" if e.get("images_per_s") else "–",
        )
    return table


def predict_cmd(
    split: SplitOpt,
    out_dir: Annotated[
        Path, typer.Option("--out-dir", help="Folder for <condition>.json files and run.json.", show_default=False)
    ],
    model: ModelOpt = None,
    weights: WeightsOpt = None,
    config: ConfigOpt = None,
    conditions: ConditionsOpt = "all",
    split_name: Annotated[
        SplitName, mode(SplitName, "--split-name", help="The split to predict (val has only clean).")
    ] = SplitName.test,
    tile: TileOpt = None,
    tile_size: TileSizeOpt = None,
    overlap: OverlapOpt = None,
    limit: LimitOpt = None,
    batch: BatchOpt = None,
    score_floor: FloorOpt = None,
    max_det: MaxDetOpt = None,
    nms_iou: NmsOpt = None,
    imgsz: ImgszOpt = None,
    arch: ArchOpt = None,
    device: DeviceOpt = None,
    seed: SeedOpt = None,
    force: ForceOpt = False,
    allow_download: DownloadOpt = False,
) -> None:
    """Predict every condition of a split: one COCO results file per condition, resumable."""
    run = api.predict(
        split,
        out_dir,
        model=value(model),
        weights=weights,
        config=config,
        conditions=conditions,
        split_name=value(split_name),
        tile=tile,
        tile_size=tile_size,
        overlap=overlap,
        limit=limit,
        batch=batch,
        score_floor=score_floor,
        max_det=max_det,
        nms_iou=nms_iou,
        imgsz=imgsz,
        arch=value(arch),
        device=device,
        seed=seed,
        force=force,
        allow_download=allow_download,
        progress=_progress,
    )
    out.print(fit(_run_table(run.record, f"{run.model} predictions ({run.record['device']}) → {out_dir}")))


def train_cmd(
    split: SplitOpt,
    out_dir: Annotated[
        Path, typer.Option("--out-dir", help="Run folder (config.yaml, data/, weights).", show_default=False)
    ],
    model: ModelOpt = None,
    weights: WeightsOpt = None,
    config: ConfigOpt = None,
    epochs: EpochsOpt = None,
    imgsz: ImgszOpt = None,
    batch: BatchOpt = None,
    seed: SeedOpt = None,
    lr0: LrOpt = None,
    optimizer: OptimizerOpt = None,
    device: DeviceOpt = None,
    workers: Annotated[
        int | None, typer.Option("--workers", help="Data-loader workers (0 = deterministic, default).")
    ] = None,
    arch: ArchOpt = None,
    amp: Annotated[
        bool | None,
        typer.Option(
            "--amp/--no-amp", help="Ultralytics mixed precision on GPU (default off: its self-check downloads a model)."
        ),
    ] = None,
    tile_size: TileSizeOpt = None,
    overlap: OverlapOpt = None,
    min_visibility: Annotated[
        float | None,
        typer.Option("--min-visibility", help="Share of a box's area a tile must show to keep it (default 0.5)."),
    ] = None,
    augment: AugmentOpt = None,
    suite: SuiteOpt = None,
    allow_download: DownloadOpt = False,
) -> None:
    """Fine-tune on the split's train images (tiled), validating on clean val; resumes a stopped run.

    With --augment, every training frame is disaster-corrupted by the policy before tiling (docs/MITIGATION.md).
    """
    run = api.train(
        split,
        out_dir,
        model=value(model),
        weights=weights,
        config=config,
        epochs=epochs,
        imgsz=imgsz,
        batch=batch,
        seed=seed,
        lr0=lr0,
        optimizer=value(optimizer),
        device=device,
        workers=workers,
        arch=value(arch),
        amp=amp,
        tile_size=tile_size,
        overlap=overlap,
        min_visibility=min_visibility,
        augment=augment,
        suite=suite,
        allow_download=allow_download,
        log=lambda line: err.print(line, highlight=False),
    )
    result = run.result
    out.print(f"{run.model}: {result['status']}; best weights: {result['best']}", highlight=False)
    if run.policy is not None:
        out.print(f"augmentation: {run.policy.name} [{run.policy.hash}]", highlight=False)
    out.print(f"last checkpoint: {result['last']}; config: {result['config']}", highlight=False)


def sweep_cmd(
    split: SplitOpt,
    out_dir: Annotated[
        Path,
        typer.Option(
            "--out-dir",
            help="Results folder (val/, threshold.json, predictions/, score.json, score.csv).",
            show_default=False,
        ),
    ],
    model: ModelOpt = None,
    weights: WeightsOpt = None,
    config: ConfigOpt = None,
    bootstrap: BootstrapOpt = None,
    conditions: ConditionsOpt = "all",
    label: Annotated[
        str | None, typer.Option("--label", help="Label in score.json (default: config name or model).")
    ] = None,
    tile: TileOpt = None,
    tile_size: TileSizeOpt = None,
    overlap: OverlapOpt = None,
    limit: LimitOpt = None,
    batch: BatchOpt = None,
    score_floor: FloorOpt = None,
    max_det: MaxDetOpt = None,
    nms_iou: NmsOpt = None,
    imgsz: ImgszOpt = None,
    arch: ArchOpt = None,
    device: DeviceOpt = None,
    seed: SeedOpt = None,
    force: ForceOpt = False,
    allow_download: DownloadOpt = False,
) -> None:
    """Predict clean val, freeze the threshold once, predict all test conditions, score with bootstrap CIs."""
    from .score_tables import conditions_table, recall_matrix

    result = api.sweep(
        split,
        out_dir,
        model=value(model),
        weights=weights,
        config=config,
        bootstrap=bootstrap,
        conditions=conditions,
        label=label,
        tile=tile,
        tile_size=tile_size,
        overlap=overlap,
        limit=limit,
        batch=batch,
        score_floor=score_floor,
        max_det=max_det,
        nms_iou=nms_iou,
        imgsz=imgsz,
        arch=value(arch),
        device=device,
        seed=seed,
        force=force,
        allow_download=allow_download,
        progress=_progress,
        on_warning=warn,
    )
    out.print(fit(conditions_table(result)))
    matrix = recall_matrix(result)
    if matrix is not None:
        out.print(fit(matrix, 2))
    out.print(f"score: {Path(out_dir) / 'score.json'}  threshold: {Path(out_dir) / 'threshold.json'}", highlight=False)


def ablate_cmd(
    split: SplitOpt,
    out_dir: Annotated[
        Path,
        typer.Option(
            "--out-dir",
            help="Ablation folder (<policy>/run, <policy>/results, scores/<policy>.json, ablation.json).",
            show_default=False,
        ),
    ],
    policies: Annotated[
        str,
        typer.Option(
            "--policies",
            help="Comma list of augmentation policies (names in "
            "configs/augment or yaml paths); the clean baseline is always added.",
        ),
    ],
    model: ModelOpt = None,
    weights: WeightsOpt = None,
    config: ConfigOpt = None,
    epochs: EpochsOpt = None,
    imgsz: ImgszOpt = None,
    batch: BatchOpt = None,
    seed: SeedOpt = None,
    lr0: LrOpt = None,
    optimizer: OptimizerOpt = None,
    bootstrap: BootstrapOpt = None,
    conditions: ConditionsOpt = "all",
    label: Annotated[
        str | None, typer.Option("--label", help="Label prefix in the score JSONs (default: config name or model).")
    ] = None,
    arch: ArchOpt = None,
    device: DeviceOpt = None,
    init: Annotated[
        Path | None,
        typer.Option(
            "--init",
            help="Local checkpoint every model, the clean baseline too, is fine-tuned from (e.g. "
            "PRETRAIN/train/weights/best.pt from `aegis baseline train`); replaces --weights and is "
            "recorded in provenance.init.",
        ),
    ] = None,
    seeds: Annotated[
        str | None,
        typer.Option(
            "--seeds",
            help="Training seeds, e.g. 0,1,2: one model per (policy, seed) in OUT/<name>/seed-<k>/, "
            "per-seed gains plus a combined two-level bootstrap interval. --seed then keys only the "
            "bootstrap.",
        ),
    ] = None,
    suite: SuiteOpt = None,
    allow_download: DownloadOpt = False,
) -> None:
    """Train one model per augmentation policy plus the clean baseline, sweep every condition, compare."""
    record = api.ablate(
        split,
        out_dir,
        policies,
        model=value(model),
        weights=weights,
        config=config,
        epochs=epochs,
        imgsz=imgsz,
        batch=batch,
        seed=seed,
        lr0=lr0,
        optimizer=value(optimizer),
        bootstrap=bootstrap,
        conditions=conditions,
        label=label,
        arch=value(arch),
        device=device,
        init=init,
        seeds=seeds,
        suite=suite,
        allow_download=allow_download,
        progress=_progress,
        log=lambda line: err.print(line, highlight=False),
        on_warning=warn,
    )
    out.print(fit(ablation_table(record)))
    out.print(
        f"scores: {Path(out_dir) / 'scores'}  (render with `aegis report {Path(out_dir) / 'scores'}/*.json "
        f"--out-dir REPORT`)",
        highlight=False,
    )


def ablation_table(record: dict) -> Table:
    from aegis_eval.api import fmt_threshold

    seeds = record["settings"].get("seeds")
    what = f"mean of seeds {','.join(map(str, seeds))}, two-level bootstrap CI" if seeds else "95% CI"
    table = Table(title=f"ablation: gains over the clean-trained {record['label']} (recall; {what})")
    cols = ["policy", "hash", "threshold", "ΔmPC [95% CI]", "ΔrPC [95% CI]", "Δ seen", "Δ unseen"]
    if seeds:
        cols += ["ΔmPC per seed", "seed SD"]
    for col in cols:
        table.add_column(col, justify="left" if col in ("policy", "hash") else "right")

    def cell(g: dict | None) -> str:
        if not g or g.get("gain") is None:
            return "–"
        lo, hi = g["ci"]
        return f"{g['gain']:+.3f}" + (f" [{lo:+.3f}, {hi:+.3f}]" if lo is not None else "")

    for name, entry in record["runs"].items():
        gains = record["gains"].get(name, {}).get("recall", {})
        row = [
            name,
            (entry["policy"] or {}).get("hash", "–"),
            fmt_threshold(entry["threshold"]),
            cell(gains.get("mpc")),
            cell(gains.get("rpc")),
            cell(gains.get("seen")),
            cell(gains.get("unseen")),
        ]
        if seeds:
            mpc = gains.get("mpc") or {}
            per = ["–" if g["gain"] is None else f"{g['gain']:+.3f}" for g in mpc.get("seeds", [])]
            row += [" / ".join(per) or "–", "–" if mpc.get("seed_sd") is None else f"{mpc['seed_sd']:.3f}"]
        table.add_row(*row)
    return table


def register(app: typer.Typer) -> None:
    """Add the ``baseline`` command group to the root app."""
    for name, fn in (("predict", predict_cmd), ("train", train_cmd), ("sweep", sweep_cmd), ("ablate", ablate_cmd)):
        add_command(baseline_app, name, fn)
    app.add_typer(baseline_app, name="baseline")
