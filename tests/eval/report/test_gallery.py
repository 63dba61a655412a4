"""`aegis gallery` on a tiny split written here in the docs/SPLITS.md layout.

Three frames (two 200x150, one 640x480), GT boxes, clean predictions that find every person, and two
corrupted conditions that lose some:
  frame_c (1 GT)  smoke_haze_s2: 1 -> 0 found, drop 1.00   -> rank 1
  frame_b (4 GT)  low_light_s3:  4 -> 1 found, drop 0.75   -> rank 2
  frame_a (2 GT)  low_light_s3:  2 -> 1 found, drop 0.50   -> rank 3 (its other box scores 0.30 < threshold)
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import cv2
import numpy as np
import pytest
from typer.testing import CliRunner

from aegis_cli.main import app  # the real root app: also checks that `register` wires the commands
from aegis_data.errors import AegisError
from aegis_eval.report import palette
from aegis_eval.report.gallery import (
    DEFAULT_MAX_WIDTH,
    GAP,
    HEADER,
    build_gallery,
    draw_panel,
    panel_scale,
    select_conditions,
)


def pair_size(width: int, height: int, max_width: int = DEFAULT_MAX_WIDTH) -> tuple[int, int]:
    """(width, height) of the side-by-side picture a gallery draws for a ``width`` x ``height`` frame."""
    s = panel_scale(width, max_width)
    pw, ph = max(1, round(width * s)), max(1, round(height * s))
    return 2 * pw + GAP, HEADER + ph


FRAMES = {  # stem: (width, height, GT boxes xywh)
    "frame_a": (200, 150, [[20, 30, 24, 30], [120, 60, 20, 28]]),
    "frame_b": (640, 480, [[40, 40, 40, 60], [200, 100, 36, 50], [400, 300, 50, 70], [520, 60, 30, 40]]),
    "frame_c": (200, 150, [[90, 50, 26, 34]]),
}
THRESHOLD = 0.5


def _frame(w: int, h: int, k: int) -> np.ndarray:
    """A deterministic textured frame (no RNG): gradients plus a checker pattern."""
    y, x = np.mgrid[0:h, 0:w]
    rgb = np.stack([(x * 255 // w), (y * 255 // h), ((x // 16 + y // 16 + k) % 2) * 90 + 60], axis=2)
    return rgb.astype(np.uint8)


def _write_png(path: Path, rgb: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(path), rgb[:, :, ::-1])


def _det(image_id: int, box, score: float) -> dict:
    return {"image_id": image_id, "category_id": 1, "bbox": [float(v) for v in box], "score": score}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("gallery")
    split, preds = root / "split", root / "preds"
    images, anns = [], []
    for i, (stem, (w, h, boxes)) in enumerate(FRAMES.items(), start=1):
        images.append({"id": i, "file_name": f"{stem}.png", "width": w, "height": h})
        for b in boxes:
            anns.append(
                {"id": len(anns) + 1, "image_id": i, "category_id": 1, "bbox": b, "area": b[2] * b[3], "iscrowd": 0}
            )
        for k, cond in enumerate(("clean", "low_light_s3", "smoke_haze_s2")):
            rgb = _frame(w, h, k)
            if cond != "clean":
                rgb = (rgb // (2 + k)).astype(np.uint8)  # darker: visibly a different frame
            _write_png(split / "test" / cond / f"{stem}.png", rgb)
    (split / "annotations").mkdir(parents=True)
    (split / "annotations" / "test.json").write_text(
        json.dumps({"images": images, "annotations": anns, "categories": [{"id": 1, "name": "person"}]})
    )
    ids = {stem: i for i, stem in enumerate(FRAMES, start=1)}
    clean = [_det(ids[s], b, 0.9) for s, (_, _, boxes) in FRAMES.items() for b in boxes]
    clean.append(_det(ids["frame_b"], [300, 200, 30, 30], 0.8))  # a false alarm
    a, b, c = (FRAMES[s][2] for s in ("frame_a", "frame_b", "frame_c"))
    low = [_det(1, a[0], 0.85), _det(1, a[1], 0.30), _det(2, b[2], 0.7), _det(3, c[0], 0.9)]
    smoke = [_det(1, a[0], 0.9), _det(1, a[1], 0.9)] + [_det(2, bb, 0.9) for bb in b] + [_det(3, [10, 10, 20, 20], 0.9)]
    preds.mkdir()
    for name, dets in (("clean", clean), ("low_light_s3", low), ("smoke_haze_s2", smoke)):
        (preds / f"{name}.json").write_text(json.dumps(dets))
    thr = root / "threshold.json"
    thr.write_text(json.dumps({"schema": "aegis-threshold/1", "value": THRESHOLD, "rule": "max-f1"}))
    return split, preds, thr


@pytest.fixture(scope="module")
def gallery(tiny, tmp_path_factory):
    split, preds, thr = tiny
    return build_gallery(split, preds, tmp_path_factory.mktemp("out"), threshold_file=thr, max_width=648)


def test_ranks_pairs_by_recall_drop(gallery):
    got = [(p.file_name, p.condition, p.found_clean, p.found_condition, p.n_gt) for p in gallery.pairs]
    assert got == [
        ("frame_c.png", "smoke_haze_s2", 1, 0, 1),
        ("frame_b.png", "low_light_s3", 4, 1, 4),
        ("frame_a.png", "low_light_s3", 2, 1, 2),
    ]
    assert [p.rank for p in gallery.pairs] == [1, 2, 3]
    assert gallery.threshold == THRESHOLD
    assert any("only 3" in n for n in gallery.notes)


def test_pictures_exist_with_expected_size(gallery):
    # 200 px frames are enlarged to the 320 px minimum panel; the 640 px frame is halved to fit 648 px.
    expected = {
        "frame_c.png": (648, HEADER + 240),
        "frame_b.png": (648, HEADER + 240),
        "frame_a.png": (648, HEADER + 240),
    }
    assert pair_size(200, 150, 648) == pair_size(640, 480, 648) == (2 * 320 + GAP, HEADER + 240)
    assert pair_size(4000, 3000) == (1600, HEADER + 597)
    for p, path in zip(gallery.pairs, gallery.images):
        img = cv2.imread(str(path), cv2.IMREAD_COLOR)
        assert img is not None
        assert (img.shape[1], img.shape[0]) == expected[p.file_name]
        assert path.name.startswith(f"{p.rank:03d}_{p.condition}_")


def test_index_lists_pairs_in_rank_order(gallery):
    md = gallery.index_md.read_text(encoding="utf-8")
    rows = [l for l in md.splitlines() if l.startswith("| ") and l[2].isdigit()]
    assert [r.split("|")[2].strip() for r in rows] == ["frame_c.png", "frame_b.png", "frame_a.png"]
    assert "| 1 | frame_c.png | smoke_haze_s2 | 1 | 1.00 | 0.00 | 1.00 |" in rows[0]
    html = gallery.index_html.read_text(encoding="utf-8")
    srcs = [s.split('"')[0] for s in html.split('src="')[1:]]
    assert srcs == [str(p.relative_to(gallery.out)) for p in gallery.images]
    assert all((gallery.out / s).is_file() for s in srcs)


def test_missed_gt_is_drawn_dashed_and_found_gt_solid():
    black = np.zeros((100, 200, 3), dtype=np.uint8)
    gt = np.array([[10, 10, 60, 40], [110, 10, 60, 40]], dtype=float)
    img = draw_panel(black, 1.0, gt, np.array([True, False]), np.zeros((0, 4)))
    green = np.all(img == palette.GT_RGB, axis=2)
    found_top, missed_top = green[10, 10:71], green[10, 110:171]
    assert found_top.all(), "a found GT box has a continuous outline"
    assert missed_top.any() and not missed_top.all(), "a missed GT box has a dashed outline"
    pred = draw_panel(black, 1.0, np.zeros((0, 4)), np.zeros(0, bool), np.array([[20, 50, 30, 30]]))
    assert np.all(pred[50, 20:51] == palette.PRED_RGB)


def test_same_inputs_same_bytes(tiny, gallery, tmp_path):
    split, preds, thr = tiny
    again = build_gallery(split, preds, tmp_path, threshold_file=thr, max_width=648)
    for a, b in zip(gallery.images, again.images):
        assert a.read_bytes() == b.read_bytes()


def test_an_image_ranked_under_two_conditions_decodes_its_clean_frame_once(tiny, tmp_path, monkeypatch):
    from aegis_eval.report import gallery as gallery_mod

    split, preds, _ = tiny
    twin = tmp_path / "preds"  # smoke_haze_s2 loses exactly what low_light_s3 loses: frames a and b rank twice
    twin.mkdir()
    (twin / "clean.json").write_bytes((preds / "clean.json").read_bytes())
    for cond in ("low_light_s3", "smoke_haze_s2"):
        (twin / f"{cond}.json").write_bytes((preds / "low_light_s3.json").read_bytes())
    reads: list[str] = []
    real_read = gallery_mod.read_rgb
    monkeypatch.setattr(gallery_mod, "read_rgb", lambda path: reads.append(Path(path).parent.name) or real_read(path))
    res = build_gallery(split, twin, tmp_path / "g", threshold=THRESHOLD, max_width=648)
    assert [(p.file_name, p.condition) for p in res.pairs] == [
        ("frame_b.png", "smoke_haze_s2"),
        ("frame_b.png", "low_light_s3"),
        ("frame_a.png", "smoke_haze_s2"),
        ("frame_a.png", "low_light_s3"),
    ]
    assert reads.count("clean") == 2 and len(reads) == 6
    # The reused clean panel is the one a fresh render draws (rank and header text aside).
    single = build_gallery(split, twin, tmp_path / "one", threshold=THRESHOLD, conditions="low_light_s3", max_width=648)
    for path, fresh in ((res.images[1], single.images[0]), (res.images[3], single.images[1])):
        a, b = cv2.imread(str(path)), cv2.imread(str(fresh))
        assert np.array_equal(a[HEADER:, :320], b[HEADER:, :320])


def test_condition_filter_and_threshold_value(tiny, tmp_path):
    split, preds, _ = tiny
    res = build_gallery(split, preds, tmp_path, threshold=THRESHOLD, conditions="low_light_s3", n=1)
    assert [(p.file_name, p.condition) for p in res.pairs] == [("frame_b.png", "low_light_s3")]
    # A lower threshold lets frame_a's 0.30 detection count: frame_a no longer loses recall.
    low = build_gallery(split, preds, tmp_path / "low", threshold=0.25, conditions=["low_light_s3"])
    assert [p.file_name for p in low.pairs] == ["frame_b.png"]


def test_scale_and_condition_selection_errors():
    assert panel_scale(4000, 1600) == pytest.approx(796 / 4000)
    assert panel_scale(100, 1600) == pytest.approx(3.2)
    assert panel_scale(500, 1600) == 1.0
    with pytest.raises(AegisError, match="max width"):
        panel_scale(100, 300)
    assert select_conditions(["low_light_s3", "clean", "smoke_haze_s2"]) == ["smoke_haze_s2", "low_light_s3"]
    assert select_conditions(["clean", "low_light_s3", "smoke_haze_s2"], "low_light_s3, smoke_haze_s2") == [
        "smoke_haze_s2",
        "low_light_s3",
    ]  # canonical (config) order, whatever order was asked
    with pytest.raises(AegisError, match="'clean' is implicit"):
        select_conditions(["clean", "low_light_s3"], ["clean"])
    with pytest.raises(AegisError, match="no predictions for condition 'dust_haze_s1'"):
        select_conditions(["clean", "low_light_s3"], "dust_haze_s1")
    with pytest.raises(AegisError, match="no corrupted-condition predictions"):
        select_conditions(["clean"])


runner = CliRunner()


def test_cli_gallery(tiny, tmp_path):
    split, preds, thr = tiny
    result = runner.invoke(
        app,
        [
            "gallery",
            str(preds),
            "--split-dir",
            str(split),
            "--threshold-file",
            str(thr),
            "--n",
            "2",
            "--out-dir",
            str(tmp_path / "g"),
            "--max-width",
            "648",
        ],
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "g" / "pairs").iterdir()) == [
        "001_smoke_haze_s2_frame_c.png",
        "002_low_light_s3_frame_b.png",
    ]
    assert "index.html" in result.stdout and "smoke_haze_s2" in result.stdout


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--threshold", "0.5", "--threshold-file", "{thr}"], "give exactly one of --threshold"),
        ([], "give exactly one of --threshold"),
        (["--threshold", "1.5"], "--threshold must be in [0, 1]"),
        (["--threshold", "0.5", "--conditions", "dust_haze_s1"], "no predictions for condition 'dust_haze_s1'"),
        (["--threshold", "0.5", "--conditions", "fog"], "not a condition id: 'fog'"),
        (["--threshold", "0.5", "--n", "0"], "--n must be at least 1"),
        (["--threshold-file", "{split}/annotations/test.json"], "threshold"),
    ],
)
def test_cli_gallery_errors_are_one_line(tiny, tmp_path, extra, message):
    split, preds, thr = tiny
    args = [a.format(thr=thr, split=split) for a in extra]
    result = runner.invoke(
        app, ["gallery", str(preds), "--split-dir", str(split), "--out-dir", str(tmp_path / "g"), *args]
    )
    assert result.exit_code == 1, result.output
    lines = [l for l in result.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], result.stderr
    assert "Traceback" not in result.output
    assert not (tmp_path / "g").exists()


def test_cli_gallery_without_clean_predictions(tiny, tmp_path):
    split, preds, _ = tiny
    partial = tmp_path / "preds"
    partial.mkdir()
    (partial / "low_light_s3.json").write_bytes((preds / "low_light_s3.json").read_bytes())
    result = runner.invoke(
        app,
        ["gallery", str(partial), "--split-dir", str(split), "--threshold", "0.5", "--out-dir", str(tmp_path / "g")],
    )
    assert result.exit_code == 1
    assert "has no clean.json" in result.stderr and "Traceback" not in result.output


def test_report_reads_real_scorer_output(tiny, tmp_path):
    """The contract between `aegis score --json` and `aegis report`, on the same tiny split."""
    from aegis_eval.protocols.scoring import write_score_json
    from aegis_eval.report import build_report, load_results
    from tests.eval.protocols.scoring_memory import score_paths

    split, preds, thr = tiny
    scored = score_paths(preds, split, threshold_file=thr, bootstrap=20, label="tiny_model")
    write_score_json(scored, tmp_path / "score.json")
    files = build_report(load_results([tmp_path / "score.json"]), tmp_path / "report")
    tex = files.latex.read_text(encoding="utf-8")
    rows = [l for l in tex.splitlines() if l.endswith("\\\\") and l[:1] not in (" ", "F")]
    assert [r.split(" & ")[1:3] for r in rows] == [["clean", "0"], ["smoke\\_haze", "2"], ["low\\_light", "3"]]
    # recall: clean 7/7; low_light_s3 3/7 found -> drop 4/7 = 57.1 %
    low = next(r for r in rows if "low\\_light" in r)[:-2].strip().split(" & ")
    assert [c.split(" [")[0] for c in low[3:5]] == ["0.429", "57.1"]
    assert all(re.fullmatch(r"-?[\d.]+ \[-?[\d.]+, -?[\d.]+\]", c) for c in low[3:5]), low  # with intervals
    assert any("25 of 28 conditions missing" in n for n in files.notes)
    md = files.markdown.read_text(encoding="utf-8")
    assert "tiny_model" in md and "figures/unknown_heatmap_recall.png" in md
