"""The per-resample values of a score, kept beside its JSON for paired model differences (docs/SCORE_JSON.md,
"Samples file").

A score written to ``model.json`` (``aegis score``, ``ScoreResult.to_json``) also writes ``model.samples.npz``: for
every condition and every metric with a bootstrap interval, the B per-resample values the intervals were taken from,
plus the resampling *plan* they were drawn with (seed, B, the image ids, the cluster partition, the GT file's
hash). Two scores whose plans are equal drew the same resample rows (``aegis_eval.metrics.bootstrap.resample_weights``
depends on nothing else), so ``aegis rank`` and the report can subtract them resample by resample. The score JSON's
numbers are not touched: only ``provenance.samples_sha256`` (the file's SHA-256) is added, so a samples file that does
not belong to its JSON is refused.

The file is an ordinary NumPy ``.npz`` (``numpy.load`` reads it): ``values`` (conditions, metrics, B) float64, NaN
where a metric is undefined in a resample, and ``meta``, the UTF-8 JSON of the plan and the axis names. Its bytes
are deterministic (stored members, fixed timestamps), so one score gives one hash on any machine.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from aegis_data.errors import AegisError
from aegis_data.files.imageio import write_bytes_atomic

SAMPLES_SCHEMA = "aegis-samples/1"
SIDECAR_SUFFIX = ".samples.npz"
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
# What makes two scores' resample rows the same (the keys resample_weights is keyed by, and the images themselves).
PLAN_KEYS = ("n_bootstrap", "seed", "n_images", "image_ids_sha256", "clusters_sha256", "gt_sha256")


@dataclass(frozen=True)
class ScoreSamples:
    """{condition: {metric: (B,) float64}} and the plan they were drawn with (``PLAN_KEYS``, plus
    ``resampling_unit`` and ``n_units`` for the report's n line)."""

    plan: Mapping[str, Any]
    samples: Mapping[str, Mapping[str, np.ndarray]]

    @property
    def fingerprint(self) -> str:
        """A short identity of the plan: equal fingerprints, same resample rows."""
        key = json.dumps({k: self.plan.get(k) for k in PLAN_KEYS}, sort_keys=True)
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    @cached_property
    def _npz(self) -> bytes:
        return _build_npz(self)


def _partition_sha256(clusters: np.ndarray | None) -> str | None:
    """SHA-256 of the partition (clusters numbered by first appearance), not of the label values: two GT files
    naming the same groups differently resample alike, as ``resample_weights`` does."""
    if clusters is None:
        return None
    _, first, inverse = np.unique(np.asarray(clusters), return_index=True, return_inverse=True)
    relabel = np.empty(len(first), dtype=np.int64)
    relabel[np.argsort(first)] = np.arange(len(first))
    return hashlib.sha256(relabel[inverse.reshape(-1)].astype("<i8").tobytes()).hexdigest()


def score_samples(
    samples: Mapping[str, Mapping[str, np.ndarray]],
    image_ids: np.ndarray,
    clusters: np.ndarray | None,
    result: Mapping[str, Any],
) -> ScoreSamples | None:
    """The samples of one score (``aegis_eval.protocols.scoring.Scored``'s fields and its document); None with
    B = 1, where every "resample" is the point estimate and there is nothing to pair."""
    sample = result.get("sample") or {}
    b = int(sample.get("n_bootstrap") or 1)
    if b < 2:
        return None
    ids = np.asarray(image_ids).astype("<i8")
    plan = {
        "n_bootstrap": b,
        "seed": int(sample.get("seed", 0)),
        "n_images": int(len(ids)),
        "image_ids_sha256": hashlib.sha256(ids.tobytes()).hexdigest(),
        "clusters_sha256": _partition_sha256(clusters),
        "gt_sha256": (result.get("provenance") or {}).get("gt_sha256"),
        "resampling_unit": sample.get("resampling_unit", "image"),
        "n_units": sample.get("n_units"),
    }
    return ScoreSamples(
        plan, {c: {m: np.asarray(v, dtype=np.float64) for m, v in ms.items()} for c, ms in samples.items()}
    )


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.ascontiguousarray(array), allow_pickle=False)
    return buf.getvalue()


def samples_bytes(s: ScoreSamples) -> bytes:
    """The ``.npz`` bytes of ``s`` (deterministic), built once per ``s``: the hash a score records
    (:func:`with_samples_hash`) and the file ``ScoreResult.to_json`` writes later are the same bytes."""
    return s._npz


def _build_npz(s: ScoreSamples) -> bytes:
    conditions = list(s.samples)
    metrics = list(dict.fromkeys(m for c in conditions for m in s.samples[c]))
    b = int(s.plan["n_bootstrap"])
    values = np.full((len(conditions), len(metrics), b), np.nan)
    for i, c in enumerate(conditions):
        for j, m in enumerate(metrics):
            if m in s.samples[c]:
                values[i, j] = s.samples[c][m]
    meta = {"schema": SAMPLES_SCHEMA, "plan": dict(s.plan), "conditions": conditions, "metrics": metrics}
    meta_bytes = np.frombuffer(json.dumps(meta, sort_keys=True).encode(), dtype=np.uint8)
    import zipfile  # here, not at import: a score with B = 1 writes no samples file

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as z:
        for name, arr in (("values.npy", values.astype("<f8")), ("meta.npy", meta_bytes)):
            info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
            info.external_attr = 0o644 << 16
            z.writestr(info, _npy(arr))
    return buf.getvalue()


def sidecar_path(json_path: str | Path) -> Path:
    """``model.json`` -> ``model.samples.npz`` (any other name gets the suffix appended)."""
    p = Path(json_path)
    return p.with_name((p.name[: -len(".json")] if p.name.endswith(".json") else p.name) + SIDECAR_SUFFIX)


def with_samples_hash(document: Mapping[str, Any], data: bytes) -> dict[str, Any]:
    """``document`` with ``provenance.samples_sha256`` added (a copy; nothing else changes)."""
    out = dict(document)
    out["provenance"] = {**(document.get("provenance") or {}), "samples_sha256": hashlib.sha256(data).hexdigest()}
    return out


def write_samples(data: bytes, json_path: str | Path) -> Path:
    """Write the samples file of the score JSON at ``json_path`` atomically; returns its path."""
    path = sidecar_path(json_path)
    write_bytes_atomic(path, data)
    return path


def parse_samples(data: bytes, where: str) -> ScoreSamples:
    """A samples file's bytes back to :class:`ScoreSamples`; AegisError ``[samples_file]`` naming ``where``."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            values = np.asarray(z["values"], dtype=np.float64)
            meta = json.loads(bytes(np.asarray(z["meta"], dtype=np.uint8)).decode())
        conditions, metrics, plan = meta["conditions"], meta["metrics"], meta["plan"]
        if meta.get("schema") != SAMPLES_SCHEMA or values.shape[:2] != (len(conditions), len(metrics)):
            raise ValueError("unexpected layout")
        if values.shape[2] != int(plan["n_bootstrap"]):
            raise ValueError("B differs from the plan")
    except Exception as exc:  # any damage: one line, the file named
        raise AegisError(f"[samples_file] {where} is no readable {SAMPLES_SCHEMA} samples file ({exc})") from None
    return ScoreSamples(plan, {c: {m: values[i, j] for j, m in enumerate(metrics)} for i, c in enumerate(conditions)})


def read_samples(json_path: str | Path, document: Mapping[str, Any]) -> ScoreSamples | None:
    """The samples file beside the score JSON at ``json_path``, checked against the JSON's
    ``provenance.samples_sha256``; None when the JSON records none or the file is absent (the score is then
    unpaired). AegisError ``[samples_stale]`` when the file's hash differs (it belongs to another run)."""
    expected = (document.get("provenance") or {}).get("samples_sha256")
    path = sidecar_path(json_path)
    if not isinstance(expected, str) or not path.is_file():
        return None
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != expected:
        raise AegisError(
            f"[samples_stale] {path} does not belong to {json_path} (its SHA-256 differs from the score's "
            "provenance.samples_sha256); re-score, or delete the samples file to rank without paired intervals"
        )
    return parse_samples(data, str(path))
