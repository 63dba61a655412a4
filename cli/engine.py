"""Commands around the corruption engine: ``list``, ``corrupt``, ``grid`` and ``calibrate``.

Parsing and rendering only: the work is done by ``aegis_data.engine.corruptions`` (the engine),
``aegis_data.engine.calibration`` (statistics, calibration tables) and ``aegis_data.engine.grid`` (the severity grid), which
the tests call directly.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from aegis_data.engine.config import check_severity, load_config
from aegis_data.errors import AegisError
from .common import check_outputs, fail, out, styled
from .tables import fit
from .vocabulary import GsdOpt, ListFormat, PersonPxOpt, ScaleMode, ScaleOpt, add_command, mode, value


_ARROW = {"increase": "↑", "decrease": "↓"}  # a statistic's declared direction


def _split_names(values: Optional[list[str]]) -> Optional[list[str]]:
    """Repeated and/or comma-separated ``--corruptions`` values, flattened; None when not given."""
    if not values:
        return None
    names = [n.strip() for v in values for n in v.split(",") if n.strip()]
    return names or None


def _fmt_num(v) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _fmt_value(v) -> str:
    if isinstance(v, (tuple, list)):
        return "(" + ", ".join(_fmt_num(x) for x in v) + ")"
    return _fmt_num(v)


def suite_description(scale=None, long_side: int | None = None) -> dict:
    """The suite as plain data: seed, config hash, families and every corruption's declaration; with a ``scale``
    (and, for frame scale, a ``long_side``), the effective pixel values of the parameters that follow it."""
    cfg = load_config()
    from aegis_data.engine.scale import effective_parameters

    effective = scale is not None and (scale.is_object or long_side is not None)
    desc = {
        "suite": cfg.suite,
        "seed": cfg.seed,
        "config_hash": cfg.config_hash,
        "config_sha256": cfg.config_sha256,
        "families": {k: list(v) for k, v in cfg.families.items()},
        "corruptions": [
            {
                "name": s.name,
                "family": s.family,
                "statistic": s.statistic,
                "direction": s.direction,
                "severities": {k: list(v) for k, v in s.severities.items()},
                "fixed": {k: (list(v) if isinstance(v, tuple) else v) for k, v in s.fixed.items()},
                **({"effective": effective_parameters(s, scale, long_side)} if effective else {}),
            }
            for s in cfg.corruptions.values()
        ],
    }
    if effective:
        desc["scale"] = scale.describe() + ("" if scale.is_object else f", on a {long_side}-px long side")
    return desc


def list_cmd(
    output_format: Annotated[ListFormat, mode(ListFormat, "--format", help="Print the suite as a table or as "
                                              "JSON.")] = ListFormat.table,
    scale: ScaleOpt = ScaleMode.frame,
    person_px: PersonPxOpt = None,
    gsd: GsdOpt = None,
    long_side: Annotated[Optional[int], typer.Option(
        "--long-side", help="--scale frame: show effective px values for frames of this long side.",
        rich_help_panel="Scale (docs/CORRUPTIONS.md)")] = None,
) -> None:
    """List the corruptions of the suite: family, calibration statistic, direction and parameters.

    With --scale object (--person-px N or --gsd G), or --long-side L under frame scale, also the effective
    pixel values of every length, density and texture parameter.
    """
    from aegis_data.engine.scale import resolve_scale

    if long_side is not None and (long_side < 1 or scale is ScaleMode.object):
        raise AegisError("--long-side takes a positive number of px and applies to --scale frame only")
    chosen = resolve_scale(value(scale), None, person_px=person_px, gsd_cm_per_px=gsd)
    desc = suite_description(chosen, long_side)
    if output_format is ListFormat.json:
        out.print_json(json.dumps(desc))
        return
    title = f"{desc['suite']}  seed {desc['seed']}  config {desc['config_hash']}"
    if "scale" in desc:
        title += f"\nscale: {desc['scale']}"
    table = Table(title=title, show_lines=True)
    for col in ("corruption", "family", "statistic", "dir"):
        table.add_column(col, no_wrap=True)
    table.add_column("severity 1 / 2 / 3", overflow="fold")
    table.add_column("fixed", overflow="fold")
    if "scale" in desc:
        table.add_column("effective 1 / 2 / 3", overflow="fold")
    for c in desc["corruptions"]:
        sev = "\n".join(f"{k} {' / '.join(_fmt_num(x) for x in v)}" for k, v in c["severities"].items())
        fixed = "\n".join(f"{k} {_fmt_value(v)}" for k, v in c["fixed"].items()) or "-"
        row = [c["name"], c["family"], c["statistic"], _ARROW.get(c["direction"], c["direction"]), sev, fixed]
        if "scale" in desc:
            row.append("\n".join(f"{k} {' / '.join(f'{x:.3g}' for x in e['values'])} {e['unit']}"
                                 for k, e in c["effective"].items()) or "-")
        table.add_row(*row)
    out.print(fit(table))


def corrupt_cmd(
    image: Annotated[Path, typer.Argument(metavar="IMAGE", help="Input image (any format OpenCV decodes).",
                                          show_default=False)],
    corruption: Annotated[str, typer.Option("--corruption", "-c", help="Corruption name (see `aegis list`).")],
    severity: Annotated[int, typer.Option("--severity", "-s", help="Severity 1, 2 or 3.")],
    out_path: Annotated[Path, typer.Option("--out", "-o", help="Output PNG path (written atomically).")],
    image_id: Annotated[
        Optional[str], typer.Option("--image-id", help="Id keying the random draws; default: the file stem.")
    ] = None,
    scale: ScaleOpt = ScaleMode.frame,
    person_px: PersonPxOpt = None,
    gsd: GsdOpt = None,
) -> None:
    """Apply one corruption at one severity to one image and write a lossless PNG."""
    from aegis_data.engine.corruptions import apply_corruption
    from aegis_data.engine.scale import resolve_scale
    from aegis_data.files.imageio import pixel_sha256, read_rgb, write_png_atomic

    load_config().check_corruption(corruption)
    check_severity(severity, "--severity")
    chosen = resolve_scale(value(scale), None, person_px=person_px, gsd_cm_per_px=gsd)
    if out_path.suffix.lower() != ".png":
        raise AegisError(f"--out must be a .png file (lossless), got {str(out_path)!r}")
    check_outputs({"--out": out_path}, [image])
    rgb = read_rgb(image)
    result = apply_corruption(rgb, corruption, severity, image_id if image_id is not None else image.stem,
                              scale=chosen)
    write_png_atomic(out_path, result)
    out.print(f"{out_path}\tpixel-sha256 {pixel_sha256(result)}", highlight=False, soft_wrap=True)


def grid_cmd(
    image: Annotated[Path, typer.Argument(metavar="IMAGE", help="Input image.", show_default=False)],
    out_path: Annotated[Path, typer.Option("--out", "-o", help="Output PNG path for the grid.")],
    width: Annotated[int, typer.Option("--width", "-w", help="Grid width in px (3 severity columns).")] = 1536,
    image_id: Annotated[
        Optional[str], typer.Option("--image-id", help="Id keying the random draws; default: the file stem.")
    ] = None,
) -> None:
    """Render clean + every corruption at severities 1-3 as one labelled PNG (a visual check of the ladder)."""
    from aegis_data.engine.grid import severity_grid
    from aegis_data.files.imageio import read_rgb, write_png_atomic

    if out_path.suffix.lower() != ".png":
        raise AegisError(f"--out must be a .png file, got {str(out_path)!r}")
    if width < 480:
        raise AegisError(f"--width must be at least 480 px, got {width}")
    check_outputs({"--out": out_path}, [image])
    rgb = read_rgb(image)
    sheet = severity_grid(rgb, image_id if image_id is not None else image.stem, width)
    write_png_atomic(out_path, sheet)
    out.print(f"{out_path}\t{sheet.shape[1]}x{sheet.shape[0]}", highlight=False, soft_wrap=True)


def _fmt_stat(v: float) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4f}"


def calibrate_cmd(
    path: Annotated[Path, typer.Argument(metavar="SPLIT_DIR", help="A split folder from `aegis build-splits`, or "
                                         "any folder of images.", show_default=False)],
    corruptions: Annotated[
        Optional[list[str]],
        typer.Option("--corruptions", "-c", metavar="NAMES",
                     help="Corruptions to check (repeat or comma-separate); default all."),
    ] = None,
    limit: Annotated[Optional[int], typer.Option("--limit", help="Use at most N images (by name).")] = None,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="Also write the table as JSON here.")] = None,
    scale: ScaleOpt = None,
    person_px: PersonPxOpt = None,
    gsd: GsdOpt = None,
) -> None:
    """Check that every corruption's statistic moves strictly monotonically with severity (exit 1 if not).

    A folder is corrupted in memory (image id = file stem); a split (has manifest.json) is read from disk.

    In a split, test/clean is compared with test/<corruption>_s<k>; conditions not on disk are skipped.
    """
    from aegis_data.engine.calibration import calibrate_path, check_monotone
    from aegis_data.files.imageio import write_bytes_atomic

    check_outputs({"--json": json_out}, [path])
    table = calibrate_path(path, _split_names(corruptions), limit, scale=value(scale), person_px=person_px,
                           gsd_cm_per_px=gsd)
    violations = check_monotone(table)
    bad = {v.corruption for v in violations}
    rt = Table(title=f"calibration on {table.n_images} image(s)  config {table.config_hash}  seed {table.seed}\n"
                     f"scale: {table.scale}")
    for col, just in (("corruption", "left"), ("sev", "right"), ("statistic", "left"), ("mean", "right"),
                      ("std", "right"), ("clean", "right"), ("n", "right"), ("monotone", "center")):
        rt.add_column(col, justify=just)
    for name in table.corruptions:
        ladder = table.ladder(name)
        for i, r in enumerate(ladder):
            first = i == 0
            mark = (styled(("✗", "red")) if name in bad else styled(("✓", "green"))) if first else ""
            rt.add_row(
                name if first else "",
                str(r.severity),
                f"{r.statistic} {_ARROW.get(r.direction, '')}" if first else "",
                _fmt_stat(r.mean),
                _fmt_stat(r.std),
                _fmt_stat(r.clean_mean) if first else "",
                str(r.n),
                mark,
                end_section=i == len(ladder) - 1,
            )
    out.print(fit(rt))
    if json_out is not None:
        write_bytes_atomic(json_out, (json.dumps(table.to_dict(), indent=2) + "\n").encode())
    if violations:
        for v in violations:
            out.print(styled(("✗", "red"), f" {v.corruption}: {v.message}"), soft_wrap=True)
        names = ", ".join(sorted(bad))
        raise fail(f"{len(bad)} severity ladder(s) not strictly monotone: {names}")


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root app."""
    add_command(app, "list", list_cmd)
    add_command(app, "corrupt", corrupt_cmd)
    add_command(app, "grid", grid_cmd)
    add_command(app, "calibrate", calibrate_cmd)
