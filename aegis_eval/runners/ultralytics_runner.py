"""YOLO11 and RT-DETR through Ultralytics, behind the Detector interface."""

from __future__ import annotations

import numpy as np

from aegis_data.errors import AegisError
from aegis_eval.runners.detector import Prediction, check_batch, empty_prediction

PERSON_NAMES = ("person", "human", "people", "pedestrian")


def _person_classes(names: dict) -> list[int] | None:
    """Class indices to keep: the person class of a multi-class model (e.g. COCO), else all (None).

    A model fine-tuned here has one class; a random yaml model has placeholder names, so nothing is filtered.
    """
    if not names or len(names) <= 1:
        return None
    keep = [int(i) for i, n in names.items() if str(n).lower() in PERSON_NAMES]
    return keep or None


class UltralyticsDetector:
    """An Ultralytics YOLO or RTDETR model in predict mode.

    Ultralytics expects BGR numpy frames; ``predict`` converts from RGB. Its own NMS (class-agnostic here, IoU
    0.7 default) runs inside; boxes come back in original-image pixels.
    """

    def __init__(self, model: str, weights: str, device: str, *, max_det: int = 300, imgsz: int | None = None):
        from aegis_data.extras import require

        ultralytics = require("ultralytics", f"the {model} runner")
        RTDETR, YOLO = ultralytics.RTDETR, ultralytics.YOLO
        cls = RTDETR if model == "rtdetr" else YOLO
        from aegis_eval.runners.checkpoints import check_ultralytics_weights

        check_ultralytics_weights(weights)  # Ultralytics itself would unpickle the file with weights_only=False
        try:
            self._net = cls(weights)
        except (FileNotFoundError, OSError) as exc:
            raise AegisError(f"cannot load {model} weights {weights!r}: {str(exc).splitlines()[0]}") from None
        except Exception as exc:  # ultralytics raises assorted types for a wrong/corrupt file
            raise AegisError(
                f"cannot load {model} weights {weights!r}: {type(exc).__name__}: "
                f"{str(exc).splitlines()[0] if str(exc) else ''}"
            ) from None
        if getattr(self._net, "task", "detect") != "detect":
            raise AegisError(f"weights {weights!r} are a {self._net.task} model; a detect model is needed")
        self.model = model
        self.weights = weights
        self.device = device
        self.max_det = int(max_det)
        self.imgsz = None if imgsz is None else int(imgsz)
        self.classes = _person_classes(getattr(self._net, "names", {}) or {})

    @property
    def net(self):
        """The wrapped ultralytics model (for training and inspection)."""
        return self._net

    def describe(self) -> dict:
        return {
            "model": self.model,
            "weights": self.weights,
            "device": self.device,
            "max_det": self.max_det,
            "imgsz": self.imgsz,
            "classes": self.classes,
            "n_params": int(sum(p.numel() for p in self._net.model.parameters())),
        }

    def predict(self, images: list[np.ndarray], score_floor: float) -> list[Prediction]:
        check_batch(images)
        if not images:
            return []
        # agnostic_nms: every kept class means "person" here (a multi-class model is either filtered to its
        # person class or, for a random yaml model, all classes count), so overlapping boxes compete as one class.
        kwargs = dict(
            conf=float(score_floor),
            max_det=self.max_det,
            device=self.device,
            verbose=False,
            batch=len(images),
            save=False,
            agnostic_nms=True,
        )
        if self.imgsz is not None:
            kwargs["imgsz"] = self.imgsz
        if self.classes is not None:
            kwargs["classes"] = self.classes
        bgr = [np.ascontiguousarray(im[:, :, ::-1]) for im in images]
        results = self._net.predict(source=bgr, **kwargs)
        out: list[Prediction] = []
        for r in results:
            if r.boxes is None or len(r.boxes) == 0:
                out.append(empty_prediction())
                continue
            boxes = r.boxes.xyxy.detach().cpu().double().numpy()
            scores = r.boxes.conf.detach().cpu().double().numpy()
            order = np.argsort(-scores, kind="stable")[: self.max_det]
            out.append((np.ascontiguousarray(boxes[order]), np.ascontiguousarray(scores[order])))
        return out
