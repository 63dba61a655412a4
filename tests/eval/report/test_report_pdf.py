"""report.tex compiles to a PDF a venue accepts (issue 32, deliverable 4): pdflatex compiles it, every font is
embedded vector (Latin Modern text, TrueType figure fonts; no Type 3, checked with poppler's ``pdffonts``), no
section heading sits alone at the foot of a page, and wide tables are split or turned sideways instead of being
shrunk below a readable size (word heights measured with ``pdftotext -bbox``).

pdflatex and poppler-utils are system tools: without them these tests skip with the reason, and in CI (CI=true,
``.ci/run`` installs both) a skip is a failure (tests/conftest.py).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from aegis_eval.report import build_report, load_results
from aegis_eval.report.latex import LatexFigure, figure_placement, latex_document, latex_table, split_columns
from aegis_eval.report.tables import Table
from tests.eval.report.report_fixtures import compile_report_tex


def _tool(name: str, package: str) -> str:
    exe = shutil.which(name)
    if exe is None:
        pytest.skip(f"{name} not installed (apt-get install {package}; .ci/run installs it)")
    return exe


def font_types(pdf: Path) -> list[tuple[str, str]]:
    """(name, type) of every font ``pdffonts`` lists."""
    exe = _tool("pdffonts", "poppler-utils")
    out = subprocess.run([exe, str(pdf)], capture_output=True, text=True, timeout=60, check=True).stdout
    rows = []
    for line in out.splitlines()[2:]:
        m = re.match(r"(\S+)\s+(CID TrueType|TrueType|Type 3|Type 1C|Type 1|CID Type 0C|CID Type 0)\s", line)
        assert m, line
        rows.append((m.group(1), m.group(2)))
    return rows


def page_texts(pdf: Path) -> list[str]:
    exe = _tool("pdftotext", "poppler-utils")
    out = subprocess.run([exe, "-layout", str(pdf), "-"], capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.split("\f")[:-1]


_WORD = re.compile(r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">(.*?)</word>')


def word_sizes(pdf: Path, pages: list[int]) -> list[tuple[float, str]]:
    """(size, word) of every word of at least 3 letters or digits on ``pages`` (1-based): the smaller side of its box,
    which is the text's height whether the word runs across the page or up it (a table turned sideways)."""
    exe = _tool("pdftotext", "poppler-utils")
    out = []
    for p in pages:
        html = subprocess.run(
            [exe, "-bbox", "-f", str(p), "-l", str(p), str(pdf), "-"], capture_output=True, text=True, check=True
        ).stdout
        # Parsed with a pattern, not XML: poppler leaves a word's "<" or "&" unescaped in some versions.
        for m in re.finditer(_WORD, html):
            text = m.group(5)
            if sum(ch.isalnum() for ch in text) < 3:
                continue
            x0, y0, x1, y1 = (float(m.group(k)) for k in range(1, 5))
            out.append((min(x1 - x0, y1 - y0), text))
    return out


@pytest.fixture(scope="module")
def two_models(tmp_path_factory):
    from tests.eval.report.report_fixtures import score_two_models

    root = tmp_path_factory.mktemp("pdf-two")
    files = build_report(load_results(score_two_models(root)), root / "report", formats=("latex",))
    return files, compile_report_tex(files.out, root, "the PDF checks need it", passes=2)


@pytest.fixture(scope="module")
def five_models(tmp_path_factory):
    """Five models (the two synthetic sweeps relabelled): tables far wider than a page."""
    from tests.eval.report.report_fixtures import score_two_models

    root = tmp_path_factory.mktemp("pdf-five")
    paths = score_two_models(root, n_images=12, n_bootstrap=10)
    docs = [json.loads(p.read_text(encoding="utf-8")) for p in paths]
    results = []
    for k in range(5):
        doc = json.loads(json.dumps(docs[k % 2]))
        doc["label"] = f"model_{k}_long_label"
        results.append(doc)
    files = build_report(results, root / "report", formats=("latex",))
    return files, compile_report_tex(files.out, root, "the PDF checks need it", passes=2)


def test_report_pdf_has_only_embedded_vector_fonts_no_type3(two_models):
    _, pdf = two_models
    fonts = font_types(pdf)
    assert fonts and not [f for f in fonts if f[1] == "Type 3"], fonts
    assert any("LMRoman" in name for name, _ in fonts), "body text in Latin Modern (lmodern)"
    assert any(kind == "CID TrueType" and "DejaVuSans" in name for name, kind in fonts), "figure text in TrueType"
    # Text is extractable with its ligatures (bitmap T1 fonts lost "fi": "condence").
    assert "confidence" in "".join(page_texts(pdf))


def test_no_section_heading_is_the_last_line_of_a_page(two_models, five_models):
    for files, pdf in (two_models, five_models):
        doc = files.latex_document.read_text(encoding="utf-8")
        headings = [re.sub(r"\\[a-z]+\{\}|\\", "", h) for h in re.findall(r"\\section\{(.+?)\}\n", doc)]
        assert len(headings) >= 2
        pages = page_texts(pdf)
        for n, page in enumerate(pages, start=1):
            lines = [ln.strip() for ln in page.splitlines() if ln.strip()]
            body = [ln for ln in lines if not ln.isdigit()]  # the page number
            if not body:
                continue
            last = re.sub(r"\s+", " ", body[-1])
            assert not any(re.fullmatch(rf"\d+ {re.escape(h)}", last) for h in headings), (n, last)


def smallest_word(pdf: Path, want: str, avoid: str, min_pages: int, min_words: int) -> tuple[float, str]:
    """The smallest word box (its size in points, the word) on the pages whose text holds ``want`` but not
    ``avoid``; asserts there are at least ``min_pages`` such pages and ``min_words`` words on them."""
    pages = [n for n, text in enumerate(page_texts(pdf), start=1) if want in text and avoid not in text]
    assert len(pages) >= min_pages
    sizes = word_sizes(pdf, pages)
    assert len(sizes) > min_words
    return min(sizes)


def test_table_text_stays_readable_with_five_models(five_models):
    files, pdf = five_models
    smallest = smallest_word(pdf, "Table", "Figure", min_pages=4, min_words=500)
    # \small is 9 pt and notes are \footnotesize (8 pt); a word box is about 1.1x the font size, so 6.5 pt leaves
    # room for the 12 % shrink allowed before a table turns sideways, and catches the old fit-to-width (~4 pt).
    assert smallest[0] >= 6.5, smallest
    # The five-model tables were split: "(part k of n)" captions, each part a float of its own.
    grid = (files.out / "tables" / "synthetic_grid_recall.tex").read_text(encoding="utf-8")
    assert grid.count("\\begin{table}") >= 2 and "part 1 of" in grid
    assert all(f"model\\_{k}\\_long\\_label" in grid for k in range(5)), "every model in some part"


def test_a_wide_first_figure_turns_below_its_heading(five_models):
    """Five models make the heatmap (a section's first figure) too wide for the line: it turns sideways on the page
    that starts with the section's heading, so that page holds the figure, not the heading alone."""
    files, pdf = five_models
    doc = files.latex_document.read_text(encoding="utf-8")
    assert "\\clearpage\n\\section{synthetic}\n\\begin{figure}[!b]\n\\centering\n\\rotatebox{90}" in doc
    pages = page_texts(pdf)
    assert "synthetic" not in pages[0]  # the title page: the title and the reading notes
    assert "Figure 1:" in pages[1] and re.search(r"^\s*(1\s+)?synthetic\s*$", pages[1], re.M)  # heading and figure


def test_figure_text_prints_at_7_pt_or_more(two_models):
    """Figures are drawn for the 16 cm line (720 px small multiples) and a wide one turns sideways, so their 8 pt
    labels print at 7 pt or more; the 960 px small multiples, shrunk to the line, printed them at about 5.3 pt."""
    smallest = smallest_word(two_models[1], "Figure", "Table", min_pages=4, min_words=100)
    assert smallest[0] >= 7.0, smallest


def test_a_figure_keeps_its_size_shrinks_to_the_line_or_turns_sideways():
    line, height = 16 * 72 / 2.54, 23 * 72 / 2.54  # report.tex's text block, PostScript points
    assert figure_placement(425.5, 309.6) == (1.0, False)  # fits: its own size, never enlarged
    scale, sideways = figure_placement(518.4, 428.4)  # 12.5 % too wide: shrunk to the line
    assert not sideways and scale == pytest.approx(line / 518.4)
    scale, sideways = figure_placement(705.6, 331.2)  # would shrink to 64 %: sideways at 92 %
    assert sideways and scale == pytest.approx(0.95 * height / 705.6)
    # A section's first figure shares its page with the heading: sideways, at most 88 % of the page's height.
    assert figure_placement(705.6, 331.2, first=True) == (pytest.approx(0.88 * height / 705.6), True)
    assert figure_placement(550.0, 331.2, first=True) == (pytest.approx(line / 550), False)  # 82 %: stays upright
    assert figure_placement(400.0, 900.0) == (pytest.approx((height - 40) / 900), False)  # too tall: by height
    doc = latex_document(
        "t",
        [("d", [LatexFigure("a.pdf", "first", 705.6, 331.2), LatexFigure("b.pdf", "second", 705.6, 331.2)], [])],
        [],
    )
    head, first, second = doc.split("\\begin{figure}")
    assert head.endswith("\\clearpage\n\\section{d}\n")  # the heading starts the page the figure needs
    assert first.startswith("[!b]") and f"width={0.88 * height:.1f}bp" in first  # below the heading
    assert second.startswith("[!htbp]") and f"width={0.95 * height:.1f}bp" in second  # a float page of its own
    assert "\\clearpage\n\\section" not in latex_document("t", [("d", [LatexFigure("c.pdf", "c", 400, 300)], [])], [])


def test_split_columns_keeps_key_columns_bold_cells_and_notes():
    cell = "0.412 [0.371, 0.455]"
    header = ("model",) + tuple(f"metric {k}" for k in range(12))
    t = Table(
        "wide",
        header,
        (("a",) + (cell,) * 12, ("b",) + (cell,) * 12),
        ("l",) + ("r",) * 12,
        notes=("the note",),
        bold=frozenset({(0, 12), (1, 1)}),
    )
    parts = split_columns(t)
    assert len(parts) >= 3
    assert all(p.header[0] == "model" and [r[0] for r in p.rows] == ["a", "b"] for p in parts)
    assert [h for p in parts for h in p.header[1:]] == list(header[1:]), "every column once, in order"
    assert parts[0].bold == {(1, 1)} and (0, len(parts[-1].header) - 1) in parts[-1].bold
    assert [p.notes for p in parts] == [()] * (len(parts) - 1) + [("the note",)]
    assert parts[0].title.endswith(f"(part 1 of {len(parts)})")
    tex = latex_table(t, "tab:x")
    assert tex.count("\\begin{table}") == len(parts) and "\\label{tab:x}" in tex and "\\label{tab:x-2}" in tex
    # A table that fits is left whole, and no float shrinks it by more than 12 %.
    narrow = Table("narrow", ("a", "b"), (("x", "y"),), ("l", "r"))
    assert split_columns(narrow) == [narrow]
    assert "\\resizebox{\\linewidth}" in latex_table(narrow, "tab:n") and "1.12\\linewidth" in latex_table(
        narrow, "tab:n"
    )


def test_ci_installs_what_the_pdf_tests_call():
    """CI (.ci/run) installs the system tools these tests call, so there they run instead of skipping."""
    from tests import REPO_ROOT

    ci = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for package in (
        "poppler-utils",
        "texlive-latex-base",
        "texlive-latex-recommended",
        "texlive-fonts-recommended",
        "lmodern",
    ):
        assert re.search(rf"\n\s+apt_install [^\n]*(\\\n[^\n]*)*\b{re.escape(package)}\b", ci), package
    assert re.search(r"apt_install\(\) \{[^}]*apt-get install -y -qq \"\$@\"", ci), "apt_install installs its arguments"
    # ... whenever one of them is missing, not only when the first is.
    assert "command -v pdflatex" in ci and "command -v pdffonts" in ci and "kpsewhich lmodern.sty" in ci
