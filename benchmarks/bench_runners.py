"""Inference throughput of the reference runners (images/s), untiled at 640 px and tiled on a 4000x3000 frame.

    .venv/bin/python benchmarks/bench_runners.py                 # CPU; writes the CPU section of docs/perf/runners.md
    .venv/bin/python benchmarks/bench_runners.py --device cuda   # GPU; writes the GPU section
    .venv/bin/python benchmarks/bench_runners.py --models yolo11n,frcnn-mobilenet --no-write

Weights are random (built from yaml / weights=None): inference cost does not depend on the weight values,
except that Faster R-CNN's RoI head and Ultralytics' NMS see more or fewer candidates. The score floor is the
protocol's 0.001, so every model runs its full post-processing. Tiled = one 4000x3000 frame cut into 1024 px
tiles with 256 px overlap (20 tiles), predicted and merged exactly as ``aegis baseline predict`` does.
Timings are wall-clock medians after one warm-up call (for the tiled frame: one batch of tiles); nothing here
is asserted.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("YOLO_AUTOINSTALL", "0")
os.environ.setdefault("YOLO_VERBOSE", "0")

from aegis_eval.runners import load_detector  # noqa: E402
from aegis_eval.runners.predict import library_versions  # noqa: E402
from aegis_eval.runners.tiled import predict_images  # noqa: E402
from aegis_eval.runners.tiling import tile_grid  # noqa: E402

# name -> (model, weights, arch, relative cost used to cut repetitions on slow models)
MODELS = {
    "yolo11n": ("yolo11", "yolo11n.yaml", None, 1),
    "yolo11m": ("yolo11", "yolo11m.yaml", None, 4),
    "rtdetr-l": ("rtdetr", "rtdetr-l.yaml", None, 6),
    "frcnn-mobilenet": ("fasterrcnn", "none", "mobilenet_v3", 2),
    "frcnn-resnet50-v2": ("fasterrcnn", "none", "resnet50_v2", 12),
}
FLOOR = 0.001


def _frames(n: int, h: int, w: int, seed: int) -> list[np.ndarray]:
    rs = np.random.RandomState(seed)  # frozen legacy stream: the same frames on every run
    base = (rs.rand(h // 8 + 1, w // 8 + 1, 3) * 255).astype(np.uint8)
    big = np.repeat(np.repeat(base, 8, axis=0), 8, axis=1)[:h, :w]  # blocky texture: detectors see structure
    return [np.ascontiguousarray(np.roll(big, 17 * i, axis=1)) for i in range(n)]


def _time(fn, reps: int, warmup=None) -> float:
    (warmup or fn)()  # warm-up (allocations, cudnn autotune, lazy init)
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        if _cuda_sync is not None:
            _cuda_sync()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


_cuda_sync = None


def bench_model(name: str, device: str, batches: list[int], tiled_batches: list[int], reps: int) -> list[dict]:
    model, weights, arch, cost = MODELS[name]
    rows = []
    slow = device == "cpu" and cost >= 4
    det640 = load_detector(model, weights, device, arch=arch, imgsz=640, max_det=300) if batches else None
    for b in batches:
        frames = _frames(b, 640, 640, 0)
        r = 1 if slow else reps
        sec = _time(lambda: predict_images(det640, frames, FLOOR, tiled=False, batch=b), r)
        rows.append({"model": name, "input": "640x640", "batch": b, "reps": r, "seconds": sec, "images_per_s": b / sec})
    det640 = None  # frees the model before the tiled one loads
    if not tiled_batches:
        return rows
    det = load_detector(model, weights, device, arch=arch, imgsz=1024, max_det=300)
    frame = _frames(1, 3000, 4000, 1)
    n_tiles = len(tile_grid(4000, 3000))
    for b in tiled_batches:
        # Warm up on one batch of tiles rather than a whole frame: a tiled frame takes minutes on a CPU.
        warm = [np.ascontiguousarray(frame[0][:1024, :1024])] * b
        sec = _time(
            lambda: predict_images(det, frame, FLOOR, tiled=True, batch=b), 1, warmup=lambda: det.predict(warm, FLOOR)
        )
        rows.append(
            {
                "model": name,
                "input": f"4000x3000 tiled ({n_tiles} tiles of 1024)",
                "batch": b,
                "reps": 1,
                "seconds": sec,
                "images_per_s": 1 / sec,
            }
        )
    return rows


def machine(device: str) -> str:
    import torch

    if device.startswith("cuda"):
        return f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}"
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} logical cores, torch threads {torch.get_num_threads()}"


def render(rows: list[dict], device: str, note: str) -> str:
    v = library_versions()
    lines = [
        f"Measured {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} on {machine(device)}.",
        f"Versions: torch {v['torch']}, torchvision {v['torchvision']}, ultralytics {v['ultralytics']}, "
        f"numpy {v['numpy']}, opencv {v['opencv']}, Python {v['python']}.",
        "",
    ]
    if note:
        lines += [note, ""]
    lines += ["| model | input | batch | reps | s per call | images/s |", "|---|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['input']} | {r['batch']} | {r['reps']} | {r['seconds']:.2f} | "
            f"{r['images_per_s']:.3f} |"
        )
    return "\n".join(lines)


def write_section(path: Path, key: str, body: str) -> None:
    """Replace the text between ``<!-- bench:KEY:start -->`` and ``<!-- bench:KEY:end -->`` (append if absent)."""
    start, end = f"<!-- bench:{key}:start -->", f"<!-- bench:{key}:end -->"
    text = path.read_text() if path.is_file() else "# Reference runners: inference throughput\n"
    block = f"{start}\n{body}\n{end}"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    path.write_text(text)


def main() -> None:
    global _cuda_sync
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N")
    ap.add_argument("--models", default=",".join(MODELS), help="comma list of " + ", ".join(MODELS))
    ap.add_argument("--batches", default="1,8", help="batch sizes at 640 px")
    ap.add_argument("--tiled-batches", default="8", help="batch sizes (tiles per call) for the tiled frame")
    ap.add_argument(
        "--tiled-models",
        default=None,
        help="models measured on the tiled frame (default: all of "
        "--models); on a CPU the heavy ones take minutes per frame",
    )
    ap.add_argument("--reps", type=int, default=3, help="timed repetitions (slow models on CPU use 1)")
    ap.add_argument("--out", default=str(REPO / "docs" / "perf" / "runners.md"))
    ap.add_argument("--note", default="", help="free text recorded above the table (e.g. machine load)")
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args()
    if args.device.startswith("cuda"):
        import torch

        _cuda_sync = torch.cuda.synchronize
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        ap.error(f"unknown model {unknown[0]!r}; choose from {', '.join(MODELS)}")
    tiled_names = names if args.tiled_models is None else [m.strip() for m in args.tiled_models.split(",")]
    rows = []
    t0 = time.perf_counter()
    for name in names:
        tiled = [int(b) for b in args.tiled_batches.split(",") if b] if name in tiled_names else []
        got = bench_model(name, args.device, [int(b) for b in args.batches.split(",") if b], tiled, args.reps)
        for r in got:
            print(f"{r['model']:18s} {r['input']:34s} batch {r['batch']}: {r['images_per_s']:.3f} images/s", flush=True)
        rows += got
    body = render(rows, args.device, args.note + f" Whole run: {time.perf_counter() - t0:.0f} s.")
    print(body)
    if not args.no_write:
        write_section(Path(args.out), "gpu" if args.device.startswith("cuda") else "cpu", body)


if __name__ == "__main__":
    main()
