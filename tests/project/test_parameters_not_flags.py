"""Issue 33, parameters not flags: the library speaks Python parameters, the CLI alone speaks flags.

A library error names the parameter it is about (in backticks, and as ``AegisError.param``); the CLI prints the
same line with each parameter turned into its flag (``cli.common.flag_for``). No library string names a flag,
and a manifest records how its person unit was found in words.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from aegis_cli.common import PARAM_FLAGS, flag_for, in_flags
from aegis_cli.main import app
from aegis_data.engine.scale import resolve_scale
from aegis_data.errors import AegisError
from tests import REPO_ROOT
from tests.conftest import assert_one_line_error

ROOT = REPO_ROOT
LIBRARY = ("aegis_data", "aegis_eval")
FLAG = re.compile(r"--[A-Za-z]")
BACKTICKED = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)`")

# Strings that are not the library talking to its user, each with its reason.
NOT_OUR_FLAGS = {
    # git's own options, in the argument list provenance runs git with
    ("aegis_eval/protocols/provenance.py", "--porcelain"),
    ("aegis_eval/protocols/provenance.py", "--untracked-files=no"),
    # the YOLO data yaml of every split: its bytes are in the manifest, so changing them would move every root
    ("aegis_data/split/build.py", "  # no train split built (--with-train); clean images only"),
    # the dataset card written beside an export: a shell command for whoever downloads the parquet files
    ("aegis_data/split/export_hf.py", ".\n\nCheck a local copy with `aegis verify DIR --against manifest.json`.\n"),
}
# Parameters of Python-only entry points that no command sets, so their errors never reach the CLI: each with its
# reason. A name here is still a parameter, in backticks, with `param=`.
NO_FLAG = {
    "epoch": "DisasterAugment / DisasterAugmentV2: the training loop's epoch, set by the runner, not by a flag",
    "sample": "DisasterAugment / DisasterAugmentV2: the sample's index or id, given per call by a data loader",
    "rng": "corrupt(): the KeyedRandom stream a caller of the Python API passes",
    "confidence": "BootstrapOptions / percentile_interval: the CLI always uses the default 95% interval",
    "max_dets": "the COCO evaluator's detections per image (100), fixed by the protocol",
    "shape": "KeyedRandom's draws: the array shape a corruption asks for",
    "region": "the realism statistics' crop of a frame, a Python-only argument",
    "clusters": "the bootstrap's cluster labels, built by the scorer from `cluster_by` (one per image)",
    "predictions": "aegis score's positional PREDICTIONS argument (the CLI always passes a path)",
    "length": "tile_starts(): the frame side the runners pass",
    "boxes_xyxy": "the tiling helpers' boxes, passed by the runners",
}

runner = CliRunner()


def library_files() -> list[Path]:
    return sorted(p for pkg in LIBRARY for p in (ROOT / pkg).rglob("*.py"))


def string_constants(path: Path):
    """(line, text) of every str constant in ``path``: literals, docstrings and the literal parts of f-strings."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def test_no_library_string_names_a_cli_flag():
    found = []
    for path in library_files():
        rel = path.relative_to(ROOT).as_posix()
        for line, text in string_constants(path):
            if FLAG.search(text) and (rel, text) not in NOT_OUR_FLAGS:
                found.append(f"{rel}:{line}: {text[:80]!r}")
    assert not found, "library strings name CLI flags (name the parameter in backticks):\n" + "\n".join(found)


def test_the_flag_scan_finds_a_flag_in_each_place_a_string_can_hide(tmp_path):
    # The scan above must not pass because it cannot see: a message, an f-string part and a docstring.
    src = tmp_path / "m.py"
    src.write_text(
        '"""Doc naming ``--gt``."""\ndef f(x):\n    raise ValueError(f"--limit {x} bad" + "use --out-dir")\n'
    )
    hits = [text for _, text in string_constants(src) if FLAG.search(text)]
    assert len(hits) == 3


def cli_flags() -> set[str]:
    """Every long option of every command and subcommand of the ``aegis`` CLI."""
    flags: set[str] = set()
    todo = [typer.main.get_command(app)]
    while todo:
        cmd = todo.pop()
        todo.extend(getattr(cmd, "commands", {}).values())  # a group (Typer ships its own click: duck-typed)
        for p in cmd.params:
            if p.param_type_name == "option":
                flags.update(o for o in (*p.opts, *p.secondary_opts) if o.startswith("--"))
    return flags


def error_calls(path: Path):
    """(line, text) of the str constants inside every ``raise SomeError(...)`` of ``path``."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            for arg in node.exc.args[:1]:
                for sub in ast.walk(arg):
                    if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                        yield sub.lineno, sub.value


def test_every_parameter_a_library_error_names_is_a_cli_flag():
    # A backticked name in a message is printed by the CLI as flag_for(name): that flag must exist, or the
    # CLI user is told about an option no command has (add the flag's spelling to PARAM_FLAGS).
    flags = cli_flags()
    missing = []
    for path in library_files():
        rel = path.relative_to(ROOT).as_posix()
        for line, text in error_calls(path):
            for name in BACKTICKED.findall(text):
                if flag_for(name) not in flags and name not in NO_FLAG:
                    missing.append(f"{rel}:{line}: `{name}` -> {flag_for(name)}")
    assert not missing, "\n".join(missing)


def test_param_flags_name_real_flags_that_differ_from_the_rule():
    flags = cli_flags()
    for param, flag in PARAM_FLAGS.items():
        assert flag in flags, (param, flag)
        assert flag != "--" + param.replace("_", "-"), f"{param}: the Typer rule already gives {flag}"


def test_in_flags_turns_parameters_into_flags():
    assert (
        in_flags("`gsd_cm_per_px` or `person_px`, into `out_dir` or `out`; two `gts`")
        == "--gsd or --person-px, into --out-dir or --out; two --split-dir"
    )
    assert in_flags("`aegis verify` is a command, not a parameter") == "`aegis verify` is a command, not a parameter"


# --- each error names its parameter; the CLI prints its flag ---------------------------------------------------


def test_a_given_gsd_out_of_range_names_gsd_cm_per_px_and_the_cli_says_gsd():
    with pytest.raises(AegisError) as exc:
        resolve_scale("object", gsd_cm_per_px=1e9)
    assert exc.value.param == "gsd_cm_per_px" and str(exc.value).startswith("`gsd_cm_per_px` must lie in")
    r = runner.invoke(app, ["list", "--suite", "aegis-v2", "--scale", "object", "--gsd", "1e9"])
    assert_one_line_error(r, "--gsd must lie in")
    assert "gsd_cm_per_px" not in r.stderr


def test_an_unknown_scale_names_scale():
    with pytest.raises(AegisError) as exc:
        resolve_scale("tile")
    assert exc.value.param == "scale" and "`scale` must be one of" in str(exc.value)


def test_a_bootstrap_too_large_names_n_bootstrap_and_the_cli_says_bootstrap():
    from aegis_eval.metrics.bootstrap import BootstrapOptions

    with pytest.raises(AegisError) as exc:
        BootstrapOptions(n_bootstrap=10**9)
    assert exc.value.param == "n_bootstrap" and str(exc.value).startswith("`n_bootstrap` is at most")
    assert in_flags(str(exc.value)).startswith("--bootstrap is at most 100,000 resamples")


def test_a_build_into_a_foreign_folder_names_out_dir_and_the_cli_says_out_dir(tmp_path):
    from aegis_data.sources import load_source
    from aegis_data.split.build import build_splits

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(AegisError) as exc:
        build_splits(load_source("synthetic", n=2), foreign, workers=1, limit=1)
    assert exc.value.param == "out_dir" and "choose an empty or new `out_dir`" in str(exc.value)
    r = runner.invoke(
        app,
        [
            "build-splits",
            "--dataset",
            "synthetic",
            "--n",
            "2",
            "--out-dir",
            str(foreign),
            "--corruptions",
            "low_light",
            "--severities",
            "1",
            "--workers",
            "1",
            "--limit",
            "1",
        ],
    )
    assert_one_line_error(r, "choose an empty or new --out-dir")
    assert (foreign / "notes.txt").read_text() == "mine"


def test_too_few_gt_versions_names_gts():
    from aegis_eval.protocols.scoring import ScoreOptions
    from aegis_eval.protocols.versions import score_versions

    with pytest.raises(AegisError) as exc:
        score_versions("preds.json", ["gt.json"], ScoreOptions(threshold=0.5))
    assert exc.value.param == "gts" and "at least two `gts`" in str(exc.value)
    assert in_flags(str(exc.value)).endswith("needs at least two --split-dir; got 1")


def test_the_parameter_survives_a_worker_process_boundary():
    import pickle

    error = pickle.loads(pickle.dumps(AegisError("`workers` must be at least 1, got 0", param="workers")))
    assert error.param == "workers" and str(error) == "`workers` must be at least 1, got 0"


# --- the manifest records its basis in words -------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, basis",
    [
        (dict(person_px=33), "given person unit"),
        (dict(gsd_cm_per_px=2.5), "ground sampling distance 2.5 cm/px"),
    ],
)
def test_a_given_person_unit_is_recorded_in_words(kwargs, basis):
    scale = resolve_scale("object", **kwargs)
    assert scale.basis == basis and scale.identity()["basis"] == basis


def test_reference_manifests_record_no_flag():
    for path in sorted((ROOT / "manifests").glob("*.json")):
        scale = json.loads(path.read_text()).get("scale")
        assert scale is None or not FLAG.search(scale.get("basis", "")), path


# --- no library message names a parameter bare ---------------------------------------------------------------

# "<name> must ...", "<name> applies ...": a message that opens with a word naming the thing it checks.
OPENS_WITH_A_NAME = re.compile(r"^(?:\[\w+\] )?([a-z_][a-z0-9_]*) (?:must|applies|takes|needs|cannot)\b")


def _parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef, cls: ast.ClassDef | None) -> set[str]:
    """The names a caller gives ``fn``: its arguments, and a dataclass's fields when ``fn`` is one of its methods
    (``__post_init__``, ``validate``: they check what the caller passed to the class)."""
    a = fn.args
    names = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)} - {"self", "cls"}
    if cls is not None:
        names |= {s.target.id for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    return names


def bare_parameter_messages(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of every ``raise AegisError(...)`` whose message opens with a parameter of its function, bare
    (not in backticks)."""
    found = []

    def visit(node: ast.AST, names: set[str], cls: ast.ClassDef | None) -> None:
        if isinstance(node, ast.ClassDef):
            cls = node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = names | _parameters(node, cls)
            cls = None
        elif (
            isinstance(node, ast.Raise)
            and isinstance(node.exc, ast.Call)
            and node.exc.args
            and getattr(node.exc.func, "id", None) == "AegisError"
        ):
            message = node.exc.args[0]
            first = message.values[0] if isinstance(message, ast.JoinedStr) and message.values else message
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                m = OPENS_WITH_A_NAME.match(first.value)
                if m and m.group(1) in names:
                    found.append((node.lineno, m.group(1)))
        for child in ast.iter_child_nodes(node):
            visit(child, names, cls)

    visit(tree, set(), None)
    return found


def test_no_library_message_names_a_parameter_bare():
    # "max_det must be >= 1" reached the CLI user as is; "`max_det` must be >= 1" reaches them as --max-det.
    found = []
    for path in library_files():
        for line, name in bare_parameter_messages(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            found.append(f"{path.relative_to(ROOT).as_posix()}:{line}: {name!r} (write `{name}` and param=)")
    assert not found, "library messages name a parameter bare:\n" + "\n".join(found)


def test_the_bare_parameter_scan_sees_arguments_and_dataclass_fields():
    src = (
        "class Options:\n    n_bootstrap: int = 1\n    def __post_init__(self):\n"
        "        raise AegisError(f'n_bootstrap must be >= 1, got {self.n_bootstrap}')\n"
        "def f(max_det, iou):\n    raise AegisError(f'max_det must be >= 1, got {max_det}')\n"
        "def g(iou):\n    raise AegisError('`iou` must be in (0, 1]', param='iou')\n"
        "def h(x):\n    raise AegisError('the rule must name x')\n"
    )
    assert bare_parameter_messages(ast.parse(src)) == [(4, "n_bootstrap"), (6, "max_det")]


def _predict_max_det_0():
    from aegis_eval.runners.predict import PredictSettings

    PredictSettings(model="yolo11", weights=None, max_det=0).validate()


def _bootstrap(**kwargs):
    from aegis_eval.metrics.bootstrap import BootstrapOptions

    BootstrapOptions(**kwargs)


def _tiles_overlap_10_of_10():
    from aegis_eval.runners.tiling import tile_starts

    tile_starts(100, tile=10, overlap=10)


@pytest.mark.parametrize(
    "make, param, cli_text",
    [
        (_predict_max_det_0, "max_det", "--max-det must be >= 1, got 0"),
        (lambda: _bootstrap(n_bootstrap=0), "n_bootstrap", "--bootstrap must be an integer >= 1; got 0"),
        (lambda: _bootstrap(seed=1.5), "seed", "--seed must be an integer; got 1.5"),
        (_tiles_overlap_10_of_10, "overlap", "--overlap must be in [0, --tile 10), got 10"),
    ],
)
def test_a_converted_message_names_its_parameter_and_the_cli_prints_the_flag(make, param, cli_text):
    with pytest.raises(AegisError) as exc:
        make()
    assert exc.value.param == param and str(exc.value).startswith(f"`{param}` ")
    assert in_flags(str(exc.value)) == cli_text


def test_a_bad_seed_for_build_splits_names_seed(tmp_path):
    # build-splits takes its seed from the suite config (no flag); other commands' --seed prints as itself.
    from aegis_data.sources import load_source
    from aegis_data.split.build import build_splits

    with pytest.raises(AegisError) as exc:
        build_splits(load_source("synthetic", n=2), tmp_path / "out", workers=1, limit=1, seed=-1)
    assert exc.value.param == "seed" and str(exc.value).startswith("`seed` must be an integer in [0, 2**63)")
    assert not (tmp_path / "out").exists()
