"""The public API's own contracts: in-memory and file predictions score alike, typed results read the document,
the split reader refuses what is not there (one AegisError line each)."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

import aegis_data as ad
import aegis_eval as ae
from aegis_data.errors import AegisError


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    root = tmp_path_factory.mktemp("api") / "bench"
    ad.build_splits(ad.load_source("synthetic", n=6), root, corruptions=["low_light"], severities=[3], workers=1)
    return root


def _gt_as_predictions(split, condition, keep=1.0):
    preds = []
    for image_id, _, boxes in split.images(condition):
        for k, (x0, y0, x1, y1) in enumerate(boxes):
            if (k % 10) < keep * 10:
                preds.append(
                    {
                        "image_id": image_id,
                        "category_id": 1,
                        "score": 0.9 - 0.01 * k,
                        "bbox": [float(x0), float(y0), float(x1 - x0), float(y1 - y0)],
                    }
                )
    return preds


def test_in_memory_and_file_predictions_score_alike(bench, tmp_path):
    split = ad.load_split(bench)
    preds = {
        "clean": _gt_as_predictions(split, "clean"),
        "low_light_s3": _gt_as_predictions(split, "low_light_s3", 0.5),
    }
    folder = tmp_path / "preds"
    folder.mkdir()
    for cond, p in preds.items():
        (folder / f"{cond}.json").write_text(json.dumps(p))
    a = ae.score(preds, bench, threshold=0.5, bootstrap=50)
    b = ae.score(folder, bench, threshold=0.5, bootstrap=50)
    assert a.document["conditions"] == b.document["conditions"]
    assert a.document["summary"] == b.document["summary"]
    assert a.provenance["predictions"]["clean"]["file"] == "<in-memory>"
    assert a.provenance["predictions"]["clean"]["sha256"] != b.provenance["predictions"]["clean"]["sha256"]
    assert a.conditions["clean"].recall == 1.0 and a.conditions["clean"].severity == 0
    assert a.conditions["low_light_s3"].rel_drop["recall"] == pytest.approx(1 - a.conditions["low_light_s3"].recall)
    assert a.rpc["recall"] == pytest.approx(a.conditions["low_light_s3"].recall)
    assert a.threshold == 0.5
    with pytest.raises(AttributeError, match="no metric"):
        a.conditions["clean"].no_such_metric  # noqa: B018 (the access is what raises)
    # A bare list is the clean condition.
    assert list(ae.score(preds["clean"], bench, threshold=0.5, bootstrap=1).conditions) == ["clean"]


def test_per_class_thresholds_read_without_a_shared_value(bench):
    doc = ae.score([], bench, threshold=0.5, bootstrap=1).to_dict()
    assert ae.ScoreResult(doc).class_thresholds == {}
    doc["threshold"].update(value=None, per_class={"anti_tank": 0.37, "anti_personnel": 0.41})
    per_class = ae.ScoreResult(doc)
    assert per_class.threshold is None
    assert per_class.class_thresholds == {"anti_tank": 0.37, "anti_personnel": 0.41}


def test_api_refusals(bench):
    with pytest.raises(AegisError, match="must be a path"):
        ae.score(42, bench, threshold=0.5)
    with pytest.raises(AegisError, match="empty"):
        ae.score({}, bench, threshold=0.5)
    with pytest.raises(AegisError, match="file path or a results list"):
        ae.score({"clean": 3}, bench, threshold=0.5)
    with pytest.raises(AegisError, match="^`classes` scores predictions from files") as exc:
        ae.score([], bench, threshold=0.5, classes="all")
    assert exc.value.param == "classes"
    with pytest.raises(AegisError, match="not JSON"):
        ae.score({"clean": [{"image_id": 1, "score": float("nan")}]}, bench, threshold=0.5)
    with pytest.raises(AegisError, match="split folder not found"):
        ad.load_split(bench / "nope")
    split = ad.load_split(bench)
    with pytest.raises(AegisError, match="no condition 'fog_s1'"):
        next(split.images("fog_s1"))
    with pytest.raises(AegisError, match="no 'train' split"):
        split.ground_truth("train")
    with pytest.raises(AegisError, match="unknown family"):
        ad.corruption_names("drought")


def test_split_reader_reads_what_was_built(bench):
    split = ad.load_split(bench)
    assert split.conditions == ("clean", "low_light_s3")
    assert (
        split.facts()["root_hash"] == split.root_hash == json.loads((bench / "manifest.json").read_text())["root_hash"]
    )
    seen = dict(iter(split))
    assert set(seen) == {"clean", "low_light_s3"}
    (iid, clean, boxes), (iid2, dark, _) = next(seen["clean"]), next(seen["low_light_s3"])
    assert iid == iid2 and clean.shape == dark.shape and dark.mean() < clean.mean()
    # The file is the engine's output under the split's suite and person unit (the default suite: aegis-v2).
    assert split.suite == "aegis-v2" and split.scale.is_object
    assert np.array_equal(
        dark, ad.apply_corruption(clean, "low_light", 3, iid, config=ad.load_config(split.suite), scale=split.scale)
    )
    assert boxes.shape[1] == 4 and np.all(boxes[:, 2:] > boxes[:, :2])


def test_split_reader_parses_each_ground_truth_file_once(bench, monkeypatch):
    import aegis_data.split.reader as reader

    reads: list[str] = []
    real = reader.read_coco_gt

    def counting(path, *a, **k):
        reads.append(str(path))
        return real(path, *a, **k)

    monkeypatch.setattr(reader, "read_coco_gt", counting)
    split = ad.load_split(bench)
    for _ in range(2):
        ids = split.image_ids()
        for _condition, images in split:
            assert [i for i, _rgb, _boxes in images] == ids
        gt = split.ground_truth()
    assert len(reads) == 1 and reads[0].endswith("test.json")
    gt["images"].clear()  # each caller gets its own copy: the cached one is untouched
    assert len(split.ground_truth()["images"]) == len(ids) and ad.load_split(bench) == split


def test_rank_checks_documents_in_memory_as_it_checks_files(bench, tmp_path):
    doc = ae.score([], bench, threshold=0.5, bootstrap=1).to_dict()
    path = tmp_path / "a.json"
    path.write_text(json.dumps(doc))
    for one in (str(path), path):  # one path is not a list of them (a str would rank its characters)
        with pytest.raises(AegisError, match="list of two or more"):
            ae.rank(one)
    broken = dict(doc, conditions={"clean": {"map50": "high"}})
    with pytest.raises(AegisError, match=r"\[score_schema\] scores\[1\]: conditions\['clean'\]\.map50"):
        ae.rank([doc, broken])
    with pytest.raises(AegisError, match=r"\[score_schema\] scores\[0\]: 'conditions' must be"):
        ae.rank([{"schema": doc["schema"], "label": "x"}, doc])
    with pytest.raises(AegisError, match=r"scores\[1\] must be a score file path"):
        ae.rank([doc, 7])
    ranked = ae.rank([doc, dict(doc, label="other"), path], bootstrap=10)
    assert ranked["models"] == [doc["label"] + "#1", "other", doc["label"] + "#3"]


def test_rank_compares_scores_of_two_suites_only_when_asked(tmp_path):
    """As ``aegis rank --allow-mixed-suites``: the API takes the same choice, for documents and for files."""
    from tests.cli.test_suites_cli import _score_doc

    docs = [_score_doc("aegis-v1", "a"), _score_doc("aegis-v2", "b")]
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    for path, doc in zip(paths, docs):
        path.write_text(json.dumps(doc))
    for scores in (docs, paths):
        with pytest.raises(AegisError, match=r"\[mixed_suites\]"):
            ae.rank(scores, "recall", bootstrap=10)
        assert ae.rank(scores, "recall", bootstrap=10, allow_mixed_suites=True)["models"] == ["a", "b"]


def test_numpy_predictions_in_memory_hash_as_their_python_values(bench):
    split = ad.load_split(bench)
    plain = _gt_as_predictions(split, "clean")
    arrays = [dict(p, score=np.float32(p["score"]), bbox=np.asarray(p["bbox"]), category_id=np.int64(1)) for p in plain]
    as_numpy, as_python = (ae.score(p, bench, threshold=0.5, bootstrap=5) for p in (arrays, plain))
    # float32 scores round to other doubles, so the hash differs from `plain`'s; it equals that of the values held.
    held = [dict(p, score=float(np.float32(p["score"]))) for p in plain]
    assert (
        as_numpy.provenance["predictions"]
        == ae.score(held, bench, threshold=0.5, bootstrap=5).provenance["predictions"]
    )
    assert as_numpy.conditions["clean"].recall == as_python.conditions["clean"].recall == 1.0
    # Pure-Python predictions keep the hash of their canonical JSON.
    canonical = json.dumps(plain, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()
    assert as_python.provenance["predictions"]["clean"]["sha256"] == hashlib.sha256(canonical).hexdigest()
    with pytest.raises(AegisError, match="not JSON"):
        ae.score([dict(plain[0], score=object())], bench, threshold=0.5)


def test_in_memory_and_file_scoring_group_repeated_warnings_alike(bench, tmp_path):
    split = ad.load_split(bench)
    once = _gt_as_predictions(split, "clean")
    preds = {c: once + once[:1] for c in ("clean", "low_light_s1", "low_light_s3")}  # one detection twice in each
    folder = tmp_path / "dup"
    folder.mkdir()
    for c, p in preds.items():
        (folder / f"{c}.json").write_text(json.dumps(p))
    seen = {"memory": [], "files": []}
    ae.score(preds, bench, threshold=0.5, bootstrap=1, on_warning=seen["memory"].append)
    ae.score(folder, bench, threshold=0.5, bootstrap=1, on_warning=seen["files"].append)
    for lines in seen.values():
        dup = [line for line in lines if "duplicate_detection" in line]
        assert len(dup) == 1 and dup[0].startswith("[duplicate_detection] 3 warnings, e.g. clean: "), lines


def test_score_result_refuses_what_is_no_score_document_and_keeps_unknown_severity(bench):
    doc = ae.score([], bench, threshold=0.5, bootstrap=1).to_dict()
    for bad, fragment in (
        (dict(doc, schema="x"), "schema"),
        ({k: v for k, v in doc.items() if k != "conditions"}, "'conditions'"),
        (dict(doc, threshold=5), "'threshold' must be an object"),
        ([], "JSON list"),
    ):
        with pytest.raises(AegisError, match=rf"^\[score_schema\] score document: .*{fragment}"):
            ae.ScoreResult(bad)
    for threshold in (None, {}):  # no frozen value recorded: None, not KeyError / AttributeError
        bare = ae.ScoreResult({**doc, "threshold": threshold})
        assert bare.threshold is None and bare.class_thresholds == {}
    bare = ae.ScoreResult({k: v for k, v in doc.items() if k != "threshold"})
    assert bare.threshold is None
    # A domain that is no suite condition (iid, ood) has no severity; it must not read as clean's 0.
    domains = ae.ScoreResult(
        dict(
            doc,
            conditions={"iid": dict(doc["conditions"]["clean"], severity=None), "clean": doc["conditions"]["clean"]},
        )
    )
    assert domains.conditions["iid"].severity is None and domains.conditions["clean"].severity == 0
