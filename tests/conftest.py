"""Suite-wide guards: no network, offline libraries, and no silent skips for missing dependencies in CI."""

from __future__ import annotations

import atexit
import ipaddress
import os
import shutil
import socket
import tempfile
from pathlib import Path

import pytest

# --- Offline settings, before anything imports ultralytics or huggingface ---------------------------------
_TMP_HOME = Path(tempfile.mkdtemp(prefix="aegis-test-home-"))
# Removed when the run ends: one was left per run (1.6 MB each, 1,500 of them on one machine), and a full disk fails
# the run late, in coverage's own data file.
atexit.register(shutil.rmtree, _TMP_HOME, ignore_errors=True)
os.environ.update(
    YOLO_OFFLINE="1",
    YOLO_AUTOINSTALL="0",
    YOLO_VERBOSE="0",
    YOLO_CONFIG_DIR=str(_TMP_HOME / "yolo"),
    HF_HUB_OFFLINE="1",
    HF_DATASETS_OFFLINE="1",
    HF_HOME=str(_TMP_HOME / "hf"),
    HF_HUB_DISABLE_TELEMETRY="1",
    MPLBACKEND="Agg",
)
_font_dir = _TMP_HOME / "yolo" / "Ultralytics"
_font_dir.mkdir(parents=True, exist_ok=True)
try:  # Ultralytics fetches Arial.ttf during training unless a copy is already in its config dir.
    import matplotlib

    _ttf = Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf"
    for _name in ("Arial.ttf", "Arial.Unicode.ttf"):
        shutil.copyfile(_ttf, _font_dir / _name)
except ImportError:  # matplotlib comes with the report/runner extras; tests needing it say so
    pass

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


# --- Network guard: only loopback ------------------------------------------------------------------------
class NetworkAccessError(RuntimeError):
    pass


def _is_loopback(host) -> bool:
    if host in (None, "", "localhost"):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


def _guard_address(address) -> None:
    if isinstance(address, tuple) and address and not _is_loopback(address[0]):
        raise NetworkAccessError(f"tests must not touch the network (attempted connection to {address!r})")


def _guarded_connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6):
        _guard_address(address)
    return _real_connect(self, address)


def _guarded_connect_ex(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6):
        _guard_address(address)
    return _real_connect_ex(self, address)


def _guarded_getaddrinfo(host, *args, **kwargs):
    if not _is_loopback(host):
        raise NetworkAccessError(f"tests must not touch the network (attempted DNS lookup of {host!r})")
    return _real_getaddrinfo(host, *args, **kwargs)


socket.socket.connect = _guarded_connect
socket.socket.connect_ex = _guarded_connect_ex
socket.getaddrinfo = _guarded_getaddrinfo


# --- In CI a skip for a missing dependency is a failure ---------------------------------------------------
_MISSING_DEP_MARKERS = ("could not import", "missing dependency", "No module named")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped:
        reason = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if any(m in reason for m in _MISSING_DEP_MARKERS):
            report.outcome = "failed"
            report.longrepr = f"CI=true: a test may not be skipped for a missing dependency ({reason})"


@pytest.fixture
def in_ci() -> bool:
    return IN_CI


# --- CLI error contract -----------------------------------------------------------------------------------
def assert_one_line_error(result, *fragments: str, exit_code: int | None = 1) -> None:
    """A CliRunner result that failed the way every command must: non-zero exit (``exit_code`` when given),
    no traceback, exactly one non-empty line on stderr, starting "error:" and containing each fragment."""
    assert result.exit_code != 0 if exit_code is None else result.exit_code == exit_code, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    for f in fragments:
        assert f in lines[0], lines[0]
