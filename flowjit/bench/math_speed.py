"""ns per element of each inlined math function, against numba's libm call and numpy.

    python -m flowjit.bench.math_speed [--size 4194304]

One loop per function over uniform inputs in [-100, 100] (positive for log); best of 7.
sigmoid has no libm counterpart; numpy's column is scipy for sigmoid and erf.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from numba import njit

from flowjit.compiler.codegen import library, mathlib
from flowjit.compiler.codegen.accuracy import reference


def _loop(function):
    @njit(error_model="numpy", fastmath={"contract"})
    def run(x, out):
        for i in range(x.shape[0]):
            out[i] = function(x[i])
    return run


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
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"{'function':<10}{'dtype':<9}{'flowjit':>10}{'numba libm':>12}{'numpy':>9}   (ns/element)")
    for (name, dtype_name), function_name in library.ROUTINES.items():
        dtype = np.dtype(dtype_name)
        low = 0.0 if name == "log" else -100.0
        x = rng.uniform(low, 100.0, args.size).astype(dtype)
        out = np.empty_like(x)
        ours = _loop(getattr(mathlib, function_name))
        libm = _loop(_libm(name)) if hasattr(math, name) else None
        numpy_function = reference(name)
        row = []
        for run in (lambda: ours(x, out), (lambda: libm(x, out)) if libm else None,
                    lambda: numpy_function(x, out=out)):
            if run is None:
                row.append("-")
                continue
            with np.errstate(all="ignore"):
                run()
                row.append(f"{_best(run) / x.size * 1e9:.2f}")
        print(f"{name:<10}{dtype_name:<9}{row[0]:>10}{row[1]:>12}{row[2]:>9}")
    return 0


def _libm(name: str):
    """numba's own math.<name>: one libm call per element."""
    function = getattr(math, name)
    return njit(inline="always")(lambda v: function(v))


if __name__ == "__main__":
    raise SystemExit(main())
