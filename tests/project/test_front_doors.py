"""aegis_data.api and aegis_eval.api are the front doors. The CLI's data and baseline
commands are parsing and printing around one API function each: the function does the work and names parameters
in its errors; the command prints the same message with the flag."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

import aegis_data as ad
import aegis_eval as ae
from aegis_cli.main import app
from aegis_data import api as data_api
from aegis_data.errors import AegisError
from aegis_data.files.imageio import write_png_atomic
from aegis_eval import api as eval_api


def _frame(tmp_path):
    y, x = np.mgrid[0:48, 0:64]
    path = tmp_path / "frame.png"
    write_png_atomic(path, np.stack([x * 3, y * 4, (x + y) * 2], axis=-1).astype(np.uint8))
    return path


def _error_line(result) -> str:
    assert result.exit_code != 0
    return result.output.strip().splitlines()[-1]


def test_the_package_roots_reexport_the_front_doors():
    for name in (
        "open_source",
        "audit_source",
        "list_suite",
        "corrupt_file",
        "grid_file",
        "calibrate",
        "realism",
        "export_hf",
        "push_hf",
        "build_splits",
        "verify_split",
        "load_split",
    ):
        assert getattr(ad, name) is getattr(data_api, name), name
    for name in (
        "predict",
        "train",
        "sweep",
        "ablate",
        "write_report",
        "write_gallery",
        "baseline_settings",
        "write_json",
    ):
        assert getattr(ae, name) is getattr(eval_api, name), name


def test_a_library_error_names_the_parameter_and_the_cli_the_flag(tmp_path):
    with pytest.raises(AegisError) as exc:
        data_api.list_suite("aegis-v1", long_side=0)
    assert exc.value.param == "long_side" and "`long_side`" in str(exc.value) and "--" not in str(exc.value)
    line = _error_line(CliRunner().invoke(app, ["list", "--suite", "aegis-v1", "--long-side", "0"]))
    assert "--long-side takes a positive number of px and applies to --scale frame only" in line

    frame = _frame(tmp_path)
    with pytest.raises(AegisError) as exc:
        data_api.corrupt_file(frame, "low_light", 2, tmp_path / "out.jpg", suite="aegis-v1")
    assert exc.value.param == "out" and str(exc.value).startswith("`out` must be a .png file")
    line = _error_line(
        CliRunner().invoke(
            app,
            [
                "corrupt",
                str(frame),
                "-c",
                "low_light",
                "-s",
                "2",
                "--suite",
                "aegis-v1",
                "-o",
                str(tmp_path / "out.jpg"),
            ],
        )
    )
    assert "--out must be a .png file (lossless)" in line


def test_a_refused_output_names_the_parameter_then_the_flag(tmp_path):
    frame = _frame(tmp_path)
    with pytest.raises(AegisError, match=r"^`out` .*frame\.png .*the input"):
        data_api.corrupt_file(frame, "low_light", 2, frame, suite="aegis-v1")
    line = _error_line(
        CliRunner().invoke(
            app, ["corrupt", str(frame), "-c", "low_light", "-s", "2", "--suite", "aegis-v1", "-o", str(frame)]
        )
    )
    assert line.startswith("error: --out ") and "the input" in line


def test_the_command_and_the_function_write_the_same_pixels(tmp_path):
    frame = _frame(tmp_path)
    done = data_api.corrupt_file(frame, "low_light", 3, tmp_path / "api.png", suite="aegis-v1")
    cli = CliRunner().invoke(
        app,
        ["corrupt", str(frame), "-c", "low_light", "-s", "3", "--suite", "aegis-v1", "-o", str(tmp_path / "cli.png")],
    )
    assert cli.exit_code == 0, cli.output
    assert f"pixel-sha256 {done.pixel_sha256}" in cli.output
    assert (tmp_path / "api.png").read_bytes() == (tmp_path / "cli.png").read_bytes()
    assert not done.unchanged and done.unchanged_reason is None
    grid = data_api.grid_file(frame, tmp_path / "grid.png", width=480, suite="aegis-v1")
    assert grid.width == 480 and grid.path.is_file()


def test_the_suite_listing_is_the_commands(tmp_path):
    import json

    cli = CliRunner().invoke(app, ["list", "--suite", "aegis-v1", "--format", "json"])
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.output) == data_api.list_suite("aegis-v1")


def test_a_baseline_without_a_model_names_the_parameter_then_the_flag(tmp_path):
    with pytest.raises(AegisError) as exc:
        eval_api.baseline_settings()
    assert exc.value.param == "model" and "pass `model` yolo11|rtdetr|fasterrcnn, or a `config`" in str(exc.value)
    line = _error_line(
        CliRunner().invoke(
            app, ["baseline", "predict", "--split-dir", str(tmp_path / "split"), "--out-dir", str(tmp_path / "preds")]
        )
    )
    assert "no model given: pass --model yolo11|rtdetr|fasterrcnn, or a --config that names one" in line
    with pytest.raises(AegisError) as exc:
        eval_api.baseline_settings(model="fasterrcnn")
    assert exc.value.param == "weights" and "pass `weights`" in str(exc.value)


def test_ablate_refuses_init_with_weights_by_parameter(tmp_path):
    with pytest.raises(AegisError) as exc:
        eval_api.ablate(
            tmp_path / "split", tmp_path / "out", "all", init=tmp_path / "best.pt", weights="w.pt", suite="aegis-v1"
        )
    assert exc.value.param == "init" and "`init`" in str(exc.value) and "`weights`" in str(exc.value)


def test_rank_merges_same_labels_of_files_only():
    doc = {"schema": "aegis-score/1"}
    with pytest.raises(AegisError) as exc:
        ae.rank([doc, doc], merge_same_label=True)
    assert exc.value.param == "merge_same_label"


def test_source_options_map_the_commands_names_onto_each_adapter():
    assert data_api.source_options("synthetic", ["n=3"], n=5, size=None) == {"n": "3"}
    assert data_api.source_options("hf", None, hf_split="validation") == {"split": "validation"}
    report = data_api.audit_source(data_api.open_source("synthetic", n=4))
    assert report["source"] and report["all"]["images"] == 4


def test_no_root_name_is_shadowed_by_a_subpackage():
    # A root export named like a subpackage (aegis_eval.report) is replaced by the module once the subpackage is
    # imported: ae.report became a module after the first report test. No export may share a subpackage's name.
    import pkgutil

    import aegis_data
    import aegis_eval
    import aegis_eval.report  # noqa: F401 (the import that used to shadow the export)

    for package in (aegis_data, aegis_eval):
        subpackages = {m.name for m in pkgutil.iter_modules(package.__path__)}
        assert not subpackages & set(package.__all__), package.__name__
        for name in package.__all__:
            assert not hasattr(getattr(package, name), "__path__"), f"{package.__name__}.{name} is a package"
