"""Packages (cli/ installs as aegis_cli) and the optional compiled extensions; everything else is in pyproject.toml.

aegis_data.engine._ckernels holds the engine's inner loops, aegis_data.files._cpng the PNG writer's deflate,
aegis_eval.metrics._cmatch the COCO matching, aegis_eval.protocols._cresults the reader of plain COCO results files,
aegis_eval.protocols._cinputs a parsed GT's annotation columns, aegis_data.files._cjson the JSON reader's screen
(each C source sits beside the Python code it mirrors). All are optional:
where they cannot be compiled the toolkit runs its NumPy code, which produces the same bytes, more slowly. The
flags forbid the two things that would change the engine's results: fusing a*b+c into one FMA rounding
(-ffp-contract=off; MSVC's /fp:precise does not contract) and fast-math reassociation (the deflate is integer-only).
Two flags change no value and let per-pixel loops with sqrt and selects vectorise (the water models' glint loop):
-fno-math-errno (sqrt need not set errno, which nothing reads) and -fno-trapping-math (no code relies on a floating-
point trap, so a select may compute both of its sides).
"""

import sys

from setuptools import Extension, find_packages, setup

if sys.platform == "win32":
    flags, libraries = ["/O2", "/fp:precise"], []
else:
    flags, libraries = (
        [
            "-O3",
            "-std=c99",
            "-ffp-contract=off",
            "-fno-fast-math",
            "-fno-strict-aliasing",
            "-fno-math-errno",
            "-fno-trapping-math",
        ],
        ["m"],
    )

setup(
    # cli/ is the source folder of the installed package aegis_cli (a top-level "cli" would collide with any other
    # package of that name); inside it every import is relative, so it runs under that name only.
    packages=find_packages(include=["aegis_data", "aegis_data.*", "aegis_eval", "aegis_eval.*"]) + ["aegis_cli"],
    package_dir={"aegis_cli": "cli"},
    ext_modules=[
        Extension(
            "aegis_data.engine._ckernels",
            ["aegis_data/engine/_ckernels.c"],
            extra_compile_args=flags,
            libraries=libraries,
            optional=True,
        ),
        Extension(
            "aegis_eval.metrics._cbootstrap",
            ["aegis_eval/metrics/_cbootstrap.c"],
            extra_compile_args=flags,
            libraries=libraries,
            optional=True,
        ),
        Extension(
            "aegis_data.files._cpng",
            ["aegis_data/files/_cpng.c"],
            extra_compile_args=flags,
            libraries=libraries,
            optional=True,
        ),
        Extension(
            "aegis_data.files._cjson",
            ["aegis_data/files/_cjson.c"],
            extra_compile_args=flags,
            libraries=libraries,
            optional=True,
        ),
        Extension(
            "aegis_eval.metrics._cmatch",
            ["aegis_eval/metrics/_cmatch.c"],
            extra_compile_args=flags,
            libraries=libraries,
            optional=True,
        ),
        Extension(
            "aegis_eval.protocols._cresults",
            ["aegis_eval/protocols/_cresults.c"],
            extra_compile_args=flags,
            libraries=libraries,
            optional=True,
        ),
        Extension(
            "aegis_eval.protocols._cinputs",
            ["aegis_eval/protocols/_cinputs.c"],
            extra_compile_args=flags,
            libraries=libraries,
            optional=True,
        ),
    ],
)
