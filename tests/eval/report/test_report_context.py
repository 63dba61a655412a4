"""What the report says about where its numbers come from (issue 32, deliverable 5): the dataset's name from the
score JSON, each threshold's validation sample and warnings, and the gallery's worst and best pairs per condition."""

from __future__ import annotations

import json

import pytest

from aegis_data.errors import AegisError
from aegis_eval.report import build_report, load_results
from aegis_eval.report.latex import latex_escape
from tests import FIXTURES_DIR

YOLO = FIXTURES_DIR / "score_heridal_yolo11n.json"
RTDETR = FIXTURES_DIR / "score_heridal_rtdetr_l.json"
WARNING = "[threshold_at_score_floor] 0.05 is the detector's lowest score; freeze on a grid above it"


def _docs(dataset: str = "heridal-drone-2024") -> list[dict]:
    docs = []
    for path in (YOLO, RTDETR):
        doc = json.loads(path.read_text(encoding="utf-8"))
        doc["dataset"] = dataset
        doc["_source"] = str(path)
        docs.append(doc)
    # New score JSONs carry the validation sample and the warnings of their threshold; old ones lack both keys.
    docs[0]["threshold"]["validation"] = {"n_images": 1250, "n_gt": 4321}
    docs[0]["threshold"]["warnings"] = [WARNING]
    return docs


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("context")
    files = build_report(_docs(), out / "report")
    md = files.markdown.read_text(encoding="utf-8")
    html = files.html.read_text(encoding="utf-8")
    tex = (files.out / "tables" / "thresholds.tex").read_text(encoding="utf-8")
    doc = files.latex_document.read_text(encoding="utf-8")
    return files, md, html, tex, doc


def test_the_report_names_the_dataset_of_the_score_json(report):
    files, md, html, _tex, doc = report
    assert "## heridal-drone-2024" in md and "Datasets: heridal-drone-2024 (2 models)" in md
    assert ">heridal-drone-2024</h2>" in html
    assert "\\section{heridal-drone-2024}" in doc
    assert all(p.name.startswith("heridal-drone-2024_") for p in files.figures)


def test_threshold_validation_sample_and_warnings_in_every_format(report):
    _files, md, html, tex, _doc = report
    row = next(line for line in md.splitlines() if line.startswith("| heridal-drone-2024 | yolo11n"))
    assert "1,250 images, 4,321 GT" in row
    other = next(line for line in md.splitlines() if line.startswith("| heridal-drone-2024 | rtdetr"))
    assert "images" not in other, "an old threshold file: the validation cell stays blank"
    assert "does not record its sample" in md
    # The warning names its run and keeps its [code].
    assert f"Warning, heridal-drone-2024 / yolo11n: {WARNING}" in md
    assert (
        "1,250 images, 4,321 GT" in html and "Warning, heridal-drone-2024 / yolo11n: [threshold_at_score_floor]" in html
    )
    assert "1,250 images, 4,321 GT" in tex and latex_escape(WARNING) in tex


def test_old_score_jsons_show_no_validation_column_values_and_no_warning(tmp_path):
    docs = _docs()
    for d in docs:
        d["threshold"].pop("validation", None)
        d["threshold"].pop("warnings", None)
    files = build_report(docs, tmp_path, formats="md")
    md = files.markdown.read_text(encoding="utf-8")
    assert "Warning," not in md and "does not record its sample" in md
    assert "| validation |" in md


def test_malformed_validation_blocks_are_refused_when_read(tmp_path):
    # The score-doc validator checks the block when a score JSON is read: the report never shows a bad one.
    docs = _docs()
    docs[0]["threshold"]["validation"] = {"n_images": "many", "n_gt": True}
    with pytest.raises(AegisError, match=r"threshold.validation must be \{n_images, n_gt\} integers >= 0"):
        load_results_from(docs, tmp_path)


def load_results_from(docs: list[dict], tmp_path) -> list[dict]:
    paths = []
    for k, d in enumerate(docs):
        p = tmp_path / f"s{k}.json"
        p.write_text(json.dumps({key: v for key, v in d.items() if key != "_source"}), encoding="utf-8")
        paths.append(p)
    return load_results(paths)
