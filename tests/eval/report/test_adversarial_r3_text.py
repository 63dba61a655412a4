"""Reliability round 3, part B: user text that reaches a terminal, a report or a parser.

Each case is an adversarial input an issue listed (numbers follow the issue) and the behaviour the toolkit now
promises: user strings print verbatim (never as Rich markup), reports neutralise Markdown / HTML / LaTeX /
mathtext in names, score JSONs hold only their suite's conditions, SARD CSVs and class filters never build a
silent wrong ground truth, and bad values end as one line instead of a traceback.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from aegis_data.errors import AegisError
from tests import FIXTURES_DIR
from tests.adversarial import YOLO_BUILD, build_yolo, invoke, write_png, yolo_source
from tests.conftest import assert_one_line_error

PRED = {"image_id": 1, "category_id": 1, "bbox": [18, 12, 12, 8], "score": 0.9}


@pytest.fixture(scope="module")
def split(tmp_path_factory) -> Path:
    """A tiny frozen split (clean + low_light_s1) and a predictions folder beside it; tests copy what they edit."""
    base = tmp_path_factory.mktemp("split")
    out = base / "out"
    build_yolo(yolo_source(base / "src"), out)
    preds = base / "preds"
    preds.mkdir()
    for cond in ("clean", "low_light_s1"):
        (preds / f"{cond}.json").write_text(json.dumps([PRED]))
    return out


def preds_of(split: Path) -> Path:
    return split.parent / "preds"


def score_file(split: Path, path: Path, label: str = "m", *extra) -> dict:
    r = invoke(
        "score",
        preds_of(split),
        "--split-dir",
        split,
        "--threshold",
        "0.5",
        "--bootstrap",
        "1",
        "--label",
        label,
        "--json",
        path,
        *extra,
    )
    assert r.exit_code == 0, r.output
    return json.loads(path.read_text())


# --- 6. Rich markup in user strings ----------------------------------------------------------------------------
MARKUP = ("m[/]", "yolo[v11]", "[bold]b", "x[link=https://e.x]y[/link]", ":smile:")


@pytest.mark.parametrize("label", MARKUP)
def test_score_prints_a_markup_label_verbatim_and_writes_the_json(tmp_path, split, label):
    doc = score_file(split, tmp_path / "s.json", label)
    assert doc["label"] == label
    r = invoke(
        "score", preds_of(split), "--split-dir", split, "--threshold", "0.5", "--bootstrap", "1", "--label", label
    )
    assert r.exit_code == 0, r.output
    assert f"{label} @ threshold" in r.stdout.replace("\n", "")


def test_rank_keeps_labels_that_look_like_markup_apart(tmp_path, split):
    paths = []
    for k, label in enumerate(("yolo[v11]", "yolo[v8]", "yolo[/]")):
        path = tmp_path / f"s{k}.json"
        doc = score_file(split, path, label)
        doc["conditions"]["clean"]["recall"] = 0.9 - 0.1 * k  # a strict order, so the order column names all three
        path.write_text(json.dumps(doc))
        paths.append(path)
    r = invoke("rank", *paths, "--metric", "recall", "--bootstrap", "10")
    assert r.exit_code == 0, r.output
    flat = _flat(r.stdout)
    assert all(s in flat for s in ("yolo[v11]", "yolo[v8]", "yolo[/]")), r.stdout


def _resealed(m: dict) -> dict:
    from aegis_data.split.manifest import files_hash, root_hash, sealed_header

    m["root_hash"] = root_hash(m, m["entries"])
    m["files_hash"] = files_hash(m["root_hash"], m["encoder"], m["entries"], sealed_header(m))
    return m


def _flat(text: str) -> str:
    return text.replace("\n", "").replace("│", "").replace(" ", "")


def test_verify_against_a_reference_naming_a_markup_dataset_is_a_finding(tmp_path, split):
    ref = json.loads((split / "manifest.json").read_text())
    ref["dataset"] = "syn[/]"
    (tmp_path / "ref.json").write_text(json.dumps(_resealed(ref)))
    r = invoke("verify", split, "--against", tmp_path / "ref.json")
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output and "syn[/]" in _flat(r.stdout)


def test_verify_prints_a_markup_scale_basis_verbatim(tmp_path):
    out = tmp_path / "out"
    m = build_yolo(yolo_source(tmp_path / "src"), out, "--scale", "object", "--person-px", "40")
    m["scale"]["basis"] = "syn[/]"
    (out / "manifest.json").write_text(json.dumps(_resealed(m)))
    r = invoke("verify", out)
    assert r.exit_code == 0, r.output
    assert "syn[/]" in r.stdout


def sard_tree(root: Path, cls: str = "person", n: int = 6, rows: list[str] | None = None) -> Path:
    """One folder of frames gss1..gssN with one labels CSV: a box of class ``cls`` on every frame (or ``rows``)."""
    lines = ["filename,width,height,class,xmin,ymin,xmax,ymax"]
    for k in range(1, n + 1):
        write_png(root / "train" / f"gss{k}.png", 64, 48, seed=k)
        lines.append(f"gss{k}.png,64,48,{cls},4,4,30,30")
    (root / "train" / "train_labels.csv").write_text("\n".join(rows if rows is not None else lines) + "\n")
    return root


def test_audit_prints_a_markup_class_verbatim(tmp_path):
    src = sard_tree(tmp_path / "sard", cls="Dog[/]")
    r = invoke("audit", "--dataset", "sard", "--source", src, "--classes", "Dog[/]", "--no-hash")
    assert r.exit_code == 0, r.output
    assert "Dog[/]" in r.stdout


def test_every_command_prints_paths_with_markup_verbatim(tmp_path):
    """The walk: every path lies below a folder whose name holds closing markup (``w[/]`` is the folder ``w[``
    and its sub-folder ``]``); build, verify, freeze, score, rank and gt-diff each print their paths verbatim."""
    base = tmp_path / "w[/]"
    base.mkdir(parents=True)
    out = base / "o[bold]"
    r = invoke("build-splits", "--source", yolo_source(base / "src"), "--out-dir", out, *YOLO_BUILD)
    assert r.exit_code == 0, r.output
    assert "w[/]/o[bold]" in _flat(r.stdout)
    r = invoke("verify", out)
    assert r.exit_code == 0, r.output
    assert "w[/]/o[bold]" in r.stdout
    preds = base / "p[v8]"
    preds.mkdir()
    for cond in ("clean", "low_light_s1"):
        (preds / f"{cond}.json").write_text(json.dumps([PRED]))
    threshold = base / "t[red].json"
    r = invoke(
        "freeze-threshold", preds / "clean.json", "--split-dir", out / "annotations" / "test.json", "--out", threshold
    )
    assert r.exit_code == 0, r.output
    assert f"wrote {threshold}" in r.stdout
    jsons = []
    for label in ("a[/]", "b[/]"):
        jsons.append(base / f"s[{label[0]}].json")
        r = invoke(
            "score",
            preds,
            "--split-dir",
            out,
            "--threshold-file",
            threshold,
            "--bootstrap",
            "1",
            "--label",
            label,
            "--json",
            jsons[-1],
            "--csv",
            base / "s[i].csv",
        )
        assert r.exit_code == 0, r.output
        assert f"wrote {jsons[-1]}" in r.stdout and f"wrote {base / 's[i].csv'}" in r.stdout
    r = invoke("rank", *jsons, "--bootstrap", "10", "--json", base / "r[b].json")
    assert r.exit_code == 0, r.output
    assert f"wrote {base / 'r[b].json'}" in r.stdout
    gt = out / "annotations" / "test.json"
    r = invoke("gt-diff", gt, gt, "--json", base / "d[b].json")
    assert r.exit_code == 0, r.output
    assert f"wrote {base / 'd[b].json'}" in r.stdout


def test_the_shared_consoles_never_read_markup_or_emoji_codes():
    from aegis_cli.common import err, out

    for console in (out, err):
        with console.capture() as cap:
            console.print("a[/] [bold]b :smile:", highlight=False)
        assert cap.get().strip() == "a[/] [bold]b :smile:"


# --- 7. names in the report: Markdown, HTML, mathtext, LaTeX -----------------------------------------------------
SCORE_FIXTURE = FIXTURES_DIR / "score_sard_yolo11n.json"
HOSTILE_LABEL = (
    "<script>alert(1)</script> <img src=x onerror=alert(1)> [x](javascript:alert(1)) "
    "![i](https://evil.example/p.png) <https://evil.example> *em* _u_ `code` a|b"
)
HOSTILE_DATASET = "d\n\n# Injected\x7f\x00\u2028z"


def _hostile_result(label: str = HOSTILE_LABEL, dataset: str = HOSTILE_DATASET) -> dict:
    from aegis_eval.report import load_results

    (res,) = load_results([SCORE_FIXTURE])
    return {**res, "label": label, "dataset": dataset}


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory):
    from aegis_eval.report import build_report

    return build_report([_hostile_result()], tmp_path_factory.mktemp("hostile") / "r", formats="md,html,latex")


def test_report_md_renders_user_strings_as_plain_text(hostile_report):
    from markdown_it import MarkdownIt

    md = hostile_report.markdown.read_text(encoding="utf-8")
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(md)
    assert "<script" not in html and '<img src="x"' not in html and "onerror" not in html.replace("onerror=", "")
    assert 'href="javascript:' not in html and 'src="https://evil' not in html and 'href="https://evil' not in html
    assert "<h1>Injected" not in html and "<em>em</em>" not in html and "<code>code</code>" not in html
    assert html.count("<h1>") == 1  # the report's title only
    assert "](javascript:" not in md and "![i](" not in md  # renderers that do not filter link targets
    # The label is still there, as text, in one table cell (the pipe escaped, not a column break).
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "a|b" in html
    assert not any(ch in md for ch in "\x7f\x00\u2028")


@pytest.mark.parametrize(
    "text",
    [
        HOSTILE_LABEL,
        "a&amp;b",
        "&copy; 2024",
        "&#60;b&#62;",
        "R&D",
        "x\\_y",
        "low_light_s1",
        "fp_per_image<=2",
        "[0.72, 0.81]",
        "$x$",
        "~~s~~",
        "__init__",
    ],
)
def test_md_text_renders_as_exactly_the_text(text):
    """What md_text promises: rendered, the Markdown shows the text itself (an entity reference such as &copy;
    included), not what it would mean as Markdown or HTML."""
    import html

    from markdown_it import MarkdownIt

    from aegis_eval.report.text import md_text

    rendered = MarkdownIt("commonmark").render(md_text(text))
    assert rendered == "<p>" + html.escape(text, quote=False).replace('"', "&quot;") + "</p>\n"


def test_report_html_holds_no_markup_from_user_strings(hostile_report):
    text = hostile_report.html.read_text(encoding="utf-8")
    assert "<script" not in text and "<img src=x" not in text and 'href="javascript:' not in text
    assert not any(ch in text for ch in "\x7f\x00\u2028")


def test_report_latex_of_names_with_blank_lines_and_control_characters_compiles(hostile_report, tmp_path):
    from tests.eval.report.report_fixtures import compile_report_tex

    for p in [hostile_report.latex_document, *hostile_report.latex_tables]:
        tex = p.read_text(encoding="utf-8")
        assert not any(ord(ch) < 32 and ch != "\n" or ord(ch) == 127 for ch in tex), p.name
        assert not _blank_line_inside_braces(tex), p.name
    compile_report_tex(hostile_report.out, tmp_path, "the checks of the .tex text above ran")


def _blank_line_inside_braces(tex: str) -> bool:
    """A blank line inside an argument (a caption, a section title): pdflatex's "Paragraph ended before"."""
    depth = 0
    for k, ch in enumerate(tex):
        if ch == "\\":
            continue
        if ch in "{}" and (k == 0 or tex[k - 1] != "\\"):
            depth += 1 if ch == "{" else -1
        elif depth > 0 and tex.startswith("\n\n", k):
            return True
    return False


@pytest.mark.parametrize("label", [r"$\foo$", "$x$ and $", r"a$\frac{1}{0$b", "$$"])
def test_report_figures_draw_labels_with_dollar_signs_literally(tmp_path, label):
    from aegis_eval.report import build_report
    from aegis_eval.report import figures as F
    from aegis_eval.report.results import group_by_dataset

    (g,) = group_by_dataset([_hostile_result(label=label, dataset="d")])
    with F.drawn(F.heatmap(g, "recall")) as fig:
        texts = [t for ax in fig.axes for t in ax.get_xticklabels() + ax.get_yticklabels() + ax.texts] + fig.texts
        shown = [t for t in texts if label in t.get_text()]
        # get_text() is the raw string either way: what draws it literally is that it is never parsed as mathtext.
        assert shown and not any(t.get_parse_math() for t in shown)
    files = build_report([_hostile_result(label=label, dataset="d")], tmp_path / "r", formats="md")
    assert files.markdown.is_file()


# --- 8. a score JSON holds only its suite's conditions ------------------------------------------------------------
def _score_json_with(tmp_path: Path, edit) -> Path:
    doc = json.loads(SCORE_FIXTURE.read_text())
    edit(doc)
    path = tmp_path / "score.json"
    path.write_text(json.dumps(doc))
    return path


def test_report_refuses_hundreds_of_made_up_conditions_at_once(tmp_path):
    def add(doc):
        for k in range(300):
            doc["conditions"][f"made_up_{k}_s1"] = dict(doc["conditions"]["low_light_s1"])

    r = invoke("report", _score_json_with(tmp_path, add), "--out-dir", tmp_path / "r")
    from aegis_eval.protocols.score_doc import MAX_CONDITIONS

    assert_one_line_error(r, "328 entries", f"at most {MAX_CONDITIONS} ")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("cond", ["low_light_s99", "low_light_s0", "made_up_s1", "clean_s1", "low_light_s01"])
def test_report_refuses_a_condition_its_suite_cannot_make(tmp_path, cond):
    def add(doc):
        doc["conditions"][cond] = doc["conditions"].pop("low_light_s3")

    r = invoke("report", _score_json_with(tmp_path, add), "--out-dir", tmp_path / "r")
    assert_one_line_error(r, f"not a condition id: {cond!r}")


def test_conditions_are_checked_against_the_suite_the_score_names(tmp_path):
    import yaml

    from aegis_data.engine.config import DEFAULT_CONFIG_PATH, config_from_bytes, load_config
    from aegis_eval.protocols.score_doc import validate_result
    from aegis_eval.report import build_report, load_results

    raw = yaml.safe_load(DEFAULT_CONFIG_PATH.read_text())
    raw["corruptions"] = {"low_light": raw["corruptions"]["low_light"]}
    raw["families"] = {"storm": ["low_light"]}
    storm_only = config_from_bytes(yaml.safe_dump(raw).encode(), "storm-only.yaml")
    (res,) = load_results([SCORE_FIXTURE])
    with pytest.raises(AegisError, match=rf"not a condition id: 'water_glare_s1' .* {storm_only.config_hash}"):
        validate_result(res, "s.json", config=storm_only)
    with pytest.raises(AegisError, match="water_glare_s1"):
        build_report([res], tmp_path / "r", formats="md", config=storm_only)
    assert not (tmp_path / "r").exists()
    # A score whose provenance names the installed suite is held to that suite; one of another (unknown here)
    # suite to the corruptions the engine can make at all.
    installed = load_config()
    for config_hash in (installed.config_hash, "0123456789ab"):
        doc = {**res, "provenance": {**res["provenance"], "config_hash": config_hash}}
        doc["conditions"] = {**res["conditions"], "snow_s1": res["conditions"]["low_light_s1"]}
        del doc["conditions"]["low_light_s3"]
        with pytest.raises(AegisError, match="not a condition id: 'snow_s1'"):
            validate_result(doc)
        validate_result(res)


@pytest.mark.parametrize("suite", ["aegis-v1", "aegis-v2"])
def test_a_score_of_either_shipped_suite_is_held_to_that_suite(suite):
    """'flood' is an engine model, not a corruption of either suite: a score naming flood_s1 is refused whichever
    shipped suite (current or pre-0.3 hash) its provenance names, not only the default one."""
    from aegis_data.engine.config import load_config
    from aegis_eval.protocols.score_doc import validate_result
    from aegis_eval.report import load_results

    (res,) = load_results([SCORE_FIXTURE])
    config = load_config(suite)
    for config_hash in (config.config_hash, config.bytes_hash):
        doc = {**res, "provenance": {**res["provenance"], "config_hash": config_hash}}
        doc["conditions"] = {**res["conditions"], "flood_s1": res["conditions"]["low_light_s1"]}
        del doc["conditions"]["low_light_s3"]  # a full grid plus one is refused by the count first
        with pytest.raises(AegisError, match=rf"not a condition id: 'flood_s1' .* {config.config_hash}"):
            validate_result(doc)


def test_a_score_of_an_unknown_suite_is_held_to_the_nine_corruptions_not_to_the_engine_models():
    """The bound and the fallback read the engine's model list (18 models: 55 conditions, and model names such as
    sun_glint_s1 passed as conditions); every suite's conditions come from the nine corruptions: 28."""
    from aegis_eval.protocols.score_doc import MAX_CONDITIONS, validate_result
    from aegis_eval.report import load_results

    assert MAX_CONDITIONS == 28
    (res,) = load_results([SCORE_FIXTURE])
    for model_name in ("sun_glint_s1", "camera_low_light_s3", "flood_s2"):
        doc = {**res, "provenance": {**res["provenance"], "config_hash": "000000000000"}}
        doc["conditions"] = {**res["conditions"], model_name: res["conditions"]["low_light_s1"]}
        del doc["conditions"]["low_light_s3"]
        with pytest.raises(AegisError, match=f"not a condition id: '{model_name}'"):
            validate_result(doc)


def test_rank_bounds_the_number_and_length_of_condition_names(tmp_path, split):
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    for path, label in zip(paths, "ab"):
        score_file(split, path, label)
    doc = json.loads(paths[0].read_text())
    doc["conditions"].update({f"domain{k}": doc["conditions"]["clean"] for k in range(300)})
    paths[0].write_text(json.dumps(doc))
    from aegis_eval.protocols.score_doc import MAX_CONDITIONS

    assert_one_line_error(invoke("rank", *paths, "--bootstrap", "10"), f"at most {MAX_CONDITIONS} ")
    doc = json.loads(paths[1].read_text())
    doc["conditions"]["x" * 5000] = doc["conditions"]["clean"]
    paths[0].write_text(json.dumps(doc))
    assert_one_line_error(invoke("rank", *paths, "--bootstrap", "10"), "1 to 100 characters")


# --- 9. SARD CSV and class filters never build a silent wrong ground truth ---------------------------------------
def _sard(root: Path, **options):
    from aegis_data.sources import load_source

    return load_source("sard", source=root, **options)


def _boxes(ds) -> dict[str, int]:
    return {r.image_id: len(r.boxes) for r in ds.records()}


def test_exact_duplicate_csv_rows_are_dropped_counted_and_warned(tmp_path):
    src = sard_tree(tmp_path / "sard")
    csv_path = src / "train" / "train_labels.csv"
    lines = csv_path.read_text().splitlines()
    csv_path.write_text("\n".join(lines + lines[1:3] + lines[1:2]) + "\n")  # gss1 three times, gss2 twice
    ds = _sard(src)
    assert set(_boxes(ds).values()) == {1}
    assert ds.description["duplicate_rows"] == 3
    (line,) = [w for w in ds.warnings if "duplicate" in w]
    assert "3 exact duplicate row(s) dropped" in line and "train_labels.csv:8" in line
    r = invoke("audit", "--dataset", "sard", "--source", src, "--no-hash")
    assert r.exit_code == 0, r.output
    assert r.stderr.count("warning:") == 1 and "duplicate" in r.stderr


def test_two_different_boxes_on_one_frame_are_kept(tmp_path):
    rows = ["filename,width,height,class,xmin,ymin,xmax,ymax"] + [
        f"gss{k}.png,64,48,person,4,4,30,30" for k in range(1, 7)
    ]
    rows.append("gss1.png,64,48,person,34,4,60,30")
    ds = _sard(sard_tree(tmp_path / "sard", rows=rows))
    assert _boxes(ds)["gss1"] == 2 and not ds.warnings


@pytest.mark.parametrize(
    "cls,classes,present",
    [("person", "persn", "person"), ("Standing", "person", "Standing"), ("person", "person,persn", "person")],
)
def test_a_sard_class_filter_matching_no_label_is_refused(tmp_path, cls, classes, present):
    src = sard_tree(tmp_path / "sard", cls=cls)
    with pytest.raises(AegisError, match=rf"matches no label .*; the labels hold classes: {present}") as exc:
        _sard(src, classes=classes)
    assert "\n" not in str(exc.value)
    assert_one_line_error(
        invoke("audit", "--dataset", "sard", "--source", src, "--classes", classes, "--no-hash"),
        "matches no label",
        present,
    )


def _voc_tree(root: Path, name: str = "person") -> Path:
    for k in range(3):
        write_png(root / "JPEGImages" / f"v{k}.png", seed=k)
        (root / "Annotations").mkdir(parents=True, exist_ok=True)
        (root / "Annotations" / f"v{k}.xml").write_text(
            f"<annotation><size><width>48</width><height>32</height></size><object><name>{name}</name>"
            "<bndbox><xmin>4</xmin><ymin>4</ymin><xmax>20</xmax><ymax>20</ymax></bndbox></object></annotation>"
        )
    return root


def test_a_voc_class_filter_matching_no_label_is_refused(tmp_path):
    from aegis_data.sources import load_source

    src = _voc_tree(tmp_path / "voc", name="Person")
    assert_one_line_error(
        invoke("audit", "--dataset", "voc", "--source", src, "--classes", "persn", "--no-hash"),
        "'persn' matches no label",
        "the labels hold classes: Person",
    )
    ds = load_source("voc", source=src, classes="person")  # names compare case-insensitively, as before
    assert sum(len(r.boxes) for r in ds.records()) == 3


def test_a_quoted_class_with_a_newline_is_one_field(tmp_path):
    rows = ["filename,width,height,class,xmin,ymin,xmax,ymax", 'gss1.png,64,48,"Not\nDefined",4,4,30,30']
    rows += [f"gss{k}.png,64,48,person,4,4,30,30" for k in range(2, 7)]
    ds = _sard(sard_tree(tmp_path / "sard", rows=rows))
    assert set(_boxes(ds).values()) == {1}
    # Line numbers still count file lines: the record after the two-line one starts on line 4.
    rows[2] = "gss2.png,64,48,person,4,4,30"
    with pytest.raises(AegisError, match=r"train_labels\.csv:4: expected 8 values"):
        _sard(sard_tree(tmp_path / "sard2", rows=rows))


def test_a_labels_csv_linked_outside_the_root_is_refused_unread(tmp_path):
    src = sard_tree(tmp_path / "sard")
    secret = tmp_path / "elsewhere" / "secret.csv"
    secret.parent.mkdir()
    secret.write_text("TOKEN-8f1e2d,not,a,labels,file\n")
    (src / "train" / "train_labels.csv").unlink()
    (src / "train" / "train_labels.csv").symlink_to(secret)
    with pytest.raises(AegisError, match="resolves outside the dataset root") as exc:
        _sard(src)
    assert "TOKEN" not in str(exc.value)
    r = invoke("audit", "--dataset", "sard", "--source", src, "--no-hash")
    assert_one_line_error(r, "resolves outside the dataset root")
    assert "TOKEN" not in r.output


def test_the_sard_xml_layout_applies_and_checks_its_class_filter(tmp_path):
    root = tmp_path / "sard"
    for k in range(1, 7):
        write_png(root / f"gss{k}.png", 48, 32, seed=k)
        (root / f"gss{k}.xml").write_text(
            "<annotation><object><name>Standing</name><bndbox><xmin>4</xmin><ymin>4</ymin><xmax>20</xmax>"
            "<ymax>20</ymax></bndbox></object></annotation>"
        )
    with pytest.raises(AegisError, match="'persn' matches no label .*the labels hold classes: Standing"):
        _sard(root, classes="persn")
    assert set(_boxes(_sard(root, classes="standing")).values()) == {1}


# --- 11. one line instead of a traceback ----------------------------------------------------------------------------
def test_a_non_utf8_image_name_in_a_sard_folder_is_one_line(tmp_path):
    src = sard_tree(tmp_path / "sard")
    write_png(src / "train" / "x.png", seed=9)
    os.rename(bytes(src / "train" / "x.png"), bytes(src / "train") + b"/gss\xff9.png")
    with pytest.raises(AegisError, match=r"image file name 'gss\\udcff9.png' .* is not UTF-8"):
        _sard(src)
    assert_one_line_error(invoke("audit", "--dataset", "sard", "--source", src, "--no-hash"), "is not UTF-8")


@pytest.mark.parametrize(
    "name,data,fragment",
    [
        ("groups.csv", b"stem,group\ngss1,\xff\xfe\n", "is not UTF-8 text"),
        ("groups.json", json.dumps({f"gss{k}": None for k in range(1, 7)}).encode(), "the group of 'gss1' is null"),
        ("groups.json", json.dumps({f"gss{k}": ["a"] for k in range(1, 7)}).encode(), "the group of 'gss1' is [\"a\"]"),
        ("groups.csv", b"gss1,\ngss2,b\n", "the group of 'gss1' is empty"),
    ],
)
def test_bad_groups_files_are_one_line(tmp_path, name, data, fragment):
    src = sard_tree(tmp_path / "sard")
    (tmp_path / name).write_bytes(data)
    with pytest.raises(AegisError, match="groups file") as exc:
        _sard(src, groups=str(tmp_path / name))
    assert fragment in str(exc.value) and "\n" not in str(exc.value)


def test_a_groups_csv_reads_quoted_fields_as_csv(tmp_path):
    src = sard_tree(tmp_path / "sard")
    rows = "".join(f'gss{k},"seq,\n{k // 4}"\n' for k in range(1, 7))  # a comma and a line break inside quotes
    (tmp_path / "groups.csv").write_text(rows)
    assert {r.group for r in _sard(src, groups=str(tmp_path / "groups.csv")).records()} == {"seq,\n0", "seq,\n1"}


@pytest.fixture(scope="module")
def api_inputs(split):
    import aegis_eval as ae

    base = ae.score([PRED], split, threshold=0.5, bootstrap=1).to_dict()
    return ae, split, base


@pytest.mark.parametrize(
    "conditions",
    [{"../../evil": [PRED]}, {"clean": [PRED], "a/b": [PRED]}, {1: [PRED]}, {"clean": [PRED], "low_light_s9": [PRED]}],
)
def test_api_score_refuses_condition_names_no_file_could_have(api_inputs, conditions):
    ae, split, _ = api_inputs
    with pytest.raises(AegisError, match=r"\[condition_(name|unknown)\]"):
        ae.score(conditions, split, threshold=0.5, bootstrap=1)


def test_cli_score_refuses_a_condition_file_of_another_suite(tmp_path, split):
    (tmp_path / "low_light_s9.json").write_text(json.dumps([PRED]))
    r = invoke("score", tmp_path / "low_light_s9.json", "--split-dir", split, "--threshold", "0.5", "--bootstrap", "1")
    assert_one_line_error(r, "[condition_unknown]", "'low_light_s9'")


@pytest.mark.parametrize(
    "kwargs,fragment",
    [
        (dict(threshold=True), "`threshold` must be a number in [0, 1]; got True"),
        (dict(threshold="0.5"), "`threshold` must be a number"),
        (dict(threshold=0.5, bootstrap=10**12), "at most 100,000 resamples"),
    ],
)
def test_api_score_refuses_bad_threshold_and_bootstrap_values(api_inputs, kwargs, fragment):
    ae, split, _ = api_inputs
    with pytest.raises(AegisError) as exc:
        ae.score([PRED], split, **kwargs)
    assert fragment in str(exc.value)


def test_cli_bootstrap_is_bounded(split):
    r = invoke("score", preds_of(split), "--split-dir", split, "--threshold", "0.5", "--bootstrap", "1000000000000")
    assert_one_line_error(r, "at most 100,000 resamples")
    r = invoke("score", preds_of(split), "--split-dir", split, "--threshold", "0.5", "--bootstrap", "100000")
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("gt", [None, 3, ["a"]])
def test_api_score_refuses_a_ground_truth_that_is_no_path(api_inputs, gt):
    ae, _, _ = api_inputs
    with pytest.raises(AegisError, match=r"\[gt_not_found\] the ground truth must be a split folder or a COCO"):
        ae.score([PRED], gt, threshold=0.5, bootstrap=1)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 5.0, -0.5])
def test_api_rank_refuses_in_memory_documents_with_impossible_values(api_inputs, value):
    ae, _, base = api_inputs
    docs = [json.loads(json.dumps({**base, "label": f"m{k}"})) for k in range(3)]
    docs[1]["conditions"]["clean"]["recall"] = value
    with pytest.raises(AegisError, match=r"scores\[1\]: conditions\['clean'\]\.recall = .* is out of range"):
        ae.rank(docs, "recall", bootstrap=10)


@pytest.mark.parametrize(
    "edit,fragment",
    [
        (lambda d: d["conditions"]["clean"].update(severity="high"), "severity must be 0 (clean), 1-3 or null"),
        (lambda d: d["conditions"]["clean"].update(severity=True), "severity must be"),
        (lambda d: d["threshold"].update(value="0.5"), "threshold.value must be a number in [0, 1] or null"),
        (lambda d: d["threshold"].update(value=7), "threshold.value must be a number in [0, 1] or null"),
        (lambda d: d["threshold"].update(per_class={"person": None, "car": "x"}), "threshold.per_class['car']"),
    ],
)
def test_score_result_refuses_bad_types_at_construction(api_inputs, edit, fragment):
    ae, _, base = api_inputs
    doc = json.loads(json.dumps(base))
    edit(doc)
    with pytest.raises(AegisError, match=r"\[score_schema\]") as exc:
        ae.ScoreResult(doc)
    assert fragment in str(exc.value)


def test_an_image_id_that_is_no_text_is_one_line():
    import aegis_data as ad

    rgb = np.zeros((64, 64, 3), np.uint8)
    with pytest.raises(AegisError, match=r"image_id 'a\\udcff' is not valid text"):
        ad.apply_corruption(rgb, "low_light", 1, image_id="a\udcff", config=ad.load_config("aegis-v1"))
    ad.apply_corruption(rgb, "low_light", 1, image_id="bild_ä", config=ad.load_config("aegis-v1"))  # real text keys


@pytest.mark.parametrize(
    "kwargs,fragment",
    [
        (dict(seed=2**64), "`seed` must be an integer in [0, 2**63)"),
        (dict(seed=-1), "`seed` must be"),
        (dict(seed=True), "`seed` must be"),
        (dict(limit=True), "`limit` must be at least 1, an integer"),
        (dict(limit=1.5), "`limit` must be at least 1, an integer"),
        (dict(limit=0), "`limit` must be at least 1, an integer"),
    ],
)
def test_build_splits_refuses_seed_and_limit_values_that_are_no_such_integer(tmp_path, kwargs, fragment):
    from aegis_data.sources import load_source
    from aegis_data.split.build import build_splits

    ds = load_source("yolo", source=yolo_source(tmp_path / "src"))
    with pytest.raises(AegisError) as exc:
        build_splits(ds, tmp_path / "out", corruptions=["low_light"], severities=[1], workers=1, **kwargs)
    assert fragment in str(exc.value)
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_training_seeds_beyond_32_bits_are_one_line():
    from aegis_eval.runners.ablate import parse_seeds
    from aegis_eval.runners.config import resolve_settings

    with pytest.raises(
        AegisError,
        match=r"training seed 18446744073709551616 is too large; expected integers in "
        r"\[0, 4294967295\]",
    ):
        parse_seeds("0,18446744073709551616")
    assert parse_seeds("0,4294967295") == [0, 4294967295]
    with pytest.raises(AegisError, match=r"seed=4294967296 is invalid"):
        resolve_settings(None, {"seed": 2**32})
    with pytest.raises(AegisError, match=r"bootstrap=1000000000000 is invalid; expected at most 100,000"):
        resolve_settings(None, {"bootstrap": 10**12})


def test_cli_training_seeds_beyond_32_bits_are_one_line(tmp_path, split):
    r = invoke(
        "baseline",
        "ablate",
        "--split-dir",
        split,
        "--out-dir",
        tmp_path / "ab",
        "--policies",
        "all",
        "--seeds",
        "18446744073709551616",
        "--model",
        "yolo11",
        "--weights",
        "yolo11n.yaml",
    )
    assert_one_line_error(r, "training seed 18446744073709551616 is too large")


def test_a_400_digit_policy_weight_is_one_line(tmp_path):
    from aegis_data.augment.transform import load_policy, resolve_policy

    with pytest.raises(AegisError, match="finite positive number"):
        resolve_policy({"name": "w", "p_clean": 0.0, "severity_weights": [10**400, 1, 1]}, "p.yaml")
    (tmp_path / "p.yaml").write_text(f"name: w\np_clean: 0.0\nseverity_weights: [{'9' * 400}, 1, 1]\n")
    with pytest.raises(AegisError, match="finite positive number"):
        load_policy(tmp_path / "p.yaml")


def test_gallery_index_md_shows_file_names_as_text():
    from markdown_it import MarkdownIt

    from aegis_eval.report.gallery import GalleryPair, _index_md

    pair = GalleryPair(
        rank=1,
        row=0,
        image_id=1,
        file_name="<img src=x onerror=alert(1)>) [a](javascript:x).png",
        condition="low_light_s1",
        n_gt=1,
        found_clean=1,
        found_condition=0,
    )
    rel = "pairs/001_low_light_s1_<img src=x onerror=alert(1)>) [a](javascript:x).png"
    md = _index_md([(pair, rel)], "0.5", Path("sp`lit"), ["a *note*"])
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(md)
    assert '<img src="x"' not in html and "<img src=x" not in html and "](javascript:" not in md
    assert html.count("<img") == 1 and "<em>note</em>" not in html and "<code>" not in html


def test_gallery_of_a_split_whose_folder_name_is_not_utf8_writes_both_indexes(tmp_path, split):
    """The HTML index passes user text through the report's one-line text as index.md does: a lone surrogate (a
    non-UTF-8 byte of the folder name) becomes U+FFFD instead of failing the UTF-8 write."""
    odd = tmp_path / os.fsdecode(b"split\xff")
    shutil.copytree(split, odd)
    preds = tmp_path / "preds"
    preds.mkdir()
    (preds / "clean.json").write_text(json.dumps([PRED]))
    (preds / "low_light_s1.json").write_text("[]")  # the one person is lost: one pair to draw
    r = invoke("gallery", preds, "--split-dir", odd, "--out-dir", tmp_path / "g", "--threshold", "0.5")
    assert r.exit_code == 0, r.output
    for name in ("index.md", "index.html"):
        assert "split\ufffd" in (tmp_path / "g" / name).read_text(encoding="utf-8"), name
