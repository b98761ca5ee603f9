"""Adversarial programs for concat-regions (passes/concat_regions.py), the concat sibling rule
of fusion (fuse.py merge_siblings) and the driver's nested concat buffers (driver.py
plan_concatenations / take).  Written in review of cc7b6d1 and bf97656.

- ``test_matches_numpy``: single-device programs compiled fused and unfused against numpy
  (dtype mixes, zero-size pieces, repeated pieces, stepped and negative slices, stack, roll,
  pad in every supported mode, broadcasting, where, casts, views among the outputs, nested
  joins, random numbers, gradients).  All pass.
- On two devices: fusion of one partition once merged kernels that depended on each other
  through the other device (a send/recv path it cannot see), and the programs deadlocked;
  transfer_waits.py now forbids any merge that makes a send wait for a recv.
- Growth: over iterated stencils and chained rolls the graph, its kernels and the pipeline's
  iterations stay within a small factor of the pipeline without concat-regions (joins of
  computed values are read whole, and the pass has a growth budget).
- A gradient whose reduce kernel reads only a broadcast scalar (no argument gives its
  loop's extent) runs over the plan's literal extent; it raised before.
"""

from __future__ import annotations

import numpy as np
import pytest

import flowjit
from flowjit import random as fr
from flowjit.bench.programs.arrays import padded_gradient
from flowjit.compiler.ir import ops
from flowjit.compiler.passes.pipeline import DEFAULT_PASSES

OLD_PASSES = tuple(name for name in DEFAULT_PASSES if name != "concat-regions")
rng = np.random.default_rng(11)


def f64(*shape):
    return rng.standard_normal(shape)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def _compare(got, want, name):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want), name
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (name, g.shape, w.shape, g.dtype, w.dtype)
        if w.dtype.kind == "f":
            rtol = {8: 1e-6, 4: 2e-5, 2: 2e-3}[w.dtype.itemsize]
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol, equal_nan=True, err_msg=name)
        else:
            np.testing.assert_array_equal(g, w, err_msg=name)


# -- programs ---------------------------------------------------------------------------------------
def cat(*xs, axis=0):
    return np.concatenate(xs, axis=axis)


def wrap_laplacian(u, steps=1):
    for _ in range(steps):
        p = np.pad(u, 1, mode="wrap")
        u = u + 0.1 * (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * u)
    return u


def heat(u, steps=3):
    for _ in range(steps):
        new = u.copy()
        new[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.2 * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2]
                                                 - 4 * u[1:-1, 1:-1])
        u = new
    return u


def stencil_3d(u):
    p = np.pad(u, 1, mode="edge")
    return (p[2:, 1:-1, 1:-1] + p[:-2, 1:-1, 1:-1] + p[1:-1, 2:, 1:-1] + p[1:-1, :-2, 1:-1]
            + p[1:-1, 1:-1, 2:] + p[1:-1, 1:-1, :-2] - 6 * u)


def padded_gradient_loss(u):
    p = np.pad(u, 1, mode="edge")
    return np.sum(((p[1:-1, 2:] - p[1:-1, :-2]) / 2) ** 2 + ((p[2:, 1:-1] - p[:-2, 1:-1]) / 2) ** 2)


def chained_rolls(u, n=8):
    for k in range(n):
        u = np.roll(u, k + 1) + u
    return u


def patched(x):
    y = x * 2
    y[0] = 5
    y[:, -1] = np.arange(x.shape[0])
    y[1, 1:3] = 7.9
    return y, y[::-1, ::2] * 3, y.sum()


def int8_rows(x):
    z = np.zeros_like(x, dtype=np.int8)
    z[1:] = x[1:] * 30
    return z + np.roll(z, 1, axis=1)


def bool_rows(x):
    b = x > 0
    b[1:3] = x[1:3] < -0.5
    return np.logical_xor(b, np.roll(b, 1))


X7, Y5 = f64(7), f64(5)
A3, B3 = f64(3, 4, 5), f64(3, 2, 5)
A2, B2 = f64(3, 4), f64(3, 2)

PROGRAMS = {
    # dtypes mixed in one concat
    "int8_float32": (lambda a, b: cat(a, b) * 3, (np.arange(-3, 4, dtype=np.int8), f32(5))),
    "bool_int": (lambda a, b: cat(a, b) + 1, (np.array([True, False, True]), np.arange(4, dtype=np.int64))),
    "bool_compare_int": (lambda a, b: cat(a > 0, b) * b[0], (f64(3), np.arange(4, dtype=np.int32))),
    "float16": (lambda a, b: cat(a, b) * 2 + 1, (f64(4).astype(np.float16), f64(3).astype(np.float16))),
    "float16_float32": (lambda a, b: cat(a, b) * 2 + 1, (f64(4).astype(np.float16), f32(3))),
    "float16_roll": (lambda a: np.roll(a, 2) - a, (f64(9).astype(np.float16),)),
    "uint8_int8": (lambda a, b: cat(a, b) * 2, (np.arange(250, 256, dtype=np.uint8), np.arange(-3, 3, dtype=np.int8))),
    "int8_wraps": (lambda a: np.roll(a, 1) + a, (np.arange(100, 128, dtype=np.int8),)),
    "int16_float32_parallel": (lambda a, b: cat(a, b) * 0.5, (np.arange(150000, dtype=np.int16), f32(50000))),
    # zero sizes
    "zero_piece": (lambda a, b: cat(a, b[:0], a) * 2, (X7, Y5)),
    "all_pieces_empty": (lambda a: cat(a[:0], a[3:3]) * 2 + 1, (X7,)),
    "zero_size_inputs": (lambda a, b: cat(a, b) * 2 + 1, (np.zeros(0), np.zeros(0))),
    "zero_rows": (lambda a, b: cat(a, b, axis=1) * 2 + a.sum(), (np.zeros((0, 3)), np.zeros((0, 2)))),
    "zero_then_rows": (lambda a, b: cat(a, b) * 2, (np.zeros((0, 3)), f64(2, 3))),
    "len1_broadcast_into_2d": (lambda x, y: cat(x, y) + np.ones((3, 1)), (f64(1), f64(0))),
    # the same array as several pieces; pieces and joins returned
    "x_x_x": (lambda a: cat(a, a, a) * a.sum() + 1, (X7,)),
    "x_x_x_returned": (lambda a: (cat(a, a, a), cat(a, a, a) + 1), (X7,)),
    "pieces_are_outputs": (lambda a, b: (a, cat(a, b) * 2, b), (X7, Y5)),
    "join_returned_and_read": (lambda a, b: (lambda c: (c, c + 1, c[::-1] * 2))(cat(a, b)), (X7, Y5)),
    "outputs_view_each_other": (lambda a, b: (lambda c: (c, c[2:5], c[::-1]))(cat(a, b) * 2), (X7, Y5)),
    "view_first": (lambda a, b: (lambda c: (c[2:9] * 2, c[2:9], c))(cat(a, b)), (X7, Y5)),
    "input_and_its_slice_out": (lambda a, b: (cat(a, a) + 1, a, a[1:] * 2, a[1:]), (X7, Y5)),
    "computed_pieces_out": (lambda a, b: (lambda c: (c, a * 2, c * 3))(cat(a * 2, b * 3)), (X7, Y5)),
    # slices of joins
    "reverse_step2": (lambda a, b: cat(a, b)[::-2] * 2, (X7, Y5)),
    "reverse_plus_iota": (lambda a, b: cat(a, b)[::-1] + np.arange(12.0), (X7, Y5)),
    "step3": (lambda a, b: cat(a, b)[1::3] * 2, (X7, Y5)),
    "step4_window": (lambda a, b: cat(a, b)[2:11:4] * 2, (X7, Y5)),
    "negative_bounds": (lambda a, b: cat(a, b)[-8:-2] * 2, (X7, Y5)),
    "negative_step_window": (lambda a, b: cat(a, b)[9:2:-3] * 2, (X7, Y5)),
    "slice_of_slice": (lambda a, b: cat(a, b)[1:][::2][1:] * 2, (X7, Y5)),
    "reversed_then_stepped": (lambda a, b: cat(a, b)[::-1][1::2] * 2, (X7, Y5)),
    "stepped_then_reversed": (lambda a: (a * 3)[5::-2][::-1] + 1, (X7,)),
    "reverse_reverse": (lambda a, b: (cat(a, b) * 3)[::-1][::-1][2:] * 2, (X7, Y5)),
    "three_slices_negative": (lambda a: (a * 3)[-2::-3][1:][::-1] + 1, (X7,)),
    "non_joined_axis_reversed": (lambda a, b: cat(a, b, axis=1)[::-1] * 2 + cat(a, b, axis=1)[:, ::-1], (A2, B2)),
    "both_axes_stepped": (lambda a, b: cat(a, b, axis=1)[::-2, ::-3] * 2 + 1, (A2, B2)),
    # 3-D, middle axis, broadcasting of every rank
    "middle_axis": (lambda a, b: cat(a, b, axis=1) * 2 + 1, (A3, B3)),
    "middle_axis_column": (lambda a, b, c: cat(a, b, axis=1) * c, (A3, B3, f64(6, 1))),
    "middle_axis_row": (lambda a, b, c: cat(a, b, axis=1) * c, (A3, B3, f64(5))),
    "middle_axis_rank4": (lambda a, b, c: c - cat(a, b, axis=1), (A3, B3, f64(2, 1, 1, 1))),
    "middle_axis_scalar": (lambda a, b: 3.0 - cat(a, b, axis=1), (A3, B3)),
    "zero_d_array": (lambda a, b, s: cat(a, b, axis=1) * s, (A2, B2, np.array(2.5))),
    "rank3_operand": (lambda a, b, r: r / cat(a, b, axis=1), (A2, B2, f64(5, 3, 6))),
    "joins_on_different_axes": (lambda a, b, c, d: cat(a, b, axis=1) * cat(c, d, axis=0),
                                (f64(3, 4), f64(3, 2), f64(1, 6), f64(2, 6))),
    "joins_with_different_cuts": (lambda a, b, c, d: cat(a, b) * cat(c, d), (f64(3), f64(5), f64(6), f64(2))),
    "join_broadcast_against_join": (lambda a, b, c, d: cat(a, b)[:, None] * cat(c, d),
                                    (f64(3), f64(5), f64(6), f64(2))),
    "join_of_broadcasts_sliced": (lambda r: cat(np.broadcast_to(r, (3, 4)), np.broadcast_to(r, (3, 4)))[1:5, ::-1] + 1,
                                  (f64(4),)),
    # roll
    "roll_three_axes": (lambda a: np.roll(a, 1, axis=1) - np.roll(a, -2, axis=2) + np.roll(a, 5, axis=0), (A3,)),
    "roll_past_size": (lambda a: np.roll(a, 13) * a, (f64(5),)),
    "roll_negative_past_size": (lambda a: np.roll(a, -13) * a, (f64(5),)),
    "roll_zero": (lambda a: np.roll(a, 0) * a, (f64(5),)),
    "roll_by_size": (lambda a: np.roll(a, 5) * a, (f64(5),)),
    "roll_flat_2d": (lambda a: np.roll(a, 3) * a, (f64(3, 4),)),
    "roll_one_axis_twice": (lambda a: np.roll(a, (1, 2), axis=(1, 1)) * a + 1, (f64(3, 4),)),
    "roll_where": (lambda a: np.where(np.roll(a, 2) > a, np.roll(a, -3), a * 2), (X7,)),
    "chained_rolls_4": (lambda u: chained_rolls(u, 4), (f64(16),)),
    # stack
    "stack_axis0": (lambda a, b: np.stack([a, b, a], axis=0) * np.float32(2) + 1, (f32(3, 4), f32(3, 4))),
    "stack_axis1": (lambda a, b: np.stack([a, b, a], axis=1) * np.float32(2) + 1, (f32(3, 4), f32(3, 4))),
    "stack_axis_last": (lambda a, b: np.stack([a, b, a], axis=-1) * np.float32(2) + 1, (f32(3, 4), f32(3, 4))),
    "stack_mixed_dtypes": (lambda a, b: np.stack([a, b], axis=-1) * 2, (np.arange(4, dtype=np.int16), f32(4))),
    "stack_twenty_sliced": (lambda *xs: np.stack(xs, axis=-1)[:, 3:7] * 2 + np.stack(xs)[2:4].sum(),
                            tuple(f64(5) for _ in range(20))),
    "seventeen_pieces": (lambda x: cat(*[x[i:i + 1] for i in range(17)][::-1]) * x, (f64(17),)),
    # pad
    **{f"pad_{mode}": (lambda a, mode=mode: np.pad(a, ((1, 3), (0, 2)), mode=mode) * 2 + 1, (f64(4, 5),))
       for mode in ("constant", "edge", "wrap", "reflect", "symmetric")},
    "pad_empty_mode_interior": (lambda a: np.pad(a, ((1, 3), (0, 2)), mode="empty")[1:4, 0:5] * 2, (f64(4, 5),)),
    "pad_constant_values": (lambda a: np.pad(a, 2, constant_values=(1.5, -2)) * a.sum(), (f64(3, 3),)),
    "pad_reflect_wider_than_array": (lambda a: np.pad(a, (5, 7), mode="reflect") * 2, (f64(4),)),
    "pad_wrap_wider_than_array": (lambda a: np.pad(a, (9, 7), mode="wrap") * 2, (f64(4),)),
    "pad_symmetric_wider": (lambda a: np.pad(a, (5, 9), mode="symmetric") + 1, (f64(4),)),
    "pad_bool": (lambda a: np.logical_not(np.pad(a > 0, 2)), (f64(5),)),
    "pad_zero_width": (lambda a: np.pad(a, 0) * 2, (f64(5),)),
    "pad_3d_reflect": (lambda a: np.pad(a, ((0, 0), (1, 2), (2, 0)), mode="reflect") * 2 + 1, (A3,)),
    "padded_gradient": (padded_gradient, (f64(4, 5),)),
    "wrap_laplacian": (wrap_laplacian, (f64(3, 4),)),
    # where, casts
    "where_join_condition": (lambda a, b: np.where(cat(a > 0, b < 0), cat(a, b), -1.0), (X7, Y5)),
    "where_join_condition_broadcast": (lambda a, b, c: np.where(cat(a > 0, b < 0)[:, None], c, 2 * c), (X7, Y5, f64(12, 3))),
    "astype_float32": (lambda a, b: cat(a, b).astype(np.float32) * np.float32(3), (X7, Y5)),
    "astype_int_mod": (lambda a, b: (cat(a, b) * 10).astype(np.int32) % 7, (X7, Y5)),
    "astype_bool": (lambda a, b: cat(a, b).astype(bool) & np.roll(cat(a, b) > 0, 3), (X7, np.zeros(5))),
    "float16_where": (lambda a, b: np.where(cat(a, b) > 0, cat(a, b), np.float16(0.5)) * np.float16(3),
                      (X7.astype(np.float16), Y5.astype(np.float16))),
    "int_floordiv": (lambda a, b: cat(a, b) // np.roll(cat(b, a), 1), (np.arange(1, 6), np.arange(-3, 0))),
    "nan_inf": (lambda a, b: np.isnan(cat(a, b)) | np.isinf(np.roll(cat(a, b), 1)),
                (np.array([np.nan, 1, np.inf]), np.array([-np.inf, 0]))),
    "exp_of_roll_sliced": (lambda a: (lambda e: e[1:] - e[:-1] + e[::2].sum())(np.exp(np.roll(a, 3))), (f64(11),)),
    # nested joins (driver: a concat built in its slice of another)
    "nested_returned_inner": (lambda a, b: (lambda i: (cat(i, b) * 1.0, i))(cat(a * 2, b)), (X7, Y5)),
    "nested_plain": (lambda a, b: cat(cat(a * 2, b), b + 1), (X7, Y5)),
    "nested_inner_twice": (lambda a, b: (lambda i: cat(i, b + 1, i))(cat(a * 2, b)), (X7, Y5)),
    "nested_float32_float64": (lambda a, b: cat(cat(a * 2, b), b + 1), (X7.astype(np.float32), Y5)),
    "nested_float16": (lambda a, b: cat(cat(a * 2, b), b + 1) * 2, (X7.astype(np.float16), Y5.astype(np.float16))),
    "nested_three_deep": (lambda a, b: cat(cat(cat(a * 2, b), a), b * 3), (X7, Y5)),
    "nested_2d": (lambda a, b: cat(cat(a * 2, a + 1, axis=1), cat(b, b * b, axis=1), axis=0), (f64(3, 4), f64(2, 4))),
    "nested_3d": (lambda a, b, c: cat(cat(a, b, axis=0), c, axis=2) * 2 + 1, (f64(2, 3, 4), f64(3, 3, 4), f64(5, 3, 2))),
    "nested_middle": (lambda a, b, c: cat(cat(a, b, axis=2), c, axis=1) * 2 + 1, (f64(4, 3, 4), f64(4, 3, 5), f64(4, 2, 9))),
    # setitem (joins of the pieces around the region)
    "setitem_heat": (heat, (f64(6, 7),)),
    "setitem_patched": (patched, (f64(4, 5),)),
    "setitem_int8": (int8_rows, (f64(4, 5),)),
    "setitem_bool": (bool_rows, (f64(6),)),
}


# Unfused (a kernel per op: most of a cold run's compile time) under make test-slow.
UNFUSED_TOO = [True, pytest.param(False, marks=pytest.mark.sweep)]


@pytest.mark.parametrize("fuse", UNFUSED_TOO, ids=["fused", "unfused"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_matches_numpy(name, fuse):
    function, args = PROGRAMS[name]
    with np.errstate(all="ignore"):
        want = function(*[a.copy() for a in args])
        got = flowjit.jit(function, fuse=fuse)(*args)
    _compare(got, want, name)


def test_large_stencil_parallel_kernels():
    """Big enough for the parallel kernels, with nested joins written in place."""
    u = f64(300, 200)
    _compare(flowjit.jit(padded_gradient)(u), padded_gradient(u), "padded_gradient")
    _compare(flowjit.jit(wrap_laplacian)(u.astype(np.float32)), wrap_laplacian(u.astype(np.float32)), "laplacian")
    a, b, c = f64(20, 30, 40), f64(30, 30, 40), f64(50, 30, 20)
    nested = lambda a, b, c: cat(cat(a, b, axis=0), c, axis=2) * 2 + 1
    _compare(flowjit.jit(nested)(a, b, c), nested(a, b, c), "nested_3d")


def test_random_numbers_in_joins():
    def program(key, a):
        c = cat(fr.normal(key, (7,)), a, fr.uniform(key, (3,)))
        return np.roll(c, 2) * c
    key, a = np.array([1, 2], np.uint32), f64(5)
    want = flowjit.jit(program, backend="interpreter")(key, a)
    for options in ({}, {"fuse": False}, {"devices": ["cpu:0", "cpu:1"]}):
        _compare(flowjit.jit(program, **options)(key, a), want, str(options))


GRADIENT_LOSSES = {
    "roll": (lambda u: np.sum((np.roll(u, 1) - 2 * u + np.roll(u, -1)) ** 2), f64(9)),
    "roll_2d": (lambda u: np.sum(np.tanh(np.roll(u, (1, -2), axis=(0, 1)) * u)), f64(4, 5)),
    "pad_reflect": (lambda u: np.sum(np.sin(np.pad(u, (2, 3), mode="reflect")) ** 2), f64(6)),
    "pad_wrap": (lambda u: np.sum(np.exp(np.pad(u, ((1, 0), (2, 1)), mode="wrap")) * np.arange(8.0)), f64(4, 5)),
    "padded_gradient": (lambda u: sum(np.sum(g ** 2) for g in padded_gradient(u)), f64(4, 5)),
    "padded_gradient_one_sum": (padded_gradient_loss, f64(4, 5)),
    "slices": (lambda u: np.sum((u[1:] - u[:-1]) ** 2 * u[::2].sum()) + u[::-3].sum() ** 2, f64(10)),
    "laplacian": (lambda u: np.sum(wrap_laplacian(u) ** 2 * np.arange(u.size).reshape(u.shape)), f64(5, 6)),
}


@pytest.mark.parametrize("fuse", UNFUSED_TOO, ids=["fused", "unfused"])
@pytest.mark.parametrize("name", [name if name in ("roll", "padded_gradient") else pytest.param(name, marks=pytest.mark.sweep)
                                  for name in sorted(GRADIENT_LOSSES)])     # (the rest: make test-slow)
def test_gradients_match_the_interpreter(name, fuse):
    loss, u = GRADIENT_LOSSES[name]
    want = flowjit.jit(flowjit.value_and_grad(loss), backend="interpreter")(u)
    value, (grad,) = flowjit.jit(flowjit.value_and_grad(loss, argnums=(0,)), fuse=fuse)(u)
    np.testing.assert_allclose(value, want[0], rtol=1e-9)
    np.testing.assert_allclose(grad, want[1], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
def test_gradient_of_a_reversed_stepped_slice_sum_broadcast(fuse):
    """The gradient has sum(broadcast_to(constant, [9])): a reduce kernel whose only argument
    is a broadcast scalar runs over the plan's literal extent (it raised a CodegenError)."""
    loss = lambda u: np.sum(u[::-3].sum() + u[1:])
    u = f64(10)
    want = flowjit.jit(flowjit.value_and_grad(loss), backend="interpreter")(u)
    value, grad = flowjit.jit(flowjit.value_and_grad(loss), fuse=fuse)(u)
    np.testing.assert_allclose(grad, want[1], rtol=1e-9)


# -- two devices: fusion within a partition closes a cycle through the other device ------------------
def _cross_device_cycle(partitions) -> list[str] | None:
    """A cycle through the fused partitions, send -> recv edges included (None: none)."""
    sends = {node.attrs["key"]: (part, node) for part, graph in enumerate(partitions)
             for node in graph.nodes if node.op is ops.send}
    preds = {}
    for part, graph in enumerate(partitions):
        for node in graph.nodes:
            before = [(part, v.producer) for v in node.inputs if v.producer is not None]
            before += [(part, c) for c in node.control_inputs]
            if node.op is ops.recv:
                before.append(sends[node.attrs["key"]])
            preds[(part, node)] = before
    state: dict = {}
    for root in preds:
        if root in state:
            continue
        stack = [(root, iter(preds[root]))]
        state[root] = 1
        path = [root]
        while stack:
            key, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[key] = 2
                stack.pop()
                path.pop()
            elif state.get(nxt) == 1:
                return [f"{p}:{n.name}" for p, n in path[path.index(nxt):]]
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter(preds[nxt])))
                path.append(nxt)
    return None


TWO_DEVICE = {
    "padded_gradient": (padded_gradient, (f64(4, 5),)),
    "wave_step": (lambda u, v: 2 * u - v + 0.01 * (np.roll(u, 1) - 2 * u + np.roll(u, -1)), (f64(37), f64(37))),
    "grad_roll": (flowjit.value_and_grad(lambda u: np.sum((np.roll(u, 1) - 2 * u + np.roll(u, -1)) ** 2)), (f64(9),)),
}
TWO_DEVICE_CYCLES = {
    "laplacian_twice": (lambda u: wrap_laplacian(u, 2), (f64(5, 6),)),
    "heat": (heat, (f64(6, 7),)),
    "stencil_3d": (stencil_3d, (f64(3, 4, 5),)),
    "grad_padded_gradient": (flowjit.value_and_grad(padded_gradient_loss), (f64(4, 5),)),
    "grad_laplacian_twice": (flowjit.value_and_grad(lambda u: np.sum(wrap_laplacian(u, 2) ** 2)), (f64(5, 6),)),
    "grad_stencil_3d": (flowjit.value_and_grad(lambda u: np.sum(stencil_3d(u) ** 2)), (f64(3, 4, 5),)),
}


@pytest.mark.parametrize("name", sorted(TWO_DEVICE))
def test_two_devices_match_the_interpreter(name):
    function, args = TWO_DEVICE[name]
    want = flowjit.jit(function, backend="interpreter")(*args)
    lowered = flowjit.jit(function, devices=["cpu:0", "cpu:1"]).lower(*args)
    assert _cross_device_cycle(lowered.fused_partitions) is None
    got = lowered.executable(*args)
    _compare(got[0] if len(got) == 1 else tuple(got), want, name)


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.sweep) if name.startswith("grad_") and
                                  name != "grad_padded_gradient" else name for name in sorted(TWO_DEVICE_CYCLES)])
def test_two_device_programs_have_no_cycle_through_send_recv(name):
    """Fusion of one partition never makes a send wait for a recv (transfer_waits): each
    partition merging siblings across a round trip had closed a cycle and deadlocked.  The
    program then runs (within a deadline) to the interpreter's results."""
    function, args = TWO_DEVICE_CYCLES[name]
    lowered = flowjit.jit(function, devices=["cpu:0", "cpu:1"]).lower(*args)
    assert _cross_device_cycle(lowered.fused_partitions) is None
    call = lowered.executable.begin(args)
    finished = call.done.wait(60)
    if not finished:
        call.fail(None, RuntimeError("aborted by the test"))
    assert finished and call.error is None
    got = call.wait(1)
    want = flowjit.jit(function, backend="interpreter")(*args)
    _compare(got[0] if len(got) == 1 else tuple(got), want, name)


def test_two_device_heat_finishes():
    args = (f64(6, 7),)
    lowered = flowjit.jit(heat, devices=["cpu:0", "cpu:1"]).lower(*args)
    call = lowered.executable.begin(args)
    finished = call.done.wait(10)
    if not finished:
        call.fail(None, RuntimeError("aborted by the test"))
    assert finished and call.error is None
    _compare(call.wait(1)[0], heat(*args), "heat")


# -- growth ---------------------------------------------------------------------------------------------
def _lowered(function, args, passes=None):
    return flowjit.jit(function, passes=passes).lower(*args)


GROWTH = {
    # (program, args): nodes of the optimized graph and kernels, new vs old pipeline (measured)
    "wrap_laplacian_4_steps_16x16": (lambda u: wrap_laplacian(u, 4), (f64(16, 16),)),  # 3326 vs 70 nodes, 18 vs 4 kernels
    "chained_rolls_8": (chained_rolls, (f64(64),)),                                    # 884 vs 32 nodes, 15 vs 8 kernels
    "stencil_3d": (stencil_3d, (f64(3, 4, 5),)),                                       # 458 vs 29 nodes, 10 vs 1 kernels
}


@pytest.mark.parametrize("name", sorted(GROWTH))
def test_graph_and_kernels_stay_within_4x_of_the_old_pipeline(name):
    function, args = GROWTH[name]
    new, old = _lowered(function, args), _lowered(function, args, OLD_PASSES)
    assert len(new.optimized.nodes) <= 4 * len(old.optimized.nodes)
    kernels = [sum(node.op is ops.fused for node in lowered.fused.nodes) for lowered in (new, old)]
    assert kernels[0] <= 2 * kernels[1]


def test_pipeline_reaches_a_fixed_point_on_chained_rolls():
    lowered = _lowered(chained_rolls, (f64(64),))
    last = [record for record in lowered.pass_records if record.name == "concat-regions"][-1]
    assert not last.changed


def _crossing(x, y):
    with flowjit.device("cpu:0"):
        a = x * 2
    with flowjit.device("cpu:1"):
        c = y * 3
        b = a + y
    with flowjit.device("cpu:0"):
        d = c + x
    return b, d


@pytest.mark.parametrize("waits", [True, False])
def test_no_merge_makes_a_send_wait_for_a_recv(monkeypatch, waits):
    """cpu:0 computes ``a = x * 2`` for cpu:1 and ``d = c + x`` from cpu:1's ``c``; cpu:1 the
    mirror image.  Each pair shares an input, and merged into one kernel per device each
    send would wait for the other device's send: a deadlock.  Without the check the cycle is
    there (so the test sees what it guards)."""
    from flowjit.compiler.passes.transfer_waits import TransferWaits
    if not waits:
        monkeypatch.setattr(TransferWaits, "added", lambda self, a, b: False)
    x, y = np.arange(6.0), np.ones(6)
    options = flowjit.CompileOptions(schedule_recvs=False)     # (its control edges would hide the case)
    lowered = flowjit.jit(_crossing, devices=["cpu:0", "cpu:1"], options=options).lower(x, y)
    cycle = _cross_device_cycle(lowered.fused_partitions)
    assert (cycle is None) == waits, cycle
    if waits:
        call = lowered.executable.begin((x, y))
        assert call.done.wait(60) and call.error is None
        _compare(tuple(call.wait(1)), _crossing(x, y), "crossing")
