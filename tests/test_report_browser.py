"""The HTML report opened in a real browser: headless Chromium renders report.html, every <img> decodes
(naturalWidth > 0), nothing is logged as an error, and the screenshot is not blank. CI installs Chromium
(.ci/run); elsewhere the test skips, with the reason, when none is found."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from aegis_data.imageio import read_rgb
from aegis_eval.report.build import build_report
from aegis_eval.report.results import load_results
from browser import check_page, find_chromium

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CHROMIUM = find_chromium()
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium found (apt-get install -y chromium); "
                                                             "CI installs it in .ci/run")


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("browser-report")
    files = build_report(load_results(sorted(FIXTURES.glob("score_*.json"))), out, formats="html")
    return files.html


@needs_chromium
def test_report_renders_in_chromium(report, tmp_path):
    shot = tmp_path / "report.png"
    verdict = check_page(report, shot, CHROMIUM)
    n_figures = report.read_text(encoding="utf-8").count("<img ")
    assert verdict["images"] == n_figures >= 4, verdict
    assert verdict["broken"] == [] and all(w > 0 for w in verdict["widths"]), verdict
    assert verdict["errors"] == [] and verdict["console"] == [], verdict
    assert verdict["text_chars"] > 1000 and verdict["height"] > 2000, verdict
    assert verdict["screenshot_exit"] == 0 and shot.is_file()
    rgb = read_rgb(shot)
    assert rgb.shape[0] > 1000 and rgb.shape[1] > 1000
    colours = np.unique(rgb.reshape(-1, 3)[:: 7], axis=0)
    assert len(colours) > 200 and float(rgb.std()) > 10.0, "the screenshot looks blank"


@needs_chromium
def test_the_probe_sees_broken_images_and_errors(tmp_path):
    """Negative control: the same probe reports a broken image, a script error and a console error."""
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'></head><body><p>x</p>"
                    "<img alt='broken' src='data:image/png;base64,iVBORw0KGgoAAAA'>"
                    "<img alt='missing' src='no-such-file.png'>"
                    "<script>console.error('boom'); undefined_function();</script></body></html>")
    verdict = check_page(page, tmp_path / "bad.png", CHROMIUM)
    assert sorted(verdict["broken"]) == ["broken", "missing"], verdict
    joined = " ".join(verdict["errors"])
    assert "console.error: boom" in joined and "undefined_function" in joined and "resource failed" in joined
