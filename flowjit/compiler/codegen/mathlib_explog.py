"""exp2, expm1, log1p, log2, log10, sinh, cosh, tanh and pow, vectorisable as mathlib's functions are.

Built on mathlib's pieces (the economized exp polynomial, the atanh series of log, the bit
casts); plain arithmetic, bit casts and selects, inlined into the kernel loops:

- ``exp2``: k = rint(x), r = x - k exact, exp(r ln2) by exp's polynomial, times 2**k in two
  halves (denormal results and k = 1024 need no branch).  exp2 of an integer is exact.
- ``expm1``: exp's Cody-Waite reduction; expm1(r) = r + r*r q(r) by its Taylor series to r**13,
  then 2**k (1 + u) - 1 = 2**k u + (2**k - 1), both parts exact for |k| <= 56 (one rounding).
- ``log1p``: log(u) - ((u - 1) - x) / u with u = 1 + x (the rounding of u corrected to first
  order); x itself where u rounds to 1.  float32: u is exact in float64 (x itself below
  2**-29), log(u) = e ln2 + f + f*f g(f) from its exponent bits, g economized at degree 12.
- ``log2``, ``log10``: log's reduction x = m 2**e; e + log(m)/ln2, and e log10(2) (split so
  e times its head is exact) + log(m)/ln10.  log2 of a power of two is exact.
- ``cosh``: (e + 1/e)/2 with e = exp(|x|) below 22, exp(|x|)/2 (the scale 2**(k-1) taken in
  exp's reconstruction, so cosh(710.4) is finite) above.
- ``tanh``: t / (t + 2) with t = expm1(2|x|), one path for every argument; float32 in float32
  arithmetic (16 lanes to a 512-bit vector), with its own float32 expm1.
- ``sinh``: fdlibm's forms in t = expm1(|x|): (2t - t*t/(t+1))/2 below 1, (t + t/(t+1))/2
  below 22, exp(|x|)/2 above; the sign of x.
- ``pow``: exp(b log|a|) with log|a| and the product in double-double (Dekker's exact
  product by bit splits), C99's results for signs, zeros, infinities and NaN.  float32:
  2**(b log2|a|) in float64 with no division and no double-double, log2 and 2**r by two
  economized polynomials (within 2**-37 of pow, rounded once).

float32 evaluates the float64 function and rounds once (pow and log1p: shorter float64
functions, without divisions).
``tests/codegen/test_mathlib.py`` measures each against numpy (docs/math.md).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from numba import njit

from flowjit.compiler.codegen.mathlib import (E0, E1, E2, E3, E4, E5, E6, E7, E8, E9, E10, E11, F_LN2_HI, F_LN2_LO,
                                              F_LOG2E, INLINE, INLINE_EXACT, LN2_HI, LN2_LO, LOG2E, SQRT2,
                                              bits_float32, bits_float64, exp_f64, float32_bits, _log_specials,
                                              float64_bits, float64_of_int, int_of_float64, log_f64, log_reduce,
                                              times_power_of_two)

LN2 = 0.6931471805599453


@njit(**INLINE)
def _exp_polynomial(r):
    """exp(r) for |r| <= ln2/2 (mathlib.exp_f64's economized polynomial)."""
    return E0 + r * (E1 + r * (E2 + r * (E3 + r * (E4 + r * (E5 + r * (E6 + r * (E7 + r * (
        E8 + r * (E9 + r * (E10 + r * E11))))))))))


@njit(**INLINE)
def exp2_f64(x):
    clamped = min(max(x, -1080.0), 1025.0)
    k = np.rint(clamped)
    result = times_power_of_two(_exp_polynomial((clamped - k) * LN2), k)
    return x if x != x else result


@njit(**INLINE)
def exp2_f32(x):
    return np.float32(exp2_f64(np.float64(x)))


@njit(**INLINE)
def _exp_half(a):
    """exp(a) / 2 for a >= 0, finite up to a = 711.1 (where exp(a) alone overflows from 709.8)."""
    clamped = min(a, 712.0)
    k = np.rint(clamped * LOG2E)
    r = (clamped - k * LN2_HI) - k * LN2_LO
    return times_power_of_two(_exp_polynomial(r), k - 1.0)


def _expm1_taylor(terms: int) -> tuple[float, ...]:
    """q(r) = (expm1(r) - r) / r**2 = sum r**n / (n + 2)!."""
    return tuple(float(Fraction(1, math.factorial(n + 2))) for n in range(terms))


M0, M1, M2, M3, M4, M5, M6, M7, M8, M9, M10, M11 = _expm1_taylor(12)     # to r**13: < 2**-56 of r at ln2/2


@njit(**INLINE)
def expm1_f64(x):
    clamped = min(max(x, -40.0), 710.0)                 # expm1 is -1.0 below -37.5, inf above 709.8
    k = np.rint(clamped * LOG2E)
    r = (clamped - k * LN2_HI) - k * LN2_LO             # k = 0: r = x exactly (and -0.0 stays -0.0)
    u = r + r * r * (M0 + r * (M1 + r * (M2 + r * (M3 + r * (M4 + r * (M5 + r * (M6 + r * (M7 + r * (
        M8 + r * (M9 + r * (M10 + r * M11)))))))))))
    near = min(k, 56.0)
    scale = bits_float64((int_of_float64(near) + 1023) << 52)
    small = scale * u + (scale - 1.0)                  # exact parts, one rounding
    large = times_power_of_two(1.0 + u, k)             # 2**k - 1 rounds to 2**k from k = 54
    result = u if k == 0.0 else (small if k <= 56.0 else large)
    return x if (x != x or x == 0.0) else result        # NaN, and the sign of zero


@njit(**INLINE)
def expm1_f32(x):
    return np.float32(expm1_f64(np.float64(x)))


@njit(**INLINE)
def tanh_f64(x):
    """tanh|x| = t / (t + 2) with t = expm1(2|x|): one path for every argument, so no lane
    computes a second (the small arguments' polynomial and exp's branch ran 1.4x slower).
    From 19.1 on, tanh rounds to 1.0, so 20 bounds the argument."""
    t = expm1_f64(2.0 * min(abs(x), 20.0))
    return math.copysign(t / (t + 2.0), x)      # keeps -0.0; NaN stays NaN


F_M0, F_M1, F_M2, F_M3, F_M4, F_M5, F_M6 = (np.float32(c) for c in _expm1_taylor(7))   # to r**8


@njit(**INLINE)
def tanh_f32(x):
    """tanh_f64's t / (t + 2) in float32 throughout (16 lanes to a 512-bit vector), with t =
    expm1(2|x|) = 2**k (expm1(r) + 1) - 1, the last as one fused multiply-add; k = 0, below
    0.17, leaves t = expm1(r) as its series gives it.  Within 2.42 ulp of tanh for every float32
    (checked exhaustively); it ran 1.6x faster than the Taylor polynomial beside exp.  From 9.01
    on, tanh rounds to 1.0, so 9.5 bounds the argument (and k <= 28: k * F_LN2_HI is exact)."""
    y = np.float32(2.0) * min(abs(x), np.float32(9.5))
    k = np.rint(y * F_LOG2E)
    r = (y - k * F_LN2_HI) - k * F_LN2_LO
    u = r + r * r * (F_M0 + r * (F_M1 + r * (F_M2 + r * (F_M3 + r * (F_M4 + r * (F_M5 + r * F_M6))))))
    scale = bits_float32(np.int32((np.int32(k) + 127) << 23))
    t = scale * u + (scale - np.float32(1.0))
    result = np.float32(math.copysign(t / (t + np.float32(2.0)), x))   # keeps -0.0
    return x if x != x else result        # (a NaN's k converts to an undefined integer)


@njit(**INLINE)
def log1p_f64(x):
    u = 1.0 + x
    log_u = log_f64(u)
    correction = ((u - 1.0) - x) / u
    correction = 0.0 if (u == 0.0 or u == np.inf) else correction
    result = log_u - correction
    return x if u == 1.0 else result                    # |x| < 2**-53 (and +-0.0): log1p(x) = x


INV_LN2 = 1.4426950408889634
INV_LN10 = 0.4342944819032518
LOG10_2 = Fraction(3010299956639811952137388947244930267681898814621085413104274611, 10 ** 64)
# log10(2) with its last 11 bits zero (e * LOG10_2_HI is exact for |e| < 2048), and the rest.
LOG10_2_HI = float(np.int64(np.float64(float(LOG10_2)).view(np.int64) & ~0x7FF).view(np.float64))
LOG10_2_LO = float(LOG10_2 - Fraction(LOG10_2_HI))


@njit(**INLINE)
def log2_f64(x):
    e, log_m = log_reduce(x)
    return _log_specials(x, e + log_m * INV_LN2)


@njit(**INLINE)
def log2_f32(x):
    return np.float32(log2_f64(np.float64(x)))


@njit(**INLINE)
def log10_f64(x):
    e, log_m = log_reduce(x)
    return _log_specials(x, e * LOG10_2_HI + (log_m * INV_LN10 + e * LOG10_2_LO))


@njit(**INLINE)
def log10_f32(x):
    return np.float32(log10_f64(np.float64(x)))


@njit(**INLINE)
def cosh_f64(x):
    a = abs(x)
    e = exp_f64(min(a, 22.0))
    small = 0.5 * e + 0.5 / e
    return _exp_half(a) if a >= 22.0 else small        # NaN takes the first form: exp(NaN) is NaN


@njit(**INLINE)
def cosh_f32(x):
    return np.float32(cosh_f64(np.float64(x)))


@njit(**INLINE)
def sinh_f64(x):
    a = abs(x)
    t = expm1_f64(min(a, 22.0))
    below_one = 0.5 * (2.0 * t - t * t / (t + 1.0))
    below_22 = 0.5 * (t + t / (t + 1.0))
    result = below_one if a < 1.0 else below_22
    result = _exp_half(a) if a >= 22.0 else result
    return math.copysign(result, x)                     # keeps -0.0; NaN stays NaN


@njit(**INLINE)
def sinh_f32(x):
    return np.float32(sinh_f64(np.float64(x)))


# ---------------------------------------------------------------------------------------
# pow(a, b) = exp(b log|a|), with log|a| in double-double: an error d in log|a| is an error
# b d = y d / log|a| in the exponent y, and |y| reaches 745, so log|a| must be good to about
# 2**-64 of itself.  log m = 2s + 2s**3/3 + 2s**5 R(s*s) with s = f/(2+f) in head and tail
# (the division's remainder taken exactly with Dekker's product); the first two terms in
# double-double, the rest in double.  Then y = b log|a| as head and tail, and exp(y) with
# the tail added to the reduced argument.  Signs, zeros, infinities and NaN as C99's pow.
# ---------------------------------------------------------------------------------------

HALF_MASK = -(1 << 27)                  # keeps the top 26 significand bits: halves multiply exactly
HALF_ROUND = 1 << 26                    # added first, it rounds to those bits instead
ROUND_BELOW = 2.0 ** 1023               # from here up rounding could carry past the largest float
TWO_THIRDS_HI = 0.6666666666666666
TWO_THIRDS_LO = float(Fraction(2, 3) - Fraction(TWO_THIRDS_HI))
# 2 s**(2k+1) / (2k+1) for k >= 2; k = 13 leaves 2**-66 of log m (s*s <= 0.0295).
Q0, Q1, Q2, Q3, Q4, Q5, Q6, Q7, Q8, Q9, Q10, Q11 = (float(Fraction(2, 2 * k + 1)) for k in range(2, 14))


@njit(**INLINE_EXACT)
def _split(a):
    # a = head + tail, a rounded to its top 26 bits and the rest, each of at most 26 significant
    # bits (a truncated head leaves a 27-bit tail, whose square is not exact).  From 2**1023 up,
    # and for inf and NaN, truncated: rounding could carry past the largest float.
    rounding = HALF_ROUND if abs(a) < ROUND_BELOW else 0
    head = bits_float64((float64_bits(a) + rounding) & HALF_MASK)
    return head, a - head


@njit(**INLINE_EXACT)
def _two_product(a, b):
    """a * b = p + e exactly (Dekker's, the split by bits; without contraction, so that the
    complex helpers, which both flavours share, may call it as log does)."""
    p = a * b
    a_hi, a_lo = _split(a)
    b_hi, b_lo = _split(b)
    return p, ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo


@njit(**INLINE)
def _log_double(x):
    """log x as head + tail for finite x > 0, to about 2**-64 of itself."""
    denormal = x < 2.2250738585072014e-308
    scaled = x * 18014398509481984.0 if denormal else x     # 2**54
    bits = float64_bits(scaled)
    exponent = ((bits >> 52) & 0x7FF) - 1023 - (54 if denormal else 0)
    m = bits_float64((bits & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000)
    big = m > SQRT2
    m = m * 0.5 if big else m
    e = float64_of_int(exponent + (1 if big else 0))
    f = m - 1.0                                         # exact
    d = 2.0 + f
    d_lo = f - (d - 2.0)                                # 2 + f = d + d_lo exactly
    s = f / d
    p, p_lo = _two_product(s, d)
    s_lo = (((f - p) - p_lo) - s * d_lo) / d            # f - s (d + d_lo), exactly enough, over d
    s2, s2_lo = _two_product(s, s)
    s3, s3_lo = _two_product(s2, s)
    s3_lo = s3_lo + s2_lo * s + 3.0 * s2 * s_lo         # s**3 to 2**-100 of itself
    c, c_lo = _two_product(s3, TWO_THIRDS_HI)
    c_lo = c_lo + (s3 * TWO_THIRDS_LO + s3_lo * TWO_THIRDS_HI)
    z = s2
    rest = s3 * z * (Q0 + z * (Q1 + z * (Q2 + z * (Q3 + z * (Q4 + z * (Q5 + z * (Q6 + z * (Q7 + z * (
        Q8 + z * (Q9 + z * (Q10 + z * Q11)))))))))))
    # e ln2 + 2s + c + tails: the large parts summed exactly (Fast2Sum, largest first).
    high = e * LN2_HI                                   # exact
    two_s = 2.0 * s
    head = high + two_s
    tail = (high - head) + two_s if abs(high) >= abs(two_s) else (two_s - head) + high
    head2 = head + c
    tail2 = (head - head2) + c if abs(head) >= abs(c) else (c - head2) + head
    low = tail + tail2 + c_lo + 2.0 * s_lo + rest + e * LN2_LO
    result = head2 + low
    return result, (head2 - result) + low


@njit(**INLINE)
def _is_integer(b):
    return np.floor(b) == b


@njit(**INLINE)
def _pow_special(result, a, b, negative):
    """pow(a, b) from ``result`` = exp(b log|a|) (float64 a and b; ``negative``: a's sign bit),
    with pow's special values where |a| is 0, 1 or inf, b is 0 or inf, or either is NaN."""
    magnitude = abs(a)
    usable = magnitude > 0.0 and magnitude < np.inf and abs(b) < np.inf
    # zeros and infinities of a, infinite b: 0 or inf (1 for |a| = 1 and b infinite)
    large = (magnitude == np.inf) == (b > 0.0) if (magnitude == 0.0 or magnitude == np.inf) else \
        (magnitude > 1.0) == (b > 0.0)
    edge = np.inf if large else 0.0
    edge = 1.0 if magnitude == 1.0 else edge
    result = result if usable else edge
    # the sign of a negative base: odd integer exponents keep it; other finite ones give NaN
    integer = _is_integer(b)
    odd = integer and not _is_integer(0.5 * b)
    result = -result if (negative and odd) else result
    result = np.nan if (a < 0.0 and magnitude < np.inf and not integer) else result
    result = a + b if (a != a or b != b) else result
    return 1.0 if (b == 0.0 or a == 1.0) else result


@njit(**INLINE)
def pow_f64(a, b):
    magnitude = abs(a)
    usable = magnitude > 0.0 and magnitude < np.inf and abs(b) < np.inf
    log_hi, log_lo = _log_double(magnitude if usable else 2.0)
    y, y_lo = _two_product(b if usable else 0.0, log_hi)
    y_lo = y_lo + (b if usable else 0.0) * log_lo
    clamped = min(max(y, -746.0), 710.0)
    k = np.rint(clamped * LOG2E)
    r = ((clamped - k * LN2_HI) - k * LN2_LO) + (y_lo if clamped == y else 0.0)
    return _pow_special(times_power_of_two(_exp_polynomial(r), k), a, b, float64_bits(a) < 0)


# ---------------------------------------------------------------------------------------
# float32 pow needs far less: 2**y with y = b log2|a| and float32 results, so |y| <= 150
# where the result is neither 0 nor inf, and an error d in y is a relative error d ln2 in
# the result.  In float64 without the double-double and without a division: log2 m = f Q(f)
# with f = m - 1 exact (m = |a| 2**-e in [sqrt(1/2), sqrt(2)) from the exponent bits: a
# float32 denormal is a normal float64), Q economized at degree 16, within 2**-45 of itself,
# so y is good to 150 * 2**-45 plus its roundings; then 2**y = 2**k P(r), k and r = y - k
# from one addition of 1.5 * 2**52 + 1023 (k + 1023 lands in the low bits, shifted into the
# exponent field they are 2**k), P = 1 + r R(r) economized at degree 9 (2**-44).  The float64
# result is within 2**-37 of pow, rounded to float32 once: 1 ulp at most, and correctly
# rounded unless pow lies within 2**-37 of a midpoint.  No special case needs a branch of
# its own: log2 is -inf at 0 and |a| at inf and NaN, so y is +-inf (clamped to 2**+-200:
# inf and 0 after rounding) or NaN, which the clamp keeps; then pow's signs and its 1s.
# Both polynomials are evaluated in their even and odd halves: two Horner chains of half the
# length, which ran the loop 5-13% faster than one chain (the chain's latency, not the count
# of multiply-adds, bounds it).
# ---------------------------------------------------------------------------------------

LN2_DIGITS = "0.69314718055994530941723212145817656807550013436025525412068000949339362196969471560586332"
# log2(1+f) / f on [sqrt(1/2) - 1, sqrt(2) - 1] (widened to 4 digits), and (2**r - 1) / r on
# [-1/2, 1/2]: economized Taylor series (polyfit.economize, exact arithmetic; the literals are
# what pow_f32_fits computes, tests/codegen/test_pow_f32.py checks them and what they drop).
LOG2_F32 = (1.4426950408889576, -0.7213475204451957, 0.4808983469703402, -0.3606737599459562,
            0.28853900648985725, -0.24044920379046492, 0.20609944727377902, -0.18033546167389725,
            0.16029223398777734, -0.14430121202137863, 0.13133551757926135, -0.11991851479970683,
            0.10850446001554793, -0.1031097592767492, 0.1126175799627002, -0.10862303536328054,
            0.05257807999549025)
EXP2_F32 = (0.6931471805599462, 0.24022650695812972, 0.05550410866465165, 0.009618129159408056,
            0.001333355820079878, 0.00015403455848056116, 1.5252672922171308e-05, 1.325522588388635e-06,
            1.020590594966105e-07)
(G0, G1, G2, G3, G4, G5, G6, G7, G8, G9, G10, G11, G12, G13, G14, G15, G16) = LOG2_F32
(X1, X2, X3, X4, X5, X6, X7, X8, X9) = EXP2_F32
SQRT_HALF_BITS = 0x3FE6A09E667F3BCD     # sqrt(1/2): bits - this, shifted, is the exponent e
EXP2_SHIFT = 6755399441055744.0 + 1023.0  # 1.5 * 2**52 + 1023: adding it rounds to an integer


def pow_f32_fits():
    """(coefficients, dropped) of LOG2_F32 and EXP2_F32, as Fractions: the economizations of
    log2(1+f)/f (its Taylor series to f**69, whose tail is below 2**-90 there) and of
    (2**r - 1)/r (to r**39)."""
    from flowjit.compiler.codegen.polyfit import economize
    ln2 = Fraction(LN2_DIGITS)
    log2 = economize([Fraction((-1) ** n, n + 1) / ln2 for n in range(70)],
                     Fraction(-2929, 10000), Fraction(4143, 10000), 16)
    exp2 = economize([ln2 ** (n + 1) / math.factorial(n + 1) for n in range(40)], Fraction(-1, 2), Fraction(1, 2), 8)
    return log2, exp2


@njit(**INLINE)
def _exponent_and_fraction(bits):
    """e and f = m - 1 (both exact) of a positive normal float64 given by its bits, where
    m = value * 2**-e lies in [sqrt(1/2), sqrt(2)): the reduction of float32 pow's log2 and
    of float32 log1p."""
    e = (bits - SQRT_HALF_BITS) >> 52
    return e, bits_float64(bits - (e << 52)) - 1.0


@njit(**INLINE)
def _pow_log2(magnitude):
    """log2 of a float64 magnitude: -inf at 0, itself at inf and NaN."""
    e, f = _exponent_and_fraction(float64_bits(magnitude))
    f2 = f * f
    even = G0 + f2 * (G2 + f2 * (G4 + f2 * (G6 + f2 * (G8 + f2 * (G10 + f2 * (G12 + f2 * (G14 + f2 * G16)))))))
    odd = G1 + f2 * (G3 + f2 * (G5 + f2 * (G7 + f2 * (G9 + f2 * (G11 + f2 * (G13 + f2 * G15))))))
    result = float64_of_int(e) + f * (even + f * odd)
    result = -np.inf if magnitude == 0.0 else result
    return result if magnitude < np.inf else magnitude


@njit(**INLINE)
def _pow_exp2(y):
    """2**y to 2**-44 of itself, y clamped to [-200, 200] (NaN stays NaN)."""
    y = -200.0 if y < -200.0 else y
    y = 200.0 if y > 200.0 else y
    shifted = y + EXP2_SHIFT
    r = y - (shifted - EXP2_SHIFT)                      # exact, |r| <= 1/2
    r2 = r * r
    even = X1 + r2 * (X3 + r2 * (X5 + r2 * (X7 + r2 * X9)))      # (2**r - 1)/r = even + r odd
    odd = X2 + r2 * (X4 + r2 * (X6 + r2 * X8))
    return (1.0 + r * (even + r * odd)) * bits_float64(float64_bits(shifted) << 52)


@njit(**INLINE)
def pow_f32(a, b):
    """2**(b log2|a|) in float64, within 2**-37 of pow before its one rounding."""
    a64, b64 = np.float64(a), np.float64(b)
    magnitude = abs(a64)
    result = _pow_exp2(b64 * _pow_log2(magnitude))
    # What the exponent does not give: 1 at |a| = 1 for b infinite or NaN (where y is NaN),
    # a negative base's sign (odd b) or NaN (finite non-integer b), and 1 for b = 0 (y can
    # be NaN there too).  -0.0 and -inf count as negative for the sign only, as in C99.
    result = 1.0 if (magnitude == 1.0 and not abs(b64) < np.inf) else result
    integer = _is_integer(b64)
    result = -result if (float32_bits(a) < 0 and integer and not _is_integer(0.5 * b64)) else result
    result = np.nan if (a64 < 0.0 and magnitude < np.inf and not integer) else result
    return np.float32(1.0 if b64 == 0.0 else result)


# ---------------------------------------------------------------------------------------
# float32 log1p needs no correction term and no division: for float32 x in [-1, 2**53),
# u = 1 + x is exact in float64 unless |x| < 2**-29 (x's last bit is at least 2**-52 of
# 1 there), and below that log1p(x) = x (1 - x/2 + ...) is within 2**-30 of x, which
# rounds to x.  So log1p(x) = log(u) = e ln2 + log(1 + f) with e and f = m - 1 exact from
# u's exponent bits (m in [sqrt(1/2), sqrt(2)), as in _pow_log2), and f = x where e = 0,
# so results near 0 keep their relative accuracy; above 2**53, u's rounding moves log(u) by
# 2**-53 of 1 when it is over 36.  log(1 + f) = f + f*f g(f), g economized at degree 12:
# what it drops is below 2**-35.7 of g, and f*f g is at most half of the result's size, so
# the float64 result is within about 2**-36 of log1p before its one rounding to float32
# (1 ulp at most, and correctly rounded unless log1p is that close to a midpoint).  u >= 2**-24
# for x > -1, so no denormal reaches the reduction; -1, below -1, inf and NaN are selects.
# g is evaluated in its even and odd halves, two Horner chains of half the length.
# ---------------------------------------------------------------------------------------

# (log(1 + f) - f) / f**2 on [sqrt(1/2) - 1, sqrt(2) - 1] (widened to 4 digits): the literals
# are what log1p_f32_fit computes; tests/codegen/test_log1p_f32.py checks them.
LOG1P_F32 = (-0.4999999999868064, 0.33333333360282674, -0.2500000093882582, 0.1999999457720407,
             -0.16666555304129196, 0.14285966429426533, -0.12504931570192937, 0.11108922727514428,
             -0.09901015997028569, 0.09016998746068476, -0.09211025426802119, 0.09164323610594824, -0.04986189256417488)
(LP0, LP1, LP2, LP3, LP4, LP5, LP6, LP7, LP8, LP9, LP10, LP11, LP12) = LOG1P_F32
LOG1P_TINY = 2.0 ** -29                 # below, log1p(x) rounds to x in float32


def log1p_f32_fit():
    """(coefficients, dropped) of LOG1P_F32, as Fractions: the economization of
    (log(1 + f) - f) / f**2 = sum (-1)**(n+1) f**n / (n + 2) (its Taylor series to f**79,
    whose tail is below 2**-100 there)."""
    from flowjit.compiler.codegen.polyfit import economize
    return economize([Fraction((-1) ** (n + 1), n + 2) for n in range(80)],
                     Fraction(-2929, 10000), Fraction(4143, 10000), 12)


@njit(**INLINE)
def log1p_f32(x):
    """e ln2 + f + f*f g(f) in float64 from u = 1 + x, exact where it matters: one rounding."""
    x64 = np.float64(x)
    e, f = _exponent_and_fraction(float64_bits(1.0 + x64))
    f2 = f * f
    even = LP0 + f2 * (LP2 + f2 * (LP4 + f2 * (LP6 + f2 * (LP8 + f2 * (LP10 + f2 * LP12)))))
    odd = LP1 + f2 * (LP3 + f2 * (LP5 + f2 * (LP7 + f2 * (LP9 + f2 * LP11))))
    result = float64_of_int(e) * LN2 + (f + f2 * (even + f * odd))
    # tiny x and +-0 (and denormals) are themselves, as are inf and NaN; -1 gives -inf and
    # anything below (-inf included) NaN.
    result = x64 if (abs(x64) < LOG1P_TINY or not x64 < np.inf) else result
    result = -np.inf if x64 == -1.0 else result
    return np.float32(np.nan if x64 < -1.0 else result)
