"""The driver: one generated, straight-line Python function that runs a fused graph
(executable.py's ``Executable`` calls it with its workspace).

It calls each kernel in order (no per-node interpretation at run time; TorchInductor's
wrapper, PyTensor's ``fgraph_to_python``), runs views and concatenations with numpy,
and plans memory once per trace:

- intermediates live in workspace slots reused by liveness (a value's slot frees after
  the last use of the value and of every view of it);
- a kernel never writes into a buffer it reads: LLVM cannot prove the two apart and
  leaves the loop scalar (an in-place tanh epilogue took 158 us where a separate output
  took 17, on 8192 float32); a dying input's slot frees after the kernel instead;
- results come from an output pool that hands a buffer out again only when the user no
  longer holds it, or any view of it (its reference count says so);
- variables are read and written in their own buffers: a read aliases the buffer unless
  its value outlives the next write or is a result (then it copies), and a loop kernel
  whose output a variable stores writes the buffer in place where nothing can tell
  (``plan_variables``);
- with check_numerics, each kernel's outputs are checked for NaN and Inf after it runs
  (codegen/check_numerics.py); without, the driver carries no check.
"""

from __future__ import annotations

import linecache
import math
import sys
from typing import Mapping

import numpy as np
from numpy.lib.stride_tricks import as_strided

from flowjit.compiler.codegen.backend import Backend
from flowjit.compiler.codegen.compiled import canonical
from flowjit.compiler.codegen.check_numerics import checker
from flowjit.compiler.codegen.kernel import KernelSource
from flowjit.compiler.codegen.scalar import CodegenError
from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph, Node, Value
from flowjit.compiler.ir.ops.base import OpKind, inlines_math
from flowjit.compiler.ir.ops.misc import variable_of
from flowjit.compiler.ir.ops.shape import python_slices
from flowjit.compiler.ir.plan import KernelKind
from flowjit.compiler.ir.printer import format_node
from flowjit.compiler.ir.types import compute_dtype
from flowjit.gpu import to_host

PARALLEL_MIN_ELEMENTS = 1 << 18
VIEW_OPS = (ops.reshape, ops.transpose, ops.broadcast_to, ops.slice)


def kernel_size(kernel: KernelSource) -> int:
    """Elements of the kernel's largest argument: what decides whether it runs in parallel."""
    return max([int(np.prod(v.shape, dtype=np.int64)) for v in kernel.inputs + kernel.outputs] + [0])


def epilogue_or_loops(fused: Node) -> bool:
    """Whether a fused node has a kernel to compile: all but a matmul with no epilogue."""
    return fused.attrs["plan"].kind is not KernelKind.MATMUL or any(
        node.op is not ops.constant and node.op is not ops.matmul for node in fused.attrs["body"].nodes)


class OutputPool:
    """Buffers for one result: a buffer returned earlier is reused once nobody else holds it
    (``empty`` allocates: numpy's, or CuPy's for a device's buffers)."""

    __slots__ = ("shape", "dtype", "buffers", "empty")

    def __init__(self, shape, dtype, empty=np.empty):
        self.shape, self.dtype, self.buffers, self.empty = shape, dtype, [], empty

    def take(self) -> np.ndarray:
        for buffer in self.buffers:
            # 3 references: the list, ``buffer`` here, and getrefcount's argument (no
            # enumerate: its reused result tuple would hold a fourth).
            if sys.getrefcount(buffer) == 3:
                return buffer
        buffer = self.empty(self.shape, self.dtype)
        if len(self.buffers) < 4:
            self.buffers.append(buffer)
        return buffer


# View ops the driver runs with numpy: op -> (function, the attribute that is its argument).
VIEWS = {ops.reshape: (np.reshape, "shape"), ops.transpose: (np.transpose, "perm"),
         ops.broadcast_to: (np.broadcast_to, "shape")}


def piece_view(array: np.ndarray, shape: tuple) -> np.ndarray:
    """``array`` (a slice of a concatenation's result) seen with ``shape``: numpy's view, which
    must not copy (a kernel writes through it)."""
    view = array.view()
    view.shape = shape
    return view


def pitched(array: np.ndarray) -> tuple:
    """A view's elements as one vector from its first element to its last, then its sizes and
    the pitches of all but its last axis in elements: how a kernel reads an input the writer
    pitches (writer.pitched_view).  A view whose last axis is not contiguous after all (an
    argument passed so) is copied first; no element outside the view is ever read."""
    item = array.itemsize
    if array.strides[-1] != item or any(stride < 0 or stride % item for stride in array.strides):
        array = np.ascontiguousarray(array)
    pitches = tuple(stride // item for stride in array.strides[:-1])
    span = sum((size - 1) * pitch for size, pitch in zip(array.shape, pitches)) + array.shape[-1] if array.size else 0
    return (as_strided(array, (span,), (item,)),) + array.shape + pitches


def storage_shape(value: Value) -> tuple[int, ...]:
    return value.shape if value.shape else (1,)


class DriverBuilder:
    def __init__(self, graph: Graph, backend: Backend, variables: Mapping | None = None,
                 check_numerics: bool = False, aliased_reads: frozenset = frozenset(), threads: int | None = None):
        self.graph = graph
        self.serial = threads is not None and threads <= 1   # one thread: no kernel runs its parallel twin
        self.backend = backend
        self.variables = dict(variables or {})      # name -> its buffer (an object with ``.value``)
        self.check_numerics = check_numerics
        # Reads (node names) whose outputs may alias the buffer although they leave this graph:
        # the caller knows nothing writes the variable while they live and they reach no result.
        self.aliased_reads = aliased_reads
        self.variable_names: dict[str, str] = {}
        self.lines: list[str] = []
        self.names: dict[Value, str] = {}
        # ``xp``: the array module of the buffers (numpy; CuPy where they live on a GPU, whose
        # variables stay host arrays, read and written by copies)
        self.xp, self.resident = backend.xp, backend.resident
        self.globals: dict = {"np": np, "xp": backend.xp}
        self.slot_specs: list[tuple] = []
        self.taken: set[Value] = set()                # concat results whose buffer is taken
        self.sources: dict[str, str] = {}
        self.compiled: list = []
        self.ahead: list[tuple] = []            # (compiled kernel, argument specs): see argument_spec
        self.objects: dict[Value, object] = {}  # values that are the same array on every call

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
        self.plan_variables()
        self.plan_concatenations()

    # -- concatenations: kernels write their pieces into the result ---------------------------------
    def plan_concatenations(self) -> None:
        """Which kernel outputs are written straight into their slice of a concatenation's
        result (``np.concatenate([x, x**2, np.sin(x)], axis=1)``, ``np.stack``'s pieces with
        their new axis): the concat then copies only its other pieces.  A piece qualifies when
        a loop or reduce kernel computes it and the concat is its only use (directly, or
        through the one reshape that adds the stacked axis), and it is no variable's buffer;
        the result's buffer is taken when its first such piece is computed.  A kernel that inlines
        a math routine (sin, exp) does not write a slice with a row pitch: the stores would be
        scatters, and LLVM would leave the whole loop scalar.  A concat whose one
        use is another concat (a region cut along two axes) is built in its slice of that
        one's result."""
        consumers: dict[Value, list] = {}
        for node in self.graph.nodes:
            for value in node.inputs:
                consumers.setdefault(value, []).append(node)
        for value in self.graph.outputs:
            consumers.setdefault(value, []).append(None)
        self.piece_of: dict[Value, tuple[Value, tuple]] = {}    # kernel output or concat -> (concat result, slice)
        self.in_result: set[Value] = set()                        # concat inputs already in place
        if self.resident:
            return                      # (a device buffer's piece views are not built: concatenate copies)
        for node in self.graph.nodes:
            if node.op is not ops.concat or node.output.dtype == np.float16:
                continue
            axis, start = node.attrs["axis"], 0
            strided = math.prod(node.output.shape[:axis]) > 1 or any(
                user is not None and user.op is ops.concat for user in consumers.get(node.output, ()))
            for value in node.inputs:
                stop = start + value.shape[axis]
                where = (slice(None),) * axis + (slice(start, stop),)
                start = stop
                source = value
                if value.producer is not None and value.producer.op is ops.concat and not value.producer.control_inputs:
                    if value.dtype == node.output.dtype and consumers.get(value) == [node]:
                        self.piece_of[value] = (node.output, where)     # a concat within a concat:
                        self.in_result.add(value)                       # its buffer is its slice
                    continue
                if value.producer is not None and value.producer.op is ops.reshape:
                    source = value.producer.inputs[0]
                    if consumers.get(source) != [value.producer] or \
                            [d for d in source.shape if d != 1] != [d for d in value.shape if d != 1]:
                        continue            # (a reshape that only adds or drops unit axes views any slice)
                producer = source.producer
                if (producer is None or producer.op is not ops.fused or value.dtype != node.output.dtype
                        or producer.attrs["plan"].kind is KernelKind.MATMUL or not source.shape
                        or consumers.get(value) != [node] or source in self.in_place or source in self.piece_of
                        or (strided and any(inlines_math(n) for n in producer.attrs["body"].nodes))):
                    continue        # (a math routine's loop vectorises only with contiguous stores)
                self.piece_of[source] = (node.output, where)
                self.in_result.add(value)

    # -- variables: reads alias the buffer until its next write; writes in place ---------------------
    def plan_variables(self) -> None:
        """Which reads copy the buffer, and which kernel outputs are written straight into a
        variable's buffer (the assign that stores them then does nothing).

        A read aliases the buffer, unless its value (or a view of it) is a result or is used
        after the variable's next write: then it copies.  A loop or matmul kernel's output ``x``
        that an assign stores goes into the buffer in place (BLAS has read its operands before
        the matmul kernel's elementwise epilogue writes) when nothing can tell: ``x`` is no result
        and is not used after the assign, no op reads or writes the variable between the
        kernel and the assign, and every read of the old value is dead after the kernel --
        or read by the kernel itself element by element at the index it writes.  With
        check_numerics on, nothing is written in place (a kernel's inputs stay intact for
        the diagnosis, and a NaN never reaches a variable past the check)."""
        nodes = self.graph.nodes
        position = {node: index for index, node in enumerate(nodes)}
        writes: dict[str, list[int]] = {}
        reads: dict[str, list[int]] = {}
        for index, node in enumerate(nodes):
            variable = variable_of(node)
            if variable is not None:
                (writes if node.op is ops.assign_variable else reads).setdefault(variable, []).append(index)

        def next_write(variable: str, index: int) -> int | None:
            return next((w for w in writes.get(variable, ()) if w > index), None)

        self.copied_reads: set[Value] = set()
        for variable, indices in reads.items():
            for index in indices:
                value = nodes[index].output
                write = next_write(variable, index)
                escapes = value in self.escapes and nodes[index].name not in self.aliased_reads
                if escapes or value.dtype == np.float16 or (
                        write is not None and self.last_use.get(value, -1) > write):
                    self.copied_reads.add(value)
        self.in_place: dict[Value, str] = {}
        if self.check_numerics or self.resident:
            return
        for variable, indices in writes.items():
            for index in indices:
                value = nodes[index].inputs[0]
                kernel = value.producer
                # (never a REDUCE kernel: its rows' last block runs the body again over elements it
                # wrote already, which is harmless only while it writes no buffer it reads)
                if kernel is None or kernel.op is not ops.fused or kernel.attrs["plan"].kind is KernelKind.REDUCE:
                    continue
                start = position[kernel]
                if (value in self.escapes or value in self.in_place or value.dtype == np.float16
                        or self.last_use.get(value, -1) > index
                        or any(variable_of(nodes[i]) == variable for i in range(start + 1, index))):
                    continue
                if all(self.old_value_dead(nodes[r].output, kernel, start)
                       for r in reads.get(variable, ()) if r < start and nodes[r].output not in self.copied_reads):
                    self.in_place[value] = variable

    def old_value_dead(self, read: Value, kernel: Node, start: int) -> bool:
        """Whether a read of a variable's old value is dead once ``kernel`` (at ``start``) writes
        the buffer: used before it, or by it only as itself over the whole domain (each element
        read at the index the kernel writes)."""
        last = self.last_use.get(read, -1)
        if last < start:
            return True
        if last > start:
            return False
        domain = kernel.attrs["plan"].domain
        return all(value is read and value.shape == tuple(domain)
                   for value in kernel.inputs if self.root.get(value) is read)

    def variable(self, name: str) -> str:
        """The driver's global for a variable's buffer."""
        if name not in self.variable_names:
            if name not in self.variables:
                raise CodegenError(f"the program uses variable '{name}' but was given no buffer for it")
            self.variable_names[name] = self.global_("var_", self.variables[name])
        return self.variable_names[name]

    # -- emission -------------------------------------------------------------------------------------
    def emit(self, text: str) -> None:
        self.lines.append("    " + text)

    def build(self):
        self.plan()
        self.render_kernels()
        params = [self.name(v) for v in self.graph.inputs]
        for value in self.graph.inputs:
            if value.dtype == np.float16:
                self.emit(f"{self.name(value)} = {self.name(value)}.astype(np.float32)")
        free_slots: dict[tuple, list[int]] = {}
        slot_of: dict[Value, int] = {}
        releases: dict[int, list[Value]] = {}
        for root, last in self.last_use.items():
            releases.setdefault(last, []).append(root)
        self.node_lines: list[tuple[int, Node]] = []       # (first driver line, node), for errors
        for index, node in enumerate(self.graph.nodes):
            self.node_lines.append((len(self.lines) + 2, node))
            self.emit("# " + format_node(node).split(" {body=")[0])
            if node.op is ops.fused:
                self.emit_kernel(index, node, free_slots, slot_of)
            else:
                self.emit_extern(node, free_slots, slot_of)
            for root in releases.get(index, ()):
                if root in slot_of:
                    key = (storage_shape(root), compute_dtype(root.dtype))
                    free_slots.setdefault(key, []).append(slot_of.pop(root))
        results = []
        for value in self.graph.outputs:
            text = self.name(value)
            root = self.root[value].producer
            if root is not None and root.op in (ops.constant, ops.iota):
                # A constant, or a view of one (np.zeros_like's broadcast scalar): the caller
                # gets an array of its own, writable, as numpy's would be.
                text = f"{text}.copy()"
            if value.dtype == np.float16:
                text = f"{text}.astype(np.float16)"
            if not value.shape and value.producer is not None and value.producer.op is ops.fused:
                text = f"{text}.reshape(())"
            results.append(text)
        self.emit(f"return [{', '.join(results)}]")
        source = f"def driver(workspace, {', '.join(params)}):\n" + "\n".join(self.lines) + "\n"
        filename = self.filename = f"<flowjit driver {self.graph.name} {id(self)}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        namespace = dict(self.globals)
        exec(compile(source, filename, "exec"), namespace)
        return namespace["driver"], source

    def buffer(self, value: Value, free_slots, slot_of) -> str:
        """An expression for the buffer a kernel writes ``value`` into: a result's pool buffer,
        or a workspace slot free now.  Slots free only after the kernel that last reads them
        (or a view of them) has run, so a kernel never writes a buffer it reads."""
        shape, dtype = storage_shape(value), compute_dtype(value.dtype)
        if value in self.in_place:
            buffer = f"{self.variable(self.in_place[value])}.value"
            return buffer if value.shape else f"{buffer}.reshape(1)"
        if value in self.escapes:
            return f"{self.global_('pool', OutputPool(shape, dtype, self.xp.empty))}.take()"
        key = (shape, dtype)
        if free_slots.get(key):
            slot = free_slots[key].pop()
        else:
            slot = len(self.slot_specs)
            self.slot_specs.append(key)
        slot_of[value] = slot
        return f"workspace[{slot}]"

    def take(self, result: Value, free_slots, slot_of) -> None:
        """Bind a concatenation's result to its buffer before its first piece is written: a
        buffer of its own, or its slice of the concatenation it is itself a piece of."""
        if result in self.taken:
            return
        self.taken.add(result)
        if result in self.piece_of:
            outer, where = self.piece_of[result]
            self.take(outer, free_slots, slot_of)
            self.emit(f"{self.name(result)} = {self.name(outer)}[{self.global_('piece', where)}]")
        else:
            self.emit(f"{self.name(result)} = {self.buffer(result, free_slots, slot_of)}")

    def argument(self, value: Value) -> str:
        text = self.name(value)
        if not value.shape:
            return f"{text}.reshape(1)" if value.producer is None or value.producer.op is not ops.fused else text
        return text

    def render_kernels(self) -> None:
        """Every kernel's source (``self.rendered``), and the compiled modules that run in
        parallel somewhere in this program (``self.parallel_keys``): a module that does runs
        in parallel at all its places, small ones too, so that numba compiles it once and
        not also its serial twin (each SGD update of a network is one module; the biggest
        runs in parallel)."""
        self.rendered: dict[Node, KernelSource] = {}
        self.parallel_keys: set[str] = set()
        for node in self.graph.nodes:
            if node.op is ops.fused and epilogue_or_loops(node):
                kernel = self.rendered[node] = self.backend.render(node)
                if kernel.parallel and kernel_size(kernel) >= PARALLEL_MIN_ELEMENTS:
                    self.parallel_keys.add(canonical(kernel.source))

    def parallel_of(self, kernel: KernelSource) -> bool:
        return kernel.parallel and not self.serial and (kernel_size(kernel) >= PARALLEL_MIN_ELEMENTS
                                    or canonical(kernel.source) in self.parallel_keys)

    def emit_kernel(self, index: int, node: Node, free_slots, slot_of) -> None:
        kernel: KernelSource | None = None
        body = node.attrs["body"]
        kind = node.attrs["plan"].kind
        if kind is KernelKind.MATMUL:
            matmul = next(n for n in body.nodes if n.op is ops.matmul)     # (epilogue producers may come first)
            outer = dict(zip(body.inputs, node.inputs))
            exported = dict(zip(body.outputs, node.outputs))
            a, b = (self.matmul_operand(v, outer, matmul) for v in matmul.inputs)
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
            if not epilogue_or_loops(node):
                return
            kernel = self.rendered[node]
            inputs = [mm_name] + [self.argument(v) for v in kernel.inputs[1:]]
            dying = None if mm_outer is not None else matmul.output     # freed after the epilogue
        else:
            kernel = self.rendered[node]
            inputs = [self.argument(v) for v in kernel.inputs]
            for position in kernel.pitched:
                inputs[position] = f"*{self.global_('pitched', pitched)}({inputs[position]})"
            dying = None
        compiled = self.backend.compile(kernel)
        self.compiled.append(compiled)
        self.sources[node.name] = kernel.source     # this program's lines, even when the
                                                             # compiled module is shared with another
        outputs = []
        for value in kernel.outputs:
            if value in self.piece_of:          # its slice of a concatenation's result
                result, where = self.piece_of[value]
                self.take(result, free_slots, slot_of)
                # (a view with the kernel's shape, or an error: never a copy it would write into)
                self.emit(f"{self.name(value)} = {self.global_('piece_view', piece_view)}("
                          f"{self.name(result)}[{self.global_('piece', where)}], {tuple(value.shape)})")
            else:
                self.emit(f"{self.name(value)} = {self.buffer(value, free_slots, slot_of)}")
            outputs.append(self.name(value))
        specs = ([("array", compute_dtype(matmul.output.dtype), matmul.output.type.rank)] + [
            self.argument_spec(v) for v in kernel.inputs[1:]] if kind is KernelKind.MATMUL
            else [None if position in kernel.pitched else self.argument_spec(v)      # (not predicted)
                  for position, v in enumerate(kernel.inputs)])
        specs += [None if value in self.piece_of else self.argument_spec(value) for value in kernel.outputs]
        scratch = []                            # workspace slots, free again once the kernel ran
        plan = node.attrs["plan"]
        for dtype in kernel.scratch:
            key = ((math.prod(plan.domain[axis] for axis in set(plan.reduced)),), compute_dtype(dtype))
            slot = free_slots[key].pop() if free_slots.get(key) else len(self.slot_specs)
            if slot == len(self.slot_specs):
                self.slot_specs.append(key)
            scratch.append((key, slot))
            outputs.append(f"workspace[{slot}]")
        if None not in specs and not scratch:
            self.ahead.append((compiled, specs))
        parallel = self.parallel_of(kernel)
        function = (compiled.tiered or compiled.parallel) if parallel else compiled.serial
        symbol = self.global_(f"{node.name}_parallel_" if parallel else f"{node.name}_", function)
        self.emit(f"{symbol}({', '.join(inputs + outputs)})")
        for key, slot in scratch:
            free_slots.setdefault(key, []).append(slot)
        if self.check_numerics:
            self.emit_check(node, [self.name(value) for value in node.outputs])
        if dying is not None and dying in slot_of:
            free_slots.setdefault((storage_shape(dying), compute_dtype(dying.dtype)), []).append(slot_of.pop(dying))

    def argument_spec(self, value: Value):
        """What a kernel gets for ``value``, known before the program runs so that the kernel
        can compile ahead of it (``Backend.compile_ahead``): ``("input", i)`` the program's
        i-th argument as the driver passes it, ``("array", dtype, rank)`` a C-contiguous
        writable array (a buffer the driver allocates, a variable's, or a reshape of one),
        ``("object", array)`` that array, ``("input", i, rank)`` a reshape of the i-th
        argument; None when only running tells (other views)."""
        producer = value.producer
        if producer is None:
            return ("input", self.graph.inputs.index(value))
        if value in self.objects:
            array = self.objects[value]
            return ("object", array if value.shape else array.reshape(1))
        if producer.op in (ops.fused, ops.matmul, ops.read_variable):
            return ("array", compute_dtype(value.dtype), max(1, value.type.rank))
        if producer.op is ops.reshape and value.shape:
            source = self.argument_spec(producer.inputs[0])
            if source is not None and source[0] in ("array", "input"):
                return source[:2] + (value.type.rank,)
        return None

    def matmul_operand(self, value: Value, outer: dict, matmul: Node) -> str:
        """A matmul kernel's operand: an input of the kernel, or a constant that fusion put in its
        body (``np.ones((1, 1)) @ m``; before, it was passed to BLAS as None)."""
        if value in outer:
            return self.name(outer[value])
        if value.producer is not None and value.producer.op is ops.constant:
            array = value.producer.attrs["value"]
            return self.global_("const", self.xp.asarray(array.astype(np.float32) if array.dtype == np.float16 else array))
        raise CodegenError(f"matmul %{matmul.name}: operand %{value.name} is neither an input of its kernel "
                           f"nor a constant")

    def emit_matmul(self, a: str, b: str, out: str) -> None:
        """``out = a @ b``: numpy's, or the backend's (cuBLAS on a GPU)."""
        if self.backend.matmul is None:
            self.emit(f"np.matmul({a}, {b}, out={out})")
        else:
            self.emit(f"{self.global_('matmul', self.backend.matmul)}({a}, {b}, {out})")

    def emit_extern(self, node: Node, free_slots, slot_of) -> None:
        out = self.name(node.outputs[0]) if node.outputs else None
        args = [self.name(v) for v in node.inputs]
        op, attrs = node.op, node.attrs
        if op is ops.constant:
            value = attrs["value"]
            if value.dtype == np.float16:
                value = value.astype(np.float32)
            self.objects[node.outputs[0]] = value
            self.emit(f"{out} = {self.global_('const', self.xp.asarray(value))}")
        elif op is ops.iota:                 # the same array every call: made once, like a constant
            value = self.objects[node.outputs[0]] = op.evaluate([], attrs)[0]
            self.emit(f"{out} = {self.global_('iota', self.xp.asarray(value))}")
        elif op in VIEWS:
            function, attr = VIEWS[op]
            self.emit(f"{out} = xp.{function.__name__}({args[0]}, {tuple(attrs[attr])})")
            if node.inputs[0] in self.objects:          # a view of a constant: the same every call
                self.objects[node.outputs[0]] = function(self.objects[node.inputs[0]], tuple(attrs[attr]))
        elif op is ops.slice:
            self.emit(f"{out} = {args[0]}[{self.global_('slices', python_slices(attrs))}]")
            if node.inputs[0] in self.objects:
                self.objects[node.outputs[0]] = self.objects[node.inputs[0]][python_slices(attrs)]
        elif op is ops.concat and (node.output in self.taken or node.output in self.piece_of):
            self.take(node.output, free_slots, slot_of)     # some pieces are written already,
            start = 0                                       # or it is a piece of another concat
            for value, arg in zip(node.inputs, args):
                stop = start + value.shape[attrs["axis"]]
                if value not in self.in_result:
                    where = (slice(None),) * attrs["axis"] + (slice(start, stop),)
                    self.emit(f"{out}[{self.global_('piece', where)}] = {arg}")
                start = stop
        elif op is ops.concat:
            # into a buffer of the driver's, as kernels write theirs: a fresh array on every call
            # would fault its pages in again (as much time as the copy itself)
            self.emit(f"{out} = {self.buffer(node.output, free_slots, slot_of)}")
            self.emit(f"xp.concatenate(({', '.join(args)},), axis={attrs['axis']}, out={out})")
        elif op.kind is OpKind.LIBRARY:      # one library call (a scan, a gather): the op says which
            call = self.backend.library_call(node, not self.serial
                                             and math.prod(node.output.shape) >= PARALLEL_MIN_ELEMENTS)
            if getattr(call, "writes_into", False):     # into a buffer of the driver's, as a kernel
                self.emit(f"{out} = {self.buffer(node.output, free_slots, slot_of)}")
                args.append(out)
            self.emit(f"{out} = {self.global_(call.__name__, call)}({', '.join(args)})")
        elif op is ops.matmul and self.backend.matmul is None:
            self.emit(f"{out} = np.matmul({args[0]}, {args[1]})")
            if self.check_numerics:
                self.emit_check(node, [out])
        elif op is ops.matmul:
            value = node.outputs[0]
            self.emit(f"{out} = xp.empty({tuple(value.shape)}, np.{compute_dtype(value.dtype).name})")
            self.emit_matmul(args[0], args[1], out)
            if self.check_numerics:
                self.emit_check(node, [out])
        elif op is ops.read_variable:
            buffer = f"{self.variable(attrs['var'])}.value"
            if self.resident:                           # (a copy on the device)
                self.emit(f"{out} = xp.asarray({buffer}, np.{compute_dtype(node.output.dtype).name})")
            elif node.output.dtype == np.float16:
                self.emit(f"{out} = {buffer}.astype(np.float32)")
            else:
                self.emit(f"{out} = {buffer}{'.copy()' if node.output in self.copied_reads else ''}")
        elif op is ops.assign_variable:
            value = node.inputs[0]
            if self.in_place.get(value) == attrs["var"]:
                self.emit(f"pass  # %{value.producer.name} wrote it in place")
            else:
                source = args[0] if value.shape else f"xp.reshape({args[0]}, ())"
                if self.resident:
                    source = f"{self.global_('to_host', to_host)}({source})"
                self.emit(f"np.copyto({self.variable(attrs['var'])}.value, {source})")
        else:
            raise CodegenError(f"op '{op.name}' (%{node.name}) cannot run in a compiled program"
                               + (f" (traced at {node.loc})" if node.loc else ""))


    def emit_check(self, node: Node, outputs: list[str]) -> None:
        """check_numerics: the call that checks ``node``'s outputs after it ran."""
        check = self.global_(f"check_{node.name}_", checker(node))
        inputs = [self.name(value) for value in node.inputs]
        self.emit(f"{check}([{', '.join(inputs)}], [{', '.join(outputs)}])")
