"""docs/API.md is a contract: every Python block runs as written, in order, in an empty folder; and the two
public imports stay light (no torch, Dask, matplotlib or cv2 until a function needs them)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from aegis_cli.main import app
from tests import REPO_ROOT

ROOT = REPO_ROOT
DOC = ROOT / "docs" / "API.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def test_every_block_of_the_api_doc_runs(tmp_path, monkeypatch, capsys):
    blocks = _blocks()
    assert len(blocks) >= 8  # import, corrupt, build, verify, load, augment, freeze, score, rank
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "api_doc"}
    for k, block in enumerate(blocks):
        try:
            exec(compile(block, f"{DOC.name}[block {k}]", "exec"), namespace)
        except Exception as exc:  # noqa: BLE001 - the failing block is the message
            pytest.fail(f"docs/API.md block {k} failed: {type(exc).__name__}: {exc}\n{block}")
    # What the blocks produced is real: a verified split, a threshold file, two scores and a ranking.
    assert (tmp_path / "bench" / "manifest.json").is_file() and (tmp_path / "threshold.json").is_file()
    result = namespace["result"]
    assert result.conditions["clean"].recall > result.conditions["low_light_s3"].recall
    assert namespace["ranking"]["models"] == ["model_a", "model_b"]
    # The API writes what the command writes, byte for byte: the same predictions as files, scored both ways.
    folder = tmp_path / "preds"
    folder.mkdir()
    for cond, preds in namespace["predictions"].items():
        (folder / f"{cond}.json").write_text(json.dumps(preds))
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # one timestamp for both
    api = namespace["ae"].score("preds", "bench", threshold_file="threshold.json", bootstrap=200, label="model_a")
    cli = CliRunner().invoke(
        app,
        [
            "score",
            "preds",
            "--split-dir",
            "bench",
            "--threshold-file",
            "threshold.json",
            "--bootstrap",
            "200",
            "--label",
            "model_a",
            "--json",
            "cli.json",
        ],
    )
    assert cli.exit_code == 0, cli.output
    assert api.to_bytes() == (tmp_path / "cli.json").read_bytes()
    assert api.document["conditions"] == result.document["conditions"]  # files and lists in memory score alike


def test_public_names_resolve_and_are_listed():
    import aegis_data
    import aegis_eval

    for module in (aegis_data, aegis_eval):
        for name in module.__all__:
            assert getattr(module, name) is not None, name
            assert name in dir(module)
        with pytest.raises(AttributeError):
            module.no_such_name  # noqa: B018 (the access is what raises)
    for name in (
        "apply_corruption",
        "corruption_names",
        "load_config",
        "load_source",
        "build_splits",
        "verify_split",
        "load_split",
        "DisasterAugment",
    ):
        assert name in aegis_data.__all__
    for name in ("score", "freeze_threshold", "rank", "gt_diff", "score_referring"):
        assert name in aegis_eval.__all__


def test_importing_the_api_is_light():
    code = (
        "import sys, aegis_data, aegis_eval; heavy = [m for m in ('torch', 'dask', 'matplotlib', 'cv2', "
        "'ultralytics', 'datasets', 'pycocotools') if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]", out.stdout
