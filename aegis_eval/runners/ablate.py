"""The mitigation ablation: one model per augmentation policy plus the clean-trained baseline, same settings and
seed, each swept over every condition with its own frozen threshold, then compared pairwise with the baseline.

Output folder::

    OUT/<name>/run/            # the training run (``train_baseline``); <name> = "clean" or the policy name
    OUT/<name>/results/        # the sweep (val/, threshold.json frozen on this model's clean val, predictions/)
    OUT/scores/<name>.json     # score JSON (aegis-score/1) + provenance.augment + "mitigation" (gains vs clean)
    OUT/ablation.json          # what ran: policies, hashes, thresholds, paths, headline gains

Every stage resumes: finished trainings, predictions and thresholds are reused, so an interrupted ablation
continues where it stopped.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

from aegis_data.augment.transform import AugmentPolicy, load_policy
from aegis_data.errors import AegisError
from aegis_data.files.imageio import write_bytes_atomic
from aegis_eval.metrics.bootstrap import BootstrapOptions
from aegis_eval.protocols.predictions import load_ground_truth, load_predictions
from aegis_eval.protocols.scoring import prediction_files, write_score_json
from aegis_eval.protocols.threshold import DEFAULT_RULE, read_threshold_file
from aegis_eval.runners.predict import PredictSettings
from aegis_eval.runners.sweep import THRESHOLD_FILE, run_sweep
from aegis_eval.runners.train import TrainSettings, train_baseline

CLEAN = "clean"
ABLATION_FILE = "ablation.json"
SCORES_DIR = "scores"


def parse_policies(spec: str | Sequence[str]) -> list[AugmentPolicy]:
    """``"all,loo-flood"`` (names or yaml paths) -> policies; AegisError for an unknown or repeated one."""
    items = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if str(s).strip()]
    if not items:
        raise AegisError("no policies given: pass --policies all,loo-flood,... (names in configs/augment)")
    policies = [load_policy(s) for s in items]
    names = [p.name for p in policies]
    dup = next((n for n in names if names.count(n) > 1 or n == CLEAN), None)
    if dup is not None:
        why = "is the baseline's name" if dup == CLEAN else "is given twice"
        raise AegisError(f"policy name {dup!r} {why}; every policy needs its own name")
    return policies


def _predictions(results: Path, gt) -> dict:
    return {c: load_predictions(p, gt) for c, p in prediction_files(results / "predictions").items()}


def run_ablation(train: TrainSettings, predict: PredictSettings, split_dir: str | Path, out_dir: str | Path,
                 policies: Sequence[AugmentPolicy], *, bootstrap: int = 1000, seed: int = 0,
                 rule: str = DEFAULT_RULE, label: str | None = None, conditions: str = "all",
                 progress: Callable[[str, str], None] | None = None,
                 log: Callable[[str], None] | None = None,
                 on_warning: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Train, sweep and compare ``[clean] + policies``; returns the ablation record (also OUT/ablation.json).

    ``predict.weights`` is ignored: each sweep uses the best weights of its own training run.
    """
    from aegis_eval.protocols.mitigation import paired_gains, score_model

    if not policies:
        raise AegisError("the ablation needs at least one augmentation policy besides the clean baseline")
    split, out = Path(split_dir), Path(out_dir)
    if out.exists() and not out.is_dir():
        raise AegisError(f"--out {out} exists and is not a folder")
    base_label = label or train.model
    say = progress or (lambda stage, status: None)
    entries: dict[str, dict[str, Any]] = {}
    scores: dict[str, dict[str, Any]] = {}
    for name, policy in [(CLEAN, None)] + [(p.name, p) for p in policies]:
        run = out / name / "run"
        say(f"{name}/train", "started")
        trained = train_baseline(train, split, run, log=log, augment=policy)
        say(f"{name}/train", trained["status"])
        results = out / name / "results"
        sweep = run_sweep(replace(predict, weights=trained["best"]), split, results, bootstrap=bootstrap,
                          seed=seed, rule=rule, label=f"{base_label}/{name}", conditions=conditions,
                          progress=lambda stage, status, n=name: say(f"{n}/{stage}", status), on_warning=on_warning)
        sweep["provenance"].setdefault("augment", None)  # run_sweep records a policy run's from RUN/augment.json
        threshold, _ = read_threshold_file(results / THRESHOLD_FILE)
        scores[name] = sweep
        entries[name] = {"policy": None if policy is None else policy.record(), "run": str(run),
                         "results": str(results), "best": trained["best"], "threshold": threshold,
                         "score": str(out / SCORES_DIR / f"{name}.json")}

    gt = load_ground_truth(split, "test")
    options = BootstrapOptions(n_bootstrap=bootstrap, seed=seed)
    iou = scores[CLEAN]["iou"]
    baseline = score_model(gt, _predictions(Path(entries[CLEAN]["results"]), gt), entries[CLEAN]["threshold"],
                           bootstrap=options, iou=iou)  # once, shared by every policy's comparison
    summary: dict[str, Any] = {}
    for policy in policies:
        name = policy.name
        say(f"{name}/gains", "paired bootstrap vs clean")
        scored = score_model(gt, _predictions(Path(entries[name]["results"]), gt), entries[name]["threshold"],
                             bootstrap=options, iou=scores[name]["iou"])
        gains = paired_gains(baseline, scored, trained=policy.trained_conditions, iou=iou)
        gains["baseline_label"] = scores[CLEAN]["label"]
        gains["policy"] = {"name": name, "hash": policy.hash}
        scores[name]["mitigation"] = gains
        summary[name] = {m: {k: gains[k].get(m) for k in ("mpc", "rpc", "seen", "unseen")} for m in gains["metrics"]}
    for name, result in scores.items():
        write_score_json(result, Path(entries[name]["score"]))
    record = {"schema": "aegis-ablation/1", "split": str(split.resolve()), "label": base_label,
              "settings": {"model": train.model, "weights": train.weights, "epochs": train.epochs,
                           "imgsz": train.imgsz, "batch": train.batch, "seed": train.seed},
              "bootstrap": {"n_bootstrap": bootstrap, "seed": seed}, "runs": entries, "gains": summary}
    write_bytes_atomic(out / ABLATION_FILE, (json.dumps(record, indent=2, sort_keys=False) + "\n").encode())
    return record
