"""Per-condition prediction over a frozen split → one COCO results file per condition, plus ``run.json``.

Output folder::

    <out>/<condition>.json   # COCO results list [{image_id, category_id: 1, bbox: [x, y, w, h], score}]
    <out>/run.json           # model, weights + SHA-256, settings, versions, device, per-condition timings

Number format (a decision, documented in docs/BASELINES.md): boxes are clipped to the frame and written as
xywh rounded to 3 decimals (1/1000 px), scores rounded to 6 decimals. Rounding keeps files small and makes
their bytes insensitive to last-ulp differences; Python's float repr is deterministic, so the same
predictions always give the same bytes. Within an image, detections are written by score, descending.

Resumable: a condition is skipped when its file exists, its SHA-256 matches run.json, and run.json records it
complete under the same identity (every setting that can change the output, the weights hash and the GT
hash). ``force`` recomputes the requested conditions (entries of other conditions stay in run.json).
"""

from __future__ import annotations

import hashlib
import json
import platform
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from aegis_data import __version__ as TOOLKIT_VERSION
from aegis_data.errors import AegisError
from aegis_data.files.imageio import file_sha256, read_rgb, write_bytes_atomic
from aegis_data.files.layout import annotation_path, condition_dir
from aegis_data.files.readers import coco_images, read_coco_gt, read_json
from aegis_data.split.reader import config_for
from aegis_eval.runners import MODELS, Detector, Prediction, load_detector, resolve_device
from aegis_eval.runners.config import default
from aegis_eval.runners.tiled import predict_images
from aegis_eval.runners.tiling import tile_grid

RUN_SCHEMA = "aegis-baseline-run/1"
RUN_FILE = "run.json"
PERSON_CATEGORY_ID = 1
BOX_DECIMALS = 3
SCORE_DECIMALS = 6


@dataclass(frozen=True)
class PredictSettings:
    """Everything that decides what a prediction run writes (the CLI flags of ``aegis baseline predict``)."""

    model: str
    weights: str | None
    arch: str | None = None
    imgsz: int | None = default("imgsz")  # None: the model's own size (a Faster R-CNN checkpoint's trained size)
    tiled: bool = True
    tile: int = default("tile")
    overlap: int = default("overlap")
    nms_iou: float = default("nms_iou")
    score_floor: float = default("score_floor")
    max_det: int = default("max_det")
    batch: int = default("batch")
    limit: int | None = None
    split_name: str = "test"
    device: str = default("device")
    seed: int = default("seed")
    allow_download: bool = False

    def validate(self) -> PredictSettings:
        if self.model not in MODELS:
            raise AegisError(f"unknown model {self.model!r}; expected one of {', '.join(MODELS)}")
        if not 0.0 <= self.score_floor <= 1.0:
            raise AegisError(f"`score_floor` must be in [0, 1], got {self.score_floor}", param="score_floor")
        if self.max_det < 1:
            raise AegisError(f"`max_det` must be >= 1, got {self.max_det}", param="max_det")
        if self.batch < 1:
            raise AegisError(f"`batch` must be >= 1, got {self.batch}", param="batch")
        if self.limit is not None and self.limit < 1:
            raise AegisError(f"`limit` must be >= 1 when given, got {self.limit}", param="limit")
        if not 0 <= self.overlap < self.tile:
            raise AegisError(f"`overlap` must be in [0, `tile` {self.tile}), got {self.overlap}", param="overlap")
        if not 0.0 <= self.nms_iou <= 1.0:
            raise AegisError(f"`nms_iou` must be in [0, 1], got {self.nms_iou}", param="nms_iou")
        if self.split_name not in ("test", "val", "train"):
            raise AegisError(f"`split_name` must be test, val or train, got {self.split_name!r}", param="split_name")
        return self


@dataclass(frozen=True)
class SplitImages:
    """The images of one split's GT file: integer COCO ids and file names, ascending by id."""

    split_dir: Path
    split_name: str
    gt_path: Path
    gt_sha256: str
    image_ids: tuple[int, ...]
    file_names: tuple[str, ...]
    sizes: tuple[tuple[int, int], ...] = field(default=())  # (width, height) from the GT


def read_split_images(split_dir: str | Path, split_name: str = "test", limit: int | None = None) -> SplitImages:
    """Read ``annotations/<split_name>.json`` of a split folder; the first ``limit`` images by id."""
    root = Path(split_dir)
    if not root.is_dir():
        raise AegisError(f"split folder not found: {root}")
    gt = annotation_path(root, split_name)
    if not gt.is_file():
        extra = " (build the split with `with_train`)" if split_name == "train" else ""
        raise AegisError(
            f"{root} has no {gt.relative_to(root)}: not a split folder with a {split_name} split "
            f"(see docs/SPLITS.md, layout){extra}"
        )
    coco, sha = read_coco_gt(gt)
    images = coco_images(coco, gt)
    try:
        sizes = tuple((int(im.get("width", 0)), int(im.get("height", 0))) for im in images)
    except (TypeError, ValueError):
        raise AegisError(f"{gt}: image width/height must be integers") from None
    ids = tuple(im["id"] for im in images)
    names = tuple(im["file_name"] for im in images)
    if not ids:
        raise AegisError(f"{gt}: lists no images")
    n = len(ids) if limit is None else min(int(limit), len(ids))
    return SplitImages(root, split_name, gt, sha, ids[:n], names[:n], sizes[:n])


def resolve_conditions(split: SplitImages, conditions: str | Iterable[str] | None = "all") -> list[str]:
    """Condition ids to predict, in canonical order.

    ``all`` (or None) = every canonical condition whose folder exists under ``<split>/<split_name>/``;
    a comma list must name existing folders. Only ``clean`` exists for val/train.
    """
    canonical = config_for(split.split_dir).conditions()
    present = [c for c in canonical if condition_dir(split.split_dir, split.split_name, c).is_dir()]
    if conditions is None or conditions == "all":
        if not present:
            raise AegisError(
                f"no condition folders under {split.split_dir / split.split_name}; expected "
                f"clean/ and <corruption>_s<k>/ (see docs/SPLITS.md, layout)"
            )
        return present
    wanted = [c.strip() for c in (conditions.split(",") if isinstance(conditions, str) else conditions)]
    wanted = [c for c in wanted if c]
    if not wanted:
        raise AegisError(
            "`conditions` is empty; pass 'all' or a comma list such as clean,low_light_s3", param="conditions"
        )
    unknown = [c for c in wanted if c not in canonical]
    if unknown:
        raise AegisError(
            f"unknown condition {unknown[0]!r}; expected 'clean' or '<corruption>_s<1-3>' of the split's suite"
        )
    missing = [c for c in wanted if c not in present]
    if missing:
        raise AegisError(f"condition {missing[0]!r} has no folder {split.split_dir / split.split_name / missing[0]}")
    return [c for c in canonical if c in wanted]


def coco_results(image_id: int, pred: Prediction, width: int, height: int) -> list[dict]:
    """One image's detections as COCO result dicts (clipped to the frame, xywh, rounded; score desc)."""
    boxes, scores = pred
    if len(scores) == 0:
        return []
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4).copy()
    b[:, [0, 2]] = np.clip(b[:, [0, 2]], 0.0, float(width))
    b[:, [1, 3]] = np.clip(b[:, [1, 3]], 0.0, float(height))
    s = np.clip(np.asarray(scores, dtype=np.float64).reshape(-1), 0.0, 1.0)
    order = np.argsort(-s, kind="stable")
    rows = []
    for k in order:
        x0, y0, x1, y1 = (float(v) for v in b[k])
        rows.append(
            {
                "image_id": int(image_id),
                "category_id": PERSON_CATEGORY_ID,
                "bbox": [
                    round(x0, BOX_DECIMALS),
                    round(y0, BOX_DECIMALS),
                    round(max(x1 - x0, 0.0), BOX_DECIMALS),
                    round(max(y1 - y0, 0.0), BOX_DECIMALS),
                ],
                "score": round(float(s[k]), SCORE_DECIMALS),
            }
        )
    return rows


def encode_results(rows: list[dict]) -> bytes:
    """Deterministic bytes of a COCO results list: one detection per line, compact separators."""
    if not rows:
        return b"[]\n"
    body = ",\n".join(json.dumps(r, separators=(",", ":")) for r in rows)
    return ("[\n" + body + "\n]\n").encode("utf-8")


def library_versions() -> dict:
    import cv2
    import torch
    import torchvision

    try:
        import ultralytics

        ultra = ultralytics.__version__
    except ImportError:  # pragma: no cover - a declared dependency of the runner extras
        ultra = None
    versions = {
        "aegisbench": TOOLKIT_VERSION,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "opencv": cv2.__version__,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "ultralytics": ultra,
    }
    return {k: None if v is None else str(v) for k, v in versions.items()}  # torch's is a str subclass


def weights_identity(weights: str | None) -> dict:
    """Path and SHA-256 of a weights file; a yaml name or 'none' is recorded as is (random init)."""
    if weights is None or str(weights).lower() == "none":
        return {"path": None, "sha256": None, "kind": "random"}
    p = Path(weights)
    if p.is_file():
        return {"path": str(p.resolve()), "sha256": file_sha256(p), "kind": "file"}
    return {"path": str(weights), "sha256": None, "kind": "name"}


def run_identity(settings: PredictSettings, split: SplitImages, device: str) -> dict:
    """What a finished condition must share with the current call to be reused (batch size excluded)."""
    s = asdict(settings)
    for k in ("batch", "device", "allow_download"):
        s.pop(k)
    return {
        "settings": s,
        "weights": weights_identity(settings.weights),
        "gt_sha256": split.gt_sha256,
        "device": device,
        "image_ids": hashlib.sha256(repr(split.image_ids).encode()).hexdigest(),
    }


def _identity_hash(identity: dict) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def read_run_file(out_dir: str | Path) -> dict | None:
    p = Path(out_dir) / RUN_FILE
    if not p.is_file():
        return None
    try:
        data, _ = read_json(p, "baseline run")
    except AegisError as exc:
        raise AegisError(f"{exc}; delete it or pass `force`", param="force") from None
    if not isinstance(data, dict) or data.get("schema") != RUN_SCHEMA:
        raise AegisError(
            f"{p} is not an aegis baseline run file (schema {RUN_SCHEMA}); delete it or pass `force`", param="force"
        )
    return data


def _write_json_atomic(path: Path, obj: dict) -> None:
    write_bytes_atomic(path, (json.dumps(obj, indent=2, sort_keys=False) + "\n").encode("utf-8"))


def condition_is_done(run: dict | None, out_dir: Path, condition: str, identity_hash: str) -> bool:
    if not run:
        return False
    entry = (run.get("conditions") or {}).get(condition)
    f = out_dir / f"{condition}.json"
    return bool(
        entry
        and entry.get("status") == "complete"
        and entry.get("identity") == identity_hash
        and f.is_file()
        and file_sha256(f) == entry.get("sha256")
    )


class LazyDetector:
    """Builds the detector of ``settings`` on first use, so a fully resumed run never loads a model."""

    def __init__(self, settings: PredictSettings, detector: Detector | None = None):
        self.settings = settings
        self._detector = detector

    @property
    def device(self) -> str:
        return self._detector.device if self._detector is not None else resolve_device(self.settings.device)

    def get(self) -> Detector:
        if self._detector is None:
            s = self.settings
            self._detector = load_detector(
                s.model,
                s.weights,
                s.device,
                arch=s.arch,
                max_det=s.max_det,
                imgsz=s.imgsz,
                allow_download=s.allow_download,
                seed=s.seed,
            )
        return self._detector


def predict_split(
    settings: PredictSettings,
    split_dir: str | Path,
    out_dir: str | Path,
    *,
    conditions: str | Iterable[str] | None = "all",
    force: bool = False,
    detector: Detector | LazyDetector | None = None,
    progress: Callable[[str, str], None] | None = None,
) -> dict:
    """Predict every requested condition of a split; return the run record (also written to run.json).

    detector: an already loaded detector, or a LazyDetector to share between calls; by default one is built
    from ``settings`` only if some condition still needs predicting.
    progress(condition, status) is called with status ``skipped`` or ``done``.
    """
    settings = settings.validate()
    split = read_split_images(split_dir, settings.split_name, settings.limit)
    conds = resolve_conditions(split, conditions)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise AegisError(f"`out_dir` {out} exists and is not a folder", param="out_dir")
    out.mkdir(parents=True, exist_ok=True)
    lazy = detector if isinstance(detector, LazyDetector) else LazyDetector(settings, detector)
    device = lazy.device
    identity = run_identity(settings, split, device)
    ident_hash = _identity_hash(identity)
    try:
        run = read_run_file(out)
    except AegisError:
        if not force:
            raise
        run = None  # force starts over from an unreadable run.json
    record = {
        "schema": RUN_SCHEMA,
        "split": str(split.split_dir.resolve()),
        "split_name": split.split_name,
        "gt_file": str(split.gt_path.resolve()),
        "gt_sha256": split.gt_sha256,
        "n_images": len(split.image_ids),
        "settings": asdict(settings),
        "weights": identity["weights"],
        "identity": ident_hash,
        "device": device,
        "versions": library_versions(),
        "detector": None,
        "conditions": dict((run or {}).get("conditions") or {}),
    }
    if run and run.get("identity") == ident_hash:
        record["detector"] = run.get("detector")
    for cond in conds:
        if not force and condition_is_done(run, out, cond, ident_hash):
            if progress:
                progress(cond, "skipped")
            continue
        det = lazy.get()
        record["detector"] = det.describe()
        entry = predict_condition(det, settings, split, cond, out)
        entry["identity"] = ident_hash
        record["conditions"][cond] = entry
        _write_json_atomic(out / RUN_FILE, record)  # after every condition, so an interrupt loses at most one
        if progress:
            progress(cond, "done")
    _write_json_atomic(out / RUN_FILE, record)
    return record


def predict_condition(
    detector: Detector, settings: PredictSettings, split: SplitImages, condition: str, out: Path
) -> dict:
    """Predict one condition folder and write ``<out>/<condition>.json`` atomically; return its run entry."""
    folder = condition_dir(split.split_dir, split.split_name, condition)
    rows: list[dict] = []
    n_tiles_total = 0
    t0 = time.perf_counter()
    infer_s = 0.0
    # Read `batch` frames at a time to bound memory (a 12 MP frame is 36 MB decoded).
    for k in range(0, len(split.image_ids), settings.batch):
        ids = split.image_ids[k : k + settings.batch]
        names = split.file_names[k : k + settings.batch]
        frames = [read_rgb(folder / name) for name in names]
        for name, frame, (w, h) in zip(names, frames, split.sizes[k : k + settings.batch]):
            if w and h and frame.shape[:2] != (h, w):
                raise AegisError(
                    f"{folder / name} is {frame.shape[1]}x{frame.shape[0]} but the GT says {w}x{h}; "
                    f"the split folder and {split.gt_path.name} do not belong together"
                )
        t1 = time.perf_counter()
        preds = predict_images(
            detector,
            frames,
            settings.score_floor,
            tiled=settings.tiled,
            tile=settings.tile,
            overlap=settings.overlap,
            nms_iou=settings.nms_iou,
            batch=settings.batch,
        )
        infer_s += time.perf_counter() - t1
        for image_id, frame, pred in zip(ids, frames, preds):
            rows.extend(coco_results(image_id, pred, frame.shape[1], frame.shape[0]))
            if settings.tiled:
                n_tiles_total += len(tile_grid(frame.shape[1], frame.shape[0], settings.tile, settings.overlap))
    data = encode_results(rows)
    path = out / f"{condition}.json"
    write_bytes_atomic(path, data)
    seconds = time.perf_counter() - t0
    n = len(split.image_ids)
    return {
        "status": "complete",
        "file": path.name,
        "sha256": hashlib.sha256(data).hexdigest(),
        "n_images": n,
        "n_detections": len(rows),
        "n_tiles": n_tiles_total if settings.tiled else n,
        "seconds": round(seconds, 3),
        "inference_seconds": round(infer_s, 3),
        "images_per_s": round(n / seconds, 4) if seconds > 0 else None,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
