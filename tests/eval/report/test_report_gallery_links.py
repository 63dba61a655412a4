"""The report links the gallery's worst and best pair per condition (issue 32, deliverable 5), on the tiny split of
test_gallery.py:
  low_light_s3:  frame_b 4 -> 1 found (worst, drop 0.75); frame_c 1 -> 1 (best, drop 0)
  smoke_haze_s2: frame_c 1 -> 0 (worst, drop 1.00); frame_a 2 -> 2 and frame_b 4 -> 4 tie at drop 0, frame_b
                 keeps more people (best)
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote

import pytest
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.errors import AegisError
from aegis_eval.report import build_report, load_results
from aegis_eval.report.gallery import build_gallery, load_gallery_index
from tests.eval.report.test_gallery import tiny  # noqa: F401  (the fixture)

runner = CliRunner()


@pytest.fixture(scope="module")
def scored_gallery(tiny, tmp_path_factory):  # noqa: F811
    from aegis_eval.protocols.scoring import write_score_json
    from tests.eval.protocols.scoring_memory import score_paths

    split, preds, thr = tiny
    root = tmp_path_factory.mktemp("links")
    scored = score_paths(preds, split, threshold_file=thr, bootstrap=5, label="tiny_model")
    write_score_json(scored, root / "score.json")
    g = build_gallery(
        split, preds, root / "gallery", threshold_file=thr, max_width=648, n=2, per_condition=True, label="tiny_model"
    )
    return root, g


def test_gallery_draws_worst_and_best_pair_per_condition(scored_gallery):
    _root, g = scored_gallery
    ends = {c: tuple(None if p is None else p.file_name for p in pair) for c, pair in g.extremes.items()}
    assert ends == {"low_light_s3": ("frame_b.png", "frame_c.png"), "smoke_haze_s2": ("frame_c.png", "frame_b.png")}
    doc = json.loads(g.index_json.read_text(encoding="utf-8"))
    assert doc["schema"] == "aegis-gallery/1" and doc["label"] == "tiny_model" and len(doc["pairs"]) == 2
    worst = doc["per_condition"]["low_light_s3"]["worst"]
    assert (worst["found_clean"], worst["found_condition"], worst["n_gt"]) == (4, 1, 4)
    for cond in ends:
        for kind in ("worst", "best"):
            assert (g.out / doc["per_condition"][cond][kind]["picture"]).is_file()
    index = load_gallery_index(g.out)
    assert len(index.examples) == 4 and {e.kind for e in index.examples} == {"worst", "best"}


def test_report_links_every_per_condition_picture_in_md_and_html_and_lists_them_in_latex(scored_gallery):
    root, g = scored_gallery
    files = build_report(load_results([root / "score.json"]), root / "report", galleries=[g.out])
    md = files.markdown.read_text(encoding="utf-8")
    links = re.findall(r"\]\((\.\./gallery/conditions/[^)]+)\)", md)
    assert len(links) == 4
    assert all((files.out / unquote(link)).is_file() for link in links)
    row = next(line for line in md.splitlines() if line.startswith("| low_light_s3 | tiny_model"))
    assert "frame_b.png: 4/4 → 1/4" in row and "frame_c.png: 1/1 → 1/1" in row
    html = files.html.read_text(encoding="utf-8")
    hrefs = [h for h in re.findall(r'href="([^"]*)"', html) if not h.startswith("#")]
    assert sorted(hrefs) == sorted(links)
    tex = (files.out / "tables" / "unknown_gallery.tex").read_text(encoding="utf-8")
    assert "frame\\_b.png: 4/4 $\\rightarrow$ 1/4" in tex
    assert "\\input{tables/unknown_gallery.tex}" in files.latex_document.read_text(encoding="utf-8")


def test_report_refuses_a_gallery_without_per_condition_pictures_or_of_another_dataset(scored_gallery, tiny, tmp_path):  # noqa: F811
    root, g = scored_gallery
    split, preds, thr = tiny
    plain = build_gallery(split, preds, tmp_path / "plain", threshold_file=thr, max_width=648, n=1)
    with pytest.raises(AegisError, match="without per-condition pictures; draw it again with `per_condition`"):
        build_report(load_results([root / "score.json"]), tmp_path / "r1", galleries=[plain.out])
    other = json.loads(g.index_json.read_text(encoding="utf-8"))
    other["dataset"] = "sard"
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "gallery.json").write_text(json.dumps(other), encoding="utf-8")
    with pytest.raises(AegisError, match="shows dataset 'sard'"):
        build_report(load_results([root / "score.json"]), tmp_path / "r2", galleries=[tmp_path / "other"])
    assert not (tmp_path / "r2").exists(), "nothing written"
    with pytest.raises(AegisError, match="holds no gallery.json"):
        build_report(load_results([root / "score.json"]), tmp_path / "r3", galleries=[tmp_path])


def test_cli_gallery_per_condition_and_report_gallery(scored_gallery, tiny, tmp_path):  # noqa: F811
    root, _g = scored_gallery
    split, preds, thr = tiny
    out = tmp_path / "g"
    result = runner.invoke(
        app,
        [
            "gallery",
            str(preds),
            "--split-dir",
            str(split),
            "--threshold-file",
            str(thr),
            "--n",
            "1",
            "--max-width",
            "648",
            "--per-condition",
            "--label",
            "tiny_model",
            "--out-dir",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert len(list((out / "conditions").glob("*.png"))) == 4
    rep = tmp_path / "report"
    result = runner.invoke(
        app, ["report", str(root / "score.json"), "--out-dir", str(rep), "--format", "md", "--gallery", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "../g/conditions/" in (rep / "report.md").read_text(encoding="utf-8")
    (tmp_path / "empty").mkdir()
    bad = runner.invoke(
        app,
        ["report", str(root / "score.json"), "--out-dir", str(tmp_path / "r"), "--gallery", str(tmp_path / "empty")],
    )
    assert bad.exit_code == 1 and "Traceback" not in bad.output and "holds no gallery.json" in bad.output
    assert Path(out / "gallery.json").is_file()
