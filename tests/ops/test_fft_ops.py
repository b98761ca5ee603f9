"""numpy.fft (compiler/ir/ops/fft.py, frontend/spectral.py): every transform with numpy's n, axis
and norm and numpy's dtypes, bit for bit on every path (each runs numpy's own pocketfft); the n-d
transforms in numpy's order; kernels before and after a transform; the IR; and the errors."""

import numpy as np
import pytest

import flowjit
from flowjit.compiler.ir import parse, print_graph
from flowjit.errors import OpTypeError, ShapeError, TracerConversionError
from test_array_ops import PATHS, line_of

RNG = np.random.default_rng(31)
F64 = RNG.normal(size=(6, 10))
F32 = RNG.normal(size=(4, 9)).astype(np.float32)
C128 = RNG.normal(size=(5, 8)) + 1j * RNG.normal(size=(5, 8))
C64 = C128.astype(np.complex64)
I32 = RNG.integers(-50, 50, (3, 8)).astype(np.int32)


def exact(function, *args):
    """numpy's result bit for bit (dtype and shape too) on every path."""
    want = function(*args)
    for path, options in PATHS.items():
        got = flowjit.jit(function, **options)(*args)
        for value, expected in zip(got if isinstance(got, tuple) else (got,),
                                   want if isinstance(want, tuple) else (want,)):
            np.testing.assert_array_equal(value, expected, err_msg=path, strict=True)


@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft"])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_one_axis_transforms_match_numpy_bit_for_bit(name, norm):
    transform = getattr(np.fft, name)
    inputs = (F64, F32, I32) if name.startswith("r") else (F64, F32, C128, C64, I32)
    if name == "irfft":
        inputs = (C128, C64, F64)

    def f(x):
        return (transform(x, norm=norm), transform(x, axis=0, norm=norm), transform(x, n=5, norm=norm),
                transform(x, n=17, axis=-2, norm=norm))
    for x in inputs:
        exact(f, x)


def test_n_dimensional_transforms_and_shifts_are_numpys():
    cube = RNG.normal(size=(4, 6, 8))

    def f(x, z, c):
        return (np.fft.fft2(x), np.fft.ifft2(z), np.fft.rfft2(x), np.fft.irfft2(z), np.fft.irfft2(z, s=(5, 9)),
                np.fft.fftn(c), np.fft.fftn(c, axes=(0, 2)), np.fft.fftn(c, s=(3, 4), axes=(2, 0)),
                np.fft.fftn(c, s=(-1, 7), axes=(0, 2)), np.fft.fftn(c, axes=()),
                np.fft.ifftn(c, norm="ortho"), np.fft.rfftn(c), np.fft.irfftn(np.fft.rfftn(c), axes=(0, 1, 2)),
                np.fft.rfftn(c, axes=(1, 0)), np.fft.fftshift(x), np.fft.ifftshift(x, axes=1),
                np.fft.fftshift(np.fft.fftfreq(c.shape[2])) * c[0, 0, 0])
    exact(f, F64, C128, cube)


def test_kernels_around_a_transform():
    """A window before and a power after rfft, fused into kernels on each side of numpy's call."""
    frames = RNG.normal(size=(16, 64))

    def spectrum(frames):
        window = np.hanning(frames.shape[1])
        power = np.abs(np.fft.rfft(frames * window, axis=1)) ** 2
        return 10 * np.log10(power + 1e-12)

    want = spectrum(frames)
    for path, options in PATHS.items():
        np.testing.assert_allclose(flowjit.jit(spectrum, **options)(frames), want, rtol=1e-12, err_msg=path)
    lowered = flowjit.jit(spectrum).lower(frames)
    text = lowered.as_text(stage="fused")
    assert "= rfft %k0_mul {n=64, axis=1} : c128[16,33]" in text
    assert text.count("= fused") == 2
    graph = lowered.graph
    assert print_graph(parse(print_graph(graph))) == print_graph(graph)


def test_a_fast_convolution():
    """Linear convolution through the transforms, as signal code spells it."""
    def convolve(x, h):
        n = len(x) + len(h) - 1
        return np.fft.irfft(np.fft.rfft(x, n) * np.fft.rfft(h, n), n)
    x, h = RNG.normal(size=100), RNG.normal(size=12)
    for path, options in PATHS.items():
        np.testing.assert_allclose(flowjit.jit(convolve, **options)(x, h), np.convolve(x, h), atol=1e-12,
                                   err_msg=path)


def test_errors_name_the_transform_and_the_line():
    def complex_input(z):
        return np.fft.rfft(z)  # rfft-complex
    with pytest.raises(OpTypeError, match=r"np\.fft\.rfft is not defined for complex128") as info:
        flowjit.jit(complex_input)(C128)
    assert info.value.location.line == line_of(complex_input, "rfft-complex")

    def no_points(x):
        return np.fft.fft(x, n=0)  # zero-n
    with pytest.raises(ShapeError, match=r"np\.fft\.fft: invalid number of data points \(0\) specified") as info:
        flowjit.jit(no_points)(F64)
    assert info.value.location.line == line_of(no_points, "zero-n")
    with pytest.raises(ShapeError, match=r"np\.fft\.ifft: norm 'unitary' is not one of backward, ortho, forward"):
        flowjit.jit(lambda x: np.fft.ifft(x, norm="unitary"))(F64)
    with pytest.raises(ShapeError, match=r"np\.fft\.fft: axis 2 is out of bounds"):
        flowjit.jit(lambda x: np.fft.fft(x, axis=2))(F64)
    with pytest.raises(ShapeError, match=r"np\.fft\.fft needs an array of at least 1 dimension, got f64\[\]"):
        flowjit.jit(lambda x: np.fft.fft(x.sum()))(F64)
    with pytest.raises(TracerConversionError, match=r"np\.fft\.fft: n must be known while tracing"):
        flowjit.jit(lambda x, n: np.fft.fft(x, n=n))(F64, np.int64(4))
    with pytest.raises(ShapeError, match=r"np\.fft\.fft2: s \(4,\) and axes \(-2, -1\) differ in length"):
        flowjit.jit(lambda x: np.fft.fft2(x, s=(4,)))(F64)
