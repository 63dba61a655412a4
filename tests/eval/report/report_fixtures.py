"""Score JSONs of two models written by the real scorer, for the report tests (test_report, test_report_browser),
and report.tex compiled by pdflatex."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from aegis_data.engine.config import load_config
from aegis_eval.metrics.bootstrap import BootstrapOptions
from aegis_eval.protocols.predictions import detections_from_results, ground_truth_from_coco
from aegis_eval.protocols.samples_file import samples_bytes, score_samples, with_samples_hash, write_samples
from aegis_eval.protocols.scoring import write_score_json
from tests.eval.protocols.scoring_memory import score_conditions_with_samples
from tests.eval.protocols.test_scoring import synthetic_gt, synthetic_predictions


def score_two_models(root: Path, n_images: int = 24, n_bootstrap: int = 40) -> list[Path]:
    """Two full sweeps on one synthetic split (dataset "synthetic"), written to ``root/<label>.json``: detector_a
    at threshold 0.5 (max-f1), detector_b at 0.6 frozen by the risk rule ``fp_per_image<=2``; each with its
    samples file beside it, as ``aegis score --json`` writes it (the report's paired differences)."""
    coco = synthetic_gt(n_images, 1)
    gt = ground_truth_from_coco(coco)
    paths = []
    for label, seed, thr, rule in (("detector_a", 2, 0.5, "max-f1"), ("detector_b", 9, 0.6, "fp_per_image<=2")):
        dets = {
            c: detections_from_results(synthetic_predictions(coco, c, seed=seed), gt)
            for c in load_config().conditions()
        }
        res, samples = score_conditions_with_samples(
            gt,
            dets,
            thr,
            bootstrap=BootstrapOptions(n_bootstrap=n_bootstrap, seed=0),
            label=label,
            threshold_info={"rule": rule, "file": None, "sha256": None},
        )
        res["dataset"] = "synthetic"
        per_resample = score_samples(samples, gt.image_ids, None, res)
        if per_resample is not None:
            data = samples_bytes(per_resample)
            res = with_samples_hash(res, data)
            write_samples(data, root / f"{label}.json")
        write_score_json(res, root / f"{label}.json")
        paths.append(root / f"{label}.json")
    return paths


def compile_report_tex(report_dir: Path, tmp_path: Path, ran: str, passes: int = 1) -> Path:
    """report.pdf of ``report_dir``'s report.tex, compiled ``passes`` times by pdflatex (two let references settle)
    in a copy at ``tmp_path / "tex"``; skipped, saying what ``ran`` before, when pdflatex is not installed (in CI a
    skip fails: tests/conftest.py)."""
    if shutil.which("pdflatex") is None:
        pytest.skip(
            f"pdflatex not installed (apt-get install texlive-latex-base texlive-latex-recommended "
            f"texlive-fonts-recommended; .ci/run installs it); {ran}"
        )
    work = tmp_path / "tex"
    shutil.copytree(report_dir, work)
    for _ in range(passes):
        run = subprocess.run(
            ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "report.tex"],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, run.stdout[-3000:]
    return work / "report.pdf"
