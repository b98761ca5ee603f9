"""A traced program and its later stages: what ``jit(f).lower(...)`` returns."""

from __future__ import annotations

from functools import cached_property

from flowjit.compiler.ir.graph import Graph
from flowjit.compiler.ir.printer import print_graph
from flowjit.compiler.passes.pipeline import PassRecord, Pipeline
from flowjit.config import CompileOptions


class Lowered:
    """Handle on every stage of one trace.  ``as_text(stage)`` prints one of ``stages``."""

    stages = ("traced", "optimized")

    def __init__(self, program, options: CompileOptions):
        self.program = program
        self.options = options
        self._pipeline = Pipeline.from_options(options)

    @property
    def graph(self) -> Graph:
        """The traced graph, before any pass."""
        return self.program.graph

    @cached_property
    def optimized(self) -> Graph:
        """The graph after the pass pipeline (``options.passes``, or the default one)."""
        return self._pipeline.run(self.graph)

    @property
    def pass_records(self) -> list[PassRecord]:
        """What each pass did: node counts, wall time, and the IR when dumps were asked for."""
        self.optimized
        return list(self._pipeline.records)

    def pass_report(self) -> str:
        self.optimized
        return self._pipeline.report()

    def stage_graph(self, stage: str) -> Graph:
        if stage == "traced":
            return self.graph
        if stage == "optimized":
            return self.optimized
        raise ValueError(f"unknown stage '{stage}' (stages: {', '.join(self.stages)})")

    def as_text(self, stage: str = "traced") -> str:
        return print_graph(self.stage_graph(stage))

    def compile(self):
        """A callable taking the flat input arrays and returning the flat outputs."""
        from flowjit.runtime.interpreter import interpret
        graph = self.stage_graph(self.stages[-1])
        return lambda *arrays: interpret(graph, *arrays, check_types=False)
