"""flowjit.control_dependencies: ops traced inside run after the given ones; the control edges
print, parse back and survive every pass (bridged when a pass removes a node between)."""

from __future__ import annotations

import numpy as np
import pytest

import flowjit
from flowjit.compiler import ir
from flowjit.compiler.passes.base import PASSES
from flowjit.compiler.passes.pipeline import Pipeline
from flowjit.errors import TraceError

TWO = ["cpu:0", "cpu:1"]


def controls(graph, op, var=None):
    """The names of the control inputs of each node applying ``op`` (to variable ``var``)."""
    return [[before.name for before in node.control_inputs] for node in graph.nodes
            if node.op is op and (var is None or node.attrs.get("var") == var)]


def make_program():
    a = flowjit.Variable(np.zeros(3), name="cd_a")
    b = flowjit.Variable(np.zeros(3), name="cd_b")
    c = flowjit.Variable(np.ones(3), name="cd_c")

    def program(x):
        op = a.assign(x * 2)
        with flowjit.control_dependencies([op]):
            y = -(-x)                      # simplify removes it: c's assign inherits its edges
            r = b.value()
        c.assign(y * 3)
        return r
    return program, a, c


def test_edges_from_the_user_print_parse_and_reach_the_ops_traced_inside():
    program, a, b = make_program()
    lowered = flowjit.jit(program).lower(np.ones(3))
    text = lowered.as_text()
    assert "%read_variable = read_variable {var=\"cd_b\"" in text
    assert controls(lowered.graph, ir.ops.read_variable) == [["assign_variable"]]
    assert controls(lowered.graph, ir.ops.neg) == [["assign_variable"], ["assign_variable"]]
    assert controls(lowered.graph, ir.ops.mul) == [[], []]                    # x * 2 and y * 3, outside
    assert ir.print_graph(ir.parse(text)) == text


@pytest.mark.parametrize("stage", ["optimized", "fused", "partitioned"])
def test_edges_survive_every_stage(stage):
    program, a, b = make_program()
    lowered = flowjit.jit(program, verify_each=True, devices=TWO if stage == "partitioned" else None).lower(np.ones(3))
    graphs = lowered.stage_graphs(stage)
    nodes = [node for graph in graphs for node in graph.nodes]
    read = next(n for n in nodes if n.op is ir.ops.read_variable)
    assign_b = next(n for n in nodes if n.op is ir.ops.assign_variable and n.attrs["var"] == b.name)
    assign_a = next(n for n in nodes if n.op is ir.ops.assign_variable and n.attrs["var"] == a.name)

    def waits_for(node, before):            # through control and data edges, within or across partitions
        seen, stack = set(), [node]
        keys = {n.attrs["key"]: n for n in nodes if n.op is ir.ops.send}
        while stack:
            current = stack.pop()
            if current is before:
                return True
            if current in seen:
                continue
            seen.add(current)
            stack.extend(current.dependencies())
            if current.op is ir.ops.recv:
                stack.append(keys[current.attrs["key"]])
        return False
    assert waits_for(read, assign_a)
    assert waits_for(assign_b, assign_a)     # inherited from the x * 1 that simplify removed
    for graph in graphs:
        ir.verify(graph)
        assert ir.print_graph(ir.parse(ir.print_graph(graph))) == ir.print_graph(graph)


@pytest.mark.parametrize("name", sorted(set(PASSES) - {"fuse"}))
def test_each_pass_keeps_or_bridges_user_edges(name):
    text = """graph @g(%x: f64[3]) -> (f64[3]) {
  %one = constant {value=1.0} : f64[]
  %assign = assign_variable %x {var="cd_pass"} : ()
  %dead = mul %x, %one : f64[3] ctrl(%assign)
  %gate = add %x, %one : f64[3] ctrl(%dead)
  %y = mul %x, %one : f64[3] ctrl(%assign)
  %z = add %y, %x : f64[3]
  %w = mul %z, %one : f64[3]
  %v = add %w, %gate : f64[3]
  return %v
}"""
    graph = ir.parse(text)
    result = Pipeline.from_names([name], verify_each=True).run(graph)
    ir.verify(result)
    survivors = {node.name: node for node in result.nodes}
    assert "assign" in survivors
    for node in result.nodes:
        if node.op in (ir.ops.add, ir.ops.mul) and node.inputs and node is not survivors["assign"]:
            reaches = set()
            stack = list(node.dependencies())
            while stack:
                before = stack.pop()
                if before not in reaches:
                    reaches.add(before)
                    stack.extend(before.dependencies())
            assert survivors["assign"] in reaches, (name, ir.print_graph(result))


def test_removing_a_node_bridges_the_control_edges_through_it():
    graph = ir.parse("""graph @g(%x: f64[3]) -> (f64[3]) {
  %assign = assign_variable %x {var="cd_bridge"} : ()
  %middle = neg %x : f64[3] ctrl(%assign)
  %last = exp %x : f64[3] ctrl(%middle)
  return %last
}""")
    graph.remove_nodes({graph.node_named("middle")})
    assert [n.name for n in graph.node_named("last").control_inputs] == ["assign"]


def test_a_control_edge_from_an_assign_to_another_device_sends_a_token():
    a = flowjit.Variable(np.zeros(2), name="token_a", device="cpu:1")

    @flowjit.jit(devices=TWO)
    def f(x):
        op = a.assign(x)
        with flowjit.device("cpu:0"), flowjit.control_dependencies([op]):
            y = x + 1
        return y

    assert f(np.ones(2)).tolist() == [2.0, 2.0]
    parts = f.lower(np.ones(2)).stage_graphs("partitioned")
    tokens = [node for graph in parts for node in graph.nodes if node.name.startswith("token_")]
    assert tokens and tokens[0].control_inputs[0].op is ir.ops.assign_variable


def test_none_clears_the_scope_and_bad_items_are_errors_at_the_users_line():
    a = flowjit.Variable(np.zeros(2), name="cd_none")

    @flowjit.jit
    def f(x):
        op = a.assign(x)
        with flowjit.control_dependencies([op]):
            with flowjit.control_dependencies(None):
                y = x + 1
            z = x * 3
        return y, z

    graph = f.lower(np.ones(2)).graph
    assert controls(graph, ir.ops.add) == [[]] and controls(graph, ir.ops.mul) == [["assign_variable"]]

    @flowjit.jit
    def bad(x):
        with flowjit.control_dependencies(["not an op"]):
            return x + 1

    with pytest.raises(TraceError, match="test_control_dependencies.py:.*item 0 is a str"):
        bad(np.ones(2))
    with flowjit.control_dependencies([a]):          # outside a trace: eager, ops run in order
        a.assign(np.ones(2))
    assert a.numpy().tolist() == [1.0, 1.0]
