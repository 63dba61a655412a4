"""The scene and camera model of one image (generation-2 suites such as aegis-v2; docs/CORRUPTIONS.md, "Scene and
camera model").

A corruption that follows physics needs to know what the camera looked at and how: which pixels hold the scene
(letterbox bars and constant borders hold none), whether the view is near-nadir or oblique (a horizon and a sky),
how many metres one pixel spans at each row (the ground sampling distance, from the person unit: a person is
about 1.7 m), and the camera's exposure, ISO, focal length and platform speed. :func:`estimate_scene` derives
that from the decoded pixels, the dataset's person unit and the suite's default camera; an optional per-image
sidecar (``<stem>.scene.json``, :func:`read_sidecar`) overrides any estimate with what the flight log knows.

Everything here is a pure function of integers (pixel values, their block sums and differences) plus the given
facts; derived lengths are rounded to fixed decimals, so two machines derive the same scene, and ``verify``
re-derives it from a split's clean image and compares it with the one the manifest recorded
(:meth:`Scene.record`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from aegis_data.engine.scale import PERSON_HEIGHT_CM, UPRIGHT_BOX_FACTOR, check_person_px, person_unit_from_gsd
from aegis_data.engine.water import estimate_water, water_share
from aegis_data.errors import AegisError
from aegis_data.files.rgb import check_rgb_image

NADIR = "nadir"
OBLIQUE = "oblique"
SIDECAR_SUFFIX = ".scene.json"

# Letterbox/pillarbox bars and constant borders: a row (column) at the edge whose pixels all lie within
# BAR_TOLERANCE of the edge's first row (column), per channel. JPEG ringing leaves a few DN in real bars.
BAR_TOLERANCE = 6
MIN_BAR_PX = 2  # a single uniform edge row is scene (a road, a roof), not a bar
# A bar ends in a step: the first scene line differs from the last bar line by at least this much on average (the
# largest channel difference per pixel). A clear sky is as flat along a row as a bar, but changes smoothly.
BAR_EDGE_DN = 6
MAX_BAR_FRACTION = 0.45  # bars never take more than this share of a side: beyond, the frame is one flat colour

# Sky: blocks of about 1/128 of the short side whose mean absolute luma difference between neighbours is at most
# SKY_TEXTURE_DN (clear, overcast or hazy sky is smooth; vegetation, roofs and roads are not), no darker than the
# median block, connected to the top of the valid region. The view is oblique when such sky spans
# SKY_MIN_COLUMNS of the columns, at least two blocks deep, with a coherent bottom edge (the horizon).
SKY_TEXTURE_DN = 2.0
SKY_MIN_COLUMNS = 0.6
HORIZON_SPREAD = 0.25  # interquartile range of the sky depth, as a share of the valid height

# The sidecar's keys: name -> (low, high, unit and meaning). ``water_mask`` is a file name, ``valid`` a rectangle.
SIDECAR_NUMBERS: Mapping[str, tuple[float, float, str]] = {
    "altitude_m": (1.0, 10000.0, "flight height above the ground, m"),
    "pitch_deg": (0.0, 90.0, "camera pitch below the horizontal, degrees (90 = nadir)"),
    "gsd_cm": (0.0601, 30.05, "ground sampling distance at the image centre, cm/px"),
    "focal_px": (1.0, 1.0e6, "focal length, px"),
    "speed_mps": (0.0, 60.0, "platform speed over the ground, m/s"),
    "heading_deg": (-360.0, 360.0, "flight direction in the image, degrees from +x (y down)"),
    "exposure_ms": (0.001, 1000.0, "exposure time of the frame, ms"),
    "iso": (1.0, 409600.0, "ISO of the frame"),
    "sun_elevation_deg": (-90.0, 90.0, "sun elevation above the horizon, degrees"),
    "sun_azimuth_deg": (-360.0, 360.0, "sun azimuth in the image, degrees from +x (y down)"),
}
SIDECAR_KEYS = (*SIDECAR_NUMBERS, "water_mask", "valid")
MAX_SIDECAR_BYTES = 1 << 16
# The sun of an image whose sidecar does not give it: drawn once per image (the same for every condition and
# severity) from the SHA-256 of the valid region's clean pixels, elevation uniform in SUN_ELEVATION_DEG (daytime
# flights: the sun 15-65 degrees high covers most of a mid-latitude day's flying hours), azimuth uniform in
# [0, 360). Recorded with the scene (``sun_drawn`` names the drawn angles). A frame taken at dusk or at night
# needs a sidecar with its sun elevation: its pixels do not tell (docs/CORRUPTIONS.md, "Sun").
SUN_ELEVATION_DEG = (15.0, 65.0)
# Persons (the image's ground-truth boxes, which the build hands to the scene): at most this many per image.
MAX_PERSONS = 4096
_DECIMALS = 4  # recorded scalars: 0.1 mm, 0.0001 px, 0.0001 m/s ... identical wherever they are computed


def _round(value: float, decimals: int = _DECIMALS) -> float:
    """``value`` rounded to ``decimals`` places; AegisError in the (astronomically rare) case that it lies so close to
    a rounding boundary that one ulp of libm error elsewhere could flip it."""
    scaled = value * 10.0**decimals
    if abs(scaled - math.floor(scaled) - 0.5) < 1e-7:
        raise AegisError(f"scene value {value!r} lies on a rounding boundary; give it in a sidecar")
    return round(value, decimals)


@dataclass(frozen=True)
class Scene:
    """What a generation-2 corruption knows about one image. Rows and columns are frame pixels (0 = top/left).

    valid: (x0, y0, x1, y1), end-exclusive, the rectangle that holds the scene (outside it: bars, never corrupted).
    view: ``nadir`` (ground sampling distance the same everywhere) or ``oblique`` (a horizon; the ground recedes).
    horizon_row: the horizon's image row (oblique; may lie above the frame), else None.
    sky_depth: oblique: per column of the valid region, how many rows from its top are sky; () when no sky.
    person_px, gsd_m: the person unit (px) and ground sampling distance (m/px) at ``reference_row``; in a nadir view
    everywhere, in an oblique one ``gsd(y) = gsd_m (reference_row - horizon_row) / (y - horizon_row)`` (a flat
    ground plane seen by a pinhole camera without roll: inverse depth is linear in the row).
    focal_px: the focal length in px. speed_mps, exposure_ms, iso: the clean capture's platform speed, exposure and
    ISO. heading_deg: the flight direction in the image (None: unknown, a corruption draws it).
    given: the sidecar's facts (they overrode the estimates and are part of the image's identity).
    water: bool (height, width), the water the flood models act on (None: not derived, e.g. a scene made by hand:
    no water); ``water_source`` says where it came from (``estimated`` from the pixels, or the ``sidecar``'s mask).
    persons: the image's person boxes (x0, y0, x1, y1) in frame pixels, as the build knows them from the ground
    truth (inundation submerges the ones the water reaches); () when unknown.
    sun_drawn: which sun angles (``elevation``, ``azimuth``) were drawn rather than given.
    """

    width: int
    height: int
    valid: tuple[int, int, int, int]
    view: str
    horizon_row: float | None
    person_px: float
    gsd_m: float
    reference_row: float
    focal_px: float
    speed_mps: float
    exposure_ms: float
    iso: float
    heading_deg: float | None = None
    sun_elevation_deg: float | None = None
    sun_azimuth_deg: float | None = None
    sky_depth: tuple[int, ...] = ()
    water_mask_sha256: str | None = None
    given: Mapping[str, Any] = field(default_factory=dict)
    water: np.ndarray | None = field(default=None, compare=False, repr=False)
    water_source: str = "estimated"
    persons: tuple[tuple[float, float, float, float], ...] = ()
    sun_drawn: tuple[str, ...] = ()
    # (block side, texture sums per block) of the valid region, as the water estimate computed them from the clean
    # pixels (``water.estimate_water``); the flood model reads them instead of computing them again. Derived.
    block_texture: tuple | None = field(default=None, compare=False, repr=False)
    # Arrays a model derives from the clean pixels and this scene alone, kept for the scene's other conditions
    # (the flood's height proxy: the same for every severity and for the ground-truth facts). Never copied by
    # dataclasses.replace (init=False), so a changed scene derives its own.
    derived: dict = field(default_factory=dict, init=False, compare=False, repr=False)

    def water_mask(self) -> np.ndarray:
        """bool (height, width): the water (all False when the scene has none)."""
        if self.water is None:
            return np.zeros((self.height, self.width), dtype=bool)
        return self.water

    def water_record(self) -> dict:
        """The water as the manifest records it: where it came from, its digest and its share of the valid area."""
        mask = self.water_mask()
        return {
            "source": self.water_source,
            "sha256": water_mask_digest(mask),
            "fraction": water_share(mask, self.valid),
        }

    @property
    def valid_slices(self) -> tuple[slice, slice]:
        x0, y0, x1, y1 = self.valid
        return slice(y0, y1), slice(x0, x1)

    @property
    def is_full_frame(self) -> bool:
        return self.valid == (0, 0, self.width, self.height)

    def gsd_rows(self, rows: np.ndarray) -> np.ndarray:
        """Ground sampling distance (m/px) at each frame row in ``rows``; ``inf`` at and above the horizon (sky)."""
        rows = np.asarray(rows, dtype=np.float64)
        if self.view == NADIR or self.horizon_row is None:
            return np.full(rows.shape, self.gsd_m)
        below = rows - self.horizon_row
        out = np.full(rows.shape, np.inf)
        ground = below >= 0.5
        out[ground] = self.gsd_m * (self.reference_row - self.horizon_row) / below[ground]
        return out

    def sky_mask(self) -> np.ndarray:
        """bool (height, width): True on sky pixels (oblique views with detected sky), False elsewhere."""
        mask = np.zeros((self.height, self.width), dtype=bool)
        if self.sky_depth:
            x0, y0, x1, _ = self.valid
            rows = np.arange(self.height)[:, None]
            depth = np.asarray(self.sky_depth, dtype=np.int64)[None, :]
            mask[:, x0:x1] = (rows >= y0) & (rows < y0 + depth)
        return mask

    def record(self) -> dict:
        """What a manifest records (and its root hash covers): every field a corruption reads, with the sky mask as
        its SHA-256 and share of the valid area."""
        vx0, vy0, vx1, vy1 = self.valid
        area = max(1, (vx1 - vx0) * (vy1 - vy0))
        sky = None
        if self.sky_depth:
            sky = {
                "sha256": hashlib.sha256(np.asarray(self.sky_depth, dtype="<i4").tobytes()).hexdigest(),
                "fraction": round(sum(self.sky_depth) / area, 6),
            }
        return {
            "valid": list(self.valid),
            "view": self.view,
            "horizon_row": self.horizon_row,
            "sky": sky,
            "person_px": self.person_px,
            "gsd_cm": _round(self.gsd_m * 100.0),
            "reference_row": self.reference_row,
            "focal_px": self.focal_px,
            "speed_mps": self.speed_mps,
            "exposure_ms": self.exposure_ms,
            "iso": self.iso,
            "heading_deg": self.heading_deg,
            "sun_elevation_deg": self.sun_elevation_deg,
            "sun_azimuth_deg": self.sun_azimuth_deg,
            "water_mask_sha256": self.water_mask_sha256,
            "given": dict(sorted(self.given.items())),
            "water": self.water_record(),
            "persons": [list(p) for p in self.persons],
            "sun_drawn": list(self.sun_drawn),
        }


# ----------------------------------------------------------------------------------------------------------
# Valid-pixel region
# ----------------------------------------------------------------------------------------------------------
def _bar_depth(lines, count: int) -> int:
    """How many leading lines (rows or columns, each (n, 3) uint8) form one flat bar of the first line's colour,
    ended by a step to the scene."""
    limit = int(count * MAX_BAR_FRACTION)
    first = None
    depth = 0
    for i in range(limit):
        line = lines(i)
        lo, hi = line.min(axis=0).astype(np.int32), line.max(axis=0).astype(np.int32)
        if first is None:
            first = (lo + hi) // 2
        if (
            (hi - lo).max() > BAR_TOLERANCE
            or np.abs(lo - first).max() > BAR_TOLERANCE
            or np.abs(hi - first).max() > BAR_TOLERANCE
        ):
            break
        depth += 1
    # A bar ends where the scene starts; a flat run reaching the limit is a flat scene, not a bar.
    if not MIN_BAR_PX <= depth < limit:
        return 0
    step = np.abs(lines(depth).astype(np.int32) - lines(depth - 1).astype(np.int32)).max(axis=1)
    return depth if int(step.sum()) >= BAR_EDGE_DN * step.size else 0


def valid_region(rgb: np.ndarray) -> tuple[int, int, int, int]:
    """(x0, y0, x1, y1): the frame without letterbox/pillarbox bars or constant borders (docs/CORRUPTIONS.md).

    A side has a bar when at least ``MIN_BAR_PX`` lines at that edge are each flat (every pixel within
    ``BAR_TOLERANCE`` per channel of the edge line's colour), fewer than ``MAX_BAR_FRACTION`` of the side, and the
    next line steps away from the last bar line by ``BAR_EDGE_DN`` on average (a uniform clear sky changes
    smoothly and is scene). Integer comparisons only. A frame that is one flat colour is all valid.
    """
    check_rgb_image(rgb, "image")
    h, w = rgb.shape[:2]
    top = _bar_depth(lambda i: rgb[i], h)
    bottom = _bar_depth(lambda i: rgb[h - 1 - i], h)
    if top + bottom >= h:
        return 0, 0, w, h
    inner = rgb[top : h - bottom]
    left = _bar_depth(lambda i: inner[:, i], w)
    right = _bar_depth(lambda i: inner[:, w - 1 - i], w)
    if left + right >= w:
        return 0, 0, w, h
    return left, top, w - right, h - bottom


# ----------------------------------------------------------------------------------------------------------
# Sky and horizon
# ----------------------------------------------------------------------------------------------------------
def _block_size(height: int, width: int) -> int:
    return max(4, min(height, width) // 128)


def _luma_block_sums(crop: np.ndarray, b: int) -> tuple[np.ndarray, np.ndarray]:
    """(texture sums, luma sums) per b x b block of ``crop`` (uint8 RGB, whole blocks), both int64. Luma is in
    thousandths of a DN (299 R + 587 G + 114 B); a pixel's texture is its absolute luma difference to the right
    neighbour plus that to the one below (0 past the last column/row: the last difference joins the block to its
    left/top). Integers throughout, into preallocated int32 planes: no int32 copy of the RGB frame, no padded copy."""
    nby, nbx = crop.shape[0] // b, crop.shape[1] // b
    # dtype= picks the int32 loop under every NumPy: NumPy 1.x casts by a scalar's value, so uint8 x np.int32(299)
    # ran in uint16 there and wrapped (the golden hashes of oblique frames differed under NumPy 1.26).
    luma = np.multiply(crop[..., 0], 299, dtype=np.int32)  # DN x 1000, at most 255000
    term = np.multiply(crop[..., 1], 587, dtype=np.int32)
    luma += term
    np.multiply(crop[..., 2], 114, out=term, dtype=np.int32)
    luma += term
    tex = term  # reused: |dx| + |dy| per pixel, at most 510000
    np.subtract(luma[:, 1:], luma[:, :-1], out=tex[:, :-1])
    tex[:, -1] = 0
    np.abs(tex, out=tex)
    dy = np.empty_like(luma)
    np.subtract(luma[1:], luma[:-1], out=dy[:-1])
    dy[-1] = 0
    tex += np.abs(dy, out=dy)
    # Rows of each block band first, in int32 while b such values cannot overflow it (contiguous adds, several
    # times faster than int64), then the columns of each block in int64.
    band = np.int32 if b * 510_000 < 2**31 else np.int64

    def sums(a: np.ndarray) -> np.ndarray:
        return a.reshape(nby, b, nbx * b).sum(axis=1, dtype=band).reshape(nby, nbx, b).sum(axis=2, dtype=np.int64)

    return sums(tex), sums(luma)


def sky_depth(rgb: np.ndarray, valid: tuple[int, int, int, int]) -> tuple[int, ...]:
    """Per column of the valid region, the number of sky rows from its top (all zeros: no sky found).

    Luma in integer thousandths (299 R + 587 G + 114 B) is cut into b x b blocks (b about 1/128 of the short side).
    A block is sky-like when its mean absolute difference between horizontal and vertical neighbours is at most
    ``SKY_TEXTURE_DN`` and its mean is at least the median block mean. A block column's sky is the run of sky-like
    blocks from the top. The view counts as having sky when at least ``SKY_MIN_COLUMNS`` of the block columns hold
    two or more sky blocks, the interquartile range of their depths is within ``HORIZON_SPREAD`` of the height, and
    the sky is brighter on average than the rest. Integer arithmetic throughout.
    """
    x0, y0, x1, y1 = valid
    region = rgb[y0:y1, x0:x1]
    h, w = region.shape[:2]
    b = _block_size(h, w)
    nby, nbx = h // b, w // b
    if nby < 4 or nbx < 4:
        return ()
    tex, means = _luma_block_sums(region[: nby * b, : nbx * b], b)
    pairs = 2 * b * b  # about the number of differences per block
    smooth = tex * 1 <= int(SKY_TEXTURE_DN * 1000) * pairs
    bright = means >= np.sort(means.ravel())[means.size // 2]
    sky_like = smooth & bright
    depth = np.argmin(np.vstack([sky_like, np.zeros((1, nbx), dtype=bool)]), axis=0)  # first non-sky block
    deep = depth >= 2
    if deep.sum() * 10 < int(SKY_MIN_COLUMNS * 10) * nbx:
        return ()
    q1, q3 = np.sort(depth[deep])[[deep.sum() // 4, (3 * deep.sum()) // 4]]
    if (q3 - q1) * b > HORIZON_SPREAD * h:
        return ()
    sky_blocks = np.arange(nby)[:, None] < depth[None, :]
    if not sky_blocks.any() or sky_blocks.all():
        return ()
    # Brighter than the rest: compare sums scaled by counts (integers, no division).
    n_sky, n_rest = int(sky_blocks.sum()), int((~sky_blocks).sum())
    if int(means[sky_blocks].sum()) * n_rest <= int(means[~sky_blocks].sum()) * n_sky:
        return ()
    per_column = np.repeat(depth * b, b)
    per_column = np.concatenate([per_column, np.full(w - per_column.size, per_column[-1])])
    return tuple(int(v) for v in per_column)


# ----------------------------------------------------------------------------------------------------------
# Sidecar
# ----------------------------------------------------------------------------------------------------------
def sidecar_path(image_path: str | Path, scene_dir: str | Path | None = None) -> Path:
    """Where an image's sidecar would be: ``<image stem>.scene.json`` beside it, or in ``scene_dir``."""
    image_path = Path(image_path)
    folder = Path(scene_dir) if scene_dir is not None else image_path.parent
    return folder / f"{image_path.stem}{SIDECAR_SUFFIX}"


def check_sidecar(doc: Any, where: str) -> dict[str, Any]:
    """The sidecar's facts, checked: a JSON object of known keys with finite numbers in range, ``valid`` as four
    integers, ``water_mask`` as a plain file name; AegisError (one line naming ``where`` and the key) otherwise."""
    if not isinstance(doc, dict):
        raise AegisError(f"{where}: a scene sidecar must be a JSON object, got {type(doc).__name__}")
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if key not in SIDECAR_KEYS:
            raise AegisError(
                f"{where}: unknown key {str(key)!r:.60}; a scene sidecar may hold {', '.join(SIDECAR_KEYS)}"
            )
        if key in SIDECAR_NUMBERS:
            lo, hi, what = SIDECAR_NUMBERS[key]
            ok = (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and math.isfinite(float(value))
                and lo <= value <= hi
            )
            if not ok:
                raise AegisError(f"{where}: {key} must be a number in [{lo:g}, {hi:g}] ({what}), got {value!r:.60}")
            out[key] = float(value)
        elif key == "valid":
            ok = (
                isinstance(value, list)
                and len(value) == 4
                and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 1 << 20 for v in value)
            )
            if not ok or value[0] >= value[2] or value[1] >= value[3]:
                raise AegisError(
                    f"{where}: valid must be [x0, y0, x1, y1] with x0 < x1 and y0 < y1 (px), got {value!r:.60}"
                )
            out[key] = [int(v) for v in value]
        else:  # water_mask
            if (
                not isinstance(value, str)
                or not value
                or Path(value).name != value
                or value in (".", "..")
                or "\\" in value
                or any(ord(c) < 32 or ord(c) == 127 for c in value)
                or len(value) > 255
            ):
                raise AegisError(
                    f"{where}: water_mask must be the name of a file beside the sidecar (no separator, "
                    f"backslash or control character), got {value!r:.60}"
                )
            out[key] = value
    return out


def found_sidecar(path: str | Path) -> Path | None:
    """``path`` when anything is there (a file, a folder, a FIFO, a link, even a broken one), else None: a sidecar
    the toolkit looks for is read whenever something carries its name, so a wrong kind of file is refused by
    :func:`read_sidecar` rather than silently ignored."""
    path = Path(path)
    return path if os.path.lexists(path) else None


def check_in_folder(path: str | Path, what: str) -> Path:
    """``path``, unless it is a symbolic link (or lies under one) that resolves outside the folder holding it:
    a file found in a dataset (a sidecar, the water mask it names) is not read from elsewhere (docs/SECURITY.md)."""
    from aegis_data.files.layout import link_target

    path = Path(path)
    real, folder = link_target(path), link_target(path.parent)
    if real is None or folder is None:
        raise AegisError(f"{path}: the {what} is a symbolic link loop; not read")
    if not real.is_relative_to(folder):
        raise AegisError(
            f"{path}: the {what} is a link leaving its folder (to {real}); not read: copy the file into {path.parent}"
        )
    return path


def read_sidecar(path: str | Path, confined: bool = False) -> dict[str, Any]:
    """The checked facts of a sidecar file (strict JSON, at most 64 KiB, no key twice); AegisError otherwise.
    ``confined``: the sidecar was found beside an image (not named on the command line), so a link leaving its
    folder is refused (:func:`check_in_folder`)."""
    from aegis_data.files.readers import parse_json_bytes, read_file_bytes

    path = Path(path)
    if confined:
        check_in_folder(path, "scene sidecar")
    data = read_file_bytes(path, "scene sidecar", "sidecar_", max_bytes=MAX_SIDECAR_BYTES)
    doc = parse_json_bytes(data, "scene sidecar", path, "sidecar_")
    if isinstance(doc, dict):
        # A fact given twice is ambiguous (JSON keeps the last one silently): refuse it.
        pairs = json.loads(data, object_pairs_hook=lambda items: items)
        keys = [k for k, _ in pairs] if isinstance(pairs, list) else []
        twice = sorted({k for k in keys if keys.count(k) > 1})
        if twice:
            raise AegisError(f"{path}: scene sidecar gives {twice[0]!r} more than once")
    return check_sidecar(doc, str(path))


def water_mask_digest(mask: np.ndarray) -> str:
    """SHA-256 of a water mask as the scene records it: one byte per pixel, 1 = water, row-major, after 8 bytes of
    little-endian height and width."""
    m = np.ascontiguousarray(mask, dtype=bool)
    hasher = hashlib.sha256(np.asarray(m.shape, dtype="<u4").tobytes())
    hasher.update(m.view(np.uint8).reshape(-1))  # type: ignore[arg-type]  # the mask's bytes, not a copy of them
    return hasher.hexdigest()


def read_water_mask(path: str | Path, height: int, width: int) -> np.ndarray:
    """A water mask image of the image's size, as bool (H, W): water where any colour sample is non-zero, read at
    its stored depth (8- or 16-bit; a 16-bit label 1 is water). Any format OpenCV decodes; a palette image by its
    colours. Refused: another size (from the header, before decoding: no decompression bomb), an alpha channel that
    is not opaque (which pixels it marks would be a guess), a FIFO or device, a link leaving the sidecar's folder."""
    from aegis_data.files.imageio import decode_samples, header_size
    from aegis_data.files.readers import read_file_bytes

    path = check_in_folder(path, "water mask")
    data = read_file_bytes(path, "water mask", "water_mask_")
    size = header_size(data)
    if size is not None and size != (width, height):
        raise AegisError(f"{path}: water mask is {size[0]}x{size[1]}, the image {width}x{height}")
    samples = decode_samples(data, path, max_pixels=max(1, int(height) * int(width)))
    if samples.shape[:2] != (height, width):
        raise AegisError(f"{path}: water mask is {samples.shape[1]}x{samples.shape[0]}, the image {width}x{height}")
    if samples.ndim == 3 and samples.shape[2] in (2, 4):
        if (samples[..., -1] != np.iinfo(samples.dtype).max).any():
            raise AegisError(
                f"{path}: water mask has transparent pixels; give an opaque mask (non-zero = water): "
                f"an alpha channel is not read"
            )
        samples = samples[..., :-1]
    return samples != 0 if samples.ndim == 2 else (samples != 0).any(axis=2)


# ----------------------------------------------------------------------------------------------------------
# The scene
# ----------------------------------------------------------------------------------------------------------
def gsd_from_person_px(person_px: float) -> float:
    """Ground sampling distance (m/px) of a person unit: 1.7 m x sqrt(1/2) / P."""
    return PERSON_HEIGHT_CM * UPRIGHT_BOX_FACTOR / 100.0 / float(person_px)


def focal_from_hfov(width: int, hfov_deg: float) -> float:
    """Focal length in px of a full frame ``width`` px wide with horizontal field of view ``hfov_deg``."""
    return _round((width / 2.0) / math.tan(math.radians(hfov_deg) / 2.0), 2)


def check_persons(persons: Any, height: int, width: int, where: str = "persons") -> tuple:
    """Person boxes as a tuple of (x0, y0, x1, y1) floats: finite, x0 < x1, y0 < y1, inside the frame (up to
    1e-6 px), at most ``MAX_PERSONS``; AegisError (one line naming ``where``) otherwise."""
    try:
        boxes = [tuple(float(v) for v in box) for box in persons]
    except (TypeError, ValueError):
        raise AegisError(f"{where}: person boxes must be lists of four numbers (x0, y0, x1, y1)") from None
    if len(boxes) > MAX_PERSONS:
        raise AegisError(f"{where}: {len(boxes)} person boxes in one image; at most {MAX_PERSONS}")
    for box in boxes:
        ok = (
            len(box) == 4
            and all(math.isfinite(v) for v in box)
            and box[0] < box[2]
            and box[1] < box[3]
            and box[0] >= -1e-6
            and box[1] >= -1e-6
            and box[2] <= width + 1e-6
            and box[3] <= height + 1e-6
        )
        if not ok:
            raise AegisError(
                f"{where}: person box {list(box)!r:.80} is not a box (x0 < x1, y0 < y1) inside the "
                f"{width}x{height} image"
            )
    return tuple(boxes)


def draw_sun(rgb: np.ndarray, given: Mapping[str, Any]) -> tuple[float, float, tuple[str, ...]]:
    """(elevation, azimuth, drawn): the sidecar's sun angles, the missing ones drawn from the SHA-256 of the scene's
    pixels ``rgb`` (its valid region: bars do not change the sun): elevation uniform in ``SUN_ELEVATION_DEG``,
    azimuth uniform in [0, 360), rounded to 0.01 degree."""
    drawn = tuple(
        k for k, key in (("elevation", "sun_elevation_deg"), ("azimuth", "sun_azimuth_deg")) if key not in given
    )
    elevation, azimuth = given.get("sun_elevation_deg"), given.get("sun_azimuth_deg")
    if drawn:
        # Two uniforms in [0, 1) from the digest itself (53 bits each): a fact of the image, not a corruption's draw,
        # so it opens no random stream (neither the benchmark's nor a training augmentation's namespace).
        hasher = hashlib.sha256(b"aegis-scene|sun|")
        hasher.update(np.ascontiguousarray(rgb).reshape(-1))  # type: ignore[arg-type]  # the pixels' bytes, not a copy
        digest = hasher.digest()
        u = [(int.from_bytes(digest[8 * i : 8 * i + 8], "little") >> 11) * 2.0**-53 for i in (0, 1)]
        lo, hi = SUN_ELEVATION_DEG
        if elevation is None:
            elevation = _round(lo + (hi - lo) * float(u[0]), 2)
        if azimuth is None:
            azimuth = _round(360.0 * float(u[1]), 2)
    assert elevation is not None and azimuth is not None  # given's are numbers (check_sidecar), the others drawn
    return float(elevation), float(azimuth), drawn


def estimate_scene(
    rgb: np.ndarray,
    person_px: float,
    camera: Mapping[str, Any],
    sidecar: Mapping[str, Any] | None = None,
    water_mask: np.ndarray | None = None,
    persons: Sequence = (),
) -> Scene:
    """The scene of one image: estimated from its pixels, the dataset's person unit and the suite's default
    ``camera`` (``SuiteConfig.camera``), with every fact the ``sidecar`` (checked by :func:`check_sidecar`) gives
    taking precedence. ``water_mask``: the decoded mask the sidecar names (its digest joins the identity; it
    replaces the estimated water, inside the valid rectangle). ``persons``: the image's person boxes (x0, y0, x1,
    y1), from the ground truth."""
    check_rgb_image(rgb, "image")
    h, w = rgb.shape[:2]
    given = dict(sidecar or {})
    person_px = check_person_px(person_px)
    if "valid" in given:
        x0, y0, x1, y1 = given["valid"]
        if x1 > w or y1 > h:
            raise AegisError(f"scene sidecar: valid {given['valid']} lies outside the {w}x{h} image")
        valid = (x0, y0, x1, y1)
    else:
        valid = valid_region(rgb)
    vx0, vy0, vx1, vy1 = valid
    if "gsd_cm" in given:
        person_px = person_unit_from_gsd(given["gsd_cm"], "scene sidecar gsd_cm")
    gsd = gsd_from_person_px(person_px)
    if "focal_px" in given:
        focal = given["focal_px"]
    elif "altitude_m" in given and given.get("pitch_deg", 90.0) >= 60.0:
        focal = _round(given["altitude_m"] / gsd, 2)  # near-nadir: altitude = gsd x focal length
    else:
        focal = focal_from_hfov(w, float(camera["hfov_deg"]))
    # The view: a sidecar pitch decides; else sky found at the top means oblique.
    depth: tuple[int, ...] = ()
    horizon = None
    if "pitch_deg" in given:
        view = NADIR if given["pitch_deg"] >= 60.0 else OBLIQUE
        if view == OBLIQUE:
            # The horizon lies f tan(pitch) above the principal point (the frame centre; no roll).
            horizon = _round((h - 1) / 2.0 - focal * math.tan(math.radians(given["pitch_deg"])), 2)
            depth = sky_depth(rgb, valid) if horizon > vy0 else ()
    else:
        depth = sky_depth(rgb, valid)
        view = OBLIQUE if depth else NADIR
        if depth:
            horizon = float(vy0 + sorted(depth)[len(depth) // 2])
    reference = _round((vy0 + vy1 - 1) / 2.0, 2)
    if view == OBLIQUE:
        # The person unit (or the sidecar's gsd) holds midway between the horizon and the bottom of the scene. The
        # mean of a 2-decimal horizon and a row has 3 decimals (an odd last digit ends it in 5), kept exactly: at 2
        # decimals it would lie on a rounding boundary. Where 2 decimals hold it, 3 give the same float.
        reference = _round((max(horizon, vy0) + vy1 - 1) / 2.0, 3)
    boxes = check_persons(persons, h, w)
    elevation, azimuth, drawn = draw_sun(rgb[vy0:vy1, vx0:vx1], given)
    scene = Scene(
        width=w,
        height=h,
        valid=valid,
        view=view,
        horizon_row=horizon,
        person_px=round(person_px, 2),
        gsd_m=gsd,
        reference_row=reference,
        focal_px=focal,
        speed_mps=float(given.get("speed_mps", camera["platform_speed_mps"])),
        exposure_ms=float(given.get("exposure_ms", camera["base_exposure_ms"])),
        iso=float(given.get("iso", camera["base_iso"])),
        heading_deg=given.get("heading_deg"),
        sun_elevation_deg=elevation,
        sun_azimuth_deg=azimuth,
        sky_depth=depth,
        water_mask_sha256=None if water_mask is None else water_mask_digest(water_mask),
        given={k: v for k, v in given.items()},
        persons=boxes,
        sun_drawn=drawn,
    )
    if water_mask is not None:
        inside = np.zeros((h, w), dtype=bool)
        inside[scene.valid_slices] = np.asarray(water_mask, dtype=bool)[scene.valid_slices]
        return replace(scene, water=inside, water_source="sidecar")
    sky = scene.sky_mask() if depth else None
    water, texture = estimate_water(rgb, valid, sky, scene.gsd_rows(np.arange(h)), with_texture=True)
    return replace(scene, water=water, block_texture=texture)


def scene_digest(record: Mapping[str, Any]) -> str:
    """SHA-256 of a scene record's canonical JSON (sorted keys, no whitespace)."""
    return hashlib.sha256(
        json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8")
    ).hexdigest()
