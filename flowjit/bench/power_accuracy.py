"""The error of constant powers (the constant-powers pass) against numpy's ``x ** c``, in ulps.

    python -m flowjit.bench.power_accuracy [--points 1000000] [--write docs/math.md]

One jitted function computes ``x ** c`` for every exponent the pass rewrites; its inputs are
uniform over the bit patterns of the finite floats of both signs (every binade equally, so
overflow, underflow and denormal results are all reached) and uniform in [0, 4].  Special
inputs (+-0, +-inf, NaN, +-1, denormals, the overflow bounds) must give numpy's exact result
wherever that is +-0, +-inf, NaN or +-1.
"""

from __future__ import annotations

import argparse

import numpy as np

from flowjit.compiler.codegen.accuracy import SPECIALS, ulp_error, write_table

HALVES = (-0.5, 1.5, -1.5, 2.5, -2.5, 3.5, -3.5, 4.5, -4.5)
EXACT = (0, 1, 2, -1, 0.5)          # one rounding in the dtype, as numpy's own loop


def exponents(dtype) -> tuple:
    """What the pass rewrites at ``dtype`` beyond EXACT."""
    from flowjit.compiler.passes.constant_powers import HALF_EXPONENTS, INTEGER_EXPONENTS
    integers = tuple(n for n in INTEGER_EXPONENTS[np.dtype(dtype)] if n not in EXACT)
    low, high = HALF_EXPONENTS[np.dtype(dtype)]
    return integers + tuple(c for c in HALVES if low <= c <= high) + EXACT


def inputs(dtype, points: int, rng: np.random.Generator) -> np.ndarray:
    top = 0x7FF0000000000000 if dtype == np.float64 else 0x7F800000
    bits = rng.integers(0, top, points // 2, dtype=np.int64)
    every = bits.view(np.float64) if dtype == np.float64 else bits.astype(np.int32).view(np.float32)
    signs = np.where(rng.random(every.size) < 0.5, 1, -1).astype(dtype)
    return np.concatenate([every * signs, rng.uniform(0, 4, points - every.size).astype(dtype)])


def _powers(x, powers):
    return tuple(x ** c for c in powers)


def measure(points: int = 1_000_000, seed: int = 0) -> list[dict]:
    import flowjit
    rng = np.random.default_rng(seed)
    rows = []
    jitted = flowjit.jit(_powers, static_argnums=(1,))
    for dtype in (np.float32, np.float64):
        powers = exponents(dtype)
        x = inputs(dtype, points, rng)
        with np.errstate(over="ignore"):
            specials = np.array(SPECIALS + [2.0, -2.0, 3.0, -3.0], dtype=np.float64).astype(dtype)
        got, got_special = jitted(x, powers), jitted(specials, powers)
        with np.errstate(all="ignore"):
            want, want_special = _powers(x, powers), _powers(specials, powers)
        for c, out, expected, out_special, expected_special in zip(powers, got, want, got_special, want_special):
            error = ulp_error(out, expected)
            exact = np.isnan(expected_special) | np.isinf(expected_special) | (expected_special == 0) | \
                (np.abs(expected_special) == 1)
            identical = ((out_special == expected_special) & (np.signbit(out_special) == np.signbit(expected_special))) \
                | (np.isnan(out_special) & np.isnan(expected_special))
            rows.append({"exponent": c, "dtype": np.dtype(dtype).name, "points": int(x.size),
                         "max_ulp": float(error.max()), "worst_input": float(x[np.argmax(error)]),
                         "special_max_ulp": float(ulp_error(out_special, expected_special).max()),
                         "special_mismatches": [float(v) for v in specials[exact & ~identical]]})
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| exponent | dtype | points | max error (ulp) | worst input | ±0, ±inf, NaN, ±1 results |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        exact = "exact" if not row["special_mismatches"] else f"differ at {row['special_mismatches']}"
        lines.append(f"| {row['exponent']:g} | {row['dtype']} | {row['points']:,} | {row['max_ulp']:g} | "
                     f"{row['worst_input']:.9g} | {exact} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--write", metavar="PATH", help="replace the table between the markers in PATH")
    args = parser.parse_args(argv)
    text = table(measure(args.points))
    print(text)
    if args.write:
        write_table(args.write, "power table", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
