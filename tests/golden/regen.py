"""Deliberately regenerate tests/golden/hashes.json (run only when the corruption math is meant to change).

    .venv/bin/python tests/golden/regen.py

Commit the new file together with the change that moved the hashes, and say why in the commit message.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repository root, for aegis_data

from tests.golden.frames import GOLDEN_SUITE, HASHES_PATH, compute_hashes  # noqa: E402


def main() -> None:
    from aegis_data.engine.config import load_config
    from aegis_data.files.imageio import write_bytes_atomic

    cfg = load_config(GOLDEN_SUITE)
    doc = {
        "suite": cfg.suite,
        "config_hash": cfg.config_hash,
        "seed": cfg.seed,
        "note": "pixel SHA-256 (b'HxWx3:' + bytes) of tests/golden/frames.py frames; regenerate with regen.py",
        "hashes": compute_hashes(),
    }
    write_bytes_atomic(HASHES_PATH, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())
    print(f"wrote {len(doc['hashes'])} hashes to {HASHES_PATH}")


if __name__ == "__main__":
    main()
