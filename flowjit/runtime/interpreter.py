"""The numpy reference interpreter: runs any graph op by op with each op's reference.

It is the oracle every compiled path is checked against, so it stays simple: no
fusion, no buffer reuse, each op's own numpy implementation (the IR's meaning, in
flowjit.compiler.ir.evaluate), with the session's state for variables and random numbers.
"""

from __future__ import annotations

import numpy as np

from flowjit.compiler.ir.evaluate import InterpreterError, evaluate
from flowjit.compiler.ir.graph import Graph
from flowjit.runtime.state import State

__all__ = ["InterpreterError", "interpret"]


def interpret(graph: Graph, *arrays, state: State | None = None, check_types: bool = True) -> list[np.ndarray]:
    """Run ``graph`` on ``arrays`` (one per graph input); return the outputs as a list."""
    return evaluate(graph, arrays, state if state is not None else State(), check_types)
