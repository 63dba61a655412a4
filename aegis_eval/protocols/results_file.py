"""A COCO results file read but not yet resolved against a GT: its bytes, SHA-256 and the compiled reader's columns.

Nothing here imports NumPy: a one-condition ``aegis score`` starts the read on a thread (:func:`read_ahead`) before
NumPy and the scorer are imported, and the file read, the hash and the compiled parse release the GIL, so they run
beside those imports. :mod:`aegis_eval.protocols.predictions` resolves what is read here and re-exports these names.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aegis_data.compiled import load_extension

# The compiled reader's columns: image ids, category ids, boxes (x y w h) and scores as int64, int64, float64 and
# float64 bytes, and None when the image ids are integers, else the distinct string ids (file-name stems), which
# the image id column then indexes.
Columns = tuple[bytes, bytes, bytes, bytes, "list[str] | None"]


@dataclass(frozen=True)
class PredictionsFile:
    """A results file read but not yet resolved: its bytes, sha256 and (when asked and the compiled reader takes
    the file) its columns. :func:`read_predictions_file` needs no GT and releases the GIL for most of its time (file
    read, hash, compiled parse), so a sweep reads its files on threads while the GT loads;
    ``predictions.resolve_predictions`` finishes each one as ``load_predictions`` does."""

    path: Path
    data: bytes
    sha256: str
    columns: Columns | None


def _results_reader() -> Any:
    """The compiled reader of plain results files (``_cresults.c``), or None (``AEGIS_KERNELS=numpy`` or not built)."""
    return load_extension("aegis_eval.protocols._cresults", "results reader")


def read_columns(data: bytes) -> Columns | None:
    """The compiled reader's columns of a results file's bytes, or None (``predictions.resolve_predictions``).
    The reader releases the GIL, so a sweep reads its files on threads side by side."""
    reader = _results_reader()
    return reader.columns(data) if reader is not None else None


def read_predictions_file(path: str | Path, parse: bool = True) -> PredictionsFile:
    """Read (and with ``parse`` read into columns) one results file; see :class:`PredictionsFile`. A read
    :func:`read_ahead` started for the same path and ``parse`` is taken instead of reading again."""
    path = Path(path)
    ahead = _take_read_ahead(path, parse)
    if ahead is not None:
        return ahead
    from aegis_data.files.readers import read_file_bytes  # its module loads NumPy: only here, after the read-ahead

    data = read_file_bytes(path, "predictions")
    return PredictionsFile(path, data, hashlib.sha256(data).hexdigest(), read_columns(data) if parse else None)


class _ReadAhead(threading.Thread):
    """One file read on a thread: ``result`` is the PredictionsFile, or None when anything went wrong (a missing
    or irregular file, an unreadable one, a bad AEGIS_KERNELS): then the ordinary read runs again where the scorer
    reads the file, and fails there with its own error line, at the same step as without the read-ahead."""

    def __init__(self, path: Path, parse: bool) -> None:
        super().__init__(name=f"read-ahead {path.name}", daemon=True)
        self.path, self.parse = path, parse
        self.result: PredictionsFile | None = None

    def run(self) -> None:
        try:
            if self.path.is_file():  # never open a FIFO or a device here (the ordinary read refuses them)
                data = self.path.read_bytes()
                columns = read_columns(data) if self.parse else None
                self.result = PredictionsFile(self.path, data, hashlib.sha256(data).hexdigest(), columns)
        except Exception:  # noqa: BLE001 -- any failure is the ordinary read's to report
            self.result = None


_AHEAD: dict[tuple[str, bool], _ReadAhead] = {}
_AHEAD_LOCK = threading.Lock()


def read_ahead(path: str | Path, parse: bool = True) -> None:
    """Start reading ``path`` on a thread; the next :func:`read_predictions_file` of the same path and ``parse`` in
    this process takes that read (the file as it was when the thread read it). For a command about to score one
    file: it overlaps the read with the imports that come before it."""
    path = Path(path)
    with _AHEAD_LOCK:
        if (str(path), parse) in _AHEAD:
            return
        job = _AHEAD[(str(path), parse)] = _ReadAhead(path, parse)
    job.start()


def _take_read_ahead(path: Path, parse: bool) -> PredictionsFile | None:
    with _AHEAD_LOCK:
        job = _AHEAD.pop((str(path), parse), None)
    if job is None:
        return None
    job.join()
    return job.result
