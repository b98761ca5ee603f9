"""The CPU kernel library: what generated kernels call, under the one name ``fj``.

A kernel module imports this module as ``fj`` and calls ``fj.exp_f32(x)``,
``fj.floordiv_int(a, b)``, ``fj.stack_array(np.float32, 64)``: op lowerings name library
functions, never paste their text (numba compiles only what a kernel calls, and inlines it).
The library is every public numba function and intrinsic of ``MODULES``; another backend
binds ``fj`` to a library of its own with the same names.

It comes in two flavours, as kernels are compiled with FMA contraction or without it
(``CompileOptions.fma``).  A routine LLVM inlines (``mathlib.INLINE``: compiled once on its
own, not re-typed inside each kernel) keeps the contraction it was compiled with, so this
module's routines contract, and ``exact`` (a module built by ``load``) holds a twin of each
compiled without contraction, calling the other twins; the kernel cache binds a kernel's ``fj``
to the flavour of its compile.  Functions that contract nothing (intrinsics, the complex
helpers, routines inlined without contraction (``mathlib.INLINE_EXACT``), numba's own inlining)
are the same object in both, and call no routine that contracts.

Importing this module loads none of them: a process whose kernels all load from the kernel
cache never types a kernel, and importing the modules (about a hundred dispatchers, tables)
took 50 ms of a warm first call.  ``load`` imports them all, as does the first name looked up
here (PEP 562's module ``__getattr__``); importing is thread-safe, so the compile worker and
the main thread may both be first.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

from flowjit.compiler.ir.ops.base import routine_ops
from flowjit.compiler.ir.ops.lowering import ROUTINE_DTYPES

MODULES = tuple(f"flowjit.compiler.codegen.{name}"
                for name in ("mathlib", "mathlib_explog", "mathlib_trig", "mathlib_more", "numerics", "randomlib"))
# What decides the library's machine code: its modules, this one (it decides what fj binds), the
# op functions randomlib compiles, and the config (the attribute ``fj.vector_width`` writes).
# The kernels flowjit ships whole (scans, gathers) are cached beside the routines (``cache_kernels``).
SOURCES = MODULES + (__name__, "flowjit.compiler.ir.ops.random", "flowjit.config",
                     "flowjit.compiler.codegen.scans", "flowjit.compiler.codegen.index_kernels")

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


def contracts(function) -> bool:
    """Whether ``function`` is a routine LLVM inlines compiled with contraction (one with a twin)."""
    options = getattr(function, "targetoptions", {})
    return bool(options.get("forceinline") and options.get("fastmath"))


def _exact_module(functions: dict[str, object]) -> types.ModuleType:
    """The flavour without contraction: ``functions`` with each routine LLVM inlines
    with contraction (``contracts``) replaced by a twin compiled without contraction -- a dispatcher of a
    copy of its function whose globals name twins instead of the originals, so twins call
    twins, under a qualified name of its own (the name its machine code has)."""
    from numba import njit
    from numba.core.registry import CPUDispatcher
    namespaces = {name: dict(vars(sys.modules[name])) for name in MODULES}   # each module's globals
    originals = {id(value): value for namespace in namespaces.values() for value in namespace.values()
                 if isinstance(value, CPUDispatcher) and contracts(value)}
    twins: dict[int, object] = {}
    for key, value in originals.items():
        function = value.py_func
        if function.__closure__:
            raise ImportError(f"kernel library: {function.__module__}.{function.__name__} is a closure, whose "
                              f"twin would call the contracting routines it closes over")
        copy = types.FunctionType(function.__code__, namespaces[function.__module__], function.__name__,
                                  function.__defaults__)
        copy.__qualname__, copy.__module__ = f"{function.__qualname__}_exact", function.__module__
        options = {name: option for name, option in value.targetoptions.items() if name != "nopython"}
        twins[key] = njit(**dict(options, fastmath=False))(copy)
    for namespace in namespaces.values():
        namespace.update({name: twins[id(value)] for name, value in namespace.items() if id(value) in twins})
    exact = types.ModuleType(f"{__name__}.exact", "The kernel library without FMA contraction (library.py).")
    vars(exact).update({name: twins.get(id(value), value) for name, value in functions.items()})
    exact.FUNCTIONS = {name: getattr(exact, name) for name in functions}
    return exact


def load() -> dict[str, object]:
    """Every library function by name (``FUNCTIONS``), the library's modules imported at the
    first call, and the flavour without contraction (``exact``).  numba takes in the intrinsics
    made since its last compile when a compile starts (``CompilerBase`` refreshes its contexts),
    so the library loads under numba's compiler lock, with no compile under way on another
    thread, and a load by this thread's compile (numba typing ``fj.exp_f32``: a kernel's, or any
    numba function's that calls ``fj``) refreshes numba's contexts, as numba does for a compile
    nested in another."""
    if "FUNCTIONS" not in globals():
        from numba.core.compiler_lock import global_compiler_lock
        compiling = global_compiler_lock.is_locked()       # this thread's compile is under way
        with global_compiler_lock:
            if "FUNCTIONS" not in globals():
                functions = _functions()
                exact = _exact_module(functions)
                _cache_routines(list(functions.values()) + list(exact.FUNCTIONS.values()))
                globals().update(functions, exact=exact, FUNCTIONS=functions)
                if compiling:
                    from numba.core.registry import cpu_target
                    cpu_target.typing_context.refresh()
                    cpu_target.target_context.refresh()
    return globals()["FUNCTIONS"]


def _cache_routines(functions) -> None:
    """Each numba function of the library in the disk cache (library_cache.py), when there is one."""
    from numba.core.registry import CPUDispatcher
    from flowjit.compiler.codegen import library_cache
    from flowjit.config import cache_directory
    dispatchers = {id(f): f for f in functions if isinstance(f, CPUDispatcher)}
    library_cache.enable(dispatchers.values(), cache_directory("default"))


_SHIPPED_CACHED: set[int] = set()


def cache_kernels(dispatchers) -> None:
    """The kernels flowjit ships as numba functions (scans.py, index_kernels.py) in the library's
    disk cache, before their first compile; once each.  Not numba's ``cache=True``: its files,
    beside the source and keyed by that one file's content, would outlive a change to the flags
    or the helpers in another file, and in an install they would be written into site-packages."""
    from numba.core.compiler_lock import global_compiler_lock
    with global_compiler_lock:        # (no thread compiles them meanwhile without their cache; reentrant)
        fresh = [dispatcher for dispatcher in dispatchers if id(dispatcher) not in _SHIPPED_CACHED]
        if fresh:
            _cache_routines(fresh)
            _SHIPPED_CACHED.update(id(dispatcher) for dispatcher in fresh)


def flavour(fma: bool) -> types.ModuleType:
    """What a kernel compiled with (``fma``) or without FMA contraction binds as ``fj``."""
    if fma:
        return sys.modules[__name__]
    load()
    return globals()["exact"]


def functions(fma: bool = True) -> dict[str, object]:
    """Every library function of a flavour, by name."""
    return flavour(fma).FUNCTIONS


def __getattr__(name: str):
    """``FUNCTIONS`` and each library function, the library's modules imported at the first."""
    if name.startswith("__"):             # a probe (``__path__``, ``__wrapped__``): no library name
        raise AttributeError(name)
    load()
    try:
        return globals()[name]
    except KeyError:
        raise AttributeError(f"the kernel library (fj) has no {name!r}") from None
