"""Faster R-CNN (torchvision) with two classes (background, person), behind the Detector interface.

Checkpoints written by ``aegis baseline train`` are dicts ``{"model": state_dict, "arch": ..., ...}``; a plain
state_dict file is accepted too.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from aegis_data.errors import AegisError
from aegis_eval.runners.detector import FASTERRCNN_ARCHS, Prediction, check_batch, empty_prediction

NUM_CLASSES = 2  # background + person
PERSON_LABEL = 1
DEFAULT_ARCH = "resnet50_v2"


def build_fasterrcnn(arch: str = DEFAULT_ARCH, *, max_det: int = 300, imgsz: int | None = None):
    """A randomly initialised 2-class Faster R-CNN (no pretrained backbone, nothing downloaded).

    imgsz: when given, the internal resize is pinned to that side (min_size = max_size = imgsz), so a
    1024 tile is processed at its own resolution; None keeps torchvision's 800/1333.
    """
    from torchvision.models import detection as tvd

    if arch not in FASTERRCNN_ARCHS:
        raise AegisError(f"unknown fasterrcnn arch {arch!r}; expected one of {', '.join(FASTERRCNN_ARCHS)}")
    kwargs = dict(weights=None, weights_backbone=None, num_classes=NUM_CLASSES, box_detections_per_img=int(max_det))
    if imgsz is not None:
        kwargs.update(min_size=int(imgsz), max_size=int(imgsz))
    if arch == "mobilenet_v3":
        return tvd.fasterrcnn_mobilenet_v3_large_fpn(**kwargs)
    return tvd.fasterrcnn_resnet50_fpn_v2(**kwargs)


def read_checkpoint(path: str | Path) -> dict:
    """Load a Faster R-CNN checkpoint as ``{"model": state_dict, "arch": str | None, ...}`` (CPU tensors)."""
    import torch

    try:
        obj = torch.load(str(path), map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise AegisError(f"weights file not found: {path}") from None
    except Exception as exc:
        raise AegisError(
            f"cannot read fasterrcnn checkpoint {path}: {type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}"
        ) from None
    if isinstance(obj, dict) and isinstance(obj.get("model"), dict):
        return obj
    if isinstance(obj, dict) and obj and all(hasattr(v, "shape") for v in obj.values()):
        return {"model": obj, "arch": None}
    raise AegisError(f"{path} is not a fasterrcnn state_dict or an aegis training checkpoint")


COCO_NUM_CLASSES = 91
COCO_PERSON_LABEL = 1
_HEAD = "roi_heads.box_predictor."


def person_head_from_coco(state: dict) -> dict:
    """Turn a torchvision COCO checkpoint (91 classes) into a 2-class one: keep the background and person
    rows of the classifier and their 4 regression rows each. Other state dicts are returned unchanged."""
    cls_w = state.get(_HEAD + "cls_score.weight")
    if cls_w is None or cls_w.shape[0] != COCO_NUM_CLASSES:
        return state
    keep = [0, COCO_PERSON_LABEL]
    reg = [4 * c + k for c in keep for k in range(4)]
    out = dict(state)
    out[_HEAD + "cls_score.weight"] = cls_w[keep].clone()
    out[_HEAD + "cls_score.bias"] = state[_HEAD + "cls_score.bias"][keep].clone()
    out[_HEAD + "bbox_pred.weight"] = state[_HEAD + "bbox_pred.weight"][reg].clone()
    out[_HEAD + "bbox_pred.bias"] = state[_HEAD + "bbox_pred.bias"][reg].clone()
    return out


def load_state(net, state: dict, path: str, arch: str) -> None:
    """Load weights strictly; a mismatch is one line naming the architecture and the key counts.

    A torchvision COCO checkpoint (91 classes, e.g. a manually downloaded
    ``fasterrcnn_resnet50_fpn_v2_coco-*.pth``) is accepted and reduced to background + person first.
    """
    state = person_head_from_coco(state)
    missing, unexpected = _key_diff(net.state_dict(), state)
    if missing or unexpected:
        raise AegisError(
            f"weights {path} do not fit fasterrcnn {arch} with {NUM_CLASSES} classes: "
            f"{len(missing)} missing keys (e.g. {missing[:1]}), {len(unexpected)} unexpected"
        )
    try:
        net.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        detail = next((ln for ln in lines if "size mismatch" in ln), lines[0] if lines else "shape mismatch")
        raise AegisError(
            f"weights {path} do not fit fasterrcnn {arch} with {NUM_CLASSES} classes: {detail.rstrip('.')}"
        ) from None


def _key_diff(expected: dict, given: dict) -> tuple[list[str], list[str]]:
    return sorted(set(expected) - set(given)), sorted(set(given) - set(expected))


class FasterRCNNDetector:
    """torchvision ``fasterrcnn_resnet50_fpn_v2`` (or ``mobilenet_v3`` FPN), eval mode, batched, no grad."""

    def __init__(
        self, weights: str | None, device: str, *, arch: str | None = None, max_det: int = 300, imgsz: int | None = None
    ):
        ckpt = read_checkpoint(weights) if weights is not None else None
        ckpt_arch = ckpt.get("arch") if ckpt else None
        if arch and ckpt_arch and arch != ckpt_arch:
            raise AegisError(
                f"`arch` {arch} does not match the checkpoint's arch {ckpt_arch} ({weights})", param="arch"
            )
        self.arch = arch or ckpt_arch or DEFAULT_ARCH
        if imgsz is None and ckpt and ckpt.get("imgsz"):
            imgsz = int(ckpt["imgsz"])
        self.net = build_fasterrcnn(self.arch, max_det=max_det, imgsz=imgsz)
        if ckpt is not None:
            load_state(self.net, ckpt["model"], str(weights), self.arch)
        self.net.eval().to(device)
        self.model = "fasterrcnn"
        self.weights = weights
        self.device = device
        self.max_det = int(max_det)
        self.imgsz = imgsz

    @classmethod
    def wrap(cls, net, device: str, *, arch: str, max_det: int = 300, imgsz: int | None = None):
        """A detector around an existing network (used for validation during training); no copy is made."""
        self = cls.__new__(cls)
        self.net, self.arch, self.model, self.weights = net, arch, "fasterrcnn", None
        self.device, self.max_det, self.imgsz = device, int(max_det), imgsz
        return self

    def describe(self) -> dict:
        return {
            "model": self.model,
            "arch": self.arch,
            "weights": self.weights,
            "device": self.device,
            "max_det": self.max_det,
            "imgsz": self.imgsz,
            "n_params": int(sum(p.numel() for p in self.net.parameters())),
        }

    def predict(self, images: list[np.ndarray], score_floor: float) -> list[Prediction]:
        import torch

        check_batch(images)
        if not images:
            return []
        # The RoI head drops boxes below its score threshold before NMS; set it to the floor so low-score
        # detections survive for AP and for threshold selection.
        self.net.roi_heads.score_thresh = float(score_floor)
        self.net.roi_heads.detections_per_img = self.max_det
        tensors = [
            torch.from_numpy(np.ascontiguousarray(im)).to(self.device).permute(2, 0, 1).float().div_(255.0)
            for im in images
        ]
        with torch.no_grad():
            outputs = self.net(tensors)
        out: list[Prediction] = []
        for o in outputs:
            keep = o["labels"] == PERSON_LABEL
            boxes = o["boxes"][keep].detach().cpu().double().numpy()
            scores = o["scores"][keep].detach().cpu().double().numpy()
            if len(scores) == 0:
                out.append(empty_prediction())
                continue
            order = np.argsort(-scores, kind="stable")[: self.max_det]
            out.append((np.ascontiguousarray(boxes[order]), np.ascontiguousarray(scores[order])))
        return out
