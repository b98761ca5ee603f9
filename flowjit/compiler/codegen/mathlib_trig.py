"""sin, cos, tan, arctan, arctan2, arcsin and arccos, vectorisable as mathlib's functions are.

- ``sin``, ``cos``: an exact Payne-Hanek reduction for every finite argument, done in
  int64 limbs with a per-exponent table of the bits of 2/pi (gathers, no branch), then
  Taylor polynomials on [-pi/4, pi/4] with a double-double remainder.
- ``tan``: the same exact Payne-Hanek reduction and its sin and cos polynomials on
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
from fractions import Fraction

import numpy as np
from numba import njit

from flowjit.compiler.codegen.mathlib import INLINE, bits_float64, float32_bits, float64_bits
from flowjit.compiler.codegen.mathlib_explog import HALF_MASK

# ---------------------------------------------------------------------------------------
# sin and cos: an exact, branch-free Payne-Hanek reduction for every finite argument.
#
# x = M 2**E with M the integer significand.  x * 2/pi mod 4 only depends on the bits of
# 2/pi from position E - 1 on (earlier bits give multiples of 4), so a table holds, per
# exponent, the next WINDOW bits of 2/pi as 28-bit limbs, two to an int64.  M times that
# window, mod 2**WINDOW, is the quarter-turn count and its fraction in fixed point,
# computed exactly with int64 multiplies of limbs (no call and no branch: the loop
# vectorises and the table reads become gathers).  Rounding to the nearest quarter turn
# leaves a fraction |f| <= 1/2 whose limbs are all non-negative, so it converts to a
# double-double without cancellation; r = f pi/2 goes into Taylor polynomials on
# [-pi/4, pi/4].  The hardest double (6381956970095103 * 2**797) lies 2**-61 from a
# multiple of pi/2; the float64 window keeps 2**-139 absolute, 78 bits more than needed.
# ---------------------------------------------------------------------------------------

LIMB = 28
LIMB_MASK = (1 << LIMB) - 1


def _machin_pi(bits: int) -> int:
    """floor(pi * 2**bits) (to within a few units), from Machin's formula in integers."""
    scale = 1 << (bits + 32)

    def arctan_inverse(n: int) -> int:
        total, term, k, sign = 0, scale // n, 1, 1
        while term:
            total += sign * (term // k)
            term //= n * n
            k += 2
            sign = -sign
        return total
    return (16 * arctan_inverse(5) - 4 * arctan_inverse(239)) >> 32


def _two_over_pi(bits: int) -> int:
    """floor(2/pi * 2**bits), exact: computed with 64 guard bits."""
    guard = bits + 64
    return ((1 << (2 * guard + 1)) // _machin_pi(guard)) >> 64


def _pi_over_2_parts() -> tuple[float, float]:
    value = Fraction(_machin_pi(200), 1 << 201)
    hi = float(value)
    return hi, float(value - Fraction(hi))


def _reduction_table(exponents: range, window: int) -> np.ndarray:
    """Row j: the window of 2/pi for the j-th exponent E (x = M 2**E), in 28-bit limbs,
    low limb first, packed two to an int64 (limb 2i in bits 0-27, limb 2i+1 in 28-55).

    The window is floor(2/pi * 2**(E + window - 2)) mod 2**window (zeros above the point
    when E is small), so that M * window / 2**(window - 2) = x 2/pi mod 4.
    """
    limbs = -(-window // LIMB)
    precision = max(exponents) + window + 64
    two_over_pi = _two_over_pi(precision)
    rows = np.zeros((len(exponents), -(-limbs // 2)), dtype=np.int64)
    for row, e in enumerate(exponents):
        bits = (two_over_pi >> (precision - (e + window - 2))) & ((1 << window) - 1)
        for limb in range(limbs):
            rows[row, limb // 2] |= ((bits >> (LIMB * limb)) & LIMB_MASK) << (LIMB * (limb % 2))
    return rows


PIO2_HI, PIO2_LO = _pi_over_2_parts()
TWO_M54, TWO_M82, TWO_M138 = 2.0 ** -54, 2.0 ** -82, 2.0 ** -138
PIO2_HI_HI = float(np.int64(np.float64(PIO2_HI).view(np.int64) & HALF_MASK).view(np.float64))
PIO2_HI_LO = PIO2_HI - PIO2_HI_HI
# float64: biased exponents 1021 (|x| >= 0.25) .. 2046; M < 2**53 in two limbs; 196 bits.
SIN_F64_FIRST = 1021
SIN_F64_TABLE = _reduction_table(range(SIN_F64_FIRST - 1075, 2047 - 1075), 196)
# float32: biased exponents 125 (|x| >= 0.25) .. 254; M < 2**24 in one limb; 112 bits.
SIN_F32_FIRST = 125
SIN_F32_TABLE = _reduction_table(range(SIN_F32_FIRST - 150, 255 - 150), 112)


def _sin_taylor(terms: int) -> tuple[float, ...]:
    """sin(r) = r + r**3 sum s_n r**(2n): s_n = (-1)**(n+1) / (2n+3)!."""
    return tuple(float(Fraction((-1) ** (n + 1), math.factorial(2 * n + 3))) for n in range(terms))


def _cos_taylor(terms: int) -> tuple[float, ...]:
    """cos(r) = 1 - r**2/2 + r**4 sum c_n r**(2n): c_n = (-1)**n / (2n+4)!."""
    return tuple(float(Fraction((-1) ** n, math.factorial(2 * n + 4))) for n in range(terms))


S0, S1, S2, S3, S4, S5, S6, S7, S8, S9, S10 = _sin_taylor(11)      # to r**23: < 2**-70 at pi/4
C0, C1, C2, C3, C4, C5, C6, C7, C8, C9, C10 = _cos_taylor(11)      # to r**24


@njit(**INLINE)
def _sin_cos_kernel(r, r_lo):
    """sin and cos of r + r_lo for |r| <= pi/4 (r_lo below half an ulp of r)."""
    z = r * r
    sin_tail = z * (S0 + z * (S1 + z * (S2 + z * (S3 + z * (S4 + z * (S5 + z * (S6 + z * (S7 + z * (
        S8 + z * (S9 + z * S10))))))))))
    sine = r + (r * sin_tail + r_lo * (1.0 - 0.5 * z))
    cos_tail = z * z * (C0 + z * (C1 + z * (C2 + z * (C3 + z * (C4 + z * (C5 + z * (C6 + z * (C7 + z * (
        C8 + z * (C9 + z * C10))))))))))
    half = 0.5 * z
    w = 1.0 - half
    cosine = w + (((1.0 - w) - half) + (cos_tail - r * r_lo))
    return sine, cosine


@njit(**INLINE)
def _by_quadrant(quadrant, sine, cosine):
    """sin(quadrant pi/2 + r) from sin r and cos r: sin, cos, -sin, -cos (cos: quadrant + 1)."""
    result = cosine if quadrant & 1 else sine
    return -result if quadrant & 2 else result


@njit(**INLINE)
def _tan_by_quadrant(quadrant, sine, cosine):
    """tan(quadrant pi/2 + r) from sin r and cos r: sin/cos in even quadrants, -cos/sin in odd."""
    return -cosine / sine if quadrant & 1 else sine / cosine


@njit(**INLINE)
def _reduce_f64(a):
    """a >= 0 finite -> (quadrant, r, r_lo) with a = quadrant pi/2 + r + r_lo (mod 2 pi)."""
    bits = float64_bits(a)
    row = min(max(((bits >> 52) & 0x7FF) - SIN_F64_FIRST, 0), 2046 - SIN_F64_FIRST)
    m = (bits & 0x000FFFFFFFFFFFFF) | 0x0010000000000000
    m0 = m & LIMB_MASK
    m1 = m >> 28
    p01 = SIN_F64_TABLE[row, 0]
    p23 = SIN_F64_TABLE[row, 1]
    p45 = SIN_F64_TABLE[row, 2]
    w6 = SIN_F64_TABLE[row, 3]
    w0 = p01 & LIMB_MASK
    w1 = p01 >> 28
    w2 = p23 & LIMB_MASK
    w3 = p23 >> 28
    w4 = p45 & LIMB_MASK
    w5 = p45 >> 28
    # The low 196 bits of M * window, column by column, carried into 28-bit limbs.
    c0 = m0 * w0
    c1 = m0 * w1 + m1 * w0 + (c0 >> 28)
    c2 = m0 * w2 + m1 * w1 + (c1 >> 28)
    c3 = m0 * w3 + m1 * w2 + (c2 >> 28)
    c4 = m0 * w4 + m1 * w3 + (c3 >> 28)
    c5 = m0 * w5 + m1 * w4 + (c4 >> 28)
    c6 = m0 * w6 + m1 * w5 + (c5 >> 28)
    # c6's bits 27-26 are the quadrant; bit 25 says the fraction is >= 1/2: round up and
    # take 1 - f (the complement of the fraction bits, exact to 2**-194).
    upper = (c6 >> 25) & 1
    quadrant = ((c6 >> 26) + upper) & 3
    flip = -upper
    c6 = (c6 ^ flip) & 0x1FFFFFF
    c5 = (c5 ^ flip) & LIMB_MASK
    c4 = (c4 ^ flip) & LIMB_MASK
    c3 = (c3 ^ flip) & LIMB_MASK
    c2 = (c2 ^ flip) & LIMB_MASK
    # f = (c6:c5) 2**-54 + c4 2**-82 + (c3:c2) 2**-138 quarter turns; the first two are
    # exact doubles, so their two-sum is exact whatever cancelled above.
    high = np.float64((c6 << 28) | c5) * TWO_M54
    middle = np.float64(c4) * TWO_M82
    low = np.float64((c3 << 28) | c2) * TWO_M138
    f = high + middle
    f_lo = ((high - f) + middle) + low
    # r = f pi/2 as a double-double: Dekker's exact product on halves cut by masking bits
    # (a split by multiplication would change under FMA contraction).
    r = f * PIO2_HI
    f_hi = bits_float64(float64_bits(f) & HALF_MASK)
    f_tail = f - f_hi
    error = ((f_hi * PIO2_HI_HI - r) + f_hi * PIO2_HI_LO + f_tail * PIO2_HI_HI) + f_tail * PIO2_HI_LO
    r_lo = error + (f * PIO2_LO + f_lo * PIO2_HI)
    sign = 1.0 - 2.0 * upper
    return quadrant, r * sign, r_lo * sign


@njit(**INLINE)
def _quadrant_sin_cos_f64(x):
    """|x| = quadrant pi/2 + r: (quadrant, sin r, cos r); sin, cos and tan pick from them."""
    a = abs(x)
    quadrant, r, r_lo = _reduce_f64(min(a, 1.7976931348623157e308))
    small = a < 0.7853981633974483
    quadrant = 0 if small else quadrant
    r = a if small else r
    r_lo = 0.0 if small else r_lo
    sine, cosine = _sin_cos_kernel(r, r_lo)
    return quadrant, sine, cosine


@njit(**INLINE)
def _sin_cos_f64(x, cosine_wanted):
    quadrant, sine, cosine = _quadrant_sin_cos_f64(x)
    return _by_quadrant(quadrant + cosine_wanted, sine, cosine)


@njit(**INLINE)
def sin_f64(x):
    result = _sin_cos_f64(x, 0)
    result = -result if float64_bits(x) < 0 else result   # sin is odd; sin(-0.0) = -0.0
    return np.nan if x - x != 0.0 else result          # inf and NaN


@njit(**INLINE)
def cos_f64(x):
    result = _sin_cos_f64(x, 1)
    return np.nan if x - x != 0.0 else result


@njit(**INLINE)
def _reduce_f32(a):
    """The float32 reduction: M < 2**24 is one limb; a 112-bit window; f as one double."""
    bits = np.int64(float32_bits(a))
    row = min(max(((bits >> 23) & 0xFF) - SIN_F32_FIRST, 0), 254 - SIN_F32_FIRST)
    m = (bits & 0x7FFFFF) | 0x800000
    p01 = SIN_F32_TABLE[row, 0]
    p23 = SIN_F32_TABLE[row, 1]
    c0 = m * (p01 & LIMB_MASK)
    c1 = m * (p01 >> 28) + (c0 >> 28)
    c2 = m * (p23 & LIMB_MASK) + (c1 >> 28)
    c3 = m * (p23 >> 28) + (c2 >> 28)
    upper = (c3 >> 25) & 1
    quadrant = ((c3 >> 26) + upper) & 3
    flip = -upper
    c3 = (c3 ^ flip) & 0x1FFFFFF
    c2 = (c2 ^ flip) & LIMB_MASK
    c1 = (c1 ^ flip) & LIMB_MASK
    # f = (c3:c2) 2**-54 + c1 2**-82 quarter turns, rounded once.
    f = np.float64((c3 << 28) | c2) * TWO_M54 + np.float64(c1) * TWO_M82
    return quadrant, f * PIO2_HI * (1.0 - 2.0 * upper)


@njit(**INLINE)
def _sin_cos_kernel_short(r):
    """sin and cos of |r| <= pi/4 in float64, good to far below a float32 ulp."""
    z = r * r
    sine = r + r * z * (S0 + z * (S1 + z * (S2 + z * (S3 + z * (S4 + z * S5)))))
    cosine = 1.0 - 0.5 * z + z * z * (C0 + z * (C1 + z * (C2 + z * (C3 + z * C4))))
    return sine, cosine


@njit(**INLINE)
def _quadrant_sin_cos_f32(x):
    """|x| = quadrant pi/2 + r: (quadrant, sin r, cos r), r and both in float64."""
    a = abs(x)
    quadrant, r = _reduce_f32(min(a, np.float32(3.4028234663852886e38)))
    small = a < np.float32(0.7853981)
    quadrant = 0 if small else quadrant
    r = np.float64(a) if small else r
    sine, cosine = _sin_cos_kernel_short(r)
    return quadrant, sine, cosine


@njit(**INLINE)
def _sin_cos_f32(x, cosine_wanted):
    quadrant, sine, cosine = _quadrant_sin_cos_f32(x)
    return _by_quadrant(quadrant + cosine_wanted, sine, cosine)


@njit(**INLINE)
def sin_f32(x):
    result = np.float32(_sin_cos_f32(x, 0))
    result = -result if float32_bits(x) < 0 else result
    return np.float32(np.nan) if x - x != np.float32(0.0) else result


@njit(**INLINE)
def cos_f32(x):
    result = np.float32(_sin_cos_f32(x, 1))
    return np.float32(np.nan) if x - x != np.float32(0.0) else result


# ---------------------------------------------------------------------------------------
# The float32 fast path: Cody-Waite for |x| < FAST_F32_BOUND.
#
# q = x 2/pi rounded to an integer (adding 1.5 * 2**52 rounds it, and leaves q mod 4 in the
# low bits), then r = (x - q PIO2_1) - q PIO2_1T in float64: PIO2_1 holds the first 33 bits
# of pi/2, so q PIO2_1 is exact for q < 2**20 and the first difference is exact (Sterbenz);
# PIO2_1T is the rest of pi/2 to 2**-86, so r is off by at most q 2**-86 + an ulp of r, far
# below a float32 ulp of sin for every float32 below the bound (checked exhaustively, once:
# within 0.501 ulp of numpy's float64 results; tests/codegen/test_fast_paths.py checks
# samples).  No table, no 64-bit multiply: 0.9-1.4 ns per element against 5-6.7 for the
# exact reduction here.  Kernels call these for a block whose largest ``magnitude_f32``
# fits (``sin_f32_fits``: the writer's guarded stages), the exact functions elsewhere.
# NaN and +-inf give NaN on this path too (r is NaN), though a block holding them takes the
# exact path (their magnitudes' bits are above the bound's).
# ---------------------------------------------------------------------------------------

FAST_F32_BOUND = 2.0 ** 20
FAST_F32_BOUND_BITS = int(np.float32(FAST_F32_BOUND).view(np.int32))
TWO_OVER_PI = 0.6366197723675814
ROUND_SHIFT = 6755399441055744.0                       # 1.5 * 2**52
PIO2_1 = 1.57079632673412561417e+00                    # pi/2's first 33 bits (fdlibm)
PIO2_1T = 6.07710050650619224932e-11                   # pi/2 - PIO2_1


@njit(**INLINE)
def _quadrant_sin_cos_fast_f32(x):
    """|x| < FAST_F32_BOUND (or not finite) = quadrant pi/2 + r: (quadrant, sin r, cos r)."""
    a = np.float64(abs(x))
    shifted = a * TWO_OVER_PI + ROUND_SHIFT
    q = shifted - ROUND_SHIFT
    r = (a - q * PIO2_1) - q * PIO2_1T
    sine, cosine = _sin_cos_kernel_short(r)
    return float64_bits(shifted) & 3, sine, cosine


@njit(**INLINE)
def sin_f32_fits(peak):
    """Whether the fast path serves a block whose largest ``mathlib.magnitude_f32`` is ``peak``."""
    return peak < FAST_F32_BOUND_BITS


@njit(**INLINE)
def sin_f32_fast(x):
    """sin_f32 for |x| < FAST_F32_BOUND, NaN and +-inf."""
    quadrant, sine, cosine = _quadrant_sin_cos_fast_f32(x)
    result = np.float32(_by_quadrant(quadrant, sine, cosine))
    return -result if float32_bits(x) < 0 else result


cos_f32_fits = sin_f32_fits


@njit(**INLINE)
def cos_f32_fast(x):
    """cos_f32 for |x| < FAST_F32_BOUND, NaN and +-inf."""
    quadrant, sine, cosine = _quadrant_sin_cos_fast_f32(x)
    return np.float32(_by_quadrant(quadrant + 1, sine, cosine))


tan_f32_fits = sin_f32_fits


@njit(**INLINE)
def tan_f32_fast(x):
    """tan_f32 for |x| < FAST_F32_BOUND, NaN and +-inf."""
    quadrant, sine, cosine = _quadrant_sin_cos_fast_f32(x)
    result = np.float32(_tan_by_quadrant(quadrant, sine, cosine))
    return -result if float32_bits(x) < 0 else result


# ---------------------------------------------------------------------------------------
# The float64 fast path: Cody-Waite for |x| < FAST_F64_BOUND, in double-double.
#
# pi/2 = PIO2_1 + PIO2_2 + PIO2_3 + PIO2_3T (fdlibm's pieces: the first three of 33 bits or
# fewer, so q times each is exact for q < 2**20; their sum is pi/2 to 2**-160).  r = x - q
# PIO2_1 is exact; PIO2_2 and PIO2_3 come off with two-sums, whose errors and q PIO2_3T are
# summed apart and added once: r + r_lo is x mod pi/2 to about 2**-106 relative, however
# much of x cancelled (fdlibm's third iteration keeps 151 bits for the worst of them, which
# lose about 50), and no branch decides how many pieces to take.
# ---------------------------------------------------------------------------------------

FAST_F64_BOUND = 2.0 ** 20
FAST_F64_BOUND_BITS = int(np.float64(FAST_F64_BOUND).view(np.int64))
PIO2_2 = 6.07710050630396597660e-11                    # the next 33 bits of pi/2
PIO2_3 = 2.02226624871116645580e-21                    # and the next
PIO2_3T = 8.47842766036889956997e-32                   # pi/2 - PIO2_1 - PIO2_2 - PIO2_3


@njit(**INLINE)
def _quadrant_sin_cos_fast_f64(x):
    """|x| < FAST_F64_BOUND (or not finite) = quadrant pi/2 + r: (quadrant, sin r, cos r)."""
    a = abs(x)
    shifted = a * TWO_OVER_PI + ROUND_SHIFT
    q = shifted - ROUND_SHIFT
    r = a - q * PIO2_1
    w2 = q * PIO2_2
    s = r - w2                                         # (two-sums: either term may be the larger)
    b2 = s - r
    e2 = (r - (s - b2)) + (-w2 - b2)
    w3 = q * PIO2_3
    t = s - w3
    b3 = t - s
    e3 = (s - (t - b3)) + (-w3 - b3)
    tail = (e2 + e3) - q * PIO2_3T
    hi = t + tail
    lo = (t - hi) + tail
    sine, cosine = _sin_cos_kernel(hi, lo)
    return float64_bits(shifted) & 3, sine, cosine


@njit(**INLINE)
def sin_f64_fits(peak):
    """Whether the fast path serves a block whose largest ``mathlib.magnitude_f64`` is ``peak``."""
    return peak < FAST_F64_BOUND_BITS


@njit(**INLINE)
def sin_f64_fast(x):
    """sin_f64 for |x| < FAST_F64_BOUND, NaN and +-inf."""
    quadrant, sine, cosine = _quadrant_sin_cos_fast_f64(x)
    result = _by_quadrant(quadrant, sine, cosine)
    return -result if float64_bits(x) < 0 else result


cos_f64_fits = sin_f64_fits


@njit(**INLINE)
def cos_f64_fast(x):
    """cos_f64 for |x| < FAST_F64_BOUND, NaN and +-inf."""
    quadrant, sine, cosine = _quadrant_sin_cos_fast_f64(x)
    return _by_quadrant(quadrant + 1, sine, cosine)


tan_f64_fits = sin_f64_fits


@njit(**INLINE)
def tan_f64_fast(x):
    """tan_f64 for |x| < FAST_F64_BOUND, NaN and +-inf."""
    quadrant, sine, cosine = _quadrant_sin_cos_fast_f64(x)
    result = _tan_by_quadrant(quadrant, sine, cosine)
    return -result if float64_bits(x) < 0 else result


# ---------------------------------------------------------------------------------------
# tan, arctan, arctan2, arcsin, arccos
# ---------------------------------------------------------------------------------------

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
    result = _tan_by_quadrant(quadrant, sine, cosine)
    result = -result if float64_bits(x) < 0 else result      # tan is odd; tan(-0.0) = -0.0
    return np.nan if x - x != 0.0 else result                 # inf and NaN


@njit(**INLINE)
def tan_f32(x):
    quadrant, sine, cosine = _quadrant_sin_cos_f32(x)
    result = np.float32(_tan_by_quadrant(quadrant, sine, cosine))
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
