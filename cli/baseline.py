"""``aegis baseline predict | train | sweep | ablate``: the reference runners' command line (docs/BASELINES.md).

Every setting can come from ``--config configs/baselines/<dataset>-<model>.yaml``; a flag given on the command
line overrides the config, which overrides the built-in defaults (aegis_eval.runners.config).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from aegis_data.errors import AegisError
from aegis_data.files.outputs import check_output_dirs

from .common import err, out, warn
from .tables import fit
from .vocabulary import Arch, Model, Optimizer, SplitName, SuiteOpt, add_command, mode, value

baseline_app = typer.Typer(help="Reference detectors (YOLO11, RT-DETR, Faster R-CNN): predict, train, sweep, ablate.",
                           no_args_is_help=True, pretty_exceptions_show_locals=False, rich_markup_mode=None)

# Shared option declarations (None = not given: the config file or the default decides).
ModelOpt = Annotated[Optional[Model], mode(Model, "--model", help="The detector.")]
WeightsOpt = Annotated[Optional[str], typer.Option(
    "--weights", help="Local weights file; for Ultralytics also a model yaml (yolo11n.yaml: random init); "
                      "'none' = random Faster R-CNN.")]
SplitOpt = Annotated[Path, typer.Option("--split-dir", help="Split folder written by `aegis build-splits`.",
                                         show_default=False)]
ConfigOpt = Annotated[Optional[Path], typer.Option("--config", help="Baseline config yaml "
                                                   "(configs/baselines/*.yaml); flags override it.")]
ArchOpt = Annotated[Optional[Arch], mode(Arch, "--arch", help="Faster R-CNN backbone (default resnet50_v2).")]
ImgszOpt = Annotated[Optional[int], typer.Option("--imgsz", help="Network input size in px (config default 1024).")]
DeviceOpt = Annotated[Optional[str], typer.Option("--device", help="auto (CUDA when available) | cpu | cuda | "
                                                  "cuda:N.")]
SeedOpt = Annotated[Optional[int], typer.Option("--seed", help="Seed for torch and data order (default 0).")]
DownloadOpt = Annotated[bool, typer.Option("--allow-download", help="Let the backend library download a named "
                                           "weights file (e.g. yolo11m.pt). Off by default: nothing downloads.")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Recompute finished conditions (and, for sweep, "
                                        "re-freeze the threshold).")]
ConditionsOpt = Annotated[str, typer.Option("--conditions", help="'all' or a comma list (clean,low_light_s3).")]
TileOpt = Annotated[Optional[bool], typer.Option("--tile/--no-tile", help="Tiled inference of large frames "
                                                 "(default on).")]
TileSizeOpt = Annotated[Optional[int], typer.Option("--tile-size", help="Tile side in px (default 1024).")]
OverlapOpt = Annotated[Optional[int], typer.Option("--overlap", help="Tile overlap in px (default 256).")]
LimitOpt = Annotated[Optional[int], typer.Option("--limit", help="Only the first N images (by GT id).")]
BatchOpt = Annotated[Optional[int], typer.Option("--batch", help="Images (tiles) per forward pass (default 8).")]
FloorOpt = Annotated[Optional[float], typer.Option("--score-floor", help="Lowest score kept (default 0.001).")]
MaxDetOpt = Annotated[Optional[int], typer.Option("--max-det", help="Detections kept per image (default 300).")]
EpochsOpt = Annotated[Optional[int], typer.Option("--epochs", help="Training epochs.")]
LrOpt = Annotated[Optional[float], typer.Option("--lr0", help="Initial learning rate.")]
OptimizerOpt = Annotated[Optional[Optimizer], mode(Optimizer, "--optimizer", help="The optimizer (default SGD).")]
BootstrapOpt = Annotated[Optional[int], typer.Option("--bootstrap", help="Bootstrap resamples (default 1000).")]
AugmentOpt = Annotated[Optional[str], typer.Option(
    "--augment", help="Disaster-augmentation policy: a name from configs/augment (all, loo-flood, ...) or a yaml "
                      "path. Default: clean training only.")]
NmsOpt = Annotated[Optional[float], typer.Option("--nms-iou", help="IoU of the class-agnostic NMS merging tiles "
                                                 "(default 0.5).")]


def _settings(config: Optional[Path], **overrides: Any) -> dict[str, Any]:
    from aegis_eval.runners.config import resolve_settings

    cfg = resolve_settings(config, {key: value(v) for key, v in overrides.items()})
    if not cfg.get("model"):
        raise AegisError("no model given: pass --model yolo11|rtdetr|fasterrcnn, or a --config that names one")
    if not cfg.get("weights"):
        raise AegisError(f"no weights given for {cfg['model']}: pass --weights (a local file; for Ultralytics also "
                         f"a model yaml for random init; 'none' for a random Faster R-CNN)")
    return cfg


def _predict_settings(cfg: dict[str, Any], tile: Optional[bool], limit: Optional[int], split_name: str,
                      allow_download: bool):
    from aegis_eval.runners.predict import PredictSettings

    return PredictSettings(model=cfg["model"], weights=cfg["weights"], arch=cfg.get("arch"), imgsz=cfg.get("imgsz"),
                           tiled=True if tile is None else tile, tile=cfg["tile"], overlap=cfg["overlap"],
                           nms_iou=cfg["nms_iou"], score_floor=cfg["score_floor"], max_det=cfg["max_det"],
                           batch=cfg["batch"], limit=limit, split_name=split_name, device=cfg["device"],
                           seed=cfg["seed"], allow_download=allow_download)


def _train_settings(cfg: dict[str, Any], allow_download: bool):
    from aegis_eval.runners.train import TrainSettings

    keys = ("arch", "epochs", "imgsz", "batch", "seed", "lr0", "optimizer", "momentum", "weight_decay", "device",
            "workers", "amp", "tile", "overlap", "min_visibility", "score_floor", "nms_iou", "max_det")
    return TrainSettings(model=cfg["model"], weights=cfg["weights"], allow_download=allow_download,
                         **{k: cfg[k] for k in keys})


def _progress(stage: str, status: str) -> None:
    err.print(f"{stage}: {status}", highlight=False)


def _run_table(record: dict, title: str) -> Table:
    table = Table(title=title)
    for col in ("condition", "images", "detections", "seconds", "images/s"):
        table.add_column(col, justify="left" if col == "condition" else "right")
    for cond, e in record["conditions"].items():
        table.add_row(cond, str(e.get("n_images")), str(e.get("n_detections")), f"{e.get('seconds', 0):.2f}",
                      f"{e['images_per_s']:.2f}" if e.get("images_per_s") else "–")
    return table


def predict_cmd(
    split: SplitOpt,
    out_dir: Annotated[Path, typer.Option("--out-dir", help="Folder for <condition>.json files and run.json.",
                                          show_default=False)],
    model: ModelOpt = None,
    weights: WeightsOpt = None,
    config: ConfigOpt = None,
    conditions: ConditionsOpt = "all",
    split_name: Annotated[SplitName, mode(SplitName, "--split-name", help="The split to predict (val has only "
                                          "clean).")] = SplitName.test,
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
    check_output_dirs({"--out-dir": out_dir}, [split])
    from aegis_eval.runners.predict import predict_split

    cfg = _settings(config, model=model, weights=weights, tile=tile_size, overlap=overlap, batch=batch,
                    score_floor=score_floor, max_det=max_det, nms_iou=nms_iou, imgsz=imgsz, arch=arch,
                    device=device, seed=seed)
    settings = _predict_settings(cfg, tile, limit, value(split_name), allow_download)
    record = predict_split(settings, split, out_dir, conditions=conditions, force=force, progress=_progress)
    out.print(fit(_run_table(record, f"{settings.model} predictions ({record['device']}) → {out_dir}")))


def train_cmd(
    split: SplitOpt,
    out_dir: Annotated[Path, typer.Option("--out-dir", help="Run folder (config.yaml, data/, weights).",
                                          show_default=False)],
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
    workers: Annotated[Optional[int], typer.Option("--workers", help="Data-loader workers (0 = deterministic, "
                                                   "default).")] = None,
    arch: ArchOpt = None,
    amp: Annotated[Optional[bool], typer.Option("--amp/--no-amp", help="Ultralytics mixed precision on GPU (default "
                                                "off: its self-check downloads a model).")] = None,
    tile_size: TileSizeOpt = None,
    overlap: OverlapOpt = None,
    min_visibility: Annotated[Optional[float], typer.Option(
        "--min-visibility", help="Share of a box's area a tile must show to keep it (default 0.5).")] = None,
    augment: AugmentOpt = None,
    suite: SuiteOpt = None,
    allow_download: DownloadOpt = False,
) -> None:
    """Fine-tune on the split's train images (tiled), validating on clean val; resumes a stopped run.

    With --augment, every training frame is disaster-corrupted by the policy before tiling (docs/MITIGATION.md).
    """
    check_output_dirs({"--out-dir": out_dir}, [split])
    from aegis_data.augment.transform import load_policy
    from aegis_eval.runners.augment_hooks import policy_suite_for
    from aegis_eval.runners.train import train_baseline

    cfg = _settings(config, model=model, weights=weights, epochs=epochs, imgsz=imgsz, batch=batch, seed=seed,
                    lr0=lr0, optimizer=optimizer, device=device, workers=workers, arch=arch, amp=amp, tile=tile_size,
                    overlap=overlap, min_visibility=min_visibility)
    settings = _train_settings(cfg, allow_download)
    policy = load_policy(augment, suite or policy_suite_for(split)) if augment else None
    result = train_baseline(settings, split, out_dir, log=lambda line: err.print(line, highlight=False),
                            augment=policy)
    out.print(f"{settings.model}: {result['status']}; best weights: {result['best']}", highlight=False)
    if policy is not None:
        out.print(f"augmentation: {policy.name} [{policy.hash}]", highlight=False)
    out.print(f"last checkpoint: {result['last']}; config: {result['config']}", highlight=False)


def sweep_cmd(
    split: SplitOpt,
    out_dir: Annotated[Path, typer.Option("--out-dir", help="Results folder (val/, threshold.json, predictions/, "
                                          "score.json, score.csv).", show_default=False)],
    model: ModelOpt = None,
    weights: WeightsOpt = None,
    config: ConfigOpt = None,
    bootstrap: BootstrapOpt = None,
    conditions: ConditionsOpt = "all",
    label: Annotated[Optional[str], typer.Option("--label", help="Label in score.json (default: config name or "
                                                 "model).")] = None,
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
    check_output_dirs({"--out-dir": out_dir}, [split])
    from aegis_eval.runners.sweep import run_sweep
    from .scoring import conditions_table, recall_matrix

    cfg = _settings(config, model=model, weights=weights, bootstrap=bootstrap, tile=tile_size, overlap=overlap,
                    batch=batch, score_floor=score_floor, max_det=max_det, nms_iou=nms_iou, imgsz=imgsz, arch=arch,
                    device=device, seed=seed)
    settings = _predict_settings(cfg, tile, limit, "test", allow_download)
    result = run_sweep(settings, split, out_dir, bootstrap=cfg["bootstrap"], seed=cfg["seed"],
                       rule=cfg["threshold_rule"], label=label or cfg.get("name") or settings.model,
                       conditions=conditions, force=force, progress=_progress, on_warning=warn)
    out.print(fit(conditions_table(result)))
    matrix = recall_matrix(result)
    if matrix is not None:
        out.print(fit(matrix, 2))
    out.print(f"score: {Path(out_dir) / 'score.json'}  threshold: {Path(out_dir) / 'threshold.json'}",
              highlight=False)


def ablate_cmd(
    split: SplitOpt,
    out_dir: Annotated[Path, typer.Option("--out-dir", help="Ablation folder (<policy>/run, <policy>/results, "
                                          "scores/<policy>.json, ablation.json).", show_default=False)],
    policies: Annotated[str, typer.Option("--policies", help="Comma list of augmentation policies (names in "
                                          "configs/augment or yaml paths); the clean baseline is always added.")],
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
    label: Annotated[Optional[str], typer.Option("--label", help="Label prefix in the score JSONs (default: config "
                                                 "name or model).")] = None,
    arch: ArchOpt = None,
    device: DeviceOpt = None,
    init: Annotated[Optional[Path], typer.Option(
        "--init", help="Local checkpoint every model, the clean baseline too, is fine-tuned from (e.g. "
                       "PRETRAIN/train/weights/best.pt from `aegis baseline train`); replaces --weights and is "
                       "recorded in provenance.init.")] = None,
    seeds: Annotated[Optional[str], typer.Option(
        "--seeds", help="Training seeds, e.g. 0,1,2: one model per (policy, seed) in OUT/<name>/seed-<k>/, "
                        "per-seed gains plus a combined two-level bootstrap interval. --seed then keys only the "
                        "bootstrap.")] = None,
    suite: SuiteOpt = None,
    allow_download: DownloadOpt = False,
) -> None:
    """Train one model per augmentation policy plus the clean baseline, sweep every condition, compare."""
    check_output_dirs({"--out-dir": out_dir}, [split])
    from aegis_eval.runners.ablate import parse_policies, parse_seeds, run_ablation
    from aegis_eval.runners.augment_hooks import policy_suite_for

    chosen = parse_policies(policies, suite or policy_suite_for(split))
    seed_list = parse_seeds(seeds) if seeds is not None else None
    if init is not None and weights is not None:
        raise AegisError("give --init (a checkpoint to fine-tune from) or --weights, not both")
    cfg = _settings(config, model=model, weights=str(init) if init is not None else weights, epochs=epochs,
                    imgsz=imgsz, batch=batch, seed=seed, lr0=lr0, optimizer=optimizer, bootstrap=bootstrap,
                    arch=arch, device=device)
    train = _train_settings(cfg, allow_download)
    predict = _predict_settings(cfg, None, None, "test", allow_download)
    record = run_ablation(train, predict, split, out_dir, chosen, bootstrap=cfg["bootstrap"], seed=cfg["seed"],
                          rule=cfg["threshold_rule"], label=label or cfg.get("name") or cfg["model"],
                          conditions=conditions, init=init, seeds=seed_list, progress=_progress,
                          log=lambda line: err.print(line, highlight=False), on_warning=warn)
    out.print(fit(ablation_table(record)))
    out.print(f"scores: {Path(out_dir) / 'scores'}  (render with `aegis report {Path(out_dir) / 'scores'}/*.json "
              f"--out-dir REPORT`)", highlight=False)


def ablation_table(record: dict) -> Table:
    from aegis_eval.report.mitigation import fmt_threshold

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
        row = [name, (entry["policy"] or {}).get("hash", "–"), fmt_threshold(entry["threshold"]),
               cell(gains.get("mpc")), cell(gains.get("rpc")), cell(gains.get("seen")), cell(gains.get("unseen"))]
        if seeds:
            mpc = gains.get("mpc") or {}
            per = ["–" if g["gain"] is None else f"{g['gain']:+.3f}" for g in mpc.get("seeds", [])]
            row += [" / ".join(per) or "–",
                    "–" if mpc.get("seed_sd") is None else f"{mpc['seed_sd']:.3f}"]
        table.add_row(*row)
    return table


def register(app: typer.Typer) -> None:
    """Add the ``baseline`` command group to the root app."""
    for name, fn in (("predict", predict_cmd), ("train", train_cmd), ("sweep", sweep_cmd), ("ablate", ablate_cmd)):
        add_command(baseline_app, name, fn)
    app.add_typer(baseline_app, name="baseline")
