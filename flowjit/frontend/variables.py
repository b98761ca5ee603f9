"""``flowjit.Variable``: a named, typed buffer that lives across calls (whitepaper §2).

Inside a jitted function a variable behaves like an array: every numpy expression on it
traces a read (``read_variable``), and ``assign``/``assign_add``/``assign_sub`` trace
writes (``assign_variable``).  Within one call the operations on one variable happen in
program order (the trace adds control edges: a read after its last assign, an assign
after the reads since), so a read after an assign sees the new value.  Outside a jitted
function the same calls act at once on the stored value, with numpy's semantics, and
``numpy()`` returns a copy.

Threads: a call of a compiled program holds the locks of the variables it uses for the
whole call -- for writing those it assigns, for reading the others -- so concurrent calls
never lose an update or see a torn value, calls that only read run side by side, and calls
in any order of variables never deadlock (``runtime/variables.py`` says how).  Outside a
jitted function each operation on a variable is atomic too: ``v.assign_add(x)`` reads and
writes under the variable's lock, and every read takes a copy under it.

In graph mode (``with graph.as_default():``) a variable may also be made while the graph is
built, as in TensorFlow 1; its reads and assigns go into the graph, run by ``Session.run``.

A function finds the variables it uses by tracing: a closure, a global, an attribute of
an object, a pytree of variables passed as an argument (each traces by identity: another
variable is another trace), none declared by hand.

Assigned values keep the variable's shape and dtype: a Python number takes the variable's
dtype and fills it; an array must have its shape and dtype exactly (``assign_add`` and
``assign_sub`` cast their result by numpy's same_kind rule, as ``+=`` does).  Anything
else is an error naming the variable, both types and the user's line.
"""

from __future__ import annotations

import numpy as np

from flowjit.compiler.ir.types import check_dtype
from flowjit.errors import (OpTypeError, ShapeError, TraceError, TracerConversionError, UnsupportedDTypeError,
                            user_location)
from flowjit.frontend.control import Operation
from flowjit.frontend.graph_mode import default_graph
from flowjit.frontend.tracer import Tracer, current_trace, is_variable, placement_scope
from flowjit.runtime import variables as storage

# numpy functions that write into an argument: a variable changes only through assign.
_WRITERS = {np.copyto, np.put, np.place, np.putmask, np.fill_diagonal, np.put_along_axis}


def _type_text(shape, dtype) -> str:
    from flowjit.compiler.ir.types import TensorType
    return str(TensorType(tuple(shape), np.dtype(dtype)))


class Variable:
    """A named, typed buffer that lives across calls.  See the module docstring."""

    _flowjit_variable = True
    __array_priority__ = 1001
    __hash__ = object.__hash__            # by identity, although == compares elementwise (as ndarray's)

    def __init__(self, initial_value, name: str | None = None, device: str | None = None, trainable: bool = True,
                 dtype=None):
        location = user_location()
        if current_trace() is not None and default_graph() is None:     # (a graph being built may make them)
            raise TraceError("flowjit.Variable(...) inside a jitted function: create variables once, outside, "
                             "and use them inside (a closure, a global, an attribute or an argument)", location)
        if isinstance(initial_value, Tracer):
            raise TraceError("a Variable's initial value must be concrete, not a traced array", location)
        if is_variable(initial_value):
            initial_value = initial_value.numpy()
        array = np.array(initial_value, dtype=dtype, copy=True, order="C")
        try:
            check_dtype(array.dtype, "a Variable's value")
        except TraceError as error:
            raise type(error)(error.message, location) from None
        if array.dtype.kind == "c":
            raise UnsupportedDTypeError(f"a Variable's value has dtype {array.dtype}: variables hold real values "
                                        f"(as checkpoints and gradients do); keep the real and imaginary parts "
                                        f"in two variables", location)
        self._buffer = storage.create(name if name is not None else "Variable", array, _device_spec(device))
        self.trainable = bool(trainable)

    # -- static facts ---------------------------------------------------------------------------
    name = property(lambda self: self._buffer.name)
    device = property(lambda self: self._buffer.device, doc="the requested device spec, or None")
    shape = property(lambda self: self._buffer.value.shape)
    dtype = property(lambda self: self._buffer.value.dtype)
    ndim = property(lambda self: self._buffer.value.ndim)
    size = property(lambda self: self._buffer.value.size)
    nbytes = property(lambda self: self._buffer.value.nbytes)

    def placement(self) -> dict:
        """Where the variable's reads and writes go: its device (placement colocates them all)."""
        return {"requested_device": self.device, "colocation": None}

    def __repr__(self) -> str:
        where = f", device={self.device!r}" if self.device else ""
        if current_trace() is not None:
            return f"<flowjit.Variable '{self.name}' {_type_text(self.shape, self.dtype)}{where}>"
        if self._buffer.home is not None:
            return f"<flowjit.Variable '{self.name}' {_type_text(self.shape, self.dtype)}{where} " \
                   f"on {self._buffer.home.describe()}>"
        return f"<flowjit.Variable '{self.name}' {_type_text(self.shape, self.dtype)}{where} " \
               f"value={np.array2string(self._buffer.value, threshold=8)}>"

    # -- reading ----------------------------------------------------------------------------------
    def _operand(self):
        """What an expression on the variable sees: a traced read, or (outside a trace) a copy of
        the stored array, taken under the variable's lock."""
        trace = current_trace()
        return trace.read_variable(self) if trace is not None else self._copy()

    def _copy(self) -> np.ndarray:
        with storage.locked(self._buffer, False, f"a read of Variable '{self.name}'"):
            return storage.read_value(self._buffer)          # (fetched from its task, if it lives on one)

    def value(self):
        """The current value: a traced read inside a jitted function, else a copy."""
        trace = current_trace()
        return trace.read_variable(self) if trace is not None else self._copy()

    read_value = value

    def numpy(self) -> np.ndarray:
        """A copy of the stored value (outside jitted functions)."""
        if current_trace() is not None:
            raise TracerConversionError(
                f"Variable '{self.name}'.numpy() inside a jitted function: its value at this point of the "
                f"call is not known while tracing; use the variable in array expressions (or v.value())",
                user_location())
        return self._copy()

    def __array__(self, dtype=None, copy=None):
        if current_trace() is not None:
            raise TracerConversionError(
                f"Variable '{self.name}' was converted to a concrete array (np.asarray, np.array) inside a "
                f"jitted function, which would freeze its value into the program; use it in array "
                f"expressions instead", user_location())
        if copy is False:
            raise ValueError(f"Variable '{self.name}': np.asarray(v, copy=False) would share the variable's "
                             f"buffer; variables change only through assign")
        value = self._copy()
        return value.astype(dtype, copy=False) if dtype is not None else value

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        out = kwargs.get("out", ())
        if any(is_variable(item) for item in (out if isinstance(out, tuple) else (out,))):
            raise OpTypeError(f"np.{ufunc.__name__}(..., out=<Variable '{self.name}'>): a variable changes only "
                              f"through v.assign(...), v.assign_add(...) or v.assign_sub(...)", user_location())
        inputs = [item._operand() if is_variable(item) else item for item in inputs]
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        if func in _WRITERS:
            raise OpTypeError(f"np.{func.__name__} would write into Variable '{self.name}': a variable changes "
                              f"only through v.assign(...), v.assign_add(...) or v.assign_sub(...)",
                              user_location())
        return func(*_operands(args), **_operands(kwargs))

    def __getattr__(self, name):
        # Only reached for names Variable lacks: the array's own (v.T, v.sum(axis=0), v.reshape...).
        if name.startswith("_"):
            raise AttributeError(name)
        trace = current_trace()
        return getattr(trace.read_variable(self) if trace is not None else self.numpy(), name)

    def __getitem__(self, key):
        key = _operands(key)
        if current_trace() is not None:
            return self._operand()[key]
        with storage.locked(self._buffer, False, f"a read of Variable '{self.name}'"):
            item = (self._buffer.value if self._buffer.home is None else storage.read_value(self._buffer))[key]
            return item.copy() if isinstance(item, np.ndarray) else item

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError(f"len() of Variable '{self.name}', which is 0-d")
        return self.shape[0]

    def __iter__(self):
        for index in range(len(self)):
            yield self[index]

    def __bool__(self):
        return bool(self._operand())

    def __float__(self):
        return float(self._operand())

    def __int__(self):
        return int(self._operand())

    def __complex__(self):
        return complex(self._operand())

    def __deepcopy__(self, memo):
        """A new variable (its own buffer and name) with a copy of this one's value."""
        return Variable(self.numpy(), name=self.name, device=self.device, trainable=self.trainable)

    def __copy__(self):
        return self.__deepcopy__({})

    def __setitem__(self, key, value):
        raise TraceError(f"Variable '{self.name}'[...] = ...: a variable changes only as a whole, through "
                         f"v.assign(np.where(mask, new, v)) or v.assign(np.concatenate(...))", user_location())

    # -- writing ---------------------------------------------------------------------------------
    def assign(self, value):
        """Store ``value``.  Inside a jitted function: a traced write, returning the operation (for
        ``control_dependencies``); outside: at once, returning the variable."""
        return self._store(value, "assign", user_location())

    def assign_add(self, delta):
        """``v.assign(v + delta)``, the result cast to ``v``'s dtype by numpy's same_kind rule;
        outside a jitted function one atomic step."""
        return self._update(np.add, delta, "assign_add", user_location())

    def assign_sub(self, delta):
        """``v.assign(v - delta)``, the result cast to ``v``'s dtype by numpy's same_kind rule;
        outside a jitted function one atomic step."""
        return self._update(np.subtract, delta, "assign_sub", user_location())

    def _update(self, ufunc, delta, what: str, location):
        trace = current_trace()
        if trace is not None:
            return self._store(self._updated(ufunc, trace.read_variable(self), _operands(delta), what, location),
                               what, location, computed=True)
        # Other variables in ``delta`` are read first, each under its own lock: this one's is
        # taken alone, so two updates of variables from each other cannot deadlock.
        delta = _operands(delta, keep=self)
        with storage.locked(self._buffer, True, f"Variable '{self.name}'.{what}"):
            current = self._buffer.value if self._buffer.home is None else storage.read_value(self._buffer)
            result = self._updated(ufunc, current, _operands(delta, keep=self, own=current), what, location)
            return self._store(result, what, location, computed=True, holding=True)

    def _updated(self, ufunc, current, delta, what: str, location):
        result = ufunc(current, delta)
        if result.dtype != self.dtype:
            if not np.can_cast(result.dtype, self.dtype, "same_kind"):
                raise OpTypeError(f"Variable '{self.name}'.{what}: the result {_type_text(result.shape, result.dtype)}"
                                  f" cannot be cast to the variable's {_type_text(self.shape, self.dtype)} by "
                                  f"numpy's same_kind rule", location)
            result = result.astype(self.dtype)
        return result

    def _store(self, value, what: str, location, computed: bool = False, holding: bool = False):
        """Check ``value`` fits and store it: traced, or now (``holding``: under the variable's
        write lock already)."""
        trace = current_trace()
        value = _operands(value)
        if isinstance(value, (bool, int, float)) and not isinstance(value, np.generic):
            if np.result_type(self.dtype, value) != self.dtype:
                raise OpTypeError(f"Variable '{self.name}' ({_type_text(self.shape, self.dtype)}).{what}"
                                  f"({value!r}): the number does not fit the variable's dtype", location)
            scalar = np.asarray(value, self.dtype)
            if trace is not None:
                value = trace.constant(scalar)
                value = np.broadcast_to(value, self.shape) if self.shape else value
            else:
                value = np.full(self.shape, scalar, self.dtype)
        elif isinstance(value, complex):
            raise OpTypeError(f"Variable '{self.name}'.{what}: complex numbers are not supported", location)
        elif not isinstance(value, Tracer):
            value = np.asarray(value)
        shape, dtype = tuple(value.shape), value.dtype
        if shape != self.shape or dtype != self.dtype:
            kind = ShapeError if shape != self.shape else OpTypeError
            operand = "its result" if computed else "a value"
            raise kind(f"Variable '{self.name}' is {_type_text(self.shape, self.dtype)}; {what} of {operand} of "
                       f"type {_type_text(shape, dtype)} does not fit it (assigned values keep the variable's "
                       f"shape and dtype)", location)
        if trace is None:
            if isinstance(value, Tracer):
                raise TraceError(f"Variable '{self.name}'.{what}: a traced value used outside its jitted function",
                                 location)
            if holding:
                storage.write_value(self._buffer, value)
            else:
                with storage.locked(self._buffer, True, f"Variable '{self.name}'.{what}"):
                    storage.write_value(self._buffer, value)
            return self
        if isinstance(value, Tracer) and value._trace is not trace:
            raise TraceError(f"Variable '{self.name}'.{what}: a traced value escaped its jitted function",
                             location)
        tracer = value if isinstance(value, Tracer) else trace.constant(value)
        return Operation(trace, trace.assign_variable(self, tracer))


_KEEP = object()


def _operands(item, keep=None, own=_KEEP):
    """``item`` with each Variable replaced by what an expression sees of it (nested lists,
    tuples and dicts included); the variable ``keep`` is left as it is, or replaced by
    ``own`` when given (its value, read under the lock its caller holds)."""
    if is_variable(item):
        if item is keep:
            return item if own is _KEEP else own
        return item._operand()
    if isinstance(item, (list, tuple)) and not hasattr(item, "_fields"):
        converted = [_operands(x, keep, own) for x in item]
        return type(item)(converted) if any(n is not o for n, o in zip(converted, item)) else item
    if isinstance(item, dict):
        return {key: _operands(value, keep, own) for key, value in item.items()}
    return item


def _device_spec(device) -> str | None:
    """The device a new variable requests: ``device`` merged into the enclosing device scope's."""
    from flowjit.devices import DeviceSpec
    scope = placement_scope()["requested_device"]
    outer = DeviceSpec.parse(scope) if scope else None
    if device is None:
        return str(outer) if outer is not None else None
    spec = DeviceSpec.parse(str(device))
    return str(spec if outer is None else outer.merged(spec))


def _install_operators():
    """Operators act on the value (a traced read, or the stored array), with ndarray's (or the
    tracer's) own semantics; in-place operators are refused."""
    binary = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
              "lshift", "rshift", "divmod")
    import operator
    for name in binary:
        function = getattr(operator, name if name not in ("and", "or") else name + "_", None) or divmod

        def forward(self, other, function=function):
            return function(self._operand(), _operands(other))

        def reflected(self, other, function=function):
            return function(_operands(other), self._operand())
        setattr(Variable, f"__{name}__", forward)
        setattr(Variable, f"__r{name}__", reflected)
    for name in ("lt", "le", "gt", "ge", "eq", "ne"):
        function = getattr(operator, name)
        setattr(Variable, f"__{name}__", lambda self, other, function=function: function(self._operand(),
                                                                                          _operands(other)))
    for name in ("neg", "pos", "abs", "invert"):
        function = getattr(operator, name)
        setattr(Variable, f"__{name}__", lambda self, function=function: function(self._operand()))
    for name, symbol in {"iadd": "+", "isub": "-", "imul": "*", "itruediv": "/", "ifloordiv": "//", "imod": "%",
                         "ipow": "**", "imatmul": "@", "iand": "&", "ior": "|", "ixor": "^"}.items():
        instead = {"+": "v.assign_add(x)", "-": "v.assign_sub(x)"}.get(symbol, f"v.assign(v {symbol} x)")
        setattr(Variable, f"__{name}__", _refuse_inplace(symbol, instead))


def _refuse_inplace(symbol: str, instead: str):
    def refuse(self, other):
        raise TraceError(f"Variable '{self.name}' {symbol}= x: write {instead} (a variable changes only through its "
                         f"assign methods; {symbol}= would rebind the name to an array)", user_location())
    return refuse


_install_operators()
