"""Chains of inlined math functions run in stages: the innermost loop goes over blocks of
elements, one loop per function of the chain, through stack buffers, so no iteration is a
long dependent chain (8 chained float32 tanh: 2.1 ns each unstaged, 0.76 staged)."""

import re

import numpy as np
import pytest

import flowjit
from flowjit.compiler.codegen.writer import PARALLEL, SERIAL, STAGE_BLOCK
from helpers import close, kernel_twins, packed, tolerance_for


def _chain(function, length):
    def program(x):
        for _ in range(length):
            x = function(x)
        return x
    return program


def _kernel(jitted, *args) -> tuple[str, str]:
    ((name, source),) = jitted.lower(*args).kernel_sources().items()
    return name, source


def _stage_loops(source: str, name: str) -> int:
    body = source[source.index(f"def {SERIAL}("):source.index(f"def {PARALLEL}(")]
    return len(re.findall(r"^\s+for j in range\(count\):", body, re.M))


def _assert_matches(jitted, args, fuse_too=True) -> None:
    with np.errstate(all="ignore"):
        expected = flowjit.interpret(jitted.lower(*args).graph, *args)
        for variant in ([jitted, flowjit.jit(jitted.fun, fuse=False)] if fuse_too else [jitted]):
            got = variant(*args)
            got = got if isinstance(got, tuple) else (got,)
            for value, want in zip(got, expected):
                rtol = tolerance_for(want, args[:1]) if want.dtype.kind == "f" else 0.0
                assert close(np.asarray(value), want, rtol), (value, want)


# make test runs each function on one dtype (tanh float32, exp float64): every chain length, both
# dtypes' lanes and both functions; the other two pairs run under ``make test-slow`` (the sweep
# marker; the tanh float64 chain is 20 s of a cold compile).
@pytest.mark.parametrize("function, dtype", [
    pytest.param(np.tanh, np.float32, id="tanh-float32"),
    pytest.param(np.tanh, np.float64, id="tanh-float64", marks=pytest.mark.sweep),
    pytest.param(lambda x: np.exp(-x * x), np.float32, id="exp-float32", marks=pytest.mark.sweep),
    pytest.param(lambda x: np.exp(-x * x), np.float64, id="exp-float64"),
])
def test_chains_of_one_to_eight_functions_stay_packed(function, dtype):
    """1 to 8 chained functions: one stage per function from two on (none for one); both the
    serial and the parallel kernel of 8 compute in packed lanes, and their results match the
    interpreter's.  The kernels are compiled here, with flowjit's flags (cached code has no
    assembly), and run directly: running the chain through flowjit as well compiled the serial
    kernel a second time (the driver's path through staged kernels is checked below)."""
    x = np.random.default_rng(0).uniform(-3, 3, STAGE_BLOCK * 2 + 37).astype(dtype)
    for length in range(1, 9):
        jitted = flowjit.jit(_chain(function, length))
        name, source = _kernel(jitted, x)
        assert _stage_loops(source, name) == (length if length >= 2 else 0), source
        if length == 8:
            (expected,) = flowjit.interpret(jitted.lower(x).graph, x)
            for variant, kernel in zip((SERIAL, PARALLEL), kernel_twins(source, name)):
                out = np.empty_like(x)
                kernel(x, out)
                assert close(out, expected, tolerance_for(expected, (x,))), (variant, out, expected)
                assembly = "".join(kernel.inspect_asm().values())
                assert packed(assembly, "arith", dtype) or packed(assembly, "arith", np.float64), (variant, length)


def test_staged_kernels_with_several_outputs_broadcasts_and_booleans():
    """Values cross stages through buffers (booleans too), outputs are stored in the stage that
    computes them, broadcast operands are read in every stage, the last block is partial, and
    the outer loops of a 2-d domain stay outside the blocks."""
    def program(x, row):
        a = np.tanh(x) * row
        positive = a > 0
        b = np.exp(a) + x
        c = np.where(positive, np.tanh(b), -b)          # positive crosses from stage 1 to 3
        return np.log1p(np.abs(c)), a, positive
    rng = np.random.default_rng(4)
    # (rows of 11: shorter than a block, longer than SHORT_AXIS, whose loops are not staged)
    for shape in ((3, STAGE_BLOCK + 44), (2, 11), (1, 3 * STAGE_BLOCK)):
        x = rng.standard_normal(shape).astype(np.float32)
        row = rng.standard_normal(shape[1:]).astype(np.float32)
        jitted = flowjit.jit(program)
        name, source = _kernel(jitted, x, row)
        assert _stage_loops(source, name) == 4, source
        assert re.search(r"stage_gt = fj.stack_array\(np.uint8", source), source        # the boolean a > 0
        _assert_matches(jitted, (x, row))


def test_parallel_staged_kernels_keep_their_buffers_per_thread():
    """Above the parallel threshold the blocks run under prange: each thread's buffers are its
    own (a shared one would mix elements of different blocks)."""
    x = np.random.default_rng(5).uniform(-2, 2, (1 << 20) + 13).astype(np.float32)
    program = _chain(np.tanh, 3)
    got = flowjit.jit(program)(x)
    assert close(got, program(x), 2e-5)


@pytest.mark.parametrize("program", [
    pytest.param(lambda x: np.sin(np.exp(x * 0.1)).sum(), id="whole-domain-sin-of-exp"),
    pytest.param(lambda x: np.sin(x).sum(axis=-1), id="rows-sin"),
    pytest.param(lambda x: np.tanh(np.tanh(x) * 2.0).mean(axis=-1), id="rows-tanh-chain"),
    pytest.param(lambda x: np.cos(x).max() + np.sin(x * 2.0).sum(), id="two-reductions"),
])
def test_reductions_of_chains_run_their_blocks_of_lanes_in_stages(program):
    """A reduction whose loop only computes what it reduces runs each block of its lanes in
    stages, as loop kernels do (chains of routines, routines with fast paths), adding the last
    stage's values into the lanes; a block with an argument beyond sin's fast bound or a NaN
    takes the exact routine; the tail after the blocks runs unstaged.  (Before: one loop whose
    iterations computed the whole chain; the hosts bench's chain, 88 -> 16 ms.)"""
    rng = np.random.default_rng(8)
    for shape in ((3, 1000), (2 * 65536 + 77,)):
        x = rng.uniform(-3, 3, shape).astype(np.float32)
        flat = x.reshape(-1)
        flat[70] = 4.0e7
        flat[200] = np.nan
        jitted = flowjit.jit(program)
        sources = jitted.lower(x).kernel_sources()
        reducing = [source for source in sources.values() if "lanes_" in source]
        assert reducing and all("# stage 1\n" in source for source in reducing), sources
        _assert_matches(jitted, (x,), fuse_too=False)


@pytest.mark.parametrize("body", [
    pytest.param(lambda old: np.sin(old * 3) + old, id="sin-of-computed"),
    pytest.param(lambda old: np.tanh(np.tanh(old)) + old, id="tanh-chain"),
    pytest.param(lambda old: (np.cos(old * 3) * old, old * 5), id="an-output-from-stage-1"),
])
@pytest.mark.parametrize("shape", [(1000,), (3, 700), ((1 << 18) + 300,)], ids=["1d", "2d", "parallel"])
def test_a_staged_kernel_that_assigns_a_variable_in_place_reads_its_old_value(body, shape):
    """The driver lets a kernel write a variable's buffer that it also reads when it reads each
    element at the index it writes (driver.old_value_dead); a staged loop keeps that by storing
    every output in its last stage.  Before, an output stored in stage 1 was read back by
    stage 2 as the old value: ``np.sin(old * 3) + old`` gave ``np.sin(old * 3) + 2 * old``."""
    init = np.random.default_rng(9).uniform(-1, 1, shape).astype(np.float32)
    w = flowjit.Variable(init.copy(), name="w")

    @flowjit.jit
    def step():
        old = w.value()
        w.assign(old * 2)
        return body(old)
    got, want = step(), body(init)
    for value, expected in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        assert close(value, expected, 2e-6), (value, expected)
    assert np.array_equal(w.numpy(), init * 2)
