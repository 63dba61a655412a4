"""False alarms as a risk budget: exposure and exact one-sided upper bounds beside the point rates.

For one condition at the frozen threshold:

* exposure: ``n_images`` and ``megapixels`` (sum of width x height / 1e6 over the GT images; None when any
  image lacks its size);
* ``fp_per_image`` = fp / n_images with ``fp_per_image_upper`` = Garwood(fp) / n_images — the FP count is
  treated as a Poisson count over the exposure;
* ``fp_per_megapixel`` = fp / megapixels with ``fp_per_megapixel_upper`` = Garwood(fp) / megapixels;
* ``false_alarm_image_share`` = images_with_fp / n_images with ``false_alarm_image_share_upper`` =
  Clopper-Pearson(images_with_fp, n_images) — each image is one Bernoulli trial "has any false alarm".

Bounds are exact (``aegis_eval.metrics.exact_bounds``) at one-sided confidence ``1 - delta``, so they stay honest
when the counts are tiny: zero false alarms on 100 images still bounds the share by 2.95%, not 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aegis_eval.metrics.exact_bounds import DEFAULT_DELTA, clopper_pearson_upper, garwood_upper
from aegis_eval.metrics.matching import PerImageCounts
from aegis_eval.metrics.types import GroundTruth


def exposure_megapixels(gt: GroundTruth) -> float | None:
    """Total image area of the split in megapixels; None when any image has no width or height."""
    widths = np.asarray(gt.widths, dtype=np.float64)
    heights = np.asarray(gt.heights, dtype=np.float64)
    if gt.n_images == 0 or (widths <= 0).any() or (heights <= 0).any():
        return None
    return float(np.sum(widths * heights)) / 1e6


def false_alarm_risk(
    fp: int, images_with_fp: int, n_images: int, megapixels: float | None, delta: float = DEFAULT_DELTA
) -> dict[str, Any]:
    """The false-alarm record (counts, rates and their upper bounds) from totals; rates and bounds None where the
    exposure is zero or unknown."""
    fp, images_with_fp, n_images = int(fp), int(images_with_fp), int(n_images)
    count_upper = garwood_upper(fp, delta)
    has_images = n_images > 0
    area = megapixels if megapixels is not None and megapixels > 0 else None
    return {
        "n_images": n_images,
        "megapixels": megapixels,
        "fp": fp,
        "images_with_fp": images_with_fp,
        "fp_per_image": fp / n_images if has_images else None,
        "fp_per_image_upper": count_upper / n_images if has_images else None,
        "fp_per_megapixel": fp / area if area is not None else None,
        "fp_per_megapixel_upper": count_upper / area if area is not None else None,
        "false_alarm_image_share": images_with_fp / n_images if has_images else None,
        "false_alarm_image_share_upper": clopper_pearson_upper(images_with_fp, n_images, delta) if has_images else None,
    }


def false_alarm_record(gt: GroundTruth, counts: PerImageCounts, delta: float = DEFAULT_DELTA) -> dict[str, Any]:
    """:func:`false_alarm_risk` of one condition's per-image counts at the frozen threshold."""
    totals = counts.totals()
    return false_alarm_risk(totals["fp"], totals["images_with_fp"], counts.n_images, exposure_megapixels(gt), delta)
