"""In-place buffer reuse: a kernel may write its result over an input that dies there only
when every read of that input is elementwise at the index being written (driver.py's
``may_write_over``).  A transposed, reversed, sliced or broadcast read of the same buffer
would see elements the kernel has already overwritten."""

import re

import numpy as np
import pytest
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


DYING_BUFFER_CASES = dict(
    view=st.sampled_from(sorted(SELF_VIEWS)), combine=st.sampled_from(COMBINES),
    barrier=st.sampled_from(sorted(BARRIERS)), shape=st.sampled_from([(4, 4), (3, 5), (3, 3, 3), (6,)]),
    dtype=st.sampled_from([np.float64, np.float32, np.int32]))


@settings(max_examples=15)
@given(**DYING_BUFFER_CASES)
def test_reads_of_a_dying_buffer_through_its_views(view, combine, barrier, shape, dtype):
    """15 derandomised cases here (each compiles its kernels fused and unfused: 40 took 30 s of
    a cold run; every view is also checked below, test_no_kernel_writes_a_buffer_it_reads); 40
    under ``make test-slow`` (test_more_reads_of_a_dying_buffer_through_its_views)."""
    _check_dying_buffer(view, combine, barrier, shape, dtype)


@pytest.mark.sweep
@settings(max_examples=40)
@given(**DYING_BUFFER_CASES)
def test_more_reads_of_a_dying_buffer_through_its_views(view, combine, barrier, shape, dtype):
    """test_reads_of_a_dying_buffer_through_its_views on 40 cases (a sweep: ``make test-slow``
    runs it)."""
    _check_dying_buffer(view, combine, barrier, shape, dtype)


def _check_dying_buffer(view, combine, barrier, shape, dtype):
    function = _self_view(SELF_VIEWS[view], combine, BARRIERS[barrier])
    x = np.random.default_rng(1).uniform(-4, 4, shape).astype(dtype)
    try:
        with np.errstate(all="ignore"):
            function(x)
    except (ValueError, IndexError):
        return                                      # numpy rejects this combination of shapes too
    assert_matches_numpy(function, x)


def slots_read_and_written(function, x, fuse: bool):
    """For each kernel call of the driver: the workspace slots it reads (through any view) and
    the slots it writes."""
    source = flowjit.jit(function, fuse=fuse).lower(x).executable.driver_source
    slot_of: dict[str, str] = {}
    calls = []
    for line in source.splitlines():
        line = line.strip()
        assigned = re.fullmatch(r"(t_\w+) = (workspace\[\d+\])", line)
        view = re.fullmatch(r"(t_\w+) = (?:np\.\w+\()?(t_\w+)\b.*", line)
        call = re.fullmatch(r"(k\d+\w*)\((.*)\)", line)
        if assigned:
            slot_of[assigned[1]] = assigned[2]
        elif view and view[2] in slot_of:
            slot_of[view[1]] = slot_of[view[2]]
        elif call:
            names = [name.strip().split(".")[0] for name in call[2].split(",")]
            calls.append((call[1], names))
    result = []
    for kernel, names in calls:
        slots = [slot_of.get(name) for name in names]
        result.append((kernel, slots))
    return source, result


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("view", sorted(SELF_VIEWS))
def test_no_kernel_writes_a_buffer_it_reads(view, fuse):
    """A kernel's outputs never share a workspace slot with anything it reads, through any
    view: a read of a dying buffer's view, or of the buffer at the index written, alike (an
    aliased output also keeps LLVM from vectorising the loop)."""
    function = _self_view(SELF_VIEWS[view], np.subtract, lambda z: np.sin(z) @ z.T)
    x = np.random.default_rng(3).standard_normal((4, 4))
    if view == "shifted":
        function = _self_view(lambda y: y[1:], lambda y, v: y[:-1] - v, lambda z: np.sin(z) @ z.T)
    source, calls = slots_read_and_written(function, x, fuse)
    assert calls, source
    for kernel, slots in calls:
        written = [slot for slot in slots[-1:] if slot is not None]     # kernels write their last arguments
        read = {slot for slot in slots[:-1] if slot is not None}
        assert not set(written) & read, f"{kernel} writes a slot it reads:\n{source}"
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
