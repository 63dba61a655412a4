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

# Public name -> where it is loaded from: the data side's one front door, aegis_data.api.
_EXPORTS = {
    name: "aegis_data.api"
    for name in (
        "AegisError",
        "apply_corruption",
        "corruption_names",
        "load_config",
        "load_source",
        "build_splits",
        "verify_split",
        "load_split",
        "FrozenSplit",
        "Scale",
        "DisasterAugment",
        "load_policy",
        "open_source",
        "source_options",
        "audit_source",
        "list_suite",
        "describe_suite",
        "choose_scale",
        "corrupt_file",
        "CorruptResult",
        "grid_file",
        "GridResult",
        "calibrate",
        "Calibration",
        "realism",
        "export_hf",
        "push_hf",
        "write_json",
    )
}
__all__ = ["__version__", *_EXPORTS]


__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
