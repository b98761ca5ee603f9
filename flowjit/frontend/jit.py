"""``@flowjit.jit``: trace on first call per signature, then run the compiled program."""

from __future__ import annotations

import functools
import inspect
import logging
import re
import struct
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from flowjit.compiler.ir.graph import Graph
from flowjit.compiler.ir.types import TensorType, check_dtype, dtype_from_short_name
from flowjit.config import CompileOptions, options_from_env
from flowjit.errors import (ArgumentError, FlowjitError, InternalError, TraceError, innermost_user_location,
                            raised_inside_flowjit, user_location)
from flowjit.frontend import numpy_api, pytree  # noqa: F401  (numpy_api installs Tracer methods)
from flowjit.frontend.inputs import check_argument_array
from flowjit.gpu import device_array, is_device_array, to_host
from flowjit.frontend.tracer import Tracer, current_trace, is_variable, tracing

logger = logging.getLogger("flowjit.recompiles")


@dataclass(frozen=True)
class ShapeDtype:
    """An abstract argument: only its shape and dtype matter (``jax.ShapeDtypeStruct``)."""

    shape: tuple[int, ...]
    dtype: np.dtype

    def __init__(self, shape, dtype):
        object.__setattr__(self, "shape", tuple(int(d) for d in shape))
        object.__setattr__(self, "dtype", check_dtype(dtype))

    _SPEC = re.compile(r"^\s*([a-z0-9]+)\[([0-9, ]*)\]\s*$")

    @classmethod
    def parse(cls, text: str) -> "ShapeDtype":
        """``f32[64,784]`` -> ShapeDtype((64, 784), float32); ``f64[]`` is a scalar."""
        match = cls._SPEC.match(text)
        if match is None:
            raise ValueError(f"'{text}' is not a type such as f32[64,784]")
        try:
            dtype = dtype_from_short_name(match.group(1))
        except KeyError:
            raise ValueError(f"unknown dtype '{match.group(1)}' in '{text}'") from None
        dims = [d for d in match.group(2).replace(" ", "").split(",") if d]
        return cls(tuple(int(d) for d in dims), dtype)


def _is_array_leaf(leaf) -> bool:
    return ((isinstance(leaf, (np.ndarray, np.generic, ShapeDtype)) and not isinstance(leaf, (bool, int, float)))
            or is_device_array(leaf))


@dataclass
class TracedProgram:
    """One trace: the graph, how to flatten arguments into it and rebuild results."""

    graph: Graph
    out_tree: pytree.TreeDef
    out_leaves: list            # ("graph", index) or ("const", value)
    signature: tuple
    variables: dict = field(default_factory=dict)   # name -> flowjit.Variable the trace used (kept alive)


class _Identity:
    """A signature entry for a variable argument: equal only to itself (a Variable's == is
    elementwise, as an array's)."""

    __slots__ = ("item",)

    def __init__(self, item):
        self.item = item

    def __eq__(self, other):
        return isinstance(other, _Identity) and other.item is self.item

    def __hash__(self):
        return id(self.item)


class _Constant:
    """A signature entry for a constant argument (a Python scalar, a static argument): equal
    only to the same constant.  Python's ``==`` has ``0.0 == -0.0`` and ``nan != nan``, but
    ``x / 0.0`` and ``x / -0.0`` are different programs, and a NaN (``float("nan")``, ``np.nan``:
    one bit pattern) is one constant however many objects carry it."""

    __slots__ = ("value", "key")

    def __init__(self, value):
        self.value, self.key = value, _exact(value)

    def __eq__(self, other):
        return isinstance(other, _Constant) and other.key == self.key

    def __hash__(self):
        return hash(self.key)

    def __repr__(self):
        return repr(self.value)


def _exact(value):
    """``value`` as a key whose floats compare by their bits (signed zeros, nan payloads)."""
    if isinstance(value, (float, np.floating)):
        return type(value), struct.pack("<d", value)
    if isinstance(value, (complex, np.complexfloating)):
        return type(value), struct.pack("<dd", value.real, value.imag)
    if type(value) is tuple:
        return tuple, tuple(_exact(item) for item in value)
    return type(value), value

    def __repr__(self):
        return repr(self.item)


class Jitted:
    """A function compiled by flowjit; call it like the original."""

    def __init__(self, fun: Callable, *, static_argnums=(), static_argnames=(), options: CompileOptions):
        functools.update_wrapper(self, fun, updated=())
        self.fun = fun
        self.options = options
        self.signature = inspect.signature(fun)
        parameters = list(self.signature.parameters)
        static_argnums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
        static_argnames = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
        names = set(static_argnames)
        for number in static_argnums:
            if not -len(parameters) <= number < len(parameters):
                raise ArgumentError(f"static_argnums {number} is out of range for {_graph_name(fun)}{self.signature}",
                                    user_location())
            names.add(parameters[number])
        for name in static_argnames:
            if name not in self.signature.parameters:
                raise ArgumentError(f"static_argnames '{name}' is not a parameter of {_graph_name(fun)}"
                                    f"{self.signature}", user_location())
        self.static_names = frozenset(names)
        from flowjit.compiler.costmodel import CostModel
        self.costs = CostModel()           # measured by profile(); used by later placements
        self._traces: dict[tuple, TracedProgram] = {}
        self._executables: dict[tuple, Any] = {}
        # Calls with only positional ndarray arguments: (shape, dtype) per argument ->
        # (executable, program).  Skips signature binding and pytree work (dispatch cost).
        self._fast: dict[tuple, tuple] = {}
        self._fast_device: dict[tuple, tuple] = {}     # the same for CuPy arguments (one array type)
        self._fast_device_type: type | None = None
        parameters = list(self.signature.parameters.values())
        variadic = len(parameters) == 1 and parameters[0].kind is parameters[0].VAR_POSITIONAL
        self._fast_ok = not self.static_names and (variadic or all(
            p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty for p in parameters))
        self._arity = None if variadic else len(parameters)

    def __repr__(self) -> str:
        return f"<flowjit.jit {_graph_name(self.fun)}>"

    def __get__(self, instance, owner):
        return self if instance is None else functools.partial(self, instance)

    # -- arguments -------------------------------------------------------------------------------
    def _flatten_args(self, args: tuple, kwargs: dict):
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as error:
            raise ArgumentError(f"{_graph_name(self.fun)}{self.signature}: {_binding_problem(self.signature, kwargs, error)}",
                                user_location()) from None
        # Defaults take part in the signature (a default array is an input like any other), but
        # the function is called with what the caller gave plus traced values only: a builtin's
        # or ufunc's signature lists placeholder defaults (``dtype=None, signature=None``) that
        # it refuses when passed explicitly.
        given = frozenset(bound.arguments)
        bound.apply_defaults()
        dynamic, static = {}, []
        for name, value in bound.arguments.items():
            if name in self.static_names:
                try:
                    hash(value)
                except TypeError:
                    raise ArgumentError(f"static argument '{name}' of {_graph_name(self.fun)} must be hashable, "
                                        f"got {type(value).__name__}", user_location()) from None
                static.append((name, _Constant(value)))
            else:
                dynamic[name] = value
        leaves, paths, treedef = pytree.flatten(dynamic)
        arrays, array_paths, static_leaves = [], [], []
        for index, (leaf, path) in enumerate(zip(leaves, paths)):
            if _is_array_leaf(leaf):
                # a GPU array (torch, jax, numba's) as CuPy's view of it: numpy's shape and dtype
                arrays.append(device_array(leaf) if is_device_array(leaf) else leaf)
                array_paths.append(path)
                static_leaves.append(None)
            elif is_variable(leaf):
                static_leaves.append((type(leaf), _Identity(leaf)))    # another variable: another trace
            else:
                try:
                    hash(leaf)
                except TypeError:
                    raise ArgumentError(f"argument '{path}' of type {type(leaf).__name__} is neither an array "
                                        f"nor a hashable constant", user_location()) from None
                static_leaves.append(_Constant(leaf))
        types = []
        for array, path in zip(arrays, array_paths):
            check_argument_array(array, path)
            try:
                dtype = check_dtype(array.dtype, f"argument '{path}'")
            except TraceError as error:
                raise type(error)(error.message, user_location()) from None
            types.append(TensorType(np.shape(array), dtype))
        signature = (treedef, tuple(static_leaves), tuple(static), tuple(types))
        return bound, given, leaves, paths, treedef, arrays, array_paths, types, signature

    # -- tracing ---------------------------------------------------------------------------------
    def trace(self, *args, **kwargs) -> TracedProgram:
        return self._prepare(args, kwargs)[0]

    def _prepare(self, args: tuple, kwargs: dict) -> tuple[TracedProgram, list]:
        """Flatten the arguments once: the program for their signature, and their arrays."""
        bound, given, leaves, paths, treedef, arrays, array_paths, types, signature = self._flatten_args(args, kwargs)
        cached = self._traces.get(signature)
        if cached is not None:
            return cached, arrays
        self._note_retrace(signature, array_paths)
        graph = Graph(_graph_name(self.fun))
        with tracing(graph) as context:
            tracers = iter(Tracer(context, graph.add_input(_value_name(path), type), origin=f"argument '{path}'")
                           for path, type in zip(array_paths, types))
            rebuilt = [next(tracers) if _is_array_leaf(leaf) else leaf for leaf in leaves]
            dynamic = pytree.unflatten(treedef, rebuilt)
            call_args = dict(dynamic)
            for name, constant in signature[2]:
                call_args[name] = constant.value
            bound.arguments.update(call_args)
            for name in list(bound.arguments):
                if name not in given and not any(isinstance(leaf, Tracer)
                                                 for leaf in pytree.flatten(bound.arguments[name])[0]):
                    del bound.arguments[name]
            try:
                result = self.fun(*bound.args, **bound.kwargs)
            except Exception as error:
                if isinstance(error, (FlowjitError, MemoryError)) or not raised_inside_flowjit(error):
                    raise                           # flowjit's own errors, and the user's own code's
                raise InternalError.wrapping(error, f"tracing {_graph_name(self.fun)}",
                                             innermost_user_location(error)) from error
            out_leaves, _, out_tree = pytree.flatten(result)
            recorded = []
            for leaf in out_leaves:
                if is_variable(leaf):                   # a variable returned: its value at the end
                    leaf = context.read_variable(leaf)
                if isinstance(leaf, Tracer):
                    value = context.value_of(leaf)
                    graph.outputs.append(value)
                    recorded.append(("graph", len(graph.outputs) - 1))
                elif isinstance(leaf, np.ndarray):
                    graph.outputs.append(context.constant(leaf)._value)
                    recorded.append(("graph", len(graph.outputs) - 1))
                else:
                    recorded.append(("const", leaf))
        program = TracedProgram(graph, out_tree, recorded, signature, dict(context.variables))
        self._traces[signature] = program
        return program, arrays

    def _note_retrace(self, signature: tuple, array_paths: list[str]) -> None:
        """Count the trace; say why it happened when asked (FLOWJIT_LOG=recompiles)."""
        from flowjit.config import log_recompiles
        from flowjit.counters import STATS
        STATS.traces += 1
        self._trace_count = getattr(self, "_trace_count", 0) + 1
        previous = getattr(self, "_last_signature", None)
        self._last_signature = signature
        if previous is None:
            return
        if log_recompiles(self.options.log_recompiles):
            logger.warning("flowjit: retracing %s: %s", _graph_name(self.fun),
                           explain_retrace(previous, signature, array_paths))
        if self._trace_count == self.options.recompile_warning_limit + 1:
            warnings.warn(f"flowjit: {_graph_name(self.fun)} has been traced {self._trace_count} times; "
                          f"each new argument shape, dtype or static value traces again (set "
                          f"FLOWJIT_LOG=recompiles to see why)", RuntimeWarning, stacklevel=4)

    def lower(self, *args, **kwargs) -> "Lowered":
        """Trace for these arguments (arrays or ``ShapeDtype``s) and return the stages' handle."""
        from flowjit.compiler.lowered import Lowered
        return Lowered(self.trace(*args, **kwargs), self.options, self.costs)

    def profile(self, *args, path: str | None = None, **kwargs):
        """Run once on the multi-device executor (on a cluster: on its tasks, their spans
        merged, ``runtime/cluster_trace.py``), recording a span per kernel and a flow per
        send -> recv; write Chrome-trace JSON to ``path`` (Perfetto opens it) and return it
        as a dict.  The measured kernel times go into this function's cost model, which
        later placements use.  Returns ``(result, trace)``."""
        import json
        from flowjit.compiler.lowered import Lowered
        from flowjit.runtime.executor_trace import chrome_trace, record_costs
        program, arrays = self._prepare(args, kwargs)
        lowered = Lowered(program, self.options, self.costs)
        if lowered.devices.cluster is not None:           # (hosts) every task's spans, merged
            from flowjit.runtime.cluster_trace import profile_on_cluster
            outputs, trace = profile_on_cluster(lowered, arrays, self.costs)
            if path is not None:
                from flowjit.files import write_atomically
                write_atomically(path, json.dumps(trace))
            return _results(program, outputs), trace
        executable = lowered.multi_device_executable
        buffers = lowered.variable_buffers
        arrays = _arguments_for(executable, arrays)

        def warm_then_profile(*arrays):
            saved = {name: buffer.value.copy() for name, buffer in buffers.items()}
            executable(*arrays)                               # first touch, thread start-up...
            for name, value in saved.items():                 # ...whose variable updates are undone:
                np.copyto(buffers[name].value, value)         # the profiled call is the one call
            return executable(*arrays, profile=True)
        # the variables' locks are held over both runs, as over one call
        outputs = lowered.variable_guard.wrap(warm_then_profile)(*arrays)
        call = executable.last_call
        record_costs(executable, call, self.costs)
        trace = chrome_trace(executable, call)
        if path is not None:
            with open(path, "w") as stream:
                json.dump(trace, stream)
        return _results(program, outputs), trace

    # -- calling -----------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if self._fast_ok and not kwargs and (self._arity is None or len(args) == self._arity):
            device_type = self._fast_device_type
            if args and type(args[0]) is device_type:   # CuPy arrays, to a program whose buffers are on the GPU
                device_key = tuple([(a.shape, a.dtype) for a in args if type(a) is device_type])
                entry = self._fast_device.get(device_key) if len(device_key) == len(args) else None
                key = None
            else:
                key = tuple([(a.shape, a.dtype) for a in args if type(a) is np.ndarray])
                entry = self._fast.get(key) if len(key) == len(args) else None
            if entry is not None:
                executable, program, single = entry
                outputs = executable(*args)
                return _as_result(outputs[0]) if single else _results(program, outputs)
        else:
            key = None
        if current_trace() is not None:
            return self.fun(*args, **kwargs)        # called inside another trace: inline it
        program, arrays = self._prepare(args, kwargs)
        for array in arrays:
            if isinstance(array, ShapeDtype):
                raise ArgumentError("ShapeDtype arguments can be lowered but not run; pass arrays",
                                    user_location())
        executable = self._executables.get(program.signature)
        if executable is None:
            executable = self._compile(program)
            self._executables[program.signature] = executable
        resident = getattr(executable, "resident", False)
        arrays = _arguments_for(executable, arrays)
        try:
            outputs = executable(*arrays)       # the first call of an executable compiles its kernels
        except Exception as error:
            # Kernels raise numpy's own errors (ValueError for negative integer powers): those pass.
            if not _is_toolchain_error(error):
                raise
            self._executables.pop(program.signature, None)      # nothing half-compiled is kept
            raise InternalError.wrapping(error, f"compiling {_graph_name(self.fun)}", user_location()) from error
        single = program.out_tree.kind == "leaf" and program.out_leaves[0][0] == "graph"
        if key is not None and len(key) == len(arrays):
            self._fast[key] = (executable, program, single)
        elif resident and self._fast_ok and not kwargs and arrays and len(arrays) == len(args):
            device_type = type(arrays[0])
            if all(type(a) is device_type and a is b for a, b in zip(arrays, args)):
                self._fast_device_type = device_type
                self._fast_device[tuple([(a.shape, a.dtype) for a in arrays])] = (executable, program, single)
        return _results(program, outputs)

    def _compile(self, program: TracedProgram):
        """The executable of one trace; a soft-placement fallback is reported once, here."""
        from flowjit.compiler.lowered import Lowered
        return compile_lowered(Lowered(program, self.options, self.costs), _graph_name(self.fun), stacklevel=4)


def _arguments_for(executable, arrays):
    """``arrays`` as ``executable`` takes them: device arrays copied to the host for a program
    whose buffers are on the host (a resident one takes them as they are)."""
    if getattr(executable, "resident", False) or not any(is_device_array(a) for a in arrays):
        return arrays
    return [to_host(a) if is_device_array(a) else a for a in arrays]


def compile_lowered(lowered, what: str, stacklevel: int):
    """``lowered.compile()`` with flowjit's errors passed on, any other wrapped with the user's
    line, and a soft-placement fallback warned about once (jit and Session share it);
    ``stacklevel`` counts from here to the user's call."""
    options = lowered.options
    try:
        executable = lowered.compile(checked=False)         # (both key executables by the arrays' types)
        notes = lowered.placement_notes() if options.soft_placement and options.backend == "kernels" else []
    except Exception as error:
        if isinstance(error, (FlowjitError, MemoryError)):
            raise
        raise InternalError.wrapping(error, f"compiling {what}", user_location(1)) from error
    if notes:
        warnings.warn(f"flowjit: {what}: " + "; ".join(notes), PlacementFallbackWarning, stacklevel=stacklevel)
    return executable


def run_executable(executable, arrays, what: str):
    """Call an executable; a toolchain error on its first call (which compiles its kernels) is
    wrapped with the user's line.  Kernels raise numpy's own errors (ValueError for negative
    integer powers): those pass."""
    try:
        return executable(*arrays)
    except Exception as error:
        if not _is_toolchain_error(error):
            raise
        raise InternalError.wrapping(error, f"compiling {what}", user_location()) from error


def _is_toolchain_error(error: BaseException) -> bool:
    """Numba's and LLVM's errors, and the file system's (the kernel cache): never the user's."""
    return type(error).__module__.split(".")[0] in ("numba", "llvmlite") or isinstance(error, OSError)


class PlacementFallbackWarning(UserWarning):
    """Soft placement could not meet a device request and put the node elsewhere."""


def _binding_problem(signature: inspect.Signature, kwargs: dict, error: TypeError) -> str:
    """Python's binding error, but an unknown keyword is named before a missing parameter."""
    parameters = signature.parameters
    if not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        unknown = [name for name in kwargs if name not in parameters or
                   parameters[name].kind is inspect.Parameter.POSITIONAL_ONLY]
        if unknown:
            names = ", ".join(f"'{name}'" for name in unknown)
            return (f"no parameter named {names} (the parameters are: "
                    f"{', '.join(parameters) or 'none'})")
    return str(error)


def explain_retrace(old: tuple, new: tuple, paths: list[str]) -> str:
    """Which argument changed between two trace signatures, and how."""
    old_tree, old_static_leaves, old_static, old_types = old
    new_tree, new_static_leaves, new_static, new_types = new
    if old_tree != new_tree:
        return "the structure of the arguments changed"
    if old_static != new_static:
        changed = [f"{name}={value!r} (was {dict(old_static).get(name)!r})"
                   for name, value in new_static if dict(old_static).get(name) != value]
        return "static argument " + ", ".join(changed) + " changed"
    if old_static_leaves != new_static_leaves:
        return "a Python scalar argument changed value (scalars are compile-time constants)"
    reasons = []
    for path, before, after in zip(paths, old_types, new_types):
        if before.dtype != after.dtype:
            reasons.append(f"argument '{path}' dtype {before.dtype} -> {after.dtype}")
        elif before.rank != after.rank:
            reasons.append(f"argument '{path}' rank {before.rank} -> {after.rank} ({before} -> {after})")
        elif [d == 1 for d in before.shape] != [d == 1 for d in after.shape]:
            reasons.append(f"argument '{path}' broadcast pattern {before} -> {after} (which dims are 1)")
        elif before.shape != after.shape:
            reasons.append(f"argument '{path}' shape {before} -> {after} (kernels are reused: no compile)")
    return "; ".join(reasons) or "new argument types"


def _results(program: TracedProgram, outputs: list):
    """The function's results: graph outputs placed back into the returned structure."""
    leaves = [_as_result(outputs[item]) if kind == "graph" else item for kind, item in program.out_leaves]
    return pytree.unflatten(program.out_tree, leaves)


def _as_result(array: np.ndarray):
    # numpy returns scalars, not 0-d arrays, from reductions and ufuncs on scalars.
    return array[()] if array.ndim == 0 else array


def _graph_name(fun) -> str:
    """A name the text format accepts: ``<lambda>`` becomes ``lambda``."""
    name = getattr(fun, "__name__", type(fun).__name__)
    return re.sub(r"[^A-Za-z0-9_.]", "", name) or "main"


def _value_name(path: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_]", "_", path) or "arg"
    return name if not name[0].isdigit() else f"arg{name}"


def jit(fun: Callable | None = None, *, static_argnums=(), static_argnames=(), options: CompileOptions | None = None,
        **option_fields):
    """Compile ``fun``, a function written against numpy.  Usable as ``@jit`` or ``@jit(...)``.

    ``option_fields`` set fields of ``CompileOptions`` (``fuse=False``, ``fastmath=True``...).
    """
    options = options_from_env(options).replace(**option_fields)

    def wrap(f: Callable) -> Jitted:
        return Jitted(f, static_argnums=static_argnums, static_argnames=static_argnames, options=options)
    return wrap(fun) if fun is not None else wrap
