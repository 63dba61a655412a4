"""Issue 31 item 8: a build piped to a log prints plain progress lines (not one cut bar frame), and a build
projected to run for more than a minute says so once its first wave of images is done (cli/progress.py)."""

from __future__ import annotations

import io
from dataclasses import dataclass

from rich.console import Console

from aegis_cli.progress import BuildProgressView, clock_text, duration_text
from tests.adversarial import invoke, yolo_source


@dataclass
class Report:
    done: int
    total: int
    megapixels: float = 0.0
    files_written: int = 0
    files_skipped: int = 0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _view(workers: int = 1, terminal: bool = False, every: int | None = None):
    sink = io.StringIO()
    console = Console(file=sink, width=60, force_terminal=terminal, markup=False)
    clock = Clock()
    view = BuildProgressView("building out", console, None, workers, every, terminal, clock)
    return view, clock, sink


def test_plain_lines_every_n_items_and_after_the_last_never_cut():
    view, clock, sink = _view(every=3)
    for done in range(1, 8):
        clock.now += 1.0
        view(Report(done, 7, megapixels=2.0 * done))
    lines = sink.getvalue().splitlines()
    assert [ln.split(":")[1].split()[0] for ln in lines] == ["3/7", "6/7", "7/7"]
    assert lines[-1] == "building out: 7/7 source images (100%)  1.00 img/s  2.0 MP/s  elapsed 0:07  ETA 0:00"
    assert all(len(ln) > 60 for ln in lines)  # soft-wrapped: longer than the console, not cut to it
    assert "━" not in sink.getvalue()


def test_the_default_step_is_five_percent():
    view, clock, sink = _view()
    for done in range(1, 201):
        clock.now += 0.1
        view(Report(done, 200))
    assert len(sink.getvalue().splitlines()) == 20


def test_a_long_build_prints_its_estimate_after_the_first_wave():
    view, clock, sink = _view(workers=4)
    for done in range(1, 5):  # the first wave: 4 workers, 40 s
        clock.now += 10.0
        view(Report(done, 400))
    estimate = [ln for ln in sink.getvalue().splitlines() if ln.startswith("estimate:")]
    # 4 images in 40 s -> 400 images in 4000 s = 67 min; printed once.
    assert estimate == [
        "estimate: the build takes about 67 min for 400 source images (66 min left; measured on the first 4 "
        "with 4 worker(s) in 0:40)"
    ]
    clock.now += 10.0
    view(Report(5, 400))
    assert sum(ln.startswith("estimate:") for ln in sink.getvalue().splitlines()) == 1


def test_a_short_build_prints_no_estimate_and_a_terminal_gets_the_bar():
    view, clock, sink = _view(workers=2)
    for done in range(1, 11):
        clock.now += 0.5
        view(Report(done, 10))
    assert "estimate:" not in sink.getvalue()
    view, clock, sink = _view(terminal=True)
    for done in range(1, 3):
        clock.now += 40.0
        view(Report(done, 3))
    view.stop()
    text = sink.getvalue()
    assert "estimate: the build takes about 2 min" in text and "━" in text and "(67%)" not in text  # bar, no lines


def test_durations_read_well():
    assert [clock_text(s) for s in (47, 725, 10930)] == ["0:47", "12:05", "3:02:10"]
    assert [duration_text(s) for s in (40, 720, 9000)] == ["40 s", "12 min", "2.5 h"]


def test_build_splits_in_a_log_prints_plain_lines(tmp_path):
    src = yolo_source(tmp_path / "src", n=4)
    r = invoke(
        "build-splits", "--dataset", "yolo", "--source", src, "--out-dir", tmp_path / "out",
        "--corruptions", "low_light", "--severities", "1", "--workers", "1",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    # On stdout with the summary: stderr holds nothing but an error (tests/conftest.py, assert_one_line_error).
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("building ")]
    assert [ln.split(": ")[1].split()[0] for ln in lines] == ["1/4", "2/4", "3/4", "4/4"]
    assert r.stderr == ""  # no bar frame


def test_the_estimate_waits_for_the_workers_the_build_runs(tmp_path, monkeypatch):
    """Without --workers the first wave is as many images as the build runs at once: the cores this process may use
    (the library's default), not every core of the machine (os.cpu_count ignores CPU affinity: a container or a
    batch job limited to one core would wait for a 64-image "wave" before its estimate)."""
    import os

    from aegis_cli import splits

    seen = []

    class Recording(BuildProgressView):
        def __init__(self, *args, **kwargs):
            seen.append(kwargs["workers"])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(splits, "BuildProgressView", Recording)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    src = yolo_source(tmp_path / "src", n=2)
    r = invoke(
        "build-splits", "--dataset", "yolo", "--source", src, "--out-dir", tmp_path / "out",
        "--corruptions", "low_light", "--severities", "1",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert seen == [1]
