"""The IR's meaning: a graph evaluated op by op with each op's numpy reference.

The reference interpreter (flowjit.runtime.interpreter, the oracle every compiled path is
checked against) runs whole programs through it with the session's state; a fused node's
own reference evaluates its body through it, so a fused graph has the same meaning as the
graph it came from.
"""

from __future__ import annotations

import numpy as np

from flowjit.compiler.ir.graph import Graph, Value
from flowjit.errors import FlowjitError


class InterpreterError(FlowjitError):
    pass


def evaluate(graph: Graph, arrays, state=None, check_types: bool = True) -> list[np.ndarray]:
    """Run ``graph`` on ``arrays`` (one per graph input); return the outputs as a list.

    ``state`` (the variables: runtime.state.State) is handed to ops that
    keep state between runs; a graph with such ops needs one."""
    if len(arrays) != len(graph.inputs):
        raise InterpreterError(f"graph @{graph.name} takes {len(graph.inputs)} inputs, got {len(arrays)}")
    env: dict[Value, np.ndarray] = {}
    for value, array in zip(graph.inputs, arrays):
        array = np.asarray(array)
        if check_types and (array.shape != value.shape or array.dtype != value.dtype):
            raise InterpreterError(f"input %{value.name} is {value.type} but got "
                                   f"{array.dtype}{list(array.shape)}")
        env[value] = array
    for node in graph.nodes:
        inputs = [env[value] for value in node.inputs]
        run_with_state = node.op.extensions.get("run_with_state")
        try:
            if run_with_state is not None:
                if state is None:
                    raise InterpreterError("it keeps state between runs and was given none")
                results = [np.asarray(r) for r in run_with_state(inputs, node.attrs, state)]
            else:
                results = node.op.evaluate(inputs, node.attrs)
        except Exception as error:
            where = f" (traced at {node.loc})" if node.loc else ""
            raise InterpreterError(f"%{node.name} ({node.op.name}) failed{where}: {error}") from error
        for value, result in zip(node.outputs, results):
            if check_types and (result.shape != value.shape or result.dtype != value.dtype):
                raise InterpreterError(
                    f"%{node.name} ({node.op.name}) is typed {value.type} but computed "
                    f"{result.dtype}{list(result.shape)}")
            env[value] = result
    return [env[value] for value in graph.outputs]
