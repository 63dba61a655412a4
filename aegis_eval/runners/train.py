"""Fine-tuning the reference detectors on a split's clean train images, validated on clean val (docs/BASELINES.md).

Run folder::

    RUN/config.yaml                 # every resolved setting, written before training starts
    RUN/data/data.yaml              # YOLO dataset (absolute paths), built from the COCO GT
    RUN/data/images/{train,val}/    # frames, or 1024-px tiles of large frames (overlap 256)
    RUN/data/labels/{train,val}/    # YOLO txt, class 0 = person
    RUN/train/weights/{best,last}.pt   # Ultralytics
    RUN/best.pt, RUN/last.pt           # Faster R-CNN (last.pt keeps the optimizer state for resume)

Both backends train on the same tiles: a frame larger than a tile is cut with ``tile_grid`` and a box goes to
every tile that shows at least ``min_visibility`` of its area (``assign_boxes``), clipped to the tile.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from aegis_data.augment.transform import AugmentPolicy, DisasterAugment
from aegis_data.errors import AegisError
from aegis_data.files.imageio import file_sha256, image_size, read_rgb, write_bytes_atomic, write_png_atomic
from aegis_data.files.layout import annotation_path, condition_dir
from aegis_data.files.readers import coco_images, coco_person_boxes, read_coco_gt, read_json
from aegis_data.sources.yolo_labels import read_yolo_labels, yolo_label_text
from aegis_eval.runners import MODELS, resolve_device, resolve_weights, seed_torch
from aegis_eval.runners.config import OPTIMIZERS, check_values, default
from aegis_eval.runners.tiling import assign_boxes, crop, tile_grid

DATA_STAMP = "dataset.json"


@dataclass(frozen=True)
class TrainSettings:
    """All settings of a fine-tuning run; copied to RUN/config.yaml."""

    model: str
    weights: str | None
    arch: str | None = None
    epochs: int = default("epochs")
    imgsz: int = default("imgsz")
    batch: int = default("batch")
    seed: int = default("seed")
    lr0: float = default("lr0")
    optimizer: str = default("optimizer")
    momentum: float = default("momentum")
    weight_decay: float = default("weight_decay")
    device: str = default("device")
    workers: int = default("workers")
    amp: bool = default("amp")  # Ultralytics only; see docs/BASELINES.md
    tile: int = default("tile")
    overlap: int = default("overlap")
    min_visibility: float = default("min_visibility")
    score_floor: float = default("score_floor")  # Faster R-CNN validation predictions
    nms_iou: float = default("nms_iou")  # merge of tiled validation predictions
    max_det: int = default("max_det")
    allow_download: bool = False

    def validate(self) -> TrainSettings:
        if self.model not in MODELS:
            raise AegisError(f"unknown model {self.model!r}; expected one of {', '.join(MODELS)}")
        if self.optimizer not in OPTIMIZERS:
            raise AegisError(f"optimizer={self.optimizer!r} is invalid; expected {' or '.join(OPTIMIZERS)}")
        skip = ("model", "weights", "arch", "device", "allow_download", "amp")
        check_values({k: v for k, v in asdict(self).items() if k not in skip}, "train settings")
        return self


# --- dataset ------------------------------------------------------------------------------------------
def _boxes_by_image(coco: dict, where: str | Path) -> dict[int, np.ndarray]:
    """Non-crowd person boxes of positive size per image id, xyxy float64."""
    out = {}
    for image_id, boxes in coco_person_boxes(coco, where, skip_crowd=True).items():
        xyxy = [(x, y, x + w, y + h) for x, y, w, h in boxes if w > 0 and h > 0]
        if xyxy:
            out[image_id] = np.asarray(xyxy, dtype=np.float64)
    return out


def _tile_name(stem: str, t, width: int, height: int) -> str:
    return stem if (t.width == width and t.height == height) else f"{stem}_x{t.x0}_y{t.y0}"


def tile_sources(split_dir: str | Path, *, tile: int = 1024, overlap: int = 256) -> dict:
    """Training image name (as ``write_yolo_dataset`` names it) -> its source frame, COCO id and tile."""
    from aegis_eval.runners.augment_hooks import TileSource

    root = Path(split_dir)
    gt_path = annotation_path(root, "train")
    coco, _ = read_coco_gt(gt_path)
    out = {}
    for im in coco_images(coco, gt_path):  # the order and names write_yolo_dataset uses
        src = condition_dir(root, "train", "clean") / im["file_name"]
        w, h = image_size(src)
        for t in tile_grid(w, h, tile, overlap):
            out[_tile_name(Path(im["file_name"]).stem, t, w, h)] = TileSource(src, int(im["id"]), t)
    return out


def write_yolo_dataset(
    split_dir: str | Path, data_dir: str | Path, *, tile: int = 1024, overlap: int = 256, min_visibility: float = 0.5
) -> Path:
    """Write the clean train and val images of a split as a YOLO dataset; return ``data.yaml``'s path.

    Frames that fit in one tile are written as they are; larger ones as tiles named
    ``<stem>_x<x0>_y<y0>.png``. Tiles without a visible person are kept as negatives. Reuses an existing
    dataset written from the same GT files with the same tiling (``dataset.json`` records that); otherwise
    ``images/`` and ``labels/`` under ``data_dir`` are deleted and rewritten.
    """
    root = Path(split_dir)
    data = Path(data_dir)
    gts = {}
    for s in ("train", "val"):
        p = annotation_path(root, s)
        if not p.is_file():
            hint = (
                "the split was built without `with_train`; rebuild it with `with_train`"
                if s == "train"
                else "the split has no clean validation set"
            )
            raise AegisError(f"{root} has no {p.relative_to(root)}: {hint}")
        gts[s] = p
    stamp = {
        "gt_sha256": {s: file_sha256(p) for s, p in gts.items()},
        "tile": tile,
        "overlap": overlap,
        "min_visibility": min_visibility,
    }
    yaml_path = data / "data.yaml"
    stamp_path = data / DATA_STAMP
    if yaml_path.is_file() and stamp_path.is_file():
        try:
            old, _ = read_json(stamp_path, "training dataset stamp")
            if isinstance(old, dict) and {k: v for k, v in old.items() if k != "counts"} == stamp:
                return yaml_path
        except AegisError:
            pass  # an unreadable stamp: rewrite the dataset
    for sub in ("images", "labels"):  # a dataset from other GT or tiling: start clean, no stale tiles
        shutil.rmtree(data / sub, ignore_errors=True)
    counts = {}
    for s, gt_path in gts.items():
        coco, _ = read_coco_gt(gt_path)
        boxes = _boxes_by_image(coco, gt_path)
        img_dir, lbl_dir = data / "images" / s, data / "labels" / s
        img_dir.mkdir(parents=True, exist_ok=True)
        lbl_dir.mkdir(parents=True, exist_ok=True)
        n_files = n_boxes = 0
        for im in coco_images(coco, gt_path):
            src = condition_dir(root, s, "clean") / im["file_name"]
            rgb = read_rgb(src)
            h, w = rgb.shape[:2]
            stem = Path(im["file_name"]).stem
            b = boxes.get(int(im["id"]), np.zeros((0, 4)))
            for t in tile_grid(w, h, tile, overlap):
                name = _tile_name(stem, t, w, h)
                tb, _ = assign_boxes(b, t, min_visibility)
                write_png_atomic(img_dir / f"{name}.png", np.ascontiguousarray(crop(rgb, t)))
                write_bytes_atomic(lbl_dir / f"{name}.txt", yolo_label_text(tb, t.width, t.height).encode())
                n_files += 1
                n_boxes += len(tb)
        counts[s] = {"images": n_files, "boxes": n_boxes}
    spec = {
        "path": str(data.resolve()),
        "train": str((data / "images" / "train").resolve()),
        "val": str((data / "images" / "val").resolve()),
        "names": {0: "person"},
    }
    write_bytes_atomic(yaml_path, yaml.safe_dump(spec, sort_keys=False).encode())
    write_bytes_atomic(stamp_path, json.dumps({**stamp, "counts": counts}, indent=2).encode())
    return yaml_path


def read_yolo_folder(images_dir: Path) -> list[tuple[Path, np.ndarray]]:
    """(image path, boxes xyxy pixels) for every PNG of a YOLO image folder, sorted by name."""
    labels_dir = images_dir.parent.parent / "labels" / images_dir.name
    items = []
    for img in sorted(images_dir.glob("*.png")):
        w, h = image_size(img)
        txt = labels_dir / f"{img.stem}.txt"
        rows = [box for box, _where in read_yolo_labels(txt, w, h)] if txt.is_file() else []
        items.append((img, np.asarray(rows, dtype=np.float64).reshape(-1, 4)))
    return items


# --- entry point --------------------------------------------------------------------------------------
def write_run_config(settings: TrainSettings, split_dir: Path, run_dir: Path, extra: dict | None = None) -> Path:
    cfg = {
        "settings": asdict(settings),
        "split": str(split_dir.resolve()),
        "run": str(run_dir.resolve()),
        "weights_sha256": file_sha256(settings.weights)
        if settings.weights and Path(settings.weights).is_file()
        else None,
        **(extra or {}),
    }
    path = run_dir / "config.yaml"
    write_bytes_atomic(path, yaml.safe_dump(cfg, sort_keys=False).encode())
    return path


def train_baseline(
    settings: TrainSettings,
    split_dir: str | Path,
    run_dir: str | Path,
    log: Callable[[str], None] | None = None,
    augment: AugmentPolicy | None = None,
) -> dict[str, Any]:
    """Fine-tune ``settings.model`` on the split's clean train, validate on clean val; resume when possible.

    augment: a disaster-augmentation policy (``aegis_data.augment.transform``) applied to every training frame before
        tiling and before the trainer's own augmentation, keyed by (seed, epoch, frame id); recorded in
        RUN/config.yaml and RUN/augment.json. None trains on clean frames only, exactly as before.
    Returns ``{"best": path, "last": path, "config": path, "data": data.yaml, "resumed": bool, ...}``
    (plus ``"augment"``: the policy record, when given).
    """
    settings = settings.validate()
    split = Path(split_dir)
    if not split.is_dir():
        raise AegisError(f"split folder not found: {split}")
    run = Path(run_dir)
    if run.exists() and not run.is_dir():
        raise AegisError(f"`run_dir` {run} exists and is not a folder", param="run_dir")
    weights = resolve_weights(settings.model, settings.weights, allow_download=settings.allow_download)
    device = resolve_device(settings.device)
    run.mkdir(parents=True, exist_ok=True)
    data_yaml = write_yolo_dataset(
        split, run / "data", tile=settings.tile, overlap=settings.overlap, min_visibility=settings.min_visibility
    )
    from aegis_eval.runners.predict import library_versions

    extra: dict[str, Any] = {"device_resolved": device, "versions": library_versions()}
    from aegis_eval.runners.augment_hooks import (
        FrameAugmenter,
        check_augment_record,
        training_scale,
        write_augment_record,
    )

    record = check_augment_record(run, augment, settings.seed)  # refuses a resume under another policy
    augmenter = None
    if augment is not None:
        augmenter = FrameAugmenter(
            DisasterAugment(augment, settings.seed, scale=training_scale(split)),
            tile_sources(split, tile=settings.tile, overlap=settings.overlap),
        )
        extra["augment"] = record
    cfg_path = write_run_config(settings, split, run, extra)
    if augmenter is not None:
        write_augment_record(run, extra["augment"])
    seed_torch(settings.seed)
    if settings.model == "fasterrcnn":
        result = _train_fasterrcnn(settings, weights, device, split, run, data_yaml, log or (lambda s: None), augmenter)
    else:
        assert weights is not None  # only Faster R-CNN starts from no weights ("none")
        result = _train_ultralytics(settings, weights, device, run, data_yaml, augmenter)
    result.update(config=str(cfg_path), data=str(data_yaml))
    if augmenter is not None:
        result["augment"] = extra["augment"]
    return result


# --- Ultralytics --------------------------------------------------------------------------------------
def _train_ultralytics(
    settings: TrainSettings, weights: str, device: str, run: Path, data_yaml: Path, augmenter=None
) -> dict[str, Any]:
    from ultralytics import RTDETR, YOLO

    from aegis_eval.runners.checkpoints import check_ultralytics_checkpoint, check_ultralytics_weights

    cls = RTDETR if settings.model == "rtdetr" else YOLO
    hook: dict[str, Any] = {}
    if augmenter is not None:
        from aegis_eval.runners.augment_ultralytics import ultralytics_trainer

        hook["trainer"] = ultralytics_trainer(settings.model, augmenter)
    weights_dir = run / "train" / "weights"
    last = weights_dir / "last.pt"
    resumed = False
    if last.is_file():
        # Vetted first (no code runs from it); it must record its epoch: Ultralytics marks a finished run with -1.
        epoch = check_ultralytics_checkpoint(last, resume=True)["epoch"]
        if epoch == -1:
            return {
                "best": str(weights_dir / "best.pt"),
                "last": str(last),
                "resumed": False,
                "status": "already finished",
                "train_dir": str(run / "train"),
            }
        # A resume takes its settings from the checkpoint's train_args; the ones naming places are ours instead:
        # the dataset, the run folder, and no teacher model to load.
        cls(str(last)).train(
            resume=True,
            data=str(data_yaml),
            save_dir=str((run / "train").resolve()),
            distill_model=None,
            device=device,
            workers=settings.workers,
            plots=False,
            **hook,
        )
        resumed = True
    else:
        check_ultralytics_weights(weights)
        net = cls(weights)
        net.train(
            data=str(data_yaml),
            epochs=settings.epochs,
            imgsz=settings.imgsz,
            batch=settings.batch,
            seed=settings.seed,
            deterministic=True,
            workers=settings.workers,
            optimizer=settings.optimizer,
            lr0=settings.lr0,
            momentum=settings.momentum,
            weight_decay=settings.weight_decay,
            device=device,
            project=str(run.resolve()),
            name="train",
            exist_ok=True,
            plots=False,
            val=True,
            verbose=False,
            max_det=settings.max_det,
            amp=settings.amp,
            **hook,
        )
    best = weights_dir / "best.pt"
    if not best.is_file():
        raise AegisError(f"ultralytics finished without writing {best}")
    return {
        "best": str(best),
        "last": str(last),
        "resumed": resumed,
        "status": "trained",
        "train_dir": str(run / "train"),
    }


# --- Faster R-CNN -------------------------------------------------------------------------------------
def epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    """Deterministic shuffle of ``range(n)``: sort by SHA-256 of (seed, epoch, index); no RNG state involved."""

    def key(i: int) -> bytes:
        return hashlib.sha256(f"aegis-train-order|{seed}|{epoch}|{i}".encode()).digest()

    return sorted(range(n), key=key)


def _save_atomic(obj: dict, path: Path) -> None:
    """torch.save through write_bytes_atomic (unique temp file, fsync, rename): a crash leaves the old file."""
    import io

    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    write_bytes_atomic(path, buf.getbuffer())


def _build_optimizer(net, settings: TrainSettings):
    import torch

    params = [p for p in net.parameters() if p.requires_grad]
    if settings.optimizer == "AdamW":
        return torch.optim.AdamW(params, lr=settings.lr0, weight_decay=settings.weight_decay)
    return torch.optim.SGD(params, lr=settings.lr0, momentum=settings.momentum, weight_decay=settings.weight_decay)


def _targets(boxes: np.ndarray, device: str):
    import torch

    return {
        "boxes": torch.as_tensor(boxes, dtype=torch.float32, device=device).reshape(-1, 4),
        "labels": torch.ones(len(boxes), dtype=torch.int64, device=device),
    }


def validate_ap50(detector, split_dir: Path, settings: TrainSettings) -> float:
    """AP50 of ``detector`` on the split's clean val frames (tiled as in the sweep), by the shared evaluator."""
    from aegis_eval.runners.predict import coco_results, read_split_images
    from aegis_eval.runners.tiled import predict_images

    split = read_split_images(split_dir, "val")
    folder = condition_dir(split_dir, "val", "clean")
    rows: list[dict] = []
    for k in range(0, len(split.image_ids), settings.batch):
        frames = [read_rgb(folder / n) for n in split.file_names[k : k + settings.batch]]
        preds = predict_images(
            detector,
            frames,
            settings.score_floor,
            tiled=True,
            tile=settings.tile,
            overlap=settings.overlap,
            nms_iou=settings.nms_iou,
            batch=settings.batch,
        )
        for image_id, frame, pred in zip(split.image_ids[k : k + settings.batch], frames, preds):
            rows.extend(coco_results(image_id, pred, frame.shape[1], frame.shape[0]))
    return coco_ap50(split.gt_path, rows)


def coco_ap50(gt_path: Path, rows: list[dict]) -> float:
    """COCO AP@0.5 (person) of a results list against a GT file, by the toolkit's evaluator
    (``aegis_eval.metrics.coco.coco_ap``, pycocotools-identical); 0.0 when there are no detections or no GT boxes."""
    from aegis_eval.metrics.coco import coco_ap
    from aegis_eval.protocols.predictions import detections_from_results, load_ground_truth

    if not rows:
        return 0.0
    gt = load_ground_truth(gt_path)
    if gt.n_boxes == 0:
        return 0.0
    value = coco_ap(gt, detections_from_results(rows, gt, {"file": "<validation>"}))["map50"]
    return float(value) if value is not None and value >= 0 else 0.0


def _train_fasterrcnn(
    settings: TrainSettings,
    weights: str | None,
    device: str,
    split_dir: Path,
    run: Path,
    data_yaml: Path,
    log: Callable[[str], None],
    augmenter=None,
) -> dict[str, Any]:
    import torch

    from aegis_eval.runners.torchvision_runner import (
        DEFAULT_ARCH,
        FasterRCNNDetector,
        build_fasterrcnn,
        load_state,
        read_checkpoint,
    )

    last_path, best_path = run / "last.pt", run / "best.pt"
    resume = last_path.is_file()
    ckpt = read_checkpoint(last_path) if resume else None
    init = read_checkpoint(weights) if (not resume and weights is not None) else None
    arch = settings.arch or (ckpt or init or {}).get("arch") or DEFAULT_ARCH
    torch.manual_seed(settings.seed)  # the random initialisation of heads (and of everything with weights none)
    net = build_fasterrcnn(arch, max_det=settings.max_det, imgsz=settings.imgsz)
    if init is not None:
        load_state(net, init["model"], str(weights), arch)
    net.to(device)
    opt = _build_optimizer(net, settings)
    start_epoch, best_ap, history = 0, -1.0, []
    if ckpt is not None:
        if ckpt.get("arch") not in (None, arch):
            raise AegisError(f"{last_path} was trained with arch {ckpt.get('arch')}, not {arch}")
        load_state(net, ckpt["model"], str(last_path), arch)
        if ckpt.get("optimizer"):
            opt.load_state_dict(ckpt["optimizer"])
        start_epoch = int(ckpt.get("epoch", 0))
        best_ap = float(ckpt.get("best_ap50", -1.0))
        history = list(ckpt.get("history", []))
    items = read_yolo_folder(data_yaml.parent / "images" / "train")
    if not items:
        raise AegisError(f"no training images in {data_yaml.parent / 'images' / 'train'}")
    detector = FasterRCNNDetector.wrap(net, device, arch=arch, max_det=settings.max_det, imgsz=settings.imgsz)
    meta = {"arch": arch, "imgsz": settings.imgsz, "settings": asdict(settings)}
    if augmenter is not None:
        # The same record as RUN/augment.json (policy plus seed), so checkpoint and run folder agree.
        meta["augment"] = {**augmenter.policy.record(), "seed": augmenter.augment.seed}

    def load(path: Path, epoch: int) -> np.ndarray:
        return read_rgb(path) if augmenter is None else augmenter.tile(path.stem, epoch)

    for epoch in range(start_epoch, settings.epochs):
        t0 = time.perf_counter()
        net.train()
        order = epoch_order(len(items), settings.seed, epoch)
        losses = []
        for k in range(0, len(order), settings.batch):
            chunk = [items[i] for i in order[k : k + settings.batch]]
            imgs = [torch.from_numpy(load(p, epoch)).to(device).permute(2, 0, 1).float().div_(255.0) for p, _ in chunk]
            loss_dict = net(imgs, [_targets(b, device) for _, b in chunk])
            loss = sum(loss_dict.values())
            if not torch.isfinite(loss):
                raise AegisError(
                    f"training loss became {loss.item()} at epoch {epoch + 1}; lower `lr0` (now {settings.lr0})",
                    param="lr0",
                )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(float(loss.item()))
        net.eval()
        ap50 = validate_ap50(detector, split_dir, settings)
        entry = {
            "epoch": epoch + 1,
            "loss": float(np.mean(losses)),
            "val_ap50": ap50,
            "seconds": round(time.perf_counter() - t0, 3),
        }
        history.append(entry)
        log(f"epoch {epoch + 1}/{settings.epochs}: loss {entry['loss']:.4f}, val AP50 {ap50:.4f}")
        state = {k: v.detach().cpu() for k, v in net.state_dict().items()}
        if ap50 > best_ap:  # ties keep the earlier epoch
            best_ap = ap50
            _save_atomic({"model": state, **meta, "epoch": epoch + 1, "val_ap50": ap50}, best_path)
        _save_atomic(
            {
                "model": state,
                "optimizer": opt.state_dict(),
                **meta,
                "epoch": epoch + 1,
                "best_ap50": best_ap,
                "history": history,
            },
            last_path,
        )
    if not last_path.is_file():
        raise AegisError(f"nothing was trained: epochs={settings.epochs}")
    status = "trained" if start_epoch < settings.epochs else "already finished"
    return {
        "best": str(best_path),
        "last": str(last_path),
        "resumed": resume,
        "status": status,
        "history": history,
        "best_val_ap50": best_ap if math.isfinite(best_ap) else None,
    }
