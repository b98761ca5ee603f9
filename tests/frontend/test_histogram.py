"""np.histogram (frontend/histogram.py) against numpy: counts, edges and dtypes, values on and
beside every edge (numpy corrects its index computation against the edges themselves), NaN and
values out of range dropped, weights and density; what it does not support says so."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import flowjit
from flowjit.errors import FlowjitError


def same(got, expected):
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=1e-12)
        if e.dtype.kind in "iu":
            np.testing.assert_array_equal(g, e)


@settings(max_examples=15, deadline=None)
@given(dtype=st.sampled_from([np.float64, np.float32, np.int32, np.float16]), bins=st.integers(1, 70),
       low=st.floats(-50, 50), width=st.floats(0, 100), data=st.data())
def test_counts_and_edges_match_numpy(dtype, bins, low, width, data):
    high = low + width
    edges = np.linspace(low, high if high > low else low + 1, bins + 1)
    picks = data.draw(st.lists(st.sampled_from(list(edges)), min_size=1, max_size=40))
    x = np.array(picks + [np.nextafter(p, np.inf) for p in picks] + [np.nextafter(p, -np.inf) for p in picks]
                 + [low - 1, high + 1], np.float64)
    x = x.astype(dtype) if np.dtype(dtype).kind == "f" else np.round(x).astype(dtype)
    if np.dtype(dtype).kind == "f":
        x[-1] = np.nan
    weighted = data.draw(st.booleans())
    weights = np.linspace(-1, 2, x.size) if weighted else None

    def f(x, weights):
        return np.histogram(x, bins=bins, range=(low, high), weights=weights)
    with np.errstate(all="ignore"):
        same(flowjit.jit(f)(x, weights), f(x, weights))


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
def test_density_and_a_two_dimensional_input(fuse):
    x = np.random.default_rng(0).standard_normal((40, 30))

    def f(x):
        return np.histogram(x, bins=12, range=(-2, 3), density=True)
    same(flowjit.jit(f, fuse=fuse)(x), f(x))


@pytest.mark.parametrize("call, message", [
    (lambda x: np.histogram(x), "without a range known while tracing"),
    (lambda x: np.histogram(x, bins=[0, 1, 2], range=(0, 2)), "only a number of equal bins"),
    (lambda x: np.histogram(x, bins="auto", range=(0, 2)), "only a number of equal bins"),
    (lambda x: np.histogram(x, bins=4, range=(2, 0)), "max must be larger than min"),
    (lambda x: np.histogram(x, bins=4, range=(0, np.inf)), "is not finite"),
], ids=["no-range", "edges", "rule", "reversed", "infinite"])
def test_what_is_not_supported_says_so(call, message):
    with pytest.raises(FlowjitError, match=message) as info:
        flowjit.jit(call)(np.ones(5))
    assert info.value.location.file == __file__


def test_numpy_scalars_in_the_range_and_float32_weights_as_numpy():
    x = np.random.default_rng(1).standard_normal(3000).astype(np.float32)
    w = np.random.default_rng(2).random(3000).astype(np.float32) * 1e4

    def f(x, w):
        return np.histogram(x, bins=9, range=(np.float64(-1), np.float64(2)), weights=w)
    got, expected = flowjit.jit(f)(x, w), f(x, w)
    assert got[1].dtype == expected[1].dtype == np.float64
    same(got, expected)
