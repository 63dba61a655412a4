"""``aegis score --cross-check pycocotools``: the same numbers from the reference implementation, or a loud
refusal."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import aegis_eval.protocols.crosscheck as crosscheck
from aegis_cli.main import app
from aegis_data.errors import AegisError
from tests.cli.test_cli_scoring import files  # noqa: F401  (the module-scoped split + predictions fixture)
from tests.conftest import assert_one_line_error
from tests.eval.protocols.scoring_memory import score_paths

runner = CliRunner()


def test_cross_check_agrees_and_is_recorded(files):  # noqa: F811
    result = score_paths(files["preds"], files["split"], threshold=0.5, bootstrap=1, cross_check="pycocotools")
    checked = result["provenance"]["cross_check"]
    assert checked["tool"] == "pycocotools" and checked["version"]
    assert checked["conditions"] == len(result["conditions"]) >= 2
    assert checked["max_abs_diff"] <= 1e-12


def test_a_difference_fails_loudly(files, monkeypatch):  # noqa: F811
    real = crosscheck.pycocotools_ap

    def off_by_a_little(gt, dets):
        ref = real(gt, dets)
        return {**ref, "map75": ref["map75"] + 1e-9}

    monkeypatch.setattr(crosscheck, "pycocotools_ap", off_by_a_little)
    with pytest.raises(AegisError, match=r"\[cross_check_mismatch\] clean: map75 .* pycocotools .*1e-09 > 1e-12"):
        score_paths(files["preds"], files["split"], threshold=0.5, bootstrap=1, cross_check="pycocotools")


def test_cli_cross_check(files, tmp_path):  # noqa: F811
    result = runner.invoke(
        app,
        [
            "score",
            str(files["preds"]),
            "--split-dir",
            str(files["split"]),
            "--threshold",
            "0.5",
            "--bootstrap",
            "1",
            "--cross-check",
            "pycocotools",
        ],
        env={"COLUMNS": "240"},
    )
    assert result.exit_code == 0, result.output
    assert "cross-check: pycocotools" in result.stdout and "agrees on" in result.stdout
    bad = runner.invoke(
        app,
        [
            "score",
            str(files["preds"]),
            "--split-dir",
            str(files["split"]),
            "--threshold",
            "0.5",
            "--cross-check",
            "faster-coco-eval",
        ],
    )
    assert_one_line_error(bad, "--cross-check must be one of: pycocotools")
