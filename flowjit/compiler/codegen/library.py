"""The CPU kernel library: what generated kernels call, under the one name ``fj``.

A kernel module imports this module as ``fj`` and calls ``fj.exp_f32(x)``,
``fj.floordiv_int(a, b)``, ``fj.stack_array(np.float32, 64)``: op lowerings name library
functions, never paste their text (numba compiles only what a kernel calls, and inlines it).
The library is every public numba function and intrinsic of ``MODULES``; another backend
binds ``fj`` to a library of its own with the same names.
"""

from __future__ import annotations

from numba.core.extending import _Intrinsic
from numba.core.registry import CPUDispatcher

from flowjit.compiler.codegen import mathlib, numerics
from flowjit.compiler.ir.ops.base import routine_ops
from flowjit.compiler.ir.ops.lowering import ROUTINE_DTYPES

MODULES = (mathlib, numerics)

FUNCTIONS: dict[str, object] = {
    name: value for module in MODULES for name, value in vars(module).items()
    if not name.startswith("_") and isinstance(value, (CPUDispatcher, _Intrinsic))}

globals().update(FUNCTIONS)

# (op name, loop dtype name) -> the routine its lowering calls there: ("exp", "float32") -> "exp_f32".
ROUTINES: dict[tuple[str, str], str] = {
    (op.name, dtype): f"{routine}_{suffix}" for routine, op in routine_ops().items()
    for dtype, suffix in ROUTINE_DTYPES.items()}
