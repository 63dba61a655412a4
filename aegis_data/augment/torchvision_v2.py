"""``DisasterAugment`` as a torchvision ``transforms.v2`` transform (needs torch and torchvision).

Works on a ``tv_tensors.Image`` (with ``BoundingBoxes``, masks, labels or any other entries passed through
unchanged, the same objects), on a plain CHW tensor (uint8, or float in [0, 1]) and on an HxWx3 uint8 ndarray.
The corruption depends on (seed, epoch, sample): ``sample`` is the keyword argument when given, else the
``"image_id"`` entry of a target dict in the input (what torchvision's detection datasets return), so the
transform is deterministic whatever the data-loader order. Call ``set_epoch`` at the start of every epoch.

    aug = DisasterAugmentV2("all", seed=0)
    pipeline = v2.Compose([aug, v2.RandomHorizontalFlip(), v2.ToDtype(torch.float32, scale=True)])
    for epoch in range(E):
        aug.set_epoch(epoch)
        ...
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils._pytree import tree_flatten, tree_unflatten
from torchvision import tv_tensors
from torchvision.transforms import v2

from aegis_data.augment.transform import AugmentPolicy, DisasterAugment, Sample
from aegis_data.errors import AegisError


def _find_sample(obj: Any) -> Sample | None:
    """The ``"image_id"`` of the first target dict found in the (nested) input, or None."""
    if isinstance(obj, Mapping):
        value = obj.get("image_id")
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = value.reshape(-1)[0].item()
        if isinstance(value, (int, np.integer, str)) and not isinstance(value, bool):
            return value
        children: Iterable[Any] = obj.values()
    elif isinstance(obj, (tuple, list)):
        children = obj
    else:
        return None
    for child in children:
        found = _find_sample(child)
        if found is not None:
            return found
    return None


def _image_index(leaves: list[Any]) -> int:
    """The image leaf: the first ``tv_tensors.Image``, else the first plain tensor or ndarray (as torchvision's
    v2 transforms pick the image of a sample)."""
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, tv_tensors.Image):
            return i
    for i, leaf in enumerate(leaves):
        if (isinstance(leaf, torch.Tensor) and not isinstance(leaf, tv_tensors.TVTensor)) or isinstance(
            leaf, np.ndarray
        ):
            return i
    raise AegisError(
        "DisasterAugmentV2 found no image in its input (expected a tv_tensors.Image, a CHW tensor "
        "or an HxWx3 uint8 ndarray)"
    )


def _to_hwc_uint8(image: Any) -> np.ndarray:
    if isinstance(image, np.ndarray):
        return image
    t = image.detach().cpu()
    if t.ndim != 3 or t.shape[0] != 3:
        raise AegisError(f"DisasterAugmentV2 needs a 3xHxW RGB image tensor, got shape {tuple(t.shape)}")
    if t.dtype == torch.uint8:
        return np.ascontiguousarray(t.permute(1, 2, 0).numpy())
    if t.is_floating_point():
        x = t.permute(1, 2, 0).double().numpy()
        if not np.all(np.isfinite(x)) or x.min() < 0.0 or x.max() > 1.0:
            raise AegisError("DisasterAugmentV2 needs float images in [0, 1]; convert with v2.ToDtype(scale=True)")
        return np.floor(x * 255.0 + 0.5).astype(np.uint8)
    raise AegisError(f"DisasterAugmentV2 needs a uint8 or float image tensor, got dtype {t.dtype}")


def _like(out: np.ndarray, image: Any) -> Any:
    """``out`` (HxWx3 uint8) in the type, dtype and device of ``image``."""
    if isinstance(image, np.ndarray):
        return out
    t = torch.from_numpy(out).permute(2, 0, 1).contiguous()
    if image.is_floating_point():
        t = t.to(image.dtype) / 255.0
    t = t.to(image.device)
    return tv_tensors.wrap(t, like=image) if isinstance(image, tv_tensors.TVTensor) else t


class DisasterAugmentV2(v2.Transform):
    """torchvision-v2 wrapper of :class:`aegis_data.augment.transform.DisasterAugment` (see the module doc)."""

    def __init__(self, policy: AugmentPolicy | str | Path, seed: int = 0, epoch: int = 0, scale=None):
        """``scale``: the training frames' person unit (``Scale("object", px)``), which aegis-v2 policies need."""
        super().__init__()
        self.augment = DisasterAugment(policy, seed, scale=scale)
        self.epoch = 0
        self.set_epoch(epoch)

    def set_epoch(self, epoch: int) -> None:
        if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)) or epoch < 0:
            raise AegisError(f"`epoch` must be an int >= 0, got {epoch!r}", param="epoch")
        self.epoch = int(epoch)

    def forward(self, *inputs: Any, sample: Sample | None = None) -> Any:
        packed = inputs if len(inputs) > 1 else inputs[0]
        leaves, spec = tree_flatten(packed)
        if sample is None:
            sample = _find_sample(packed)
        if sample is None:
            raise AegisError(
                "DisasterAugmentV2 needs the sample's id: pass `sample` (its index or id), or include "
                "'image_id' in the target dict",
                param="sample",
            )
        k = _image_index(leaves)
        image = leaves[k]
        out = self.augment.apply(_to_hwc_uint8(image), self.augment.choose(self.epoch, sample))
        leaves = list(leaves)
        leaves[k] = _like(out, image)
        return tree_unflatten(leaves, spec)
