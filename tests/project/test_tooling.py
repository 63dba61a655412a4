"""The packages declare their annotations (PEP 561) and the checks CI runs are configured in pyproject.toml."""

import glob

import tomllib

from tests import REPO_ROOT

ROOT = REPO_ROOT
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_both_packages_ship_py_typed():
    data = PYPROJECT["tool"]["setuptools"]["package-data"]
    for package in ("aegis_data", "aegis_eval"):
        assert (ROOT / package / "py.typed").is_file(), package
        patterns = [*data.get("*", []), *data.get(package, [])]
        assert any(glob.glob(pattern, root_dir=ROOT / package) == ["py.typed"] for pattern in patterns), package


def test_ci_runs_lint_types_and_coverage_before_the_suite():
    tool = PYPROJECT["tool"]
    assert tool["ruff"]["line-length"] == 120
    assert {"F", "I", "B", "UP", "C90"} <= set(tool["ruff"]["lint"]["select"])
    assert tool["ruff"]["lint"]["mccabe"]["max-complexity"] > 0
    assert set(tool["mypy"]["files"]) == {"aegis_data", "aegis_eval"}
    assert tool["coverage"]["report"]["fail_under"] > 0
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = makefile.split("\ntest:", 1)[1]
    assert recipe.split("\n", 1)[0].split() == ["lint", "typecheck"]
    assert "--cov" in recipe.split("\n", 2)[1]
    assert "scripts/check_second_env.sh" in recipe.split("\n\n", 1)[0]  # the second environment of the matrix
    pins = (ROOT / "constraints.txt").read_text(encoding="utf-8")
    for tool_name in ("ruff==", "mypy==", "pytest-cov=="):
        assert tool_name in pins
