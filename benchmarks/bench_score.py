"""Scoring benchmark: our COCO AP engine vs pycocotools and faster-coco-eval, and the bootstrap.

Generates one single-class condition (default 5,000 images × 20 GT × 100 detections: jittered copies of
the GT plus clutter, scores rounded to 5 decimals as ultralytics writes them), then times in one run:

  (a) ours: ``evaluate_images`` + ``accumulate``, plus thresholded matching (``match_at_threshold`` +
      ``threshold_metrics``);
  (b) pycocotools ``COCOeval`` evaluate + accumulate + summarize;
  (c) faster-coco-eval ``COCOeval_faster`` evaluate + accumulate + summarize;
  (d) the bootstrap: ``resample_weights`` + ``bootstrap_samples`` with B = 1000 on an 862-image condition.

The six AP values of (a), (b) and (c) are printed side by side and must agree (exit status 1 otherwise).
Usage: ``python benchmarks/bench_score.py [--images N] [--skip-pycocotools] [--write docs/perf/score.md]``.
Timings are wall-clock seconds from ``time.perf_counter``; run it on a quiet machine.

``--whole-process`` times what a user waits for instead: the condition is written as a COCO GT file and a results
file, ``aegis score`` runs on them as a separate process (``python -m aegis_cli.main score ... --bootstrap 1``:
interpreter start, imports, reading, validation, matching, AP, the score JSON and the tables), and pycocotools'
``COCOeval`` evaluate + accumulate runs in this process on the same files (loading them excluded). Rounds
alternate the two, so each ratio compares runs minutes apart; medians are reported. ``--baseline-repo DIR``
also times another checkout's ``aegis score`` (the code before a change) on the same files and checks that its
score JSON is the same apart from the timestamp and git state. Each timed process imports all of its packages,
the CLI included, from its own checkout (``tree_env``), not from wherever the toolkit is installed. The AP values
must agree to 1e-12.
Usage: ``python benchmarks/bench_score.py --whole-process --images 1000 [--rounds 3]
[--baseline-repo DIR] [--write docs/perf/score_process.md]``.

``--tools`` puts the four evaluators side by side, each as a whole process on the same files: pycocotools,
faster-coco-eval and hotcoco (optional benchmark dependencies, timed when installed: ``pip install hotcoco
faster-coco-eval``) with COCO -> loadRes -> evaluate -> accumulate -> summarize (AP only), and ``aegis score``
(AP, thresholded metrics, the score JSON), on one condition and on the 28-condition sweep of
:func:`write_sweep_fixture` (``aegis score`` also with B = 1000 bootstrap resamples). Wall, CPU and peak RSS per
process; the AP values of every tool must agree to 1e-12 (exit status 1 otherwise).
Usage: ``python benchmarks/bench_score.py --tools --images 1000 [--rounds 3] [--one-rounds 7] [--skip-pycocotools]
[--sweep-pycocotools] [--write docs/perf/score_tools.md]``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from numpy.random import PCG64, Generator

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from aegis_eval.metrics.bootstrap import BootstrapOptions, bootstrap_samples, resample_weights  # noqa: E402
from aegis_eval.metrics.coco import accumulate, evaluate_images  # noqa: E402
from aegis_eval.metrics.matching import match_at_threshold, threshold_metrics  # noqa: E402
from aegis_eval.metrics.result_keys import AP_METRICS  # noqa: E402
from aegis_eval.metrics.types import Detections, GroundTruth  # noqa: E402

THRESHOLD = 0.25


def make_condition(n_images: int, n_gt: int, n_dets: int, key: int) -> tuple[GroundTruth, Detections]:
    """n_images frames of 2000×1200 with n_gt persons (8-220 px, all three COCO size ranges) and n_dets
    detections each: half jittered copies of GT boxes (scores 0.2-1), half clutter (scores 0-0.7)."""
    rng = Generator(PCG64(key))
    g = n_images * n_gt
    box_image = np.repeat(np.arange(n_images, dtype=np.int64), n_gt)
    w = rng.uniform(8, 220, g)
    h = w * rng.uniform(0.6, 1.6, g)
    gt_boxes = np.column_stack([rng.uniform(0, 1800, g), rng.uniform(0, 1000, g), w, h])
    gt = GroundTruth(
        image_ids=np.arange(1, n_images + 1, dtype=np.int64),
        file_names=tuple(f"frame_{i:06d}.png" for i in range(n_images)),
        widths=np.full(n_images, 2000),
        heights=np.full(n_images, 1200),
        box_image=box_image,
        boxes=gt_boxes,
        areas=w * h,
        iscrowd=np.zeros(g, bool),
        ann_ids=np.arange(1, g + 1),
    )
    d = n_images * n_dets
    det_image = np.repeat(np.arange(n_images, dtype=np.int64), n_dets)
    source = det_image * n_gt + rng.integers(0, n_gt, d)
    scale = np.column_stack([w[source], h[source], w[source], h[source]])
    boxes = gt_boxes[source] + rng.normal(0, 1, (d, 4)) * rng.uniform(0, 0.15, (d, 1)) * scale
    boxes[:, 2:] = np.abs(boxes[:, 2:]) + 1.0
    clutter = (np.arange(d) % n_dets) >= n_dets // 2
    boxes[clutter] = np.column_stack(
        [rng.uniform(0, 1800, d), rng.uniform(0, 1000, d), rng.uniform(8, 220, d), rng.uniform(8, 220, d)]
    )[clutter]
    scores = np.round(np.where(clutter, rng.uniform(0, 0.7, d), rng.uniform(0.2, 1.0, d)), 5)
    return gt, Detections(det_image=det_image, boxes=boxes, scores=scores)


def condition_detections(gt: GroundTruth, n_dets: int, key: int, severity: int) -> Detections:
    """Detections of one condition of the sweep fixture over ``gt``: the recipe of :func:`make_condition` (half
    jittered GT copies, half clutter), with jitter growing and found-person scores falling with ``severity``
    (0 = clean, 1-3), from its own keyed generator so every condition file is reproducible on its own."""
    rng = Generator(PCG64([key, severity, 34]))
    n_images, d = gt.n_images, gt.n_images * n_dets
    n_gt = gt.n_boxes // n_images
    det_image = np.repeat(np.arange(n_images, dtype=np.int64), n_dets)
    source = det_image * n_gt + rng.integers(0, n_gt, d)
    w, h = gt.boxes[source, 2], gt.boxes[source, 3]
    scale = np.column_stack([w, h, w, h])
    jitter = rng.uniform(0, 0.15 * (1 + 0.4 * severity), (d, 1))
    boxes = gt.boxes[source] + rng.normal(0, 1, (d, 4)) * jitter * scale
    boxes[:, 2:] = np.abs(boxes[:, 2:]) + 1.0
    clutter = (np.arange(d) % n_dets) >= n_dets // 2
    boxes[clutter] = np.column_stack(
        [rng.uniform(0, 1800, d), rng.uniform(0, 1000, d), rng.uniform(8, 220, d), rng.uniform(8, 220, d)]
    )[clutter]
    top = 1.0 - 0.15 * severity
    scores = np.round(np.where(clutter, rng.uniform(0, 0.7, d), rng.uniform(0.2, top, d)), 5)
    return Detections(det_image=det_image, boxes=boxes, scores=scores)


def write_sweep_fixture(folder: Path, n_images: int, n_gt: int, n_dets: int, key: int = 1) -> tuple[Path, Path]:
    """The sweep fixture: ``gt.json`` and ``preds/<condition>.json`` for the conditions of the default suite (clean and
    9 corruptions × 3 severities), the same images in every file. The clean file is :func:`make_condition`'s
    (the one-condition fixture); the others come from :func:`condition_detections`, keyed by their position.
    Deterministic: the same arguments write the same bytes."""
    from aegis_data.api import load_config

    gt, clean = make_condition(n_images, n_gt, n_dets, key)
    preds = folder / "preds"
    preds.mkdir(parents=True, exist_ok=True)
    gt_dict, results = coco_dicts(gt, clean)
    (folder / "gt.json").write_text(json.dumps(gt_dict))
    (preds / "clean.json").write_text(json.dumps(results))
    for k, cond in enumerate(load_config().conditions()):
        if cond == "clean":
            continue
        dets = condition_detections(gt, n_dets, key * 1000 + k, int(cond.rsplit("_s", 1)[1]))
        (preds / f"{cond}.json").write_text(json.dumps(coco_dicts(gt, dets)[1]))
    return folder / "gt.json", preds


def coco_dicts(gt: GroundTruth, dets: Detections) -> tuple[dict, list]:
    images = [
        {"id": int(i), "width": 2000, "height": 1200, "file_name": f} for i, f in zip(gt.image_ids, gt.file_names)
    ]
    anns = [
        {
            "id": int(a),
            "image_id": int(gt.image_ids[r]),
            "category_id": 1,
            "bbox": b.tolist(),
            "area": float(s),
            "iscrowd": 0,
        }
        for a, r, b, s in zip(gt.ann_ids, gt.box_image, gt.boxes, gt.areas)
    ]
    results = [
        {"image_id": int(gt.image_ids[r]), "category_id": 1, "bbox": b.tolist(), "score": float(s)}
        for r, b, s in zip(dets.det_image, dets.boxes, dets.scores)
    ]
    return {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "person"}]}, results


def timed(fn):
    """(result, Seconds): wall-clock seconds carrying the CPU seconds of all threads of this process."""
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    wall = time.perf_counter() - t0
    return out, Seconds(wall, time.process_time() - c0)


class Seconds(float):
    """A wall-clock duration that also carries the CPU seconds spent in it."""

    def __new__(cls, wall: float, cpu: float):
        obj = super().__new__(cls, wall)
        obj.cpu = cpu
        return obj

    def __add__(self, other):
        return Seconds(float(self) + float(other), self.cpu + getattr(other, "cpu", 0.0))

    __radd__ = __add__

    def cell(self) -> str:
        return f"{float(self):.2f} | {self.cpu:.2f}"


def run_ours(gt, dets):
    table, t_eval = timed(lambda: evaluate_images(gt, dets))
    ap, t_acc = timed(lambda: accumulate(table))
    _, t_thr = timed(lambda: threshold_metrics(match_at_threshold(gt, dets, THRESHOLD)))
    return ap, {"evaluate_images": t_eval, "accumulate": t_acc, "thresholded": t_thr}


def run_pycocotools(gt_dict, results):
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):

        def load():
            coco_gt = COCO()
            coco_gt.dataset = gt_dict
            coco_gt.createIndex()
            return coco_gt, coco_gt.loadRes(results)

        (coco_gt, coco_dt), t_load = timed(load)
        ev = COCOeval(coco_gt, coco_dt, "bbox")
        _, t_eval = timed(ev.evaluate)
        _, t_acc = timed(ev.accumulate)
        _, t_sum = timed(ev.summarize)
    return dict(zip(AP_METRICS, ev.stats[:6].tolist())), {
        "load": t_load,
        "evaluate": t_eval,
        "accumulate": t_acc,
        "summarize": t_sum,
    }


def run_faster(gt_dict, results):
    from faster_coco_eval import COCO, COCOeval_faster

    with contextlib.redirect_stdout(io.StringIO()):

        def load():
            coco_gt = COCO(gt_dict)
            return coco_gt, coco_gt.loadRes(results)

        (coco_gt, coco_dt), t_load = timed(load)
        ev = COCOeval_faster(coco_gt, coco_dt, "bbox", print_function=lambda *a, **k: None)
        _, t_eval = timed(ev.evaluate)
        _, t_acc = timed(ev.accumulate)
        _, t_sum = timed(ev.summarize)
    return dict(zip(AP_METRICS, list(ev.stats[:6]))), {
        "load": t_load,
        "evaluate": t_eval,
        "accumulate": t_acc,
        "summarize": t_sum,
    }


def run_bootstrap(n_images, n_gt, n_dets, n_boot):
    gt, dets = make_condition(n_images, n_gt, n_dets, key=2 + n_gt)
    table = evaluate_images(gt, dets)
    counts = match_at_threshold(gt, dets, THRESHOLD).counts
    weights, t_w = timed(lambda: resample_weights(gt.n_images, BootstrapOptions(n_bootstrap=n_boot, seed=0)))
    samples, t_s = timed(lambda: bootstrap_samples(weights, table, counts))
    return samples, {"resample_weights": t_w, "bootstrap_samples": t_s}


def versions() -> dict[str, str]:
    import faster_coco_eval
    import pycocotools

    try:
        from importlib.metadata import version

        pycoco = version("pycocotools")
    except Exception:  # metadata missing in odd installs; the module has no __version__
        pycoco = getattr(pycocotools, "__version__", "?")
    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pycocotools": pycoco,
        "faster-coco-eval": faster_coco_eval.__version__,
    }


def machine_lines(load_before, load_after, load_note: str) -> list[str]:
    """The machine, versions and load lines every section of this benchmark ends with."""
    return [
        f"Machine: {os.cpu_count()} cores ({cpu_name()}), {platform.system()} {platform.machine()}; "
        + ", ".join(f"{k} {v}" for k, v in versions().items())
        + ".",
        f"Load average before / after: {load_before[0]:.1f} / {load_after[0]:.1f} {load_note}",
        "",
    ]


def emit(text: str, path) -> None:
    """Print a section and, with ``--write``, store it for benchmarks/perfdoc.py."""
    print(text)
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


# --- whole process: `aegis score` as a user runs it vs COCOeval in-process on the same files ---------------
# Provenance fields that differ between two runs of the same inputs.
VOLATILE = ("timestamp", "git_sha", "git_dirty")


def write_fixture(folder: Path, gt: GroundTruth, dets: Detections) -> tuple[Path, Path]:
    """The condition as a COCO GT file and a COCO results file named after the clean condition."""
    gt_dict, results = coco_dicts(gt, dets)
    gt_path, preds_path = folder / "gt.json", folder / "clean.json"
    gt_path.write_text(json.dumps(gt_dict))
    preds_path.write_text(json.dumps(results))
    return gt_path, preds_path


def pycocotools_files(gt_path: Path, preds_path: Path) -> tuple[dict, Seconds]:
    """(AP values, evaluate + accumulate time) of COCOeval on the files; loading them is not timed."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO(str(gt_path))
        coco_dt = coco_gt.loadRes(str(preds_path))
        ev = COCOeval(coco_gt, coco_dt, "bbox")
        _, t_eval = timed(ev.evaluate)
        _, t_acc = timed(ev.accumulate)
        ev.summarize()
    return dict(zip(AP_METRICS, ev.stats[:6].tolist())), t_eval + t_acc


def tree_env(repo: Path, links: Path) -> dict[str, str]:
    """Environment of a subprocess that imports every toolkit package from the checkout ``repo``.

    The source folder cli/ installs as ``aegis_cli``, so an editable install would hand the subprocess the CLI of
    the installed tree whatever its working directory: a link ``links/aegis_cli -> repo/cli`` goes first on
    PYTHONPATH, then ``repo`` (aegis_data, aegis_eval). Byte-compiled modules are cached as in an installed
    package (PYTHONDONTWRITEBYTECODE is dropped; the first call of a round is an untimed warm-up)."""
    links.mkdir(parents=True, exist_ok=True)
    link = links / "aegis_cli"
    if not link.is_symlink():
        link.symlink_to(repo / "cli", target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join((str(links), str(repo)))
    return env


def aegis_process(repo: Path, env: dict[str, str], gt_path: Path, preds_path: Path, out: Path) -> tuple[dict, Seconds]:
    """(score JSON, wall and CPU seconds) of ``aegis score`` from the checkout ``repo`` (``env``: its
    ``tree_env``) in a fresh interpreter."""
    cmd = [
        sys.executable,
        "-m",
        "aegis_cli.main",
        "score",
        str(preds_path),
        "--split-dir",
        str(gt_path),
        "--threshold",
        str(THRESHOLD),
        "--bootstrap",
        "1",
        "--json",
        str(out),
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"aegis score failed in {repo}: {done.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(out.read_text()), Seconds(wall, cpu)


def _stable(doc: dict) -> dict:
    prov = {k: v for k, v in doc["provenance"].items() if k not in VOLATILE}
    return {**doc, "provenance": prov}


def _median(values: list[Seconds]) -> Seconds:
    return Seconds(statistics.median(values), statistics.median(v.cpu for v in values))


def whole_process(args) -> int:
    load_before = os.getloadavg()
    gt, dets = make_condition(args.images, args.gt, args.dets, key=1)
    repos = {"aegis score": REPO}
    if args.baseline_repo is not None:
        repos["aegis score, baseline"] = args.baseline_repo.resolve()
    times: dict[str, list[Seconds]] = {name: [] for name in (*repos, "pycocotools")}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        gt_path, preds_path = write_fixture(folder, gt, dets)
        sizes = (gt_path.stat().st_size, preds_path.stat().st_size)
        envs = {name: tree_env(repo, folder / f"tree-{k}") for k, (name, repo) in enumerate(repos.items())}
        docs = {
            name: aegis_process(repo, envs[name], gt_path, preds_path, folder / "warm.json")[0]
            for name, repo in repos.items()
        }
        for r in range(args.rounds):
            for name, repo in repos.items():
                _, t = aegis_process(repo, envs[name], gt_path, preds_path, folder / f"{r}.json")
                times[name].append(t)
            ref, t = pycocotools_files(gt_path, preds_path)
            times["pycocotools"].append(t)
            print(f"round {r + 1}:", {k: f"{v[-1]:.2f} s (CPU {v[-1].cpu:.2f})" for k, v in times.items()}, flush=True)
    load_after = os.getloadavg()
    ours = docs["aegis score"]["conditions"]["clean"]
    diff = max(abs(ours[m] - ref[m]) for m in AP_METRICS)
    same_json = {name: _stable(doc) == _stable(docs["aegis score"]) for name, doc in docs.items()}
    med = {name: _median(v) for name, v in times.items()}
    coco = med["pycocotools"]
    ratio_rounds = [c / a for c, a in zip(times["pycocotools"], times["aegis score"])]
    lines = [
        f"## `aegis score` whole process vs pycocotools (`benchmarks/bench_score.py --whole-process`) — "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        "",
        f"Condition: {args.images:,} images × {args.gt} GT × {args.dets} detections = {args.images * args.dets:,} "
        f"detections, one class, written as a COCO GT file ({sizes[0] / 1e6:.1f} MB) and a results file "
        f"({sizes[1] / 1e6:.1f} MB). "
        f"`aegis score clean.json --split-dir gt.json --threshold {THRESHOLD} --bootstrap 1 --json out.json` runs as a "
        "separate process (interpreter start, imports, reading and validating both files, thresholded matching, "
        "COCO AP, false-alarm bounds, the score JSON and the tables); pycocotools' `COCOeval` evaluate + "
        "accumulate runs in the benchmark's process on the same files, loading them not timed. "
        f"{args.rounds} rounds alternate the two; medians.",
        "",
        "| what | wall s (median) | CPU s (median) | pycocotools wall / this wall |",
        "|---|---:|---:|---:|",
    ]
    for name in repos:
        lines.append(
            f"| {'**' + name + '**' if name == 'aegis score' else name} (whole process) | "
            f"{med[name].cell()} | **{coco / med[name]:.1f}×** |"
        )
    lines += [
        f"| pycocotools `COCOeval` evaluate + accumulate (in-process) | {coco.cell()} | 1.0× |",
        "",
        "Per round (pycocotools wall / `aegis score` wall): " + ", ".join(f"{x:.1f}×" for x in ratio_rounds) + ".",
        f"AP: the six values of the score JSON vs pycocotools, max |difference| {diff:.1e} (must be ≤ 1e-12).",
    ]
    if len(repos) > 1:
        lines.append(
            f"Baseline: {args.baseline_label or '`' + str(args.baseline_repo) + '`'}; its score JSON "
            + ("identical" if all(same_json.values()) else "**different**")
            + " apart from "
            + ", ".join(VOLATILE)
            + "."
        )
    lines += machine_lines(
        load_before, load_after, "(2 cores; above ~1 other jobs competed for the CPU and inflate wall times)."
    )
    emit("\n".join(lines), args.write)
    return 0 if diff <= 1e-12 and all(same_json.values()) else 1


# --- four tools side by side, whole processes: one condition and the sweep ------------------------------------
# One script for the three COCOeval-shaped tools: the GT parsed once, then per condition file loadRes -> evaluate ->
# accumulate -> summarize (AP only), the six AP values printed as JSON.
COCO_TOOL_SCRIPT = """
import contextlib, io, json, sys
tool, gt_path, files = sys.argv[1], sys.argv[2], sys.argv[3:]
if tool == "pycocotools":
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval as Eval
elif tool == "faster-coco-eval":
    from faster_coco_eval import COCO
    from faster_coco_eval import COCOeval_faster as Eval
else:
    from hotcoco import COCO, COCOeval as Eval
out = {}
with contextlib.redirect_stdout(io.StringIO()):
    gt = COCO(gt_path)
    for f in files:
        ev = Eval(gt, gt.loadRes(f), "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
        out[f.rsplit("/", 1)[-1][:-5]] = [float(x) for x in list(ev.stats)[:6]]
print(json.dumps(out))
"""
TOOLS = ("pycocotools", "faster-coco-eval", "hotcoco")
TOOL_MODULES = {"pycocotools": "pycocotools", "faster-coco-eval": "faster_coco_eval", "hotcoco": "hotcoco"}


# Runs argv[2:] and writes its wall seconds and rusage to argv[1]. A small process of its own starts each timed one:
# Linux carries the peak RSS of a forked parent across exec, so a child forked straight from this benchmark (which
# holds the fixture) would report at least the benchmark's own size.
LAUNCHER = """
import json, os, subprocess, sys, time
t0 = time.perf_counter()
proc = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(proc.pid, 0)
wall = time.perf_counter() - t0
proc.returncode = os.waitstatus_to_exitcode(status)
with open(sys.argv[1], "w") as f:
    json.dump({"rc": proc.returncode, "wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss}, f)
"""


def child(cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[str, Seconds, float]:
    """(stdout, wall and CPU seconds, peak RSS in MB) of one whole process, its own usage read by os.wait4 in a
    small launcher process."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "usage.json"
        done = subprocess.run(
            [sys.executable, "-c", LAUNCHER, str(report), *cmd], env=env, cwd=cwd, capture_output=True, text=True
        )
        usage = json.loads(report.read_text()) if report.is_file() else {"rc": done.returncode}
        if done.returncode or usage["rc"]:
            raise SystemExit(f"{' '.join(cmd[:4])} failed: {done.stderr.strip()[-400:]}")
        return done.stdout, Seconds(usage["wall"], usage["cpu"]), usage["rss"] / 1024


def run_tool(tool: str, gt_path: Path, files: list[Path]) -> tuple[dict, Seconds, float]:
    out, t, rss = child([sys.executable, "-c", COCO_TOOL_SCRIPT, tool, str(gt_path), *map(str, files)])
    return json.loads(out), t, rss


def run_aegis(env: dict[str, str], gt_path: Path, preds: Path, n_boot: int, out: Path) -> tuple[dict, Seconds, float]:
    cmd = [sys.executable, "-m", "aegis_cli.main", "score", str(preds), "--split-dir", str(gt_path)]
    cmd += ["--threshold", str(THRESHOLD), "--bootstrap", str(n_boot), "--json", str(out)]
    _, t, rss = child(cmd, env=env, cwd=REPO)
    doc = json.loads(out.read_text())
    return {c: [e[m] for m in AP_METRICS] for c, e in doc["conditions"].items()}, t, rss


def tool_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version(), "numpy": np.__version__}
    for tool in TOOLS:
        try:
            found[tool] = version(tool)
        except PackageNotFoundError:
            pass
    return found


def installed(tool: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(TOOL_MODULES[tool]) is not None


_RESULT_REST = ("category_id", "bbox", "score")


def write_stem_ids(gt_path: Path, preds: Path, out: Path) -> Path:
    """``preds`` as Ultralytics writes a results file: each image's file-name stem as ``image_id`` (its names are
    not numbers) and its ``file_name`` beside it."""
    names = {im["id"]: im["file_name"] for im in json.loads(gt_path.read_text())["images"]}
    rows = []
    for d in json.loads(preds.read_text()):
        name = names[d["image_id"]]
        rows.append({"image_id": Path(name).stem, "file_name": name, **{k: d[k] for k in _RESULT_REST}})
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows))
    return out


def side_by_side(args) -> int:
    """Every tool as its own process on one condition and on the sweep; medians over rounds; AP compared."""
    load_before = os.getloadavg()
    tools = [t for t in TOOLS if installed(t) and not (t == "pycocotools" and args.skip_pycocotools)]
    missing = [t for t in TOOLS if not installed(t)]
    rows: dict[str, dict[str, list]] = {}
    values: dict[str, dict[str, dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        gt_path, preds = write_sweep_fixture(folder, args.images, args.gt, args.dets)
        files = sorted(preds.glob("*.json"))
        clean = preds / "clean.json"
        env = tree_env(REPO, folder / "tree")
        cases = {f"{t} one": (lambda t=t: run_tool(t, gt_path, [clean])) for t in tools}
        cases["aegis one"] = lambda: run_aegis(env, gt_path, clean, 1, folder / "one.json")
        stems = write_stem_ids(gt_path, clean, folder / "stems" / "clean.json")
        cases["aegis one, stem ids"] = lambda: run_aegis(env, gt_path, stems, 1, folder / "stems.json")
        for t in tools:
            if t != "pycocotools" or args.sweep_pycocotools:
                cases[f"{t} sweep"] = lambda t=t: run_tool(t, gt_path, files)
        cases["aegis sweep"] = lambda: run_aegis(env, gt_path, preds, 1, folder / "sweep1.json")
        cases[f"aegis sweep B={args.boot_b}"] = lambda: run_aegis(
            env, gt_path, preds, args.boot_b, folder / "sweepB.json"
        )
        run_aegis(env, gt_path, clean, 1, folder / "warm.json")  # byte-compiled modules in place before timing
        # One-condition processes take a fraction of a second, so their medians need more rounds than the sweeps';
        # pycocotools' one condition (tens of seconds) keeps the sweeps' count.
        n_rounds = {n: args.rounds if "sweep" in n or n.startswith("pycocotools") else args.one_rounds for n in cases}
        for r in range(max(n_rounds.values())):
            for name, fn in cases.items():
                if r >= n_rounds[name]:
                    continue
                got, t, rss = fn()
                rows.setdefault(name, []).append((t, rss))
                values[name] = got
                print(f"round {r + 1}: {name}: {t:.2f} s wall, {t.cpu:.2f} s CPU, {rss:.0f} MB", flush=True)
    load_after = os.getloadavg()
    ref_name = "pycocotools one" if "pycocotools one" in values else next(iter(values))
    ref = values[ref_name]["clean"]
    diffs = {name: max(abs(a - b) for a, b in zip(v["clean"], ref)) for name, v in values.items()}
    sweep_names = [n for n in values if "sweep" in n]
    sweep_ref = values["aegis sweep"]
    sweep_diffs = {
        n: max(abs(a - b) for c in sweep_ref for a, b in zip(values[n][c], sweep_ref[c])) for n in sweep_names
    }
    med = {n: (_median([t for t, _ in v]), max(rss for _, rss in v)) for n, v in rows.items()}
    spread = {n: (min(float(t) for t, _ in v), max(float(t) for t, _ in v)) for n, v in rows.items()}

    def cell(name: str) -> str:
        if name not in med:
            return "—"
        t, rss = med[name]
        lo, hi = spread[name]
        return f"{float(t):.2f} s ({lo:.2f}–{hi:.2f}; CPU {t.cpu:.2f}, {rss:.0f} MB)"

    n_cond = len(values["aegis sweep"])
    lines = [
        f"## Four evaluators side by side (`benchmarks/bench_score.py --tools`) — "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        "",
        f"Fixture: {args.images:,} images × {args.gt} GT × {args.dets} detections per image (COCO GT file and "
        f"results files written by `write_sweep_fixture`, deterministic), one condition (`clean.json`) and the "
        f"sweep ({n_cond} condition files of the same images). Every cell is one whole process (interpreter start, "
        "imports, reading the files, evaluation), wall seconds as the median (and range) of "
        f"{args.one_rounds} rounds for one condition and {args.rounds} for pycocotools and the sweeps, the tools "
        "alternating within each round; CPU seconds (median) and peak RSS of that process. The COCOeval "
        "tools run COCO(gt) once, then loadRes -> evaluate -> accumulate -> summarize per file: AP only. "
        f"`aegis score` adds the thresholded metrics (t = {THRESHOLD}), the false-alarm bounds and the score JSON.",
        "",
        f"| evaluator | one condition | sweep, {n_cond} files | sweep with B = {args.boot_b} |",
        "|---|---:|---:|---:|",
    ]
    for t in tools:
        lines.append(f"| {t} {tool_versions().get(t, '')} (AP only) | {cell(t + ' one')} | {cell(t + ' sweep')} | — |")
    lines.append(
        f"| **`aegis score`** (AP + thresholded, B = 1; last column B = {args.boot_b}) | {cell('aegis one')} | "
        f"{cell('aegis sweep')} | **{cell(f'aegis sweep B={args.boot_b}')}** |"
    )
    lines += [
        "",
        f"The same condition as Ultralytics writes it (the image's file-name stem as `image_id`, and a `file_name` "
        f"key; no COCOeval tool reads string ids), `aegis score` B = 1: {cell('aegis one, stem ids')}.",
        "",
        f"AP: the six values of `clean` from every process vs {ref_name.split()[0]}: max |difference| "
        f"{max(diffs.values()):.1e}; over the sweep, every condition of every tool vs `aegis score`: "
        f"{max(sweep_diffs.values()):.1e} (must be ≤ 1e-12). AP of clean: {ref[0]:.12f}.",
    ]
    if missing:
        lines.append(f"Not installed, so not timed: {', '.join(missing)} (optional benchmark dependencies).")
    if not args.sweep_pycocotools and "pycocotools" in tools:
        lines.append("pycocotools was not run on the sweep (about 28× its one-condition time; `--sweep-pycocotools`).")
    lines += [
        f"Machine: {os.cpu_count()} cores ({cpu_name()}), {platform.system()} {platform.machine()}; "
        + ", ".join(f"{k} {v}" for k, v in tool_versions().items())
        + ".",
        f"Load average before / after: {load_before[0]:.1f} / {load_after[0]:.1f} (2 cores shared with other jobs "
        "above ~1: wall times inflate, compare within one run).",
        "",
    ]
    emit("\n".join(lines), args.write)
    if args.write:
        from benchmarks.perfdoc import assemble

        assemble()
    return 0 if max(diffs.values()) <= 1e-12 and max(sweep_diffs.values()) <= 1e-12 else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=5000)
    ap.add_argument("--gt", type=int, default=20)
    ap.add_argument("--dets", type=int, default=100)
    ap.add_argument("--boot-images", type=int, default=862)
    ap.add_argument("--boot-b", type=int, default=1000)
    ap.add_argument(
        "--boot-gt",
        type=int,
        nargs="+",
        default=[7, 20],
        help="GT per image of the bootstrap conditions (SARD averages about 7)",
    )
    ap.add_argument("--skip-pycocotools", action="store_true", help="pycocotools takes minutes at full size")
    ap.add_argument("--write", type=Path, help="write the markdown results section to this file")
    ap.add_argument(
        "--whole-process",
        action="store_true",
        help="time `aegis score` as a separate process against COCOeval on the same files",
    )
    ap.add_argument("--rounds", type=int, default=3, help="--whole-process: timed rounds (medians reported)")
    ap.add_argument(
        "--baseline-repo",
        type=Path,
        help="--whole-process: also time the `aegis score` of this checkout (e.g. the code before)",
    )
    ap.add_argument("--baseline-label", help="--whole-process: how the report names the baseline checkout")
    ap.add_argument(
        "--tools",
        action="store_true",
        help="pycocotools, faster-coco-eval, hotcoco and `aegis score` as whole processes, one condition and the sweep",
    )
    ap.add_argument("--sweep-pycocotools", action="store_true", help="--tools: also pycocotools on the sweep (slow)")
    ap.add_argument(
        "--one-rounds", type=int, default=7, help="--tools: timed rounds of the short one-condition processes"
    )
    args = ap.parse_args(argv)
    if args.tools:
        return side_by_side(args)
    if args.whole_process:
        return whole_process(args)

    load_before = os.getloadavg()
    gt, dets = make_condition(args.images, args.gt, args.dets, key=1)
    gt_dict, results = coco_dicts(gt, dets)
    rows = {}
    values = {}
    values["aegis"], rows["aegis"] = run_ours(gt, dets)
    print("aegis", rows["aegis"], flush=True)
    values["faster-coco-eval"], rows["faster-coco-eval"] = run_faster(gt_dict, results)
    print("faster-coco-eval", rows["faster-coco-eval"], flush=True)
    if not args.skip_pycocotools:
        values["pycocotools"], rows["pycocotools"] = run_pycocotools(gt_dict, results)
        print("pycocotools", rows["pycocotools"], flush=True)
    boots = {}
    for n_gt in args.boot_gt:
        _, boots[n_gt] = run_bootstrap(args.boot_images, n_gt, args.dets, args.boot_b)
        print("bootstrap", n_gt, boots[n_gt], flush=True)
    load_after = os.getloadavg()

    ref = values.get("pycocotools", values["faster-coco-eval"])
    agree = {name: max(abs(v[k] - ref[k]) for k in AP_METRICS) for name, v in values.items()}
    ours_ap = rows["aegis"]["evaluate_images"] + rows["aegis"]["accumulate"]

    def total(name):  # evaluate + accumulate + summarize, excluding building the COCO objects
        r = rows[name]
        return r["evaluate"] + r["accumulate"] + r["summarize"]

    lines = [
        f"## Scoring (`benchmarks/bench_score.py`) — {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        "",
        f"Condition: {args.images:,} images × {args.gt} GT × {args.dets} detections = "
        f"{args.images * args.dets:,} detections, one class; bootstrap on {args.boot_images} images × "
        f"{args.dets} detections × ({', '.join(map(str, args.boot_gt))}) GT, B = {args.boot_b}.",
        "",
        "| step | wall s | CPU s | wall vs ours (AP) |",
        "|---|---:|---:|---:|",
        f"| ours: `evaluate_images` | {rows['aegis']['evaluate_images'].cell()} | |",
        f"| ours: `accumulate` | {rows['aegis']['accumulate'].cell()} | |",
        f"| **ours: AP total** | {ours_ap.cell()} | 1.0× |",
        f"| ours: thresholded matching + metrics (t = {THRESHOLD}) | {rows['aegis']['thresholded'].cell()} | |",
    ]
    for name in ("pycocotools", "faster-coco-eval"):
        if name in rows:
            r = rows[name]
            lines.append(f"| {name}: evaluate | {r['evaluate'].cell()} | |")
            lines.append(f"| {name}: accumulate + summarize | {(r['accumulate'] + r['summarize']).cell()} | |")
            lines.append(
                f"| **{name}: total** (building COCO objects + loadRes, {r['load']:.2f} s, excluded) | "
                f"{total(name).cell()} | **{total(name) / ours_ap:.1f}×** |"
            )
    for n_gt, boot in boots.items():
        lines += [
            f"| bootstrap {n_gt} GT/image: `resample_weights` (B = {args.boot_b}) | "
            f"{boot['resample_weights'].cell()} | |",
            f"| **bootstrap {n_gt} GT/image: `bootstrap_samples`** (6 CI metrics × {args.boot_b}) | "
            f"{boot['bootstrap_samples'].cell()} | |",
        ]
    lines += [
        "",
        "AP values (must agree; max |Δ| vs "
        + ("pycocotools" if "pycocotools" in values else "faster-coco-eval")
        + "):",
        "",
        "| engine | " + " | ".join(AP_METRICS) + " | max abs diff |",
        "|---|" + "---:|" * (len(AP_METRICS) + 1),
    ]
    for name, v in values.items():
        lines.append(f"| {name} | " + " | ".join(f"{v[k]:.6f}" for k in AP_METRICS) + f" | {agree[name]:.1e} |")
    lines += [""] + machine_lines(
        load_before,
        load_after,
        "— the machine was shared with other jobs, so absolute "
        "times are inflated and noisy; ratios from the same run are more meaningful.",
    )
    emit("\n".join(lines), args.write)
    return 0 if max(agree.values()) <= 1e-9 else 1


if __name__ == "__main__":
    raise SystemExit(main())
