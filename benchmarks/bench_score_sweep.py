"""Benchmark of `aegis score` on a synthetic 28-condition sweep (timings are recorded, never asserted).

The default size is HERIDAL-scale evaluation: 862 test images, ~1,100 GT boxes, 100 detections per image per
condition (2.4 M detections in all) and B = 1000 bootstrap resamples. The predictions are written as COCO
results files and scored through ``aegis_eval.score``, which is what the CLI runs. Each stage is then timed
separately on the loaded data. (benchmarks/bench_score.py covers the AP engine itself.)

    .venv/bin/python benchmarks/bench_score_sweep.py [--images 862] [--per-image 100] [--bootstrap 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

import aegis_eval as ae
from aegis_data.api import load_config
from aegis_eval.metrics import coco as metrics
from aegis_eval.metrics.bootstrap import BootstrapOptions, bootstrap_samples, resample_weights
from aegis_eval.metrics.matching import match_at_threshold
from aegis_eval.protocols.predictions import load_ground_truth, load_predictions


def make_sweep(root: Path, n_images: int, per_image: int, conditions: list[str], seed: int = 20260707) -> None:
    """Write gt.json and preds/<condition>.json.

    The GT has ~1.3 boxes per image, with sizes in all three COCO bins. The detector finds fewer people and
    shifts its boxes more as severity grows, and fills each image up to ``per_image`` with low-scored clutter.
    """
    rng = np.random.Generator(np.random.PCG64(seed))  # explicitly seeded bit generator; benchmark data only
    images, anns = [], []
    for i in range(n_images):
        images.append({"id": i + 1, "file_name": f"img_{i:05d}.png", "width": 4000, "height": 3000})
        for _ in range(int(rng.choice([0, 1, 1, 2, 2, 3], p=[0.2, 0.2, 0.2, 0.15, 0.12, 0.13]))):
            w = float(rng.uniform(12, 140))
            h = w * float(rng.uniform(0.8, 2.0))
            x, y = float(rng.uniform(0, 3800)), float(rng.uniform(0, 2800))
            anns.append(
                {
                    "id": len(anns) + 1,
                    "image_id": i + 1,
                    "category_id": 1,
                    "bbox": [x, y, w, h],
                    "area": w * h,
                    "iscrowd": 0,
                }
            )
    (root / "gt.json").write_text(
        json.dumps({"images": images, "annotations": anns, "categories": [{"id": 1, "name": "person"}]})
    )
    by_image: dict[int, list] = {}
    for a in anns:
        by_image.setdefault(a["image_id"], []).append(a["bbox"])
    preds = root / "preds"
    preds.mkdir()
    for cond in conditions:
        sev = 0 if cond == "clean" else int(cond[-1])
        out = []
        for im in images:
            rows = []
            for b in by_image.get(im["id"], []):
                if rng.random() < 0.92 - 0.2 * sev:
                    j = rng.normal(0, 0.04 + 0.03 * sev, 4)
                    rows.append(
                        [
                            b[0] + j[0] * b[2],
                            b[1] + j[1] * b[3],
                            b[2] * (1 + j[2]),
                            b[3] * (1 + j[3]),
                            float(rng.uniform(0.4, 1.0)),
                        ]
                    )
            n_fp = per_image - len(rows)
            xy = rng.uniform(0, 3900, (n_fp, 2))
            wh = rng.uniform(10, 120, (n_fp, 2))
            sc = rng.beta(1.2, 6.0, n_fp)
            rows += np.column_stack([xy, wh, sc]).tolist()
            out += [
                {"image_id": im["id"], "category_id": 1, "bbox": [round(v, 2) for v in r[:4]], "score": round(r[4], 5)}
                for r in rows
            ]
        (preds / f"{cond}.json").write_text(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=862)
    ap.add_argument("--per-image", type=int, default=100)
    ap.add_argument("--bootstrap", type=int, default=1000)
    args = ap.parse_args()
    conditions = load_config().conditions()
    with tempfile.TemporaryDirectory(prefix="aegis-bench-sweep-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        make_sweep(root, args.images, args.per_image, conditions)
        t_make = time.perf_counter() - t0

        t0, c0 = time.perf_counter(), time.process_time()
        result = ae.score(root / "preds", root / "gt.json", threshold=0.5, bootstrap=args.bootstrap, seed=0).document
        t_total, c_total = time.perf_counter() - t0, time.process_time() - c0

        # Stage breakdown on the loaded data.
        t0 = time.perf_counter()
        gt = load_ground_truth(root / "gt.json")
        dets = {c: load_predictions(root / "preds" / f"{c}.json", gt) for c in conditions}
        t_load = time.perf_counter() - t0
        t0 = time.perf_counter()
        matches = {c: match_at_threshold(gt, d, 0.5) for c, d in dets.items()}
        t_match = time.perf_counter() - t0
        t0 = time.perf_counter()
        tables = {c: metrics.evaluate_images(gt, d) for c, d in dets.items()}
        for t in tables.values():
            metrics.accumulate(t)
        t_ap = time.perf_counter() - t0
        t0 = time.perf_counter()
        w = resample_weights(gt.n_images, BootstrapOptions(n_bootstrap=args.bootstrap))
        for c in dets:
            bootstrap_samples(w, tables[c], matches[c].counts)
        t_boot = time.perf_counter() - t0

    n_dets = sum(d.n for d in dets.values())
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
        f"python {platform.python_version()}, numpy {np.__version__}"
    )
    print(
        f"sweep: {len(dets)} conditions, {gt.n_images} images, {gt.n_boxes} GT boxes, {n_dets} detections, "
        f"B = {args.bootstrap}; clean recall {result['conditions']['clean']['recall']:.3f}, "
        f"AP50 {result['conditions']['clean']['map50']:.3f}"
    )
    print("| stage | seconds |\n|---|---|")
    print(f"| write the synthetic files (not part of scoring) | {t_make:.1f} |")
    print(
        f"| **aegis_eval.score end to end** (load, validate, match, AP, bootstrap, summary) | **{t_total:.1f}** "
        f"(CPU {c_total:.1f}) |"
    )
    print(f"| load + validate 28 files | {t_load:.1f} |")
    print(f"| thresholded matching, 28 conditions | {t_match:.1f} |")
    print(f"| COCO AP (evaluate_images + accumulate), 28 conditions | {t_ap:.1f} |")
    print(f"| bootstrap samples, 28 conditions x B | {t_boot:.1f} |")


if __name__ == "__main__":
    main()
