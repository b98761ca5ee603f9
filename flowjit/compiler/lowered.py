"""A traced program and its later stages: what ``jit(f).lower(...)`` returns."""

from __future__ import annotations

from functools import cached_property

from flowjit.compiler.ir.graph import Graph
from flowjit.compiler.ir.printer import print_graph
from flowjit.compiler.passes.expand_composites import ExpandComposites
from flowjit.compiler.passes.fuse import fuse
from flowjit.compiler.passes.pipeline import PassRecord, Pipeline
from flowjit.config import CompileOptions, cache_directory


class Lowered:
    """Handle on every stage of one trace.  ``as_text(stage)`` prints one of ``stages``.

    traced -> optimized (the pass pipeline) -> fused (kernels as fused nodes) ->
    kernels (the generated Numba source of each kernel).
    """

    stages = ("traced", "optimized", "fused", "kernels")

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

    @cached_property
    def _fusion(self) -> tuple[Graph, list[str]]:
        graph = self.optimized.copy()
        ExpandComposites().run(graph)
        return fuse(graph, enabled=self.options.fuse)

    @property
    def fused(self) -> Graph:
        """The graph as kernels: each ``fused`` node's body is the sub-graph it runs."""
        return self._fusion[0]

    def explain_fusion(self) -> list[str]:
        """For each edge left between kernels, why its two nodes were not fused."""
        return list(self._fusion[1])

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
        if stage in ("fused", "kernels"):
            return self.fused
        raise ValueError(f"unknown stage '{stage}' (stages: {', '.join(self.stages)})")

    def kernel_sources(self) -> dict[str, str]:
        """Kernel name -> the generated module source it compiles from."""
        return dict(self.executable.kernel_sources)

    def as_text(self, stage: str = "traced") -> str:
        if stage == "kernels":
            return "".join(f"# ==== kernel {name} ====\n{source}\n" for name, source in self.kernel_sources().items())
        return print_graph(self.stage_graph(stage))

    @cached_property
    def executable(self):
        from flowjit.compiler.codegen.cache import kernel_cache
        from flowjit.compiler.codegen.driver import Executable
        return Executable(self.fused, kernel_cache(cache_directory(self.options.cache_dir)), self.options.fma)

    def compile(self):
        """A callable taking the flat input arrays and returning the flat outputs."""
        if self.options.backend == "interpreter":
            from flowjit.runtime.interpreter import interpret
            graph = self.optimized
            return lambda *arrays: interpret(graph, *arrays, check_types=False)
        if self.options.backend != "kernels":
            raise ValueError(f"unknown backend '{self.options.backend}' (backends: kernels, interpreter)")
        return self.executable
