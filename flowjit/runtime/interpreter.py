"""The numpy reference interpreter: runs any graph op by op with each op's reference.

It is the oracle every compiled path is checked against, so it stays simple: no
fusion, no buffer reuse, each op's own numpy implementation (the IR's meaning, in
flowjit.compiler.ir.evaluate), with the session's state for variables and random numbers.
"""

from __future__ import annotations

import numpy as np

from flowjit.compiler.ir.evaluate import InterpreterError, evaluate
from flowjit.compiler.ir.graph import Graph
from flowjit.compiler.ir.ops.misc import variable_of
from flowjit.runtime import variables
from flowjit.runtime.state import State

__all__ = ["InterpreterError", "interpret"]


def interpret(graph: Graph, *arrays, state: State | None = None, check_types: bool = True) -> list[np.ndarray]:
    """Run ``graph`` on ``arrays`` (one per graph input); return the outputs as a list.

    Without a ``state``, the graph's variables are the live ``flowjit.Variable``s of their names."""
    if state is None:
        names = {variable_of(node) for node in graph.nodes} - {None}
        state = State(buffers={name: variables.lookup(name, f"@{graph.name}") for name in names})
    return evaluate(graph, arrays, state, check_types)
