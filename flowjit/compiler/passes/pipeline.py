"""The pass pipeline: runs passes by name, to a fixed point, verifying and dumping between.

A failure names the pass and what ran before it, as torch.fx's PassManager does:
``error in pass 'cse' (after: prune, simplify): ...``.
"""

from __future__ import annotations

import gc
import os
import re
import time
from dataclasses import dataclass, field

from flowjit.compiler.ir.graph import Graph
from flowjit.compiler.ir.printer import print_graph
from flowjit.compiler.ir.verifier import verify
from flowjit.compiler.passes import (collapse_loops, collapse_reductions, concat_regions,  # noqa: F401
                                    constant_powers, cse, dce, expand_composites, fold_constants, fuse,
                                    plan_reductions, prune, recompute, simplify)
from flowjit.compiler.passes.base import PASSES, Pass
from flowjit.errors import FlowjitError

# The default order: prune first (partial execution), then rewrite (identities, constant
# powers into arithmetic, elementwise work over concatenations per region), fold, share, clean up.
DEFAULT_PASSES = ("prune", "simplify", "constant-powers", "concat-regions", "fold-constants", "cse", "dce")


class PassError(FlowjitError):
    pass


@dataclass
class PassRecord:
    """What one run of one pass did."""

    name: str
    iteration: int
    changed: bool
    seconds: float
    nodes_before: int
    nodes_after: int
    text: str | None = None        # the IR after the pass, when dumps were asked for


@dataclass
class Pipeline:
    passes: list[Pass]
    verify_each: bool = False
    dump_after: str | None = None
    dump_dir: str | None = None
    max_iterations: int = 1
    records: list[PassRecord] = field(default_factory=list)

    @classmethod
    def from_names(cls, names=None, *, fastmath: bool = False, fold_size_limit: int = 1 << 16,
                   verify_each: bool = False, dump_after: str | None = None, dump_dir: str | None = None,
                   max_iterations: int | None = None) -> "Pipeline":
        """Passes by kebab-case name (``None``: the default pipeline, run to a fixed point)."""
        options = {"simplify": {"fastmath": fastmath}, "fold-constants": {"size_limit": fold_size_limit}}
        chosen = DEFAULT_PASSES if names is None else tuple(names)
        passes = []
        for name in chosen:
            if name not in PASSES:
                raise PassError(f"unknown pass '{name}' (passes: {', '.join(sorted(PASSES))})")
            passes.append(PASSES[name](**options.get(name, {})))
        iterations = max_iterations if max_iterations is not None else (8 if names is None else 1)
        return cls(passes, verify_each, dump_after, dump_dir, iterations)

    @classmethod
    def from_options(cls, options) -> "Pipeline":
        return cls.from_names(options.passes, fastmath=options.fastmath,
                              fold_size_limit=options.fold_size_limit, verify_each=options.verify_each,
                              dump_after=options.dump_after, dump_dir=options.dump_dir,
                              max_iterations=options.max_iterations if options.passes is None else 1)

    def run(self, graph: Graph) -> Graph:
        """Run on a copy of ``graph`` (the input is left as it was); return the result.

        The cyclic garbage collector is paused meanwhile: nodes and values reference each
        other, and its repeated scans of a growing heap made big graphs superlinear
        (36k nodes: 1.03 s with it, 0.62 s without).
        """
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._run(graph)
        finally:
            if was_enabled:
                gc.enable()

    def _run(self, graph: Graph) -> Graph:
        graph = graph.copy()
        self.records = []
        pattern = re.compile(self.dump_after) if self.dump_after else None
        if self.dump_dir:
            os.makedirs(self.dump_dir, exist_ok=True)
        ran: list[str] = []
        for iteration in range(1, self.max_iterations + 1):
            changed_any = False
            for pass_ in self.passes:
                before = len(graph.nodes)
                start = time.perf_counter()
                try:
                    changed = pass_.run(graph)
                    if self.verify_each:
                        verify(graph)
                except Exception as error:
                    after = ", ".join(ran) if ran else "nothing"
                    raise PassError(f"error in pass '{pass_.name}' (after: {after}): {error}") from error
                seconds = time.perf_counter() - start
                ran.append(pass_.name)
                changed_any |= changed
                record = PassRecord(pass_.name, iteration, changed, seconds, before, len(graph.nodes))
                if (pattern and pattern.search(pass_.name)) or self.dump_dir:
                    record.text = print_graph(graph)
                if self.dump_dir:
                    index = len(self.records) + 1
                    path = os.path.join(self.dump_dir, f"{index:02d}-{pass_.name}.fj")
                    with open(path, "w") as handle:
                        handle.write(record.text)
                self.records.append(record)
            if not changed_any:
                break
        return graph

    def dumps(self) -> list[PassRecord]:
        """The records whose pass matched ``dump_after``, in run order."""
        pattern = re.compile(self.dump_after) if self.dump_after else None
        return [r for r in self.records if pattern is not None and pattern.search(r.name)]

    def report(self) -> str:
        """One line per pass run: name, iteration, node counts and wall time."""
        lines = []
        for record in self.records:
            mark = "changed" if record.changed else "unchanged"
            lines.append(f"{record.name:<15} iter {record.iteration}  {record.nodes_before:>6} -> "
                         f"{record.nodes_after:<6} nodes  {record.seconds * 1e3:8.2f} ms  {mark}")
        return "\n".join(lines)
