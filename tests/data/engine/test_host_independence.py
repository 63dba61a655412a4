"""The committed reference manifests (aegis-v1 and aegis-v2) reproduce on "another machine": a host whose system zlib
is zlib-ng (as on Fedora 40+), a CPU cut to x86-64-v2, one or two workers -- root hash, every entry and every file
byte.

"Another machine's zlib" is zlib-ng built in zlib-compat mode from the sources vendored in the ``zlib-ng``
sdist (``make test`` downloads it next to the venv; the version is the Makefile's ``ZLIB_NG_VERSION``) and put
first on ``LD_LIBRARY_PATH``. A check that OpenCV's own PNG bytes change under that setting proves the swap
really happened. (The toolkit's PNG writer deflates with its own code, never a zlib; the swap shows that no other
path lets the host's zlib into the bytes.)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests import REPO_ROOT
from tests.data.engine.test_determinism import _present_cv2_features, _present_npy_groups

REPO = REPO_ROOT
REFERENCE = REPO / "manifests" / "synthetic-c.json"  # aegis-v1
REFERENCE_V2 = REPO / "manifests" / "synthetic-c-v2.json"  # the default build, aegis-v2
AEGIS = Path(sys.executable).with_name("aegis")
# The sdist `make test` downloads (the Makefile's one pin of it).
ZLIB_NG_SDIST_VERSION = re.search(r"^ZLIB_NG_VERSION := (\S+)$", (REPO / "Makefile").read_text(), re.M).group(1)
SDIST_NAME = f"zlib_ng-{ZLIB_NG_SDIST_VERSION}.tar.gz"

pytestmark = pytest.mark.slow


def _sdist() -> Path | None:
    for d in (os.environ.get("AEGIS_ZLIB_NG_SDIST_DIR"), Path(sys.prefix) / "aegis-cache"):
        if d and (Path(d) / SDIST_NAME).is_file():
            return Path(d) / SDIST_NAME
    return None


@pytest.fixture(scope="module")
def zlib_ng_compat(tmp_path_factory) -> Path:
    """A folder holding libz.so.1 built from zlib-ng's sources in zlib-compat mode."""
    sdist = _sdist()
    if sdist is None:
        pytest.skip(f"{SDIST_NAME} not found (make test downloads it into .venv/aegis-cache)")
    if shutil.which("cmake") is None or shutil.which("cc") is None:
        pytest.skip("cmake and a C compiler are needed to build zlib-ng")
    work = tmp_path_factory.mktemp("zlib-ng")
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if "/src/zlib_ng/zlib-ng/" in m.name]
        tar.extractall(work, members=members, filter="data")
    (src,) = work.glob("zlib_ng-*/src/zlib_ng/zlib-ng")
    build = work / "build"
    flags = [
        "-DZLIB_COMPAT=ON",
        "-DBUILD_TESTING=OFF",
        "-DZLIB_ENABLE_TESTS=OFF",
        "-DWITH_GTEST=OFF",
        "-DCMAKE_BUILD_TYPE=Release",
    ]
    for cmd in (["cmake", "-S", str(src), "-B", str(build), *flags], ["cmake", "--build", str(build), "-j2"]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert (build / "libz.so.1").exists()
    return build


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    return env


_OPENCV_PNG_SHA = (
    "import hashlib, numpy as np, cv2; "
    "y, x = np.mgrid[0:480, 0:640]; "
    "img = np.stack([(x + y) // 5, (x * y) // 97, (x // 7) * (y // 9)], axis=2).astype(np.uint8); "
    "print(hashlib.sha256(cv2.imencode('.png', img, [cv2.IMWRITE_PNG_COMPRESSION, 1])[1].tobytes()).hexdigest())"
)


def test_the_zlib_swap_changes_opencv_png_bytes(zlib_ng_compat):
    """Without this, the reproduction below could pass because the library swap silently did nothing."""

    def run(env):
        return subprocess.run(
            [sys.executable, "-c", _OPENCV_PNG_SHA], capture_output=True, text=True, env=env, check=True
        ).stdout.strip()

    assert run(_env()) != run(_env(LD_LIBRARY_PATH=str(zlib_ng_compat)))


def _build_and_compare(out: Path, env: dict[str, str], workers: int, suite: str = "aegis-v1") -> None:
    reference = REFERENCE if suite == "aegis-v1" else REFERENCE_V2
    r = subprocess.run(
        [str(AEGIS), "build-splits", "--suite", suite, "--out-dir", str(out), "--workers", str(workers)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    built, ref = json.loads((out / "manifest.json").read_text()), json.loads(reference.read_text())
    assert built["root_hash"] == ref["root_hash"]
    assert built["entries"] == ref["entries"]  # pixels, GT and every file-byte hash
    assert built["files_hash"] == ref["files_hash"] and built["encoder"] == ref["encoder"]
    # `make demo`'s own check, with byte differences counted as failures.
    v = subprocess.run(
        [str(AEGIS), "verify", str(out), "--against", str(reference), "--strict-bytes"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert v.returncode == 0, v.stdout[-2000:] + v.stderr[-2000:]


@pytest.mark.parametrize("suite", ["aegis-v1", "aegis-v2"])
def test_reference_reproduces_with_zlib_ng_as_system_zlib_one_worker(zlib_ng_compat, tmp_path, suite):
    _build_and_compare(tmp_path / "zlibng", _env(LD_LIBRARY_PATH=str(zlib_ng_compat)), workers=1, suite=suite)


@pytest.mark.parametrize("suite", ["aegis-v1", "aegis-v2"])
def test_reference_reproduces_on_a_cpu_cut_to_x86_64_v2_two_workers(tmp_path, suite):
    cut = {}
    if _present_cv2_features():
        cut["OPENCV_CPU_DISABLE"] = ",".join(_present_cv2_features())
    if _present_npy_groups():
        cut["NPY_DISABLE_CPU_FEATURES"] = " ".join(_present_npy_groups())
    if not cut:
        pytest.skip("this CPU has no SIMD features above x86-64-v2 to disable")
    # As for the zlib swap: the settings must really switch those paths off, or the reproduction proves nothing.
    probe = (
        "import json, cv2\n"
        "from tests.data.engine.test_determinism import _present_cv2_features, _present_npy_groups\n"
        "print(json.dumps([_present_cv2_features(), _present_npy_groups()]))"
    )
    r = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=_env(**cut), cwd=REPO, check=True
    )
    assert json.loads(r.stdout) == [[], []], r.stdout
    _build_and_compare(tmp_path / "cut", _env(**cut), workers=2, suite=suite)
