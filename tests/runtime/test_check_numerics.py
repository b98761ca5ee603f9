"""check_numerics: every kernel's outputs are checked for NaN and Inf; the error names the first op
that made one, its kernel and the user's line; without the option the driver carries no check."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import flowjit
from flowjit.config import options_from_env
from flowjit.errors import NumericsError

MODES = {"fused": {}, "unfused": {"fuse": False}, "two devices": {"devices": ["cpu:0", "cpu:1"]}}


def line_of(marker: str) -> int:
    lines = inspect.getsource(inspect.getmodule(line_of)).splitlines()
    return next(number for number, text in enumerate(lines, start=1) if marker in text and "line_of" not in text)


def normalize(x):
    centered = x - x.mean(axis=1, keepdims=True)
    scale = np.sqrt(centered.var(axis=1, keepdims=True))
    return np.tanh(centered / scale)  # the division makes NaN


@pytest.mark.parametrize("mode", MODES)
def test_the_error_names_the_first_op_that_made_a_nan_its_kernel_and_the_line(mode):
    checked = flowjit.jit(normalize, check_numerics=True, **MODES[mode])
    np.testing.assert_allclose(checked(np.arange(8.0).reshape(2, 4)), normalize(np.arange(8.0).reshape(2, 4)))
    with pytest.raises(NumericsError) as error:
        checked(np.ones((2, 4)))
    message = str(error.value)
    assert message.startswith("check_numerics: %div (div) produced NaN (8 of 8 elements; first at index (0, 0)) "
                              "in kernel k"), message
    assert message.endswith(f"test_check_numerics.py:{line_of('# the division makes NaN')}"), message
    kernels = [node.name for graph in checked.lower(np.ones((2, 4))).stage_graphs("fused") for node in graph.nodes
               if node.op is flowjit.ir.ops.fused]
    assert any(f"in kernel {name}," in message for name in kernels), (message, kernels)


def test_an_overflow_is_reported_as_inf_of_the_op_that_overflowed():
    @flowjit.jit(check_numerics=True)
    def f(x):
        return np.exp(x * 2) + 1  # overflows in float32

    with pytest.raises(NumericsError, match=r"%exp \(exp\) produced Inf \(1 of 3 elements; first at index \(2,\)\)"):
        f(np.array([0, 1, 60], np.float32))


def test_a_nan_passed_in_names_the_argument():
    @flowjit.jit(check_numerics=True)
    def f(x):
        return x * 2 + 1

    with pytest.raises(NumericsError, match=r"passed on NaN from the program's argument %x \(1 of 2 elements"):
        f(np.array([1.0, np.nan]))


def test_without_the_option_the_driver_carries_no_check(monkeypatch):
    x = np.ones((2, 4))
    plain = flowjit.jit(normalize).lower(x).executable.driver_source
    checked = flowjit.jit(normalize, check_numerics=True).lower(x).executable.driver_source
    assert "check_" not in plain and "isfinite" not in plain
    assert checked.count("check_") == plain.count("\n    k")              # one check per kernel call
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(flowjit.jit(normalize)(x), normalize(x))   # NaN, unchecked, as numpy
    monkeypatch.setenv("FLOWJIT_CHECK_NUMERICS", "1")
    assert options_from_env().check_numerics
    with pytest.raises(NumericsError):
        flowjit.jit(normalize)(x)
    assert not flowjit.jit(normalize, check_numerics=False).lower(x).options.check_numerics


def test_a_failed_check_stores_nothing_into_a_variable():
    w = flowjit.Variable(np.ones(3), name="checked_w")

    @flowjit.jit(check_numerics=True)
    def step(d):
        w.assign(w / d)
        return d

    step(np.full(3, 2.0))
    np.testing.assert_array_equal(w.numpy(), [0.5, 0.5, 0.5])
    with pytest.raises(NumericsError, match=r"%div \(div\) produced Inf"):
        step(np.array([1.0, 0.0, 1.0]))
    np.testing.assert_array_equal(w.numpy(), [0.5, 0.5, 0.5])
