"""Short rows reduced across a block of rows (the ``across`` strategy): each pass is a loop over
the row position outside one over the block's rows, an accumulator per row, so what a row's
totals feed (the log of a log-sum-exp) runs in vector lanes across rows too."""

import numpy as np
import pytest

import flowjit
from flowjit.compiler.codegen.reduce_across import BLOCK
from flowjit.compiler.ir.plan import ReduceStrategy
from flowjit.compiler.passes.plan_reductions import ACROSS_MIN_ROWS, ACROSS_ROW
from helpers import check_against_interpreter, kernel_twins, packed

rng = np.random.default_rng(11)


def logsumexp(x):
    m = x.max(axis=-1)
    return m + np.log(np.exp(x - m[..., None]).sum(axis=-1))


def gmm(x, means, sigmas, weights):
    log_prob = (np.log(weights) - np.log(sigmas) - 0.5 * np.log(2 * np.pi)
                - 0.5 * ((x[:, None] - means) / sigmas) ** 2)
    m = log_prob.max(axis=1, keepdims=True)
    return (m[:, 0] + np.log(np.exp(log_prob - m).sum(axis=1))).sum()


def statistics(x, y):
    # a per-row value known before any pass (y * 2), a two-pass variance, a product, a minimum
    return y * 2 + x.mean(axis=1), x.var(axis=1), np.prod(x * 0.5 + 1, axis=1), x.min(axis=1), \
        np.abs(x).max(axis=1) / (x.std(axis=1) + 1)


def norms(x):
    return np.sqrt((x * x).sum(axis=1)), np.linalg.norm(x, axis=1, ord=1)


def integers(i):
    return i.sum(axis=1), (i % 7).max(axis=1), (i > 0).any(axis=1), (i > -50).all(axis=1), i.min(axis=1)


def complex_rows(z):
    return (z * z).sum(axis=1), np.abs(z).mean(axis=1)


def pools(img):
    h, w = img.shape
    windows = img.reshape(h // 2, 2, w // 2, 2)
    return windows.mean(axis=(1, 3)), windows.max(axis=(1, 3))


def outer_and_inner(x):
    return x.sum(axis=(0, 2)), (x * x).max(axis=(0, 2)), x.mean(axis=(0, 2)) - x.min(axis=(0, 2))


def window_two_passes(img):
    # a window's log-sum-exp: the sine computed in the first pass is read again from scratch
    h, w = img.shape
    s = np.sin(img.reshape(h // 2, 2, w // 2, 2)) * 3
    m = s.max(axis=(1, 3), keepdims=True)
    return np.log(np.exp(s - m).sum(axis=(1, 3))) + m[:, 0, :, 0]


def sliced_logsumexp(x):
    return logsumexp(x[:, 1:8])          # a strided view: read through pitches from 128K elements on


def other_dtypes(h, i):
    return h.sum(axis=1), h.max(axis=1), i.mean(axis=1), (i > 0).sum(axis=1), np.abs(i).prod(axis=1)


def with_specials(x):
    x = x.copy()
    x[1, 2] = np.nan                  # NaN wins the max and the sum
    x[3] = -np.inf                    # a row of -inf: x - max is NaN, as numpy's
    x[4, 0] = np.inf
    return x


def _mixture(n, k=16):
    weights = rng.random(k)
    return (rng.standard_normal(n) * 3, np.linspace(-4, 4, k), rng.uniform(0.5, 2, k), weights / weights.sum())


CASES = [
    pytest.param(logsumexp, (rng.standard_normal((16, 2)),), id="logsumexp-f64-16x2"),
    pytest.param(logsumexp, (with_specials(rng.standard_normal((70, 7)) * 30).astype(np.float32),),
                 id="logsumexp-f32-70x7-specials"),
    pytest.param(logsumexp, (rng.standard_normal((3, 20, 7)),), id="logsumexp-f64-3x20x7"),
    pytest.param(logsumexp, (rng.standard_normal((2, 65, 5)).astype(np.float32),), id="logsumexp-f32-2x65x5"),
    pytest.param(gmm, _mixture(131), id="gmm-131x16"),
    pytest.param(gmm, _mixture(2 * BLOCK), id="gmm-two-whole-blocks"),
    pytest.param(statistics, (rng.standard_normal((65, 33)), rng.standard_normal(65)), id="statistics-f64-65x33"),
    pytest.param(statistics, (rng.standard_normal((17, ACROSS_ROW - 1)).astype(np.float32),
                              rng.standard_normal(17).astype(np.float32)), id="statistics-f32-17x63"),
    pytest.param(norms, (rng.standard_normal((100, 3)).astype(np.float32),), id="norms-f32-100x3"),
    pytest.param(integers, (rng.integers(-100, 100, (90, 9)).astype(np.int32),), id="integers-i32-90x9"),
    pytest.param(integers, (rng.integers(-100, 100, (40, 12)),), id="integers-i64-40x12"),
    pytest.param(pools, (with_specials(rng.standard_normal((16, 80))).astype(np.float32),), id="pools-2x2-windows"),
    pytest.param(outer_and_inner, (rng.standard_normal((5, 40, 3)).astype(np.float32),), id="axes-0-and-2-5x40x3"),
    pytest.param(window_two_passes, (rng.standard_normal((10, 66)),), id="window-two-passes-scratch"),
    pytest.param(logsumexp, (rng.standard_normal((2, 3, 20, 7)).astype(np.float32),), id="logsumexp-2x3x20x7"),
    pytest.param(sliced_logsumexp, (rng.standard_normal((20000, 10)).astype(np.float32),), id="pitched-20000x7"),
    pytest.param(other_dtypes, (rng.standard_normal((40, 9)).astype(np.float16),
                                rng.integers(-9, 9, (40, 9)).astype(np.int32)), id="float16-int-mean-bool-sum"),
    pytest.param(complex_rows, (rng.standard_normal((33, 6)) + 1j * rng.standard_normal((33, 6)),),
                 id="complex-33x6"),
]


def _reduce_plans(jitted, *args):
    return [n.attrs["plan"] for n in jitted.lower(*args).fused.nodes
            if n.op.name == "fused" and n.attrs["plan"].strategy is not None]


@pytest.mark.parametrize("program, args", CASES)
def test_short_rows_reduce_across_rows_and_match_the_interpreter(program, args):
    """Rows of 2 to 63 elements, 16 to 131 of them (a partial last block, several kept axes,
    windows of several axes), float, integer, boolean and complex
    reductions, one to three passes: the kernel that reduces the rows runs across them, and
    every result is the interpreter's."""
    jitted = flowjit.jit(program)
    plans = _reduce_plans(jitted, *args)
    assert any(p.strategy is ReduceStrategy.ACROSS for p in plans), plans
    check_against_interpreter(jitted, args)


@pytest.mark.parametrize("program, shape", [
    pytest.param(lambda x: np.argmax(x, axis=1), (70, 7), id="argmax"),
    pytest.param(lambda x: np.exp(x - x.max(axis=1, keepdims=True)), (70, 7), id="full-shaped-output"),
    pytest.param(logsumexp, (70, ACROSS_ROW), id="rows-as-long-as-ACROSS_ROW"),
    pytest.param(logsumexp, (ACROSS_MIN_ROWS - 1, 7), id="too-few-rows"),
    pytest.param(logsumexp, (40, 3, 7), id="short-last-kept-axis"),
])
def test_other_rows_keep_their_strategy(program, shape):
    """An argmax (a first position), a full-shaped output (a block would store it down its
    columns), rows of ACROSS_ROW or more, fewer than ACROSS_MIN_ROWS rows along the last kept
    axis: the rows strategy, results the interpreter's."""
    x = rng.standard_normal(shape)
    jitted = flowjit.jit(program)
    plans = _reduce_plans(jitted, x)
    assert plans and all(p.strategy is ReduceStrategy.ROWS for p in plans), plans
    check_against_interpreter(jitted, (x,))


@pytest.mark.parametrize("program, x", [
    pytest.param(logsumexp, (rng.standard_normal((1000, 16)) * 5).astype(np.float32), id="f32-one-kept-axis"),
    pytest.param(logsumexp, rng.standard_normal((1000, 16)) * 5, id="f64-one-kept-axis"),
    pytest.param(logsumexp, rng.standard_normal((3, 5, 150, 7)), id="f64-three-kept-axes"),
    pytest.param(window_two_passes, rng.standard_normal((40, 300)).astype(np.float32), id="f32-window"),
])
def test_the_across_kernel_is_packed_and_its_parallel_twin_has_its_bits(program, x):
    """Compiled with flowjit's flags, the kernel computes in packed lanes (as rows, a row of 16
    was two blocks of lanes and a scalar log); under prange (blocks in parallel, and the outer
    kept axes with them in one loop), the same bits."""
    jitted = flowjit.jit(program)
    lowered = jitted.lower(x)
    (node,) = [n for n in lowered.fused.nodes
               if n.op.name == "fused" and n.attrs["plan"].strategy is ReduceStrategy.ACROSS]
    assert len(node.inputs) == 1, node
    source = lowered.kernel_sources()[node.name]
    serial, parallel = kernel_twins(source, node.name)
    results = []
    for kernel in (serial, parallel):
        outputs = [np.empty(v.shape, v.dtype) for v in node.outputs]
        kernel(x.reshape(node.inputs[0].shape), *outputs)
        results.append(outputs)
    for got, want in zip(*results):
        np.testing.assert_array_equal(got, want, strict=True)
    check_against_interpreter(jitted, (x,))
    assembly = "".join(serial.inspect_asm().values())
    assert packed(assembly, "arith", x.dtype), source


def test_inputs_read_along_and_across_rows_are_copied_once_per_block():
    """An input that runs along the row and every kept axis is copied into the block's buffer,
    position-major, and the passes read the copy (read in place, consecutive rows were gathers:
    a log-sum-exp over rows of 16 float32 ran 27.8 ms on one thread, 7.6 from the copy); one
    the other blocks read alike (a pairwise distance's second operand) and a window's are read
    in place."""
    def pairwise(x):
        return np.sqrt(((x[:, None, :] - x[None, :, :]) ** 2).sum(axis=-1))

    cases = [(logsumexp, rng.standard_normal((100, 16)), True), (pairwise, rng.standard_normal((40, 3)), False),
             (pools, rng.standard_normal((16, 80)), False)]
    for program, x, staged in cases:
        jitted = flowjit.jit(program)
        source = "".join(jitted.lower(x).kernel_sources().values())
        assert ("st0_in0_" in source) == staged, source
        if staged:
            assert "= fj.stack_array(np.float64, 1024)" in source and "x = st0_in0_x[t * 64 + r]" in source, source
        check_against_interpreter(jitted, (x,))


def test_copies_stay_within_the_stack_budget():
    """Each input read along and across rows gets a copy (a transposed view too, its own), bool
    inputs a copy of bools; past STAGE_BYTES of copies in a block (two rows of 40 float64
    make 40 KB; complex128 rows of 63 one of 64 KB) the rest is read in place."""
    from flowjit.compiler.codegen.reduce_across import STAGE_BYTES

    def two_ways(x):
        return (x + x.T).sum(axis=1), x.max(axis=1)

    def counts(b):
        return b.sum(axis=1), b.any(axis=1)

    def wide(z):
        return (z * z).sum(axis=1), np.abs(z).max(axis=1)

    cases = [(two_ways, rng.standard_normal((20, 20)), 2), (two_ways, rng.standard_normal((40, 40)), 1),
             (counts, rng.standard_normal((100, 16)) > 0, 1),
             (wide, rng.standard_normal((70, 63)) + 1j * rng.standard_normal((70, 63)), 0)]
    assert 2 * 40 * 64 * 8 > STAGE_BYTES >= 40 * 64 * 8 and 63 * 64 * 16 > STAGE_BYTES
    for program, x, copies in cases:
        jitted = flowjit.jit(program)
        assert any(p.strategy is ReduceStrategy.ACROSS for p in _reduce_plans(jitted, x))
        source = "".join(jitted.lower(x).kernel_sources().values())
        staged = {line.split("=")[0].strip() for line in source.splitlines() if "= fj.stack_array(" in line
                  and line.strip().startswith("st")}
        assert len(staged) == copies, (copies, source)
        check_against_interpreter(jitted, (x,))
