import numpy as np
import pytest

from aegis_data.errors import AegisError
from aegis_eval.runners.tiling import Tile, assign_boxes, boxes_to_frame, crop, tile_grid, tile_starts


def test_single_tile_when_frame_fits():
    assert tile_starts(1024) == [0]
    assert tile_starts(17) == [0]
    assert tile_grid(640, 480) == [Tile(0, 0, 640, 480)]


@pytest.mark.parametrize("length", [1025, 1792, 1793, 2500, 3000, 4000])
def test_starts_cover_with_flush_last_tile(length):
    starts = tile_starts(length, 1024, 256)
    assert starts[0] == 0
    assert starts[-1] == length - 1024  # flush with the far edge
    assert starts == sorted(set(starts))
    for a, b in zip(starts, starts[1:]):
        assert b - a <= 768  # overlap of at least 256 px between neighbours
    covered = np.zeros(length, bool)
    for s in starts:
        covered[s : s + 1024] = True
    assert covered.all()


def test_heridal_frame_grid():
    tiles = tile_grid(4000, 3000)
    assert len(tiles) == 5 * 4
    assert all(t.width == 1024 and t.height == 1024 for t in tiles)
    assert tiles[0] == Tile(0, 0, 1024, 1024)
    assert tiles[-1] == Tile(2976, 1976, 4000, 3000)


def test_bad_arguments():
    with pytest.raises(AegisError, match="overlap"):
        tile_starts(2000, 1024, 1024)
    with pytest.raises(AegisError, match="length"):
        tile_starts(0)


def test_assign_and_back_round_trip():
    frame_boxes = np.array([[10, 10, 50, 60], [1000, 100, 1100, 140], [3990, 2990, 4000, 3000]], float)
    tiles = tile_grid(4000, 3000)
    seen = set()
    for t in tiles:
        clipped, keep = assign_boxes(frame_boxes, t, min_visibility=1.0)
        back = boxes_to_frame(clipped, t)
        np.testing.assert_array_equal(back, frame_boxes[keep])  # fully visible boxes map back exactly
        seen.update(keep.tolist())
    assert seen == {0, 1, 2}


def test_visibility_rule():
    t = Tile(0, 0, 100, 100)
    boxes = np.array([[90, 10, 110, 20], [80, 10, 110, 20], [100, 10, 120, 20]], float)
    clipped, keep = assign_boxes(boxes, t, min_visibility=0.5)
    assert keep.tolist() == [0, 1]  # 50% and 67% visible; the third is outside
    np.testing.assert_array_equal(clipped[0], [90, 10, 100, 20])
    assert assign_boxes(np.zeros((0, 4)), t)[0].shape == (0, 4)


def test_crop_is_view_with_tile_shape():
    img = np.arange(30 * 40 * 3, dtype=np.uint8).reshape(30, 40, 3)
    t = Tile(5, 7, 25, 27)
    c = crop(img, t)
    assert c.shape == (20, 20, 3)
    assert c[0, 0].tolist() == img[7, 5].tolist()
