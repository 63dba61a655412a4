"""Measured mitigation study on the synthetic set: does low_light trained at severities 1-2 lift the held-out
severity 3, and what does it cost? Clean pretraining once, then fine-tuning from that checkpoint, several seeds.

    .venv/bin/python benchmarks/bench_mitigation.py                 # defaults below; writes docs/MITIGATION.md
    .venv/bin/python benchmarks/bench_mitigation.py --pretrain-epochs 1 --epochs 1 --n 60 --n-pretrain 60 \
        --seeds 0 --no-write                                         # a quick smoke run

Steps:
1. Two synthetic splits with ``--with-train`` (``aegis build-splits``): a larger *pretraining* set (generator seed
   1) and the *study* set (generator seed 0); different generator seeds draw different scenes.
2. Clean pretraining of YOLO11n from ``yolo11n.yaml`` (random init) on the pretraining set with
   ``train_baseline`` -- once: the run folder resumes / is reused on re-runs.
3. ``run_ablation(init=<pretrained best.pt>, seeds=...)`` on the study set: the clean baseline, ``low-light-s12``
   (low_light at severities 1-2, the reference hold-out) and the oracle ``low-light-all`` (severities 1-3), each
   fine-tuned from the same checkpoint once per seed, each swept over all 28 conditions with its own threshold.
4. Person/background contrast of the study's test frames at clean and low_light s1-s3 (luma inside each GT box
   against a ring around it, in units of the ring's standard deviation): what is left of the signal per step.

Every stage resumes. Timings are wall clock; the load average is sampled every 15 s. Nothing is asserted:
whatever comes out is reported as measured.
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

import numpy as np  # noqa: E402

from aegis_data.api import load_policy  # noqa: E402
from aegis_eval.runners.ablate import run_ablation  # noqa: E402
from aegis_eval.runners.predict import PredictSettings, library_versions  # noqa: E402
from aegis_eval.runners.train import TrainSettings, train_baseline  # noqa: E402

DOC = REPO / "docs" / "MITIGATION.md"
BEGIN = "<!-- BEGIN MEASURED: benchmarks/bench_mitigation.py writes this part -->"
END = "<!-- END MEASURED -->"
HELD_OUT = "low_light_s3"
LADDER = ("clean", "low_light_s1", "low_light_s2", "low_light_s3")


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


def build_split(split: Path, n: int, size: int, test_fraction: float, val_fraction: float, seed: int) -> None:
    if (split / "manifest.json").is_file():
        return
    cmd = [
        sys.executable,
        "-m",
        "aegis_cli.main",
        "build-splits",
        "--dataset",
        "synthetic",
        "--n",
        str(n),
        "--size",
        str(size),
        "--out-dir",
        str(split),
        "--with-train",
        "--workers",
        "2",
        "--option",
        f"seed={seed}",
        "--option",
        f"test_fraction={test_fraction}",
        "--option",
        f"val_fraction={val_fraction}",
    ]
    subprocess.run(cmd, check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})


def contrast(split: Path, ring: int = 4) -> dict[str, dict[str, float]]:
    """Per condition of ``LADDER``: median over GT boxes of (mean luma in the box - mean luma of a ``ring``-px
    band around it) / SD of luma in that band, and the mean frame luma (0-255)."""
    from aegis_data.engine.calibration import luma
    from aegis_data.files.imageio import read_rgb

    gt = json.loads((split / "annotations" / "test.json").read_text())
    boxes: dict[int, list] = {}
    for a in gt["annotations"]:
        boxes.setdefault(a["image_id"], []).append(a["bbox"])
    out = {}
    for cond in LADDER:
        cnr, means = [], []
        for im in gt["images"]:
            y = luma(read_rgb(split / "test" / cond / im["file_name"])) * 255.0  # luma is float64 in [0, 1]
            means.append(float(y.mean()))
            h, w = y.shape
            for x, yy, bw, bh in boxes.get(im["id"], []):
                x0, y0, x1, y1 = int(x), int(yy), int(np.ceil(x + bw)), int(np.ceil(yy + bh))
                X0, Y0, X1, Y1 = max(x0 - ring, 0), max(y0 - ring, 0), min(x1 + ring, w), min(y1 + ring, h)
                band = np.ones((Y1 - Y0, X1 - X0), bool)
                band[y0 - Y0 : y1 - Y0, x0 - X0 : x1 - X0] = False
                inner, around = y[y0:y1, x0:x1], y[Y0:Y1, X0:X1][band]
                if inner.size and around.size > 1 and around.std() > 0:
                    cnr.append(abs(inner.mean() - around.mean()) / around.std())
        out[cond] = {
            "cnr_median": float(np.median(cnr)) if cnr else float("nan"),
            "n_boxes": len(cnr),
            "mean_luma": float(np.mean(means)),
        }
    return out


def _gain(g) -> str:
    if not g or g.get("gain") is None:
        return "–"
    lo, hi = g["ci"]
    return f"{g['gain']:+.3f} [{lo:+.3f}, {hi:+.3f}]" if lo is not None else f"{g['gain']:+.3f}"


def _f(v) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def _signed(v) -> str:
    return "n/a" if v is None else f"{v:+.3f}"


def _verdict(g) -> str:
    lo, hi = (g or {}).get("ci") or [None, None]
    if lo is None:
        return "undefined"
    return (
        "positive (interval above 0)"
        if lo > 0
        else "negative (interval below 0)"
        if hi < 0
        else "not distinguishable from 0 (interval contains 0)"
    )


def summarize(record: dict) -> dict:
    """Combined gains per policy (recall), read from the top-level score JSONs."""
    rows = {}
    for name, entry in record["runs"].items():
        score = json.loads(Path(entry["score"]).read_text())
        gains = score.get("mitigation")
        if not gains:
            continue
        conds = {c: g["recall"] for c, g in gains["conditions"].items()}
        ap = {c: gains["conditions"][c]["map50"] for c in LADDER}
        side = {c: conds[c] for c in gains["unseen_conditions"] if c != HELD_OUT}
        worst = min(side, key=lambda c: (conds[c]["gain"], c)) if side else None
        rows[name] = {
            "hash": (entry["policy"] or {}).get("hash"),
            "thresholds": gains["thresholds"],
            "seeds": gains.get("seeds"),
            "conditions": conds,
            "ap50": ap,
            "mpc": gains["mpc"].get("recall"),
            "side": {
                "n": len(side),
                "mean": float(np.mean([g["gain"] for g in side.values()])) if side else None,
                "worst": worst,
                "n_worse": sum(g["gain"] < -0.03 for g in side.values()),
                "n_ci_below_zero": sum((g["ci"][1] or 0) < 0 for g in side.values()),
            },
        }
    return rows


def markdown(rows: dict, meta: dict) -> str:
    seeds = meta["seeds"]
    lines = [
        BEGIN,
        "",
        f"Measured {meta['finished']} on {meta['machine']}; {meta['command']}",
        "",
        f"- Pretraining (once, cached): synthetic generator seed 1, {meta['pre_counts']['train']} train / "
        f"{meta['pre_counts']['val']} val frames of {meta['size']} px; YOLO11n from `yolo11n.yaml` (random "
        f"init), {meta['pretrain_epochs']} epochs, imgsz {meta['imgsz']}; best clean val checkpoint "
        f"`{meta['init_sha256'][:12]}` (SHA-256 prefix).",
        f"- Study split: synthetic generator seed 0, {meta['counts']['train']} train / {meta['counts']['val']} "
        f"val / {meta['counts']['test']} test frames ({meta['n_test_boxes']} test persons).",
        f"- Fine-tuning from that checkpoint: {meta['epochs']} epochs, batch {meta['batch']}, SGD lr0 "
        f"{meta['lr0']}, training seeds {', '.join(map(str, seeds))}; every model re-froze its threshold on "
        f"clean val.",
        f"- Intervals: 95% percentile, B = {meta['bootstrap']}; combined = mean over seeds, two-level "
        "bootstrap (seeds, then test images with shared weights).",
        f"- Wall time {meta['wall_s'] / 60:.1f} min in all (split builds {meta['build_s']:.0f} s, "
        f"pretraining {meta['pretrain_s'] / 60:.1f} min); load average (1 min) mean {meta['load_mean']:.1f}, "
        f"max {meta['load_max']:.1f} on {meta['cpus']} CPUs shared with other work.",
        "",
    ]
    lines += [
        f"**Held-out severity `{HELD_OUT}`, recall gain over the clean fine-tuned model** (combined over "
        f"seeds, then each seed):",
        "",
        "| policy | trains low_light at | Δ recall [95% CI] | "
        + " | ".join(f"seed {s}" for s in seeds)
        + " | seed SD | verdict |",
        "|:---|:---|---:|" + "---:|" * len(seeds) + "---:|:---|",
    ]
    for name, r in rows.items():
        g = r["conditions"][HELD_OUT]
        sev = "1, 2, 3 (oracle)" if name == "low-light-all" else "1, 2" if name == "low-light-s12" else "?"
        per = [_signed(x["gain"]) for x in g.get("seeds", [])]
        lines.append(
            f"| {name} | {sev} | {_gain(g)} | " + " | ".join(per) + f" | {_f(g.get('seed_sd'))} | {_verdict(g)} |"
        )
    lines += [
        "",
        "Recall per condition of the low_light ladder (mean over seeds; clean model → policy model):",
        "",
        "| policy | " + " | ".join(LADDER) + " |",
        "|:---|" + "---:|" * len(LADDER),
    ]
    for name, r in rows.items():
        lines.append(
            f"| {name} | "
            + " | ".join(f"{_f(r['conditions'][c]['baseline'])} → {_f(r['conditions'][c]['policy'])}" for c in LADDER)
            + " |"
        )
    lines += [
        "",
        "AP50 on the same ladder (threshold-free: does the model rank persons above background at all?), "
        "mean over seeds, clean model → policy model, and the combined Δ on the held-out severity:",
        "",
        "| policy | " + " | ".join(LADDER) + f" | Δ AP50 {HELD_OUT} [95% CI] |",
        "|:---|" + "---:|" * (len(LADDER) + 1),
    ]
    for name, r in rows.items():
        lines.append(
            f"| {name} | "
            + " | ".join(f"{_f(r['ap50'][c]['baseline'])} → {_f(r['ap50'][c]['policy'])}" for c in LADDER)
            + f" | {_gain(r['ap50'][HELD_OUT])} |"
        )
    lines += [
        "",
        "**Clean cost and side effects** (Δ recall, combined over seeds; untrained cells = every "
        f"corrupted condition the policy never draws, `{HELD_OUT}` excluded):",
        "",
        "| policy | thresholds (clean / policy, per seed) | Δ clean [95% CI] | Δ mPC [95% CI] | "
        "untrained cells "
        "| mean Δ | worst cell [95% CI] | cells worse by > 0.03 | cells with CI below 0 |",
        "|:---|:---|---:|---:|---:|---:|:---|---:|---:|",
    ]
    for name, r in rows.items():
        side, thr = r["side"], r["thresholds"]
        worst = side["worst"]
        lines.append(
            f"| {name} | {'/'.join(f'{t:g}' for t in thr['baseline'])} ; "
            f"{'/'.join(f'{t:g}' for t in thr['policy'])} | {_gain(r['conditions']['clean'])} | "
            f"{_gain(r['mpc'])} | {side['n']} | {_signed(side['mean'])} | "
            + (f"{worst} {_gain(r['conditions'][worst])}" if worst else "–")
            + f" | {side['n_worse']} | {side['n_ci_below_zero']} |"
        )
    c = meta["contrast"]
    lines += [
        "",
        "Person/background contrast on the study's test frames (median over GT boxes of |mean luma in "
        "box − mean luma of a 4-px ring| / SD of the ring; frame mean luma 0-255):",
        "",
        "| condition | " + " | ".join(LADDER) + " |",
        "|:---|" + "---:|" * len(LADDER),
        "| contrast (ring SDs) | " + " | ".join(f"{c[k]['cnr_median']:.2f}" for k in LADDER) + " |",
        "| mean luma | " + " | ".join(f"{c[k]['mean_luma']:.1f}" for k in LADDER) + " |",
        "",
        "Stage timings (s): " + ", ".join(f"{k} {v:.0f}" for k, v in meta["stages"].items()),
        "",
        END,
    ]
    return "\n".join(lines) + "\n"


def write_doc(section: str) -> None:
    text = DOC.read_text(encoding="utf-8")
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + section + text[text.index(END) + len(END) + 1 :]
    else:
        text = text.rstrip() + "\n\n" + section
    DOC.write_text(text, encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/aegis-mitigation-ft"))
    ap.add_argument("--n", type=int, default=260, help="study set: synthetic frames in all")
    ap.add_argument("--n-pretrain", type=int, default=420, help="pretraining set: synthetic frames in all")
    ap.add_argument("--size", type=int, default=320)
    ap.add_argument("--test-fraction", type=float, default=0.3)
    ap.add_argument("--val-fraction", type=float, default=0.12)
    ap.add_argument("--imgsz", type=int, default=256)
    ap.add_argument("--pretrain-epochs", type=int, default=12)
    ap.add_argument("--epochs", type=int, default=4, help="fine-tuning epochs per (policy, seed)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr0", type=float, default=0.01)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--bootstrap", type=int, default=500)
    ap.add_argument("--policies", default="low-light-s12,low-light-all")
    ap.add_argument("--no-write", action="store_true", help="print the results instead of updating the doc")
    ap.add_argument(
        "--render-only",
        action="store_true",
        help="re-render the section from a finished run's summary.json and score JSONs (nothing runs; "
        "the wall times shown are that run's)",
    )
    args = ap.parse_args()
    if args.render_only:
        meta = json.loads((args.work / "summary.json").read_text())["meta"]
        record = json.loads((args.work / "ablation" / "ablation.json").read_text())
        publish(markdown(summarize(record), meta), args.no_write)
        return

    t0 = time.perf_counter()
    stages: dict[str, float] = {}
    marks = {"t": time.perf_counter()}

    def progress(stage: str, status: str) -> None:
        now = time.perf_counter()
        print(f"[{datetime.now(timezone.utc):%H:%M:%S}] {stage}: {status}", flush=True)
        parts = stage.split("/")
        key = "/".join(parts[:2]) if len(parts) > 1 and parts[1].startswith("seed-") else parts[0]
        key += "/train" if stage.endswith("/train") else "/sweep+score"
        stages[key] = stages.get(key, 0.0) + now - marks["t"]
        marks["t"] = now

    pre_split, split = args.work / "pretrain-split", args.work / "split"
    seeds = [int(s) for s in args.seeds.split(",")]
    with LoadSampler() as load:
        build_split(pre_split, args.n_pretrain, args.size, 0.05, 0.1, seed=1)
        build_split(split, args.n, args.size, args.test_fraction, args.val_fraction, seed=0)
        build_s = time.perf_counter() - t0
        t_pre = time.perf_counter()
        pre = TrainSettings(
            model="yolo11",
            weights="yolo11n.yaml",
            epochs=args.pretrain_epochs,
            imgsz=args.imgsz,
            batch=args.batch,
            seed=0,
            lr0=args.lr0,
            device="cpu",
            workers=0,
        )
        pretrained = train_baseline(pre, pre_split, args.work / "pretrain", log=print)
        print(f"pretraining: {pretrained['status']} -> {pretrained['best']}", flush=True)
        pretrain_s = time.perf_counter() - t_pre
        marks["t"] = time.perf_counter()
        train = TrainSettings(
            model="yolo11",
            weights=None,
            epochs=args.epochs,
            imgsz=args.imgsz,
            batch=args.batch,
            lr0=args.lr0,
            device="cpu",
            workers=0,
        )
        predict = PredictSettings(model="yolo11", weights=None, imgsz=args.imgsz, batch=16, device="cpu", seed=0)
        policies = [load_policy(p) for p in args.policies.split(",")]
        record = run_ablation(
            train,
            predict,
            split,
            args.work / "ablation",
            policies,
            bootstrap=args.bootstrap,
            seed=0,
            label="yolo11n",
            init=pretrained["best"],
            seeds=seeds,
            progress=progress,
            log=print,
        )
        measured = contrast(split)
    wall = time.perf_counter() - t0
    rows = summarize(record)

    def counts(root: Path) -> dict[str, int]:
        return {
            s: len(json.loads((root / "annotations" / f"{s}.json").read_text())["images"])
            for s in ("train", "val", "test")
        }

    test_gt = json.loads((split / "annotations" / "test.json").read_text())
    meta = {
        "finished": f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC",
        "machine": f"{platform.machine()} {platform.processor() or ''} ({os.cpu_count()} CPUs), "
        f"torch {library_versions().get('torch')}, ultralytics {library_versions().get('ultralytics')}",
        "command": f"`python benchmarks/bench_mitigation.py --n {args.n} --n-pretrain {args.n_pretrain} "
        f"--pretrain-epochs {args.pretrain_epochs} --epochs {args.epochs} --imgsz {args.imgsz} "
        f"--seeds {args.seeds} --bootstrap {args.bootstrap} --policies {args.policies}`",
        "counts": counts(split),
        "pre_counts": counts(pre_split),
        "n_test_boxes": len(test_gt["annotations"]),
        "size": args.size,
        "imgsz": args.imgsz,
        "pretrain_epochs": args.pretrain_epochs,
        "epochs": args.epochs,
        "batch": args.batch,
        "lr0": args.lr0,
        "seeds": seeds,
        "bootstrap": args.bootstrap,
        "init_sha256": record["settings"]["init"]["sha256"],
        "wall_s": wall,
        "build_s": build_s,
        "pretrain_s": pretrain_s,
        "cpus": os.cpu_count(),
        "load_mean": sum(load.samples) / max(len(load.samples), 1),
        "load_max": max(load.samples or [0.0]),
        "stages": stages,
        "contrast": measured,
    }
    (args.work / "summary.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    publish(markdown(rows, meta), args.no_write)
    print(f"summary: {args.work / 'summary.json'}")


def publish(section: str, print_only: bool) -> None:
    if print_only:
        print(section)
    else:
        write_doc(section)
        print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
