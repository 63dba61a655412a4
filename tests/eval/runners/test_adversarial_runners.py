"""Adversarial repros against the runners (aegis_eval/runners), reliability round 3 (docs/SECURITY.md): a
checkpoint is data, never code, and an ablation policy name never leaves its folder. Numbers in the section titles
follow the issue that listed them; that round's split-reader and verify cases are in
tests/data/split/test_adversarial_split.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial import invoke
from tests.conftest import assert_one_line_error
from tests.eval.runners.test_runners_fixtures import make_split


# --- 1. a checkpoint is data, never code ---------------------------------------------------------------------
class _RunsCode:
    """Unpickling this runs code that creates ``marker``: what a hostile ``.pt`` does under weights_only=False."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').write('ran')",)


class _CallsAModelClass:
    """A pickle that *calls* an allow-listed model class instead of rebuilding one: DetectionModel's constructor
    evaluates the yaml's ``activation`` string, so an allow-list of classes alone would still run code."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        from ultralytics.nn.tasks import DetectionModel

        cfg = {
            "nc": 1,
            "activation": f"open({self.marker!r}, 'w').write('ran') and nn.SiLU()",
            "backbone": [[-1, 1, "Conv", [8, 3, 2]]],
            "head": [[[-1], 1, "Detect", ["nc"]]],
        }
        return DetectionModel, (cfg,)


def hostile_checkpoint(path: Path, marker: Path, payload=_RunsCode, **extra) -> Path:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model": payload(marker), "train_args": {}, **extra}, path)
    return path


@pytest.fixture(scope="module")
def tiny_split(tmp_path_factory):
    return make_split(tmp_path_factory.mktemp("split"), n_test=1, n_val=2, n_train=2, conditions=["clean"])


TRAIN_FAST = ("--model", "yolo11", "--epochs", "1", "--imgsz", "64", "--batch", "2", "--device", "cpu")


def predict_clean(split, out_dir, weights):
    """``aegis baseline predict`` of a tiny YOLO11 on the split's clean test images with ``weights``."""
    return invoke(
        "baseline", "predict", "--split-dir", split, "--out-dir", out_dir, "--model", "yolo11", "--weights", weights,
        "--imgsz", "64", "--device", "cpu", "--conditions", "clean",
    )  # fmt: skip


@pytest.mark.parametrize("payload", [_RunsCode, _CallsAModelClass])
def test_predict_with_a_hostile_checkpoint_runs_no_code(tmp_path, tiny_split, payload):
    marker = tmp_path / "ran"
    evil = hostile_checkpoint(tmp_path / "evil.pt", marker, payload)
    result = predict_clean(tiny_split, tmp_path / "o", evil)
    assert not marker.exists()
    assert_one_line_error(result, str(evil))


@pytest.mark.parametrize("case", ["activation", "layer"])
def test_a_hostile_model_yaml_runs_no_code(tmp_path, tiny_split, case, monkeypatch):
    """Ultralytics evaluates a model yaml's activation and calls any name of its tasks module as a layer."""
    import yaml

    marker = tmp_path / "ran"
    conv = [-1, 1, "Conv", [8, 3, 2]]
    cfg = {"nc": 1, "activation": "nn.SiLU()", "backbone": [conv, conv], "head": [[[-1], 1, "Detect", ["nc"]]]}
    if case == "activation":
        cfg["activation"] = f"open({str(marker)!r}, 'w').write('ran') and nn.SiLU()"
    else:  # a "layer" that is Ultralytics' own unsafe loader, pointed at a hostile checkpoint
        hostile_checkpoint(tmp_path / "evil.pt", marker)
        monkeypatch.chdir(tmp_path)  # a relative name: the yaml's argument strings go through ast.literal_eval
        cfg["backbone"][0] = [-1, 1, "torch_safe_load", ["evil.pt"]]
    evil = tmp_path / "evil.yaml"
    evil.write_text(yaml.safe_dump(cfg))
    result = predict_clean(tiny_split, tmp_path / "o", evil)
    assert not marker.exists()
    assert_one_line_error(result, str(evil), case)


def test_ablate_init_with_a_hostile_checkpoint_runs_no_code(tmp_path, tiny_split):
    marker = tmp_path / "ran"
    evil = hostile_checkpoint(tmp_path / "evil.pt", marker, epoch=-1)
    result = invoke(
        "baseline",
        "ablate",
        "--split-dir",
        tiny_split,
        "--out-dir",
        tmp_path / "a",
        "--policies",
        "all",
        "--init",
        evil,
        *TRAIN_FAST,
        "--bootstrap",
        "10",
    )
    assert not marker.exists()
    assert_one_line_error(result, str(evil))


def test_a_hostile_last_pt_planted_in_a_run_folder_runs_no_code(tmp_path, tiny_split):
    marker = tmp_path / "ran"
    run = tmp_path / "run"
    last = hostile_checkpoint(run / "train" / "weights" / "last.pt", marker)  # no epoch: looked "finished"
    result = invoke(
        "baseline", "train", "--split-dir", tiny_split, "--out-dir", run, "--weights", "yolo11n.yaml", *TRAIN_FAST
    )
    assert not marker.exists()
    assert_one_line_error(result, str(last))
    assert "already finished" not in result.output


def test_a_last_pt_without_an_epoch_is_not_a_finished_run(tmp_path, tiny_split):
    import torch

    run = tmp_path / "run"
    last = run / "train" / "weights" / "last.pt"
    last.parent.mkdir(parents=True)
    torch.save({"train_args": {}, "model": None}, last)  # loads safely, but says nothing about training
    result = invoke(
        "baseline", "train", "--split-dir", tiny_split, "--out-dir", run, "--weights", "yolo11n.yaml", *TRAIN_FAST
    )
    assert_one_line_error(result, str(last), "epoch")


@pytest.fixture(scope="module")
def interrupted_run(tmp_path_factory, tiny_split):
    """A YOLO run stopped after its first of two epochs: last.pt holds epoch 0 and the optimizer state."""
    from ultralytics.utils.callbacks import base

    from aegis_eval.runners.train import TrainSettings, train_baseline

    class Stop(Exception):
        pass

    def stop(trainer):
        raise Stop

    run = tmp_path_factory.mktemp("interrupted") / "run"
    settings = TrainSettings(model="yolo11", weights="yolo11n.yaml", epochs=2, imgsz=64, batch=2, device="cpu")
    saved = base.default_callbacks["on_fit_epoch_end"]
    base.default_callbacks["on_fit_epoch_end"] = [*saved, stop]
    try:
        with pytest.raises(Stop):
            train_baseline(settings, tiny_split, run)
    finally:
        base.default_callbacks["on_fit_epoch_end"] = saved
    return settings, run


def test_genuine_checkpoints_still_load_and_resume(tmp_path, tiny_split, interrupted_run):

    from aegis_eval.runners import load_detector
    from aegis_eval.runners.checkpoints import check_ultralytics_checkpoint
    from aegis_eval.runners.train import train_baseline

    settings, run = interrupted_run
    last = run / "train" / "weights" / "last.pt"
    assert check_ultralytics_checkpoint(last)["epoch"] == 0
    det = load_detector("yolo11", str(run / "train" / "weights" / "best.pt"), "cpu", imgsz=64)
    assert det.net.names == {0: "person"}
    resumed = train_baseline(settings, tiny_split, run)
    assert (resumed["status"], resumed["resumed"]) == ("trained", True)
    assert check_ultralytics_checkpoint(last)["epoch"] == -1  # Ultralytics' mark of a finished run
    assert train_baseline(settings, tiny_split, run)["status"] == "already finished"
    # Ultralytics wrote nowhere else: the resumed run kept its folder.
    assert sorted(p.name for p in run.iterdir()) == ["config.yaml", "data", "train"]


def test_a_checkpoint_keeping_its_loss_and_argument_namespace_loads(tmp_path):
    """What some Ultralytics checkpoints hold beside the layers: the loss object and an argument namespace."""
    import torch
    from ultralytics import YOLO
    from ultralytics.cfg import get_cfg

    from aegis_eval.runners.checkpoints import check_ultralytics_checkpoint

    model = YOLO("yolo11n.yaml").model
    model.args = get_cfg()
    model.criterion = model.init_criterion()
    torch.save({"epoch": -1, "model": model, "train_args": {}}, tmp_path / "w.pt")
    assert type(check_ultralytics_checkpoint(tmp_path / "w.pt")["model"].criterion).__name__ == "v8DetectionLoss"


# --- 2. a name that becomes a path stays in its folder ---------------------------------------------------------
FRCNN_FAST = (
    "--model",
    "fasterrcnn",
    "--weights",
    "none",
    "--arch",
    "mobilenet_v3",
    "--epochs",
    "1",
    "--imgsz",
    "64",
    "--batch",
    "2",
    "--device",
    "cpu",
    "--bootstrap",
    "10",
)


@pytest.mark.parametrize("name", ["../../escaped", "ABSOLUTE", "a/b", "..", "scores", "ablation.json"])
def test_an_ablation_policy_name_never_leaves_the_out_dir(tmp_path, tiny_split, name):
    import yaml

    name = str(tmp_path / "escaped") if name == "ABSOLUTE" else name
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({"name": name, "p_clean": 0.5, "families": "all", "severities": [1]}))
    out = tmp_path / "a" / "out"
    result = invoke(
        "baseline", "ablate", "--split-dir", tiny_split, "--out-dir", out, "--policies", policy, *FRCNN_FAST
    )
    assert_one_line_error(result, "policy name", repr(name))
    assert not (tmp_path / "escaped").exists()
    assert not out.exists()  # refused before any work


def test_run_ablation_checks_policy_names_too(tmp_path, tiny_split):
    from dataclasses import replace

    from aegis_data.augment.transform import load_policy
    from aegis_data.errors import AegisError
    from aegis_eval.runners.ablate import run_ablation
    from aegis_eval.runners.predict import PredictSettings
    from aegis_eval.runners.train import TrainSettings

    evil = replace(load_policy("all"), name="../../escaped")
    train = TrainSettings(model="fasterrcnn", weights="none", epochs=1, imgsz=64, batch=2, device="cpu")
    with pytest.raises(AegisError, match="policy name"):
        run_ablation(
            train,
            PredictSettings(model="fasterrcnn", weights="none"),
            tiny_split,
            tmp_path / "out",
            [evil],
            bootstrap=10,
        )
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "out").exists()


# --- issue 33 (found by mypy): a start point named like a keyword is still a file -------------------------------
def test_init_checkpoint_file_named_none_is_that_file(tmp_path, monkeypatch):
    """A local checkpoint called ``none`` is a file, not Faster R-CNN's random initialisation: its record names it
    (it used to resolve to no weights and end in a TypeError traceback)."""
    from aegis_data.files.imageio import file_sha256
    from aegis_eval.runners.ablate import init_record

    monkeypatch.chdir(tmp_path)
    (tmp_path / "none").write_bytes(b"a checkpoint")
    record = init_record("fasterrcnn", "none")
    assert record["path"] == str((tmp_path / "none").resolve())
    assert record["sha256"] == file_sha256(tmp_path / "none")
