"""The one record type every source adapter produces and every later stage consumes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Box = tuple[float, float, float, float]  # absolute pixels, x_min, y_min, x_max, y_max


@dataclass(frozen=True)
class Record:
    """One image of a source dataset with its person boxes.

    image_id: stable, filesystem-safe stem (no path separators), unique within the dataset. It names the
        output file (``<image_id>.png``) and keys every random draw of the corruption engine.
    path: where the pixels come from: a file path, or a ``synthetic:`` URI understood by
        ``aegis_data.sources.read_rgb``.
    width, height: pixel size of the decoded image.
    boxes: person boxes, absolute xyxy pixels, inside the frame, x_max > x_min and y_max > y_min.
    group: key of the group the image belongs to (a sequence, a flight); images of one group never straddle
        splits. Defaults to the image id (every image its own group).
    split: ``train`` | ``val`` | ``test``.
    meta: free-form extras (original file name, source class names) carried into the audit.
    """

    image_id: str
    path: str
    width: int
    height: int
    boxes: tuple[Box, ...] = ()
    group: str = ""
    split: str = "test"
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def group_key(self) -> str:
        return self.group or self.image_id
