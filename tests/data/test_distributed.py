"""Building and verifying on Dask (``--scheduler``): same manifest as a local build, faults, resume, verify.

Every test talks to a LocalCluster this module starts on loopback (two single-threaded worker processes) and
closes at the end; the CLI tests of ``--scheduler local`` start their own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests import REPO_ROOT

distributed = pytest.importorskip("distributed", reason="missing dependency: pip install 'aegisbench[distributed]'")

from typer.testing import CliRunner  # noqa: E402

from aegis_cli.main import app  # noqa: E402
from aegis_data.errors import AegisError  # noqa: E402
from aegis_data.files.imageio import write_png_atomic  # noqa: E402
from aegis_data.split.build import build_splits  # noqa: E402
from aegis_data.split.manifest import load_manifest  # noqa: E402
from aegis_data.split.verify import verify_split  # noqa: E402
from tests.conftest import assert_one_line_error  # noqa: E402
from tests.data.split.test_splits_doubles import (  # noqa: E402
    FakeDataset,
    build_kwargs,
    fake_dataset,
    fake_read,
    record,
)

ROOT = REPO_ROOT
REFERENCE = ROOT / "manifests" / "synthetic-c.json"


@pytest.fixture(scope="module")
def cluster():
    c = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
        silence_logs=50,
    )
    with distributed.Client(c) as client:
        client.wait_for_workers(2)
        yield c, client
    c.close()


@pytest.fixture
def address(cluster) -> str:
    c, client = cluster
    client.wait_for_workers(2, timeout=60)  # a worker killed by an earlier test is back
    return c.scheduler_address


def _manifest_bytes(out: Path) -> bytes:
    return (out / "manifest.json").read_bytes()


@pytest.mark.slow
def test_cluster_build_of_the_synthetic_default_equals_the_reference(tmp_path, address):
    from aegis_data.engine.config import load_config
    from aegis_data.sources import load_source

    out = tmp_path / "synthetic-c"
    seen = []
    # The reference manifest is an aegis-v1 build (`aegis build-splits --suite aegis-v1`).
    result = build_splits(
        load_source("synthetic"), out, scheduler=address, on_cluster=seen.append, config=load_config("aegis-v1")
    )
    local, ref = load_manifest(out / "manifest.json"), load_manifest(REFERENCE)
    assert seen and seen[0]["workers"] == 2 and seen[0]["dashboard"].startswith("http://127.0.0.1:")
    assert result.root_hash == ref.root_hash
    assert local.data["files_hash"] == ref.data["files_hash"]
    assert local.data["entries"] == ref.data["entries"]


def test_cluster_build_writes_the_same_manifest_bytes_as_a_local_build(tmp_path, address):
    ds = fake_dataset(n_test=5, n_val=2, n_train=2)
    local = build_splits(ds, tmp_path / "local", with_train=True, **build_kwargs())
    dask = build_splits(ds, tmp_path / "dask", with_train=True, scheduler=address, **build_kwargs(workers=None))
    assert dask.root_hash == local.root_hash
    assert _manifest_bytes(tmp_path / "dask") == _manifest_bytes(tmp_path / "local")
    assert dask.files_written == local.files_written == 5 * 5 + 2 + 2
    assert not list((tmp_path / "dask").rglob("*.tmp"))
    assert verify_split(tmp_path / "dask").ok


def test_a_worker_killed_mid_build_is_replaced_and_the_manifest_is_unchanged(tmp_path, cluster, address):
    _, client = cluster
    ds = fake_dataset(n_test=10, n_val=0)
    build_splits(ds, tmp_path / "ref", **build_kwargs())
    pids = list(client.run(os.getpid).values())
    killed = []

    def kill_one_worker(p) -> None:
        if p.done == 1 and not killed:  # tasks are running on both workers now
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])

    from tests.data.split.test_splits_doubles import slow_corrupt

    result = build_splits(
        ds,
        tmp_path / "dask",
        scheduler=address,
        progress=kill_one_worker,
        **build_kwargs(workers=None, corrupt=slow_corrupt),
    )
    assert killed
    client.wait_for_workers(2, timeout=60)
    assert pids[0] not in client.run(os.getpid).values()  # the nanny started a new worker process
    assert result.files_written == 10 * 5
    assert _manifest_bytes(tmp_path / "dask") == _manifest_bytes(tmp_path / "ref")
    assert verify_split(tmp_path / "dask").ok  # no temp file of the killed write is left over


def test_a_task_that_keeps_killing_workers_ends_the_build_in_one_line(tmp_path):
    import dask

    from tests.data.split.test_splits_doubles import dying_corrupt

    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        c = distributed.LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
            silence_logs=50,
        )
    try:
        with pytest.raises(
            AegisError,
            match=r"Dask workers died again and again running aegis-render-test-img00\d-.*"
            r"re-run the same command to resume",
        ):
            build_splits(
                fake_dataset(n_test=1, n_val=0),
                tmp_path / "o",
                scheduler=c.scheduler_address,
                **build_kwargs(workers=None, corrupt=dying_corrupt),
            )
    finally:
        c.close()


def test_a_build_waits_for_workers_that_join_the_scheduler_later(tmp_path):
    import threading

    c = distributed.LocalCluster(
        n_workers=0,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
        silence_logs=50,
    )
    try:
        threading.Timer(1.0, c.scale, args=(1,)).start()  # a SLURM job that starts after the build
        result = build_splits(
            fake_dataset(n_test=2, n_val=0), tmp_path / "o", scheduler=c.scheduler_address, **build_kwargs(workers=None)
        )
        assert result.files_written == 2 * 5
    finally:
        c.close()


def _with_broken_image(tmp_path: Path) -> FakeDataset:
    """Three good synthetic-gradient images and one PNG file cut short after its header."""
    good = []
    for i in range(3):
        rec = record(i)
        p = tmp_path / f"src-{i}.png"
        write_png_atomic(p, fake_read(rec, 10**9))
        good.append(rec.__class__(rec.image_id, str(p), rec.width, rec.height, rec.boxes, rec.group, rec.split))
    broken = tmp_path / "src-broken.png"
    write_png_atomic(broken, fake_read(record(3), 10**9))
    broken.write_bytes(broken.read_bytes()[:60])
    bad = record(3)
    good.append(bad.__class__(bad.image_id, str(broken), bad.width, bad.height, bad.boxes, bad.group, bad.split))
    return FakeDataset("fake", {"adapter": "fake", "n": 4}, {"test": good})


def test_a_corrupt_source_image_fails_the_build_with_the_local_message(tmp_path, address):
    ds = _with_broken_image(tmp_path)
    kw = build_kwargs(read_image=None)
    with pytest.raises(AegisError) as local:
        build_splits(ds, tmp_path / "local", **kw)
    with pytest.raises(AegisError) as dask:
        build_splits(ds, tmp_path / "dask", scheduler=address, **{**kw, "workers": None})
    assert str(dask.value) == str(local.value)
    assert "img003" in str(dask.value) or "src-broken.png" in str(dask.value)
    assert len(str(dask.value).splitlines()) == 1


class _Stop(Exception):
    pass


def test_an_interrupted_cluster_build_resumes_and_skips_what_was_written(tmp_path, address):
    ds = fake_dataset(n_test=8, n_val=0)
    build_splits(ds, tmp_path / "ref", **build_kwargs())

    def stop_after_three(p) -> None:
        if p.done == 3:
            raise _Stop

    with pytest.raises(_Stop):
        build_splits(ds, tmp_path / "dask", scheduler=address, progress=stop_after_three, **build_kwargs(workers=None))
    assert not (tmp_path / "dask" / "manifest.json").exists()
    again = build_splits(ds, tmp_path / "dask", scheduler=address, **build_kwargs(workers=None))
    assert again.files_skipped >= 3 * 5 and again.files_written + again.files_skipped == 8 * 5
    assert _manifest_bytes(tmp_path / "dask") == _manifest_bytes(tmp_path / "ref")


def test_verify_on_the_cluster_catches_a_flipped_byte_like_local_verify(tmp_path, address):
    out = tmp_path / "split"
    build_splits(fake_dataset(n_test=4, n_val=1), out, **build_kwargs())
    assert verify_split(out, scheduler=address).ok
    target = out / "test" / "low_light_s2" / "img002.png"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    local, dask = verify_split(out), verify_split(out, scheduler=address)
    assert not dask.ok
    assert [f.path for f in dask.failures] == ["test/low_light_s2/img002.png"]
    assert dask.to_dict() == local.to_dict()


def test_verify_on_the_cluster_tells_bytes_only_differences_from_the_workers_pixel_hashes(tmp_path, address):
    import cv2

    from aegis_data.files.imageio import read_rgb

    out = tmp_path / "split"
    build_splits(fake_dataset(n_test=2, n_val=0), out, **build_kwargs())
    target = out / "test" / "clean" / "img001.png"
    rgb = read_rgb(target)
    ok, data = cv2.imencode(".png", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_PNG_COMPRESSION, 9])
    assert ok and data.tobytes() != target.read_bytes()
    target.write_bytes(data.tobytes())  # another encoder, the same pixels
    report = verify_split(out, scheduler=address)
    assert [(f.path, f.kind) for f in report.findings] == [("test/clean/img001.png", "bytes-only")]
    assert report.to_dict() == verify_split(out).to_dict()


def test_every_worker_must_see_the_output_directory(tmp_path, cluster):
    from aegis_data import executors as dist

    _, client = cluster
    state = tmp_path / "state.json"
    state.write_text("{}")
    dist.require_shared_file(client, state, "--out")  # a LocalCluster shares this machine's disk

    class ElsewhereClient:  # a cluster whose second worker mounts other storage at that path
        def nthreads(self):
            return {"tcp://10.0.0.1:1": 1, "tcp://10.0.0.2:1": 1}

        def run(self, fn, path):
            return {"tcp://10.0.0.1:1": fn(path), "tcp://10.0.0.2:1": None}

    with pytest.raises(
        AegisError,
        match=r"1 of 2 Dask worker\(s\) \(e.g. tcp://10.0.0.2:1\) do not see .*--out must "
        r"be on storage every worker mounts at the same path",
    ):
        dist.require_shared_file(ElsewhereClient(), state, "--out")


runner = CliRunner()


def test_cli_build_and_verify_on_their_own_local_cluster(tmp_path):
    out = tmp_path / "synthetic-c"
    built = runner.invoke(
        app,
        [
            "build-splits",
            "--out-dir",
            str(out),
            "--n",
            "4",
            "--size",
            "64",
            "--corruptions",
            "low_light",
            "--severities",
            "1",
            "--scheduler",
            "local",
            "--workers",
            "1",
        ],
    )
    assert built.exit_code == 0, built.output
    assert "Dask scheduler tcp://127.0.0.1:" in built.stderr and "1 worker(s)" in built.stderr
    checked = runner.invoke(app, ["verify", str(out), "--scheduler", "local", "--workers", "1"])
    assert checked.exit_code == 0, checked.output
    assert "OK" in checked.stdout


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--scheduler", "host with spaces"], "expected 'local' or a Dask scheduler address"),
        (["--scheduler", "tcp://127.0.0.1:8786", "--workers", "2"], "--workers applies to --scheduler local only"),
    ],
)
def test_cli_refuses_a_bad_scheduler_in_one_line(tmp_path, args, fragment):
    result = runner.invoke(app, ["build-splits", "--out-dir", str(tmp_path / "o"), "--n", "2", "--size", "64", *args])
    assert_one_line_error(result, fragment)
    assert not (tmp_path / "o").exists()


def test_an_unreachable_scheduler_is_one_line(tmp_path, monkeypatch):
    build = runner.invoke(
        app,
        [
            "build-splits",
            "--out-dir",
            str(tmp_path / "o"),
            "--n",
            "2",
            "--size",
            "64",
            "--corruptions",
            "low_light",
            "--severities",
            "1",
            "--scheduler",
            "tcp://127.0.0.1:9",
            "--timeout",
            "2",
        ],
    )
    assert_one_line_error(build, "cannot reach the Dask scheduler at tcp://127.0.0.1:9 within 2 s")
    verify = runner.invoke(app, ["verify", str(tmp_path), "--scheduler", "tcp://127.0.0.1:9", "--timeout", "0"])
    assert verify.exit_code != 0 and "Traceback" not in verify.output


@pytest.mark.parametrize("bad", [0, -1, float("nan"), 1e9, True, "5"])
def test_a_bad_timeout_is_refused_before_anything_runs(bad, tmp_path):
    from aegis_data.executors import check_timeout

    with pytest.raises(AegisError, match="`timeout` must be"):
        check_timeout(bad)
    assert check_timeout(None) == 10.0 and check_timeout(2.5) == 2.5


def test_without_dask_installed_the_scheduler_option_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import fails as if not installed
    with pytest.raises(AegisError, match=r"pip install -c constraints.txt -e '\.\[distributed\]'"):
        build_splits(fake_dataset(n_test=1, n_val=0), tmp_path / "o", scheduler="local", **build_kwargs(workers=None))


def test_cli_start_up_does_not_import_dask():
    code = "import sys, aegis_cli.main; print(','.join(m for m in ('dask', 'distributed') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "", done.stdout + done.stderr
