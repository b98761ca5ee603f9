"""ns per element of each inlined math function, against numba's libm call and numpy.

    python -m flowjit.bench.math_speed [--size 4194304] [--repeat 7]

One loop per function over uniform inputs in [-100, 100] (positive for the logs, above -1
for log1p, above 1 for arccosh, in [-1, 1] for arcsin, arccos and arctanh, both arguments for
arctan2 and logaddexp); best of 7.
sigmoid, cbrt (numba has no math.cbrt) and logaddexp have no libm counterpart; numpy's column is scipy for sigmoid and erf.  "fast" is the
function's fast path where it has one (sin, cos, tan: ``fj.sin_f32_fast``), which kernels take
for the blocks whose arguments all fit it (every input here does).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from numba import njit

from flowjit.compiler.codegen import library
from flowjit.compiler.codegen.accuracy import BINARY, reference
from flowjit.config import kernel_vector_bits

LIBM = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arctan2": "atan2", "arcsinh": "asinh",
        "arccosh": "acosh", "arctanh": "atanh", "cbrt": None, "logaddexp": None, "logaddexp2": None}
LOW = {"log": 0.0, "log2": 0.0, "log10": 0.0, "log1p": -1.0, "arcsin": -1.0, "arccos": -1.0, "arccosh": 1.0,
       "arctanh": -1.0}
UNIT = ("arcsin", "arccos", "arctanh")          # arguments in [-1, 1]


def _loop(function, binary: bool = False):
    """A loop over ``function`` as kernels compile it: at the vector width they ask for."""
    bits = kernel_vector_bits() or 0
    width = library.vector_width if bits else _no_width

    if binary:
        @njit(error_model="numpy", fastmath={"contract"})
        def run_binary(x, y, out):
            width(bits)
            for i in range(x.shape[0]):
                out[i] = function(x[i], y[i])
        return run_binary

    @njit(error_model="numpy", fastmath={"contract"})
    def run(x, out):
        width(bits)
        for i in range(x.shape[0]):
            out[i] = function(x[i])
    return run


@njit
def _no_width(bits):
    pass


def _best(call, repeat: int = 7) -> float:
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1 << 22)
    parser.add_argument("--repeat", type=int, default=7, help="runs per measurement; the best counts")
    parser.add_argument("--functions", metavar="F1,F2", help="measure only these (default: every routine)")
    args = parser.parse_args(argv)
    chosen = set(args.functions.split(",")) if args.functions else None
    rng = np.random.default_rng(0)
    print(f"{'function':<10}{'dtype':<9}{'flowjit':>10}{'fast':>8}{'numba libm':>12}{'numpy':>9}   (ns/element)")
    for (name, dtype_name), function_name in library.ROUTINES.items():
        if chosen is not None and name not in chosen:
            continue
        dtype = np.dtype(dtype_name)
        low = LOW.get(name, -100.0)
        high = 1.0 if name in UNIT else 100.0
        binary = name in BINARY
        arguments = [rng.uniform(low, high, args.size).astype(dtype) for _ in range(2 if binary else 1)]
        out = np.empty_like(arguments[0])
        ours = _loop(library.FUNCTIONS[function_name], binary)
        libm_name = LIBM.get(name, name)
        libm = _loop(_libm(libm_name, binary), binary) if libm_name and hasattr(math, libm_name) else None
        fast_function = library.FUNCTIONS.get(f"{function_name}_fast")
        fast = _loop(fast_function, binary) if fast_function is not None else None
        numpy_function = reference(name)
        row = []
        for run in (lambda: ours(*arguments, out), (lambda: fast(*arguments, out)) if fast else None,
                    (lambda: libm(*arguments, out)) if libm else None, lambda: numpy_function(*arguments, out=out)):
            if run is None:
                row.append("-")
                continue
            with np.errstate(all="ignore"):
                run()
                row.append(f"{_best(run, args.repeat) / out.size * 1e9:.2f}")
        print(f"{name:<10}{dtype_name:<9}{row[0]:>10}{row[1]:>8}{row[2]:>12}{row[3]:>9}")
    return 0


def _libm(name: str, binary: bool = False):
    """numba's own math.<name>: one libm call per element."""
    function = getattr(math, name)
    if binary:
        return njit(inline="always")(lambda v, w: function(v, w))
    return njit(inline="always")(lambda v: function(v))


if __name__ == "__main__":
    raise SystemExit(main())
