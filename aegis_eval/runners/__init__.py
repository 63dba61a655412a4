"""Reference detectors behind one interface (docs/BASELINES.md).

``load_detector(model, weights)`` returns a :class:`Detector`: ``predict(images, score_floor)`` maps a batch of
RGB uint8 frames to per-image ``(boxes (N,4) xyxy float64 pixels, scores (N,) float64)``, sorted by score,
descending. Tiling (``tiled``), per-condition prediction over a split (``predict``), fine-tuning (``train``)
and the whole sweep (``sweep``) are built on that one call.

torch, torchvision and ultralytics are imported lazily, so ``aegis_eval`` stays importable without the
runner extras.
"""

from __future__ import annotations

import os
from pathlib import Path

from aegis_data.errors import AegisError
from aegis_eval.runners.detector import FASTERRCNN_ARCHS, MODELS, Detector, Prediction, check_batch, empty_prediction


def resolve_device(device: str = "auto") -> str:
    """``auto`` → ``cuda`` when torch sees a GPU, else ``cpu``; ``cpu``, ``cuda``, ``cuda:N`` pass through."""
    import torch

    dev = (device or "auto").strip().lower()
    if dev == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if dev.isdigit():
        dev = f"cuda:{dev}"
    if dev == "cpu":
        return dev
    if dev == "cuda" or (dev.startswith("cuda:") and dev[5:].isdigit()):
        if not torch.cuda.is_available():
            raise AegisError(
                f"device {device!r} requested but torch sees no CUDA GPU; use `device` cpu or auto", param="device"
            )
        return dev
    raise AegisError(f"unknown device {device!r}; expected auto, cpu, cuda or cuda:N")


def seed_torch(seed: int) -> None:
    """Seed torch and ask for deterministic kernels.

    ``warn_only`` keeps CPU inference working where an op has no deterministic variant; the cuBLAS workspace
    setting is what CUDA needs for deterministic matmuls and must be in place before cuBLAS starts.
    """
    import torch

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.manual_seed(int(seed))
    torch.use_deterministic_algorithms(True, warn_only=True)


def resolve_weights(model: str, weights: str | None, *, allow_download: bool = False) -> str | None:
    """Check a weights argument before anything is built; return what the backend should load.

    Returns None for a Faster R-CNN random initialisation (``"none"``), the path of an existing local file,
    a built-in Ultralytics ``*.yaml`` name (random initialisation, no download), or — only with
    ``allow_download`` — a bare name the backend library fetches itself.
    """
    if model not in MODELS:
        raise AegisError(f"unknown model {model!r}; expected one of {', '.join(MODELS)}")
    if weights is None or str(weights).strip() == "":
        hint = (
            "a local .pt file or a model yaml such as yolo11n.yaml"
            if model != "fasterrcnn"
            else ("a local checkpoint file, or 'none' for random initialisation")
        )
        raise AegisError(f"no weights given for {model}: pass `weights` with {hint}", param="weights")
    w = str(weights)
    if w.lower() == "none":
        if model == "fasterrcnn":
            return None
        raise AegisError(
            f"`weights` 'none' is only for fasterrcnn; for {model} pass a .pt file or a yaml such as "
            f"{'yolo11n.yaml' if model == 'yolo11' else 'rtdetr-l.yaml'} (random initialisation)",
            param="weights",
        )
    p = Path(w).expanduser()
    if p.is_file():
        return str(p.resolve())
    bare = p.name == w  # no directory part: a name a library may know
    if model != "fasterrcnn" and bare and w.endswith(".yaml"):
        return w  # built-in architecture file shipped inside ultralytics; builds a random model offline
    if bare and model != "fasterrcnn" and w.endswith(".pt"):
        if allow_download:
            return w
        raise AegisError(
            f"weights {w!r} are not a local file; ultralytics would download them — pass "
            f"`allow_download` to allow that, or give the path of a local copy",
            param="allow_download",
        )
    raise AegisError(f"weights file not found: {w}")


def load_detector(
    model: str,
    weights: str | None,
    device: str = "auto",
    *,
    arch: str | None = None,
    max_det: int = 300,
    imgsz: int | None = None,
    allow_download: bool = False,
    seed: int = 0,
) -> Detector:
    """Build a detector ready for inference (eval mode, no gradients).

    model: ``yolo11`` | ``rtdetr`` (Ultralytics) | ``fasterrcnn`` (torchvision, 2 classes).
    weights: local file path; for Ultralytics also a ``*.yaml`` (random weights); ``"none"`` for a random
        Faster R-CNN. A missing file raises AegisError; a bare downloadable name needs ``allow_download``.
    arch: Faster R-CNN backbone, ``resnet50_v2`` (default) or ``mobilenet_v3``; ignored by Ultralytics.
    imgsz: network input size (Ultralytics letterbox size; Faster R-CNN min/max resize side). None keeps the
        model's own default.
    """
    if int(max_det) < 1:
        raise AegisError(f"`max_det` must be >= 1, got {max_det}", param="max_det")
    if imgsz is not None and int(imgsz) < 32:
        raise AegisError(f"`imgsz` must be >= 32 pixels, got {imgsz}", param="imgsz")
    resolved = resolve_weights(model, weights, allow_download=allow_download)
    dev = resolve_device(device)
    seed_torch(seed)
    if model == "fasterrcnn":
        from aegis_eval.runners.torchvision_runner import FasterRCNNDetector

        return FasterRCNNDetector(resolved, dev, arch=arch, max_det=max_det, imgsz=imgsz)
    if arch not in (None, ""):
        raise AegisError(f"`arch` applies to fasterrcnn only; got arch={arch!r} for {model}", param="arch")
    from aegis_eval.runners.ultralytics_runner import UltralyticsDetector

    assert resolved is not None  # only Faster R-CNN starts from no weights ("none")
    return UltralyticsDetector(model, resolved, dev, max_det=max_det, imgsz=imgsz)


__all__ = [
    "MODELS",
    "FASTERRCNN_ARCHS",
    "Detector",
    "Prediction",
    "load_detector",
    "resolve_device",
    "resolve_weights",
    "seed_torch",
    "check_batch",
    "empty_prediction",
]
