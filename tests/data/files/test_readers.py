"""The one JSON reader: parse-level refusals (over-deep nesting, numbers beyond float64, NaN/Infinity) as one
AegisError line naming the file, for every JSON input the toolkit reads."""

from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest

from aegis_data.errors import AegisError
from aegis_data.files.readers import read_coco_gt, read_json, read_yaml
from aegis_data.sources.yolo_labels import parse_yolo_labels, yolo_label_text
from aegis_data.split.manifest import load_manifest
from aegis_eval.protocols.predictions import ground_truth_from_coco, load_ground_truth, load_predictions
from aegis_eval.protocols.threshold import read_threshold_file
from aegis_eval.report.results import load_results

GT = {
    "images": [{"id": 1, "file_name": "a.png", "width": 10, "height": 10}],
    "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 1, 4, 4]}],
    "categories": [{"id": 1, "name": "person"}],
}

BAD = {
    "deep": ("[" * 200_000 + "]" * 200_000, "json_too_deep"),
    "big_int": ('{"value": ' + "1" + "0" * 400 + "}", "json_number_overflow"),
    "big_float": ('{"value": 1e400}', "json_number_overflow"),
    "big_mantissa": ('{"value": ' + "9" * 250 + "e99}", "json_number_overflow"),
    "nan": ('{"value": NaN}', "json_nonfinite"),
    "inf": ('{"value": Infinity}', "json_nonfinite"),
    "neg_inf": ('[{"image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1], "score": -Infinity}]', "json_nonfinite"),
    "huge_int": ('{"value": ' + "7" * 5000 + "}", "json_number_overflow"),  # beyond int() digit limit too
}

LOADERS = {
    "predictions": lambda p: load_predictions(p, ground_truth_from_coco(GT)),
    "score JSON": lambda p: load_results([p]),
    "threshold": read_threshold_file,
    "manifest": load_manifest,
    "ground truth": load_ground_truth,
    "COCO GT": read_coco_gt,
}


@pytest.mark.parametrize("loader", sorted(LOADERS))
@pytest.mark.parametrize("case", sorted(BAD))
def test_every_json_input_refuses_unsafe_json_in_one_line(tmp_path, loader, case):
    text, code = BAD[case]
    f = tmp_path / "input.json"
    f.write_text(text)
    with pytest.raises(AegisError) as err:
        LOADERS[loader](f)
    msg = str(err.value)
    assert code in msg and str(f) in msg and "\n" not in msg and len(msg) < 300


def test_what_is_accepted_stays_accepted(tmp_path):
    f = tmp_path / "ok.json"
    big_but_finite = "1" + "0" * 300  # 1e300 as a 301-digit integer: within float64
    f.write_text(
        '{"a": 1e-05, "b": 1.7e308, "c": '
        + big_but_finite
        + ', "d": "NaN Infinity '
        + "9" * 400
        + '", "e": -2.5E+3, "f": [[[[1]]]]}'
    )
    obj, sha = read_json(f, "test")
    assert obj["a"] == 1e-05 and obj["b"] == 1.7e308 and obj["c"] == 10**300 and obj["e"] == -2500.0
    assert obj["d"].startswith("NaN Infinity") and len(sha) == 64


def test_overflow_filter_never_misses_what_the_pattern_finds():
    """The byte filter in front of the overflow regex may pass a file the regex then rules out, but must never
    rule out a file the regex would flag (the strict number hooks would be skipped for it)."""
    from aegis_data.files.readers import _MAYBE_OVERFLOW, _may_overflow

    cases = [
        b"1e400",
        b"1E+400",
        b"2e+0308",
        b"1.8e308",
        b"-3E0999",
        b"1e+00123",
        b"9" * 200,
        b"0" * 199 + b"1",
        b"1e99",
        b"1e-400",
        b"1e+099",
        b"1e0099",
        b'"image0123.png"',
        b'"frame_000123.png"',
        b"E+",
        b"1.7e308",
    ]
    rng = np.random.default_rng(0)
    alphabet = np.frombuffer(b"0123456789eE+-.e0 ", dtype=np.uint8)
    cases += [rng.choice(alphabet, int(rng.integers(1, 12))).tobytes() for _ in range(20_000)]
    for data in cases:
        expected = _MAYBE_OVERFLOW.search(data) is not None
        assert _may_overflow(data) == expected, data


def test_reader_names_missing_directory_and_truncated_files(tmp_path):
    with pytest.raises(AegisError, match=r"\[x_not_found\] thing file not found"):
        read_json(tmp_path / "nope.json", "thing", "x_")
    with pytest.raises(AegisError, match=r"\[wrong_type\] thing path is a directory"):
        read_json(tmp_path, "thing")
    f = tmp_path / "cut.json"
    f.write_text('{"a": [1, 2')
    with pytest.raises(AegisError, match=r"not valid JSON at line 1 column \d+ \(the file looks truncated\)"):
        read_json(f, "thing")
    f.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(AegisError, match="not UTF-8"):
        read_json(f, "thing")


class OpenedFifo(Exception):
    """Raised by the alarm: not an OSError, so no reader's `except OSError` can swallow it."""


@pytest.mark.parametrize("loader", sorted(LOADERS) + ["yaml", "api score", "api freeze_threshold"])
def test_every_reader_refuses_a_fifo_before_opening_it(tmp_path, loader):
    import aegis_eval as ae

    gt = tmp_path / "gt.json"
    gt.write_text(json.dumps(GT))
    fifo = tmp_path / "clean.json"
    os.mkfifo(fifo)
    call = {
        **LOADERS,
        "yaml": lambda p: read_yaml(p, "config"),
        "api score": lambda p: ae.score({"clean": p}, gt, threshold=0.5),
        "api freeze_threshold": lambda p: ae.freeze_threshold(p, gt),
    }[loader]

    def opened(signum, frame):  # open() on a FIFO with no writer blocks: the refusal must come first
        raise OpenedFifo(f"{loader} opened the FIFO instead of refusing it")

    previous = signal.signal(signal.SIGALRM, opened)
    signal.alarm(30)
    try:
        with pytest.raises(AegisError, match=r"wrong_type\] .* is not a regular file \(a FIFO"):
            call(fifo)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_yaml_reader(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("a: [1, 2\n")
    with pytest.raises(AegisError, match=r"c.yaml: not valid YAML"):
        read_yaml(f, "config")
    f.write_text("a: 1\n")
    assert read_yaml(f, "config") == ({"a": 1}, b"a: 1\n")
    with pytest.raises(AegisError, match=r"config file not found"):
        read_yaml(tmp_path / "none.yaml", "config")


def test_coco_gt_reader_refuses_non_coco(tmp_path):
    f = tmp_path / "gt.json"
    f.write_text(json.dumps([1, 2]))
    with pytest.raises(AegisError, match=r"\[gt_wrong_type\]"):
        read_coco_gt(f)
    f.write_text(json.dumps(GT))
    coco, sha = read_coco_gt(f)
    assert coco == GT and len(sha) == 64


_IMAGES = [{"id": 1, "file_name": "a.png", "width": 10, "height": 10}]
_PERSON = {"id": 1, "name": "person"}


@pytest.mark.parametrize(
    "annotation, message",
    [
        ("not an object", r"annotations\[0\] must be an object with a known 'image_id'"),
        ({"image_id": 9, "bbox": [0, 0, 1, 1], "category_id": 1}, r"annotations\[0\] must be an object with a known"),
        ({"image_id": 1, "bbox": [0, 0, 1], "category_id": 1}, r"a 4-number 'bbox'"),
        (
            {"image_id": 1, "bbox": [0, 0, 1, "1"], "category_id": 1},
            r"annotations\[0\]: bbox value '1' is not a number",
        ),
    ],
)
def test_split_reader_and_verify_read_coco_annotations_alike(tmp_path, annotation, message):
    from aegis_data.files.readers import coco_person_boxes
    from aegis_data.split.verify import gt_digests

    coco = {"images": _IMAGES, "annotations": [annotation], "categories": [_PERSON]}
    f = tmp_path / "gt.json"
    f.write_text(json.dumps(coco))
    for read in (lambda: coco_person_boxes(coco, f), lambda: gt_digests(f)):
        with pytest.raises(AegisError, match=message):
            read()


def test_person_boxes_skip_other_categories_before_reading_their_boxes(tmp_path):
    from aegis_data.files.readers import coco_person_boxes
    from aegis_data.split.verify import gt_digests

    car = {"image_id": 1, "bbox": [0, 0, 1, "x"], "category_id": 2}
    coco = {
        "images": _IMAGES,
        "annotations": [{"image_id": 1, "bbox": [1, 2, 3, 4], "category_id": 1}, car],
        "categories": [_PERSON, {"id": 2, "name": "car"}],
    }
    assert coco_person_boxes(coco, "gt.json") == {1: [[1.0, 2.0, 3.0, 4.0]]}
    f = tmp_path / "gt.json"
    f.write_text(json.dumps(coco))
    with pytest.raises(AegisError, match=r"annotations\[1\]: bbox value 'x'"):
        gt_digests(f)  # verify digests every annotation the scorer could read


def test_yolo_labels_round_trip():
    boxes = [(1.0, 2.0, 11.0, 22.0), (0.0, 0.0, 40.0, 30.0)]
    text = yolo_label_text(boxes, 40, 30)
    assert text == "0 0.150000 0.400000 0.250000 0.666667\n0 0.500000 0.500000 1.000000 1.000000\n"
    back = [b for b, _ in parse_yolo_labels(text, 40, 30, "x.txt")]
    assert np.allclose(back, boxes, atol=1e-4)
    assert yolo_label_text([], 40, 30) == ""
    with pytest.raises(AegisError, match=r"x.txt:1: expected 5 values"):
        parse_yolo_labels("0 1 2\n", 40, 30, "x.txt")


@pytest.mark.parametrize("bad", ["nan", True, "1", None, 10**400])
def test_coco_boxes_for_training_export_and_verify_are_plain_finite_numbers(bad):
    from aegis_data.files.readers import coco_boxes_by_stem

    coco = {
        "images": [{"id": 1, "file_name": "a.png"}],
        "categories": [{"id": 1, "name": "person"}],
        "annotations": [{"image_id": 1, "category_id": 1, "bbox": [1, bad, 3, 4]}],
    }
    with pytest.raises(AegisError, match="bbox value"):
        coco_boxes_by_stem(coco, "gt.json")
    coco["annotations"][0]["bbox"] = [1, 2, 3, 4]
    assert coco_boxes_by_stem(coco, "gt.json") == {"a": [[1.0, 2.0, 3.0, 4.0]]}
