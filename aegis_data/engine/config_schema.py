"""What a corruption-suite config may hold: each parameter's type and allowed range (docs/CORRUPTIONS.md,
"Allowed parameter values").

A config reaches the engine from the installed file, a split's own ``corruptions.yaml`` or any bytes handed to
``config_from_bytes``; every route goes through :func:`validate_suite`, so a value the kernels cannot take
(NaN, an infinite gain, a zero noise base, a blur wider than any frame) is one AegisError naming the key, never
a crash, a hang or a silent wrong image. The ranges hold the shipped suite with room to tune; their bounds are
what keeps a kernel's arithmetic and memory bounded (a frame-independent noise grid, a blur kernel, a streak
count), not a claim about which disasters are realistic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

from aegis_data.errors import AegisError

# Top-level keys a suite config may hold; ``scale`` is an optional block read (and checked) elsewhere.
# ``generation`` (1 or 2) and ``camera`` (generation 2: the default camera and platform of a scene) are optional.
TOP_LEVEL_KEYS = ("suite", "seed", "generation", "camera", "families", "calibration_threshold", "corruptions", "scale")
CORRUPTION_KEYS = ("family", "statistic", "direction", "severities", "fixed", "model")
DIRECTIONS = ("increase", "decrease")
# The calibration statistics a corruption may declare (computed by aegis_data.engine.calibration.STATISTICS).
CALIBRATION_STATISTICS = (
    "saturated_fraction",
    "rms_contrast",
    "occluded_fraction",
    "red_blue_ratio",
    "streak_density",
    "edge_strength",
    "mean_luminance",
    "noise_sigma",
    "edge_width",
    "luma_snr",
    "local_contrast",
    "glint_area",
)
CALIBRATION_KEYS = {"saturated_luma": (0.0, 1.0), "occluded_delta": (0.0, 1.0)}
MAX_SEED = 2**63 - 1
# The finest value-noise grid has base * 2**(octaves - 1) cells on the long side, whatever the frame size.
MAX_NOISE_CELLS = 2048


@dataclass(frozen=True)
class Param:
    """One parameter: ``kind`` is "number", "int", "rgb" (three numbers), "pair" (two numbers, low <= high) or
    "two" (two numbers in any order);
    every number lies in [lo, hi] (``lo_open``: strictly above lo)."""

    kind: str
    lo: float
    hi: float
    why: str
    lo_open: bool = False
    required: bool = True

    def describe(self) -> str:
        what = {
            "number": "a number",
            "int": "an integer",
            "rgb": "a list of 3 numbers",
            "pair": "a list of 2 numbers (low <= high)",
            "two": "a list of 2 numbers",
        }[self.kind]
        return f"{what} in {'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}]"


def _fraction(why: str) -> Param:
    return Param("number", 0.0, 1.0, why)


def _gain(why: str, required: bool = True) -> Param:
    return Param("number", 0.0, 8.0, why, required=required)


_COLOUR = Param("rgb", 0.0, 1.0, "an RGB colour in [0, 1] per channel")
_OCTAVES = Param("int", 1, 8, "octaves of value noise; each doubles the grid")
_BASE = Param("number", 1.0, MAX_NOISE_CELLS, "cells of the coarsest noise grid on the long side")
_TRANSMISSION = _fraction("share of the scene that reaches the camera")

# Generation-2 parameters several models share (the same quantity, the same range).
_SHUTTER_LIMIT = Param("number", 0.0, 1000.0, "longest exposure the auto-exposure chooses, in ms", lo_open=True)
_ISO_CAP = Param("number", 1.0, 409600.0, "highest ISO the auto-exposure chooses")
_CHROMA_DENOISE = Param(
    "number",
    0.0,
    8.0,
    "std of the camera's chroma denoise blur, in px of the frame (not scaled: the camera works on its pixels)",
)
_REFRACTIVE_INDEX = Param("number", 1.0, 2.0, "refractive index of the water", lo_open=True)
_REFLECTANCE_SATURATION = Param("rgb", 0.0, 1.0, "water-leaving reflectance of sediment-saturated water")
_REFLECTANCE_HALF = Param("rgb", 0.001, 100000.0, "sediment at half the saturated reflectance, g/m^3")
_SKY = Param("rgb", 0.0, 4.0, "sky light in units of the frame's white, where the frame shows no sky")
_HEADING_RANGE = Param("pair", -360.0, 360.0, "range of the flight direction in the image, from +x")
_SUN_ELEVATION_RANGE = Param("pair", 0.0, 90.0, "sun elevation drawn when the scene does not know it")
_SCENE_REFLECTANCE = Param(
    "number",
    0.0,
    1.0,
    "mean reflectance of the ground the clean exposure was set for (the "
    "light level of a view without sky: mean luminance / this)",
    lo_open=True,
)

# aegis-v2's plumes (smoke_plume, dust_plume); the local plume's keys are optional (a regional layer has none).
_PLUME = {
    "visibility_m": Param(
        "number",
        1.0,
        100000.0,
        "meteorological visibility inside the plume, m (extinction 3.912 / visibility at 550 nm)",
    ),
    "layer_height_m": Param("number", 0.0, 20000.0, "height of the particle layer above the ground, m", lo_open=True),
    "albedo": Param("rgb", 0.0, 1.0, "single-scattering albedo per channel"),
    "angstrom": Param("number", -1.0, 4.0, "Angstrom exponent of the extinction"),
    "density_amplitude": _fraction("spatial variation of the plume's density around its mean"),
    "noise_octaves": Param("int", 1, 6, "octaves of the plume's structure; each halves its eddies"),
    "structure_m": Param("number", 1.0, 100000.0, "across-wind size of the plume's largest eddies over the ground, m"),
    "elongation": Param("number", 1.0, 20.0, "how many times longer the structure is along the wind than across"),
    "scene_reflectance": _SCENE_REFLECTANCE,
    "direct_fraction": _fraction("share of the ground's light that comes straight from the sun"),
    "shadow_height_m": Param("number", 0.0, 10000.0, "height of the plume that casts the shadow, m"),
    "sun_elevation_range_deg": _SUN_ELEVATION_RANGE,
    "plume_size_m": Param(
        "number", 0.0, 100000.0, "longest path through a local plume, m (0: a regional layer)", required=False
    ),
    "plume_radius_m": Param(
        "number",
        0.0,
        100000.0,
        "a local plume's across-wind std over the ground, m (0: fills the view)",
        required=False,
    ),
    "coat": Param(
        "number", 0.0, 1.0, "share of the ground the settled particles cover at the plume's core", required=False
    ),
    "coat_colour": Param("rgb", 0.0, 1.0, "colour of the settled particles", required=False),
}
_HAZE = {
    "transmission": _TRANSMISSION,
    "noise_octaves": _OCTAVES,
    "noise_base": _BASE,
    "amplitude": _fraction("spatial variation of the transmission"),
    "airlight": _COLOUR,
}
PARAMETERS: Mapping[str, Mapping[str, Param]] = {
    "water_glare": {
        "coverage": _fraction("share of the frame under glare"),
        "intensity": _fraction("glare brightness"),
        "bloom_sigma_px": Param("number", 0.0, 200.0, "bloom blur std per 1000 px (the blur grows with it)"),
        "noise_octaves": _OCTAVES,
        "noise_base": _BASE,
        "bloom_weight": _fraction("weight of the bloom in the screen blend"),
        "tint": _COLOUR,
    },
    "turbidity_cast": {
        "alpha": _fraction("blend weight of the cast colour"),
        "contrast": Param("number", 0.0, 2.0, "contrast factor (1 = unchanged)"),
        "saturation": Param("number", 0.0, 2.0, "saturation factor (1 = unchanged)"),
        "cast": _COLOUR,
    },
    "inundation": {
        "coverage": _fraction("share of the frame under water"),
        "opacity": _fraction("opacity of the water layer"),
        "ripple_amplitude_px": Param("number", 0.0, 50.0, "ripple displacement per 1000 px"),
        "noise_octaves": _OCTAVES,
        "noise_base": _BASE,
        "feather_sigma_px": Param("number", 0.0, 200.0, "shoreline blur std per 1000 px"),
        "water": _COLOUR,
        "ripple_wavelength_px": Param("number", 0.0, 1000.0, "ripple wavelength per 1000 px", lo_open=True),
        "sparkle_octaves": _OCTAVES,
        "sparkle_base": _BASE,
        "sparkle_coverage": _fraction("share of the water that sparkles"),
        "sparkle_strength": _fraction("brightness of a sparkle"),
    },
    "rain_streaks": {
        "density_per_mp": Param("number", 0.0, 20000.0, "streaks per megapixel (each one is drawn)"),
        "length_px": Param("number", 0.0, 500.0, "streak length per 1000 px"),
        "veil_sigma_px": Param("number", 0.0, 50.0, "veil blur std per 1000 px", lo_open=True),
        "brightness": _gain("brightness factor of the veiled frame"),
        "saturation": Param("number", 0.0, 2.0, "saturation factor (1 = unchanged)"),
        "angle_deg": Param("number", -360.0, 360.0, "streak angle from the +x axis"),
        "angle_jitter_image_deg": Param("number", 0.0, 180.0, "per-image angle jitter"),
        "angle_jitter_streak_deg": Param("number", 0.0, 180.0, "per-streak angle jitter"),
        "length_jitter": Param("pair", 0.0, 10.0, "range of the per-streak length factor"),
        "intensity": Param("pair", 0.0, 1.0, "range of the per-streak intensity"),
        "streak_blur_ksize": Param("int", 1, 31, "odd Gaussian kernel size of the streak blur"),
        "streak_blur_sigma": Param("number", 0.0, 20.0, "streak blur std in px", lo_open=True),
    },
    "motion_blur": {
        "length_px": Param("number", 0.0, 500.0, "blur length per 1000 px"),
        "min_length": Param("int", 1, 1000, "shortest blur in px"),
        "angle_range_deg": Param("pair", -360.0, 360.0, "range of the blur direction"),
    },
    "low_light": {
        "gain": _gain("exposure factor"),
        "k_shot": _fraction("shot-noise scale"),
        "sigma_read": _fraction("read-noise std"),
        "gamma": Param("number", 1.0, 4.0, "encoding gamma"),
        "red_gain": _gain("red channel factor"),
        "blue_gain": _gain("blue channel factor"),
    },
    "smoke_haze": dict(_HAZE),
    "fire_warm_tint": {
        **_HAZE,
        "red_gain": _gain("red channel factor", False),
        "blue_gain": _gain("blue channel factor", False),
    },
    "dust_haze": {**_HAZE, "grain": _fraction("grain strength"), "grain_octaves": _OCTAVES, "grain_base": _BASE},
    # Generation-2 models (aegis_data.engine.camera, aegis_data.engine.motion): physical units.
    "camera_low_light": {
        "ev_loss": Param("number", 0.0, 20.0, "scene light lost, in EV (stops) below the clean frame's"),
        "shutter_limit_ms": _SHUTTER_LIMIT,
        "iso_cap": _ISO_CAP,
        "chroma_denoise_sigma": _CHROMA_DENOISE,
    },
    # aegis-v2's water models (aegis_data.engine.glint, aegis_data.engine.flood).
    "sun_glint": {
        "wind_speed_mps": Param("number", 0.0, 30.0, "wind speed at 10 m over the water, in m/s (Cox & Munk slopes)"),
        "glint_patch_mm2": Param(
            "number", 0.0, 1.0e6, "apparent area of one glint patch on the water, in mm^2", lo_open=True
        ),
        "refractive_index": _REFRACTIVE_INDEX,
        "psf_sigma": Param("number", 0.0, 8.0, "std of the lens's point-spread function, in px of the frame"),
        "bloom_sigma": Param("number", 0.0, 64.0, "std of the bloom around saturated cores, in px of the frame"),
        "bloom_weight": _fraction("weight of the bloom in the screen blend"),
        "tint": _COLOUR,
    },
    "turbid_water": {
        "sediment_g_m3": Param("number", 0.0, 100000.0, "suspended sediment in the water, g/m^3"),
        "clear_g_m3": Param(
            "number", 0.0, 100000.0, "sediment that hides the clear water's own light to 1/e, g/m^3", lo_open=True
        ),
        "reflectance_saturation": _REFLECTANCE_SATURATION,
        "reflectance_half_g_m3": _REFLECTANCE_HALF,
        "refractive_index": _REFRACTIVE_INDEX,
        "sky": _SKY,
    },
    "flood": {
        "rise_m": Param("number", 0.0, 20.0, "rise of the water above the old waterline, in m"),
        "bank_slope": Param("number", 0.0, 10.0, "height gained per metre of smooth ground", lo_open=True),
        "roughness_dn": Param("number", 0.0, 255.0, "ground texture (DN) that doubles the slope", lo_open=True),
        "seed_quantile": Param(
            "number", 0.0, 1.0, "share of the smoothest ground that floods first in a frame without water", lo_open=True
        ),
        "sediment_g_m3": Param("number", 0.0, 100000.0, "suspended sediment in the floodwater, g/m^3"),
        "reflectance_saturation": _REFLECTANCE_SATURATION,
        "reflectance_half_g_m3": _REFLECTANCE_HALF,
        "secchi_depth_m": Param("number", 0.001, 100.0, "Secchi depth of the floodwater, in m"),
        "wet_band_m": Param("number", 0.0, 1.0, "height of wet ground above the waterline, in m"),
        "wet_darkening": _fraction("linear reflectance of wet ground over dry"),
        "micro_relief_m": Param("number", 0.0, 1.0, "amplitude of the ground's unevenness, in m"),
        "micro_relief_cell_m": Param("number", 0.01, 1000.0, "size of the ground's unevenness, in m"),
        "refractive_index": _REFRACTIVE_INDEX,
        "sky": _SKY,
    },
    "trajectory_blur": {
        "speed_mps": Param("number", 0.0, 60.0, "platform speed over the ground, in m/s"),
        "exposure_ms": Param("number", 0.0, 1000.0, "exposure time, in ms"),
        "jitter_mrad": Param("number", 0.0, 20.0, "RMS angular jitter of the camera during the exposure, in mrad"),
        "yaw_rate_dps": Param("number", 0.0, 360.0, "heading change rate during the exposure, in deg/s"),
        "heading_range_deg": _HEADING_RANGE,
    },
    # aegis-v2's atmosphere (aegis_data.engine.atmosphere, aegis_data.engine.rain): physical units.
    "smoke_plume": dict(_PLUME),
    "dust_plume": dict(_PLUME),
    "firelight": {
        "canopy_aod": Param("number", 0.0, 10.0, "optical depth of the smoke canopy at 550 nm (dimensionless)"),
        "fire_glow": Param(
            "number", 0.0, 4.0, "a local fire's extra light at its nearest point, relative to the canopy's light"
        ),
        "angstrom": Param("number", 0.0, 4.0, "Angstrom exponent of the canopy's optical depth"),
        "canopy_albedo": _fraction("single-scattering albedo of the smoke"),
        "asymmetry": _fraction("asymmetry parameter g of the smoke's scattering"),
        "white_balance_correction": _fraction(
            "share (in log) of the light's colour the camera's white balance removes"
        ),
        "flame_colour": _COLOUR,
        "glow_reach": Param("number", 0.0, 10.0, "distance at which a fire's glow halves, in long sides", lo_open=True),
        "sun_elevation_range_deg": _SUN_ELEVATION_RANGE,
        "shutter_limit_ms": _SHUTTER_LIMIT,
        "iso_cap": _ISO_CAP,
        "chroma_denoise_sigma": _CHROMA_DENOISE,
    },
    "rain_rate": {
        "rain_mm_h": Param("number", 0.0, 500.0, "rain rate, mm/h"),
        "lens_drops": Param("int", 0, 20, "drops sitting on the lens"),
        "rain_height_m": Param(
            "number", 0.0, 20000.0, "height of the rain column above the camera, m (sky sight lines)", lo_open=True
        ),
        "focal_mm": Param("number", 0.0, 1000.0, "the lens's real focal length, mm", lo_open=True),
        "f_number": Param("number", 0.5, 64.0, "the lens's f-number (aperture = focal length / f-number)"),
        "min_drop_mm": Param("number", 0.1, 6.0, "smallest drop drawn one by one, mm (smaller ones are in the veil)"),
        "nearest_drop_m": Param("number", 0.0, 100.0, "nearest drop to the lens drawn, m", lo_open=True),
        "sky_reflection": _fraction("share of a drop's radiance that is the sky's light it reflects"),
        "scene_reflectance": _SCENE_REFLECTANCE,
        "lens_drop_radius": Param("pair", 0.0, 0.5, "radius range of a drop on the lens, shares of the short side"),
        "heading_range_deg": _HEADING_RANGE,
    },
}
# The engine's models: the aegis-v1 models carry the name of their corruption; a generation-2 suite names other
# models with a corruption's ``model`` key (which of them a generation-1 suite may use: MODELS_V1 only).
MODELS_V1 = (
    "water_glare",
    "turbidity_cast",
    "inundation",
    "smoke_haze",
    "fire_warm_tint",
    "rain_streaks",
    "motion_blur",
    "low_light",
    "dust_haze",
)
# The corruptions a suite may declare (every suite's condition ids are these names with a severity): the names of
# the aegis-v1 models, whatever model a later suite renders them with.
CORRUPTION_NAMES = MODELS_V1
# Generation 2: the default camera and platform of every image (a per-image sidecar overrides the scene facts).
CAMERA: Mapping[str, Param] = {
    "hfov_deg": Param("number", 1.0, 170.0, "horizontal field of view of a full frame, in degrees"),
    "base_exposure_ms": Param("number", 0.0, 1000.0, "exposure time of the clean frames, in ms", lo_open=True),
    "base_iso": Param("number", 1.0, 409600.0, "ISO of the clean frames (the sensor's base ISO)"),
    "platform_speed_mps": Param("number", 0.0, 60.0, "platform speed of the clean flight, in m/s"),
    "readout_ms": Param("number", 0.0, 100.0, "rolling-shutter readout time of a full frame, in ms"),
    "shot_noise_base": Param(
        "number", 0.0, 1.0, "shot-noise variance per unit signal at base ISO (raw units)", lo_open=True
    ),
    "read_noise_line": Param(
        "two", -100.0, 100.0, "slope and intercept of log(read variance) against log(shot variance)"
    ),
    "white_balance": Param("rgb", 0.25, 8.0, "raw white-balance gains (R, G, B) of the clean light"),
    "max_content_shift_px": Param(
        "number",
        0.0,
        4.0,
        "largest displacement of image content a corruption may cause, in px (ground truth stays valid)",
    ),
}
# Parameters that belong together: (octaves, base) of one noise field, bounded in cells together.
NOISE_PAIRS = (("noise_octaves", "noise_base"), ("sparkle_octaves", "sparkle_base"), ("grain_octaves", "grain_base"))


def _is_number(v: Any) -> bool:
    return isinstance(v, Real) and not isinstance(v, bool)


def _float(v: Real) -> float:
    """``float(v)``, with an integer too large for a float (YAML reads 400 digits as an int) as infinity, so the
    range check refuses it rather than raising OverflowError."""
    try:
        return float(v)
    except OverflowError:
        return math.inf


def check_value(where: str, value: Any, p: Param) -> None:
    """AegisError naming ``where`` unless ``value`` has ``p``'s type and lies in its range."""
    if p.kind in ("rgb", "pair", "two"):
        n = 3 if p.kind == "rgb" else 2
        items = list(value) if isinstance(value, (list, tuple)) else []
        ok = len(items) == n and all(_is_number(v) for v in items)
    else:
        items = [value]
        ok = _is_number(value) and (p.kind != "int" or isinstance(value, Integral))
    ok = ok and all(
        math.isfinite(_float(v)) and (_float(v) > p.lo if p.lo_open else _float(v) >= p.lo) and _float(v) <= p.hi
        for v in items
    )
    if ok and p.kind == "pair":
        ok = float(items[0]) <= float(items[1])
    if ok and where.endswith("streak_blur_ksize"):
        ok = int(value) % 2 == 1
    if not ok:
        extra = " and odd" if where.endswith("streak_blur_ksize") else ""
        raise AegisError(f"{where} must be {p.describe()}{extra} ({p.why}); got {value!r:.60}")


def _mapping(where: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise AegisError(f"{where} must be a mapping, got {type(value).__name__}")
    return value


def _check_corruption(where: str, name: str, c: Any, generation: int = 1) -> None:  # noqa: C901 (predates the limit; split it when it next changes)
    c = _mapping(where, c)
    unknown = sorted(set(c) - set(CORRUPTION_KEYS))
    if unknown:
        raise AegisError(f"{where}: unknown keys {unknown}; expected {', '.join(CORRUPTION_KEYS)}")
    model = c.get("model", name)
    allowed = tuple(PARAMETERS) if generation >= 2 else MODELS_V1
    if not isinstance(model, str) or model not in allowed:
        raise AegisError(
            f"{where}.model must be one of {', '.join(allowed)}, got {model!r:.60}"
            + ("" if generation >= 2 else " (other models need generation: 2)")
        )
    for key in ("family", "statistic"):
        if not isinstance(c.get(key), str) or not c[key]:
            raise AegisError(f"{where}.{key} must be a non-empty string, got {c.get(key)!r:.60}")
    if c["statistic"] not in CALIBRATION_STATISTICS:
        raise AegisError(
            f"{where}.statistic: unknown calibration statistic {c['statistic']!r:.60}; expected one of "
            f"{', '.join(CALIBRATION_STATISTICS)}"
        )
    if c.get("direction") not in DIRECTIONS:
        raise AegisError(f"{where}.direction must be one of {', '.join(DIRECTIONS)}, got {c.get('direction')!r:.60}")
    schema = PARAMETERS[model]
    severities = _mapping(f"{where}.severities", c.get("severities"))
    fixed = _mapping(f"{where}.fixed", c.get("fixed") if c.get("fixed") is not None else {})
    values: dict[str, Any] = {}
    for block, items in (("severities", severities), ("fixed", fixed)):
        for key, value in items.items():
            at = f"{where}.{block}.{key}"
            if key not in schema:
                raise AegisError(f"{at}: {model} has no parameter {key!r}; its parameters: {', '.join(schema)}")
            if key in values:
                raise AegisError(f"{at}: {key} is given both per severity and fixed")
            if block == "severities":
                if not isinstance(value, list) or len(value) != 3:
                    raise AegisError(f"{at} must list 3 values (severity 1, 2, 3), got {value!r:.60}")
                for k, v in enumerate(value, start=1):
                    check_value(f"{at}[s{k}]", v, schema[key])
            else:
                check_value(at, value, schema[key])
            values[key] = value
    missing = [k for k, p in schema.items() if p.required and k not in values]
    if missing:
        raise AegisError(f"{where}: missing parameters {', '.join(missing)}")
    for octaves, base in NOISE_PAIRS:
        if octaves in values and base in values:
            for o, b in zip(_per_severity(values[octaves]), _per_severity(values[base])):
                if b * 2 ** (o - 1) > MAX_NOISE_CELLS:
                    raise AegisError(
                        f"{where}: {base} x 2**({octaves} - 1) = {b * 2 ** (o - 1):g} noise cells; at "
                        f"most {MAX_NOISE_CELLS} (the grid does not shrink with the frame)"
                    )


def _per_severity(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) and len(value) == 3 else [value] * 3


def validate_suite(raw: Any, where: str = "suite config") -> None:  # noqa: C901 (predates the limit; split it when it next changes)
    """AegisError (one line naming the key) unless ``raw``, a parsed suite config, is one the engine can run:
    known keys, a seed in [0, 2**63), families naming declared corruptions, calibration thresholds in [0, 1],
    and every corruption's parameters of the right type, finite and in range (:data:`PARAMETERS`)."""
    raw = _mapping(where, raw)
    unknown = sorted(str(k) for k in raw if k not in TOP_LEVEL_KEYS)
    if unknown:
        raise AegisError(f"{where}: unknown top-level keys {unknown}; expected {', '.join(TOP_LEVEL_KEYS)}")
    if "suite" in raw and (not isinstance(raw["suite"], str) or not raw["suite"]):
        raise AegisError(f"{where}: suite must be a non-empty string, got {raw['suite']!r:.60}")
    seed = raw.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, Integral) or not 0 <= int(seed) <= MAX_SEED:
        raise AegisError(f"{where}: seed must be an integer in [0, 2**63), got {seed!r:.60}")
    generation = raw.get("generation", 1)
    if isinstance(generation, bool) or generation not in (1, 2):
        raise AegisError(f"{where}: generation must be 1 or 2, got {generation!r:.60}")
    camera = raw.get("camera")
    if generation >= 2:
        camera = _mapping(f"{where}: camera", camera)
        for key in sorted(set(camera) - set(CAMERA)):
            raise AegisError(f"{where}: camera.{key} is unknown; expected {', '.join(CAMERA)}")
        for key, p in CAMERA.items():
            if key not in camera:
                raise AegisError(f"{where}: camera.{key} is missing ({p.why})")
            check_value(f"{where}: camera.{key}", camera[key], p)
    elif camera is not None:
        raise AegisError(f"{where}: camera applies to generation 2 suites only")
    corruptions = _mapping(f"{where}: corruptions", raw.get("corruptions"))
    for name, c in corruptions.items():
        if name not in CORRUPTION_NAMES:
            raise AegisError(f"{where}: unknown corruption {name!r}; this engine runs {', '.join(CORRUPTION_NAMES)}")
        _check_corruption(f"{where}: {name}", name, c, generation)
    families = _mapping(f"{where}: families", raw.get("families"))
    for fam, members in families.items():
        if not isinstance(fam, str) or not fam:
            raise AegisError(f"{where}: family names must be non-empty strings, got {fam!r:.60}")
        if not isinstance(members, list) or not all(isinstance(m, str) and m in corruptions for m in members):
            raise AegisError(f"{where}: family {fam!r} must list declared corruptions, got {members!r:.80}")
    thresholds = raw.get("calibration_threshold")
    for key, value in _mapping(f"{where}: calibration_threshold", thresholds if thresholds is not None else {}).items():
        if key not in CALIBRATION_KEYS:
            raise AegisError(f"{where}: calibration_threshold.{key} is unknown; expected {', '.join(CALIBRATION_KEYS)}")
        check_value(
            f"{where}: calibration_threshold.{key}",
            value,
            Param("number", *CALIBRATION_KEYS[key], "a luma level or difference in [0, 1]"),
        )
