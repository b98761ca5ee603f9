"""The IR: types, nodes and graphs, the op registry, the text format and the verifier."""

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph, Node, Value
from flowjit.compiler.ir.parser import ParseError, parse, parse_all
from flowjit.compiler.ir.printer import format_graph, print_graph, print_graphs
from flowjit.compiler.ir.types import DYNAMIC, TensorType
from flowjit.compiler.ir.verifier import VerificationError, verify
from flowjit.compiler.ir.export import to_dot, to_json, to_networkx

__all__ = ["DYNAMIC", "ops", "Graph", "Node", "Value", "TensorType", "parse", "parse_all", "print_graphs", "ParseError",
           "print_graph", "format_graph", "verify", "VerificationError", "to_dot", "to_json",
           "to_networkx"]
