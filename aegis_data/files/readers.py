"""The one reader per file format: read the bytes once, parse, and turn every failure into one AegisError line
that names the file.

Every JSON input (predictions, score files, threshold files, manifests, COCO ground truth, groups files) goes
through :func:`read_json`, every YAML input (suite config, baseline configs) through :func:`read_yaml`.

Strict JSON: besides syntax errors, a JSON reader here refuses what Python's ``json`` would silently accept or
crash on -- the ``NaN`` / ``Infinity`` literals (not JSON), numbers beyond float64 (``1e400`` or a 400-digit
integer would become ``inf`` or an integer no array can hold), and nesting deep enough to exhaust the parser's
recursion (a ``RecursionError`` is not a user-facing message).
"""

from __future__ import annotations

import gc
import hashlib
import json
import math
import numbers
import re
import sys
from collections.abc import Container, Iterator
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

import numpy as np
import yaml

from aegis_data.compiled import load_extension
from aegis_data.errors import AegisError

try:  # a compiled parser (1.6-2x faster on a results file, 2-3x on a GT file); else the standard library's json
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised by tests that hide the module
    _orjson = None  # type: ignore[assignment]

_FLOAT_MAX = sys.float_info.max
# Only a file that might hold a float64-overflowing number is parsed with the (slower, per-number) strict number
# hooks; the NaN/Infinity hook costs nothing (the parser calls it only for those literals), so it is always on.
# A number overflows float64 only if its decimal exponent has 3+ digits, or it has 200+ digits in a row (209+
# before a 2-digit exponent, 309+ without): this pattern finds every such number.
_MAYBE_OVERFLOW = re.compile(rb"[0-9]{200}|[eE]\+?0*[1-9][0-9]{2}")
# The regex scans a results file at about 15 MB/s; this filter rules most files out at several hundred MB/s:
# with every digit read as 0, 'E' as 'e' and '+' deleted, each match of the pattern contains 200 zeros in a row
# or 'e000'. Only a file that passes the filter is searched with the regex.
_DIGITS_AS_ZERO = bytes.maketrans(b"0123456789E", b"0000000000e")


class _Refused(ValueError):
    """Raised by the strict parse hooks; carries the finding code and the reason."""

    def __init__(self, code: str, reason: str):
        super().__init__(reason)
        self.code, self.reason = code, reason


def _constant(literal: str) -> Any:
    raise _Refused("json_nonfinite", f"holds the literal {literal} (not JSON; write null or a finite number)")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(
            "json_number_overflow",
            f"holds the number {text[:20]}{'...' if len(text) > 20 else ''} beyond the float64 range",
        )
    return value


def _int(text: str) -> int:
    if len(text.lstrip("-")) > 308:  # 10**308 < float64 max < 10**309
        value = int(text) if len(text) < 4300 else None
        if value is None or abs(value) > _FLOAT_MAX:
            raise _Refused(
                "json_number_overflow", f"holds a {len(text.lstrip('-'))}-digit integer beyond the float64 range"
            )
        return value
    return int(text)


# orjson reads an integer beyond the int64/uint64 range as a float, where json keeps the integer: a file that may
# hold an integer of 19+ digits is read by json, so both parsers give the same objects (and errors) always. On the
# folded bytes such an integer is a run of 19+ zeros that does not follow a '.' (a fraction's digits, as in a small
# float written in full, do).
_LONG_RUN = b"0" * 19
_ZERO_RUN = re.compile(rb"0+")


def _long_integer_free(folded: bytes) -> bool:
    """Whether the folded bytes hold no run of 19+ digits except right after a '.'."""
    pos = 0
    while (i := folded.find(_LONG_RUN, pos)) >= 0:
        if i == 0 or folded[i - 1] != ord("."):
            return False
        pos = _ZERO_RUN.match(folded, i).end()  # type: ignore[union-attr]  # the run starts at i
    return True


def _plain_integers(data: bytes) -> bool:
    """:func:`_long_integer_free` of ``data``'s folded bytes; compiled where built (one pass, no folded copy)."""
    screen = load_extension("aegis_data.files._cjson", "JSON byte screen")
    if screen is not None:
        return bool(screen.long_integer_free(data))
    return _long_integer_free(data.translate(_DIGITS_AS_ZERO, b"+"))


def _may_overflow(data: bytes) -> bool:
    """Whether ``data`` holds a number that might not fit a float64 (:data:`_MAYBE_OVERFLOW` matches)."""
    folded = data.translate(_DIGITS_AS_ZERO, b"+")
    # rfind: its skip table keys on the needle's first byte, rare here, where find's keys on a frequent '0'
    if folded.rfind(b"0" * 200) < 0 and folded.rfind(b"e000") < 0:
        return False
    return _MAYBE_OVERFLOW.search(data) is not None


def parse_json_bytes(data: bytes, what: str, path: str | Path, code_prefix: str = "") -> Any:
    """Strict JSON (see the module docstring) from bytes; AegisError ``[<prefix>not_json]`` and friends."""
    tag = code_prefix
    # The parser allocates millions of containers for a large results file, and each allocation burst would
    # trigger a cyclic-GC pass over everything alive; JSON cannot hold cycles, so collection waits until after.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        if _orjson is not None and _plain_integers(data):
            # orjson builds the same objects as json for every document both accept (integers of at most 18
            # digits, correctly rounded floats, the last of a repeated key); anything it refuses (NaN, a BOM, a
            # lone surrogate, deep nesting, bad syntax, a number beyond float64) is parsed again by json below,
            # which accepts it as before or names the problem in its own words.
            try:
                return _orjson.loads(data)
            except _orjson.JSONDecodeError:
                pass
        if _may_overflow(data):
            return json.loads(data, parse_constant=_constant, parse_float=_float, parse_int=_int)
        return json.loads(data, parse_constant=_constant)
    except _Refused as exc:
        raise AegisError(f"[{tag}{exc.code}] {what} file {path} {exc.reason}") from None
    except RecursionError:
        raise AegisError(f"[{tag}json_too_deep] {what} file {path} nests arrays/objects too deeply to parse") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        where = (
            f" at line {exc.lineno} column {exc.colno}"
            if isinstance(exc, json.JSONDecodeError)
            else " (not UTF-8 text)"
        )
        hint = (
            " (the file looks truncated)"
            if isinstance(exc, json.JSONDecodeError) and exc.pos >= len(data.rstrip()) - 1
            else ""
        )
        raise AegisError(f"[{tag}not_json] {what} file {path} is not valid JSON{where}{hint}") from None
    except ValueError as exc:  # e.g. an integer beyond Python's digit limit
        raise AegisError(
            f"[{tag}not_json] {what} file {path} is not usable JSON ({str(exc).splitlines()[0]})"
        ) from None
    finally:
        if gc_was_enabled:
            gc.enable()


def read_file_bytes(path: str | Path, what: str, code_prefix: str = "", max_bytes: int | None = None) -> bytes:
    """The bytes of one input file; AegisError ``[<prefix>not_found]``, ``wrong_type`` (a directory, FIFO,
    socket or device), ``unreadable`` or, with ``max_bytes``, ``too_large`` (at most ``max_bytes + 1`` bytes are
    read: a larger file is refused without reading it whole, also one that grows while it is read)."""
    p = Path(path)
    if not p.exists():
        raise AegisError(f"[{code_prefix}not_found] {what} file not found: {p}")
    if p.is_dir():
        raise AegisError(f"[{code_prefix}wrong_type] {what} path is a directory, expected a file: {p}")
    if not p.is_file():  # checked before open(): reading a FIFO blocks, a device may never end
        raise AegisError(f"[{code_prefix}wrong_type] {what} path is not a regular file (a FIFO, socket or device): {p}")
    try:
        if max_bytes is None:
            return p.read_bytes()
        with open(p, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise AegisError(f"[{code_prefix}unreadable] cannot read {what} file {p}: {exc.strerror}") from None
    if len(data) > max_bytes:
        raise AegisError(
            f"[{code_prefix}too_large] {what} file {p} is too large: a {what} is at most {max_bytes:,} bytes"
        )
    return data


def read_json(path: str | Path, what: str, code_prefix: str = "") -> tuple[Any, str]:
    """(parsed strict JSON, SHA-256 hex of the bytes), reading the file once. AegisError codes: ``not_found``,
    ``wrong_type``, ``unreadable``, ``not_json``, ``json_nonfinite``, ``json_number_overflow``, ``json_too_deep``
    (each prefixed with ``code_prefix``)."""
    data = read_file_bytes(path, what, code_prefix)
    return parse_json_bytes(data, what, path, code_prefix), hashlib.sha256(data).hexdigest()


def read_json_object(path: str | Path, what: str, code_prefix: str = "") -> tuple[dict, str]:
    """:func:`read_json` for a file whose top level must be an object (``[<prefix>wrong_type]`` otherwise)."""
    obj, sha = read_json(path, what, code_prefix)
    if not isinstance(obj, dict):
        raise AegisError(
            f"[{code_prefix}wrong_type] {what} file {path}: expected a JSON object at the top level, "
            f"got a JSON {type(obj).__name__}"
        )
    return obj, sha


# YAML inputs (suite configs, augmentation policies, baseline configs) are a few KB; the pure-Python parser reads
# about 200 KB/s, so these bounds keep any YAML input under about two seconds and a few MB. Aliases are shared by
# the parser, but every reader walks (and prints) values as trees: a "billion laughs" of nine nested aliases is 6 KB
# of text and 387 million nodes. So the document's node count with every alias expanded is bounded too.
MAX_YAML_BYTES = 1 << 18
MAX_YAML_NODES = 1 << 18


class _NoRepeatedKeys:
    """A safe loader's mapping constructor that refuses a key given twice (YAML keeps the last one silently)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    twice = key in seen
                except TypeError:  # an unhashable key: the safe constructor refuses it below
                    continue
                if twice:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"the key {str(key)[:60]!r} is given twice", key_node.start_mark
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


class _StrictYamlLoader(_NoRepeatedKeys, yaml.SafeLoader):
    """The safe loader, refusing a mapping that gives a key twice."""


# libyaml's parser, where PyYAML was built with it, reads a suite file about ten times faster; the constructor (and
# so the values) is the same Python code. It reads only ASCII text, and only its successes count: anything it
# refuses is read again by the pure-Python parser, whose message names the problem as before.
_StrictCYamlLoader: type | None = (
    type("_StrictCYamlLoader", (_NoRepeatedKeys, yaml.CSafeLoader), {})
    if getattr(yaml, "__with_libyaml__", False)
    else None
)


def _expanded_nodes(root: yaml.Node, limit: int) -> int | None:
    """The number of nodes of the document with every alias expanded, or None when it exceeds ``limit`` or an
    alias refers to a node that contains it (a cycle). Iterative: nesting depth is bounded by the parser alone."""
    size: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if isinstance(node, yaml.ScalarNode):
            size[key] = 1
            continue
        children = [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else node.value
        if done:
            open_.discard(key)
            total = 1 + sum(size[id(c)] for c in children)
            if total > limit:
                return None
            size[key] = total
            continue
        if key in size:
            continue
        if key in open_:
            return None
        open_.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in open_:
                return None
            if id(child) not in size:
                stack.append((child, False))
    return size[id(root)]


def parse_yaml_bytes(data: bytes, what: str, path: str | Path) -> Any:
    """Safe-loaded YAML from bytes (a non-UTF-8 file is a YAML error too); AegisError naming the file. At most
    :data:`MAX_YAML_BYTES` bytes and :data:`MAX_YAML_NODES` nodes with aliases expanded, no alias cycle, no key
    given twice in one mapping."""
    if len(data) > MAX_YAML_BYTES:
        raise AegisError(f"{what} {path}: {len(data):,} bytes; a YAML input holds at most {MAX_YAML_BYTES:,}")
    if _StrictCYamlLoader is not None and data.isascii():
        try:
            return _parse_yaml(_StrictCYamlLoader, data, what, path)
        except (AegisError, yaml.YAMLError, RecursionError, ValueError):
            pass
    return _parse_yaml(_StrictYamlLoader, data, what, path)


def _parse_yaml(loader_type: Any, data: bytes, what: str, path: str | Path) -> Any:
    try:  # the reader decodes the bytes when it is made: a non-UTF-8 file fails here
        loader = loader_type(data)
    except yaml.YAMLError as exc:
        raise AegisError(f"{what} {path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_nodes(node, MAX_YAML_NODES) is None:
            raise AegisError(
                f"{what} {path}: its aliases expand to more than {MAX_YAML_NODES:,} values or refer "
                f"to themselves (a YAML alias bomb?); write the values out"
            )
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise AegisError(f"{what} {path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    except RecursionError:
        raise AegisError(f"{what} {path}: nests too deeply to parse") from None
    finally:
        loader.dispose()


def read_yaml(path: str | Path, what: str) -> tuple[Any, bytes]:
    """(safe-loaded YAML, the bytes read); AegisError for a missing, unreadable, oversized or malformed file."""
    data = read_file_bytes(path, what, max_bytes=MAX_YAML_BYTES)
    return parse_yaml_bytes(data, what, path), data


def json_number(v: Any, where: str, what: str) -> float:
    """A JSON number as a finite float64; AegisError for booleans, strings, null and values like 10**400."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
        raise AegisError(f"{where}: {what} {v!r:.40} is not a number")
    try:
        out = float(v)
    except OverflowError:
        out = math.inf
    if not math.isfinite(out):
        raise AegisError(f"{where}: {what} {str(v)[:40]} does not fit a finite 64-bit float")
    return out


# --- COCO ground truth -----------------------------------------------------------------------------------
def read_coco_gt(path: str | Path, what: str = "COCO ground truth", code_prefix: str = "gt_") -> tuple[dict, str]:
    """(COCO GT dict, SHA-256 of the bytes): strict JSON whose top level is an object with an ``images`` list
    and an ``annotations`` list (``categories`` optional here; the evaluator's loader requires it)."""
    coco, sha = read_json(path, what, code_prefix)
    if not isinstance(coco, dict):
        raise AegisError(
            f"[{code_prefix}wrong_type] {path}: expected a COCO object with 'images', 'annotations' "
            f"and 'categories'; got a JSON {type(coco).__name__}"
        )
    if not isinstance(coco.get("images"), list) or not isinstance(coco.get("annotations", []), list):
        raise AegisError(f"[{code_prefix}wrong_type] {path}: expected an object with 'images' and 'annotations' lists")
    return coco, sha


def stays_inside(name: Any) -> bool:
    """Whether ``name`` is a relative POSIX path that stays inside the folder it is joined to: not empty, not
    absolute (nor a Windows drive), no ``..`` part, no backslash or NUL."""
    if not isinstance(name, str) or not name or "\x00" in name or "\\" in name:
        return False
    return (
        not PurePosixPath(name).is_absolute()
        and ".." not in PurePosixPath(name).parts
        and not PureWindowsPath(name).drive
    )


def image_name_problem(image: dict) -> str | None:
    """Why an ``images`` entry of a split's GT would lead a reader out of its image folder, else None.

    Readers join ``file_name`` to a condition folder, and ``stem`` (the split's image id) as ``<stem>.png``: a
    file name must stay inside, a stem must be one plain name.
    """
    name = image.get("file_name")
    if isinstance(name, str) and not stays_inside(name):
        return f"file_name {name!r:.80} leaves the image folder (an absolute path, '..', a backslash or NUL)"
    stem = image.get("stem")
    if stem is not None and not (
        isinstance(stem, str) and stays_inside(stem) and "/" not in stem and stem not in (".", "")
    ):
        return f"stem {stem!r:.80} is not a plain file name (the split's image id, such as 'img001')"
    return None


def coco_images(coco: dict, where: str | Path) -> list[dict]:
    """The ``images`` of a COCO GT sorted by id; AegisError unless every one is an object with an integer id and
    a ``file_name``, no id repeats, and no file name or stem leads out of the image folder."""
    images = coco.get("images") if isinstance(coco, dict) else None
    listed = images if isinstance(images, list) else [None]  # not a list: refused at its first "image"
    for k, im in enumerate(listed):
        if (
            not isinstance(im, dict)
            or not isinstance(im.get("id"), int)
            or isinstance(im.get("id"), bool)
            or not isinstance(im.get("file_name"), str)
        ):
            raise AegisError(f"{where}: images[{k}] must be an object with an integer 'id' and a 'file_name'")
        problem = image_name_problem(im)
        if problem is not None:
            raise AegisError(f"{where}: images[{k}] {problem}")
    out = sorted(listed, key=lambda im: im["id"])
    ids = [im["id"] for im in out]
    if len(set(ids)) != len(ids):
        raise AegisError(f"{where}: duplicate image ids")
    return out


def coco_person_boxes(coco: dict, where: str | Path, *, skip_crowd: bool = False) -> dict[int, list[list[float]]]:
    """``{image id: [[x, y, w, h], ...]}`` of the person annotations, in file order (every image listed, possibly
    empty). Person = the categories named 'person' when any is, else every category."""
    images = coco_images(coco, where)
    cats = {
        c.get("id")
        for c in coco.get("categories") or []
        if isinstance(c, dict) and str(c.get("name", "")).strip().lower() == "person"
    }
    out: dict[int, list[list[float]]] = {im["id"]: [] for im in images}
    for k, a in coco_annotations(coco, where, out):
        if (cats and a.get("category_id") not in cats) or (skip_crowd and a.get("iscrowd", 0)):
            continue
        out[a["image_id"]].append(coco_bbox(a, where, k))
    return out


def coco_annotations(coco: dict, where: str | Path, image_ids: Container[int]) -> Iterator[tuple[int, dict]]:
    """``(index, annotation)`` of every annotation of a COCO GT, in file order; AegisError unless each is an
    object whose ``image_id`` is in ``image_ids`` and whose ``bbox`` is a list of 4 items (read them with
    :func:`coco_bbox`)."""
    for k, a in enumerate(coco.get("annotations") or []):
        if (
            not isinstance(a, dict)
            or a.get("image_id") not in image_ids
            or not isinstance(a.get("bbox"), list)
            or len(a["bbox"]) != 4
        ):
            raise AegisError(
                f"{where}: annotations[{k}] must be an object with a known 'image_id' and a 4-number 'bbox'"
            )
        yield k, a


def coco_bbox(annotation: dict, where: str | Path, k: int) -> list[float]:
    """The ``bbox`` of annotation ``k`` (from :func:`coco_annotations`) as 4 finite floats; else AegisError."""
    return [json_number(v, f"{where}: annotations[{k}]", "bbox value") for v in annotation["bbox"]]


def coco_boxes_by_stem(coco: dict, where: str | Path) -> dict[str, list[list[float]]]:
    """:func:`coco_person_boxes` keyed by image stem (the ``stem`` attribute a split writes, else the file
    name's stem)."""
    boxes = coco_person_boxes(coco, where)
    names = {im["id"]: im.get("stem") or Path(im["file_name"]).stem for im in coco["images"]}  # checked above
    return {names[i]: b for i, b in boxes.items()}
