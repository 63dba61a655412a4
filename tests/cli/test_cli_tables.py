"""Every table the CLI prints reads at 80 columns, piped: no cell cut, no number shortened to an ellipsis."""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console
from rich.table import Table
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_cli.tables import fit

runner = CliRunner()
NUMBER = re.compile(r"[-+]?\d+(?:[.,]\d+)*%?")


def render(renderable, width: int = 80) -> str:
    console = Console(width=width, file=io.StringIO(), force_terminal=False, color_system=None)
    console.print(renderable)
    return console.file.getvalue()


def cell_numbers(table: Table) -> list[str]:
    found = []
    for column in table.columns:
        for cell in column.cells:
            plain = re.sub(r"\[/?[a-z_ ]*\]", "", str(cell))  # markup such as [green]...[/]
            found += NUMBER.findall(plain)
    return found


def assert_readable(table: Table, keys: int = 1, width: int = 80) -> str:
    text = render(fit(table, keys), width)
    assert "…" not in text, text
    assert max(len(line) for line in text.splitlines()) <= width, text
    flat = " ".join(text.split())
    for number in cell_numbers(table):
        assert number in flat, (number, text)  # every number printed whole
    return text


def wide_table() -> Table:
    table = Table(title="wide")
    table.add_column("condition", no_wrap=True)
    for k in range(10):
        table.add_column(f"metric {k}", justify="right", no_wrap=True)
    for cond in ("clean", "low_light_s3", "water_glare_s2"):
        table.add_row(cond, *(f"0.{k}12 (0.{k}0–0.{k}3)" for k in range(10)))
    return table


def test_a_wide_table_is_split_into_parts_that_repeat_the_key():
    assert "…" in render(wide_table())  # what the bare table did at 80 columns
    text = assert_readable(wide_table())
    assert "(part 1 of" in text and text.count("low_light_s3") > 1


def test_a_table_that_fits_is_printed_unchanged():
    table = Table(title="small")
    table.add_column("a")
    table.add_row("1.5")
    assert render(fit(table)) == render(table)


@pytest.fixture(scope="module")
def score_result(tmp_path_factory):
    from tests.cli.test_cli_scoring import gt_doc, preds_doc
    from tests.eval.protocols.scoring_memory import score_paths

    root = tmp_path_factory.mktemp("score-tables")  # pytest's base folder, pruned like every test's
    (root / "gt.json").write_text(json.dumps(gt_doc(10)))
    (root / "preds").mkdir()
    for name, found in (("clean", 9), ("low_light_s1", 7), ("low_light_s3", 3), ("water_glare_s2", 8)):
        (root / "preds" / f"{name}.json").write_text(json.dumps(preds_doc(10, found)))
    return score_paths(root / "preds", root / "gt.json", threshold=0.5, bootstrap=20, seed=0)


def test_score_tables(score_result):
    from aegis_cli.score_tables import conditions_table, false_alarm_table, recall_matrix

    assert_readable(conditions_table(score_result))
    assert_readable(false_alarm_table(score_result))
    assert_readable(recall_matrix(score_result), keys=2)


def test_baseline_tables():
    from aegis_cli.baseline import _run_table, ablation_table

    record = {
        "conditions": {
            "clean": {"n_images": 120, "n_detections": 45210, "seconds": 123.456, "images_per_s": 0.97},
            "water_glare_s3": {"n_images": 120, "n_detections": 40001, "seconds": 99.5, "images_per_s": 1.21},
        }
    }
    assert_readable(_run_table(record, "fasterrcnn predictions (cpu) → /a/long/path/to/the/results/folder"))
    gain = {"gain": 0.0123, "ci": [-0.0101, 0.0345]}
    ablation = {
        "label": "yolo11n-sard",
        "settings": {"seeds": None},
        "runs": {
            name: {"policy": {"hash": "3f2a9c1b0d4e"} if name != "clean" else None, "threshold": 0.285}
            for name in ("clean", "all", "loo-flood", "loo-wildfire")
        },
        "gains": {
            name: {"recall": {k: gain for k in ("mpc", "rpc", "seen", "unseen")}}
            for name in ("all", "loo-flood", "loo-wildfire")
        },
    }
    assert_readable(ablation_table(ablation))
    # Several training seeds: per-seed gains, their spread and the combined interval (the widest table).
    seeded = {
        **ablation,
        "settings": {"seeds": [0, 1, 2]},
        "runs": {n: {**r, "threshold": [0.285, 0.31, 0.27]} for n, r in ablation["runs"].items()},
        "gains": {
            n: {
                "recall": {
                    k: {**gain, "seeds": [{"gain": 0.01}, {"gain": -0.0234}, {"gain": 0.05}], "seed_sd": 0.0367}
                    for k in ("mpc", "rpc", "seen", "unseen")
                }
            }
            for n in ("all", "loo-flood", "loo-wildfire")
        },
    }
    assert_readable(ablation_table(seeded))
    from aegis_eval.report.mitigation import fmt_threshold  # the report's gains table writes thresholds alike

    threshold = next(c for c in ablation_table(seeded).columns if c.header == "threshold")
    assert list(threshold.cells) == [fmt_threshold([0.285, 0.31, 0.27])] * 4 == ["0.285/0.31/0.27"] * 4


def _cli(args, width=80):
    result = runner.invoke(app, args, env={"COLUMNS": str(width)})
    assert "…" not in result.stdout, result.stdout
    assert max((len(line) for line in result.stdout.splitlines()), default=0) <= width, result.stdout
    return result


def test_list_and_calibrate_at_80_columns(tmp_path):
    assert _cli(["list"]).exit_code == 0
    assert _cli(["list", "--scale", "object", "--person-px", "40"]).exit_code == 0
    import cv2
    import numpy as np

    folder = tmp_path / "imgs"
    folder.mkdir()
    rng = np.random.default_rng(0)
    cv2.imwrite(str(folder / "a.png"), rng.integers(0, 255, (96, 128, 3), dtype=np.uint8))
    # aegis-v1: its ladders stay monotone on this noise image, so only the table is printed (aegis-v2's noise_sigma
    # falls below clean here, and each violation is one unwrapped line).
    result = _cli(["calibrate", str(folder), "--suite", "aegis-v1", "--corruptions", "low_light,smoke_haze"])
    assert "low_light" in result.stdout


def test_audit_gt_diff_and_rank_at_80_columns(tmp_path):
    assert _cli(["audit", "--dataset", "synthetic", "--n", "3", "--size", "96"]).exit_code == 0
    from tests.eval.protocols.test_gt_diff import new_version, old_version

    (tmp_path / "old.json").write_text(json.dumps(old_version()))
    (tmp_path / "new.json").write_text(json.dumps(new_version()))
    assert _cli(["gt-diff", str(tmp_path / "old.json"), str(tmp_path / "new.json")]).exit_code == 0


def test_rank_at_80_columns(tmp_path):
    from aegis_eval.protocols.scoring import write_score_json
    from tests.cli.test_cli_scoring import gt_doc, preds_doc
    from tests.eval.protocols.scoring_memory import score_paths

    (tmp_path / "gt.json").write_text(json.dumps(gt_doc(10)))
    paths = []
    for m, found in enumerate((9, 7, 5)):
        preds = tmp_path / f"m{m}"
        preds.mkdir()
        for cond, lost in (("clean", 0), ("low_light_s3", m + 1), ("water_glare_s2", 2 - m)):
            (preds / f"{cond}.json").write_text(json.dumps(preds_doc(10, found - lost)))
        paths.append(tmp_path / f"m{m}.json")
        write_score_json(
            score_paths(
                preds, tmp_path / "gt.json", threshold=0.5, bootstrap=1, seed=0, label=f"a-rather-long-model-name-{m}"
            ),
            paths[-1],
        )
    result = _cli(["rank", *map(str, paths), "--bootstrap", "20"])
    assert result.exit_code == 0 and "Kendall" in result.stdout and "unpaired" in result.stdout


def test_paired_rank_at_80_columns(tmp_path):
    from tests.eval.protocols.paired_fixture import make_predictions, make_split

    split = make_split(tmp_path)
    paths = []
    for name, seed in (("a-rather-long-model-name-0", 2), ("a-rather-long-model-name-1", 7)):
        folder = make_predictions(tmp_path, split, name, seed)
        paths.append(str(tmp_path / f"{name}.json"))
        args = ["score", str(folder), "--split-dir", str(split), "--threshold", "0.5", "--bootstrap", "20"]
        assert runner.invoke(app, [*args, "--label", name, "--json", paths[-1]]).exit_code == 0
    result = _cli(["rank", *paths, "--metric", "recall"])
    assert result.exit_code == 0 and "remain after Holm's adjustment" in result.stdout


def test_verify_failures_at_80_columns(tmp_path):
    out = tmp_path / "s"
    assert (
        runner.invoke(
            app,
            [
                "build-splits",
                "--n",
                "1",
                "--size",
                "64",
                "--corruptions",
                "low_light",
                "--severities",
                "1",
                "--workers",
                "1",
                "--out-dir",
                str(out),
            ],
        ).exit_code
        == 0
    )
    png = next((out / "test" / "low_light_s1").iterdir())
    png.write_bytes(png.read_bytes()[:-20])  # truncated: a failure row
    result = _cli(["verify", str(out)])
    assert result.exit_code == 1 and "difference" in result.stdout
