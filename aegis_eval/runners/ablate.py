"""The mitigation ablation: one model per augmentation policy plus the clean-trained baseline, same settings and
seed, each swept over every condition with its own frozen threshold, then compared pairwise with the baseline.

Output folder (one training seed, the default)::

    OUT/<name>/run/            # the training run (``train_baseline``); <name> = "clean" or the policy name
    OUT/<name>/results/        # the sweep (val/, threshold.json frozen on this model's clean val, predictions/)
    OUT/scores/<name>.json     # score JSON (aegis-score/1) + provenance.augment + "mitigation" (gains vs clean)
    OUT/ablation.json          # what ran: policies, hashes, thresholds, paths, headline gains

With several training seeds (``seeds``), every (model, seed) pair has its own folders and score::

    OUT/<name>/seed-<k>/run/, OUT/<name>/seed-<k>/results/
    OUT/scores/seed-<k>/<name>.json   # that seed's model, its mitigation block paired with clean seed k
    OUT/scores/<name>.json            # the first seed's model; its mitigation block combines every seed
                                      # (per-seed gains, between-seed SD, two-level bootstrap interval)

``init`` fine-tunes every model, the clean baseline included, from one local checkpoint; its path and SHA-256
go into ablation.json and into ``provenance.init`` of every score.

Every stage resumes: finished trainings, predictions and thresholds are reused, so an interrupted ablation
continues where it stopped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from aegis_data.augment.transform import AugmentPolicy, load_policy
from aegis_data.errors import AegisError
from aegis_data.files.imageio import write_bytes_atomic
from aegis_data.files.outputs import check_name_component
from aegis_eval.metrics.bootstrap import BootstrapOptions
from aegis_eval.protocols.predictions import load_ground_truth, load_predictions
from aegis_eval.protocols.scoring import prediction_files, write_score_json
from aegis_eval.protocols.threshold import DEFAULT_RULE, read_threshold_file
from aegis_eval.runners.config import MAX_TRAINING_SEED
from aegis_eval.runners.predict import PredictSettings
from aegis_eval.runners.sweep import THRESHOLD_FILE, run_sweep
from aegis_eval.runners.train import TrainSettings, train_baseline

CLEAN = "clean"
ABLATION_FILE = "ablation.json"
SCORES_DIR = "scores"
RESERVED = (SCORES_DIR, ABLATION_FILE)  # the ablation folder's own entries: no policy may be named like them


def parse_policies(spec: str | Sequence[str], suite: str | None = None) -> list[AugmentPolicy]:
    """``"all,loo-flood"`` (names or yaml paths) -> policies; AegisError for an unknown or repeated one.
    ``suite``: the suite policies that name none render with (default aegis-v2)."""
    items = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if str(s).strip()]
    if not items:
        raise AegisError(
            "no policies given: pass `policies` all,loo-flood,... (names in configs/augment)", param="policies"
        )
    policies = [load_policy(s, suite) for s in items]
    for p in policies:  # each name becomes OUT/<name>/ and OUT/scores/<name>.json
        check_name_component(p.name, "policy name", RESERVED)
    names = [p.name for p in policies]
    dup = next((n for n in names if names.count(n) > 1 or n == CLEAN), None)
    if dup is not None:
        why = "is the baseline's name" if dup == CLEAN else "is given twice"
        raise AegisError(f"policy name {dup!r} {why}; every policy needs its own name")
    return policies


def parse_seeds(spec: str | Sequence[int]) -> list[int]:
    """``"0,1,2"`` -> [0, 1, 2]; AegisError for an empty, negative, non-integer or repeated seed."""
    items = [str(s).strip() for s in (spec.split(",") if isinstance(spec, str) else spec)]
    items = [s for s in items if s]
    if not items:
        raise AegisError("no training seeds given: pass `seeds` 0,1,2", param="seeds")
    bad = next((s for s in items if not (s.isascii() and s.isdigit())), None)  # isdigit alone takes "²"
    if bad is not None:
        raise AegisError(
            f"training seed {bad!r} is invalid; expected non-negative integers such as `seeds` 0,1,2", param="seeds"
        )
    seeds = [int(s) for s in items]
    big = next((s for s in seeds if s > MAX_TRAINING_SEED), None)
    if big is not None:
        raise AegisError(
            f"training seed {big} is too large; expected integers in [0, {MAX_TRAINING_SEED}] (NumPy "
            f"and the trainers take 32-bit seeds)"
        )
    dup = next((s for s in seeds if seeds.count(s) > 1), None)
    if dup is not None:
        raise AegisError(f"training seed {dup} is given twice; every seed trains its own models")
    return seeds


def init_record(model: str, init: str | Path) -> dict[str, Any]:
    """The provenance of a fine-tuning start point: a local checkpoint file (never a name that downloads)."""
    from aegis_data.files.imageio import file_sha256
    from aegis_eval.runners import resolve_weights
    from aegis_eval.runners.augment_hooks import augment_record_for_weights

    path = Path(init).expanduser()
    if not path.is_file():
        raise AegisError(
            f"`init` {init}: not a local checkpoint file (train one with `aegis baseline train`, docs/MITIGATION.md)",
            param="init",
        )
    # The absolute path: a file called "none" is that file, never Faster R-CNN's random initialisation.
    resolved = str(path.resolve())
    resolve_weights(model, resolved)  # refuses what the model cannot load
    augment = augment_record_for_weights(resolved)
    return {
        "path": resolved,
        "sha256": file_sha256(Path(resolved)),
        "augment": None if augment is None else {k: augment.get(k) for k in ("name", "hash", "seed")},
    }


def _prefixed(say: Callable[[str, str], None], tag: str) -> Callable[[str, str], None]:
    """``say`` with each stage named under ``tag``."""
    return lambda stage, status: say(f"{tag}/{stage}", status)


def _predictions(results: Path, gt) -> dict:
    return {c: load_predictions(p, gt) for c, p in prediction_files(results / "predictions").items()}


def run_ablation(  # noqa: C901 (predates the limit; split it when it next changes)
    train: TrainSettings,
    predict: PredictSettings,
    split_dir: str | Path,
    out_dir: str | Path,
    policies: Sequence[AugmentPolicy],
    *,
    bootstrap: int = 1000,
    seed: int = 0,
    rule: str = DEFAULT_RULE,
    label: str | None = None,
    conditions: str = "all",
    init: str | Path | None = None,
    seeds: Sequence[int] | None = None,
    progress: Callable[[str, str], None] | None = None,
    log: Callable[[str], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Train, sweep and compare ``[clean] + policies``; returns the ablation record (also OUT/ablation.json).

    ``predict.weights`` is ignored: each sweep uses the best weights of its own training run.
    init: a local checkpoint every model (the clean baseline too) is fine-tuned from, instead of
        ``train.weights``. seeds: training seeds, one model per (policy, seed) and per-seed folders; None trains
        once with ``train.seed`` in the single-seed layout. ``seed`` keys the bootstrap draws only.
    """
    from aegis_eval.protocols.mitigation import combined_gains, paired_gains, score_model

    if not policies:
        raise AegisError("the ablation needs at least one augmentation policy besides the clean baseline")
    for p in policies:  # before any work: each name becomes a folder and a file name under out_dir
        check_name_component(p.name, "policy name", (*RESERVED, CLEAN))
    split, out = Path(split_dir), Path(out_dir)
    if out.exists() and not out.is_dir():
        raise AegisError(f"`out_dir` {out} exists and is not a folder", param="out_dir")
    multi = seeds is not None
    seed_list = parse_seeds(seeds) if seeds is not None else [train.seed]
    start = init_record(train.model, init) if init is not None else None
    if start is not None:
        train = replace(train, weights=start["path"])
    if train.model != "fasterrcnn" and train.weights is not None:  # refused before any stage starts
        from aegis_eval.runners.checkpoints import check_ultralytics_weights

        check_ultralytics_weights(train.weights)
    base_label = label or train.model
    say = progress or (lambda stage, status: None)
    models = [(CLEAN, None)] + [(p.name, p) for p in policies]
    entries: dict[tuple[str, int], dict[str, Any]] = {}
    scores: dict[tuple[str, int], dict[str, Any]] = {}
    for s in seed_list:  # seed by seed: a stopped study already holds complete seeds
        for name, policy in models:
            folder = out / name / f"seed-{s}" if multi else out / name
            tag = f"{name}/seed-{s}" if multi else name
            run = folder / "run"
            say(f"{tag}/train", "started")
            trained = train_baseline(replace(train, seed=s), split, run, log=log, augment=policy)
            say(f"{tag}/train", trained["status"])
            results = folder / "results"
            sweep = run_sweep(
                replace(predict, weights=trained["best"]),
                split,
                results,
                bootstrap=bootstrap,
                seed=seed,
                rule=rule,
                label=f"{base_label}/{tag}",
                conditions=conditions,
                progress=_prefixed(say, tag),
                on_warning=on_warning,
            )
            sweep["provenance"].setdefault("augment", None)  # run_sweep records a policy run's from RUN/augment.json
            if multi:
                sweep["provenance"]["training_seed"] = s
            if start is not None:
                sweep["provenance"]["init"] = start
            threshold, _ = read_threshold_file(results / THRESHOLD_FILE)
            scores[(name, s)] = sweep
            score_path = out / SCORES_DIR / (f"seed-{s}/{name}.json" if multi else f"{name}.json")
            entries[(name, s)] = {
                "policy": None if policy is None else policy.record(),
                "run": str(run),
                "results": str(results),
                "best": trained["best"],
                "threshold": threshold,
                "score": str(score_path),
            }

    gt = load_ground_truth(split, "test")
    options = BootstrapOptions(n_bootstrap=bootstrap, seed=seed)

    def scored(name: str, s: int):
        return score_model(
            gt,
            _predictions(Path(entries[(name, s)]["results"]), gt),
            entries[(name, s)]["threshold"],
            bootstrap=options,
            iou=scores[(name, s)]["iou"],
        )

    iou = scores[(CLEAN, seed_list[0])]["iou"]
    baselines = {s: scored(CLEAN, s) for s in seed_list}  # once per seed, shared by every policy's comparison
    summary: dict[str, Any] = {}
    combined: dict[str, dict[str, Any]] = {}
    for policy in policies:
        name = policy.name
        pairs = []
        for s in seed_list:
            say(f"{name}/seed-{s}/gains" if multi else f"{name}/gains", "paired bootstrap vs clean")
            model = scored(name, s)
            gains = paired_gains(baselines[s], model, trained=policy.trained_conditions, iou=iou)
            gains["baseline_label"] = scores[(CLEAN, s)]["label"]
            gains["policy"] = {"name": name, "hash": policy.hash}
            scores[(name, s)]["mitigation"] = gains
            pairs.append((s, baselines[s], model))
        gains = scores[(name, seed_list[0])]["mitigation"]
        if multi:
            say(f"{name}/gains", f"combined over seeds {','.join(map(str, seed_list))}")
            gains = combined_gains(pairs, trained=policy.trained_conditions, iou=iou)
            gains["baseline_label"] = f"{base_label}/{CLEAN}"
            gains["policy"] = {"name": name, "hash": policy.hash}
            combined[name] = gains
        summary[name] = {m: {k: gains[k].get(m) for k in ("mpc", "rpc", "seen", "unseen")} for m in gains["metrics"]}
    for key, result in scores.items():
        write_score_json(result, Path(entries[key]["score"]))
    runs: dict[str, Any] = {}
    for name, policy in models:
        if not multi:
            runs[name] = entries[(name, seed_list[0])]
            continue
        # The top-level score: the first seed's model under the combined label, with the combined gains.
        first = {**scores[(name, seed_list[0])], "label": f"{base_label}/{name}"}
        if name in combined:
            first["mitigation"] = combined[name]
        top = out / SCORES_DIR / f"{name}.json"
        write_score_json(first, top)
        runs[name] = {
            "policy": None if policy is None else policy.record(),
            "score": str(top),
            "threshold": [entries[(name, s)]["threshold"] for s in seed_list],
            "seeds": {str(s): entries[(name, s)] for s in seed_list},
        }
    settings: dict[str, Any] = {
        "model": train.model,
        "weights": train.weights,
        "epochs": train.epochs,
        "imgsz": train.imgsz,
        "batch": train.batch,
        "seed": train.seed,
    }
    if multi:
        settings["seeds"] = seed_list
    if start is not None:
        settings["init"] = start
    record = {
        "schema": "aegis-ablation/1",
        "split": str(split.resolve()),
        "label": base_label,
        "settings": settings,
        "bootstrap": {"n_bootstrap": bootstrap, "seed": seed},
        "runs": runs,
        "gains": summary,
    }
    write_bytes_atomic(out / ABLATION_FILE, (json.dumps(record, indent=2, sort_keys=False) + "\n").encode())
    return record
