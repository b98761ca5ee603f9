"""IR structures: building, exports, the verifier, the interpreter's own checks."""

import numpy as np
import pytest

import flowjit
from flowjit.compiler import ir
from flowjit.compiler.ir import ops
from flowjit.compiler.ir.types import TensorType
from flowjit.runtime.interpreter import InterpreterError
from flowjit.runtime.state import State


def build_graph():
    graph = ir.Graph("g")
    x = graph.add_input("x", TensorType((3, 4), np.float32))
    e = graph.add_node(ops.exp, [x])
    s = graph.add_node(ops.sum, [e.output], {"axes": (1,), "keepdims": True})
    d = graph.add_node(ops.div, [e.output, s.output])
    graph.outputs.append(d.output)
    return graph


def test_unique_readable_names():
    graph = ir.Graph("g")
    x = graph.add_input("x", TensorType((2,), np.float32))
    names = [graph.add_node(ops.exp, [x]).name for _ in range(3)]
    assert names == ["exp", "exp_1", "exp_2"]
    reparsed = ir.parse(ir.print_graph(graph))
    assert reparsed.add_node(ops.exp, [reparsed.inputs[0]]).name == "exp_3"


def test_ops_are_objects_with_flags():
    assert ops.add.commutative and not ops.sub.commutative
    assert ops.read_variable.stateful and ops.assign_variable.stateful and not ops.exp.stateful
    assert not ops.threefry2x32.stateful            # random numbers are a pure function of a key
    assert ops.sum.kind.value == "reduction" and ops.reshape.kind.value == "shape"
    assert ir.ops.lookup("add") is ops.add


def test_networkx_and_dot_exports():
    graph = build_graph()
    nx_graph = ir.to_networkx(graph)
    assert set(nx_graph.nodes) == {"x", "exp", "sum", "div"}
    assert nx_graph.number_of_edges() == 4
    assert nx_graph.nodes["sum"]["op"] == "sum"
    dot = ir.to_dot(graph)
    assert '"exp" -> "sum" [label="f32[3,4]"];' in dot and '"div" -> "return:0";' in dot


def test_verifier_rejects_use_before_definition():
    graph = build_graph()
    graph.nodes.reverse()
    with pytest.raises(ir.VerificationError, match="%div reads %exp, which is defined later"):
        ir.verify(graph)


def test_interpreter_checks_input_types():
    graph = build_graph()
    with pytest.raises(InterpreterError, match=r"input %x is f32\[3,4\] but got float64\[3, 4\]"):
        flowjit.interpret(graph, np.ones((3, 4)))


def test_stateful_ops_interpret_with_state():
    text = """graph @step(%x: f32[2]) -> (f32[2], f32[2]) {
  %v = read_variable {var="w", shape=[2], dtype=f32} : f32[2]
  %y = add %v, %x : f32[2]
  %a = assign_variable %y {var="w"} : ()
  return %y, %v
}"""
    graph = ir.parse(text)
    state = State({"w": np.zeros(2, np.float32)})
    first = flowjit.interpret(graph, np.ones(2, np.float32), state=state)
    second = flowjit.interpret(graph, np.ones(2, np.float32), state=state)
    np.testing.assert_array_equal(first[0], [1, 1])
    np.testing.assert_array_equal(second[0], [2, 2])
    np.testing.assert_array_equal(second[1], [1, 1])        # the read before the assign
    np.testing.assert_array_equal(state.read("w"), [2, 2])


def test_copy_is_independent():
    graph = build_graph()
    copy = graph.copy()
    copy.nodes[0].inputs.clear()
    assert graph.nodes[0].inputs and ir.print_graph(graph) != ir.print_graph(copy)
