"""Indexing with integer arrays, np.take and np.take_along_axis (one gather op, compiler/ir/ops/
gather.py, and its gradient scatter_add) and np.einsum (frontend/einsum.py: transposes, sums and
matmuls): numpy's results on every path, numpy's placement of the indexed axes, the errors and
gradients."""

import numpy as np
import pytest

import flowjit
from flowjit.compiler.ir.evaluate import InterpreterError
from flowjit.errors import OpTypeError, ShapeError, UnsupportedFunctionError
from test_array_ops import GRADIENT_PATHS, agree, line_of
from test_gradients import check

RNG = np.random.default_rng(14)
X = RNG.normal(size=(4, 5, 3))
LABELS = RNG.integers(0, 5, 4)
I8 = RNG.integers(-100, 100, (4, 5)).astype(np.int8)


def test_integer_array_indexing_matches_numpy():
    """Adjacent index arrays keep their place (x[:, l]); separated ones go in front (x[l, 1:, l]);
    Python ints beside arrays broadcast with them; slices apply first; negative indices count
    from the end; a list is an index array."""
    def f(x, labels, b):
        logp = x[:, :, 0]
        return (logp[np.arange(4), labels], x[:, labels], x[..., [0, 2]], x[1:3, labels[:2], ::-1],
                x[labels % 4, 1:, labels % 3], x[0, labels], x[labels[:, None] % 4, labels[None, :2]],
                x[-labels % 4 - 4], b[[1, -1]], b[labels % 4, labels.astype(np.uint8)], x[np.int64(2) * 0 + labels % 4],
                b[0][labels[1]] * 2 + b[labels[2] % 4, 1], np.take(b[1], labels[3]))    # 0-d indices: 0-d results
    agree(f, X, LABELS, I8)


def test_take_and_take_along_axis_match_numpy():
    def f(x, labels):
        order = np.argmax(x, axis=2, keepdims=True)
        return (np.take(x, labels), np.take(x, labels, axis=1), np.take(x, labels + 7, axis=1, mode="wrap"),
                np.take(x, labels - 2, axis=-1, mode="clip"), x.take(labels[0] % 3, axis=2),
                np.take_along_axis(x, order, axis=2), np.take_along_axis(x, order[:, :1, :] % 4, axis=0),
                np.take_along_axis(x[0, 0], labels % 3, axis=None))
    agree(f, X, LABELS)


def test_an_index_out_of_bounds_is_numpys_index_error_at_run_time():
    def f(x, labels):
        return x[labels]
    for options in ({}, {"fuse": False}):
        with pytest.raises(IndexError, match="index 8 is out of bounds for axis 0 with size 4"):
            flowjit.jit(f, **options)(X, np.array([0, 8]))
    with pytest.raises(InterpreterError, match=r"%gather \(gather\) failed .*: index 8 is out of bounds"):
        flowjit.jit(f, backend="interpreter")(X, np.array([0, 8]))


def test_indexing_errors():
    def mask(x):
        return x[x > 0]  # mask
    with pytest.raises(UnsupportedFunctionError, match=r"indexing f64\[4,5,3\]: indexing with a boolean array "
                                                       r"\(a mask\) has a data-dependent shape") as info:
        flowjit.jit(mask)(X)
    assert info.value.location.line == line_of(mask, "mask")

    def float_index(x):
        return x[x[0, 0].astype(np.float32)]
    with pytest.raises(OpTypeError, match=r"arrays used as indices must be of integer type, got f32\[3\]"):
        flowjit.jit(float_index)(X)

    def mismatched(x, labels):
        return x[labels, labels[:2]]
    with pytest.raises(ShapeError, match=r"gather: index arrays i64\[4\], i64\[2\] do not broadcast"):
        flowjit.jit(mismatched)(X, LABELS)

    def bad_mode(x, labels):
        return np.take(x, labels, mode="bounce")
    with pytest.raises(ShapeError, match=r"np\.take: clipmode must be one of 'clip', 'raise', or 'wrap'"):
        flowjit.jit(bad_mode)(X, LABELS)


def test_gather_gradient_adds_repeated_indices():
    weights = RNG.normal(size=(4, 5))
    repeated = np.array([0, 2, 2, 3])

    def loss(x):
        return ((np.sin(x[:, repeated, 1]) * weights[:, :4]).sum() + (x[repeated, 1:, repeated % 3] ** 2).sum()
                + np.take_along_axis(x, np.argmax(x, axis=0, keepdims=True), axis=0).sum())
    check(loss, X, paths=GRADIENT_PATHS)


# -- np.einsum ---------------------------------------------------------------------------------------------
Q = RNG.normal(size=(2, 3, 4, 5))
K = RNG.normal(size=(2, 3, 6, 5))
M = RNG.normal(size=(4, 5))
V = RNG.normal(size=5)


def test_einsum_matches_numpy():
    def f(q, k, m, v, b):
        scores = np.einsum("bhqd,bhkd->bhqk", q, k)
        return (scores, np.einsum("bhqk,bhkd->bhqd", scores, k), np.einsum("ij->ji", m), np.einsum("ij->i", m),
                np.einsum("ij", m), np.einsum("ji", m), np.einsum("ij,j->i", m, v), np.einsum("i,j->ij", v, v),
                np.einsum("ij,kj->ik", m, m), np.einsum("ij,ij->", m, m), np.einsum("ij,jk,kl->il", m, m.T, m),
                np.einsum("bhqd,d->hbq", q, v), np.einsum("ij,ik->", m, m), np.einsum(" ij , kj ", m, m),
                np.einsum("ij->", b), np.einsum("ij,kj", b, b))            # int8 stays int8, as numpy's
    agree(f, Q, K, M, V, I8)


def test_einsum_errors():
    def diagonal(m):
        return np.einsum("ii->i", m[:, :4])  # diag
    with pytest.raises(UnsupportedFunctionError, match=r"np\.einsum\('ii->i'\): a repeated index in 'ii' "
                                                       r"\(a diagonal\) is not supported") as info:
        flowjit.jit(diagonal)(M)
    assert info.value.location.line == line_of(diagonal, "diag")

    def ellipsis(m):
        return np.einsum("...j->...", m)
    with pytest.raises(UnsupportedFunctionError, match=r"ellipses \('\.\.\.'\) are not supported"):
        flowjit.jit(ellipsis)(M)

    def sizes(m):
        return np.einsum("ij,ij->i", m, m.T)
    with pytest.raises(ShapeError, match=r"np\.einsum\('ij,ij->i'\): index 'i' has sizes 4 and 5"):
        flowjit.jit(sizes)(M)

    def too_few(m):
        return np.einsum("ij,jk->ik", m)
    with pytest.raises(ShapeError, match=r"2 operand subscripts for 1 operands"):
        flowjit.jit(too_few)(M)


def test_einsum_gradient():
    def loss(m):
        return (np.sin(np.einsum("ij,kj->ik", m, m)).sum() + np.einsum("ij,j->", m, m[0])
                + np.cos(np.einsum("bqd,bkd->bqk", m.reshape(2, 2, 5), m.reshape(2, 2, 5))).sum())
    check(loss, M, paths=GRADIENT_PATHS)
