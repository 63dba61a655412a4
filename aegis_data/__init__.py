"""AegisBench data side: sources, the corruption engine and its suites, frozen splits and their verification.

One import gives the public API (docs/API.md); each name is loaded on first use (PEP 562), so ``import
aegis_data`` stays light::

    import aegis_data as ad
    out = ad.apply_corruption(rgb, "rain_streaks", 3, image_id="frame_0042", scale=ad.Scale("object", 60.0))
    old = ad.apply_corruption(rgb, "rain_streaks", 3, image_id="frame_0042", config=ad.load_config("aegis-v1"))
    result = ad.build_splits(ad.load_source("synthetic"), "aegis-splits/synthetic-c")
    split = ad.load_split("aegis-splits/synthetic-c")
"""

from __future__ import annotations

from aegis_data.exports import lazy_exports

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


__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
