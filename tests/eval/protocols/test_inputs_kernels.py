"""The compiled conversions of parsed inputs (aegis_eval/protocols/_cinputs.c) give exactly what their Python twins
give (the GT's annotation columns, the duplicate-detection count) on random and adversarial inputs, and loading a
GT or a results file gives the same arrays, warnings and errors with them and without them (AEGIS_KERNELS=numpy)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from aegis_data.errors import AegisError
from aegis_eval.protocols import predictions
from tests.compiled import extension

cinputs, needs_compiled = extension("aegis_eval.protocols._cinputs")


def _compiled_columns(anns, keep, default_cat):
    assert cinputs is not None
    raw = cinputs.gt_columns(anns, tuple(sorted(keep)), default_cat)
    if raw is None:
        return None
    kept, cats, keys = (np.frombuffer(b, np.int64) for b in raw[:3])
    return (
        kept,
        cats,
        keys,
        np.frombuffer(raw[3], np.float64).reshape(-1, 4),
        np.frombuffer(raw[4], np.float64),
        np.frombuffer(raw[5], np.uint8).astype(bool),
        np.frombuffer(raw[6], np.int64),
    )


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return all(x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes() for x, y in zip(a, b))


_ODD_VALUES = [
    True,
    False,
    None,
    "1",
    1.0,
    -0.0,
    2**63,
    -(2**63),
    2**63 - 1,
    2**64 + 1,
    10**400,
    2**53 + 1,
    [1, 2, 3, 4],
    {"a": 1},
    1e308,
    5e-324,
]


def _annotation(rng: random.Random, odd: float) -> object:
    """A GT annotation, now and then with one odd value, key or type in it."""
    a: dict = {
        "id": rng.randrange(0, 50),
        "image_id": rng.randrange(1, 6),
        "category_id": rng.choice([1, 1, 1, 2, 3]),
        "bbox": [rng.choice([rng.random() * 100, rng.randrange(0, 100)]) for _ in range(4)],
        "area": rng.choice([rng.random() * 1000, rng.randrange(0, 1000)]),
        "iscrowd": rng.choice([0, 0, 1]),
    }
    for key in ("id", "area", "iscrowd"):
        if rng.random() < 0.2:
            del a[key]
    if rng.random() < odd:
        what = rng.randrange(6)
        if what == 0:
            del a[rng.choice(sorted(a))]
        elif what == 1:
            a[rng.choice(sorted(a))] = rng.choice(_ODD_VALUES)
        elif what == 2:
            a["bbox"] = list(a["bbox"])
            a["bbox"][rng.randrange(4)] = rng.choice(_ODD_VALUES)
        elif what == 3:
            a["bbox"] = rng.choice([a["bbox"][:3], [*a["bbox"], 1.0], tuple(a["bbox"])])
        elif what == 4:
            return rng.choice([[1, 2], "x", None, 7])
        else:
            a["iscrowd"] = rng.choice(_ODD_VALUES)
    return a


@needs_compiled
@pytest.mark.parametrize("seed", range(300))
def test_gt_columns_are_the_twins(seed):
    rng = random.Random(seed)
    n = rng.choice([0, 1, 5, 40])
    anns = [_annotation(rng, odd=rng.choice([0.0, 0.05, 0.3])) for _ in range(n)]
    keep = set(rng.sample([1, 2, 3], rng.randint(1, 3)))
    default_cat = rng.choice([None, 1, 2**70])
    want = predictions._gt_columns_py(anns, keep, default_cat)
    assert _same(_compiled_columns(anns, keep, default_cat), want)


@needs_compiled
def test_gt_columns_edge_values():
    anns = [
        {"image_id": 1, "category_id": 1, "bbox": [2**53 + 1, 2**64 + 1, -0.0, 1e308], "area": 2**63 + 1},
        {"image_id": 2**63 - 1, "category_id": 1, "bbox": [0, 0, 1, 1], "area": True, "iscrowd": "no", "id": -(2**63)},
        {"image_id": 1, "category_id": 2, "bbox": "not read: another category"},
        {"image_id": 1, "bbox": [1, 2, 3, 4], "iscrowd": [0]},
    ]
    want = predictions._gt_columns_py(anns, {1}, 1)
    assert want is not None and _same(_compiled_columns(anns, {1}, 1), want)
    assert _compiled_columns(anns, {1}, None) is None  # a missing category without a default
    assert _compiled_columns([{**anns[0], "bbox": [10**400, 0, 1, 1]}], {1}, 1) is None
    assert _compiled_columns([{**anns[0], "id": 2**63}], {1}, 1) is None
    assert _compiled_columns([{**anns[0], "category_id": 2**63}], {5}, 1) is None  # even one not kept
    assert _compiled_columns([dict], {1}, 1) is None


def _duplicates_twin_cases(rng: np.random.Generator):
    for n in (0, 1, 2, 50, 3000):
        det_image = rng.integers(0, 7, n).astype(np.int64)
        boxes = np.round(rng.random((n, 4)) * 4) / 2
        scores = np.round(rng.random(n) * 4) / 4
        yield det_image, boxes, scores
        yield np.sort(det_image), boxes, scores  # images in runs: counted run by run
        yield det_image, rng.random((n, 4)), rng.random(n)  # all distinct
    zeros = np.zeros((4, 4))
    zeros[1, 0] = -0.0  # -0.0 and 0.0 differ bit for bit: not duplicates
    yield np.zeros(4, np.int64), zeros, np.zeros(4)
    yield np.array([2**53, 2**53 + 1], np.int64), np.zeros((2, 4)), np.zeros(2)  # equal as float64 images
    yield np.array([2**53 - 1, 2**53, 2**53 + 1], np.int64), np.zeros((3, 4)), np.zeros(3)
    yield np.array([-1, -1, 0, 0], np.int64), np.zeros((4, 4)), np.array([0.5, 0.5, 0.5, 0.25])


@needs_compiled
def test_duplicate_rows_are_the_twins():
    assert cinputs is not None
    rng = np.random.default_rng(3)
    for det_image, boxes, scores in _duplicates_twin_cases(rng):
        assert cinputs.duplicate_rows(det_image, boxes, scores) == predictions._duplicate_rows_py(
            det_image, boxes, scores
        )


def _gt_doc(rng: random.Random) -> dict:
    ids = rng.sample(range(1, 40), 8)
    images = [{"id": i, "width": 640, "height": 480, "file_name": f"img{i:03d}.png"} for i in ids]
    anns = []
    for _ in range(60):
        a = _annotation(rng, odd=0.0)
        a["image_id"] = rng.choice(images)["id"]
        a["category_id"] = 1
        anns.append(a)
    return {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "person"}]}


def _outcome(fn):
    try:
        return fn()
    except AegisError as exc:
        return str(exc)


def _gt_fields(gt):
    return {k: (v.tobytes(), v.dtype.str) if isinstance(v, np.ndarray) else v for k, v in vars(gt).items()}


def _assert_gt_loads_the_same_without_the_kernels(path, monkeypatch):
    def load():
        got = _outcome(lambda: predictions.load_ground_truth(path))
        return got if isinstance(got, str) else _gt_fields(got)

    compiled = load()
    monkeypatch.setenv("AEGIS_KERNELS", "numpy")
    assert load() == compiled


@pytest.mark.parametrize("seed", range(40))
def test_gt_and_predictions_load_the_same_without_the_kernels(seed, tmp_path, monkeypatch):
    """Whole loads, compiled and twin: the GroundTruth's arrays, the detections and every warning or error."""
    rng = random.Random(seed)
    coco = _gt_doc(rng)
    if seed % 4 == 1:  # a malformed annotation somewhere: both paths name the same problem
        coco["annotations"][rng.randrange(60)] = _annotation(rng, odd=1.0)
    if seed % 4 == 2:  # an unknown image id
        coco["annotations"][rng.randrange(60)]["image_id"] = 999
    ids = [im["id"] for im in coco["images"]]
    dets = [
        {
            "image_id": rng.choice(ids),
            "category_id": 1,
            "bbox": [rng.random() * 50, 1.0, rng.choice([0.0, 5.5]), 4.0],
            "score": rng.choice([0.5, 0.25, rng.random()]),
        }
        for _ in range(rng.choice([0, 1, 80]))
    ]
    dets += dets[: rng.randrange(3)]  # exact duplicates
    gt_path, pred_path = tmp_path / "gt.json", tmp_path / "preds.json"
    gt_path.write_text(json.dumps(coco))
    pred_path.write_text(json.dumps(dets))

    def load():
        gt = _outcome(lambda: predictions.load_ground_truth(gt_path))
        if isinstance(gt, str):
            return gt
        got = _outcome(lambda: predictions.load_predictions(pred_path, gt))
        if isinstance(got, str):
            return _gt_fields(gt), got
        arrays = got.det_image.tobytes(), got.boxes.tobytes(), got.scores.tobytes()
        return _gt_fields(gt), arrays, got.source["warnings"]

    compiled = load()
    monkeypatch.setenv("AEGIS_KERNELS", "numpy")
    assert load() == compiled


def test_the_duplicate_warning_counts_repeats():
    gt = predictions.ground_truth_from_coco(
        {
            "images": [{"id": 1, "file_name": "a.png"}],
            "annotations": [],
            "categories": [{"id": 1, "name": "person"}],
        }
    )
    det = {"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5}
    got = predictions.detections_from_results([det, det, {**det, "score": 0.25}, det], gt)
    assert got.source["warnings"] == [
        "[duplicate_detection] 2 detections repeat an identical detection (same image, box and score); kept as given"
    ]


@pytest.mark.parametrize(
    "keys",
    [
        [5, 3, 5, 9, 3, 3],
        [7],
        [-(2**63), 2**63 - 1, 0],  # a range no table covers: the sort
        list(range(100, 0, -1)) * 3,
    ],
)
def test_distinct_is_numpys_unique(keys):
    arr = np.array(keys, dtype=np.int64)
    values, group = predictions._distinct(arr)
    want_values, want_group = np.unique(arr, return_inverse=True)
    assert values.tolist() == want_values.tolist() and group.tolist() == want_group.reshape(-1).tolist()
    assert group.dtype == np.int64


@pytest.mark.parametrize("name", ["a.png", "a", ".hidden", "a.", "..", ".", "", "x.tar.gz", "d/a.png", "a\\b.png"])
def test_stem_is_pathlibs(name):
    from pathlib import PurePath

    assert predictions._stem(name) == PurePath(name).stem


# --- the compiled GT reader (gt_annotations in _cresults.c) -------------------------------------------------------
cresults = extension("aegis_eval.protocols._cresults")[0]


def _gt_reader_twin(data: bytes):
    """What the compiled GT reader must give when it takes a file: the document with "annotations": [] and the
    columns _gt_columns_py reads from the whole parse (every category kept)."""
    from aegis_data.files.readers import parse_json_bytes

    doc = parse_json_bytes(data, "ground truth", "gt.json", "gt_")
    anns = doc["annotations"]
    cats = {a["category_id"] for a in anns}
    columns = predictions._gt_columns_py(anns, cats, None)
    assert columns is not None
    return {**doc, "annotations": []}, columns[1:]


def _gt_texts(rng: random.Random) -> bytes:
    coco = _gt_doc(rng)
    coco["annotations"] = [
        {k: v for k, v in a.items() if k != "iscrowd" or rng.random() < 0.8} for a in coco["annotations"]
    ]
    for a in coco["annotations"]:
        a["iscrowd"] = rng.choice([0, 1, 2, -1]) if "iscrowd" in a else None
        if a["iscrowd"] is None:
            del a["iscrowd"]
        a["bbox"] = [rng.choice([v, int(v), -0.0, 1e-300, 2**53 + 1, 1.5e300]) for v in a["bbox"]]
        if rng.random() < 0.1:
            a["area"] = rng.choice([0, 2**60, 1e-7])
    if rng.random() < 0.5:  # other top-level keys, before and after, with strings that hold brackets and quotes
        coco = {"info": {"annotations": [1], "note": 'a "]}[{" b\\'}, **coco, "licenses": [[], {}, "}"]}
    text = json.dumps(coco, indent=rng.choice([None, 0, 2]))
    return text.encode()


@needs_compiled
@pytest.mark.parametrize("seed", range(60))
def test_gt_reader_is_the_twin(seed):
    assert cresults is not None
    data = _gt_texts(random.Random(seed))
    got = cresults.gt_annotations(data)
    assert got is not None
    from aegis_data.files.readers import parse_json_bytes

    start, stop = got[0], got[1]
    rest = parse_json_bytes(data[:start] + b"[]" + data[stop:], "ground truth", "gt.json", "gt_")
    want_doc, want_columns = _gt_reader_twin(data)
    assert rest == want_doc
    ids, images, cats = (np.frombuffer(b, np.int64) for b in got[2:5])
    columns = (
        cats,
        images,
        np.frombuffer(got[5], np.float64).reshape(-1, 4),
        np.frombuffer(got[6], np.float64),
        np.frombuffer(got[7], np.uint8).astype(bool),
        ids,
    )
    assert _same(columns, want_columns)


_GT_HEAD = b'{"images": [{"id": 1, "file_name": "a.png"}], "categories": [{"id": 1, "name": "person"}], '
_ANN = b'{"id": 3, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4]}'
_ODD_GTS = [
    _GT_HEAD + b'"annotations": [' + _ANN + b"]}",
    _GT_HEAD + b'"annotations": []}',
    _GT_HEAD + b'"annotations": [' + _ANN + b'], "annotations": []}',  # twice: the last counts
    _GT_HEAD + b'"annot\\u0061tions": [' + _ANN + b"]}",  # an escaped key
    _GT_HEAD + b'"annotations": [' + _ANN.replace(b"}", b', "segmentation": []}') + b"]}",
    _GT_HEAD + b'"annotations": [' + _ANN.replace(b'"id": 3', b'"id": 3, "id": 4') + b"]}",
    _GT_HEAD + b'"annotations": [' + _ANN.replace(b"[1, 2, 3, 4]", b"[1, 2, -3, 4]") + b"]}",
    _GT_HEAD + b'"annotations": [' + _ANN.replace(b'"image_id": 1', b'"image_id": 9') + b"]}",
    _GT_HEAD + b'"annotations": [' + _ANN.replace(b'"image_id": 1', b'"image_id": "1"') + b"]}",
    _GT_HEAD + b'"annotations": [' + _ANN.replace(b"4]", b"1e999]") + b"]}",
    _GT_HEAD + b'"annotations": [' + _ANN.replace(b'"id": 3', b'"id": 12345678901234567890') + b"]}",
    _GT_HEAD + b'"annotations": [' + _ANN + b"],}",  # invalid JSON after the array
    _GT_HEAD + b'"annotations": [' + _ANN + b"]} x",
    _GT_HEAD.replace(b'"a.png"}', b'"a.png",}') + b'"annotations": [' + _ANN + b"]}",  # invalid before it
    b"\xef\xbb\xbf" + _GT_HEAD + b'"annotations": [' + _ANN + b"]}",  # a BOM
    _GT_HEAD + b'"annotations": [' + _ANN + b", " + _ANN.replace(b'"id": 3, ', b"") + b"]}",
    _GT_HEAD + b'"annotations": [' + _ANN.replace(b'"id": 3, ', b'"iscrowd": 0.5, ') + b"]}",
    _GT_HEAD + b'"annotations": [' + _ANN.replace(b"}", b', "area": null}') + b"]}",
    _GT_HEAD + b'"annotations": {"a": 1}}',
    b"[1, 2]",
]


@pytest.mark.parametrize("data", _ODD_GTS)
def test_odd_gt_files_load_the_same_without_the_compiled_reader(data, tmp_path, monkeypatch):
    path = tmp_path / "gt.json"
    path.write_bytes(data)

    _assert_gt_loads_the_same_without_the_kernels(path, monkeypatch)


@pytest.mark.parametrize("seed", range(200))
def test_image_rows_on_columns_are_the_per_entry_checks(seed):
    rng = random.Random(seed)
    images: list = [
        {"id": i, "file_name": f"{i}.png", "width": rng.choice([640, None, 0]), "height": 480}
        for i in rng.sample(range(-5, 50), rng.choice([0, 1, 6]))
    ]
    for _ in range(rng.choice([0, 0, 1, 2])):
        if not images:
            break
        im = images[rng.randrange(len(images))]
        key = rng.choice(["id", "width", "height"])
        im[key] = rng.choice([True, 1.5, -1, 2**31, 2**31 - 1, 2**63, -(2**63), "7", None, 3])
    if images and rng.random() < 0.1:
        images[rng.randrange(len(images))] = rng.choice([[1], "x", None])
    if rng.random() < 0.3:
        images.sort(key=lambda im: im["id"] if isinstance(im, dict) and isinstance(im.get("id"), int) else 0)

    def outcome(fn):
        try:
            return [id(im) for im in fn(list(images), "gt.json")]
        except AegisError as exc:
            return str(exc)

    assert outcome(predictions._gt_image_rows) == outcome(predictions._gt_image_rows_each)


@pytest.mark.parametrize("seed", range(30))
def test_int_rows_is_candidates_for_every_integer(seed):
    """The resolver's integer table gives what candidates() decides, ids and numeric stems overlapping or clashing."""
    rng = random.Random(seed)
    ids = rng.sample(range(0, 30), 10)
    names = [rng.choice([f"{rng.randrange(30)}.png", f"0{rng.randrange(30)}.jpg", f"frame{i}.png"]) for i in ids]
    coco = {
        "images": [{"id": i, "file_name": n} for i, n in zip(ids, names)],
        "annotations": [],
        "categories": [{"id": 1, "name": "person"}],
    }
    resolver = predictions._IdResolver(predictions.ground_truth_from_coco(coco))
    table = resolver.int_rows()
    for key in range(-3, 40):
        assert table.get(key, -1) == predictions._resolved_row(resolver.candidates(key))


@pytest.mark.parametrize("side", ["preds", "gt"])
def test_class_maps_load_the_same_gt_without_the_compiled_reader(side, tmp_path, monkeypatch):
    """A prediction-side map leaves the GT to the compiled reader, a GT-side map rewrites the annotations (JSON
    path); either way the GroundTruth is the one the Python path builds."""
    from aegis_eval.protocols.class_map import parse_class_map

    coco = _gt_doc(random.Random(5))
    path = tmp_path / "gt.json"
    path.write_text(json.dumps(coco))
    class_map = parse_class_map("0:1" if side == "preds" else "1:1", side=side)
    compiled = _gt_fields(predictions.load_ground_truth(path, class_map=class_map))
    monkeypatch.setenv("AEGIS_KERNELS", "numpy")
    assert _gt_fields(predictions.load_ground_truth(path, class_map=class_map)) == compiled


@pytest.mark.parametrize("case", ["plain", "unknown_image", "no_category"])
def test_gt_by_class_loads_the_same_without_the_compiled_reader(case, tmp_path, monkeypatch):
    coco = _gt_doc(random.Random(9))
    coco["categories"] = [{"id": 1, "name": "person"}, {"id": 2, "name": "car"}]
    for k, a in enumerate(coco["annotations"]):
        a["category_id"] = 1 + k % 2
    if case == "unknown_image":
        coco["annotations"][7]["image_id"] = 999
    if case == "no_category":
        del coco["annotations"][3]["category_id"]
    path = tmp_path / "gt.json"
    path.write_text(json.dumps(coco))

    def load():
        got = _outcome(lambda: predictions.load_ground_truth_by_class(path, "all"))
        return got if isinstance(got, str) else {name: _gt_fields(gt) for name, gt in got.items()}

    compiled = load()
    monkeypatch.setenv("AEGIS_KERNELS", "numpy")
    assert load() == compiled
    assert case == "plain" or isinstance(compiled, str)


@pytest.mark.parametrize("seed", range(150))
def test_mutated_gt_files_load_the_same_without_the_compiled_reader(seed, tmp_path, monkeypatch):
    """Random byte edits of a GT file (brackets, quotes, backslashes, digits, keys): the compiled reader either
    declines or gives what the JSON path gives, error lines included."""
    rng = random.Random(seed)
    coco = _gt_doc(rng)
    coco["annotations"] = coco["annotations"][:6]
    coco["info"] = {"note": 'x"y\\z', "list": [1, [2, {"annotations": []}]]}
    data = bytearray(json.dumps(coco).encode())
    for _ in range(rng.randint(1, 3)):
        pos = rng.randrange(len(data))
        what = rng.randrange(3)
        piece = rng.choice([b"[", b"]", b"{", b"}", b'"', b"\\", b",", b":", b"1", b"-", b".", b"e", b" ", b"x"])
        if what == 0:
            del data[pos]
        elif what == 1:
            data[pos:pos] = piece
        else:
            data[pos : pos + 1] = piece
    path = tmp_path / "gt.json"
    path.write_bytes(bytes(data))

    _assert_gt_loads_the_same_without_the_kernels(path, monkeypatch)
