"""The compiled reader of plain COCO results files (aegis_eval/protocols/_cresults.c) reads exactly the values the
JSON path reads, returns None for anything else, and scoring gives the same detections, warnings and errors with it
and without it (AEGIS_KERNELS=numpy)."""

from __future__ import annotations

import decimal
import json
import math
import random
import struct

import numpy as np
import pytest

from aegis_data.errors import AegisError
from aegis_eval.metrics.types import GroundTruth
from aegis_eval.protocols import predictions, results_file
from tests.compiled import extension

cresults, needs_compiled = extension("aegis_eval.protocols._cresults")


def _columns(text: str):
    assert cresults is not None
    out = cresults.columns(text.encode())
    if out is None:
        return None
    ids, cats = (np.frombuffer(c, np.int64) for c in out[:2])
    assert out[4] is None
    return ids, cats, np.frombuffer(out[2], np.float64).reshape(-1, 4), np.frombuffer(out[3], np.float64)


def _reference(text: str):
    """What the JSON path reads: Python's json, then the arrays of _validated_arrays."""
    obj = json.loads(text)
    ids = np.array([e["image_id"] for e in obj], np.int64)
    cats = np.array([e["category_id"] for e in obj], np.int64)
    boxes = np.array([e["bbox"] for e in obj]).astype(np.float64)
    scores = np.array([e["score"] for e in obj]).astype(np.float64)
    return ids, cats, boxes, scores


def _same(a, b) -> bool:
    return all(x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes() for x, y in zip(a, b))


def _number_texts(rng: random.Random) -> list[str]:
    """Numbers in every form a writer uses: shortest repr, 17 and 25 significant digits, exponents, integers."""
    out = []
    for _ in range(3000):
        x = rng.choice([rng.uniform(0, 4000), rng.uniform(0, 1), rng.uniform(0, 1e-3), 10 ** rng.uniform(-30, 30)])
        out += [repr(x), f"{x:.17g}", f"{x:.18g}", f"{x:.19g}", f"{x:.25g}", f"{x:.3e}", f"{x:.16E}"]
        out += [str(int(x) % 10**18), f"{x % 1:.19f}", f"{x % 1000:.19f}"]
    bits = [struct.unpack("<d", rng.randbytes(8))[0] for _ in range(3000)]
    out += [repr(abs(x)) for x in bits if x == x and 1e-300 < abs(x) < 1e300]
    out += [
        "0",
        "-0",
        "0.0",
        "-0.0",
        "1",
        "1.0",
        "1e0",
        "1E+2",
        "4.9406564584124654e-300",
        "9007199254740993",
        "123456789012345678",
        "0.30000000000000004",
        "1.7976931348623157e300",
        "2.2250738585072014e-308",
    ]
    return out


@needs_compiled
def test_numbers_read_bitwise_as_python_reads_them():
    rng = random.Random(20261202)
    texts = _number_texts(rng)
    for start in range(0, len(texts), 4):
        box = (texts[start : start + 4] + ["1", "2", "3"])[:4]
        entries = [f'{{"image_id": {k}, "category_id": 1, "bbox": [{", ".join(box)}], "score": 0.5}}' for k in range(2)]
        doc = "[" + ",".join(entries) + "]"
        got = _columns(doc)
        assert got is not None, doc
        assert _same(got, _reference(doc)), doc
    for t in texts:
        doc = f'[{{"score": {t}, "bbox": [0, 0, 1, 1], "category_id": -3, "image_id": 123456789012345678}}]'
        got = _columns(doc)
        if got is None:  # strtod reads a subnormal as out of range: the JSON path reads those
            assert abs(float(t)) < 2.3e-308, t
            continue
        assert _same(got, _reference(doc)), doc


@pytest.mark.parametrize(
    "doc",
    [
        "[]",
        '{"annotations": []}',
        '[{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5, "segmentation": []}]',
        '[{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5, "file_name": 3}]',
        '[{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5, "file_name": "a\\u0062.png"}]',
        '[{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5, "file_name": "a", "file_name": "a"}]',
        '[{"image_id": 1, "category_id": 1, "file_name": "a.png", "bbox": [1, 2, 3, 4]}]',
        '[{"image_id": "1", "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5}, '
        '{"image_id": 2, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5}]',
        '[{"image_id": 2, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5}, '
        '{"image_id": "1", "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5}]',
        '[{"image_id": "a\\u0062", "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5}]',
        '[{"image_id": "a\tb", "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5}]',
        '[{"image_id": "ab, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5}]',
        '[{"image_id": ["a"], "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5}]',
        '[{"image_id": 1.0, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5}]',
        '[{"image_id": 1, "category_id": true, "bbox": [1, 2, 3, 4], "score": 0.5}]',
        '[{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3], "score": 0.5}]',
        '[{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4, 5], "score": 0.5}]',
        '[{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": null}]',
        '[{"image_id": 1, "image_id": 2, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5}]',
        '[{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4]}]',
        '[{"image\\u005fid": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5}]',
        '[{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 1e400}]',
        '[{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": NaN}]',
        '[{"image_id": 12345678901234567890, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5}]',
        '[{"image_id": 01, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5}]',
        '[{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": .5}]',
        '[{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5},]',
        '[{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5}] x',
        '[{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5}',
        '\ufeff[{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5}]',
        "[[1, 1, [1, 2, 3, 4], 0.5]]",
    ],
)
@needs_compiled
def test_anything_but_the_plain_form_is_left_to_the_json_path(doc):
    assert cresults is not None
    assert cresults.columns(doc.encode()) is None


@needs_compiled
def test_a_string_id_with_invalid_utf8_is_left_to_the_json_path():
    assert cresults is not None
    doc = b'[{"image_id": "a\xff", "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5}]'
    assert cresults.columns(doc) is None
    for name in (b"a\xff.png", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80"):  # a surrogate, overlong, > U+10FFFF
        doc = b'[{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5, "file_name": "' + name + b'"}]'
        assert cresults.columns(doc) is None, name
    doc = '[{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5, "file_name": "日本 é.png"}]'
    assert cresults.columns(doc.encode()) is not None


@needs_compiled
def test_string_ids_read_as_distinct_names_in_order_of_first_appearance():
    """File-name stems (Ultralytics' ids for names that are not numbers): the column indexes the distinct names. Many
    names, non-ASCII ones, names that share a prefix and runs of one image exercise the table of distinct names."""
    assert cresults is not None
    rng = random.Random(7)
    pool = [f"frame_{k:05d}" for k in range(600)] + ["ZRI_2026", "zri_2026", "é", "日本", "a b", "", "1", "01"]
    keys = [rng.choice(pool) for _ in range(3000)]
    keys = [k for k in keys for _ in range(rng.randint(1, 4))]
    dets = [_det(k, score=rng.random()) for k in keys]
    dets = [{**d, "file_name": f"{d['image_id']}.jpg"} if rng.random() < 0.5 else d for d in dets]
    text = json.dumps(dets, ensure_ascii=False)
    out = cresults.columns(text.encode("utf-8"))
    assert out is not None
    ids, names = np.frombuffer(out[0], np.int64), out[4]
    assert names == list(dict.fromkeys(keys))
    assert [names[i] for i in ids.tolist()] == keys
    ref = _reference(json.dumps([{**d, "image_id": 0} for d in dets], ensure_ascii=False))
    got = (
        np.zeros(len(ids), np.int64),
        np.frombuffer(out[1], np.int64),
        np.frombuffer(out[2], np.float64).reshape(-1, 4),
        np.frombuffer(out[3], np.float64),
    )
    assert _same(got, ref)


@needs_compiled
def test_whitespace_and_key_order():
    doc = ' \n[ {"score" :0.25 ,\t"bbox":[ 1 ,2,3.5 , 4e1 ] , "category_id":1,"image_id" : 7}\r\n ]\n '
    got = _columns(doc)
    assert got is not None and _same(got, _reference(doc))


def _gt(n_images: int = 4, stems: tuple[str, ...] | None = None) -> GroundTruth:
    names = stems or tuple(f"img_{k}.png" for k in range(n_images))
    boxes = np.array([[10.0, 10.0, 20.0, 30.0], [50.0, 40.0, 8.0, 9.0]] * n_images)
    return GroundTruth(
        image_ids=np.arange(1, n_images + 1, dtype=np.int64),
        file_names=names,
        widths=np.full(n_images, 100),
        heights=np.full(n_images, 100),
        box_image=np.repeat(np.arange(n_images, dtype=np.int64), 2),
        boxes=boxes,
        areas=boxes[:, 2] * boxes[:, 3],
        iscrowd=np.zeros(2 * n_images, bool),
        ann_ids=np.arange(1, 2 * n_images + 1),
        category_ids=(1, 2),
    )


def _load_both(tmp_path, monkeypatch, results, gt):
    path = tmp_path / "clean.json"
    path.write_text(json.dumps(results))
    out = []
    for mode in ("auto", "numpy"):
        monkeypatch.setenv("AEGIS_KERNELS", mode)
        try:
            d = predictions.load_predictions(path, gt)
            out.append(("ok", d.det_image.tobytes(), d.boxes.tobytes(), d.scores.tobytes(), d.source))
        except AegisError as exc:
            out.append(("error", str(exc)))
    return out


def _det(image_id, cat=1, box=(10.0, 10.0, 20.0, 30.0), score=0.5):
    return {"image_id": image_id, "category_id": cat, "bbox": list(box), "score": score}


CASES = {
    "plain": [_det(k % 4 + 1, score=round(0.1 * k, 5)) for k in range(10)],
    "duplicates and degenerate boxes": [_det(1), _det(1), _det(2, box=(1.0, 2.0, 0.0, 5.0))],
    "zero-based categories": [_det(1, cat=0), _det(2, cat=0)],
    "another GT category dropped": [_det(1, cat=1), _det(2, cat=2)],
    "unknown category": [_det(1, cat=7)],
    "mixed 0 and 1": [_det(1, cat=0), _det(2, cat=1)],
    "unknown image id": [_det(1), _det(99), _det(98)],
    "negative width": [_det(1, box=(1.0, 2.0, -3.0, 4.0))],
    "score above 1": [_det(1, score=1.5)],
    "not the plain form": [{**_det(1), "segmentation": []}, _det(2)],
    "file_name keys": [{**_det(1), "file_name": "img_0.png"}, _det(2)],
    "Ultralytics stems": [{**_det(f"img_{k % 4}"), "file_name": f"img_{k % 4}.png"} for k in range(6)],
    "file-name stems": [_det(f"img_{k % 4}", score=round(0.1 * k, 5)) for k in range(10)],
    "numbers as strings": [_det("1"), _det("3"), _det("img_2")],
    "unknown stems": [_det("img_1"), _det("img_9"), _det("nope")],
    "stems with an unknown category": [_det("img_1", cat=7)],
    "stems and a negative width": [_det("img_1", box=(1.0, 2.0, -3.0, 4.0))],
}


@needs_compiled
@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_same_detections_warnings_and_errors_with_and_without_the_compiled_reader(case, tmp_path, monkeypatch):
    compiled, python = _load_both(tmp_path, monkeypatch, CASES[case], _gt())
    assert compiled == python


@needs_compiled
def test_ambiguous_ids_are_settled_by_the_json_path(tmp_path, monkeypatch):
    """Image id 2 is the id of one image and the numeric stem of another: only an entry's file_name settles it."""
    gt = _gt(stems=("2.png", "b.png", "c.png", "d.png"))
    results = [{**_det(2), "file_name": "2.png"}, _det(3)]
    compiled, python = _load_both(tmp_path, monkeypatch, results, gt)
    assert compiled == python and compiled[0] == "ok"
    plain = [_det(2), _det(3)]
    compiled, python = _load_both(tmp_path, monkeypatch, plain, gt)
    assert compiled == python and compiled[0] == "error" and "[image_id_ambiguous]" in compiled[1]
    compiled, python = _load_both(tmp_path, monkeypatch, [_det("b"), _det("2")], gt)  # a stem and an id
    assert compiled == python and compiled[0] == "error" and "[image_id_ambiguous]" in compiled[1]


@needs_compiled
def test_file_name_stems_are_resolved_from_the_columns(tmp_path, monkeypatch):
    """A file of stem ids is not parsed as JSON: its columns resolve (the JSON path is switched off here)."""
    path = tmp_path / "clean.json"
    path.write_text(json.dumps(CASES["file-name stems"]))
    monkeypatch.setenv("AEGIS_KERNELS", "numpy")
    python = predictions.load_predictions(path, _gt())
    monkeypatch.setenv("AEGIS_KERNELS", "auto")

    def no_json(*args, **kwargs):
        raise AssertionError("the JSON path ran")

    monkeypatch.setattr(predictions, "parse_json_bytes", no_json)
    compiled = predictions.load_predictions(path, _gt())
    assert compiled.det_image.tolist() == python.det_image.tolist() == [k % 4 for k in range(10)]
    assert compiled.source == python.source


def test_the_columns_path_is_taken(tmp_path, monkeypatch):
    """load_predictions takes the reader's columns when it gives them (here a stand-in reader, so this runs without
    a compiler too), with the JSON path's checks, warnings and source record."""
    results = CASES["duplicates and degenerate boxes"]
    ref = _reference(json.dumps(results))
    calls = []

    class StandIn:
        @staticmethod
        def columns(data):
            calls.append(len(data))
            return (*(a.tobytes() for a in ref), None)

    path = tmp_path / "clean.json"
    path.write_text(json.dumps(results))
    monkeypatch.setenv("AEGIS_KERNELS", "numpy")
    python = predictions.load_predictions(path, _gt())
    monkeypatch.setattr(results_file, "_results_reader", lambda: StandIn)
    columns = predictions.load_predictions(path, _gt())
    assert calls == [path.stat().st_size]
    assert columns.source == python.source and len(python.source["warnings"]) == 2
    for name in ("det_image", "boxes", "scores"):
        assert getattr(columns, name).tobytes() == getattr(python, name).tobytes()


def test_duplicate_count_is_exact():
    """The duplicate check's 64-bit row mixes only decide "no duplicates"; counts come from the rows themselves,
    bitwise (so 0.0 and -0.0 differ, as before)."""
    rng = np.random.default_rng(0)
    det_image = rng.integers(0, 50, 5000)
    boxes = rng.uniform(0, 100, (5000, 4))
    scores = rng.uniform(0, 1, 5000)
    for extra, expected in ((0, None), (7, 7)):
        rows = np.concatenate([np.arange(5000), rng.integers(0, 5000, extra)])
        warnings: list[str] = []
        predictions._warn_duplicates(det_image[rows], boxes[rows], scores[rows], warnings)
        assert warnings == (
            []
            if expected is None
            else [
                f"[duplicate_detection] {expected} detections repeat an "
                "identical detection (same image, box and score); kept as given"
            ]
        )
    signed = boxes[:2].copy()
    signed[1] = signed[0]
    signed[1, 0] = -0.0
    signed[0, 0] = 0.0
    warnings = []
    predictions._warn_duplicates(np.zeros(2, np.int64), signed, np.full(2, 0.5), warnings)
    assert warnings == []


@needs_compiled
def test_long_significands_read_correctly_rounded():
    """17- to 19-digit significands (beyond 2**53) take the exact-integer check of the compiled reader; each value
    must be the correctly rounded double float() gives, also next to the halfway points between two doubles."""
    rng = random.Random(34)
    texts = []
    for _ in range(40000):
        digits = rng.randint(17, 19)
        m = rng.randrange(10 ** (digits - 1), 10**digits)
        point = rng.randint(0, digits)  # where the decimal point goes: up to 19 fraction digits
        s = str(m)
        texts.append(s if point == 0 else (s[:-point] or "0") + "." + s[-point:])
    with decimal.localcontext() as exact:
        exact.prec = 800  # a midpoint of two doubles has at most ~770 digits
        for _ in range(5000):  # the 19-digit decimals just below and above the midpoint of two adjacent doubles
            x = rng.uniform(1e-3, 1e6)
            mid = (decimal.Decimal(x) + decimal.Decimal(math.nextafter(x, math.inf))) / 2
            for rounding in (decimal.ROUND_DOWN, decimal.ROUND_UP):
                step = decimal.Decimal(1).scaleb(mid.adjusted() - 18)
                texts.append(format(mid.quantize(step, rounding=rounding), "f"))
    rows = [texts[k : k + 4] for k in range(0, len(texts) - 3, 4)]
    doc = "[" + ",".join(f'{{"image_id":1,"category_id":1,"bbox":[{",".join(r)}],"score":0.5}}' for r in rows) + "]"
    got = _columns(doc)
    assert got is not None
    want = np.array([[float(t) for t in r] for r in rows])
    assert got[2].tobytes() == want.tobytes()


@needs_compiled
def test_a_gt_its_columns_cannot_settle_is_read_from_disk_once(tmp_path, monkeypatch):
    # A negative box width: the compiled reader takes the value, the column checks leave it to the per-annotation
    # ones, which parse the same bytes whole (not the file again) and name it.
    coco = {
        "images": [{"id": 1, "file_name": "a.jpg", "width": 10, "height": 10}],
        "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, -2, 2], "area": 4, "iscrowd": 0}],
        "categories": [{"id": 1, "name": "person"}],
    }
    path = tmp_path / "gt.json"
    path.write_text(json.dumps(coco))
    reads = []
    real = predictions.read_file_bytes
    monkeypatch.setattr(predictions, "read_file_bytes", lambda *a: reads.append(a) or real(*a))
    for load in (predictions.load_ground_truth, lambda p: predictions.load_ground_truth_by_class(p, "all")):
        reads.clear()
        with pytest.raises(AegisError, match=r"^\[gt_") as info:
            load(path)
        assert "gt.json" in str(info.value) and len(reads) == 1
