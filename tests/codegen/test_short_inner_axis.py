"""Loop kernels whose innermost axis is short (an HWC image's 3 channels with a per-pixel alpha
or a per-channel mean broadcast against them): the axis runs with its extent a constant, and
the arrays along it through views that say so (mathlib.known_last_extent), so LLVM unrolls the
short loop and vectorises the loop around it."""

import re

import numpy as np
import pytest

import flowjit
from flowjit.compiler.codegen.driver import PARALLEL_MIN_ELEMENTS
from helpers import check_against_interpreter as _check, compiled_serial, packed


def normalize(img):
    mean = np.array([0.485, 0.456, 0.406], dtype=np.float32)
    std = np.array([0.229, 0.224, 0.225], dtype=np.float32)
    return (img.astype(np.float32) / 255.0 - mean) / std


def blend(a, b, alpha):
    return a * alpha[..., None] + b * (1 - alpha[..., None])


def per_vector(v, w):
    # (n, k) vectors scaled per vector and offset per component
    return v * w[:, None] + np.arange(v.shape[1])


def grid(x, w):
    # (4, 5, c) with a weight per middle position: the axes do not collapse
    return np.tanh(x) * w[:, None] - x


def _loop_kernels(jitted, args):
    lowered = jitted.lower(*args)
    return {name: source for name, source in lowered.kernel_sources().items() if "loop kernel" in source}


rng = np.random.default_rng(3)


def _cases(channels, dtype=np.float32):
    image = rng.integers(0, 256, (7, 9, 3), dtype=np.uint8)
    short = channels * np.dtype(dtype).itemsize < 32            # writer.SHORT_AXIS_BYTES
    return [
        pytest.param(normalize, (image,), True, id="normalize-u8"),
        pytest.param(normalize, (image[::2, 1:],), True, id="normalize-strided-view"),
        pytest.param(blend, (rng.random((5, 6, channels)).astype(dtype), rng.random((5, 6, channels)).astype(dtype),
                             rng.random((5, 6)).astype(dtype)), short, id=f"blend-{channels}"),
        pytest.param(per_vector, (rng.standard_normal((33, channels)).astype(dtype), rng.standard_normal(33).astype(dtype)),
                     channels * 8 < 32, id=f"vectors-{channels}"),      # (+ an int64 arange: float64)
        pytest.param(grid, (rng.standard_normal((4, 5, channels)).astype(dtype),
                            rng.standard_normal(5).astype(dtype)), short, id=f"grid-{channels}"),
    ]


@pytest.mark.parametrize("program, args, short", _cases(3) + _cases(2, np.float64)[2:] + _cases(7)[2:]
                         + _cases(8)[2:] + _cases(4, np.float64)[2:])
def test_results_match_the_interpreter(program, args, short):
    jitted = flowjit.jit(program)
    sources = _loop_kernels(jitted, args)
    assert any("fj.known_last_extent" in s for s in sources.values()) == short, sources
    _check(jitted, args)


def test_the_parallel_twin_too(tmp_path):
    """Large enough for the parallel twin, compiled before the call: the views are taken
    inside the parallel loop (outlined with the arrays as arguments)."""
    n = PARALLEL_MIN_ELEMENTS // 3 + 11
    args = (rng.random((n, 3), np.float32), rng.random((n, 3), np.float32), rng.random(n, np.float32))
    _check(flowjit.jit(blend, cache_dir=str(tmp_path), background_compile=False), args)


def test_the_loop_around_a_short_axis_is_vectorised():
    """Compiled with flowjit's flags, the serial kernel of a per-channel normalisation of a
    uint8 image runs the loop over pixels in vectors, reading the channels as an interleaved
    group (a shuffle taking every third lane), and computes in packed float32 lanes.  Its loop
    over 3 channels had a vector body too, for rows of 8 channels or more, never run."""
    img = rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)
    jitted = flowjit.jit(normalize)
    (name, source), = _loop_kernels(jitted, (img,)).items()
    (node,) = [n for n in jitted.lower(img).fused.nodes if n.name == name]
    arrays = [img.reshape(v.shape) if v.dtype == np.uint8 else np.empty(v.shape, v.dtype)
              for v in list(node.inputs) + list(node.outputs)]
    kernel = compiled_serial(source, name, arrays)
    assert packed("".join(kernel.inspect_asm().values()), "arith", np.float32), source
    assert re.search(r"shufflevector <\d+ x i8> [^\n]*<i32 0, i32 3, i32 6, i32 9",
                     "".join(kernel.inspect_llvm().values())), source
