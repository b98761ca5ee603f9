"""Inputs that must work as numpy does, and the nets that keep library errors from users."""

import subprocess
import sys
import warnings

import numpy as np
import pytest

import flowjit
from flowjit.errors import ArgumentError, InternalError
from flowjit.frontend import numpy_api, unsupported
from helpers import ForeignGpuArray

THIS_FILE = __file__


def line_of(marker: str) -> int:
    for number, line in enumerate(open(THIS_FILE), start=1):
        if line.rstrip().endswith(f"# {marker}"):
            return number
    raise AssertionError(marker)


class Tagged(np.ndarray):
    """A subclass that keeps ndarray's semantics (it only adds an attribute)."""

    def __array_finalize__(self, obj):
        self.tag = getattr(obj, "tag", None)


def both(function):
    return [flowjit.jit(function), flowjit.jit(function, fuse=False)]


BASE = np.arange(12.0).reshape(3, 4)


@pytest.mark.parametrize("name, function, arguments", [
    ("fortran order", lambda x: x * 2 + 1, (np.asfortranarray(BASE),)),
    ("strided view", lambda x: x * 2 + 1, (BASE[:, ::2],)),
    ("reversed view", lambda x: x - x.sum(), (BASE[::-1],)),
    ("0-d array", lambda x: x * 2 + 1, (np.array(3.5),)),
    ("python scalars", lambda x, a, b: x * a + b, (BASE, 2, 0.5)),
    ("tuple of arrays", lambda p: p[0] @ p[1].T, ((BASE, BASE + 1),)),
    ("list of numbers", lambda x, w: x * w[0] + w[1], (BASE, [2.0, 3.0])),
    ("plain subclass", lambda x: x * 2 + 1, (BASE.view(Tagged),)),
    ("divmod", lambda x, y: divmod(x, y), (np.arange(-6, 6), np.array(4))),
    ("rdivmod", lambda x: divmod(7, x), (np.arange(1, 5),)),
    ("len and iteration", lambda x: sum(row * len(x) for row in x), (BASE,)),
])
def test_inputs_that_work_as_numpy_does(name, function, arguments):
    expected = function(*arguments)
    for jitted in both(function):
        result = jitted(*arguments)
        for got, want in zip(*(r if isinstance(r, tuple) else (r,) for r in (result, expected))):
            assert type(got) is type(np.asarray(want)) or np.ndim(want) == 0
            np.testing.assert_array_equal(got, want)
            assert np.asarray(got).dtype == np.asarray(want).dtype


def alias_then_add(x):
    y = x * 1.0
    z = y                  # z and y are one array: numpy's += changes both
    z += 1
    return y, z


def add_f64_into_f32(x):
    y = x.astype(np.float32)
    y += np.full(x.shape, 0.25)          # the result keeps y's float32 (cast by same_kind)
    y -= 1
    return y


def add_into_copy(x):
    y = x.copy()
    y **= 2
    z = x.astype(x.dtype)
    z *= 0.5
    return x, y, z


def accumulate_rows(x):
    total = x[0] * 0
    for row in x:
        total += row
    total @= np.eye(x.shape[1])
    return total


def add_into_zeros_like(x):
    total = np.zeros_like(x)            # a new array, though traced as a broadcast scalar
    for k in range(3):
        total += x * k
    ones = np.ones_like(x, dtype=np.int32)
    ones *= 3
    filled = np.full_like(x, 2.0)
    filled -= x
    return total, ones, filled


def count_into_numpy_zeros(x):
    count = np.zeros(x.shape, dtype=np.int32)       # a numpy array the function made
    for k in range(3):
        count += x > k                               # numpy writes into it; the name is rebound
    scaled = np.ones(x.shape)
    scaled *= x
    return count, scaled


def out_into_traced(x):
    y = x * 2
    np.multiply(y, 3, out=y)
    np.add(y, 1, out=(y,))
    z = y                                            # one array: both names see the next write
    np.subtract(z, 0.5, out=z)
    return y, z


@pytest.mark.parametrize("function", [alias_then_add, add_f64_into_f32, add_into_copy, accumulate_rows,
                                      add_into_zeros_like, count_into_numpy_zeros, out_into_traced])
def test_in_place_operators_follow_numpy(function):
    x = np.arange(6.0).reshape(3, 2)
    expected = function(x.copy())
    for jitted in both(function):
        result = jitted(x)
        for got, want in zip(*(r if isinstance(r, tuple) else (r,) for r in (result, expected))):
            np.testing.assert_array_equal(got, want)
            assert got.dtype == want.dtype
    np.testing.assert_array_equal(x, np.arange(6.0).reshape(3, 2))      # the argument is never written


def test_a_traced_value_used_after_its_function_returned():
    kept = []
    flowjit.jit(lambda x: kept.append(x) or x + 1)(np.ones(2))
    for use in (lambda t: t + 1, lambda t: np.exp(t), lambda t: t.sum(), lambda t: t[0]):  # E-escaped
        with pytest.raises(flowjit.TraceError) as info:
            use(kept[0])
        assert info.value.message.startswith("a traced value escaped the jitted function that traced it")
        assert info.value.location.line == line_of("E-escaped")


def test_memmap_is_traced_as_its_data(tmp_path):
    array = np.memmap(tmp_path / "data", dtype=np.float32, mode="w+", shape=(5,))
    array[:] = np.arange(5)
    np.testing.assert_array_equal(flowjit.jit(lambda x: x * 2)(array), np.arange(5, dtype=np.float32) * 2)


def test_unsupported_attributes_are_attribute_errors():
    seen = {}

    def f(x):
        seen["hasattr"] = hasattr(x, "tobytes")
        seen["getattr"] = getattr(x, "no_such_thing", "default")
        return x
    flowjit.jit(f)(np.ones(2))
    assert seen == {"hasattr": False, "getattr": "default"}


def test_supported_functions_lists_what_traces_and_nothing_the_hints_cover():
    names = flowjit.supported_functions()
    assert {"np.sum", "np.add", "np.where", "np.matmul", "ndarray.sum", "ndarray.reshape",
            "np.add.reduce"} <= set(names)
    assert names == sorted(names) and len(names) > 100
    for name in names:
        if name.startswith("np.") and name.count(".") == 1:
            assert hasattr(np, name[3:]), name
        if name.startswith("ndarray."):
            assert hasattr(np.ndarray, name[8:]), name
    # A hint is for something flowjit does not trace: none may name a supported function or method
    # (np.copy has one, pointing to the supported method x.copy()).
    functions = {name[3:] for name in names if name.startswith("np.")}
    methods = {name[8:] for name in names if name.startswith("ndarray.")}
    assert not set(unsupported.HINTS) & functions
    assert set(unsupported.HINTS) & methods == {"copy"}


def test_a_bug_inside_flowjit_while_tracing_is_reported_at_the_users_line(monkeypatch):
    monkeypatch.setattr(numpy_api, "normalize_axis", {}.__getitem__)   # flowjit's own code now fails

    def f(x):
        return x.sum(axis=(0, 1))  # E-internal
    with pytest.raises(InternalError) as info:
        flowjit.jit(f)(np.ones((2, 2)))
    error = info.value
    assert isinstance(error, TypeError) and type(error).__name__ == "InternalTypeError"
    assert (error.location.file, error.location.line) == (THIS_FILE, line_of("E-internal"))
    assert error.message == ("tracing f failed inside flowjit (TypeError: dict.__getitem__() takes exactly one "
                             "argument (2 given)); this is a bug in flowjit, please report it with this message")


def test_user_code_errors_are_the_users_own():
    def f(x, s):
        return x + (s + 1)     # a str plus an int: Python's own error in the user's code
    with pytest.raises(TypeError) as info:
        flowjit.jit(f)(np.ones(2), "a")
    assert not isinstance(info.value, flowjit.FlowjitError)


def test_toolchain_errors_while_compiling_are_wrapped_and_not_kept(monkeypatch):
    from numba.core.errors import TypingError
    from flowjit.compiler.codegen import cache

    def broken(directory):
        raise TypingError("Failed in nopython mode pipeline (step: nopython frontend)\nUnknown attribute 'x'")
    with monkeypatch.context() as patch:
        patch.setattr(cache, "kernel_cache", broken)
        jitted = flowjit.jit(lambda x: x * 3.0 - 1.0)
        with pytest.raises(InternalError) as info:
            jitted(np.ones(3))  # E-compile
    assert type(info.value) is InternalError
    assert str(info.value) == (f"{THIS_FILE}:{line_of('E-compile')}: compiling lambda failed inside flowjit "
                               f"(numba TypingError: Failed in nopython mode pipeline (step: nopython frontend): "
                               f"Unknown attribute 'x'); this is a bug in flowjit, please report it with this "
                               f"message")
    np.testing.assert_array_equal(jitted(np.ones(3)), np.full(3, 2.0))   # nothing broken was cached


def test_file_errors_while_compiling_keep_their_builtin_class(monkeypatch):
    from flowjit.compiler.codegen import cache

    def broken(directory):
        raise NotADirectoryError(20, "Not a directory", "/tmp/file/sub")
    monkeypatch.setattr(cache, "kernel_cache", broken)
    with pytest.raises(InternalError) as info:
        flowjit.jit(lambda x: x + 1.5)(np.ones(3))  # E-oserror
    assert isinstance(info.value, NotADirectoryError)
    assert str(info.value) == (f"{THIS_FILE}:{line_of('E-oserror')}: compiling lambda failed on a file operation "
                               f"(NotADirectoryError: [Errno 20] Not a directory: '/tmp/file/sub'); check the "
                               f"path and its permissions (FLOWJIT_CACHE_DIR for the kernel cache)")


def test_numpy_errors_raised_by_kernels_pass_unchanged():
    with pytest.raises(ValueError) as info:
        flowjit.jit(lambda x, n: x ** n)(np.arange(4), np.array([-1, 1, 1, 1]))
    assert not isinstance(info.value, flowjit.FlowjitError)


def test_soft_placement_fallback_is_reported_once_at_run_time():
    def f(x):
        with flowjit.device("/device:cpu:1"):
            y = np.exp(x)
        return y + 1
    jitted = flowjit.jit(f, soft_placement=True, devices=["/device:cpu:0"])
    with pytest.warns(flowjit.frontend.jit.PlacementFallbackWarning) as caught:
        result = jitted(np.zeros(3))  # E-soft
    np.testing.assert_array_equal(result, np.full(3, 2.0))
    assert len(caught) == 1
    message = str(caught[0].message)
    assert message.startswith("flowjit: f: soft placement: %exp (exp) requests /device:cpu:1")
    assert (caught[0].filename, caught[0].lineno) == (THIS_FILE, line_of("E-soft"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jitted(np.zeros(3))                      # once: not again for the compiled signature


def test_static_argnames_that_are_not_parameters():
    with pytest.raises(ArgumentError) as info:
        flowjit.jit(lambda x: x, static_argnames="m")  # E-static
    assert str(info.value) == f"{THIS_FILE}:{line_of('E-static')}: static_argnames 'm' is not a parameter of lambda(x)"


@pytest.mark.parametrize("flag, message", [
    (["--arg", "y=f32[4]"], "flowjit dump: error: --arg y=f32[4]: f has no parameter 'y' (its parameters: x, n)\n"),
    (["--arg", "f32[4]", "--static", "m=3"],
     "flowjit dump: error: --static m=3: f has no parameter 'm' (its parameters: x, n)\n"),
])
def test_cli_names_a_wrong_argument_name(tmp_path, flag, message):
    program = tmp_path / "program.py"
    program.write_text("def f(x, n=2):\n    return x * n\n")
    done = subprocess.run([sys.executable, "-m", "flowjit.cli", "dump", f"{program}:f", *flag],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stderr == message


@pytest.mark.parametrize("function, arity", [
    (np.matmul, 2), (np.dot, 2), (np.add, 2), (np.maximum, 2), (np.exp, 1), (np.tanh, 1),
    (np.sum, 1), (np.mean, 1), (np.transpose, 1)])
def test_numpy_functions_and_ufuncs_themselves_can_be_jitted(function, arity):
    """A ufunc's or numpy function's signature lists placeholder defaults (dtype=None,
    signature=None, keepdims=<no value>) that it refuses when passed: only what the caller gave
    is passed on, while the defaults still key the trace."""
    a = np.arange(12.0).reshape(3, 4) / 7
    args = (a, a.T if function in (np.matmul, np.dot) else a)[:arity]
    np.testing.assert_allclose(flowjit.jit(function)(*args), function(*args), rtol=1e-12)


def test_defaults_the_caller_leaves_out_keep_their_meaning():
    def scaled(x, y=np.full(3, 2.0), *, scale=3.0):
        return x * y * scale

    x = np.arange(6.0).reshape(2, 3)
    jitted = flowjit.jit(scaled)
    np.testing.assert_array_equal(jitted(x), scaled(x))
    np.testing.assert_array_equal(jitted(x, scale=0.5), scaled(x, scale=0.5))
    np.testing.assert_array_equal(jitted(x, np.ones(3)), scaled(x, np.ones(3)))
    np.testing.assert_array_equal(flowjit.jit(np.sum, static_argnames="axis")(x, axis=1), x.sum(axis=1))



ZEROS = [0.0, -0.0, np.float32(-0.0), np.float32(0.0), complex(0.0, 0.0), complex(-0.0, 0.0), complex(0.0, -0.0)]


@pytest.mark.parametrize("static", [False, True], ids=["scalar", "static_argnums"])
def test_constants_equal_in_python_but_not_in_numpy_trace_apart(static):
    """Python scalars and static arguments are constants of the trace, and Python calls 0.0
    and -0.0 equal: x / -0.0 must not reuse the trace of x / 0.0 (nor complex zeros of another
    sign, nor a tuple of them).  Every nan is one constant: one trace, not one a call."""
    x = np.array([1.0, -2.0, 0.5])
    divide = flowjit.jit(lambda x, s: x / s, static_argnums=(1,) if static else ())
    pair = flowjit.jit(lambda x, s: x / s[0] - x / s[1], static_argnums=(1,) if static else ())
    cases = [(divide, s) for s in ZEROS] + [(pair, (0.0, -0.0)), (pair, (-0.0, 0.0))]
    with np.errstate(all="ignore"):
        for jitted, s in cases:
            expected = jitted.fun(x, s)
            actual = jitted(x, s)
            np.testing.assert_array_equal(actual, expected)
            assert np.array_equal(np.signbit(np.real(actual)), np.signbit(np.real(expected))), (s, actual)
        traces = len(divide._traces)
        for _ in range(3):
            divide(x, float("nan"))            # (a new nan object each time)
    assert len(divide._traces) == traces + 1


class _JaxLikeGpuArray:
    """A jax array on a GPU: DLPack on CUDA, and a host copy through ``__array__``."""

    def __init__(self, values):
        self.values = values

    def __dlpack_device__(self):
        return 2, 0                                        # kDLCUDA, GPU 0

    def __array__(self, dtype=None, copy=None):
        return np.array(self.values, dtype=dtype)


def test_gpu_arrays_without_cupy_are_copied_through_numpy_or_named(monkeypatch):
    """Without CuPy (what flowjit reads GPU memory with), a GPU array whose library gives numpy
    a host copy is taken as that copy; one that does not is refused naming the extra, at the
    user's line, not with CuPy's ModuleNotFoundError."""
    monkeypatch.setitem(sys.modules, "cupy", None)
    x = np.linspace(-1, 1, 6, dtype=np.float32)
    f = flowjit.jit(lambda x: np.tanh(x) * 2.0)
    np.testing.assert_allclose(f(_JaxLikeGpuArray(x)), np.tanh(x) * 2.0, rtol=1e-6)
    with pytest.raises(flowjit.UnsupportedInputError, match=r"test_inputs.py:\d+: a .*ForeignGpuArray lives on a "
                                                            r"GPU, .* CuPy, which is not installed: pip install "
                                                            r"'flowjit\[cuda\]'"):
        f(ForeignGpuArray(x.shape, x.dtype.str))
    g = flowjit.Graph("without_cupy")
    with g.as_default():
        p = flowjit.placeholder((6,), np.float32, name="p")
        y = np.tanh(p) * 2.0
    session = flowjit.Session(g)
    np.testing.assert_allclose(session.run(y, {p: _JaxLikeGpuArray(x)}), np.tanh(x) * 2.0, rtol=1e-6)
    with pytest.raises(flowjit.SessionError, match=r"test_inputs.py:\d+: the feed for placeholder 'p' \(f32\[6\]\): "
                                                   r"a .*ForeignGpuArray lives on a GPU"):
        session.run(y, {p: ForeignGpuArray(x.shape, x.dtype.str)})
