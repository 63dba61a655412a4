"""The atmosphere statistics of `aegis realism` (aegis_data.engine.realism_atmosphere): contrast and dark channel by
depth band, He et al.'s airlight, and the width and orientation of streaks; and their place in a realism report."""

from __future__ import annotations

import cv2
import numpy as np

from aegis_data.engine import atmosphere as ATM
from aegis_data.engine.config import load_config
from aegis_data.engine.corruptions import apply_corruption, corruption_params
from aegis_data.engine.realism import set_distances, set_statistics
from aegis_data.engine.realism_atmosphere import (
    ATMOSPHERE_DISTANCES,
    airlight_colour,
    contrast_by_band,
    dark_channel,
    depth_bands,
    streak_statistics,
)
from aegis_data.engine.scene import estimate_scene
from tests.golden.frames import golden_frame
from tests.golden.scenes import oblique_frame

V1 = load_config("aegis-v1")
V2 = load_config("aegis-v2")


def _v2(img, name, sev, scene):
    return apply_corruption(img, name, sev, "atm", config=V2, scene=scene)


def _scene(img, person_px=30.0):
    return estimate_scene(img, person_px, V2.camera)


def test_realism_sees_haze_by_depth_the_dark_channel_and_the_airlight():
    frame, horizon = oblique_frame(479, 641)
    big = np.repeat(np.repeat(frame, 2, axis=0), 2, axis=1)
    big_scene = _scene(big, 60.0)
    hazy = _v2(big, "smoke_haze", 3, big_scene)
    clean_bands, hazy_bands = contrast_by_band(big), contrast_by_band(hazy)
    kept = [h / c for h, c in zip(hazy_bands, clean_bands)]
    assert kept[0] < kept[-1]  # the far band lost more
    assert dark_channel(hazy)[0] > dark_channel(big)[0]
    air = airlight_colour(hazy)
    expected = ATM.encode_table()[
        ATM.plume_airlight(corruption_params("smoke_haze", 3, V2), big, ATM.sightlines(big_scene, *big.shape[:2]))
    ]
    assert np.all(np.abs(np.asarray(air) - expected) < 12), (air, expected)


def test_realism_measures_streak_width_and_orientation():
    img = cv2.GaussianBlur(golden_frame(750, 1000), (0, 0), 4)  # a smooth scene: the streaks are its bright detail
    v1 = apply_corruption(img, "rain_streaks", 3, "atm", config=V1)
    st = streak_statistics(v1)
    assert st.anisotropy > 4 and 0.5 < st.width < 3.0
    assert abs(st.orientation - 70.0) < 12  # aegis-v1 draws its streaks at 70 degrees (+- jitter)
    assert streak_statistics(img).anisotropy < st.anisotropy / 2


def test_depth_bands_start_below_the_sky_and_run_far_to_near():
    frame, horizon = oblique_frame(479, 641)
    bands, found = depth_bands(frame)
    assert found and abs(bands[0][0] - horizon) <= 8 and bands[-1][1] == 479
    assert all(a < b for a, b in bands) and all(b == c for (_, b), (c, _) in zip(bands, bands[1:]))
    bands, found = depth_bands(golden_frame(240, 320))
    assert not found and bands[0][0] == 0


def test_a_realism_set_carries_the_atmosphere_and_its_distances():
    frame, _ = oblique_frame(479, 641)
    hazy = _v2(frame, "smoke_haze", 3, _scene(frame))
    real, rendered = set_statistics([frame]), set_statistics([hazy])
    doc = rendered.to_dict()["atmosphere"]
    assert len(doc["contrast_by_band"]) == 4 and doc["far_near_ratio"] is not None and len(doc["airlight"]) == 3
    dist = set_distances(real, rendered)
    assert set(ATMOSPHERE_DISTANCES) <= set(dist)
    assert dist["contrast_by_band"] > 0.1 and dist["dark_channel"] > 0
    assert set_distances(real, real)["contrast_by_band"] == 0.0


def test_aegis_realism_prints_the_atmosphere_rows(tmp_path):
    import shutil

    from typer.testing import CliRunner

    from aegis_cli.main import app

    runner = CliRunner()
    split = tmp_path / "split"
    result = runner.invoke(
        app,
        [
            "build-splits",
            "--n",
            "4",
            "--size",
            "160",
            "--corruptions",
            "smoke_haze",
            "--severities",
            "1",
            "--workers",
            "1",
            "--out-dir",
            str(split),
        ],
    )
    assert result.exit_code == 0, result.output
    real = tmp_path / "real"
    real.mkdir()
    for f in sorted((split / "test" / "clean").glob("*.png")):
        shutil.copy(f, real / f.name)
    result = runner.invoke(
        app, ["realism", str(real), "--condition", "smoke_haze_s1", "--split-dir", str(split)], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    for word in ("contrast_by_band", "dark_channel", "airlight", "streak_width", "streak_orientation"):
        assert word in result.stdout, word


def test_the_atmosphere_measures_check_their_region_as_the_noise_measures_do():
    """A fractional region was truncated silently by the atmosphere measures (their own copy of the region check
    skipped the integer test); all realism measures now share one check."""
    import pytest

    from aegis_data.engine.realism import noise_curve
    from aegis_data.errors import AegisError

    img = golden_frame(240, 320)
    for measure in (contrast_by_band, dark_channel, airlight_colour, noise_curve):
        with pytest.raises(AegisError, match=r"^`region` must be 4 integers"):
            measure(img, (0, 0, 100.5, 80))
