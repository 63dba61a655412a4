"""The test suite, laid out like the packages it tests (tests/README.md says which folder a test goes in).

A package, so that every test module has one dotted name (``tests.data.split.test_verify``) however pytest is
started, and shared helpers import as ``from tests.<folder>.<module> import ...``. The paths below stay right
wherever a test file sits, so no test computes the repository root from its own depth.
"""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES_DIR = REPO_ROOT / "tests" / "fixtures"
