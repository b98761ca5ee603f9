"""``flowjit.control_dependencies``: ops traced inside run after the given ones (whitepaper §2).

Inside a jitted function each op traced in the block gets a control input on the node of
every item listed: a traced array (its producer), the operation an ``assign`` returned, or
a Variable (its last assign in this trace, or its last read).  ``control_dependencies(None)``
clears the enclosing scopes.  Outside a trace operations run at once, in program order,
so the block only checks its arguments (TensorFlow's eager rule).
"""

from __future__ import annotations

from contextlib import contextmanager

from flowjit.compiler.ir.graph import Node
from flowjit.errors import TraceError, user_location
from flowjit.frontend.tracer import TraceContext, Tracer, current_trace, is_variable


class Operation:
    """A traced operation with no result (a variable's assign): ``control_dependencies`` takes it."""

    __slots__ = ("node", "_trace")

    def __init__(self, trace: TraceContext, node: Node):
        self.node, self._trace = node, trace

    @property
    def name(self) -> str:
        return self.node.name

    def __repr__(self) -> str:
        return f"<flowjit.Operation %{self.node.name} ({self.node.op.name})>"


def _nodes_of(trace: TraceContext, item, index: int) -> list[Node]:
    if isinstance(item, Tracer):
        if item._trace is not trace:
            raise TraceError(f"control_dependencies: item {index} is a traced value of another function",
                             user_location(3))
        producer = item._value.producer
        return [producer] if producer is not None else []   # an argument is there from the start
    if isinstance(item, Operation):
        if item._trace is not trace:
            raise TraceError(f"control_dependencies: item {index} ({item!r}) was traced by another function",
                             user_location(3))
        return [item.node]
    if is_variable(item):             # everything traced on it so far: its last assign and the reads since
        last = trace.last_assign.get(item.name)
        return ([last] if last is not None else []) + list(trace.reads_since.get(item.name, []))
    raise TraceError(f"control_dependencies: item {index} is a {type(item).__name__}; it takes traced arrays, "
                     f"the operations v.assign(...) returns, and Variables", user_location(3))


@contextmanager
def control_dependencies(items):
    """``with flowjit.control_dependencies([a, op]):`` every op traced inside runs after
    ``a``'s producer and ``op``.  ``None`` clears the enclosing scopes."""
    trace = current_trace()
    if items is not None and not isinstance(items, (list, tuple)):
        raise TraceError(f"control_dependencies takes a list (or None), not a {type(items).__name__}",
                         user_location(2))
    if trace is None:
        for index, item in enumerate(items or ()):
            if not (isinstance(item, (Tracer, Operation)) or is_variable(item) or hasattr(item, "__array__")):
                raise TraceError(f"control_dependencies: item {index} is a {type(item).__name__}",
                                 user_location(2))
        yield
        return
    scope = None
    if items is not None:
        scope = []
        for index, item in enumerate(items):
            scope += [node for node in _nodes_of(trace, item, index) if node not in scope]
    trace.control_scopes.append(scope)
    try:
        yield
    finally:
        trace.control_scopes.pop()
