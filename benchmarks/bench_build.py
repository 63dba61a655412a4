"""Build throughput: files/s and MP/s of a full 28-condition build, 1 vs 2 workers, SARD-like and HERIDAL-like frames.

Sources are synthetic scenes rendered once and stored as PNG, so the build decodes a file like a real source
(the synthetic renderer itself is not timed). Each configuration builds the test split only, with every
corruption and severity. The per-source-image wall time is extrapolated to the full HERIDAL-C
(101 frames of 4000x3000) and SARD-C (862 frames of 640x640) builds.

    python benchmarks/bench_build.py                     # 40 x 640 and 2 x 4000x3000, prints a markdown section
    python benchmarks/bench_build.py --write docs/perf/build-v2.md     # the default suite, aegis-v2
    python benchmarks/bench_build.py --quick             # 4 x 640 and 1 x 2000x1500 (smoke run)
    python benchmarks/bench_build.py --suite aegis-v1 --write docs/perf/build.md    # the frozen first suite

The suite is the default build's (aegis-v2, object scale with the person unit from the test boxes) unless
--suite names another; the section names the suite and its config hash.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import platform
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cv2  # noqa: E402

from aegis_data.api import build_splits, load_config, load_source  # noqa: E402
from aegis_data.engine.kernels import kernels_backend  # noqa: E402
from aegis_data.files.imageio import write_png_atomic  # noqa: E402
from aegis_data.files.png import writer_info  # noqa: E402
from aegis_data.sources import SourceDataset, read_rgb  # noqa: E402

FULL = {"HERIDAL-C": (101, 4000, 3000), "SARD-C": (862, 640, 640)}


def staged_source(n_test: int, size: str, where: Path) -> SourceDataset:
    """The synthetic test split with its frames pre-rendered to PNG files (read like a real source)."""
    ds = load_source("synthetic", n=2 * n_test, size=size, test_fraction=0.5, val_fraction=0.0)
    recs = []
    for r in ds.splits["test"][:n_test]:
        p = where / f"{r.image_id}.png"
        write_png_atomic(p, read_rgb(r))
        recs.append(dataclasses.replace(r, path=str(p)))
    return SourceDataset(name=f"bench-{size}", description={"bench": size, "n": n_test}, splits={"test": recs})


def measure(ds: SourceDataset, workers: int, out: Path, suite: str) -> dict:
    r = build_splits(ds, out, workers=workers, config=load_config(suite))
    n = len(ds.splits["test"])
    return {
        "workers": workers,
        "images": n,
        "files": r.files_written,
        "seconds": r.seconds,
        "files_per_s": r.files_written / r.seconds,
        "mp_per_s": r.megapixels / r.seconds,
        "s_per_source": r.seconds / n,
        "corrupt_s": r.seconds_corrupt,
        "encode_s": r.seconds_encode,
        "read_s": r.seconds_read,
        "hash_s": r.seconds_hash,
        "write_s": r.seconds_write,
    }


def markdown(rows: list[dict], loadavg: tuple[float, ...], suite: str) -> str:
    import numpy

    config = load_config(suite)
    lines = [
        f"## Split build, {config.suite} (`benchmarks/bench_build.py --suite {suite}`)",
        "",
        f"Suite {config.suite}, config {config.config_hash[:12]}, scale {config.scale.get('mode')}.",
        "",
        f"Date {datetime.date.today().isoformat()}; machine: {os.cpu_count()} cores "
        f"({platform.processor() or platform.machine()}), "
        f"Python {platform.python_version()}, numpy {numpy.__version__}, OpenCV {cv2.__version__}, "
        f"engine loops {kernels_backend()}, PNG writer {writer_info()['name']}/{writer_info()['version']}; "
        f"load average before the run {loadavg[0]:.1f} "
        "(on 2 cores, a load above ~1.5 means other jobs competed for the CPU).",
        "",
        "| frames | workers | source images | files | wall s | files/s | MP/s | s per source image "
        "| decode s (sum) | corrupt s (sum) | encode s (sum) | hash s (sum) | write s (sum) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['size']} | {r['workers']} | {r['images']} | {r['files']} | {r['seconds']:.1f} "
            f"| {r['files_per_s']:.2f} | "
            f"{r['mp_per_s']:.1f} | {r['s_per_source']:.1f} | {r['read_s']:.1f} | {r['corrupt_s']:.1f} | "
            f"{r['encode_s']:.1f} | {r['hash_s']:.1f} | {r['write_s']:.1f} |"
        )
    lines += [
        "",
        "Extrapolated full builds (measured wall time per source image x number of frames):",
        "",
        "| split | frames | workers | estimated minutes | speed-up of 2 workers over 1 | corrupt share of CPU |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, (count, w, h) in FULL.items():
        by_w = {r["workers"]: r for r in rows if r["frame_px"] == (w, h)}
        speed = by_w[1]["seconds"] / by_w[2]["seconds"] if 1 in by_w and 2 in by_w else None
        for k, r in sorted(by_w.items()):
            share = r["corrupt_s"] / max(
                1e-9, sum(r[k] for k in ("corrupt_s", "encode_s", "read_s", "hash_s", "write_s"))
            )
            sp = f"{speed:.2f}x" if speed is not None and k == 2 else ""
            lines.append(
                f"| {name} ({w}x{h}) | {count} | {k} | {r['s_per_source'] * count / 60:.1f} | {sp} | {share:.0%} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small smoke run")
    ap.add_argument("--write", type=Path, help="write the markdown section to this file")
    ap.add_argument("--suite", default="aegis-v2", help="suite name or config path (default aegis-v2)")
    args = ap.parse_args()
    # 40 small frames: the process pool's start-up (~1 s: two interpreters importing NumPy/OpenCV) is then a
    # small share of the measured time, as it is of a real 862-frame build; with 8 it hid the 2-worker speed-up.
    configs = [(4, 640, 640), (1, 2000, 1500)] if args.quick else [(40, 640, 640), (2, 4000, 3000)]
    loadavg = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="aegis-bench-build-") as tmp:
        tmp = Path(tmp)
        for n, w, h in configs:
            size = f"{w}x{h}"
            src_dir = tmp / f"src-{size}"
            src_dir.mkdir()
            ds = staged_source(n, size, src_dir)
            for workers in (1, 2):
                r = measure(ds, workers, tmp / f"out-{size}-{workers}", args.suite)
                r.update(size=size, frame_px=(w, h))
                rows.append(r)
                print(
                    f"{size} workers={workers}: {r['seconds']:.1f} s, {r['files_per_s']:.2f} files/s, "
                    f"{r['mp_per_s']:.1f} MP/s (corrupt {r['corrupt_s']:.1f} s, encode {r['encode_s']:.1f} s, "
                    f"hash {r['hash_s']:.1f} s, write {r['write_s']:.1f} s, decode {r['read_s']:.1f} s summed)",
                    file=sys.stderr,
                    flush=True,
                )
    text = markdown(rows, loadavg, args.suite)
    print(text)
    if args.write:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
