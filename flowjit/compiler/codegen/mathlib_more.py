"""cbrt, the inverse hyperbolic functions and logaddexp, vectorisable as mathlib's functions are.

- ``cbrt``: fdlibm's (FreeBSD's s_cbrt.c): a first estimate from the exponent bits divided
  by 3 (a float division: exact for the 31-bit high word, and packed where an integer one
  is not), refined by a polynomial to 23 bits, rounded away from zero there, then one Newton
  step: within 0.67 ulp.  Subnormals are scaled by 2**54 first; +-0, +-inf and NaN are
  themselves.
- ``arcsinh``: glibc's forms on |x|: log1p(a + a^2 / (1 + sqrt(1 + a^2))) below 2,
  log(2a + 1 / (sqrt(a^2 + 1) + a)) below 2**28, log(a) + ln 2 above (one square root and
  one log for the last two); the sign of x.
- ``arccosh``: log1p(t + sqrt(t (x + 1))) with t = x - 1 up to 2, log(2x - 1 / (x + sqrt(x^2 -
  1))) below 2**28, log(x) + ln 2 above (one square root, one log for the last two); NaN
  below 1.
- ``arctanh``: 0.5 log1p(2a + 2a a / (1 - a)) below 1/2, 0.5 log1p(2a / (1 - a)) above; the
  sign of x.
- ``logaddexp``, ``logaddexp2``: numpy's own formulas (npy_logaddexp): the larger plus
  log1p(exp(-|a - b|)) (log2 of 1 + 2**-|a - b|), a + ln 2 (a + 1) where a == b (so
  infinities of one sign give themselves), NaN where either is NaN.

Every branch is computed and chosen by a select, so the loops vectorise; the float32
functions evaluate the float64 ones and round once.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from flowjit.compiler.codegen.mathlib import INLINE, bits_float64, exp_f64, float64_bits, log_f64
from flowjit.compiler.codegen.mathlib_explog import exp2_f64, log1p_f64

LN2 = 0.6931471805599453
LOG2E = 1.4426950408889634
BIG = 268435456.0                       # 2**28: above it, sqrt(x^2 +- 1) is x to the last bit

# cbrt (fdlibm): B1 = (1023 - 1023/3 - 0.03306235651) 2**20, B2 the same less 54/3 (for
# subnormals, scaled by 2**54), and the polynomial of the first refinement.
CBRT_B1 = 715094163
CBRT_B2 = 696219795
CBRT_P0, CBRT_P1, CBRT_P2 = 1.87595182427177009643, -1.88497979543377169875, 1.621429720105354466140
CBRT_P3, CBRT_P4 = -0.758397934778766047437, 0.145996192886612446982
SIGN = np.int64(-0x8000000000000000)
ROUND_23 = np.int64(-0x40000000)        # keeps the sign, the exponent and 23 bits of the significand
TWO_54 = 18014398509481984.0


@njit(**INLINE)
def cbrt_f64(x):
    bits = float64_bits(x)
    sign = bits & SIGN
    high = (bits >> 32) & 0x7FFFFFFF
    scaled = (float64_bits(x * TWO_54) >> 32) & 0x7FFFFFFF
    subnormal = high < 0x00100000
    third = np.int64(np.float64(scaled if subnormal else high) / 3.0)
    t = bits_float64(sign | ((third + (CBRT_B2 if subnormal else CBRT_B1)) << 32))
    r = (t * t) * (t / x)
    t = t * ((CBRT_P0 + r * (CBRT_P1 + r * CBRT_P2)) + ((r * r) * r) * (CBRT_P3 + r * CBRT_P4))
    t = bits_float64((float64_bits(t) + 0x80000000) & ROUND_23)
    s = t * t
    r = x / s
    r = (r - t) / ((t + t) + r)
    t = t + t * r
    return x + x if (x == 0.0 or x - x != 0.0) else t      # +-0 themselves; inf and NaN


@njit(**INLINE)
def cbrt_f32(x):
    return np.float32(cbrt_f64(np.float64(x)))


@njit(**INLINE)
def arcsinh_f64(x):
    a = abs(x)
    square = a * a
    root = np.sqrt(1.0 + square)
    small = log1p_f64(a + square / (1.0 + root))
    large = a > BIG
    above_two = log_f64(a if large else 2.0 * a + 1.0 / (root + a)) + (LN2 if large else 0.0)
    result = above_two if a > 2.0 else small
    return math.copysign(result, x)                              # keeps -0.0; NaN stays NaN


@njit(**INLINE)
def arcsinh_f32(x):
    return np.float32(arcsinh_f64(np.float64(x)))


@njit(**INLINE)
def arccosh_f64(x):
    t = x - 1.0
    root = np.sqrt(t * (x + 1.0))                              # sqrt(x^2 - 1); t is exact up to 2
    small = log1p_f64(t + root)
    large = x > BIG
    above_two = log_f64(x if large else 2.0 * x - 1.0 / (x + root)) + (LN2 if large else 0.0)
    result = above_two if x > 2.0 else small
    return np.nan if x < 1.0 else result                       # NaN stays NaN


@njit(**INLINE)
def arccosh_f32(x):
    return np.float32(arccosh_f64(np.float64(x)))


@njit(**INLINE)
def arctanh_f64(x):
    a = abs(x)
    twice = a + a
    small = 0.5 * log1p_f64(twice + twice * a / (1.0 - a))
    large = 0.5 * log1p_f64(twice / (1.0 - a))                # 1: inf; above 1: NaN
    return math.copysign(small if a < 0.5 else large, x)


@njit(**INLINE)
def arctanh_f32(x):
    return np.float32(arctanh_f64(np.float64(x)))


@njit(**INLINE)
def logaddexp_f64(a, b):
    difference = a - b
    larger = a + log1p_f64(exp_f64(-difference)) if difference > 0.0 else b + log1p_f64(exp_f64(difference))
    result = difference if difference != difference else larger        # NaN, or inf - inf
    return a + LN2 if a == b else result


@njit(**INLINE)
def logaddexp_f32(a, b):
    return np.float32(logaddexp_f64(np.float64(a), np.float64(b)))


@njit(**INLINE)
def logaddexp2_f64(a, b):
    difference = a - b
    larger = (a + LOG2E * log1p_f64(exp2_f64(-difference)) if difference > 0.0
              else b + LOG2E * log1p_f64(exp2_f64(difference)))
    result = difference if difference != difference else larger
    return a + 1.0 if a == b else result


@njit(**INLINE)
def logaddexp2_f32(a, b):
    return np.float32(logaddexp2_f64(np.float64(a), np.float64(b)))
