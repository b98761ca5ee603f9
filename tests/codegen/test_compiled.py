"""Compiled programs (fused and unfused) against numpy and the reference interpreter.

Tolerances follow the least precise float dtype a program computes in (its inputs and
outputs): float64 within rtol 1e-9, float32 within 2e-5, float16 within 2e-3, relative to
each element and to the result's largest magnitude (sums and differences cancel);
integers and booleans exactly.  Kernels may fuse a*b+c into one rounding (fma=True), so
a float32 intermediate can differ from numpy's by an ulp even when the result is float64.
"""

import re

import numpy as np
import pytest
from hypothesis import given, settings

import flowjit
from flowjit.compiler.ir import ops
from corpus_sample import program_corpus_sample, sampled
from helpers import assert_same_result, close, kernel_twins, packed, tolerance_for
from programs import PROGRAMS
from random_programs import random_programs

def assert_close(actual, expected, args=()):
    rtol = tolerance_for(expected, args)
    assert_same_result(actual, expected, exact=rtol == 0.0, rtol=rtol)


def _corpus_cases():
    """Every program fused; unfused (a kernel per op) the covering sample of the corpus
    (corpus_sample.py: every op on every combination of input dtypes the corpus uses), the
    rest unfused under ``make test-slow`` (the sweep marker)."""
    sample = program_corpus_sample()
    for program in PROGRAMS:
        for fuse in (True, False):
            yield pytest.param(program, fuse, id=f"{program.name}-{'fused' if fuse else 'unfused'}",
                               marks=[] if fuse else sampled(program.name, sample))


@pytest.mark.parametrize("program, fuse", list(_corpus_cases()))
def test_program_compiled_matches_numpy(program, fuse):
    jitted = flowjit.jit(program.fun, static_argnums=program.static_argnums, fuse=fuse)
    for seed in (3, 4):
        args = program.make_args(np.random.default_rng(seed))
        with np.errstate(all="ignore"):
            expected = program.fun(*args)
        assert_close(jitted(*args), expected, args)


def _check_random_program(program) -> None:
    args = program.make_args(np.random.default_rng(2))
    lowered = flowjit.jit(program).lower(*args)
    expected = flowjit.interpret(lowered.graph, *args)
    for fuse in (True, False):
        got = flowjit.jit(program, fuse=fuse)(*args)
        got = got if isinstance(got, tuple) else (got,)
        for value, want in zip(got, expected):
            value = np.asarray(value)
            assert value.dtype == want.dtype and value.shape == want.shape, program.describe()
            rtol = tolerance_for(want, args) if want.dtype.kind == "f" else 0.0
            assert close(value, want, rtol), f"fuse={fuse}: {value!r} vs {want!r}\n{program.describe()}"


@settings(max_examples=15)
@given(random_programs(max_steps=8))
def test_random_programs_compiled_match_the_interpreter(program):
    """Random programs, fused and unfused, against the interpreter.  15 derandomised programs
    here (each compiles its own kernels: 30 took 30 s of a cold run); 200 under ``make
    test-slow`` (test_more_random_programs_compiled_match_the_interpreter), and ``make fuzz``
    (tests/fuzz.py: the same check on 2,000 fresh programs of up to 10 steps, with variables
    too)."""
    _check_random_program(program)


@pytest.mark.sweep
@settings(max_examples=200)
@given(random_programs(max_steps=8))
def test_more_random_programs_compiled_match_the_interpreter(program):
    """test_random_programs_compiled_match_the_interpreter on 200 programs (a sweep: ``make
    test-slow`` runs it)."""
    _check_random_program(program)


def test_reductions_of_zero_d_values():
    """A reduction over no axes is a cast (or 0 for argmax); var/std expand into them too."""
    def program(v):
        return (np.max(np.max(v)), np.sum(v), np.mean(v), np.argmax(v), np.prod(v.astype(np.int32)),
                np.var(v), np.std(v, ddof=1), np.sum(v.astype(np.int8)))
    value = np.array(-1.43, np.float32)
    with np.errstate(all="ignore"):
        expected = program(value)
    assert_close(flowjit.jit(program)(value), expected)


def test_reductions_over_axes_of_extent_one_inside_a_kernel():
    """Found by the multi-device property test: a reduction over an axis of extent 1 whose
    source the kernel also returns, or whose source is an earlier reduction of the kernel."""
    x = np.random.default_rng(0).standard_normal((4, 1)).astype(np.float32)

    def returned_source(x):
        a = np.abs(x)
        return a, a.max(axis=1)

    def reduced_twice(x):
        return np.abs(x), x.max(axis=1, keepdims=True).max(axis=1)
    for function in (returned_source, reduced_twice):
        expected = flowjit.jit(function, backend="interpreter")(x)
        assert_close(flowjit.jit(function)(x), expected, (x,))


def assert_matches_interpreter(jitted, args, label) -> None:
    """Every output of ``jitted`` on ``args`` within tolerance of the interpreter's (exact
    for integers and booleans)."""
    with np.errstate(all="ignore"):
        expected = flowjit.interpret(jitted.lower(*args).graph, *args)
        got = jitted(*args)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(expected)
    for index, (value, want) in enumerate(zip(got, expected)):
        rtol = tolerance_for(want, args[:1]) if want.dtype.kind == "f" else 0.0
        assert close(np.asarray(value), want, rtol), f"{label}, output {index}: {value} vs {want}"


# float64 (the float lanes float32 flushes into, so the same code as float32's) under ``make test-slow``.
@pytest.mark.parametrize("dtype", ["float32", pytest.param("float64", marks=pytest.mark.sweep), "int32", "bool"])
def test_long_row_reductions_use_lanes_and_match_the_interpreter(dtype):
    """Rows of 128 elements or more reduce through 64 stack-array lanes and a tree: lengths
    around the lane width and the switch-over, NaN and infinities in the blocks and in the
    tail, every reduction (argmax and argmin find the extreme through the lanes, then its
    first position; over every axis of the matrix, as one merged row)."""
    def program(x):
        return (x.sum(axis=1), x.mean(axis=1), x.max(axis=1), x.min(axis=1), x.prod(axis=1),
                x.sum(axis=0), x.max(axis=(0, 1)), (x * 2).min(axis=1, keepdims=True),
                np.any(x, axis=1), np.all(x, axis=1), np.argmax(x, axis=1), np.argmin(x, axis=1),
                np.argmax(x), np.argmin(x[::-1]))
    rng = np.random.default_rng(11)
    jitted = flowjit.jit(program)
    for length in (127, 128, 64 * 3 + 63):        # (short lanes; a whole number of blocks; a last block)
        x = rng.uniform(0.5, 1.5, (5, length))
        if dtype.startswith("float"):
            x[1, rng.integers(length)] = np.nan           # somewhere
            x[2, length - 1] = np.nan                     # in the tail
            x[3, 0] = np.inf
            x[4, 70] = -np.inf
        elif dtype == "int32":
            x = rng.integers(-3, 4, (5, length))
        else:
            x = x > 1.49
        x = x.astype(dtype)
        assert_matches_interpreter(jitted, (x,), f"length {length}")


def _layernorm_and_max(x):
    centered = x - x.mean(axis=1, keepdims=True)
    return centered / np.sqrt((centered * centered).mean(axis=1, keepdims=True) + 1e-5), (centered * 3).max(axis=1)


@pytest.mark.parametrize("program, dtype, scratch", [
    (_layernorm_and_max, "float64", {"s_sub"}),
    (_layernorm_and_max, "float32", {"s_sub"}),                     # float32 lanes, flushed to float64
    (lambda x: ((x * 2).prod(axis=1), (x * 2).sum(axis=1)), "float32", {"s_mul"}),   # prod: float64 lanes
    (lambda x: (x * 2).sum(axis=1), "int32", {"s_mul"}),                            # int64 accumulator
])
def test_reductions_run_in_the_loop_that_computes_their_row_unless_it_would_narrow_it(program, dtype, scratch):
    """A reduction of a computed row accumulates in the loop that computes it (no scratch
    row written and read back) when its lanes are no wider than the row; a float32 product
    (float64 lanes) or an int32 sum (int64) reduces a scratch row after the loop, which
    keeps the loop vectorised at the row's width.  All match the interpreter, with a tail."""
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((3, 200)) * (3 if dtype == "int32" else 1)).astype(dtype)
    jitted = flowjit.jit(program)
    (source,) = jitted.lower(x).kernel_sources().values()
    assert set(re.findall(r"\b(s_\w+) = fj.heap_array", source)) == scratch, source
    got, expected = jitted(x), flowjit.interpret(jitted.lower(x).graph, x)
    got = got if isinstance(got, tuple) else (got,)        # the interpreter returns a list of outputs
    assert len(got) == len(expected)
    for value, want in zip(got, expected):
        assert close(np.asarray(value), want, tolerance_for(want, (x,)) if want.dtype.kind == "f" else 0.0)


def test_float32_sums_of_long_rows_stay_as_accurate_as_numpy():
    """float32 sum lanes pass into float64 every 16 blocks: a 2**20-element row of values
    near 0.1 sums within 1e-7 of the exact sum, as numpy's pairwise sum does (float32 lanes
    adding 16384 elements each are off by 3e-6 on it)."""
    x = (0.1 + np.random.default_rng(9).uniform(0, 1e-3, (2, 1 << 20))).astype(np.float32)
    exact = x.astype(np.float64).sum(axis=1)
    got = flowjit.jit(lambda x: x.sum(axis=1))(x)
    assert np.all(np.abs(got - exact) / exact < 1e-7), (got, exact, x.sum(axis=1))
    assert np.all(np.abs(x.sum(axis=1) - exact) / exact < 1e-7)


def test_row_reduction_lanes_vectorise():
    """The lane loop of a reduce kernel compiles to packed arithmetic: a reduction costs
    a fraction of a nanosecond per element, not a dependent add per element."""
    def program(x):
        return x.sum(axis=1), x.max(axis=1)
    x = np.ones((2, 256), np.float32)
    assembly = ""
    for name, source in flowjit.jit(program).lower(x).kernel_sources().items():   # one kernel, both reductions
        kernel, _ = kernel_twins(source, name, fma=False)
        outputs = kernel.py_func.__code__.co_argcount - 1
        kernel(x, *(np.empty(2, np.float32) for _ in range(outputs)))
        assembly += "".join(kernel.inspect_asm().values())
    assert packed(assembly, "add", np.float32), "the float32 sum lanes are not packed"
    assert packed(assembly, "add", np.float64), "the float64 lanes they flush into are not packed"
    assert packed(assembly, "max", np.float32), "the float32 max lanes are not packed"


def _outer_axes(x, w):
    return (x.sum(axis=0), x.mean(axis=0), x.max(axis=0, keepdims=True), x.min(axis=0), x.prod(axis=0),
            (x * w).sum(axis=0) * w, np.any(x > 1, axis=0))


# float64 (no 16-row flush: float32's code without it) under ``make test-slow``.
@pytest.mark.parametrize("dtype", ["float32", pytest.param("float64", marks=pytest.mark.sweep), "int32"])
def test_reductions_over_outer_axes_match_the_interpreter(dtype):
    """Reductions that keep the innermost axis (x.sum(axis=0)) run over blocks of adjacent
    outputs: widths around the block of 1024 outputs, row counts around the 16-row float32
    flush, NaN and infinities, a broadcast input in the producer and in what follows, and
    three-dimensional inputs reduced over their first or middle axes."""
    rng = np.random.default_rng(12)
    jitted = flowjit.jit(_outer_axes)
    for rows, columns in ((1, 5), (16, 1024), (37, 1030), (130, 2049)):
        x = rng.uniform(0.5, 1.5, (rows, columns))
        if dtype == "int32":
            x = rng.integers(-3, 4, (rows, columns))
        elif rows > 1:
            x[rows // 2, 3] = np.nan
            x[rows - 1, columns - 1] = np.inf
            x[0, 1] = -np.inf
        x, w = x.astype(dtype), rng.uniform(0.5, 1.5, columns).astype(dtype)
        (source,) = jitted.lower(x, w).kernel_sources().values()
        assert "for c in range(high - low):" in source
        assert_matches_interpreter(jitted, (x, w), f"{rows}x{columns}")
    cube = rng.standard_normal((3, 40, 1100)).astype(dtype)

    def three(c):
        return c.sum(axis=1), c.max(axis=(0, 1)), (c * 2).mean(axis=0, keepdims=True)
    assert_matches_interpreter(flowjit.jit(three), (cube,), "cube")


def test_reductions_over_outer_axes_vectorise_in_both_variants():
    """The innermost loop reads rows through slices, so the parallel variant (whose block
    bounds come from the scheduler) has no gathers; a float32 column sum stays as accurate
    as a float64 one."""
    x = (0.1 + np.random.default_rng(2).uniform(0, 1e-3, (1 << 16, 4))).astype(np.float32)
    exact = x.astype(np.float64).sum(axis=0)
    got = flowjit.jit(lambda x: x.sum(axis=0))(x)
    assert np.all(np.abs(got - exact) / exact < 1e-7), (got, exact)
    small = np.ones((64, 2048), np.float32)
    ((name, source),) = flowjit.jit(lambda x: x.mean(axis=0)).lower(small).kernel_sources().items()
    for function, kernel in zip(("kernel", "kernel_parallel"), kernel_twins(source, name, fma=False)):
        kernel(small, np.empty(2048, np.float32))
        assembly = "".join(kernel.inspect_asm().values())
        assert packed(assembly, "add", np.float32), function
        assert not re.search(r"\bvgather", assembly), function


def _column_statistics(x, w):
    centred = x - x.mean(axis=0)
    return centred / x.std(axis=0), (x - w) ** 2, ((x - w) ** 2).sum(axis=0) + w, x.var(axis=0)


# float64 (the same plans and loops as float32's) under ``make test-slow``.
@pytest.mark.parametrize("dtype", ["float32", pytest.param("float64", marks=pytest.mark.sweep)])
def test_outer_axis_reductions_store_their_full_shaped_values_in_the_same_pass(dtype):
    """z-scores over axis 0: the variance's kernel also returns the centred values it reduces.
    It reduces blocks of columns and stores those values in the same loop, through slices
    (a row plan walked each column, striding the whole table: zscore ran 14x slower); widths
    around the block of 1024, a three-dimensional input, NaN."""
    from flowjit.compiler.ir.plan import KernelKind, ReduceStrategy
    from flowjit.compiler.ir import ops
    rng = np.random.default_rng(19)
    jitted = flowjit.jit(_column_statistics)
    for shape in ((1, 3), (5, 64), (37, 1030), (4, 6, 130)):
        x = rng.standard_normal(shape).astype(dtype)
        w = rng.standard_normal(shape[-1]).astype(dtype)
        if x.shape[0] > 1:
            x[1, 2] = np.nan
        plans = [n.attrs["plan"] for n in jitted.lower(x, w).fused.nodes if n.op is ops.fused]
        reduce_plans = [p for p in plans if p.kind is KernelKind.REDUCE]
        if x.shape[0] > 1:                  # one row: the reduced axis is 1 wide, a plain row plan
            assert reduce_plans and all(p.strategy is ReduceStrategy.COLUMNS for p in reduce_plans), plans
            assert any(row.store for p in reduce_plans for row in p.passes), plans
        with np.errstate(all="ignore"):
            assert_matches_interpreter(jitted, (x, w), f"{shape}")
            assert_matches_interpreter(flowjit.jit(_column_statistics, fuse=False), (x, w), f"unfused {shape}")


def _stencil_mean_square(u, w):
    lap = u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4 * u[1:-1, 1:-1]
    return lap, np.mean(lap ** 2), (u.T * w).sum(), (u[1:] * 2).sum()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_reductions_of_strided_views_over_every_axis_read_them_in_place(dtype):
    """A Laplacian's mean square reduces strided interior slices over both axes: merging the
    axes into one row put a reshape on each slice, and numpy's reshape of a strided view is
    a copy (five copies of the grid).  Such kernels keep their axes; a slice along the first
    axis only stays contiguous and is still merged."""
    rng = np.random.default_rng(23)
    jitted = flowjit.jit(_stencil_mean_square)
    for n in (4, 9, 40):
        u = rng.standard_normal((n, n)).astype(dtype)
        w = rng.standard_normal(n).astype(dtype)
        fused = jitted.lower(u, w).fused
        reshaped = [n.inputs[0].producer.op.name for n in fused.nodes
                    if n.op is ops.reshape and n.inputs[0].producer is not None
                    and n.inputs[0].producer.op is not ops.fused]
        assert reshaped == ["slice"], fused                                  # u[1:] only
        assert_matches_interpreter(jitted, (u, w), f"{n}x{n}")


def test_trailing_reduced_axes_are_read_as_one_row():
    """x.sum() of a matrix and x.sum(axis=(1, 2)) of a cube are written as row reductions
    over the merged trailing axes (no scratch copy of the input); inputs broadcast over all
    of them or none, non-contiguous views, keepdims, two passes (a softmax over two axes)
    and a value spanning only some of them (written as before) all match the interpreter."""
    rng = np.random.default_rng(21)
    cube = rng.standard_normal((3, 40, 70)).astype(np.float32)
    cube[1, 5, 6] = np.nan
    w = rng.standard_normal((3, 1, 1)).astype(np.float32)
    row = rng.standard_normal(70).astype(np.float32)

    def programs(c, w, row):
        e = np.exp(c - c.max(axis=(1, 2), keepdims=True))
        return (c.sum(), c.max(), (c * w).sum(axis=(1, 2)), c.mean(axis=(1, 2), keepdims=True),
                e / e.sum(axis=(1, 2), keepdims=True), (c * row).sum(axis=(1, 2)))
    jitted = flowjit.jit(programs)
    strided = np.ascontiguousarray(cube.transpose(0, 2, 1)).transpose(0, 2, 1)
    for label, c in (("C order", cube), ("a strided view", strided)):
        assert_matches_interpreter(jitted, (c, w, row), label)
    merged = flowjit.jit(lambda m: m.sum()).lower(np.ones((64, 300), np.float32)).kernel_sources()
    (source,) = merged.values()
    assert "# k0_sum: reduce kernel" in source
    kernel = source[source.index("def kernel("):]
    assert "ninner = n0\n" in kernel and "n1 =" not in kernel and "s_m = " not in kernel, kernel


def test_whole_domain_reductions_run_in_parts():
    """x.sum() and friends reduce parts of at least 64K elements in parallel, combined in
    order: sizes around the part size, NaN in a later part, -inf, a fused producer, a
    matrix (its axes merged first), argmax and argmin (ties, and the NaN), against the
    interpreter; float32 sums stay as accurate as numpy's."""
    rng = np.random.default_rng(30)

    def whole(x):
        return (x.sum(), x.max(), (x * 2).min(), x.mean(), np.abs(x).sum(), np.any(x > 3), np.argmax(x),
                np.argmin(np.round(x * 2)))
    jitted = flowjit.jit(whole)
    for shape in ((100,), (65535,), (3 * 65536 + 17,), (300, 1100)):
        x = rng.standard_normal(shape).astype(np.float32)
        if x.size > 70000:
            x.flat[x.size - 5] = np.nan
            x.flat[70000] = -np.inf
        (source,) = jitted.lower(x).kernel_sources().values()
        assert "partials_max[part] = total_max" in source
        assert_matches_interpreter(jitted, (x,), str(shape))
    x = (0.1 + rng.uniform(0, 1e-3, 1 << 21)).astype(np.float32)
    exact = x.astype(np.float64).sum()
    assert abs(flowjit.jit(lambda x: x.sum())(x) - exact) / exact < 1e-7


def test_whole_domain_reductions_over_strided_views_run_in_parts_of_rows():
    """A reduction of everything over several axes no reshape merges (a stencil's interior,
    a 3-D slice) runs in parallel parts of whole rows, the pass storing its full-shaped value
    too: more parts than rows, one part, a partial last part, float32 and float64, sums,
    means, max/min, a NaN; an int32 sum (wider lanes) and argmax keep the row plan."""
    rng = np.random.default_rng(31)

    def stencil(u):
        lap = u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4 * u[1:-1, 1:-1]
        return lap, np.mean(lap ** 2), lap.max(), np.abs(lap).min()

    def cube(v):
        inner = v[1:, :, ::2] * 2
        return inner.sum(), inner.max()

    stencil_jit, cube_jit = flowjit.jit(stencil), flowjit.jit(cube)
    for dtype in (np.float32, np.float64):
        for shape in ((5, 7), (4, 70000), (300, 700)):
            u = rng.standard_normal(shape).astype(dtype)
            if u.size > 100000:
                u.flat[u.size - 3 * shape[1] // 2] = np.nan
            (plan,) = [n.attrs["plan"] for n in stencil_jit.lower(u).fused.nodes
                       if n.op.name == "fused" and n.attrs["plan"].strategy]
            assert plan.strategy.value == "parts" and plan.passes[0].store, plan
            assert_matches_interpreter(stencil_jit, (u,), f"{shape} {dtype.__name__}")
        v = rng.standard_normal((9, 130, 301)).astype(dtype)
        (source,) = cube_jit.lower(v).kernel_sources().values()
        assert "for row in range(part * nrows // nparts" in source, source
        assert_matches_interpreter(cube_jit, (v,), f"cube {dtype.__name__}")
    ints = rng.integers(-9, 9, (300, 700)).astype(np.int32)
    for program in (lambda m: m[1:, 1:].sum(), lambda m: np.argmax(m[1:, 1:])):
        jitted = flowjit.jit(program)
        (plan,) = [n.attrs["plan"] for n in jitted.lower(ints).fused.nodes if n.op.name == "fused"]
        assert plan.strategy.value == "rows", plan
        assert_matches_interpreter(jitted, (ints,), "int32")


@pytest.mark.parametrize("shape", [(3, 4), (4, 4), (2, 3)])
def test_a_per_row_value_broadcast_against_a_column_is_not_fused_into_the_rows(shape):
    """Found by `make fuzz`: argmin(x, 1) < x.max(1, keepdims=True) is an outer comparison (row
    value j against row value i); fusing it into the row kernel embedded both of its
    dimensions along the row axis, computing a diagonal.  Siblings: other per-row reductions,
    either operand order, and a following elementwise op."""
    x = np.random.default_rng(4).integers(-5, 6, shape).astype(np.int32)

    def programs(x):
        per_row = np.argmin(x, axis=1)
        column = np.max(x, axis=1, keepdims=True)
        return (np.less(np.logical_not(per_row), column), np.sin(column),
                per_row - x.sum(axis=1, keepdims=True), np.maximum(column, x.mean(axis=1)) * 2,
                x.min(axis=1) + x.max(axis=1, keepdims=True))
    for fuse in (True, False):
        assert_close(flowjit.jit(programs, fuse=fuse)(x), programs(x), (x,))


def test_constants_stay_constants_in_the_parallel_variant():
    """Kernel constants are literals where they are used: numba outlines a prange loop into a
    function whose arguments are the locals the loop reads, so a constant assigned before the
    loop reached LLVM as an argument, and an integer division by it compiled to an idiv per
    element (packed pixels' // 65536 % 256 ran 25x slower in parallel than serially).  Both
    variants divide by multiplying: the serial kernel never divides, and the parallel twin
    only where one of a kernel that divides nothing does (a part's bounds)."""
    import platform
    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("checks x86 division instructions")

    def luma(pixels, t):
        r, g, b = pixels // 65536 % 256, pixels // 256 % 256, pixels % 256
        return (299 * r + 587 * g + 114 * b) // 1000, (t * 6364136223846793005 + 1442695040888963407) % (1 << 31)

    def divisions(function, *arguments) -> dict[str, int]:
        sources = flowjit.jit(function).lower(*arguments).kernel_sources()
        assert sources
        counts = {}
        for name, source in sources.items():
            for twin, kernel in zip(("kernel", "kernel_parallel"), kernel_twins(source, name, fma=False)):
                code = kernel.py_func.__code__
                inputs = dict(zip(function.__code__.co_varnames, arguments))
                kernel(*(inputs[parameter.split("_", 1)[1]] if parameter.startswith("in") else np.empty(1000, np.int64)
                         for parameter in code.co_varnames[:code.co_argcount]))
                assembly = "".join(kernel.inspect_asm().values())
                counts[f"{twin} of {name}"] = len(re.findall(r"\bi?div[lq]?\b", assembly))
        return counts
    pixels, t = np.arange(-500, 500, dtype=np.int32) * 40_000, np.arange(1000, dtype=np.int64)
    for got, want in zip(flowjit.jit(luma)(pixels, t), luma(pixels, t)):
        np.testing.assert_array_equal(got, want)
    (parts,) = [count for twin, count in divisions(lambda t: t * 3 + 1, t).items()
                if twin.startswith("kernel_parallel")]
    for twin, count in divisions(luma, pixels, t).items():
        assert count <= (parts if twin.startswith("kernel_parallel") else 0), f"{twin} divides"


def test_a_loop_kernels_parallel_twin_runs_the_serial_kernel_on_parts_with_its_bits():
    """The parallel twin of a loop kernel calls the serial kernel on a part of the outer axis a
    thread, slicing the arguments that span it (broadcast ones go whole, a transposed one as a
    view), for any number of rows, fewer than the threads and none included, with the serial
    kernel's bits.  A kernel reading through pitches (a stencil's shifted interior) keeps its
    loop nest under prange."""

    def broadcasts(x, row, column):
        return np.tanh(x * row + column), x - 1

    def transposed(x, y):
        return np.exp(x + y.T)

    def stencil(u):
        return u[1:-1, 2:] + u[1:-1, :-2] - 2 * u[1:-1, 1:-1]
    rng = np.random.default_rng(5)
    cases = [(broadcasts, lambda n: (rng.standard_normal((n, 33)).astype(np.float32),
                                     rng.standard_normal(33).astype(np.float32),
                                     rng.standard_normal((n, 1)).astype(np.float32))),
             (transposed, lambda n: (rng.standard_normal((n, 9)), rng.standard_normal((9, n))))]
    for function, make in cases:
        arguments = make(40)
        lowered = flowjit.jit(function).lower(*arguments)
        ((name, source),) = lowered.kernel_sources().items()
        assert "kernel(" in source[source.index("def kernel_parallel("):], source
        (node,) = [n for n in lowered.fused.nodes if n.op is ops.fused]
        serial, parallel = kernel_twins(source, name)
        for rows in (0, 1, 2, 3, 40):
            inputs = make(rows)
            inputs = (inputs[0], inputs[1].T) if function is transposed else inputs
            outputs = [[np.empty((rows,) + tuple(v.shape[1:]), v.dtype) for v in node.outputs] for _ in range(2)]
            serial(*inputs, *outputs[0])
            parallel(*inputs, *outputs[1])
            for a, b in zip(*outputs):
                np.testing.assert_array_equal(a, b)
    u = rng.standard_normal((300, 300))
    ((name, source),) = flowjit.jit(stencil).lower(u).kernel_sources().items()
    assert "for i0 in prange(n0):" in source and "fj.part_bounds" not in source, source
    np.testing.assert_allclose(flowjit.jit(stencil)(u), stencil(u), rtol=1e-12, atol=1e-12)


def test_a_column_reductions_parallel_twin_gives_every_thread_columns_and_the_serial_bits():
    """The parallel twin of a reduction over outer axes splits the outputs into blocks narrow
    enough for every thread (a column sum of 1024 outputs was one block), each output adding
    its rows in the serial order: the serial kernel's bits, for any number of columns."""

    def statistics(x):
        return np.exp(x).sum(axis=0), x.max(axis=0)
    rng = np.random.default_rng(8)
    x = rng.standard_normal((40, 1024)).astype(np.float32)
    ((name, source),) = flowjit.jit(statistics).lower(x).kernel_sources().items()
    assert "width = fj.column_block(n1, " in source[source.index("def kernel_parallel("):], source
    serial, parallel = kernel_twins(source, name)
    for columns in (1, 15, 16, 17, 1000, 1024, 2500):
        x = rng.standard_normal((37, columns)).astype(np.float32) * 10
        outputs = [[np.empty(columns, np.float32) for _ in range(2)] for _ in range(2)]
        serial(x, *outputs[0])
        parallel(x, *outputs[1])
        for a, b in zip(*outputs):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(outputs[1][0], np.exp(x.astype(np.float64)).sum(axis=0), rtol=1e-6)
        np.testing.assert_array_equal(outputs[1][1], x.max(axis=0))


def test_rows_of_several_kept_axes_run_in_parallel_chunks():
    """A row reduction that keeps several axes (a softmax over each of 8 heads' rows) chunks all
    of its rows: chunking the first kept axis alone gave 8 heads one parallel task."""
    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True), x.sum(axis=-1)
    x = np.random.default_rng(12).standard_normal((3, 70, 130)).astype(np.float32)
    jitted = flowjit.jit(softmax)
    sources = jitted.lower(x).kernel_sources().values()
    assert all("nrows = n0 * n1" in source and "for chunk in prange((nrows + 63) // 64):" in source
               for source in sources), sources
    for got, want in zip(jitted(x), softmax(x)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # a first kept axis long enough to chunk keeps plain loops over the others (no division
    # per row: 2x2 max pooling has a million rows of four)
    long = np.random.default_rng(13).standard_normal((300, 4, 130)).astype(np.float32)
    sources = jitted.lower(long).kernel_sources().values()
    assert all("nrows" not in source and "for i1 in range(n1):" in source for source in sources), sources
    for got, want in zip(jitted(long), softmax(long)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
