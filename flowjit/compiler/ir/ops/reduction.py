"""Reductions over a set of axes: sum, prod, mean, max, min, var, std, argmax, argmin.

``axes`` are normalized (non-negative, sorted, unique) by whoever builds the node; the
result dtype is numpy's (sum of int32 is int64, mean of an integer is float64, ...).
"""

from __future__ import annotations

import functools
import warnings

import numpy as np

from flowjit.compiler.ir.ops import elementwise
from flowjit.compiler.ir.ops.base import (AttrKind, Op, OpKind, attr, normalize_axis, register,
                                          required)
from flowjit.compiler.ir.ops.lowering import extreme, is_bool, is_float, literal
from flowjit.compiler.ir.types import TensorType, check_dtype, compute_dtype
from flowjit.errors import OpTypeError, ShapeError


@functools.lru_cache(maxsize=None)
def _reduced_dtype(function, dtype: np.dtype, extra: tuple) -> np.dtype:
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            result = function(np.zeros((1,), dtype), axis=0, **dict(extra))
    except TypeError as error:
        raise OpTypeError(f"not defined for dtype {dtype}: {error}") from None
    return check_dtype(np.asarray(result).dtype, "result")


def _check_axes(axes: tuple[int, ...], rank: int) -> tuple[int, ...]:
    for axis in axes:
        normalize_axis(axis, rank)
    if list(axes) != sorted(set(axes)) or any(axis < 0 for axis in axes):
        raise ShapeError(f"axes {list(axes)} must be non-negative, sorted and unique")
    return axes


def reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if axis in axes else dim for axis, dim in enumerate(shape))
    return tuple(dim for axis, dim in enumerate(shape) if axis not in axes)


# -- how each reduction accumulates, in the kernel language: (accumulator dtype) -> (start, combine) --
def _adding(dtype):
    return literal(0, dtype), (lambda a, b: f"({a} | {b})") if is_bool(dtype) else (lambda a, b: f"({a} + {b})")


def _multiplying(dtype):
    return literal(1, dtype), (lambda a, b: f"({a} & {b})") if is_bool(dtype) else (lambda a, b: f"({a} * {b})")


def _extreme(larger: bool):
    """max/argmax (``larger``) and min/argmin; a float NaN is sticky: nothing compares past it."""
    compare = ">" if larger else "<"

    def rule(dtype):
        start = extreme(dtype, lowest=larger)
        if is_bool(dtype):
            return start, (lambda a, b: f"({a} | {b})") if larger else (lambda a, b: f"({a} & {b})")
        if is_float(dtype):
            return start, lambda a, b: f"({b} if ({b} {compare} {a}) | ({b} != {b}) else {a})"
        return start, lambda a, b: f"({b} if {b} {compare} {a} else {a})"
    return rule


# -- gradient rules (ir/gradients.py): the cotangent, its reduced axes kept, spread over the input --
def _count(node) -> int:
    return int(np.prod([node.inputs[0].shape[axis] for axis in node.attrs["axes"]], dtype=np.int64))


def _sum_grad(node, g, b):
    return (b.broadcast(b.kept(g, node), node.inputs[0].shape),)


def _mean_grad(node, g, b):
    return (b.broadcast(b.div(b.kept(g, node), b.like(max(_count(node), 1), g)), node.inputs[0].shape),)


def _prod_grad(node, g, b):
    """prod(x) / x per element (a zero element gives NaN where numpy's true derivative does not)."""
    x = node.inputs[0]
    return (b.div(b.mul(b.kept(g, node), b.kept(node.output, node)), x),)


def _extreme_grad(node, g, b):
    """The cotangent to the elements equal to the extreme, shared equally between ties."""
    x = node.inputs[0]
    chosen = b.cast(b(elementwise.eq, [x, b.kept(node.output, node)]), g.dtype)
    ties = b(sum_, [chosen], {"axes": node.attrs["axes"], "keepdims": True})
    return (b.mul(chosen, b.div(b.kept(g, node), ties)),)


def _variance_grad(node, g, b):
    """var: 2 (x - mean) / (N - ddof);  std: (x - mean) / ((N - ddof) std)."""
    x = node.inputs[0]
    axes = node.attrs["axes"]
    deviation = b.sub(x, b(mean, [x], {"axes": axes, "keepdims": True}))
    divisor = b.like(max(_count(node) - node.attrs["ddof"], 0), g)
    scale = b.div(b.mul(b.like(2, g), b.kept(g, node)), divisor)
    if node.op is std:
        scale = b.div(b.div(b.kept(g, node), divisor), b.kept(node.output, node))
    return (b.mul(scale, deviation),)


def _reduction(name: str, function, combine=None, *, extra_attrs: dict | None = None, ufunc=None,
               gradient=None, complex_values: bool = False) -> Op:
    """``ufunc``: the ufunc without identity the reduction is (max: maximum), so that an
    empty reduced axis raises numpy's ValueError.  ``complex_values``: it takes complex values."""
    extra_attrs = extra_attrs or {}

    def rule(types, attrs):
        (source,) = types
        axes = _check_axes(attrs["axes"], source.rank)
        if ufunc is not None and any(source.shape[axis] == 0 for axis in axes):
            raise ShapeError(f"zero-size array to reduction operation {ufunc.__name__} which has no identity")
        extra = tuple((key, attrs[key]) for key in extra_attrs)
        dtype = _reduced_dtype(function, source.dtype, extra)
        return [TensorType(reduced_shape(source.shape, axes, attrs["keepdims"]), dtype)]

    def reference(arrays, attrs):
        extra = {key: attrs[key] for key in extra_attrs}
        return [function(arrays[0], axis=attrs["axes"], keepdims=attrs["keepdims"], **extra)]

    return register(Op(name, OpKind.REDUCTION, 1, rule, reference,
                       attrs={"axes": required(AttrKind.INTS), "keepdims": attr(AttrKind.BOOL, False),
                              **extra_attrs},
                       doc=f"numpy.{function.__name__}", combine=combine, gradient=gradient,
                       complex=complex_values))


sum_ = _reduction("sum", np.sum, _adding, gradient=_sum_grad, complex_values=True)
prod_ = _reduction("prod", np.prod, _multiplying, gradient=_prod_grad, complex_values=True)
mean = _reduction("mean", np.mean, _adding, gradient=_mean_grad, complex_values=True)          # (the kernel divides the total by the count)
max_ = _reduction("max", np.max, _extreme(larger=True), ufunc=np.maximum, gradient=_extreme_grad)
min_ = _reduction("min", np.min, _extreme(larger=False), ufunc=np.minimum, gradient=_extreme_grad)
# var and std have no kernel rule: the expand-composites pass writes them as means.
var = _reduction("var", np.var, extra_attrs={"ddof": attr(AttrKind.INT, 0)}, gradient=_variance_grad)
std = _reduction("std", np.std, extra_attrs={"ddof": attr(AttrKind.INT, 0)}, gradient=_variance_grad)


def _arg_reduction(name: str, function, combine) -> Op:
    def rule(types, attrs):
        (source,) = types
        axis, keepdims = attrs["axis"], attrs["keepdims"]
        if axis is None:
            empty = source.size == 0
            shape = (1,) * source.rank if keepdims else ()
        else:
            normalize_axis(axis, source.rank)
            if axis < 0:
                raise ShapeError(f"axis {axis} must be non-negative")
            empty = source.rank > 0 and source.shape[axis] == 0
            shape = reduced_shape(source.shape, (axis,), keepdims)
        if empty:                       # numpy's message; an empty kept axis is fine
            raise ShapeError(f"attempt to get {name} of an empty sequence")
        return [TensorType(shape, np.dtype(np.intp))]

    def reference(arrays, attrs):
        return [function(arrays[0], axis=attrs["axis"], keepdims=attrs["keepdims"])]

    return register(Op(name, OpKind.REDUCTION, 1, rule, reference,
                       attrs={"axis": attr(AttrKind.OPTIONAL_INT), "keepdims": attr(AttrKind.BOOL, False)},
                       doc=f"numpy.{function.__name__}", combine=combine))


# (the first position of the extreme: a later equal value does not replace it)
argmax = _arg_reduction("argmax", np.argmax, _extreme(larger=True))
argmin = _arg_reduction("argmin", np.argmin, _extreme(larger=False))
ARG_REDUCTIONS = (argmax, argmin)         # reductions to a position, not a value


def reduction_axes(node) -> tuple[int, ...]:
    """The input axes a reduction node reduces (argmax/argmin over None: every axis)."""
    if node.op in ARG_REDUCTIONS:
        axis = node.attrs["axis"]
        return tuple(range(node.inputs[0].type.rank)) if axis is None else (axis,)
    return tuple(node.attrs["axes"])


def accumulator_dtype(node) -> np.dtype:
    """What a reduction accumulates in: float sums, products and means in float64 (numpy's
    pairwise float32 sum is about as accurate), complex ones in complex128; argmax/argmin the
    extreme value itself."""
    if node.op in ARG_REDUCTIONS:
        return compute_dtype(node.inputs[0].dtype)
    out = compute_dtype(node.output.dtype)
    if node.op in (sum_, prod_, mean) and out.kind in "fc":
        return np.dtype(np.float64 if out.kind == "f" else np.complex128)
    return out


def lane_dtype(node) -> np.dtype:
    """What a reduction's lanes hold inside a row loop: float32 sums add in float32, each
    lane at most 16 elements (numpy's pairwise sum adds 16 per accumulator too) before the
    lanes are added into float64 ones, so the loop stays as wide as its float32 work."""
    dtype = accumulator_dtype(node)
    source = compute_dtype(node.inputs[0].dtype)
    if node.op in (sum_, mean) and dtype.kind == source.kind == "f" and source.itemsize < dtype.itemsize:
        return source
    return dtype
