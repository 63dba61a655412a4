"""The report's figures say only what their intervals support (issue 32, deliverable 3): whiskers on the family
bars, heatmap cells whose drop interval includes 0 faded and hatched, axes scaled to the data, TrueType fonts in
the PDFs (no Type 3, checked with poppler's ``pdffonts``)."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from aegis_eval.report import figures as F
from aegis_eval.report import palette
from aegis_eval.report.results import family_drop_interval, group_by_dataset
from tests import FIXTURES_DIR
from tests.eval.report.test_report_pdf import font_types

YOLO = FIXTURES_DIR / "score_heridal_yolo11n.json"


def _doc() -> dict:
    return json.loads(YOLO.read_text(encoding="utf-8"))


def _group(*docs: dict):
    (group,) = group_by_dataset(list(docs))
    return group


def _ci_zero_patches(fig) -> int:
    return sum(1 for ax in fig.axes for p in ax.patches if p.get_gid() == "ci-zero")


def test_heatmap_fades_exactly_the_cells_whose_drop_interval_includes_zero():
    doc = _doc()
    for cond, block in doc["conditions"].items():
        if cond != "clean":
            block["ci_drop"]["recall"] = [0.01, 0.2]  # every interval excludes 0 ...
    doc["conditions"]["water_glare_s1"]["ci_drop"]["recall"] = [-0.05, 0.1]  # ... but one
    doc["conditions"]["low_light_s2"]["ci_drop"]["recall"] = [0.0, 0.3]  # an end at 0 includes 0
    plan = F.heatmap(_group(doc), "recall")
    with F.drawn(plan) as fig:
        assert _ci_zero_patches(fig) == 2
        notes = [t.get_text() for t in fig.texts]
    assert any("95% CI of the drop includes 0, 2 cells" in t for t in notes)
    # No interval, no claim: without ci_drop nothing is faded.
    bare = _doc()
    for block in bare["conditions"].values():
        block.pop("ci_drop", None)
    with F.drawn(F.heatmap(_group(bare), "recall")) as fig:
        assert _ci_zero_patches(fig) == 0
        assert not any("includes 0" in t.get_text() for t in fig.texts)


def test_heatmap_faded_cell_is_lighter_and_hatched_in_the_png():
    import cv2

    doc = _doc()
    for block in doc["conditions"].values():
        block.pop("ci_drop", None)
    plain = F.render(F.heatmap(_group(doc), "recall"), vector=False).png
    doc["conditions"]["water_glare_s3"]["ci_drop"] = {"recall": [-0.1, 0.4]}
    faded = F.render(F.heatmap(_group(doc), "recall"), vector=False).png
    a = cv2.imdecode(np.frombuffer(plain, np.uint8), cv2.IMREAD_COLOR).astype(int)
    b = cv2.imdecode(np.frombuffer(faded, np.uint8), cv2.IMREAD_COLOR).astype(int)
    # Row 0 (water glare), column 2 (s3): layout pixels (215 + 46*2, 78) at 2x.
    x0, y0 = 2 * (215 + 46 * 2), 2 * 78
    cell_a, cell_b = a[y0 + 6 : y0 + 62, x0 + 6 : x0 + 86], b[y0 + 6 : y0 + 62, x0 + 6 : x0 + 86]
    assert cell_b.mean() > cell_a.mean() + 40, "the faded cell is much lighter"
    assert cell_b.std() > 10, "and hatched (lines over the veil), not a flat colour"
    x1 = 2 * (215 + 46)  # the neighbour (s2) is untouched
    assert np.array_equal(a[y0 + 6 : y0 + 62, x1 + 6 : x1 + 86], b[y0 + 6 : y0 + 62, x1 + 6 : x1 + 86])


def _errorbar_segments(fig) -> list[tuple[float, float, float]]:
    """(x, low, high) of every whisker of the family bars, in data units."""
    from matplotlib.container import ErrorbarContainer

    (ax,) = fig.axes
    out = []
    for c in ax.containers:
        if isinstance(c, ErrorbarContainer):
            for coll in c.lines[2]:
                for seg in coll.get_segments():
                    (x0, y0), (_x1, y1) = seg[0], seg[-1]
                    out.append((float(x0), float(min(y0, y1)), float(max(y0, y1))))
    return out


def test_family_bars_have_whiskers_at_the_family_interval_and_labels_beyond_them():
    doc = _doc()
    ci = {"flood": [0.02, 0.31], "wildfire": [-0.12, 0.4], "storm": [0.05, 0.09], "earthquake": [0.1, 0.2]}
    doc["summary"]["ci"] = {"per_family": {fam: {"recall": pair} for fam, pair in ci.items()}}
    group = _group(doc)
    run = group.runs[0]
    assert family_drop_interval(run, "wildfire", "recall") == (-0.12, 0.4)
    plan = F.family_bars(group, "recall")
    with F.drawn(plan) as fig:
        segments = sorted(_errorbar_segments(fig))
        got = [(lo, hi) for _, lo, hi in segments]
        assert got == [pytest.approx(tuple(ci[f]), abs=1e-12) for f in group.family_order]
        (ax,) = fig.axes
        lo, hi = ax.get_ylim()
        assert lo < -0.12 and hi > 0.4, "the axis holds every whisker"
        renderer = fig.canvas.get_renderer()
        labels = [t for t in ax.texts if t.get_gid() == "bar-label"]
        for (x, _lo, top), label in zip(segments, labels):
            tip = ax.transData.transform((x, top))[1]
            assert label.get_window_extent(renderer).y0 >= tip - 0.5, "the label sits beyond the whisker"
        assert "95% CI" in fig._suptitle.get_text()
    # Without intervals: no whiskers, and the title does not claim any.
    with F.drawn(F.family_bars(_group(_doc()), "recall")) as fig:
        assert _errorbar_segments(fig) == [] and "CI" not in fig._suptitle.get_text()


def test_family_whiskers_flip_with_the_sign_for_lower_is_better_metrics():
    doc = _doc()
    doc["summary"]["ci"] = {"per_family": {"flood": {"fp_per_image": [-0.5, -0.1]}}}
    with F.drawn(F.family_bars(_group(doc), "fp_per_image")) as fig:
        assert [(lo, hi) for _, lo, hi in _errorbar_segments(fig)] == [pytest.approx((0.1, 0.5), abs=1e-12)]


def test_severity_curve_axis_is_scaled_to_the_data_not_fixed_to_one():
    doc = _doc()
    for block in doc["conditions"].values():
        block["recall"] = round(0.1 + 0.05 * (block.get("severity") or 0) / 3, 4)
        block["ci"]["recall"] = [block["recall"] - 0.03, block["recall"] + 0.04]
    with F.drawn(F.severity_curves(_group(doc), "recall")) as fig:
        top = fig.axes[0].get_ylim()[1]
    assert top == pytest.approx(0.19 * 1.08), top  # the largest band end (0.19) plus a margin, not 1.02
    # Values near 1 stop just above 1.
    assert F.data_top(0.99, bounded=True) == 1.02 and F.data_top(0.0, bounded=True) == 0.05
    assert F.data_top(3.0, bounded=False) == pytest.approx(3.24)


def test_false_alarm_axis_is_scaled_to_the_upper_bounds():
    doc = _doc()
    conds = {}
    for cond in doc["conditions"]:
        conds[cond] = {"false_alarm_image_share": 0.05, "false_alarm_image_share_upper": 0.12}
    doc["false_alarm"] = {"confidence": 0.95, "conditions": conds}
    with F.drawn(F.false_alarm_shares(_group(doc))) as fig:
        top = fig.axes[0].get_ylim()[1]
    assert top == pytest.approx(0.12 * 1.08)


# --- fonts -----------------------------------------------------------------------------------------------------


def pdf_font_types(pdf: bytes, tmp_path) -> list[str]:
    """The font types poppler's ``pdffonts`` lists for a PDF (``Type 3``, ``CID TrueType``, ...), read by
    test_report_pdf's parser; skipped (a failure in CI, tests/conftest.py) when poppler-utils is not installed."""
    path = tmp_path / "f.pdf"
    path.write_bytes(pdf)
    return [kind for _name, kind in font_types(path)]


def test_figure_pdfs_embed_truetype_fonts_never_type3(tmp_path):
    import matplotlib

    doc = _doc()
    group = _group(doc)
    with matplotlib.rc_context({"pdf.fonttype": 3}):
        for plan in (F.heatmap(group, "recall"), F.severity_curves(group, "recall"), F.family_bars(group, "recall")):
            types = pdf_font_types(F.render(plan).pdf, tmp_path)
            assert types and all(t in ("TrueType", "CID TrueType") for t in types), types
        # The report's settings (42) apply inside render only: the caller's Type 3 is back.
        assert matplotlib.rcParams["pdf.fonttype"] == 3
    assert palette.RC_PARAMS["pdf.fonttype"] == 42


def test_the_font_check_catches_type3(tmp_path):
    """Negative control: matplotlib's default (Type 3) is what the check above rejects."""

    rc = copy.deepcopy(palette.RC_PARAMS)
    rc["pdf.fonttype"] = 3
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(palette, "RC_PARAMS", rc)
        pdf = F.render(F.family_bars(_group(_doc()), "recall")).pdf
    assert "Type 3" in pdf_font_types(pdf, tmp_path)


def test_svg_figures_keep_text_as_text():
    svg = F.render(F.family_bars(_group(_doc()), "recall")).svg
    assert b"<text" in svg and b"Type3" not in svg and palette.RC_PARAMS["svg.fonttype"] == "none"
