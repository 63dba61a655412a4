"""`aegis report`: figures, Markdown/HTML/LaTeX from hand-written score JSON fixtures (docs/SCORE_JSON.md).

Fixtures: heridal with three models (yolo11n and rtdetr-l full sweeps, rtdetr-l without bootstrap intervals;
fasterrcnn_v2 a partial sweep of 15 of 28 conditions) and sard with one model.
"""

from __future__ import annotations

import base64
import copy
import re
from pathlib import Path

import cv2
import matplotlib
import numpy as np
import pytest
from typer.testing import CliRunner

from aegis_cli.main import app  # the real root app: also checks that `register` wires the commands
from aegis_data.errors import AegisError
from aegis_eval.report import build_report, load_results, parse_formats
from aegis_eval.report import figures as F
from aegis_eval.report.latex import latex_escape
from aegis_eval.report.results import (
    degradation,
    group_by_dataset,
    relative_drop,
    robustness_summary,
)
from tests import FIXTURES_DIR
from tests.eval.report.report_fixtures import compile_report_tex

FIXTURES = FIXTURES_DIR
YOLO = FIXTURES / "score_heridal_yolo11n.json"
RTDETR = FIXTURES / "score_heridal_rtdetr_l.json"
PARTIAL = FIXTURES / "score_heridal_fasterrcnn_partial.json"
SARD = FIXTURES / "score_sard_yolo11n.json"
ALL = [YOLO, RTDETR, PARTIAL, SARD]
PARTIAL_MISSING = 13  # conditions absent from the partial fixture


def _png_shape(path: Path) -> tuple[int, int]:
    img = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    assert img is not None, f"{path} is not a decodable image"
    return img.shape[1], img.shape[0]


@pytest.fixture(scope="module")
def full_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return build_report(load_results(ALL), out)


# --- figures -----------------------------------------------------------------------------------------------


def test_every_figure_is_a_png_of_the_declared_size(full_report):
    names = sorted(p.name for p in full_report.figures)
    assert names == sorted(
        [
            "heridal_heatmap_recall.png",
            "heridal_curves_recall.png",
            "heridal_families_recall.png",
            "heridal_localization.png",
            "sard_heatmap_recall.png",
            "sard_curves_recall.png",
            "sard_families_recall.png",
            "sard_localization.png",
        ]
    )
    fig_dir = full_report.out / "figures"
    # Explicit numbers, so a silent geometry change fails here and not only in the helper functions. The PNGs
    # are drawn at 200 DPI: twice the layout size.
    assert _png_shape(fig_dir / "heridal_heatmap_recall.png") == (1458, 860)  # 3 models x 3 severities, 9 rows
    assert _png_shape(fig_dir / "sard_heatmap_recall.png") == (906, 860)
    assert _png_shape(fig_dir / "heridal_curves_recall.png") == (1440, 1190)  # 3 x 3 panels
    assert _png_shape(fig_dir / "heridal_localization.png") == (1440, 1190)
    assert _png_shape(fig_dir / "heridal_families_recall.png") == (2 * (160 + 4 * (70 + 36 * 3)), 2 * (420 + 18))
    assert _png_shape(fig_dir / "sard_families_recall.png") == tuple(2 * v for v in F.family_bars_size(1, 4))
    for p in full_report.figures:
        assert p.stat().st_size > 5_000
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert b"Software" not in p.read_bytes()[:4096]  # no version text chunk


def test_partial_sweep_renders_with_missing_cells_hatched():
    res = load_results([PARTIAL])
    (group,) = group_by_dataset(res)
    assert len(group.missing(group.runs[0])) == PARTIAL_MISSING
    hm = F.render(F.heatmap(group, "recall"), vector=False).png
    img = cv2.imdecode(np.frombuffer(hm, np.uint8), cv2.IMREAD_COLOR)
    assert (img.shape[1], img.shape[0]) == tuple(2 * v for v in F.heatmap_size(1, 9)) == (906, 860)
    # Row "fire warm tint" (row 4) is entirely missing: its cells are white with grey hatching, not colour.
    x0, y0 = 2 * 215, 2 * (78 + 34 * 4)
    cell = img[y0 + 8 : y0 + 60, x0 + 8 : x0 + 260]
    saturation = cell.max(axis=2).astype(int) - cell.min(axis=2).astype(int)
    assert saturation.max() < 12, "a missing condition must not get a colour"
    assert (cell < 200).any() and (cell > 240).any(), "expected grey hatch lines on white"
    # Row "low light" (row 7) is present: coloured cells.
    y1 = 2 * (78 + 34 * 7)
    present = img[y1 + 8 : y1 + 60, x0 + 8 : x0 + 80]
    assert (present.max(axis=2).astype(int) - present.min(axis=2).astype(int)).max() > 40


def test_same_input_gives_same_bytes(tmp_path, full_report):
    again = build_report(load_results(ALL), tmp_path)
    ours = sorted(p.relative_to(full_report.out) for p in full_report.files)
    theirs = sorted(p.relative_to(again.out) for p in again.files)
    assert ours == theirs
    for rel in ours:
        assert (full_report.out / rel).read_bytes() == (again.out / rel).read_bytes(), rel


def test_rendering_leaves_matplotlib_state_alone():
    import matplotlib.pyplot as plt

    before = dict(matplotlib.rcParams)
    (group,) = group_by_dataset(load_results([SARD]))
    F.render(F.family_bars(group, "recall"), vector=False)
    assert plt.get_fignums() == []
    changed = {k for k in before if before[k] != matplotlib.rcParams[k]}
    assert not changed


# --- documents ---------------------------------------------------------------------------------------------


def test_html_is_self_contained_and_embeds_every_figure(full_report):
    html = full_report.html.read_text(encoding="utf-8")
    srcs = re.findall(r'src="([^"]*)"', html)
    assert len(srcs) == len(full_report.figures)
    assert all(s.startswith("data:image/png;base64,") for s in srcs)
    embedded = {base64.b64decode(s.split(",", 1)[1]) for s in srcs}
    assert embedded == {p.read_bytes() for p in full_report.figures}
    assert "<script" not in html and "<link" not in html and "http://" not in html and "https://" not in html
    assert re.findall(r'href="([^"]*)"', html) and all(h.startswith("#") for h in re.findall(r'href="([^"]*)"', html))
    for text in ("Frozen confidence thresholds", "Provenance", "robustness summary", "mPC", "rPC", "0.45", "0.38"):
        assert text in html


def test_markdown_references_every_figure_and_the_tables(full_report):
    md = full_report.markdown.read_text(encoding="utf-8")
    refs = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert sorted(refs) == sorted(str(p.relative_to(full_report.out)) for p in full_report.figures)
    assert all((full_report.out / r).is_file() for r in refs)
    assert "## heridal" in md and "## sard" in md
    # summary row from the fixture's summary (written before summary.ci: mPC and rPC without intervals)
    assert "| yolo11n | 0.770 [0.724, 0.808] | 0.588 | 0.764 | 23.6 | 27/27 |" in md
    assert f"fasterrcnn_v2: {PARTIAL_MISSING} of 28 conditions missing" in md
    # Partial sweep: a missing condition's cells are blank, a present one's are not.
    fire = next(line for line in md.splitlines() if line.startswith("|  | fire_warm_tint | 1 |"))
    cells = [c.strip() for c in fire.strip("|").split("|")]
    assert cells[7:9] == ["", ""]  # fasterrcnn_v2 (third model) lacks fire_warm_tint_s1
    assert cells[3] and cells[5]


def _latex_rows(tex: str) -> list[list[str]]:
    """Data rows of the tabulars: lines ending in \\\\ minus the two header lines per table."""
    rows = []
    for line in tex.splitlines():
        if line.endswith("\\\\") and not line.startswith(" & & ") and not line.startswith("Family &"):
            rows.append([c.strip() for c in line[:-2].split(" & ")])
    return rows


def _balanced(tex: str) -> bool:
    depth = 0
    for ch in re.sub(r"\\[{}]", "", tex):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def test_latex_full_sweep_has_27_rows_plus_clean(tmp_path):
    files = build_report(load_results([SARD]), tmp_path, formats=["latex"])
    assert files.markdown is None and files.html is None
    tex = files.latex.read_text(encoding="utf-8")
    assert _balanced(tex)
    assert tex.count("\\toprule") == 1 and tex.count("\\bottomrule") == 1
    assert tex.count("\\midrule") == 1 + 1 + 3  # header, after clean, between the 4 families
    rows = _latex_rows(tex)
    assert len(rows) == 28
    assert rows[0][1:3] == ["clean", "0"]
    keys = [(r[1], r[2]) for r in rows[1:]]
    assert len(set(keys)) == 27 and all(s in ("1", "2", "3") for _, s in keys)
    assert ("low\\_light", "3") in keys


def test_latex_partial_sweep_blank_cells_and_escaping(full_report, tmp_path):
    tex = full_report.latex.read_text(encoding="utf-8")
    assert _balanced(tex)
    assert "fasterrcnn\\_v2" in tex and "fasterrcnn_v2" not in tex.replace("fasterrcnn\\_v2", "")
    body = "\n".join(l for l in tex.splitlines() if not l.startswith("%"))
    assert not re.search(r"(?<!\\)_", body), "unescaped underscore in LaTeX body"
    # Three models are wider than a page: the grid comes in parts, a model's columns never split between two.
    parts = [f for f in tex.split("\\begin{table}")[1:] if "caption{heridal" in f]
    heridal = "".join(parts)
    part = next(f for f in parts if "fasterrcnn\\_v2" in f)
    rows = _latex_rows(part)
    assert len(rows) == 28  # the two full sweeps cover every condition
    k = part.split("fasterrcnn\\_v2")[0].count("\\multicolumn{2}") - 1  # models before it in this part
    fire = next(r for r in rows if r[1] == "fire\\_warm\\_tint" and r[2] == "1")
    assert fire[3 + 2 * k : 5 + 2 * k] == ["", ""] and all(fire[3 : 3 + 2 * k])
    assert "13 of 28 conditions missing" in heridal
    # Only the partial run: rows are the 15 conditions it has.
    files = build_report(load_results([PARTIAL]), tmp_path, formats="latex")
    assert any(f"{PARTIAL_MISSING} of 28 conditions missing" in n for n in files.notes)
    only = files.latex.read_text(encoding="utf-8")
    assert len(_latex_rows(only)) == 28 - PARTIAL_MISSING
    assert "those rows are omitted" in only


def test_latex_escape_covers_special_characters():
    assert latex_escape("a_b&c%d$e#f{g}h~i^j\\k") == (
        "a\\_b\\&c\\%d\\$e\\#f\\{g\\}h\\textasciitilde{}i\\textasciicircum{}j\\textbackslash{}k"
    )


# --- values ------------------------------------------------------------------------------------------------


def test_relative_drop_recomputed_when_not_stored_and_sign_of_lower_is_better():
    (res,) = load_results([SARD])
    cond = "low_light_s3"
    stored = relative_drop(res, cond, "recall")
    stripped = copy.deepcopy(res)
    for block in stripped["conditions"].values():
        block.pop("rel_drop")
    clean = res["conditions"]["clean"]["recall"]
    value = res["conditions"][cond]["recall"]
    assert relative_drop(stripped, cond, "recall") == pytest.approx((clean - value) / clean)
    assert relative_drop(stripped, cond, "recall") == pytest.approx(stored, abs=1e-4)
    fp_drop = relative_drop(res, cond, "fp_per_image")
    assert fp_drop is not None and degradation(res, cond, "fp_per_image") == -fp_drop
    assert degradation(res, cond, "recall") == stored
    assert relative_drop(res, "not_there_s1", "recall") is None


def test_summary_recomputed_when_absent_matches_scorer_summary():
    (res,) = load_results([SARD])
    (group,) = group_by_dataset([res])
    written = robustness_summary(group, group.runs[0], "recall")
    bare = copy.deepcopy(res)
    bare.pop("summary")
    (bare_group,) = group_by_dataset([bare])
    recomputed = robustness_summary(bare_group, bare_group.runs[0], "recall")
    assert recomputed.mpc == pytest.approx(written.mpc, abs=1e-4)
    assert recomputed.rpc == pytest.approx(written.rpc, abs=1e-3)
    assert recomputed.mean_rel_drop == pytest.approx(written.mean_rel_drop, abs=1e-4)
    assert recomputed.n_corrupted == 27 and recomputed.n_missing == 0


def test_grouping_null_dataset_and_duplicate_labels():
    (res,) = load_results([SARD])
    anon = {**res, "dataset": None}
    groups = group_by_dataset([res, anon])
    assert [g.name for g in groups] == ["sard", "unknown"]
    with pytest.raises(AegisError, match="two results for model 'yolo11n' on dataset 'sard'"):
        group_by_dataset([res, res])


# --- bad input -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"schema": "aegis-threshold/1", "value": 0.5}', "schema 'aegis-score/1', got schema 'aegis-threshold/1'"),
        ('{"schema": "aegis-score/1", "label": "", "conditions": {"clean": {}}}', "'label' must be a non-empty"),
        ('{"schema": "aegis-score/1", "label": "m", "conditions": {}}', "'conditions' must be a non-empty"),
        ('{"schema": "aegis-score/1", "label": "m", "conditions": {"fog": {}}}', "not a condition id: 'fog'"),
    ],
)
def test_load_results_rejects_bad_files(tmp_path, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    with pytest.raises(AegisError, match=re.escape(message)) as exc:
        load_results([bad])
    assert str(bad) in str(exc.value) and "\n" not in str(exc.value)


def test_load_results_missing_file_directory_and_empty(tmp_path):
    with pytest.raises(AegisError, match="score JSON file not found"):
        load_results([tmp_path / "nope.json"])
    with pytest.raises(AegisError, match="is a directory"):
        load_results([tmp_path])
    with pytest.raises(AegisError, match="no score JSON given"):
        load_results([])


def test_cli_report_out_is_a_file(tmp_path):
    (tmp_path / "taken").write_text("x")
    result = runner.invoke(app, ["report", str(SARD), "--out-dir", str(tmp_path / "taken")])
    assert result.exit_code == 1 and "--out-dir must be a directory" in result.stderr
    assert (tmp_path / "taken").read_text() == "x"


def test_library_refusal_of_a_file_as_report_folder_names_no_old_flag(tmp_path):
    (tmp_path / "taken").write_text("x")
    with pytest.raises(AegisError, match="^the report folder must be a directory") as info:
        build_report(load_results([SARD]), tmp_path / "taken")
    assert "--out " not in str(info.value) and (tmp_path / "taken").read_text() == "x"


def test_bad_metric_and_format(tmp_path):
    res = load_results([SARD])
    with pytest.raises(AegisError, match="unknown metric 'mAP'"):
        build_report(res, tmp_path, metric="mAP")
    with pytest.raises(AegisError, match="unknown report format 'pdf'"):
        build_report(res, tmp_path, formats="md,pdf")
    assert parse_formats("tex, md,md") == ("latex", "md")
    assert not any(tmp_path.iterdir()), "a rejected call must write nothing"


# --- CLI -----------------------------------------------------------------------------------------------------

runner = CliRunner()


def test_cli_report_writes_files_and_lists_them(tmp_path):
    result = runner.invoke(
        app, ["report", str(SARD), "--out-dir", str(tmp_path / "r"), "--format", "md,latex", "--metric", "f1"]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r" / "report.md").is_file() and (tmp_path / "r" / "report_table.tex").is_file()
    assert not (tmp_path / "r" / "report.html").exists()
    assert (tmp_path / "r" / "figures" / "sard_heatmap_f1.png").is_file()
    assert "report_table.tex" in result.stdout


@pytest.mark.parametrize(
    "make_args, message",
    [
        (lambda d: [str(d / "missing.json")], "score JSON file not found"),
        (lambda d: [str(d / "bad.json")], "not valid JSON"),
        (lambda d: [str(SARD), "--metric", "accuracy"], "unknown metric 'accuracy'"),
        (lambda d: [str(SARD), "--format", "docx"], "unknown report format 'docx'"),
        (lambda d: [str(SARD), str(SARD)], "two results for model 'yolo11n'"),
        (lambda d: [str(d / "thr.json")], "expected an `aegis score` JSON with schema 'aegis-score/1'"),
        (lambda d: [str(d)], "score JSON path is a directory"),
        (lambda d: [str(SARD), "--html-figures", "gif"], "unknown HTML figure format 'gif'"),
    ],
)
def test_cli_report_errors_are_one_line(tmp_path, make_args, message):
    (tmp_path / "bad.json").write_text("{oops")
    (tmp_path / "thr.json").write_text('{"schema": "aegis-threshold/1", "value": 0.4}')
    result = runner.invoke(app, ["report", *make_args(tmp_path), "--out-dir", str(tmp_path / "out")])
    assert result.exit_code == 1
    lines = [l for l in result.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], result.stderr
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_unknown_corruption_gets_its_own_row_after_the_suite():
    (res,) = load_results([SARD])
    extra = copy.deepcopy(res)
    extra["conditions"]["fog_s2"] = {**res["conditions"]["low_light_s2"], "corruption": "fog", "family": "weather"}
    (group,) = group_by_dataset([extra])
    assert group.corruptions[-1] == "fog" and group.families["fog"] == "weather"
    assert group.family_order == ("flood", "wildfire", "storm", "earthquake", "weather")
    assert group.corruptions[:3] == ("water_glare", "turbidity_cast", "inundation")
    assert "fog_s2" in group.present_conditions and "fog_s1" in group.missing(group.runs[0])


# --- a report a reviewer accepts: two models scored by the real scorer ----------------------------------------


@pytest.fixture(scope="module")
def two_models(tmp_path_factory):
    """Two models' full sweeps scored by ``score_conditions`` on a synthetic split (24 images, B = 40); the
    second model's threshold was frozen by a false-alarm risk rule."""
    from tests.eval.report.report_fixtures import score_two_models

    root = tmp_path_factory.mktemp("two-models")
    paths = score_two_models(root)
    results = load_results(paths)
    return results, build_report(results, root / "report")


def _tables(md: str) -> list[str]:
    """The Markdown of every table: from its ### heading to the next heading."""
    return [b for b in re.split(r"\n(?=#{2,4} )", md) if re.search(r"^\| ", b, re.M)]


def test_every_table_states_its_sample_size(two_models):
    results, files = two_models
    sample = results[0]["sample"]
    md = files.markdown.read_text(encoding="utf-8")
    note = (
        f"n: 28 conditions, 2 models; 24 images, {sample['n_gt']} GT boxes (small {sample['n_gt_small']}, "
        f"medium {sample['n_gt_medium']}, large {sample['n_gt_large']}) per condition; B = 40 bootstrap "
        "resamples of 24 images, seed 0."
    )
    tables = [t for t in _tables(md) if not t.startswith(("## Frozen", "## Provenance"))]
    assert len(tables) >= 8
    for t in tables:
        assert note in t, t.splitlines()[0]
    html = files.html.read_text(encoding="utf-8")
    assert html.count(note) == len(tables)


_CI = r"\d+\.\d{3} \[\d+\.\d{3}, \d+\.\d{3}\]"


def test_summaries_show_intervals_and_bold_only_a_paired_best(two_models):
    results, files = two_models
    md = files.markdown.read_text(encoding="utf-8")
    summary = next(t for t in _tables(md) if "summary across models" in t.splitlines()[0])
    rows = [line for line in summary.splitlines() if line.startswith("| detector_")]
    assert len(rows) == 2
    for line in rows:
        cells = [c.strip().strip("*") for c in line.strip("|").split("|")][1:]
        assert len(cells) == 6 and all(re.fullmatch(_CI, c) for c in cells), cells
    n_bold = 0
    for col in range(6):  # only the higher value of a column can be bold, and only when the paired interval
        # excludes 0 (tests/eval/report/test_report_paired.py checks which); never both of a tie
        cells = [[c.strip() for c in r.strip("|").split("|")][1 + col] for r in rows]
        values = [float(c.strip("*").split()[0]) for c in cells]
        bold = [c.startswith("**") for c in cells]
        assert all(v == max(values) for v, b in zip(values, bold) if b) and not all(bold), (col, cells)
        n_bold += sum(bold)
    assert n_bold >= 1 and "Paired intervals:" not in summary
    mpc = results[0]["summary"]["ci"]["mpc"]["recall"]
    assert f"{results[0]['summary']['mpc']['recall']:.3f} [{mpc[0]:.3f}, {mpc[1]:.3f}]" in summary
    families = next(t for t in _tables(md) if "per family" in t.splitlines()[0])
    assert len(re.findall(r"-?\d+\.\d \[-?\d+\.\d, -?\d+\.\d\]", families)) == 2 * 4
    corruptions = next(t for t in _tables(md) if "per corruption" in t.splitlines()[0])
    assert len(re.findall(r"-?\d+\.\d \[-?\d+\.\d, -?\d+\.\d\]", corruptions)) == 2 * 9
    grid = next(t for t in _tables(md) if "recall per condition" in t.splitlines()[0])
    low = next(line for line in grid.splitlines() if "| low_light | 3 |" in line)
    assert len(re.findall(r"-?\d+\.\d \[-?\d+\.\d, -?\d+\.\d\]", low)) == 2  # each model's drop, paired interval


def test_false_alarm_section_has_bounds_rule_and_figure(two_models):
    results, files = two_models
    md = files.markdown.read_text(encoding="utf-8")
    fa = next(t for t in _tables(md) if "false alarms" in t.splitlines()[0])
    rec = results[1]["false_alarm"]["conditions"]["smoke_haze_s3"]
    row = next(line for line in fa.splitlines() if line.startswith("| smoke_haze_s3 |"))
    assert (
        f"{rec['fp_per_image']:.2f} (≤ {rec['fp_per_image_upper']:.2f})" in row
        and f"{100 * rec['false_alarm_image_share']:.1f} (≤ {100 * rec['false_alarm_image_share_upper']:.1f})" in row
    )
    assert len([line for line in fa.splitlines() if line.startswith("| clean |") or "_s" in line[:30]]) == 28
    assert "Garwood" in fa and "Clopper–Pearson" in fa
    assert "detector_b: threshold 0.6 frozen by the risk rule fp_per_image<=2" in fa
    assert "detector_a: threshold" not in fa  # max-f1 is no risk rule
    names = {p.name for p in files.figures}
    assert "synthetic_false_alarms.png" in names
    assert {p.name for p in files.vector_figures} >= {"synthetic_false_alarms.pdf", "synthetic_false_alarms.svg"}


def test_every_figure_exists_as_pdf_and_svg(two_models):
    import xml.etree.ElementTree as ET

    _, files = two_models
    stems = {p.stem for p in files.figures}
    assert {p.stem for p in files.vector_figures if p.suffix == ".pdf"} == stems
    assert {p.stem for p in files.vector_figures if p.suffix == ".svg"} == stems
    for p in files.vector_figures:
        data = p.read_bytes()
        if p.suffix == ".pdf":
            assert data.startswith(b"%PDF-") and b"CreationDate" not in data and b"Producer" not in data
        else:
            root = ET.fromstring(data)
            assert root.tag.endswith("svg") and b"<dc:date>" not in data


def _latex_problems(tex: str) -> list[str]:
    """Structural checks a compiler would trip on: braces, environments, unescaped specials, non-ASCII."""
    problems = []
    if not _balanced(tex):
        problems.append("unbalanced braces")
    begins = re.findall(r"\\begin\{(\w+)\}", tex)
    ends = re.findall(r"\\end\{(\w+)\}", tex)
    if sorted(begins) != sorted(ends):
        problems.append(f"environments {begins} vs {ends}")
    body = re.sub(r"\\(?:input|includegraphics|label)(\[[^]]*\])?\{[^}]*\}", "", tex)  # file names, keys
    body = re.sub(r"\\[A-Za-z]+|\\.", "", body)
    if re.search(r"[_#^~]", body):
        problems.append("unescaped special character")
    if any(ord(ch) > 127 for ch in tex):
        problems.append("non-ASCII character")
    return problems


def test_latex_tables_are_inputable_booktabs_and_report_tex_compiles(two_models, tmp_path):
    _, files = two_models
    names = sorted(p.name for p in files.latex_tables)
    assert {
        "synthetic_summary.tex",
        "synthetic_families_recall.tex",
        "synthetic_false_alarms.tex",
        "synthetic_grid_recall.tex",
        "synthetic_grid_map50.tex",
        "thresholds.tex",
    } <= set(names)
    for p in files.latex_tables:
        tex = p.read_text(encoding="utf-8")
        assert _latex_problems(tex) == [], p.name
        # One float, or one per part of a table too wide for a page (split_columns).
        n = tex.count("\\begin{table}")
        assert n >= 1 and tex.count("\\toprule") == tex.count("\\bottomrule") == n, p.name
        assert "\\documentclass" not in tex and "\\hline" not in tex
    summary = (files.out / "tables" / "synthetic_summary.tex").read_text(encoding="utf-8")
    assert re.search(r"\\textbf\{" + _CI + "}", summary)
    doc = files.latex_document.read_text(encoding="utf-8")
    assert _latex_problems(doc) == []
    assert sorted(re.findall(r"\\input\{tables/([^}]+)\}", doc)) == names
    assert all((files.out / f).is_file() for f in re.findall(r"\\includegraphics\[[^]]*\]\{([^}]+)\}", doc))
    # A negative control for the structural check.
    assert _latex_problems("\\begin{table}a_b{") != []
    pdf = compile_report_tex(files.out, tmp_path, "the structural checks above ran")
    assert pdf.stat().st_size > 10_000


def _overlaps(boxes: list) -> list[tuple[int, int]]:
    return [(i, j) for i in range(len(boxes)) for j in range(i + 1, len(boxes)) if boxes[i].overlaps(boxes[j])]


def test_bar_labels_overlap_neither_each_other_nor_the_bars():
    (res,) = load_results([SARD])
    runs = []
    for k, shift in enumerate((-0.4, -0.05, 0.0, 0.02, 0.3, 0.9)):  # negative, tiny and large drops
        r = copy.deepcopy(res)
        r["label"] = f"model_{k}"
        for fam in r["summary"]["per_family"].values():
            fam["recall"] = shift + 0.01 * k
        runs.append(r)
    (group,) = group_by_dataset(runs)
    for n_models in (1, 3, 6):
        (g,) = group_by_dataset(runs[:n_models])
        with F.drawn(F.family_bars(g, "recall")) as fig:
            renderer = fig.canvas.get_renderer()
            ax = fig.axes[0]
            labels = [t.get_window_extent(renderer) for t in ax.texts if t.get_gid() == "bar-label"]
            bars = [p.get_window_extent(renderer) for p in ax.patches if p.get_gid() == "bar"]
            legend = fig.legends[0].get_window_extent(renderer)
            axes_box = ax.get_window_extent(renderer)
        assert len(labels) == len(bars) == 4 * n_models
        assert _overlaps(labels) == [], n_models
        assert not any(lab.overlaps(bar) for lab in labels for bar in bars), n_models
        assert not any(lab.overlaps(legend) for lab in labels)
        assert all(
            axes_box.x0 <= lab.x0 and lab.x1 <= axes_box.x1 and axes_box.y0 <= lab.y0 and lab.y1 <= axes_box.y1
            for lab in labels
        ), n_models
    # Negative control: the same check flags two labels drawn on top of each other.
    with F.drawn(F.FigurePlan(200, 100, lambda fig: [fig.text(0.5, 0.5, "-40"), fig.text(0.51, 0.5, "-40")])) as fig:
        boxes = [t.get_window_extent(fig.canvas.get_renderer()) for t in fig.texts]
    assert _overlaps(boxes) == [(0, 1)]


LONG_LABELS = (
    "yolo11m-finetuned-heridal-lr0.01-ep100-seedA",
    "rtdetr-l-finetuned-heridal-augmented-v2",
    "fasterrcnn-resnet50-v2-tiled-1024-overlap256",
    "yolo11n",
    "a detector with a rather long descriptive name",
)


@pytest.mark.parametrize("n_models", [1, 2, 5])
def test_titles_and_legends_stay_inside_every_figure(n_models):
    """Long model labels and a long dataset name: every legend fits its figure in as many rows as it needs (the
    figure grows for them), every title shrinks to fit, and neither covers an axes. Five such labels did not fit
    one row of the 960 px severity curves, nor four to a row of the family bars."""
    (res,) = load_results([SARD])
    runs = []
    for label in LONG_LABELS[:n_models]:
        r = copy.deepcopy(res)
        r["label"], r["dataset"] = label, "heridal-c-v2-object-scale-with-a-long-name"
        runs.append(r)
    (g,) = group_by_dataset(runs)
    plans = {
        "curves": F.severity_curves(g, "recall"),
        "localization": F.localization_plot(g),
        "families": F.family_bars(g, "recall"),
        "false alarms": F.false_alarm_shares(g),
    }
    for name, plan in plans.items():
        with F.drawn(plan) as fig:
            renderer = fig.canvas.get_renderer()
            frame = fig.bbox
            legend = fig.legends[0].get_window_extent(renderer)
            title = fig._suptitle.get_window_extent(renderer)
            axes = [ax.get_window_extent(renderer) for ax in fig.axes if ax.get_visible()]
        for box in (legend, title):
            assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1, name
            assert not any(box.overlaps(ax) for ax in axes), name
        assert len(fig.legends[0].get_texts()) == n_models


def test_legend_grid_takes_the_columns_that_fit():
    short = ["a", "b", "c", "d", "e", "f", "g"]
    assert F.legend_grid(short, 720) == (6, 2)  # at most six columns
    assert F.legend_grid(short, 720, max_cols=4) == (4, 2)
    cols, rows = F.legend_grid(list(LONG_LABELS), 720)
    assert (cols, rows) == (2, 3)
    widest = max(F.text_width_px(t, 8.0) for t in LONG_LABELS)
    assert 250 < widest < 290  # 44 characters of 8 pt DejaVu Sans at 100 px per inch
    assert F.legend_grid(["x" * 40], 100) == (1, 1)  # one column even when it cannot fit


def test_a_title_shrinks_to_fit_but_not_below_6_pt():
    def titled(text):
        return F.FigurePlan(720, 100, lambda fig: F.fit_title(fig, text, 0.9))

    for text, lo, hi in (("short", 10.5, 10.5), ("d" * 80, 6.0, 10.5), ("d" * 400, 6.0, 6.0)):
        with F.drawn(titled(text)) as fig:
            size = fig._suptitle.get_fontsize()
            width = fig._suptitle.get_window_extent(fig.canvas.get_renderer()).width / 2  # layout px
        assert lo <= size <= hi, text
        if lo < size < hi:
            assert 0.95 * (720 - 16) < width <= 720 - 16, (size, width)


def test_latex_labels_are_unique_when_dataset_names_differ_only_in_punctuation(tmp_path):
    (res,) = load_results([SARD])
    names = ("sard v1", "sard-v1", "sard_v1")
    results = [{**copy.deepcopy(res), "dataset": name} for name in names]
    files = build_report(results, tmp_path, formats="latex")
    labels = [
        lab for p in files.latex_tables for lab in re.findall(r"\\label\{([^}]+)\}", p.read_text(encoding="utf-8"))
    ]
    assert len(labels) >= len(files.latex_tables)  # a table too wide for a page is split into labelled parts
    assert len(set(labels)) == len(labels), sorted(labels)
    grid = (files.out / "tables" / "sard-v1-2_grid_recall.tex").read_text(encoding="utf-8")
    assert "\\label{tab:aegis-sard-v1-2-grid-recall}" in grid


def test_latex_grid_has_the_grid_tables_notes_brackets_only_with_intervals(full_report, tmp_path):
    with_ci = (full_report.out / "tables" / "sard_grid_recall.tex").read_text(encoding="utf-8")
    assert "Brackets: percentile 95\\% bootstrap interval" in with_ci
    assert full_report.latex.read_text(encoding="utf-8").count("Brackets:") == 2  # heridal and sard
    (res,) = load_results([SARD])
    bare = copy.deepcopy(res)
    for block in bare["conditions"].values():
        block.pop("ci", None)
        block.pop("ci_drop", None)
    files = build_report([bare], tmp_path, formats="md,latex")
    grid_md = next(
        t for t in _tables(files.markdown.read_text(encoding="utf-8")) if "per condition" in t.splitlines()[0]
    )
    grid_tex = (tmp_path / "tables" / "sard_grid_recall.tex").read_text(encoding="utf-8")
    assert "Brackets" not in grid_md and "Brackets" not in grid_tex
    assert "n: 28 conditions, 1 model;" in grid_md and "n: 28 conditions, 1 model;" in grid_tex
    assert files.latex.read_text(encoding="utf-8").endswith(grid_tex)  # report_table.tex reuses the same float


def test_markdown_only_report_still_writes_every_figure_as_png_pdf_and_svg(tmp_path):
    """docs/REPORT.md: every figure is written three times whatever the formats."""
    files = build_report(load_results([SARD]), tmp_path, formats="md")
    stems = {p.stem for p in files.figures}
    assert len(stems) == 4 and files.latex is None and files.html is None
    assert sorted(p.name for p in files.vector_figures) == sorted(f"{s}.{e}" for s in stems for e in ("pdf", "svg"))
    assert all(p.is_file() for p in files.vector_figures)


def _seeded_gain(gain: float) -> dict:
    return {"gain": gain, "ci": [gain - 0.05, gain + 0.05], "seeds": [{"gain": gain}, {"gain": gain}], "seed_sd": 0.0}


def test_mitigation_held_out_severities_read_condition_ids_with_the_engine_parser(tmp_path):
    from aegis_eval.report.mitigation import seed_table

    (res,) = load_results([SARD])
    block = {
        "metrics": ["recall"],
        "seeds": [0, 1],
        "baseline_label": "clean",
        "seen_conditions": ["low_light_s1", "low_light_s2"],
        "unseen_conditions": ["low_light_s3", "smoke_haze_s1"],
        "conditions": {c: {"recall": _seeded_gain(0.1)} for c in ("clean", "low_light_s3", "smoke_haze_s1")},
    }
    (group,) = group_by_dataset([{**res, "mitigation": block}])
    held = [row[1] for row in seed_table(group, "recall").rows]
    assert "low_light_s3" in held and "smoke_haze_s1" not in held  # a held-out severity, not a left-out family
    bad = {**res, "mitigation": {**block, "unseen_conditions": ["low_light_s3", "fog"]}}
    with pytest.raises(AegisError, match="not a condition id: 'fog'"):
        build_report([bad], tmp_path / "out", formats="md")
    assert not (tmp_path / "out").exists(), "a refused result must write nothing"


def test_ranking_and_threshold_cells_share_the_report_formatters():
    from aegis_eval.report.mitigation import fmt_threshold
    from aegis_eval.report.tables import fmt_tau, rank_order

    assert fmt_tau({"tau": 0.5, "ci": [None, None]}) == "+0.50"
    assert fmt_tau({"tau": -1.0, "ci": [-1.0, 0.25]}) == "-1.00 [-1.00, +0.25]"
    assert fmt_tau({"tau": None, "ci": [None, None]}, undefined="–") == "–"
    assert rank_order({"a": 2.0, "b": 1.0, "c": 3.0}) == "b > a > c"
    assert fmt_threshold([0.285, 0.31]) == "0.285/0.31" and fmt_threshold(0.4) == "0.4"


def test_cross_dataset_tables_and_slugs_are_built_once_for_every_format(tmp_path, monkeypatch):
    from aegis_eval.report import build as B
    from aegis_eval.report import render as R

    calls: dict[str, int] = {}

    def counted(name, fn):
        def wrapper(*args, **kwargs):
            calls[name] = calls.get(name, 0) + 1
            return fn(*args, **kwargs)

        return wrapper

    for name in ("threshold_table", "provenance_table", "_slugs"):
        fn = getattr(B, name)
        monkeypatch.setattr(B, name, counted(name, fn))
        monkeypatch.setattr(R, name, counted(name, fn), raising=False)
    files = build_report(load_results([SARD]), tmp_path)
    assert files.markdown and files.html and files.latex_document
    assert calls == {"threshold_table": 1, "provenance_table": 1, "_slugs": 1}
    for text in (files.markdown.read_text(encoding="utf-8"), files.html.read_text(encoding="utf-8")):
        assert "Frozen confidence thresholds" in text and "Provenance" in text
