"""`aegis realism`: the table and JSON of the real-versus-rendered comparison, and its one-line refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.split import measure
from tests.conftest import assert_one_line_error
from tests.data.engine.test_realism import real_dir_of, tiny_split

runner = CliRunner()


@pytest.fixture(scope="module")
def split(tmp_path_factory) -> Path:
    return tiny_split(tmp_path_factory.mktemp("cli-realism") / "split")


def test_aegis_realism_prints_and_writes_json(split, tmp_path):
    real = real_dir_of(tmp_path, split, "low_light_s1")
    result = runner.invoke(
        app,
        [
            "realism",
            str(real),
            "--condition",
            "low_light_s1",
            "--split-dir",
            str(split),
            "--json",
            str(tmp_path / "r.json"),
        ],
        env={"COLUMNS": "160"},
    )
    assert result.exit_code == 0, result.output
    for word in ("noise_sigma", "noise_autocorrelation", "chroma_luma_noise_ratio", "edge_width", "rendered↔real"):
        assert word in result.stdout
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["condition"] == "low_light_s1" and doc["distance"]["rendered"]["noise_sigma"] == 1.0
    assert doc == json.loads(json.dumps(measure.realism_report(real, split, "low_light_s1").to_dict()))


def test_aegis_realism_refuses_bad_input_in_one_line(split, tmp_path):
    real = real_dir_of(tmp_path, split, "low_light_s1")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("no frames")
    cases = [
        ([str(empty), "--condition", "low_light_s1", "--split-dir", str(split)], "no images in"),
        ([str(tmp_path / "missing"), "--condition", "low_light_s1", "--split-dir", str(split)], "is not a folder"),
        ([str(real), "--condition", "fog_s1", "--split-dir", str(split)], "unknown condition 'fog_s1'"),
        ([str(real), "--condition", "low_light", "--split-dir", str(split)], "unknown condition 'low_light'"),
        ([str(real), "--condition", "low_light_s3", "--split-dir", str(split)], "holds no rendering of low_light_s3"),
        ([str(real), "--condition", "low_light_s1", "--split-dir", str(split / "test")], "is not a split folder"),
        ([str(real), "--condition", "low_light_s1", "--split-dir", str(split), "--limit", "0"], "--limit"),
    ]
    for args, fragment in cases:
        assert_one_line_error(runner.invoke(app, ["realism", *args]), fragment)
