"""Keys of the ``aegis score`` JSON (docs/SCORE_JSON.md), declared once for the scorer, the CSV writer and the
report."""

SCHEMA = "aegis-score/1"

# COCO AP family, exactly as pycocotools computes them (maxDets 100).
AP_METRICS = ("map50_95", "map50", "map75", "map_small", "map_medium", "map_large")
# Metrics at the frozen confidence threshold (one-to-one matching at IoU >= 0.5).
THRESHOLD_METRICS = (
    "precision",
    "recall",
    "f1",
    "fp_per_image",
    "false_alarm_image_share",
    "recall_small",
    "recall_medium",
    "recall_large",
)
COUNT_KEYS = ("tp", "fp", "fn", "n_gt", "n_images")
# Metrics that get bootstrap intervals.
CI_METRICS = ("precision", "recall", "f1", "fp_per_image", "map50", "map50_95")
# Metrics where a larger value is worse (relative drop is reported with the sign flipped in plots only).
LOWER_IS_BETTER = ("fp_per_image", "false_alarm_image_share")
LOCALIZATION_KEYS = ("n_matched", "iou_clean_vs_condition", "center_shift", "iou_gt_clean", "iou_gt_condition")
