"""tan, arctan, arctan2, arcsin and arccos, vectorisable as mathlib's functions are.

- ``tan``: mathlib's exact Payne-Hanek reduction and its sin and cos polynomials on
  [-pi/4, pi/4]: sin/cos in even quadrants, -cos/sin in odd ones.  float32 takes the short
  float32 reduction, as sin_f32 does.
- ``arctan``: fdlibm's five regions, chosen by selects: |x| below 7/16 as it is; then
  u = (2a - 1)/(2 + a), (a - 1)/(a + 1), (a - 1.5)/(1 + 1.5a) or -1/a (each numerator exact)
  around atan(1/2), pi/4, atan(3/2) and pi/2 (head and tail); atan(u) = u + u z Q(z) with Q
  economized (polyfit.atan_f64), |u| <= 7/16.
- ``arctan2``: atan(min/max) of the magnitudes (no overflow), then pi/2 - r when |y| > |x|
  and pi - r when x has its sign bit set, with C's results at zeros and infinities.
- ``arcsin``: t + t z P(z) below 1/2 (P economized, polyfit.asin_f64); above,
  pi/2 - 2 asin(sqrt((1 - |x|)/2)).  ``arccos``: pi/2 - asin(x) below 1/2, 2 asin(s) and
  pi - 2 asin(s) above.

float32 arctan, arctan2, arcsin and arccos evaluate the float64 function and round once.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from flowjit.compiler.codegen.mathlib import (INLINE, _quadrant_sin_cos_f32, _quadrant_sin_cos_f64, float32_bits,
                                              float64_bits)

PIO2_HI, PIO2_LO = 1.5707963267948966, 6.123233995736766e-17
PI_HI, PI_LO = 3.141592653589793, 1.2246467991473532e-16
# atan(1/2), pi/4, atan(3/2), pi/2 as head + tail (mpmath at 200 bits)
ATAN_HALF_HI, ATAN_HALF_LO = 0.4636476090008061, 2.2698777452961687e-17
PIO4_HI, PIO4_LO = 0.7853981633974483, 3.061616997868383e-17
ATAN_ONE_AND_HALF_HI, ATAN_ONE_AND_HALF_LO = 0.982793723247329, 1.3903311031230998e-17

# polyfit.atan_f64 and polyfit.asin_f64 (tests/codegen/test_mathlib.py checks them)
ATAN_F64 = (-0.3333333333333333, 0.1999999999999943, -0.1428571428557081, 0.11111111096969703,
            -0.09090908369112904, 0.07692285883039952, -0.06666246894347413, 0.058769948333092806,
            -0.05216982252306086, 0.04493434205036697, -0.03315392661556325, 0.014797639441686453)
ASIN_F64 = (0.16666666666666669, 0.0749999999999834, 0.04464285714653523, 0.03038194412500875,
            0.022372173467043486, 0.017352380709839098, 0.01397138708310213, 0.011477517005507167,
            0.01033337215296726, 0.005413184483715509, 0.01751883397953867, -0.015032162599250314,
            0.028878362746452394)
A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11 = ATAN_F64
P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, P10, P11, P12 = ASIN_F64


@njit(**INLINE)
def tan_f64(x):
    quadrant, sine, cosine = _quadrant_sin_cos_f64(x)
    result = -cosine / sine if quadrant & 1 else sine / cosine
    result = -result if float64_bits(x) < 0 else result      # tan is odd; tan(-0.0) = -0.0
    return np.nan if x - x != 0.0 else result                 # inf and NaN


@njit(**INLINE)
def tan_f32(x):
    quadrant, sine, cosine = _quadrant_sin_cos_f32(x)
    result = np.float32(-cosine / sine if quadrant & 1 else sine / cosine)
    result = -result if float32_bits(x) < 0 else result
    return np.float32(np.nan) if x - x != np.float32(0.0) else result


@njit(**INLINE)
def _atan_positive(a):
    """atan(a) for a >= 0 (inf included; NaN gives NaN)."""
    region0 = a < 0.4375
    region1 = a < 0.6875
    region2 = a < 1.1875
    region3 = a < 2.4375
    numerator = a if region0 else (2.0 * a - 1.0 if region1 else (a - 1.0 if region2 else (
        a - 1.5 if region3 else -1.0)))
    denominator = 1.0 if region0 else (2.0 + a if region1 else (a + 1.0 if region2 else (
        1.0 + 1.5 * a if region3 else a)))
    base_hi = 0.0 if region0 else (ATAN_HALF_HI if region1 else (PIO4_HI if region2 else (
        ATAN_ONE_AND_HALF_HI if region3 else PIO2_HI)))
    base_lo = 0.0 if region0 else (ATAN_HALF_LO if region1 else (PIO4_LO if region2 else (
        ATAN_ONE_AND_HALF_LO if region3 else PIO2_LO)))
    u = numerator / denominator
    z = u * u
    tail = u * z * (A0 + z * (A1 + z * (A2 + z * (A3 + z * (A4 + z * (A5 + z * (A6 + z * (A7 + z * (
        A8 + z * (A9 + z * (A10 + z * A11)))))))))))
    return base_hi + (u + (tail + base_lo))


@njit(**INLINE)
def arctan_f64(x):
    return math.copysign(_atan_positive(abs(x)), x)            # keeps -0.0; NaN stays NaN


@njit(**INLINE)
def arctan_f32(x):
    return np.float32(arctan_f64(np.float64(x)))


@njit(**INLINE)
def arctan2_f64(y, x):
    ax, ay = abs(x), abs(y)
    big = max(ax, ay)
    ratio = min(ax, ay) / big
    ratio = 0.0 if big == 0.0 else ratio                        # atan2(+-0, +-0)
    ratio = 1.0 if (ax == np.inf and ay == np.inf) else ratio    # atan2(+-inf, +-inf)
    r = _atan_positive(ratio)
    r = (PIO2_HI - r) + PIO2_LO if ay > ax else r
    r = (PI_HI - r) + PI_LO if float64_bits(x) < 0 else r        # x < 0 or x = -0.0
    result = math.copysign(r, y)
    return x + y if (x != x or y != y) else result


@njit(**INLINE)
def arctan2_f32(y, x):
    return np.float32(arctan2_f64(np.float64(y), np.float64(x)))


@njit(**INLINE)
def _asin_small(t):
    """asin(t) for |t| <= 1/2."""
    z = t * t
    return t + t * z * (P0 + z * (P1 + z * (P2 + z * (P3 + z * (P4 + z * (P5 + z * (P6 + z * (P7 + z * (
        P8 + z * (P9 + z * (P10 + z * (P11 + z * P12))))))))))))


@njit(**INLINE)
def arcsin_f64(x):
    a = abs(x)
    s = np.sqrt(0.5 * (1.0 - a))                                 # NaN above 1
    large = PIO2_HI - (2.0 * _asin_small(s) - PIO2_LO)
    result = _asin_small(a) if a <= 0.5 else large
    return math.copysign(result, x)


@njit(**INLINE)
def arcsin_f32(x):
    return np.float32(arcsin_f64(np.float64(x)))


@njit(**INLINE)
def arccos_f64(x):
    a = abs(x)
    s = np.sqrt(0.5 * (1.0 - a))
    twice = 2.0 * _asin_small(s)
    middle = PIO2_HI - (_asin_small(x) - PIO2_LO)
    result = twice if x > 0.0 else PI_HI - (twice - PI_LO)
    return middle if a <= 0.5 else result                        # NaN: 2 asin(NaN) is NaN


@njit(**INLINE)
def arccos_f32(x):
    return np.float32(arccos_f64(np.float64(x)))
