"""numba code that is not flowjit's, in a process where flowjit is: a numba function may call
the kernel library (``fj``) before flowjit has loaded it, and numba types arrays as it always
did after flowjit registered its typing rule for plain ndarrays (numba_cache.py)."""

import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).parent.parent.parent


OUTSIDE_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    from numba import njit
    from flowjit.compiler.codegen import library as fj

    @njit
    def kernel(x, out):                # as a kernel copied from flowjit dump --stage kernels binds fj
        for i in range(x.size):
            out[i] = fj.exp_f32(x[i])
    x = np.linspace(-3, 3, 17).astype(np.float32)
    out = np.empty_like(x)
    assert "flowjit.compiler.codegen.mathlib" not in sys.modules
    kernel(x, out)
    print(np.max(np.abs(out - np.exp(x)) / np.exp(x)))
""")


def test_numba_code_outside_flowjit_can_call_the_library_before_it_is_loaded(tmp_path):
    """A numba function whose compile is the first to use ``fj`` (the library then loads
    inside that compile, after numba took in registrations) still types the library's
    intrinsics: the load refreshes numba's contexts."""
    result = subprocess.run([sys.executable, "-c", OUTSIDE_SCRIPT], cwd=ROOT, capture_output=True, text=True,
                            env=dict(os.environ, FLOWJIT_CACHE_DIR=str(tmp_path)))
    assert result.returncode == 0, result.stderr
    assert float(result.stdout.split()[-1]) < 1e-6


def test_numba_types_arrays_as_before_once_flowjit_has_loaded():
    """flowjit's typeof of an ndarray (numba_cache.py, without numba's MaskedArray question)
    gives numba's types, and a MaskedArray still gets numba's error."""
    import numba
    from numba.core import errors, types
    from flowjit.compiler.codegen import numba_cache  # noqa: F401  (registers it)
    base = np.arange(24.0).reshape(4, 6)
    frozen = base.copy()
    frozen.flags.writeable = False
    cases = [(base, types.float64, 2, "C", False), (base.T, types.float64, 2, "F", False),
             (base[:, ::2], types.float64, 2, "A", False), (frozen, types.float64, 2, "C", True),
             (np.zeros(3, np.int16), types.int16, 1, "C", False), (np.zeros((), np.bool_), types.boolean, 0, "C", False),
             (np.zeros(2, np.complex64), types.complex64, 1, "C", False)]
    for array, dtype, ndim, layout, readonly in cases:
        assert numba.typeof(array) == types.Array(dtype, ndim, layout, readonly=readonly), array
    with pytest.raises(errors.NumbaTypeError, match="MaskedArray"):
        numba.typeof(np.ma.array([1.0, 2.0]))
    with pytest.raises(errors.NumbaValueError, match="Unsupported array dtype"):
        numba.typeof(np.zeros(2, np.dtype("V8")))
