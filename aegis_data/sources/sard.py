"""SARD (search-and-rescue frames from drone video) with a group-aware split.

Three layouts are accepted under ``ROOT``:
- original frames ``gssNNNN.jpg`` with VOC XML (beside the images or anywhere below ROOT, matched by stem);
- the CSV copy: folders of frames, each with one ``*.csv`` of ``filename,width,height,class,xmin,ymin,xmax,ymax``
  rows (read by ``_sard_csv``); augmented copies among the frames share their frame's group, are kept out of
  test and val (option ``drop_augmented``: out of train too) and never count towards a split's size;
- a Roboflow export ``{train,valid,test}/{images,labels}`` of YOLO txt, file names
  ``<stem>_jpg.rf.<hash>.jpg``. The Roboflow suffix is stripped to recover the original frame stem; copies of
  one frame (augmentations, or the same frame in two Roboflow splits) share that stem and therefore a group.
  Roboflow's own split is ignored (it leaks such copies) and recorded in the description.

Groups (declared rule). With ``groups=FILE`` (CSV ``stem,group`` or JSON ``{stem: group}``) every image's
original stem must be listed. Otherwise the frame number is the trailing digits of the original stem;
frames with the same prefix whose numbers differ by at most ``gap`` (default 2, so a sequence survives one
dropped frame) chain into one sequence; sequences longer than ``max_group`` distinct frames (default 50) are
cut into consecutive chunks, and at a cut whose two chunks land in different splits the frames within
``gap`` of the cut are purged from the lower-priority side (train, then val) so that no near-duplicate pair
straddles splits. Names without a frame number and no groups file -> AegisError.

Split: groups in SHA-256 order of ``sard-split|<group>`` fill test to ``test_fraction`` (default 0.2) of the
images, then val to ``val_fraction`` (default 0.1); the rest is train.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from aegis_data.errors import AegisError
from aegis_data.files.imageio import list_images
from aegis_data.sources._common import (
    PERSON_NAMES,
    check_names_matched,
    check_options,
    opt_bool,
    opt_follow_links,
    opt_fraction,
    opt_ids,
    opt_int,
    opt_max_pixels,
    opt_path,
    portable_path,
    require_dir,
    safe_id,
)
from aegis_data.sources._dataset import SourceDataset, build_dataset, with_split
from aegis_data.sources._groups import read_groups_file
from aegis_data.sources._labels import split_stats, xml_record
from aegis_data.sources._sard_csv import (
    DEGENERATE_KINDS,
    SARD_PERSON_CLASSES,
    CsvLayout,
    folder_image_id,
    is_csv_layout,
    read_csv_layout,
)
from aegis_data.sources._split import assign_groups
from aegis_data.sources.records import Record
from aegis_data.sources.yolo import check_classes_matched, class_stats, label_folder, yolo_class_filter

NAME = "sard"
OPTIONS = (
    "groups",
    "gap",
    "max_group",
    "test_fraction",
    "val_fraction",
    "classes",
    "max_pixels",
    "follow_links",
    "drop_augmented",
)
ROBOFLOW_SPLITS = ("train", "valid", "test")
_ROBOFLOW = re.compile(r"^(?P<stem>.+)_(?:jpe?g|png|bmp|tiff?)\.rf\.[0-9A-Za-z]+$")
_FRAME = re.compile(r"^(?P<prefix>.*?)(?P<num>\d+)$")
_PRIORITY = {"test": 2, "val": 1, "train": 0}


def original_stem(file_stem: str) -> str:
    """``gss123_jpg.rf.abc`` -> ``gss123``; names without a Roboflow suffix are returned unchanged."""
    m = _ROBOFLOW.match(file_stem)
    return m.group("stem") if m else file_stem


def _roboflow_records(root: Path, classes, max_pixels: int, stats: Counter) -> tuple[list[Record], dict]:
    records = []
    layout: dict[str, Any] = {}
    for rs in ROBOFLOW_SPLITS:
        img_dir = root / rs / "images"
        if not img_dir.is_dir():
            continue
        items, layout[rs] = label_folder(
            img_dir, root / rs / "labels", classes=classes, max_pixels=max_pixels, stats=stats
        )
        records += [
            Record(
                safe_id(img.stem),
                str(img),
                w,
                h,
                boxes,
                meta={"file": img.name, "original_stem": original_stem(img.stem), "source_split": rs},
            )
            for img, w, h, boxes in items
        ]
    return records, layout


def _original_records(
    root: Path, max_pixels: int, stats: Counter, classes: frozenset[str] | None = None
) -> tuple[list[Record], dict]:
    """Frames and VOC XML anywhere below ROOT. An XML in the image's own folder wins over one elsewhere;
    when one stem occurs in several folders (e.g. a mirror's own train/test folders), the ids carry the
    folder path, and the copies share the frame's group. ``classes``: the object names counted as persons (any
    case; default the person aliases), each of which must occur."""
    images = list_images(root, recursive=True)
    xml_by_stem: dict[str, Path] = {}
    xml_by_place: dict[tuple[Path, str], Path] = {}
    for p in sorted(root.rglob("*.xml")):
        if p.is_file() and not p.name.startswith("."):
            xml_by_stem.setdefault(p.stem, p)
            xml_by_place[(p.parent, p.stem)] = p
    stem_count = Counter(p.stem for p in images)
    records = []
    skipped = []
    seen: set[str] = set()
    person_names = {c.lower() for c in classes} if classes else PERSON_NAMES
    for img in images:
        xml = xml_by_place.get((img.parent, img.stem)) or xml_by_stem.get(img.stem)
        if xml is None:
            skipped.append(img.name)
            continue
        records.append(
            xml_record(
                img,
                xml,
                split="test",
                image_id=folder_image_id(img, root, stem_count),
                max_pixels=max_pixels,
                stats=stats,
                seen=seen,
                meta={"original_stem": img.stem},
                person_names=person_names,
            )
        )
    check_names_matched(classes, seen, root)
    stems = set(stem_count)
    orphans = sorted(s for s in xml_by_stem if s not in stems)
    layout = {
        "images_found": len(images),
        "images_without_xml_skipped": len(skipped),
        "xml_without_image_skipped": len(orphans),
        "stems_in_several_folders": sum(1 for c in stem_count.values() if c > 1),
        "examples_skipped": skipped[:5] + [f"{s}.xml" for s in orphans[:5]],
    }
    return records, layout


def sequence_groups(
    stems: list[str], gap: int, max_group: int
) -> tuple[dict[str, str], dict[str, tuple[str, int, int]]]:
    """Frame-number grouping. Returns (stem -> group key, group key -> (chain key, first, last frame)).

    AegisError listing examples when a stem has no trailing frame number.
    """
    parsed: dict[str, tuple[str, int]] = {}
    bad = []
    for s in stems:
        m = _FRAME.match(s)
        if m is None:
            bad.append(s)
        else:
            parsed[s] = (m.group("prefix"), int(m.group("num")))
    if bad:
        raise AegisError(
            f"cannot form SARD sequence groups: {len(bad)} image name(s) have no trailing frame number "
            f"(e.g. {', '.join(sorted(bad)[:3])}); pass groups=FILE (CSV stem,group or JSON) to declare them"
        )
    by_prefix: dict[str, set[int]] = defaultdict(set)
    for prefix, num in parsed.values():
        by_prefix[prefix].add(num)
    frame_group: dict[tuple[str, int], str] = {}
    chunks: dict[str, tuple[str, int, int]] = {}
    for prefix in sorted(by_prefix):
        nums = sorted(by_prefix[prefix])
        chains: list[list[int]] = [[nums[0]]]
        for a in nums[1:]:
            if a - chains[-1][-1] <= gap:
                chains[-1].append(a)
            else:
                chains.append([a])
        for chain in chains:
            chain_key = f"{prefix}{chain[0]}"
            for i in range(0, len(chain), max_group):
                part = chain[i : i + max_group]
                key = f"{prefix}{part[0]}-{part[-1]}"
                chunks[key] = (chain_key, part[0], part[-1])
                for a in part:
                    frame_group[(prefix, a)] = key
    return {s: frame_group[parsed[s]] for s in stems}, chunks


def _purge_cuts(
    records: list[Record], chunks: dict[str, tuple[str, int, int]], gap: int
) -> tuple[list[Record], list[str]]:
    """Drop frames within ``gap`` of a chunk cut whose neighbour chunk went to another split (lower priority side)."""
    split_of = {r.group: r.split for r in records}
    by_chain: dict[str, list[str]] = defaultdict(list)
    for key, (chain, _first, _last) in chunks.items():
        by_chain[chain].append(key)
    drop: set[tuple[str, int, int]] = set()  # (group, lo, hi) frame ranges to purge
    for keys in by_chain.values():
        keys.sort(key=lambda k: chunks[k][1])
        for a, b in zip(keys, keys[1:]):
            sa, sb = split_of.get(a), split_of.get(b)
            if sa is None or sb is None or sa == sb:
                continue
            a_last, b_first = chunks[a][2], chunks[b][1]
            if _PRIORITY[sa] >= _PRIORITY[sb]:
                drop.add((b, b_first, a_last + gap))
            else:
                drop.add((a, b_first - gap, a_last))
    kept, purged = [], []
    for r in records:
        frame = _FRAME.match(r.meta["original_stem"])
        assert frame is not None  # chunks come from sequence_groups, which refuses a stem without a frame number
        num = int(frame.group("num"))
        if any(r.group == g and lo <= num <= hi for g, lo, hi in drop):
            purged.append(r.image_id)
        else:
            kept.append(r)
    return kept, purged


def load(source: Any, options: Mapping[str, Any]) -> SourceDataset:
    check_options(NAME, options, OPTIONS)
    root = require_dir(Path(source).expanduser(), "SARD root")
    gap = opt_int(options, "gap", 2, minimum=1)
    # A chunk at least `gap` frames long keeps frames of non-adjacent chunks more than `gap` apart.
    max_group = opt_int(options, "max_group", 50, minimum=gap)
    f_test = opt_fraction(options, "test_fraction", 0.2)
    f_val = opt_fraction(options, "val_fraction", 0.1)
    max_pixels = opt_max_pixels(options)
    groups_path = opt_path(options, "groups", base=root)
    drop_augmented = opt_bool(options, "drop_augmented")
    stats: Counter = Counter()
    roboflow = any((root / s / "images").is_dir() for s in ROBOFLOW_SPLITS)
    # `classes`: YOLO class ids in a Roboflow export (checked as such), class names in the CSV layout.
    classes = yolo_class_filter(options) if roboflow else opt_ids(options, "classes")
    csv_layout: CsvLayout | None = None
    if roboflow:
        records, layout = _roboflow_records(root, classes, max_pixels, stats)
        check_classes_matched(classes, stats, root)
    elif is_csv_layout(root, exclude=groups_path):
        csv_layout = read_csv_layout(root, classes=classes, max_pixels=max_pixels, stats=stats, exclude=groups_path)
        records, layout = csv_layout.records, csv_layout.layout
    else:
        records, layout = _original_records(root, max_pixels, stats, classes)
    if drop_augmented and csv_layout is None:
        raise AegisError(
            "option drop_augmented applies to SARD's CSV layout only (folders of frames with one "
            "labels CSV each); this source is the " + ("Roboflow" if roboflow else "original XML") + " layout"
        )
    if not records:
        raise AegisError(
            f"no labelled images found under {root} (expected gssNNNN.jpg frames with VOC XML, folders of frames "
            "each with one labels CSV, or a Roboflow export train/, valid/, test/ each with images/ and labels/)"
        )
    stems = sorted({r.meta["original_stem"] for r in records})
    chunks: dict[str, tuple[str, int, int]] = {}
    if groups_path is not None:
        mapping = read_groups_file(groups_path)
        missing = [s for s in stems if s not in mapping]
        if missing:
            raise AegisError(
                f"groups file {groups_path} does not list {len(missing)} of {len(stems)} image(s) "
                f"(e.g. {', '.join(missing[:3])}); every image stem needs a group"
            )
        group_of = {s: mapping[s] for s in stems}
        rule = f"groups from {groups_path}"
    else:
        group_of, chunks = sequence_groups(stems, gap, max_group)
        rule = (
            f"trailing frame number; same prefix and number gap <= {gap} chain into a sequence; sequences cut "
            f"into chunks of <= {max_group} frames, frames within {gap} of a cut between splits purged"
        )
    records = [replace(r, group=group_of[r.meta["original_stem"]]) for r in records]
    # Augmented copies ride with their frame's group but do not count towards a split's size, so a copy
    # never changes which split a frame lands in.
    sizes = Counter(r.group for r in records if not r.meta.get("augmented_copy"))
    to = assign_groups(sizes, [("test", f_test), ("val", f_val)], "train", salt="sard-split")
    records = [with_split(r, to[r.group]) for r in records]
    copies_dropped = [
        r.image_id for r in records if r.meta.get("augmented_copy") and (drop_augmented or r.split != "train")
    ]
    if copies_dropped:
        dropped = set(copies_dropped)
        records = [r for r in records if r.image_id not in dropped]
    purged: list[str] = []
    if chunks:
        records, purged = _purge_cuts(records, chunks, gap)
    source_leak = 0
    if roboflow:
        seen: dict[str, set] = defaultdict(set)
        for r in records:
            seen[r.meta["original_stem"]].add(r.meta["source_split"])
        source_leak = sum(1 for v in seen.values() if len(v) > 1)
    description = {
        "adapter": NAME,
        "root": root.name,  # the folder name only: the manifest must not depend on where a user keeps the data
        "layout_kind": "roboflow" if roboflow else "csv" if csv_layout else "original",
        "options": {
            "groups": portable_path(groups_path, root) if groups_path else None,
            "gap": gap,
            "max_group": max_group,
            "test_fraction": f_test,
            "val_fraction": f_val,
            "classes": sorted(classes) if classes else None,
            "max_pixels": max_pixels,
            **({"drop_augmented": drop_augmented} if csv_layout else {}),
        },
        "layout": layout,
        "groups": len(sizes),
        "purged_at_cuts": len(purged),
        "purged_examples": purged[:10],
        "roboflow_stems_in_several_source_splits": source_leak,
        # The CSV layout's per-class counts come with its facts below.
        **(class_stats(stats) if roboflow else {} if csv_layout else split_stats(stats)),
        "rules": {
            "groups": rule,
            "split": "groups in SHA-256 order of 'sard-split|<group>' fill test, then val, to their fractions of "
            "the images; the rest -> train; no group straddles splits",
            "roboflow": "the '_<ext>.rf.<hash>' suffix is stripped to find the original frame; Roboflow's own "
            "split is ignored",
        },
    }
    warnings: tuple[str, ...] = ()
    if csv_layout is not None:
        facts, csv_rules = _csv_description(csv_layout, classes, drop_augmented, len(copies_dropped), stats)
        description.update(facts)
        description["rules"].update(csv_rules)
        warnings = _csv_warnings(csv_layout)
    return build_dataset(
        NAME, description, records, roots=(root,), follow_links=opt_follow_links(options), warnings=warnings
    )


def _csv_description(
    found: CsvLayout, classes, drop_augmented: bool, copies_dropped: int, stats: Counter
) -> tuple[dict, dict]:
    """The CSV layout's facts (also what ``aegis audit`` shows, listed under ``audit_facts``) and its rules."""
    copies = sorted(found.copies)
    facts = {
        "frames": sum(1 for r in found.records if not r.meta["augmented_copy"]),
        **class_stats(stats),
        "augmented_copies": len(copies),
        "augmented_copies_dropped": copies_dropped,
        "augmented_examples": [f"{c} (copy of {found.copies[c]})" for c in copies[:5]],
        "degenerate_rows": sum(found.degenerate.values()),
        "degenerate_rows_by_kind": {k: found.degenerate[k] for k in DEGENERATE_KINDS if found.degenerate[k]},
        "degenerate_examples": list(found.degenerate_examples),
        # Only when rows were dropped, so the descriptions (and root hashes) of clean copies stay as they were.
        **(
            {"duplicate_rows": found.duplicates, "duplicate_examples": list(found.duplicate_examples)}
            if found.duplicates
            else {}
        ),
    }
    person = (
        f"class names {sorted(classes)} (any case) are persons; other rows are left out and counted"
        if classes
        else f"{', '.join(SARD_PERSON_CLASSES)} (any case) are persons; any other class is refused"
    )
    rules = {
        "classes": person,
        "augmented": "a stem not ending in a digit that starts with another image's frame stem followed by a "
        "non-digit is a copy of that frame: it shares the frame's group, does not count towards "
        "split sizes, and is dropped from " + ("every split" if drop_augmented else "test and val"),
        "degenerate": "a row whose width/height columns differ from the decoded image, whose box has zero or "
        "negative width/height, or whose corners lie more than 1 px outside the image is dropped "
        "and counted; the image is kept",
        "negatives": "an image without a row has no person",
    }
    return {**facts, "audit_facts": list(facts)}, rules


def _csv_warnings(found: CsvLayout) -> tuple[str, ...]:
    """One line per kind of dropped rows, so a user sees it without reading the description."""
    out = []
    total = sum(found.degenerate.values())
    if total:
        kinds = ", ".join(f"{k}: {found.degenerate[k]}" for k in DEGENERATE_KINDS if found.degenerate[k])
        out.append(
            f"SARD CSV: {total} degenerate row(s) dropped ({kinds}), e.g. {found.degenerate_examples[0]}; "
            f"see degenerate_examples in the source description"
        )
    if found.duplicates:
        out.append(
            f"SARD CSV: {found.duplicates} exact duplicate row(s) dropped (each would be a second GT box on "
            f"the same person), e.g. {found.duplicate_examples[0]}; see duplicate_examples in the source "
            f"description"
        )
    return tuple(out)
