"""collapse-loops: loop kernels run the adjacent axes every value treats alike as one loop."""

import numpy as np
import pytest

import flowjit
from flowjit.compiler.ir import ops

# (operand shapes, the loop domains expected after the pass): the first operand has the full shape.
CASES = [
    (((6, 5, 3),), [(90,)]),
    (((6, 5, 3), (3,)), [(30, 3)]),                     # a per-channel vector keeps its axis apart
    (((6, 5, 3), (5, 1)), [(6, 5, 3)]),                 # spans the middle axis only
    (((6, 5, 3), (6, 1, 1)), [(6, 15)]),                # a per-image scale
    (((4, 1, 6), (6,)), [(4, 6)]),                      # a size-1 axis joins the one before it
    (((1, 7), ()), [(7,)]),
    (((2, 3, 4, 5), (3, 4, 1)), [(2, 12, 5)]),
    (((2, 3, 4, 5), (2, 1, 1, 5)), [(2, 12, 5)]),
]


def _loop_domains(jitted, *args):
    fused = jitted.lower(*args).fused
    return [node.attrs["plan"].domain for node in fused.nodes if node.op is ops.fused]


@pytest.mark.parametrize("shapes, domains", CASES, ids=[str(c[0]) for c in CASES])
def test_merged_loops_match_numpy(shapes, domains):
    rng = np.random.default_rng(len(shapes[0]))
    args = [rng.standard_normal(shape) for shape in shapes]

    def program(x, *rest):
        y = np.exp(x * 0.5) - 1.0
        for operand in rest:
            y = y * operand + operand
        return y
    jitted = flowjit.jit(program)
    assert _loop_domains(jitted, *args) == domains
    np.testing.assert_allclose(jitted(*args), program(*args), rtol=1e-12)


def test_strided_and_transposed_inputs_are_read_in_place_and_arguments_of_any_layout_work():
    """A kernel whose input is a strided view keeps its axes (a reshape would copy the view);
    an argument passed Fortran-ordered or strided is reshaped by numpy (a copy) and still gives
    numpy's result."""
    def strided(y):
        return np.sqrt(np.abs(y[:, ::2])) + y.T[:4, :3].T
    y = np.random.default_rng(3).standard_normal((3, 8))
    jitted = flowjit.jit(strided)
    assert all(len(domain) == 2 for domain in _loop_domains(jitted, y))
    np.testing.assert_allclose(jitted(y), strided(y), rtol=1e-12)

    def chain(x):
        return ((x * 2 + 1) * x - 3) / (x * x + 1)
    x = np.random.default_rng(4).standard_normal((6, 10))
    jitted = flowjit.jit(chain)
    for argument in (x, np.asfortranarray(x), x[:, ::2], x.T):
        np.testing.assert_allclose(jitted(argument), chain(argument), rtol=1e-12)


def test_pieces_of_a_concatenation_keep_their_axes():
    """A kernel writing straight into its slice of np.concatenate's result is not merged: a
    slice along the second axis is strided, and cannot be seen with a merged shape."""
    def joined(a, b):
        return np.concatenate([np.sin(a), b * 2], axis=1)
    a, b = np.ones((4, 3)), np.ones((4, 5))
    jitted = flowjit.jit(joined)
    assert all(len(domain) == 2 for domain in _loop_domains(jitted, a, b))
    np.testing.assert_allclose(jitted(a, b), joined(a, b), rtol=1e-12)


def test_array_constants_take_the_merged_shape():
    """A constant array inside the kernel (a [[0.5]] the program spells out) is reshaped with
    the values around it; one spanning a kept axis keeps its shape."""
    def program(x):
        return x * np.array([[0.5]]) + np.array([1.0, 2.0, 3.0])
    x = np.random.default_rng(5).standard_normal((4, 5, 3))
    jitted = flowjit.jit(program)
    assert _loop_domains(jitted, x) == [(20, 3)]
    np.testing.assert_allclose(jitted(x), program(x), rtol=1e-12)
    y = x[..., :1].copy()           # (the product, per pixel, recomputed per channel: fuse.BROADCAST_REPEAT)
    assert _loop_domains(jitted, y) == [(20, 3)]
    np.testing.assert_allclose(jitted(y), program(y), rtol=1e-12)
