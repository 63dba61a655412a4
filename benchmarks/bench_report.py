"""Report and gallery benchmark.

Times, in one run:
  (a) ``build_report`` (all figures + md/html/latex) for one dataset with 1, 3 and 6 models, each a full
      28-condition sweep (copies of ``tests/fixtures/score_heridal_yolo11n.json`` with new labels);
  (b) each figure function alone for the 3-model case;
  (c) one gallery picture of a 4000x3000 frame (HERIDAL size) with 40 GT and 60 predictions: drawing both
      panels + composing (``draw_panel``/``compose_pair``), then PNG encoding, then PNG decoding of one
      4000x3000 source frame (what ``build_gallery`` reads twice per pair).

Usage: ``python benchmarks/bench_report.py [--repeat 3] [--write docs/perf/report.md]``. Timings are the
median wall-clock seconds (``time.perf_counter``) of ``--repeat`` runs; run it on a quiet machine. ``--write``
keeps the section's hand-written notes (below the notes marker) and re-assembles docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import cv2
import matplotlib
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from aegis_data.files.imageio import decode_image_bytes, write_bytes_atomic  # noqa: E402
from aegis_data.files.png import encode_png  # noqa: E402
from aegis_eval.protocols.score_doc import validate_result  # noqa: E402
from aegis_eval.report import build_report  # noqa: E402
from aegis_eval.report import figures as F  # noqa: E402
from aegis_eval.report.gallery import compose_pair, draw_panel, panel_scale  # noqa: E402
from aegis_eval.report.results import group_by_dataset  # noqa: E402

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "score_heridal_yolo11n.json"
NOTES_MARKER = "<!-- notes: kept across re-runs -->"


def _median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _results(n_models: int) -> list[dict]:
    base = validate_result(json.loads(FIXTURE.read_text()), str(FIXTURE))
    return [{**base, "label": f"model_{k}"} for k in range(n_models)]


def _frame(w: int, h: int) -> np.ndarray:
    """A textured frame without RNG (sinusoids), so PNG sizes resemble a real aerial frame more than a flat one."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    t = np.sin(x / 13.0) * np.cos(y / 17.0) + 0.5 * np.sin((x + 3 * y) / 5.0)
    base = ((t - t.min()) / (t.max() - t.min()) * 180 + 40).astype(np.uint8)
    return np.stack([base, np.roll(base, 7, axis=1), np.roll(base, 11, axis=0)], axis=2)


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} cores"
    except OSError:
        pass
    return f"{platform.processor() or 'unknown CPU'}, {os.cpu_count()} cores"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write", type=Path, default=None, help="write the Markdown results section to this file")
    args = ap.parse_args()

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for m in (1, 3, 6):
            res = _results(m)
            secs = _median_time(lambda: build_report(res, Path(tmp) / f"m{m}"), args.repeat)
            rows.append((f"build_report, 1 dataset x {m} model(s), 28 conditions, md+html+latex", secs))
    (group,) = group_by_dataset(_results(3))
    # The row names keep the old helper names, so docs/perf/report.md stays comparable.
    for name, plan in (
        ("heatmap_png (3 models)", lambda: F.heatmap(group, "recall")),
        ("severity_curves_png (3 models)", lambda: F.severity_curves(group, "recall")),
        ("family_bars_png (3 models)", lambda: F.family_bars(group, "recall")),
        ("localization_png (3 models)", lambda: F.localization_plot(group)),
    ):
        rows.append((name, _median_time(lambda: F.render(plan(), vector=False).png, args.repeat)))

    w, h = 4000, 3000
    frame = _frame(w, h)
    gt = np.array([[60 + 95 * k, 100 + 70 * k, 40, 60] for k in range(40)], dtype=float)
    found = np.arange(40) % 3 != 0
    pred = np.vstack(
        [gt[found] + 2, np.array([[3000 - 40 * k, 200 + 30 * k, 35, 55] for k in range(60 - int(found.sum()))])]
    )
    s = panel_scale(w)

    def draw() -> np.ndarray:
        a = draw_panel(frame, s, gt, found, pred)
        b = draw_panel(frame, s, gt, ~found, pred[:10])
        return compose_pair(a, b, ["#1 clean  recall 27/40", "frame.png"], ["low_light_s3  recall 13/40", "drop"])

    pic = draw()
    rows.append(("gallery: draw + compose one 4000x3000 pair", _median_time(draw, args.repeat)))
    rows.append(
        (
            f"gallery: encode the {pic.shape[1]}x{pic.shape[0]} picture (PNG)",
            _median_time(lambda: encode_png(pic), args.repeat),
        )
    )
    src = encode_png(frame)
    rows.append(
        ("gallery: decode one 4000x3000 source PNG", _median_time(lambda: decode_image_bytes(src), args.repeat))
    )

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "## Report and gallery (`benchmarks/bench_report.py`)",
        "",
        f"Median of {args.repeat} runs, wall-clock seconds. Machine: {platform.machine()}, {_cpu()}, "
        f"load average {os.getloadavg()[0]:.1f} at the end, Python {platform.python_version()}, "
        f"numpy {np.__version__}, "
        f"matplotlib {matplotlib.__version__}, OpenCV {cv2.__version__}. Date: {now}.",
        "",
        "| operation | seconds |",
        "| :--- | ---: |",
    ] + [f"| {name} | {secs:.3f} |" for name, secs in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        from perfdoc import assemble

        # Hand-written analysis below the marker survives a re-run.
        previous = args.write.read_text(encoding="utf-8") if args.write.exists() else ""
        if NOTES_MARKER in previous:
            text += "\n" + NOTES_MARKER + previous.split(NOTES_MARKER, 1)[1]
        write_bytes_atomic(args.write, text.encode("utf-8"))
        assemble()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
