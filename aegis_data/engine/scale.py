"""The length unit of the corruption suite: per 1000 px of the frame (``frame``) or per person (``object``).

Every spatial parameter of the suite (keys ending in ``_px``) is a length. Under ``frame`` scale (the aegis-v1
default, unchanged) it is given per 1000 px of the long side L of the frame being corrupted:
``px(v) = v * L / 1000``. That is right for a *resized* frame and wrong for a *crop*: a 640-px crop of a
3840-px frame holds the same people at the same pixel size, yet gets a 6x shorter motion blur.

Under ``object`` scale the unit is the dataset's *person unit* P (px): the median of ``sqrt(w * h)`` over the
ground-truth person boxes, or a value the user gives (``person_px``, or ``gsd_cm_per_px`` in cm/px). Lengths then
scale with the people, not the frame: ``px(v) = v * S / 1000`` with the *reference side*
``S = P * ANCHOR_LONG_SIDE / ANCHOR_PERSON_PX``, the long side a HERIDAL frame would have if its people were P
px tall. The anchor (4000-px frames, people of 60 px) is where the reference study's numbers were measured, so
on such frames both scales give the same parameters -- and the same pixels (tested).

Which parameters follow the unit, and why, is written in docs/CORRUPTIONS.md ("Scale"); this module only
defines the unit and its arithmetic. Frame scale passes no unit to the engine at all, so its code path is the
aegis-v1 one, bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aegis_data.errors import AegisError

FRAME = "frame"
OBJECT = "object"
SCALE_MODES = (FRAME, OBJECT)

# The calibration anchor: HERIDAL's 4000 x 3000 frames, whose median person box is about 60 px (sqrt(w h)).
ANCHOR_LONG_SIDE = 4000.0
ANCHOR_PERSON_PX = 60.0
# A person is about 1.7 m tall. Seen from a drone, an upright person's box is about half as wide as tall, so
# sqrt(w h) = height * sqrt(1/2); that factor turns a ground sampling distance into a person unit.
PERSON_HEIGHT_CM = 170.0
UPRIGHT_BOX_FACTOR = math.sqrt(0.5)
# Person units outside this range are not people at any plausible altitude (or a unit typo such as mm).
PERSON_PX_RANGE = (4.0, 2000.0)
# The ground sampling distances whose person unit lies in PERSON_PX_RANGE, as docs/CORRUPTIONS.md states them
# (inclusive). The exact ends, 120.2 / P for P = 2000 and 4, are 0.060104... and 30.052...; the documented
# 0.0601 lies just below the first, and was refused while the docs offered it. The unit of a gsd at that end is
# held inside PERSON_PX_RANGE (0.0601 gives 2000.03 px, kept at 2000).
GSD_RANGE_CM = (0.0601, 30.05)
_ROUND_DECIMALS = 2  # the unit is recorded to 0.01 px: readable, and identical wherever it is computed

# The basis a manifest records for a unit the caller gave, in words: a manifest is read by Python users and CLI
# users alike, so it never names a flag.
GIVEN_UNIT_BASIS = "given person unit"


def gsd_basis(gsd_cm_per_px: float) -> str:
    """The recorded basis of a unit computed from a ground sampling distance."""
    return f"ground sampling distance {float(gsd_cm_per_px):g} cm/px"


@dataclass(frozen=True)
class Scale:
    """How ``*_px`` parameters map to pixels.

    mode: ``frame`` or ``object``. person_px: the person unit in px (object only). basis: how the unit was
    found, for people (``"median sqrt(w*h) of 412 test boxes"``, ``"given person unit"``,
    ``"ground sampling distance 2.5 cm/px"``): words, never a CLI flag, as it is recorded in manifests.
    """

    mode: str = FRAME
    person_px: float | None = None
    basis: str = ""

    def __post_init__(self) -> None:
        if self.mode not in SCALE_MODES:
            raise AegisError(f"`scale` must be one of {', '.join(SCALE_MODES)}, got {self.mode!r}", param="scale")
        if self.mode == OBJECT:
            check_person_px(self.person_px)
        elif self.person_px is not None:
            raise AegisError("a person unit applies only to object scale", param="person_px")

    @property
    def is_object(self) -> bool:
        return self.mode == OBJECT

    @property
    def unit_px(self) -> float:
        """The person unit of an object scale (callers check ``is_object`` first: a frame scale has none)."""
        if self.person_px is None:
            raise AegisError("a frame scale has no person unit", param="scale")
        return self.person_px

    @property
    def reference_side(self) -> float | None:
        """S in px (object), or None (frame: each frame's own long side)."""
        if not self.is_object:
            return None
        return float(self.unit_px) * ANCHOR_LONG_SIDE / ANCHOR_PERSON_PX

    def identity(self) -> dict[str, Any] | None:
        """What a build records (and its root hash covers): None for frame, so the scale mechanism adds nothing to
        a frame build's identity (its root is what the build gives without it)."""
        if not self.is_object:
            return None
        return {"mode": OBJECT, "person_px": float(self.unit_px), "basis": self.basis}

    def describe(self) -> str:
        if not self.is_object:
            return "frame (lengths per 1000 px of each frame's long side)"
        return (
            f"object (person unit {self.person_px:g} px, {self.basis}; lengths per 1000 px of a "
            f"{self.reference_side:.6g}-px reference side)"
        )


FRAME_SCALE = Scale()


def pixel_length(value: float, height: int, width: int, reference_side: float | None) -> float:
    """``value`` per 1000 px of ``reference_side`` (None: the frame's long side, the frame scale)."""
    side = max(height, width) if reference_side is None else reference_side
    return float(value) * side / 1000.0


def density_factor(reference_side: float | None) -> float:
    """Multiplier of a per-megapixel density: 1 under frame scale; ``(ANCHOR_LONG_SIDE / S)**2`` under object
    scale, so the count per *person area* is the anchor's (60 px people at 120 streaks/MP)."""
    if reference_side is None:
        return 1.0
    return (ANCHOR_LONG_SIDE / reference_side) ** 2


def texture_cells(base: float, height: int, width: int, reference_side: float | None) -> float:
    """Cells along the long side of a fine texture declared as ``base`` cells per frame at the anchor: unchanged
    under frame scale, ``base * L / S`` under object scale (the same cell size per person)."""
    if reference_side is None:
        return base
    return float(base) * max(height, width) / reference_side


def _is_finite_number(value: Any) -> bool:
    """An int (any size) or a finite float, not a bool."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, int) or math.isfinite(value)


def _param_named(what: str) -> str | None:
    """The parameter a ``what`` such as ``"`person_px`"`` names, or None for words (a manifest or config key)."""
    return what[1:-1] if len(what) > 2 and what[0] == what[-1] == "`" else None


def check_person_px(value: Any, what: str = "person unit") -> float:
    """A finite person unit inside ``PERSON_PX_RANGE``; else AegisError naming ``what``."""
    if not _is_finite_number(value):
        raise AegisError(f"{what} must be a finite number of px, got {value!r:.60}", param=_param_named(what))
    lo, hi = PERSON_PX_RANGE
    if not lo <= value <= hi:  # compared as given: float() of a 400-digit int would overflow
        raise AegisError(f"{what} must lie in [{lo:g}, {hi:g}] px, got {value!r:.60}", param=_param_named(what))
    return float(value)


def person_unit_from_gsd(gsd_cm_per_px: Any, what: str = "`gsd_cm_per_px`") -> float:
    """The person unit (px) of a 1.7 m person at ``gsd_cm_per_px`` (ground sampling distance), rounded; inside
    ``PERSON_PX_RANGE`` because the gsd must lie in ``GSD_RANGE_CM``, else AegisError naming ``what``."""
    if not _is_finite_number(gsd_cm_per_px):
        raise AegisError(
            f"{what} must be a finite number of cm per px, got {gsd_cm_per_px!r:.60}", param=_param_named(what)
        )
    lo, hi = GSD_RANGE_CM
    if not lo <= gsd_cm_per_px <= hi:
        raise AegisError(
            f"{what} must lie in [{lo:.4g}, {hi:.4g}] cm per px (a person unit of "
            f"{PERSON_PX_RANGE[0]:g} to {PERSON_PX_RANGE[1]:g} px), got {gsd_cm_per_px!r:.60}",
            param=_param_named(what),
        )
    unit = round(PERSON_HEIGHT_CM / float(gsd_cm_per_px) * UPRIGHT_BOX_FACTOR, _ROUND_DECIMALS)
    return min(max(unit, PERSON_PX_RANGE[0]), PERSON_PX_RANGE[1])


def person_unit_from_boxes(boxes: Iterable[Iterable[float]]) -> tuple[float, int]:
    """(median of ``sqrt(w h)`` over ``x0, y0, x1, y1`` boxes rounded to 0.01 px, boxes used).

    The median, not the mean: a few huge boxes (a person at the frame edge, a mislabelled group) must not move
    the unit. Boxes under 1 px on a side are skipped (annotation slips). (nan, 0) when none are left.
    """
    sizes = sorted(
        math.sqrt((x1 - x0) * (y1 - y0))
        for x0, y0, x1, y1 in ((float(v) for v in b) for b in boxes)
        if x1 - x0 >= 1.0 and y1 - y0 >= 1.0
    )
    n = len(sizes)
    if not n:
        return float("nan"), 0
    mid = n // 2
    median = sizes[mid] if n % 2 else (sizes[mid - 1] + sizes[mid]) / 2.0
    return round(median, _ROUND_DECIMALS), n


def resolve_scale(
    mode: str | Scale | None,
    records: Mapping[str, Iterable[Any]] | None = None,
    *,
    person_px: float | None = None,
    gsd_cm_per_px: float | None = None,
) -> Scale:
    """The build's :class:`Scale` from the user's choice.

    ``mode``: ``"frame"`` (default), ``"object"`` or a ready Scale. Under object scale the unit is, in order:
    ``person_px``; the unit of a ``gsd_cm_per_px``; the median person box of the *test* records; the median
    over the other splits' records when test has no boxes. No boxes anywhere and no unit given: AegisError
    (the unit cannot be guessed). ``records``: split -> records with ``.boxes`` (x0, y0, x1, y1); None when the
    caller has no boxes at all (one image, a folder of images), so the unit must be given.
    """
    if isinstance(mode, Scale):
        if person_px is not None or gsd_cm_per_px is not None:
            raise AegisError(
                "give the person unit either in the Scale or as `person_px` / `gsd_cm_per_px`, not both",
                param="person_px" if person_px is not None else "gsd_cm_per_px",
            )
        return mode
    mode = FRAME if mode is None else str(mode).strip().lower()
    if mode not in SCALE_MODES:
        raise AegisError(f"`scale` must be one of {', '.join(SCALE_MODES)}, got {mode!r}", param="scale")
    if mode == FRAME:
        if person_px is not None or gsd_cm_per_px is not None:
            raise AegisError(
                "`person_px` and `gsd_cm_per_px` set the person unit of `scale` object; they have no "
                "meaning under `scale` frame",
                param="person_px" if person_px is not None else "gsd_cm_per_px",
            )
        return FRAME_SCALE
    if person_px is not None and gsd_cm_per_px is not None:
        raise AegisError("give the person unit once: `person_px` or `gsd_cm_per_px`, not both", param="person_px")
    if person_px is not None:
        return Scale(OBJECT, round(check_person_px(person_px, "`person_px`"), _ROUND_DECIMALS), GIVEN_UNIT_BASIS)
    if gsd_cm_per_px is not None:
        return Scale(OBJECT, person_unit_from_gsd(gsd_cm_per_px), gsd_basis(gsd_cm_per_px))
    if records is None:  # one image or a folder of images: nothing to measure a person on
        raise AegisError(
            "`scale` object here needs the person unit, as there are no person boxes to measure it "
            "from: give `person_px` (px) or `gsd_cm_per_px` (cm per px)",
            param="person_px",
        )
    order = ["test"] + sorted(s for s in records if s != "test")
    for split in order:
        unit, n = person_unit_from_boxes(b for r in records.get(split, ()) for b in r.boxes)
        if n:
            return Scale(
                OBJECT,
                check_person_px(unit, f"the median person box of the {split} split"),
                f"median sqrt(w*h) of {n} {split} box{'es' if n != 1 else ''}",
            )
    raise AegisError(
        "`scale` object needs the dataset's person size, but its splits hold no person boxes; "
        "give it with `person_px` (px) or `gsd_cm_per_px` (cm per px)",
        param="person_px",
    )


def suite_unit_scale(block: Mapping[str, Any]) -> Scale | None:
    """The object Scale of a suite config's ``scale`` block when that block gives a unit (``person_px`` or
    ``gsd_cm_per_px``, allowed under mode object only), else None; its basis names the suite config key."""
    if block.get("person_px") is not None:
        what = "suite config scale.person_px"
        return Scale(OBJECT, round(check_person_px(block["person_px"], what), _ROUND_DECIMALS), what)
    if block.get("gsd_cm_per_px") is not None:
        gsd = block["gsd_cm_per_px"]
        what = "suite config scale.gsd_cm_per_px"
        return Scale(OBJECT, person_unit_from_gsd(gsd, what), f"{what} {float(gsd):g} cm/px")
    return None


def suite_call_scale(
    suite_scale: Mapping[str, Any],
    scale: str | Scale | None = None,
    records: Mapping[str, Iterable[Any]] | None = None,
    *,
    person_px: float | None = None,
    gsd_cm_per_px: float | None = None,
    physical_suite: str | None = None,
) -> Scale:
    """The Scale a command uses with a suite whose ``scale`` block is ``suite_scale``: the call's mode (a name or a
    ready Scale), else the suite's; under object scale with no unit from the call, the suite's unit when it
    declares one, else :func:`resolve_scale`'s (``person_px`` / ``gsd_cm_per_px``, then the ``records``' median
    person box). ``physical_suite``: the name of a suite that renders in physical units (aegis-v2), which takes
    object scale only."""
    mode = suite_scale.get("mode", FRAME) if scale is None else scale
    name = mode.mode if isinstance(mode, Scale) else str(mode).strip().lower()
    if physical_suite is not None and name == FRAME:
        raise AegisError(
            f"suite {physical_suite} renders in physical units and takes `scale` object only", param="scale"
        )
    if person_px is None and gsd_cm_per_px is None and not isinstance(mode, Scale) and name == OBJECT:
        unit = suite_unit_scale(suite_scale)
        if unit is not None:
            return unit
    return resolve_scale(mode, records, person_px=person_px, gsd_cm_per_px=gsd_cm_per_px)


def scale_from_record(value: Any, where: str = "manifest") -> Scale:
    """The Scale a manifest (or build state) recorded: absent/None means frame; else AegisError on a bad block."""
    if value is None:
        return FRAME_SCALE
    if not isinstance(value, dict) or value.get("mode") != OBJECT or set(value) - {"mode", "person_px", "basis"}:
        raise AegisError(f"{where}: 'scale' must be an object {{mode: object, person_px, basis}}, got {value!r:.120}")
    basis = value.get("basis", "")
    if not isinstance(basis, str):
        raise AegisError(f"{where}: scale.basis must be a string, got {basis!r:.60}")
    return Scale(OBJECT, check_person_px(value.get("person_px"), f"{where}: scale.person_px"), basis)


# Parameters that follow the unit, by kind (docs/CORRUPTIONS.md, "Scale", gives the reason for each):
# every ``*_px`` key is a length; ``density_per_mp`` a count per area; these two fine textures have their cell
# size follow the unit. Everything else (coverages, gains, the large haze / water / glint layouts) does not.
TEXTURE_KEYS = ("sparkle_base", "grain_base")
DENSITY_KEYS = ("density_per_mp",)


def is_scaled_parameter(key: str) -> bool:
    return key.endswith("_px") or key in TEXTURE_KEYS or key in DENSITY_KEYS


def effective_value(key: str, value: float, scale: Scale, long_side: int | None) -> tuple[float, str]:
    """(the value ``key`` takes in pixels, its unit) under ``scale`` on a frame of ``long_side`` px.

    Lengths in px; densities in streaks per megapixel of the frame; textures as the cell size in px of their
    coarsest octave. Under object scale none of these depends on the frame (``long_side`` may be None); under
    frame scale it is required.
    """
    side = scale.reference_side if scale.is_object else long_side
    if side is None:
        raise AegisError(
            "effective values under `scale` frame depend on the frame: give its long side", param="long_side"
        )
    if key in DENSITY_KEYS:
        return float(value) * density_factor(scale.reference_side), "per MP"
    if key in TEXTURE_KEYS:
        return float(side) / float(value), "px cells"
    return float(value) * float(side) / 1000.0, "px"


def effective_parameters(spec: Any, scale: Scale, long_side: int | None) -> dict[str, dict[str, Any]]:
    """{parameter: {"unit", "values" (s1, s2, s3)}} for the parameters of corruption ``spec`` (a suite entry with
    ``severities`` and ``fixed``) that follow the length unit, as :func:`effective_value` gives them."""
    found = {}
    params = [(k, list(v)) for k, v in spec.severities.items()] + [(k, [v] * 3) for k, v in spec.fixed.items()]
    for key, values in params:
        if is_scaled_parameter(key):
            pairs = [effective_value(key, v, scale, long_side) for v in values]
            found[key] = {"unit": pairs[0][1], "values": [p[0] for p in pairs]}
    return found
