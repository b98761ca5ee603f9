"""Dense linear algebra as numpy's own LAPACK calls: ``inv``, ``det`` and ``solve`` of (stacks
of) square matrices, each one call outside kernels (OpKind.LIBRARY), with numpy's shapes, dtypes
(integers and booleans computed in float64; float16 refused, as numpy refuses it) and errors (a
singular matrix raises numpy's LinAlgError when the program runs).

Their gradients are the usual ones: d inv(A) = -inv(A)^T g inv(A)^T; d det(A) = g det(A)
inv(A)^T; for X = solve(A, B), dB = solve(A^T, g) and dA = -dB X^T.
"""

from __future__ import annotations

import numpy as np

from flowjit.compiler.ir.ops.base import Op, OpKind, numpy_call, register
from flowjit.compiler.ir.ops.misc import matmul
from flowjit.compiler.ir.ops.shape import transpose
from flowjit.compiler.ir.types import TensorType
from flowjit.errors import OpTypeError, ShapeError


def linalg_dtype(*dtypes: np.dtype) -> np.dtype:
    """numpy.linalg's computing type: integers and booleans as float64, float16 refused."""
    for dtype in dtypes:
        if dtype == np.float16 or dtype.kind not in "biufc":
            raise OpTypeError(f"array type {dtype} is unsupported in linalg")
    return np.result_type(*(dtype if dtype.kind in "fc" else np.dtype(np.float64) for dtype in dtypes))


def _square(source: TensorType, what: str) -> None:
    if source.rank < 2:
        raise ShapeError(f"{what}: {source.rank}-dimensional array given. Array must be at least two-dimensional")
    if source.shape[-1] != source.shape[-2]:
        raise ShapeError(f"{what}: Last 2 dimensions of the array must be square, got {source}")


def _inv_rule(types, attrs):
    (source,) = types
    _square(source, "inv")
    return [TensorType(source.shape, linalg_dtype(source.dtype))]


def _det_rule(types, attrs):
    (source,) = types
    _square(source, "det")
    return [TensorType(source.shape[:-2], linalg_dtype(source.dtype))]


def _solve_rule(types, attrs):
    a, b = types
    _square(a, "solve")
    size = a.shape[-1]
    if b.rank == 1:                               # numpy 2: a 1-d b is one vector
        if b.shape[0] != size:
            raise ShapeError(f"solve: {b} does not match the {size}x{size} matrices of {a}")
        return [TensorType(a.shape[:-1], linalg_dtype(a.dtype, b.dtype))]
    if b.shape[-2] != size:
        raise ShapeError(f"solve: {b} does not match the {size}x{size} matrices of {a}")
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ShapeError(f"solve: the stacks of {a} and {b} do not broadcast") from None
    return [TensorType(tuple(batch) + b.shape[-2:], linalg_dtype(a.dtype, b.dtype))]


def _swap(b, value):
    perm = list(range(value.type.rank))
    perm[-2:] = perm[-1], perm[-2]
    return b(transpose, [value], {"perm": perm})


def _inv_grad(node, g, b):
    inverse_t = _swap(b, node.output)
    return (b.neg(b(matmul, [b(matmul, [inverse_t, g]), inverse_t])),)


def _det_grad(node, g, b):
    (a,) = node.inputs
    scale = b.reshape(b.mul(g, node.output), node.output.shape + (1, 1))
    return (b.mul(scale, _swap(b, b(inv, [a]))),)


def _solve_grad(node, g, b):
    a, rhs = node.inputs
    x = node.output
    vector = rhs.type.rank == 1
    if vector:                                    # as a one-column matrix
        g, x = b.reshape(g, g.shape + (1,)), b.reshape(x, x.shape + (1,))
    d_rhs = b(solve, [_swap(b, a), g])
    d_a = b.neg(b(matmul, [d_rhs, _swap(b, x)]))
    if vector:                                    # (..., M): backward sums the stack away
        d_rhs = b.reshape(d_rhs, d_rhs.shape[:-1])
    return d_a, d_rhs


def _library(name: str, arity: int, rule, function, grad, doc: str) -> Op:
    return register(Op(name, OpKind.LIBRARY, arity, rule,
                       lambda arrays, attrs: [np.asarray(function(*arrays))], doc=doc, gradient=grad,
                       complex=True, extensions={"compiled": numpy_call}))


inv = _library("inv", 1, _inv_rule, np.linalg.inv, _inv_grad, "numpy.linalg.inv (LAPACK's, numpy's own)")
det = _library("det", 1, _det_rule, np.linalg.det, _det_grad, "numpy.linalg.det (LAPACK's, numpy's own)")
solve = _library("solve", 2, _solve_rule, np.linalg.solve, _solve_grad, "numpy.linalg.solve (LAPACK's, numpy's own)")
