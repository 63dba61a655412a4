import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import NetworkAccessError


def test_non_loopback_connect_is_refused():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with pytest.raises(NetworkAccessError):
            s.connect(("93.184.216.34", 80))
    finally:
        s.close()


def test_dns_lookup_is_refused():
    with pytest.raises(NetworkAccessError):
        socket.getaddrinfo("example.org", 443)


def test_loopback_is_allowed():
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    cli = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        cli.connect(srv.getsockname())
    finally:
        cli.close()
        srv.close()


def test_a_test_run_leaves_no_home_behind(tmp_path):
    """The suite's offline home (YOLO and Hugging Face settings) lives in a temporary folder that a run removes."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop("PYTEST_ADDOPTS", None)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--no-cov",
            f"{Path(__file__).name}::test_loopback_is_allowed",
        ],
        cwd=Path(__file__).parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout
    assert not list(tmp_path.glob("aegis-test-home-*"))
