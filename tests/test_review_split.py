"""Review of the split, files and sources rooms after aegis-v2 (work done once, one check per rule).

Each test fails on the code before the review: verify derived an image's scene again for every changed file of it,
compared GT stems in quadratic time, and the image reader's name check had no test.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from aegis_cli.main import app
from aegis_data.errors import AegisError
from aegis_data.files.imageio import image_size, read_rgb, write_png_atomic
from aegis_data.split import verify as VF

runner = CliRunner()
CONDITIONS = ("low_light", "motion_blur", "dust_haze")

def _gt_file(path: Path, n: int) -> Path:
    coco = {"images": [{"id": i + 1, "file_name": f"img{i:06d}.png", "width": 10, "height": 10} for i in range(n)],
            "annotations": [], "categories": [{"id": 1, "name": "person"}]}
    path.write_text(json.dumps(coco))
    return path


def test_gt_digests_take_time_linear_in_the_images(tmp_path):
    """A repeated stem was looked for in the list of every stem seen so far: 5,000 images took 0.3 s, 20,000 5 s
    (quadratic; a split of 100,000 images would take minutes). Eight times the images now take about eight times
    as long (the bound leaves room for a busy machine; the quadratic check took 50 to 100 times as long)."""
    small, large = _gt_file(tmp_path / "small.json", 2_500), _gt_file(tmp_path / "large.json", 20_000)

    def seconds(path: Path) -> float:
        t0 = time.perf_counter()
        VF.gt_digests(path)
        return time.perf_counter() - t0

    t_small = min(seconds(small) for _ in range(3))
    assert seconds(large) < 24 * t_small
    coco = json.loads(small.read_text())
    coco["images"][1]["file_name"] = "img000000.jpg"  # the same stem twice is still refused
    small.write_text(json.dumps(coco))
    with pytest.raises(AegisError, match="two images have the stem 'img000000'"):
        VF.gt_digests(small)
