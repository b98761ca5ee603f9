"""Transcendental functions that LLVM can vectorise: no libm calls in kernel loops.

numba's ``math.exp`` and friends call libm one element at a time, which stops the loop
vectoriser (the measured cause of numba's loss to jax.jit on GELU).  These are written
in plain arithmetic, bit casts and selects, and LLVM inlines them into the kernels (``INLINE``):

- ``exp``: Cody-Waite reduction x = k ln2 + r, |r| <= ln2/2, a degree-11 polynomial
  (float32: degree 6), and 2**k built from exponent bits in two halves (so denormal
  results and k = 1024 need no branch).
- ``log``: x = m 2**e with m in [sqrt(1/2), sqrt(2)); log(m) = f - s (f - R(s**2)) with
  f = m - 1, s = f / (2 + f) and R the atanh series; denormals are scaled first.
- ``sigmoid``: 1 / (1 + e) or e / (1 + e) with e = exp(-|x|).
- ``erf``: x h(x*x) below 1, 1 - exp(-x*x) g(t) above, g by Horner in powers of u.

sin and cos (and tan, arctan, arcsin, arccos) are in mathlib_trig.py, exp2, log2, log10,
expm1, log1p, tanh and pow in mathlib_explog.py.  The exp and erf polynomials are economized Taylor series (polyfit.py, exact arithmetic).
float32 exp, sigmoid and erf compute in float32 (16 lanes per AVX-512 vector; a
float32 Cody-Waite reduction, shorter erf polynomials); float32 log evaluates the float64
core and rounds once.  ``tests/codegen/test_mathlib.py`` measures the error
against numpy on 10**6 points per function and dtype (the table is in docs/math.md).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from llvmlite import ir as llvm_ir
from numba import njit
from numba.core import types
from numba.extending import intrinsic

from flowjit.config import width_attribute


def _bitcast(name: str, source, target, llvm_type, doc: str):
    """An intrinsic reinterpreting the bits of a ``source`` scalar as a ``target`` one."""
    def typer(typingctx, value):
        if value == source:
            def codegen(context, builder, signature, args):
                return builder.bitcast(args[0], llvm_type)
            return target(source), codegen
        return None
    typer.__name__ = typer.__qualname__ = name
    typer.__doc__ = doc
    return intrinsic(typer)


float64_bits = _bitcast("float64_bits", types.float64, types.int64, llvm_ir.IntType(64),
                        "The IEEE bits of a float64 as an int64.")
bits_float64 = _bitcast("bits_float64", types.int64, types.float64, llvm_ir.DoubleType(),
                        "The float64 whose IEEE bits are the given int64.")
float32_bits = _bitcast("float32_bits", types.float32, types.int32, llvm_ir.IntType(32),
                        "The IEEE bits of a float32 as an int32.")
bits_float32 = _bitcast("bits_float32", types.int32, types.float32, llvm_ir.FloatType(),
                        "The float32 whose IEEE bits are the given int32.")


@intrinsic
def stack_array(typingctx, dtype, size):
    """A C-contiguous 1-D array of a literal ``size`` in the caller's stack frame.

    Reduce kernels keep their lane accumulators here: LLVM knows a stack slot aliases no
    argument, so the lane loop vectorises and the accumulators stay in registers.  A heap
    array (``np.empty``) would be reloaded and stored on every step.
    """
    if not isinstance(size, types.IntegerLiteral) or not isinstance(dtype, types.NumberClass):
        return None
    element = dtype.instance_type
    array_type = types.Array(element, 1, "C")

    def codegen(context, builder, signature, args):
        from numba.core import cgutils
        data = cgutils.alloca_once(builder, context.get_data_type(element), size=size.literal_value)  # (entry block)
        count = context.get_value_type(types.intp)(size.literal_value)
        return _vector(context, builder, array_type, data, count, None)
    return array_type(dtype, size), codegen


@intrinsic
def heap_array(typingctx, dtype, size):
    """A C-contiguous 1-D array of ``size`` elements from numba's runtime, as ``np.empty``.

    A kernel's scratch rows and partial totals are these.  ``np.empty`` compiles numba's own
    overload into the kernel, and loading that kernel from the cache then rebuilds the
    overload's environment, which imports ``numba.np.arrayobj`` (50 ms of a process's first
    call); this allocates through the same runtime call inline, and brings nothing along.
    """
    if not isinstance(size, types.Integer) or not isinstance(dtype, types.NumberClass):
        return None
    element = dtype.instance_type
    array_type = types.Array(element, 1, "C")

    def codegen(context, builder, signature, args):
        data_type = context.get_data_type(element)
        intp = context.get_value_type(types.intp)
        count = context.cast(builder, args[1], signature.args[1], types.intp)
        nbytes = builder.mul(count, intp(context.get_abi_sizeof(data_type)))
        meminfo = context.nrt.meminfo_alloc_aligned(builder, nbytes, context.get_preferred_array_alignment(element))
        data = builder.bitcast(context.nrt.meminfo_data(builder, meminfo), data_type.as_pointer())
        return _vector(context, builder, array_type, data, count, meminfo)
    return array_type(dtype, size), codegen


def _vector(context, builder, array_type, data, count, meminfo):
    """The value of a C-contiguous 1-D ``array_type`` over ``count`` elements at ``data``
    (owned by ``meminfo``, or by no one: a stack slot)."""
    from numba.np.arrayobj import make_array, populate_array
    intp = context.get_value_type(types.intp)
    itemsize = intp(context.get_abi_sizeof(context.get_data_type(array_type.dtype)))
    array = make_array(array_type)(context, builder)
    populate_array(array, data=data, shape=[count], strides=[itemsize], itemsize=itemsize, meminfo=meminfo)
    return array._getvalue()


@intrinsic
def vector_width(typingctx, bits):
    """Asks LLVM to vectorise the function this is called in with ``bits``-wide registers
    (a literal: 128, 256 or 512), through the function attribute ``"prefer-vector-width"``;
    it emits no instruction.  Kernels call it first thing, and first thing in each ``prange``
    body (numba outlines those into functions of their own); config.vector_bits decides it."""
    if not isinstance(bits, types.IntegerLiteral) or bits.literal_value not in (128, 256, 512):
        return None
    attribute = width_attribute(bits.literal_value)

    def codegen(context, builder, signature, args):
        # llvmlite's FunctionAttributes takes only its list of keyword attributes; a string
        # attribute is written out as it is held (config.vector_width_works checks that it still is).
        set.add(builder.function.attributes, attribute)
        return context.get_dummy_value()
    return types.none(bits), codegen


@intrinsic
def known_last_extent(typingctx, array, extent):
    """``array`` whose last extent is the literal ``extent`` (which it must be), so that LLVM
    sees the stride of its second-to-last axis as a constant.

    An image's ``(n, 3)`` loop with a pixel's alpha broadcast along the 3 had an inner loop of
    3 that never vectorised; with the 3 a constant, LLVM unrolls it and vectorises the loop
    over pixels, reading the channels as interleaved groups.  The view owns nothing (its
    meminfo is null, as a stack array's), so taking it inside a parallel loop costs no
    reference counting; the argument it is taken from keeps the data alive.
    """
    if not isinstance(extent, types.IntegerLiteral) or not isinstance(array, types.Array) or array.ndim < 2:
        return None

    def codegen(context, builder, signature, args):
        from numba.core import cgutils
        from numba.np.arrayobj import make_array
        view = make_array(array)(context, builder, args[0])
        shape = cgutils.unpack_tuple(builder, view.shape)
        shape[-1] = context.get_constant(types.intp, extent.literal_value)
        view.shape = cgutils.pack_array(builder, shape)
        view.meminfo = cgutils.get_null_value(view.meminfo.type)
        view.parent = cgutils.get_null_value(view.parent.type)
        return view._getvalue()
    return array(array, extent), codegen


# How library routines are compiled: each on its own, once a process, with LLVM's
# ``alwaysinline``, so that LLVM inlines it into each kernel that calls it before the loop is
# vectorised.  numba's own inlining (``inline="always"``) copied and re-typed a routine's IR at
# every call site: half of a math-heavy kernel's compile time.  ``contract`` (a*b+c as one FMA)
# is what a kernel compiled with FMA (the default) does; library.py gives kernels compiled
# without it a twin of every routine compiled without it (library.exact).  numba's disk cache
# keeps them under the toolchain's key (library_cache.py), not numba's, whose index does not
# tell flags apart.
INLINE = dict(forceinline=True, error_model="numpy", fastmath={"contract"})
# A routine inlined as INLINE's but compiled without contraction, the same in both flavours: what
# the complex helpers (compiled without contraction, shared) may call as well as routines.
INLINE_EXACT = dict(INLINE, fastmath=False)
# The two helpers that read the thread count stay numba's inlining: ``thread_count``'s symbol
# exists once numba's threading layer has started, which loading a routine from numba's cache
# does not do and loading a parallel kernel does.
THREADS = dict(inline="always", error_model="numpy")


@intrinsic
def thread_count(typingctx):
    """The threads numba's parallel loops run on, as its own prange scheduling reads them (a
    call of the threading layer's ``get_num_threads`` symbol): ``numba.get_num_threads()``
    calls through a ctypes pointer, and numba caches no function that does."""
    from numba.np.ufunc.parallel import _launch_threads
    _launch_threads()            # (registers the symbol, as compiling any prange loop does)

    def codegen(context, builder, signature, args):
        from numba.core import cgutils
        function = cgutils.get_or_insert_function(builder.module, llvm_ir.FunctionType(cgutils.intp_t, []),
                                                  "get_num_threads")
        return builder.call(function, [])
    return types.intp(), codegen


@njit(**THREADS)
def parallel_parts(rows):
    """How many parts a parallel loop kernel splits its ``rows`` (the outer axis) into: one a
    thread, as numba's prange hands each thread one run of iterations, and no more than rows."""
    return min(np.int64(rows), np.int64(thread_count()))


@njit(**THREADS)
def column_block(columns, most):
    """Adjacent outputs a task of a parallel reduction over outer axes takes: ``most``, or
    fewer so that every thread gets some, a multiple of 16 (whole vectors of any width)."""
    threads = np.int64(thread_count())
    share = (np.int64(columns) + threads - 1) // threads
    return max(np.int64(16), min(np.int64(most), (share + 15) // 16 * 16))


@njit(**INLINE)
def part_bounds(part, parts, rows):
    """The first row of ``part`` and the row after its last, of ``rows`` split in ``parts``."""
    return np.int64(part) * rows // parts, (np.int64(part) + 1) * rows // parts


@njit(**INLINE)
def magnitude_f32(x):
    """|x|'s IEEE bits as an integer, which orders magnitudes as the floats do and puts NaN
    above inf: a block's largest (an integer max, which vectorises; a float max that
    respects NaN does not) is what routines' fast-path checks (``sin_f32_fits``) take."""
    return np.int64(float32_bits(x) & 0x7FFFFFFF)


@njit(**INLINE)
def magnitude_f64(x):
    """magnitude_f32 for float64."""
    return float64_bits(x) & 0x7FFFFFFFFFFFFFFF


LOG2E = 1.4426950408889634
LN2_HI = 6.93147180369123816490e-01       # ln 2 with trailing zero bits: k * LN2_HI is exact
LN2_LO = 1.90821492927058770002e-10
EXP_OVERFLOW = 709.782712893384           # exp(x) is inf above
SQRT2 = 1.4142135623730951


# Economized polynomials, from `python -m flowjit.compiler.codegen.polyfit` (exact rational
# arithmetic; tests/codegen/test_mathlib.py checks these literals against it).
EXP_F64 = (1.0, 1.0, 0.5000000000000019, 0.16666666666666702, 0.041666666666487974, 0.00833333333330951,
           0.001388888895234707, 0.00019841269909250933, 2.480148544815057e-05, 2.7557224927351573e-06,
           2.763265216957956e-07, 2.5114879796112015e-08)
EXP_F32 = (0.5000000013468379, 0.1666657697579495, 0.04166646491457949, 0.008363180121709215,
           0.0013933650354190183)
ERF_SMALL = (1.0, -0.3333333333333315, 0.09999999999991141, -0.023809523807862793, 0.004629629613524899,
             -0.0007575756653277209, 0.00010683727123124537, -1.322670713940455e-05, 1.4576191824713482e-06,
             -1.436470144918777e-07, 1.2160380842257809e-08, -6.911279539681392e-10)
E0, E1, E2, E3, E4, E5, E6, E7, E8, E9, E10, E11 = EXP_F64


# v + SHIFTER, for |v| < 2**51, is a float64 whose low bits hold v rounded to an integer.
SHIFTER = 6755399441055744.0                                    # 1.5 * 2**52
SHIFTER_BITS = int(np.float64(SHIFTER).view(np.int64))


@njit(**INLINE)
def int_of_float64(k):
    """int64 of an integer-valued float64 ``k``, |k| < 2**51, exactly, without a conversion
    instruction: AVX2 has no packed float64 -> int64 one, and LLVM converted lane by lane."""
    return float64_bits(k + SHIFTER) - SHIFTER_BITS


@njit(**INLINE)
def float64_of_int(n):
    """float64 of an int64 ``n``, |n| < 2**51, exactly (no packed int64 -> float64 either)."""
    return bits_float64(n + SHIFTER_BITS) - SHIFTER


@njit(**INLINE)
def times_power_of_two(p, k):
    """p * 2**k for an integer-valued float64 k in [-1080, 1030], in two exact halves (one
    would overflow at k = 1024 or flush at k < -1022); vector integer work only."""
    half = np.floor(k * 0.5)
    first, second = int_of_float64(half), int_of_float64(k - half)
    return p * bits_float64((first + 1023) << 52) * bits_float64((second + 1023) << 52)


@njit(**INLINE)
def exp_f64(x):
    """|r| <= ln2/2, degree 11.  As in exp_f32, the clamp alone gives inf above 709.78 and
    0 below -745.13 (k = 1024 with r > 0; k <= -1075 with p * 2**k below half the least
    denormal); only NaN needs a select."""
    clamped = min(max(x, -746.0), 710.0)
    k = np.rint(clamped * LOG2E)
    r = (clamped - k * LN2_HI) - k * LN2_LO
    p = E0 + r * (E1 + r * (E2 + r * (E3 + r * (E4 + r * (E5 + r * (E6 + r * (E7 + r * (
        E8 + r * (E9 + r * (E10 + r * E11))))))))))
    # Below the clamp the result is 0: made by a zero factor, not by underflow, which the CPU
    # computes in microcode (a softmax's masked -inf scores ran 3x slower for it).
    result = times_power_of_two(p, k) if x >= -746.0 else 0.0
    return x if x != x else result


F_LOG2E = np.float32(1.44269504)
F_LN2_HI = np.float32(0.693359375)            # 8 significant bits: k * F_LN2_HI is exact
F_LN2_LO = np.float32(-2.12194440e-4)
F_EXP_OVERFLOW = np.float32(88.72283935546875)
F_G0, F_G1, F_G2, F_G3, F_G4 = (np.float32(c) for c in EXP_F32)     # exp(r) = 1 + r + r*r g(r)


@njit(**INLINE)
def exp_f32(x):
    """float32 throughout, so the loop runs 16 lanes wide: |r| <= ln2/2, degree 6.

    The clamp alone gives the limits: at 89, k = 128 and r > 0 make p * 2**128 overflow to
    inf; at -104, k = -150 and p < 1 make p * 2**-150 round to 0.  Only NaN needs a select.
    """
    clamped = min(max(x, np.float32(-104.0)), np.float32(89.0))
    k = np.rint(clamped * F_LOG2E)
    r = (clamped - k * F_LN2_HI) - k * F_LN2_LO
    p = np.float32(1.0) + r * (np.float32(1.0) + r * (F_G0 + r * (F_G1 + r * (F_G2 + r * (F_G3 + r * F_G4)))))
    ki = np.int32(k)
    half = ki >> 1
    scale1 = bits_float32(np.int32((half + 127) << 23))
    # (as in exp_f64: a zero factor below the clamp, where underflow would cost microcode)
    scale2 = bits_float32(np.int32((ki - half + 127) << 23)) if x >= np.float32(-104.0) else np.float32(0.0)
    result = p * scale1 * scale2
    return x if x != x else result


def _atanh_series(terms: int) -> tuple[float, ...]:
    # log(1+f) = f - s (f - R),  R = sum_{k>=1} 2 z**k / (2k+1),  z = s**2
    return tuple(float(Fraction(2, 2 * k + 1)) for k in range(1, terms + 1))


L1, L2, L3, L4, L5, L6, L7, L8, L9, L10, L11 = _atanh_series(11)


@njit(**INLINE)
def log_reduce(x):
    """x > 0 finite -> (e, log m) with x = m 2**e, m in [sqrt(1/2), sqrt(2)): denormals are
    scaled first, log m = f - s (f - R(s**2)) with f = m - 1, s = f / (2 + f), R the atanh
    series; any other x gives values the callers replace."""
    denormal = x < 2.2250738585072014e-308
    scaled = x * 18014398509481984.0 if denormal else x     # 2**54
    bits = float64_bits(scaled)
    exponent = ((bits >> 52) & 0x7FF) - 1023 - (54 if denormal else 0)
    m = bits_float64((bits & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000)
    big = m > SQRT2
    m = m * 0.5 if big else m
    e = float64_of_int(exponent + (1 if big else 0))
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    R = z * (L1 + z * (L2 + z * (L3 + z * (L4 + z * (L5 + z * (L6 + z * (L7 + z * (L8 + z * (
        L9 + z * (L10 + z * L11))))))))))
    return e, f - s * (f - R)


@njit(**INLINE)
def _log_specials(x, result):
    """A logarithm's results at 0, negatives, inf and NaN (log, log2, log10)."""
    result = -np.inf if x == 0.0 else result
    result = np.nan if x < 0.0 else result
    result = x if x == np.inf else result
    return x if x != x else result


@njit(**INLINE)
def log_f64(x):
    e, log_m = log_reduce(x)
    return _log_specials(x, e * LN2_HI + (log_m + e * LN2_LO))


@njit(**INLINE)
def log_f32(x):
    return np.float32(log_f64(np.float64(x)))


@njit(**INLINE)
def _sigmoid(x, flush_below):
    e = exp_f64(-abs(x))
    r = 1.0 / (1.0 + e)
    result = r if x >= 0.0 else e * r
    # scipy's expit computes 1 / (1 + exp(-x)): it is 0 once exp(-x) overflows the dtype.
    result = 0.0 if x < flush_below else result
    return x if x != x else result


@njit(**INLINE)
def sigmoid_f64(x):
    return _sigmoid(x, -EXP_OVERFLOW)


@njit(**INLINE)
def sigmoid_f32(x):
    e = exp_f32(-abs(x))
    r = np.float32(1.0) / (np.float32(1.0) + e)
    result = r if x >= np.float32(0.0) else e * r
    result = np.float32(0.0) if x < -F_EXP_OVERFLOW else result
    return x if x != x else result


ERF_SPLIT = 1.0
TWO_OVER_SQRT_PI = 1.1283791670955126
R0, R1, R2, R3, R4, R5, R6, R7, R8, R9, R10, R11 = (TWO_OVER_SQRT_PI * c for c in ERF_SMALL)
# From tools/fit_erf.py --degree 16 (mpmath, 40 digits): erfc(x) exp(x*x) as a Chebyshev
# series in t = 1 / (1 + ERF_P x) for x in [1, 6].  Its truncation error is below the
# 6e-16 of evaluating it in float64, and erfc <= 0.16 there scales both down.
ERF_P = 0.25
ERF_C = (0.2289600427701425, 0.16243308614798777, 0.030546548004245652, 0.004893614652291599,
         0.0006662818879211086, 7.627526890767862e-05, 7.172538798561326e-06, 5.276056048140741e-07,
         2.682799718979075e-08, 5.074522858022715e-10, -5.08914078240966e-11, -4.625848914621013e-12,
         -4.155798504832773e-14, 1.6159386365619006e-14, 7.317520625908113e-16, -4.849485632792289e-17,
         -4.388300968197019e-18)
# The same series in powers of u (polyfit.erf_large), for Horner's rule.
ERF_LARGE = (0.1990726309938657, 0.14812992991458337, 0.05589108556608052, 0.018078437227012183,
             0.004990286041083531, 0.001161537440566441, 0.00022259643181912086, 3.346127706896973e-05,
             3.4988173532962976e-06, 1.4320648193596367e-07, -2.5771429075331263e-08, -4.956452325830219e-09,
             -1.0702622151739716e-10, 6.916837052636304e-11, 6.569696281247446e-12, -7.945397260766887e-13,
             -1.4379584612587992e-13)
(H0, H1, H2, H3, H4, H5, H6, H7, H8, H9, H10, H11, H12, H13, H14, H15, H16) = ERF_LARGE
# The fit maps t from [1/(1 + 6 P), 1/(1 + P)] = [2/5, 4/5] onto [-1, 1]: u = 5 t - 3.
ERF_U_SCALE, ERF_U_SHIFT = 5.0, 3.0


@njit(**INLINE)
def erf_f64(x):
    """Below 1, x times an economized polynomial in x*x; above, 1 - exp(-x*x) g(t) with g
    a polynomial in t (Horner).  From 6 on, exp(-36) g < 2**-55 makes that 1.0."""
    a = abs(x)
    z = a * a
    small = a * (R0 + z * (R1 + z * (R2 + z * (R3 + z * (R4 + z * (R5 + z * (R6 + z * (R7 + z * (
        R8 + z * (R9 + z * (R10 + z * R11)))))))))))
    b = min(a, 6.0)
    t = 1.0 / (1.0 + ERF_P * b)
    u = ERF_U_SCALE * t - ERF_U_SHIFT           # t in [0.4, 0.8] -> u in [-1, 1], no division
    g = H0 + u * (H1 + u * (H2 + u * (H3 + u * (H4 + u * (H5 + u * (H6 + u * (H7 + u * (H8 + u * (
        H9 + u * (H10 + u * (H11 + u * (H12 + u * (H13 + u * (H14 + u * (H15 + u * H16)))))))))))))))
    large = 1.0 - exp_f64(-(b * b)) * g
    result = small if a < ERF_SPLIT else large
    return math.copysign(result, x)             # keeps -0.0; NaN stays NaN


# float32: the same two regions with shorter polynomials (polyfit.erf_small_f32 and
# erf_large_f32), so the loop runs 16 float32 lanes wide instead of 8 float64 ones.
ERF_SMALL_F32 = (0.9999999989241117, -0.3333332269896178, 0.09999827888113556, -0.023799029244036138,
                 0.00459890796818244, -0.0007106525205908577, 6.985681178762354e-05)
ERF_LARGE_F32 = (0.19907263094301658, 0.14812992529641766, 0.055891088107586466, 0.018078499144882413,
                 0.004990265720588292, 0.0011613124747836816, 0.000222653274273376, 3.376675870810074e-05,
                 3.433983640293216e-06)
F_R0, F_R1, F_R2, F_R3, F_R4, F_R5, F_R6 = (np.float32(TWO_OVER_SQRT_PI * c) for c in ERF_SMALL_F32)
F_H0, F_H1, F_H2, F_H3, F_H4, F_H5, F_H6, F_H7, F_H8 = (np.float32(c) for c in ERF_LARGE_F32)
F_ERF_P, F_ERF_U_SCALE, F_ERF_U_SHIFT = np.float32(ERF_P), np.float32(ERF_U_SCALE), np.float32(ERF_U_SHIFT)
F_ONE, F_SIX = np.float32(1.0), np.float32(6.0)


@njit(**INLINE)
def erf_f32(x):
    """float32 throughout, erf_f64's scheme.  From 6 on, exp(-36) g rounds 1 - exp(-36) g
    to 1.0 (float32's erf is 1.0 from 3.92)."""
    a = abs(x)
    z = a * a
    small = a * (F_R0 + z * (F_R1 + z * (F_R2 + z * (F_R3 + z * (F_R4 + z * (F_R5 + z * F_R6))))))
    b = min(a, F_SIX)
    t = F_ONE / (F_ONE + F_ERF_P * b)
    u = F_ERF_U_SCALE * t - F_ERF_U_SHIFT
    g = F_H0 + u * (F_H1 + u * (F_H2 + u * (F_H3 + u * (F_H4 + u * (F_H5 + u * (F_H6 + u * (F_H7 + u * F_H8)))))))
    large = F_ONE - exp_f32(-(b * b)) * g
    result = small if a < F_ONE else large
    return np.float32(math.copysign(result, x))     # keeps -0.0; NaN stays NaN
