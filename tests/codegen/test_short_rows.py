"""Reductions along short rows of what an inlined math function computes: the reduction does
not fold into the pass's loop (a chain of additions through it would keep its exp or pow
scalar) but reads the value back from a scratch row after it, so the loop vectorises."""

import numpy as np
import pytest

import flowjit
from flowjit.compiler.codegen.reduce import SHORT_LANES, WIDE_ROW
from flowjit.compiler.ir.plan import ReduceStrategy
from flowjit.compiler.passes.plan_reductions import ACROSS_ROW, SHORT_ROW
from helpers import check_against_interpreter as _check, compiled_serial, packed


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def logsumexp(x):
    m = x.max(axis=1)
    return m + np.log(np.exp(x - m[:, None]).sum(axis=1))


def discounted(rates, cash):
    t = np.arange(1, cash.shape[1] + 1)
    discount = (1 + rates[:, None]) ** -t
    return (cash * discount).sum(axis=1), discount[:, -1]


def mixed(x):
    # one pass: a plain sum (folds) beside a sum of sigmoids (reads its scratch row), and a mean
    return x.sum(axis=1), np.mean(1 / (1 + np.exp(-x)), axis=1), (x * x).max(axis=1)


def _plan(jitted, *args):
    (node,) = [n for n in jitted.lower(*args).fused.nodes if n.op.name == "fused" and n.attrs["plan"].strategy]
    return node.attrs["plan"]


rng = np.random.default_rng(7)
CASES = [
    pytest.param(softmax, (rng.normal(size=(131, 10)).astype(np.float32),), ["sum"], id="softmax-f32-10"),
    pytest.param(logsumexp, (rng.normal(size=(70, 100)) * 30,), ["sum"], id="logsumexp-f64-100"),
    pytest.param(logsumexp, (rng.normal(size=(7, 30)) * 30,), ["sum"], id="logsumexp-f64-few-rows"),
    pytest.param(discounted, (rng.uniform(0, 0.1, 65), rng.uniform(0, 5, (65, 30))), ["sum"], id="pow-f64-30"),
    pytest.param(mixed, (rng.normal(size=(67, 90)).astype(np.float32),), ["mean"], id="mixed-f32-90"),
    pytest.param(mixed, (rng.normal(size=(7, 5)).astype(np.float32),), ["mean"], id="mixed-f32-few-rows-5"),
]
# (Rows shorter than ACROSS_ROW, at least ACROSS_MIN_ROWS of them, that store nothing
# full-shaped run across rows instead: test_across_rows.py.)


@pytest.mark.parametrize("program, args, unfolded", CASES)
def test_short_rows_read_heavy_values_back_from_scratch(program, args, unfolded):
    """The plan folds every reduction but those of heavy values, and results match the
    interpreter's (partial last chunk of rows, rows of 30 to 100)."""
    jitted = flowjit.jit(program)
    plan = _plan(jitted, *args)
    folded = {name for row in plan.passes for name in row.fold}
    reduced = {name for row in plan.passes for name in row.reduce}
    assert {name for name in reduced - folded} == {name for name in reduced if name.split("_")[0] in unfolded}, plan
    assert set(plan.scratch), plan
    _check(jitted, args)


def test_long_rows_still_fold_heavy_values():
    x = rng.normal(size=(3, SHORT_ROW)).astype(np.float32)
    plan = _plan(flowjit.jit(softmax), x)
    assert all(set(row.fold) == set(row.reduce) for row in plan.passes), plan


@pytest.mark.parametrize("program, args, dtype", [
    pytest.param(softmax, (rng.normal(size=(64, 10)).astype(np.float32),), np.float32, id="exp-f32"),
    pytest.param(discounted, (rng.uniform(0, 0.1, 64), rng.uniform(0, 5, (64, 30))), np.float64, id="pow-f64"),
])
def test_the_heavy_loop_of_a_short_row_is_packed(program, args, dtype):
    """Compiled with flowjit's flags, the serial kernel computes in packed lanes (with the
    reduction folded, its exp or pow loop was scalar)."""
    jitted = flowjit.jit(program)
    sources = jitted.lower(*args).kernel_sources()
    (name, source), = [(k, v) for k, v in sources.items() if "fj.exp_" in v or "fj.pow_" in v]
    kernel = compiled_serial(source, name, _arguments(jitted, args, name))
    assembly = "".join(kernel.inspect_asm().values())
    assert packed(assembly, "arith", dtype), source


def _arguments(jitted, args, name):
    """Arrays shaped as the kernel's arguments (its inputs, then its outputs)."""
    (node,) = [n for n in jitted.lower(*args).fused.nodes if n.name == name]
    return [np.empty(v.shape, v.dtype) for v in list(node.inputs) + list(node.outputs)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("columns", [SHORT_LANES - 1, SHORT_LANES, 2 * SHORT_LANES - 1, 2 * SHORT_LANES, 64, 100,
                                     WIDE_ROW - 1])
def test_rows_shorter_than_wide_ones_reduce_in_short_lanes(columns, dtype):
    """Rows from 2 * SHORT_LANES to WIDE_ROW elements keep SHORT_LANES accumulators per
    reduction (one dependent step per lane block, not per element: a softmax over 64 classes
    ran 2.8x faster), rows from SHORT_LANES half as many, shorter rows one.  NaN still wins a
    max, and -inf rows stay NaN-free where numpy's are."""
    x = rng.normal(size=(70, columns)).astype(dtype) * 4
    x[3, columns // 2] = np.nan
    x[5] = -np.inf
    programs = [softmax, logsumexp, mixed, lambda x: (np.argmax(x, axis=1), x.min(axis=1), (x * 2).mean(axis=1))]
    for program in programs:
        jitted = flowjit.jit(program)
        sources = "".join(jitted.lower(x).kernel_sources().values())
        count = SHORT_LANES if columns >= 2 * SHORT_LANES else SHORT_LANES // 2
        across = columns < ACROSS_ROW and program in (logsumexp, mixed)      # (nothing full-shaped, no argmax)
        assert (_plan(jitted, x).strategy is ReduceStrategy.ACROSS) == across, sources
        if not across:
            assert (f"fj.stack_array(np.{np.dtype(dtype).name}, {count})" in sources) == (columns >= SHORT_LANES), \
                sources
        with np.errstate(all="ignore"):
            _check(jitted, (x,))
