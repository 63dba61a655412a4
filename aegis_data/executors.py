"""Where units of work run: in this process, a local pool, or a Dask cluster -- one map interface for all.

``map_units(fn, items, placement)`` applies a module-level function to every item and yields ``(item, result)``
as results arrive. ``Placement`` says where: ``scheduler`` None runs locally (in this process for one worker,
else a process pool, or a thread pool for I/O-bound work that releases the GIL); ``"local"`` starts a Dask
LocalCluster; an address joins a running Dask scheduler. The callers own the work: the split builder passes
``render_unit`` (one source image: read, corrupt, encode, write atomically, return hashes), verify passes a file
hasher. Nothing here knows what a unit is, so this module imports nothing of the toolkit above ``errors``.

On Dask, bytes never travel through the scheduler: workers read and write storage every worker sees under the
same path (``Placement.shared`` names a file each worker must read with the client's bytes; checked before
anything is submitted). Faults: a worker that dies mid-task is replaced by its nanny or the cluster manager and
the scheduler re-runs its tasks elsewhere (a task that kills ``distributed.scheduler.allowed-failures``
workers in a row is given up); a task that raises an ordinary exception (a flaky network filesystem) is re-run
``RETRIES`` times; a data error (``AegisError``: a corrupt source image) is not retried: it comes back as a value
and is raised in the client with the same one-line message as a local run.

Dask is an optional extra (``pip install -c constraints.txt -e '.[distributed]'``); nothing of it is imported
unless a scheduler is given.
"""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import os
import re
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

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
_UNSUPPORTED = {
    "inproc": "an in-process address, not reachable from this command",
    "tls": "TLS needs client certificates, which this command does not take; use a tcp:// address "
    "on a trusted network or an SSH tunnel",
    "ucx": "UCX needs ucx-py and a UCX cluster setup; use a tcp:// address",
    "ws": "websocket transport is not supported; use a tcp:// address",
    "wss": "websocket transport is not supported; use a tcp:// address",
}


def _import_distributed():
    from aegis_data.extras import require

    return require("distributed", "`scheduler`")


def check_scheduler(scheduler: str, workers: int | None) -> None:
    """Validate ``scheduler`` and ``workers`` before any work starts (AegisError, one line)."""
    scheme = scheduler.split("://", 1)[0] if "://" in scheduler else ""
    if scheme in _UNSUPPORTED:
        raise AegisError(f"`scheduler` {scheduler!r}: {_UNSUPPORTED[scheme]}", param="scheduler")
    if scheduler != LOCAL and not _ADDRESS.match(scheduler):
        raise AegisError(
            f"`scheduler` {scheduler!r}: expected 'local' or a Dask scheduler address like tcp://host:8786",
            param="scheduler",
        )
    if scheduler != LOCAL and workers is not None:
        raise AegisError(
            f"`workers` applies to `scheduler` local only; the cluster at {scheduler} has its own workers",
            param="workers",
        )
    if workers is not None and int(workers) < 1:
        raise AegisError(f"`workers` must be at least 1, got {workers}", param="workers")


def check_timeout(timeout: Any) -> float:
    """``timeout`` in seconds: a finite number in (0, 3600]; None means ``CONNECT_TIMEOUT_S``."""
    if timeout is None:
        return float(CONNECT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < float(timeout) <= 3600:
        raise AegisError(f"`timeout` must be a number of seconds in (0, 3600], got {timeout!r}", param="timeout")
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
        cluster = distributed.LocalCluster(
            n_workers=int(workers or default_workers()),
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
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
        raise AegisError(
            f"cannot reach the Dask scheduler at {scheduler} within {seconds:g} s ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else 'no answer'}); is it running? (`timeout` "
            f"sets the wait)",
            param="timeout",
        ) from None
    with client:
        yield client


def describe(client: Any) -> dict:
    """{"address", "workers", "threads", "dashboard"} of a connected client (dashboard None when it has none)."""
    info = client.scheduler_info()
    ws = info.get("workers", {})
    has_dashboard = "dashboard" in (info.get("services") or {})
    return {
        "address": info.get("address", ""),
        "workers": len(ws),
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
        for item in islice(todo, max(0, int(window["size"]) - len(live))):
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
            raise AegisError(
                f"no Dask worker joined the scheduler at {client.scheduler.address} within "
                f"{WORKER_WAIT_S} s; start workers (or scale the cluster) and re-run"
            ) from None
    want = _digest(str(path))
    seen = client.run(_digest, str(path))
    blind = sorted(w for w, d in seen.items() if d != want)
    if blind:
        raise AegisError(
            f"{len(blind)} of {len(seen)} Dask worker(s) (e.g. {blind[0]}) do not see {path} as this machine does; "
            f"{what} must be on storage every worker mounts at the same path (see docs/SCALING.md)"
        )


# ----------------------------------------------------------------------------------------------------------
# The map interface


@dataclass(frozen=True)
class Placement:
    """Where ``map_units`` runs its units.

    workers: local processes (or threads), or the processes of ``scheduler="local"`` (default: all cores).
    scheduler: None (local), ``"local"`` (a Dask LocalCluster) or a Dask scheduler address.
    timeout: seconds a scheduler address has to answer (default ``CONNECT_TIMEOUT_S``).
    on_cluster: called once with ``describe(client)`` when a cluster is used.
    shared: ``(path, what)``: a file every Dask worker must read with this machine's bytes (``what`` names it
        in the message when one does not).
    threads: a local thread pool instead of processes (for work that releases the GIL: hashing, decoding).
    """

    workers: int | None = None
    scheduler: str | None = None
    timeout: float | None = None
    on_cluster: Callable[[dict], None] | None = None
    shared: tuple[Path, str] | None = None
    threads: bool = False


def map_units(
    fn: Callable[[Any], Any],
    items: Iterable[Any],
    placement: Placement = Placement(),
    *,
    name: Callable[[Any], str] | None = None,
    chunked: bool = False,
) -> Iterator[tuple[Any, Any]]:
    """``(item, fn(item))`` for every item, in completion order (thread pools: in item order).

    fn: a module-level function (or a ``functools.partial`` of one), so processes and Dask workers can import it.
    name(item): a readable part of the Dask task key (the dashboard shows it). chunked: on Dask, send items in
    chunks sized to the cluster (one task per tiny item would cost more to schedule than to run).
    An exception of a local unit propagates (a dead pool process: ``BrokenProcessPool``); on Dask an
    ``AegisError`` of a unit is raised here with its message.
    """
    if placement.scheduler is None:
        yield from _map_local(fn, list(items), placement)
        return
    workers = placement.workers if placement.scheduler == LOCAL else None
    with connect(placement.scheduler, workers, placement.timeout) as client:
        if placement.on_cluster is not None:
            placement.on_cluster(describe(client))
        if placement.shared is not None:
            require_shared_file(client, *placement.shared)
        yield from _map_dask(client, fn, list(items), name, chunked)


def default_workers() -> int:
    """The cores this process may run on."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def _map_local(fn: Callable[[Any], Any], items: list, placement: Placement) -> Iterator[tuple[Any, Any]]:
    workers = max(1, min(int(placement.workers or default_workers()), max(1, len(items))))
    if placement.threads:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            yield from zip(items, pool.map(fn, items))
        return
    if workers == 1:
        for item in items:
            yield item, fn(item)
        return
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=_pool_context(), initializer=_worker_init, initargs=(os.getpid(),)
    ) as pool:
        pending = {pool.submit(fn, item): item for item in items}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                item = pending.pop(f)
                exc = f.exception()
                if exc is not None:
                    for p in pending:
                        p.cancel()
                    raise exc
                yield item, f.result()


def _pool_context():
    # Never fork a process that may hold threads (OpenCV, rich); forkserver is cheaper than spawn where it exists.
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_WATCH_INTERVAL_S = 0.5


def _worker_init(parent_pid: int) -> None:
    """First thing in every pool process: die with the parent, also when it is killed with SIGKILL.

    Two guards, because a worker's direct parent may be the forkserver rather than the calling process: on
    Linux the kernel sends SIGKILL when the direct parent exits (``PR_SET_PDEATHSIG``; the forkserver exits
    when the calling process goes away), and on every platform a daemon thread polls that the calling process
    still exists and that this process was not re-parented.
    """
    import signal
    import threading

    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    first_ppid = os.getppid()
    threading.Thread(
        target=_watch_parent, args=(parent_pid, first_ppid), daemon=True, name="aegis-parent-watch"
    ).start()


def _parent_gone(parent_pid: int, first_ppid: int) -> bool:
    if os.getppid() != first_ppid:  # re-parented: our direct parent exited
        return True
    try:
        os.kill(parent_pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # the id now belongs to another user's process
        return True
    return False


def _watch_parent(parent_pid: int, first_ppid: int) -> None:
    while not _parent_gone(parent_pid, first_ppid):
        time.sleep(_WATCH_INTERVAL_S)
    os._exit(1)


def _call(fn: Callable[[Any], Any], item: Any) -> tuple[str, Any]:
    """Run one unit on a worker; a data error comes back as ``("error", message)`` so Dask does not retry it."""
    try:
        return "ok", fn(item)
    except AegisError as exc:
        return "error", str(exc)


def _call_chunk(fn: Callable[[Any], Any], chunk: Sequence[Any]) -> list[tuple[str, Any]]:
    return [_call(fn, item) for item in chunk]


def _map_dask(
    client: Any, fn: Callable[[Any], Any], items: list, name: Callable[[Any], str] | None, chunked: bool
) -> Iterator[tuple[Any, Any]]:
    distributed = _import_distributed()
    token = uuid.uuid4().hex[:12]
    if chunked:
        size = max(16, min(512, len(items) // (TASKS_PER_THREAD * _threads(client)) or 1))
        groups = [items[i : i + size] for i in range(0, len(items), size)]
    else:
        groups = [[item] for item in items]

    def submit(i: int) -> Any:
        label = name(groups[i][0]) if name is not None and not chunked else f"chunk-{i}"
        return client.submit(_call_chunk, fn, groups[i], key=f"aegis-{label}-{token}", retries=RETRIES)

    try:
        for i, outcomes in _bounded(client, submit, range(len(groups))):
            for item, (status, value) in zip(groups[i], outcomes):
                if status == "error":
                    raise AegisError(value)
                yield item, value
    except distributed.KilledWorker as exc:
        raise AegisError(
            f"Dask workers died again and again running {getattr(exc, 'task', 'a task')} (out of memory?); the "
            f"work finished so far is kept: give the workers more memory and re-run the same command to resume"
        ) from None
