"""What `aegis score` does once its options are read (by Typer, or by cli/plain_score.py for a plain line):
score, write the files, print. Importing this module loads neither Typer nor Rich nor NumPy; the predictions file
is read on a thread while the scorer loads, and Rich is imported only to draw the tables on a terminal
(cli/plain_tables.py writes them elsewhere)."""

from __future__ import annotations

from pathlib import Path

from aegis_data.api import check_outputs
from aegis_data.errors import AegisError

from .common import warn
from .modes import CrossCheck, RemapSide, SplitName, Task, value


def run_score(
    preds: Path,
    gt: list[Path],
    *,
    threshold: float | None = None,
    threshold_file: Path | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    iou: float = 0.5,
    cluster_by: str | None = None,
    label: str | None = None,
    split: SplitName = SplitName.test,
    json_out: Path | None = None,
    csv_out: Path | None = None,
    classes: str | None = None,
    class_map: str | None = None,
    remap_side: RemapSide = RemapSide.gt,
    allow_merge: bool = False,
    remap_version: list[int] | None = None,
    task: Task = Task.detection,
    cross_check: CrossCheck | None = None,
) -> None:
    """`aegis score` with its options as score_cmd (cli/scoring.py) receives them; the defaults are its."""
    from aegis_eval.api import read_ahead_predictions, score

    if value(task) == "detection" and classes is None and class_map is None:
        read_ahead_predictions(preds)  # bytes, hash and columns on a thread while NumPy and the scorer import
    task, split, cross_check = value(task), value(split), value(cross_check)
    inputs = [preds, *gt, threshold_file, *(Path(v) for v in (cluster_by, class_map) if v and Path(v).is_file())]
    check_outputs({"--json": json_out, "--csv": csv_out}, inputs)
    if task == "referring":
        detection_only = {
            "--threshold": threshold,
            "--threshold-file": threshold_file,
            "--classes": classes,
            "--class-map": class_map,
            "--csv": csv_out,
            "--cross-check": cross_check,
        }
        given = [name for name, value in detection_only.items() if value is not None]
        if given or len(gt) != 1 or iou != 0.5 or split != "test":
            raise AegisError(
                f"[referring_option] --task referring takes one --split-dir (an aegis-refs/1 file), "
                f"--bootstrap, --seed, --cluster-by image_id, --label and --json; not "
                f"{', '.join(given) or '--iou/--split-name or several --split-dir'}"
            )
        _score_referring(preds, gt[0], bootstrap, seed, cluster_by, label, json_out)
        return
    if task != "detection":
        raise AegisError(f"[task_unknown] --task must be 'detection' or 'referring'; got {task!r}")
    result = score(
        preds,
        gt if len(gt) > 1 else gt[0],
        threshold=threshold,
        threshold_file=threshold_file,
        bootstrap=bootstrap,
        seed=seed,
        iou=iou,
        split=split,
        classes=classes,
        class_map=class_map,
        remap_side=value(remap_side),
        allow_merge=allow_merge,
        remap_versions=remap_version or None,
        cluster_by=cluster_by,
        label=label,
        cross_check=cross_check,
        on_warning=warn,
    )
    # The files first: whatever happens while printing (a closed pipe), the score that took minutes is kept.
    written = [result.to_json(json_out)] if json_out is not None else []
    samples_file = result.samples_path(json_out) if json_out is not None else None
    if samples_file is not None:  # the per-resample values `aegis rank` pairs models with
        written.insert(0, samples_file)
    if csv_out is not None:
        written.append(result.to_csv(csv_out))
    from .score_tables import emit, print_score, print_threshold_notes  # Rich loads only to draw on a terminal

    print_score(result.document)
    print_threshold_notes(result.document["threshold"])
    emit([f"wrote {path}" for path in written])


def _score_referring(
    preds: Path, refs: Path, bootstrap: int, seed: int, cluster_by: str | None, label: str | None, json_out: Path | None
) -> None:
    from aegis_eval.api import score_referring, write_json

    from .score_tables import emit, referring_spec  # printed as the detection score is: Rich only on a terminal

    doc = score_referring(preds, refs, bootstrap=bootstrap, seed=seed, cluster_by=cluster_by, label=label)
    emit([(referring_spec(doc), 1)])
    if doc["missing"]:
        shown = ", ".join(doc["missing"][:8]) + (", ..." if len(doc["missing"]) > 8 else "")
        warn(f"[ref_pred_missing] {len(doc['missing'])} expressions have no prediction (counted as wrong): {shown}")
    if json_out is not None:
        write_json(doc, json_out)
        emit([f"wrote {json_out}"])
