"""A traced program and its later stages: what ``jit(f).lower(...)`` returns."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph
from flowjit.compiler.ir.plan import KernelKind
from flowjit.compiler.ir.printer import print_graphs
from flowjit.compiler.passes.cse import CommonSubexpressionElimination
from flowjit.compiler.passes.dce import DeadCodeElimination
from flowjit.compiler.passes.expand_composites import ExpandComposites
from flowjit.compiler.passes.fuse import run_fuser
from flowjit.compiler.passes.pipeline import PassRecord, Pipeline
from flowjit.config import CompileOptions, background_compile, cache_directory

# Passes that prepare the graph for fusion (after CSE, which would undo them), and passes that
# rewrite the kernel plans fusion recorded; the printed ``fused`` stage is after them.
FUSION_PASSES = ("recompute-after-reductions", "dce")
KERNEL_PASSES = ("collapse-loops", "collapse-reductions", "plan-reductions")

def has_kernel(node) -> bool:
    """Whether the driver runs a generated kernel for ``node`` (a lone matmul is only BLAS)."""
    if node.op is not ops.fused:
        return False
    return sum(1 for inner in node.attrs["body"].nodes if inner.op is not ops.constant) > 1 or \
        node.attrs["plan"].kind is not KernelKind.MATMUL


BOUNDARY = re.compile(r"%(?P<producer>\S+) -> %(?P<consumer>\S+): (?P<why>.*)", re.DOTALL)


def expanded(graph: Graph) -> Graph:
    """A copy with var/std written in primitives, then CSE and DCE again: the expansion's
    ``mean`` is often one the program computes itself (``(x - x.mean()) / x.std()``)."""
    graph = graph.copy()
    if ExpandComposites().run(graph):
        CommonSubexpressionElimination().run(graph)
        DeadCodeElimination().run(graph)
    return graph


def fuse_explained(graph: Graph, enabled: bool) -> tuple[Graph, list[str]]:
    """``passes.fuse.fuse``, with each fusion boundary named as the fused graph prints it:
    ``%k0_matmul_add_tanh -> %k1_sum: why (%tanh -> %sum)``.  The fuser names nodes of the
    graph before fusion and kernels by the order it made them; the printed graph has
    kernels numbered in program order, with the nodes inside their bodies."""
    fused, fuser = run_fuser(graph, enabled)
    outer = {}
    for node in fused.nodes:
        for inner in (node.attrs["body"].nodes if node.op is ops.fused else [node]):
            outer[inner.name] = node.name
    kernel_of_group = {}
    for group in fuser.groups:
        final = group
        while final.index in fuser.merged_into:           # a group merged into another lives on in it
            final = fuser.merged_into[final.index]
        if final.nodes and final.kind is not None and final.nodes[0].name in outer:
            kernel_of_group[group.index] = outer[final.nodes[0].name]
    notes = []
    for boundary in fuser.boundaries:
        match = BOUNDARY.fullmatch(boundary)
        if match is None:
            notes.append(boundary)
            continue
        producer, consumer = match["producer"], match["consumer"]
        why = re.sub(r"\bk(\d+)\b", lambda m: f"%{kernel_of_group[int(m[1])]}" if int(m[1]) in kernel_of_group
                     else m[0], match["why"])
        shown = (outer.get(producer, producer), outer.get(consumer, consumer))
        note = f"%{shown[0]} -> %{shown[1]}: {why}"
        if shown != (producer, consumer):
            note += f" (%{producer} -> %{consumer})"
        notes.append(note)
    return fused, notes


def uncopied_reads(partitions: list[Graph]) -> set[str]:
    """The variable reads (node names) of a partitioned program that may hand on the variable's
    buffer itself, not a copy: no assign of the variable follows them, and their value reaches no
    result, through views or across devices (a send hands the array itself to its recv).  A call
    holds the variable's lock while it runs (``runtime/variables.py``), so nothing else writes it.
    A read on one device used by kernels on another is then not copied at all."""
    views = (ops.reshape, ops.transpose, ops.broadcast_to, ops.slice)
    received = {node.attrs["key"]: node.output for graph in partitions for node in graph.nodes if node.op is ops.recv}
    results = {value for graph in partitions for value in graph.outputs}
    assigned = [{node.attrs["var"] for node in graph.nodes if node.op is ops.assign_variable} for graph in partitions]
    reads = []
    for part, graph in enumerate(partitions):
        elsewhere = set().union(*(names for other, names in enumerate(assigned) if other != part))
        later: set = set()
        for node in reversed(graph.nodes):
            if node.op is ops.assign_variable:
                later.add(node.attrs["var"])
            elif node.op is ops.read_variable and node.attrs["var"] not in later | elsewhere:
                reads.append(node)
    uses: dict = {}
    for graph in partitions:
        for node in graph.nodes:
            for value in node.inputs:
                uses.setdefault(value, []).append(node)
    uncopied = set()
    for read in reads:
        aliases, frontier = {read.output}, [read.output]
        while frontier:
            value = frontier.pop()
            for user in uses.get(value, ()):
                follow = user.output if user.op in views else received.get(user.attrs["key"]) \
                    if user.op is ops.send else None
                if follow is not None and follow not in aliases:
                    aliases.add(follow)
                    frontier.append(follow)
        if not aliases & results:
            uncopied.add(read.name)
    return uncopied


class Lowered:
    """Handle on every stage of one trace.  ``as_text(stage)`` prints one of ``stages``.

    traced -> optimized (the pass pipeline) -> placed (a device per node) -> partitioned
    (one graph per device, joined by send/recv) -> fused (kernels as fused nodes, per
    partition) -> kernels (the generated Numba source of each kernel).

    A program on one device with no device requests skips placement at run time: its
    kernels run from one straight-line driver.  Anything else runs on the multi-device
    executor (``flowjit.runtime.executor``).
    """

    stages = ("traced", "optimized", "placed", "partitioned", "fused", "kernels")

    def __init__(self, program, options: CompileOptions, costs=None):
        self.program = program
        self.options = options
        self._costs = costs
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
    def devices(self):
        return self.options.device_set()

    @cached_property
    def placement(self):
        from flowjit.compiler.passes.place import place
        return place(self._pinned(self.optimized), self.devices, soft=self.options.soft_placement, costs=self.costs,
                     strategy=self.options.placement, seed=self.options.placement_seed)

    def _pinned(self, graph: Graph) -> Graph:
        """On a cluster, ``graph`` with the reads and assigns of each variable that lives on a
        task already (another program moved it there) placed on that task's device."""
        if self.devices.cluster is None:
            return graph
        from flowjit.compiler.ir.ops.misc import variable_of
        homes = {name: buffer.home for name, buffer in self.variable_buffers.items() if buffer.home is not None}
        if not homes:
            return graph
        graph = graph.copy()
        for node in graph.nodes:
            home = homes.get(variable_of(node))
            if home is not None and home.cluster is self.devices.cluster:
                node.device = home.device
        return graph

    @property
    def placed(self) -> Graph:
        """The optimized graph with a device on every node (stage "placed")."""
        return self.placement.graph

    def placement_notes(self) -> list[str]:
        """What soft placement fell back from, one line per request it could not meet."""
        return list(self.placement.notes)

    @cached_property
    def partitioned(self):
        """One graph per device, joined by send/recv (stage "partitioned")."""
        from flowjit.compiler.passes.partition import partition
        return partition(self.placed, self.devices, lossy=self.options.lossy_transfers,
                         schedule_recvs=self.options.schedule_recvs, costs=self.costs)

    @cached_property
    def fused_partitions_explained(self) -> list[tuple[Graph, list[str]]]:
        """Each partition as kernels (fusion never crosses a device: each is one device), with
        its fusion boundaries."""
        return [self.kernels_of(graph) for graph in self.partitioned.partitions]

    @property
    def fused_partitions(self) -> list[Graph]:
        return [graph for graph, _ in self.fused_partitions_explained]

    @property
    def multi_device(self) -> bool:
        """Whether this program needs the multi-device executor (or a cluster's tasks)."""
        if len(self.devices) > 1 or self.devices.cluster is not None:
            return True
        return any(node.requested_device or node.colocation for node in self.optimized.nodes)

    @cached_property
    def costs(self):
        from flowjit.compiler.costmodel import CostModel
        return self._costs if self._costs is not None else CostModel()

    @cached_property
    def _fusion(self) -> tuple[Graph, list[str]]:
        return self.kernels_of(self.optimized)

    def kernels_of(self, graph: Graph) -> tuple[Graph, list[str]]:
        """``graph`` as kernels: composites expanded, fused, then the passes that rewrite kernel
        plans (verified after each when checks are on), and why each edge left between
        kernels was not fused, named as the printed stage names them."""
        graph = expanded(graph)
        if self.options.fuse:
            graph = Pipeline.from_names(FUSION_PASSES, verify_each=self.options.verify_each,
                                        dump_after=self.options.dump_after).run(graph)
        fused, boundaries = fuse_explained(graph, enabled=self.options.fuse)
        plans = Pipeline.from_names(KERNEL_PASSES, verify_each=self.options.verify_each,
                                    dump_after=self.options.dump_after)
        return plans.run(fused), boundaries

    @property
    def fused(self) -> Graph:
        """The graph as kernels: each ``fused`` node's body is the sub-graph it runs."""
        return self._fusion[0]

    def explain_fusion(self) -> list[str]:
        """For each edge left between kernels, why its two nodes were not fused, in the names
        of the printed ``fused`` stage (kernels, and the nodes inside them in parentheses);
        with several devices, each partition's, under the device's name."""
        if self.multi_device:
            return [f"{graph.attrs.get('device', '')}: {note}" for graph, notes in self.fused_partitions_explained
                    for note in notes]
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
        if stage == "placed":
            return self.placed
        if stage in ("fused", "kernels"):
            return self.fused
        if stage == "partitioned":
            raise ValueError("stage 'partitioned' is one graph per device: use stage_graphs('partitioned')")
        raise ValueError(f"unknown stage '{stage}' (stages: {', '.join(self.stages)})")

    def stage_graphs(self, stage: str) -> list[Graph]:
        """The graphs of a stage: one per device after partitioning, else one."""
        if stage == "partitioned":
            return list(self.partitioned.partitions)
        if stage == "fused" and self.multi_device:
            return list(self.fused_partitions)
        return [self.stage_graph(stage)]

    def kernel_sources(self) -> dict[str, str]:
        """Kernel name -> the generated module source it compiles from.  Kernels for a GPU, or
        for a cluster's tasks, are rendered without compiling them here."""
        if any(device.type == "gpu" for device in self.devices) or self.devices.cluster is not None:
            return {node.name: self.backend_for(graph.attrs.get("device")).render(node).source
                    for graph in self.stage_graphs("fused") for node in graph.nodes if has_kernel(node)}
        return dict(self.executable.kernel_sources)

    def as_text(self, stage: str = "traced", parallel: bool = False) -> str:
        """A stage in the text format; stage ``kernels`` starts with a one-line summary and
        shows each kernel with the helpers it uses, its parallel variant only when
        ``parallel`` (as a diff)."""
        if stage == "kernels":
            from flowjit.compiler.listing import kernels_text
            return kernels_text(self.stage_graphs("fused"), self.kernel_sources(), parallel)
        return print_graphs(self.stage_graphs(stage))

    @cached_property
    def variable_buffers(self) -> dict:
        """name -> buffer of every variable the program reads or writes (the registry's, which
        the traced program's variables keep alive)."""
        from flowjit.compiler.ir.ops.misc import variable_of
        from flowjit.runtime import variables
        names = {variable_of(node) for node in self.graph.nodes} - {None}
        return {name: variables.lookup(name, f"@{self.graph.name}") for name in sorted(names)}

    @cached_property
    def cpu_backend(self):
        """What renders and compiles kernels for the CPU devices: numba."""
        from flowjit.compiler.codegen.backend import CpuBackend
        from flowjit.compiler.codegen.cache import kernel_cache
        return CpuBackend(kernel_cache(cache_directory(self.options.cache_dir)), self.options.fma,
                          background_compile(self.options.background_compile))

    def backend_for(self, device: str | None):
        """The backend of a device (by name; None: the program's one device): numba for a CPU,
        numba-cuda for a GPU, one backend per GPU (its modules loaded on it)."""
        if device is None:
            device = next(iter(self.devices)).name
        spec = self.devices[device].spec
        if spec.type == "gpu":
            from flowjit.compiler.codegen.cuda import cuda_backend
            return cuda_backend(cache_directory(self.options.cache_dir), spec.index or 0)
        return self.cpu_backend

    @property
    def backend(self):
        """What renders and compiles the kernels of a program on one device."""
        return self.backend_for(None)

    @cached_property
    def executable(self):
        from flowjit.compiler.codegen.executable import Executable
        if self.devices.cluster is not None:
            return self.cluster_executable
        if self.multi_device:
            return self.multi_device_executable
        from flowjit.runtime.executor import check_runnable
        check_runnable(next(iter(self.devices)), self.fused)
        return Executable(self.fused, self.backend, self.variable_buffers, self.options.check_numerics)

    @cached_property
    def multi_device_executable(self):
        """The partitioned program on the multi-device executor (also what ``profile`` runs)."""
        from flowjit.compiler.codegen.executable import Executable, single_node_graph
        from flowjit.runtime.cluster import ClusterError
        from flowjit.runtime.executor import MultiDeviceExecutable
        if self.devices.cluster is not None:
            raise ClusterError(f"@{self.graph.name} is placed on a cluster, whose tasks run it in their own processes; "
                               f"profiling across tasks is not built yet (profile it on local devices)")
        partitioned = self.partitioned
        buffers, check = self.variable_buffers, self.options.check_numerics
        aliased = frozenset(uncopied_reads(self.fused_partitions))
        return MultiDeviceExecutable.on_queues(
            self.fused_partitions, partitioned.inputs, partitioned.outputs, self.devices,
            lambda node, on_device: Executable(single_node_graph(node), self.backend_for(node.device), buffers, check,
                                               aliased & {node.name}, self.devices[node.device].threads,
                                               on_device=on_device),
            step_timeout_s=self.options.step_timeout_s)

    @cached_property
    def variable_guard(self):
        """The variable locks each call holds (``runtime/variables.py``): for writing the
        variables the program assigns, for reading the ones it only reads."""
        from flowjit.compiler.ir.ops.misc import variable_of
        from flowjit.runtime.variables import VariableGuard
        written = {variable_of(node) for node in self.graph.nodes if node.op is ops.assign_variable}
        return VariableGuard(self.variable_buffers, written, f"a call of @{self.graph.name}",
                             self.options.variable_timeout_s)

    @cached_property
    def cluster_executable(self):
        """The partitioned program registered with the tasks of the cluster it is placed on:
        each task compiles its partitions' kernels itself, with a ``NodeCompiler``."""
        from flowjit.runtime.cluster_executable import ClusterExecutable
        partitioned = self.partitioned
        compiler = NodeCompiler(cache_directory(self.options.cache_dir), self.options.fma, self.options.check_numerics)
        return ClusterExecutable(self.devices.cluster, self.fused_partitions, partitioned.inputs, partitioned.outputs,
                                 len(self.graph.inputs), compiler, name=self.graph.name,
                                 step_timeout_s=self.options.step_timeout_s, variables=self.variable_buffers)

    def compile(self, checked: bool = True):
        """A callable taking the flat input arrays and returning the flat outputs; each call
        holds the locks of the variables it uses (``variable_guard``).  Its kernels are written
        for the traced shapes and dtypes (a row kernel's lanes read a whole block of the row),
        so ``checked`` (the default) refuses arrays of others with a ``ShapeError``, as a
        compiled jax function does; jit and Session, which key their executables by the
        arrays' types, pass ``checked=False``."""
        run = self._compile()
        if not checked:
            return run
        from flowjit.errors import ShapeError
        expected = [(value.name, tuple(value.shape), np.dtype(value.dtype)) for value in self.graph.inputs]
        graph = self.graph.name

        def called(*arrays):
            if len(arrays) != len(expected):
                raise ShapeError(f"@{graph} was compiled for {len(expected)} arrays, called with {len(arrays)}")
            for array, (name, shape, dtype) in zip(arrays, expected):
                if np.shape(array) != shape or getattr(array, "dtype", None) != dtype:
                    raise ShapeError(f"@{graph} was compiled for %{name}: {dtype.name}{list(shape)}, called with "
                                     f"{getattr(array, 'dtype', type(array).__name__)}{list(np.shape(array))}: "
                                     f"lower it again for these arrays (jit does so by itself)")
            return run(*arrays)
        return called

    def _compile(self):
        if self.options.backend == "interpreter" or self.devices.cluster is None:
            from flowjit.runtime.variables import check_local
            check_local(self.variable_buffers, f"@{self.graph.name} (on this process's devices)")
        if self.options.backend == "interpreter":
            from flowjit.runtime.interpreter import interpret
            from flowjit.runtime.state import State
            graph, state = self.optimized, State(buffers=self.variable_buffers)
            return self.variable_guard.wrap(lambda *arrays: interpret(graph, *arrays, state=state, check_types=False))
        if self.options.backend != "kernels":
            raise ValueError(f"unknown backend '{self.options.backend}' (backends: kernels, interpreter)")
        return self.variable_guard.wrap(self.executable)


@dataclass(frozen=True)
class NodeCompiler:
    """Compiles one node of a partition into a callable taking its input arrays: what a
    cluster task is given with its partitions, so that it compiles (and caches) its kernels
    in its own process."""

    cache_dir: str | None
    fma: bool
    check_numerics: bool

    def __call__(self, node, variables=None, threads: int | None = None, on_device: bool = False):
        """``variables``: name -> the buffer of each variable that lives on the task;
        ``threads``: the thread budget of the node's device (one: only serial kernels).  A node
        on a GPU gets the CUDA backend, which takes host arrays there (``CudaBackend.accept``)
        and, with ``on_device`` (the task's executor drives that GPU's stream), leaves its
        results there, as on the multi-device executor in one process."""
        from flowjit.compiler.codegen.executable import Executable, single_node_graph
        from flowjit.devices import DeviceSpec
        spec = DeviceSpec.parse(node.device)
        if spec.type == "gpu":               # (as Lowered.backend_for chooses: the task's GPU of that index)
            from flowjit.compiler.codegen.cuda import cuda_backend
            backend = cuda_backend(self.cache_dir, spec.index or 0)
        else:
            backend = _cpu_backend(self.cache_dir, self.fma)
        return Executable(single_node_graph(node), backend, variables or {}, self.check_numerics, threads=threads,
                          on_device=on_device)


@functools.lru_cache(maxsize=None)
def _cpu_backend(cache_dir: str | None, fma: bool):
    """One CPU backend per kernel cache and fma setting in this process."""
    from flowjit.compiler.codegen.backend import CpuBackend
    from flowjit.compiler.codegen.cache import kernel_cache
    return CpuBackend(kernel_cache(cache_dir), fma, background_compile(None))
