"""A catalogue of bad inputs: each raises one flowjit error, of a class that is also the
matching builtin's (TypeError, AttributeError...), whose message is exact and names the
user's own file and line: the call for a bad argument, the offending line for a bad op."""

import numpy as np
import pytest

import flowjit
from flowjit.errors import (ArgumentError, FlowjitError, OpTypeError, ShapeError, TraceError, TracerConversionError,
                            UnsupportedAttributeError, UnsupportedDTypeError, UnsupportedFunctionError,
                            UnsupportedInputError, UnsupportedOperatorError)

THIS_FILE = __file__
SEE = "(flowjit.supported_functions() lists what is supported)"


def line_of(marker: str) -> int:
    """The line of this file that ends with ``# <marker>``."""
    for number, line in enumerate(open(THIS_FILE), start=1):
        if line.rstrip().endswith(f"# {marker}"):
            return number
    raise AssertionError(marker)


class Overriding(np.ndarray):
    """An ndarray subclass with semantics of its own: flowjit must not compute it as a plain array."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return NotImplemented


with pytest.warns(PendingDeprecationWarning):
    MATRIX = np.matrix([[1.0, 2.0], [3.0, 4.0]])
BIG_ENDIAN = np.arange(4.0).astype(">f8")
F64 = np.arange(6.0).reshape(2, 3)
I64 = np.arange(6).reshape(2, 3)
VALUE = ("needs its value, which is not known while tracing: inside a jitted function arrays stay abstract. "
         "Keep it an array (x[i] for one element, x.astype(dtype) for another dtype), or return it and call")

ESCAPED = []         # a traced value a function stored instead of returning
flowjit.jit(lambda x: ESCAPED.append(x) or x * 2)(np.ones(2))


def add_into_argument(x):
    x += 1  # L-iarg
    return x


def add_float_into_int(x):
    y = x * 2
    y += 1.5  # L-icast
    return y


def add_bigger_into(x):
    y = x * 2
    y += np.ones((3, 2))  # L-ishape
    return y


def add_through_view(x):
    y = x * 2
    row = y[0]
    row += 1  # L-iview
    return y


def add_under_view(x):
    y = x * 2
    column = y.T
    y *= 3  # L-iviewed
    return column


def add_into_shared_numpy_array(x):
    total = np.zeros(x.shape)
    seen = total            # numpy's += would change both names; flowjit can rebind only one
    total += x  # L-inumpy
    return seen


GLOBAL_TOTAL = np.zeros(3)


def add_into_global_numpy_array(x):
    global GLOBAL_TOTAL
    GLOBAL_TOTAL += x  # L-iglobal
    return GLOBAL_TOTAL


def add_out_into_numpy_array(x):
    total = np.zeros(x.shape)
    np.add(total, x, out=total)  # L-iout
    return total


# (name, function, arguments, error class, builtin it also is, message, where: "call" or a line marker)
CATALOGUE = [
    # -- arguments: reported at the call -------------------------------------------------------------
    ("big-endian f8", lambda x: x + 1, (BIG_ENDIAN,), UnsupportedDTypeError, TypeError,
     "argument 'x' has dtype >f8 (big-endian, not this machine's byte order): flowjit computes in native "
     "byte order; convert it first with .astype('<f8')", "call"),
    ("big-endian i2", lambda x: x + 1, (np.arange(3, dtype=">i2"),), UnsupportedDTypeError, TypeError,
     "argument 'x' has dtype >i2 (big-endian, not this machine's byte order): flowjit computes in native "
     "byte order; convert it first with .astype('<i2')", "call"),
    ("masked array", lambda x: x + 1, (np.ma.MaskedArray(np.arange(3.0), mask=[0, 1, 0]),),
     UnsupportedInputError, TypeError,
     "argument 'x' is a np.ma.MaskedArray: flowjit does not trace masks; pass np.ma.filled(m, fill_value) "
     "(or m.data to ignore the mask)", "call"),
    ("matrix", lambda x: x * x, (MATRIX,), UnsupportedInputError, TypeError,
     "argument 'x' is a np.matrix, whose * and ** are matrix products: flowjit follows ndarray semantics; "
     "pass np.asarray(m) and write @ for a matrix product", "call"),
    ("subclass with __array_ufunc__", lambda x: x + 1, (np.ones(2).view(Overriding),),
     UnsupportedInputError, TypeError,
     f"argument 'x' is a {__name__}.Overriding, an ndarray subclass that overrides __array_ufunc__: flowjit "
     f"computes with plain ndarray semantics; pass np.asarray(value) if those are the semantics you want",
     "call"),
    ("matrix in a dict", lambda p: p["w"] + 1, ({"w": MATRIX},), UnsupportedInputError, TypeError,
     "argument 'p.w' is a np.matrix, whose * and ** are matrix products: flowjit follows ndarray semantics; "
     "pass np.asarray(m) and write @ for a matrix product", "call"),
    ("complex256", lambda x: x, (np.ones(2, np.clongdouble),), UnsupportedDTypeError, TypeError,
     "argument 'x' has dtype complex256: this dtype is not supported (supported: bool, int8, int16, "
     "int32, int64, uint8, uint16, uint32, uint64, float16, float32, float64, complex64, complex128)", "call"),
    ("str array", lambda x: x, (np.array(["a"]),), UnsupportedDTypeError, TypeError,
     "argument 'x' has dtype <U1: only boolean, integer, floating-point and complex arrays can be traced "
     "(supported: bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, float32, float64, "
     "complex64, complex128)", "call"),
    ("datetime", lambda x: x, (np.array(["2020-01-01"], "datetime64[D]"),), UnsupportedDTypeError, TypeError,
     "argument 'x' has dtype datetime64[D]: this dtype is not supported (supported: bool, int8, int16, int32, "
     "int64, uint8, uint16, uint32, uint64, float16, float32, float64, complex64, complex128)", "call"),
    ("complex max", lambda z: z.max(), (np.ones(2, np.complex128),), OpTypeError, TypeError,  # L-cmax
     "np.max(c128[2]): op 'max' does not take complex values yet (got c128[2])", "L-cmax"),
    ("unknown keyword", lambda x, n=1: x, (F64,), ArgumentError, TypeError,
     "lambda(x, n=1): no parameter named 'm' (the parameters are: x, n)", "call"),
    ("too many arguments", lambda x: x, (F64, F64, F64), ArgumentError, TypeError,
     "lambda(x): too many positional arguments", "call"),
    # -- operators -------------------------------------------------------------------------------------
    ("x << 1", lambda x: x << 1, (I64,), UnsupportedOperatorError, TypeError,  # L-lshift
     "the bit shift << (np.left_shift) of i64[2,3] and int is not supported by flowjit; for non-negative "
     "shifts that stay in range, use x * 2**n", "L-lshift"),
    ("x >> y", lambda x: x >> x, (I64,), UnsupportedOperatorError, TypeError,  # L-rshift
     "the bit shift >> (np.right_shift) of i64[2,3] and i64[2,3] is not supported by flowjit; for "
     "non-negative shifts, use x // 2**n", "L-rshift"),
    ("1 << x", lambda x: 1 << x, (I64,), UnsupportedOperatorError, TypeError,  # L-rlshift
     "the bit shift << (np.left_shift) of int and i64[2,3] is not supported by flowjit; for non-negative "
     "shifts that stay in range, use x * 2**n", "L-rlshift"),
    ("len of 0-d", lambda x: len(x.sum()), (F64,), UnsupportedOperatorError, TypeError,  # L-len
     "len() of a 0-d traced array (f64[]): it has no length, as for numpy; use x.size or x.shape", "L-len"),
    ("round()", lambda x: round(x), (F64,), UnsupportedOperatorError, TypeError,  # L-round
     "round() of a traced array (f64[2,3]): numpy arrays do not support round() either; use np.round(x)",
     "L-round"),
    ("x += 1 on an argument", add_into_argument, (F64,), UnsupportedOperatorError, TypeError,
     "x += y on f64[2,3]: numpy would write the result into the caller's array (argument 'x'); flowjit never "
     "writes into arrays: write x = x + y", "L-iarg"),
    ("int += float", add_float_into_int, (I64,), OpTypeError, TypeError,
     "x += y on i64[2,3]: the result's dtype float64 cannot be cast to x's dtype int64 by numpy's same_kind "
     "rule for in-place operators; write x = x + y for a float64 result", "L-icast"),
    ("+= of a bigger shape", add_bigger_into, (np.ones(2),), ShapeError, ValueError,
     "x += y on f64[2]: the result f64[3,2] does not fit into x (numpy writes the result into x, so it must "
     "keep x's shape); write x = x + y", "L-ishape"),
    ("+= through a view", add_through_view, (F64,), UnsupportedOperatorError, TypeError,
     "x += y on f64[3]: numpy would write the result through a view (reshape) into the array it views; "
     "flowjit never writes into arrays: write x = x + y", "L-iview"),
    ("*= under a view", add_under_view, (F64,), UnsupportedOperatorError, TypeError,
     "x *= y on f64[2,3]: numpy would write the result into an array that views of it (slices, reshapes, "
     "transposes) would see too; flowjit never writes into arrays: write x = x * y", "L-iviewed"),
    ("+= into a numpy array another name sees", add_into_shared_numpy_array, (F64,), UnsupportedOperatorError,
     TypeError, "x += y on f64[2,3] (a numpy array): numpy would write the result into that numpy array, which "
     "other names, containers or views also see; flowjit never writes into arrays: write x = x + y", "L-inumpy"),
    ("+= into a global numpy array", add_into_global_numpy_array, (np.ones(3),), UnsupportedOperatorError,
     TypeError, "x += y on f64[3] (a numpy array): numpy would write the result into that numpy array, which "
     "other names, containers or views also see; flowjit never writes into arrays: write x = x + y", "L-iglobal"),
    ("out= into a numpy array", add_out_into_numpy_array, (F64,), UnsupportedOperatorError, TypeError,
     "np.add(..., out=x) on f64[2,3]: numpy would write the result into that numpy array, and names bound to "
     "it would not see a traced result; flowjit never writes into arrays: write x = np.add(...)", "L-iout"),
    ("escaped traced value, left", lambda y: ESCAPED[0] + y, (np.ones(2),), TraceError, Exception,  # L-esc1
     "a traced value escaped the jitted function that traced it (stored in a global, a list or an object) and "
     "was used after that function returned or inside another one: return it from that function instead of "
     "storing it", "L-esc1"),
    ("escaped traced value, right", lambda y: y * ESCAPED[0], (np.ones(2),), TraceError, Exception,  # L-esc2
     "a traced value escaped the jitted function that traced it (stored in a global, a list or an object) and "
     "was used after that function returned or inside another one: return it from that function instead of "
     "storing it", "L-esc2"),
    # -- attributes and methods ------------------------------------------------------------------------
    ("unknown attribute", lambda x: x.foo, (F64,), UnsupportedAttributeError, AttributeError,  # L-foo
     "numpy arrays have no attribute 'foo' (the value is a traced f64[2,3] array)", "L-foo"),
    ("x.sort", lambda x: x.sort(), (F64,), UnsupportedAttributeError, AttributeError,  # L-sort
     "x.sort() sorts in place, and traced arrays are immutable: use x = np.sort(x, axis)", "L-sort"),
    ("x.tobytes", lambda x: x.tobytes(), (F64,), UnsupportedAttributeError, AttributeError,  # L-tobytes
     f"ndarray.tobytes is not supported by flowjit; traced arrays have no memory while tracing; return the array "
     f"and convert the result {SEE}", "L-tobytes"),
    ("x.diagonal", lambda x: x.diagonal(), (F64,), UnsupportedAttributeError, AttributeError,  # L-diagonal
     f"ndarray.diagonal is not supported by flowjit {SEE}", "L-diagonal"),
    ("x.item", lambda x: x.item(), (F64,), TracerConversionError, TypeError,  # L-item
     f".item() of a traced value (f64[2,3]) {VALUE} .item() on the result.", "L-item"),
    ("x.tolist", lambda x: x.tolist(), (F64,), TracerConversionError, TypeError,  # L-tolist
     f".tolist() of a traced value (f64[2,3]) {VALUE} .tolist() on the result.", "L-tolist"),
    ("int(x)", lambda x: int(x[0, 0]), (F64,), TracerConversionError, TypeError,  # L-int
     f"int() of a traced value (f64[]) {VALUE} int() on the result.", "L-int"),
    ("range(x)", lambda x: range(x[0, 0]), (I64,), TracerConversionError, TypeError,  # L-range
     "use of a traced value (i64[]) as a Python integer (an index into a list, range(), a shape) needs its "
     "value, which is not known while tracing. Index arrays with Python ints and slices, or mark the argument "
     "static with static_argnums / static_argnames.", "L-range"),
    # -- numpy functions and ufuncs --------------------------------------------------------------------
    ("np.ediff1d", lambda x: np.ediff1d(x), (F64,), UnsupportedFunctionError, NotImplementedError,  # L-ediff1d
     f"np.ediff1d is not supported by flowjit; use slicing instead: x.ravel()[1:] - x.ravel()[:-1] {SEE}",
     "L-ediff1d"),
    ("np.vdot", lambda x: np.vdot(x, x), (F64,), UnsupportedFunctionError, NotImplementedError,  # L-vdot
     f"np.vdot is not supported by flowjit; use (np.conj(a).ravel() * b.ravel()).sum() {SEE}", "L-vdot"),
    ("np.linalg.svd", lambda x: np.linalg.svd(x), (F64,), UnsupportedFunctionError,  # L-svd
     NotImplementedError, f"np.linalg.svd is not supported by flowjit {SEE}", "L-svd"),
    ("np.fft.hfft", lambda x: np.fft.hfft(x), (F64,), UnsupportedFunctionError,  # L-hfft
     NotImplementedError, f"np.fft.hfft is not supported by flowjit {SEE}", "L-hfft"),
    ("np.histogram", lambda x: np.histogram(x), (F64,), UnsupportedFunctionError,  # L-histogram
     NotImplementedError, "np.histogram without a range known while tracing: numpy takes it from the data's min "
     "and max (and raises on NaN); pass range=(low, high)", "L-histogram"),
    ("np.left_shift", lambda x: np.left_shift(x, 1), (I64,), UnsupportedFunctionError,  # L-np-shift
     NotImplementedError, f"np.left_shift is not supported by flowjit; for non-negative shifts that stay in "
     f"range, use x * 2**n {SEE}", "L-np-shift"),
    ("np.subtract.accumulate", lambda x: np.subtract.accumulate(x), (F64,),  # L-accumulate
     UnsupportedFunctionError, NotImplementedError, f"np.subtract.accumulate is not supported by flowjit {SEE}",
     "L-accumulate"),
    # -- operands that are not arrays or numbers --------------------------------------------------------
    ("x + str", lambda x: x + "a", (F64,), UnsupportedInputError, TypeError,  # L-str
     "np.add: operand 2 is 'a' (of type str), not an array or a number: numpy ops take arrays, numbers and "
     "lists of numbers", "L-str"),
    ("str argument in an op", lambda x, s: np.maximum(x, s), (F64, "s"), UnsupportedInputError,  # L-str-arg
     TypeError, "np.maximum: operand 2 is 's' (of type str), not an array or a number: numpy ops take arrays, "
     "numbers and lists of numbers", "L-str-arg"),
    ("None argument in an op", lambda x, y: x * y, (F64, None), UnsupportedInputError, TypeError,  # L-none
     "np.multiply: operand 2 is None (of type NoneType), not an array or a number: numpy ops take arrays, "
     "numbers and lists of numbers", "L-none"),
    ("np.where with None", lambda x: np.where(x > 0, x, None), (F64,), UnsupportedFunctionError,  # L-where
     NotImplementedError, "np.where(condition) with one argument has a data-dependent shape; use "
     "np.where(condition, x, y)", "L-where"),
    ("captured matrix", lambda x: x * MATRIX, (np.ones((2, 2)),), UnsupportedInputError, TypeError,  # L-cmat
     "np.multiply: operand 2 is a np.matrix, whose * and ** are matrix products: flowjit follows ndarray "
     "semantics; pass np.asarray(m) and write @ for a matrix product", "L-cmat"),
    ("captured big-endian", lambda x: x + BIG_ENDIAN, (np.ones(4),), UnsupportedDTypeError, TypeError,  # L-cbe
     "an operand has dtype >f8 (big-endian, not this machine's byte order): flowjit computes in native byte "
     "order; convert it first with .astype('<f8')", "L-cbe"),
    ("astype big-endian", lambda x: x.astype(">f4"), (F64,), UnsupportedDTypeError, TypeError,  # L-astype
     "astype target has dtype >f4 (big-endian, not this machine's byte order): flowjit computes in native "
     "byte order; convert it first with .astype('<f4')", "L-astype"),
    ("reshape(None)", lambda x: x.reshape(None), (F64,), OpTypeError, TypeError,  # L-reshape
     "reshape: shape None is not an integer or a sequence of integers", "L-reshape"),
    ("sum(axis='a')", lambda x: x.sum(axis="a"), (F64,), OpTypeError, TypeError,  # L-axis
     "np.sum: axis 'a' is not an integer or a sequence of integers", "L-axis"),
    ("transpose(axes=[0.5])", lambda x: x.transpose([0.5, 1]), (F64,), OpTypeError, TypeError,  # L-perm
     "transpose: axes [0.5, 1] is not an integer or a sequence of integers", "L-perm"),
    ("broadcast_to shape of str", lambda x: np.broadcast_to(x, "ab"), (F64,), OpTypeError,  # L-bshape
     TypeError, "np.broadcast_to: shape 'ab' is not an integer or a sequence of integers", "L-bshape"),
]


@pytest.mark.parametrize("name, function, arguments, error_class, builtin, message, where", CATALOGUE,
                         ids=[entry[0] for entry in CATALOGUE])
def test_bad_input(name, function, arguments, error_class, builtin, message, where):
    jitted = flowjit.jit(function)
    keywords = {"m": 2} if name == "unknown keyword" else {}
    with pytest.raises(FlowjitError) as info:
        jitted(*arguments, **keywords)  # CALL
    error = info.value
    assert type(error) is error_class and isinstance(error, builtin)
    assert error.message == message
    line = line_of("CALL" if where == "call" else where)
    assert (error.location.file, error.location.line) == (THIS_FILE, line)
    assert str(error) == f"{THIS_FILE}:{line}: {message}"


def test_catalogue_is_large():
    assert len(CATALOGUE) >= 30
