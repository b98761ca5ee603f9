"""`make fuzz`: fresh random programs, compiled, against the interpreter.

    python tests/fuzz.py [--count 2000] [--max-steps 10] [--state mixed|off|only]

Unlike the test suite (derandomised), each run draws new programs.  Programs without
variables run fused and unfused; programs with variables (``random_programs(state=True)``:
reads, assigns, control dependencies) run fused, unfused and on two devices (a random
placement, so a variable lands on either), twice each, comparing the results and the
variables' final values with the interpreter's.  ``--state mixed`` (the default) draws
both kinds.  Prints progress, each mismatch with its program, and the total; exits 1 if
any program mismatched.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))

import flowjit  # noqa: E402
from helpers import close, tolerance_for  # noqa: E402
from random_programs import random_programs  # noqa: E402

TWO = ["cpu:0", "cpu:1"]


def differs(got, expected, args, what: str, scale: float = 1.0) -> str | None:
    """Why the arrays ``got`` differ from ``expected`` (dtype, shape or values), or None."""
    got = got if isinstance(got, (tuple, list)) else (got,)
    for index, (value, want) in enumerate(zip(got, expected)):
        value, want = np.asarray(value), np.asarray(want)
        if value.dtype != want.dtype or value.shape != want.shape:
            return f"{what} {index} is {value.dtype}{value.shape}, expected {want.dtype}{want.shape}"
        rtol = tolerance_for(want, args) * scale if want.dtype.kind == "f" else 0.0
        if not close(value, want, rtol):
            return f"{what} {index} differs: {value!r} vs {want!r}"
    return None


def mismatch(program) -> str | None:
    args = program.make_args(np.random.default_rng(0))
    expected = flowjit.interpret(flowjit.jit(program).lower(*args).graph, *args)
    for fuse in (True, False):
        try:
            got = flowjit.jit(program, fuse=fuse)(*args)
        except Exception as error:                       # a crash is a mismatch too
            return f"fuse={fuse}: {type(error).__name__}: {error}"
        problem = differs(got, expected, args, f"fuse={fuse}: output")
        if problem:
            return problem
    return None


def state_mismatch(program, placement_seed: int) -> str | None:
    """Two calls per way of running, each on fresh variables, against the interpreter's."""
    args = program.make_args(np.random.default_rng(0))

    def run(options):
        variables = program.make_variables(np.random.default_rng(1), flowjit.Variable)
        jitted = flowjit.jit(program.bind(variables, flowjit.control_dependencies), **options)
        calls = [jitted(*args) for _ in range(2)]
        return calls, [variable.numpy() for variable in variables]

    expected_calls, expected_variables = run({"backend": "interpreter"})
    modes = {"fused": {}, "unfused": {"fuse": False},
             "two devices": {"devices": TWO, "placement": "random", "placement_seed": placement_seed}}
    for mode, options in modes.items():
        try:
            calls, variables = run(options)
        except Exception as error:                       # a crash is a mismatch too
            return f"{mode}: {type(error).__name__}: {error}"
        for call, (got, want) in enumerate(zip(calls, expected_calls)):
            want = want if isinstance(want, tuple) else (want,)
            problem = differs(got, want, args, f"{mode}, call {call}: output", scale=4)
            if problem:
                return problem
        problem = differs(variables, expected_variables, args, f"{mode}: variable", scale=4)
        if problem:
            return problem
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--max-steps", type=int, default=10)
    parser.add_argument("--state", choices=("mixed", "off", "only"), default="mixed",
                        help="draw programs with variables too (mixed), never (off) or only (only)")
    args = parser.parse_args(argv)
    seen, stateful, failures = [0], [0], []
    start = time.perf_counter()
    plain = st.tuples(random_programs(max_steps=args.max_steps), st.just(0))
    with_state = st.tuples(random_programs(max_steps=args.max_steps, state=True), st.integers(0, 2 ** 16))
    programs = {"mixed": st.one_of(plain, with_state), "off": plain, "only": with_state}[args.state]

    @settings(max_examples=args.count, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(programs)
    def fuzz(drawn):
        program, placement_seed = drawn
        seen[0] += 1
        stateful[0] += bool(program.variables)
        with np.errstate(all="ignore"):
            problem = state_mismatch(program, placement_seed) if program.variables else mismatch(program)
        if problem:
            failures.append((program, problem))
            print(f"MISMATCH #{len(failures)}: {problem}\n{program.describe()}", flush=True)
        if seen[0] % 100 == 0:
            print(f"{seen[0]} programs ({stateful[0]} with variables), {len(failures)} mismatches, "
                  f"{time.perf_counter() - start:.0f} s", flush=True)

    fuzz()
    print(f"fuzz: {seen[0]} random programs ({stateful[0]} with variables: fused, unfused, two devices; the others "
          f"fused and unfused), {len(failures)} mismatches, {time.perf_counter() - start:.0f} s; "
          f"{flowjit.stats()['kernel_compiles']} kernels compiled")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
