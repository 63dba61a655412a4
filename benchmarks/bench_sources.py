"""Source-side timings: synthetic rendering per frame size, adapter loading, and the audit.

Run: ``.venv/bin/python benchmarks/bench_sources.py [--quick]``. Prints a Markdown table (median of the
repeats) with the machine and library versions, for docs/perf/sources.md.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import cv2
import numpy as np

from aegis_data.api import audit_source, load_source
from aegis_data.sources import synthetic


def timed(fn, repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def fake_heridal(root: Path, n_train: int, n_test: int, width: int, height: int) -> Path:
    """A HERIDAL-shaped tree of real JPEGs (flat grey with one patch) and VOC XML with one person each."""
    img = np.full((height, width, 3), 120, np.uint8)
    for split, n in (("trainImages", n_train), ("testImages", n_test)):
        (root / split / "labels").mkdir(parents=True)
        for i in range(n):
            img[10:40, 10:40] = i % 256  # distinct files
            stem = f"{split[:-6]}_{i:05d}"
            cv2.imwrite(str(root / split / f"{stem}.jpg"), img)
            (root / split / "labels" / f"{stem}.xml").write_text(
                "<annotation><object><name>human</name><bndbox><xmin>10</xmin><xmax>40</xmax><ymin>10</ymin>"
                "<ymax>40</ymax></bndbox></object></annotation>"
            )
    return root


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer repeats, smaller trees")
    args = ap.parse_args()
    repeats = 1 if args.quick else 3
    rows = []
    for w, h in ((640, 640), (1280, 720), (1920, 1080), (4000, 3000)):
        s = timed(lambda: synthetic.render_scene(1, w, h), repeats)
        rows.append((f"synthetic render_scene {w}x{h}", f"{s * 1000:.0f} ms", f"{w * h / s / 1e6:.1f} MP/s"))
    s = timed(lambda: load_source("synthetic"), repeats)
    rows.append(
        (
            "load_source('synthetic') default (32 images, boxes only)",
            f"{s * 1000:.0f} ms",
            f"{s / 32 * 1000:.1f} ms/image",
        )
    )
    n_train, n_test = (100, 20) if args.quick else (300, 101)
    with tempfile.TemporaryDirectory() as tmp:
        root = fake_heridal(Path(tmp) / "H", n_train, n_test, 4000, 3000)
        n = n_train + n_test
        s = timed(lambda: load_source("heridal", source=root), repeats)
        rows.append(
            (
                f"load_source('heridal') {n} XML + 4000x3000 JPEG headers",
                f"{s * 1000:.0f} ms",
                f"{s / n * 1000:.2f} ms/image",
            )
        )
        ds = load_source("heridal", source=root)
        s = timed(lambda: audit_source(ds), repeats)
        size_mb = sum(p.stat().st_size for p in root.rglob("*.jpg")) / 1e6
        rows.append(
            (f"audit_source (SHA-256 of {size_mb:.0f} MB of JPEG)", f"{s * 1000:.0f} ms", f"{size_mb / s:.0f} MB/s")
        )
        s = timed(lambda: audit_source(ds, hash_files=False), repeats)
        rows.append(("audit_source hash_files=False", f"{s * 1000:.0f} ms", ""))
    print(
        f"Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; machine: {platform.machine()}, "
        f"{platform.processor() or 'cpu'}; Python {platform.python_version()}, numpy {np.__version__}, "
        f"opencv {cv2.__version__}; median of {repeats}\n"
    )
    print("| operation | time | rate |\n|---|---:|---:|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")


if __name__ == "__main__":
    main()
