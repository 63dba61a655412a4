"""Throughput and peak memory of the aegis-v1 corruption engine on one core.

    .venv/bin/python benchmarks/bench_corruptions.py [--repeat-small 5] [--repeat-large 3]
        [--out docs/perf/corruptions.md]
    .venv/bin/python benchmarks/bench_corruptions.py --person-px 60 --out docs/perf/corruptions-object.md
    .venv/bin/python benchmarks/bench_corruptions.py --suite aegis-v2 --person-px 60 --out docs/perf/corruptions-v2.md

``--suite`` picks the suite (default aegis-v1, what the first two lines measure). aegis-v2 needs ``--person-px``;
each frame's scene is estimated once, outside the timed calls, as a build does (one scene per source image for
all 27 conditions), and its cost is reported on its own line.

``--person-px P`` times object scale (``--scale object`` with that person unit): at P = 60 a 4000-px frame gets
exactly the frame-scale parameters, while a 640-px crop gets the lengths of a 4000-px frame (6.25x the blur and
streak lengths, veil and bloom sigmas frame scale gives it; the same streaks per MP) -- the costly case for small
frames.

Measures, for every corruption x severity, the best-of-N wall time of ``apply_corruption`` on a 640x640 and a
4000x3000 (12 MP) frame, reported as megapixels per second; then, per corruption at severity 3 on the 12 MP
frame, the peak memory in a fresh subprocess: tracemalloc's peak (NumPy buffers, which NumPy reports to
tracemalloc) and the process's peak RSS (VmHWM, i.e. what ``getrusage`` reports as ru_maxrss, with the peak
mark reset after the input frame is built) minus the RSS before the call.
Writes a Markdown section to ``docs/perf/corruptions.md``. Targets: >= 30 MP/s at 12 MP and < 1.5 GB.

Everything runs single-threaded (OpenCV, OpenMP and BLAS pools pinned to 1) so the numbers mean "one core".
"""

from __future__ import annotations

import os

# Pin every thread pool before NumPy/OpenCV load, so the measurement is of one core.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import datetime as _dt  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
from pathlib import Path  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402

cv2.setNumThreads(1)

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from aegis_data.api import Scale, apply_corruption, load_config, write_bytes_atomic  # noqa: E402
from aegis_data.conditions import SEVERITIES  # noqa: E402
from aegis_data.engine.kernels import kernels_backend  # noqa: E402
from aegis_data.engine.scale import FRAME_SCALE  # noqa: E402

TARGET_MPS = 30.0
TARGET_MEM_MB = 1536.0
SIZES = ((640, 640), (4000, 3000))  # (width, height)
NOTES_MARKER = "<!-- notes: kept across re-runs -->"


def bench_frame(width: int, height: int) -> np.ndarray:
    """A deterministic aerial-looking test frame: smooth terrain colours plus fine texture and a few bright spots.

    Drawn from a PCG64 keyed by a SHA-256 of the frame size, so every run times the same pixels.
    """
    key = int.from_bytes(hashlib.sha256(f"aegis-bench|frame|{width}x{height}".encode()).digest()[:8], "little")
    rng = np.random.Generator(np.random.PCG64(key))
    coarse = rng.integers(40, 200, size=(12, 16, 3), dtype=np.uint8)
    terrain = cv2.resize(coarse, (width, height), interpolation=cv2.INTER_CUBIC).astype(np.int16)
    grain = rng.integers(-18, 19, size=(height, width, 1), dtype=np.int16)
    frame = np.clip(terrain + grain, 0, 255).astype(np.uint8)
    for _ in range(40):  # small bright objects (people-sized at 12 MP)
        x, y = int(rng.integers(0, width - 30)), int(rng.integers(0, height - 30))
        frame[y : y + 20, x : x + 10] = (230, 60, 50)
    return frame


def best_time(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def rss_mb() -> float:
    """Current resident set size in MB (Linux /proc)."""
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def peak_rss_mb() -> float:
    """Peak RSS of this process in MB: VmHWM from /proc/self/status, else ``getrusage`` ru_maxrss.

    VmHWM is preferred because ``ru_maxrss`` of a freshly exec'd child starts at the *parent's* peak (Linux
    carries the pre-exec high-water mark over), which hid the probe's own peak under the benchmark's.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1e3  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3  # kB on Linux


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark for this process (Linux: write 5 to /proc/self/clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


class Runner:
    """``apply_corruption`` bound to a suite and scale; aegis-v2 frames get their scene once, here."""

    def __init__(self, suite: str, scale: Scale):
        self.cfg = load_config(suite)
        self.scale = scale
        self.scenes: dict[int, object] = {}
        self.scene_seconds: dict[tuple[int, int], float] = {}

    def scene_of(self, frame: np.ndarray):
        """The scene of ``frame`` under an aegis-v2 suite (None under aegis-v1): estimated and timed once per frame."""
        if not self.cfg.uses_scene:
            return None
        scene = self.scenes.get(id(frame))
        if scene is None or (scene.height, scene.width) != frame.shape[:2]:
            from aegis_data.engine.scene import estimate_scene

            t0 = time.perf_counter()
            scene = estimate_scene(frame, self.scale.person_px, self.cfg.camera)
            self.scene_seconds[frame.shape[:2]] = time.perf_counter() - t0
            self.scenes[id(frame)] = scene
        return scene

    def __call__(self, frame: np.ndarray, name: str, severity: int, image_id: str):
        return apply_corruption(
            frame, name, severity, image_id, config=self.cfg, scale=self.scale, scene=self.scene_of(frame)
        )


def memory_probe(name: str, severity: int, suite: str = "aegis-v1", person_px: float | None = None) -> dict:
    """Run in a fresh process: peak memory of one 12 MP corruption call."""
    width, height = SIZES[-1]
    frame = bench_frame(width, height)
    run = Runner(suite, FRAME_SCALE if person_px is None else Scale("object", person_px, "--person-px"))
    run(frame[:64, :64].copy(), name, severity, "warmup")  # load lazy tables outside the window
    run.scene_of(frame)  # the scene is estimated once, outside the window too (no 12 MP render needed for that)
    reset = reset_peak_rss()  # so the frame's own construction does not count as the corruption's peak
    before = rss_mb()
    tracemalloc.start()
    out = run(frame, name, severity, "bench")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    maxrss = peak_rss_mb()
    del out
    return {
        "tracemalloc_peak_mb": peak / 1e6,
        "maxrss_mb": maxrss,
        "rss_before_mb": before,
        "delta_mb": maxrss - before,
        "peak_reset": reset,
    }


def machine() -> dict:
    cpu, flags = "unknown", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and cpu == "unknown":
                cpu = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    simd = [f for f in ("avx2", "fma", "avx512f", "avx512bw", "amx_tile") if f in flags]
    if simd:
        cpu += f" ({', '.join(simd)})"
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "opencv": cv2.__version__,
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def render(
    results: list[dict],
    memory: dict[str, dict],
    info: dict,
    load_after: str,
    repeats: tuple[int, int],
    scale: Scale = FRAME_SCALE,
    suite: str = "aegis-v1",
    scene_seconds: dict | None = None,
) -> str:
    cfg = load_config(suite)
    flag = "" if suite == "aegis-v1" else f" --suite {suite}"
    title = f"## Corruption engine throughput{', ' + suite if flag else ''} (benchmarks/bench_corruptions.py{flag})"
    if scale.is_object:
        title = (
            f"## Corruption engine throughput, {suite}, object scale, person unit {scale.person_px:g} px "
            f"(benchmarks/bench_corruptions.py{flag} --person-px {scale.person_px:g})"
        )
    lines = [
        title,
        "",
        f"- Machine: {info['cpu']}, {info['cores']} cores; load average {info['load']} at start, {load_after} at "
        "end (a load above ~1 means other jobs competed for the CPU and the numbers are conservative).",
        f"- Versions: Python {info['python']}, NumPy {info['numpy']}, OpenCV {info['opencv']}, "
        f"engine loops {kernels_backend()}; "
        f"suite {cfg.suite}, config {cfg.config_hash}. Date: {info['date']}.",
        "- One core: `cv2.setNumThreads(1)`, OMP/OPENBLAS/MKL threads = 1. Best of "
        f"{repeats[0]} (640x640) / {repeats[1]} (4000x3000) calls of `apply_corruption`, wall clock, taken in rounds "
        "over all cells (a slow spell of a shared machine costs a cell one sample, not all).",
        f"- Targets: >= {TARGET_MPS:.0f} MP/s on one core at 640x640 and at 4000x3000; peak memory < "
        f"{TARGET_MEM_MB / 1024:.1f} GB.",
        *(
            [
                "- The scene (estimated once per source image, outside the timed calls): "
                + ", ".join(f"{w}x{h} {t * 1e3:.0f} ms" for (h, w), t in sorted(scene_seconds.items()))
            ]
            if scene_seconds
            else []
        ),
        "",
        "| corruption | sev | 640x640 ms | 640x640 MP/s | 4000x3000 ms | 4000x3000 MP/s | >= 30 MP/s |",
        "|---|---:|---:|---:|---:|---:|:---:|",
    ]
    for r in results:
        ok = "yes" if min(r["mps_large"], r["mps_small"]) >= TARGET_MPS else "**no**"
        lines.append(
            f"| {r['corruption']} | {r['severity']} | {r['ms_small']:.1f} | {r['mps_small']:.1f} | "
            f"{r['ms_large']:.0f} | {r['mps_large']:.1f} | {ok} |"
        )
    lines += [
        "",
        "Peak memory of one 4000x3000 call at severity 3, each in a fresh process (input frame 36 MB, output 36 MB). "
        "Peak RSS is the whole process (interpreter, NumPy, OpenCV, the input frame), with the kernel's peak mark "
        "reset just before the call; tracemalloc counts NumPy buffers only (OpenCV's internal buffers are not "
        "traced).",
        "",
        "| corruption | tracemalloc peak MB (NumPy) | peak RSS MB (process) "
        "| peak RSS - RSS before call, MB | < 1.5 GB |",
        "|---|---:|---:|---:|:---:|",
    ]
    if not memory:
        lines.append("| (not measured in this run: --no-memory) | | | | |")
    for name, m in memory.items():
        if "error" in m:
            lines.append(f"| {name} | error: {m['error']} | | | |")
            continue
        ok = "yes" if m["maxrss_mb"] < TARGET_MEM_MB else "**no**"
        lines.append(f"| {name} | {m['tracemalloc_peak_mb']:.0f} | {m['maxrss_mb']:.0f} | {m['delta_mb']:.0f} | {ok} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat-small", type=int, default=5, help="timed calls per cell at 640x640 (best is kept)")
    ap.add_argument("--repeat-large", type=int, default=3, help="timed calls per cell at 4000x3000 (best is kept)")
    ap.add_argument("--corruptions", default="", help="comma-separated subset (default: all)")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "perf" / "corruptions.md")
    ap.add_argument("--person-px", type=float, default=None, help="time object scale with this person unit (px)")
    ap.add_argument("--no-memory", action="store_true", help="skip the per-corruption memory probes")
    ap.add_argument("--suite", default="aegis-v1", help="suite to time (aegis-v1, aegis-v2 or a suite file)")
    ap.add_argument("--memory-probe", nargs=2, metavar=("NAME", "SEV"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    scale = FRAME_SCALE if args.person_px is None else Scale("object", args.person_px, "--person-px")

    if args.memory_probe:
        print(json.dumps(memory_probe(args.memory_probe[0], int(args.memory_probe[1]), args.suite, args.person_px)))
        return 0

    cfg = load_config(args.suite)
    run = Runner(args.suite, scale)
    names = [n for n in args.corruptions.split(",") if n] or list(cfg.names)
    info = machine()
    frames = {size: bench_frame(*size) for size in SIZES}
    cells = [(name, sev) for name in names for sev in SEVERITIES]
    best = {(cell, label): float("inf") for cell in cells for label in ("small", "large")}
    for cell in cells:
        for size in SIZES:
            run(frames[size], cell[0], cell[1], "bench")  # warm-up (lazy tables, page faults, the scene)
    # Rounds over all cells, so the samples of one cell are spread over the whole run: on a shared machine a
    # slow spell then costs a cell one sample, not all of them. Each cell keeps its best time.
    for rnd in range(max(args.repeat_small, args.repeat_large)):
        for cell in cells:
            for (w, h), label, rep in ((SIZES[0], "small", args.repeat_small), (SIZES[1], "large", args.repeat_large)):
                if rnd < rep:
                    frame = frames[(w, h)]
                    best[(cell, label)] = min(
                        best[(cell, label)], best_time(lambda: run(frame, cell[0], cell[1], "bench"), 1)
                    )
    results = []
    for name, sev in cells:
        row = {"corruption": name, "severity": sev}
        for (w, h), label in ((SIZES[0], "small"), (SIZES[1], "large")):
            t = best[((name, sev), label)]
            row[f"ms_{label}"] = t * 1e3
            row[f"mps_{label}"] = w * h / 1e6 / t
        results.append(row)
        print(f"{name} s{sev}: {row['mps_small']:.1f} MP/s @640, {row['mps_large']:.1f} MP/s @12MP", flush=True)
    memory = {}
    for name in [] if args.no_memory else names:
        probe = [sys.executable, __file__, "--memory-probe", name, "3", "--suite", args.suite]
        if args.person_px is not None:
            probe += ["--person-px", str(args.person_px)]
        proc = subprocess.run(probe, capture_output=True, text=True)
        if proc.returncode != 0:
            memory[name] = {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:120]}
        else:
            memory[name] = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"{name} memory: {memory[name]}", flush=True)
    load_after = " ".join(f"{x:.2f}" for x in os.getloadavg())
    text = render(
        results, memory, info, load_after, (args.repeat_small, args.repeat_large), scale, args.suite, run.scene_seconds
    )
    # Hand-written analysis below the marker survives a re-run.
    previous = args.out.read_text() if args.out.exists() else ""
    if NOTES_MARKER in previous:
        text += "\n" + NOTES_MARKER + previous.split(NOTES_MARKER, 1)[1]
    write_bytes_atomic(args.out, text.encode())
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
