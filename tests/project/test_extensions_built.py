"""CI builds every compiled extension setup.py declares: each is optional (a machine without a C compiler runs the
NumPy or Python twins), so without this check a failed build would only make CI slower and skip the twin tests."""

from __future__ import annotations

import importlib
import os
import re

import pytest

from tests import REPO_ROOT

EXTENSIONS = re.findall(r'Extension\(\s*"([\w.]+)"', (REPO_ROOT / "setup.py").read_text(encoding="utf-8"))


def test_setup_declares_the_extensions():
    assert len(EXTENSIONS) >= 7 and len(set(EXTENSIONS)) == len(EXTENSIONS)
    for name in EXTENSIONS:
        assert (REPO_ROOT / (name.replace(".", "/") + ".c")).is_file(), name


@pytest.mark.parametrize("module", EXTENSIONS)
def test_ci_builds_the_extension(module):
    if os.environ.get("CI"):
        importlib.import_module(module)  # ImportError: CI must build it (pip install -e . with a C compiler)
