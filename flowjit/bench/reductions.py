"""Reductions of every shape against numpy: ms per call, best of 7, after a first call.

    python -m flowjit.bench.reductions [--rows 4096] [--columns 4096]

Rows (the innermost axis reduced), columns (an outer axis: blocks of outputs), every
axis, trailing axes of a cube (read as one row), argmax, siblings sharing a kernel, and a
reduction's full-shaped use (a loop kernel after it).  Every result is checked against
numpy first.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

import flowjit

CASES = {
    "x.sum(axis=1)": lambda x: x.sum(axis=1),
    "x.mean(axis=0)": lambda x: x.mean(axis=0),
    "x.sum()": lambda x: x.sum(),
    "x.max()": lambda x: x.max(),
    "cube.sum(axis=(1, 2))": lambda x: x.reshape(64, -1, 64).sum(axis=(1, 2)),
    "argmax(x, axis=1)": lambda x: np.argmax(x, axis=1),
    "argmax(x)": lambda x: np.argmax(x),
    "x.max(1) - x.min(1)": lambda x: x.max(axis=1) - x.min(axis=1),
    "x.std(axis=0)": lambda x: x.std(axis=0),
    "x - x.mean(axis=0)": lambda x: x - x.mean(axis=0),
    "x.var(axis=1)": lambda x: x.var(axis=1),
}


def best(call, repeat: int = 7) -> float:
    call()
    fastest = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        fastest = min(fastest, time.perf_counter() - start)
    return fastest


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--columns", type=int, default=4096)
    args = parser.parse_args(argv)
    x = np.random.default_rng(0).standard_normal((args.rows, args.columns)).astype(np.float32)
    print(f"float32 {args.rows}x{args.columns}, ms per call (best of 7)")
    print(f"{'program':<24}{'flowjit':>10}{'numpy':>10}{'ratio':>8}{'kernels':>9}")
    for name, function in CASES.items():
        jitted = flowjit.jit(function)
        got, want = np.asarray(jitted(x)), np.asarray(function(x))
        flowjit.wait_for_compiles()
        scale = float(np.max(np.abs(want))) or 1.0
        if got.shape != want.shape or np.max(np.abs(got.astype(np.float64) - want)) > 1e-4 * scale:
            print(f"{name:<24}  WRONG: flowjit differs from numpy")
            continue
        ours, theirs = best(lambda: jitted(x)), best(lambda: function(x))
        kernels = len(jitted.lower(x).kernel_sources())
        print(f"{name:<24}{ours * 1e3:>10.2f}{theirs * 1e3:>10.2f}{ours / theirs:>8.2f}{kernels:>9}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
