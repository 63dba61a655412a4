"""Project-wide rules that no single module's tests can see."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests import REPO_ROOT

ROOT = REPO_ROOT
PRODUCT_DIRS = ("aegis_data", "aegis_eval", "cli")

# Draws from a global or implicitly seeded generator. Explicit bit generators keyed by a hash are allowed
# (aegis_data.engine.seeding constructs numpy's Philox directly); seeding torch for training is allowed.
GLOBAL_RNG = re.compile(
    r"np\.random\.(seed|rand|randn|randint|random|choice|shuffle|permutation|normal|uniform|default_rng|RandomState)\b"
    r"|^\s*import random\b|^\s*from random import|\brandom\.(random|randint|choice|shuffle|seed|uniform)\(",
    re.MULTILINE,
)


def _product_files():
    for d in PRODUCT_DIRS:
        yield from sorted((ROOT / d).rglob("*.py"))


def test_no_global_random_number_generator_in_product_code():
    offenders = []
    for path in _product_files():
        for m in GLOBAL_RNG.finditer(path.read_text(encoding="utf-8")):
            line = path.read_text(encoding="utf-8")[: m.start()].count("\n") + 1
            offenders.append(f"{path.relative_to(ROOT)}:{line}: {m.group(0).strip()}")
    assert not offenders, "global/implicit RNG use:\n" + "\n".join(offenders)


def test_the_rng_pattern_catches_what_it_should():
    assert GLOBAL_RNG.search("x = np.random.rand(3)")
    assert GLOBAL_RNG.search("rng = np.random.default_rng()")
    assert GLOBAL_RNG.search("import random\n")
    assert not GLOBAL_RNG.search("bits = np.random.Philox(key=k)")


def test_ci_turns_a_missing_dependency_skip_into_a_failure(tmp_path):
    (tmp_path / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text(encoding="utf-8"))
    (tmp_path / "test_needs_dep.py").write_text(
        "import pytest\n\n\ndef test_needs_it():\n    pytest.importorskip('aegis_no_such_module_xyz')\n"
    )
    base = {k: v for k, v in os.environ.items() if k != "CI"}

    def run(env):
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    local = run(base)
    assert local.returncode == 0 and "1 skipped" in local.stdout, local.stdout
    ci = run({**base, "CI": "true"})
    assert ci.returncode == 1 and "1 failed" in ci.stdout, ci.stdout
    assert "missing dependency" in ci.stdout


def test_cli_start_up_imports_no_heavy_library():
    # The console script must start fast and work with the core install only (make demo installs no torch).
    code = (
        "import sys, aegis_cli.main; heavy = [m for m in ('torch', 'ultralytics', 'matplotlib', 'torchvision') "
        "if m in sys.modules]; print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"imported at CLI start-up: {out.stdout.strip()}"


# Ways to write an image file other than the toolkit's own PNG writer (aegis_data/files/png.py). Encoding through
# OpenCV, Pillow or matplotlib would make artefact bytes depend on the host's zlib again.
OTHER_PNG_WRITERS = re.compile(
    r"cv2\.imencode|cv2\.imwrite|\.savefig\(|\bImage\.fromarray\b|\.save\([^)]*png", re.IGNORECASE
)


def test_every_png_goes_through_the_toolkits_writer():
    offenders = []
    for path in _product_files():
        if path == ROOT / "aegis_data" / "files" / "png.py":  # the writer itself (its docstring names what it replaces)
            continue
        text = path.read_text(encoding="utf-8")
        for m in OTHER_PNG_WRITERS.finditer(text):
            offenders.append(f"{path.relative_to(ROOT)}:{text[: m.start()].count(chr(10)) + 1}: {m.group(0)}")
    assert not offenders, "image writes outside aegis_data/files/png.py:\n" + "\n".join(offenders)


def test_the_png_writer_pattern_catches_what_it_should():
    for line in (
        "ok, buf = cv2.imencode('.png', img)",
        "cv2.imwrite(p, img)",
        "fig.savefig(buf, format='png')",
        "Image.fromarray(a).save(p)",
        "im.save(out, 'PNG')",
    ):
        assert OTHER_PNG_WRITERS.search(line), line
    assert not OTHER_PNG_WRITERS.search("data = encode_png(rgb)")


def test_the_product_cites_no_internal_document():
    """Messages and docs name the shipped docs/ (or state the rule); the internal spec is not shipped, so a
    "SPEC §N" reference is one a user cannot follow."""
    offenders = []
    for d in (*PRODUCT_DIRS, "docs"):
        for path in sorted((ROOT / d).rglob("*")):
            if path.is_symlink() or not path.is_file() or path.suffix not in (".py", ".md", ".yaml", ".txt", ".html"):
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if "SPEC" in line:
                    offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders, "citations of the internal spec:\n" + "\n".join(offenders)


def test_the_installed_cli_package_is_aegis_cli():
    # pip installs the command line as aegis_cli (from the cli/ folder): a top-level "cli" package would collide
    # with any other package of that name in the user's environment.
    from importlib import metadata

    dist = metadata.distribution("aegisbench")
    assert set((dist.read_text("top_level.txt") or "").split()) == {"aegis_cli", "aegis_data", "aegis_eval"}
    (script,) = [e for e in dist.entry_points if e.group == "console_scripts" and e.name == "aegis"]
    assert script.value == "aegis_cli.main:main"
