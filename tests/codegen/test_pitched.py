"""Strided slices read through pitches: a large loop kernel reads a slice that keeps the last
axis contiguous but is not C-contiguous (a stencil's shifted interior) as one vector and its
row pitches, so its loads are vectors, not gathers (writer.pitched_view, driver.pitched)."""

import platform
import re

import numpy as np
import pytest

import flowjit
from flowjit.compiler.codegen.writer import PITCH_MIN_ELEMENTS
from helpers import kernel_twins

SIDE = 258                                         # a 256 x 256 interior: PITCH_MIN_ELEMENTS


def sobel(img):
    gx = (img[:-2, 2:] + 2 * img[1:-1, 2:] + img[2:, 2:]) - (img[:-2, :-2] + 2 * img[1:-1, :-2] + img[2:, :-2])
    gy = (img[2:, :-2] + 2 * img[2:, 1:-1] + img[2:, 2:]) - (img[:-2, :-2] + 2 * img[:-2, 1:-1] + img[:-2, 2:])
    return np.hypot(gx, gy)


def mixed(u, w):
    """Slices of an argument and of a kernel's result, one with an outer step, one 3-D with a
    broadcast axis, beside a row vector."""
    v = np.exp(u * 0.01)
    cube = v.reshape(2, SIDE // 2, SIDE)
    return (u[1:-1, 2:] - v[:-2, :-2]) * w + u[2::1, 1:-1] * v[::1, 1:][1:-1, :-1], cube[:, 1:, :-1] * 2 + cube[:1, :-1, 1:]


def test_pitched_reads_match_numpy_for_arguments_of_any_layout():
    rng = np.random.default_rng(8)
    img = rng.standard_normal((SIDE, SIDE)).astype(np.float32)
    jitted = flowjit.jit(sobel)
    source = next(iter(jitted.lower(img).kernel_sources().values()))
    assert source.count("np.uint64(") >= 8, source
    wide = rng.standard_normal((SIDE, 2 * SIDE)).astype(np.float32)
    # C-ordered, Fortran-ordered, a strided view, rows reversed: the last three are copied first
    for argument in (img, np.asfortranarray(img), wide[:, ::2], img[::-1], wide[:, 3:SIDE + 3]):
        np.testing.assert_allclose(jitted(argument), sobel(argument), rtol=1e-6, atol=1e-5)
    u, w = rng.standard_normal((SIDE, SIDE)), rng.standard_normal(SIDE - 2)
    jitted = flowjit.jit(mixed)
    assert any("np.uint64(" in source for source in jitted.lower(u, w).kernel_sources().values())
    for got, want in zip(jitted(u, w), mixed(u, w)):
        # (values of order 1: where terms cancel, a fused multiply-add LLVM forms on one CPU
        # and not numpy moves the last bits; an absolute 1e-14 covers that and no misread element)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_small_kernels_read_their_views_directly():
    """Below PITCH_MIN_ELEMENTS the per-call cost of making the vectors is not repaid."""
    img = np.ones((18, 18), np.float32)
    assert 16 * 16 < PITCH_MIN_ELEMENTS
    (source,) = flowjit.jit(sobel).lower(img).kernel_sources().values()
    assert "np.uint64(" not in source
    np.testing.assert_allclose(flowjit.jit(sobel)(img), sobel(img))


def test_pitched_loads_are_vectors_not_gathers():
    from flowjit.compiler.codegen.driver import pitched
    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("checks x86 instructions")
    img = np.random.default_rng(2).standard_normal((SIDE, SIDE)).astype(np.float32)
    ((name, source),) = flowjit.jit(sobel).lower(img).kernel_sources().items()
    kernel, _ = kernel_twins(source, name, fma=False)
    views = [img[:-2, 2:], img[1:-1, 2:], img[2:, 2:], img[:-2, :-2], img[1:-1, :-2], img[2:, :-2], img[2:, 1:-1],
             img[:-2, 1:-1]]
    count = source.split("def kernel(")[1].split(")")[0].count("_p0")
    arguments = [part for view in views[:count] for part in pitched(view)]
    kernel(*arguments, np.empty((SIDE - 2, SIDE - 2), np.float32))
    assembly = "".join(kernel.inspect_asm().values())
    assert not re.search(r"\bvgather", assembly)
    assert re.search(r"\bvmovups\s+[^\n]*%[yz]mm", assembly)


def test_a_broadcast_scalar_input_is_read_at_index_zero():
    """np.zeros_like(x) reaches a kernel as a zero-stride view of one element (the program's
    loop reads it before anything folds it away): the kernel reads its element at index 0, not
    through strides numba cannot see are zero, which made its loads gathers (mandelbrot at 4M:
    47 -> 26 ms)."""

    def iterate(cr, ci):
        zr, zi = np.zeros_like(cr), np.zeros_like(ci)
        count = np.zeros(cr.shape, dtype=np.int32)
        for _ in range(3):
            inside = zr * zr + zi * zi <= 4.0
            zr, zi = np.where(inside, zr * zr - zi * zi + cr, zr), np.where(inside, 2 * zr * zi + ci, zi)
            count += inside
        return count
    rng = np.random.default_rng(6)
    cr, ci = rng.uniform(-2, 1, (40, 48)), rng.uniform(-1.5, 1.5, (40, 48))
    jitted = flowjit.jit(iterate)
    np.testing.assert_array_equal(jitted(cr, ci), iterate(cr, ci))
    ((name, source),) = jitted.lower(cr, ci).kernel_sources().items()
    assert re.search(r"in\d_broadcast_to\w*\[0, 0\]", source), source
    if platform.machine().lower() in ("x86_64", "amd64"):
        kernel, _ = kernel_twins(source, name, fma=False)
        code = kernel.py_func.__code__
        inputs = {"cr": cr, "ci": ci}
        zeros = np.broadcast_to(np.zeros(()), (40, 48))                 # as the driver passes it
        kernel(*(inputs.get(parameter.split("_", 1)[1], zeros) if parameter.startswith("in")
                 else np.empty((40, 48), np.int32) for parameter in code.co_varnames[:code.co_argcount]))
        assert not re.search(r"\bvgather", "".join(kernel.inspect_asm().values()))


def laplacian_energy(u):
    lap = (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4 * u[1:-1, 1:-1]) / 0.01**2
    return lap, np.mean(lap**2)


def reductions_of_views(u):
    """Reductions of shifted interiors over every strategy: all axes (parts), the rows, the
    columns, argmax along rows (read element by element) and a 3-D view's middle axis."""
    d = u[1:-1, 2:] - u[1:-1, :-2]
    cube = u[:, 1:].reshape(2, SIDE // 2, SIDE - 1)[:, 1:, :-1]
    return (d.sum(), np.max(d, axis=1), d.mean(axis=0), np.argmax(u[2:, 1:-1] * 3, axis=1),
            np.argmin(u[:-2, 1:-1], axis=0), (cube * 2).sum(axis=1), np.var(u[1:-1, 1:-1], axis=1))


def test_reduction_kernels_read_views_through_pitches_and_match_numpy():
    """A reduction of a stencil (the mean of a Laplacian's square) read its five views through
    strides numba cannot see are 1, as gathers: laplacian at 4M float64 elements ran 11.6 ms,
    4.6 through pitches."""
    rng = np.random.default_rng(11)
    u = rng.standard_normal((SIDE, SIDE))
    jitted = flowjit.jit(laplacian_energy)
    ((name, source),) = jitted.lower(u).kernel_sources().items()
    assert re.search(r"row\d_in\d_slice\w* = in\d_slice\w*\[i0 \* in\d_slice\w*_p0 \+ low:", source), source
    got, want = jitted(u), laplacian_energy(u)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
    jitted = flowjit.jit(reductions_of_views)
    sources = "".join(jitted.lower(u).kernel_sources().values())
    assert sources.count("_p0") >= 8, sources
    for index, (got, want) in enumerate(zip(jitted(u), reductions_of_views(u))):
        assert got.dtype == want.dtype, index
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-11, err_msg=f"result {index}")
    if platform.machine().lower() in ("x86_64", "amd64"):
        from flowjit.compiler.codegen.driver import pitched
        kernel, _ = kernel_twins(source, name, fma=False)
        views = [u[2:, 1:-1], u[:-2, 1:-1], u[1:-1, 2:], u[1:-1, :-2], u[1:-1, 1:-1]]
        kernel(*[part for view in views for part in pitched(view)], np.empty((SIDE - 2, SIDE - 2)), np.empty(1))
        assembly = "".join(kernel.inspect_asm().values())
        assert not re.search(r"\bvgather", assembly)
        assert re.search(r"\bvmovupd\s+[^\n]*%[yz]mm", assembly)
