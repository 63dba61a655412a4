"""Building and verifying on a Dask cluster (``--scheduler local`` or ``--scheduler tcp://host:8786``).

The split builder's unit of work is one source image (``splits.UnitTask`` -> ``splits.render_unit``): a pure
function of (record, suite, config, seed) that writes its files atomically under the output root and returns
only their hashes. Here those tasks go to Dask workers instead of a local process pool; the client (the
``aegis`` process) still journals each result and assembles the manifest, so the manifest is the same bytes as
a local build's. Image bytes never travel through the scheduler: workers read sources and write files on
storage every worker sees under the same path (a shared filesystem); checked before anything is submitted.

Faults: a worker that dies mid-task (killed, out of memory, node lost) is replaced by its nanny or the cluster
manager, and the scheduler re-runs its tasks elsewhere (a task that kills ``distributed.scheduler.allowed-failures``
workers in a row is given up). A task that raises an ordinary exception (a flaky network filesystem) is re-run
``retries`` times. A data error (``AegisError``: a corrupt source image) is not retried: it comes back as a
value and ends the build with the same one-line message as a local build.

Dask is an optional extra (``pip install aegisbench[distributed]``); nothing here is imported unless a
``--scheduler`` is given.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
import uuid
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from aegis_data.errors import AegisError

LOCAL = "local"
RETRIES = 2  # re-runs of a task that raised something other than a data error
TASKS_PER_THREAD = 4  # tasks kept in flight per worker thread: enough to hide scheduling latency, bounded memory
CONNECT_TIMEOUT_S = 10  # a scheduler that answers at all answers within a second; a wrong address fails sooner
WORKER_WAIT_S = 600  # a scheduler whose workers are still queued (SLURM jobs pending) is given this long
WINDOW_REFRESH_S = 2.0
_ADDRESS = re.compile(r"^(tcp://)?[A-Za-z0-9_.\-\[\]:]+:\d+$")
# Schemes Dask knows that this CLI cannot use: inproc lives inside one process, tls needs certificates the CLI
# does not take, ucx and ws need extra packages and setup.
_UNSUPPORTED = {"inproc": "an in-process address, not reachable from this command",
                "tls": "TLS needs client certificates, which this command does not take; use a tcp:// address "
                       "on a trusted network or an SSH tunnel",
                "ucx": "UCX needs ucx-py and a UCX cluster setup; use a tcp:// address",
                "ws": "websocket transport is not supported; use a tcp:// address",
                "wss": "websocket transport is not supported; use a tcp:// address"}


def _import_distributed():
    from aegis_data.extras import require

    return require("distributed", "--scheduler")


def check_scheduler(scheduler: str, workers: int | None) -> None:
    """Validate ``--scheduler`` and ``--workers`` before any work starts (AegisError, one line)."""
    scheme = scheduler.split("://", 1)[0] if "://" in scheduler else ""
    if scheme in _UNSUPPORTED:
        raise AegisError(f"--scheduler {scheduler!r}: {_UNSUPPORTED[scheme]}")
    if scheduler != LOCAL and not _ADDRESS.match(scheduler):
        raise AegisError(
            f"--scheduler {scheduler!r}: expected 'local' or a Dask scheduler address like tcp://host:8786")
    if scheduler != LOCAL and workers is not None:
        raise AegisError(f"--workers applies to --scheduler local only; the cluster at {scheduler} has its own workers")
    if workers is not None and int(workers) < 1:
        raise AegisError(f"--workers must be at least 1, got {workers}")


def check_timeout(timeout: Any) -> float:
    """``--timeout`` in seconds: a finite number in (0, 3600]; None means ``CONNECT_TIMEOUT_S``."""
    if timeout is None:
        return float(CONNECT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < float(timeout) <= 3600:
        raise AegisError(f"--timeout must be a number of seconds in (0, 3600], got {timeout!r}")
    return float(timeout)


@contextmanager
def connect(scheduler: str, workers: int | None = None, timeout: float | None = None) -> Iterator[Any]:
    """A ``distributed.Client`` for ``scheduler``: ``local`` starts (and afterwards stops) a LocalCluster of
    ``workers`` single-threaded processes on loopback; anything else is the address of a running scheduler,
    which must answer within ``timeout`` seconds (default ``CONNECT_TIMEOUT_S``)."""
    check_scheduler(scheduler, workers)
    seconds = check_timeout(timeout)
    distributed = _import_distributed()
    if scheduler == LOCAL:
        from aegis_data.splits import default_workers

        cluster = distributed.LocalCluster(
            n_workers=int(workers or default_workers()), threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address="127.0.0.1:0",  # a free port; pages need bokeh
            silence_logs=logging.ERROR,
        )
        try:
            with distributed.Client(cluster) as client:
                yield client
        finally:
            cluster.close()
        return
    try:
        client = distributed.Client(scheduler, timeout=seconds)
    except (OSError, TimeoutError, ValueError) as exc:  # ValueError: an address Dask cannot parse
        raise AegisError(f"cannot reach the Dask scheduler at {scheduler} within {seconds:g} s ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else 'no answer'}); is it running? (--timeout "
                         f"sets the wait)") from None
    with client:
        yield client


def describe(client: Any) -> dict:
    """{"address", "workers", "threads", "dashboard"} of a connected client (dashboard None when it has none)."""
    info = client.scheduler_info()
    ws = info.get("workers", {})
    has_dashboard = "dashboard" in (info.get("services") or {})
    return {
        "address": info.get("address", ""), "workers": len(ws),
        "threads": sum(int(w.get("nthreads", 1)) for w in ws.values()),
        "dashboard": client.dashboard_link if has_dashboard else None,
    }


def _threads(client: Any) -> int:
    return max(1, sum(client.nthreads().values()))


def _bounded(client: Any, submit: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
    """Yield (item, result) as the future ``submit(item)`` of each item completes, in completion order.

    ``TASKS_PER_THREAD`` tasks per worker thread are in flight, re-counted every few seconds (workers that join
    a running cluster get work; the client's memory stays flat however many items there are); each result is
    released on the cluster once received, and whatever is still in flight is cancelled when the caller stops.
    """
    distributed = _import_distributed()
    todo = iter(items)
    pending = distributed.as_completed()
    live: dict = {}
    window = {"size": TASKS_PER_THREAD * _threads(client), "at": time.monotonic()}

    def top_up() -> None:
        if time.monotonic() - window["at"] > WINDOW_REFRESH_S:
            window.update(size=TASKS_PER_THREAD * _threads(client), at=time.monotonic())
        for item in islice(todo, max(0, window["size"] - len(live))):
            f = submit(item)
            live[f] = item
            pending.add(f)

    top_up()
    try:
        for f in pending:
            item = live.pop(f)
            try:
                value = f.result()
            finally:
                f.release()
            top_up()
            yield item, value
    finally:
        if live:
            client.cancel(list(live))


# ----------------------------------------------------------------------------------------------------------
# Shared storage


def _digest(path: str) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def require_shared_file(client: Any, path: Path, what: str) -> None:
    """Every worker must read ``path`` with the bytes the client sees (same mount, same path)."""
    if not client.nthreads():
        try:
            client.wait_for_workers(1, timeout=WORKER_WAIT_S)
        except TimeoutError:
            raise AegisError(f"no Dask worker joined the scheduler at {client.scheduler.address} within "
                             f"{WORKER_WAIT_S} s; start workers (or scale the cluster) and re-run") from None
    want = _digest(str(path))
    seen = client.run(_digest, str(path))
    blind = sorted(w for w, d in seen.items() if d != want)
    if blind:
        raise AegisError(
            f"{len(blind)} of {len(seen)} Dask worker(s) (e.g. {blind[0]}) do not see {path} as this machine does; "
            f"{what} must be on storage every worker mounts at the same path (see docs/SCALING.md)"
        )


# ----------------------------------------------------------------------------------------------------------
# Build: one task per source image


def _render_on_worker(task: Any) -> tuple[str, Any]:
    """Run one unit; a data error comes back as ``("error", message)`` so Dask does not retry it."""
    from aegis_data.splits import render_unit

    try:
        return "ok", render_unit(task)
    except AegisError as exc:
        return "error", str(exc)


def _task_key(task: Any, token: str) -> str:
    return f"aegis-render-{task.unit.split}-{task.unit.record.image_id}-{token}"


def run_units(client: Any, tasks: Iterable[Any], *, retries: int = RETRIES) -> Iterator[Any]:
    """Yield each UnitTask's UnitResult as it completes, in completion order (see ``_bounded``)."""
    distributed = _import_distributed()
    token = uuid.uuid4().hex[:12]

    def submit(t: Any) -> Any:
        return client.submit(_render_on_worker, t, key=_task_key(t, token), retries=retries)

    try:
        for _, (status, value) in _bounded(client, submit, tasks):
            if status == "error":
                raise AegisError(value)
            yield value
    except distributed.KilledWorker as exc:
        raise AegisError(
            f"Dask workers died again and again running {getattr(exc, 'task', 'a task')} (out of memory?); the "
            f"images finished so far are kept: give the workers more memory and re-run the same command to resume"
        ) from None


# ----------------------------------------------------------------------------------------------------------
# Verify: file hashes (and, where the bytes differ, pixel hashes) in chunks


def hash_files(client: Any, root: Path, items: Sequence[tuple[str, str, bool]], max_pixels: int,
               *, retries: int = RETRIES) -> dict[str, tuple[str, str | None]]:
    """``verify.hash_items`` over ``items`` on the cluster, in chunks (one task per file would cost more to schedule
    than to hash); relative path -> (file SHA-256, pixel SHA-256 or None)."""
    from aegis_data.verify import hash_items

    require_shared_file(client, root / "manifest.json", "the split directory")
    size = max(16, min(512, len(items) // (TASKS_PER_THREAD * _threads(client)) or 1))
    chunks = [items[i:i + size] for i in range(0, len(items), size)]
    token = uuid.uuid4().hex[:12]

    def submit(i: int) -> Any:
        return client.submit(hash_items, str(root), chunks[i], int(max_pixels), key=f"aegis-hash-{i}-{token}",
                             retries=retries)

    result: dict[str, tuple[str, str | None]] = {}
    for i, hashes in _bounded(client, submit, range(len(chunks))):
        result.update(zip((rel for rel, _, _ in chunks[i]), hashes))
    return result
