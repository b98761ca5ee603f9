"""The scan ops (compiler/ir/ops/scan.py) behind np.cumsum, np.cumprod, ndarray.cumsum/cumprod
and ufunc.accumulate of add, multiply, maximum and minimum: numpy's values and dtypes on every
path, a scan between fused loops, the IR it prints and parses, its errors and gradients."""

import re

import numpy as np
import pytest

import flowjit
from flowjit.compiler.ir.gradients import GradientError
from flowjit.compiler import ir
from flowjit.errors import OpTypeError, ShapeError
from test_array_ops import agree, line_of
from test_gradients import check

RNG = np.random.default_rng(13)
F64 = RNG.normal(size=(4, 5))
I8 = RNG.integers(-100, 100, (4, 5)).astype(np.int8)
U16 = RNG.integers(0, 60000, (6,)).astype(np.uint16)
F16 = RNG.normal(size=(3, 7)).astype(np.float16)


def test_scans_match_numpy_in_values_and_dtypes():
    """cumsum of int8 is int64 (wrapping there, not in int8); add.accumulate of a bool too; maximum
    keeps the dtype (bool included); float16 rounds each partial sum to float16, as numpy's loop."""
    def f(x, b, u, h):
        nan = np.where(x > 1.0, np.nan, x)
        return (np.cumsum(x), np.cumsum(x, axis=0), x.cumsum(axis=-1), np.cumprod(x, axis=1), x.cumprod(),
                np.maximum.accumulate(nan, axis=0), np.minimum.accumulate(nan, 1), np.add.accumulate(x),
                np.multiply.accumulate(x, axis=1, dtype=np.float32),
                np.cumsum(b), np.cumsum(b, axis=0, dtype=np.float32), b.cumprod(axis=1), np.cumsum(b > 0, axis=1),
                np.maximum.accumulate(b, axis=1), np.add.accumulate(b > 0, 1), np.maximum.accumulate(b > 0, axis=0),
                np.cumsum(u), np.minimum.accumulate(u), np.cumsum(h, 1), np.maximum.accumulate(h, 0),
                np.maximum.accumulate(x * 10, axis=0, dtype=np.int8),  # dtype= casts first, as numpy's loop
                np.cumsum(x, dtype=np.bool_),                           # bool addition: or
                np.cumsum(x[:0], axis=0), np.cumsum(x.sum()))          # empty; 0-d flattens to (1,)
    agree(f, F64, I8, U16, F16)


def test_a_scan_runs_between_fused_loops_and_round_trips_through_the_ir():
    def f(x):
        return np.exp(np.cumsum(np.log1p(np.abs(x)), axis=0)) * 2 - x
    agree(f, F64)
    text = flowjit.jit(f).lower(F64).as_text()
    assert "cumsum %log1p {axis=0} : f64[4,5]" in text
    graph = ir.parse(text)
    assert ir.print_graph(ir.parse(ir.print_graph(graph))) == ir.print_graph(graph)
    assert [node.op for node in graph.nodes if node.op.name == "cumsum"] == [flowjit.compiler.ir.ops.cumsum]


def test_scan_errors_name_the_function_and_the_line():
    def scalar(x):
        return np.maximum.accumulate(x.sum())  # scalar
    with pytest.raises(ShapeError, match=r"np\.maximum\.accumulate: cannot accumulate on a 0-d array \(f64\[\]\)") as info:
        flowjit.jit(scalar)(F64)
    assert info.value.location.line == line_of(scalar, "scalar")

    def two_axes(x):
        return np.add.accumulate(x, axis=None)
    with pytest.raises(ShapeError, match=r"np\.add\.accumulate: accumulate takes one axis, not None \(of f64\[4,5\]\)"):
        flowjit.jit(two_axes)(F64)

    def out_of_range(x):
        return np.cumsum(x, axis=2)
    with pytest.raises(ShapeError, match=r"np\.cumsum: axis 2 is out of bounds"):
        flowjit.jit(out_of_range)(F64)

    def bad_dtype(x):
        return np.maximum.accumulate(x, dtype="S3")
    with pytest.raises(OpTypeError, match=r"np\.maximum\.accumulate\(f64\[4,5\], dtype=S3\): The `dtype`"):
        flowjit.jit(bad_dtype)(F64)


def test_cumsum_gradient_is_the_reversed_cumulative_sum():
    weights = RNG.normal(size=(4, 5))

    def loss(x):
        return ((np.cumsum(x, axis=1) * weights).sum() + np.sin(np.cumsum(x)).sum()
                + (np.cumsum(x[::-1], axis=0) ** 2 * weights).sum())
    check(loss, F64)


def test_scans_without_a_gradient_rule_say_so():
    def loss(x):
        return np.maximum.accumulate(x, axis=0).sum()  # no-rule
    with pytest.raises(GradientError, match=r"op 'cummax' \(%\w+\) has no gradient rule") as info:
        flowjit.jit(flowjit.grad(loss))(F64)
    assert str(line_of(loss, "no-rule")) in str(info.value)


@pytest.mark.parametrize("parallel", [False, True], ids=["serial", "parallel"])
def test_the_cpu_scan_kernels_equal_numpys_accumulate_bit_for_bit(parallel):
    """The CPU backend scans with kernels of its own (codegen/scans.py: blocks of columns
    stepped down the scanned axis, numpy's 51 ms cummax down a (8388, 500) matrix in 5.5):
    every combine, on floats with NaN, signed zeros and infinities and on wrapping integers,
    along the first, a middle and the last axis, with blocks of columns left over; serially and
    in parallel (past PARALLEL_MIN_ELEMENTS).  They match numpy's loop to the bit."""
    from flowjit.compiler.codegen.driver import PARALLEL_MIN_ELEMENTS
    rng = np.random.default_rng(21)
    shape = (2, 300, 9) if not parallel else (4, 1 << 8, PARALLEL_MIN_ELEMENTS >> 9)
    x = rng.standard_normal(shape)
    x.flat[::17], x.flat[5::23], x.flat[7::31], x.flat[3::29] = np.nan, -0.0, np.inf, -np.inf
    i = rng.integers(-2**31, 2**31, shape, dtype=np.int64).astype(np.int32)

    def scans(x, i):
        results = []
        for axis in (0, 1, 2):
            results += [np.cumsum(x, axis=axis), np.cumprod(x * 0.25 + 1, axis=axis),
                        np.maximum.accumulate(x, axis=axis), np.minimum.accumulate(x, axis=axis),
                        np.cumsum(i, axis=axis, dtype=np.int32), np.multiply.accumulate(i, axis=axis),
                        np.maximum.accumulate(i, axis=axis), np.cumsum(x.astype(np.float32), axis=axis)]
        return results
    jitted = flowjit.jit(scans)
    driver = jitted.lower(x, i).executable.driver_source
    assert all(f"{name}_scan" in driver for name in ("add", "multiply", "maximum", "minimum")), driver
    # each into a buffer the driver allocates and reuses, as a kernel's (here: results, from a pool)
    assert re.search(r"(t_\w+) = pool\d+\.take\(\)\n\s+\1 = add_scan\d*\(t_\w+, \1\)", driver), driver
    with np.errstate(invalid="ignore"):                  # (inf - inf in numpy's own sums)
        expected = scans(x, i)
    for got, want in zip(jitted(x, i), expected):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
