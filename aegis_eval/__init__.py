"""AegisBench evaluation side: the shared scorer, frozen thresholds, robustness summaries, runners, reports.

One import gives the public API (docs/API.md); each name is loaded on first use (PEP 562), so ``import
aegis_eval`` stays light (no torch, matplotlib or pycocotools until a function needs them)::

    import aegis_eval as ae
    frozen = ae.freeze_threshold("val_preds.json", "aegis-splits/synthetic-c", out="threshold.json")
    result = ae.score("preds/", "aegis-splits/synthetic-c", threshold_file="threshold.json")
    result.conditions["low_light_s3"].recall, result.rpc["recall"]
"""

from __future__ import annotations

from aegis_data.exports import lazy_exports

_EXPORTS = {
    "score": "aegis_eval.api",
    "ScoreResult": "aegis_eval.api",
    "ConditionResult": "aegis_eval.api",
    "freeze_threshold": "aegis_eval.api",
    "rank": "aegis_eval.api",
    "gt_diff": "aegis_eval.api",
    "score_referring": "aegis_eval.api",
    "convert_refs": "aegis_eval.api",
    "write_json": "aegis_eval.api",
}
# The baselines and reports (aegis_eval.api's second block).
_EXPORTS.update(
    {
        name: "aegis_eval.api"
        for name in (
            "predict",
            "train",
            "sweep",
            "ablate",
            "write_report",
            "write_gallery",
            "baseline_settings",
            "PredictRun",
            "TrainRun",
        )
    }
)
__all__ = list(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
