"""Random numpy programs: each traces, prints, parses back, verifies and interprets equal to numpy."""

import numpy as np
import pytest
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


STATE_MODES = {"fused": {}, "unfused": {"fuse": False}, "interpreter": {"backend": "interpreter"},
               "two devices": {"devices": ["cpu:0", "cpu:1"], "placement": "random", "placement_seed": 1}}


@settings(max_examples=20)
@given(random_programs(max_steps=10, state=True))
def test_random_programs_with_variables_equal_numpy_compiled_and_interpreted(program):
    """Reads, assigns and control dependencies: two calls (the state carries over), every way of
    running the program, the outputs and the variables' final values against numpy's.  20
    derandomised programs here (each compiled fused, unfused and on two devices); 40 under
    ``make test-slow`` (test_more_random_programs_with_variables)."""
    _check_program_with_variables(program)


@pytest.mark.sweep
@settings(max_examples=40)
@given(random_programs(max_steps=10, state=True))
def test_more_random_programs_with_variables(program):
    """test_random_programs_with_variables_equal_numpy_compiled_and_interpreted on 40 programs
    (a sweep: ``make test-slow`` runs it)."""
    _check_program_with_variables(program)


def _check_program_with_variables(program):
    from helpers import close, tolerance_for
    from random_programs import NumpyVariable
    args = program.make_args(np.random.default_rng(0))
    oracle_variables = program.make_variables(np.random.default_rng(1), NumpyVariable)
    oracle = program.bind(oracle_variables)
    with np.errstate(all="ignore"):
        expected = [oracle(*args) for _ in range(2)]
    for mode, options in STATE_MODES.items():
        variables = program.make_variables(np.random.default_rng(1), flowjit.Variable)
        jitted = flowjit.jit(program.bind(variables, flowjit.control_dependencies), **options)
        text = jitted.lower(*args).as_text()
        assert ir.print_graph(ir.parse(text)) == text, program.describe()
        for call, want in enumerate(expected):
            got = jitted(*args)
            got = got if isinstance(got, tuple) else (got,)
            for value, wanted in zip(got, want):
                value, wanted = np.asarray(value), np.asarray(wanted)
                assert (value.dtype, value.shape) == (wanted.dtype, wanted.shape), (mode, program.describe())
                rtol = tolerance_for(wanted, args) * 4 if wanted.dtype.kind == "f" else 0.0
                assert close(value, wanted, rtol), f"{mode}, call {call}: {value!r} vs {wanted!r}\n{program.describe()}"
        for variable, oracle_variable in zip(variables, oracle_variables):
            final, wanted = variable.numpy(), oracle_variable.numpy()
            rtol = tolerance_for(wanted, args) * 4 if wanted.dtype.kind == "f" else 0.0
            assert final.dtype == wanted.dtype and close(final, wanted, rtol), \
                f"{mode}: variable {variable.name}: {final!r} vs {wanted!r}\n{program.describe()}"


def test_random_programs_with_variables_read_assign_and_wait_on_control_dependencies():
    """What the test above draws: most programs use variables, many read, assign and wait on a
    control dependency, and the two-device mode puts variables on either device."""
    from collections import Counter

    from hypothesis import HealthCheck
    seen, devices = Counter(), Counter()

    @settings(max_examples=80, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(random_programs(max_steps=10, state=True))
    def collect(program):
        kinds = {step[0] for step in program.steps}
        seen["programs"] += 1
        seen.update(kinds & {"read", "assign", "assign_add", "control"})
        seen["read, assign and control"] += {"read", "control"} <= kinds and bool(kinds & {"assign", "assign_add"})
        if program.variables and sum(devices.values()) < 200:
            variables = program.make_variables(np.random.default_rng(1), flowjit.Variable)
            jitted = flowjit.jit(program.bind(variables, flowjit.control_dependencies), **STATE_MODES["two devices"])
            placed = jitted.lower(*program.make_args(np.random.default_rng(0))).placed
            devices.update(node.device.rsplit("/", 1)[-1] for node in placed.nodes
                           if node.op in (ir.ops.read_variable, ir.ops.assign_variable))

    collect()
    count = seen["programs"]
    assert seen["read"] > count / 4 and seen["assign"] + seen["assign_add"] > count / 2
    assert seen["control"] > count / 8 and seen["read, assign and control"] > count / 16, seen
    assert devices["device:cpu:0"] > 0 and devices["device:cpu:1"] > 0, devices
