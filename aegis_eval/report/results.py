"""Reading ``aegis score`` JSONs (schema ``aegis-score/1``) and arranging them for the report.

Pure data: nothing here draws or writes. A *run* is one score JSON (one model on one dataset); runs are
grouped by dataset (``null`` -> ``"unknown"``) and identified inside a group by their ``label``.

Value conventions used by every figure and table:

- ``metric_value`` is ``None`` when the condition is absent, the value is ``null``, or an AP is ``-1``
  (pycocotools' "no GT in this size range").
- ``relative_drop`` is ``(clean - condition) / clean`` as written by the scorer (``rel_drop``), recomputed
  from the two values when the field is absent; ``None`` when undefined (clean value 0 or missing).
- ``degradation`` is the relative drop oriented so that larger is worse for every metric: for metrics in
  ``LOWER_IS_BETTER`` (false alarms) the sign is flipped. Figures and the heatmap use it; tables print the
  drop as stored and say so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aegis_data.conditions import SEVERITIES, condition_id, parse_condition
from aegis_data.engine.config import SuiteConfig, load_config
from aegis_data.errors import AegisError
from aegis_data.files.readers import read_json
from aegis_eval.metrics.result_keys import AP_METRICS, LOWER_IS_BETTER, THRESHOLD_METRICS
from aegis_eval.protocols.samples_file import ScoreSamples, read_samples
from aegis_eval.protocols.score_doc import validate_result
from aegis_eval.report.text import one_line

METRICS = THRESHOLD_METRICS + AP_METRICS
UNKNOWN_DATASET = "unknown"
SOURCE_KEY = "_source"  # added by load_results so messages and the provenance table can name the file
# Added by load_results: the file's samples (``aegis_eval.protocols.samples_file.ScoreSamples``) or None, for the
# paired differences between models.
SAMPLES_KEY = "_samples"


def load_results(paths: Iterable[str | Path]) -> list[dict]:
    """Read and validate score JSON files, in the order given.

    Each returned dict is the file's JSON with two extra keys, ``"_source"`` (the path as given) and
    ``"_samples"`` (its samples file beside it, checked against ``provenance.samples_sha256``, or None). Raises
    AegisError (one line naming the file) for a missing, unreadable, non-JSON or wrong-schema file, a samples
    file of another run, or when no path is given.
    """
    paths = [Path(p) for p in paths]
    if not paths:
        raise AegisError("no score JSON given (expected one or more score files, as `aegis score` writes them)")
    results = []
    for p in paths:
        obj, _ = read_json(p, "score JSON")
        validate_result(obj, str(p))
        results.append({**obj, SOURCE_KEY: str(p), SAMPLES_KEY: read_samples(p, obj)})
    return results


def check_metric(metric: str) -> str:
    if metric not in METRICS:
        raise AegisError(f"unknown metric {metric!r}; expected one of: {', '.join(METRICS)}")
    return metric


# --- values ------------------------------------------------------------------------------------------------


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    try:
        x = float(x)
    except OverflowError:  # an integer beyond float64 (10**400) is no usable value either
        return None
    return x if math.isfinite(x) else None


def metric_value(result: Mapping, condition: str, metric: str) -> float | None:
    """The metric for one condition, or None (absent condition, null value, or AP = -1)."""
    block = result["conditions"].get(condition)
    if block is None:
        return None
    v = _number(block.get(metric))
    if v is not None and metric in AP_METRICS and v < 0:
        return None
    return v


def relative_drop(result: Mapping, condition: str, metric: str) -> float | None:
    """``(clean - condition) / clean``: the scorer's ``rel_drop`` when written, else recomputed; None if undefined."""
    block = result["conditions"].get(condition)
    if block is None:
        return None
    stored = block.get("rel_drop")
    if isinstance(stored, dict) and metric in stored:
        return _number(stored[metric])
    clean = metric_value(result, "clean", metric)
    value = metric_value(result, condition, metric)
    if clean is None or value is None or clean == 0:
        return None
    return (clean - value) / clean


def degradation(result: Mapping, condition: str, metric: str) -> float | None:
    """Relative drop with larger = worse for every metric (sign flipped for ``LOWER_IS_BETTER``)."""
    d = relative_drop(result, condition, metric)
    if d is None:
        return None
    return -d if metric in LOWER_IS_BETTER else d


def confidence_interval(result: Mapping, condition: str, metric: str) -> tuple[float, float] | None:
    """The bootstrap percentile interval ``ci[metric]`` of a condition, or None when absent."""
    block = result["conditions"].get(condition)
    ci = block.get("ci") if block else None
    return _pair(ci.get(metric)) if isinstance(ci, dict) else None


def _pair(pair: Any) -> tuple[float, float] | None:
    if not isinstance(pair, (list, tuple)) or len(pair) != 2:
        return None
    lo, hi = _number(pair[0]), _number(pair[1])
    return None if lo is None or hi is None else (lo, hi)


def drop_interval(result: Mapping, condition: str, metric: str) -> tuple[float, float] | None:
    """The paired bootstrap interval ``ci_drop[metric]`` of a condition's relative drop, or None."""
    block = result["conditions"].get(condition)
    ci = block.get("ci_drop") if block else None
    return _pair(ci.get(metric)) if isinstance(ci, dict) else None


def summary_interval(result: Mapping, section: str, metric: str, key: str | None = None) -> tuple[float, float] | None:
    """``summary.ci[section][metric]`` (or ``summary.ci[section][key][metric]``), or None when absent."""
    node = ((result.get("summary") or {}).get("ci") or {}).get(section)
    if key is not None:
        node = node.get(key) if isinstance(node, dict) else None
    return _pair(node.get(metric)) if isinstance(node, dict) else None


def false_alarm_record(result: Mapping, condition: str) -> Mapping[str, Any] | None:
    """``false_alarm.conditions[condition]`` (exposure, rates and exact upper bounds), or None when absent."""
    block = (result.get("false_alarm") or {}).get("conditions")
    rec = block.get(condition) if isinstance(block, dict) else None
    return rec if isinstance(rec, dict) else None


def false_alarm_confidence(result: Mapping) -> float | None:
    """One-sided confidence of the false-alarm upper bounds (``false_alarm.confidence``), or None."""
    return _number((result.get("false_alarm") or {}).get("confidence"))


@dataclass(frozen=True)
class SampleSize:
    """What a result's numbers rest on. Size bins, unit and B are None when the JSON does not say."""

    n_images: int | None
    n_gt: int | None
    n_gt_small: int | None
    n_gt_medium: int | None
    n_gt_large: int | None
    resampling_unit: str | None  # "image" or "cluster"
    n_units: int | None
    n_bootstrap: int | None
    seed: int | None


def _count(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) and x >= 0 else None


def sample_size(result: Mapping) -> SampleSize:
    """The ``sample`` block; for files written before it, the clean (else first) condition's counts and the
    provenance's bootstrap settings."""
    s = result.get("sample")
    if isinstance(s, dict):
        unit = s.get("resampling_unit")
        return SampleSize(
            _count(s.get("n_images")),
            _count(s.get("n_gt")),
            _count(s.get("n_gt_small")),
            _count(s.get("n_gt_medium")),
            _count(s.get("n_gt_large")),
            unit if unit in ("image", "cluster") else None,
            _count(s.get("n_units")),
            _count(s.get("n_bootstrap")),
            _count(s.get("seed")),
        )
    conds = result["conditions"]
    block = conds.get("clean") or next(iter(conds.values()))
    raw = result.get("provenance")
    prov: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
    n_images = _count(block.get("n_images"))
    unit = None if "cluster_by" not in prov else ("image" if prov.get("cluster_by") is None else "cluster")
    return SampleSize(
        n_images,
        _count(block.get("n_gt")),
        None,
        None,
        None,
        unit,
        n_images if unit == "image" else None,
        _count(prov.get("bootstrap")),
        _count(prov.get("seed")),
    )


def localization(result: Mapping, condition: str) -> tuple[float, int] | None:
    """(mean IoU clean-vs-condition box, matched count) for a condition, or None when absent."""
    block = result["conditions"].get(condition)
    loc = block.get("localization") if block else None
    if not isinstance(loc, dict):
        return None
    iou = _number(loc.get("iou_clean_vs_condition"))
    n = loc.get("n_matched")
    if iou is None or isinstance(n, bool) or not isinstance(n, int):
        return None
    return iou, n


def summary_value(result: Mapping, section: str, metric: str, key: str | None = None) -> float | None:
    """``summary[section][metric]`` (or ``summary[section][key][metric]``) when present, else None."""
    node = result.get("summary") or {}
    node = node.get(section)
    if key is not None:
        node = node.get(key) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        return None
    return _number(node.get(metric))


def _mean(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


# --- grouping ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One model's score JSON inside a dataset group."""

    label: str
    result: Mapping[str, Any]

    @property
    def source(self) -> str:
        return str(self.result.get(SOURCE_KEY, ""))

    @property
    def samples(self) -> ScoreSamples | None:
        """The run's per-resample values (its samples file), None when the score has none."""
        value = self.result.get(SAMPLES_KEY)
        return value if isinstance(value, ScoreSamples) else None

    def has(self, condition: str) -> bool:
        return condition in self.result["conditions"]


@dataclass(frozen=True)
class DatasetGroup:
    """All runs on one dataset, with the corruption rows every figure and table share.

    corruptions: row order — families in config order, corruptions in config order inside a family; every
        canonical corruption is listed (a partial sweep shows it as missing), then any unknown ones.
    families: corruption -> family.
    severities: (1, 2, 3).
    """

    name: str
    runs: tuple[Run, ...]
    corruptions: tuple[str, ...]
    families: Mapping[str, str]
    severities: tuple[int, ...] = SEVERITIES

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(r.label for r in self.runs)

    @property
    def family_order(self) -> tuple[str, ...]:
        seen: list[str] = []
        for c in self.corruptions:
            if self.families[c] not in seen:
                seen.append(self.families[c])
        return tuple(seen)

    def family_members(self, family: str) -> tuple[str, ...]:
        return tuple(c for c in self.corruptions if self.families[c] == family)

    @property
    def grid_conditions(self) -> tuple[str, ...]:
        """Every corrupted condition of the grid, row-major (corruption, then severity)."""
        return tuple(condition_id(c, s) for c in self.corruptions for s in self.severities)

    @property
    def present_conditions(self) -> tuple[str, ...]:
        """``clean`` (when any run has it) and the grid conditions at least one run has, in grid order."""
        conds = (["clean"] if any(r.has("clean") for r in self.runs) else []) + list(self.grid_conditions)
        return tuple(c for c in conds if any(r.has(c) for r in self.runs))

    def missing(self, run: Run) -> tuple[str, ...]:
        """Conditions of the full grid (clean included) this run lacks."""
        return tuple(c for c in ("clean",) + self.grid_conditions if not run.has(c))


def _corruption_rows(
    results: Sequence[Mapping], config: SuiteConfig | None = None
) -> tuple[tuple[str, ...], dict[str, str]]:
    """Corruption rows with their families. The results' own labels win: the scorer took each condition's
    family from the suite config of the split it scored (which may not be the installed one). ``config``
    (default: the installed suite) gives the order and the full grid; corruptions it lacks follow in the
    results' order."""
    cfg = config or load_config()
    labelled: dict[str, str] = {}
    for res in results:
        for cond, block in res["conditions"].items():
            name, _ = parse_condition(cond)
            fam = block.get("family")
            if name is not None and name not in labelled and isinstance(fam, str) and fam:
                labelled[name] = fam
    family_of = {name: labelled.get(name, spec.family) for name, spec in cfg.corruptions.items()}
    extra: list[str] = []
    for res in results:
        for cond in res["conditions"]:
            name, _ = parse_condition(cond)
            if name is not None and name not in family_of:
                family_of[name] = labelled.get(name, "other")
                extra.append(name)
    order = list(cfg.names) + extra
    families = list(dict.fromkeys([f for f in cfg.families if f in family_of.values()] + [family_of[c] for c in order]))
    rows = [c for fam in families for c in order if family_of[c] == fam]
    return tuple(rows), {c: family_of[c] for c in rows}


def group_by_dataset(results: Sequence[Mapping], config: SuiteConfig | None = None) -> list[DatasetGroup]:
    """Group validated results by dataset (first-seen order); AegisError on a duplicate (dataset, label).

    config: the suite config of the splits the results were scored on (default: the installed one; the
    results' family labels win either way)."""
    corruptions, families = _corruption_rows(results, config)
    groups: dict[str, list[Run]] = {}
    for res in results:
        # Names on one line (a blank line in a name would end a Markdown line or a LaTeX paragraph).
        name = one_line(res.get("dataset") or UNKNOWN_DATASET)
        runs = groups.setdefault(name, [])
        label = one_line(res["label"])
        for other in runs:
            if other.label == label:
                raise AegisError(
                    f"two results for model {label!r} on dataset {name!r} ({other.source or '?'} and "
                    f"{res.get(SOURCE_KEY) or '?'}); give each run a distinct `label` when scoring it"
                )
        runs.append(Run(label, res))
    return [DatasetGroup(name, tuple(runs), corruptions, families) for name, runs in groups.items()]


def per_family_drop(group: DatasetGroup, run: Run, metric: str) -> dict[str, float | None]:
    """Mean relative drop per family: the scorer's ``summary.per_family`` when written, else the mean of the
    family's present conditions."""
    out = {}
    for fam in group.family_order:
        v = summary_value(run.result, "per_family", metric, key=fam)
        if v is None:
            v = _mean(
                [
                    relative_drop(run.result, condition_id(c, s), metric)
                    for c in group.family_members(fam)
                    for s in group.severities
                ]
            )
        out[fam] = v
    return out


def per_corruption_drop(group: DatasetGroup, run: Run, metric: str) -> dict[str, float | None]:
    """Mean relative drop over a corruption's severities (``summary.per_corruption`` when written)."""
    out = {}
    for c in group.corruptions:
        v = summary_value(run.result, "per_corruption", metric, key=c)
        if v is None:
            v = _mean([relative_drop(run.result, condition_id(c, s), metric) for s in group.severities])
        out[c] = v
    return out


@dataclass(frozen=True)
class RobustnessSummary:
    """Clean value, mPC (mean over present corrupted conditions), rPC = mPC / clean, mean relative drop, and
    their bootstrap intervals (None when the JSON has none: ``ci`` of clean, ``summary.ci`` of the rest)."""

    clean: float | None
    mpc: float | None
    rpc: float | None
    mean_rel_drop: float | None
    n_corrupted: int
    n_missing: int
    clean_ci: tuple[float, float] | None = None
    mpc_ci: tuple[float, float] | None = None
    rpc_ci: tuple[float, float] | None = None
    mean_rel_drop_ci: tuple[float, float] | None = None


def robustness_summary(group: DatasetGroup, run: Run, metric: str) -> RobustnessSummary:
    """The scorer's summary values when written, else recomputed from the conditions present."""
    corrupted = [c for c in group.grid_conditions if run.has(c)]
    clean = metric_value(run.result, "clean", metric)
    mpc = summary_value(run.result, "mpc", metric)
    if mpc is None:
        mpc = _mean([metric_value(run.result, c, metric) for c in corrupted])
    rpc = summary_value(run.result, "rpc", metric)
    if rpc is None and mpc is not None and clean:
        rpc = mpc / clean
    mrd = summary_value(run.result, "mean_rel_drop", metric)
    if mrd is None:
        mrd = _mean([relative_drop(run.result, c, metric) for c in corrupted])
    r = run.result
    return RobustnessSummary(
        clean,
        mpc,
        rpc,
        mrd,
        len(corrupted),
        len(group.missing(run)),
        confidence_interval(r, "clean", metric) if run.has("clean") else None,
        summary_interval(r, "mpc", metric),
        summary_interval(r, "rpc", metric),
        summary_interval(r, "mean_rel_drop", metric),
    )


def family_drop_interval(run: Run, family: str, metric: str) -> tuple[float, float] | None:
    """``summary.ci.per_family[family][metric]``: the interval of the family's mean relative drop."""
    return summary_interval(run.result, "per_family", metric, key=family)
