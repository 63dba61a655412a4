"""Build docs/example-report/: the report of two synthetic detectors on the benchmark's synthetic sweep.

The data come from ``bench_score_sweep.make_sweep`` (the scoring benchmark's generator): one GT of
``--images`` 4000x3000 frames, and two detectors that differ in how much low-scored clutter they emit (40 vs
10 boxes per image). Each threshold is frozen on a separate validation sweep of the same generator:
``model_a`` by max-F1, ``model_b`` by the risk rule ``fp_per_image<=0.5``. Both are scored over all 28
conditions with B = ``--bootstrap`` and reported with ``aegis report``. What is kept (small enough to commit):
report.html (figures embedded as SVG), the PDF figures, the LaTeX tables and report.tex, plus build_time.txt:
the wall time of that ``build_report`` call, with the machine's load.

    .venv/bin/python benchmarks/example_report.py [--out docs/example-report] [--images 120] [--bootstrap 500]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_score_sweep import make_sweep  # noqa: E402

import aegis_eval as ae  # noqa: E402
from aegis_data.api import load_config  # noqa: E402

MODELS = (("model_a", 40, "max-f1"), ("model_b", 10, "fp_per_image<=0.5"))
KEEP = ("report.html", "report.tex", "report_table.tex", "tables/*.tex", "figures/*.pdf")
TIMING = "build_time.txt"  # the build's own wall time, written beside what is kept


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "docs" / "example-report")
    ap.add_argument("--images", type=int, default=120)
    ap.add_argument("--bootstrap", type=int, default=500)
    args = ap.parse_args()
    conditions = load_config().conditions()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        scores = []
        for label, per_image, rule in MODELS:
            test, val = root / label / "test", root / label / "val"
            test.mkdir(parents=True)
            val.mkdir(parents=True)
            make_sweep(test, args.images, per_image, conditions)  # same seed: the same GT for both models
            make_sweep(val, args.images, per_image, ["clean"], seed=7)
            ae.freeze_threshold(
                val / "preds" / "clean.json", val / "gt.json", rule=rule, out=root / label / "threshold.json"
            )
            result = ae.score(
                test / "preds",
                test / "gt.json",
                threshold_file=root / label / "threshold.json",
                bootstrap=args.bootstrap,
                seed=0,
                label=label,
            )
            path = result.to_json(root / f"{label}.json")  # with its samples file: the report pairs the two models
            doc = json.loads(path.read_text(encoding="utf-8"))
            doc["dataset"] = "synthetic-sweep"  # the generator's GT file has no split manifest to name it
            ae.write_json(doc, path)
            scores.append(path)
        load_before = os.getloadavg()[0]
        t0 = time.perf_counter()
        files = ae.write_report(scores, root / "report", html_figures="svg")
        seconds = time.perf_counter() - t0
        if args.out.exists():
            shutil.rmtree(args.out)
        kept = 0
        for pattern in KEEP:
            for src in sorted(files.out.glob(pattern)):
                dst = args.out / src.relative_to(files.out)
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dst)
                kept += dst.stat().st_size
        kept += _write_timing(args.out / TIMING, seconds, load_before)
    print(f"build_report: {seconds:.1f} s; kept {kept / 1024:.0f} KiB in {args.out}")
    return 0


def _write_timing(path: Path, seconds: float, load_before: float) -> int:
    """The build time docs/REPORT.md quotes, with what it depends on; returns the file's size."""
    text = (
        f"build_report of this example (2 models, 28 conditions, every figure as PNG, PDF and SVG; report.md, "
        f"report.html with SVG figures, the LaTeX files): {seconds:.1f} s wall.\n"
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, load average {load_before:.1f} before / "
        f"{os.getloadavg()[0]:.1f} after; Python {platform.python_version()}. "
        f"Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC. "
        "Written by benchmarks/example_report.py.\n"
    )
    path.write_text(text, encoding="utf-8")
    return path.stat().st_size


if __name__ == "__main__":
    raise SystemExit(main())
