"""Reads the text format back into graphs: the only place op names become ops.

Errors point at the offending span with a caret, as xDSL's do:

    model.fj:3:17
      %2 = add %0, %9 : f32[4]
                    ^^
                    unknown value %9
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from flowjit.compiler.ir import ops as ops_module
from flowjit.compiler.ir.graph import Graph, Node, Value
from flowjit.compiler.ir.ops.base import AttrKind
from flowjit.compiler.ir.plan import KernelKind, KernelPlan, ReduceStrategy, RowPass
from flowjit.compiler.ir.types import DYNAMIC, TensorType, dtype_from_short_name
from flowjit.errors import FlowjitError, Location, TraceError


class ParseError(FlowjitError, ValueError):
    def __init__(self, message: str, source: str, filename: str, line: int, column: int, length: int):
        self.message, self.filename, self.line, self.column = message, filename, line, column
        text_line = source.splitlines()[line - 1] if source.splitlines()[line - 1:line] else ""
        pad = " " * (column - 1)
        caret = "^" * max(1, length)
        super().__init__(f"{filename}:{line}:{column}\n  {text_line}\n  {pad}{caret}\n  {pad}{message}")


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    text: str
    offset: int


_TOKEN = re.compile(r"""
    (?P<skip>\s+|\#[^\n]*)
  | (?P<value>%[A-Za-z0-9_.]+(?::[0-9]+)?)
  | (?P<symbol>@[A-Za-z0-9_.]+)
  | (?P<string>"(?:\\.|[^"\\\n])*")
  | (?P<arrow>->)
  | (?P<number>-?(?:inf|nan|[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)(?![A-Za-z0-9_]))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>[=,:()\[\]{}<>?])
""", re.VERBOSE)


def tokenize(source: str, filename: str) -> list[Token]:
    tokens, position = [], 0
    while position < len(source):
        match = _TOKEN.match(source, position)
        if match is None:
            line = source.count("\n", 0, position) + 1
            column = position - (source.rfind("\n", 0, position) + 1) + 1
            raise ParseError(f"unexpected character {source[position]!r}", source, filename, line, column, 1)
        if match.lastgroup != "skip":
            tokens.append(Token(match.lastgroup, match.group(), position))
        position = match.end()
    tokens.append(Token("eof", "", len(source)))
    return tokens


PLAN_KINDS = {kind.value for kind in KernelKind}


class _Ident(str):
    """A bare identifier in an attribute (a dtype name such as ``f32``)."""


class Parser:
    def __init__(self, source: str, filename: str = "<text>"):
        self.source, self.filename = source, filename
        self.tokens = tokenize(source, filename)
        self.index = 0

    # -- token helpers -----------------------------------------------------------------
    @property
    def token(self) -> Token:
        return self.tokens[self.index]

    def error(self, message: str, token: Token | None = None) -> ParseError:
        token = token or self.token
        line = self.source.count("\n", 0, token.offset) + 1
        column = token.offset - (self.source.rfind("\n", 0, token.offset) + 1) + 1
        return ParseError(message, self.source, self.filename, line, column, len(token.text))

    def next(self) -> Token:
        token = self.token
        self.index += 1
        return token

    def at(self, text: str) -> bool:
        return self.token.text == text and self.token.kind in ("punct", "ident", "arrow")

    def expect(self, text: str) -> Token:
        if not self.at(text):
            found = repr(self.token.text) if self.token.kind != "eof" else "end of input"
            raise self.error(f"expected '{text}', found {found}")
        return self.next()

    def expect_kind(self, kind: str, what: str) -> Token:
        if self.token.kind != kind:
            found = repr(self.token.text) if self.token.kind != "eof" else "end of input"
            raise self.error(f"expected {what}, found {found}")
        return self.next()

    # -- grammar -----------------------------------------------------------------------
    def parse_graphs(self) -> list[Graph]:
        graphs = []
        while self.token.kind != "eof":
            graphs.append(self.parse_graph())
        return graphs

    def parse_type(self) -> TensorType:
        token = self.expect_kind("ident", "a type such as f32[4]")
        try:
            dtype = dtype_from_short_name(token.text)
        except KeyError:
            raise self.error(f"unknown dtype '{token.text}'", token) from None
        self.expect("[")
        shape = []
        while not self.at("]"):
            if self.at("?"):                            # a size given at run time
                self.expect("?")
                shape.append(DYNAMIC)
                if not self.at("]"):
                    self.expect(",")
                continue
            dim = self.expect_kind("number", "a dimension")
            if not dim.text.isdigit():
                raise self.error("a dimension is a non-negative integer", dim)
            shape.append(int(dim.text))
            if not self.at("]"):
                self.expect(",")
        self.expect("]")
        return TensorType(tuple(shape), dtype)

    def parse_types(self) -> list[TensorType]:
        if not self.at("("):
            return [self.parse_type()]
        self.next()
        types = []
        while not self.at(")"):
            types.append(self.parse_type())
            if not self.at(")"):
                self.expect(",")
        self.expect(")")
        return types

    def parse_graph(self) -> Graph:
        self.expect("graph")
        name = self.expect_kind("symbol", "a graph name such as @main").text[1:]
        graph = Graph(name)
        scope: dict[str, Value] = {}
        self.expect("(")
        while not self.at(")"):
            token = self.expect_kind("value", "an input such as %x")
            self.expect(":")
            value_name = token.text[1:]
            if value_name in scope:
                raise self.error(f"input %{value_name} is defined twice", token)
            value = Value(value_name, self.parse_type())
            graph.inputs.append(value)
            graph._claim(value_name)
            scope[value_name] = value
            if not self.at(")"):
                self.expect(",")
        self.expect(")")
        self.expect("->")
        result_types_token = self.token
        result_types = self.parse_types() if self.at("(") else [self.parse_type()]
        if self.at("attributes"):
            self.next()
            graph.attrs = {name: value for name, (value, _) in self.parse_attr_dict().items()}
        self.expect("{")
        nodes_by_name: dict[str, Node] = {}
        while not self.at("return"):
            if self.token.kind == "eof" or self.at("}"):
                raise self.error("expected a node or 'return'")
            self.parse_node(graph, scope, nodes_by_name)
        self.next()
        if self.token.kind == "value":
            while True:
                graph.outputs.append(self.lookup(scope, self.next()))
                if not self.at(","):
                    break
                self.next()
        self.expect("}")
        actual = [value.type for value in graph.outputs]
        if actual != result_types:
            raise self.error(f"the graph returns ({', '.join(map(str, actual))}) but its header says "
                             f"({', '.join(map(str, result_types))})", result_types_token)
        return graph

    def lookup(self, scope: dict[str, Value], token: Token) -> Value:
        name = token.text[1:]
        if name not in scope:
            raise self.error(f"unknown value %{name}", token)
        return scope[name]

    def parse_node(self, graph: Graph, scope: dict[str, Value], nodes_by_name: dict[str, Node]) -> None:
        name_token = self.expect_kind("value", "a node such as %0 = ...")
        name = name_token.text[1:]
        if ":" in name:
            raise self.error("a node name cannot carry a port", name_token)
        if name in nodes_by_name or name in scope:
            raise self.error(f"%{name} is defined twice", name_token)
        self.expect("=")
        op_token = self.expect_kind("ident", "an op name")
        try:
            op = ops_module.lookup(op_token.text)
        except KeyError:
            raise self.error(f"unknown op '{op_token.text}'", op_token) from None
        inputs = []
        while self.token.kind == "value":
            inputs.append(self.lookup(scope, self.next()))
            if not self.at(","):
                break
            self.next()
        attrs_token = self.token
        raw_attrs = self.parse_attr_dict() if self.at("{") else {}
        self.expect(":")
        output_types = self.parse_types()
        attrs = self.convert_attrs(op, raw_attrs, output_types, attrs_token)
        control, requested, placed, colocation, loc = [], None, None, None, None
        while self.token.kind == "ident" and self.token.text in ("ctrl", "device", "colocate", "placed", "loc"):
            clause = self.next().text
            self.expect("(")
            if clause == "ctrl":
                while not self.at(")"):
                    token = self.expect_kind("value", "a node such as %3")
                    if token.text[1:] not in nodes_by_name:
                        raise self.error(f"unknown node {token.text}", token)
                    control.append(nodes_by_name[token.text[1:]])
                    if not self.at(")"):
                        self.expect(",")
            elif clause == "colocate":
                colocation = self.expect_kind("value", "a node such as %matmul").text[1:]
            elif clause in ("device", "placed"):
                device = json.loads(self.expect_kind("string", "a device name").text)
                if clause == "device":
                    requested = device
                else:
                    placed = device
            else:
                file = json.loads(self.expect_kind("string", "a file name").text)
                self.expect(":")
                line = self.expect_kind("number", "a line number")
                loc = Location(file, int(line.text))
            self.expect(")")
        node = Node(name, op, inputs, attrs, output_types, requested_device=requested, device=placed,
                    colocation=colocation, control_inputs=control, loc=loc)
        graph.nodes.append(node)
        graph._claim(name)
        nodes_by_name[name] = node
        for value in node.outputs:
            scope[value.name] = value

    def parse_attr_dict(self) -> dict:
        self.expect("{")
        attrs = {}
        while not self.at("}"):
            key = self.expect_kind("ident", "an attribute name")
            self.expect("=")
            attrs[key.text] = (self.parse_attr_value(), key)
            if not self.at("}"):
                self.expect(",")
        self.expect("}")
        return attrs

    def parse_attr_value(self):
        token = self.token
        if token.kind == "number":
            self.next()
            text = token.text
            if any(c in text for c in ".einf"):
                return float(text)
            return int(text)
        if token.kind == "string":
            self.next()
            return json.loads(token.text)
        if self.at("["):
            self.next()
            items = []
            while not self.at("]"):
                items.append(self.parse_attr_value())
                if not self.at("]"):
                    self.expect(",")
            self.next()
            return items
        if self.at("graph"):
            return self.parse_graph()
        if self.at("dense"):
            self.next()
            self.expect("<")
            data = self.expect_kind("string", "hex bytes")
            self.expect(">")
            try:
                return bytes.fromhex(json.loads(data.text))
            except ValueError:
                raise self.error("malformed hex bytes", data) from None
        if token.kind == "ident" and token.text == "complex" and self.tokens[self.index + 1].text == "<":
            self.next()
            self.expect("<")
            real = self.parse_attr_value()
            self.expect(",")
            imag = self.parse_attr_value()
            self.expect(">")
            if not all(isinstance(part, (int, float)) and not isinstance(part, bool) for part in (real, imag)):
                raise self.error("a complex literal is complex<real, imag> of two numbers", token)
            return complex(real, imag)
        if token.kind == "ident" and token.text in PLAN_KINDS and self.tokens[self.index + 1].text == "<":
            return self.parse_plan()
        if token.kind == "ident":
            self.next()
            return {"true": True, "false": False, "none": None}.get(token.text, _Ident(token.text))
        raise self.error("expected an attribute value")

    def parse_plan(self) -> KernelPlan:
        """``reduce<domain=[4, 8], reduced=[1], embed={%x=[0, 1], %max=[0, _]}>``"""
        start = self.next()
        self.expect("<")
        fields: dict = {"kind": KernelKind(start.text)}
        while not self.at(">"):
            key = self.expect_kind("ident", "a plan field")
            self.expect("=")
            if key.text in ("domain", "reduced"):
                fields[key.text] = self.parse_axes(allow_broadcast=False)
            elif key.text == "embed":
                fields["embed"] = self.parse_named(lambda: self.parse_axes(allow_broadcast=True))
            elif key.text == "strategy":
                token = self.expect_kind("ident", "a strategy")
                try:
                    fields["strategy"] = ReduceStrategy(token.text)
                except ValueError:
                    raise self.error(f"unknown strategy '{token.text}' (strategies: "
                                     f"{', '.join(s.value for s in ReduceStrategy)})", token) from None
            elif key.text == "passes":
                fields["passes"] = self.parse_list(self.parse_row_pass)
            elif key.text == "scratch":
                fields["scratch"] = self.parse_named(lambda: int(self.expect_kind("number", "a pass number").text))
            elif key.text == "direct":
                fields["direct"] = self.parse_list(self.parse_value_name)
            else:
                raise self.error(f"a kernel plan has no field '{key.text}' (fields: domain, reduced, embed, "
                                 f"strategy, passes, scratch, direct)", key)
            if not self.at(">"):
                self.expect(",")
        self.expect(">")
        if "domain" not in fields:
            raise self.error("a kernel plan needs its domain", start)
        return KernelPlan(**fields)

    def parse_value_name(self) -> str:
        return self.expect_kind("value", "a body value").text[1:]

    def parse_list(self, item) -> list:
        """``[item, item, ...]``"""
        self.expect("[")
        items = []
        while not self.at("]"):
            items.append(item())
            if not self.at("]"):
                self.expect(",")
        self.expect("]")
        return items

    def parse_named(self, item) -> dict:
        """``{%name=item, ...}``"""
        self.expect("{")
        entries = {}
        while not self.at("}"):
            name = self.parse_value_name()
            self.expect("=")
            entries[name] = item()
            if not self.at("}"):
                self.expect(",")
        self.expect("}")
        return entries

    def parse_row_pass(self) -> RowPass:
        """``{reduce=[%max], fold=[%max], store=[%div]}``"""
        self.expect("{")
        fields = {}
        while not self.at("}"):
            key = self.expect_kind("ident", "reduce, fold or store")
            if key.text not in ("reduce", "fold", "store"):
                raise self.error(f"a row pass has no field '{key.text}' (fields: reduce, fold, store)", key)
            self.expect("=")
            fields[key.text] = self.parse_list(self.parse_value_name)
            if not self.at("}"):
                self.expect(",")
        self.expect("}")
        return RowPass(**fields)

    def parse_axes(self, allow_broadcast: bool) -> tuple:
        self.expect("[")
        entries = []
        while not self.at("]"):
            token = self.next()
            if token.kind == "number" and token.text.lstrip("-").isdigit():
                entries.append(int(token.text))
            elif allow_broadcast and token.text == "_":
                entries.append(None)
            else:
                raise self.error("expected an axis" + (" or _" if allow_broadcast else ""), token)
            if not self.at("]"):
                self.expect(",")
        self.expect("]")
        return tuple(entries)

    def convert_attrs(self, op, raw: dict, output_types: list[TensorType], at: Token) -> dict:
        attrs = {}
        for name, (value, key_token) in raw.items():
            spec = op.attrs.get(name)
            if spec is None:
                raise self.error(f"op '{op.name}' has no attribute '{name}'", key_token)
            if spec.kind is AttrKind.ARRAY:
                if len(output_types) != 1:
                    raise self.error("an array attribute needs a single result type", key_token)
                value = self.array_literal(value, output_types[0], key_token)
            attrs[name] = value
        try:
            return op.normalize_attrs(attrs)
        except TraceError as error:
            raise self.error(error.message, at) from None

    def array_literal(self, value, type: TensorType, token: Token) -> np.ndarray:
        try:
            if isinstance(value, bytes):
                array = np.frombuffer(value, dtype=type.dtype.newbyteorder("<")).astype(type.dtype)
            else:
                array = np.array(value, dtype=type.dtype)
            return array.reshape(type.shape)
        except (ValueError, TypeError, OverflowError) as error:
            raise self.error(f"value does not fit {type}: {error}", token) from None


def parse_all(source: str, filename: str = "<text>") -> list[Graph]:
    """Every graph in ``source`` (a partitioned program prints one per device)."""
    return Parser(source, filename).parse_graphs()


def parse(source: str, filename: str = "<text>") -> Graph:
    """The one graph in ``source``."""
    parser = Parser(source, filename)
    graph = parser.parse_graph()
    if parser.token.kind != "eof":
        raise parser.error("expected end of input after the graph")
    return graph
