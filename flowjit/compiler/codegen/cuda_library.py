"""The CUDA kernel library: what generated CUDA kernels call, under the one name ``fj``.

The counterpart of ``codegen/library.py`` for the ``cuda`` target: numba-cuda device functions
with the names the ops' lowering rules call (``fj.floordiv_int``, ``fj.round_float16``), so
one rule serves both targets where it can.  Where the CPU library's function uses something
numba-cuda lacks (numpy's ufuncs on scalars: ``np.floor``, ``np.fmod``) or would promote
float32 to float64 through a Python float constant, the op's rule has a ``cuda`` override that
calls a dtype-suffixed function of this module (``fj.floor_f32``, ``fj.divmod_f64``) built
on libdevice, so a float32 kernel computes in float32.

Integer division and remainder are the CPU library's own functions (``numerics.py``),
compiled as device functions: the same code gives numpy's semantics on both targets.

Importing this module imports ``numba.cuda`` (through ``flowjit.gpu``); rendering CUDA
source does not.
"""

from __future__ import annotations

import cmath
import math

import numpy as np

from flowjit.compiler.codegen import numerics
from flowjit.gpu import numba_cuda, simulated

cuda = numba_cuda()
DEVICE = dict(device=True, inline=True)


def _device(function):
    return cuda.jit(**DEVICE)(function)


# -- integers: the CPU library's code, as device functions -----------------------------------------
floordiv_int = _device(numerics.floordiv_int.py_func)
floordiv_uint = _device(numerics.floordiv_uint.py_func)
mod_int = _device(numerics.mod_int.py_func)
fmod_int = _device(numerics.fmod_int.py_func)
# (a negative exponent raises ValueError under the simulator; a GPU kernel cannot raise)
power_int = _device(numerics.power_int.py_func)


# -- warp shuffles: reduce kernels combine a warp's values without shared memory ----------------------
FULL_MASK = 0xFFFFFFFF


if simulated():
    # The simulator has no shuffles.  Each thread posts its value in a slot of its block and reads
    # its partner's between two barriers (every thread of the block calls it, as the kernels do).
    # The simulator runs a block's threads as Python threads; it swaps ``cuda`` in a device
    # function's globals around each call, which is not thread-safe, so this reads the thread
    # and its block from ``threading`` rather than from ``cuda``.
    import threading

    def _shfl_xor_simulated(value, offset):
        thread = threading.current_thread()
        slots = thread._manager.__dict__.setdefault("flowjit_shuffle_slots", {})
        lane = thread.thread_id
        slots[lane] = value
        thread.syncthreads()
        other = slots[lane ^ offset]
        thread.syncthreads()
        return other
    shfl_xor = _device(_shfl_xor_simulated)
else:
    @_device
    def shfl_xor(value, offset):
        return cuda.shfl_xor_sync(FULL_MASK, value, offset)


@_device
def round_float16(x):
    # float16 values live in float32 in kernels; the hardware conversion rounds to nearest even.
    return np.float32(np.float16(x))


@_device
def arg_prefer(a, ia, b, ib, larger):
    # argmax (``larger``) / argmin of two candidates (value, position; position < 0: none yet):
    # whether (b, ib) wins.  The first position of the extreme wins, and NaN is the extreme.
    if ib < 0:
        return False
    if ia < 0:
        return True
    if a != a:
        return b != b and ib < ia
    if b != b:
        return True
    if b == a:
        return ib < ia
    if larger:
        return b > a
    return b < a


# -- floats: one function per dtype on libdevice, so float32 never meets a float64 constant ---------
# libdevice's name of each routine used below -> numpy's (the simulator runs them as Python,
# where numpy's ufuncs on float32 scalars keep float32).
ROUTINES = {"floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint, "fmod": np.fmod,
            "pow": np.power, "sqrt": np.sqrt, "exp2": np.exp2, "copysign": np.copysign, "exp": np.exp,
            "cbrt": np.cbrt, "log1p": np.log1p, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh}


def _routines(f) -> dict:
    """libdevice's routines at one precision (``f`` names them: ``floorf`` / ``floor``); numpy's
    under the simulator, whose libdevice is a stub."""
    if simulated():
        return dict(ROUTINES)
    from numba.cuda import libdevice
    return {name: getattr(libdevice, f(name)) for name in ROUTINES}


def _float_functions(dtype, suffix: str, f) -> dict:
    """The float functions at ``dtype``, on libdevice's routines at that precision."""
    routines = _routines(f)

    def rounding(routine):
        return lambda a: routine(a)

    def binary(routine):
        return lambda a, b: routine(a, b)

    functions = {name: rounding(routines[name]) for name in ("floor", "ceil", "trunc", "rint", "exp2", "cbrt")}
    functions.update(arcsinh=rounding(routines["asinh"]), arccosh=rounding(routines["acosh"]),
                     arctanh=rounding(routines["atanh"]), fmod=binary(routines["fmod"]), pow=binary(routines["pow"]))
    functions.update(_numpy_float_rules(dtype, routines))
    functions.update(_exponential_sums(dtype, routines))
    return {f"{name}_{suffix}": _device(function) for name, function in functions.items()}


def _numpy_float_rules(dtype, routines) -> dict:
    """numpy's divmod, its fast paths for a scalar exponent and its sign, in ``dtype``."""
    floor, fmod, power, sqrt, copysign = (routines[name] for name in ("floor", "fmod", "pow", "sqrt", "copysign"))
    zero, one, half, two = dtype(0.0), dtype(1.0), dtype(0.5), dtype(2.0)

    def divmod_float(a, b):
        # numpy's npy_divmod, as numerics.divmod_float, in ``dtype`` throughout.
        mod = fmod(a, b)
        if b == zero:
            return a / b, mod
        div = (a - mod) / b
        if mod != zero:
            if (b < zero) != (mod < zero):
                mod += b
                div -= one
        else:
            mod = copysign(zero, b)
        if div != zero:
            floordiv = floor(div)
            if div - floordiv > half:
                floordiv += one
        else:
            floordiv = copysign(zero, a / b)
        return floordiv, mod

    def power_scalar_float(a, b):
        # numpy's fast paths for a broadcast exponent (numerics.power_scalar_float).
        if b == -one:
            return one / a
        if b == zero:
            return b + one
        if b == half:
            return sqrt(a)
        if b == one:
            return a
        if b == two:
            return a * a
        return power(a, b)

    def sign_float(a):
        if a != a:
            return a
        if a > zero:
            return one
        if a < zero:
            return -one
        return zero

    return dict(divmod=divmod_float, power_scalar=power_scalar_float, sign=sign_float)


def _exponential_sums(dtype, routines) -> dict:
    """The logistic sigmoid and numpy's logaddexp and logaddexp2, in ``dtype``."""
    exp, exp2, log1p = routines["exp"], routines["exp2"], routines["log1p"]
    zero, one = dtype(0.0), dtype(1.0)
    ln2, log2e = dtype(0.6931471805599453), dtype(1.4426950408889634)

    def sigmoid(a):
        return one / (one + exp(-a))

    def logaddexp(a, b):
        # numpy's npy_logaddexp (mathlib_more.logaddexp_f64), in ``dtype`` throughout.
        if a == b:
            return a + ln2
        difference = a - b
        if difference > zero:
            return a + log1p(exp(-difference))
        if difference <= zero:
            return b + log1p(exp(difference))
        return difference

    def logaddexp2(a, b):
        if a == b:
            return a + one
        difference = a - b
        if difference > zero:
            return a + log2e * log1p(exp2(-difference))
        if difference <= zero:
            return b + log2e * log1p(exp2(difference))
        return difference

    return dict(sigmoid=sigmoid, logaddexp=logaddexp, logaddexp2=logaddexp2)


FLOAT_FUNCTIONS = {**_float_functions(np.float32, "f32", lambda name: name + "f"),
                   **_float_functions(np.float64, "f64", lambda name: name)}
globals().update(FLOAT_FUNCTIONS)


# -- complex values: the CPU library's code (numerics.py), on math's and cmath's functions --------
# (libdevice's at the parts' precision: math.exp of a float32 is expf; numba-cuda's cmath
# functions are numba's own, on them).  Only |z| is the GPU's own: hypot, which neither
# overflows nor underflows where the parts do not, with C's infinities and NaN.
# Under the simulator they run as Python on numpy's functions, as on the CPU (math's raise at
# the special values where libdevice's give inf or NaN).
SCALAR_FUNCTIONS = (dict(isfinite=np.isfinite, exp=np.exp, exp_complex=np.exp, sqrt_complex=np.sqrt, sin=np.sin,
                         cos=np.cos, log_complex=np.log, atan2=np.arctan2, expm1=np.expm1) if simulated() else
                    dict(isfinite=math.isfinite, exp=math.exp, exp_complex=cmath.exp, sqrt_complex=cmath.sqrt,
                         sin=math.sin, cos=math.cos, log_complex=cmath.log, atan2=math.atan2, expm1=math.expm1))


def _complex_helpers(real, make, suffix: str) -> dict:
    f = SCALAR_FUNCTIONS
    exp, sqrt = numerics._complex_functions(real, make, jit=_device, isfinite=f["isfinite"], exp_real=f["exp"],
                                            exp_complex=f["exp_complex"], sqrt_complex=f["sqrt_complex"],
                                            sin=f["sin"], cos=f["cos"])
    log, log10, expm1 = numerics._complex_logarithms(real, make, jit=_device, isfinite=f["isfinite"],
                                                     log_complex=f["log_complex"], half_log1p_norm=half_log1p_norm,
                                                     atan2=f["atan2"], sin=f["sin"], cos=f["cos"], exp_real=f["exp"],
                                                     expm1_real=f["expm1"])
    divide, reciprocal, power = numerics._complex_arithmetic(real, make, exp, log, jit=_device)

    def absolute(z):
        return real(math.hypot(z.real, z.imag))
    functions = dict(abs=_device(absolute), exp=exp, sqrt=sqrt, log=log, log10=log10, expm1=expm1, divide=divide,
                     reciprocal=reciprocal, power=power)
    return {f"complex_{name}_{suffix}": function for name, function in functions.items()}


def _exact_products():
    """fma, add and multiply, each rounded once and never contracted with another: libdevice's
    ``fma_rn``, ``dadd_rn`` and ``dmul_rn`` (ptxas fuses no ``.rn`` add or multiply into an
    FMA, which would count a product's tail twice below).  Under the simulator Python's float
    add and multiply, and an fma rounded once through exact rationals."""
    if simulated():
        from fractions import Fraction
        return (lambda a, b, c: float(Fraction(a) * Fraction(b) + Fraction(c)), lambda a, b: a + b,
                lambda a, b: a * b)
    from numba.cuda import libdevice
    return libdevice.fma_rn, libdevice.dadd_rn, libdevice.dmul_rn


def _half_log1p_norm():
    fma, add, mul = _exact_products()

    @_device
    def two_sum(a, b):
        # a + b = s + e exactly (Knuth's two-sum)
        s = add(a, b)
        back = add(s, -a)
        return s, add(add(a, -add(s, -back)), add(b, -back))

    @_device
    def half_log1p_norm(x, y, wide):
        # log(x^2 + y^2) / 2 for finite x >= y >= 0 with 0.5 <= x < 2, in float64 (numerics'
        # _half_log1p_norm).  complex64's parts' products are exact in float64, as is everything
        # at x >= 1, where nothing cancels.  Else x^2 + y^2 - 1 is five exact pieces -- each
        # product's head and tail (fma), and xx - 1 as a fast two-sum (|-1| >= xx) -- added by
        # two-sums whose errors are added last, so that what cancels near |z| = 1 is exact and
        # the sum is within an ulp (glibc's __x2y2m1 sorts them instead).
        if not wide or x >= 1.0:
            return 0.5 * math.log1p((x - 1.0) * (x + 1.0) + y * y)
        xx = mul(x, x)
        yy = mul(y, y)
        head = add(xx, -1.0)
        total, first = two_sum(head, yy)
        total, second = two_sum(total, add(xx, -add(head, 1.0)))
        total, third = two_sum(total, fma(x, x, -xx))
        total, fourth = two_sum(total, fma(y, y, -yy))
        return 0.5 * math.log1p(add(total, add(add(first, second), add(third, fourth))))
    return half_log1p_norm


half_log1p_norm = _half_log1p_norm()


COMPLEX_FUNCTIONS = {**_complex_helpers(np.float32, np.complex64, "c64"),
                     **_complex_helpers(np.float64, np.complex128, "c128"),
                     "complex_isnan": _device(lambda z: cmath.isnan(z)),
                     "complex_isinf": _device(lambda z: cmath.isinf(z)),
                     "complex_isfinite": _device(lambda z: cmath.isfinite(z))}
globals().update(COMPLEX_FUNCTIONS)

__all__ = ["floordiv_int", "floordiv_uint", "mod_int", "fmod_int", "power_int", "round_float16", "arg_prefer", "shfl_xor",
           *sorted(FLOAT_FUNCTIONS), *sorted(COMPLEX_FUNCTIONS)]
