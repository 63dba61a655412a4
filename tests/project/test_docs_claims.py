"""Claims of the docs held to the code: the verify finding table of docs/SPLITS.md, the generated part of
docs/PERFORMANCE.md, the suite each `make bench` build section is measured with, and the README's
one-image commands."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.files.imageio import write_png_atomic
from aegis_data.split import verify
from tests import REPO_ROOT

REPO = REPO_ROOT


def test_the_split_doc_lists_exactly_the_finding_kinds_verify_reports():
    doc = (REPO / "docs" / "SPLITS.md").read_text(encoding="utf-8")
    table = doc.split("| `missing` |", 1)[1].split("\n\n", 1)[0]
    documented = ["missing", *re.findall(r"^\| `([a-z-]+)` \|", table, flags=re.M)]
    assert sorted(documented) == sorted(verify.FINDING_KINDS)
    for kind in ("hardlink", "seal"):  # documented as information, never failures
        assert kind in verify.INFO_KINDS and f"| `{kind}` | **information**" in doc
    source = Path(verify.__file__).read_text(encoding="utf-8")
    used = set(re.findall(r'Finding\([^()]*?, "([a-z-]+)"', source, flags=re.S))
    assert used and used <= set(verify.FINDING_KINDS), used - set(verify.FINDING_KINDS)


def test_the_performance_page_holds_the_sections_of_docs_perf():
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import perfdoc
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    assert perfdoc.DOC.read_text(encoding="utf-8") == perfdoc.assembled(), "run benchmarks/perfdoc.py"


def test_make_bench_writes_each_build_section_with_the_suite_its_title_names():
    bench = (REPO / "benchmarks" / "bench_build.py").read_text(encoding="utf-8")
    default = re.search(r'add_argument\("--suite", default="([^"]+)"', bench).group(1)
    written = {}
    for line in (REPO / "Makefile").read_text(encoding="utf-8").splitlines():
        if "bench_build.py" in line:
            args = shlex.split(line.split("bench_build.py", 1)[1])
            opts = dict(zip(args[::2], args[1::2]))
            written[opts["--write"]] = opts.get("--suite", default)
    assert set(written) == {"docs/perf/build.md", "docs/perf/build-v2.md"}
    for path, suite in written.items():
        title = (REPO / path).read_text(encoding="utf-8").splitlines()[0]
        assert title.startswith(f"## Split build, {suite} "), (path, suite, title)


def test_the_readme_commands_on_one_frame_run_as_written(tmp_path, monkeypatch):
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    lines = [
        ln.split("#", 1)[0].strip() for ln in readme.splitlines() if re.match(r"aegis (grid|corrupt) frame\.jpg", ln)
    ]
    assert {ln.split()[1] for ln in lines} == {"grid", "corrupt"}
    y, x = np.mgrid[0:48, 0:64]
    write_png_atomic(tmp_path / "frame.jpg", np.stack([x * 3, y * 4, (x + y) * 2], axis=-1).astype(np.uint8))
    (tmp_path / "frame.txt").write_text("0 0.5 0.5 0.1 0.2\n")  # the person boxes of `grid --crop people`
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    for line in lines:
        result = runner.invoke(app, shlex.split(line)[1:])
        assert result.exit_code == 0, (line, result.output)


def test_an_aegis_v2_policy_takes_the_person_unit_from_train_boxes_else_val_boxes(tmp_path):
    """docs/MITIGATION.md, "Suites": without an object-scale manifest the runners' unit is the median sqrt(w h) of
    the split's train boxes, else of its val boxes."""
    import json

    from aegis_eval.runners.augment_hooks import training_scale

    def coco(side):
        return {
            "images": [{"id": 1, "file_name": "a.png", "width": 640, "height": 640}],
            "annotations": [
                {
                    "id": k + 1,
                    "image_id": 1,
                    "category_id": 1,
                    "bbox": [10.0 * k, 0.0, side, side],
                    "area": side * side,
                    "iscrowd": 0,
                }
                for k in range(3)
            ],
            "categories": [{"id": 1, "name": "person"}],
        }

    (tmp_path / "annotations").mkdir()
    (tmp_path / "annotations" / "val.json").write_text(json.dumps(coco(30.0)))
    only_val = training_scale(tmp_path)
    assert only_val.person_px == 30.0 and "3 val boxes" in only_val.basis
    (tmp_path / "annotations" / "train.json").write_text(json.dumps(coco(50.0)))
    assert training_scale(tmp_path).person_px == 50.0
