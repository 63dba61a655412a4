"""The numbers: data types of ground truth and detections, matching, COCO AP, bootstrap intervals, exact
bounds, false-alarm exposure, localization stability and robustness summaries.

Lives here: ``types``, ``result_keys`` (every result key, declared once), ``matching``, ``coco`` (AP exactly as
pycocotools computes it), ``bootstrap``, ``exact_bounds``, ``false_alarms``, ``localization``, ``robustness``.
May import: ``aegis_data`` (errors; ``aegis_data.conditions`` for condition names; the engine's suite config) and
each other. Never ``protocols``, ``runners`` or ``report``: functions of arrays, no files.
"""
