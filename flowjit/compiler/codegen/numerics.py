"""numpy's semantics where numba's operators differ: the helpers kernels call as ``fj.<name>``.

Integer floor division, remainder and power by numpy's rules (a zero divisor gives 0, not an
exception), float divmod as ``npy_divmod``, float16 rounding, the sign of a float, and the
fast paths numpy's float power loop takes for a broadcast exponent.  Inlined into each kernel
(``inline="always"``), so a kernel pays only for what it calls.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

INLINE = dict(inline="always", error_model="numpy", cache=True)


@njit(**INLINE)
def floordiv_int(a, b):
    # numpy: x // 0 is 0, and MIN // -1 wraps to MIN (numba's // would give 0 there).
    if b == 0:
        return a - a
    if b == -1:
        return -a
    return a // b


@njit(**INLINE)
def floordiv_uint(a, b):
    if b == 0:
        return a - a
    return a // b


@njit(**INLINE)
def mod_int(a, b):
    if b == 0:
        return a - a
    return a % b


@njit(**INLINE)
def fmod_int(a, b):
    # C's remainder, with the sign of the dividend; numpy gives 0 for x fmod 0 and MIN fmod -1.
    if b == 0 or b == -1:
        return a - a
    r = a % b
    if r != 0 and (r < 0) != (a < 0):
        r -= b
    return r


@njit(**INLINE)
def divmod_float(a, b):
    # numpy's npy_divmod: fmod, then the sign of the divisor for the remainder, floor for
    # the quotient; a zero divisor gives a / b and fmod's NaN.
    mod = np.fmod(a, b)
    if b == 0:
        return a / b, mod
    div = (a - mod) / b
    if mod != 0:
        if (b < 0) != (mod < 0):
            mod += b
            div -= 1.0
    else:
        mod = math.copysign(0.0, b)
    if div != 0:
        floordiv = np.floor(div)
        if div - floordiv > 0.5:
            floordiv += 1.0
    else:
        floordiv = math.copysign(0.0, a / b)
    return floordiv, mod


@njit(**INLINE)
def power_int(a, b):
    if b < 0:
        raise ValueError("Integers to negative integer powers are not allowed.")
    result = a - a + 1
    base = a
    while b > 0:
        if b & 1:
            result = result * base
        base = base * base
        b >>= 1
    return result


@njit(**INLINE)
def round_float16(x):
    # float16 values live in float32; round to the nearest float16, ties to even, as numpy does.
    a = abs(x)
    if a != a or a == np.inf:
        return x
    if a >= 65520.0:
        return np.float32(math.copysign(np.inf, x))
    if a < 6.103515625e-05:
        quantum = 5.960464477539063e-08
    else:
        quantum = math.ldexp(1.0, math.frexp(a)[1] - 11)
    return np.float32(np.rint(np.float64(x) / quantum) * quantum)


@njit(**INLINE)
def sign_float(a):
    # NaN stays NaN; +-inf give +-1 (not inf - inf); -0.0 gives 0.0, as numpy does.
    if a != a:
        return a
    return a - a if a == 0 else (a > 0) - (a < 0)


@njit(**INLINE)
def power_scalar_float(a, b):
    # numpy's float power loop when the exponent is one broadcast value: -1, 0, 0.5, 1 and 2
    # are 1/a, 1, sqrt(a), a and a*a (so (-inf) ** 0.5 is nan and (-0.0) ** 0.5 is -0.0,
    # where C's pow gives inf and 0.0); any other exponent is pow.
    if b == -1.0:
        return 1.0 / a
    if b == 0.0:
        return b + 1.0
    if b == 0.5:
        return np.sqrt(a)
    if b == 1.0:
        return a
    if b == 2.0:
        return a * a
    return a ** b
