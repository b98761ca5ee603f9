"""Tracing: a proxy array that records every numpy operation into a Graph.

``Tracer`` stands in for an ndarray while the user's function runs.  Python operators
route to numpy ufuncs, numpy routes ufuncs to ``__array_ufunc__`` and other functions
to ``__array_function__``, so one table (``numpy_api``) serves all three.
"""

from __future__ import annotations

import dis
import gc
import threading
import types
from contextlib import contextmanager

import numpy as np

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph, Node, Value
from flowjit.compiler.ir.ops.base import Op
from flowjit.compiler.ir.types import check_dtype
from flowjit.frontend.inputs import operand_problem
from flowjit.errors import (OpTypeError, ShapeError, TraceError, TracerConversionError, UnsupportedInputError,
                            UnsupportedOperatorError, user_frame, user_location)

_local = threading.local()
_VIEW_OPS = (ops.slice, ops.reshape, ops.transpose, ops.broadcast_to,    # numpy returns views for these
             ops.real, ops.imag)


class TraceContext:
    """The graph being built."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.viewed: set[Value] = set()      # values a view op reads: in-place writes to them are refused
        self.variables: dict[str, object] = {}          # name -> flowjit.Variable this trace used
        # Per variable: the last assign and the reads since (program order, as control edges),
        # and the read a later read may share (until the next assign).
        self.last_assign: dict[str, Node] = {}
        self.reads_since: dict[str, list[Node]] = {}
        self.shared_read: dict[str, "Tracer"] = {}
        self.control_scopes: list[list[Node] | None] = []   # flowjit.control_dependencies, innermost last

    def control_inputs(self) -> list[Node]:
        """The nodes ops traced now must run after (the enclosing control_dependencies scopes)."""
        nodes: list[Node] = []
        for scope in reversed(self.control_scopes):
            if scope is None:                    # control_dependencies(None) clears the outer scopes
                break
            nodes.extend(node for node in scope if node not in nodes)
        return nodes

    def emit(self, op: Op, inputs: list, attrs: dict | None = None, *, what: str | None = None,
             placement: dict | None = None, after: list[Node] = ()) -> list["Tracer"]:
        """Add a node applying ``op``; errors name ``what`` (the numpy spelling) and the user's line.

        ``placement`` replaces the device scope's (a variable's ops go where the variable is);
        ``after`` adds control inputs to those of the enclosing control_dependencies scopes."""
        location = user_location()
        if current_trace() is not self:
            raise _escaped_error(location)
        values = [self.value_of(item) for item in inputs]
        controls = self.control_inputs()
        controls += [node for node in after if node not in controls]
        try:
            node = self.graph.add_node(op, values, attrs or {}, loc=location, control_inputs=controls,
                                       **(placement if placement is not None else placement_scope()))
        except TraceError as error:
            operands = ", ".join(str(value.type) for value in values)
            raise type(error)(f"{what or op.name}({operands}): {error.message}", location) from None
        if op in _VIEW_OPS:
            self.viewed.update(values)
            for item in inputs:
                if isinstance(item, Tracer):
                    item._viewed = True
        return [Tracer(self, value) for value in node.outputs]

    # -- variables: program order per variable, as control edges ----------------------------------
    def read_variable(self, variable) -> "Tracer":
        """The variable's value now: after its last assign in this trace (a control edge).
        Reads between two assigns share one node, unless a control_dependencies scope asks
        for a read of its own."""
        name = variable.name
        self.variables[name] = variable
        shared = self.shared_read.get(name)
        if shared is not None and not self.control_inputs():
            return shared
        last = self.last_assign.get(name)
        tracer = self.emit(ops.read_variable, [], {"var": name, "shape": variable.shape, "dtype": variable.dtype},
                           placement=variable.placement(), after=[last] if last is not None else [])[0]
        self.reads_since.setdefault(name, []).append(tracer._value.producer)
        if not self.control_inputs():
            self.shared_read[name] = tracer
        return tracer

    def assign_variable(self, variable, value: "Tracer") -> Node:
        """Store ``value`` (already of the variable's type) into the variable: after its last
        assign and every read since (control edges), so that those reads see the old value."""
        name = variable.name
        self.variables[name] = variable
        before = list(self.reads_since.get(name, []))
        last = self.last_assign.get(name)
        if last is not None:
            before.insert(0, last)
        self.emit(ops.assign_variable, [value], {"var": name}, placement=variable.placement(), after=before)
        node = self.graph.nodes[-1]
        self.last_assign[name] = node
        self.reads_since[name] = []
        self.shared_read.pop(name, None)
        return node

    def emit1(self, op: Op, inputs: list, attrs: dict | None = None, *, what: str | None = None) -> "Tracer":
        return self.emit(op, inputs, attrs, what=what)[0]

    def value_of(self, item) -> Value:
        if isinstance(item, Tracer):
            if item._trace is not self:
                raise _escaped_error(user_location())
            return item._value
        if is_variable(item):
            return self.read_variable(item)._value
        return self.constant(item)._value

    def constant(self, value, dtype=None) -> "Tracer":
        """A constant node for a Python or numpy value (numpy arrays are captured whole)."""
        if is_variable(value):
            read = self.read_variable(value)
            return read if dtype is None or np.dtype(dtype) == read.dtype else read.astype(dtype)
        array = np.asarray(value, dtype=dtype)
        check_dtype(array.dtype, "a constant")
        node = self.graph.add_node(ops.constant, [], {"value": array}, loc=user_location(),
                                   control_inputs=self.control_inputs(), **placement_scope())
        return Tracer(self, node.output)


def is_variable(item) -> bool:
    """Whether ``item`` is a flowjit.Variable (read, not captured, when a trace meets it)."""
    return getattr(type(item), "_flowjit_variable", False)


def read_variables(items):
    """``items`` (operands, or nested lists and tuples of them) with every Variable replaced by
    its traced read."""
    if is_variable(items):
        trace = current_trace()
        return trace.read_variable(items) if trace is not None else items
    if isinstance(items, (list, tuple)) and not hasattr(items, "_fields"):
        converted = [read_variables(item) for item in items]
        if any(new is not old for new, old in zip(converted, items)):
            return type(items)(converted)
    if isinstance(items, dict):
        return {key: read_variables(value) for key, value in items.items()}
    return items


def _escaped_error(location) -> TraceError:
    return TraceError("a traced value escaped the jitted function that traced it (stored in a global, a list "
                      "or an object) and was used after that function returned or inside another one: return "
                      "it from that function instead of storing it", location)


def placement_scope() -> dict:
    """The requested device and colocation that ``device``/``colocate_with`` scopes set."""
    spec = getattr(_local, "device", None)
    return {"requested_device": None if spec is None else str(spec),
            "colocation": getattr(_local, "colocation", None)}


@contextmanager
def device(name: str | None):
    """Request a device for every op traced inside: ``with flowjit.device("/device:cpu:1"):``.

    Partial specs (``"/device:gpu:*"``, ``"/job:worker"``) constrain; nested scopes merge,
    the inner one's parts winning; ``device(None)`` clears the request.
    """
    from flowjit.devices import DeviceSpec
    outer = getattr(_local, "device", None)
    if name is None:
        inner = None
    else:
        spec = DeviceSpec.parse(name) if isinstance(name, str) else DeviceSpec.parse(str(name))
        inner = spec if outer is None else outer.merged(spec)
    _local.device = inner
    try:
        yield
    finally:
        _local.device = outer


@contextmanager
def colocate_with(tensor):
    """Every op traced inside goes on the same device as the op that produced ``tensor``."""
    if not isinstance(tensor, Tracer):
        raise TraceError(f"colocate_with needs a traced array, not {type(tensor).__name__}", user_location(2))
    producer = tensor._value.producer
    if producer is None:
        raise TraceError(f"colocate_with({tensor._value.name}): the function's inputs are not placed; "
                         f"colocate with an op's result", user_location(2))
    group = producer.colocation or producer.name
    if producer.colocation is None:
        producer.colocation = group
    outer = getattr(_local, "colocation", None)
    _local.colocation = group
    try:
        yield
    finally:
        _local.colocation = outer


def current_trace() -> TraceContext | None:
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


@contextmanager
def tracing(graph: Graph | TraceContext):
    """Trace into ``graph`` (a new context), or into an existing context again (graph mode's
    ``with g.as_default():`` re-entered: its tensors stay usable)."""
    context = graph if isinstance(graph, TraceContext) else TraceContext(graph)
    stack = _local.__dict__.setdefault("stack", [])
    stack.append(context)
    try:
        yield context
    finally:
        stack.pop()


@contextmanager
def outside_trace():
    """Suspend every trace of this thread: for creating state a trace then uses (an
    optimiser's slot variables, made on the first trace that needs them)."""
    stack = _local.__dict__.setdefault("stack", [])
    saved = stack[:]
    stack.clear()
    try:
        yield
    finally:
        stack[:] = saved


def weak_constant(trace: TraceContext, scalar, others: list) -> "Tracer":
    """A Python scalar takes its dtype from the traced operands (numpy 2's NEP 50 rule)."""
    dtypes = [item.dtype for item in others if isinstance(item, Tracer)]
    try:
        dtype = np.result_type(*dtypes, scalar)
        return trace.constant(np.asarray(scalar, dtype=dtype))
    except (OverflowError, TypeError, ValueError) as error:
        names = ", ".join(str(d) for d in dtypes)
        raise TraceError(f"the Python scalar {scalar!r} does not fit the traced operands ({names}): {error}",
                         user_location()) from None


def lift_operands(trace: TraceContext, operands: list, what: str | None = None) -> list:
    """Python scalars become weakly-typed constants; arrays and numpy scalars keep their dtype.

    ``what`` (the numpy spelling of the op) names the op when an operand cannot be traced."""
    lifted = []
    operands = read_variables(list(operands))
    for number, item in enumerate(operands, start=1):
        if not isinstance(item, Tracer):
            problem = operand_problem(item)
            if problem is not None:
                raise UnsupportedInputError(f"{what or 'an op'}: operand {number} {problem}", user_location())
        if isinstance(item, Tracer):
            lifted.append(item)
        elif isinstance(item, (bool, int, float, complex)) and not isinstance(item, np.generic):
            lifted.append(weak_constant(trace, item, operands))
        else:
            array = np.asarray(item)
            try:
                check_dtype(array.dtype, "an operand")
            except TraceError as error:
                raise type(error)(error.message, user_location()) from None
            lifted.append(trace.constant(array))
    return lifted


def _refuse_store_into_numpy(tracer: "Tracer") -> None:
    """``z[...] = traced`` with a numpy array z: numpy converts the value (``__array__``,
    ``float()``) to store it in z, which no trace can follow; say so, and what to write."""
    frame = user_frame()
    instruction = None if frame is None else next(
        (i for i in dis.get_instructions(frame.f_code) if i.offset == frame.f_lasti), None)
    if instruction is not None and instruction.opname == "STORE_SUBSCR":
        raise TracerConversionError(
            f"z[...] = v with a traced v ({tracer._value.type}) and a numpy array z: numpy would store the "
            f"value in that numpy array, which flowjit cannot trace; make z a traced array first "
            f"(z = np.zeros_like(x) of a traced x, or z = z + x[...] * 0), then assign into it", user_location())


def _value_error(tracer: "Tracer", what: str) -> TracerConversionError:
    """For conversions to Python values (int(), .item(), .tolist()): not control flow."""
    _refuse_store_into_numpy(tracer)
    return TracerConversionError(
        f"{what} of a traced value ({tracer._value.type}) needs its value, which is not known while "
        f"tracing: inside a jitted function arrays stay abstract. Keep it an array (x[i] for one element, "
        f"x.astype(dtype) for another dtype), or return it and call {what} on the result.", user_location())


def _conversion_error(tracer: "Tracer", what: str) -> TracerConversionError:
    return TracerConversionError(
        f"{what} of a traced value ({tracer._value.type}) is not known while tracing: Python control "
        f"flow cannot depend on array values. Use np.where(cond, a, b) for a per-element choice, or mark "
        f"the argument static with static_argnums / static_argnames.", user_location())


class Tracer:
    """A traced array: has a static shape and dtype, and records what is done to it."""

    __slots__ = ("_trace", "_value", "_origin", "_viewed")
    __array_priority__ = 1000
    __hash__ = object.__hash__

    def __init__(self, trace: TraceContext, value: Value, origin: str | None = None):
        self._trace = trace
        self._value = value
        self._origin = origin       # "argument 'x'" (numpy would write into the caller's array), "copy"
        self._viewed = False        # a view op read this array object: an in-place write would reach the view

    def _copy(self) -> "Tracer":
        """A new array with this one's value (x.copy(), astype to the same dtype): writable in place."""
        return Tracer(self._trace, self._value, origin="copy")

    def __setattr__(self, name, value):
        if name in Tracer.__slots__:
            object.__setattr__(self, name, value)
            return
        raise UnsupportedOperatorError(
            f"x.{name} = ... on a traced array ({self._value.type}): numpy would change the array in place, "
            f"which flowjit does not trace; build a new array instead"
            + (" (x = x.reshape(...))" if name == "shape" else
               " (x = np.real(x) + 1j * value)" if name == "imag" else
               " (x = value + 1j * np.imag(x))" if name == "real" else ""), user_location())

    # -- static facts --------------------------------------------------------------------
    shape = property(lambda self: self._value.shape)
    dtype = property(lambda self: self._value.dtype)
    ndim = property(lambda self: self._value.type.rank)
    size = property(lambda self: self._value.type.size)
    itemsize = property(lambda self: self._value.dtype.itemsize)
    nbytes = property(lambda self: self._value.type.nbytes)

    @property
    def name(self) -> str:
        """The tensor's whitepaper name, ``node:port`` (what ``Session.run`` fetches and feeds)."""
        return self._value.tensor_name

    def __repr__(self) -> str:
        return f"Tracer<%{self._value.name}: {self._value.type}>"

    def __len__(self) -> int:
        if not self.shape:
            raise UnsupportedOperatorError(f"len() of a 0-d traced array ({self._value.type}): it has no "
                                           f"length, as for numpy; use x.size or x.shape", user_location())
        return self.shape[0]

    def __iter__(self):
        for index in range(len(self)):
            yield self[index]

    # -- what cannot be traced ---------------------------------------------------------------
    def __bool__(self):
        raise _conversion_error(self, "the truth value (bool(), if, while, and/or)")

    def __int__(self):
        raise _value_error(self, "int()")

    def __float__(self):
        raise _value_error(self, "float()")

    def __index__(self):
        raise TracerConversionError(
            f"use of a traced value ({self._value.type}) as a Python integer (an index into a list, "
            f"range(), a shape) needs its value, which is not known while tracing. Index arrays with "
            f"Python ints and slices, or mark the argument static with static_argnums / static_argnames.",
            user_location())

    def __complex__(self):
        raise _value_error(self, "complex()")

    def __array__(self, dtype=None, copy=None):
        _refuse_store_into_numpy(self)
        raise TracerConversionError(
            f"a traced value ({self._value.type}) was converted to a concrete numpy array (np.asarray, "
            f"np.array, or a function that converts its input); inside a jitted function arrays are "
            f"abstract. Keep it as an array expression, or mark the argument static.", user_location())

    def tolist(self):
        raise _value_error(self, ".tolist()")

    def item(self, *args):
        raise _value_error(self, ".item()")

    def __getattr__(self, name):
        # Reached when the Tracer itself has no attribute of this name: the ndarray methods and
        # properties numpy_api implements, else an error naming what is not supported.
        from flowjit.frontend import numpy_api
        from flowjit.frontend.unsupported import attribute_error
        if name in ("_trace", "_value", "_origin", "_viewed"):          # not set yet (a copy probe, __new__)
            raise AttributeError(name)
        if not name.startswith("_"):
            if name in numpy_api.METHODS:
                return types.MethodType(numpy_api.METHODS[name], self)
            if name in numpy_api.PROPERTIES:
                return numpy_api.PROPERTIES[name](self)
        raise attribute_error(self, name)

    def __getitem__(self, key):
        from flowjit.frontend import numpy_api
        return numpy_api.getitem(self, key)

    def __dir__(self):
        from flowjit.frontend import numpy_api
        return sorted(set(super().__dir__()) | set(numpy_api.METHODS) | set(numpy_api.PROPERTIES))

    def __setitem__(self, key, value):
        from flowjit.frontend.setitem import setitem
        setitem(self, key, read_variables([value])[0])

    # -- numpy protocols ---------------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from flowjit.frontend import numpy_api
        return numpy_api.apply_ufunc(self._trace, ufunc, method, read_variables(inputs), read_variables(kwargs))

    def __array_function__(self, func, types, args, kwargs):
        from flowjit.frontend import numpy_api
        handler = numpy_api.FUNCTIONS.get(func)
        if handler is None:
            from flowjit.frontend.unsupported import function_error
            raise function_error(func)
        return handler(*read_variables(args), **read_variables(kwargs))


def _power_operator(self, other):
    """ndarray's ``**`` (numpy's fast_scalar_power): a Python int 2 is np.square (for booleans
    that is int8, where np.power gives int64); on float arrays a Python int -1 is np.reciprocal
    and a Python float 0.5 is np.sqrt (so float16 (-inf) ** 0.5 is nan, np.power's is inf)."""
    if type(other) is int and other == 2:
        return np.square(self)
    if self.dtype.kind == "f" and type(other) is int and other == -1:
        return np.reciprocal(self)
    if self.dtype.kind == "f" and type(other) is float and other == 0.5:
        return np.sqrt(self)
    return np.power(self, other)


def _install_operators():
    """Python operators call the ufuncs numpy's ndarray would, so one table handles both."""
    binary = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.divide,
              "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power, "matmul": np.matmul,
              "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}
    for name, ufunc in binary.items():
        def forward(self, other, ufunc=ufunc):
            return ufunc(self, other)

        def reflected(self, other, ufunc=ufunc):
            return ufunc(other, self)
        setattr(Tracer, f"__{name}__", forward)
        setattr(Tracer, f"__r{name}__", reflected)
    for name, ufunc in {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
                        "eq": np.equal, "ne": np.not_equal}.items():
        setattr(Tracer, f"__{name}__", lambda self, other, ufunc=ufunc: ufunc(self, other))
    Tracer.__pow__ = _power_operator
    Tracer.__neg__ = lambda self: np.negative(self)
    Tracer.__pos__ = lambda self: self._copy()          # (numpy's +x is a new array)
    Tracer.__abs__ = lambda self: np.absolute(self)
    Tracer.__invert__ = lambda self: np.invert(self)
    # divmod(x, y) on an ndarray is np.divmod: numpy's floor division and remainder, together.
    Tracer.__divmod__ = lambda self, other: (np.floor_divide(self, other), np.remainder(self, other))
    Tracer.__rdivmod__ = lambda self, other: (np.floor_divide(other, self), np.remainder(other, self))

    def no_round(self, ndigits=None):
        raise UnsupportedOperatorError(f"round() of a traced array ({self._value.type}): numpy arrays do not "
                                       f"support round() either; use np.round(x)", user_location())
    Tracer.__round__ = no_round
    for name, (symbol, ufunc) in {"lshift": ("<<", "left_shift"), "rshift": (">>", "right_shift")}.items():
        def shift(self, other, symbol=symbol, ufunc=ufunc):
            raise UnsupportedOperatorError(unsupported_shift(symbol, ufunc, self, other), user_location())
        setattr(Tracer, f"__{name}__", shift)
        setattr(Tracer, f"__r{name}__", lambda self, other, shift=shift: shift(other, self))


_INPLACE = {"iadd": "+", "isub": "-", "imul": "*", "itruediv": "/", "ifloordiv": "//", "imod": "%", "ipow": "**",
            "imatmul": "@", "iand": "&", "ior": "|", "ixor": "^"}


def _install_inplace_operators():
    """numpy's ``x += y`` writes the result into x: it keeps x's shape and dtype (cast by the
    same_kind rule) and every name bound to x sees it.  flowjit does that by rebinding this Tracer
    object.  What numpy would write elsewhere (into an argument, through or under a view) is refused."""
    for name, symbol in _INPLACE.items():
        binary = getattr(Tracer, f"__{name[1:]}__")

        def inplace(self, other, binary=binary, symbol=symbol):
            where = f"x {symbol}= y on {self._value.type}"
            return write_in_place(self, lambda: binary(self, other), where, f"x = x {symbol} y")
        setattr(Tracer, f"__{name}__", inplace)


def write_in_place(target: Tracer, compute, where: str, instead: str) -> Tracer:
    """numpy's write of ``compute()`` into the traced array ``target`` (``x += y``,
    ``np.add(x, y, out=x)``): ``target`` is rebound to the result, cast to its dtype by the
    same_kind rule; a write numpy would make elsewhere, or that changes x's shape, is refused."""
    location = user_location()
    problem = _inplace_write_problem(target)
    if problem is not None:
        raise UnsupportedOperatorError(f"{where}: numpy would write the result {problem}; flowjit "
                                       f"never writes into arrays: write {instead}", location)
    target._value = _fitted(compute(), target, where, instead, location)._value
    return target


def _fitted(result: Tracer, x, where: str, instead: str, location) -> Tracer:
    """``result`` as numpy writes it into ``x`` (a tracer or an array): x's shape, cast to x's
    dtype by the same_kind rule of in-place operators; anything else is refused."""
    if result.shape != x.shape:
        raise ShapeError(f"{where}: the result {result._value.type} does not fit into x (numpy writes "
                         f"the result into x, so it must keep x's shape); write {instead}", location)
    if result.dtype != x.dtype:
        if not np.can_cast(result.dtype, x.dtype, "same_kind"):
            raise OpTypeError(f"{where}: the result's dtype {result.dtype} cannot be cast to x's dtype "
                              f"{x.dtype} by numpy's same_kind rule for in-place operators; write "
                              f"{instead} for a {result.dtype} result", location)
        result = result.astype(x.dtype)
    return result


def write_into_local_array(array: np.ndarray, result: Tracer, where: str, instead: str) -> Tracer:
    """``x += traced`` where x is a plain numpy array the traced function made itself
    (``count = np.zeros(n, np.int32)``): numpy writes into x, and Python binds the name to what
    ``+=`` returns, so the name comes back bound to a new traced array holding the result, as
    numpy's own x would hold it.  That is numpy's outcome only when nothing else sees x: the
    statement must be an augmented assignment (an explicit ``out=`` call rebinds nothing) and x
    must be held by no other name, container or object (a global, a closure's, an attribute, a
    list), as gc's referrers and the statement's frame tell; anything else is refused."""
    location = user_location()
    frame = user_frame()
    instruction = None if frame is None else next(
        (i for i in dis.get_instructions(frame.f_code) if i.offset == frame.f_lasti), None)
    if instruction is not None and instruction.opname == "BINARY_OP" and instruction.argrepr.endswith("="):
        symbol = instruction.argrepr[:-1]
        where, instead = f"x {symbol}= y on {where.rsplit(' on ', 1)[1]} (a numpy array)", f"x = x {symbol} y"
    refusal = (f"{where}: numpy would write the result into that numpy array, {{}}; flowjit never writes "
               f"into arrays: write {instead}")
    if instruction is None or instruction.opname != "BINARY_OP" or not instruction.argrepr.endswith("="):
        raise UnsupportedOperatorError(refusal.format("and names bound to it would not see a traced result"),
                                       location)
    # (plain loops: a comprehension naming ``array`` would hold it in a cell, a referrer itself)
    local = frame.f_locals                  # (3.11 keeps this snapshot on the frame: not a sharer)
    shared = False
    for referrer in gc.get_referrers(array):
        shared = shared or not (isinstance(referrer, tuple) or referrer is frame or referrer is local)
    names = 0
    for name in frame.f_code.co_varnames:
        names += local.get(name) is array
    for value in local.values():
        if isinstance(value, (tuple, list, dict, set)):
            for item in (value.values() if isinstance(value, dict) else value):
                shared = shared or item is array
    if shared or names != 1 or array.base is not None:
        raise UnsupportedOperatorError(refusal.format("which other names, containers or views also see"),
                                       location)
    return _fitted(result, array, where, instead, location)._copy()


def _inplace_write_problem(tracer: Tracer) -> str | None:
    """Where numpy's in-place write would land that flowjit cannot follow, or None."""
    if tracer._origin is not None and tracer._origin != "copy":
        return f"into the caller's array ({tracer._origin})"
    producer = tracer._value.producer
    if tracer._origin != "copy" and producer is not None and producer.op in _VIEW_OPS:
        return f"through a view ({producer.op.name}) into the array it views"
    # (a copy shares its original's value until written: only views of the copy itself count)
    if tracer._viewed or (tracer._origin != "copy" and tracer._value in tracer._trace.viewed):
        return "into an array that views of it (slices, reshapes, transposes) would see too"
    return None


def unsupported_shift(symbol: str, ufunc: str, left, right) -> str:
    from flowjit.frontend.unsupported import HINTS
    types = " and ".join(str(item._value.type) if isinstance(item, Tracer) else type(item).__name__
                         for item in (left, right))
    return f"the bit shift {symbol} (np.{ufunc}) of {types} is not supported by flowjit; {HINTS[ufunc]}"


_install_operators()
_install_inplace_operators()
