"""Routines with a fast path (sin, cos and tan: Cody-Waite reductions below 2**20, against the
exact Payne-Hanek reduction for every argument): the fast paths' accuracy over their range, and
kernels that take them for exactly the blocks whose arguments all fit, in serial and parallel
twins, with the exact routines for the rest."""

import re

import mpmath
import numpy as np
import pytest
from numba import njit

import flowjit
from flowjit.compiler.codegen import library, mathlib_trig
from flowjit.compiler.codegen.driver import PARALLEL_MIN_ELEMENTS
from flowjit.compiler.codegen.writer import PARALLEL, SERIAL, STAGE_BLOCK
from flowjit.compiler.ir.ops.base import routine_ops
from helpers import packed

FAST = [name[:-len("_fast")] for name in library.FUNCTIONS if name.endswith("_fast")]
REFERENCE = {"sin": mpmath.sin, "cos": mpmath.cos, "tan": mpmath.tan}


def _runner(function):
    @njit(error_model="numpy", fastmath={"contract"})
    def run(x, out):
        for i in range(x.size):
            out[i] = function(x[i])
    return run


def _near_multiples_of_half_pi(count: int, dtype, rng) -> np.ndarray:
    """The floats nearest k pi/2 (and their neighbours) for random k below the bound."""
    ks = rng.integers(1, int(2.0 ** 20 * 2 / np.pi), count)
    near = np.array([float(mpmath.mpf(int(k)) * mpmath.pi / 2) for k in ks]).astype(dtype)
    return np.concatenate([np.nextafter(near, dtype(np.inf)), near, np.nextafter(near, dtype(-np.inf))])


def _ulps(got: np.ndarray, x: np.ndarray, reference) -> np.ndarray:
    """|got - f(x)| in ulps of the exact value (mpmath at 200 bits)."""
    with mpmath.workprec(200):
        exact = [reference(mpmath.mpf(float(value))) for value in x]
    spacing = np.spacing(np.abs(np.array([float(value) for value in exact]).astype(got.dtype))).astype(np.float64)
    return np.array([float(abs(mpmath.mpf(float(g)) - e)) for g, e in zip(got, exact)]) / spacing


def test_every_fast_path_has_its_check_and_exact_routine():
    assert sorted(FAST) == ["cos_f32", "cos_f64", "sin_f32", "sin_f64", "tan_f32", "tan_f64"]
    for name in FAST:
        assert f"{name}_fits" in library.FUNCTIONS and name in library.FUNCTIONS


def test_the_ops_that_declare_a_fast_path_are_the_routines_the_library_has_one_for():
    """Rendering reads ``Lowering.fast`` (it does not import the library); the library's names
    must agree with it at every float dtype."""
    declared = {op.lowering.routine for op in routine_ops().values() if op.lowering.fast}
    assert declared == {name.rsplit("_", 1)[0] for name in FAST}
    assert sorted(FAST) == sorted(f"{routine}_{suffix}" for routine in declared for suffix in ("f32", "f64"))


@pytest.mark.parametrize("name", FAST)
def test_fast_paths_are_as_accurate_as_the_exact_routines_below_their_bound(name):
    """Against the exact routine on 300,000 points over the whole range (any difference is
    at most one rounding: both are within an ulp of the truth), and against mpmath where
    they differ and at the floats nearest multiples of pi/2, where x mod pi/2 cancels most:
    within 1 ulp for sin and cos, 2 for tan (as the exact tan; the two differ by up to twice
    that).  Exhaustively over every
    float32 below the bound (1.2e9 inputs: ``/tmp`` scripts, not run here) the float32 fast
    paths were within 0.501 ulp of numpy's float64 results."""
    rng = np.random.default_rng(7)
    dtype = np.float32 if name.endswith("f32") else np.float64
    bound = 2.0 ** 20
    x = np.concatenate([rng.uniform(-bound, bound, 200_000), rng.uniform(-8, 8, 100_000)]).astype(dtype)
    x = np.nextafter(x, dtype(0)) if dtype == np.float32 else x         # (float32 rounding: |x| < bound)
    fast, exact = np.empty_like(x), np.empty_like(x)
    _runner(library.FUNCTIONS[f"{name}_fast"])(x, fast)
    _runner(library.FUNCTIONS[name])(x, exact)
    differ = fast != exact
    budget = 2.0 if name.startswith("tan") else 1.0
    assert np.all(np.abs(fast - exact) <= 2 * budget * np.spacing(np.abs(exact))), name
    assert _ulps(fast[differ][:300], x[differ][:300], REFERENCE[name[:3]]).max(initial=0.0) <= budget
    hard = _near_multiples_of_half_pi(300, dtype, rng)
    got = np.empty_like(hard)
    _runner(library.FUNCTIONS[f"{name}_fast"])(hard, got)
    assert _ulps(got, hard, REFERENCE[name[:3]]).max() <= budget, name


@pytest.mark.parametrize("name", FAST)
def test_fast_paths_give_numpys_special_values(name):
    """NaN and +-inf give NaN (a block holding them takes the exact routine anyway), zeros
    keep their sign where the function is odd, and tiny arguments give sin(x) = tan(x) = x."""
    dtype = np.float32 if name.endswith("f32") else np.float64
    tiny = np.finfo(dtype).smallest_subnormal
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, tiny, -tiny, 1e-30, -1e-30], dtype)
    got = np.empty_like(x)
    _runner(library.FUNCTIONS[f"{name}_fast"])(x, got)
    with np.errstate(all="ignore"):
        want = getattr(np, name[:3])(x)
    assert np.array_equal(got, want, equal_nan=True), (got, want)
    assert np.array_equal(np.signbit(got[3:]), np.signbit(want[3:]))


@pytest.mark.parametrize("name", FAST)
def test_fast_paths_vectorise(name):
    dtype = np.float32 if name.endswith("f32") else np.float64
    run = _runner(library.FUNCTIONS[f"{name}_fast"])
    run(np.ones(8, dtype), np.ones(8, dtype))
    assembly = "".join(run.inspect_asm().values())
    assert not re.search(r"call\w*\s+\S*(sin|cos|tan)", assembly)
    assert packed(assembly, "arith", np.float64), name


def _kernel(program, *args) -> str:
    ((_, source),) = flowjit.jit(program).lower(*args).kernel_sources().items()
    return source


PROGRAMS = {
    "sin": lambda x: np.sin(x),
    "sin-cos-of-one-value": lambda x: np.sin(x * 0.5) + np.cos(x * 0.5),
    "tan-of-exp": lambda x: np.tan(np.exp(x * 0.01)),
    "wave": lambda t: np.sin(2 * np.pi * 3.0 * t) * np.exp(-t * t),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("program", PROGRAMS, ids=list(PROGRAMS))
def test_kernels_take_the_fast_path_for_the_blocks_that_fit_it(program, dtype):
    """Blocks whose arguments all fit take the fast path, a block with one argument beyond
    the bound, an infinity or a NaN takes the exact routine, and every element matches numpy
    (both paths: the serial kernel, and the parallel twin above its threshold; a 2-d domain
    whose rows are shorter than a block)."""
    function = PROGRAMS[program]
    rng = np.random.default_rng(3)
    for shape in ((5 * STAGE_BLOCK + 17,), (PARALLEL_MIN_ELEMENTS + 3 * STAGE_BLOCK,), (7, 300)):
        x = rng.uniform(-20, 20, shape).astype(dtype)
        flat = x.reshape(-1)
        flat[STAGE_BLOCK + 5] = 3.0e7                    # beyond the bound (its block: the exact path)
        flat[2 * STAGE_BLOCK + 1] = np.inf
        flat[3 * STAGE_BLOCK + 200] = np.nan
        flat[-1] = -1.0e30
        source = _kernel(function, x)
        assert re.search(r"if fj\.\w+_f(32|64)_fits\(peak0\)", source), source
        assert re.search(r"fj\.(sin|cos|tan)_f(32|64)_fast\(", source), source
        with np.errstate(all="ignore"):
            want = function(x.astype(np.float64))
            got = flowjit.jit(function)(x)
        assert got.dtype == function(x[:1]).dtype
        rtol = 2e-6 if dtype == np.float32 else 1e-14
        assert np.allclose(got, want, rtol=rtol, atol=rtol, equal_nan=True), program


def test_the_exact_path_is_right_where_the_fast_path_would_not_be():
    """sin of a float32 block holding large arguments: the fast path would be wrong there
    (q PIO2_1T's error, about q 2**-86, is more than pi), the kernel is not."""
    x = np.full(STAGE_BLOCK, 3.0e38, np.float32)
    x[::2] = 3.0
    fast = np.empty_like(x)
    _runner(mathlib_trig.sin_f32_fast)(x, fast)
    want = np.sin(x.astype(np.float64)).astype(np.float32)
    assert not np.allclose(fast, want, rtol=1e-6, atol=1e-6)       # (so the check below means something)
    assert np.allclose(flowjit.jit(np.sin)(x), want, rtol=1e-6, atol=1e-6)


def test_routines_without_a_fast_path_are_not_checked():
    x = np.ones(STAGE_BLOCK * 2, np.float32)
    source = _kernel(lambda x: np.exp(x) + np.tanh(x), x)
    assert "_fits(" not in source and "_fast(" not in source


def test_staged_loops_index_slices_of_the_block():
    """The serial twin reads and writes the innermost axis through slices of the block taken
    once, at j (indexed at low + j, a prange body's loops ran at half the serial speed), and
    the parallel twin runs the serial one on parts of the outer axis."""
    x = np.ones((3, 2 * STAGE_BLOCK), np.float32)
    source = _kernel(lambda x, row: np.tanh(np.exp(x)) * row, x, x[0])      # (a 2-d domain)
    serial, parallel = source[source.index(f"def {SERIAL}("):source.index(f"def {PARALLEL}(")], \
        source[source.index(f"def {PARALLEL}("):]
    assert re.search(r"row\d+_in0_x = in0_x\[i0, low:high\]", serial), serial
    assert re.search(r"row\d+_out0\[j\] = ", serial), serial
    assert not re.search(r"(in\d_\w+|out0)\[i0, i1\]", serial), serial
    assert f"{SERIAL}(in0_x[low:high], in1_row, out0[low:high])" in parallel, parallel
