"""Build of the optional compiled engine loops (aegis_data._ckernels); everything else is in pyproject.toml.

The extension is optional: where it cannot be compiled the engine runs its NumPy code, which produces the same
bytes, more slowly. The flags forbid the two things that would change results: fusing a*b+c into one FMA
rounding (-ffp-contract=off; MSVC's /fp:precise does not contract) and fast-math reassociation.
"""

import sys

from setuptools import Extension, setup

if sys.platform == "win32":
    flags, libraries = ["/O2", "/fp:precise"], []
else:
    flags, libraries = ["-O3", "-std=c99", "-ffp-contract=off", "-fno-fast-math", "-fno-strict-aliasing"], ["m"]

setup(
    ext_modules=[
        Extension("aegis_data._ckernels", ["aegis_data/_ckernels.c"], extra_compile_args=flags, libraries=libraries,
                  optional=True),
    ]
)
