"""Scale-out on Dask: client peak RSS, scheduler overhead per task, speed-up of 2 workers over 1.

Every measurement runs in a fresh Python process, so each peak RSS (``ru_maxrss``) is that build's alone. The
client process of ``--scheduler local`` also hosts the LocalCluster's scheduler (the workers are separate
processes), so its RSS is an upper bound for the client of a real cluster.

    python benchmarks/bench_scale.py                       # speed-up at n=200, RSS at n=2000 and n=20000
    python benchmarks/bench_scale.py --rss-n 2000,5000      # smaller RSS points on a busy machine
    python benchmarks/bench_scale.py --write docs/perf/scale.md
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SIZE = "64"


def shift(image, name: str, severity: int, image_id: str, seed: int):
    """A cheap keyed stand-in for the corruption engine (``--cheap``): the same files and manifest entries
    to hold, a fraction of the CPU, so a 20,000-image RSS run fits on a small machine."""
    import hashlib

    import numpy as np

    k = int.from_bytes(hashlib.sha256(f"{name}|{severity}|{image_id}|{seed}".encode()).digest()[:2], "big")
    return ((image.astype(np.int16) + 1 + k % 250) % 256).astype(np.uint8)


def one_build(n: int, workers: int, scheduler: str | None, out: str, cheap: bool = False) -> dict:
    """Build the synthetic source of ``n`` images of SIZE px in this process; return timings and peak RSS."""
    from aegis_data.api import build_splits, load_source

    t0 = time.perf_counter()
    ds = load_source("synthetic", n=n, size=SIZE)
    t_source = time.perf_counter() - t0
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    r = build_splits(ds, out, workers=workers, scheduler=scheduler, corrupt=shift if cheap else None)
    units = sum(r.images.values())
    busy = r.seconds_corrupt + r.seconds_encode + r.seconds_read
    return {
        "n": n,
        "cheap": cheap,
        "workers": workers,
        "scheduler": scheduler or "pool",
        "units": units,
        "files": r.files_written,
        "seconds": r.seconds,
        "busy_s": busy,
        "source_s": t_source,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_before_build_mb": rss_before / 1024,
        "manifest_mb": os.path.getsize(r.manifest_path) / 1e6,
    }


def task_overhead(tasks: int = 2000) -> dict:
    """Round-trip cost of a no-op task through the same bounded submit/as_completed loop as the build."""
    import distributed

    from aegis_data.executors import TASKS_PER_THREAD

    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
        silence_logs=50,
    ) as cluster:
        with distributed.Client(cluster) as client:
            client.wait_for_workers(2)
            window = TASKS_PER_THREAD * 2
            t0 = time.perf_counter()
            pending = distributed.as_completed()
            todo = iter(range(tasks))
            for i in [next(todo) for _ in range(window)]:
                pending.add(client.submit(abs, i, pure=False))
            for f in pending:
                f.result()
                f.release()
                nxt = next(todo, None)
                if nxt is not None:
                    pending.add(client.submit(abs, nxt, pure=False))
            seconds = time.perf_counter() - t0
    return {"tasks": tasks, "seconds": seconds, "ms_per_task": 1000 * seconds / tasks}


def run_child(*args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def markdown(rows: list[dict], overhead: dict, loads: list[float]) -> str:
    import numpy

    speed = {(r["scheduler"], r["workers"]): r for r in rows if r.get("role") == "speed"}
    rss = [r for r in rows if r.get("role") == "rss"]
    lines = [
        "## Scale-out on Dask (`benchmarks/bench_scale.py`)",
        "",
        f"Date {datetime.date.today().isoformat()}; machine: {os.cpu_count()} cores ({platform.machine()}), Python "
        f"{platform.python_version()}, numpy {numpy.__version__}; synthetic source, {SIZE}x{SIZE} px frames, all 28 "
        f"conditions on test and clean on val; load average {min(loads):.1f}-{max(loads):.1f} during the runs "
        f"(on 2 cores, above ~1.5 means other jobs competed for the CPU).",
        "",
        "| run | workers | source images | files | wall s | source images/s | worker busy s (sum) "
        "| (wall x workers - busy) per source image, ms (start-up, planning, manifest included) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sorted(speed.values(), key=lambda r: (r["scheduler"], r["workers"])):
        idle = 1000 * (r["seconds"] * r["workers"] - r["busy_s"]) / r["units"]
        lines.append(
            f"| {r['scheduler']} | {r['workers']} | {r['units']} | {r['files']} | {r['seconds']:.1f} | "
            f"{r['units'] / r['seconds']:.1f} | {r['busy_s']:.1f} | {idle:.1f} |"
        )
    for sched in ("pool", "local"):
        if (sched, 1) in speed and (sched, 2) in speed:
            s = speed[(sched, 1)]["seconds"] / speed[(sched, 2)]["seconds"]
            lines.append(
                f"\nSpeed-up of 2 workers over 1 ({'process pool' if sched == 'pool' else '--scheduler local'}): "
                f"**{s:.2f}x**."
            )
    lines += [
        "",
        f"No-op task through the build's submit/as_completed loop (2-worker LocalCluster, {overhead['tasks']} tasks): "
        f"**{overhead['ms_per_task']:.2f} ms per task** of scheduler + client time.",
        "",
        "Client peak RSS (`--scheduler local`, 2 workers; the process also hosts the scheduler"
        + (
            "; a cheap keyed brightness shift stands in for the corruption engine, which changes the workers' CPU "
            "time but not one byte of what the client holds: the same files, entries and manifest size"
            if rss and rss[0].get("cheap")
            else ""
        )
        + "):",
        "",
        "| source images (`--n` x 3/4: test + val) | files in the manifest | wall s | peak RSS MB "
        "| RSS before the build MB | manifest MB |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sorted(rss, key=lambda r: r["n"]):
        lines.append(
            f"| {r['units']} | {r['files']} | {r['seconds']:.0f} | {r['rss_mb']:.0f} | "
            f"{r['rss_before_build_mb']:.0f} | {r['manifest_mb']:.1f} |"
        )
    if len(rss) >= 2:
        a, b = sorted(rss, key=lambda r: r["n"])[0], sorted(rss, key=lambda r: r["n"])[-1]
        slope = (b["rss_mb"] - a["rss_mb"]) * 1024 / max(1, b["files"] - a["files"])
        lines.append(f"\nSlope between the two: **{slope:.2f} KB of client RSS per file**.")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--one", nargs=3, metavar=("N", "WORKERS", "SCHEDULER"), help=argparse.SUPPRESS)
    ap.add_argument("--cheap-one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--overhead", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument(
        "--cheap-rss",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="RSS runs with a cheap stand-in corruption (same files and entries, far less CPU)",
    )
    ap.add_argument("--speed-n", type=int, default=200, help="source images for the 1-vs-2-worker runs")
    ap.add_argument("--rss-n", default="2000,20000", help="comma list of source-image counts for the RSS runs")
    ap.add_argument("--write", type=Path, help="write the markdown section to this file")
    args = ap.parse_args()
    if args.overhead:
        print(json.dumps(task_overhead()))
        return
    if args.one:
        n, workers, sched = args.one
        with tempfile.TemporaryDirectory(prefix="aegis-bench-scale-") as tmp:
            print(
                json.dumps(
                    one_build(
                        int(n), int(workers), None if sched == "pool" else sched, tmp + "/out", cheap=args.cheap_one
                    )
                )
            )
        return
    rows, loads = [], [os.getloadavg()[0]]
    overhead = run_child("--overhead")
    print(f"overhead: {overhead}", file=sys.stderr, flush=True)
    for sched in ("pool", "local"):
        for workers in (1, 2):
            r = run_child("--one", str(args.speed_n), str(workers), sched)
            r["role"] = "speed"
            rows.append(r)
            loads.append(os.getloadavg()[0])
            print(r, file=sys.stderr, flush=True)
    for n in (int(v) for v in args.rss_n.split(",")):
        r = run_child("--one", str(n), "2", "local", *(["--cheap-one"] if args.cheap_rss else []))
        r["role"] = "rss"
        rows.append(r)
        loads.append(os.getloadavg()[0])
        print(r, file=sys.stderr, flush=True)
    text = markdown(rows, overhead, loads)
    print(text)
    (Path(tempfile.gettempdir()) / "aegis-bench-scale.json").write_text(
        json.dumps({"rows": rows, "overhead": overhead, "loads": loads})
    )
    if args.write:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(text, encoding="utf-8")
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from perfdoc import assemble

        assemble()


if __name__ == "__main__":
    main()
