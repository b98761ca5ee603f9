"""``flowjit.random``: random numbers from explicit, splittable keys (JAX's ``jax.random``).

A key is a ``uint32[2]`` array; every number is a pure function of the key and the
element's position (Threefry-2x32, ``compiler/ir/ops/random.py``), so the interpreter,
fused and unfused kernels and every device give the same numbers, and the same key gives
the same numbers on every call.  Use a key once; ``split`` it for more::

    key = flowjit.random.key(0)
    key, sub = flowjit.random.split(key)
    x = flowjit.random.normal(sub, (4, 8), dtype=np.float32)

Inside a jitted function or a graph under construction the calls trace ops (with a key
that is an argument, a placeholder or a constant); outside they compute at once, with the
ops' own reference implementations, and return numpy arrays.
"""

from __future__ import annotations

import operator

import numpy as np

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.types import check_dtype
from flowjit.errors import ArgumentError, OpTypeError, user_location
from flowjit.frontend.tracer import Tracer, current_trace, lift_operands

__all__ = ["key", "split", "bits", "uniform", "normal"]

KEY_DTYPE = np.dtype(np.uint32)
_WORD = np.uint64(1 << 32)
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def key(seed) -> np.ndarray:
    """The key of an integer seed: ``uint32[2]``, the seed's high and low 32 bits (a negative
    seed counts as its 64-bit two's complement)."""
    if isinstance(seed, Tracer):
        raise ArgumentError("flowjit.random.key(seed) needs a Python or numpy integer, not a traced value: "
                            "make the key outside and pass it in as an argument", user_location())
    try:
        seed = operator.index(seed)
    except TypeError:
        raise ArgumentError(f"flowjit.random.key(seed) needs an integer seed, got {type(seed).__name__}",
                            user_location()) from None
    if not -(1 << 63) <= seed < (1 << 64):
        raise ArgumentError(f"flowjit.random.key: seed {seed} does not fit in 64 bits", user_location())
    seed &= (1 << 64) - 1
    return np.array([seed >> 32, seed & 0xFFFFFFFF], dtype=KEY_DTYPE)


def split(key, num: int = 2):
    """``num`` new keys (``uint32[num, 2]``), independent of each other and of ``key``'s numbers."""
    num = _count(num, "split", "num")
    raw = _hash(_checked_key(key, "split"), (num,))
    return np.stack([(raw // _WORD).astype(KEY_DTYPE), (raw & np.uint64(0xFFFFFFFF)).astype(KEY_DTYPE)], axis=-1)


def bits(key, shape=(), dtype=np.uint32):
    """Random bits: uint32 (the first Threefry word) or uint64 (both words) of ``shape``."""
    dtype = np.dtype(dtype)
    raw = _hash(_checked_key(key, "bits"), _shape(shape, "bits"))
    if dtype == np.uint64:
        return raw
    if dtype == np.uint32:
        return (raw // _WORD).astype(KEY_DTYPE)
    raise OpTypeError(f"flowjit.random.bits makes uint32 or uint64, not {dtype}", user_location())


def uniform(key, shape=(), dtype=np.float64, minval: float = 0.0, maxval: float = 1.0):
    """Uniform numbers in [minval, maxval) of ``shape`` and ``dtype`` (float32 or float64)."""
    dtype = _float_dtype(dtype, "uniform")
    raw = _hash(_checked_key(key, "uniform"), _shape(shape, "uniform"))
    bounds = [np.asarray(bound, dtype) for bound in (minval, maxval)]
    return _apply(_trace_of(key), ops.uniform_from_bits, [raw] + bounds, {}, "uniform")


def normal(key, shape=(), dtype=np.float64):
    """Standard normal numbers of ``shape`` and ``dtype`` (float32 or float64)."""
    dtype = _float_dtype(dtype, "normal")
    raw = _hash(_checked_key(key, "normal"), _shape(shape, "normal"))
    return _apply(_trace_of(key), ops.normal_from_bits, [raw], {"dtype": dtype}, "normal")


# -- pieces ------------------------------------------------------------------------------------------
def _trace_of(key):
    return key._trace if isinstance(key, Tracer) else current_trace()


def _apply(trace, op, operands: list, attrs: dict, what: str):
    """``op`` on ``operands``: traced when building a graph, else computed by its reference."""
    if trace is None:
        return op.evaluate([np.asarray(item) for item in operands], op.normalize_attrs(attrs))[0]
    return trace.emit1(op, lift_operands(trace, operands, f"flowjit.random.{what}"), attrs,
                       what=f"flowjit.random.{what}")


def _hash(key, shape: tuple[int, ...]):
    """The raw 64 bits of each element of ``shape``: Threefry of ``key`` and the flat index."""
    trace = _trace_of(key)
    if trace is None:
        counter = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.uint64).reshape(shape)
    else:
        counter = None
        stride = 1
        for axis in reversed(range(len(shape))):
            if shape[axis] != 1:
                iota_shape = tuple(size if dim == axis else 1 for dim, size in enumerate(shape))
                term = trace.emit1(ops.iota, [], {"shape": iota_shape, "axis": axis, "step": stride})
                counter = term if counter is None else term + counter
            stride *= shape[axis]
        if counter is None:
            counter = np.zeros(shape, np.uint64)           # one element: index 0
    return _apply(trace, ops.threefry2x32, [key[0], key[1], counter], {}, "threefry2x32")


def _checked_key(key, what: str):
    if not isinstance(key, Tracer):
        if not isinstance(key, (np.ndarray, list, tuple)):
            raise ArgumentError(f"flowjit.random.{what}: the key must be a uint32[2] array from "
                                f"flowjit.random.key(seed), got {type(key).__name__}", user_location())
        key = np.asarray(key)
    if key.shape != (2,) or key.dtype != KEY_DTYPE:
        shown = key._value.type if isinstance(key, Tracer) else f"{key.dtype}{list(key.shape)}"
        raise ArgumentError(f"flowjit.random.{what}: the key must be uint32[2] (from flowjit.random.key(seed) "
                            f"or split), got {shown}" + (" (index split's result: keys[0])"
                                                        if key.ndim == 2 else ""), user_location())
    return key


def _shape(shape, what: str) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        dims = tuple(operator.index(size) for size in shape)
    except TypeError:
        raise ArgumentError(f"flowjit.random.{what}: shape must be a tuple of integers, got {shape!r}",
                            user_location()) from None
    if any(size < 0 for size in dims):
        raise ArgumentError(f"flowjit.random.{what}: shape {list(dims)} has a negative size", user_location())
    return dims


def _count(num, what: str, name: str) -> int:
    try:
        num = operator.index(num)
    except TypeError:
        raise ArgumentError(f"flowjit.random.{what}: {name} must be an integer, got {type(num).__name__}",
                            user_location()) from None
    if num < 0:
        raise ArgumentError(f"flowjit.random.{what}: {name} {num} is negative", user_location())
    return num


def _float_dtype(dtype, what: str) -> np.dtype:
    dtype = check_dtype(dtype, f"flowjit.random.{what}'s dtype")
    if dtype not in _FLOATS:
        raise OpTypeError(f"flowjit.random.{what} makes float32 or float64, not {dtype}", user_location())
    return dtype
