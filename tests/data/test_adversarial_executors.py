"""Adversarial repros against the executors (aegis_data/executors.py): workers die with their parent,
unsupported or badly timed-out schedulers are one line, a relative split path reaches cluster workers resolved.
Shared inputs: tests/adversarial.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import REPO_ROOT
from tests.adversarial import (
    invoke,
    yolo_split,  # noqa: F401 (fixtures)
)
from tests.conftest import assert_one_line_error


# --- 7. workers die with their parent -----------------------------------------------------------------------
def _proc_stat(pid: int) -> tuple[int, str, int] | None:
    """(ppid, state, start time) of a live process from /proc, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), fields[0], int(fields[19])


def _descendants(pid: int) -> dict[int, int]:
    """pid -> start time of every live descendant of ``pid``."""
    children: dict[int, list[int]] = {}
    starts = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and (st := _proc_stat(int(d.name))) is not None:
            children.setdefault(st[0], []).append(int(d.name))
            starts[int(d.name)] = st[2]
    out, todo = {}, [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out[c] = starts[c]
            todo.append(c)
    return out


def _alive(pid: int, start: int) -> bool:
    st = _proc_stat(pid)
    return st is not None and st[2] == start and st[1] != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="needs Linux /proc to follow worker processes")
def test_workers_die_when_only_the_parent_is_killed(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    code = (
        "from aegis_data.sources.records import Record\n"
        "from aegis_data.split.build import build_splits\n"
        "from tests.data.split.test_splits_doubles import *\n"
        "ds = FakeDataset('fake', {'n': 40}, {'test': [Record(f'i{k:02d}', f'fake:{k}', 64, 48) for k in range(40)]})\n"
        f"build_splits(ds, {str(tmp_path / 'out')!r}, corruptions=FEW, workers=2, read_image=fake_read,\n"
        "             corrupt=slow_corrupt, audit=no_leak, person_px=30)\n"  # the default suite needs a unit
    )
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.Popen([sys.executable, "-c", code], env=env)
    procs: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            procs = _descendants(proc.pid)  # resource tracker, forkserver, 2 workers
            if len(procs) >= 4 and (tmp_path / "out" / ".aegis-build" / "journal.jsonl").is_file():
                break
            time.sleep(0.05)
        assert proc.poll() is None and len(procs) >= 4, "the build ended before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)  # the parent only, not its process group
        proc.wait(timeout=10)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(_alive(p, t) for p, t in procs.items()):
            time.sleep(0.1)
        alive = [p for p, t in procs.items() if _alive(p, t)]
        assert not alive, f"{len(alive)} process(es) of the build still alive after its parent was killed"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        for p, t in procs.items():  # never leave a stray process behind, even when the assertion failed
            if _alive(p, t):
                os.kill(p, signal.SIGKILL)


# --- 10. schedulers, score JSONs and RefCOCO conversions are one line -------------------------------------
@pytest.mark.parametrize(
    "address,fragment",
    [
        ("inproc://x", "in-process"),
        ("ucx://127.0.0.1:1", "UCX"),
        ("tls://127.0.0.1:1", "TLS needs client certificates"),
    ],
)
def test_unsupported_scheduler_schemes_are_one_line(tmp_path, yolo_split, address, fragment):
    src, out, _ = yolo_split
    r = invoke(
        "build-splits",
        "--source",
        src,
        "--out-dir",
        tmp_path / "o",
        "--dataset",
        "yolo",
        "--corruptions",
        "low_light",
        "--severities",
        "1",
        "--scheduler",
        address,
    )
    assert_one_line_error(r, fragment)
    assert_one_line_error(invoke("verify", out, "--scheduler", address), fragment)


def test_a_relative_split_path_reaches_cluster_workers_resolved(yolo_split, monkeypatch):
    import aegis_data.split.verify as verify_mod

    src, out, _ = yolo_split
    seen = []
    monkeypatch.chdir(out.parent)
    real = verify_mod.hash_files
    monkeypatch.setattr(verify_mod, "hash_files", lambda root, items, **kw: (seen.append(root), real(root, items))[1])
    report = verify_mod.verify_split(Path(out.name), scheduler="tcp://127.0.0.1:8786")
    assert report.ok and seen == [out.resolve()]


@pytest.mark.parametrize("value", ["0", "-3", "nan", "1e9"])
def test_a_bad_scheduler_timeout_is_one_line_before_any_connection(tmp_path, value):
    r = invoke(
        "build-splits", "--out-dir", tmp_path / "o", "--n", "2", "--scheduler", "tcp://127.0.0.1:9", "--timeout", value
    )
    assert_one_line_error(r, "--timeout must be a number of seconds")
    assert not (tmp_path / "o").exists()
