"""Progress of a long command (``aegis build-splits``): a bar on a terminal, plain lines in a log, and an estimate.

On a terminal the bar redraws in place (on stderr). Piped to a file it cannot: a bar's one last frame, cut to the
console width, is all a log would hold. So when stderr is not a terminal, a plain line is printed every ``every``
items (default: every 5% of them) and after the last, on stdout with the build's summary: stderr keeps the
house rule that a failed command leaves exactly one line there, its error. Either way, once the first wave of
items is done (one per worker), the rate so far gives the whole build's time; when that exceeds a minute it is
printed as one ``estimate:`` line, so a long build says how long it will take before most of it runs
(docs/SPLITS.md).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

# A build projected to take longer than this gets its estimate line.
ESTIMATE_ABOVE_S = 60.0
# Plain lines per build when not on a terminal (one every 5% of the items).
PLAIN_LINES = 20


def clock_text(seconds: float) -> str:
    """``0:47``, ``12:05``, ``3:02:10``."""
    s = max(0, int(round(seconds)))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def duration_text(seconds: float) -> str:
    """A rounded duration for an estimate: ``40 s``, ``12 min``, ``2.5 h``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class BuildProgressView:
    """The progress callback of a build (``aegis_data.api.build_splits(progress=...)``), and its display.

    ``console``: where the bar goes; ``plain``: where the plain lines go (default ``console``); ``workers``: how
    many items run at once (the first wave the estimate waits for); ``every``: items between two plain lines
    (default ``ceil(total / PLAIN_LINES)``); ``terminal``: draw a bar (default: whether ``console`` is a
    terminal); ``clock``: seconds, for tests."""

    def __init__(
        self,
        description: str,
        console: Console,
        plain: Console | None = None,
        workers: int = 1,
        every: int | None = None,
        terminal: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.description = description
        self.console = console
        self.plain = plain or console
        self.workers = max(1, int(workers))
        self.every = every
        self.terminal = console.is_terminal if terminal is None else terminal
        self.lines = console if self.terminal else self.plain  # the estimate goes above the bar, or with the lines
        self.clock = clock
        self.started = clock()
        self.estimated = False
        self.printed_at = 0  # items done at the last plain line
        self.bar: Progress | None = None
        self.task: Any = None

    def __call__(self, p: Any) -> None:
        elapsed = self.clock() - self.started
        rate = f"{p.done / elapsed:.2f} img/s  {p.megapixels / elapsed:.1f} MP/s" if elapsed > 0 else ""
        if self.terminal:
            self._draw_bar(p, rate)
        self._maybe_estimate(p, elapsed)
        if not self.terminal:
            self._plain_line(p, elapsed, rate)

    def _draw_bar(self, p: Any, rate: str) -> None:
        if self.bar is None:  # started by the first report, so a refused build prints only its one error line
            self.bar = Progress(
                TextColumn("{task.description}", style="bold", markup=False),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}", markup=False),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=self.console,
                transient=False,
            )
            self.bar.start()
            self.task = self.bar.add_task(self.description, total=None, rate="")
        self.bar.update(self.task, completed=p.done, total=p.total, rate=rate)

    def _maybe_estimate(self, p: Any, elapsed: float) -> None:
        # The first wave (one item per worker) measures the rate with every worker busy and the start-up paid.
        if self.estimated or p.done < min(self.workers, p.total) or p.done <= 0 or elapsed <= 0:
            return
        self.estimated = True
        whole = elapsed / p.done * p.total
        if whole <= ESTIMATE_ABOVE_S:
            return
        self.lines.print(
            f"estimate: the build takes about {duration_text(whole)} for {p.total} source images "
            f"({duration_text(max(0.0, whole - elapsed))} left; measured on the first {p.done} "
            f"with {self.workers} worker(s) in {clock_text(elapsed)})",
            highlight=False,
            soft_wrap=True,
        )

    def _plain_line(self, p: Any, elapsed: float, rate: str) -> None:
        every = self.every or max(1, math.ceil(p.total / PLAIN_LINES))
        if p.done < p.total and p.done - self.printed_at < every:
            return
        self.printed_at = p.done
        share = f" ({100 * p.done / p.total:.0f}%)" if p.total else ""
        left = elapsed / p.done * (p.total - p.done) if p.done else 0.0
        self.plain.print(
            f"{self.description}: {p.done}/{p.total} source images{share}  {rate}  "
            f"elapsed {clock_text(elapsed)}  ETA {clock_text(left)}",
            highlight=False,
            soft_wrap=True,
        )

    def stop(self, failed: bool = False) -> None:
        """End the bar; a failed build ends in its one error line, without the bar's last frame."""
        if self.bar is not None:
            if failed:
                self.bar.live.transient = True
            self.bar.stop()
