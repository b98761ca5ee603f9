"""A traced program and its later stages: what ``jit(f).lower(...)`` returns."""

from __future__ import annotations

from functools import cached_property

from flowjit.compiler.ir.graph import Graph
from flowjit.compiler.ir.printer import print_graph
from flowjit.config import CompileOptions


class Lowered:
    """Handle on every stage of one trace.  ``as_text(stage)`` prints one of ``stages``."""

    stages = ("traced",)

    def __init__(self, program, options: CompileOptions):
        self.program = program
        self.options = options

    @property
    def graph(self) -> Graph:
        """The traced graph, before any pass."""
        return self.program.graph

    def stage_graph(self, stage: str) -> Graph:
        if stage == "traced":
            return self.graph
        raise ValueError(f"unknown stage '{stage}' (stages: {', '.join(self.stages)})")

    def as_text(self, stage: str = "traced") -> str:
        return print_graph(self.stage_graph(stage))

    def compile(self):
        """A callable taking the flat input arrays and returning the flat outputs."""
        from flowjit.runtime.interpreter import interpret
        graph = self.stage_graph(self.stages[-1])
        return lambda *arrays: interpret(graph, *arrays, check_types=False)
