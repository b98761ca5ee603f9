"""concat-regions: elementwise work over np.concatenate / np.roll / np.stack / np.pad runs per
region of the pieces, so it fuses across the join.  Every program is checked three ways: the
optimized graph interpreted gives bit for bit what the traced graph gives (the pass only
moves work between regions), and the compiled program matches the interpreter."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowjit
from flowjit.bench.programs.arrays import padded_gradient, shift_concat, stack_rgb     # the corpus's own
from flowjit.compiler.ir import ops
from flowjit.compiler.passes.concat_regions import MAX_REGIONS
from tests.helpers import check_against_interpreter

rng = np.random.default_rng(7)


def _interpreted_alike(jitted, args) -> None:
    lowered = jitted.lower(*args)
    with np.errstate(all="ignore"):
        traced = flowjit.interpret(lowered.graph, *args)
        optimized = flowjit.interpret(lowered.optimized, *args)
    for got, want in zip(optimized, traced):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def _nodes(graph, op):
    return [node for node in graph.nodes if node.op is op]


def wave_step(u, u_prev):
    lap = np.roll(u, 1) - 2 * u + np.roll(u, -1)
    return 2 * u - u_prev + 0.01 * lap


def f64(*shape):
    return rng.standard_normal(shape)


PROGRAMS = {
    "wave_step": (wave_step, (f64(37), f64(37))),
    "roll_2d": (lambda x: np.roll(x, 2, axis=1) * x + np.roll(x, -1, axis=0), (f64(5, 7),)),
    "shift_concat": (shift_concat, (f64(6, 9).astype(np.float32),)),
    "stack_rgb": (stack_rgb, tuple(rng.uniform(-0.2, 1.2, 11).astype(np.float32) for _ in range(3))),
    "stack_first": (lambda x, y: np.stack([x, y]) * np.array([[2.0], [3.0]]), (f64(8), f64(8))),
    "padded_gradient": (padded_gradient, (f64(6, 8),)),
    "pad_constant": (lambda u: np.pad(u, 2) * 3 + 1, (f64(4, 5),)),
    "pad_reflect": (lambda u: np.exp(np.pad(u, (1, 3), mode="reflect")) - 1, (f64(9),)),
    "mixed_dtypes": (lambda i, x: np.concatenate([i, x]) * 2.5,
                     (np.arange(5, dtype=np.int32), f64(4))),
    "broadcast_operand": (lambda a, b, c: np.concatenate([a, b], axis=1) + c, (f64(1, 2), f64(1, 3), f64(4, 5))),
    "concat_broadcast_into": (lambda a, b, c: c * np.concatenate([a, b]), (f64(3), f64(2), f64(4, 5))),
    "reversed": (lambda x, y: np.concatenate([x, y])[::-1] * 2, (f64(4), f64(6))),
    "strided": (lambda x, y: np.concatenate([x, y])[1::3] + 1, (f64(4), f64(6))),
    "also_returned": (lambda x, y: (lambda c: (c, c * 2, c.sum()))(np.concatenate([x, y])), (f64(3), f64(4))),
    "nested": (lambda a, b, c: np.concatenate([np.concatenate([a, b], axis=1), c], axis=0) * 2 - a.sum(),
               (f64(2, 3), f64(2, 4), f64(3, 7))),
    "empty_piece": (lambda x, y: np.concatenate([x[:0], y, x[5:]]) + 1, (f64(5), f64(3))),
    "many_pieces": (lambda x: np.stack([x * k for k in range(MAX_REGIONS + 4)], axis=1) + 1, (f64(6),)),
    "exp_overlapping": (lambda x: (lambda e: e[1:] - e[:-1])(np.exp(x)), (f64(10),)),
    "cheap_overlapping": (lambda x: (lambda y: y[2:] + y[1:-1] + y[:-2])(x * 3 - 1), (f64(10),)),
    "int_roll": (lambda x: (np.roll(x, 3) * 7) // 2 + x % 5, (np.arange(-20, 20, dtype=np.int32),)),
    "bool_pieces": (lambda x: np.logical_and(np.concatenate([x > 0, x < 0.5]), np.roll(np.concatenate([x, x]), 2) > -1),
                    (f64(6),)),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_programs_match_the_interpreter(name):
    function, args = PROGRAMS[name]
    jitted = flowjit.jit(function)
    _interpreted_alike(jitted, args)
    check_against_interpreter(jitted, args)


def test_wave_step_is_one_join_of_kernels_reading_the_input():
    """np.roll's joins move after the arithmetic: one concat, at the result, of kernels that
    read u and u_prev (no kernel reads a joined array)."""
    lowered = flowjit.jit(wave_step).lower(f64(64), f64(64))
    concats = _nodes(lowered.optimized, ops.concat)
    assert len(concats) == 1 and concats[0].output is lowered.optimized.outputs[0]
    fused = lowered.fused
    assert [node.op for node in fused.nodes if node.op is not ops.slice] == [ops.fused, ops.fused, ops.concat]
    for node in _nodes(fused, ops.fused):
        assert all(value.producer is None or value.producer.op is ops.slice for value in node.inputs)


def test_stacked_channels_run_in_one_kernel_writing_each_channel():
    lowered = flowjit.jit(stack_rgb).lower(*PROGRAMS["stack_rgb"][1])
    (kernel,) = _nodes(lowered.fused, ops.fused)
    assert len(kernel.outputs) == 3
    (concat,) = _nodes(lowered.fused, ops.concat)
    assert [value.producer for value in concat.inputs] == [kernel] * 3


def test_a_math_routine_is_not_computed_twice_for_overlapping_slices():
    lowered = flowjit.jit(PROGRAMS["exp_overlapping"][0]).lower(f64(10))
    assert [node.output.shape for node in _nodes(lowered.optimized, ops.exp)] == [(10,)]
    cheap = flowjit.jit(PROGRAMS["cheap_overlapping"][0]).lower(f64(10))
    assert all(node.output.shape == (8,) for node in _nodes(cheap.optimized, ops.mul))


def test_a_join_of_more_pieces_than_regions_allow_is_read_whole():
    lowered = flowjit.jit(PROGRAMS["many_pieces"][0]).lower(f64(6))
    (concat,) = _nodes(lowered.optimized, ops.concat)
    assert concat.output.shape == (6, MAX_REGIONS + 4)
    assert any(node.op is ops.add and concat.output in node.inputs for node in lowered.optimized.nodes)


def test_pass_is_a_named_stage_in_the_dumps():
    options = flowjit.CompileOptions(dump_after="concat-regions", verify_each=True)
    lowered = flowjit.jit(wave_step, options=options).lower(f64(8), f64(8))
    first, *rest = [record for record in lowered.pass_records if record.name == "concat-regions"]
    assert first.changed and "%concat_5 = concat %add_5, %add_6, %add_7" in first.text
    assert rest and not rest[-1].changed                        # a fixed point


# -- random programs of joins and elementwise arithmetic ------------------------------------------
SHAPE = (4, 6)


def _join(kind, a, b, k, axis):
    if kind == "roll":
        return np.roll(a, k - 2, axis=axis)
    if kind == "swap":
        cut = 1 + k % (SHAPE[axis] - 1)
        return np.concatenate([a[cut:], a[:cut]]) if axis == 0 else np.concatenate([a[:, cut:], a[:, :cut]], axis=1)
    if kind == "pad":
        mode = ("constant", "edge", "wrap", "reflect")[k % 4]
        dy, dx = (k % 3) - 1, ((k // 3) % 3) - 1
        return np.pad(a, 1, mode=mode)[1 + dy:1 + dy + SHAPE[0], 1 + dx:1 + dx + SHAPE[1]]
    if kind == "halves":                   # two different arrays' halves joined
        return np.concatenate([a[:, :3], b[:, 3:]], axis=1) if axis else np.concatenate([b[:2], a[2:]])
    raise AssertionError(kind)


ARITHMETIC = [lambda a, b: a + b, lambda a, b: a * b - 1, np.maximum, lambda a, b: np.tanh(a) * b,
              lambda a, b: np.where(a > b, a, 2 * b), lambda a, b: (a * 3).astype(np.float32) + b]

step = st.tuples(st.sampled_from(["roll", "swap", "pad", "halves", "arith", "arith"]),
                 st.integers(0, 8), st.integers(0, 8), st.integers(0, 8), st.integers(0, 1),
                 st.integers(0, len(ARITHMETIC) - 1))


def _program(steps):
    def run(x, y):
        pool = [x, y]
        for kind, i, j, k, axis, which in steps:
            a, b = pool[i % len(pool)], pool[j % len(pool)]
            pool.append(ARITHMETIC[which](a, b) if kind == "arith" else _join(kind, a, b, k, axis))
        return pool[-1], pool[len(pool) // 2] * 1.5
    return run


ARGS = (rng.standard_normal(SHAPE), rng.standard_normal(SHAPE))


@settings(max_examples=60)
@given(st.lists(step, min_size=2, max_size=7))
def test_random_join_programs_interpret_alike(steps):
    _interpreted_alike(flowjit.jit(_program(steps)), ARGS)


@settings(max_examples=8)
@given(st.lists(step, min_size=2, max_size=6))
def test_random_join_programs_compile_alike(steps):
    check_against_interpreter(flowjit.jit(_program(steps)), ARGS)


def test_joins_within_joins_are_built_in_place():
    """np.pad's stencil cut along both axes joins joins of kernels: each kernel writes its slice
    of the one result, and nothing is copied afterwards."""
    jitted = flowjit.jit(padded_gradient)
    args = PROGRAMS["padded_gradient"][1]
    check_against_interpreter(jitted, args)
    lowered = jitted.lower(*args)
    assert any(node.op is ops.concat and node.inputs[0].producer.op is ops.concat for node in lowered.fused.nodes)
    source = lowered.executable.driver_source
    assert "concatenate" not in source and "] = t_" not in source
