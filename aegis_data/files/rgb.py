"""The one image type of the toolkit: a non-empty HxWx3 uint8 RGB array, and its check."""

from __future__ import annotations

from typing import Any

import numpy as np

from aegis_data.errors import AegisError


def check_rgb_image(image: Any, what: str = "image") -> np.ndarray:
    """``image`` when it is a non-empty HxWx3 uint8 RGB numpy array; else AegisError naming ``what``, what it got
    and what was expected."""
    if not isinstance(image, np.ndarray):
        raise AegisError(f"{what} must be a numpy array (HxWx3 uint8 RGB), got {type(image).__name__}")
    if image.dtype != np.uint8:
        raise AegisError(f"{what} must have dtype uint8 (an HxWx3 uint8 RGB array), got {image.dtype}")
    if image.ndim != 3 or image.shape[2] != 3:
        raise AegisError(f"{what} must be HxWx3 RGB (an HxWx3 uint8 array), got shape {image.shape}")
    if image.shape[0] == 0 or image.shape[1] == 0:
        raise AegisError(f"{what} must not be empty (a non-empty HxWx3 uint8 array), got shape {image.shape}")
    return image
