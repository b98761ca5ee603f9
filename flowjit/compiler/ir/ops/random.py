"""Counter-based random numbers: the Threefry-2x32 hash of a key and each element's index.

A random value is a pure function of a key (two uint32 words) and the element's position,
as in JAX and Random123 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
SC'11): no generator state, so the interpreter, fused and unfused kernels and every device
compute the same numbers, and any element can be computed on its own.

- ``iota {shape, axis, step}``: the index along ``axis`` times ``step`` (uint64), broadcast
  along the others.  It runs outside kernels (numpy's ``arange``); the flat index of an element
  of shape (n0, n1) is ``iota {shape=[n0, 1], step=n1} + iota {shape=[1, n1], axis=1}``, one
  small array per axis, added in the kernel that hashes it.
- ``threefry2x32 %key0, %key1, %counter``: Threefry-2x32 with 20 rounds of the key and the
  counter's two 32-bit halves, the two output words packed into one uint64 (first word high).
- ``uniform_from_bits %bits, %low, %high``: ``low + u * (high - low)`` in the bounds' dtype, with
  ``u`` in [0, 1) from the high 24 (float32) or 53 (float64) bits, exactly.
- ``normal_from_bits %bits {dtype}``: standard normal by Box-Muller from the two 32-bit words,
  in float64 with ``log`` and ``cos`` written in +, -, *, / and sqrt only (correctly rounded
  everywhere), then rounded once to the dtype.

Each function below is the op's reference; it is written in numpy operations that numba also
compiles for scalars with the same IEEE operations in the same order, so codegen compiles the
very same functions (``codegen/randomlib.py``) and the kernels' numbers equal the reference's
bit for bit.  They take and return arrays or (under numba) scalars.
"""

from __future__ import annotations

import numpy as np

from flowjit.compiler.ir.ops.base import (AttrKind, Op, OpKind, attr, broadcast_shapes, normalize_axis,
                                          register, required)
from flowjit.compiler.ir.ops.lowering import typed
from flowjit.compiler.ir.types import TensorType
from flowjit.errors import OpTypeError, ShapeError

U32, U64 = np.dtype(np.uint32), np.dtype(np.uint64)
MASK32 = np.uint64(0xFFFFFFFF)
# Threefry-2x32's rotation distances (Random123) and its key-schedule parity constant.
ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
PARITY = np.uint64(0x1BD11BDA)


# -- the hash ------------------------------------------------------------------------------------
def threefry2x32_bits(key0, key1, counter):
    """Threefry-2x32-20 of the key (key0, key1) and the counter (its low word, its high word):
    the two output words as one uint64, the first in the high half."""
    k0 = np.uint64(key0) & MASK32
    k1 = np.uint64(key1) & MASK32
    k2 = k0 ^ k1 ^ PARITY
    c = np.uint64(counter)
    x0 = ((c & MASK32) + k0) & MASK32
    x1 = ((c >> np.uint64(32)) + k1) & MASK32
    for group in range(5):
        for rotation in ROTATIONS[group % 2]:
            x0 = (x0 + x1) & MASK32
            x1 = ((x1 << np.uint64(rotation)) | (x1 >> np.uint64(32 - rotation))) & MASK32
            x1 = x1 ^ x0
        injection = group + 1
        if injection % 3 == 0:
            x0 = (x0 + k0) & MASK32
            x1 = (x1 + k1 + np.uint64(injection)) & MASK32
        elif injection % 3 == 1:
            x0 = (x0 + k1) & MASK32
            x1 = (x1 + k2 + np.uint64(injection)) & MASK32
        else:
            x0 = (x0 + k2) & MASK32
            x1 = (x1 + k0 + np.uint64(injection)) & MASK32
    return (x0 << np.uint64(32)) | x1


# -- bits to numbers -------------------------------------------------------------------------------
def uniform_f32(bits, low, high):
    """float32 in [low, high): the high 24 bits scaled by 2**-24 (exact), then low + u*(high-low)."""
    unit = np.float32(bits >> np.uint64(40)) * np.float32(5.9604644775390625e-08)
    return low + unit * (high - low)


def uniform_f64(bits, low, high):
    """float64 in [low, high): the high 53 bits scaled by 2**-53 (exact), then low + u*(high-low)."""
    unit = np.float64(bits >> np.uint64(11)) * np.float64(1.1102230246251565e-16)
    return low + unit * (high - low)


LN2 = 0.6931471805599453
TWO_PI = 6.283185307179586


def normal_f64(bits):
    """A standard normal float64 by Box-Muller, r cos(t) with r = sqrt(-2 log u1), t = 2 pi u2,
    u1 = (high word + 1) * 2**-32 in (0, 1] and u2 = low word * 2**-32 in [0, 1).

    One function with no calls (numba compiles it as it stands).  log(u1): the count
    (high word + 1) is 2**e * f with f in [sqrt(1/2), sqrt(2)) (so near u1 = 1 no large terms
    cancel); log(f) = 2 atanh(s), s = (f - 1) / (f + 1), |s| < 0.18, summed to 18 terms.  cos(t) = -cos(a), a = 2 pi (u2 - 1/2)
    in [-pi, pi), its Taylor series to 17 terms by Horner (the next is below 2**-60)."""
    count = (bits >> np.uint64(32)) + np.uint64(1)
    exponent = count - count
    rest = count
    for shift in (32, 16, 8, 4, 2, 1):
        step = np.uint64(rest >= (np.uint64(1) << np.uint64(shift))) * np.uint64(shift)
        rest = rest >> step
        exponent = exponent + step
    fraction = np.float64(count) / np.float64(np.uint64(1) << exponent)
    halve = np.uint64(fraction > 1.4142135623730951)        # f in [sqrt(1/2), sqrt(2)): no cancellation
    fraction = fraction / np.float64(np.uint64(1) + halve)
    exponent = exponent + halve
    s = (fraction - 1.0) / (fraction + 1.0)
    s2 = s * s
    series = 1.0 / 35.0
    for k in range(16, -1, -1):
        series = series * s2 + 1.0 / (2 * k + 1)
    log_u1 = (np.float64(exponent) - 32.0) * LN2 + 2.0 * s * series
    radius = np.sqrt(-2.0 * log_u1)
    a = (np.float64(bits & MASK32) * 2.3283064365386963e-10 - 0.5) * TWO_PI
    a2 = a * a
    cosine = 1.0
    for n in range(17, 0, -1):
        cosine = 1.0 - cosine * a2 / ((2.0 * n) * (2.0 * n - 1.0))
    return radius * -cosine


# -- the ops -----------------------------------------------------------------------------------------
def _iota_rule(types, attrs):
    shape = attrs["shape"]
    if any(size < 0 for size in shape):
        raise ShapeError(f"iota shape {list(shape)} has a negative size")
    if attrs["step"] < 0:
        raise ShapeError(f"iota step {attrs['step']} is negative")
    if shape:
        normalize_axis(attrs["axis"], len(shape), "iota axis")
    return [TensorType(shape, U64)]


def _iota(arrays, attrs):
    shape, axis = attrs["shape"], normalize_axis(attrs["axis"], len(attrs["shape"]))
    if not shape:
        return [np.zeros((), U64)]
    index = np.arange(shape[axis], dtype=U64) * np.uint64(attrs["step"])
    index = index.reshape([-1 if d == axis else 1 for d in range(len(shape))])
    return [np.ascontiguousarray(np.broadcast_to(index, shape))]


iota = register(Op("iota", OpKind.SHAPE, 0, _iota_rule, _iota,
                   attrs={"shape": required(AttrKind.INTS), "axis": attr(AttrKind.INT, 0),
                          "step": attr(AttrKind.INT, 1)},
                   doc="the index along an axis times step (uint64); runs outside kernels, like numpy.arange"))


def _threefry_rule(types, attrs):
    key0, key1, counter = types
    if (key0.dtype, key1.dtype, counter.dtype) != (U32, U32, U64):
        raise OpTypeError(f"threefry2x32 takes uint32 key words and a uint64 counter, got "
                          f"{key0}, {key1}, {counter}")
    return [TensorType(broadcast_shapes(types), U64)]


# Kernels call codegen/randomlib.py's numba compilations of the functions above, as fj.rng_*.
threefry2x32 = register(Op(
    "threefry2x32", OpKind.ELEMENTWISE, 3, _threefry_rule, lambda arrays, attrs: [threefry2x32_bits(*arrays)],
    lowering=typed(lambda c, key0, key1, counter: f"fj.rng_threefry2x32({key0}, {key1}, {counter})"),
    flops=130.0, doc="Threefry-2x32-20 of a key and a counter: 64 random bits"))

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _uniform_rule(types, attrs):
    bits, low, high = types
    if bits.dtype != U64 or low.dtype not in FLOATS or high.dtype != low.dtype:
        raise OpTypeError(f"uniform_from_bits takes uint64 bits and float32 or float64 bounds of one dtype, got "
                          f"{bits}, {low}, {high}")
    return [TensorType(broadcast_shapes(types), low.dtype)]


def _uniform(arrays, attrs):
    bits, low, high = arrays
    return [(uniform_f32 if low.dtype == np.float32 else uniform_f64)(bits, low, high)]


def _uniform_lowering(c, bits, low, high):
    return f"fj.rng_uniform_{'f32' if c.dtype == np.float32 else 'f64'}({bits}, {low}, {high})"


uniform_from_bits = register(Op(
    "uniform_from_bits", OpKind.ELEMENTWISE, 3, _uniform_rule, _uniform, lowering=typed(_uniform_lowering),
    flops=4.0, doc="uniform numbers in [low, high) from random bits (the bounds' dtype)"))


def _normal_rule(types, attrs):
    (bits,) = types
    if bits.dtype != U64:
        raise OpTypeError(f"normal_from_bits takes uint64 bits (from threefry2x32), got {bits}")
    if attrs["dtype"] not in FLOATS:
        raise OpTypeError(f"normal_from_bits makes float32 or float64, not {attrs['dtype']}")
    return [bits.with_dtype(attrs["dtype"])]


def _normal_lowering(c, bits):
    text = f"fj.rng_normal_f64({bits})"
    return f"np.float32({text})" if c.dtype == np.float32 else text


normal_from_bits = register(Op(
    "normal_from_bits", OpKind.ELEMENTWISE, 1, _normal_rule,
    lambda arrays, attrs: [np.asarray(normal_f64(arrays[0])).astype(attrs["dtype"])],
    attrs={"dtype": attr(AttrKind.DTYPE, np.dtype(np.float64))}, lowering=typed(_normal_lowering),
    flops=90.0, doc="standard normal numbers from random bits (Box-Muller)"))
