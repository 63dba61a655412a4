"""Mitigation tables of the report: augmentation policies against the clean-trained model.

A run takes part when its score JSON carries a ``mitigation`` block (written by ``aegis baseline ablate``:
paired-bootstrap gains over the clean-trained model, ``aegis_eval.protocols.mitigation``). The tables read the gains for
the report metric when the block has them (recall and map50 by default) and are empty otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aegis_data.conditions import parse_condition
from aegis_eval.report.results import DatasetGroup, Run
from aegis_eval.report.tables import MISSING, UNDEFINED, Table


def _block(run: Run) -> Mapping[str, Any] | None:
    block = run.result.get("mitigation")
    return block if isinstance(block, Mapping) else None


def mitigation_runs(group: DatasetGroup, metric: str) -> list[tuple[Run, Mapping[str, Any]]]:
    out = []
    for run in group.runs:
        block = _block(run)
        if block is not None and metric in (block.get("metrics") or ()):
            out.append((run, block))
    return out


def _gain(g: Any) -> str:
    if not isinstance(g, Mapping) or g.get("gain") is None:
        return UNDEFINED
    lo, hi = (g.get("ci") or [None, None])[:2]
    ci = f" [{lo:+.3f}, {hi:+.3f}]" if lo is not None and hi is not None else ""
    return f"{g['gain']:+.3f}{ci}"


def _value(g: Any, key: str) -> str:
    v = g.get(key) if isinstance(g, Mapping) else None
    return UNDEFINED if v is None else f"{v:.3f}"


def fmt_threshold(value: Any) -> str:
    """One frozen threshold, or one per training seed (``a/b/c``) for a multi-seed block."""
    if isinstance(value, (list, tuple)):
        return "/".join(f"{v:g}" for v in value)
    return f"{value if value is not None else float('nan'):g}"


def _policy(run: Run) -> Mapping[str, Any]:
    aug = (run.result.get("provenance") or {}).get("augment")
    return aug if isinstance(aug, Mapping) else {}


def gains_table(group: DatasetGroup, metric: str) -> Table:
    """Per policy: its threshold, clean / mPC / rPC of both models and the paired gains with 95% CIs."""
    rows = []
    for run, b in mitigation_runs(group, metric):
        pol = _policy(run)
        clean = (b.get("conditions") or {}).get("clean", {}).get(metric)
        mpc, rpc = (b.get("mpc") or {}).get(metric), (b.get("rpc") or {}).get(metric)
        thr = b.get("thresholds") or {}
        rows.append(
            (
                run.label,
                str(pol.get("hash", MISSING)),
                fmt_threshold(thr.get("policy")),
                _value(clean, "policy"),
                _gain(clean),
                _value(mpc, "policy"),
                _gain(mpc),
                _value(rpc, "policy"),
                _gain(rpc),
            )
        )
    baseline = next((b.get("baseline_label") for _, b in mitigation_runs(group, metric)), None)
    thr = next(((b.get("thresholds") or {}).get("baseline") for _, b in mitigation_runs(group, metric)), None)
    notes = (
        (
            f"Gains are policy − {baseline} (threshold {fmt_threshold(thr)}, frozen on its own clean val), paired "
            "over the same bootstrap resamples of test images; each policy's threshold was re-frozen on clean "
            "val for that model.",
        )
        if baseline is not None and thr is not None
        else ()
    )
    return Table(
        f"Mitigation: gain over the clean-trained model ({metric})",
        (
            "policy run",
            "policy hash",
            "threshold",
            f"clean {metric}",
            "Δ clean [95% CI]",
            "mPC",
            "Δ mPC [95% CI]",
            "rPC",
            "Δ rPC [95% CI]",
        ),
        tuple(rows),
        ("l", "l") + ("r",) * 7,
        notes=notes,
    )


def seen_unseen_table(group: DatasetGroup, metric: str) -> Table:
    """Mean gain over the corrupted conditions each policy trained on vs those it never saw."""
    rows = []
    for run, b in mitigation_runs(group, metric):
        seen, unseen = (b.get("seen") or {}).get(metric), (b.get("unseen") or {}).get(metric)
        rows.append(
            (
                run.label,
                str(len(b.get("seen_conditions") or ())),
                _gain(seen),
                str(len(b.get("unseen_conditions") or ())),
                _gain(unseen),
            )
        )
    return Table(
        f"Mitigation: seen vs unseen conditions (mean Δ {metric})",
        ("policy run", "seen", "Δ seen [95% CI]", "unseen", "Δ unseen [95% CI]"),
        tuple(rows),
        ("l", "r", "r", "r", "r"),
        notes=(
            "Seen = corrupted conditions the policy draws in training; unseen = the rest "
            "(a left-out family, a held-out severity).",
        ),
    )


def side_effect_table(group: DatasetGroup, metric: str) -> Table:
    """The change on every condition a policy did not train on: mean, worst cell, cells worse than the margin."""
    rows, margin = [], None
    for run, b in mitigation_runs(group, metric):
        side = (b.get("side_effects") or {}).get(metric) or {}
        margin = side.get("margin", margin)
        worst = side.get("worst") or {}
        mean = side.get("mean_gain")
        rows.append(
            (
                run.label,
                str(side.get("n_conditions", 0)),
                UNDEFINED if mean is None else f"{mean:+.3f}",
                f"{worst['condition']} ({worst['gain']:+.3f})" if worst else UNDEFINED,
                str(side.get("n_worse", 0)),
            )
        )
    worse = f"worse by > {margin:g}" if margin is not None else "worse"
    return Table(
        f"Mitigation: side effects on untrained conditions (Δ {metric})",
        ("policy run", "untrained conditions", "mean Δ", "worst cell", f"cells {worse}"),
        tuple(rows),
        ("l", "r", "r", "l", "r"),
    )


def condition_gain_table(group: DatasetGroup, metric: str) -> Table:
    """Δ metric per condition and policy; ``*`` marks a condition the policy did not train on."""
    runs = mitigation_runs(group, metric)
    conds: list[str] = []
    for _, b in runs:
        conds += [c for c in (b.get("conditions") or {}) if c not in conds]
    rows = []
    for c in conds:
        cells = []
        for _, b in runs:
            g = (b.get("conditions") or {}).get(c, {}).get(metric)
            mark = "*" if c in (b.get("unseen_conditions") or ()) else ""
            cells.append(MISSING if g is None else _gain(g) + mark)
        rows.append((c, *cells))
    return Table(
        f"Mitigation: Δ {metric} per condition (* = not trained on)",
        ("condition", *(r.label for r, _ in runs)),
        tuple(rows),
        ("l",) + ("r",) * len(runs),
    )


def _held_out(block: Mapping[str, Any]) -> list[str]:
    """Unseen conditions whose corruption the policy trains at another severity (a held-out severity)."""
    trained = {parse_condition(c)[0] for c in block.get("seen_conditions") or ()} - {None}
    return [c for c in block.get("unseen_conditions") or () if parse_condition(c)[0] in trained]


def seed_table(group: DatasetGroup, metric: str) -> Table | None:
    """Per training seed: the gain on clean, mPC, seen, unseen and every held-out severity; the between-seed SD
    and the combined interval (seeds, then images). None when no block was trained with several seeds."""
    runs = [(r, b) for r, b in mitigation_runs(group, metric) if b.get("seeds")]
    if not runs:
        return None
    n = max(len(b["seeds"]) for _, b in runs)
    rows = []
    for run, b in runs:
        picks = [("clean", (b.get("conditions") or {}).get("clean", {}).get(metric))]
        picks += [
            (what, (b.get(k) or {}).get(metric))
            for k, what in (("mpc", "mPC"), ("seen", "seen (mean)"), ("unseen", "unseen (mean)"))
        ]
        picks += [(c, (b.get("conditions") or {}).get(c, {}).get(metric)) for c in _held_out(b)]
        for what, g in picks:
            if not isinstance(g, Mapping) or not g.get("seeds"):
                continue
            per = [UNDEFINED if x.get("gain") is None else f"{x['gain']:+.3f}" for x in g["seeds"]]
            sd = g.get("seed_sd")
            rows.append(
                (
                    run.label,
                    what,
                    *per,
                    *([MISSING] * (n - len(per))),
                    UNDEFINED if sd is None else f"{sd:.3f}",
                    _gain(g),
                )
            )
    lists = {tuple(b["seeds"]) for _, b in runs}
    seeds = [f"seed {s}" for s in next(iter(lists))] if len(lists) == 1 else [f"seed #{i + 1}" for i in range(n)]
    return Table(
        f"Mitigation: per training seed (Δ {metric})",
        ("policy run", "Δ of", *seeds, "seed SD", "combined Δ [95% CI]"),
        tuple(rows),
        ("l", "l") + ("r",) * (n + 2),
        notes=(
            "Each seed's Δ pairs the policy model with the clean model of the same training seed; "
            "the combined Δ is their mean and its interval a two-level bootstrap (training seeds, then "
            "test images with shared weights), so it includes training noise.",
        ),
    )


def mitigation_tables(group: DatasetGroup, metric: str) -> list[Table]:
    """Every mitigation table for the group, or [] when no run carries gains for ``metric``."""
    if not mitigation_runs(group, metric):
        return []
    seeded = seed_table(group, metric)
    return [
        gains_table(group, metric),
        *([seeded] if seeded is not None else []),
        seen_unseen_table(group, metric),
        side_effect_table(group, metric),
        condition_gain_table(group, metric),
    ]
