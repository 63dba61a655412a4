"""PNG writer speed and size on realistic frames: best of N encodes, one thread, CPU seconds.

Frames: a synthetic scene (``render_scene``) at 640x640 (SARD-size) and 4000x3000 (HERIDAL-size), clean and under
three corruptions of the suite, as a split build encodes them. Per frame: ``png._encode`` (filter, deflate, CRC,
chunks; the self-test is not timed) through the compiled deflate and through the NumPy fallback, and, when the
``zlib-ng`` package is installed (no longer a dependency), aegis-png/1 -- the same layout deflated by zlib-ng's
Huffman-only mode, the writer this one replaced -- for the speed-up and the size ratio.

    python benchmarks/bench_png.py [--repeat 5] [--numpy-repeat 2] [--sizes 640x640,4000x3000]
        [--write docs/perf/png.md]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import datetime  # noqa: E402
import platform  # noqa: E402
import struct  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import cv2  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aegis_data.api import apply_corruption  # noqa: E402
from aegis_data.files import png  # noqa: E402
from aegis_data.sources.synthetic import render_scene  # noqa: E402

cv2.setNumThreads(1)
CONDITIONS = (None, ("smoke_haze", 2), ("rain_streaks", 3), ("motion_blur", 2))


def frames(w: int, h: int):
    src = render_scene(3, w, h).rgb
    for cond in CONDITIONS:
        img = src if cond is None else apply_corruption(src, cond[0], cond[1], "bench", seed=20260707)
        yield ("clean" if cond is None else f"{cond[0]}_s{cond[1]}"), img


def best(fns, repeat: int) -> list[float]:
    """Best CPU time of each function over ``repeat`` rounds, the functions taking turns within a round (so a
    busy machine slows them alike)."""
    times = [[] for _ in fns]
    for _ in range(repeat):
        for fn, t in zip(fns, times):
            t0 = time.process_time()
            fn()
            t.append(time.process_time() - t0)
    return [min(t) for t in times]


def writer_v1():
    """aegis-png/1 (zlib-ng Huffman-only, level 1, wbits 15, memLevel 8), or None without the zlib-ng package."""
    try:
        from zlib_ng import zlib_ng
    except ImportError:
        return None

    def chunk(kind, payload):
        crc = zlib_ng.crc32(payload, zlib_ng.crc32(kind))
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", crc)

    def encode(rgb):
        h, w, _ = rgb.shape
        comp = zlib_ng.compressobj(1, zlib_ng.DEFLATED, 15, 8, zlib_ng.Z_HUFFMAN_ONLY)
        stream = comp.compress(png.sub_filtered_rows(rgb)) + comp.flush(zlib_ng.Z_FINISH)
        ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
        return b"".join([png.PNG_SIGNATURE, chunk(b"IHDR", ihdr), chunk(b"IDAT", stream), chunk(b"IEND", b"")])

    return encode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="best of N for the compiled path and aegis-png/1")
    ap.add_argument("--numpy-repeat", type=int, default=2, help="best of N for the NumPy fallback (0: skip it)")
    ap.add_argument("--sizes", default="640x640,4000x3000")
    ap.add_argument("--write", type=Path, help="write the markdown section to this file and assemble PERFORMANCE.md")
    args = ap.parse_args()
    old = writer_v1()
    compiled = png.CPNG
    load = os.getloadavg()[0]
    lines = [
        "## PNG writer (`benchmarks/bench_png.py`)",
        "",
        f"Date {datetime.date.today().isoformat()}; {os.cpu_count()} cores "
        f"({platform.processor() or platform.machine()}), "
        f"Python {platform.python_version()}; {png.writer_info()['name']}/{png.writer_info()['version']}: "
        f"{png.writer_info()['deflate']}; one thread; CPU ms, best of {args.repeat} (NumPy fallback: best of "
        f"{args.numpy_repeat}); load average before the run {load:.1f}. aegis-png/1 is the writer this one "
        f"replaced (same layout, zlib-ng 2.3.3 Huffman-only), timed when the zlib-ng package is installed.",
        "",
        "| frame | condition | aegis-png/1 (zlib-ng) ms | compiled ms | speed-up | NumPy ms | size vs /1 |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for line in lines:
        print(line)
    for size in args.sizes.split(","):
        w, h = (int(v) for v in size.split("x"))
        for name, img in frames(w, h):
            cells = [size, name]
            png.CPNG = compiled
            data = png._encode(img)
            n_old = len(old(img)) if old is not None else None
            timed = ([lambda: old(img)] if old is not None else []) + ([lambda: png._encode(img)] if compiled else [])
            times = best(timed, args.repeat)
            t_old = times.pop(0) if old is not None else None
            t_new = times.pop(0) if compiled is not None else None
            cells.append(f"{t_old * 1e3:.1f}" if t_old else "-")
            cells.append(f"{t_new * 1e3:.1f}" if t_new else "-")
            cells.append(f"{t_old / t_new:.2f}x" if t_old and t_new else "-")
            png.CPNG = None
            assert png._encode(img) == data  # the fallback writes the same bytes
            t_np = best([lambda: png._encode(img)], args.numpy_repeat)[0] if args.numpy_repeat else None
            cells.append(f"{t_np * 1e3:.0f}" if t_np else "-")
            cells.append(f"{len(data) / n_old:.4f}" if n_old else f"{len(data)} B")
            lines.append("| " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    png.CPNG = compiled
    if args.write:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text("\n".join(lines) + "\n", encoding="utf-8")
        from perfdoc import assemble

        print(f"wrote {args.write}; assembled {assemble()}")


if __name__ == "__main__":
    main()
