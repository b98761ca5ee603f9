"""The CPU kernel library: what generated kernels call, under the one name ``fj``.

A kernel module imports this module as ``fj`` and calls ``fj.exp_f32(x)``,
``fj.floordiv_int(a, b)``, ``fj.stack_array(np.float32, 64)``: op lowerings name library
functions, never paste their text (numba compiles only what a kernel calls, and inlines it).
The library is every public numba function and intrinsic of ``MODULES``; another backend
binds ``fj`` to a library of its own with the same names.
"""

from __future__ import annotations

import sys

from numba.core.extending import _Intrinsic
from numba.core.registry import CPUDispatcher

from flowjit.compiler.codegen import mathlib, mathlib_explog, mathlib_trig, numerics, randomlib
from flowjit.compiler.ir.ops import random as random_ops
from flowjit.compiler.ir.ops.base import routine_ops
from flowjit.compiler.ir.ops.lowering import ROUTINE_DTYPES

MODULES = (mathlib, mathlib_explog, mathlib_trig, numerics, randomlib)
# What decides the library's machine code: its modules, this one (it decides what fj binds), and
# the op functions randomlib compiles.
SOURCES = MODULES + (sys.modules[__name__], random_ops)

FUNCTIONS: dict[str, object] = {}
for _module in MODULES:
    for _name, _value in vars(_module).items():
        if not _name.startswith("_") and isinstance(_value, (CPUDispatcher, _Intrinsic)):
            if _name in FUNCTIONS and FUNCTIONS[_name] is not _value:
                raise ImportError(f"kernel library: {_module.__name__}.{_name} shadows another module's {_name}")
            FUNCTIONS[_name] = _value

globals().update(FUNCTIONS)

# (op name, loop dtype name) -> the routine its lowering calls there: ("exp", "float32") -> "exp_f32".
ROUTINES: dict[tuple[str, str], str] = {
    (op.name, dtype): f"{routine}_{suffix}" for routine, op in routine_ops().items()
    for dtype, suffix in ROUTINE_DTYPES.items()}
