"""fuse: group nodes into kernels; each group becomes one ``fused`` node with its body.

Kernels (XLA's and Inductor's shapes):

- ``loop``: elementwise nodes over one iteration domain; broadcast inputs are read with
  stride 0.  Siblings over the same domain that share an input merge into one
  multi-output kernel, and so do reductions over the same axes of a shared input.
- ``reduce``: reductions over one set of domain axes with the elementwise work before,
  between and after them.  Softmax (max, sub, exp, sum, div) and layernorm are one
  kernel each: an outer loop over the kept axes, one pass over the reduced axes per
  dependent reduction.
- ``matmul``: a BLAS call and the elementwise epilogue on its result.

Every value in a group has an *embedding*: for each of its dimensions, the domain axis
it runs along (None for a broadcast dimension of size 1).  A node joins a group when its
embedding is consistent and no cycle between groups would form.  Shape ops, constants
and stateful ops stay outside kernels (the runtime runs views with numpy), and fusion
never crosses a device.  Each boundary left between two nodes is recorded with why.
"""

from __future__ import annotations

import gc
import math
from dataclasses import dataclass, field

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph, Node, Value, stable_topological_order
from flowjit.compiler.ir.ops.base import OpKind, routine_ops
from flowjit.compiler.ir.ops.reduction import reduction_axes
from flowjit.compiler.ir.plan import KernelKind, KernelPlan
from flowjit.compiler.passes.base import Pass
from flowjit.compiler.passes.transfer_waits import TransferWaits

MAX_NAME_OPS = 6

# What one kernel may hold.  Numba's compile time per op is flat up to a few hundred cheap ops
# and then grows (a shallow tree of 3,200 adds and muls: 18 ms per op against 6.5 ms at 400);
# every math routine the kernel inlines (exp, tanh, ...: ops.base.routine_ops) costs ~0.2 s and
# ~3 MB, flat up to ~50 of them per kernel, then 0.3 s and ~10 MB each at 100 (200 alternating
# tanh/mul: 62 s and 1.1 GB).  Measured with bench/pipeline_scaling.py --kernel-size.  Depth
# needs no cap: a chain compiles faster per op than a shallow tree of the same size.
MAX_KERNEL_OPS = 512
MAX_KERNEL_ROUTINES = 32
# A cheap loop over a broadcast domain joins its one consumer loop when that recomputes each
# of its values at most this many times (an image's alpha over 3 channels).
BROADCAST_REPEAT = 8
# Elementwise ops whose lowering inlines a whole math routine (their Lowering names it).
ROUTINE_OPS = frozenset(routine_ops().values())


@dataclass(eq=False)
class Group:
    index: int
    kind: KernelKind | None                    # None: a node that runs outside kernels (extern)
    domain: tuple[int, ...]
    axes: tuple[int, ...] = ()                 # reduced domain axes (reduce kernels)
    device: str | None = None
    nodes: list[Node] = field(default_factory=list)
    embed: dict[Value, tuple] = field(default_factory=dict)
    preds: set = field(default_factory=set)                 # groups this one reads from (or waits for)
    succs: set = field(default_factory=set)                 # groups that read from this one
    depth: int = 0                                          # > the depth of every group in preds
    routines: int = 0                                       # nodes of ROUTINE_OPS
    after_reduction: set = field(default_factory=set)     # values computed from a reduction of the group

    def __repr__(self) -> str:
        return f"k{self.index}"

    def full_for(self, ops_count: int, routines: int) -> str | None:
        """None if ``ops_count`` more nodes, ``routines`` of them math routines, fit in this
        kernel; else why not."""
        if len(self.nodes) + ops_count > MAX_KERNEL_OPS:
            return (f"{self!r} holds {len(self.nodes)} ops; a kernel holds at most {MAX_KERNEL_OPS} "
                    f"(Numba's compile time per op grows beyond)")
        if self.routines + routines > MAX_KERNEL_ROUTINES:
            return (f"{self!r} inlines {self.routines} math routines; a kernel inlines at most "
                    f"{MAX_KERNEL_ROUTINES} (Numba's compile time per op grows beyond)")
        return None


def is_fusible_elementwise(node: Node) -> bool:
    return node.op.kind is OpKind.ELEMENTWISE and len(node.outputs) == 1


def is_scalar_constant(value: Value) -> bool:
    """A scalar constant each kernel copies into its body (one with control inputs is read instead,
    so that the kernel waits for what it waits for)."""
    return (value.producer is not None and value.producer.op is ops.constant and value.type.size == 1
            and not value.producer.control_inputs)


class Fuser:
    def __init__(self, graph: Graph, enabled: bool):
        self.graph = graph
        self.enabled = enabled
        self.groups: list[Group] = []
        self.group_of: dict[Node, Group] = {}
        self.position = {node: index for index, node in enumerate(graph.nodes)}
        self.users: dict[Value, list[Node]] = {}
        for node in graph.nodes:
            for value in node.inputs:
                self.users.setdefault(value, []).append(node)
        self.graph_outputs = set(graph.outputs)
        self.boundaries: list[str] = []
        self.merged_into: dict[int, Group] = {}     # group index -> the group it merged into
        self.waits = TransferWaits(graph)           # no merge may make a send wait for a recv

    # -- embeddings --------------------------------------------------------------------------
    def embedding_in(self, group: Group, node: Node) -> tuple | None:
        """The embedding of ``node``'s output in ``group``, or None when it does not fit."""
        out_shape = node.output.shape
        rank = len(out_shape)
        entries: list = [None] * rank
        for value in node.inputs:
            if value not in group.embed:
                continue
            offset = rank - value.type.rank
            for dim, entry in enumerate(group.embed[value]):
                if value.shape[dim] == 1 or entry is None:
                    continue
                current = entries[offset + dim]
                if current is not None and current != entry:
                    return None
                entries[offset + dim] = entry
        if out_shape == group.domain and rank == len(group.domain):
            identity = tuple(range(rank))
            if any(e is not None and e != i for i, e in enumerate(entries)):
                return None
            return tuple(None if out_shape[i] == 1 else i for i in identity)
        if group.kind is not KernelKind.REDUCE:
            return None
        for dim, size in enumerate(out_shape):
            if size != 1 and entries[dim] is None:
                return None
            if entries[dim] is not None and group.domain[entries[dim]] != size:
                return None
        placed = [entry for entry in entries if entry is not None]
        if len(placed) != len(set(placed)):
            # Two dimensions along one domain axis: a 1-D per-row value broadcast against a
            # column (argmin(x, 1) < x.max(1, keepdims=True)) would need other rows' values.
            return None
        return tuple(entries)

    # -- legality ------------------------------------------------------------------------------
    def groups_of(self, nodes) -> list[Group]:
        """The groups of ``nodes``, each once, in order of first appearance."""
        return list(dict.fromkeys(g for g in (self.group_of.get(other) for other in nodes) if g is not None))

    def input_groups(self, node: Node) -> list[Group]:
        return self.groups_of(value.producer for value in node.inputs if value.producer is not None)

    def dependency_groups(self, node: Node) -> list[Group]:
        """The groups ``node`` waits for: its inputs' and its control inputs' (a recv held
        back by a control edge, for one)."""
        return self.groups_of([value.producer for value in node.inputs if value.producer is not None]
                              + node.control_inputs)

    @staticmethod
    def reaches(source: Group, target: Group) -> bool:
        """Whether ``target`` depends on ``source`` through a path of groups.

        Searches back from ``target``, skipping every group not deeper than ``source``
        (a group ``source`` reaches is deeper than it), so a query looks only at the
        groups between the two: no transitive sets, which are quadratic in a long chain
        of kernels."""
        if target.depth <= source.depth:
            return False
        stack, seen = [target], {target}
        while stack:
            for before in stack.pop().preds:
                if before is source:
                    return True
                if before.depth > source.depth and before not in seen:
                    seen.add(before)
                    stack.append(before)
        return False

    def creates_cycle(self, node: Node, group: Group) -> bool:
        return any(self.reaches(group, other) for other in self.dependency_groups(node) if other is not group)

    def why_not(self, node: Node, group: Group) -> str | None:
        """None if ``node`` may join ``group``, else the reason it may not."""
        if group.kind is None:
            return f"producer {group.nodes[0].op.name} runs outside kernels"
        if node.device != group.device or node.requested_device != group.nodes[0].requested_device:
            return "different devices"
        if self.creates_cycle(node, group):
            return f"joining {group!r} would create a cycle between kernels"
        if self.waits.added([node], group.nodes):       # (transfer_waits: a deadlock between devices)
            return f"joining {group!r} would make a send wait for a recv"
        full = group.full_for(1, node.op in ROUTINE_OPS)
        if full is not None:
            return full
        if is_fusible_elementwise(node):
            if group.kind in (KernelKind.LOOP, KernelKind.MATMUL) and node.output.shape != group.domain:
                return f"different iteration domains: {node.output.type} vs {group.domain} of {group!r}"
            embedding = self.embedding_in(group, node)
            if embedding is None:
                return f"its dimensions do not line up with the loops of {group!r}"
            if (group.kind is KernelKind.REDUCE and len(group.domain) - 1 not in group.axes
                    and any(entry in group.axes for entry in embedding)
                    and any(value in group.after_reduction for value in node.inputs)):
                # The kernel reduces whole rows into a block of outputs at a time
                # (reduce.ReduceWriter.write_columns); a second pass over the rows would stride.
                return (f"{group!r} reduces outer axes {list(group.axes)}: full-shaped uses of its "
                        f"reductions run in a loop kernel")
            return None
        if node.op.kind is OpKind.REDUCTION:
            source = node.inputs[0]
            if group.kind is KernelKind.MATMUL:
                return "a reduction of a matmul result runs as its own kernel"
            if source.shape != group.domain or group.embed.get(source) != tuple(
                    None if d == 1 else i for i, d in enumerate(source.shape)):
                return f"reduction input {source.type} is not the domain {list(group.domain)} of {group!r}"
            if group.kind is KernelKind.REDUCE and reduction_axes(node) != group.axes:
                return f"reduces axes {list(reduction_axes(node))}, {group!r} reduces {list(group.axes)}"
            return None
        return f"{node.op.name} runs outside kernels"

    # -- building groups ---------------------------------------------------------------------------
    def new_group(self, node: Node, kind: KernelKind | None, domain, axes=()) -> Group:
        group = Group(len(self.groups), kind, tuple(domain), tuple(axes), node.device)
        self.groups.append(group)
        self.add(node, group)
        return group

    @staticmethod
    def deepen(group: Group, depth: int) -> None:
        """Make ``group`` at least ``depth`` deep, and what reads from it deeper still."""
        stack = [(group, depth)]
        while stack:
            group, depth = stack.pop()
            if group.depth < depth:
                group.depth = depth
                stack.extend((after, depth + 1) for after in group.succs)

    def link(self, before: Group, after: Group) -> None:
        """``after`` reads from (or waits for) ``before``."""
        if before is after or before in after.preds:
            return
        after.preds.add(before)
        before.succs.add(after)
        self.deepen(after, before.depth + 1)

    def add(self, node: Node, group: Group) -> None:
        for other in self.dependency_groups(node):
            self.link(other, group)
        group.nodes.append(node)
        group.routines += node.op in ROUTINE_OPS
        self.group_of[node] = group
        if node.op.kind is OpKind.REDUCTION or any(value in group.after_reduction for value in node.inputs):
            group.after_reduction.add(node.output)
        if group.kind is None:
            return
        if node.op is ops.matmul:
            group.embed[node.output] = tuple(None if d == 1 else i for i, d in enumerate(node.output.shape))
        elif node.op.kind is OpKind.REDUCTION:
            source = node.inputs[0]
            axes = reduction_axes(node)
            if group.kind is KernelKind.LOOP:
                group.kind, group.axes = KernelKind.REDUCE, axes
            source_embed = group.embed.get(source) or tuple(None if d == 1 else i for i, d in enumerate(source.shape))
            keepdims = node.attrs["keepdims"]
            entries = [None if dim in axes else entry for dim, entry in enumerate(source_embed)]
            if not keepdims:
                entries = [entry for dim, entry in enumerate(entries) if dim not in axes]
            group.embed[node.output] = tuple(entries)
        else:
            embedding = self.embedding_in(group, node)
            group.embed[node.output] = embedding

    def merge(self, into: Group, other: Group) -> None:
        self.merged_into[other.index] = into       # boundaries noted before name the merged-away group
        for node in other.nodes:
            self.group_of[node] = into
        into.nodes.extend(other.nodes)
        into.routines += other.routines
        into.embed.update(other.embed)
        into.after_reduction |= other.after_reduction
        for before in other.preds:
            before.succs.discard(other)
        for after in other.succs:
            after.preds.discard(other)
        self.deepen(into, other.depth)
        for before in other.preds:
            self.link(before, into)
        for after in other.succs:
            self.link(into, after)
        other.nodes, other.preds, other.succs, other.routines = [], set(), set(), 0

    def same_nest(self, a: Group, b: Group) -> bool:
        """One loop nest can run both: loops over one domain, or reductions over the same
        axes of one domain."""
        return (a is not b and a.nodes and b.nodes and a.kind == b.kind and a.domain == b.domain
                and (a.kind is KernelKind.LOOP or (a.kind is KernelKind.REDUCE and a.axes == b.axes))
                and self.may_merge(a, b, b.routines))

    def may_merge(self, a: Group, b: Group, routines: int) -> bool:
        """One device (every node of a group has its first node's requested device: why_not),
        room in ``a`` for ``b``'s nodes, ``routines`` of them math routines, and no send made
        to wait for a recv (transfer_waits)."""
        return (a.device == b.device and a.nodes[0].requested_device == b.nodes[0].requested_device
                and a.full_for(len(b.nodes), routines) is None and not self.waits.added(a.nodes, b.nodes))

    def can_merge_siblings(self, a: Group, b: Group) -> bool:
        """Independent kernels one loop nest can run (``x.sum(1)`` and ``x.max(1)``: one pass
        over each row of ``x`` does both)."""
        return self.same_nest(a, b) and not self.reaches(a, b) and not self.reaches(b, a)

    def can_merge_producer(self, consumer: Group, producer: Group) -> bool:
        """A loop feeding the loop ``consumer`` directly, with no path through a third kernel;
        or feeding a matmul's epilogue over the same domain (``b1 * m + (1 - b1) * (a @ b)``:
        the epilogue computes ``b1 * m`` too, instead of a kernel writing it out to be read);
        or over the whole domain of a reduce kernel, whose first pass then computes it
        (``np.clip(x, lo, hi)`` with ``lo`` from ``x.mean()``: ``x < lo`` and ``isnan(x)``
        meet in one node, and the reduce kernel would otherwise store ``x < lo`` for a loop
        kernel to read)."""
        if consumer.kind in (KernelKind.MATMUL, KernelKind.REDUCE):
            if not (producer.kind is KernelKind.LOOP and producer.domain == consumer.domain and producer.nodes
                    and self.may_merge(consumer, producer, producer.routines)):
                return False
        elif not (consumer.kind is KernelKind.LOOP
                  and (self.same_nest(consumer, producer) or self.recomputable_into(consumer, producer))):
            return False
        return self.feeds_directly(producer, consumer)

    def feeds_directly(self, producer: Group, consumer: Group) -> bool:
        """No path from ``producer`` to ``consumer`` through a third kernel (nor back): the two
        can become one without a cycle."""
        return (not self.reaches(consumer, producer)
                and not any(self.reaches(producer, before) for before in consumer.preds if before is not producer))

    def recomputable_into(self, consumer: Group, producer: Group) -> bool:
        """A cheap loop (no math routine) over a domain that broadcasts into the loop
        ``consumer``'s, at most BROADCAST_REPEAT times smaller, whose values only ``consumer``
        reads: it joins, its values computed again at every element they broadcast over (an
        image's ``255 - alpha`` per channel), instead of a kernel of its own writing them out
        for ``consumer`` to read back."""
        if not (consumer.kind is KernelKind.LOOP and producer.kind is KernelKind.LOOP and producer.nodes
                and not producer.routines and len(producer.domain) == len(consumer.domain)
                and producer.domain != consumer.domain
                and all(mine in (theirs, 1) for mine, theirs in zip(producer.domain, consumer.domain))
                and math.prod(consumer.domain) <= BROADCAST_REPEAT * math.prod(producer.domain)
                and self.may_merge(consumer, producer, 0)):
            return False
        return all(value not in self.graph_outputs
                   and all(self.group_of.get(user) in (producer, consumer) for user in self.users.get(value, ()))
                   for node in producer.nodes for value in node.outputs)

    def run(self) -> None:
        for node in self.graph.nodes:
            kind = node.op.kind
            if kind not in (OpKind.ELEMENTWISE, OpKind.REDUCTION, OpKind.MATMUL) or len(node.outputs) != 1:
                self.note_boundaries(node, f"{node.op.name} runs outside kernels")
                self.new_group(node, None, ())
                continue
            if node.op is ops.matmul:
                self.note_boundaries(node, "matmul is a BLAS call; it starts its own kernel")
                self.new_group(node, KernelKind.MATMUL, node.output.shape)
                continue
            joined = None
            if self.enabled:
                self.merge_input_siblings(node)
                # A matmul's epilogue first: joining it saves writing the product out and reading
                # it back, and a loop feeding the node can then join the epilogue too.
                for group in self.join_order(node):
                    reason = self.why_not(node, group)
                    if reason is None:
                        joined = group
                        break
            if joined is None:
                if node.op.kind is OpKind.REDUCTION:
                    self.new_group(node, KernelKind.REDUCE, node.inputs[0].shape, reduction_axes(node))
                else:
                    self.new_group(node, KernelKind.LOOP, node.output.shape)
                self.note_boundaries(node, None)
                continue
            self.add(node, joined)
            for other in self.input_groups(node):
                if self.can_merge_producer(joined, other):
                    self.merge(joined, other)
            self.note_boundaries(node, None)
        if self.enabled:
            self.merge_siblings()
            self.merge_broadcast_producers()

    def merge_broadcast_producers(self) -> None:
        """Cheap loops over a broadcast domain join the one loop that reads them
        (recomputable_into): the reads come from several of its nodes, which may have merged
        only after the node that made each read had joined."""
        for consumer in self.groups:
            for producer in sorted(consumer.preds, key=lambda g: g.index):
                if consumer.nodes and self.recomputable_into(consumer, producer) \
                        and self.feeds_directly(producer, consumer):
                    self.merge(consumer, producer)

    def join_order(self, node: Node) -> list[Group]:
        """The kernels ``node`` tries to join, in order: a matmul's epilogue first; then a
        kernel that every other loop feeding ``node`` can merge into (they join it after
        ``node``, one kernel where joining a loop would leave two); then the latest first."""
        groups = list(reversed(self.input_groups(node)))

        def rank(group: Group) -> int:
            if group.kind is KernelKind.MATMUL:
                return 0
            loops = [g for g in groups if g is not group and g.kind is KernelKind.LOOP]
            if group.kind is KernelKind.REDUCE and loops and all(self.can_merge_producer(group, g) for g in loops):
                return 1
            return 2
        return sorted(groups, key=rank)

    def merge_input_siblings(self, node: Node) -> None:
        """Kernels feeding ``node`` that one loop nest can run and that read a common input
        merge before ``node`` joins one of them (``x.max(1) - x.min(1)``): once it had
        joined, the other would be an ancestor of that kernel and could no longer merge."""
        groups = self.input_groups(node)
        for index, a in enumerate(groups):
            for b in groups[index + 1:]:
                if a.nodes and b.nodes and self.can_merge_siblings(a, b) and \
                        self.outside_inputs(a).keys() & self.outside_inputs(b).keys():
                    self.merge(a, b)

    def outside_inputs(self, group: Group) -> dict[Value, None]:
        """The values ``group`` reads from outside itself, in order of first use."""
        return {value: None for node in group.nodes for value in node.inputs
                if self.group_of.get(value.producer) is not group}

    def merge_siblings(self) -> None:
        """Kernels one loop nest can run that read a common input, or whose results one concat
        joins (``np.stack``'s channels, each computed per region), become one multi-output
        kernel."""
        readers: dict[Value, list[Group]] = {}
        for group in self.groups:
            for value in self.outside_inputs(group):
                # A scalar constant is copied into each kernel, not read: were it counted, the
                # kernels of a long program would all be pairs to try (quadratic).
                if not is_scalar_constant(value):
                    readers.setdefault(value, []).append(group)
            for node in (n for n in group.nodes if n.op is ops.concat):
                readers[node.output] = list(dict.fromkeys(self.group_of[v.producer] for v in node.inputs
                                                          if v.producer in self.group_of))
        for groups in readers.values():
            for i, a in enumerate(groups):
                for b in groups[i + 1:]:
                    if not a.nodes or a.full_for(1, 0) is not None:
                        break                 # a full kernel takes no more siblings
                    if self.can_merge_siblings(a, b):
                        self.merge(a, b)

    def note_boundaries(self, node: Node, reason: str | None) -> None:
        for value in node.inputs:
            producer = value.producer
            if producer is None or is_scalar_constant(value):
                continue
            mine = self.group_of.get(node)
            theirs = self.group_of.get(producer)
            if mine is theirs:
                continue
            if not self.enabled:
                why = "fusion is off (fuse=False)"
            elif reason is not None:
                why = reason
            elif theirs.kind is None:
                why = f"producer {producer.op.name} runs outside kernels"
            else:
                why = self.why_not(node, theirs) if mine is not theirs else None
                why = why or "a better-fitting kernel was joined"
            self.boundaries.append(f"%{producer.name} -> %{node.name}: {why}")

    # -- output ------------------------------------------------------------------------------------
    def build(self) -> Graph:
        groups = [g for g in self.groups if g.nodes and g.kind is not None]
        for group in groups:
            group.nodes.sort(key=self.position.__getitem__)
        externs = [g.nodes[0] for g in self.groups if g.kind is None]
        units: list = sorted(externs + groups, key=lambda unit: self.position[
            unit if isinstance(unit, Node) else unit.nodes[0]])
        unit_of = {}
        for unit in units:
            for node in ([unit] if isinstance(unit, Node) else unit.nodes):
                unit_of[node] = unit

        def predecessors(unit):
            return {unit_of[before] for node in ([unit] if isinstance(unit, Node) else unit.nodes)
                    for before in node.dependencies()}
        order = stable_topological_order(units, predecessors)
        assert len(order) == len(units), "fusion formed a cycle"

        users: dict[Value, set] = {}
        for node in self.graph.nodes:
            for value in node.inputs:
                users.setdefault(value, set()).add(unit_of[node])
        result = Graph(self.graph.name, [], [], [], self.graph.attrs)
        mapping: dict[Value, Value] = {}
        for value in self.graph.inputs:
            mapping[value] = result.add_input(value.name, value.type)
        graph_outputs = set(self.graph.outputs)
        kernel_index = 0
        node_map: dict[Node, Node] = {}
        for unit in order:
            if isinstance(unit, Node):
                copy = result.add_node(unit.op, [mapping[v] for v in unit.inputs], unit.attrs,
                                       [v.type for v in unit.outputs], name=unit.name,
                                       requested_device=unit.requested_device, device=unit.device,
                                       control_inputs=[node_map[b] for b in unit.control_inputs], loc=unit.loc)
                node_map[unit] = copy
                for old, new in zip(unit.outputs, copy.outputs):
                    mapping[old] = new
                continue
            body, outer_inputs, exported, plan = self.body_of(unit, users, graph_outputs, kernel_index)
            controls = sorted({node_map[b] for n in unit.nodes for b in n.control_inputs
                               if unit_of[b] is not unit}, key=lambda n: result.nodes.index(n))
            fused = result.add_node(ops.fused, [mapping[v] for v in outer_inputs],
                                    {"body": body, "plan": plan}, [v.type for v in exported],
                                    name=body.name, requested_device=unit.nodes[0].requested_device,
                                    device=unit.device, control_inputs=controls, loc=unit.nodes[-1].loc)
            for node in unit.nodes:
                node_map[node] = fused
            for old, new in zip(exported, fused.outputs):
                mapping[old] = new
            kernel_index += 1
        result.outputs = [mapping[v] for v in self.graph.outputs]
        return result

    def body_of(self, group: Group, users, graph_outputs, index: int):
        members = set(group.nodes)
        names = []
        for node in group.nodes:
            if not names or names[-1] != node.op.name:
                names.append(node.op.name)
        name = f"k{index}_" + "_".join(names[:MAX_NAME_OPS])
        body = Graph(name)
        mapping: dict[Value, Value] = {}
        outer_inputs: list[Value] = []
        for node in group.nodes:
            for value in node.inputs:
                if value in mapping or (value.producer in members):
                    continue
                if is_scalar_constant(value):
                    constant = body.add_node(ops.constant, [], {"value": value.producer.attrs["value"]},
                                             name=value.name)
                    mapping[value] = constant.output
                else:
                    mapping[value] = body.add_input(value.name.replace(":", "_"), value.type)
                    outer_inputs.append(value)
            copy = body.add_node(node.op, [mapping[v] for v in node.inputs], node.attrs,
                                 [v.type for v in node.outputs], name=node.name, loc=node.loc)
            for old, new in zip(node.outputs, copy.outputs):
                mapping[old] = new
        exported = [value for node in group.nodes for value in node.outputs
                    if value in graph_outputs or any(unit is not group for unit in users.get(value, ()))]
        body.outputs = [mapping[value] for value in exported]
        decided = {mapping[value].name: group.embed[value] for node in group.nodes for value in node.outputs}
        embed = {value.name: decided[value.name] if node.op is not ops.constant else (None,) * value.type.rank
                 for node in body.nodes for value in node.outputs}      # scalar constants copied in: broadcast
        plan = KernelPlan(group.kind, group.domain, group.axes, embed)
        return body, outer_inputs, exported, plan


@dataclass(frozen=True)
class Fuse(Pass):
    """Rewrite the graph into kernels (fused nodes); ``enabled=False`` gives one kernel per op."""

    name = "fuse"
    enabled: bool = True

    def run(self, graph: Graph) -> bool:
        result, _ = fuse(graph, self.enabled)
        graph.inputs, graph.nodes, graph.outputs = result.inputs, result.nodes, result.outputs
        graph._names = result._names
        return True


def fuse(graph: Graph, enabled: bool = True) -> tuple[Graph, list[str]]:
    """The fused graph, and why each remaining edge between kernels was not fused."""
    fused, fuser = run_fuser(graph, enabled)
    return fused, fuser.boundaries


def run_fuser(graph: Graph, enabled: bool = True) -> tuple[Graph, Fuser]:
    """The fused graph, and the fuser that made it (its groups, boundaries and merges).

    The cyclic garbage collector is paused meanwhile, as in ``Pipeline.run``: its scans of
    a heap growing by a node at a time made fusing big graphs superlinear."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        fuser = Fuser(graph, enabled)
        fuser.run()
        fused = fuser.build()
    finally:
        if was_enabled:
            gc.enable()
    from flowjit.compiler.passes.dce import DeadCodeElimination
    DeadCodeElimination().run(fused)          # constants every kernel copied into its body
    return fused, fuser
