"""Programs placed on ``gpu:0`` run through the generated CUDA kernels on numba's CUDA simulator
(tests/conftest.py sets ``NUMBA_ENABLE_CUDASIM=1`` unless a GPU run asks otherwise), fused and
unfused, against the reference interpreter.  Skipped without the ``cuda`` extra."""

import pathlib
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import flowjit
from helpers import assert_same_result, tolerance_for
from random_programs import random_programs

sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "codegen"))
from test_kernel_golden import gelu, layernorm, rows, softmax  # noqa: E402

pytest.importorskip("numba_cuda", reason="numba-cuda is not installed (the cuda extra: pip install 'flowjit[cuda]')")

import flowjit.gpu as gpu  # noqa: E402

if not gpu.available():
    pytest.skip("numba-cuda sees no GPU and NUMBA_ENABLE_CUDASIM is not set", allow_module_level=True)

GPU = ["gpu:0"]


def with_nan(x):
    x = x.copy()
    x[1, 3] = np.nan
    return x


TIES = np.array([[1, 3, 3, 0], [2, 2, 2, 2], [np.nan, 5, np.nan, 1], [-np.inf, -np.inf, -np.inf, -np.inf],
                 [0, 1, 9, 9]], np.float32)

PROGRAMS = {
    "chain_f64": (lambda x: (x * 2.0 + 1.0) * x - np.abs(x) / 3.0, (rows((8,), np.float64),)),
    "gelu_f32": (gelu, (rows((4, 8)),)),
    "softmax": (softmax, (rows((4, 8)),)),
    "softmax_nan": (softmax, (with_nan(rows((4, 8))),)),
    "layernorm": (layernorm, (rows((3, 8)), rows((8,), seed=1), rows((8,), seed=2))),
    "row_sum_max_nan": (lambda x: (x.sum(axis=1), x.max(axis=1), x.min(axis=-1)), (with_nan(rows((4, 5))),)),
    "long_rows": (lambda x: (x.sum(axis=1), np.exp(x - x.max(axis=1, keepdims=True))), (rows((2, 300)),)),
    "column_mean": (lambda x: x.mean(axis=0), (rows((4, 8)),)),
    "whole_sum": (lambda x: x.sum(), (rows((4, 8)),)),
    "argmax_ties_nan": (lambda x: (np.argmax(x, axis=1), np.argmin(x, axis=1)), (TIES,)),
    "broadcast_outer": (lambda x, y: np.exp(x[:, None] - y[None, :]), (rows((4,)), rows((8,), seed=1))),
    "broadcast_scalar_row": (lambda x, b: np.maximum(x + b, x.sum()), (rows((3, 4)), rows((1, 4), seed=1))),
    "integer_ops": (lambda i: (i // 3) % 5 + i * 2 - (i > 0) + np.fmod(i, -3) + i // np.int32(0),
                    (np.arange(-8, 8, dtype=np.int32),)),
    "float_floor_mod": (lambda x, y: (x // y, x % y, np.floor(x), np.rint(x * 3), np.sign(x), x ** 2, x ** y),
                        (rows((6,)) * 4, np.array([1.5, -2, 0.5, 3, -0.25, 2], np.float32))),
    "integer_rounding": (lambda i, b: (np.floor(i), np.ceil(i), np.trunc(i), np.rint(i), np.floor(b)),
                         (np.arange(-4, 4, dtype=np.int32), np.array([True, False]))),
    "float16": (lambda x, y: x * y + np.float16(1.5), (rows((8,), np.float16), rows((8,), np.float16, 1))),
    "matmul_epilogue": (lambda a, b, bias: np.maximum(a @ b + bias, 0.0),
                        (rows((4, 6)), rows((6, 8), seed=1), rows((8,), seed=2))),
    "where_compare": (lambda x: np.where(x > 0, np.sqrt(np.abs(x)), -x), (rows((2, 3, 4)),)),
    "inverse_hyperbolic_cbrt_logaddexp": (
        lambda x, y: (np.cbrt(x * 8), np.arcsinh(x * 5), np.arccosh(np.abs(x) + 1), np.arctanh(x * 0.9),
                      np.logaddexp(x, y), np.logaddexp2(y * 3, x)),
        (with_nan(rows((4, 8))), rows((4, 8), seed=1))),
    "angles_signs_steps": (
        lambda x, y: (np.fabs(x), np.deg2rad(x * 90), np.rad2deg(y), np.signbit(x), np.copysign(y, x),
                      np.heaviside(x, y)),
        (with_nan(rows((4, 8))), rows((4, 8), seed=1))),
}


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_gpu_program_matches_the_interpreter(name, fuse):
    function, args = PROGRAMS[name]
    with np.errstate(all="ignore"):
        expected = flowjit.jit(function, backend="interpreter")(*args)
        actual = flowjit.jit(function, devices=GPU, fuse=fuse)(*args)
    exact = name in ("integer_ops", "argmax_ties_nan")
    assert_same_result(actual, expected, exact=exact, rtol=None if exact else tolerance_for(expected, args))


def _strategies(jitted, *args) -> set:
    return {n.attrs["plan"].strategy for n in jitted.lower(*args).fused.nodes if n.op.name == "fused"}


def _kernel_layouts(jitted, *args) -> str:
    return "\n".join(jitted.lower(*args).kernel_sources().values())


COLUMNS = {
    # (the innermost axis kept: column blocks of 32 columns by lanes of rows)
    "sum_axis0_ragged": (lambda x: x.sum(axis=0), (rows((37, 45)),)),             # a partial group, a lane short
    "stores_and_per_column": (lambda x: (np.exp(x), np.sqrt((np.exp(x) ** 2).mean(axis=0)) + 1),
                              (rows((9, 33)),)),
    "max_min_nan": (lambda x: (x.max(axis=0), x.min(axis=0)), (with_nan(rows((6, 40))),)),
    "middle_axis_int": (lambda i: i.sum(axis=1), (np.arange(3 * 10 * 34, dtype=np.int32).reshape(3, 10, 34) % 7,)),
    "two_outer_axes_f64": (lambda x: (x * x).sum(axis=(0, 1)) - x.mean(axis=(0, 1)),
                           (rows((4, 3, 35), np.float64),)),
    "bool_any": (lambda x: (x > 0.5).any(axis=0), (rows((7, 34)),)),
}


@pytest.mark.parametrize("split", [False, True], ids=["whole_columns", "split_rows"])
@pytest.mark.parametrize("name", sorted(COLUMNS))
def test_column_reductions_run_in_column_blocks(name, split, monkeypatch):
    """Reductions over outer axes (the plan's columns strategy) run as column blocks: a warp
    reads 32 adjacent columns (a block per column read them a row apart), and (``split``: at
    least COLUMN_SPLIT_ROWS rows, made 3 here) the rows are split across blocks whose partials
    the last block of each group adds in order.  Columns not a multiple of 32, rows not a
    multiple of the lanes or of the splits, NaN, integers, bools, two reduced axes."""
    from flowjit.compiler.codegen import cuda_layouts
    from flowjit.compiler.ir.plan import ReduceStrategy
    if split:
        monkeypatch.setattr(cuda_layouts, "COLUMN_SPLIT_ROWS", 3)
    function, args = COLUMNS[name]
    jitted = flowjit.jit(function, devices=GPU)
    assert ReduceStrategy.COLUMNS in _strategies(jitted, *args)
    sources = _kernel_layouts(jitted, *args)
    assert "ROW_THREADS = 256          # (a block: 32 columns by 8 lanes of rows)" in sources
    assert ("PART_SIZES = " in sources) is split
    with np.errstate(all="ignore"):
        expected = flowjit.jit(function, backend="interpreter")(*args)
        actual = jitted(*args)
    exact = args[0].dtype.kind != "f"
    assert_same_result(actual, expected, exact=exact, rtol=None if exact else tolerance_for(expected, args))


def test_short_rows_across_many_rows_get_a_thread_each(monkeypatch):
    """An across plan with at least THREAD_ROWS rows runs a thread per row (launched as a loop
    kernel), each pass a loop over its row in order: two passes (a log-sum-exp), a mean, NaN
    rows; fewer rows keep a block each."""
    from flowjit.compiler.codegen import cuda_layouts
    monkeypatch.setattr(cuda_layouts, "THREAD_ROWS", 40)

    def function(x):
        return np.log(np.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1)), x.mean(axis=1)
    assert "THREAD_ROWS" not in _kernel_layouts(flowjit.jit(function, devices=GPU), rows((20, 6)))
    for shape in ((45, 6), (131, 5)):
        x = with_nan(rows(shape))
        jitted = flowjit.jit(function, devices=GPU)
        assert "THREAD_ROWS = True" in _kernel_layouts(jitted, x)
        with np.errstate(all="ignore"):
            expected = flowjit.jit(function, backend="interpreter")(x)
            actual = jitted(x)
        assert_same_result(actual, expected, exact=False, rtol=tolerance_for(expected, (x,)))


def test_an_across_plan_runs_on_the_gpu_as_rows(monkeypatch):
    """Short rows the CPU reduces across rows (strategy across): the CUDA backend renders the
    plan as a block per row (fewer than THREAD_ROWS rows), and the results are the
    interpreter's.  Fused only, on 5 rows (ACROSS_MIN_ROWS made 4): each row is a block of
    simulated threads, and 16 rows took 30 s."""
    from flowjit.compiler.ir.plan import ReduceStrategy
    monkeypatch.setattr("flowjit.compiler.passes.plan_reductions.ACROSS_MIN_ROWS", 4)

    def function(x):
        return np.log(np.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1)), x.mean(axis=1)
    x = with_nan(rows((5, 4)))
    jitted = flowjit.jit(function, devices=GPU)
    plans = [n.attrs["plan"] for n in jitted.lower(x).fused.nodes if n.op.name == "fused"]
    assert any(plan.strategy is ReduceStrategy.ACROSS for plan in plans), plans
    with np.errstate(all="ignore"):
        expected = flowjit.jit(function, backend="interpreter")(x)
        actual = jitted(x)
    assert_same_result(actual, expected, exact=False, rtol=tolerance_for(expected, (x,)))


def test_gpu_program_runs_cuda_kernels():
    """The program placed on gpu:0 compiled its kernels with the CUDA backend (not the CPU's)."""
    from flowjit.compiler.codegen.cuda import CudaBackend
    lowered = flowjit.jit(softmax, devices=GPU).lower(rows((4, 8)))
    assert isinstance(lowered.backend, CudaBackend)
    executable = lowered.executable
    assert [kernel.serial.grid.reduce for kernel in executable.compiled] == [True]
    assert "cuda.syncthreads()" in executable.compiled[0].source


def test_a_long_row_uses_every_thread_of_the_block():
    """Rows longer than a block: each thread strides over the row, then the tree combines."""
    from flowjit.compiler.codegen.cuda import row_threads
    threads = row_threads()
    x = rows((2, 3 * threads + 5))
    lowered = flowjit.jit(lambda x: x.max(axis=1), devices=GPU).lower(x)
    launcher = lowered.executable.compiled[0].serial
    assert launcher.grid((x, np.empty(2, np.float32))) == (2, threads)
    x[1, 2 * threads + 7] = 100.0
    np.testing.assert_array_equal(flowjit.jit(lambda x: x.max(axis=1), devices=GPU)(x), x.max(axis=1))


# Fused in make test; unfused (a simulated launch per op: most of this test's minute of a cold
# run, for the same row passes, which the other tests run unfused at the default factor) under
# ``make test-slow`` (the sweep marker).
@pytest.mark.parametrize("unroll, fuse", [(1, True), (3, True),
                                          pytest.param(1, False, marks=pytest.mark.sweep),
                                          pytest.param(3, False, marks=pytest.mark.sweep)])
def test_row_passes_unrolled_by_any_factor_match_the_interpreter(unroll, fuse, monkeypatch):
    """A pass over a row not kept in registers (FLOWJIT_CUDA_ROW_SLOTS=0 here; rows longer than
    the slots hold) takes FLOWJIT_CUDA_ROW_UNROLL row elements a trip, then one at a time: rows
    shorter than one trip, ending inside one and spanning several, with stores, sums, means, max
    and argmax (whose first position must win), give the interpreter's results.  Blocks of 32
    threads (FLOWJIT_CUDA_ROW_THREADS): the same trips on a quarter of the simulated threads."""
    from flowjit.compiler.codegen.cuda import row_threads
    monkeypatch.setenv("FLOWJIT_CUDA_ROW_UNROLL", str(unroll))
    monkeypatch.setenv("FLOWJIT_CUDA_ROW_SLOTS", "0")
    monkeypatch.setenv("FLOWJIT_CUDA_ROW_THREADS", "32")
    threads = row_threads()
    for length in (5, threads * unroll + 7, 2 * threads * unroll + threads + 1):
        x = rows((3, length))
        x[1, length // 2] = x[1, length - 1] = 9.0       # (two maxima: the first one's position wins)
        lowered = flowjit.jit(lambda x: (softmax(x), layernorm(x, x[0], x[2]), np.argmax(x, axis=1)),
                              devices=GPU).lower(x)
        sources = [kernel.source for kernel in lowered.executable.compiled]
        assert any(f"({unroll} elements a trip" in source for source in sources) == (unroll > 1)
        expected = flowjit.jit(lambda x: (softmax(x), layernorm(x, x[0], x[2]), np.argmax(x, axis=1)),
                               backend="interpreter")(x)
        actual = flowjit.jit(lambda x: (softmax(x), layernorm(x, x[0], x[2]), np.argmax(x, axis=1)),
                             devices=GPU, fuse=fuse)(x)
        assert_same_result(actual, expected, exact=False, rtol=tolerance_for(expected, (x,)))


@pytest.mark.parametrize("threads", [32, pytest.param(64, marks=pytest.mark.sweep)])   # (64: make test-slow)
def test_rows_kept_in_registers_match_the_interpreter(threads, monkeypatch):
    """A row of at most FLOWJIT_CUDA_ROW_SLOTS times the threads is loaded once, each thread's
    elements into registers (inputs broadcast over the rows once per thread), and every pass
    reads them there: rows shorter than the block, of a whole number of slots and ending inside
    the last one, argmax ties, and reduced axes that are not the last, give the interpreter's
    results; the launch refuses another row length; rows too long for the slots are read again
    by each pass."""
    monkeypatch.setenv("FLOWJIT_CUDA_ROW_THREADS", str(threads))
    monkeypatch.setenv("FLOWJIT_CUDA_ROW_SLOTS", "4")

    def program(x, gamma):
        return softmax(x), layernorm(x, gamma, gamma * 2), np.argmax(x, axis=1)

    for length, slots in ((6, 1), (threads, 1), (2 * threads + 1, 3), (4 * threads, 4), (4 * threads + 2, 0)):
        x, gamma = rows((3, length)), rows((length,), seed=1)
        x[1, length // 2] = x[1, length - 1] = 9.0       # (two maxima: the first one's position wins)
        lowered = flowjit.jit(program, devices=GPU).lower(x, gamma)
        sources = [kernel.source for kernel in lowered.executable.compiled]
        kept = [source for source in sources if "row elements each in registers" in source]
        assert bool(kept) == bool(slots), (length, sources)
        assert all(f"ROW_THREADS = {min(threads, max(32, 1 << (length - 1).bit_length()))} " in s for s in kept)
        assert all(f"{slots} row elements each" in source for source in kept)
        expected = flowjit.jit(program, backend="interpreter")(x, gamma)
        assert_same_result(flowjit.jit(program, devices=GPU)(x, gamma), expected, exact=False,
                           rtol=tolerance_for(expected, (x, gamma)))
    y = rows((2, 3, 5))
    for axes in ((1, 2), (0, 2)):
        def over(y):
            return y.sum(axis=axes), y - y.mean(axis=axes, keepdims=True)
        (source,) = flowjit.jit(over, devices=GPU).lower(y).kernel_sources().values()
        assert "row elements each in registers" in source
        assert_same_result(flowjit.jit(over, devices=GPU)(y), flowjit.jit(over, backend="interpreter")(y),
                           exact=False, rtol=tolerance_for(y.sum(), (y,)))
    (kernel,) = flowjit.jit(softmax, devices=GPU).lower(rows((3, 6))).executable.compiled
    with pytest.raises(ValueError, match="holds rows of 6: got 7"):
        kernel.serial.grid((rows((3, 7)), rows((3, 7))))


@pytest.mark.parametrize("slots", ["0", "16"])
def test_row_kernels_name_copies_apart_skip_uniform_views_and_pad_with_real_elements(slots, monkeypatch):
    """Three row-kernel cases, in registers and read by each pass:
    - a per-row value (%sub_1) beside an unrolled copy of a row value (%sub's copy 1) keeps its own
      local;
    - a reduced axis only a broadcast constant spans gives the launch the kernel's own length;
    - a slot past the row's end computes on a real element, so log never sees its padding."""
    monkeypatch.setenv("FLOWJIT_CUDA_ROW_SLOTS", slots)
    monkeypatch.setenv("FLOWJIT_CUDA_ROW_THREADS", "32")

    def per_row_beside_copies(x):
        centred = x - x.mean(-1, keepdims=True)
        return centred * ((centred * centred).mean(-1, keepdims=True) - 0.5)

    cases = [(per_row_beside_copies, (rows((2, 200)),)),
             (lambda x: (np.zeros_like(x)[:, None] + np.zeros((3, 70), np.float32)).sum(axis=1) + x, (rows((3,)),)),
             (lambda x: np.log(x).sum(axis=1), (np.abs(rows((2, 100))) + 0.5,))]
    for function, args in cases:
        expected = flowjit.jit(function, backend="interpreter")(*args)
        assert_same_result(flowjit.jit(function, devices=GPU)(*args), expected, exact=False,
                           rtol=tolerance_for(expected, args))


def test_rows_whose_elements_would_not_fit_the_registers_are_read_again(monkeypatch):
    """More inputs' elements than REGISTER_WORDS registers: the kernel reads each pass's again."""
    monkeypatch.setenv("FLOWJIT_CUDA_ROW_SLOTS", "16")
    monkeypatch.setenv("FLOWJIT_CUDA_ROW_THREADS", "64")          # (16 slots of 5 inputs: 80 registers)
    args = [rows((2, 1024), seed=seed) for seed in range(5)]

    def program(a, b, c, d, e):
        total = a + b * c - d / (e * e + 1)
        return total - total.max(axis=1, keepdims=True)

    (source,) = flowjit.jit(program, devices=GPU).lower(*args).kernel_sources().values()
    assert "ROW_THREADS" not in source and "elements a trip" in source
    expected = flowjit.jit(program, backend="interpreter")(*args)
    assert_same_result(flowjit.jit(program, devices=GPU)(*args), expected, exact=False,
                       rtol=tolerance_for(expected, args))


@pytest.mark.parametrize("unroll", [1, 3])
def test_loop_kernels_unrolled_by_any_factor_match_the_interpreter(unroll, monkeypatch):
    """A loop kernel's grid-stride loop takes FLOWJIT_CUDA_LOOP_UNROLL elements a trip, then one at
    a time.  With two blocks (a real GPU's one wave covers millions of elements a trip; the
    simulator's grid would cover these in one) threads take whole trips, part of one and none:
    broadcast operands, several outputs and integer ops give the interpreter's results."""
    from flowjit.compiler.codegen import cuda
    monkeypatch.setenv("FLOWJIT_CUDA_LOOP_UNROLL", str(unroll))
    monkeypatch.setattr(cuda, "MAX_BLOCKS", 2)

    def program(x, row, column, i):
        y = np.tanh(x * row) - column
        return y, np.maximum(y, 0.0) * 2.0, (i // 3) % 5 - i * row.astype(np.int32)

    for columns in (7, 400, 1100):
        x, row, column = rows((3, columns)), rows((columns,), seed=1) * 4, rows((3, 1), seed=2)
        i = np.arange(3 * columns, dtype=np.int32).reshape(3, columns) - columns
        lowered = flowjit.jit(program, devices=GPU).lower(x, row, column, i)
        sources = [kernel.source for kernel in lowered.executable.compiled]
        assert any(f"({unroll} elements a trip" in source for source in sources) == (unroll > 1)
        with np.errstate(all="ignore"):
            expected = flowjit.jit(program, backend="interpreter")(x, row, column, i)
            actual = flowjit.jit(program, devices=GPU)(x, row, column, i)
        assert_same_result(actual, expected, exact=False, rtol=tolerance_for(expected, (x, row, column)))


WHOLE = {
    "sum": lambda x: x.sum(),
    "mean_of_squares": lambda x: np.mean((x - 1) ** 2),
    "abs_max_and_min": lambda x: (np.abs(x).max(), np.min(x)),
    "argmax_ties": np.argmax,
    "argmin_nan": lambda x: np.argmin(np.where(x > 2, np.nan, x)),
    "norm": lambda x: np.sqrt(np.sum(x * x)),
    "integer_sum": lambda x: (x * 10).astype(np.int32).sum(),
}


@pytest.mark.parametrize("most", [3, pytest.param(1024, marks=pytest.mark.sweep)])
def test_whole_domain_reductions_in_parts_match_the_interpreter(most, monkeypatch):
    """A reduction of the whole domain runs a block per part (at most ``most`` parts of
    PART_MIN elements, here made small); the last block to finish combines the partials in
    order: sums, means, max/min, argmax/argmin (the first position of the extreme, NaN the
    extreme) and the values computed from the totals, on sizes of one part, of many and not a
    multiple of the parts."""
    from flowjit.compiler.codegen import cuda_writer
    monkeypatch.setattr(cuda_writer, "PART_MIN", 16)
    monkeypatch.setattr(cuda_writer, "PART_THREADS", 32)
    monkeypatch.setattr(cuda_writer, "MAX_PARTS", most)
    for size in (5, 101):
        x = rows((size,))
        x[size // 3] = x[size - 2] = 9.0        # (two maxima: the first position wins)
        x[size // 2] = 3.0
        for name, function in WHOLE.items():
            lowered = flowjit.jit(function, devices=GPU).lower(x)
            kernel = lowered.executable.compiled[0]
            assert "nparts = cuda.gridDim.x" in kernel.source, name
            outputs = [np.empty(1) for _ in lowered.executable.kernel_sources] + [np.empty(1)] * (
                name == "abs_max_and_min")
            blocks, _ = kernel.serial.grid((x, *outputs))
            assert blocks == max(1, min(most, size // 16))
            with np.errstate(all="ignore"):
                expected = flowjit.jit(function, backend="interpreter")(x)
                actual = flowjit.jit(function, devices=GPU)(x)
            exact = name in ("argmax_ties", "argmin_nan", "integer_sum")
            assert_same_result(actual, expected, exact=exact, rtol=None if exact else tolerance_for(expected, (x,)))


def _device_exception(module: str, name: str):
    """An exception class posing as CuPy's (they cannot be raised without a GPU)."""
    return type(name, (RuntimeError,), {"__module__": module})


@pytest.mark.parametrize("module, name, expected, says", [
    ("cupy.cuda.memory", "OutOfMemoryError", flowjit.DeviceMemoryError, "out of memory on"),
    ("cupy_backends.cuda.api.runtime", "CUDARuntimeError", flowjit.DeviceFault, "may be unusable"),
])
def test_device_failures_name_the_node_and_the_users_line(module, name, expected, says, monkeypatch):
    """Out of device memory and a kernel fault, raised by CuPy while a kernel runs, become
    flowjit's errors naming the node, its ops and the user's line, CuPy's error chained; the
    program runs again once the device is fine."""
    from flowjit.compiler.codegen import cuda
    failure = _device_exception(module, name)

    def failing(self, *arrays):
        raise failure("cudaErrorMemoryAllocation: out of memory")
    jitted = flowjit.jit(lambda x: np.exp(x) * 2.0, devices=GPU)
    x = rows((4, 8))
    expected_result = jitted(x)
    from flowjit.compiler.codegen import cuda_launch
    with monkeypatch.context() as patch:
        patch.setattr(cuda.Launcher, "__call__", failing)                # (the simulator's launch)
        patch.setattr(cuda_launch.RawLauncher, "__call__", failing)      # (a GPU's)
        with pytest.raises(expected, match=rf"test_cuda_simulator.py:\d+: .*{says}.* running %k0_exp_mul \(exp, mul\)"
                                           rf"|test_cuda_simulator.py:\d+: .*running %k0_exp_mul \(exp, mul\).*{says}") as raised:
            jitted(x)
    assert isinstance(raised.value.__cause__, failure)
    np.testing.assert_array_equal(jitted(x), expected_result)


def test_errors_of_other_libraries_pass_unchanged():
    from flowjit.compiler.codegen.device_errors import device_error
    assert device_error(ValueError("negative power"), None) is None
    assert device_error(_device_exception("numpy.linalg", "LinAlgError")("singular"), None) is None


def test_gpu_beside_a_cpu_device():
    """A program split between cpu:0 and gpu:0: each partition's kernels come from its device's
    backend, and the transfers between them run on the multi-device executor."""
    from flowjit.compiler.codegen.cuda import CudaBackend

    def f(x):
        with flowjit.device("gpu:0"):
            e = np.exp(x - x.max(axis=1, keepdims=True))
        with flowjit.device("cpu:0"):
            return e / e.sum(axis=1, keepdims=True)
    x = rows((3, 8))
    jitted = flowjit.jit(f, devices=["cpu:0", "gpu:0"])
    lowered = jitted.lower(x)
    assert isinstance(lowered.backend_for("gpu:0"), CudaBackend)
    sources = lowered.kernel_sources()
    assert any("from numba import cuda" in s for s in sources.values())
    assert any("from numba import prange" in s for s in sources.values())
    np.testing.assert_allclose(jitted(x), softmax(x), rtol=1e-6)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(program=random_programs(max_steps=6))
def test_random_programs_on_the_gpu_match_the_interpreter(program):
    args = program.make_args(np.random.default_rng(0))
    with np.errstate(all="ignore"):
        expected = flowjit.jit(program, backend="interpreter")(*args)
        actual = flowjit.jit(program, devices=GPU)(*args)
    rtol = tolerance_for(args, expected)
    assert_same_result(actual, expected, exact=rtol == 0.0, rtol=rtol)


def test_kernels_of_one_source_and_other_dtypes_are_compiled_apart():
    """x > y renders the same source for float32 and float64 inputs; the PTX is compiled for one
    signature, so the key holds the argument types (the H100 review found both sharing one)."""
    from flowjit.compiler.codegen.cuda import CudaBackend
    backend = CudaBackend()
    kernels = []
    for dtype in (np.float32, np.float64):
        x = np.zeros(4, dtype)
        lowered = flowjit.jit(lambda x, y: x > y, devices=GPU).lower(x, x)
        (node,) = [n for n in lowered.fused.nodes if n.op.name == "fused"]
        kernels.append(backend.render(node))
    assert kernels[0].source == kernels[1].source
    assert backend.compile(kernels[0]).key != backend.compile(kernels[1]).key
    for dtype in (np.float64, np.float32):
        x, y = rows((8,), dtype), rows((8,), dtype, seed=1)
        np.testing.assert_array_equal(flowjit.jit(lambda x, y: x > y, devices=GPU)(x, y), x > y)
