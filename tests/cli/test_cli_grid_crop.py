"""Issue 31 item 7: `aegis grid --crop people|X,Y,W,H` and `--boxes`, on cells corrupted at full resolution."""

from __future__ import annotations

import re

from aegis_data.files.imageio import read_rgb
from tests.adversarial import build_yolo, invoke, yolo_source
from tests.conftest import assert_one_line_error


def test_grid_crops_around_the_people_of_a_split_image(tmp_path):
    src = yolo_source(tmp_path / "src", n=2)
    split = tmp_path / "split"
    build_yolo(src, split, "--person-px", "8", "--scale", "object")
    image = next((split / "test" / "clean").glob("*.png"))
    whole, crop = tmp_path / "whole.png", tmp_path / "crop.png"
    args = ("--width", "600", "--person-px", "8", "--scale", "object")
    r = invoke("grid", image, "--out", whole, *args)
    assert r.exit_code == 0, r.output
    # The split's annotations give the boxes (the label is the 12x8 box in the middle of a 48x32 frame).
    r = invoke("grid", image, "--out", crop, "--crop", "people", *args)
    assert r.exit_code == 0, r.output
    assert read_rgb(whole).shape == read_rgb(crop).shape  # the window keeps the frame's aspect
    assert (read_rgb(whole) != read_rgb(crop)).any()
    labels = tmp_path / "boxes.txt"
    labels.write_text("0 0.5 0.5 0.25 0.25\n")
    other = tmp_path / "frame.png"
    other.write_bytes(image.read_bytes())
    again = tmp_path / "again.png"
    r = invoke("grid", other, "--out", again, "--crop", "people", "--boxes", labels, "--image-id", image.stem, *args)
    assert r.exit_code == 0, r.output
    assert (read_rgb(again) == read_rgb(crop)).all()
    assert re.search(r"again\.png\s+600x\d+", r.stdout)


def test_grid_crop_errors_are_one_line(tmp_path):
    src = yolo_source(tmp_path / "src", n=1)
    image = src / "images" / "f0.png"
    args = ("--out", tmp_path / "g.png", "--width", "600", "--person-px", "8", "--scale", "object")
    assert_one_line_error(invoke("grid", image, *args, "--crop", "people"), "--crop people needs the image's person")
    assert_one_line_error(invoke("grid", image, *args, "--crop", "1,2,3"), "--crop is 'people' or 'x,y,w,h'")
    assert_one_line_error(invoke("grid", image, *args, "--crop", "0,0,100,10"), "does not lie inside the 48x32 image")
    empty = tmp_path / "none.txt"
    empty.write_text("")
    assert_one_line_error(
        invoke("grid", image, *args, "--crop", "people", "--boxes", empty), "no person box to crop around"
    )
    assert not (tmp_path / "g.png").exists()
