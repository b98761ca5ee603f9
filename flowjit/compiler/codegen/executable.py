"""A compiled program: the driver DriverBuilder generates, with its workspace, called on the
program's arrays (driver.py builds it).

- The workspace (the driver's intermediate buffers) is made at the first call and reused; a
  call that finds the program running in another thread gets a workspace of its own.
- A backend whose buffers live on a device (``Backend.resident``: CuPy on a GPU) runs the
  program with that device current (``Backend.device``), takes the arguments there first (``accept``) and gives the results back as the caller expects
  (``deliver``: numpy for numpy arguments, device arrays for device arguments; with
  ``on_device``, device arrays always: a node of a GPU whose stream the multi-device executor
  drives, which copies what leaves the GPU at its sends).
- An error raised inside the driver is annotated with the IR node that raised it; a device's
  failure (out of memory, a kernel fault) becomes flowjit's error naming it (device_errors.py).
"""

from __future__ import annotations

import threading
from typing import Mapping

from flowjit.compiler.codegen.backend import Backend
from flowjit.compiler.codegen.driver import DriverBuilder
from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph, Node
from flowjit.compiler.ir.printer import format_node
from flowjit.counters import STATS


def single_node_graph(node: Node) -> Graph:
    """A graph running just ``node`` (the multi-device executor runs a partition node by node)."""
    graph = Graph(node.name)
    inputs = [graph.add_input(f"in{i}", value.type) for i, value in enumerate(node.inputs)]
    copy = graph.add_node(node.op, inputs, node.attrs, [value.type for value in node.outputs], name=node.name,
                          loc=node.loc)
    graph.outputs.extend(copy.outputs)
    return graph


class Executable:
    """A compiled program: call it with the graph's input arrays, get its outputs.  ``threads``:
    the thread budget of the device it runs on, where it has one (a multi-device or cluster
    partition's node); with one thread no kernel runs, or compiles, its parallel twin.
    ``on_device``: results stay where a resident backend computed them."""

    def __init__(self, graph: Graph, backend: Backend, variables: Mapping | None = None,
                 check_numerics: bool = False, aliased_reads: frozenset = frozenset(), threads: int | None = None,
                 on_device: bool = False):
        builder = DriverBuilder(graph, backend, variables, check_numerics, aliased_reads, threads)
        with backend.device:                    # (its constants and kernels go to the backend's device)
            self.driver, self.driver_source = builder.build()
            backend.built()
        self.driver_filename, self.node_lines = builder.filename, builder.node_lines
        self.kernel_sources = builder.sources
        self.slot_specs = builder.slot_specs
        self.compiled = builder.compiled
        self.ahead: list | None = builder.ahead         # handed to the backend at the first call
        self.backend = backend
        self.resident = backend.resident        # its buffers live on a device: arguments and results move
        self.on_device = on_device and self.resident
        self.lock = threading.Lock()
        self.workspace: list | None = None
        self.recorded = False
        STATS.executables += 1

    def annotate(self, error: Exception) -> None:
        """Say which node of the program raised: the driver line the error passed through, and
        the IR line above it (with the user's file:line) -- a helper numba inlined into a kernel
        leaves no frame of the kernel itself."""
        node = self.raising_node(error)
        if node is None:
            return
        inner = node.attrs["body"].nodes if node.op is ops.fused else [node]
        lines = [format_node(op_node).split(" {body=")[0] for op_node in inner if op_node.op is not ops.constant]
        error.add_note(f"flowjit: raised in %{node.name}, which computes\n" + "\n".join(f"    {text}" for text in lines))

    def raising_node(self, error: Exception) -> Node | None:
        """The node whose driver lines ``error`` passed through last (None: not the driver's)."""
        traceback, line = error.__traceback__, None
        while traceback is not None:
            if traceback.tb_frame.f_code.co_filename == self.driver_filename:
                line = traceback.tb_lineno
            traceback = traceback.tb_next
        if line is None:
            return None
        return next((node for first, node in reversed(self.node_lines) if first <= line), None)

    def new_workspace(self) -> list:
        return [self.backend.xp.empty(shape, dtype) for shape, dtype in self.slot_specs]

    def __call__(self, *arrays):
        if self.resident and not self.backend.is_current():
            with self.backend.device:           # (its GPU current: its buffers, modules and stream are there)
                return self.run(arrays)
        return self.run(arrays)

    def run(self, arrays: tuple):
        on_device = False
        if self.resident:
            arrays, on_device = self.backend.accept(arrays)
        if self.ahead is not None:
            ahead, self.ahead = self.ahead, None
            self.backend.compile_ahead(ahead, arrays)
        try:
            if self.lock.acquire(blocking=False):
                try:
                    if self.workspace is None:
                        self.workspace = self.new_workspace()
                    results = self.driver(self.workspace, *arrays)
                finally:
                    self.lock.release()
            else:                               # another thread is running it: its own workspace
                results = self.driver(self.new_workspace(), *arrays)
        except Exception as error:
            self.annotate(error)
            translated = self.backend.device_error(error, self.raising_node(error))
            if translated is not None:
                raise translated from error
            raise
        if not self.recorded:
            self.recorded = True
            self.backend.ran(self.compiled)
        return self.backend.deliver(results, on_device or self.on_device) if self.resident else results
