"""numpy's semantics where numba's operators differ: the helpers kernels call as ``fj.<name>``.

Integer floor division, remainder and power by numpy's rules (a zero divisor gives 0, not an
exception), float divmod as ``npy_divmod``, float16 rounding, the sign of a float, the
fast paths numpy's float power loop takes for a broadcast exponent, and numpy's complex
quotient, reciprocal, power, exp, square root, log, log10 and expm1.  LLVM inlines each into
the kernels that call it (mathlib.INLINE; the complex ones are compiled without contraction in
either flavour, so FMA contraction never reaches them), so a kernel pays only for what it calls.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from flowjit.compiler.codegen.mathlib import INLINE, stack_array
from flowjit.compiler.codegen.mathlib_explog import _two_product


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
def power_scalar_float(a, b, general):
    # numpy's float power loop when the exponent is one broadcast value: -1, 0, 0.5, 1 and 2
    # are 1/a, 1, sqrt(a), a and a*a (so (-inf) ** 0.5 is nan and (-0.0) ** 0.5 is -0.0,
    # where C's pow gives inf and 0.0); any other exponent is pow: ``general`` (vectorised,
    # computed whatever b is, so the loop has no call).
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
    return general


@njit(**INLINE)
def complex_abs_c64(z):
    # |z| of complex64 in float64, where no square overflows, rounded once: within an ulp of C's
    # hypotf.  Branch-free (the loop vectorises, where numba's abs calls hypot per element); an
    # infinite part gives inf even beside a NaN, as hypot.
    a, b = np.float64(z.real), np.float64(z.imag)
    result = np.float32(np.sqrt(a * a + b * b))
    return np.float32(np.inf) if (abs(a) == np.inf) | (abs(b) == np.inf) else result


@njit(**INLINE)
def complex_abs_c128(z):
    # sqrt(a^2 + b^2) where the squares neither overflow nor lose digits to underflow, else
    # big * sqrt(1 + (small/big)^2): within 2 ulp of C's hypot, branch-free, hypot's inf and NaN.
    a, b = abs(z.real), abs(z.imag)
    big = a if a > b else b
    small = b if a > b else a
    plain = np.sqrt(a * a + b * b)
    ratio = small / big
    scaled = big * np.sqrt(1.0 + ratio * ratio)
    safe = (big < 1e150) & ((small > 1e-150) | (small == 0.0)) & (big > 1e-150)
    result = plain if safe else scaled
    result = 0.0 if (a == 0.0) & (b == 0.0) else result
    return np.inf if (a == np.inf) | (b == np.inf) else result


# numpy's complex loops exactly: compiled without fastmath and not inlined by numba, so the kernel's
# ``contract`` flag (a*b+c as one FMA) never reaches their instructions (LLVM still inlines them).
# The disk cache keeps those kernels call (library_cache.py), each with the helpers it calls.
EXACT = dict(error_model="numpy", fastmath=False)


# The complex helpers are written once for both targets: each factory takes the decorator that
# compiles them (``jit``: numba's for the CPU, a device function's for the GPU, cuda_library.py)
# and the scalar functions they call, numpy's on the CPU (numba's own complex exp and sqrt give
# numpy's special values) and math's and cmath's on the GPU, where numba-cuda has no numpy
# functions of scalars.
def _complex_functions(real, make, jit=njit(**EXACT), isfinite=np.isfinite, exp_real=np.exp, exp_complex=np.exp,
                       sqrt_complex=np.sqrt, sin=np.sin, cos=np.cos):
    """numpy's (C's) complex exp and sqrt, in the parts' dtype ``real``."""
    one = real(1)
    info = np.finfo(real)
    big = real(int((info.maxexp - 1) * math.log(2)))       # glibc's cexp: t = (MAX_EXP - 1) ln 2, truncated
    exp_big, largest, tiny, quarter = real(math.exp(big)), real(info.max), real(info.tiny), real(0.25)
    beyond_quarter = real(info.max / 4)
    half_digits = (info.nmant + 2) // 2                       # C's csqrt scales subnormal arguments up
    scale_up, scale_down, small = real(2.0 ** (2 * half_digits)), real(2.0 ** -half_digits), real(4 * info.tiny)

    @jit
    def exp(a):
        # numpy's (C's cexp): exp(x) (cos y + i sin y), e^t taken out of a large x (twice at most) so
        # that a finite part does not overflow with the other (numba's gives inf * 0 = NaN there);
        # non-finite parts are numba's, which gives numpy's special values.
        x, y = a.real, a.imag
        if not (isfinite(x) and isfinite(y)):
            return make(exp_complex(a))
        if abs(y) > tiny:
            s, c = sin(y), cos(y)
        else:
            s, c = y, one
        for _ in range(2):
            if x > big:
                x -= big
                s *= exp_big
                c *= exp_big
        if x > big:
            return make(complex(largest * c, largest * s))
        e = exp_real(x)
        return make(complex(e * c, e * s))

    @jit
    def sqrt(a):
        # numba's sqrt halves the imaginary part where a part reaches max / (1 + sqrt 2): there
        # 2 sqrt(a / 4); and it loses digits of subnormal parts: there sqrt(a 4^k) / 2^k.  Powers
        # of two scale exactly, as C's csqrt scales.
        if abs(a.real) > beyond_quarter or abs(a.imag) > beyond_quarter:
            root = sqrt_complex(make(complex(a.real * quarter, a.imag * quarter)))
            return make(complex(root.real * 2, root.imag * 2))
        if abs(a.real) < small and abs(a.imag) < small:
            root = sqrt_complex(make(complex(a.real * scale_up, a.imag * scale_up)))
            return make(complex(root.real * scale_down, root.imag * scale_down))
        return make(sqrt_complex(a))

    return exp, sqrt


@njit(**EXACT)
def _x2y2m1(x, y):
    """x^2 + y^2 - 1 for 0 <= y <= x < 1 with one rounding in effect (glibc's __x2y2m1): the
    exact products' heads and tails and -1, sorted by magnitude, each added into the next
    larger by a two-sum and the rest sorted again, so that each part left is below the last
    bit of the next; their plain sum then loses nothing that matters even where it cancels to
    a few ulp of its terms (|z| within an ulp of 1)."""
    values = stack_array(np.float64, 5)
    values[1], values[0] = _two_product(x, x)
    values[3], values[2] = _two_product(y, y)
    values[4] = -1.0
    for start in range(5):
        if start > 0:                       # |values[start]| >= |values[start - 1]|: a fast two-sum
            head = values[start] + values[start - 1]
            values[start - 1] = (values[start] - head) + values[start - 1]
            values[start] = head
        for i in range(start + 1, 5):       # values[start:] by magnitude, an insertion sort
            value, j = values[i], i
            while j > start and abs(values[j - 1]) > abs(value):
                values[j] = values[j - 1]
                j -= 1
            values[j] = value
    return values[4] + values[3] + values[2] + values[1] + values[0]


@njit(**EXACT)
def _half_log1p_norm(x, y, wide):
    # log(x^2 + y^2) / 2 for finite x >= y >= 0 with 0.5 <= x < 2, in float64, through
    # log1p(x^2 + y^2 - 1): near |z| = 1 the -1 cancels, so it is computed with one rounding in
    # effect (glibc's clog).  Parts of complex64 are float32, whose products are exact in
    # float64; for x >= 1 nothing cancels (x^2 - 1 >= 0), so float64's roundings cost an ulp.
    if not wide or x >= 1.0:
        return 0.5 * np.log1p((x - 1.0) * (x + 1.0) + y * y)
    return 0.5 * np.log1p(_x2y2m1(x, y))


def _complex_logarithms(real, make, jit=njit(**EXACT), isfinite=np.isfinite, log_complex=np.log,
                        half_log1p_norm=_half_log1p_norm, atan2=np.arctan2, sin=np.sin, cos=np.cos, exp_real=np.exp,
                        expm1_real=np.expm1):
    """numpy's complex log (C's clog, exact near |z| = 1 where numba's log(|z|) loses digits),
    log10 (log times log10(e), as numpy's nc_log10) and expm1 (numpy's nc_expm1; numba's is
    exp(z) - 1, which cancels near zero), in the parts' dtype ``real``."""
    wide, half, two, log10e = real == np.float64, real(0.5), real(2), real(math.log10(math.e))

    @jit
    def log(a):
        x, y = abs(a.real), abs(a.imag)
        if y > x:
            x, y = y, x
        if not (isfinite(x) and isfinite(y) and x >= 0.5 and x < 2):
            return make(log_complex(a))
        modulus = half_log1p_norm(np.float64(x), np.float64(y), wide)
        return make(complex(real(modulus), atan2(a.imag, a.real)))

    @jit
    def log10(a):
        result = log(a)
        return make(complex(result.real * log10e, result.imag * log10e))

    @jit
    def expm1(a):
        half_sine = sin(a.imag * half)
        return make(complex(expm1_real(a.real) * cos(a.imag) - two * half_sine * half_sine,
                            exp_real(a.real) * sin(a.imag)))

    return log, log10, expm1


def _complex_arithmetic(real, make, exp, log, jit=njit(**EXACT)):
    """numpy's complex division, reciprocal and power, computed in the parts' dtype ``real``:
    division is Smith's method (a zero divisor gives inf or NaN parts, where numba's ``/`` raises
    ZeroDivisionError); power is ``npy_cpow``, whose products are C's (kernels compute ``a * b``
    of complex values with FMA contraction, as numpy's own vector loops do on CPUs with FMA)."""
    one, zero = real(1), real(0)

    @jit
    def divide(a, b):
        ar, ai, br, bi = a.real, a.imag, b.real, b.imag
        br_abs, bi_abs = abs(br), abs(bi)
        if br_abs >= bi_abs:
            if br_abs == 0 and bi_abs == 0:
                return make(complex(ar / br_abs, ai / br_abs))
            ratio = bi / br
            scale = one / (br + bi * ratio)
            return make(complex((ar + ai * ratio) * scale, (ai - ar * ratio) * scale))
        ratio = br / bi
        scale = one / (bi + br * ratio)
        return make(complex((ar * ratio + ai) * scale, (ai * ratio - ar) * scale))

    @jit
    def reciprocal(a):
        ar, ai = a.real, a.imag
        if abs(ai) <= abs(ar):
            ratio = ai / ar
            d = ar + ai * ratio
            return make(complex(one / d, -ratio / d))
        ratio = ar / ai
        d = ar * ratio + ai
        return make(complex(ratio / d, -one / d))

    @jit
    def multiply(a, b):
        return make(complex(a.real * b.real - a.imag * b.imag, a.real * b.imag + a.imag * b.real))

    @jit
    def power(a, b):
        # a ** 0 is 1; 0 ** b is 0 for Re b > 0, else NaN; an integral exponent below 100 in
        # magnitude multiplies (binary powers, then one division for a negative one); others
        # are exp(b log a), as C's cpow.
        if b.real == 0 and b.imag == 0:
            return make(complex(one, zero))
        if a.real == 0 and a.imag == 0:
            if b.real > 0:
                return make(complex(zero, zero))
            return make(complex(np.nan, np.nan))
        if b.imag == 0 and abs(b.real) < 100 and b.real == math.floor(b.real):
            n = int(b.real)
            if n == 1:
                return a
            if n == 2:
                return multiply(a, a)
            if n == 3:
                return multiply(a, multiply(a, a))
            result, base, count, mask = make(complex(one, zero)), a, abs(n), 1
            while True:
                if count & mask:
                    result = multiply(result, base)
                mask <<= 1
                if count < mask:
                    break
                base = multiply(base, base)
            return divide(make(complex(one, zero)), result) if n < 0 else result
        return exp(make(b * log(a)))
    return divide, reciprocal, power


complex_exp_c64, complex_sqrt_c64 = _complex_functions(np.float32, np.complex64)
complex_exp_c128, complex_sqrt_c128 = _complex_functions(np.float64, np.complex128)
complex_log_c64, complex_log10_c64, complex_expm1_c64 = _complex_logarithms(np.float32, np.complex64)
complex_log_c128, complex_log10_c128, complex_expm1_c128 = _complex_logarithms(np.float64, np.complex128)
complex_divide_c64, complex_reciprocal_c64, complex_power_c64 = _complex_arithmetic(np.float32, np.complex64,
                                                                                    complex_exp_c64, complex_log_c64)
complex_divide_c128, complex_reciprocal_c128, complex_power_c128 = _complex_arithmetic(
    np.float64, np.complex128, complex_exp_c128, complex_log_c128)
