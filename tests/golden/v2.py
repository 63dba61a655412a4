"""Golden pixel hashes of every aegis-v2 cell, and their computation (the determinism matrix runs this file).

Frames: the three ``frames.py`` golden frames (near-nadir), a letterboxed one (bars the scene model must leave
alone), an oblique view with a sky, a coast with two persons (one standing in the sea) and an oblique lake
(``scenes.py``: water for the glint, turbidity and flood models); every frame at a 30-px person unit, its scene
estimated by ``aegis_data.engine.scene.estimate_scene`` (with the coast's persons). Integer-built frames, so the
inputs are identical everywhere.

    python tests/golden/v2.py                 # print the hashes as JSON (what the matrix's subprocesses do)
    python tests/golden/v2.py --write         # deliberately rewrite hashes_v2.json (only when the math changes)

Matrix flags as in ``frames.py``: ``--cv2-noopt``, ``--cv2-threads=N``, ``--ckernels=SO``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repository root, for aegis_data and tests.golden

from tests.golden.frames import GOLDEN_SIZES, apply_matrix_flags, golden_frame, pixel_hash, runtime_report  # noqa: E402
from tests.golden.scenes import coast_frame, lake_oblique_frame, letterboxed_frame, oblique_frame  # noqa: E402

HASHES_PATH = Path(__file__).with_name("hashes_v2.json")
PERSON_PX = 30.0


def v2_frames() -> dict[str, object]:
    """name -> HxWx3 uint8 frame."""
    out = {f"{h}x{w}": golden_frame(h, w) for h, w in GOLDEN_SIZES}
    out["letterbox-479x641"] = letterboxed_frame(479, 641, 48, jitter=2)
    out["oblique-479x641"] = oblique_frame(479, 641)[0]
    out["coast-479x641"] = coast_frame(479, 641, PERSON_PX)[0]
    out["lake-479x641"] = lake_oblique_frame(479, 641)[0]
    return out


def v2_persons() -> dict[str, list]:
    """name -> the person boxes (x0, y0, x1, y1) a frame's scene knows (the ground truth a build hands it)."""
    return {"coast-479x641": coast_frame(479, 641, PERSON_PX)[2]}


def compute_hashes_v2() -> dict[str, str]:
    """``{"<frame>/<corruption>_s<k>": sha256}`` for every aegis-v2 frame, corruption and severity."""
    from aegis_data.engine.config import load_config
    from aegis_data.engine.corruptions import apply_corruption
    from aegis_data.engine.scene import estimate_scene

    cfg = load_config("aegis-v2")
    out = {}
    persons = v2_persons()
    for name, frame in v2_frames().items():
        scene = estimate_scene(frame, PERSON_PX, cfg.camera, persons=persons.get(name, ()))
        for corruption in cfg.names:
            for sev in (1, 2, 3):
                out[f"{name}/{corruption}_s{sev}"] = pixel_hash(
                    apply_corruption(frame, corruption, sev, f"golden-{name}", config=cfg, scene=scene)
                )
    return out


def load_golden_v2() -> dict[str, str]:
    return json.loads(HASHES_PATH.read_text())["hashes"]


def main(argv: list[str]) -> None:
    apply_matrix_flags(argv)
    hashes = compute_hashes_v2()
    if "--write" in argv:
        from aegis_data.engine.config import load_config
        from aegis_data.files.imageio import write_bytes_atomic

        cfg = load_config("aegis-v2")
        doc = {
            "suite": cfg.suite,
            "config_hash": cfg.config_hash,
            "seed": cfg.seed,
            "person_px": PERSON_PX,
            "note": "pixel SHA-256 of tests/golden/v2.py frames under aegis-v2; regenerate with v2.py --write",
            "hashes": hashes,
        }
        write_bytes_atomic(HASHES_PATH, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())
        print(f"wrote {len(hashes)} hashes to {HASHES_PATH}")
        return
    print(json.dumps({"hashes": hashes, "runtime": runtime_report()}))


if __name__ == "__main__":
    main(sys.argv[1:])
