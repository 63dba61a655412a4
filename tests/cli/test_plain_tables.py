"""cli/plain_tables.py writes exactly what Rich prints for the score's tables and lines on output that is no terminal
(random tables and widths, and real score documents), and leaves to Rich whatever it cannot draw exactly."""

from __future__ import annotations

import contextlib
import io
import json
import random

import pytest
from rich.console import Console

from aegis_cli import score_tables
from aegis_cli.plain_tables import TableSpec, plain_line, plain_text, plain_width, rich_table
from aegis_cli.tables import fit

WORDS = ["condition", "AP", "0.333 (0.30–0.38)", "≤ 1.5", "Δ v2", "x" * 30, "", "a b", "R small", "–", "1.68"]


def rich_print(blocks, width: int) -> str:
    console = Console(width=width, file=io.StringIO(), markup=False, emoji=False, force_terminal=False)
    for block in blocks:
        if isinstance(block, str):
            console.print(block, highlight=False, soft_wrap=True)
        else:
            console.print(fit(rich_table(block[0]), block[1]))
    return console.file.getvalue()


def random_spec(rng: random.Random) -> TableSpec:
    title = " ".join(rng.choice(WORDS[:6] + ["@", "threshold", "(IoU 0.5);"]) for _ in range(rng.randint(0, 14)))
    spec = TableSpec(title=title or None, caption=rng.choice([None, "colour = relative drop vs clean: green < 5%"]))
    for _ in range(rng.randint(1, 11)):
        spec.add_column(
            rng.choice(WORDS[:5] + ["s1", "mean drop"]), rng.choice(["left", "right", "center"]), rng.random() < 0.5
        )
    for _ in range(rng.randint(0, 5)):
        spec.add_row(*(rng.choice(WORDS) if rng.random() < 0.8 else (rng.choice(WORDS), "green") for _ in spec.columns))
    return spec


@pytest.mark.parametrize("seed", range(60))
def test_random_tables_read_as_rich_draws_them(seed):
    rng = random.Random(seed)
    spec, keys = random_spec(rng), rng.randint(0, 3)
    for width in (24, 40, 60, 80, 120, 200):
        text = plain_text(spec, keys, width)
        if text is not None:  # (None: Rich draws it)
            assert text == rich_print([(spec, keys)], width), (seed, width)


def test_most_random_tables_are_drawn_without_rich():
    drawn = sum(plain_text(random_spec(random.Random(s)), 1, 80) is not None for s in range(60))
    assert drawn >= 30


def test_the_narrow_characters_are_one_cell_for_rich():
    from rich.cells import cell_len

    from aegis_cli import plain_tables

    symbols = plain_tables._NARROW.pattern[len("[\\x20-\\x7e") : -len("]*")]
    assert "Δ" in symbols and all(cell_len(c) == 1 for c in symbols)


def test_what_plain_text_leaves_to_rich():
    wide = TableSpec(title="t")
    wide.add_column("condition")
    wide.add_column("x" * 100)
    assert plain_text(wide, 1, 80) is None  # a part wider than the console: Rich wraps its cells
    cjk = TableSpec(title="模型")
    cjk.add_column("a")
    assert plain_text(cjk, 1, 80) is None  # two cells wide
    tab = TableSpec()
    tab.add_column("a\tb")
    assert plain_text(tab, 1, 80) is None
    long_word = TableSpec(title="y" * 50)
    long_word.add_column("a")
    assert plain_text(long_word, 1, 80) is None  # a title word wider than its table: Rich folds it
    assert plain_line("wrote /tmp/out.json") == "wrote /tmp/out.json\n"
    assert plain_line("wrote /tmp/a\tb.json") is None and plain_line("wrote /tmp/\x1b[31m") is None


def test_plain_width_follows_rich(monkeypatch):
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.setenv("COLUMNS", "97")
    with contextlib.redirect_stdout(io.StringIO()):
        assert plain_width() == 97 == Console().width
        monkeypatch.setenv("FORCE_COLOR", "1")  # Rich takes it for a terminal: styles, so Rich draws
        assert plain_width() is None and Console().is_terminal
        monkeypatch.delenv("FORCE_COLOR")
        monkeypatch.setenv("TTY_COMPATIBLE", "1")
        assert plain_width() is None and Console().is_terminal
        monkeypatch.setenv("TTY_COMPATIBLE", "0")
        monkeypatch.setenv("COLUMNS", "3")  # an unusual width: Rich's
        assert plain_width() is None


@pytest.fixture(scope="module")
def made_docs(tmp_path_factory) -> list[dict]:
    """A four-condition score (conditions, false alarms, the recall matrix, the summary line) and the same
    predictions against two GT versions (the versions table, with its Δ and − signs); scored once for every width."""
    import aegis_eval as ae
    from tests.cli.test_cli_scoring import gt_doc, preds_doc

    root = tmp_path_factory.mktemp("plain_tables")
    (root / "gt.json").write_text(json.dumps(gt_doc(10)))
    (root / "preds").mkdir()
    for name, found in (("clean", 9), ("low_light_s1", 7), ("low_light_s3", 3), ("water_glare_s2", 8)):
        (root / "preds" / f"{name}.json").write_text(json.dumps(preds_doc(10, found)))
    options = {"threshold": 0.5, "bootstrap": 20, "label": "run 1"}
    sweep = ae.score(root / "preds", root / "gt.json", **options).to_dict()
    versions = ae.score(root / "preds", [root / "gt.json", root / "gt.json"], **options).to_dict()
    return [sweep, versions]


@pytest.mark.parametrize("width", [40, 80, 120, 200])
def test_a_score_prints_as_rich_printed_it(width, made_docs, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(width))
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    for doc in made_docs:
        blocks = score_tables.score_blocks(doc)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            score_tables.print_score(doc)
        assert buf.getvalue() == rich_print(blocks, width)
        if width >= 80:  # (at 40 columns some parts still need their cells wrapped: Rich draws those)
            assert all(plain_text(b[0], b[1], width) is not None for b in blocks if not isinstance(b, str))
