"""Measure the vectorised math functions against numpy / scipy, in ulps.

    python -m flowjit.compiler.codegen.accuracy [--points 1000000] [--write docs/math.md]

For each function and dtype: the largest error over ``points`` inputs (uniform over the
interesting range, near zero, and, for log, uniform over every positive bit pattern),
and whether every special input (+-0, +-inf, NaN, denormals, the overflow bounds) gives
numpy's exact result.
"""

from __future__ import annotations

import argparse
import functools
import pathlib
import re
import sys

import numpy as np
from numba import njit

from flowjit.compiler.codegen import library
from flowjit.compiler.ir.ops.base import routine_ops
from flowjit.compiler.ir.ops.elementwise import special

# Every routine an op's lowering calls (ops.base.routine_ops), in the registry's order.
FUNCTIONS = tuple(routine_ops())
BINARY = tuple(name for name, op in routine_ops().items() if op.num_inputs == 2)      # arctan2, pow
DTYPES = (np.float32, np.float64)
SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-310, -1e-310, 5e-324, 1e-45, 1.0, -1.0, 0.5,
            709.782712893384, 709.7827128933841, -745.1332191019411, -745.1332191019412, 88.72283, 88.72284,
            -103.97208, -87.33655, 20.0, -20.0, 0.55, -0.55, 3.141592653589793, 1.5707963267948966,
            0.7853981633974483, 0.7853981633974484, 1e22, -1e22, 1.7976931348623157e308, 3.4028235e38]
# Arguments of sin and cos whose reduction is hardest (closest to a multiple of pi/2 for
# their dtype, and the classic test values); compared with mpmath at 600 bits, since
# numpy's and glibc's cos are both 8 ulp off on the first.
HARD_TRIG = {np.float64: [6381956970095103 * 2.0 ** 797, 5.0e22, 1e22, 8.0e15 * np.pi, 2.0 ** 1023,
                          0.5 * np.pi * 2 ** 52, 1.0e300, 4.0e275],
             np.float32: [16367173 * 2.0 ** 72, 1.5707964, 3.1415927, 6.2831855, 3.4028235e38, 1.0e30,
                          2.0 ** 100, 71476.0625, 823549.6]}


def reference(name: str):
    """What routine ``name`` must agree with: its op's numpy ufunc, or the scipy.special one."""
    op = routine_ops()[name]
    return op.ufunc if op.ufunc is not None else special(op.special)


@functools.cache
def _runner(name: str, dtype, fma: bool):
    """mathlib's ``name`` for ``dtype`` over an array, compiled once per FMA setting."""
    function = library.functions(fma)[f"{name}_{'f64' if dtype == np.float64 else 'f32'}"]
    flags = dict(error_model="numpy", fastmath={"contract"} if fma else False)
    if name in BINARY:
        @njit(**flags)
        def run_binary(x, out):                 # x[0] and x[1]: the first and second argument
            for i in range(out.shape[0]):
                out[i] = function(x[0, i], x[1, i])
        return run_binary

    @njit(**flags)
    def run(x, out):
        for i in range(x.shape[0]):
            out[i] = function(x[i])
    return run


# Functions whose result is a sum that cancels (logaddexp(-0.7, -0.68) is about 0, the larger
# argument plus log1p(exp(-|a - b|))): numpy's own result there is off from the true value by a
# rounding of the arguments' magnitude, thousands of the result's ulps, and so is any other
# correct evaluation.  Their error is measured in ulps of the larger of the result and the
# arguments' magnitudes: the accuracy the sum can have.
CANCELLING = ("logaddexp", "logaddexp2")


def ulp_error(got: np.ndarray, want: np.ndarray, scale: np.ndarray | None = None) -> np.ndarray:
    """|got - want| in units of the spacing of floats at ``want`` (0 where both agree or are NaN);
    with ``scale``, at the larger of |want| and it."""
    magnitude = np.abs(want) if scale is None else np.maximum(np.abs(want), scale)
    with np.errstate(over="ignore", invalid="ignore"):      # (the spacing at inf)
        spacing = np.spacing(magnitude.astype(want.dtype)).astype(np.float64)
    with np.errstate(invalid="ignore"):
        error = np.abs(got.astype(np.float64) - want.astype(np.float64)) / spacing
    error[(got == want) | (np.isnan(got) & np.isnan(want))] = 0.0
    return np.nan_to_num(error, nan=np.inf)


def _every_positive(dtype, points: int, rng: np.random.Generator) -> np.ndarray:
    """Uniform over the bit patterns of the positive finite floats: every binade equally."""
    top = 0x7FF0000000000000 if dtype == np.float64 else 0x7F800000
    bits = rng.integers(0, top, points, dtype=np.int64)
    return bits.view(np.float64) if dtype == np.float64 else bits.astype(np.int32).view(np.float32)


def _signed(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return values * np.where(rng.random(values.size) < 0.5, 1, -1).astype(values.dtype)


def inputs(name: str, dtype, points: int, rng: np.random.Generator) -> np.ndarray:
    """The measured inputs (for a binary function: shape (2, points), its two arguments)."""
    if name in ("log", "log2", "log10"):
        return _every_positive(dtype, points, rng)
    half = points // 2
    if name in ("sin", "cos", "tan"):           # every magnitude with both signs, and many periods
        return np.concatenate([_signed(_every_positive(dtype, half, rng), rng),
                               rng.uniform(-100, 100, points - half).astype(dtype)])
    if name in ("arctan", "log1p", "cbrt", "arcsinh"):      # every magnitude, and the interesting middle
        low = -1.0 if name == "log1p" else -4.0
        every = _every_positive(dtype, half, rng)
        every = every if name == "log1p" else _signed(every, rng)
        return np.concatenate([every, rng.uniform(low, 4.0, points - half).astype(dtype)])
    if name == "arccosh":                       # every magnitude above 1, and just above 1
        return np.concatenate([1 + _every_positive(dtype, half, rng), rng.uniform(1, 4, points // 4),
                               1 + rng.uniform(0, 1e-3, points - half - points // 4)]).astype(dtype)
    if name in ("arcsin", "arccos", "arctanh"):
        return np.concatenate([rng.uniform(-1, 1, half), rng.uniform(-1e-3, 1e-3, points // 4),
                               1 - rng.uniform(0, 1e-3, points - half - points // 4)]).astype(dtype)
    if name == "pow":                           # bases of every magnitude, exponents with results in range
        base = _every_positive(dtype, half, rng)
        with np.errstate(divide="ignore"):
            reach = 700.0 if dtype == np.float64 else 85.0
            exponent = rng.uniform(-1, 1, half) * reach / np.maximum(np.abs(np.log(base.astype(np.float64))), 1e-300)
        exponent = np.minimum(np.abs(exponent), 1e30) * np.sign(exponent)
        quarter = points // 4                   # small bases, and negative ones with integer exponents
        small = np.stack([rng.uniform(0, 4, quarter), rng.uniform(-40, 40, quarter)])
        rest = points - half - quarter
        integers = np.stack([-rng.uniform(0, 4, rest), np.rint(rng.uniform(-40, 40, rest))])
        return np.concatenate([np.stack([base, exponent]), small, integers], axis=1).astype(dtype)
    if name in ("logaddexp", "logaddexp2"):     # every magnitude of both, and results near 0 (cancelling)
        y = _signed(_every_positive(dtype, half, rng), rng)
        x = _signed(_every_positive(dtype, half, rng), rng)
        near = rng.uniform(-4, 4, (2, points - half)).astype(dtype)
        return np.concatenate([np.stack([y, x]), near], axis=1)
    if name == "arctan2":                       # every magnitude of both, and ratios near 1
        y = _signed(_every_positive(dtype, half, rng), rng)
        x = _signed(_every_positive(dtype, half, rng), rng)
        near = rng.uniform(-4, 4, (2, points - half)).astype(dtype)
        return np.concatenate([np.stack([y, x]), near], axis=1)
    limit = {"exp": (746.0, 104.0), "tanh": (25.0, 12.0), "sigmoid": (746.0, 104.0), "erf": (7.0, 5.0),
             "exp2": (1080.0, 150.0), "expm1": (710.0, 89.0), "sinh": (711.0, 90.0), "cosh": (711.0, 90.0)}[name]
    limit = limit[0] if dtype == np.float64 else limit[1]
    return np.concatenate([rng.uniform(-limit, limit, points // 2), rng.uniform(-1, 1, points // 4),
                           rng.standard_normal(points - points // 2 - points // 4) * 1e-3]).astype(dtype)


def _special_inputs(name: str, dtype) -> np.ndarray:
    with np.errstate(over="ignore"):          # float64 specials beyond float32 become inf
        specials = np.array(SPECIALS, dtype=np.float64).astype(dtype)
    if name in BINARY:                        # every pair
        return np.stack([np.repeat(specials, specials.size), np.tile(specials, specials.size)])
    return specials


def _evaluate(name: str, dtype, fma: bool, x: np.ndarray) -> np.ndarray:
    out = np.empty(x.shape[-1], dtype)
    _runner(name, dtype, fma)(x, out)
    return out


def _reference(name: str, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return reference(name)(*x) if name in BINARY else reference(name)(x)


def measure(points: int = 1_000_000, seed: int = 0, functions=FUNCTIONS, fmas=(True, False)) -> list[dict]:
    """A row per function and dtype: its largest error over ``points`` inputs and at the special
    values, the worse of the kernels compiled with each FMA setting of ``fmas`` (the default both,
    as CompileOptions.fma allows either)."""
    rng = np.random.default_rng(seed)
    rows = []
    for name in functions:
        for dtype in DTYPES:
            x = inputs(name, dtype, points, rng)
            specials = _special_inputs(name, dtype)
            want = _reference(name, x).astype(dtype)
            special_want = _reference(name, specials).astype(dtype)
            error = np.zeros(want.shape)
            special_error = np.zeros(special_want.shape)
            # Where numpy's result is +-0, +-inf, NaN or +-1, ours must be the same value, sign included.
            exact = np.isnan(special_want) | np.isinf(special_want) | (special_want == 0) | \
                (np.abs(special_want) == 1)
            mismatched = np.zeros(special_want.shape, bool)
            # Kernels compile with and without FMA contraction (CompileOptions.fma): take the worse.
            scales = [np.abs(values).max(axis=0) if name in CANCELLING else None for values in (x, specials)]
            for fma in fmas:
                error = np.maximum(error, ulp_error(_evaluate(name, dtype, fma, x), want, scales[0]))
                result = _evaluate(name, dtype, fma, specials)
                special_error = np.maximum(special_error, ulp_error(result, special_want, scales[1]))
                identical = (result == special_want) & (np.signbit(result) == np.signbit(special_want))
                identical |= np.isnan(result) & np.isnan(special_want)
                mismatched |= exact & ~identical
            worst = x[..., np.argmax(error)]
            rows.append({"function": name, "dtype": np.dtype(dtype).name, "points": int(want.size),
                         "max_ulp": float(error.max()), "worst_input": [float(v) for v in np.atleast_1d(worst)],
                         "special_max_ulp": float(special_error.max()),
                         "special_mismatches": [[float(v) for v in np.atleast_1d(specials[..., i])]
                                                for i in np.nonzero(mismatched)[0]]})
    return rows


def hard_trig_errors() -> dict[tuple[str, str], float]:
    """Largest error in ulps, against mpmath's correctly rounded values, of sin and cos on
    HARD_TRIG, per dtype (mpmath comes with the test extra)."""
    import mpmath
    errors = {}
    for name in ("sin", "cos"):
        for dtype, values in HARD_TRIG.items():
            x = np.array(values, dtype=dtype)
            with mpmath.workprec(600):
                want = np.array([float(getattr(mpmath, name)(mpmath.mpf(float(v)))) for v in x]).astype(dtype)
            worst = 0.0
            for fma in (True, False):
                out = np.empty_like(x)
                _runner(name, dtype, fma)(x, out)
                worst = max(worst, float(ulp_error(out, want).max()))
            errors[(name, np.dtype(dtype).name)] = worst
    return errors


def table(rows: list[dict]) -> str:
    lines = ["| function | dtype | points | max error (ulp) | worst input | ±0, ±inf, NaN, ±1 results | "
             "other special inputs (ulp) |", "|---|---|---|---|---|---|---|"]
    for row in rows:
        exact = "exact" if not row["special_mismatches"] else f"differ at {row['special_mismatches']}"
        worst = ", ".join(f"{v:.9g}" for v in row["worst_input"])
        lines.append(f"| {row['function']} | {row['dtype']} | {row['points']:,} | {row['max_ulp']:g} | "
                     f"{worst} | {exact} | {row['special_max_ulp']:g} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--write", metavar="PATH", help="replace the table between the markers in PATH")
    parser.add_argument("--functions", metavar="F1,F2", help="measure only these (not with --write)")
    args = parser.parse_args(argv)
    functions = tuple(args.functions.split(",")) if args.functions else FUNCTIONS
    if args.write and functions != FUNCTIONS:
        parser.error("--write replaces the whole table: measure every function")
    rows = measure(args.points, functions=functions)
    if args.write:
        rows = merged(rows, documented_rows(args.write))
    text = table(rows)
    print(text)
    if args.write:
        write_table(args.write, "accuracy table", text)
    return 0


def documented_rows(path: str) -> dict[tuple[str, str], dict]:
    """The rows of the accuracy table in ``path``, by function and dtype."""
    rows = {}
    for line in pathlib.Path(path).read_text().splitlines():
        match = re.match(r"\| ([a-z]\w*) \| (float\d+) \| [\d,]+ \| ([\d.e+-]+) \| ([^|]+) \| [^|]+ \| ([\d.e+-]+) \|", line)
        if match:
            rows[(match.group(1), match.group(2))] = {
                "max_ulp": float(match.group(3)), "special_max_ulp": float(match.group(5)),
                "worst_input": [float(v) for v in match.group(4).split(",")]}
    return rows


def merged(rows: list[dict], documented: dict[tuple[str, str], dict]) -> list[dict]:
    """Each row with the larger error of this machine's and the table's: numpy's own loops,
    the reference, differ by CPU (SVML's on AVX-512), so the table keeps every machine's worst."""
    result = []
    for row in rows:
        old = documented.get((row["function"], row["dtype"]))
        row = dict(row)
        if old is not None and old["max_ulp"] >= row["max_ulp"]:
            row["max_ulp"], row["worst_input"] = old["max_ulp"], old["worst_input"]
        if old is not None:
            row["special_max_ulp"] = max(row["special_max_ulp"], old["special_max_ulp"])
        result.append(row)
    return result


def write_table(path: str, name: str, text: str) -> None:
    """Replace what lies between ``<!-- NAME -->`` and ``<!-- end NAME -->`` in ``path`` by ``text``."""
    with open(path) as stream:
        document = stream.read()
    start, end = f"<!-- {name} -->", f"<!-- end {name} -->"
    before, rest = document.split(start, 1)
    _, after = rest.split(end, 1)
    with open(path, "w") as stream:
        stream.write(f"{before}{start}\n{text}\n{end}{after}")


if __name__ == "__main__":
    sys.exit(main())
