"""Reliability round 3, part A: what a received file may make the toolkit do (docs/SECURITY.md).

Checkpoints run no code, names from files or options never leave their folder, verify's ground-truth identity
covers every field the scorer reads, and metadata a reader applies is a format finding. Numbers in the section
titles follow the issue that listed them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error
from tests.adversarial import build_yolo, invoke, write_png, yolo_source
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

        cfg = {"nc": 1, "activation": f"open({self.marker!r}, 'w').write('ran') and nn.SiLU()",
               "backbone": [[-1, 1, "Conv", [8, 3, 2]]], "head": [[[-1], 1, "Detect", ["nc"]]]}
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


@pytest.mark.parametrize("payload", [_RunsCode, _CallsAModelClass])
def test_predict_with_a_hostile_checkpoint_runs_no_code(tmp_path, tiny_split, payload):
    marker = tmp_path / "ran"
    evil = hostile_checkpoint(tmp_path / "evil.pt", marker, payload)
    result = invoke("baseline", "predict", "--split-dir", tiny_split, "--out-dir", tmp_path / "o", "--model",
                    "yolo11", "--weights", evil, "--imgsz", "64", "--device", "cpu", "--conditions", "clean")
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
    result = invoke("baseline", "predict", "--split-dir", tiny_split, "--out-dir", tmp_path / "o", "--model",
                    "yolo11", "--weights", evil, "--imgsz", "64", "--device", "cpu", "--conditions", "clean")
    assert not marker.exists()
    assert_one_line_error(result, str(evil), case)


def test_ablate_init_with_a_hostile_checkpoint_runs_no_code(tmp_path, tiny_split):
    marker = tmp_path / "ran"
    evil = hostile_checkpoint(tmp_path / "evil.pt", marker, epoch=-1)
    result = invoke("baseline", "ablate", "--split-dir", tiny_split, "--out-dir", tmp_path / "a", "--policies",
                    "all", "--init", evil, *TRAIN_FAST, "--bootstrap", "10")
    assert not marker.exists()
    assert_one_line_error(result, str(evil))


def test_a_hostile_last_pt_planted_in_a_run_folder_runs_no_code(tmp_path, tiny_split):
    marker = tmp_path / "ran"
    run = tmp_path / "run"
    last = hostile_checkpoint(run / "train" / "weights" / "last.pt", marker)  # no epoch: looked "finished"
    result = invoke("baseline", "train", "--split-dir", tiny_split, "--out-dir", run, "--weights", "yolo11n.yaml",
                    *TRAIN_FAST)
    assert not marker.exists()
    assert_one_line_error(result, str(last))
    assert "already finished" not in result.output


def test_a_last_pt_without_an_epoch_is_not_a_finished_run(tmp_path, tiny_split):
    import torch

    run = tmp_path / "run"
    last = run / "train" / "weights" / "last.pt"
    last.parent.mkdir(parents=True)
    torch.save({"train_args": {}, "model": None}, last)  # loads safely, but says nothing about training
    result = invoke("baseline", "train", "--split-dir", tiny_split, "--out-dir", run, "--weights", "yolo11n.yaml",
                    *TRAIN_FAST)
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
    import torch

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
FRCNN_FAST = ("--model", "fasterrcnn", "--weights", "none", "--arch", "mobilenet_v3", "--epochs", "1", "--imgsz",
              "64", "--batch", "2", "--device", "cpu", "--bootstrap", "10")


@pytest.mark.parametrize("name", ["../../escaped", "ABSOLUTE", "a/b", "..", "scores", "ablation.json"])
def test_an_ablation_policy_name_never_leaves_the_out_dir(tmp_path, tiny_split, name):
    import yaml

    name = str(tmp_path / "escaped") if name == "ABSOLUTE" else name
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({"name": name, "p_clean": 0.5, "families": "all", "severities": [1]}))
    out = tmp_path / "a" / "out"
    result = invoke("baseline", "ablate", "--split-dir", tiny_split, "--out-dir", out, "--policies", policy,
                    *FRCNN_FAST)
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
        run_ablation(train, PredictSettings(model="fasterrcnn", weights="none"), tiny_split, tmp_path / "out",
                     [evil], bootstrap=10)
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "out").exists()


# --- 3. a ground-truth file name or stem stays in its folder --------------------------------------------------
@pytest.fixture(scope="module")
def built_split(tmp_path_factory) -> Path:
    """A tiny split built by the toolkit (YOLO source, one corrupted condition): copy it before editing."""
    out = tmp_path_factory.mktemp("built") / "split"
    build_yolo(yolo_source(tmp_path_factory.mktemp("src")), out)
    return out


@pytest.fixture
def split_copy(built_split, tmp_path) -> Path:
    import shutil

    dst = tmp_path / "deep" / "er" / "split"
    shutil.copytree(built_split, dst, symlinks=True)
    return dst


def edit_gt(split: Path, edit, name: str = "test") -> dict:
    path = split / "annotations" / f"{name}.json"
    gt = json.loads(path.read_text())
    edit(gt)
    path.write_text(json.dumps(gt))
    return gt


def point_outside(split: Path, field: str) -> Path:
    """Aim the first test image's ``field`` at a PNG planted outside the split; return that PNG."""
    outside = write_png(split.parent.parent / "outside.png", seed=9)  # split/test/clean/../../../../outside.png

    def edit(gt):
        im = gt["images"][0]
        if field == "stem":
            im["stem"] = "../../../../outside"
        else:
            im["file_name"] = "../../../../outside.png"
            im.pop("stem", None)
    edit_gt(split, edit)
    return outside


@pytest.mark.parametrize("field", ["stem", "file_name"])
def test_load_split_images_stay_inside_the_split(split_copy, field):
    from aegis_data.errors import AegisError
    from aegis_data.split.reader import load_split

    point_outside(split_copy, field)
    with pytest.raises(AegisError, match=field):
        list(load_split(split_copy).images("clean"))


def test_baseline_predict_reads_no_frame_outside_the_split(split_copy, tmp_path):
    point_outside(split_copy, "file_name")
    result = invoke("baseline", "predict", "--split-dir", split_copy, "--out-dir", tmp_path / "p", "--model",
                    "fasterrcnn", "--weights", "none", "--arch", "mobilenet_v3", "--imgsz", "64", "--device", "cpu",
                    "--conditions", "clean")
    assert_one_line_error(result, "file_name", "outside")


def test_gallery_reads_no_frame_outside_the_split(split_copy, tmp_path):
    point_outside(split_copy, "file_name")
    gt = json.loads((split_copy / "annotations" / "test.json").read_text())
    found = [{"image_id": a["image_id"], "category_id": a["category_id"], "bbox": a["bbox"], "score": 0.9}
             for a in gt["annotations"]]
    preds = tmp_path / "preds"
    preds.mkdir()
    (preds / "clean.json").write_text(json.dumps(found))
    (preds / "low_light_s1.json").write_text("[]")  # every image loses its person: every image is drawn
    result = invoke("gallery", preds, "--split-dir", split_copy, "--out-dir", tmp_path / "g",
                    "--threshold", "0.5")
    assert_one_line_error(result, "file_name", "outside")


@pytest.mark.parametrize("stem", [[1], {"a": 1}, 7, "", "a/b", ".."])
def test_verify_of_a_gt_stem_that_is_no_name_is_a_finding(split_copy, stem):
    def edit(gt):
        gt["images"][0]["stem"] = stem
    edit_gt(split_copy, edit)
    result = invoke("verify", split_copy)
    assert result.exit_code == 1 and result.exception is None or isinstance(result.exception, SystemExit), \
        result.exception
    assert "Traceback" not in result.output
    assert "annotations/test.json" in result.output and "not a plain file name" in result.output, result.output


# --- 4. verify's GT identity covers every image field the scorer reads ----------------------------------------
def reseal(split: Path, gt_map_edit=None) -> None:
    """Rewrite the local manifest over the edited GT file as an attacker would: new file hash, the GT map edited
    (``gt_map_edit``), both hashes recomputed, so the split verifies against its own manifest."""
    import hashlib

    from aegis_data.split.manifest import files_hash, root_hash, sealed_header

    m = json.loads((split / "manifest.json").read_text())
    entry = next(e for e in m["entries"] if e["path"] == "annotations/test.json")
    entry["sha256"] = hashlib.sha256((split / "annotations" / "test.json").read_bytes()).hexdigest()
    if gt_map_edit is not None:
        gt_map_edit(entry["gt"])
    m["root_hash"] = root_hash(m, m["entries"])
    m["files_hash"] = files_hash(m["root_hash"], m["encoder"], m["entries"], sealed_header(m))
    (split / "manifest.json").write_text(json.dumps(m))


def swap_file_names(gt):
    a, b = gt["images"][0], gt["images"][1]
    a["file_name"], b["file_name"] = b["file_name"], a["file_name"]


def shrink_to_one_pixel(gt):
    gt["images"][0]["width"] = gt["images"][0]["height"] = 1


def drop_image(gt):
    gone = gt["images"].pop()
    gt["annotations"] = [a for a in gt["annotations"] if a["image_id"] != gone["id"]]


def drop_boxes(gt):
    gt["annotations"] = [a for a in gt["annotations"] if a["image_id"] != gt["images"][-1]["id"]]


GT_EDITS = {  # edit, the GT-map edit that goes with it, what the finding names
    "swapped file names": (swap_file_names, None, "file_name"),
    "size set to 1x1": (shrink_to_one_pixel, None, "width"),
    "image deleted, stem dropped": (drop_image, lambda gt_map: gt_map.pop("f2"), "f2"),
    "boxes deleted, stem dropped": (drop_boxes, lambda gt_map: gt_map.pop("f2"), "f2"),
}


@pytest.mark.parametrize("case", list(GT_EDITS))
def test_a_resealed_gt_edit_fails_verify_against_the_reference(split_copy, tmp_path, case):
    import shutil

    edit, gt_map_edit, named = GT_EDITS[case]
    ref = tmp_path / "reference.json"
    shutil.copyfile(split_copy / "manifest.json", ref)
    edit_gt(split_copy, edit)
    reseal(split_copy, gt_map_edit)
    for subset in ([], ["--subset"]):
        report = tmp_path / "v.json"
        r = invoke("verify", split_copy, "--against", ref, *subset, "--json", report)
        assert r.exit_code == 1, (subset, r.output)
        found = [f for f in json.loads(report.read_text())["findings"] if f["failure"]]
        assert any(f["path"] == "annotations/test.json" and named in f["detail"] for f in found), (subset, found)
        assert not any("is identical" in f["detail"] for f in found), found


def test_plain_verify_names_the_image_fields_that_changed(split_copy, tmp_path):
    edit_gt(split_copy, swap_file_names)
    report = tmp_path / "v.json"
    assert invoke("verify", split_copy, "--json", report).exit_code == 1
    (finding,) = json.loads(report.read_text())["findings"]
    assert "file_name 'f1.png'" in finding["detail"] and "is identical" not in finding["detail"], finding


def test_formatting_only_gt_changes_still_say_so(split_copy, tmp_path):
    path = split_copy / "annotations" / "test.json"
    path.write_text(json.dumps(json.loads(path.read_text()), indent=4))
    report = tmp_path / "v.json"
    assert invoke("verify", split_copy, "--json", report).exit_code == 1
    (finding,) = json.loads(report.read_text())["findings"]
    assert "is identical" in finding["detail"] and "file name" in finding["detail"], finding


# --- 5. (from 11) orientation carried in PNG text chunks is a format finding -----------------------------------
def _chunk(name: bytes, body: bytes) -> bytes:
    import zlib

    return len(body).to_bytes(4, "big") + name + body + zlib.crc32(name + body).to_bytes(4, "big")


def _exif_rotate_90() -> bytes:
    """A little-endian TIFF header with one IFD entry: Orientation (0x0112) = 6, 'rotate 90 clockwise'."""
    return b"II*\x00" + (8).to_bytes(4, "little") + (1).to_bytes(2, "little") + bytes.fromhex("1201") + \
        (3).to_bytes(2, "little") + (1).to_bytes(4, "little") + (6).to_bytes(2, "little") + b"\x00\x00" + bytes(4)


def _raw_profile(exif: bytes) -> bytes:
    """ImageMagick's text form of an EXIF block, which Pillow reads as the image's EXIF."""
    return f"\nexif\n{len(exif):8d}\n".encode() + exif.hex().encode() + b"\n"


def _xmp(orientation: bool) -> bytes:
    extra = ' tiff:Orientation="6"' if orientation else ""
    return (f'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
            f'<rdf:Description xmlns:tiff="http://ns.adobe.com/tiff/1.0/"{extra}/></rdf:RDF></x:xmpmeta>').encode()


def _text_chunk(kind: str, keyword: bytes, text: bytes) -> bytes:
    import zlib

    if kind == "tEXt":
        return _chunk(b"tEXt", keyword + b"\x00" + text)
    if kind == "zTXt":
        return _chunk(b"zTXt", keyword + b"\x00\x00" + zlib.compress(text))
    return _chunk(b"iTXt", keyword + b"\x00\x01\x00\x00\x00" + zlib.compress(text))  # compressed, no language


ORIENTING_CHUNKS = {
    "exif profile in tEXt": ("tEXt", b"Raw profile type exif", _raw_profile(_exif_rotate_90())),
    "exif profile in zTXt": ("zTXt", b"Raw profile type exif", _raw_profile(_exif_rotate_90())),
    "xmp orientation in iTXt": ("iTXt", b"XML:com.adobe.xmp", _xmp(True)),
    "xmp orientation in tEXt": ("tEXt", b"XML:com.adobe.xmp", _xmp(True)),
}


def with_chunk(png: Path, chunk: bytes) -> None:
    data = png.read_bytes()
    at = 8 + 12 + int.from_bytes(data[8:12], "big")  # after IHDR
    png.write_bytes(data[:at] + chunk + data[at:])


@pytest.mark.parametrize("case", list(ORIENTING_CHUNKS))
def test_orientation_in_a_png_text_chunk_is_a_format_finding(split_copy, tmp_path, case):
    import shutil

    from PIL import Image, ImageOps

    ref = tmp_path / "reference.json"
    shutil.copyfile(split_copy / "manifest.json", ref)
    png = split_copy / "test" / "clean" / "f0.png"
    with_chunk(png, _text_chunk(*ORIENTING_CHUNKS[case]))
    with Image.open(png) as im:  # what torchvision's Pillow loaders and exif_transpose users see: rotated
        assert ImageOps.exif_transpose(im).size == im.size[::-1]
    report = tmp_path / "v.json"
    r = invoke("verify", split_copy, "--against", ref, "--json", report)
    assert r.exit_code == 1, r.output
    (finding,) = json.loads(report.read_text())["findings"]
    assert (finding["path"], finding["kind"], finding["failure"]) == ("test/clean/f0.png", "format", True)
    assert "orientation" in finding["detail"], finding


def test_text_metadata_without_orientation_stays_bytes_only(split_copy, tmp_path):
    import shutil

    ref = tmp_path / "reference.json"
    shutil.copyfile(split_copy / "manifest.json", ref)
    png = split_copy / "test" / "clean" / "f0.png"
    with_chunk(png, _text_chunk("iTXt", b"XML:com.adobe.xmp", _xmp(False)))
    with_chunk(png, _text_chunk("tEXt", b"Software", b"another encoder"))
    report = tmp_path / "v.json"
    assert invoke("verify", split_copy, "--against", ref, "--json", report).exit_code == 0
    (finding,) = json.loads(report.read_text())["findings"]
    assert (finding["kind"], finding["failure"]) == ("bytes-only", False)
