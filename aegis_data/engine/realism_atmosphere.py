"""Atmosphere statistics of one image (docs/CORRUPTIONS.md, "Checking the physics against real footage"): what tells
real haze and rain from rendered ones, measured on uint8 RGB frames (luma ``Y = 0.299 R + 0.587 G + 0.114 B`` in DN).

- :func:`contrast_by_band`: the contrast of detail (the mean over 8x8 blocks of luma's standard deviation, DN) in
  four bands of rows from the horizon (or the top) down. In an oblique view inverse depth is linear in the row, so
  the bands run from far to near; haze takes contrast from the far bands first (Koschmieder), an image-wide tint
  takes the same share everywhere. ``far_near_ratio`` is the farthest band's over the nearest's.
- :func:`dark_channel`: the median of He et al.'s dark channel (2009: the darkest channel in a 15 x 15 window),
  DN, overall and per band. Haze-free outdoor scenes have dark channels near 0; airlight lifts it.
- :func:`airlight_colour`: He et al.'s airlight estimate: the mean colour (DN) of the brightest 0.1 % of the dark
  channel's pixels.
- :func:`streak_statistics`: the shape of bright thin structures. The luma minus its Gaussian blur (std 6 px),
  positive part, is autocorrelated (FFT, over at most the central 1024 x 1024 px); the half-maximum region of the
  central peak gives its orientation (the principal axis of its second moments, degrees from +x with y down, in
  [0, 180)), its anisotropy (ratio of the axes' RMS extents; 1 = no direction) and its widths: the full width at
  half maximum across and along that axis, divided by sqrt(2) (the autocorrelation of a Gaussian profile is
  sqrt(2) wider than the profile), in px. Rain streaks read as a width of a few px with high anisotropy at the rain's
  orientation; grass or noise as anisotropy near 1.

Each function takes an optional ``region = (x, y, w, h)`` (the valid pixels), as ``aegis_data.engine.realism``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from aegis_data.engine.scene import sky_depth
from aegis_data.errors import AegisError
from aegis_data.files.rgb import check_rgb_image

N_BANDS = 4
BLOCK = 8
DARK_PATCH = 15  # He et al. 2009
AIRLIGHT_SHARE = 0.001  # the brightest 0.1 % of the dark channel
HIGHPASS_SIGMA = 6.0
STREAK_CROP = 1024
STREAK_WINDOW = 24  # the autocorrelation is read within +-24 px of its centre
PROFILE_STEP = 0.25


def crop_region(rgb: np.ndarray, region: Sequence[int] | None) -> np.ndarray:
    """The checked RGB image, or its rectangle ``region`` = (x, y, w, h): four integers inside the frame (the
    realism measures' shared input check)."""
    rgb = check_rgb_image(rgb, "image")
    if region is None:
        return rgb
    try:
        x, y, w, h = (int(v) for v in region)
        ok = all(float(v) == int(v) for v in region)
    except (TypeError, ValueError):
        ok = False
    if not ok or x < 0 or y < 0 or w < 1 or h < 1 or x + w > rgb.shape[1] or y + h > rgb.shape[0]:
        raise AegisError(
            f"`region` must be 4 integers (x, y, w, h) inside the {rgb.shape[1]}x{rgb.shape[0]} frame, "
            f"got {region!r:.80}",
            param="region",
        )
    return rgb[y : y + h, x : x + w]


def _luma(rgb: np.ndarray) -> np.ndarray:
    return (
        299 * rgb[..., 0].astype(np.int32) + 587 * rgb[..., 1].astype(np.int32) + 114 * rgb[..., 2].astype(np.int32)
    ) / 1000.0


def depth_bands(rgb: np.ndarray, n_bands: int = N_BANDS) -> tuple[list[tuple[int, int]], bool]:
    """([(row0, row1), ...] far to near, whether a horizon was found): the rows below the sky (the scene model's sky
    detection; ``aegis_data.engine.scene.sky_depth``) cut into ``n_bands`` equal bands, or the whole height when
    there is no sky."""
    h, w = rgb.shape[:2]
    depth = sky_depth(rgb, (0, 0, w, h))
    top = int(sorted(depth)[len(depth) // 2]) if depth else 0
    edges = np.linspace(top, h, n_bands + 1).astype(int)
    return [(int(a), int(b)) for a, b in zip(edges, edges[1:])], bool(depth)


def _block_contrast(y: np.ndarray) -> float:
    h, w = (y.shape[0] // BLOCK) * BLOCK, (y.shape[1] // BLOCK) * BLOCK
    if h == 0 or w == 0:
        return math.nan
    blocks = y[:h, :w].reshape(h // BLOCK, BLOCK, w // BLOCK, BLOCK)
    return float(np.mean(np.std(blocks, axis=(1, 3))))


def contrast_by_band(rgb: np.ndarray, region: Sequence[int] | None = None, bands=None) -> tuple[float, ...]:
    """The contrast of detail (DN) per depth band, far to near (``bands``: :func:`depth_bands`' when None)."""
    rgb = crop_region(rgb, region)
    y = _luma(rgb)
    bands = depth_bands(rgb)[0] if bands is None else bands
    return tuple(_block_contrast(y[a:b]) for a, b in bands)


def _dark(rgb: np.ndarray) -> np.ndarray:
    low = cv2.min(
        cv2.min(np.ascontiguousarray(rgb[..., 0]), np.ascontiguousarray(rgb[..., 1])), np.ascontiguousarray(rgb[..., 2])
    )
    return cv2.erode(low, np.ones((DARK_PATCH, DARK_PATCH), np.uint8), borderType=cv2.BORDER_REFLECT)


def dark_channel(rgb: np.ndarray, region: Sequence[int] | None = None, bands=None) -> tuple[float, tuple[float, ...]]:
    """(median dark channel over the image, the medians per depth band far to near), DN."""
    rgb = crop_region(rgb, region)
    dark = _dark(rgb)
    bands = depth_bands(rgb)[0] if bands is None else bands
    return float(np.median(dark)), tuple(float(np.median(dark[a:b])) if b > a else math.nan for a, b in bands)


def airlight_colour(rgb: np.ndarray, region: Sequence[int] | None = None) -> tuple[float, float, float]:
    """He et al.'s airlight: the mean (R, G, B) in DN of the pixels among the brightest 0.1 % of the dark channel."""
    rgb = crop_region(rgb, region)
    dark = _dark(rgb).ravel()
    k = max(1, int(math.ceil(AIRLIGHT_SHARE * dark.size)))
    idx = np.argpartition(dark, dark.size - k)[dark.size - k :]
    r, g, b = (float(v) for v in rgb.reshape(-1, 3)[idx].astype(np.float64).mean(axis=0))
    return r, g, b


@dataclass(frozen=True)
class StreakShape:
    """Bright thin structures: width and length (px), orientation (degrees from +x, y down, [0, 180)), anisotropy
    (1 = no preferred direction); NaN where the image holds no such structure."""

    width: float
    length: float
    orientation: float
    anisotropy: float


def _half_width(ac: np.ndarray, c: int, ux: float, uy: float) -> float:
    """Distance from the centre along (ux, uy) at which the autocorrelation first falls to 0.5 (bilinear samples
    every 0.25 px, the crossing interpolated); NaN when it does not within the window."""
    t = np.arange(0.0, STREAK_WINDOW, PROFILE_STEP)
    xs, ys = c + t * ux, c + t * uy
    x0, y0 = np.floor(xs).astype(int), np.floor(ys).astype(int)
    fx, fy = xs - x0, ys - y0
    x1, y1 = np.minimum(x0 + 1, ac.shape[1] - 1), np.minimum(y0 + 1, ac.shape[0] - 1)
    v = (
        ac[y0, x0] * (1 - fx) * (1 - fy)
        + ac[y0, x1] * fx * (1 - fy)
        + ac[y1, x0] * (1 - fx) * fy
        + ac[y1, x1] * fx * fy
    )
    below = np.flatnonzero(v < 0.5)
    if below.size == 0 or below[0] == 0:
        return math.nan
    i = below[0]
    return float(t[i - 1] + (v[i - 1] - 0.5) / (v[i - 1] - v[i]) * PROFILE_STEP)


def streak_statistics(rgb: np.ndarray, region: Sequence[int] | None = None) -> StreakShape:
    """The shape of the bright thin structures of the luma (module doc)."""
    rgb = crop_region(rgb, region)
    y = _luma(rgb)
    h, w = y.shape
    ch, cw = min(h, STREAK_CROP), min(w, STREAK_CROP)
    if min(ch, cw) < 4 * STREAK_WINDOW:
        return StreakShape(math.nan, math.nan, math.nan, math.nan)
    y = y[(h - ch) // 2 : (h - ch) // 2 + ch, (w - cw) // 2 : (w - cw) // 2 + cw]
    hp = y - cv2.GaussianBlur(y, (0, 0), HIGHPASS_SIGMA, borderType=cv2.BORDER_REFLECT)
    p = np.maximum(hp, 0.0)
    p = p - p.mean()
    spec = np.fft.rfft2(p)
    ac = np.fft.fftshift(np.fft.irfft2(spec * np.conj(spec), s=p.shape))
    cy, cx = ch // 2, cw // 2
    if not ac[cy, cx] > 0:
        return StreakShape(math.nan, math.nan, math.nan, math.nan)
    r = STREAK_WINDOW
    win = ac[cy - r : cy + r + 1, cx - r : cx + r + 1] / ac[cy, cx]
    dy, dx = np.mgrid[-r : r + 1, -r : r + 1].astype(np.float64)
    wt = np.where((win >= 0.5) & (dx * dx + dy * dy <= r * r), win - 0.5, 0.0)
    total = wt.sum()
    if not total > 0:
        return StreakShape(math.nan, math.nan, math.nan, math.nan)
    cxx, cyy, cxy = (wt * dx * dx).sum() / total, (wt * dy * dy).sum() / total, (wt * dx * dy).sum() / total
    vals, vecs = np.linalg.eigh(np.array([[cxx, cxy], [cxy, cyy]]))
    major = vecs[:, 1]
    orientation = math.degrees(math.atan2(major[1], major[0])) % 180.0
    anisotropy = math.sqrt(vals[1] / vals[0]) if vals[0] > 0 else math.inf
    across = _half_width(win, r, -major[1], major[0])
    along = _half_width(win, r, major[0], major[1])
    return StreakShape(2.0 * across / math.sqrt(2.0), 2.0 * along / math.sqrt(2.0), orientation, anisotropy)


@dataclass(frozen=True)
class AtmosphereStats:
    """The atmosphere statistics of one image."""

    contrast_bands: tuple[float, ...]
    dark_channel: float
    dark_bands: tuple[float, ...]
    airlight: tuple[float, float, float]
    streaks: StreakShape


def atmosphere_statistics(rgb: np.ndarray, region: Sequence[int] | None = None) -> AtmosphereStats:
    rgb = crop_region(rgb, region)
    bands, _ = depth_bands(rgb)
    dark, dark_bands = dark_channel(rgb, bands=bands)
    return AtmosphereStats(
        contrast_by_band(rgb, bands=bands), dark, dark_bands, airlight_colour(rgb), streak_statistics(rgb)
    )


# --- image sets ------------------------------------------------------------------------------------------
def finite_median(values: Iterable[float]) -> float:
    """The median of the finite values; NaN when there is none."""
    finite = [v for v in values if math.isfinite(v)]
    return float(np.median(finite)) if finite else math.nan


def log_rms(real: Iterable[float], other: Iterable[float]) -> tuple[float, int]:
    """(RMS of ``ln(other / real)`` over the pairs where both are finite and positive, the number of such pairs);
    NaN with none."""
    logs = [math.log(o / r) for r, o in zip(real, other) if math.isfinite(r) and math.isfinite(o) and r > 0 and o > 0]
    return (math.sqrt(sum(v * v for v in logs) / len(logs)) if logs else math.nan), len(logs)


def _axial_mean(degrees: Iterable[float]) -> float:
    """Mean of orientations in [0, 180) (doubled angles averaged), degrees; NaN for none."""
    angles = [math.radians(2.0 * d) for d in degrees if math.isfinite(d)]
    if not angles:
        return math.nan
    return math.degrees(math.atan2(sum(math.sin(a) for a in angles), sum(math.cos(a) for a in angles))) / 2.0 % 180.0


@dataclass(frozen=True)
class AtmosphereSet:
    """Over a set of images: per band the median contrast and dark channel; the medians of the dark channel, of the
    airlight's channels and of the streak width, length and anisotropy; the mean streak orientation."""

    contrast_bands: tuple[float, ...]
    dark_channel: float
    dark_bands: tuple[float, ...]
    airlight: tuple[float, float, float]
    streak_width: float
    streak_length: float
    streak_orientation: float
    streak_anisotropy: float

    @property
    def far_near_ratio(self) -> float:
        far, near = self.contrast_bands[0], self.contrast_bands[-1]
        return far / near if math.isfinite(far) and math.isfinite(near) and near > 0 else math.nan

    def to_dict(self) -> dict:
        def num(v):
            return float(v) if math.isfinite(v) else None

        return {
            "contrast_by_band": [num(v) for v in self.contrast_bands],
            "far_near_ratio": num(self.far_near_ratio),
            "dark_channel": num(self.dark_channel),
            "dark_channel_by_band": [num(v) for v in self.dark_bands],
            "airlight": [num(v) for v in self.airlight],
            "streak_width": num(self.streak_width),
            "streak_length": num(self.streak_length),
            "streak_orientation": num(self.streak_orientation),
            "streak_anisotropy": num(self.streak_anisotropy),
        }


def summarize_atmosphere(stats: Sequence[AtmosphereStats]) -> AtmosphereSet:
    if not stats:
        nan = math.nan
        return AtmosphereSet((nan,) * N_BANDS, nan, (nan,) * N_BANDS, (nan, nan, nan), nan, nan, nan, nan)
    red, green, blue = (finite_median(s.airlight[c] for s in stats) for c in range(3))
    return AtmosphereSet(
        tuple(finite_median(s.contrast_bands[k] for s in stats) for k in range(N_BANDS)),
        finite_median(s.dark_channel for s in stats),
        tuple(finite_median(s.dark_bands[k] for s in stats) for k in range(N_BANDS)),
        (red, green, blue),
        finite_median(s.streaks.width for s in stats),
        finite_median(s.streaks.length for s in stats),
        _axial_mean(s.streaks.orientation for s in stats),
        finite_median(s.streaks.anisotropy for s in stats),
    )


ATMOSPHERE_DISTANCES = {
    "contrast_by_band": "RMS over the depth bands of ln(contrast / contrast_real); 0 = same profile",
    "dark_channel": "|dark - dark_real| of the median dark channel, DN; 0 = same",
    "airlight": "Euclidean distance of the airlight colours, DN; 0 = same",
    "streak_width": "width / width_real; 1 = same",
    "streak_orientation": "angle between the mean streak orientations, degrees in [0, 90]; 0 = same",
}


def atmosphere_distances(real: AtmosphereSet, other: AtmosphereSet) -> dict[str, float]:
    diff = abs(other.streak_orientation - real.streak_orientation) % 180.0
    air = math.sqrt(sum((a - b) ** 2 for a, b in zip(real.airlight, other.airlight)))
    width = (
        other.streak_width / real.streak_width
        if math.isfinite(real.streak_width) and real.streak_width > 0
        else math.nan
    )
    return {
        "contrast_by_band": log_rms(real.contrast_bands, other.contrast_bands)[0],
        "dark_channel": abs(other.dark_channel - real.dark_channel),
        "airlight": air,
        "streak_width": width,
        "streak_orientation": min(diff, 180.0 - diff),
    }
