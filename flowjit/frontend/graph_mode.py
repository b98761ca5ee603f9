"""Graph mode (the whitepaper's, TensorFlow 1's): build a graph once, run parts of it many times.

::

    g = flowjit.Graph()
    with g.as_default():
        x = flowjit.placeholder((None, 4), np.float32, name="x")
        y = np.tanh(x @ w + b)              # numpy code records ops into g
    sess = flowjit.Session(g)
    sess.run(y, {x: batch})

The graph is the IR graph itself (a subclass that can be made the default), so a
session runs a jitted function's ``lower(...).graph`` as readily as one built here, and
both go through one compiler.  Inside ``as_default()`` numpy operations on placeholders
and on tensors computed from them are traced exactly as inside ``@flowjit.jit``; a
placeholder is a traced input.  Every tensor has a stable name, ``node:port``
(``tensor.name``), which ``Session.run`` accepts wherever it accepts the tensor.

A placeholder dimension may be None: the graph keeps it as ``?`` (``f32[?,4]``), and the
session compiles per fed size (``passes/specialize.py``), reusing kernels whose source the
new size leaves the same.
"""

from __future__ import annotations

import re
from contextlib import contextmanager

import numpy as np

from flowjit.compiler.ir.graph import Graph as IRGraph
from flowjit.compiler.ir.types import DYNAMIC, TensorType, check_dtype
from flowjit.errors import ArgumentError, TraceError, user_location
from flowjit.frontend.tracer import TraceContext, Tracer, current_trace, tracing

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


class Graph(IRGraph):
    """A dataflow graph built op by op under ``with graph.as_default():``."""

    def __init__(self, name: str = "graph"):
        if not _NAME.match(name):
            raise ArgumentError(f"graph name '{name}' must be letters, digits, '_' and '.', starting with a letter",
                                user_location())
        super().__init__(name)
        self._context = TraceContext(self)

    @contextmanager
    def as_default(self):
        """Record the numpy operations run inside into this graph (re-entering keeps its tensors)."""
        with tracing(self._context):
            yield self

    def tensor(self, name: str) -> Tracer:
        """The tensor named ``node:port`` (or ``node``: its output 0), to build on inside ``as_default()``."""
        try:
            return Tracer(self._context, self.tensor_named(name))
        except KeyError:
            raise ArgumentError(f"graph @{self.name} has no tensor named '{name}'", user_location()) from None

    @property
    def placeholders(self) -> list[str]:
        """The placeholders' names, in the order they were made."""
        return [value.name for value in self.inputs]


def default_graph() -> Graph | None:
    """The graph of the innermost ``as_default()``, or None (also inside a jitted function)."""
    context = current_trace()
    return context.graph if context is not None and isinstance(context.graph, Graph) else None


def placeholder(shape, dtype=np.float32, name: str | None = None) -> Tracer:
    """A graph input, fed when the graph runs (``Session.run(..., {name: array})``).

    ``shape`` may hold None for a size given only by the fed array (printed ``?``)."""
    graph = default_graph()
    if graph is None:
        where = ("inside a jitted function, whose arguments are its inputs" if current_trace() is not None
                 else "outside a graph")
        raise TraceError(f"flowjit.placeholder is called {where}: make placeholders inside "
                         f"`with graph.as_default():` of a flowjit.Graph()", user_location())
    dtype = check_dtype(dtype, "a placeholder")
    if isinstance(shape, (int, np.integer)) or shape is None:
        shape = (shape,)
    dims = []
    for size in shape:
        if size is None:
            dims.append(DYNAMIC)
        elif isinstance(size, (int, np.integer)) and not isinstance(size, bool) and 0 <= size < DYNAMIC:
            dims.append(int(size))
        else:
            raise ArgumentError(f"flowjit.placeholder: shape {tuple(shape)} must hold sizes (non-negative "
                                f"integers) or None", user_location())
    if name is not None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise ArgumentError(f"flowjit.placeholder: name {name!r} must be letters, digits, '_' and '.', "
                                f"starting with a letter", user_location())
        if name in graph._names:
            raise ArgumentError(f"flowjit.placeholder: graph @{graph.name} already has a node named '{name}'",
                                user_location())
    value = graph.add_input(name or "placeholder", TensorType(tuple(dims), dtype))
    return Tracer(graph._context, value, origin=f"placeholder '{value.name}'")
