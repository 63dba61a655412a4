"""The HTML report opened in a real browser: headless Chromium renders report.html, every <img> decodes
(naturalWidth > 0), nothing is logged as an error, and the screenshot is not blank; a two-model report from
the real scorer shows its summary, false-alarm section and sample sizes, with PNG and with SVG figures. CI
installs Chromium (.ci/run); elsewhere the test skips, with the reason, when none is found."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from aegis_data.files.imageio import read_rgb
from aegis_eval.report.build import build_report
from aegis_eval.report.results import load_results
from tests import FIXTURES_DIR
from tests.eval.report.browser import check_page, find_chromium

FIXTURES = FIXTURES_DIR
CHROMIUM = find_chromium()
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium found (apt-get install -y chromium); CI installs it in .ci/run"
)


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
    colours = np.unique(rgb.reshape(-1, 3)[::7], axis=0)
    assert len(colours) > 200 and float(rgb.std()) > 10.0, "the screenshot looks blank"


@pytest.fixture(scope="module")
def two_model_scores(tmp_path_factory) -> list[Path]:
    from tests.eval.report.report_fixtures import score_two_models

    return score_two_models(tmp_path_factory.mktemp("two-model-scores"))


@needs_chromium
@pytest.mark.parametrize("figures", ["png", "svg"])
def test_two_model_report_shows_the_review_sections(two_model_scores, tmp_path, figures):
    files = build_report(load_results(two_model_scores), tmp_path / "r", formats="html", html_figures=figures)
    html = files.html.read_text(encoding="utf-8")
    prefix = "data:image/png;base64," if figures == "png" else "data:image/svg+xml;charset=utf-8,"
    assert html.count(f'src="{prefix}') == len(files.figures) == 5
    verdict = check_page(files.html, tmp_path / "shot.png", CHROMIUM)
    assert verdict["images"] == 5 and verdict["broken"] == [] and all(w > 0 for w in verdict["widths"]), verdict
    assert verdict["errors"] == [] and verdict["console"] == [], verdict
    headings = verdict["headings"]
    for title in (
        "synthetic: summary across models",
        "synthetic: false alarms at the frozen threshold",
        "synthetic: robustness summary (recall)",
        "synthetic: mean relative drop of recall per family (%)",
    ):
        assert title in headings, headings
    assert verdict["tables"] >= 10 and verdict["bold_cells"] >= 6, verdict


@needs_chromium
def test_the_probe_sees_broken_images_and_errors(tmp_path):
    """Negative control: the same probe reports a broken image, a script error and a console error."""
    page = tmp_path / "bad.html"
    page.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'></head><body><p>x</p>"
        "<img alt='broken' src='data:image/png;base64,iVBORw0KGgoAAAA'>"
        "<img alt='missing' src='no-such-file.png'>"
        "<script>console.error('boom'); undefined_function();</script></body></html>"
    )
    verdict = check_page(page, tmp_path / "bad.png", CHROMIUM)
    assert sorted(verdict["broken"]) == ["broken", "missing"], verdict
    joined = " ".join(verdict["errors"])
    assert "console.error: boom" in joined and "undefined_function" in joined and "resource failed" in joined
