"""Compile aegis_data/_ckernels.c by hand, with the flags setup.py uses plus extra ones (tests only)."""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "aegis_data" / "_ckernels.c"
FLAGS = ["-O3", "-std=c99", "-ffp-contract=off", "-fno-fast-math", "-fno-strict-aliasing"]  # as in setup.py


def compiler() -> str | None:
    return shutil.which("cc") or shutil.which("gcc")


def build_ckernels(out_dir: Path, *defines: str) -> Path:
    """The extension built into ``out_dir`` with ``-D<define>`` for each of ``defines``; returns the .so path."""
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler")
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    target = Path(out_dir) / f"_ckernels{suffix}"
    cmd = [cc, *FLAGS, *(f"-D{d}" for d in defines), "-shared", "-fPIC",
           f"-I{sysconfig.get_paths()['include']}", str(SOURCE), "-o", str(target), "-lm"]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300)
    return target
