"""Groups of images that must stay in one split (a video clip, a flight): declared in a file, or found by the
numbered-frame rule (docs/DATA.md, "Sequences and near-duplicates").

``groups`` option of every file adapter: a CSV (``stem,group``) or JSON (``{stem: group}``) file that names every
image's group, or the word ``frames``: images whose stems end in a number, taken in number order per prefix, chain
into one group while each frame is near-identical (``frame_hash``) to the one before it.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from aegis_data.errors import AegisError
from aegis_data.executors import Placement, map_units
from aegis_data.files.imageio import read_rgb
from aegis_data.files.readers import read_json
from aegis_data.sources._sard_csv import read_csv_records
from aegis_data.sources.frame_hash import NEAR_DISTANCE, distance, frame_hash
from aegis_data.sources.records import Record

FRAMES_RULE = "frames"
_FRAME = re.compile(r"^(?P<prefix>.*?)(?P<num>\d+)$")


def read_groups_file(path: Path) -> dict[str, str]:
    """stem -> group from CSV (``stem,group``; header optional) or JSON (``{stem: group}``)."""
    if not path.is_file():
        raise AegisError(f"groups file not found: {path}")
    out: dict[str, str] = {}
    if path.suffix.lower() == ".json":
        data, _ = read_json(path, "groups")
        if not isinstance(data, dict):
            raise AegisError(f"groups file {path}: expected a JSON object {{stem: group}}, got {type(data).__name__}")
        for k, v in data.items():
            # A null, list or object would become the group "None" (every such image in one group), silently.
            if v is None or isinstance(v, (bool, list, dict)) or not str(v).strip():
                raise AegisError(
                    f"groups file {path}: the group of {str(k)!r:.60} is {json.dumps(v)[:40]}; "
                    f"expected a non-empty string or a number"
                )
            out[Path(str(k)).stem if "." in str(k) and not str(k).startswith(".") else str(k)] = str(v)
    else:
        for n, row in read_csv_records(path, "groups file"):
            if len(row) < 2:
                raise AegisError(f"groups file {path}:{n}: expected 'stem,group', got {','.join(row)!r:.80}")
            stem, group = row[0].strip(), row[1].strip()
            if (
                n == 1
                and stem.lower() in ("stem", "image", "file", "file_name", "image_id")
                and group.lower() in ("group", "sequence", "video")
            ):
                continue
            if not group:
                raise AegisError(f"groups file {path}:{n}: the group of {stem!r:.60} is empty")
            out[Path(stem).stem if Path(stem).suffix else stem] = group
    if not out:
        raise AegisError(f"groups file {path} lists no images")
    return out


def _names_of(record: Record) -> tuple[str, ...]:
    """The keys a groups file may list a record under: its image id, its file name, that name's stem."""
    name = str(record.meta.get("file") or "") if record.meta else ""
    return tuple(k for k in (record.image_id, name, Path(name).stem if name else "") if k)


def file_hash(path: str) -> int | None:
    """:func:`~aegis_data.sources.frame_hash.frame_hash` of an image file's decoded pixels, remembered by path, size
    and modification time: the frames rule and the audit of one build decode each file once between them."""
    st = os.stat(path)
    return _file_hash(path, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=1 << 16)
def _file_hash(path: str, size: int, mtime_ns: int) -> int | None:
    return frame_hash(read_rgb(path))


def _record_file_hash(record: Record) -> int | None:
    return file_hash(record.path)


def frame_groups(
    records: Sequence[Record], hash_of: Callable[[Record], int | None] = _record_file_hash
) -> dict[str, str]:
    """image id -> group by the numbered-frame rule (module doc); images the rule leaves alone are not listed.

    A group's key is ``<first stem>..<last stem>``. Frames without a reliable hash (flat, tiny) stay alone.
    """
    by_prefix: dict[str, list[tuple[int, Record]]] = {}
    for r in records:
        m = _FRAME.match(r.image_id)
        if m:
            by_prefix.setdefault(m.group("prefix"), []).append((int(m.group("num")), r))
    out: dict[str, str] = {}
    for prefix in sorted(by_prefix):
        frames = [r for _, r in sorted(by_prefix[prefix], key=lambda nr: (nr[0], nr[1].image_id))]
        # decoding releases the GIL: a thread per core, hashes in frame order
        hashes = [h for _, h in map_units(hash_of, frames, Placement(threads=True))]
        chain: list[Record] = []
        for k, r in enumerate(frames):
            prev, cur = (hashes[k - 1] if k else None), hashes[k]
            if chain and not (prev is not None and cur is not None and distance(prev, cur) <= NEAR_DISTANCE):
                _close(chain, out)
                chain = []
            chain.append(r)
        _close(chain, out)
    return out


def _close(chain: list[Record], out: dict[str, str]) -> None:
    if len(chain) > 1:
        key = f"{chain[0].image_id}..{chain[-1].image_id}"
        out.update({r.image_id: key for r in chain})


def apply_groups(
    records: list[Record],
    spec: Any,
    base: Path | None,
    hash_of: Callable[[Record], int | None] = _record_file_hash,
) -> tuple[list[Record], str | None]:
    """``records`` with the groups of option ``groups`` (None: unchanged), and the rule in words for the source
    description (None when no groups were given). ``hash_of`` gives a record's frame hash for the frames rule
    (default: its file's, :func:`file_hash`). AegisError for a file that misses an image."""
    if spec is None or str(spec).strip() == "":
        return records, None
    if str(spec).strip().lower() == FRAMES_RULE:
        found = frame_groups(records, hash_of)
        rule = (
            f"numbered frames: stems ending in a number, in number order per prefix, chain while each frame's "
            f"64-bit difference hash is within {NEAR_DISTANCE} bits of the previous frame's; "
            f"{len(set(found.values()))} group(s) of {len(found)} frames"
        )
        return [replace(r, group=found[r.image_id]) if r.image_id in found else r for r in records], rule
    path = Path(str(spec)).expanduser()
    if base is not None and not path.is_absolute() and not path.exists() and (base / path).exists():
        path = base / path
    mapping = read_groups_file(path)
    grouped, missing = [], []
    for r in records:
        hit = next((mapping[k] for k in _names_of(r) if k in mapping), None)
        if hit is None:
            missing.append(r.image_id)
        grouped.append(replace(r, group=hit or ""))
    if missing:
        raise AegisError(
            f"groups file {path} does not list {len(missing)} of {len(records)} image(s) "
            f"(e.g. {', '.join(missing[:3])}); every image needs a group (give each image its own group "
            f"to leave it alone)",
            param="groups",
        )
    return grouped, f"groups from the file {path.name}"


def groups_description(rule: str | None) -> Mapping[str, str]:
    """The ``rules`` entry a description gains when groups were given (nothing otherwise, so a source without
    groups describes itself as before)."""
    return {"groups": rule} if rule else {}
