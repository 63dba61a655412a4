"""Build the C extensions again into a scratch folder, through setup.py (its flags), with extra defines."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests import REPO_ROOT

REPO = REPO_ROOT


def compiler() -> str | None:
    return shutil.which("cc") or shutil.which("gcc")


def build_ckernels(out_dir: Path, *defines: str) -> Path:
    """``aegis_data.engine._ckernels`` built into ``out_dir`` by setup.py with ``-D<define>`` added (CFLAGS)."""
    out_dir = Path(out_dir)
    cflags = " ".join([os.environ.get("CFLAGS", ""), *(f"-D{d}" for d in defines)]).strip()
    subprocess.run(
        [
            sys.executable,
            "setup.py",
            "-q",
            "build_ext",
            "--build-lib",
            str(out_dir / "lib"),
            "--build-temp",
            str(out_dir / "tmp"),
        ],
        cwd=str(REPO),
        env={**os.environ, "CFLAGS": cflags},
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    built = sorted((out_dir / "lib" / "aegis_data" / "engine").glob("_ckernels*"))
    if not built:  # the extension is optional in setup.py: a failed compile only warns there
        raise RuntimeError("setup.py build_ext did not produce aegis_data.engine._ckernels")
    return built[0]
