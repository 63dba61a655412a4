"""``aegis build-splits``, ``aegis verify`` and ``aegis export-hf``: build, check and publish a frozen split."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from aegis_data import api
from aegis_data.api import check_output_dirs, check_outputs
from aegis_data.errors import AegisError

from .common import err, fail, out, styled, warn
from .progress import BuildProgressView
from .tables import fit
from .vocabulary import Dataset, GsdOpt, PersonPxOpt, ScaleOpt, SuiteOpt, add_command, mode, value

_ADAPTER = "Source adapter options"

# Adapter options shared by `aegis build-splits` and `aegis audit` (declared once).
NOpt = Annotated[int | None, typer.Option(help="synthetic: number of images.", rich_help_panel=_ADAPTER)]
SizeOpt = Annotated[
    str | None,
    typer.Option(help="synthetic: frame size, N or WxH (comma list cycles per image).", rich_help_panel=_ADAPTER),
]
ImagesOpt = Annotated[Path | None, typer.Option(help="Image folder (yolo, voc).", rich_help_panel=_ADAPTER)]
LabelsOpt = Annotated[Path | None, typer.Option(help="Label folder (yolo).", rich_help_panel=_ADAPTER)]
AnnotationsOpt = Annotated[
    Path | None, typer.Option(help="COCO JSON file (coco) or XML folder (voc).", rich_help_panel=_ADAPTER)
]
ClassesOpt = Annotated[
    str | None,
    typer.Option(
        help="Class ids/names counted as person (yolo, voc, sard; categories for coco, hf).", rich_help_panel=_ADAPTER
    ),
]
GroupsOpt = Annotated[
    str | None,
    typer.Option(
        help="Images that stay in one split: a CSV (stem,group) or JSON {stem: group} file, or 'frames' to chain "
        "numbered video frames with near-identical content (every adapter but synthetic; docs/DATA.md).",
        rich_help_panel=_ADAPTER,
    ),
]
HfSplitOpt = Annotated[
    str | None, typer.Option(help="Split of the Hugging Face dataset to read (hf).", rich_help_panel=_ADAPTER)
]
SchedulerOpt = Annotated[
    str | None,
    typer.Option(
        help="Run on Dask: 'local' (a LocalCluster of --workers processes) or a scheduler address like tcp://host:8786 "
        "whose workers see the output directory at the same path (pip install 'aegisbench[distributed]'; "
        "docs/SCALING.md)."
    ),
]
TimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        metavar="SECONDS",
        help="With --scheduler ADDRESS: how long the scheduler has to answer (default 10).",
    ),
]
MaxPixelsOpt = Annotated[
    int | None, typer.Option(help="Refuse source images larger than this many pixels.", rich_help_panel=_ADAPTER)
]
FollowLinksOpt = Annotated[
    bool,
    typer.Option(
        "--follow-links",
        help="Read source images that are symlinks leaving the source folder (default: skip and count them).",
        rich_help_panel=_ADAPTER,
    ),
]
OptionOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--option",
        help="Any adapter option as key=value (repeatable), e.g. --option val_fraction=0.1.",
        rich_help_panel=_ADAPTER,
    ),
]


def parse_csv(value: str | None, what: str) -> list[str] | None:
    """``'a, b'`` -> ``['a', 'b']``; None stays None."""
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise AegisError(f"{what}: expected a comma-separated list, got {value!r}")
    return items


def parse_severities(value: str) -> list[int]:
    items = parse_csv(value, "--severities") or []
    try:
        return [int(v) for v in items]
    except ValueError:
        raise AegisError(f"--severities: expected integers among 1,2,3 like '1,2,3', got {value!r}") from None


def build_command(
    dataset: Annotated[Dataset, mode(Dataset, "--dataset", help="Source adapter.")] = Dataset.synthetic,
    source: Annotated[
        Path | None, typer.Option(help="Root of the source dataset on disk (or a HF dataset path/id for --dataset hf).")
    ] = None,
    out_dir: Annotated[
        Path | None,
        typer.Option("--out-dir", help="Output folder (default: ./aegis-splits/<name>-c).", show_default=False),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(
            help="The dataset's name in the manifest, score JSONs and reports (default: the source folder's name "
            "for coco, yolo, voc and hf; the adapter's name for synthetic, heridal and sard).",
            show_default=False,
        ),
    ] = None,
    corruptions: Annotated[
        str | None, typer.Option(help="Comma-separated corruption names (default: all nine).")
    ] = None,
    severities: Annotated[str, typer.Option(help="Comma-separated severities among 1,2,3.")] = "1,2,3",
    workers: Annotated[
        int | None,
        typer.Option(help="Worker processes (default: all cores); with --scheduler local, the LocalCluster's."),
    ] = None,
    scheduler: SchedulerOpt = None,
    timeout: TimeoutOpt = None,
    limit: Annotated[int | None, typer.Option(help="Only the first N images (by image id) of each split.")] = None,
    with_train: Annotated[
        bool, typer.Option("--with-train", help="Also write train/clean and annotations/train.json.")
    ] = False,
    suite: SuiteOpt = None,
    scene_dir: Annotated[
        Path | None,
        typer.Option(
            "--scene-dir",
            help="aegis-v2: folder of per-image scene sidecars <stem>.scene.json (default: beside each "
            "image); their facts (altitude, pitch, gsd, speed, exposure, sun, water mask) override the estimates.",
            rich_help_panel="Scale (docs/CORRUPTIONS.md)",
        ),
    ] = None,
    scale: ScaleOpt = None,
    person_px: PersonPxOpt = None,
    gsd: GsdOpt = None,
    n: NOpt = None,
    size: SizeOpt = None,
    images: ImagesOpt = None,
    labels: LabelsOpt = None,
    annotations: AnnotationsOpt = None,
    classes: ClassesOpt = None,
    groups: GroupsOpt = None,
    hf_split: HfSplitOpt = None,
    max_pixels: MaxPixelsOpt = None,
    follow_links: FollowLinksOpt = False,
    option: OptionOpt = None,
) -> None:
    """Build the frozen corrupted benchmark (clean + 27 conditions) with its SHA-256 manifest."""
    config = api.load_config(suite)  # an unknown suite is refused before the source is read

    dataset = value(dataset)
    ds = api.open_source(
        dataset,
        source,
        pairs=option,
        n=n,
        size=size,
        images=images,
        labels=labels,
        annotations=annotations,
        classes=classes,
        groups=groups,
        hf_split=hf_split,
        max_pixels=max_pixels,
        follow_links=follow_links or None,
    )
    for line in ds.warnings:
        warn(line)
    target = out_dir or Path("aegis-splits") / f"{name or ds.default_name}-c"
    check_output_dirs({"--out-dir": target})
    # A bar on a terminal, plain lines in a log, and an estimate of a long build (cli/progress.py).
    view = BuildProgressView(f"building {target}", err, out, workers=workers or api.default_workers())
    try:
        result = api.build_splits(
            ds,
            target,
            corruptions=parse_csv(corruptions, "--corruptions"),
            severities=parse_severities(severities),
            workers=workers,
            limit=limit,
            with_train=with_train,
            progress=view,
            max_pixels=max_pixels or api.DEFAULT_MAX_PIXELS,
            scheduler=scheduler,
            on_cluster=print_cluster,
            timeout=timeout,
            scale=value(scale),
            person_px=person_px,
            gsd_cm_per_px=gsd,
            config=config,
            scene_dir=scene_dir,
            name=name,
        )
    except BaseException:
        view.stop(failed=True)
        raise
    view.stop()
    for line in result.warnings:
        warn(line)
    table = Table(title=f"{name or ds.default_name}-C written to {result.out}")
    table.add_column("item")
    table.add_column("value", overflow="fold")
    table.add_row("suite", f"{config.suite} (config {config.config_hash})")
    table.add_row(
        "conditions",
        f"{len(result.conditions)} ({', '.join(result.conditions[:3])}{', ...' if len(result.conditions) > 3 else ''})",
    )
    table.add_row("source images", ", ".join(f"{s}: {k}" for s, k in result.images.items()))
    table.add_row("scale", result.scale.describe())
    table.add_row("files written / skipped", f"{result.files_written} / {result.files_skipped}")
    if result.sources_changed:
        table.add_row(
            "sources changed",
            f"{result.sources_changed} source image(s) decode to other pixels than when "
            f"they were built: all their files were rendered again",
        )
    table.add_row("time", f"{result.seconds:.1f} s ({result.images_per_s:.2f} files/s, {result.mp_per_s:.1f} MP/s)")
    table.add_row("manifest", str(result.manifest_path))
    table.add_row("root hash", result.root_hash)
    out.print(fit(table))


def print_cluster(info) -> None:
    """One stderr line naming the Dask cluster a command runs on, with its dashboard link when it has one."""
    dashboard = f"; dashboard {info['dashboard']}" if info.get("dashboard") else ""
    err.print(
        f"Dask scheduler {info['address']}: {info['workers']} worker(s), {info['threads']} thread(s){dashboard}",
        highlight=False,
        soft_wrap=True,
    )


def verify_command(
    directory: Annotated[
        Path, typer.Argument(metavar="SPLIT_DIR", help="A frozen split written by build-splits.", show_default=False)
    ],
    against: Annotated[
        Path | None,
        typer.Option(help="Reference manifest to check the files against (e.g. manifests/synthetic-c.json)."),
    ] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the report as JSON to this file.")] = None,
    strict_bytes: Annotated[
        bool,
        typer.Option(
            "--strict-bytes",
            help="With --against: also fail on files whose bytes differ although their decoded pixels match "
            "(by default that is reported as information).",
        ),
    ] = False,
    subset: Annotated[
        bool,
        typer.Option(
            "--subset", help="With --against: check only the images this build has (a --limit or --corruptions build)."
        ),
    ] = False,
    workers: Annotated[
        int | None,
        typer.Option(
            help="Hashing threads (default: all cores); with --scheduler local, the LocalCluster's processes."
        ),
    ] = None,
    scheduler: SchedulerOpt = None,
    timeout: TimeoutOpt = None,
) -> None:
    """Recompute every hash of a frozen split; exit 0 only if everything matches."""
    if subset and against is None:
        raise fail("--subset needs --against (a reference manifest to take the subset of)")
    if strict_bytes and against is None:
        raise fail("--strict-bytes needs --against (against its own manifest every byte difference already fails)")
    check_outputs({"--json": json_out}, [directory, against])
    report = api.verify_split(
        directory,
        against,
        strict_bytes=strict_bytes,
        workers=workers,
        subset=subset,
        scheduler=scheduler,
        on_cluster=print_cluster,
        timeout=timeout,
    )
    if json_out is not None:
        api.write_json(report.to_dict(), json_out, sort_keys=True)
    info = [f for f in report.information if f.kind == "bytes-only"]
    if info:
        out.print(
            styled(
                ("note", "yellow"),
                f" {len(info)} file(s) differ in bytes only: identical decoded pixels, "
                f"another PNG encoder or version (information; --strict-bytes makes "
                f"this a failure), e.g. {info[0].path}",
            )
        )
    linked = [f for f in report.information if f.kind == "hardlink"]
    if linked:
        out.print(
            styled(
                ("note", "yellow"),
                f" {len(linked)} file(s) are hard links shared with files outside "
                f"the split (information: editing those changes these), e.g. "
                f"{linked[0].path}",
            )
        )
    for f in report.information:
        if f.kind == "seal":
            out.print(styled(("note", "yellow"), f" {f.path}: {f.detail}"))
    if report.ok:
        if against is None:
            root = f"root {report.expected_root_hash}"
        elif report.roots_match:
            root = f"same root hash as the reference: {report.expected_root_hash}"
        else:  # a --subset build: its own root, a part of the reference's files
            root = f"local root {report.local_root_hash}, reference root {report.expected_root_hash}"
        out.print(
            styled(("OK", "green"), f" {report.checked} files match {report.reference} ({root}); scale: {report.scale}")
        )
        return
    failures = report.failures
    table = Table(title=f"{directory}: {len(failures)} difference(s) against {report.reference}")
    for col in ("kind", "path", "pixels differing", "max |Δ|", "detail"):
        table.add_column(col, overflow="fold")
    for f in failures[:200]:
        table.add_row(
            f.kind,
            f.path,
            "" if f.pixels_differing is None else str(f.pixels_differing),
            "" if f.max_abs_delta is None else str(f.max_abs_delta),
            f.detail,
        )
    out.print(fit(table, 2))
    if len(failures) > 200:
        out.print(f"... and {len(failures) - 200} more (use --json for all)")
    summary = ", ".join(f"{k}: {v}" for k, v in sorted(report.counts(failures).items()))
    err.print(styled(("verify failed:", "bold red"), f" {summary}"))
    raise typer.Exit(code=1)


def export_command(
    directory: Annotated[
        Path, typer.Argument(metavar="SPLIT_DIR", help="A frozen split written by build-splits.", show_default=False)
    ],
    out_dir: Annotated[
        Path,
        typer.Option(
            "--out-dir", show_default=False, help="Where to write the Hugging Face dataset (save_to_disk + parquet)."
        ),
    ],
    push: Annotated[
        str | None, typer.Option(help="Also upload the parquet files to this Hugging Face dataset repo id.")
    ] = None,
) -> None:
    """Export a verified frozen split as a Hugging Face `datasets` dataset with embedded images."""
    check_output_dirs({"--out-dir": out_dir}, [directory])
    result = api.export_hf(directory, out_dir)
    table = Table(title=f"Hugging Face export of {directory}")
    table.add_column("split")
    table.add_column("rows")
    for split, rows in result.rows.items():
        table.add_row(split, str(rows))
    out.print(fit(table))
    out.print(f"save_to_disk: {result.dataset_dir}\nparquet: {result.parquet_dir}", highlight=False)
    if push:
        url = api.push_hf(result.out, push)
        out.print(f"pushed to {url}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add build-splits, verify and export-hf to the root app."""
    add_command(app, "build-splits", build_command)
    add_command(app, "verify", verify_command)
    add_command(app, "export-hf", export_command)
