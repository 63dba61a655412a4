"""A plain `aegis score` line loads what it needs when it needs it: never Typer (nor pydantic) on success, Rich only
once the score is written, to draw its tables on a terminal (never for a pipe), and the predictions file read on a
thread started before NumPy is imported (cli/score_run.py, aegis_eval/protocols/results_file.py), and the cycle
collector not walking the process's long-lived objects again and again (cli/main.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cli.test_cli_scoring import gt_doc, preds_doc

# Runs `aegis score` in a fresh interpreter. An audit hook notes which of the watched modules are loaded when the
# score JSON is put in place (the atomic write's rename), and which read-ahead threads had started when NumPy began
# to import; a gc callback counts the collector's passes while main() runs. The last line is a JSON record of these,
# of the modules loaded at the end and of the objects frozen out of the exit's last collection.
PROBE = """
import json, sys
WATCHED = ("typer", "rich", "pydantic", "numpy")
seen = {}
json_out = sys.argv[-1]

def hook(event, args):
    if event in ("os.rename", "os.replace") and str(args[1]) == json_out and "json_written" not in seen:
        seen["json_written"] = sorted(m for m in WATCHED if m in sys.modules)
    if event == "import" and args[0] == "numpy" and "numpy_import" not in seen:
        reads = getattr(sys.modules.get("aegis_eval.protocols.results_file"), "_AHEAD", {})
        seen["numpy_import"] = sorted(job.name for job in reads.values() if job.ident is not None)

sys.addaudithook(hook)
sys.argv = ["aegis", *sys.argv[1:]]
from aegis_cli.main import main
import gc
collections = []
gc.callbacks.append(lambda phase, info: collections.append(info["generation"]) if phase == "start" else None)
try:
    main()
except SystemExit as exc:
    seen["exit"] = exc.code
seen["end"] = sorted(m for m in WATCHED if m in sys.modules)
seen["collections"] = len(collections)
seen["frozen"] = gc.get_freeze_count()
print(json.dumps(seen))
"""


def _probe(tmp_path: Path, *argv: str) -> dict:
    env = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, cwd=tmp_path, env=env, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_plain_score_into_a_pipe_loads_neither_rich_nor_typer(tmp_path):
    (tmp_path / "gt.json").write_text(json.dumps(gt_doc(6)))
    (tmp_path / "clean.json").write_text(json.dumps(preds_doc(6, 5)))
    out = tmp_path / "out.json"
    seen = _probe(
        tmp_path,
        "score",
        "clean.json",
        "--split-dir",
        "gt.json",
        "--threshold",
        "0.5",
        "--bootstrap",
        "1",
        "--json",
        str(out),
    )
    assert out.is_file() and "exit" not in seen, seen
    assert seen["json_written"] == ["numpy"], seen  # the score is done and written: no Typer, no Rich yet
    # the tables went to a pipe: cli/plain_tables.py drew them, so Rich was never needed
    assert seen["end"] == ["numpy"], seen
    # the predictions file's read was started on a thread before NumPy began to import
    assert seen["numpy_import"] == ["read-ahead clean.json"], seen
    # the collector does not walk the imported modules and the parsed inputs over and over (~60 passes by default),
    # nor all of them once more as the process ends
    assert seen["collections"] <= 1 and seen["frozen"] > 10_000, seen
