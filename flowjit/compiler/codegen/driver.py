"""The driver: one generated, straight-line Python function that runs a fused graph.

It calls each kernel in order (no per-node interpretation at run time; TorchInductor's
wrapper, PyTensor's ``fgraph_to_python``), runs views and concatenations with numpy,
and plans memory once per trace:

- intermediates live in workspace slots reused by liveness (a value's slot frees after
  the last use of the value and of every view of it);
- a kernel never writes into a buffer it reads: LLVM cannot prove the two apart and
  leaves the loop scalar (an in-place tanh epilogue took 158 us where a separate output
  took 17, on 8192 float32); a dying input's slot frees after the kernel instead;
- results come from an output pool that hands a buffer out again only when the user no
  longer holds it, or any view of it (its reference count says so).
"""

from __future__ import annotations

import linecache
import sys
import threading

import numpy as np

from flowjit.compiler.codegen.backend import Backend
from flowjit.compiler.codegen.kernel import KernelSource
from flowjit.compiler.codegen.scalar import CodegenError, compute_dtype
from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph, Node, Value
from flowjit.compiler.ir.ops.shape import python_slices
from flowjit.compiler.ir.plan import KernelKind
from flowjit.compiler.ir.printer import format_node
from flowjit.counters import STATS

PARALLEL_MIN_ELEMENTS = 1 << 18
VIEW_OPS = (ops.reshape, ops.transpose, ops.broadcast_to, ops.slice)


class OutputPool:
    """Buffers for one result: a buffer returned earlier is reused once nobody else holds it."""

    __slots__ = ("shape", "dtype", "buffers")

    def __init__(self, shape, dtype):
        self.shape, self.dtype, self.buffers = shape, dtype, []

    def take(self) -> np.ndarray:
        for buffer in self.buffers:
            # 3 references: the list, ``buffer`` here, and getrefcount's argument (no
            # enumerate: its reused result tuple would hold a fourth).
            if sys.getrefcount(buffer) == 3:
                return buffer
        buffer = np.empty(self.shape, self.dtype)
        if len(self.buffers) < 4:
            self.buffers.append(buffer)
        return buffer


# View ops the driver runs with numpy: op -> (function, the attribute that is its argument).
VIEWS = {ops.reshape: ("np.reshape", "shape"), ops.transpose: ("np.transpose", "perm"),
         ops.broadcast_to: ("np.broadcast_to", "shape")}


def storage_shape(value: Value) -> tuple[int, ...]:
    return value.shape if value.shape else (1,)


class DriverBuilder:
    def __init__(self, graph: Graph, backend: Backend):
        self.graph = graph
        self.backend = backend
        self.lines: list[str] = []
        self.names: dict[Value, str] = {}
        self.globals: dict = {"np": np}
        self.slot_specs: list[tuple] = []
        self.sources: dict[str, str] = {}
        self.compiled: list = []

    def name(self, value: Value) -> str:
        if value not in self.names:
            self.names[value] = "t_" + value.name.replace(":", "_").replace(".", "_")
        return self.names[value]

    def global_(self, prefix: str, obj) -> str:
        key = f"{prefix}{len(self.globals)}"
        self.globals[key] = obj
        return key

    # -- liveness and memory ------------------------------------------------------------------------
    def plan(self) -> None:
        nodes = self.graph.nodes
        self.root: dict[Value, Value] = {}
        for value in self.graph.inputs:
            self.root[value] = value
        for node in nodes:
            for value in node.outputs:
                self.root[value] = self.root[node.inputs[0]] if node.op in VIEW_OPS else value
        end = len(nodes)
        self.last_use: dict[Value, int] = {}
        for index, node in enumerate(nodes):
            for value in node.inputs:
                root = self.root[value]
                self.last_use[root] = max(self.last_use.get(root, -1), index)
        self.escapes = {self.root[value] for value in self.graph.outputs}
        for root in self.escapes:
            self.last_use[root] = end

    # -- emission -------------------------------------------------------------------------------------
    def emit(self, text: str) -> None:
        self.lines.append("    " + text)

    def build(self):
        self.plan()
        params = [self.name(v) for v in self.graph.inputs]
        for value in self.graph.inputs:
            if value.dtype == np.float16:
                self.emit(f"{self.name(value)} = {self.name(value)}.astype(np.float32)")
        free_slots: dict[tuple, list[int]] = {}
        slot_of: dict[Value, int] = {}
        releases: dict[int, list[Value]] = {}
        for root, last in self.last_use.items():
            releases.setdefault(last, []).append(root)
        for index, node in enumerate(self.graph.nodes):
            self.emit("# " + format_node(node).split(" {body=")[0])
            if node.op is ops.fused:
                self.emit_kernel(index, node, free_slots, slot_of)
            else:
                self.emit_extern(node)
            for root in releases.get(index, ()):
                if root in slot_of:
                    key = (storage_shape(root), compute_dtype(root.dtype))
                    free_slots.setdefault(key, []).append(slot_of.pop(root))
        results = []
        for value in self.graph.outputs:
            text = self.name(value)
            if value.producer is not None and value.producer.op is ops.constant:
                text = f"{text}.copy()"
            if value.dtype == np.float16:
                text = f"{text}.astype(np.float16)"
            if not value.shape and value.producer is not None and value.producer.op is ops.fused:
                text = f"{text}.reshape(())"
            results.append(text)
        self.emit(f"return [{', '.join(results)}]")
        source = f"def driver(workspace, {', '.join(params)}):\n" + "\n".join(self.lines) + "\n"
        filename = f"<flowjit driver {self.graph.name} {id(self)}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        namespace = dict(self.globals)
        exec(compile(source, filename, "exec"), namespace)
        return namespace["driver"], source

    def buffer(self, value: Value, free_slots, slot_of) -> str:
        """An expression for the buffer a kernel writes ``value`` into: a result's pool buffer,
        or a workspace slot free now.  Slots free only after the kernel that last reads them
        (or a view of them) has run, so a kernel never writes a buffer it reads."""
        shape, dtype = storage_shape(value), compute_dtype(value.dtype)
        if value in self.escapes:
            return f"{self.global_('pool', OutputPool(shape, dtype))}.take()"
        key = (shape, dtype)
        if free_slots.get(key):
            slot = free_slots[key].pop()
        else:
            slot = len(self.slot_specs)
            self.slot_specs.append(key)
        slot_of[value] = slot
        return f"workspace[{slot}]"

    def argument(self, value: Value) -> str:
        text = self.name(value)
        if not value.shape:
            return f"{text}.reshape(1)" if value.producer is None or value.producer.op is not ops.fused else text
        return text

    def emit_kernel(self, index: int, node: Node, free_slots, slot_of) -> None:
        kernel: KernelSource | None = None
        body = node.attrs["body"]
        compute = [n for n in body.nodes if n.op is not ops.constant]
        kind = node.attrs["plan"].kind
        if kind is KernelKind.MATMUL:
            matmul = compute[0]
            outer = dict(zip(body.inputs, node.inputs))
            exported = dict(zip(body.outputs, node.outputs))
            a, b = (self.name(outer[v]) if v in outer else None for v in matmul.inputs)
            mm_outer = exported.get(matmul.output)
            if mm_outer is not None:
                mm = self.buffer(mm_outer, free_slots, slot_of)
                self.emit(f"{self.name(mm_outer)} = {mm}")
                mm_name = self.name(mm_outer)
            else:
                mm_value = matmul.output
                mm_name = "t_mm"
                slot = self.buffer(mm_value, free_slots, slot_of)
                self.emit(f"{mm_name} = {slot}")
            self.emit_matmul(a, b, mm_name)
            if len(compute) == 1:
                return
            kernel = self.backend.render(node)
            inputs = [mm_name] + [self.argument(v) for v in kernel.inputs[1:]]
            dying = None if mm_outer is not None else matmul.output     # freed after the epilogue
        else:
            kernel = self.backend.render(node)
            inputs = [self.argument(v) for v in kernel.inputs]
            dying = None
        compiled = self.backend.compile(kernel)
        self.compiled.append(compiled)
        self.sources[node.name] = kernel.source     # this program's lines, even when the
                                                             # compiled module is shared with another
        outputs = []
        for value in kernel.outputs:
            buffer = self.buffer(value, free_slots, slot_of)
            self.emit(f"{self.name(value)} = {buffer}")
            outputs.append(self.name(value))
        size = max([int(np.prod(v.shape, dtype=np.int64)) for v in kernel.inputs + kernel.outputs] + [0])
        parallel = kernel.parallel and size >= PARALLEL_MIN_ELEMENTS
        function = compiled.parallel if parallel else compiled.serial
        symbol = self.global_(f"{node.name}_parallel_" if parallel else f"{node.name}_", function)
        self.emit(f"{symbol}({', '.join(inputs + outputs)})")
        if dying is not None and dying in slot_of:
            free_slots.setdefault((storage_shape(dying), compute_dtype(dying.dtype)), []).append(slot_of.pop(dying))

    def emit_matmul(self, a: str, b: str, out: str) -> None:
        """``out = a @ b``: numpy's, or the backend's (cuBLAS on a GPU)."""
        if self.backend.matmul is None:
            self.emit(f"np.matmul({a}, {b}, out={out})")
        else:
            self.emit(f"{self.global_('matmul', self.backend.matmul)}({a}, {b}, {out})")

    def emit_extern(self, node: Node) -> None:
        out = self.name(node.outputs[0]) if node.outputs else None
        args = [self.name(v) for v in node.inputs]
        op, attrs = node.op, node.attrs
        if op is ops.constant:
            value = attrs["value"]
            if value.dtype == np.float16:
                value = value.astype(np.float32)
            self.emit(f"{out} = {self.global_('const', value)}")
        elif op in VIEWS:
            function, attr = VIEWS[op]
            self.emit(f"{out} = {function}({args[0]}, {tuple(attrs[attr])})")
        elif op is ops.slice:
            self.emit(f"{out} = {args[0]}[{self.global_('slices', python_slices(attrs))}]")
        elif op is ops.concat:
            self.emit(f"{out} = np.concatenate(({', '.join(args)},), axis={attrs['axis']})")
        elif op is ops.matmul and self.backend.matmul is None:
            self.emit(f"{out} = np.matmul({args[0]}, {args[1]})")
        elif op is ops.matmul:
            value = node.outputs[0]
            self.emit(f"{out} = np.empty({tuple(value.shape)}, np.{compute_dtype(value.dtype).name})")
            self.emit_matmul(args[0], args[1], out)
        else:
            raise CodegenError(f"op '{op.name}' (%{node.name}) cannot run in a compiled program"
                               + (f" (traced at {node.loc})" if node.loc else ""))


def single_node_graph(node: Node) -> Graph:
    """A graph running just ``node`` (the multi-device executor runs a partition node by node)."""
    graph = Graph(node.name)
    inputs = [graph.add_input(f"in{i}", value.type) for i, value in enumerate(node.inputs)]
    copy = graph.add_node(node.op, inputs, node.attrs, [value.type for value in node.outputs], name=node.name,
                          loc=node.loc)
    graph.outputs.extend(copy.outputs)
    return graph


class Executable:
    """A compiled program: call it with the graph's input arrays, get its outputs."""

    def __init__(self, graph: Graph, backend: Backend):
        builder = DriverBuilder(graph, backend)
        self.driver, self.driver_source = builder.build()
        self.kernel_sources = builder.sources
        self.slot_specs = builder.slot_specs
        self.compiled = builder.compiled
        self.backend = backend
        self.lock = threading.Lock()
        self.workspace: list | None = None
        self.recorded = False
        STATS.executables += 1

    def new_workspace(self) -> list:
        return [np.empty(shape, dtype) for shape, dtype in self.slot_specs]

    def __call__(self, *arrays):
        if self.lock.acquire(blocking=False):
            try:
                if self.workspace is None:
                    self.workspace = self.new_workspace()
                results = self.driver(self.workspace, *arrays)
            finally:
                self.lock.release()
        else:                                   # another thread is running it: its own workspace
            results = self.driver(self.new_workspace(), *arrays)
        if not self.recorded:
            self.recorded = True
            self.backend.ran(self.compiled)
        return results
