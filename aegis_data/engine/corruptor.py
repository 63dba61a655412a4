"""The engine as the callable the builders take: ``corrupt(image, name, severity, image_id[, seed])``.

The split builder, verify's re-rendering, calibration and the severity grid all run ``apply_corruption`` with
a suite config and a length unit fixed for the whole job; :class:`SuiteCorruptor` is that binding, once. It is
a frozen dataclass of plain values, so it pickles to pool processes and Dask workers, and it imports the engine
(NumPy, OpenCV, the compiled loops) only when first called.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: importing this module stays light
    import numpy as np

    from aegis_data.engine.config import SuiteConfig
    from aegis_data.engine.scale import Scale


@dataclass(frozen=True)
class SuiteCorruptor:
    """``apply_corruption`` bound to ``config`` (None: the installed suite), ``scale`` (None: frame) and,
    optionally, ``seed`` (None: the seed passed per call, else the suite's global seed)."""

    config: SuiteConfig | None = None
    scale: Scale | None = None
    seed: int | None = None

    def __call__(
        self, image: np.ndarray, name: str, severity: int, image_id: Any, seed: int | None = None, scene: Any = None
    ) -> np.ndarray:
        """``scene``: a generation-2 suite's :class:`~aegis_data.engine.scene.Scene` of ``image`` (estimated with the
        bound scale's person unit when None)."""
        from aegis_data.engine.config import load_config
        from aegis_data.engine.corruptions import apply_corruption

        used = seed if seed is not None else self.seed
        if used is None:
            used = (self.config or load_config()).seed
        return apply_corruption(
            image, name, severity, image_id, seed=int(used), config=self.config, scale=self.scale, scene=scene
        )
