"""recompute-after-reductions: a cheap value read again after a reduction of it is computed
again by its later reader instead of stored by the reduction's kernel and read back."""

from __future__ import annotations

import numpy as np
import pytest

import flowjit
from flowjit.compiler.ir import ops
from tests.helpers import check_against_interpreter

rng = np.random.default_rng(3)


def zscore(x):
    return (x - x.mean(axis=0)) / x.std(axis=0)


def batchnorm(x, gamma, beta):
    mean, var = x.mean(axis=0), x.var(axis=0)
    return gamma * (x - mean) / np.sqrt(var + 1e-5) + beta


def sharpe(prices):
    returns = np.diff(prices, axis=0) / prices[:-1]
    return returns.mean(axis=0) / returns.std(axis=0)


def three_dims(x):
    c = x * 2 - x.mean(axis=(0, 1))
    return c / (c * c).sum(axis=(0, 1))


def _outputs_of_reduce_kernels(lowered):
    return [value.type.shape for node in lowered.fused.nodes if node.op is ops.fused
            and node.attrs["plan"].kind.name == "REDUCE" for value in node.outputs]


CASES = {
    "zscore": (zscore, (rng.standard_normal((40, 6)).astype(np.float32),)),
    "batchnorm": (batchnorm, (rng.standard_normal((33, 5)), rng.standard_normal(5), rng.standard_normal(5))),
    "sharpe": (sharpe, (rng.uniform(1, 2, (30, 4)),)),
    "three_dims": (three_dims, (rng.standard_normal((3, 4, 5)),)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_reduce_kernels_store_no_full_size_value(name):
    """The kernels of column reductions write only their small results; the full-size
    centred values are computed again where they are read, and the results are numpy's."""
    function, args = CASES[name]
    jitted = flowjit.jit(function)
    full = args[0].shape if name != "sharpe" else (args[0].shape[0] - 1, args[0].shape[1])
    assert full not in _outputs_of_reduce_kernels(jitted.lower(*args)), jitted.lower(*args).as_text("fused")
    check_against_interpreter(jitted, args)


def test_the_copy_is_a_named_pass_and_left_alone_unfused():
    args = CASES["zscore"][1]
    options = flowjit.CompileOptions(dump_after="recompute", verify_each=True)
    lowered = flowjit.jit(zscore, options=options).lower(*args)
    subs = [n for n in lowered.fused.nodes if n.op is ops.fused for n in n.attrs["body"].nodes if n.op is ops.sub]
    assert len(subs) == 2
    unfused = flowjit.jit(zscore, fuse=False).lower(*args)
    assert sum(n.attrs["body"].nodes[-1].op is ops.sub for n in unfused.fused.nodes if n.op is ops.fused) == 1


@pytest.mark.parametrize("program, op", [
    (lambda x: (lambda c: c / c.std(axis=0))(np.exp(x) - 1), ops.exp),           # a math routine: stored once
    (lambda x: (lambda c: (c / c.sum(axis=0), c))(x - x.mean(axis=0)), ops.sub),   # a result: stored anyway
    (lambda x: (lambda c: c / (c * c).sum(axis=1, keepdims=True))(x - 1), ops.sub),  # rows: the row stays in cache
])
def test_values_that_are_not_computed_twice(program, op):
    x = rng.standard_normal((12, 7))
    lowered = flowjit.jit(program).lower(x)
    body_ops = [n.op for k in lowered.fused.nodes if k.op is ops.fused for n in k.attrs["body"].nodes]
    assert body_ops.count(op) == 1, lowered.as_text("fused")
    check_against_interpreter(flowjit.jit(program), (x,))
