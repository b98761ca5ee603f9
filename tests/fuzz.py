"""`make fuzz`: fresh random programs, compiled fused and unfused, against the interpreter.

    python tests/fuzz.py [--count 2000] [--max-steps 10]

Unlike the test suite (derandomised), each run draws new programs.  Prints progress,
each mismatch with its program, and the total; exits 1 if any program mismatched.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from hypothesis import HealthCheck, given, settings

sys.path.insert(0, os.path.dirname(__file__))

import flowjit  # noqa: E402
from helpers import close, tolerance_for  # noqa: E402
from random_programs import random_programs  # noqa: E402


def mismatch(program) -> str | None:
    args = program.make_args(np.random.default_rng(0))
    expected = flowjit.interpret(flowjit.jit(program).lower(*args).graph, *args)
    for fuse in (True, False):
        try:
            got = flowjit.jit(program, fuse=fuse)(*args)
        except Exception as error:                       # a crash is a mismatch too
            return f"fuse={fuse}: {type(error).__name__}: {error}"
        got = got if isinstance(got, tuple) else (got,)
        for index, (value, want) in enumerate(zip(got, expected)):
            value = np.asarray(value)
            if value.dtype != want.dtype or value.shape != want.shape:
                return f"fuse={fuse}: output {index} is {value.dtype}{value.shape}, expected {want.dtype}{want.shape}"
            rtol = tolerance_for(want, args) if want.dtype.kind == "f" else 0.0
            if not close(value, want, rtol):
                return f"fuse={fuse}: output {index} differs: {value!r} vs {want!r}"
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--max-steps", type=int, default=10)
    args = parser.parse_args(argv)
    seen, failures = [0], []
    start = time.perf_counter()

    @settings(max_examples=args.count, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(random_programs(max_steps=args.max_steps))
    def fuzz(program):
        seen[0] += 1
        with np.errstate(all="ignore"):
            problem = mismatch(program)
        if problem:
            failures.append((program, problem))
            print(f"MISMATCH #{len(failures)}: {problem}\n{program.describe()}", flush=True)
        if seen[0] % 100 == 0:
            print(f"{seen[0]} programs, {len(failures)} mismatches, {time.perf_counter() - start:.0f} s",
                  flush=True)

    fuzz()
    print(f"fuzz: {seen[0]} random programs (fused and unfused), {len(failures)} mismatches, "
          f"{time.perf_counter() - start:.0f} s; {flowjit.stats()['kernel_compiles']} kernels compiled")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
