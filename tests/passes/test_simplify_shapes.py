"""simplify's shape rules that let elementwise ops see through a reshape."""

import numpy as np
import pytest

import flowjit


def test_a_means_gradient_needs_no_kernel_for_its_constant():
    """grad of a mean broadcasts 1/n and reshapes it; seen as a broadcast scalar, the division
    by n folds and the gradient is one kernel."""
    def loss(x):
        return (np.tanh(x) ** 2).mean(axis=1).sum()
    x = np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32)
    gradient = flowjit.jit(flowjit.grad(loss))
    assert len(gradient.lower(x).kernel_sources()) == 1, gradient.lower(x).as_text("fused")
    t = np.tanh(x.astype(np.float64))
    np.testing.assert_allclose(gradient(x), 2 * t * (1 - t * t) / 16, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("function, rewritten", [
    (lambda x: np.reshape(np.broadcast_to(np.float32(2), (8,)), (8, 1)) / 3 * x[:, :1], True),
    (lambda x: np.reshape(np.broadcast_to(x[:1, :1], (4, 2)), (8,)) + 1, True),     # a one-element array
    (lambda x: np.reshape(np.broadcast_to(x[:1, :4], (3, 4)), (12,)) * 2, False),   # four elements: stays
])
def test_a_reshaped_broadcast_of_one_element_is_a_broadcast(function, rewritten):
    x = np.random.default_rng(2).standard_normal((8, 4)).astype(np.float32)
    text = flowjit.jit(function).lower(x).as_text("optimized")
    reshaped_broadcast = any(" = reshape %broadcast_to" in line for line in text.splitlines())
    assert reshaped_broadcast != rewritten, text
    for fuse in (True, False):
        got = flowjit.jit(function, fuse=fuse)(x)
        want = function(x)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6)
