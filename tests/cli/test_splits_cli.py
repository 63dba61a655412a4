"""The build-splits / verify / export-hf commands: results on stdout, one-line errors, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import aegis_data.split.build as splits_mod
from aegis_cli import splits as splits_cli
from tests.conftest import assert_one_line_error as _one_line_error
from tests.data.split.test_splits_doubles import fake_corrupt, no_leak

runner = CliRunner()


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    # Only this group's commands: the test does not depend on the other groups being importable.
    a = typer.Typer(pretty_exceptions_show_locals=False)
    splits_cli.register(a)

    @a.callback()
    def _root() -> None:
        pass

    return a


@pytest.fixture
def doubles(monkeypatch):
    """The real synthetic source, with the corruption and the audit replaced (in-process, --workers 1)."""
    monkeypatch.setattr(splits_mod, "SuiteCorruptor", lambda config, scale: fake_corrupt)
    monkeypatch.setattr(splits_mod, "_default_audit", no_leak)


SMALL = ["--n", "4", "--size", "64", "--corruptions", "motion_blur", "--severities", "2", "--workers", "1"]


def test_build_verify_export_round_trip(app, doubles, tmp_path):
    out = tmp_path / "syn"
    r = runner.invoke(app, ["build-splits", "--out-dir", str(out), *SMALL])
    assert r.exit_code == 0, r.output
    m = json.loads((out / "manifest.json").read_text())
    assert m["dataset"] == "synthetic" and m["conditions"] == ["clean", "motion_blur_s2"]
    assert m["root_hash"] in " ".join(r.stdout.split()).replace(" ", "") or m["root_hash"][:20] in r.stdout
    assert sorted(p.name for p in (out / "test").iterdir()) == ["clean", "motion_blur_s2"]

    r = runner.invoke(app, ["verify", str(out), "--json", str(tmp_path / "v.json")])
    assert r.exit_code == 0, r.output
    assert "OK" in r.stdout and json.loads((tmp_path / "v.json").read_text())["ok"] is True

    victim = next((out / "test" / "motion_blur_s2").iterdir())
    victim.unlink()
    r = runner.invoke(app, ["verify", str(out), "--json", str(tmp_path / "v2.json")])
    assert r.exit_code == 1 and "missing" in r.stdout and "Traceback" not in r.output
    assert json.loads((tmp_path / "v2.json").read_text())["counts"] == {"missing": 1}

    r = runner.invoke(app, ["build-splits", "--out-dir", str(out), *SMALL])  # resumes: rewrites the one file
    assert r.exit_code == 0 and "1 / " in r.stdout
    r = runner.invoke(app, ["export-hf", str(out), "--out-dir", str(tmp_path / "hf")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "hf" / "dataset").is_dir() and (tmp_path / "hf" / "data" / "test-clean.parquet").is_file()


def test_verify_byte_only_differences_are_a_note_against_a_reference_and_fail_with_strict_bytes(app, doubles, tmp_path):
    import cv2

    from aegis_data.files.imageio import file_sha256, read_rgb
    from aegis_data.split.manifest import build_manifest, write_manifest

    out = tmp_path / "syn"
    assert runner.invoke(app, ["build-splits", "--out-dir", str(out), *SMALL]).exit_code == 0
    ref = tmp_path / "ref.json"
    ref.write_bytes((out / "manifest.json").read_bytes())
    # This copy re-encoded by another PNG encoder, its manifest sealed as that machine's build would be.
    rel = "test/motion_blur_s2/" + sorted(p.name for p in (out / "test" / "motion_blur_s2").iterdir())[0]
    rgb = read_rgb(out / rel)
    (out / rel).write_bytes(cv2.imencode(".png", rgb[:, :, ::-1].copy(), [cv2.IMWRITE_PNG_COMPRESSION, 9])[1].tobytes())
    m = json.loads((out / "manifest.json").read_text())
    m["entries"] = [dict(e, sha256=file_sha256(out / rel)) if e["path"] == rel else e for e in m["entries"]]
    fields = {k: m[k] for k in ("dataset", "source", "suite", "config_hash", "seed", "conditions", "splits", "entries")}
    write_manifest(
        out / "manifest.json", build_manifest(**fields, encoder={"name": "other", "version": "1"}, scale=m.get("scale"))
    )  # an object-scale build's unit

    r = runner.invoke(app, ["verify", str(out), "--against", str(ref)])
    assert r.exit_code == 0, r.output
    flat = " ".join(r.stdout.split())
    assert "differ in bytes only" in flat and "same root hash as the reference" in flat
    r = runner.invoke(app, ["verify", str(out), "--against", str(ref), "--strict-bytes"])
    assert r.exit_code == 1 and "bytes-only: 1" in r.stderr
    _one_line_error(runner.invoke(app, ["verify", str(out), "--strict-bytes"]), "--strict-bytes needs --against")


def test_verify_against_another_manifest(app, doubles, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert runner.invoke(app, ["build-splits", "--out-dir", str(a), *SMALL]).exit_code == 0
    assert runner.invoke(app, ["build-splits", "--out-dir", str(b), *SMALL, "--n", "6"]).exit_code == 0
    assert runner.invoke(app, ["verify", str(a), "--against", str(a / "manifest.json")]).exit_code == 0
    r = runner.invoke(app, ["verify", str(a), "--against", str(b / "manifest.json")])
    assert r.exit_code == 1 and "verify failed" in r.stderr


@pytest.mark.parametrize(
    "args, needles",
    [
        (["build-splits", "--dataset", "heridal", "--source", "/nonexistent/heridal"], ["/nonexistent/heridal"]),
        (["build-splits", "--dataset", "heridal"], ["needs a source"]),
        (["build-splits", "--dataset", "nope"], ["unknown dataset 'nope'"]),
        (["build-splits", "--corruptions", "fog", "--n", "2", "--size", "64"], ["unknown corruption 'fog'"]),
        (["build-splits", "--severities", "1,x", "--n", "2", "--size", "64"], ["--severities"]),
        (["build-splits", "--severities", "4", "--n", "2", "--size", "64"], ["subset of 1, 2, 3"]),
        (["build-splits", "--n", "2", "--size", "64", "--labels", "x"], ["unknown option 'labels'"]),
        (["build-splits", "--n", "2", "--size", "banana"], ["size='banana'"]),
        (["verify", "/nonexistent/split"], ["split directory not found"]),
        (["verify", "/nonexistent/split", "--subset"], ["--subset needs --against"]),
        (["export-hf", "/nonexistent/split", "--out-dir", "/tmp/x-never"], ["no manifest"]),
    ],
)
def test_bad_input_is_one_line(app, doubles, tmp_path, args, needles):
    r = runner.invoke(app, [*args, "--out-dir", str(tmp_path / "o")] if args[0] == "build-splits" else args)
    _one_line_error(r, *needles)


def test_wrong_layout_surfaces_the_adapter_error(app, doubles, tmp_path):
    root = tmp_path / "heridal"
    (root / "somewhere").mkdir(parents=True)
    r = runner.invoke(
        app, ["build-splits", "--dataset", "heridal", "--source", str(root), "--out-dir", str(tmp_path / "o")]
    )
    _one_line_error(r)
    assert not (tmp_path / "o").exists()


def test_refusing_another_dataset_dir_is_one_line(app, doubles, tmp_path):
    out = tmp_path / "o"
    assert runner.invoke(app, ["build-splits", "--out-dir", str(out), *SMALL]).exit_code == 0
    r = runner.invoke(app, ["build-splits", "--out-dir", str(out), *SMALL[:2], "--size", "96", *SMALL[4:]])
    _one_line_error(r, "holds a split of dataset 'synthetic'")


def test_verify_an_unfinished_build_is_one_line(app, doubles, tmp_path):
    out = tmp_path / "o"
    assert runner.invoke(app, ["build-splits", "--out-dir", str(out), *SMALL]).exit_code == 0
    (out / "manifest.json").unlink()
    _one_line_error(runner.invoke(app, ["verify", str(out)]), "not a finished build")


def test_console_script_lists_the_commands():
    exe = Path(sys.executable).with_name("aegis")
    r = subprocess.run([str(exe), "verify", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "--against" in r.stdout


def test_export_push_goes_through_hfapi(app, doubles, tmp_path, monkeypatch):
    import huggingface_hub

    calls = []

    class FakeApi:
        def create_repo(self, repo_id, **kw):
            calls.append(("create_repo", repo_id))

        def upload_folder(self, **kw):
            calls.append(("upload_folder", kw["repo_id"]))

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    out = tmp_path / "syn"
    assert runner.invoke(app, ["build-splits", "--out-dir", str(out), *SMALL]).exit_code == 0
    r = runner.invoke(app, ["export-hf", str(out), "--out-dir", str(tmp_path / "hf"), "--push", "me/syn-c"])
    assert r.exit_code == 0, r.output
    assert calls == [("create_repo", "me/syn-c"), ("upload_folder", "me/syn-c")]
    assert "https://huggingface.co/datasets/me/syn-c" in r.stdout


def _heridal_tree(root: Path, value: int = 90) -> Path:
    """A tiny HERIDAL-like source: JPEG frames with VOC XML beside them."""
    import cv2
    import numpy as np

    for k, (folder, names) in enumerate(
        (("trainImages", ["tr_0", "tr_1", "tr_2", "tr_3"]), ("testImages", ["te_0", "te_1"]))
    ):
        for i, name in enumerate(names):
            (root / folder).mkdir(parents=True, exist_ok=True)
            img = np.full((48, 64, 3), value + 10 * i + 50 * k, np.uint8)  # all frames distinct (the audit checks)
            img[:24, :32] = (value + 60 + i) % 256
            assert cv2.imwrite(str(root / folder / f"{name}.jpg"), img)
            box = "<bndbox><xmin>10</xmin><xmax>20</xmax><ymin>5</ymin><ymax>25</ymax></bndbox>"
            (root / folder / f"{name}.xml").write_text(
                f"<annotation><size><width>64</width><height>48</height></size>"
                f"<object><name>human</name>{box}</object></annotation>"
            )
    return root


def test_heridal_like_source_end_to_end_and_a_source_decode_difference(app, tmp_path):
    import cv2

    src = _heridal_tree(tmp_path / "HERIDAL")
    args = [
        "--dataset",
        "heridal",
        "--source",
        str(src),
        "--corruptions",
        "smoke_haze",
        "--severities",
        "1",
        "--workers",
        "2",
    ]
    r = runner.invoke(app, ["build-splits", *args, "--out-dir", str(tmp_path / "a")])
    assert r.exit_code == 0, r.output
    assert runner.invoke(app, ["verify", str(tmp_path / "a")]).exit_code == 0
    # Another machine whose JPEG decoder gives other pixels for te_1: simulated by re-encoding that source.
    img = cv2.imread(str(src / "testImages" / "te_1.jpg"))
    assert cv2.imwrite(str(src / "testImages" / "te_1.jpg"), img, [cv2.IMWRITE_JPEG_QUALITY, 60])
    r = runner.invoke(app, ["build-splits", *args, "--out-dir", str(tmp_path / "b")])
    assert r.exit_code == 0, r.output
    r = runner.invoke(
        app,
        [
            "verify",
            str(tmp_path / "b"),
            "--against",
            str(tmp_path / "a" / "manifest.json"),
            "--json",
            str(tmp_path / "v.json"),
        ],
    )
    assert r.exit_code == 1
    report = json.loads((tmp_path / "v.json").read_text())
    kinds = {f["path"]: f["kind"] for f in report["findings"]}
    assert kinds == {"test/clean/te_1.png": "source", "test/smoke_haze_s1/te_1.png": "pixels"}
