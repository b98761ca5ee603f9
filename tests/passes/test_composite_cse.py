"""var/std's expansion shares the mean (and x - mean) the program computes itself."""

import numpy as np
import pytest

import flowjit
from flowjit.compiler.ir import ops


def zscore(x):
    return (x - x.mean()) / (x.std() + 1e-8)


def columns(x):
    return (x - x.mean(axis=0)) / x.std(axis=0)


def rows_keepdims(x):
    return (x - x.mean(axis=1, keepdims=True)) / x.std(axis=1, keepdims=True)


def variance_and_mean(x):
    return x.var(axis=(0, 1)), x.mean(axis=(0, 1))


def rows_mismatched(x):                  # mean without keepdims, std over a trailing axis: not shared
    return x.mean(axis=1), x.std(axis=1)


def count(lowered, op) -> int:
    return sum(1 for node in lowered.fused.nodes if node.op is ops.fused
               for inner in node.attrs["body"].nodes if inner.op is op)


@pytest.mark.parametrize("function, shape, means", [
    (zscore, (1000,), 1), (zscore, (8, 33), 1), (columns, (16, 40), 1), (rows_keepdims, (16, 40), 1),
    (variance_and_mean, (6, 7), 1), (rows_mismatched, (6, 7), 2)])
def test_mean_computed_once_and_results_match(function, shape, means):
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    lowered = flowjit.jit(function).lower(x)
    assert count(lowered, ops.mean) == means, lowered.as_text("fused")
    expected = function(x)
    for fuse in (True, False):
        got = flowjit.jit(function, fuse=fuse)(x)
        for g, e in zip(got if isinstance(got, tuple) else (got,), expected if isinstance(expected, tuple)
                        else (expected,)):
            np.testing.assert_allclose(g, e, rtol=2e-5, atol=1e-6)


def test_zscore_is_one_kernel_that_subtracts_once():
    lowered = flowjit.jit(zscore).lower(np.ones(1000, np.float32))
    (kernel,) = [node for node in lowered.fused.nodes if node.op is ops.fused]
    assert [n.op.name for n in kernel.attrs["body"].nodes if n.op.name in ("mean", "sub")] == ["mean", "sub"]
