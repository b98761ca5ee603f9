"""Complex values (complex64, complex128): the ops that take them, against numpy on every path
(fused, unfused, the interpreter), with numpy's special values; reductions, matmul and data
movement of complex arrays; the IR text; random programs; and clear errors where flowjit does not
compute with them (orderings, the functions without a complex rule, variables, gradients).  The
GPU's complex kernels run in tests/cuda/test_complex_gpu.py."""

import numpy as np
import pytest

import flowjit
from flowjit.compiler.ir import parse, print_graph
from flowjit.compiler.ir.gradients import GradientError
from flowjit.errors import OpTypeError, UnsupportedDTypeError
from test_array_ops import PATHS, agree, line_of

RNG = np.random.default_rng(29)
PARTS = (0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -2.5)
# Every pair of special parts, then ordinary values.
SPECIAL = np.array([complex(re, im) for re in PARTS for im in PARTS])


def complex_values(dtype, count: int = 64, special: bool = True) -> np.ndarray:
    ordinary = RNG.normal(size=count) + 1j * RNG.normal(size=count)
    # A quarter near zero (where expm1 cancels) and a quarter near the unit circle (where
    # log's |z|^2 - 1 cancels): where a formula loses digits, every draw has values.
    quarter = count // 4
    ordinary[:quarter] *= 1e-3
    ordinary[quarter:2 * quarter] = (np.exp(1j * ordinary[quarter:2 * quarter].imag)
                                     * (1 + 1e-4 * ordinary[quarter:2 * quarter].real))
    values = np.concatenate([SPECIAL, ordinary]) if special else ordinary
    return values.astype(dtype)


def same_parts(got: np.ndarray, want: np.ndarray, rtol: float) -> None:
    """Part by part: equal (NaN equal NaN, infinities of one sign), or within rtol of the
    result's magnitude (each part of a product or a quotient rounds against the whole)."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    if want.dtype == np.bool_:
        np.testing.assert_array_equal(got, want)
        return
    scale = np.where(np.isfinite(want), np.abs(want), 0) + 1e-300
    for g, w in ((got.real, want.real), (got.imag, want.imag)) if want.dtype.kind == "c" else ((got, want),):
        equal = (g == w) | (np.isnan(g) & np.isnan(w))
        near = np.isfinite(g) & np.isfinite(w) & (np.abs(g - w) <= rtol * scale)
        assert np.all(equal | near), [(got[i], want[i]) for i in np.flatnonzero(~(equal | near))[:5]]


# Each spelling as users write it, and whether flowjit's result is numpy's exactly (the others
# are within a few ulp: a product's parts may fuse a multiply and an add into one FMA, as numpy's
# own vector loops do on CPUs with FMA, and flowjit's |z|, logarithms and expm1 round
# differently from the C library's).
ELEMENTWISE = {
    "z + w": (lambda z, w: z + w, True), "z - w": (lambda z, w: z - w, True),
    "z * w": (lambda z, w: z * w, False), "z / w": (lambda z, w: z / w, True),
    "-z": (lambda z, w: -z, True), "np.conj(z)": (lambda z, w: np.conj(z), True),
    "z.conjugate()": (lambda z, w: z.conjugate(), True), "np.reciprocal(z)": (lambda z, w: np.reciprocal(z), True),
    "1 / z": (lambda z, w: 1 / z, True), "z.real": (lambda z, w: z.real, True), "z.imag": (lambda z, w: z.imag, True),
    "np.real(z) + np.imag(w)": (lambda z, w: np.real(z) + np.imag(w), True),
    "np.abs(z)": (lambda z, w: np.abs(z), False), "np.square(z)": (lambda z, w: np.square(z), False),
    "z ** 2": (lambda z, w: z ** 2, False), "z ** 3": (lambda z, w: z ** 3, False),
    "z ** -2": (lambda z, w: z ** -2, False), "np.exp(z)": (lambda z, w: np.exp(z), True),
    "np.log(z)": (lambda z, w: np.log(z), False), "np.log10(z)": (lambda z, w: np.log10(z), False),
    "np.expm1(z)": (lambda z, w: np.expm1(z), False), "np.sqrt(z)": (lambda z, w: np.sqrt(z), False),
    "np.isnan(z)": (lambda z, w: np.isnan(z), True), "np.isinf(z)": (lambda z, w: np.isinf(z), True),
    "np.isfinite(z)": (lambda z, w: np.isfinite(z), True), "z == w": (lambda z, w: z == w, True),
    "z != w": (lambda z, w: z != w, True), "z * 2.5 + 1j": (lambda z, w: z * 2.5 + 1j, False),
    "np.where(w.real > 0, z, 0)": (lambda z, w: np.where(w.real > 0, z, 0), True),
    "z.astype(np.complex64)": (lambda z, w: z.astype(np.complex64), True),
}


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("spelling", list(ELEMENTWISE))
def test_elementwise_ops_give_numpys_values_with_its_special_values(spelling, dtype):
    function, exact = ELEMENTWISE[spelling]
    z = complex_values(dtype)
    w = np.roll(complex_values(dtype), 5)
    with np.errstate(all="ignore"):
        want = function(z, w)
    rtol = 0.0 if exact else (8 * np.finfo(np.float32 if dtype == np.complex64 else np.float64).eps)
    for path, options in PATHS.items():
        got = flowjit.jit(function, **options)(z, w)
        same_parts(np.asarray(got), np.asarray(want), rtol)


def near_unit_circle(dtype, count: int = 4096, nearest: int = 128) -> np.ndarray:
    """z within a few ulp of |z| = 1, where log|z| is log1p(x^2 + y^2 - 1)/2 of a tiny x^2 + y^2 - 1:
    the ``nearest`` of ``count`` draws (x^2 + y^2 - 1 far below an ulp of 1), some a few ulp
    off, a few with x = y just below sqrt(1/2) (there x^2 - 1 is not exact), in every quadrant."""
    from fractions import Fraction
    real = np.float32 if dtype == np.complex64 else np.float64
    rng = np.random.default_rng(3)
    x = rng.uniform(0.5, 1, count).astype(real)
    y = np.sqrt(1 - x.astype(np.float64) ** 2).astype(real)
    residual = [abs(Fraction(float(a)) ** 2 + Fraction(float(b)) ** 2 - 1) for a, b in zip(x, y)]
    closest = np.argsort([float(r) if r else np.inf for r in residual])[:nearest]
    ulps = np.arange(-4, 4).repeat(nearest // 8) * np.finfo(real).eps
    diagonal = np.sqrt(real(0.5)) * (1 + np.arange(-6, 2) * np.finfo(real).eps)
    z = np.concatenate([x[closest] + 1j * y[closest], (x[:nearest] + 1j * y[:nearest]) * (1 + ulps),
                        diagonal + 1j * diagonal]).astype(dtype)
    return np.concatenate([z, -z.conj(), 1j * z])


def real_parts_within(got: np.ndarray, want: np.ndarray, ulps: float, what: str) -> None:
    """The real parts (log|z|, tiny near the circle) within ``ulps`` of their own size."""
    real = got.real.dtype.type
    error = np.abs(got.real - want.real) / np.spacing(np.abs(want.real).astype(real))
    assert error.max() <= ulps, (what, error.max(), got[error.argmax()], want[error.argmax()])


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_logarithms_keep_their_real_part_within_a_few_ulp_where_the_modulus_is_nearly_one(dtype):
    """log|z| of a z within a few ulp of the unit circle is log1p(x^2 + y^2 - 1)/2 of a tiny
    x^2 + y^2 - 1, which must be computed with one rounding in effect (glibc's clog); the part's
    error, not the result's (whose imaginary part, the angle, is much larger), is what shows it."""
    z = near_unit_circle(dtype)
    for function in (np.log, np.log10):
        want = function(z)
        got = np.asarray(flowjit.jit(function)(z))
        real_parts_within(got, want, 8, function.__name__)
        same_parts(got, want, 8 * np.finfo(got.real.dtype).eps)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_powers_are_numpys_npy_cpow(dtype):
    """Integral exponents below 100 multiply as npy_cpow does (a zero exponent gives 1, a zero base
    0 or NaN), special values included for the small ones; other exponents are exp(b log a)."""
    eps = np.finfo(np.float32 if dtype == np.complex64 else np.float64).eps
    special, finite = complex_values(dtype), complex_values(dtype, special=False)
    for exponent in (0, 1, 2, 3, 4, 7, -1, -3, 99):
        for base in ((special, finite) if abs(exponent) <= 3 else (finite,)):
            with np.errstate(all="ignore"):
                want = base ** dtype(exponent)
            # each multiply may fuse into an FMA in the kernel: a rounding apart per multiply
            same_parts(flowjit.jit(lambda z, n: z ** n)(base, dtype(exponent)), want, 4 * (abs(exponent) + 1) * eps)
    powers = np.roll(finite, 3) * 0.5
    for base, exponent in ((finite, powers), (finite, dtype(0.5)), (finite, dtype(2 - 1j)), (finite * 0, powers)):
        with np.errstate(all="ignore"):
            want = base ** exponent
        same_parts(flowjit.jit(lambda a, b: a ** b)(base, exponent), want, 64 * eps)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_exp_sqrt_and_abs_keep_numpys_values_at_the_ends_of_the_range(dtype):
    """C's cexp takes e^t out of a large real part so that the other part stays finite (numba's
    gives inf * 0 = NaN there); C's csqrt scales huge and subnormal parts (numba's halves an
    imaginary part past max / (1 + sqrt 2) and loses subnormal digits); |z| (flowjit's own,
    vectorised) neither overflows nor underflows where hypot does not."""
    info = np.finfo(np.float32 if dtype == np.complex64 else np.float64)
    ends = [0.5 * info.maxexp * np.log(2) * k for k in (1.99, 2.0, 2.01, 2.5, 4, 6.5)] + [
        info.max, info.max / 2, info.max / 3, info.tiny, info.tiny / 8, info.smallest_subnormal, 0.1, -0.1]
    parts = sorted({float(v) for e in ends for v in (e, -e)})
    z = np.array([complex(re, im) for re in parts for im in parts], dtype)
    with np.errstate(all="ignore"):
        for function in (np.exp, np.sqrt, np.abs):
            same_parts(flowjit.jit(function)(z), function(z), 4 * info.eps)


def test_python_complex_scalars_are_weak_as_in_numpy():
    """1j * float32 is complex64 (NEP 50), a complex64 stays complex64 against a Python complex."""
    x = RNG.normal(size=8).astype(np.float32)
    z = complex_values(np.complex64, 8, special=False)
    agree(lambda x, z: (x * 1j, z + (2 - 1j), 2j * np.pi * x, np.exp(1j * x), x.astype(np.complex128) / 3), x, z)


def test_casts_between_complex_and_real_dtypes():
    """A complex value cast to a real dtype keeps its real part (numpy warns and does so), to bool
    tests both parts."""
    z = complex_values(np.complex128, special=False) * 100

    def casts(z, x):
        return (z.astype(np.float32), z.astype(np.int32), z.astype(bool), z.astype(np.complex64),
                x.astype(np.complex64), x.astype(np.complex128) + z, np.zeros(3, np.complex64) + x[:3])
    with pytest.warns(np.exceptions.ComplexWarning):
        agree(casts, z, RNG.normal(size=z.shape).astype(np.float32))


def test_reductions_matmul_and_data_movement_of_complex_arrays():
    z = complex_values(np.complex128, 35, special=False).reshape(5, 7)
    c = complex_values(np.complex64, 35, special=False).reshape(7, 5)

    def f(z, c, x):
        return (z.sum(), z.sum(axis=0), z.mean(axis=1), np.prod(z / np.abs(z), axis=1), c.sum(axis=0),
                c.mean(), z[:0].mean(axis=0), np.linalg.norm(z), np.linalg.norm(c, axis=0), np.linalg.norm(z, 1),
                np.linalg.norm(c, np.inf), np.array([2j, 2j, 2j]) * z[0, :3], z @ c, c @ x, np.concatenate([z, c.T * 1j]), np.stack([z, z.conj()], axis=-1),
                z[::2, 1:].T, z.reshape(7, 5), np.broadcast_to(z[:1], (3, 7)), (np.abs(z - z.mean()) ** 2).mean())
    agree(f, z, c, RNG.normal(size=(5, 3)))


def test_complex_values_inside_fused_kernels_with_real_ones():
    """A chirp, a rotation and a magnitude in one kernel: complex values between real ones."""
    t = np.linspace(0, 1, 256)

    def chirp(t, phase):
        z = np.exp(2j * np.pi * (5 * t + 3 * t ** 2) + 1j * phase)
        rotated = z * (np.cos(phase) - 1j * np.sin(phase))
        return np.abs(rotated) ** 2 + rotated.real * rotated.imag, np.angle(rotated)
    agree(chirp, t, 0.3)
    text = flowjit.jit(chirp).lower(t, 0.3).as_text(stage="fused")
    assert "c128" in text and text.count("fused") >= 1


def test_random_complex_programs_match_numpy():
    """Programs drawn from the complex ops (seeded): each equals numpy on every path."""
    unary = [np.conj, np.negative, lambda a: a * 0.5j, lambda a: np.exp(a * 0.25), np.sqrt, np.square,
             lambda a: a.real + 0j, lambda a: np.abs(a) + a, lambda a: a / (1.5 + np.abs(a)), np.expm1]
    binary = [np.add, np.subtract, np.multiply, lambda a, b: a / (b + 3), lambda a, b: np.where(a.real > b.imag, a, b)]
    rng = np.random.default_rng(7)
    for program in range(12):
        steps = [(int(rng.integers(len(unary))), int(rng.integers(len(binary))), int(rng.integers(3)))
                 for _ in range(int(rng.integers(2, 6)))]

        def f(z, w, x, steps=steps):
            values = [z, w, x]
            for u, b, other in steps:
                values.append(binary[b](unary[u](values[-1]), values[other]))
            return values[-1], values[-1].sum(axis=0)
        dtype = (np.complex64, np.complex128)[program % 2]
        z = complex_values(dtype, 24, special=False).reshape(4, 6) * 0.5
        agree(f, z, np.roll(z, 1) * 0.3, RNG.normal(size=(4, 6)).astype(np.float32))


def test_complex_types_and_constants_print_and_parse_back():
    jitted = flowjit.jit(lambda z: z * (1 + 2j) + np.array([1j, 2, 3, 4]))
    graph = jitted.lower(np.ones(4, np.complex64)).graph
    text = print_graph(graph)
    assert "c64[4]" in text and "c128[4]" in text
    assert "{value=complex<1.0, 2.0>} : c64[]" in text
    assert "{value=[complex<0.0, 1.0>, complex<2.0, 0.0>, complex<3.0, 0.0>, complex<4.0, 0.0>]} : c128[4]" in text
    again = parse(text)
    assert print_graph(again) == text
    assert flowjit.interpret(again, np.ones(4, np.complex64))[0].tolist() == [1 + 3j, 3 + 2j, 4 + 2j, 5 + 2j]
    special = np.array([complex(-0.0, np.inf), complex(np.nan, 1), complex(1e-300, -2.5)])
    text = print_graph(flowjit.jit(lambda z: z * special).lower(np.ones(3, np.complex64)).graph)
    assert "complex<-0.0, inf>, complex<nan, 1.0>, complex<1e-300, -2.5>" in text and print_graph(parse(text)) == text
    with pytest.raises(flowjit.FlowjitError, match=r"a complex literal is complex<real, imag> of two numbers"):
        parse(text.replace("complex<nan, 1.0>", "complex<nan, true>"))


def test_what_does_not_take_complex_values_says_so_at_the_users_line():
    z = complex_values(np.complex128, 6, special=False)

    def ordering(z):
        return z.max() + (z < 1).sum() + np.maximum(z, 1)  # ordering
    with pytest.raises(OpTypeError, match=r"np\.max\(c128\[113\]\): op 'max' does not take complex values yet") as info:
        flowjit.jit(ordering)(complex_values(np.complex128))
    assert info.value.location.line == line_of(ordering, "ordering")

    def trig(z):
        return np.sin(z)  # trig
    with pytest.raises(OpTypeError, match=r"op 'sin' does not take complex values yet \(got c128\[6\]\)") as info:
        flowjit.jit(trig)(z)
    assert info.value.location.line == line_of(trig, "trig")
    with pytest.raises(OpTypeError, match=r"np\.floor\(c128\[6\]\)"):
        flowjit.jit(lambda z: np.floor(z))(z)           # numpy has no complex floor either
    with pytest.raises(OpTypeError, match="op 'argmax' does not take complex values yet"):
        flowjit.jit(lambda z: z.argmax())(z)
    with pytest.raises(UnsupportedDTypeError, match="complex256: this dtype is not supported"):
        flowjit.jit(lambda z: z)(np.ones(2, np.clongdouble))


def test_writes_through_the_parts_of_a_complex_array_are_refused():
    """numpy's z.real is a view: a write through it would change z, which no trace follows."""
    def zero_real(z):
        t = z.copy()
        t.real[:] = 0  # through-real
        return t
    with pytest.raises(flowjit.FlowjitError, match="view") as info:
        flowjit.jit(zero_real)(complex_values(np.complex128, 4, special=False))
    assert info.value.location.line == line_of(zero_real, "through-real")
    with pytest.raises(flowjit.FlowjitError, match=r"np\.cov of complex values \(c128\[2,2\]\) is not supported yet"):
        flowjit.jit(np.cov)(complex_values(np.complex128, 4, special=False).reshape(2, 2))


def test_variables_and_gradients_stay_real():
    with pytest.raises(UnsupportedDTypeError, match="variables hold real values"):
        flowjit.Variable(np.zeros(3, np.complex64))

    def power(x):
        return (np.abs(np.fft.rfft(x)) ** 2).sum()  # spectrum
    with pytest.raises(GradientError, match="computes with complex values, and flowjit differentiates real values only"):
        flowjit.grad(power)(RNG.normal(size=8))
    real_part = flowjit.grad(lambda x: (x * 2.0).sum())(RNG.normal(size=3))      # real programs unchanged
    assert real_part.tolist() == [2.0, 2.0, 2.0]


def test_complex_kernels_render_for_both_targets():
    """One rule per op serves the CPU and the GPU; where numba-cuda has no numpy function of a
    complex scalar, the GPU's library has it (tests/cuda/test_complex_gpu.py runs them)."""
    from flowjit.compiler.codegen.scalar import expression
    graph = flowjit.jit(lambda z: (z * z, np.isnan(z), np.exp(z))).lower(np.ones(3, np.complex64)).graph
    mul, isnan, exp = (next(n for n in graph.nodes if n.op.name == name) for name in ("mul", "isnan", "exp"))
    assert expression(mul, ["a", "b"], "cpu") == expression(mul, ["a", "b"], "cuda") == "np.complex64((a * b))"
    assert expression(isnan, ["a"], "cpu") == "np.isnan(a)" and expression(isnan, ["a"], "cuda") == "fj.complex_isnan(a)"
    assert expression(exp, ["a"], "cpu") == expression(exp, ["a"], "cuda") == "np.complex64(fj.complex_exp_c64(a))"


def test_complex_values_may_be_placed_on_a_gpu():
    """Complex kernels compile for GPUs too: a complex op pinned to one is placed there, np.fft
    included (a library op, which a GPU runs on the host)."""
    def pinned(x):
        with flowjit.device("gpu:0"):
            return np.fft.fft(x) * 2
    text = flowjit.jit(pinned, devices=["cpu:0", "gpu:0"]).lower(np.ones((4, 4))).as_text(stage="placed")
    placed = [line for line in text.splitlines() if line.strip().startswith(("%fft =", "%mul ="))]
    assert len(placed) == 2 and all('placed("/job:localhost/task:0/device:gpu:0")' in line for line in placed)


def test_assigning_an_attribute_of_a_traced_array_says_what_to_write():
    def set_imag(z):
        t = z.copy()
        t.imag = z.real  # set-imag
        return t
    with pytest.raises(flowjit.FlowjitError, match=r"x\.imag = \.\.\. on a traced array \(c128\[3\]\): numpy would "
                                                   r"change the array in place.*\(x = np\.real\(x\) \+ 1j \* value\)") as info:
        flowjit.jit(set_imag)(np.ones(3, complex))
    assert info.value.location.line == line_of(set_imag, "set-imag")
    with pytest.raises(flowjit.FlowjitError, match=r"x\.shape = \.\.\..*x = x\.reshape"):
        flowjit.jit(lambda x: setattr(x, "shape", (3,)))(np.ones(3))


def test_complex_values_cross_devices_as_the_interpreter_computes_them():
    """Send/Recv carry complex tensors between CPU devices (a lossy transfer truncates float32
    values only), on the cost model's placement and on a random one."""
    def f(x, z):
        with flowjit.device("cpu:0"):
            s = np.fft.rfft(x * 2.0, axis=1)
        with flowjit.device("cpu:1"):
            t = s * z[:, :s.shape[1]] + 1j
        return np.abs(t).sum(axis=1), t.mean()
    x = RNG.normal(size=(4, 16)).astype(np.float32)
    z = complex_values(np.complex64, 64, special=False).reshape(4, 16)
    want = flowjit.jit(f, backend="interpreter")(x, z)
    for lossy in (False, True):
        for strategy in ("cost", "random"):
            got = flowjit.jit(f, devices=["cpu:0", "cpu:1"], placement=strategy, placement_seed=3,
                              lossy_transfers=lossy)(x, z)
            for value, expected in zip(got, want):
                assert value.dtype == expected.dtype
                np.testing.assert_allclose(value, expected, rtol=1e-2 if lossy else 2e-5)
