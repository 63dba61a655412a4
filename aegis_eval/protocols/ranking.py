"""Rankings of models across conditions or GT versions (``aegis rank``), and how far they agree.

Input: one ``aegis score`` JSON per model, or several per model merged by label (one per domain, say IID
and OOD test sets scored separately; their condition names become the columns). Per column (a condition, or a GT version
of a cross-version score) models are ranked on one metric: rank 1 is the best (the lowest value for lower-is-better
metrics such as FP per image), ties share the mean of their ranks, and a model whose value is undefined there is left
out of that column.

Agreement with the reference column (``clean``, or the reference GT version):

* Kendall's tau-b between the reference values and the column's values over the models defined in both
  (pairs tied in one ranking count against the denominator, as tau-b does); None with fewer than two models or
  when one side is all ties.
* Its 95% interval resamples the **models** with replacement (the keyed bootstrap of
  ``aegis_eval.metrics.bootstrap``): it says how much the agreement depends on which detectors happen to be in the
  study, which is the question "does the clean ranking predict the corrupted one" asks. Copies of one model
  form pairs tied in both rankings. With few models the interval is wide, honestly so.
* Rank flips: every pair (A, B) with A strictly better than B on the reference and strictly worse in the column.
* Kendall's tau is reported only with three or more models: with two it is +1 or -1 by construction and its
  interval says nothing (None, with the interval [None, None]).
* ``order``: the models best first, ``a = b > c``: equal values are tied and printed ``=``, never ``>``.

Paired differences (``paired``, docs/SCORING.md "Paired model differences"): for every pair of models, A - B of the
metric per column, of its mPC and rPC and of each family's mean relative drop, with the paired bootstrap interval
from the scores' samples files (``aegis_eval.protocols.samples_file``): the same resampled images (whole groups when
the split was clustered) for both models. Holm's adjustment runs over every cell of the document. Models without
samples give cells without intervals (``"status": "unpaired"``); models whose samples were drawn with different
plans (seed, B, images, groups) are refused, since their resample rows are not the same images.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aegis_data.engine.config import load_config
from aegis_data.errors import AegisError
from aegis_eval.metrics.bootstrap import BootstrapOptions, percentile_interval, resample_weights
from aegis_eval.metrics.paired import ALPHA, add_holm, paired_cell, summary_cells
from aegis_eval.metrics.result_keys import AP_METRICS, LOWER_IS_BETTER, THRESHOLD_METRICS
from aegis_eval.metrics.robustness import defined, summarize_robustness, summary_samples
from aegis_eval.protocols.predictions import read_json_file
from aegis_eval.protocols.provenance import check_one_suite
from aegis_eval.protocols.samples_file import PLAN_KEYS, ScoreSamples, read_samples
from aegis_eval.protocols.score_doc import validate_result

RANK_SCHEMA = "aegis-rank/1"
RANK_AXES = ("condition", "version")
RANKABLE_METRICS = AP_METRICS + THRESHOLD_METRICS
# Kendall's tau needs this many models to say anything: with two it is +-1 whatever the data.
MIN_TAU_MODELS = 3


def kendall_tau_b(x: np.ndarray, y: np.ndarray, multiplicity: np.ndarray | None = None) -> float:
    """Kendall's tau-b of paired values (M,), each pair repeated ``multiplicity`` times (default once).

    Counts are over all pairs of the repeated sample: copies of one item are tied in both x and y. Returns NaN
    when a side has no untied pair (tau-b is undefined there).
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    w = np.ones(len(x)) if multiplicity is None else np.asarray(multiplicity, float)
    sx = np.sign(x[:, None] - x[None, :])
    sy = np.sign(y[:, None] - y[None, :])
    pair_weight = np.triu(w[:, None] * w[None, :], k=1)  # distinct items i < j
    concordant_minus_discordant = float(np.sum(pair_weight * sx * sy))
    n = float(w.sum())
    total = n * (n - 1) / 2
    within = float(np.sum(w * (w - 1) / 2))  # pairs of copies: tied in both
    tied_x = float(np.sum(pair_weight * (sx == 0))) + within
    tied_y = float(np.sum(pair_weight * (sy == 0))) + within
    denominator = np.sqrt((total - tied_x) * (total - tied_y))
    return concordant_minus_discordant / denominator if denominator > 0 else float("nan")


def fractional_ranks(values: Sequence[float], lower_is_better: bool) -> list[float]:
    """1 = best; tied values share the mean of the ranks they span."""
    v = np.asarray(values, float)
    key = v if lower_is_better else -v
    order = np.argsort(key, kind="stable")
    ranks = np.empty(len(v))
    k = 0
    while k < len(order):
        end = k
        while end + 1 < len(order) and key[order[end + 1]] == key[order[k]]:
            end += 1
        ranks[order[k : end + 1]] = (k + end) / 2 + 1
        k = end + 1
    out: list[float] = ranks.tolist()
    return out


def tied_order(ranks: Mapping[str, float]) -> str:
    """Models best first, ``a = b > c``: models of one rank (tied values) joined by ``=``, in the given order."""
    groups: list[tuple[float, list[str]]] = []
    for name, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if groups and groups[-1][0] == rank:
            groups[-1][1].append(name)
        else:
            groups.append((rank, [name]))
    return " > ".join(" = ".join(names) for _, names in groups)


def model_labels(results: Sequence[Mapping[str, Any]], files: Sequence[str] | None = None) -> list[str]:
    """A unique name per model: its ``label`` (else the file stem), with ``#k`` added to repeats."""
    base = []
    for k, r in enumerate(results):
        label = r.get("label")
        base.append(str(label) if label else (Path(files[k]).stem if files else f"model{k + 1}"))
    return [b if base.count(b) == 1 else f"{b}#{k + 1}" for k, b in enumerate(base)]


def _columns(result: Mapping[str, Any], metric: str, by: str, condition: str) -> tuple[dict[str, Any], str | None]:
    """({column: value} of one model, the column that is its reference)."""
    if by == "condition":
        conds = result.get("conditions") or {}
        return {c: defined(e.get(metric)) for c, e in conds.items()}, "clean"
    block = result.get("versions")
    if not block:
        raise AegisError(
            "[rank_no_versions] `by` version needs scores written with several `gts` "
            f"(a 'versions' block); {result.get('label')!r} has none",
            param="by",
        )
    row = block["matrix"].get(condition)
    if row is None:
        raise AegisError(
            f"[rank_unknown_condition] {result.get('label')!r} has no condition {condition!r} in its versions matrix"
        )
    return {v: defined(m.get(metric)) for v, m in row.items()}, block["reference"]


def rank_models(
    results: Sequence[Mapping[str, Any]],
    metric: str = "map50",
    *,
    by: str = "condition",
    condition: str = "clean",
    reference: str | None = None,
    bootstrap: BootstrapOptions | None = None,
    labels: Sequence[str] | None = None,
    allow_mixed_suites: bool = False,
    samples: Sequence[ScoreSamples | None] | None = None,
    paired: bool = True,
) -> dict[str, Any]:
    """The ``aegis-rank/1`` document (docs/SCORE_JSON.md) for score results of two or more models.

    by: "condition" (columns are conditions, reference ``clean``) or "version" (columns are the GT versions of
    ``condition`` in cross-version scores, reference the first version). ``reference`` overrides the column.
    Results scored on different suites (aegis-v1, aegis-v2) are refused unless ``allow_mixed_suites``.
    ``samples``: per result its :class:`ScoreSamples` or None, for the paired differences (``paired`` False
    leaves them out: every cell unpaired).
    """
    if len(results) < 2:
        raise AegisError(f"[rank_too_few] ranking needs score files of at least two models; got {len(results)}")
    suite = check_one_suite(results, list(labels) if labels is not None else model_labels(results), allow_mixed_suites)
    if metric not in RANKABLE_METRICS:
        raise AegisError(f"[rank_metric] cannot rank on {metric!r}; expected one of {', '.join(RANKABLE_METRICS)}")
    if by not in RANK_AXES:
        raise AegisError(f"[rank_axis] `by` must be one of {', '.join(RANK_AXES)}; got {by!r}", param="by")
    bootstrap = bootstrap or BootstrapOptions()
    names = list(labels) if labels is not None else model_labels(results)
    per_model, refs = [], []
    for r in results:
        cols, ref = _columns(r, metric, by, condition)
        per_model.append(cols)
        refs.append(ref)
    ref_col = reference or refs[0]
    columns: list[str] = []
    for cols in per_model:
        columns += [c for c in cols if c not in columns]
    if ref_col not in columns:
        raise AegisError(
            f"[rank_no_reference] no model has a {metric} value for the reference {ref_col!r}; columns: {columns[:6]}"
        )
    lower = metric in LOWER_IS_BETTER
    weights = resample_weights(len(names), bootstrap)
    values, ranks, taus, flips = {}, {}, {}, {}
    for col in columns:
        present = [k for k, cols in enumerate(per_model) if cols.get(col) is not None]
        values[col] = {names[k]: per_model[k].get(col) for k in range(len(names))}
        col_ranks = fractional_ranks([per_model[k][col] for k in present], lower)
        ranks[col] = {names[k]: rank for k, rank in zip(present, col_ranks)}
        both = [k for k in present if per_model[k].get(ref_col) is not None]
        sign = -1.0 if lower else 1.0  # tau on "goodness", so the sign reads the same for every metric
        x = sign * np.array([per_model[k][ref_col] for k in both], float)
        y = sign * np.array([per_model[k][col] for k in both], float)
        enough = len(both) >= MIN_TAU_MODELS
        tau = kendall_tau_b(x, y) if enough else float("nan")
        draws = np.array([kendall_tau_b(x, y, w[both]) for w in weights]) if enough else np.array([np.nan])
        lo, hi = percentile_interval(draws, bootstrap.confidence)
        taus[col] = {"tau": None if np.isnan(tau) else float(tau), "ci": [lo, hi], "n_models": len(both)}
        flips[col] = [
            [names[a], names[b]] for i, a in enumerate(both) for j, b in enumerate(both) if x[i] > x[j] and y[i] < y[j]
        ]
    use = list(samples) if samples is not None and paired else [None] * len(results)
    if len(use) != len(results):
        raise AegisError(f"expected one ScoreSamples or None per result ({len(results)}); got {len(use)}")
    config = suite_config(suite)
    return {
        "schema": RANK_SCHEMA,
        "metric": metric,
        "by": by,
        "condition": condition if by == "version" else None,
        "reference": ref_col,
        "models": names,
        "values": values,
        "ranks": ranks,
        "order": {col: tied_order(r) for col, r in ranks.items()},
        "kendall_tau": taus,
        "rank_flips": flips,  # [better on the reference, better in this column]
        "bootstrap": {"n_bootstrap": bootstrap.n_bootstrap, "seed": bootstrap.seed, "resampled": "models"},
        "paired": paired_block(results, names, use, metric, columns if by == "condition" else [], config),
    }


def suite_config(suite: str | None) -> Any:
    """The suite whose families the paired family differences group by: the scores' own suite when it is one this
    toolkit knows, else the default suite (a custom suite's per-family points still come from its documents)."""
    try:
        return load_config(suite) if suite else load_config()
    except AegisError:
        return load_config()


def _check_same_plan(a: ScoreSamples, b: ScoreSamples, name_a: str, name_b: str) -> None:
    if a.fingerprint == b.fingerprint:
        return
    differ = [k for k in PLAN_KEYS if a.plan.get(k) != b.plan.get(k)]
    raise AegisError(
        f"[rank_unpaired_plans] {name_a!r} and {name_b!r} were bootstrapped with different resampling plans "
        f"({', '.join(differ)} differ), so their resamples are not the same images; score both on the same split "
        "with the same `seed`, `n_bootstrap` and `cluster_by`, or leave paired differences out with `paired`",
        param="paired",
    )


def _unpaired_reason(
    sa: ScoreSamples | None, sb: ScoreSamples | None, name_a: str, name_b: str, by_version: bool
) -> str:
    if by_version:
        return "GT-version columns carry no per-model samples"
    missing = [n for n, s in ((name_a, sa), (name_b, sb)) if s is None]
    return f"no samples file for {' and '.join(repr(n) for n in missing)} (scored with B = 1, or its file is absent)"


def paired_block(
    results: Sequence[Mapping[str, Any]],
    names: Sequence[str],
    samples: Sequence[ScoreSamples | None],
    metric: str,
    columns: Sequence[str],
    config: Any,
) -> dict[str, Any]:
    """The rank document's ``paired`` block: per pair of models (A before B in the given order) the paired
    differences A - B of ``metric`` per column, of mPC, rPC and each family's mean relative drop; Holm's
    adjustment over all of them. ``columns``: the condition columns (empty for version columns: every pair
    unpaired). mPC, rPC and the family means of a pair are taken over the conditions both models have, so a
    partial sweep is compared with a full one on the same conditions only."""
    pairs: dict[str, Any] = {}
    cells: list[dict[str, Any]] = []
    conditions = [r.get("conditions") or {} for r in results]

    def summaries(k: int, s: ScoreSamples | None, shared: list[str]) -> tuple[dict[str, Any], Any]:
        point = summarize_robustness({c: conditions[k][c] for c in shared}, config, (metric,))
        if s is None or any(c not in s.samples or metric not in s.samples[c] for c in shared) or not shared:
            return point, None
        return point, summary_samples({c: {metric: s.samples[c][metric]} for c in shared}, config)

    for i in range(len(results)):
        for j in range(i + 1, len(results)):
            sa, sb = samples[i], samples[j]
            both = sa is not None and sb is not None and bool(columns)
            if both and sa is not None and sb is not None:
                _check_same_plan(sa, sb, names[i], names[j])
            entry: dict[str, Any] = {
                "a": names[i],
                "b": names[j],
                "status": "paired" if both else "unpaired",
                "reason": None if both else _unpaired_reason(sa, sb, names[i], names[j], not columns),
            }
            if both and sa is not None:
                entry.update(
                    n_bootstrap=sa.plan["n_bootstrap"],
                    resampling_unit=sa.plan.get("resampling_unit"),
                    n_units=sa.plan.get("n_units"),
                )
            conds: dict[str, Any] = {}
            for col in columns:
                va, vb = (defined(conditions[k].get(col, {}).get(metric)) for k in (i, j))
                xa = sa.samples.get(col, {}).get(metric) if both and sa is not None else None
                xb = sb.samples.get(col, {}).get(metric) if both and sb is not None else None
                conds[col] = paired_cell(va, vb, xa, xb)
            entry["conditions"] = conds
            if not columns:  # GT-version columns: no condition summaries to compare
                entry.update(mpc=None, rpc=None, per_family={})
                pairs[f"{names[i]} - {names[j]}"] = entry
                continue
            shared = [c for c in conditions[i] if c in conditions[j]]
            point_a, resampled_a = summaries(i, sa if both else None, shared)
            point_b, resampled_b = summaries(j, sb if both else None, shared)
            entry.update(summary_cells(point_a, point_b, resampled_a, resampled_b, metric))
            cells += list(conds.values()) + [entry["mpc"], entry["rpc"], *entry["per_family"].values()]
            pairs[f"{names[i]} - {names[j]}"] = entry
    tally = add_holm(cells, ALPHA)
    statuses = {e["status"] for e in pairs.values()}
    return {
        "metric": metric,
        "difference": "a - b",
        "confidence": 0.95,
        "status": statuses.pop() if len(statuses) == 1 else "partial",
        **tally,
        "pairs": pairs,
    }


def load_score_results(paths: Sequence[str | Path]) -> list[dict[str, Any]]:
    """Score JSONs read and checked by the report's validator (one schema check for rank and report):
    AegisError ``[score_schema]`` naming the file and the first problem."""
    out = []
    for p in paths:
        doc, _ = read_json_file(Path(p), "score", "score_")
        out.append(checked_score_result(doc, str(p)))
    return out


def checked_score_result(doc: Any, where: str) -> dict[str, Any]:
    """``doc`` when it is a score document rank can read (the check files get, for documents already in
    memory); AegisError ``[score_schema]`` naming ``where`` and the first problem otherwise."""
    try:
        return validate_result(doc, where, suite_conditions=False)
    except AegisError as exc:
        raise AegisError(f"[score_schema] {exc}") from None


def merge_by_label(
    results: Sequence[Mapping[str, Any]], files: Sequence[str]
) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """One result per label, the conditions of its files merged: a model scored on several domains in
    separate runs (scoring ``iid.json`` on the GT ``iid/`` and ``ood.json`` on ``ood/`` gives conditions
    ``iid`` and ``ood``) becomes one ranking row. A condition in two files of one label is refused."""
    merged: dict[str, dict[str, Any]] = {}
    sources: dict[str, list[str]] = {}
    for r, f in zip(results, files):
        label = str(r.get("label") or Path(f).stem)
        if r.get("versions"):
            raise AegisError(
                f"[rank_merge_versions] {f}: scores with GT versions cannot be merged by label; "
                "rank them with `by` version",
                param="by",
            )
        target = merged.setdefault(label, {"schema": r.get("schema"), "label": label, "conditions": {}})
        clash = sorted(set(target["conditions"]) & set(r["conditions"]))
        if clash:
            raise AegisError(
                f"[rank_duplicate_condition] model {label!r} has condition {clash[0]!r} in both "
                f"{sources[label][0]} and {f}; give the runs different `label` values",
                param="label",
            )
        target["conditions"].update(r["conditions"])
        sources.setdefault(label, []).append(str(f))
    return list(merged.values()), sources


def rank_paths(
    paths: Sequence[str | Path],
    metric: str = "map50",
    *,
    by: str = "condition",
    condition: str = "clean",
    reference: str | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    merge_same_label: bool = False,
    allow_mixed_suites: bool = False,
    paired: bool = True,
) -> dict[str, Any]:
    """:func:`rank_models` of score JSON files, with the files recorded and each file's samples file (beside it,
    ``aegis_eval.protocols.samples_file``) for the paired differences. ``merge_same_label``: files with one
    label are one model (:func:`merge_by_label`; its samples pair only when all its files share one resampling
    plan); otherwise repeated labels get ``#k``."""
    results = load_score_results(paths)
    files = [str(p) for p in paths]
    check_one_suite(results, files, allow_mixed_suites)  # before merging: a label's files may mix suites too
    samples = [read_samples(p, r) for p, r in zip(paths, results)] if paired else [None] * len(results)
    if merge_same_label:
        by_file = dict(zip(files, samples))
        results, sources = merge_by_label(results, files)
        labels = [r["label"] for r in results]
        samples = [_merged_samples([by_file[f] for f in sources[label]]) for label in labels]
    else:
        labels = model_labels(results, files)
        sources = {name: [f] for name, f in zip(labels, files)}
    doc = rank_models(
        results,
        metric,
        by=by,
        condition=condition,
        reference=reference,
        bootstrap=BootstrapOptions(n_bootstrap=bootstrap, seed=seed),
        labels=labels,
        allow_mixed_suites=allow_mixed_suites,
        samples=samples,
        paired=paired,
    )
    doc["files"] = sources
    return doc


def _merged_samples(parts: Sequence[ScoreSamples | None]) -> ScoreSamples | None:
    """One label's samples over its files: their conditions together when every file has samples drawn with one
    plan, else None (resample b of two plans is not one draw of images)."""
    if any(p is None for p in parts) or len({p.fingerprint for p in parts if p is not None}) != 1:
        return None
    merged: dict[str, Any] = {}
    for p in parts:
        if p is not None:
            merged.update(p.samples)
    first = parts[0]
    return None if first is None else ScoreSamples(first.plan, merged)
