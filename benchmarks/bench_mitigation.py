"""Measured mitigation study on the synthetic set: clean-trained YOLO11n vs disaster-augmented ones.

    .venv/bin/python benchmarks/bench_mitigation.py                       # defaults below; writes docs/MITIGATION.md
    .venv/bin/python benchmarks/bench_mitigation.py --epochs 2 --n 60 --no-write   # a quick smoke run

Steps: build a synthetic split with ``--with-train`` (``aegis build-splits``), then ``run_ablation`` — the clean
baseline plus one YOLO11n (random init from ``yolo11n.yaml``) per policy, same seed and epochs, each swept over
all 28 conditions with its own threshold frozen on clean val, and paired-bootstrap gains over the clean model.
The work folder resumes: re-running reuses finished trainings and sweeps. Timings are wall clock on this
machine; the load average is sampled every 15 s while it runs. Nothing here is asserted: whatever comes out is
reported as measured.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("YOLO_AUTOINSTALL", "0")
os.environ.setdefault("YOLO_VERBOSE", "0")

from aegis_data.augment import load_policy  # noqa: E402
from aegis_eval.runners.ablate import CLEAN, run_ablation  # noqa: E402
from aegis_eval.runners.predict import PredictSettings, library_versions  # noqa: E402
from aegis_eval.runners.train import TrainSettings  # noqa: E402

DOC = REPO / "docs" / "MITIGATION.md"
BEGIN = "<!-- BEGIN MEASURED: benchmarks/bench_mitigation.py writes this part -->"
END = "<!-- END MEASURED -->"
FOCUS = ("low_light_s3", "smoke_haze_s3", "motion_blur_s3")


class LoadSampler:
    """Samples the 1-minute load average in a background thread."""

    def __init__(self, every: float = 15.0):
        self.every, self.samples = every, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self._stop.wait(self.every)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def build_split(split: Path, n: int, size: int, test_fraction: float, val_fraction: float) -> None:
    if (split / "manifest.json").is_file():
        return
    cmd = [sys.executable, "-m", "cli.main", "build-splits", "--dataset", "synthetic", "--n", str(n), "--size",
           str(size), "--out-dir", str(split), "--with-train", "--workers", "2",
           "--option", f"test_fraction={test_fraction}", "--option", f"val_fraction={val_fraction}"]
    subprocess.run(cmd, check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})


def _ci(pair) -> str:
    lo, hi = (pair or [None, None])[:2]
    return "" if lo is None or hi is None else f" [{lo:.3f}, {hi:.3f}]"


def _gain(g) -> str:
    if not g or g.get("gain") is None:
        return "–"
    lo, hi = g["ci"]
    return f"{g['gain']:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def summarize(out: Path, record: dict) -> dict:
    rows = {}
    for name, entry in record["runs"].items():
        score = json.loads(Path(entry["score"]).read_text())
        c = score["conditions"]
        row = {"threshold": entry["threshold"], "policy_hash": (entry["policy"] or {}).get("hash"),
               "clean_map50": c["clean"]["map50"], "clean_map50_ci": c["clean"]["ci"]["map50"],
               "clean_recall": c["clean"]["recall"], "clean_recall_ci": c["clean"]["ci"]["recall"],
               "mpc_recall": score["summary"].get("mpc", {}).get("recall"),
               "rpc_recall": score["summary"].get("rpc", {}).get("recall")}
        for cond in FOCUS:
            row[cond] = c[cond]["recall"]
            row[f"{cond}_ci"] = c[cond]["ci"]["recall"]
        gains = score.get("mitigation")
        if gains:
            row["gains"] = {k: gains[k]["recall"] for k in ("mpc", "rpc") if "recall" in gains[k]}
            row["gains"].update({f"{k}": gains[k].get("recall") for k in ("seen", "unseen")})
            row["gains"].update({cond: gains["conditions"][cond]["recall"] for cond in FOCUS + ("clean",)})
            row["side_effects"] = gains["side_effects"]["recall"]
        rows[name] = row
    return rows


def markdown(rows: dict, meta: dict) -> str:
    def f(v):
        return "n/a" if v is None else f"{v:.3f}"

    lines = [BEGIN, "", f"Measured {meta['finished']} on {meta['machine']}; {meta['command']}", "",
             f"Split: synthetic, {meta['n_train']} train / {meta['n_val']} val / {meta['n_test']} test frames of "
             f"{meta['size']} px; YOLO11n from `yolo11n.yaml` (random init), imgsz {meta['imgsz']}, {meta['epochs']} "
             f"epochs, batch {meta['batch']}, SGD lr0 {meta['lr0']}, seed {meta['seed']}; bootstrap B = "
             f"{meta['bootstrap']} (95% percentile intervals, paired for gains).", "",
             f"Wall time {meta['wall_s'] / 60:.1f} min in all (split build {meta['build_s']:.0f} s); load average "
             f"(1 min) mean {meta['load_mean']:.1f}, max {meta['load_max']:.1f} on {meta['cpus']} CPUs shared with "
             "other work.", "",
             "| model | threshold | clean AP50 | clean recall | low_light_s3 | smoke_haze_s3 | motion_blur_s3 | "
             "mPC (recall) | rPC (recall) |",
             "|:---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in rows.items():
        lines.append(f"| {name} | {r['threshold']:g} | {f(r['clean_map50'])}{_ci(r['clean_map50_ci'])} | "
                     f"{f(r['clean_recall'])}{_ci(r['clean_recall_ci'])} | "
                     + " | ".join(f"{f(r[c])}{_ci(r[c + '_ci'])}" for c in FOCUS)
                     + f" | {f(r['mpc_recall'])} | {f(r['rpc_recall'])} |")
    lines += ["", "Paired gains over the clean-trained model (recall, policy − clean, 95% CI):", "",
              "| policy | Δ clean | Δ low_light_s3 | Δ smoke_haze_s3 | Δ motion_blur_s3 | Δ mPC | Δ rPC | "
              "Δ seen | Δ unseen | untrained cells worse by > 0.03 (worst) |",
              "|:---|---:|---:|---:|---:|---:|---:|---:|---:|:---|"]
    for name, r in rows.items():
        if "gains" not in r:
            continue
        g, side = r["gains"], r["side_effects"]
        worst = side.get("worst")
        lines.append(f"| {name} | {_gain(g['clean'])} | " + " | ".join(_gain(g[c]) for c in FOCUS)
                     + f" | {_gain(g.get('mpc'))} | {_gain(g.get('rpc'))} | {_gain(g.get('seen'))} | "
                     f"{_gain(g.get('unseen'))} | {side['n_worse']} of {side['n_conditions']}"
                     + (f" ({worst['condition']} {worst['gain']:+.3f})" if worst else "") + " |")
    lines += ["", "Stage timings (s): " + ", ".join(f"{k} {v:.0f}" for k, v in meta["stages"].items()), "", END]
    return "\n".join(lines) + "\n"


def write_doc(section: str) -> None:
    text = DOC.read_text(encoding="utf-8")
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + section + text[text.index(END) + len(END) + 1:]
    else:
        text = text.rstrip() + "\n\n" + section
    DOC.write_text(text, encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/aegis-mitigation"))
    ap.add_argument("--n", type=int, default=300, help="synthetic frames in all")
    ap.add_argument("--size", type=int, default=320)
    ap.add_argument("--test-fraction", type=float, default=0.2)
    ap.add_argument("--val-fraction", type=float, default=0.134)
    ap.add_argument("--imgsz", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr0", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--policies", default="all,loo-storm,loo-wildfire")
    ap.add_argument("--no-write", action="store_true", help="print the results instead of updating the doc")
    args = ap.parse_args()

    t0 = time.perf_counter()
    stages: dict[str, float] = {}
    marks = {"t": time.perf_counter()}

    def progress(stage: str, status: str) -> None:
        now = time.perf_counter()
        print(f"[{datetime.now(timezone.utc):%H:%M:%S}] {stage}: {status}", flush=True)
        key = stage.split("/")[0] + ("/train" if stage.endswith("/train") else "/sweep+score")
        stages[key] = stages.get(key, 0.0) + now - marks["t"]
        marks["t"] = now

    split = args.work / "split"
    with LoadSampler() as load:
        build_split(split, args.n, args.size, args.test_fraction, args.val_fraction)
        build_s = time.perf_counter() - t0
        marks["t"] = time.perf_counter()
        train = TrainSettings(model="yolo11", weights="yolo11n.yaml", epochs=args.epochs, imgsz=args.imgsz,
                              batch=args.batch, seed=args.seed, lr0=args.lr0, device="cpu", workers=0)
        predict = PredictSettings(model="yolo11", weights=None, imgsz=args.imgsz, batch=16, device="cpu",
                                  seed=args.seed)
        policies = [load_policy(p) for p in args.policies.split(",")]
        record = run_ablation(train, predict, split, args.work / "ablation", policies, bootstrap=args.bootstrap,
                              seed=args.seed, label="yolo11n", progress=progress, log=print)
    wall = time.perf_counter() - t0
    rows = summarize(args.work, record)
    counts = {s: len(json.loads((split / "annotations" / f"{s}.json").read_text())["images"])
              for s in ("train", "val", "test")}
    meta = {"finished": f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC",
            "machine": f"{platform.machine()} {platform.processor() or ''} ({os.cpu_count()} CPUs), "
                       f"torch {library_versions().get('torch')}, ultralytics {library_versions().get('ultralytics')}",
            "command": f"`python benchmarks/bench_mitigation.py --epochs {args.epochs} --n {args.n} --imgsz "
                       f"{args.imgsz} --policies {args.policies}`",
            "n_train": counts["train"], "n_val": counts["val"], "n_test": counts["test"], "size": args.size,
            "imgsz": args.imgsz, "epochs": args.epochs, "batch": args.batch, "lr0": args.lr0, "seed": args.seed,
            "bootstrap": args.bootstrap, "wall_s": wall, "build_s": build_s, "cpus": os.cpu_count(),
            "load_mean": sum(load.samples) / max(len(load.samples), 1), "load_max": max(load.samples or [0.0]),
            "stages": stages}
    (args.work / "summary.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    section = markdown(rows, meta)
    if args.no_write:
        print(section)
    else:
        write_doc(section)
        print(f"wrote {DOC}")
    print(f"baseline: {CLEAN}; summary: {args.work / 'summary.json'}")


if __name__ == "__main__":
    main()
