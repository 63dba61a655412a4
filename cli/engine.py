"""Commands around the corruption engine: ``list``, ``corrupt``, ``grid``, ``calibrate`` and ``realism``.

Parsing and rendering only: each command calls one function of ``aegis_data.api`` (``list_suite``,
``corrupt_file``, ``grid_file``, ``calibrate``, ``realism``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from aegis_data import api
from aegis_data.api import check_outputs

from .common import err, fail, out, styled
from .tables import fit
from .vocabulary import GsdOpt, ListFormat, PersonPxOpt, ScaleOpt, SuiteOpt, add_command, mode, value

_ARROW = {"increase": "↑", "decrease": "↓"}  # a statistic's declared direction


def _split_names(values: list[str] | None) -> list[str] | None:
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


def list_cmd(
    output_format: Annotated[
        ListFormat, mode(ListFormat, "--format", help="Print the suite as a table or as JSON.")
    ] = ListFormat.table,
    suite: SuiteOpt = None,
    scale: ScaleOpt = None,
    person_px: PersonPxOpt = None,
    gsd: GsdOpt = None,
    long_side: Annotated[
        int | None,
        typer.Option(
            "--long-side",
            help="--scale frame: show effective px values for frames of this long side.",
            rich_help_panel="Scale (docs/CORRUPTIONS.md)",
        ),
    ] = None,
) -> None:
    """List the corruptions of the suite: family, calibration statistic, direction and parameters.

    With --scale object (--person-px N or --gsd G), or --long-side L under frame scale, also the effective
    pixel values of every length, density and texture parameter.
    """
    if not isinstance(output_format, ListFormat):  # the one mode only the command reads: no library refuses it
        raise fail(f"unknown format {output_format!r}; expected one of {', '.join(f.value for f in ListFormat)}")
    desc = api.list_suite(suite, scale=value(scale), person_px=person_px, gsd_cm_per_px=gsd, long_side=long_side)
    if output_format is ListFormat.json:
        out.print_json(json.dumps(desc))
        return
    title = f"{desc['suite']}  seed {desc['seed']}  config {desc['config_hash']}"
    if "camera" in desc:
        title += "\ncamera: " + ", ".join(f"{k} {_fmt_value(v)}" for k, v in desc["camera"].items())
    if "scale" in desc:
        title += f"\nscale: {desc['scale']}"
    table = Table(title=title, show_lines=True)
    for col in ("corruption", "model", "family", "statistic", "dir"):
        table.add_column(col, no_wrap=True)
    table.add_column("severity 1 / 2 / 3", overflow="fold")
    table.add_column("fixed", overflow="fold")
    if "scale" in desc:
        table.add_column("effective 1 / 2 / 3", overflow="fold")
    physical = any(c.get("physical") for c in desc["corruptions"])
    if physical:
        table.add_column("camera 1 / 2 / 3", overflow="fold")
    for c in desc["corruptions"]:
        sev = "\n".join(f"{k} {' / '.join(_fmt_num(x) for x in v)}" for k, v in c["severities"].items())
        fixed = "\n".join(f"{k} {_fmt_value(v)}" for k, v in c["fixed"].items()) or "-"
        row = [
            c["name"],
            c["model"],
            c["family"],
            c["statistic"],
            _ARROW.get(c["direction"], c["direction"]),
            sev,
            fixed,
        ]
        if "scale" in desc:
            row.append(
                "\n".join(
                    f"{k} {' / '.join(f'{x:.3g}' for x in e['values'])} {e['unit']}" for k, e in c["effective"].items()
                )
                or "-"
            )
        if physical:
            row.append(_fmt_physical(c.get("physical") or []))
        table.add_row(*row)
    out.print(fit(table))


_PHYSICAL = (
    ("exposure_ms", "exposure", "ms"),
    ("iso", "ISO", ""),
    ("brightness", "brightness", ""),
    ("smear_m", "smear", "m"),
    ("smear_px", "smear", "px"),
    # the atmosphere (aegis_data.engine.atmosphere, aegis_data.engine.rain)
    ("visibility_m", "visibility", "m"),
    ("extinction_per_km", "extinction", "/km"),
    ("nadir_transmission", "nadir transmission", ""),
    ("light_loss_ev", "light loss", "EV"),
    ("red_blue_cast", "red/blue cast", ""),
    ("class", "rain", ""),
    ("drops_per_m3", "drops ≥ 1 mm", "/m³"),
    # the water (aegis_data.engine.glint, aegis_data.engine.flood)
    ("wind_speed_mps", "wind", "m/s"),
    ("beaufort", "Beaufort", ""),
    ("mean_square_slope", "slope var", ""),
    ("sediment_g_m3", "sediment", "g/m3"),
    ("rise_m", "rise", "m"),
    ("flooded_smooth_ground_m", "flooded smooth ground", "m"),
    ("submerged_at_shore", "submerged at the old shore", ""),
)


def _fmt_physical(rows: list[dict]) -> str:
    """A generation-2 model's ladder on the default camera, one quantity per line: ``smear 0.018 / 0.099 / 0.5 m``."""
    if not rows:
        return "-"

    def cell(v) -> str:  # 3 significant digits, whole numbers from 1000 up (a visibility, an ISO); words as they are
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            return str(v)
        return f"{v:.0f}" if abs(v) >= 1000 else f"{v:.3g}"

    return "\n".join(
        f"{label} {' / '.join(cell(r[key]) for r in rows)}{' ' + unit if unit else ''}"
        for key, label, unit in _PHYSICAL
        if key in rows[0]
    )


def corrupt_cmd(
    image: Annotated[
        Path, typer.Argument(metavar="IMAGE", help="Input image (any format OpenCV decodes).", show_default=False)
    ],
    corruption: Annotated[str, typer.Option("--corruption", "-c", help="Corruption name (see `aegis list`).")],
    severity: Annotated[int, typer.Option("--severity", "-s", help="Severity 1, 2 or 3.")],
    out_path: Annotated[Path, typer.Option("--out", "-o", help="Output PNG path (written atomically).")],
    image_id: Annotated[
        str | None, typer.Option("--image-id", help="Id keying the random draws; default: the file stem.")
    ] = None,
    suite: SuiteOpt = None,
    scale: ScaleOpt = None,
    person_px: PersonPxOpt = None,
    gsd: GsdOpt = None,
    scene: Annotated[
        Path | None,
        typer.Option(
            "--scene",
            metavar="SIDECAR",
            help="aegis-v2: the image's scene sidecar (JSON: altitude_m, pitch_deg, gsd_cm, "
            "speed_mps, exposure_ms, ...; docs/CORRUPTIONS.md); default: IMAGE's <stem>.scene.json when present.",
            rich_help_panel="Scale (docs/CORRUPTIONS.md)",
        ),
    ] = None,
) -> None:
    """Apply one corruption at one severity to one image and write a lossless PNG."""
    result = api.corrupt_file(
        image,
        corruption,
        severity,
        out_path,
        image_id=image_id,
        suite=suite,
        scale=value(scale),
        person_px=person_px,
        gsd_cm_per_px=gsd,
        scene=scene,
    )
    out.print(f"{out_path}\tpixel-sha256 {result.pixel_sha256}", highlight=False, soft_wrap=True)
    if result.unchanged:
        why = result.unchanged_reason
        err.print(
            f"note: {corruption} s{severity} left the image unchanged{': ' + why if why else ''}",
            highlight=False,
            soft_wrap=True,
        )


def grid_cmd(
    image: Annotated[Path, typer.Argument(metavar="IMAGE", help="Input image.", show_default=False)],
    out_path: Annotated[Path, typer.Option("--out", "-o", help="Output PNG path for the grid.")],
    width: Annotated[int, typer.Option("--width", "-w", help="Grid width in px (3 severity columns).")] = 1536,
    image_id: Annotated[
        str | None, typer.Option("--image-id", help="Id keying the random draws; default: the file stem.")
    ] = None,
    suite: SuiteOpt = None,
    scale: ScaleOpt = None,
    person_px: PersonPxOpt = None,
    gsd: GsdOpt = None,
    crop: Annotated[
        str | None,
        typer.Option(
            "--crop",
            metavar="people|X,Y,W,H",
            help="Show a window of the corrupted frames: 'people' (around the person boxes) or X,Y,W,H px of "
            "the full image. Default: the whole frame.",
        ),
    ] = None,
    boxes: Annotated[
        Path | None,
        typer.Option(
            "--boxes",
            help="The image's person boxes for --crop people (and an aegis-v2 flood): a YOLO label .txt or a COCO "
            "JSON. Default, for an image of a split folder: its annotations.",
        ),
    ] = None,
) -> None:
    """Render clean + every corruption at severities 1-3 as one labelled PNG (a visual check of the ladder).

    Every cell is corrupted at the image's full resolution, as the split holds it, then cropped (--crop) and
    downscaled to the cell width."""
    sheet = api.grid_file(
        image,
        out_path,
        width=width,
        image_id=image_id,
        suite=suite,
        scale=value(scale),
        person_px=person_px,
        gsd_cm_per_px=gsd,
        crop=crop,
        boxes=boxes,
    )
    out.print(f"{out_path}\t{sheet.width}x{sheet.height}", highlight=False, soft_wrap=True)


def _fmt_stat(v: float) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4f}"


def _fmt_share(v: float) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.0f}%"


def _fmt_band(v: float) -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.1f}"


def _fmt_v(v: float) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.2f}"


def calibrate_cmd(
    path: Annotated[
        Path,
        typer.Argument(
            metavar="SPLIT_DIR",
            help="A split folder from `aegis build-splits`, or any folder of images.",
            show_default=False,
        ),
    ],
    corruptions: Annotated[
        list[str] | None,
        typer.Option(
            "--corruptions", "-c", metavar="NAMES", help="Corruptions to check (repeat or comma-separate); default all."
        ),
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="Use at most N images (by name).")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the table as JSON here.")] = None,
    suite: SuiteOpt = None,
    scale: ScaleOpt = None,
    person_px: PersonPxOpt = None,
    gsd: GsdOpt = None,
) -> None:
    """Check that every corruption's statistic moves strictly monotonically with severity (exit 1 if not).

    A folder is corrupted in memory (image id = file stem); a split (has manifest.json) is read from disk.

    In a split, test/clean is compared with test/<corruption>_s<k>; conditions not on disk are skipped.
    """
    check_outputs({"--json": json_out}, [path])
    calibration = api.calibrate(
        path, _split_names(corruptions), limit, scale=value(scale), person_px=person_px, gsd_cm_per_px=gsd, suite=suite
    )
    table, violations = calibration.table, calibration.violations
    bad = {v.corruption for v in violations}
    seen = table.clean_visibility
    title = (
        f"calibration on {table.n_images} image(s)  config {table.config_hash}  seed {table.seed}\nscale: {table.scale}"
    )
    if seen is not None:
        title += (
            f"\nvisibility V (Rose): clean median {_fmt_v(seen.median)}, {_fmt_share(seen.detectable_share)} "
            f"with V >= 5, over {seen.n_measured} of {seen.n_persons} person(s)"
        )
    rt = Table(title=title)
    columns = [
        ("corruption", "left"),
        ("sev", "right"),
        ("statistic", "left"),
        ("mean", "right"),
        ("std", "right"),
        ("clean", "right"),
        ("n", "right"),
        ("monotone", "center"),
    ]
    if seen is not None:  # after the check, so that a table split to fit the terminal keeps it in its first part
        columns += [("V med", "right"), ("V≥5", "right")]
    for col, just in columns:
        rt.add_column(col, justify=just)
    for name in table.corruptions:
        ladder = table.ladder(name)
        for i, r in enumerate(ladder):
            first = i == 0
            mark = (styled(("✗", "red")) if name in bad else styled(("✓", "green"))) if first else ""
            cells = [
                name if first else "",
                str(r.severity),
                f"{r.statistic} {_ARROW.get(r.direction, '')}" if first else "",
                _fmt_stat(r.mean),
                _fmt_stat(r.std),
                _fmt_stat(r.clean_mean) if first else "",
                str(r.n),
                mark,
            ]
            if seen is not None:
                cells += [_fmt_v(r.visibility_median), _fmt_share(r.visibility_detectable_share)]
            rt.add_row(*cells, end_section=i == len(ladder) - 1)
    out.print(fit(rt))
    below = calibration.below_floor
    if seen is not None:
        floor = f"visibility floor (median V at the highest severity >= {calibration.floor:g} x clean): "
        out.print(
            floor + ("met by every ladder" if not below else "not met by " + ", ".join(v.corruption for v in below)),
            highlight=False,
        )
        for v in below:
            out.print(f"  {v.corruption}: {v.message}", highlight=False)
    if json_out is not None:
        api.write_json(calibration.to_dict(), json_out)
    if violations:
        for v in violations:
            out.print(styled(("✗", "red"), f" {v.corruption}: {v.message}"), soft_wrap=True)
        names = ", ".join(sorted(bad))
        raise fail(f"{len(bad)} severity ladder(s) not strictly monotone: {names}")


def _fmt_dist(v, ratio: bool) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return f"×{v:.3g}" if ratio else f"{v:.3g}"


def realism_cmd(
    real_dir: Annotated[
        Path,
        typer.Argument(
            metavar="REAL_DIR",
            help="A folder of real frames taken in the condition (every image file in it).",
            show_default=False,
        ),
    ],
    condition: Annotated[
        str,
        typer.Option(
            "--condition",
            help="The condition the frames show, as the split names it: clean or <corruption>_s<1-3>.",
            show_default=False,
        ),
    ],
    split_dir: Annotated[
        Path,
        typer.Option(
            "--split-dir",
            help="A split from `aegis build-splits` holding that condition's test images.",
            show_default=False,
        ),
    ],
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the comparison as JSON here.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="Use at most N images of each set (by name).")] = None,
) -> None:
    """Compare the camera physics of a rendered condition with real frames of it.

    Measures noise against brightness, the noise's lag-1 correlation, chroma against luma noise, edge width, the
    contrast and dark channel by depth band, the airlight and the streaks' width and orientation on the real
    frames, on the split's test/<condition> images and on its test/clean images, and prints each beside
    the others with its distance from the real frames (docs/CORRUPTIONS.md, "Checking the physics against real
    footage").
    """
    check_outputs({"--json": json_out}, [real_dir, split_dir])
    report = api.realism(real_dir, split_dir, condition, limit)
    sets = {"real": report.real, "rendered": report.rendered, "clean": report.clean}
    near, base = report.rendered_distance, report.clean_distance
    rt = Table(
        title=f"{condition}: {report.real.n_images} real frame(s) vs {report.rendered.n_images} rendered, "
        f"{report.clean.n_images} clean"
    )
    for col, just in (
        ("statistic", "left"),
        ("unit", "left"),
        ("real", "right"),
        ("rendered", "right"),
        ("clean", "right"),
        ("rendered↔real", "right"),
        ("clean↔real", "right"),
    ):
        rt.add_column(col, justify=just)
    rows = (
        ("noise_sigma", "DN", lambda st: _fmt_v(st.noise.noise_sigma), True),
        ("noise_curve", "ln σ", lambda st: f"{sum(1 for v in st.noise.sigma if math.isfinite(v))} bins", False),
        ("noise_autocorrelation", "ρ lag 1", lambda st: _fmt_stat(st.correlation), False),
        ("chroma_luma_noise_ratio", "σC / σY", lambda st: _fmt_stat(st.chroma_ratio), False),
        ("edge_width", "px", lambda st: _fmt_v(st.edge_width), True),
        # The atmosphere (docs/CORRUPTIONS.md): haze by depth band, He et al.'s dark channel and airlight, streaks.
        (
            "contrast_by_band",
            "DN far→near",
            lambda st: "/".join(_fmt_band(v) for v in st.atmosphere.contrast_bands),
            False,
        ),
        ("dark_channel", "DN", lambda st: _fmt_v(st.atmosphere.dark_channel), False),
        ("airlight", "R, G, B DN", lambda st: ", ".join(_fmt_band(v) for v in st.atmosphere.airlight), False),
        ("streak_width", "px", lambda st: _fmt_v(st.atmosphere.streak_width), True),
        (
            "streak_orientation",
            "° (anisotropy)",
            lambda st: f"{_fmt_band(st.atmosphere.streak_orientation)} ({_fmt_v(st.atmosphere.streak_anisotropy)})",
            False,
        ),
    )
    for key, unit, show, ratio in rows:
        rt.add_row(
            key, unit, *(show(st) for st in sets.values()), _fmt_dist(near[key], ratio), _fmt_dist(base[key], ratio)
        )
    out.print(fit(rt))
    ct = Table(title="noise σ (DN) per brightness bin (flat blocks)")
    for col in ("luma DN", "real", "rendered", "clean"):
        ct.add_column(col, justify="right")
    for k, centre in enumerate(report.real.noise.centres):
        cells = [
            f"{st.noise.sigma[k]:.2f} ({st.noise.counts[k]})" if math.isfinite(st.noise.sigma[k]) else "-"
            for st in sets.values()
        ]
        if any(c != "-" for c in cells):
            ct.add_row(f"{centre:g}", *cells)
    out.print(fit(ct))
    if report.glint is not None:
        gt = Table(title="sun glint: saturated pixels (luma > 0.94; rendered: those it added) and where they fall")
        for col in ("statistic", "real", "rendered", "clean"):
            gt.add_column(col, justify="left" if col == "statistic" else "right")
        for label, show in (
            ("glint on water (share of glint px)", lambda g: _fmt_stat(g.on_water)),
            ("water px glinting", lambda g: _fmt_stat(g.water_share)),
            ("land px glinting", lambda g: _fmt_stat(g.land_share)),
            ("sparkles", lambda g: str(g.sparkles)),
            ("sparkle size (median px)", lambda g: _fmt_v(g.sparkle_px)),
            ("sparkles per MP of water", lambda g: _fmt_v(g.per_mp_water)),
        ):
            gt.add_row(label, *(show(g) for g in report.glint.values()))
        out.print(fit(gt))
    for key, text in api.DISTANCES.items():
        out.print(f"{key}: {text}", highlight=False, soft_wrap=True)
    if json_out is not None:
        api.write_json(report.to_dict(), json_out)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root app."""
    add_command(app, "list", list_cmd)
    add_command(app, "corrupt", corrupt_cmd)
    add_command(app, "grid", grid_cmd)
    add_command(app, "calibrate", calibrate_cmd)
    add_command(app, "realism", realism_cmd)
