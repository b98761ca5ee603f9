"""The CPU kernel library: what generated kernels call, under the one name ``fj``.

A kernel module imports this module as ``fj`` and calls ``fj.exp_f32(x)``,
``fj.floordiv_int(a, b)``, ``fj.stack_array(np.float32, 64)``: op lowerings name library
functions, never paste their text (numba compiles only what a kernel calls, and inlines it).
The library is every public numba function and intrinsic of ``MODULES``; another backend
binds ``fj`` to a library of its own with the same names.

Importing this module loads none of them: a process whose kernels all load from the kernel
cache never types a kernel, and importing the modules (about a hundred dispatchers, tables)
took 50 ms of a warm first call.  ``load`` imports them all, as does the first name looked up
here (PEP 562's module ``__getattr__``); importing is thread-safe, so the compile worker and
the main thread may both be first.
"""

from __future__ import annotations

import importlib
import importlib.util

from flowjit.compiler.ir.ops.base import routine_ops
from flowjit.compiler.ir.ops.lowering import ROUTINE_DTYPES

MODULES = tuple(f"flowjit.compiler.codegen.{name}"
                for name in ("mathlib", "mathlib_explog", "mathlib_trig", "numerics", "randomlib"))
# What decides the library's machine code: its modules, this one (it decides what fj binds), the
# op functions randomlib compiles, and the config (the attribute ``fj.vector_width`` writes).
SOURCES = MODULES + (__name__, "flowjit.compiler.ir.ops.random", "flowjit.config")

# (op name, loop dtype name) -> the routine its lowering calls there: ("exp", "float32") -> "exp_f32".
ROUTINES: dict[tuple[str, str], str] = {
    (op.name, dtype): f"{routine}_{suffix}" for routine, op in routine_ops().items()
    for dtype, suffix in ROUTINE_DTYPES.items()}


def source_files() -> list[str]:
    """The files of ``SOURCES``, found without importing them (the kernel cache's key hashes them)."""
    return [importlib.util.find_spec(name).origin for name in SOURCES]


def _functions() -> dict[str, object]:
    """Every public numba function and intrinsic of ``MODULES``, by name, the modules imported."""
    from numba.core.extending import _Intrinsic
    from numba.core.registry import CPUDispatcher
    functions: dict[str, object] = {}
    for module in map(importlib.import_module, MODULES):
        for name, value in vars(module).items():
            if not name.startswith("_") and isinstance(value, (CPUDispatcher, _Intrinsic)):
                if name in functions and functions[name] is not value:
                    raise ImportError(f"kernel library: {module.__name__}.{name} shadows another module's {name}")
                functions[name] = value
    return functions


def load() -> dict[str, object]:
    """Every library function by name (``FUNCTIONS``), the library's modules imported at the
    first call.  numba takes in the intrinsics made since its last compile when a compile
    starts (``CompilerBase`` refreshes its contexts), so the library loads under numba's
    compiler lock, with no compile under way on another thread, and a load by this thread's
    compile (numba typing ``fj.exp_f32``: a kernel's, or any numba function's that calls
    ``fj``) refreshes numba's contexts, as numba does for a compile nested in another."""
    if "FUNCTIONS" not in globals():
        from numba.core.compiler_lock import global_compiler_lock
        compiling = global_compiler_lock.is_locked()       # this thread's compile is under way
        with global_compiler_lock:
            if "FUNCTIONS" not in globals():
                functions = _functions()
                globals().update(functions, FUNCTIONS=functions)
                if compiling:
                    from numba.core.registry import cpu_target
                    cpu_target.typing_context.refresh()
                    cpu_target.target_context.refresh()
    return globals()["FUNCTIONS"]


def __getattr__(name: str):
    """``FUNCTIONS`` and each library function, the library's modules imported at the first."""
    if name.startswith("__"):             # a probe (``__path__``, ``__wrapped__``): no library name
        raise AttributeError(name)
    load()
    try:
        return globals()[name]
    except KeyError:
        raise AttributeError(f"the kernel library (fj) has no {name!r}") from None
