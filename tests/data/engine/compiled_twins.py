"""Engine code run twice, with the compiled loops (aegis_data.engine._ckernels) and with the NumPy code they replace:
the tests of the byte contract between the two."""

from __future__ import annotations

from aegis_data.engine import kernels as K

COMPILED = K.CKERNELS


class Recorder:
    """Stands in for the compiled module and records which of its functions were called."""

    def __init__(self, module):
        self._module = module
        self.calls: list[str] = []

    def __getattr__(self, name):
        fn = getattr(self._module, name)

        def call(*args):
            self.calls.append(name)
            return fn(*args)

        return call


def both(fn, expect: tuple[str, ...] = ()):
    """(fn() with the compiled loops, fn() with the NumPy code); asserts the compiled run called each of ``expect``
    (a comparison of two NumPy runs would prove nothing)."""
    rec = Recorder(COMPILED)
    try:
        K.CKERNELS = rec
        a = fn()
        K.CKERNELS = None
        b = fn()
    finally:
        K.CKERNELS = COMPILED
    missing = [name for name in expect if name not in rec.calls]
    assert not missing, f"the compiled path did not run {missing} (called: {rec.calls})"
    return a, b
