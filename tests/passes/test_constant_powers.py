"""constant-powers: ``x ** c`` for a constant c becomes multiplies, sqrt and one division in
the optimized IR, with numpy's results at every special value and within 4 ulp elsewhere."""

import pathlib
import re
import warnings

import numpy as np
import pytest

import flowjit
from flowjit.bench import power_accuracy
from helpers import close, tolerance_for

DOCS = pathlib.Path(__file__).parent.parent.parent / "docs" / "math.md"
SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 1e-310, -1e-310,
            5e-324, 1e-45, -1e-45, 1e-40, 1e300, -1e300, 1e154, 1e-160, 1e20, 1e-20, 1e38, 3.4e38, 65504.0, 1e-7]


def _optimized(function, *args) -> str:
    return flowjit.jit(function).lower(*args).as_text("optimized")


def _identical(got, want) -> np.ndarray:
    return ((got == want) & (np.signbit(got) == np.signbit(want))) | (np.isnan(got) & np.isnan(want))


def test_gelu_spelled_with_a_power_has_no_pow():
    """0.044715 * x ** 3 is three multiplies in float64, rounded once: no pow in the optimized
    IR, and no power call in the kernel."""
    def gelu(x):
        return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))
    x = np.linspace(-4, 4, 64, dtype=np.float32)
    text = _optimized(gelu, x)
    assert not re.search(r"= pow ", text), text
    assert re.search(r"= cast %x \{dtype=f64\}", text) and text.count("= mul ") >= 5, text
    (source,) = flowjit.jit(gelu).lower(x).kernel_sources().values()
    code = [line for line in source[source.index("def kernel"):].splitlines() if not line.strip().startswith("#")]
    assert not [line for line in code if re.search(r"\*\*|fj\.pow", line)], code
    assert close(flowjit.jit(gelu)(x), gelu(x), tolerance_for(x))     # (1 + tanh cancels below -3)


@pytest.mark.parametrize("c", [3, 1.5, -2, -0.5, 0.5, 7, -1.5, -4])
def test_the_rewrite_shows_in_the_optimized_ir(c):
    text = _optimized(lambda x: x ** c, np.ones(4))
    assert "= pow " not in text, text
    assert ("= sqrt " in text) == (c != int(c)), text
    assert ("= div " in text or "= reciprocal " in text) == (c < 0), text


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_special_values_are_numpys(dtype):
    """Every exponent the pass rewrites, at +-0, +-inf, NaN, denormals and overflow bounds: the
    same value as numpy wherever numpy's is +-0, +-inf, NaN or +-1 (sign included), and the
    rest within 4 ulp; fused and unfused."""
    from flowjit.compiler.codegen.accuracy import ulp_error
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = np.array(SPECIALS, dtype=dtype)
        exponents = power_accuracy.exponents(np.float32 if dtype == np.float16 else dtype)

        def powers(x):
            return tuple(x ** c for c in exponents)
        with np.errstate(all="ignore"):
            wanted = powers(x)
        assert "= pow " not in _optimized(powers, x)
        for fuse in (True, False):
            for c, got, want in zip(exponents, flowjit.jit(powers, fuse=fuse)(x), wanted):
                assert got.dtype == want.dtype
                exact = np.isnan(want) | np.isinf(want) | (want == 0) | (np.abs(want) == 1)
                wrong = exact & ~_identical(got, want)
                assert not wrong.any(), (c, x[wrong], got[wrong], want[wrong])
                assert ulp_error(got, want).max() <= 4, (c, x, got, want)


def test_a_broadcast_exponent_keeps_numpys_fast_paths():
    """numpy's float loops take sqrt for a broadcast 0.5 ((-inf) ** 0.5 is NaN, (-0.0) ** 0.5
    is -0.0) but pow for an exponent array read with a stride (inf and +0.0 there)."""
    x = np.array([-np.inf, -0.0, 0.0, 4.0, -4.0, np.inf, np.nan])
    half = np.full(x.shape, 0.5)
    with np.errstate(invalid="ignore"):
        for function, args in ((lambda x: x ** 0.5, (x,)), (lambda x: x ** half, (x,))):
            got, want = flowjit.jit(function)(*args), function(*args)
            assert _identical(got, want).all(), (got, want)
            assert "= pow " not in _optimized(function, *args)


def test_integer_powers_wrap_as_numpys():
    """Integer dtypes multiply in the loop dtype and wrap; x ** 0 is 1; bools power as ints."""
    rng = np.random.default_rng(3)

    def powers(x):
        return tuple(x ** c for c in range(0, 9))
    flags = np.array([True, False])
    for x in [rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, 50, dtype=dtype, endpoint=True)
              for dtype in (np.int8, np.uint8, np.int32, np.int64, np.uint64)] + [flags]:
        assert "= pow " not in _optimized(powers, x)
        for c, got, want in zip(range(9), flowjit.jit(powers)(x), powers(x)):
            assert got.dtype == want.dtype and np.array_equal(got, want), (x.dtype, c)
    # numpy raises at run time for a negative integer power of integers: the pow stays.
    assert "= pow " in _optimized(lambda x: x ** -2, np.arange(3))


def test_an_exponent_can_broadcast_its_base():
    x = np.array([1.5, -2.0, 3.0])
    exponent = np.full((2, 3), 3.0)
    got = flowjit.jit(lambda x: x ** exponent)(x)
    assert got.shape == (2, 3) and np.allclose(got, x ** exponent, rtol=1e-15)


def test_other_exponents_stay_pow():
    """Exponents outside the measured budget, non-uniform and non-constant ones call pow."""
    x = np.linspace(0.5, 2, 8)
    for function in (lambda x: x ** 0.3, lambda x: x ** 8, lambda x: x ** -5, lambda x: x ** 9.0, lambda x: x ** -4.5,
                     lambda x: x ** np.array([2.0, 3.0] * 4), lambda x: x ** x):
        assert "= pow " in _optimized(function, x)
    assert "= pow " not in _optimized(lambda x: x ** 8, x.astype(np.float32))
    # a constant base is folded by numpy's own power
    assert "= pow " not in _optimized(lambda x: x + np.float64(3.0) ** 3, x)


# The tests that read the accuracy sample share one xdist worker (--dist loadgroup), so a run
# measures it once, not once per worker.
SAMPLE = pytest.mark.xdist_group("constant-powers-accuracy-sample")


@pytest.fixture(scope="module")
def rows():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return power_accuracy.measure(points=1_000_000)     # the sample of docs/math.md's table


@SAMPLE
def test_every_rewritten_power_within_4_ulp(rows):
    for row in rows:
        assert row["max_ulp"] <= 4, row
        assert row["special_mismatches"] == [], row


@SAMPLE
def test_docs_table_does_not_understate_the_error(rows):
    documented = {}
    for line in DOCS.read_text().splitlines():
        match = re.match(r"\| (-?[\d.]+) \| (float\d+) \| [\d,]+ \| ([\d.e+-]+) \|", line)
        if match:
            documented[(float(match.group(1)), match.group(2))] = float(match.group(3))
    for row in rows:
        assert documented[(float(row["exponent"]), row["dtype"])] >= row["max_ulp"], row
