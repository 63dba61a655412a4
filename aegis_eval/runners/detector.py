"""What every reference detector is: the ``Detector`` protocol, its prediction type and the batch check.

The one interface the runners share (docs/BASELINES.md), below the detectors that implement it
(``torchvision_runner``, ``ultralytics_runner``) and the code that drives them (``tiled``, ``predict``,
``train``), so none of them imports the package's ``load_detector`` back.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from aegis_data.errors import AegisError
from aegis_data.files.rgb import check_rgb_image

MODELS = ("yolo11", "rtdetr", "fasterrcnn")
FASTERRCNN_ARCHS = ("resnet50_v2", "mobilenet_v3")

Prediction = tuple[np.ndarray, np.ndarray]  # (N,4) xyxy float64, (N,) float64


@runtime_checkable
class Detector(Protocol):
    """A loaded detector.

    ``predict`` takes RGB uint8 HxWx3 arrays (any sizes) and returns one ``(boxes, scores)`` per image:
    boxes (N,4) float64 xyxy in that image's pixels, scores (N,) float64 in [0,1], descending, only the
    person class, at most ``max_det`` and none below ``score_floor``.
    """

    model: str
    device: str
    max_det: int

    def predict(self, images: list[np.ndarray], score_floor: float) -> list[Prediction]: ...

    def describe(self) -> dict[str, Any]: ...


def check_batch(images: list[np.ndarray]) -> None:
    """Validate a predict() batch: a list of HxWx3 uint8 arrays."""
    if not isinstance(images, (list, tuple)):
        raise AegisError(f"predict expects a list of images, got {type(images).__name__}")
    for i, im in enumerate(images):
        check_rgb_image(im, f"image {i} of the batch")


def empty_prediction() -> Prediction:
    return np.zeros((0, 4), np.float64), np.zeros((0,), np.float64)
