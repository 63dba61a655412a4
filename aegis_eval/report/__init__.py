"""Reports of ``aegis score`` results (figures, Markdown/HTML/LaTeX) and the failure gallery.

Public API: ``load_results`` and ``build_report`` -> ``ReportFiles``; ``build_gallery`` -> ``GalleryFiles``.
matplotlib (the "report" extra) is imported only when figures are rendered.
"""

from aegis_eval.protocols.score_doc import validate_result
from aegis_eval.report.build import FORMATS, ReportFiles, build_report, parse_formats
from aegis_eval.report.gallery import GalleryFiles, GalleryPair, build_gallery
from aegis_eval.report.results import METRICS, load_results

__all__ = [
    "FORMATS",
    "METRICS",
    "GalleryFiles",
    "GalleryPair",
    "ReportFiles",
    "build_gallery",
    "build_report",
    "load_results",
    "parse_formats",
    "validate_result",
]
