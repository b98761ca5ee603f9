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


def rows_mismatched(x):                  # mean without keepdims, std's own mean with them
    return x.mean(axis=1), x.std(axis=1)


def rows_std_first(x):
    return x.std(axis=1), x.mean(axis=1)


def rows_of_an_expression(x):            # the two x * 2 merge first, then the means
    return (x * 2).mean(axis=1), (x * 2).var(axis=1)


def rows_broadcast_back(x):
    m = x.mean(axis=1)
    return (x - m[:, None]) / (x.std(axis=1)[:, None] + 1e-8)


def count(lowered, op) -> int:
    return sum(1 for node in lowered.fused.nodes if node.op is ops.fused
               for inner in node.attrs["body"].nodes if inner.op is op)


@pytest.mark.parametrize("function, shape, means", [
    (zscore, (1000,), 1), (zscore, (8, 33), 1), (columns, (16, 40), 1), (rows_keepdims, (16, 40), 1),
    (variance_and_mean, (6, 7), 1), (rows_mismatched, (6, 7), 1), (rows_std_first, (6, 7), 1),
    (rows_of_an_expression, (6, 7), 1), (rows_broadcast_back, (6, 7), 1)])
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


def test_zscore_is_one_kernel_with_one_mean():
    """One mean for both (CSE); ``x - mean`` is computed again in the pass that divides
    (recompute-after-reductions) rather than kept in a scratch array between the passes."""
    lowered = flowjit.jit(zscore).lower(np.ones(1000, np.float32))
    (kernel,) = [node for node in lowered.fused.nodes if node.op is ops.fused]
    assert [n.op.name for n in kernel.attrs["body"].nodes if n.op.name in ("mean", "sub")] == ["mean", "sub", "sub"]
    assert not kernel.attrs["plan"].scratch


@pytest.mark.parametrize("function", [rows_mismatched, rows_std_first, rows_of_an_expression])
def test_a_reduction_and_its_keepdims_twin_are_one_kernel(function):
    """``x.mean(axis=1)`` and the ``keepdims=True`` mean inside ``x.std(axis=1)`` are one
    reduction (the other a reshape, a view), whichever comes first, and one kernel."""
    x = np.random.default_rng(5).standard_normal((6, 7))
    lowered = flowjit.jit(function).lower(x)
    assert len(lowered.kernel_sources()) == 1, lowered.as_text("fused")


def test_argmax_and_its_keepdims_twin_are_one_reduction():
    def program(x):
        return np.argmax(x, axis=1), np.argmax(x, axis=1, keepdims=True), x.max(axis=0, keepdims=True), x.max(axis=0)
    x = np.random.default_rng(6).standard_normal((5, 9))
    lowered = flowjit.jit(program).lower(x)
    assert count(lowered, ops.argmax) == 1 and count(lowered, ops.max) == 1, lowered.as_text("fused")
    for got, want in zip(flowjit.jit(program)(x), program(x)):
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("function, keepdims", [
    (lambda x: (x - x.mean(axis=1)[:, None]) / (x.std(axis=1)[:, None] + 1e-8),
     lambda x: (x - x.mean(axis=1, keepdims=True)) / (x.std(axis=1, keepdims=True) + 1e-8)),
    (lambda x: x / x.sum(axis=1).reshape(-1, 1), lambda x: x / x.sum(axis=1, keepdims=True)),
    (lambda x: x - x.max(axis=0)[None, :], lambda x: x - x.max(axis=0, keepdims=True)),
    (lambda x: x * np.argmax(x, axis=1)[:, np.newaxis], lambda x: x * np.argmax(x, axis=1, keepdims=True)),
    (lambda x: (x - x.mean(axis=1)[:, None], x.mean(axis=1)),          # the reduction used twice
     lambda x: (x - x.mean(axis=1, keepdims=True), x.mean(axis=1))),
], ids=["zscore", "reshape", "leading", "argmax", "two-uses"])
def test_broadcasting_a_reduction_back_is_its_keepdims_form(function, keepdims):
    """``x.mean(axis=1)[:, None]`` is ``x.mean(axis=1, keepdims=True)``: the same kernels as
    the keepdims spelling (one, for a row reduction and its consumers)."""
    x = np.random.default_rng(7).standard_normal((6, 9)).astype(np.float32)
    lowered, twin = flowjit.jit(function).lower(x), flowjit.jit(keepdims).lower(x)
    for stage, word in (("optimized", " = reshape "), ("fused", " = fused ")):
        assert lowered.as_text(stage).count(word) == twin.as_text(stage).count(word), lowered.as_text(stage)
    expected = function(x)
    for fuse in (True, False):
        got = flowjit.jit(function, fuse=fuse)(x)
        for g, e in zip(got if isinstance(got, tuple) else (got,), expected if isinstance(expected, tuple)
                        else (expected,)):
            assert g.shape == e.shape
            np.testing.assert_allclose(g, e, rtol=2e-5, atol=1e-6)


def test_a_reshape_to_another_shape_stays_a_reshape():
    def program(x):                     # (6,) -> (1, 6): not the kept shape (6, 1) of axis 1
        return x - x.mean(axis=1)[None, :]
    x = np.random.default_rng(8).standard_normal((6, 6)).astype(np.float32)
    assert "reshape" in flowjit.jit(program).lower(x).as_text("optimized")
    np.testing.assert_allclose(flowjit.jit(program)(x), program(x), rtol=2e-5, atol=1e-6)
