"""The scoring protocols built on the metrics: loading and validating predictions and GT, class remaps,
frozen thresholds, scoring a sweep, ranking models, GT revisions, referring detection, cross-checks,
mitigation studies and provenance.

Lives here: ``predictions`` (with ``results_file``), ``class_map``, ``threshold``, ``scoring``, ``ranking``,
``gt_diff``, ``referring``, ``crosscheck``, ``mitigation``, ``provenance``, ``versions``, ``warning_groups``.
May import: ``aegis_data``, ``aegis_eval.metrics`` and each other. Never ``runners`` or ``report``.
"""
