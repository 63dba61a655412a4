"""Severity calibration (docs/CORRUPTIONS.md, "Severity calibration"): one statistic per corruption, and the check that
its ladder is monotone.

Every statistic is a pure function of uint8 RGB arrays and is computed in float64 on values in [0, 1], with
luma ``Y = 0.299 R + 0.587 G + 0.114 B``. Which statistic a corruption uses, and in which direction it must
move with severity, is declared in the suite file (``configs/suites/``); nothing here hard-codes that mapping.

Statistics (direction as declared for the corruptions that use them):

- ``saturated_fraction = mean(Y > 0.94)`` (glare, up)
- ``rms_contrast = std(Y)`` (turbidity, smoke, dust; down)
- ``occluded_fraction = mean(|Y - Y_clean| > 0.08)`` (inundation, up; needs the clean image)
- ``red_blue_ratio = mean(R) / mean(B)`` (fire, up)
- ``streak_density`` (rain, up; needs the clean image) - see :func:`streak_density`
- ``edge_strength = mean Sobel magnitude of Y`` (motion, down)
- ``mean_luminance = mean(Y)`` (low light, down)
- ``noise_sigma``: median luma noise std over flat blocks, in DN (camera noise, up) - see
  :func:`aegis_data.engine.realism.noise_curve`
- ``edge_width``: median 10-90 % rise distance across strong edges in their most blurred orientation, in px
  (blur, up) - see :func:`aegis_data.engine.realism.edge_widths`
- ``local_contrast``: mean over 8x8 blocks of the luma's std (haze, rain veil; down)
- ``luma_snr``: mean luma over the standard deviation of the noise the corruption added, both in DN (camera
  noise and darkening together, down; needs the clean image) - see :func:`luma_snr`
- ``glint_area``: share of the frame's 16 x 16 blocks in which some pixel's luma rose by more than 0.2 over the
  clean image (sun glint spreading over the water with the wind, up; needs the clean image) - see :func:`glint_area`

A ladder passes :func:`check_monotone` when the mean statistic over the image set moves strictly in the
declared direction from severity 1 to 3 *and* severity 1 already lies strictly beyond the clean value.

Where the person boxes are known (a split's ``annotations/test.json``), each row also carries the persons'
detector-free visibility: the median Rose index V and the share with V >= 5
(:mod:`aegis_data.engine.visibility`). It is reported, not checked.

Layers: the statistics and :func:`check_monotone` are pure; :func:`calibrate` streams images through an
injectable ``corrupt`` function (default: the engine, in memory); :func:`calibrate_folder` /
:func:`calibrate_rendered` are the disk edge used by ``aegis calibrate`` (a split's manifest is read on the split
side, ``aegis_data.split.measure``, which passes its suite and scale down). The visual counterpart of a ladder,
the severity contact sheet (``aegis grid``), is in ``aegis_data.engine.grid``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from aegis_data.conditions import SEVERITIES, check_severities, condition_id
from aegis_data.engine.config import SuiteConfig, load_config
from aegis_data.engine.corruptions import scene_for
from aegis_data.engine.corruptor import SuiteCorruptor
from aegis_data.engine.realism import edge_width, noise_sigma
from aegis_data.engine.scale import FRAME_SCALE, Scale, pixel_length, suite_call_scale
from aegis_data.engine.visibility import VisibilitySummary, person_visibility, summarize_visibility
from aegis_data.errors import AegisError
from aegis_data.files.imageio import IMAGE_SUFFIXES, read_rgb
from aegis_data.files.imageio import list_images as images_in_folder
from aegis_data.files.layout import annotation_path, condition_dir, image_file_name
from aegis_data.files.readers import coco_boxes_by_stem, read_coco_gt
from aegis_data.files.rgb import check_rgb_image

# Defaults for the two thresholds the config also declares (``calibration_threshold``); the config wins.
SATURATED_LUMA = 0.94
OCCLUDED_DELTA = 0.08
# streak_density: a pixel counts as a streak when its luma exceeds the veil-only bound by this much. Streaks
# add screen(., 0.15..0.45) before a 3x3 blur, well over 0.03 at their cores; 0.02 let JPEG-textured photos
# produce false positives on the veil alone, 0.03 produced none (measured on the golden frames, bus, zidane).
STREAK_MARGIN = 0.03
# The veil's blur sigmas per 1000 px of the long side, used when the config has no rain entry.
_VEIL_SIGMA_FALLBACK = (0.4, 0.8, 1.2)

# corrupt(image, corruption, severity, image_id) -> corrupted HxWx3 uint8, or None when not available.
Corruptor = Callable[[np.ndarray, str, int, str], "np.ndarray | None"]


# --- input checks and luma ------------------------------------------------------------------------------
def _check_pair(corrupted: object, clean: object) -> tuple[np.ndarray, np.ndarray]:
    a = check_rgb_image(corrupted, "corrupted image")
    b = check_rgb_image(clean, "clean image")
    if a.shape != b.shape:
        raise AegisError(f"corrupted and clean images differ in shape: {a.shape} vs {b.shape}")
    return a, b


def luma(rgb: np.ndarray) -> np.ndarray:
    """HxW float64 luma in [0, 1]: ``(0.299 R + 0.587 G + 0.114 B) / 255``."""
    check_rgb_image(rgb, "image")
    r = rgb[:, :, 0].astype(np.float64)
    g = rgb[:, :, 1].astype(np.float64)
    b = rgb[:, :, 2].astype(np.float64)
    return (0.299 * r + 0.587 * g + 0.114 * b) / 255.0


# --- the statistics ------------------------------------------------------------------------------------
def saturated_fraction(rgb: np.ndarray, threshold: float = SATURATED_LUMA) -> float:
    """Fraction of pixels whose luma is strictly above ``threshold`` (0.94): blown-out glare."""
    return float(np.mean(luma(rgb) > threshold))


def rms_contrast(rgb: np.ndarray) -> float:
    """Population standard deviation of luma (ddof=0), in [0, 0.5]."""
    return float(np.std(luma(rgb)))


LOCAL_BLOCK = 8  # local_contrast: the block over which luma's spread is measured


def local_contrast(rgb: np.ndarray) -> float:
    """Mean over 8x8 blocks of the luma's standard deviation (ddof=0), in [0, 0.5]: the contrast of detail, which
    haze scales by its transmission. Unlike ``rms_contrast`` it ignores variations larger than a block (the haze's
    own gradient toward the horizon, a plume's patches and shadows). Blocks that do not fit are left out; the
    whole image's std under 8 px."""
    y = luma(rgb)
    h, w = (y.shape[0] // LOCAL_BLOCK) * LOCAL_BLOCK, (y.shape[1] // LOCAL_BLOCK) * LOCAL_BLOCK
    if h == 0 or w == 0:
        return float(np.std(y))
    blocks = y[:h, :w].reshape(h // LOCAL_BLOCK, LOCAL_BLOCK, w // LOCAL_BLOCK, LOCAL_BLOCK)
    return float(np.mean(np.std(blocks, axis=(1, 3))))


def occluded_fraction(rgb: np.ndarray, clean: np.ndarray, delta: float = OCCLUDED_DELTA) -> float:
    """Fraction of pixels whose luma moved by more than ``delta`` (0.08) from the clean image."""
    a, b = _check_pair(rgb, clean)
    return float(np.mean(np.abs(luma(a) - luma(b)) > delta))


def red_blue_ratio(rgb: np.ndarray) -> float:
    """``mean(R) / mean(B)``; +inf when the blue channel is all zero (nan when red is too)."""
    check_rgb_image(rgb, "image")
    r = float(np.mean(rgb[:, :, 0], dtype=np.float64))
    b = float(np.mean(rgb[:, :, 2], dtype=np.float64))
    if b == 0.0:
        return math.inf if r > 0.0 else math.nan
    return r / b


def edge_strength(rgb: np.ndarray) -> float:
    """Mean 3x3 Sobel gradient magnitude ``sqrt(Gx^2 + Gy^2)`` of luma over the interior (H-2)x(W-2) pixels.

    The kernels are the unnormalised [1 2 1] x [-1 0 1] pair, so a unit luma step scores 4. Computed in float64
    NumPy (not cv2's float path, whose bytes depend on the SIMD target). 0.0 for images under 3x3.
    """
    y = luma(rgb)
    if y.shape[0] < 3 or y.shape[1] < 3:
        return 0.0
    # Separable Sobel: smooth [1 2 1] across, difference [-1 0 1] along.
    sv = y[:-2, :] + 2.0 * y[1:-1, :] + y[2:, :]  # vertical smoothing, (H-2)xW
    gx = sv[:, 2:] - sv[:, :-2]
    sh = y[:, :-2] + 2.0 * y[:, 1:-1] + y[:, 2:]  # horizontal smoothing, Hx(W-2)
    gy = sh[2:, :] - sh[:-2, :]
    return float(np.mean(np.sqrt(gx * gx + gy * gy)))


def mean_luminance(rgb: np.ndarray) -> float:
    """Mean luma in [0, 1]."""
    return float(np.mean(luma(rgb)))


def veil_sigmas(
    width: int, height: int, config: SuiteConfig | None = None, scale: Scale | None = None
) -> tuple[float, ...]:
    """The rain veil's Gaussian blur sigmas in px for a frame of this size, one per severity of the config.

    The config declares them per 1000 px of the long side (``rain_streaks.severities.veil_sigma_px``), or of the
    object scale's reference side when ``scale`` is one (``aegis_data.engine.scale``).
    """
    spec = (config or load_config()).corruptions.get("rain_streaks")
    per_1000 = spec.severities.get("veil_sigma_px") if spec is not None else None
    side = None if scale is None else scale.reference_side
    return tuple(pixel_length(v, height, width, side) for v in (per_1000 or _VEIL_SIGMA_FALLBACK))


def streak_density(
    rgb: np.ndarray, clean: np.ndarray, margin: float = STREAK_MARGIN, sigmas: Sequence[float] | None = None
) -> float:
    """Fraction of pixels brighter than the veil-only image by more than ``margin`` (0.03 luma).

    The rain model is a veil (a small Gaussian blur, a gain ``brightness <= 1``, and a desaturation, which
    keeps luma) with streaks screen-blended on top; screen only ever brightens. The veil-only luma is not
    observable from outside the engine, so it is bounded from the (corrupted, clean) pair:

        V = g * max(Y_clean, G_s1(Y_clean), ..., G_sk(Y_clean))

    where ``G_s`` is a Gaussian blur with each of the veil sigmas the config declares (default
    :func:`veil_sigmas`; whichever severity made the image, its blur is among them) and ``g`` is the veil's
    gain, estimated robustly as the median of ``Y / V1`` (``V1`` the bracket above) over pixels with
    ``V1 > 0.05``, capped at 1; streaks cover a small minority of pixels, so they barely move the median.
    A pixel is a streak pixel when ``Y > V + margin``. On the clean image itself the value is exactly 0.
    On the golden frames and real photos this tracks the engine's true streak fraction (output minus the
    engine's own veil > 0.03) within ~15%, with no false positives on the veil alone.
    """
    a, b = _check_pair(rgb, clean)
    y = luma(a)
    yc = luma(b)
    if sigmas is None:
        sigmas = veil_sigmas(a.shape[1], a.shape[0])
    bound = yc.copy()
    for sigma in sigmas:
        if sigma > 0:
            np.maximum(bound, cv2.GaussianBlur(yc, (0, 0), float(sigma), borderType=cv2.BORDER_REFLECT), out=bound)
    lit = bound > 0.05
    gain = float(np.median(y[lit] / bound[lit])) if np.any(lit) else 1.0
    gain = min(gain, 1.0)
    return float(np.mean(y > gain * bound + margin))


def luma_snr(rgb: np.ndarray, clean: np.ndarray) -> float:
    """Signal-to-noise ratio of the corrupted image's luma against the noise the corruption added: the mean luma of
    ``rgb`` (DN) over the noise std of ``rgb - clean`` (DN, :func:`aegis_data.engine.realism.noise_sigma` of the
    difference offset to mid-grey, so smooth differences such as a darkening or a blur's gentle changes fall
    away in its per-block plane fit and only the added grain counts); infinite when nothing was added.

    Noise measured on the image alone cannot tell an added grain from the scene's own texture (a smear that
    removes texture can make ``noise_sigma`` fall although noise was added), and darkening lowers the noise in DN
    while the image gets worse; the ratio to the added noise moves one way with both."""
    a, b = _check_pair(rgb, clean)
    diff = np.clip(a.astype(np.int16) - b.astype(np.int16) + 128, 0, 255).astype(np.uint8)
    sigma = noise_sigma(diff)
    mean = float(luma(a).mean()) * 255.0
    return mean / sigma if sigma > 0 else math.inf


GLINT_BLOCK = 16
GLINT_RISE = 0.2


def glint_area(rgb: np.ndarray, clean: np.ndarray, block: int = GLINT_BLOCK, rise: float = GLINT_RISE) -> float:
    """Share of the frame's whole ``block x block`` blocks holding at least one pixel whose luma rose by more than
    ``rise`` (0.2) over the clean image: where the glint glitters. The wind spreads the glitter over more of the
    water while its total light can fall (the sun's mirror image widens beyond the frame), so sun glint is graded
    on this area, not on the saturated share. 0 for a frame smaller than one block."""
    a, b = _check_pair(rgb, clean)
    risen = (luma(a) - luma(b)) > rise
    h, w = risen.shape
    hb, wb = h // block, w // block
    if hb == 0 or wb == 0:
        return 0.0
    return float(risen[: hb * block, : wb * block].reshape(hb, block, wb, block).any(axis=(1, 3)).mean())


# Statistic name -> (function, needs the clean image).
STATISTICS: dict[str, tuple[Callable[..., float], bool]] = {
    "saturated_fraction": (saturated_fraction, False),
    "rms_contrast": (rms_contrast, False),
    "occluded_fraction": (occluded_fraction, True),
    "red_blue_ratio": (red_blue_ratio, False),
    "streak_density": (streak_density, True),
    "edge_strength": (edge_strength, False),
    "mean_luminance": (mean_luminance, False),
    "noise_sigma": (noise_sigma, False),
    "edge_width": (edge_width, False),
    "luma_snr": (luma_snr, True),
    "local_contrast": (local_contrast, False),
    "glint_area": (glint_area, True),
}


def compute_statistic(
    stat: str,
    corrupted: np.ndarray,
    clean: np.ndarray | None = None,
    config: SuiteConfig | None = None,
    scale: Scale | None = None,
) -> float:
    """Value of the named statistic (a key of :data:`STATISTICS`) for one image.

    ``clean`` is required by the paired statistics (occluded_fraction, streak_density) and ignored otherwise.
    ``scale``: the length unit the corrupted image was made with (streak_density's veil sigmas follow it).
    The thresholds come from the config's ``calibration_threshold`` block where it declares them.
    """
    try:
        fn, paired = STATISTICS[stat]
    except KeyError:
        raise AegisError(f"unknown calibration statistic {stat!r}; expected one of {', '.join(STATISTICS)}") from None
    cfg = config or load_config()
    thresholds = cfg.calibration_threshold
    kwargs: dict[str, Any] = {}
    if stat == "saturated_fraction":
        kwargs["threshold"] = float(thresholds.get("saturated_luma", SATURATED_LUMA))
    elif stat == "occluded_fraction":
        kwargs["delta"] = float(thresholds.get("occluded_delta", OCCLUDED_DELTA))
    elif stat == "streak_density" and (config is not None or scale is not None):
        kwargs["sigmas"] = veil_sigmas(corrupted.shape[1], corrupted.shape[0], config, scale)
    if paired:
        if clean is None:
            raise AegisError(f"statistic {stat!r} compares against the clean image, but none was given")
        return fn(corrupted, clean, **kwargs)
    return fn(corrupted, **kwargs)


def _spec(name: str, config: SuiteConfig | None = None):
    cfg = config or load_config()
    return cfg.corruptions[cfg.check_corruption(name)]


def statistic(name: str, corrupted: np.ndarray, clean: np.ndarray, config: SuiteConfig | None = None) -> float:
    """The calibration statistic the config declares for corruption ``name``, on one (corrupted, clean) pair."""
    return compute_statistic(_spec(name, config).statistic, corrupted, clean, config)


# --- calibration table ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class CalibrationRow:
    """One corruption x severity: the statistic's mean/std (ddof=0) over ``n`` images, and the clean value; where
    person boxes are known, the persons' median visibility V and the share with V >= 5 over ``visibility_n``
    measured persons (NaN and 0 otherwise)."""

    corruption: str
    family: str
    statistic: str
    direction: str  # "increase" | "decrease"
    severity: int
    condition: str
    n: int
    mean: float
    std: float
    clean_mean: float
    clean_std: float
    visibility_median: float = math.nan
    visibility_detectable_share: float = math.nan
    visibility_n: int = 0


_VISIBILITY_FIELDS = ("visibility_median", "visibility_detectable_share", "visibility_n")


@dataclass(frozen=True)
class CalibrationTable:
    """Rows in config order (corruption, then severity); ``n_images`` is how many clean images were read;
    ``clean_visibility``: the persons' visibility on the clean images, None when no boxes were given."""

    rows: tuple[CalibrationRow, ...]
    n_images: int
    config_hash: str
    seed: int
    scale: str = "frame"  # the length unit of the corruptions (``Scale.describe``)
    clean_visibility: VisibilitySummary | None = None

    def ladder(self, corruption: str) -> list[CalibrationRow]:
        return [r for r in self.rows if r.corruption == corruption]

    @property
    def corruptions(self) -> list[str]:
        return list(dict.fromkeys(r.corruption for r in self.rows))

    def to_dict(self) -> dict:
        """JSON-ready form; a non-finite value becomes null. The visibility keys are there only when person boxes
        were given."""

        def clean_num(v):
            return v if isinstance(v, (int, str)) or (isinstance(v, float) and math.isfinite(v)) else None

        skip = () if self.clean_visibility is not None else _VISIBILITY_FIELDS
        doc = {
            "n_images": self.n_images,
            "config_hash": self.config_hash,
            "seed": self.seed,
            "scale": self.scale,
            "rows": [{k: clean_num(v) for k, v in asdict(r).items() if k not in skip} for r in self.rows],
            "violations": [asdict(v) for v in check_monotone(self)],
        }
        if self.clean_visibility is not None:
            doc["clean_visibility"] = self.clean_visibility.to_dict()
        return doc


@dataclass(frozen=True)
class Violation:
    corruption: str
    message: str


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return math.nan, math.nan
    arr = np.asarray(values, dtype=np.float64)
    if np.isinf(arr).any():  # luma_snr of a clean image: no added noise, an infinite ratio and no spread
        return float(arr.mean()), math.nan
    return float(arr.mean()), float(arr.std())


def resolve_corruptions(corruptions: Iterable[str] | None, config: SuiteConfig | None = None) -> tuple[str, ...]:
    """Validate corruption names against the config (None = all, in config order)."""
    return (config or load_config()).select(corruptions)


def calibrate(
    images: Iterable[tuple[str, np.ndarray]],
    corruptions: Iterable[str] | None = None,
    severities: Sequence[int] = SEVERITIES,
    *,
    seed: int | None = None,
    corrupt: Corruptor | None = None,
    config: SuiteConfig | None = None,
    scale: Scale | None = None,
    boxes: Mapping[str, Sequence[Sequence[float]]] | None = None,
) -> CalibrationTable:
    """Mean/std of each corruption's statistic per severity over a stream of ``(image_id, clean_rgb)``.

    ``corrupt(image, name, severity, image_id)`` produces the corrupted image, or None when that condition is
    unavailable (it is then left out of that row's ``n``). The default applies the suite's engine in memory
    with ``seed`` (None = the config's global seed; an aegis-v2 image's scene is estimated once for all its
    conditions). Images are consumed one at a time; only floats are kept.
    config: the suite (statistics, thresholds, parameters, seed); default the default suite, aegis-v2. scale: the length
    unit the images are (or, by the default corruptor, get) corrupted with; default frame scale. boxes: the person
    boxes ``(x, y, w, h)`` of each image id (an id not in it has none); when given, every row and the clean images
    also get the persons' visibility (:mod:`aegis_data.engine.visibility`).
    """
    cfg = config or load_config()
    names = resolve_corruptions(corruptions, cfg)
    sevs = check_severities(severities)
    own = corrupt is None
    if corrupt is None:
        corrupt = SuiteCorruptor(cfg, scale, seed)
    stats_needed = sorted({cfg.corruptions[n].statistic for n in names})
    clean_vals: dict[str, list[float]] = {s: [] for s in stats_needed}
    vals: dict[tuple[str, int], list[float]] = {(n, s): [] for n in names for s in sevs}
    clean_vis: list[float] = []
    vis: dict[tuple[str, int], list[float]] = {(n, s): [] for n in names for s in sevs}
    n_images = 0
    for image_id, clean in images:
        check_rgb_image(clean, f"clean image {image_id!r}")
        n_images += 1
        people = list(boxes.get(str(image_id), ())) if boxes is not None else []
        for stat in stats_needed:
            clean_vals[stat].append(compute_statistic(stat, clean, clean, cfg, scale))
        if people:
            clean_vis.extend(person_visibility(clean, people))
        # The default corruptor renders an aegis-v2 image in one scene, derived once (as a build does).
        xyxy = [(float(x), float(y), float(x) + float(w), float(y) + float(h)) for x, y, w, h in people]
        extra: dict[str, Any] = {"scene": scene_for(clean, cfg, scale, xyxy)} if own and cfg.uses_scene else {}
        for name in names:
            stat = cfg.corruptions[name].statistic
            for sev in sevs:
                corrupted = corrupt(clean, name, sev, str(image_id), **extra)
                if corrupted is None:
                    continue
                vals[(name, sev)].append(compute_statistic(stat, corrupted, clean, cfg, scale))
                if people:
                    vis[(name, sev)].extend(person_visibility(corrupted, people))
    if n_images == 0:
        raise AegisError("calibration needs at least one image; none were given")
    rows = []
    for name in names:
        spec = cfg.corruptions[name]
        cm, cs = _mean_std(clean_vals[spec.statistic])
        for sev in sevs:
            m, s = _mean_std(vals[(name, sev)])
            seen = summarize_visibility(vis[(name, sev)])
            rows.append(
                CalibrationRow(
                    corruption=name,
                    family=spec.family,
                    statistic=spec.statistic,
                    direction=spec.direction,
                    severity=sev,
                    condition=condition_id(name, sev),
                    n=len(vals[(name, sev)]),
                    mean=m,
                    std=s,
                    clean_mean=cm,
                    clean_std=cs,
                    visibility_median=seen.median,
                    visibility_detectable_share=seen.detectable_share,
                    visibility_n=seen.n_measured,
                )
            )
    return CalibrationTable(
        rows=tuple(rows),
        n_images=n_images,
        config_hash=cfg.config_hash,
        seed=cfg.seed if seed is None else int(seed),
        scale=(scale or FRAME_SCALE).describe(),
        clean_visibility=summarize_visibility(clean_vis) if boxes is not None else None,
    )


def _moves(a: float, b: float, direction: str) -> bool:
    """True when ``b`` lies strictly beyond ``a`` in ``direction`` (False for nan)."""
    return b > a if direction == "increase" else b < a


# The visibility floor (docs/CORRUPTIONS.md, "Visibility floor"): at severity 3 the persons' median Rose index keeps
# at least this share of its clean value. Relative, because scene clutter puts many persons' clean V below Rose's 5.
VISIBILITY_FLOOR = 0.5


def check_visibility_floor(table: CalibrationTable, floor: float = VISIBILITY_FLOOR) -> list[Violation]:
    """Corruptions whose highest measured severity leaves the persons' median visibility V below ``floor`` times
    the clean median (only where person boxes were given and V was measured); informational, as the rule of the
    suite's ladders, not of an image set."""
    clean = table.clean_visibility
    if clean is None or not math.isfinite(clean.median) or clean.median <= 0:
        return []
    out = []
    for name in table.corruptions:
        measured = [r for r in table.ladder(name) if r.visibility_n > 0 and math.isfinite(r.visibility_median)]
        if not measured:
            continue
        top = max(measured, key=lambda r: r.severity)
        if top.visibility_median < floor * clean.median:
            out.append(
                Violation(
                    name,
                    f"median visibility V at severity {top.severity} is {top.visibility_median:.3g}, "
                    f"below {floor:g} x the clean {clean.median:.3g}",
                )
            )
    return out


def check_monotone(table: CalibrationTable) -> list[Violation]:
    """Ladders that are not strictly monotone in their declared direction.

    For each corruption, over the severities that have data (``n > 0``) in ascending order: severity-to-severity
    steps must move strictly in the declared direction, and the lowest severity must lie strictly beyond the
    clean value. A corruption with no data at all is not judged (nothing to check), and is not a violation.
    """
    out: list[Violation] = []
    for name in table.corruptions:
        ladder = sorted((r for r in table.ladder(name) if r.n > 0), key=lambda r: r.severity)
        if not ladder:
            continue
        direction = ladder[0].direction
        if direction not in ("increase", "decrease"):
            out.append(Violation(name, f"direction must be 'increase' or 'decrease', got {direction!r}"))
            continue
        word = "above" if direction == "increase" else "below"
        first = ladder[0]
        if not _moves(first.clean_mean, first.mean, direction):
            out.append(
                Violation(
                    name,
                    f"{first.statistic} at severity {first.severity} ({first.mean:.6g}) is not "
                    f"strictly {word} clean ({first.clean_mean:.6g})",
                )
            )
        for lo, hi in zip(ladder, ladder[1:]):
            if not _moves(lo.mean, hi.mean, direction):
                out.append(
                    Violation(
                        name,
                        f"{lo.statistic} at severity {hi.severity} ({hi.mean:.6g}) is not strictly "
                        f"{word} severity {lo.severity} ({lo.mean:.6g})",
                    )
                )
    return out


# --- image sets on disk (the I/O edge used by `aegis calibrate`) ----------------------------------------
def list_images(folder: str | Path, limit: int | None = None) -> list[Path]:
    """``folder`` itself if it is a file, else the image files directly inside it (the source adapters' rule:
    by suffix, case-insensitive, hidden files ignored), sorted by name; at most ``limit``."""
    p = Path(folder)
    if not p.exists():
        raise AegisError(f"path not found: {p}")
    files = [p] if p.is_file() else images_in_folder(p)
    if not files:
        raise AegisError(f"no images in {p} (looked for {', '.join(IMAGE_SUFFIXES)})")
    return files if limit is None else files[:limit]


def _check_limit(limit: int | None) -> None:
    if limit is not None and limit < 1:
        raise AegisError(f"`limit` must be at least 1, got {limit}", param="limit")


def calibrate_folder(
    folder: str | Path,
    corruptions: Iterable[str] | None = None,
    limit: int | None = None,
    *,
    seed: int | None = None,
    scale: Scale | None = None,
    config: SuiteConfig | None = None,
) -> CalibrationTable:
    """Calibrate on a folder of images (image id = file stem), corrupting each in memory with the engine
    (``config``: the suite, default aegis-v2; ``scale``: the length unit)."""
    _check_limit(limit)
    names = resolve_corruptions(corruptions, config)
    files = list_images(folder, limit)
    images = ((f.stem, read_rgb(f)) for f in files)
    return calibrate(images, names, seed=seed, scale=scale, config=config)


def calibrate_rendered(
    root: str | Path,
    corruptions: Iterable[str] | None = None,
    limit: int | None = None,
    *,
    config: SuiteConfig,
    scale: Scale,
) -> CalibrationTable:
    """Calibrate on a frozen split's images: ``test/clean/<stem>.png`` against ``test/<corruption>_s<k>/<stem>.png``.

    ``config`` and ``scale`` are the ones the split's manifest records (``aegis_data.split.measure.calibrate_split``
    reads them through the sealed reader: the engine reads no manifest). Conditions that are not on disk for an
    image are skipped (the row's ``n`` counts what was found). When the split holds ``annotations/test.json``, its
    person boxes give every row the persons' visibility.
    """
    _check_limit(limit)
    clean_dir = condition_dir(root, "test", "clean")
    if not clean_dir.is_dir():
        raise AegisError(f"{root} has a manifest but no {clean_dir.relative_to(root)} folder of clean test images")
    names = resolve_corruptions(corruptions, config)
    stems = sorted(f.stem for f in clean_dir.glob("*.png"))
    if not stems:
        raise AegisError(f"no clean test images (*.png) in {clean_dir}")
    if limit is not None:
        stems = stems[:limit]

    def from_disk(_clean: np.ndarray, name: str, severity: int, image_id: str) -> np.ndarray | None:
        f = condition_dir(root, "test", condition_id(name, severity)) / image_file_name(image_id)
        return read_rgb(f) if f.is_file() else None

    gt_path = annotation_path(root, "test")
    boxes = None
    if gt_path.is_file():
        coco, _ = read_coco_gt(gt_path)
        boxes = coco_boxes_by_stem(coco, gt_path)
    images = ((s, read_rgb(clean_dir / image_file_name(s))) for s in stems)
    return calibrate(images, names, corrupt=from_disk, config=config, scale=scale, boxes=boxes)


def calibrate_clean_folder(
    path: str | Path,
    corruptions: Iterable[str] | None = None,
    limit: int | None = None,
    scale: str | Scale | None = None,
    *,
    person_px: float | None = None,
    gsd_cm_per_px: float | None = None,
    suite: str | Path | None = None,
) -> CalibrationTable:
    """:func:`calibrate_folder` on a folder of clean images, corrupted in memory (``suite`` a name or file, default
    aegis-v2; the scale as ``aegis_data.engine.scale.resolve_scale`` does, default the suite's; object scale needs
    the unit, as a folder carries no boxes). ``aegis_data.split.measure.calibrate_path`` takes a split as well.
    """
    config = load_config(suite)
    # The images and the names first: a missing path or an unknown name is the error to report, not the unit.
    _check_limit(limit)
    list_images(path, limit)
    resolve_corruptions(corruptions, config)
    chosen = suite_call_scale(
        config.scale,
        scale,
        None,
        person_px=person_px,
        gsd_cm_per_px=gsd_cm_per_px,
        physical_suite=config.suite if config.uses_scene else None,
    )
    return calibrate_folder(path, corruptions, limit, scale=chosen, config=config)
