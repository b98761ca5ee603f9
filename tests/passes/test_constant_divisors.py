"""constant-divisors: integer ``x // c`` and ``x % c`` for a constant c >= 2 become a multiply
and a shift in the optimized IR, with numpy's results for every value of the 8- and 16-bit
dtypes and int32's extremes."""

import re

import numpy as np
import pytest

import flowjit
from flowjit.compiler.passes.constant_divisors import multiplier


def _optimized(function, *args) -> str:
    return flowjit.jit(function).lower(*args).as_text("optimized")


def _divisions(divisors):
    """One program of every divisor's quotient and remainder (one kernel to compile)."""
    def program(x):
        return tuple(part for c in divisors for part in (x // c, x % c))
    return program


def _every_value(dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.arange(info.min, info.max + 1).astype(dtype)


def _int32_values() -> np.ndarray:
    rng = np.random.default_rng(9)
    edges = [-2**31, -2**31 + 1, -2**31 + 2, -1, 0, 1, 2**31 - 2, 2**31 - 1]
    near = [m + d for m in (255 * 8421504, -255 * 8421504, 1000 * 2147483, 7 * 306783378, 2**30, -2**30)
            for d in (-1, 0, 1)]
    return np.concatenate([edges, near, np.arange(-3000, 3000), rng.integers(-2**31, 2**31, 20000)]).astype(np.int32)


CASES = [
    pytest.param(np.int8, [2, 3, 7, 10, 64, 100, 127], id="int8"),
    pytest.param(np.uint8, [2, 3, 7, 10, 64, 100, 255], id="uint8"),
    pytest.param(np.int16, [2, 3, 7, 10, 255, 1000, 4096, 32767], id="int16"),
    pytest.param(np.uint16, [2, 3, 7, 10, 255, 1000, 4096, 65535], id="uint16"),
    pytest.param(np.int32, [2, 3, 7, 255, 1000, 65537, 2**30, 2**31 - 1], id="int32"),
]


@pytest.mark.parametrize("dtype, divisors", CASES)
def test_quotients_and_remainders_are_numpys(dtype, divisors):
    """Every value of the 8- and 16-bit dtypes, int32's extremes, multiples of the divisors and
    their neighbours: compiled and interpreted, the same values and dtypes as numpy's."""
    x = _int32_values() if dtype == np.int32 else _every_value(dtype)
    program = _divisions(divisors)
    jitted = flowjit.jit(program)
    want = program(x)
    for got in (jitted(x), flowjit.interpret(jitted.lower(x).graph, x)):
        for index, (value, expected) in enumerate(zip(got, want)):
            assert value.dtype == expected.dtype, (index, value.dtype, expected.dtype)
            np.testing.assert_array_equal(value, expected, err_msg=f"{dtype.__name__} // {divisors[index // 2]}")


def test_the_multiplier_is_exact_at_every_bound():
    """M and s as the proof has them: M <= 2**(bits + 1), and u * M fits the multiply's width at
    the largest u, for every divisor up to 2**16 and a sample of larger ones."""
    for bits, width in ((7, 32), (8, 32), (15, 32), (16, 64), (31, 64)):
        for c in list(range(2, 1 << min(bits, 16))) + [(1 << bits) - 1]:
            big, shift = multiplier(c, bits)
            assert big <= 1 << (bits + 1) and ((1 << bits) - 1) * big < 1 << width, (bits, c)
            top = (1 << bits) - 1
            assert (top * big) >> shift == top // c and ((top - 1) * big) >> shift == (top - 1) // c


@pytest.mark.parametrize("spelling", ["x // 255", "x % 7", "(x * 3 + 127) // 1000", "x // np.int32(10)"])
def test_the_rewrite_shows_in_the_optimized_ir(spelling):
    function = eval(f"lambda x: {spelling}", {"np": np})
    text = _optimized(function, np.arange(-8, 8, dtype=np.int32))
    assert not re.search(r"= (floordiv|mod) %(x|add\w*), ", text), text
    assert "{dtype=u64}" in text and "= invert " in text, text


@pytest.mark.parametrize("function, x", [
    pytest.param(lambda x: x // 255, np.arange(8, dtype=np.int64), id="int64"),
    pytest.param(lambda x: x // 3.0, np.arange(8, dtype=np.float64), id="float"),
    pytest.param(lambda x: x // 1, np.arange(8, dtype=np.int32), id="by-one"),
    pytest.param(lambda x: x % -3, np.arange(8, dtype=np.int32), id="negative"),
    pytest.param(lambda x: x // np.arange(1, 9, dtype=np.int32), np.arange(8, dtype=np.int32), id="array-divisor"),
])
def test_what_is_left_alone(function, x):
    text = _optimized(function, x)
    assert re.search(r"= (floordiv|mod) ", text) and "{dtype=u64}" not in text, text
    np.testing.assert_array_equal(flowjit.jit(function)(x), function(x))


def test_broadcast_divisors_and_mixed_dtypes():
    """np.full's divisor (a broadcast constant), a uint8 image // a Python int, an int16 array
    % a numpy scalar: numpy's values and dtypes."""
    def program(img, h, x):
        return img // 3, h % np.int16(10), x // np.full(x.shape, 7, np.int32), (img.astype(np.int32) * 7 + 127) // 255
    rng = np.random.default_rng(2)
    args = (rng.integers(0, 256, (5, 6, 3), dtype=np.uint8), rng.integers(-30000, 30000, 50).astype(np.int16),
            rng.integers(-10**6, 10**6, 40).astype(np.int32))
    for got, want in zip(flowjit.jit(program)(*args), program(*args)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    assert "{dtype=u64}" in _optimized(program, *args)
