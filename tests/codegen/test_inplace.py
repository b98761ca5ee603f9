"""In-place buffer reuse: a kernel may write its result over an input that dies there only
when every read of that input is elementwise at the index being written (driver.py's
``may_write_over``).  A transposed, reversed, sliced or broadcast read of the same buffer
would see elements the kernel has already overwritten."""

import re

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import flowjit
from helpers import assert_same_result, tolerance_for
from random_programs import BARRIERS, COMBINES, SELF_VIEWS, _self_view


def assert_matches_numpy(function, *args):
    with np.errstate(all="ignore"):
        expected = function(*args)
    rtol = tolerance_for(expected, args)
    for fuse in (True, False):
        got = flowjit.jit(function, fuse=fuse)(*args)
        assert_same_result(got, expected, exact=rtol == 0.0, rtol=rtol)


def test_a_kernel_never_overwrites_a_buffer_it_reads_transposed():
    """The reported case: y + y.T written over y gave [[10, 17], [16, 32]]."""
    function = lambda x: (lambda y: (y + y.T) @ x)(x + 1.0)   # noqa: E731
    x = np.arange(4.0).reshape(2, 2)
    for fuse in (True, False):
        np.testing.assert_array_equal(flowjit.jit(function, fuse=fuse)(x), [[10.0, 17.0], [16.0, 29.0]])


@settings(max_examples=40)
@given(view=st.sampled_from(sorted(SELF_VIEWS)), combine=st.sampled_from(COMBINES),
       barrier=st.sampled_from(sorted(BARRIERS)), shape=st.sampled_from([(4, 4), (3, 5), (3, 3, 3), (6,)]),
       dtype=st.sampled_from([np.float64, np.float32, np.int32]))
def test_reads_of_a_dying_buffer_through_its_views(view, combine, barrier, shape, dtype):
    function = _self_view(SELF_VIEWS[view], combine, BARRIERS[barrier])
    x = np.random.default_rng(1).uniform(-4, 4, shape).astype(dtype)
    try:
        with np.errstate(all="ignore"):
            function(x)
    except (ValueError, IndexError):
        return                                      # numpy rejects this combination of shapes too
    assert_matches_numpy(function, x)


def buffers_written(function, x) -> dict[str, str]:
    """Unfused: each kernel's result name -> the buffer the driver writes it into."""
    source = flowjit.jit(function, fuse=False).lower(x).executable.driver_source
    return dict(re.findall(r"^\s+t_k\d+_(\w+) = (workspace\[\d+\]|pool\d+\.take\(\))$", source, re.M))


def test_a_read_at_the_index_written_still_reuses_the_buffer():
    """x * 2 dies in sin: sin writes over it.  sin(y) + y.T may write over sin's buffer (read
    at the index written) but never over y's, which it reads transposed."""
    x = np.random.default_rng(0).standard_normal((4, 4))
    direct = buffers_written(lambda x: np.sin(x * 2.0) @ x + 1.0, x)
    assert direct["sin"] == direct["mul"], direct
    transposed = buffers_written(lambda x: (lambda y: np.sin(y) + y.T)(x * 2.0) @ x, x)
    assert transposed["add"] == transposed["sin"] != transposed["mul"], transposed
    for function in (lambda x: np.sin(x * 2.0) @ x + 1.0, lambda x: (lambda y: np.sin(y) + y.T)(x * 2.0) @ x):
        assert_matches_numpy(function, x)


def test_results_handed_back_in_are_never_written_over():
    """A program's result passed to the next call is the user's: its buffer is not reused."""
    jitted = flowjit.jit(lambda x: np.tanh(x) * 2.0)
    x = np.random.default_rng(0).standard_normal((3, 4))
    first = jitted(x)
    kept = first.copy()
    second = jitted(first)
    np.testing.assert_array_equal(first, kept)
    np.testing.assert_allclose(second, np.tanh(kept) * 2.0)
