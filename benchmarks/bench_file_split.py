"""Per-file CPU split of a build: decode / corrupt / encode / hash / write, with the old and the new PNG writer.

One process, one thread (OpenCV, OpenMP and BLAS pools pinned to 1). For a 12 MP (4000x3000, HERIDAL-size) and a
0.41 MP (640x640, SARD-size) synthetic frame staged as a PNG source file, every one of the 28 conditions is
produced exactly as the builder does it -- decode the source once, corrupt, encode, SHA-256 of the file bytes
and of the pixels, atomic write with fsync -- and each stage's CPU time (``time.process_time``, which a busy
machine inflates less than wall time) is summed. "before" encodes with ``cv2.imencode`` at compression 1 (the
writer up to aegisbench 0.1, bytes from the host's zlib), "after" with the toolkit's writer
(``aegis_data.files.png``). The estimate of a full build divides the CPU per source image by the worker count, which
the build benchmark measured to scale ~1.9x on 2 workers.

    python benchmarks/bench_file_split.py [--write docs/perf/file_split.md] [--quick]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import datetime  # noqa: E402
import hashlib  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aegis_data.api import apply_corruption, load_config  # noqa: E402
from aegis_data.conditions import parse_condition  # noqa: E402
from aegis_data.files import png  # noqa: E402
from aegis_data.files.imageio import pixel_sha256, read_rgb, write_bytes_atomic  # noqa: E402
from aegis_data.sources.synthetic import render_scene  # noqa: E402

cv2.setNumThreads(1)
FULL = {"HERIDAL-C": (101, 4000, 3000), "SARD-C": (862, 640, 640)}
STAGES = ("decode", "corrupt", "encode", "hash", "write")


def _cv2_png(rgb: np.ndarray) -> bytes:
    ok, buf = cv2.imencode(".png", np.ascontiguousarray(rgb[:, :, ::-1]), [cv2.IMWRITE_PNG_COMPRESSION, 1])
    assert ok
    return buf.tobytes()


WRITERS = {"before: cv2.imencode level 1": _cv2_png, "after: aegis-png (own Huffman-only deflate)": png.encode_png}


def profile_source(source_png: Path, out: Path, encode) -> dict[str, float]:
    """CPU seconds per stage for one source image and all 28 conditions."""
    conditions = load_config().conditions()
    cpu = dict.fromkeys(STAGES, 0.0)
    sizes = 0
    t = time.process_time()
    src = read_rgb(source_png)
    cpu["decode"] += time.process_time() - t
    for cond in conditions:
        name, severity = parse_condition(cond)
        t0 = time.process_time()
        img = src if name is None else apply_corruption(src, name, severity, "bench", seed=20260707)
        t1 = time.process_time()
        data = encode(img)
        t2 = time.process_time()
        hashlib.sha256(data).hexdigest()
        pixel_sha256(img)
        t3 = time.process_time()
        write_bytes_atomic(out / f"{cond}.png", data)
        t4 = time.process_time()
        cpu["corrupt"] += t1 - t0
        cpu["encode"] += t2 - t1
        cpu["hash"] += t3 - t2
        cpu["write"] += t4 - t3
        sizes += len(data)
    cpu["files"] = len(conditions)
    cpu["mb_per_file"] = sizes / len(conditions) / 1e6
    return cpu


def markdown(rows: list[dict], loadavg: tuple[float, float, float]) -> str:
    lines = [
        "## Per-file CPU split of a build (`benchmarks/bench_file_split.py`)",
        "",
        f"Date {datetime.date.today().isoformat()}; {os.cpu_count()} cores "
        f"({platform.processor() or platform.machine()}), "
        f"Python {platform.python_version()}, numpy {np.__version__}, OpenCV {cv2.__version__}, "
        f"{png.writer_info()['deflate']}; one thread; CPU seconds (`time.process_time`); load average before the "
        f"run {loadavg[0]:.1f} (on 2 cores, above ~1.5 means other jobs competed for the CPU and inflate every "
        f"figure).",
        "",
        "| frame | writer | decode s/file | corrupt s/file | encode s/file | hash s/file | write s/file "
        "| total s/file | MB/file |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        n = r["files"]
        total = sum(r[s] for s in STAGES) / n
        lines.append(
            f"| {r['frame']} | {r['writer']} | "
            + " | ".join(f"{r[s] / n:.3f}" for s in STAGES)
            + f" | {total:.3f} | {r['mb_per_file']:.1f} |"
        )
    lines += [
        "",
        "Full-build estimate from these CPU figures (CPU per source image x frames / 2 workers):",
        "",
        "| split | frames | writer | estimated minutes, 2 workers | target |",
        "|---|---:|---|---:|---:|",
    ]
    targets = {"HERIDAL-C": 12, "SARD-C": 5}
    for name, (count, w, h) in FULL.items():
        for r in rows:
            if r["frame"] == f"{w}x{h}":
                per_source = sum(r[s] for s in STAGES)
                lines.append(
                    f"| {name} | {count} | {r['writer']} | {per_source * count / 2 / 60:.1f} | ≤ {targets[name]} |"
                )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", type=Path, help="write the markdown section to this file and assemble PERFORMANCE.md")
    ap.add_argument("--quick", action="store_true", help="2000x1500 and 640x640 only (smoke run)")
    args = ap.parse_args()
    frames = [(2000, 1500), (640, 640)] if args.quick else [(4000, 3000), (640, 640)]
    loadavg = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="aegis-bench-split-") as tmp:
        for w, h in frames:
            source = Path(tmp) / f"source-{w}x{h}.png"
            write_bytes_atomic(source, png.encode_png(render_scene(3, w, h).rgb))
            for label, encode in WRITERS.items():
                out = Path(tmp) / f"{w}x{h}-{len(rows)}"
                out.mkdir()
                r = profile_source(source, out, encode)
                r.update(frame=f"{w}x{h}", writer=label)
                rows.append(r)
                print(f"{w}x{h} {label}: " + ", ".join(f"{s} {r[s]:.2f}" for s in STAGES), file=sys.stderr, flush=True)
    text = markdown(rows, loadavg)
    print(text)
    if args.write:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(text, encoding="utf-8")
        from perfdoc import assemble

        assemble()


if __name__ == "__main__":
    main()
