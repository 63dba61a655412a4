"""``aegis audit``: what a source dataset holds, and whether its splits leak."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from aegis_data import api
from aegis_data.api import check_outputs

from .common import out, styled, warn
from .splits import (
    AnnotationsOpt,
    ClassesOpt,
    FollowLinksOpt,
    GroupsOpt,
    HfSplitOpt,
    ImagesOpt,
    LabelsOpt,
    MaxPixelsOpt,
    NOpt,
    OptionOpt,
    SizeOpt,
)
from .tables import fit
from .vocabulary import Dataset, add_command, mode, value


def _q(stats: Mapping[str, Any] | None, key: str) -> str:
    return "-" if not stats else f"{stats[key]:.1f}"


def render_audit(report: Mapping[str, Any]) -> list[Table]:
    """Rich tables for an audit report: per-split counts and sizes, then leakage findings."""
    main = Table(title=f"audit of {report['dataset']}")
    for col in ("split", "images", "boxes", "empty", "small/medium/large", "sqrt(area) p5/p50/p95", "resolutions"):
        main.add_column(col, overflow="fold")
    rows = list(report["splits"].items()) + [("all", report["all"])]
    for name, s in rows:
        bins = s["size_bins"]
        q = s["box_sqrt_area"]
        res = ", ".join(f"{k}: {v}" for k, v in list(s["resolutions"].items())[:4])
        if len(s["resolutions"]) > 4:
            res += f", ... ({len(s['resolutions'])} sizes)"
        main.add_row(
            name,
            str(s["images"]),
            str(s["boxes"]),
            f"{s['empty_images']} ({100 * (s['empty_share'] or 0):.0f}%)",
            f"{bins['small']}/{bins['medium']}/{bins['large']}",
            f"{_q(q, 'p5')}/{_q(q, 'p50')}/{_q(q, 'p95')}",
            res,
        )
    findings = Table(title="duplicates and leakage")
    findings.add_column("check")
    findings.add_column("result", overflow="fold")
    dup = report["duplicates"]
    leak = report["leakage_details"]
    findings.add_row(
        "duplicate content",
        f"{dup['sets']} set(s), {dup['images_in_sets']} image(s)" if dup["checked"] else "not checked (--no-hash)",
    )
    findings.add_row(
        "groups in several splits",
        str(leak["groups_in_several_splits"])
        + (
            " (e.g. " + ", ".join(f"{g['group']}: {'+'.join(g['splits'])}" for g in leak["group_examples"][:3]) + ")"
            if leak["group_examples"]
            else ""
        ),
    )
    findings.add_row(
        "duplicates in several splits",
        str(leak["duplicates_in_several_splits"])
        + (
            " (e.g. " + ", ".join("=".join(d["images"][:2]) for d in leak["duplicate_examples"][:3]) + ")"
            if leak["duplicate_examples"]
            else ""
        ),
    )
    near = report.get("near_duplicates") or {}
    findings.add_row(
        "near-duplicates in several splits",
        (
            str(leak.get("near_duplicates_in_several_splits", 0))
            + (
                " (e.g. " + ", ".join("~".join(p["images"]) for p in leak.get("near_duplicate_examples", [])[:3]) + ")"
                if leak.get("near_duplicate_examples")
                else ""
            )
        )
        if near.get("checked")
        else "not checked (--no-hash)",
    )
    findings.add_row("leakage", styled(("YES", "bold red")) if report["leakage"] else styled(("none", "green")))
    tables = [main, findings]
    if report.get("source_facts"):
        facts = Table(title="source facts")
        facts.add_column("fact")
        facts.add_column("value", overflow="fold")
        for key, value in report["source_facts"].items():
            facts.add_row(key.replace("_", " "), _fact_text(value))
        tables.append(facts)
    return tables


def _fact_text(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {v}" for k, v in value.items()) or "-"
    if isinstance(value, (list, tuple)):
        return "; ".join(str(v) for v in value) or "-"
    return str(value)


def audit_command(
    dataset: Annotated[Dataset, mode(Dataset, "--dataset", help="Source adapter.", show_default=False)],
    source: Annotated[
        Path | None, typer.Option(help="Root of the source dataset (or a HF dataset path/id for hf).")
    ] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the report as JSON to this file.")] = None,
    no_hash: Annotated[
        bool,
        typer.Option("--no-hash", help="Skip content hashing (no duplicate or near-duplicate check; faster)."),
    ] = False,
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
    """Audit a source dataset: counts, box sizes, resolutions, duplicates and leakage between splits.

    Exits 1 when leakage is found (a group or a duplicate image in more than one split).
    """
    dataset = value(dataset)
    check_outputs({"--json": json_out}, [source, images, labels, annotations])
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
    report = api.audit_source(ds, hash_files=not no_hash)
    if json_out is not None:
        api.write_json(report, json_out, sort_keys=True, default=str)
    for table in render_audit(report):
        out.print(fit(table))
    if report["leakage"]:
        warn(
            "leakage between splits: the same group, image content or near-identical frames appear in more than "
            "one split; keep each clip in one split with --groups (a stem,group file, or 'frames' for numbered "
            "video frames)"
        )
        raise typer.Exit(code=1)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root app."""
    add_command(app, "audit", audit_command)
