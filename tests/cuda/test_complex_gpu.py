"""Complex values on the GPU: the complex ops' kernels for ``gpu:0`` (the CPU library's helpers,
numerics.py, compiled as device functions on libdevice's and cmath's functions; |z| is hypot),
reductions of complex values (a shuffle moves each part), against numpy with its special values.
Run on numba's CUDA simulator (which computes the parts in Python's double precision, so a
complex64 function is within a few ulp of numpy's there, as it is on a GPU); every kernel also
compiles to PTX (tests/cuda/test_cuda_ptx.py)."""

import pathlib
import sys

import numpy as np
import pytest

import flowjit

sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "ops"))
from test_complex_ops import (ELEMENTWISE, complex_values, near_unit_circle, real_parts_within,  # noqa: E402
                              same_parts)

pytest.importorskip("numba_cuda", reason="numba-cuda is not installed (the cuda extra)")

import flowjit.gpu as gpu  # noqa: E402

if not gpu.available():
    pytest.skip("numba-cuda sees no GPU and NUMBA_ENABLE_CUDASIM is not set", allow_module_level=True)

GPU = ["gpu:0"]
# What moves or compares parts without rounding: numpy's values exactly on the GPU too (a
# quotient or a product may contract a multiply and an add into one FMA there).
EXACT = {"z + w", "z - w", "-z", "np.conj(z)", "z.conjugate()", "z.real", "z.imag", "np.real(z) + np.imag(w)",
         "np.isnan(z)", "np.isinf(z)", "np.isfinite(z)", "z == w", "z != w", "np.where(w.real > 0, z, 0)",
         "z.astype(np.complex64)"}


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_every_complex_op_on_the_gpu_gives_numpys_values_with_its_special_values(dtype):
    z = complex_values(dtype, 16)
    w = np.roll(complex_values(dtype, 16), 5)
    eps = np.finfo(np.float32 if dtype == np.complex64 else np.float64).eps
    for spelling, (function, _) in ELEMENTWISE.items():
        with np.errstate(all="ignore"):
            want = function(z, w)
            got = flowjit.jit(function, devices=GPU)(z, w)
        try:
            same_parts(np.asarray(got), np.asarray(want), 0.0 if spelling in EXACT else 8 * eps)
        except AssertionError as error:
            raise AssertionError(f"{spelling}: {error}") from None


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_logarithms_on_the_gpu_keep_their_real_part_where_the_modulus_is_nearly_one(dtype):
    """x^2 + y^2 - 1 from exact products and two-sums (the simulator's fma is exact too), so
    log|z| keeps its digits within a few ulp of |z| = 1, x = y just below sqrt(1/2) included."""
    z = near_unit_circle(dtype, count=1024, nearest=32)
    for function in (np.log, np.log10):
        want = function(z)
        got = np.asarray(flowjit.jit(function, devices=GPU)(z))
        real_parts_within(got, want, 8, function.__name__)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_the_mean_of_complex_values_over_nothing_is_nan_as_numpys(dtype):
    z = complex_values(dtype, 12, special=False).reshape(3, 4)
    with np.errstate(all="ignore"):
        want = (z[:0].mean(axis=0), z.mean(axis=1))
        got = flowjit.jit(lambda z: (z[:0].mean(axis=0), z.mean(axis=1)), devices=GPU)(z)
    for value, expected in zip(got, want):
        same_parts(np.asarray(value), expected, 1e-6 if dtype == np.complex64 else 1e-14)


def test_complex_reductions_and_matmul_on_the_gpu():
    """Rows, columns, the whole array and a product of complex values, in blocks whose warps
    shuffle each part; a complex matmul (cuBLAS on a GPU) with its epilogue."""
    z = complex_values(np.complex128, 35, special=False).reshape(5, 7)
    c = complex_values(np.complex64, 35, special=False).reshape(7, 5)

    def f(z, c):
        return (z.sum(), z.sum(axis=0), z.mean(axis=1), np.prod(z / np.abs(z), axis=1), c.sum(axis=0), c.mean(),
                np.abs(z - z.mean(axis=1, keepdims=True)).sum(axis=1), np.exp(z @ c * 0.1j) + 1,
                np.exp(c * 0.1j).sum(axis=1))
    want = flowjit.jit(f, backend="interpreter")(z, c)
    got = flowjit.jit(f, devices=GPU)(z, c)
    for value, expected in zip(got, want):
        assert value.dtype == expected.dtype and value.shape == expected.shape
        same_parts(np.asarray(value), np.asarray(expected), 1e-5 if expected.dtype in (np.complex64, np.float32)
                   else 1e-12)


def test_a_spectrum_split_between_the_cpu_and_the_gpu():
    """np.fft (a library op) beside complex kernels on the GPU, pinned and placed by the cost
    model: the same values as the interpreter."""
    x = np.random.default_rng(5).normal(size=(4, 16))

    def pinned(x):
        with flowjit.device("cpu:0"):
            s = np.fft.rfft(x, axis=1)
        with flowjit.device("gpu:0"):
            power = (np.abs(s * np.conj(s) + 1j) ** 2).sum(axis=1)
            phase = np.exp(1j * s.real) / (s + 2)
        return power, phase
    want = flowjit.jit(pinned, backend="interpreter")(x)
    for devices in (["cpu:0", "gpu:0"], GPU + ["cpu:0"]):
        got = flowjit.jit(pinned, devices=devices)(x)
        for value, expected in zip(got, want):
            same_parts(np.asarray(value), np.asarray(expected), 1e-12)
    text = flowjit.jit(pinned, devices=["cpu:0", "gpu:0"]).lower(x).as_text(stage="placed")
    assert any("device:gpu:0" in line and "c128" in line for line in text.splitlines())
