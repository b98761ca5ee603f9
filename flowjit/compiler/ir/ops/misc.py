"""Constants, matmul, and the stateful ops (a variable's reads and writes).

Random numbers are stateless (``ops/random.py``: counter-based, a pure function of a key),
so the only state an op touches is a variable's."""

from __future__ import annotations

import functools

import numpy as np

from flowjit.compiler.ir.ops.base import AttrKind, Op, OpKind, register, required
from flowjit.compiler.ir.ops.shape import transpose
from flowjit.compiler.ir.types import TensorType, check_dtype
from flowjit.errors import OpTypeError, ShapeError

constant = register(Op("constant", OpKind.CONSTANT, 0,
                       lambda types, attrs: [TensorType.of(attrs["value"])],
                       lambda arrays, attrs: [attrs["value"]],
                       attrs={"value": required(AttrKind.ARRAY)}, doc="a literal array"))


def constant_value(value):
    """The array a value holds if it is produced by a constant node, else None."""
    producer = value.producer
    if producer is not None and producer.op is constant and not producer.control_inputs:
        return producer.attrs["value"]
    return None     # (a constant that waits for something is folded into nothing: its edges would go)


@functools.lru_cache(maxsize=None)
def _matmul_dtype(left: np.dtype, right: np.dtype) -> np.dtype:
    try:
        result = np.matmul(np.zeros((1, 1), left), np.zeros((1, 1), right))
    except TypeError as error:
        raise OpTypeError(f"not defined for dtypes ({left}, {right}): {error}") from None
    return check_dtype(result.dtype, "result")


def matmul_shape(left: tuple[int, ...], right: tuple[int, ...]) -> tuple[int, ...]:
    """numpy.matmul's shape rule: 1-D operands gain and lose a dim, batch dims broadcast."""
    if not left or not right:
        raise ShapeError("matmul operands must have at least one dimension")
    a = (1,) + left if len(left) == 1 else left
    b = right + (1,) if len(right) == 1 else right
    if a[-1] != b[-2]:
        raise ShapeError(f"contracted dimensions differ: {a[-1]} vs {b[-2]}")
    try:
        batch = np.broadcast_shapes(a[:-2], b[:-2])
    except ValueError:
        raise ShapeError(f"batch dimensions {list(a[:-2])} and {list(b[:-2])} do not broadcast") from None
    shape = batch + (a[-2], b[-1])
    if len(left) == 1:
        shape = shape[:-2] + shape[-1:]
    if len(right) == 1:
        shape = shape[:-1]
    return tuple(shape)


def _matmul_rule(types, attrs):
    left, right = types
    return [TensorType(matmul_shape(left.shape, right.shape), _matmul_dtype(left.dtype, right.dtype))]


def _matmul_grad(node, g, b):
    """g @ B^T and A^T @ g, a 1-d operand taken as a row (left) or a column (right), summed over
    the batch axes an operand was broadcast along."""
    def swap(value):
        perm = list(range(value.type.rank))
        perm[-2:] = perm[-1], perm[-2]
        return b(transpose, [value], {"perm": perm})
    a, c = node.inputs
    left = b.reshape(a, (1,) + a.shape) if a.type.rank == 1 else a
    right = b.reshape(c, c.shape + (1,)) if c.type.rank == 1 else c
    g = b.reshape(g, matmul_shape(left.shape, right.shape))
    d_left = b.sum_to(b(matmul, [g, swap(right)]), left.shape)
    d_right = b.sum_to(b(matmul, [swap(left), g]), right.shape)
    return b.reshape(d_left, a.shape), b.reshape(d_right, c.shape)


matmul = register(Op("matmul", OpKind.MATMUL, 2, _matmul_rule,
                     lambda arrays, attrs: [np.matmul(*arrays)], doc="numpy.matmul", gradient=_matmul_grad,
                     complex=True))


# -- stateful ops: the interpreter's ``state`` holds the variables -----------------------------
def _variable_rule(types, attrs):
    return [TensorType(attrs["shape"], attrs["dtype"])]


def _read_variable(arrays, attrs, state):
    return [state.read(attrs["var"])]


def _assign_variable(arrays, attrs, state):
    state.write(attrs["var"], arrays[0])
    return []


def _stateless_reference(arrays, attrs):
    raise RuntimeError("a stateful op needs the interpreter's state")


def _stateful(name, num_inputs, rule, run, attrs, doc):
    op = register(Op(name, OpKind.STATEFUL, num_inputs, rule, _stateless_reference,
                     attrs=attrs, stateful=True, doc=doc))
    op.extensions["run_with_state"] = run
    return op


read_variable = _stateful(
    "read_variable", 0, _variable_rule, _read_variable,
    {"var": required(AttrKind.STR), "shape": required(AttrKind.INTS), "dtype": required(AttrKind.DTYPE)},
    "the current value of a Variable")


def _assign_rule(types, attrs):
    return []


assign_variable = _stateful("assign_variable", 1, _assign_rule, _assign_variable,
                            {"var": required(AttrKind.STR)}, "store a new value into a Variable")

VARIABLE_OPS = (read_variable, assign_variable)


def variable_of(node) -> str | None:
    """The name of the variable ``node`` reads or writes, or None for any other node."""
    return node.attrs["var"] if node.op in VARIABLE_OPS else None
