"""Random numpy programs: each traces, prints, parses back, verifies and interprets equal to numpy."""

import numpy as np
from hypothesis import given, settings

import flowjit
from flowjit.compiler import ir
from helpers import assert_same_result
from random_programs import random_programs


@settings(max_examples=150)
@given(random_programs())
def test_random_program_traces_and_interprets_like_numpy(program):
    args = program.make_args(np.random.default_rng(0))
    with np.errstate(all="ignore"):
        expected = program(*args)
    lowered = flowjit.jit(program).lower(*args)
    text = lowered.as_text()
    reparsed = ir.parse(text)
    assert ir.print_graph(reparsed) == text, program.describe()
    ir.verify(reparsed)
    got = flowjit.jit(program, backend="interpreter")(*args)
    assert_same_result(got, tuple(np.asarray(e)[()] if np.ndim(e) == 0 else e for e in expected))
    for value, want in zip(flowjit.interpret(reparsed, *args), expected):
        np.testing.assert_array_equal(value, want, strict=False)
