"""A procedurally generated, deterministic aerial search-and-rescue scene set that needs no download.

Each image is a nadir drone view: a terrain texture (meadow, karst, dry grass, field or beach palettes),
patches of bright sunlit ground (fissured limestone pavement and gravel, dry sand, bleached soil; clean luma
mostly 0.80-0.93, never clipped), optional water bodies with shore bands, dirt tracks and pale gravel paths,
rocks and vegetation clumps with cast shadows, and a few small persons (standing: shoulders + head from
above; lying: torso, legs, arms and head; in varied clothing colours) with cast shadows. Some images hold no
person (negatives).

Determinism. An image is a pure function of ``(index, width, height, seed)``. Every random draw comes from a
keyed stream of ``aegis_data.engine.seeding`` (Philox keyed by the SHA-256 of the generation key plus a label per
scene element, no global RNG); only raw 64-bit words are used, converted by this module's own integer code.
Pixel work is integer: uint8 ``cv2.resize`` (INTER_LINEAR) and ``cv2.GaussianBlur`` (fixed-point, measured bit-exact
across SIMD paths and OpenCV 4.14/5.0), cv2 integer drawing primitives with integer coordinates, lookup
tables and integer blending. Directions use an integer cosine table (see ``_COS``), never float trig on
pixel data.

Boxes. The box of a person is the extent of its painted pixels (shadow excluded) after the final 3x3
softening blur, i.e. the bounding box of the drawn mask grown by one pixel and clipped to the frame:
``[x_min, y_min, x_max + 1, y_max + 1]`` in absolute pixel coordinates.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from aegis_data.engine.seeding import KeyedRandom
from aegis_data.errors import AegisError
from aegis_data.sources._common import check_options, opt_fraction, opt_int, opt_max_pixels
from aegis_data.sources._dataset import SourceDataset, build_dataset
from aegis_data.sources.records import Record

NAME = "synthetic"
VERSION = "v2"  # bump when the generator's output changes; it is part of every generation key
DEFAULT_SEED = 20260707
DEFAULT_N = 32
# Mostly 640x640, with every 8th frame (index % 8 == 3) 1280x720 so large-frame tiling is exercised too.
DEFAULT_SIZE = "640,640,640,1280x720,640,640,640,640"
DEFAULT_TEST_FRACTION = 0.5
DEFAULT_VAL_FRACTION = 0.25
NEGATIVE_EVERY = 6  # image index i is a negative (no persons) when i % 6 == 5
OPTIONS = ("n", "size", "seed", "test_fraction", "val_fraction", "max_pixels")
URI_PREFIX = "synthetic:"
_URI = re.compile(r"^synthetic:(?P<ver>v\d+)/(?P<seed>\d+)/(?P<w>\d+)x(?P<h>\d+)/(?P<index>\d+)$")

_SHIFT = 3  # sub-pixel bits for cv2 drawing (coordinates in 1/8 px)
_ONE = 1 << _SHIFT


# --- keyed draws -----------------------------------------------------------------------------------------
class KeyedDraws:
    """Scalar and byte draws on top of ``aegis_data.engine.seeding.KeyedRandom`` (raw 64-bit words of a keyed
    Philox stream); every conversion here is exact integer or power-of-two arithmetic."""

    def __init__(self, key: str) -> None:
        self._stream = KeyedRandom(key)

    def words(self, n: int) -> np.ndarray:
        return self._stream.bits(n).astype("<u8", copy=False)

    def _word(self) -> int:
        return int(self._stream.bits(1)[0])

    def bytes(self, n: int) -> np.ndarray:
        """n uniform uint8 values (little-endian bytes of the raw words, independent of the host)."""
        return self.words((n + 7) // 8).view(np.uint8)[:n]

    def below(self, n: int) -> int:
        """Uniform integer in [0, n) (the 2^-64 modulo bias is immaterial here)."""
        return self._word() % n

    def between(self, lo: int, hi: int) -> int:
        """Uniform integer in [lo, hi] inclusive."""
        return lo + self.below(hi - lo + 1)

    def unit(self) -> float:
        """Uniform float in [0, 1): the top 53 bits of one word, scaled exactly."""
        return (self._word() >> 11) * (1.0 / (1 << 53))

    def uniform(self, lo: float, hi: float) -> float:
        return lo + (hi - lo) * self.unit()

    def choice(self, seq):
        return seq[self.below(len(seq))]


def _cos_table() -> tuple[int, ...]:
    # cos of each integer degree in 1/65536 units. math.cos may differ by an ulp between libms; the check
    # below proves no entry sits near a rounding boundary, so the rounded integers are the same everywhere.
    table = []
    for d in range(360):
        v = math.cos(math.radians(d)) * 65536.0
        r = math.floor(v + 0.5)
        if abs(v - r) > 0.5 - 1e-6:  # pragma: no cover - a property of the constants, checked by a test
            raise RuntimeError(f"cosine table entry {d} is too close to a rounding boundary")
        table.append(int(r))
    return tuple(table)


_COS = _cos_table()


def _dir(deg: int) -> tuple[int, int]:
    """(cos, sin) of an integer angle in 1/65536 units (image y axis points down)."""
    return _COS[deg % 360], _COS[(deg - 90) % 360]


def _rot(dx: int, dy: int, deg: int) -> tuple[int, int]:
    """Rotate an integer offset by ``deg`` degrees; integer arithmetic, rounded half up."""
    c, s = _dir(deg)
    return (dx * c - dy * s + 32768) >> 16, (dx * s + dy * c + 32768) >> 16


# --- palettes (RGB) --------------------------------------------------------------------------------------
# "bright": a sunlit bright ground material (bare limestone slabs and gravel, dry sand, bleached soil) as
# (coverage range in per mille of the frame, colour stops). Stop lumas lie at ~0.79-0.88 so that, with the
# material's own texture and the sensor grain, clean pixels stay below 0.94 (no clipping) while a strong
# glint on them saturates -- as on real karst and beach imagery. Pale paths are made of the same material.
# "rock_grey": the grey range of loose rocks (karst limestone is paler). "cracks": fissure darkening /256.
_BIOMES: dict[str, dict[str, Any]] = {
    "meadow": {
        "stops": ((58, 86, 38), (78, 106, 46), (104, 116, 58), (120, 110, 74)),
        "water": 0.35,
        "bushes": 1.6,
        "rocks": 0.2,
        "bush": ((34, 62, 28), (52, 84, 36)),
        "bright": ((0, 40), ((206, 204, 192), (216, 214, 202), (222, 218, 206))),
        "rock_grey": (112, 176),
        "cracks": 80,
    },
    "karst": {
        "stops": ((104, 104, 92), (128, 124, 106), (96, 102, 64), (150, 146, 130)),
        "water": 0.1,
        "bushes": 1.2,
        "rocks": 2.0,
        "bush": ((40, 58, 32), (62, 80, 44)),
        "bright": ((80, 200), ((204, 203, 194), (216, 214, 205), (226, 223, 213))),
        "rock_grey": (136, 196),
        "cracks": 100,
    },
    "dry": {
        "stops": ((146, 132, 92), (128, 114, 80), (106, 100, 62), (168, 154, 118)),
        "water": 0.15,
        "bushes": 0.8,
        "rocks": 0.6,
        "bush": ((58, 70, 40), (84, 92, 54)),
        "bright": ((30, 120), ((212, 202, 170), (222, 212, 180), (228, 218, 186))),
        "rock_grey": (120, 180),
        "cracks": 40,
    },
    "field": {
        "stops": ((106, 86, 64), (124, 102, 76), (90, 98, 54), (140, 118, 88)),
        "water": 0.25,
        "bushes": 0.5,
        "rocks": 0.3,
        "bush": ((40, 66, 30), (60, 88, 40)),
        "bright": ((0, 50), ((212, 204, 184), (222, 214, 194), (226, 218, 200))),
        "rock_grey": (112, 176),
        "cracks": 0,
    },
    "beach": {
        "stops": ((194, 180, 146), (180, 164, 126), (164, 152, 118), (118, 124, 80)),
        "water": 0.9,
        "bushes": 0.3,
        "rocks": 0.5,
        "bush": ((50, 74, 40), (70, 96, 50)),
        "bright": ((50, 150), ((214, 202, 170), (226, 214, 182), (232, 220, 188))),
        "rock_grey": (120, 184),
        "cracks": 0,
    },
}
_BIOME_NAMES = tuple(_BIOMES)
_WATER_DEEP, _WATER_SHALLOW = (30, 62, 74), (70, 104, 100)
_PATH = (158, 138, 108)
_SHIRTS = (
    (200, 40, 40),
    (236, 120, 30),
    (230, 200, 40),
    (40, 70, 170),
    (90, 150, 210),
    (60, 110, 60),
    (226, 226, 220),
    (34, 34, 38),
    (110, 110, 116),
    (120, 60, 140),
    (220, 120, 160),
    (150, 140, 100),
)
_TROUSERS = ((40, 50, 80), (30, 30, 34), (150, 136, 100), (96, 96, 100), (90, 64, 44), (60, 70, 50))
_HAIR = ((30, 25, 20), (70, 45, 30), (186, 156, 100), (150, 150, 150), (200, 40, 40), (40, 70, 170))
_SKIN = ((224, 180, 150), (190, 140, 100), (140, 96, 66), (96, 64, 46))


# --- size and key parsing --------------------------------------------------------------------------------
def parse_sizes(size: Any) -> tuple[tuple[int, int], ...]:
    """ "640" -> ((640, 640),); "1920x1080" -> ((1920, 1080),); "640,1280x720" cycles per image index."""
    text = str(size).strip().lower()
    out = []
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:x(\d+))?", part)
        if not m:
            raise AegisError(
                f"option size={size!r}: expected N, WxH or a comma-separated list of them (e.g. 640,1920x1080)"
            )
        w = int(m.group(1))
        h = int(m.group(2)) if m.group(2) else w
        if not (64 <= w <= 8192 and 64 <= h <= 8192):
            raise AegisError(f"option size={size!r}: each side must be between 64 and 8192 px, got {w}x{h}")
        out.append((w, h))
    return tuple(out)


def generation_key(index: int, width: int, height: int, seed: int) -> str:
    """The canonical string every draw of one image is keyed by; also its audit content identity."""
    return f"aegis-synthetic|{VERSION}|seed={seed}|size={width}x{height}|index={index}"


def image_uri(index: int, width: int, height: int, seed: int) -> str:
    return f"{URI_PREFIX}{VERSION}/{seed}/{width}x{height}/{index}"


def parse_uri(uri: str) -> tuple[int, int, int, int]:
    """``synthetic:v1/<seed>/<W>x<H>/<index>`` -> (index, width, height, seed)."""
    m = _URI.match(uri)
    if not m:
        raise AegisError(
            f"not a synthetic image reference: {uri!r} (expected synthetic:{VERSION}/<seed>/<W>x<H>/<index>)"
        )
    if m.group("ver") != VERSION:
        raise AegisError(f"synthetic image {uri!r} was made by generator {m.group('ver')}, this toolkit has {VERSION}")
    return int(m.group("index")), int(m.group("w")), int(m.group("h")), int(m.group("seed"))


def image_id(index: int) -> str:
    return f"synthetic-{index:05d}"


# --- rendering -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SyntheticScene:
    """One rendered image. rgb: HxWx3 uint8. boxes: person boxes xyxy (absolute px), one per person.
    person_labels: HxW int16, k+1 on the painted extent of person k (0 elsewhere). shadow_mask: HxW bool,
    where a cast shadow darkened the ground. kinds: "standing" | "lying" per person."""

    rgb: np.ndarray
    boxes: tuple[tuple[float, float, float, float], ...]
    person_labels: np.ndarray
    shadow_mask: np.ndarray
    kinds: tuple[str, ...]
    biome: str


_OCTAVE_WEIGHTS = (100, 55, 30, 17, 9)  # ~0.55^o, as integers


def _grid_to(grid: np.ndarray, mw: int, mh: int) -> np.ndarray:
    """Upsample a small random grid to mw x mh (uint8, bilinear) without the flat margins that
    half-pixel-centred resizing leaves at the borders: resize to a larger canvas, keep its centre."""
    gh, gw = grid.shape
    px, py = mw // (2 * (gw - 1)) + 1, mh // (2 * (gh - 1)) + 1
    big = cv2.resize(grid, (mw + 2 * px, mh + 2 * py), interpolation=cv2.INTER_LINEAR)
    return big[py : py + mh, px : px + mw]


def _noise_mid(d: KeyedDraws, w: int, h: int, cells: int, octaves: int) -> np.ndarray:
    """Value noise at 1/8 resolution, ((h+7)//8 + 1) x ((w+7)//8 + 1) uint8, min-max stretched to [0, 255]."""
    long_side = max(w, h)
    mw, mh = -(-w // 8) + 1, -(-h // 8) + 1
    acc = np.zeros((mh, mw), np.uint32)
    wsum = 0
    for o in range(octaves):
        n = cells * (1 << o)
        gw = max(2, (n * w + long_side // 2) // long_side) + 1
        gh = max(2, (n * h + long_side // 2) // long_side) + 1
        grid = d.bytes(gw * gh).reshape(gh, gw)
        acc += _grid_to(grid, mw, mh).astype(np.uint32) * _OCTAVE_WEIGHTS[o]
        wsum += _OCTAVE_WEIGHTS[o]
    f = acc // wsum
    lo, hi = int(f.min()), int(f.max())
    f = ((f - lo) * 255 // max(1, hi - lo)).astype(np.uint8)
    return cv2.GaussianBlur(f, (5, 5), 1.2)


def _upsample8(mid: np.ndarray, w: int, h: int) -> np.ndarray:
    """Exact integer bilinear upsampling by 8: full pixel (y, x) interpolates mid cells y//8, x//8 and their
    next neighbours with weights in eighths. Returns HxW uint16 in units of 1/64 (0..16320), so thresholds
    on the field have 6 more bits than the uint8 grid and shorelines do not band."""
    fx = np.tile(np.arange(8, dtype=np.uint16), -(-w // 8))[:w]
    fy = np.tile(np.arange(8, dtype=np.uint16), -(-h // 8))[:h, None]
    m = mid.astype(np.uint16)
    left = np.repeat(m[:, :-1], 8, axis=1)[:, :w]
    right = np.repeat(m[:, 1:], 8, axis=1)[:, :w]
    rows = left * (8 - fx) + right * fx  # (mh, w), units of 1/8, at most 2040
    top = np.repeat(rows[:-1], 8, axis=0)[:h]
    bottom = np.repeat(rows[1:], 8, axis=0)[:h]
    return top * (8 - fy) + bottom * fy  # (h, w), units of 1/64, at most 16320


def _noise(d: KeyedDraws, w: int, h: int, cells: int, octaves: int) -> np.ndarray:
    """Smooth value noise in [0, 255] (uint8 HxW); uint8 cv2.resize is fixed-point, hence bit-exact."""
    return cv2.resize(_noise_mid(d, w, h, cells, octaves), (w, h), interpolation=cv2.INTER_LINEAR)


def _ramp_lut(stops) -> np.ndarray:
    """256x3 uint8 colour ramp through the stops, integer interpolation."""
    lut = np.zeros((256, 3), np.uint8)
    k = len(stops) - 1
    for i in range(256):
        pos = i * k * 256 // 255  # position in 1/256 of a segment
        seg = min(pos >> 8, k - 1)
        t = pos - (seg << 8)
        a, b = stops[seg], stops[seg + 1]
        lut[i] = [(a[c] * (256 - t) + b[c] * t + 128) >> 8 for c in range(3)]
    return lut


def _blend(img: np.ndarray, colour: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """(img*(255-a) + colour*a + 127) // 255 per pixel, exact integer; alpha HxW uint8; colour HxWx3 or (3,).

    Only pixels with a > 0 are computed (the formula leaves a = 0 pixels unchanged), which keeps large
    frames cheap when water or paths cover little of them.
    """
    sel = alpha > 0
    out = img.copy()
    if not sel.any():
        return out
    a = alpha[sel].astype(np.uint16)[:, None]
    col = colour[sel] if colour.ndim == 3 else colour
    mixed = img[sel].astype(np.uint16) * (255 - a) + np.asarray(col, np.uint16) * a + 127
    out[sel] = (mixed // 255).astype(np.uint8)
    return out


def _darken(img: np.ndarray, mask: np.ndarray, strength: int) -> np.ndarray:
    """Multiply by (1 - strength/256 * mask/255), integer; only where mask > 0 (elsewhere the factor is 1)."""
    sel = mask > 0
    out = img.copy()
    if not sel.any():
        return out
    f = (256 - (mask[sel].astype(np.uint32) * strength // 255)).astype(np.uint16)[:, None]
    out[sel] = ((img[sel].astype(np.uint16) * f + 128) >> 8).astype(np.uint8)
    return out


def _pt(x: float, y: float) -> tuple[int, int]:
    return int(x * _ONE + 0.5), int(y * _ONE + 0.5)


def _ell(dst, cx: int, cy: int, ax: int, ay: int, angle: int, colour) -> None:
    """Filled ellipse; centre and half-axes in 1/8 px (at least 1/2 px), integer angle in degrees."""
    cv2.ellipse(
        dst, (cx, cy), (max(ax, _ONE // 2), max(ay, _ONE // 2)), int(angle), 0, 360, colour, -1, cv2.LINE_8, _SHIFT
    )


def _person_parts(kind: str, cx: int, cy: int, px_m: int, angle: int, d: KeyedDraws) -> list[tuple]:
    """Primitive list for one person: (kind, params..., colour). Coordinates in 1/8 px; px_m = 1/8 px per m."""
    shirt, trousers = d.choice(_SHIRTS), d.choice(_TROUSERS)
    hair, skin = d.choice(_HAIR), d.choice(_SKIN)

    def m(v: float) -> int:  # metres -> 1/8 px, rounded
        return int(v * px_m + 0.5)

    parts: list[tuple] = []
    if kind == "standing":
        # Seen from above and slightly off-nadir: legs peek out below the shoulders.
        ox, oy = _rot(0, m(0.14), angle)
        parts.append(("ell", cx + ox, cy + oy, m(0.17), m(0.12), angle, trousers))
        parts.append(("ell", cx, cy, m(0.24), m(0.14), angle, shirt))
        for sgn in (-1, 1):  # arms along the body
            ax_, ay_ = _rot(sgn * m(0.26), m(0.04), angle)
            parts.append(("ell", cx + ax_, cy + ay_, m(0.05), m(0.12), angle, shirt))
        parts.append(("ell", cx, cy, m(0.105), m(0.115), angle, hair))
    else:
        # Lying: along the rotated y axis, head at -y, feet at +y.
        def at(dx: float, dy: float) -> tuple[int, int]:
            rx, ry = _rot(m(dx), m(dy), angle)
            return cx + rx, cy + ry

        for sgn in (-1, 1):
            lx, ly = at(sgn * 0.09, 0.45)
            parts.append(("ell", lx, ly, m(0.075), m(0.42), angle, trousers))
        tx, ty = at(0.0, -0.22)
        parts.append(("ell", tx, ty, m(0.22), m(0.32), angle, shirt))
        spread = d.between(0, 1)
        for sgn in (-1, 1):
            if spread:
                a2 = angle + sgn * 35
                ax_, ay_ = at(sgn * 0.36, -0.36)
                parts.append(("ell", ax_, ay_, m(0.055), m(0.26), a2, shirt))
                hx_, hy_ = at(sgn * 0.5, -0.56)
                parts.append(("ell", hx_, hy_, m(0.05), m(0.05), angle, skin))
            else:
                ax_, ay_ = at(sgn * 0.26, -0.18)
                parts.append(("ell", ax_, ay_, m(0.055), m(0.27), angle, shirt))
        hx, hy = at(0.0, -0.68)
        parts.append(("ell", hx, hy, m(0.1), m(0.12), angle, skin))
        hx2, hy2 = at(0.0, -0.72)
        parts.append(("ell", hx2, hy2, m(0.1), m(0.08), angle, hair))
    return parts


def _extent_px(kind: str, scale: float) -> float:
    """Radius (px) that bounds a person of this kind around its centre, with 2 px to spare."""
    return (0.45 if kind == "standing" else 1.0) * scale + 2


@dataclass(frozen=True)
class _Person:
    kind: str
    cx: int  # centre, whole pixels
    cy: int
    half: int  # the person is painted inside the (2*half+1)^2 patch centred on (cx, cy)
    angle: int
    parts: tuple  # ("ell", cx, cy, ax, ay, angle, colour) in 1/8 px, patch coordinates


@dataclass(frozen=True)
class _Plan:
    biome: str
    scale: float  # px per metre
    sun: int  # shadow direction, degrees
    sun_len: float  # shadow length factor
    water_field: np.ndarray  # HxW uint16, 1/64 units of the 0..255 noise scale
    has_water: bool
    level: int
    water_alpha: np.ndarray  # HxW uint8
    bright_alpha: np.ndarray  # HxW uint8, the bright ground material's cover
    persons: tuple[_Person, ...]


def _bright_alpha(d: KeyedDraws, w: int, h: int, coverage: tuple[int, int]) -> np.ndarray:
    """Cover (HxW uint8) of bright ground patches: a value-noise field thresholded so that about
    ``coverage`` per mille (drawn in the given range) of the frame lies above it, with a few-pixel soft edge."""
    permille = d.between(*coverage)
    if permille == 0:
        return np.zeros((h, w), np.uint8)
    mid = _noise_mid(d, w, h, cells=4, octaves=4)
    # The threshold is the (1 - coverage) quantile of the 1/8-resolution field, found on its integer histogram.
    above = np.cumsum(np.bincount(mid.ravel(), minlength=256)[::-1])[::-1]  # above[v] = count of cells >= v
    thr = int(np.nonzero(above * 1000 >= mid.size * permille)[0].max())
    # Fine noise (up to +-96 field levels) frays the outlines into ragged rock edges and scattered gravel.
    rough = _noise(d, w, h, cells=max(8, max(w, h) // 10), octaves=2).astype(np.int32)
    field = _upsample8(mid, w, h).astype(np.int32) + (rough - 128) * 48  # 1/64 units
    alpha = ((field - thr * 64) * 3 // 4).clip(0, 255).astype(np.uint8)
    return cv2.GaussianBlur(alpha, (3, 3), 0.8)


def _bright_material(d: KeyedDraws, w: int, h: int, stops, cracks: int) -> np.ndarray:
    """HxWx3 uint8 bright ground: a colour ramp over mottled noise, fine gravel grain (within +-16 levels) and,
    when ``cracks`` > 0, a network of thin dark fissures (the zero crossings of a noise field, darkened by up
    to cracks/256) as in weathered limestone pavement."""
    long_side = max(w, h)
    mottle = _noise(d, w, h, cells=max(6, long_side // 40), octaves=3)
    img = _ramp_lut(stops)[mottle]
    fw, fh = max(4, w // 2), max(4, h // 2)
    gravel = cv2.resize(
        cv2.GaussianBlur(d.bytes(fw * fh).reshape(fh, fw), (3, 3), 0.6), (w, h), interpolation=cv2.INTER_LINEAR
    )
    img = np.clip(img.astype(np.int16) + ((gravel.astype(np.int16) - 128) >> 3)[:, :, None], 0, 255).astype(np.uint8)
    if cracks:
        ridge = np.abs(_noise(d, w, h, cells=max(8, long_side // 24), octaves=3).astype(np.int16) - 128)
        img = _darken(img, ((8 - ridge).clip(0, 8) * 31).astype(np.uint8), cracks)
    return img


def _plan(index: int, w: int, h: int, seed: int) -> _Plan:
    """Scene-wide parameters, water and persons: everything the boxes depend on, without painting."""
    key = generation_key(index, w, h, seed)
    d = KeyedDraws(key + "|scene")
    biome_name = _BIOME_NAMES[d.below(len(_BIOME_NAMES))]
    scale = d.uniform(14.0, 44.0)  # px per metre (flight altitude)
    sun = d.between(0, 359)
    sun_len = d.uniform(0.35, 1.3)
    has_water = d.unit() < _BIOMES[biome_name]["water"]
    level = d.between(150, 225)
    water_field = _upsample8(_noise_mid(KeyedDraws(key + "|water"), w, h, cells=2, octaves=3), w, h)  # 1/64 units
    water_alpha: np.ndarray = np.zeros((h, w), np.uint8)
    if has_water:
        # A 5-level ramp from the water line: 48 alpha steps per level, 3/4 per 1/64 unit.
        water_alpha = ((water_field.astype(np.int32) - level * 64) * 3 // 4).clip(0, 255).astype(np.uint8)
        water_alpha = cv2.GaussianBlur(water_alpha, (5, 5), 1.5)

    bright_alpha = _bright_alpha(KeyedDraws(key + "|bright"), w, h, _BIOMES[biome_name]["bright"][0])

    # Persons: positions away from water, the cores of bright ground (a pale shirt there would all but
    # vanish), each other and the frame edge.
    dp = KeyedDraws(key + "|persons")
    negative = index % NEGATIVE_EVERY == NEGATIVE_EVERY - 1
    n_persons = 0 if negative else 1 + dp.below(min(10, 3 + int(w * h // 400_000)))
    px_m = int(scale * _ONE + 0.5)
    persons: list[_Person] = []
    for _ in range(n_persons):
        kind = "standing" if dp.below(100) < 55 else "lying"
        angle = dp.between(0, 359)
        half = int(_extent_px(kind, scale)) + 1
        if min(w, h) < 2 * half + 3:  # a frame smaller than the person at this altitude cannot hold it
            continue
        for _try in range(30):
            cx = dp.between(half + 1, w - half - 2)
            cy = dp.between(half + 1, h - half - 2)
            free = all((cx - o.cx) ** 2 + (cy - o.cy) ** 2 > (half + o.half + 4) ** 2 for o in persons)
            if free and water_alpha[cy, cx] < 40 and bright_alpha[cy, cx] < 96:
                parts = _person_parts(kind, half * _ONE, half * _ONE, px_m, angle, dp)
                persons.append(_Person(kind, cx, cy, half, angle, tuple(parts)))
                break
    return _Plan(
        biome_name, scale, sun, sun_len, water_field, has_water, level, water_alpha, bright_alpha, tuple(persons)
    )


def _person_mask(p: _Person) -> np.ndarray:
    """The person's painted extent after the final 3x3 blur, in its patch (bool)."""
    size = 2 * p.half + 1
    mask = np.zeros((size, size), np.uint8)
    for part in p.parts:
        _ell(mask, part[1], part[2], part[3], part[4], part[5], 255)
    # The final 3x3 blur spreads each painted pixel by one pixel: grow the mask to match.
    grown = cv2.dilate(mask, np.ones((3, 3), np.uint8)) > 0
    if grown[0].any() or grown[-1].any() or grown[:, 0].any() or grown[:, -1].any():
        raise RuntimeError(f"person sprite overflows its patch (half={p.half})")  # a generator bug
    return grown


def _person_box(p: _Person, grown: np.ndarray) -> tuple[float, float, float, float]:
    ys, xs = np.nonzero(grown)
    x0, y0 = p.cx - p.half, p.cy - p.half
    return (float(x0 + xs.min()), float(y0 + ys.min()), float(x0 + xs.max() + 1), float(y0 + ys.max() + 1))


def synthetic_boxes(
    index: int, width: int, height: int, seed: int = DEFAULT_SEED
) -> tuple[tuple[tuple[float, float, float, float], ...], tuple[str, ...]]:
    """Person boxes and kinds of one synthetic image, without painting the frame (same values as render_scene)."""
    plan = _plan(index, int(width), int(height), seed)
    return tuple(_person_box(p, _person_mask(p)) for p in plan.persons), tuple(p.kind for p in plan.persons)


def render_scene(
    index: int, width: int, height: int, seed: int = DEFAULT_SEED, *, persons: bool = True
) -> SyntheticScene:
    """Render image ``index`` of the synthetic set at ``width`` x ``height``; a pure function of its arguments.

    persons=False renders the identical scene without persons and their shadows (for tests of box
    exactness); each scene element draws from its own keyed stream, so all other pixels are the same.
    """
    if index < 0:
        raise AegisError(f"synthetic image index must be >= 0, got {index}")
    w, h = int(width), int(height)
    if not (1 <= w <= 16384 and 1 <= h <= 16384):
        raise AegisError(f"synthetic image size must be 1..16384 px per side, got {w}x{h}")
    key = generation_key(index, w, h, seed)
    plan = _plan(index, w, h, seed)
    biome = _BIOMES[plan.biome]
    img = _terrain(key, w, h, biome)
    path_mask, pale_mask = _path_masks(key, w, h, plan.scale)
    img = _ground_cover(img, key, plan, biome, path_mask, pale_mask)
    img = _objects(img, key, plan, biome)
    labels = np.zeros((h, w), np.int16)
    person_shadow = np.zeros((h, w), np.uint8)
    boxes: list[tuple[float, float, float, float]] = []
    kinds: list[str] = []
    if persons:
        img = _paint_persons(img, plan, labels, person_shadow, boxes, kinds)
    img = _optics_and_grain(img, key)
    return SyntheticScene(img, tuple(boxes), labels, person_shadow > 0, tuple(kinds), plan.biome)


def _terrain(key: str, w: int, h: int, biome: Mapping) -> np.ndarray:
    """Terrain: a material ramp over large-scale noise, modulated by mid-scale and fine texture."""
    long_side = max(w, h)
    dt = KeyedDraws(key + "|terrain")
    material = _noise(dt, w, h, cells=3, octaves=4)
    texture = _noise(dt, w, h, cells=max(6, long_side // 24), octaves=2)
    img = _ramp_lut(biome["stops"])[material]
    fw, fh = max(4, w // 2), max(4, h // 2)  # fine grass/gravel texture at half resolution
    fine = cv2.resize(
        cv2.GaussianBlur(dt.bytes(fw * fh).reshape(fh, fw), (3, 3), 0.8), (w, h), interpolation=cv2.INTER_LINEAR
    )
    tex = (texture.astype(np.int16) - 128) // 6 + (fine.astype(np.int16) - 128) // 5
    return np.clip(img.astype(np.int16) + tex[:, :, None], 0, 255).astype(np.uint8)


def _path_masks(key: str, w: int, h: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Paths: random walks across the frame, dirt tracks or pale gravel paths of the bright material (the masks
    first, to know whether that material is needed; they are painted over the water later)."""
    long_side = max(w, h)
    d = KeyedDraws(key + "|paths")
    path_mask = np.zeros((h, w), np.uint8)
    pale_mask = np.zeros((h, w), np.uint8)
    for _ in range(d.below(3)):
        target = pale_mask if d.below(2) else path_mask
        x: float
        y: float
        x, y = (d.between(0, w - 1), 0) if d.below(2) else (0, d.between(0, h - 1))
        heading = d.between(20, 70)
        pts = []
        for _step in range(12):
            pts.append(_pt(x, y))
            heading = heading + d.between(-25, 25)
            dx, dy = _rot(int(long_side / 6 * 16), 0, heading)
            x, y = x + dx / 16, y + dy / 16
        cv2.polylines(target, [np.array(pts, np.int32)], False, 255, max(2, int(1.4 * scale)), cv2.LINE_8, _SHIFT)
    return path_mask, pale_mask


def _ground_cover(
    img: np.ndarray, key: str, plan: _Plan, biome: Mapping, path_mask: np.ndarray, pale_mask: np.ndarray
) -> np.ndarray:
    """Bright ground, the water body with its shore band, then the paths over land and water alike."""
    h, w = img.shape[:2]
    # Bright ground (limestone slabs and gravel, dry sand, bleached soil); water and shore cover it.
    bright_ground = np.zeros((1, 1, 3), np.uint8)  # not used when neither patches nor pale paths exist
    if plan.bright_alpha.any() or pale_mask.any():
        bright_ground = _bright_material(KeyedDraws(key + "|bright-texture"), w, h, biome["bright"][1], biome["cracks"])
    img = _blend(img, bright_ground, plan.bright_alpha)

    # Water body with a sand/wet shore band.
    if plan.has_water:
        wf, level = plan.water_field.astype(np.int32), plan.level
        shore = ((wf - (level - 14) * 64) * 3 // 8).clip(0, 255).astype(np.uint8)
        shore_col = biome["stops"][0] if plan.biome == "beach" else (150, 138, 108)
        img = _blend(img, np.array(shore_col, np.uint8), shore // 2)
        depth = ((wf - level * 64) // 16).clip(0, 255).astype(np.uint8)
        water = _ramp_lut((_WATER_SHALLOW, _WATER_DEEP))[depth]
        img = _blend(img, water, plan.water_alpha)

    # Paths over land and water alike (fords, jetties): dirt tracks at 3/4 cover, pale paths at 7/8.
    path_mask = cv2.GaussianBlur(path_mask, (5, 5), 1.5) // 4 * 3
    img = _blend(img, np.array(_PATH, np.uint8), path_mask)
    return _blend(img, bright_ground, cv2.GaussianBlur(pale_mask, (5, 5), 1.5) // 8 * 7)


def _objects(img: np.ndarray, key: str, plan: _Plan, biome: Mapping) -> np.ndarray:
    """Rocks and vegetation with their attached shadows: shadows first, then the objects over them."""
    h, w = img.shape[:2]
    shadow = np.zeros((h, w), np.uint8)
    objects_layer: list[tuple] = []
    _rocks(KeyedDraws(key + "|rocks"), plan, biome, shadow, objects_layer)
    _bushes(KeyedDraws(key + "|bushes"), plan, biome, shadow, objects_layer)
    img = _darken(img, cv2.GaussianBlur(shadow, (5, 5), 1.5), 110)
    for obj in objects_layer:
        if obj[0] == "poly":
            cv2.fillPoly(img, [obj[1]], tuple(int(min(255, max(0, c))) for c in obj[2]), cv2.LINE_8, _SHIFT)
        else:
            col = tuple(int(min(255, max(0, c))) for c in obj[4])
            cv2.circle(img, (obj[1], obj[2]), obj[3], col, -1, cv2.LINE_8, _SHIFT)
    return img


def _rocks(d: KeyedDraws, plan: _Plan, biome: Mapping, shadow: np.ndarray, objects_layer: list[tuple]) -> None:
    """Rocks: irregular polygons with a lighter top face and an attached shadow."""
    h, w = shadow.shape
    scale, sun, sun_len = plan.scale, plan.sun, plan.sun_len
    area_m2 = (w / scale) * (h / scale)
    n_rocks = min(600, int(area_m2 / 100 * biome["rocks"] * d.uniform(0.3, 1.7)))
    for _ in range(n_rocks):
        cx, cy = d.between(0, w - 1), d.between(0, h - 1)
        r = d.uniform(0.25, 1.2) * scale
        nv = d.between(5, 8)
        pts = []
        for k in range(nv):
            rr = r * d.uniform(0.65, 1.0)
            ox, oy = _rot(int(rr * _ONE), 0, k * 360 // nv + d.between(-12, 12))
            pts.append((cx * _ONE + ox, cy * _ONE + oy))
        pts_a = np.array(pts, np.int32)
        for part in (1, 2):  # the outline swept half and fully along the sun: a shadow attached to the rock
            sx, sy = _rot(int(r * sun_len * part / 2 * _ONE), 0, sun)
            cv2.fillPoly(shadow, [pts_a + np.array([sx, sy], np.int32)], 255, cv2.LINE_8, _SHIFT)
        grey = d.between(*biome["rock_grey"])
        objects_layer.append(("poly", pts_a, (grey, grey - 4, grey - 12)))
        hx, hy = _rot(int(r * 0.25 * _ONE), 0, sun + 180)
        centre = np.array([cx * _ONE, cy * _ONE], np.int64)
        inner = ((pts_a - centre) * 5 // 8 + centre + np.array([hx, hy])).astype(np.int32)
        objects_layer.append(("poly", inner, (grey + 18, grey + 16, grey + 10)))


def _bushes(d: KeyedDraws, plan: _Plan, biome: Mapping, shadow: np.ndarray, objects_layer: list[tuple]) -> None:
    """Vegetation clumps: clustered discs, dark with a sunlit highlight."""
    h, w = shadow.shape
    scale, sun, sun_len = plan.scale, plan.sun, plan.sun_len
    area_m2 = (w / scale) * (h / scale)
    n_bushes = min(900, int(area_m2 / 100 * biome["bushes"] * d.uniform(0.3, 1.7)))
    dark, light = biome["bush"]
    for _ in range(n_bushes):
        cx, cy = d.between(0, w - 1), d.between(0, h - 1)
        size = d.uniform(0.5, 2.2) * scale
        shade = d.between(0, 16)
        for _k in range(d.between(2, 6)):
            ox, oy = _rot(int(size * d.uniform(0.0, 0.8) * _ONE), 0, d.between(0, 359))
            r = int(size * d.uniform(0.4, 0.8) * _ONE)
            ccx, ccy = cx * _ONE + ox, cy * _ONE + oy
            for part in (1, 2):  # attached shadow: the disc swept half and fully along the sun
                sx, sy = _rot(int(size * sun_len * 0.6 * part * _ONE), 0, sun)
                cv2.circle(shadow, (ccx + sx, ccy + sy), r, 255, -1, cv2.LINE_8, _SHIFT)
            objects_layer.append(("circle", ccx, ccy, r, tuple(c + shade for c in dark)))
            hx, hy = _rot(r // 3, 0, sun + 180)
            objects_layer.append(("circle", ccx + hx, ccy + hy, r * 5 // 8, tuple(c + shade for c in light)))


def _paint_persons(
    img: np.ndarray, plan: _Plan, labels: np.ndarray, person_shadow: np.ndarray, boxes: list, kinds: list
) -> np.ndarray:
    """Person shadows, then the persons; fills ``labels`` (k + 1 per person), ``person_shadow``, boxes, kinds."""
    scale, sun, sun_len = plan.scale, plan.sun, plan.sun_len
    px_m = int(scale * _ONE + 0.5)
    for p in plan.persons:
        ox, oy = (p.cx - p.half) * _ONE, (p.cy - p.half) * _ONE
        if p.kind == "standing":  # a standing body casts a long shadow from the feet
            length = int(1.7 * scale * sun_len * _ONE / 2)
            sx, sy = _rot(length, 0, sun)
            _ell(person_shadow, p.cx * _ONE + sx, p.cy * _ONE + sy, length, int(0.2 * px_m), sun, 255)
        else:  # a lying body's shadow is its own outline, slightly offset
            sx, sy = _rot(int(0.12 * px_m * sun_len), 0, sun)
            for part in p.parts:
                _ell(person_shadow, ox + part[1] + sx, oy + part[2] + sy, part[3], part[4], part[5], 255)
    img = _darken(img, cv2.GaussianBlur(person_shadow, (3, 3), 0.8), 120)
    for k, p in enumerate(plan.persons):
        y0, x0 = p.cy - p.half, p.cx - p.half
        patch = img[y0 : y0 + 2 * p.half + 1, x0 : x0 + 2 * p.half + 1]  # a view: drawing paints img
        for part in p.parts:
            _ell(patch, part[1], part[2], part[3], part[4], part[5], part[6])
        grown = _person_mask(p)
        labels[y0 : y0 + 2 * p.half + 1, x0 : x0 + 2 * p.half + 1][grown] = k + 1
        boxes.append(_person_box(p, grown))
        kinds.append(p.kind)
    return img


def _optics_and_grain(img: np.ndarray, key: str) -> np.ndarray:
    """Soften hard drawing edges (optics), then add sensor grain."""
    h, w = img.shape[:2]
    img = cv2.GaussianBlur(img, (3, 3), 0.8)
    grain = (KeyedDraws(key + "|grain").bytes(w * h).reshape(h, w).astype(np.int16) >> 4) - 8
    return np.clip(img.astype(np.int16) + grain[:, :, None], 0, 255).astype(np.uint8)


def render_rgb(uri: str) -> np.ndarray:
    """Regenerate the pixels of a ``synthetic:`` record path."""
    index, w, h, seed = parse_uri(uri)
    return render_scene(index, w, h, seed).rgb


# --- the adapter ---------------------------------------------------------------------------------------
def load(source: Any, options: Mapping[str, Any]) -> SourceDataset:
    """The synthetic set: n images; first ``test_fraction`` of the indices -> test, next ``val_fraction``
    -> val, the rest -> train. ``source`` is ignored (nothing is read from disk)."""
    check_options(NAME, options, OPTIONS)
    n = opt_int(options, "n", DEFAULT_N, minimum=1)
    seed = opt_int(options, "seed", DEFAULT_SEED, minimum=0)
    sizes = parse_sizes(options.get("size", DEFAULT_SIZE))
    max_pixels = opt_max_pixels(options)
    for w, h in sizes:
        if w * h > max_pixels:
            raise AegisError(f"option size: {w}x{h} = {w * h:,} pixels is above max_pixels={max_pixels:,}")
    f_test = opt_fraction(options, "test_fraction", DEFAULT_TEST_FRACTION)
    f_val = opt_fraction(options, "val_fraction", DEFAULT_VAL_FRACTION)
    if f_test + f_val > 1.0:
        raise AegisError(f"test_fraction={f_test} + val_fraction={f_val} exceed 1")
    n_test = int(f_test * n + 0.5)
    n_val = min(n - n_test, int(f_val * n + 0.5))
    records = []
    for i in range(n):
        w, h = sizes[i % len(sizes)]
        split = "test" if i < n_test else ("val" if i < n_test + n_val else "train")
        boxes, kinds = synthetic_boxes(i, w, h, seed)
        records.append(
            Record(
                image_id=image_id(i),
                path=image_uri(i, w, h, seed),
                width=w,
                height=h,
                boxes=boxes,
                group=image_id(i),
                split=split,
                meta={"generation_key": generation_key(i, w, h, seed), "kinds": list(kinds)},
            )
        )
    description = {
        "adapter": NAME,
        "root": None,
        "generator": VERSION,
        "options": {
            "n": n,
            "size": ",".join(f"{w}x{h}" for w, h in sizes),
            "seed": seed,
            "test_fraction": f_test,
            "val_fraction": f_val,
        },
        "rules": {
            "split": "image index order: the first round(n*test_fraction) -> test, "
            "the next round(n*val_fraction) -> val, rest -> train",
            "negatives": f"index % {NEGATIVE_EVERY} == {NEGATIVE_EVERY - 1} has no persons",
            "boxes": "extent of the painted person pixels (shadow excluded), xyxy absolute pixels",
        },
    }
    return build_dataset(NAME, description, records)
