"""The toolkit's optional C extensions and the one switch that chooses them.

Seven extensions exist, each beside the code it mirrors: ``aegis_data.engine._ckernels`` (the corruption
engine's inner loops, ``engine/kernels.py``), ``aegis_data.files._cpng`` (the PNG writer's deflate,
``files/png.py``), ``aegis_eval.metrics._cmatch`` (COCO matching and accumulation, ``metrics/coco.py`` and
``matching.py``), ``aegis_eval.metrics._cbootstrap`` (the AP bootstrap, ``metrics/bootstrap.py``),
``aegis_eval.protocols._cresults`` (the reader of plain results files and GT annotations, ``protocols/predictions.py``),
``aegis_eval.protocols._cinputs`` (a parsed GT's annotation columns and the duplicate count, same module) and
``aegis_data.files._cjson`` (the JSON reader's long-integer screen, ``files/readers.py``). Each is built
by ``pip install`` where a C compiler is present; without it the NumPy or Python code runs, which gives the same
bytes and numbers, more slowly. ``AEGIS_KERNELS`` chooses for all of them:
``auto`` (default: the extension when built), ``numpy`` (always the NumPy code), ``compiled`` (refuse to run
without the extension).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from aegis_data.errors import AegisError

KERNELS_ENV = "AEGIS_KERNELS"


def load_extension(module: str, what: str) -> Any:  # a module or None (Any: callers test it once, then use it)
    """The extension ``module`` (its full dotted name), or None where the NumPy code is to run; ``what`` names it
    in the one-line error."""
    mode = os.environ.get(KERNELS_ENV, "auto").strip().lower() or "auto"
    if mode not in ("auto", "compiled", "numpy"):
        raise AegisError(f"{KERNELS_ENV} must be auto, compiled or numpy, got {mode!r}")
    if mode == "numpy":
        return None
    try:
        return importlib.import_module(module)
    except ImportError:
        if mode == "compiled":
            raise AegisError(
                f"{KERNELS_ENV}=compiled but the compiled {what} ({module}) is not built; "
                f"reinstall with a C compiler (pip install -e .) or unset {KERNELS_ENV}"
            ) from None
        return None
