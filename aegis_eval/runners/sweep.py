"""The whole baseline protocol in one call (docs/BASELINES.md, docs/SCORING.md): predict clean val → freeze the
threshold once → predict all test conditions → score with bootstrap intervals.

Results folder::

    RESULTS/val/clean.json, RESULTS/val/run.json      # clean validation predictions
    RESULTS/threshold.json                            # frozen once; reused on every re-run
    RESULTS/predictions/<condition>.json, run.json    # the 28 test conditions
    RESULTS/score.json, RESULTS/score.csv             # schema aegis-score/1

Every stage is resumable: predictions skip finished conditions, and an existing threshold file is reused as
long as it was frozen on the same validation predictions and GT (else it is refused unless ``force``, which
re-freezes and re-predicts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from aegis_data.errors import AegisError
from aegis_data.files.imageio import file_sha256
from aegis_data.files.layout import annotation_path
from aegis_eval.protocols.predictions import load_ground_truth, load_predictions
from aegis_eval.protocols.samples_file import samples_bytes, score_samples, with_samples_hash, write_samples
from aegis_eval.protocols.scoring import ScoreOptions, score, write_score_csv, write_score_json
from aegis_eval.protocols.threshold import DEFAULT_RULE, freeze_threshold, read_threshold_file, write_threshold_file
from aegis_eval.runners.augment_hooks import augment_record_for_weights
from aegis_eval.runners.predict import LazyDetector, PredictSettings, predict_split

THRESHOLD_FILE = "threshold.json"


def freeze_or_reuse_threshold(
    val_preds: Path, split_dir: Path, path: Path, *, rule: str = DEFAULT_RULE, force: bool = False
) -> tuple[float, str]:
    """Return (threshold, status): "frozen" or "reused", followed by the file's warnings (e.g. a threshold on
    the edge of the grid), so the progress line names them. An existing file is reused only if it was frozen
    on these exact validation predictions and GT with the same rule; otherwise AegisError unless ``force``."""
    gt_file = annotation_path(split_dir, "val")
    if path.is_file() and not force:
        value, info = read_threshold_file(path)
        recorded_preds = (info.get("predictions") or {}).get("sha256")
        recorded_gt = (info.get("gt") or {}).get("sha256")
        if recorded_preds != file_sha256(val_preds) or recorded_gt != file_sha256(gt_file) or info.get("rule") != rule:
            raise AegisError(
                f"{path} was frozen on different inputs (validation predictions, GT or rule differ); "
                f"keep it by restoring those inputs, or pass `force` to freeze a new threshold",
                param="force",
            )
        return value, _status("reused", info.get("warnings"))
    gt = load_ground_truth(split_dir, "val")
    frozen = freeze_threshold(gt, load_predictions(val_preds, gt), rule=rule)
    write_threshold_file(frozen, path, val_preds, split_dir, split="val")
    return frozen.value, _status("frozen", frozen.warnings)


def _status(how: str, warnings) -> str:
    notes = [str(w) for w in warnings or ()]
    return how + "".join(f"; warning: {w}" for w in notes)


def run_sweep(
    settings: PredictSettings,
    split_dir: str | Path,
    results_dir: str | Path,
    *,
    bootstrap: int = 1000,
    seed: int = 0,
    rule: str = DEFAULT_RULE,
    label: str | None = None,
    conditions: str = "all",
    force: bool = False,
    detector=None,
    progress: Callable[[str, str], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the protocol; return the score result (also written to RESULTS/score.json and score.csv).

    ``settings.split_name`` is ignored: validation uses ``val``, the sweep ``test``. The detector is loaded at
    most once (lazily, only when something must be predicted) and shared by both prediction stages.
    """
    split = Path(split_dir)
    out = Path(results_dir)
    if out.exists() and not out.is_dir():
        raise AegisError(f"`results_dir` {out} exists and is not a folder", param="results_dir")
    if bootstrap < 1:
        raise AegisError(f"`bootstrap` must be >= 1 resamples, got {bootstrap}", param="bootstrap")
    out.mkdir(parents=True, exist_ok=True)
    lazy = LazyDetector(settings, detector)  # loaded at most once, shared by the val and test stages

    def stage(name: str) -> Callable[[str, str], None]:
        def report(cond: str, status: str) -> None:
            if progress:
                progress(f"{name}/{cond}", status)

        return report

    predict_split(
        replace(settings, split_name="val"),
        split,
        out / "val",
        conditions="clean",
        force=force,
        detector=lazy,
        progress=stage("val"),
    )
    value, how = freeze_or_reuse_threshold(
        out / "val" / "clean.json", split, out / THRESHOLD_FILE, rule=rule, force=force
    )
    if progress:
        progress(f"threshold {value:g}", how)
    predict_split(
        replace(settings, split_name="test"),
        split,
        out / "predictions",
        conditions=conditions,
        force=force,
        detector=lazy,
        progress=stage("test"),
    )

    options = ScoreOptions(
        threshold_file=out / THRESHOLD_FILE,
        bootstrap=bootstrap,
        seed=seed,
        label=label or settings.model,
        split="test",
        on_warning=on_warning,
    )
    scored = score(out / "predictions", split, options)
    result = scored.result
    record = augment_record_for_weights(settings.weights)
    if record is not None:  # a model trained with an augmentation policy: its policy and hash go into every score
        result["provenance"]["augment"] = record
    # The per-resample values beside score.json, so `rank` and the report can pair this model with another.
    samples = score_samples(scored.samples, scored.image_ids, scored.clusters, result)
    if samples is not None:
        data = samples_bytes(samples)
        result = with_samples_hash(result, data)
        write_samples(data, out / "score.json")
    write_score_json(result, out / "score.json")
    write_score_csv(result, out / "score.csv")
    return result
