"""AegisBench data side: sources, the aegis-v1 corruption engine, frozen splits and their verification.

One import gives the public API (docs/API.md); each name is loaded on first use (PEP 562), so ``import
aegis_data`` stays light::

    import aegis_data as ad
    out = ad.apply_corruption(rgb, "rain_streaks", 3, image_id="frame_0042")
    result = ad.build_splits(ad.load_source("synthetic"), "aegis-splits/synthetic-c")
    split = ad.load_split("aegis-splits/synthetic-c")
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.3.0"

# Public name -> the module that defines it.
_EXPORTS = {
    "AegisError": "aegis_data.errors",
    "apply_corruption": "aegis_data.engine.corruptions",
    "corruption_names": "aegis_data.engine.corruptions",
    "load_config": "aegis_data.engine.config",
    "load_source": "aegis_data.sources",
    "build_splits": "aegis_data.split.build",
    "verify_split": "aegis_data.split.verify",
    "load_split": "aegis_data.split.reader",
    "FrozenSplit": "aegis_data.split.reader",
    "Scale": "aegis_data.engine.scale",
    "DisasterAugment": "aegis_data.augment.transform",
    "load_policy": "aegis_data.augment.transform",
}
__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'aegis_data' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later lookups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
