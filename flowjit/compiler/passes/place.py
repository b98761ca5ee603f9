"""Placement: a device for every node (whitepaper §3.2.1 and §4.3).

1. Feasible devices per node: the devices whose type has a kernel for the op, that
   match the node's requested device spec (``flowjit.device``; partial specs such as
   ``/device:gpu:*`` constrain), or the one device a node is already placed on.
2. Colocation (``flowjit.colocate_with``, and every read and write of one variable): nodes
   that must share a device form groups by union-find; each group's feasible set is the intersection of its members'.  An empty
   set is an error naming the nodes and their constraints, unless soft placement is on:
   then the requests that cannot be met are dropped, and the fallback is reported.
3. The cost-model placer: walk the graph from its sources in topological order,
   simulating each device's timeline; put each node (its whole colocation group, the
   first time one member is placed) on the feasible device where it would finish
   earliest, counting the transfer of every input that lives elsewhere.  Ties go to the
   device listed first, so placement is deterministic.
   Constants go with their first consumer (partitioning copies one used on several
   devices instead of sending it).

``strategy="random"`` places each group on a random feasible device (seeded): the
property tests use it to run arbitrary placements against the interpreter.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from flowjit.compiler.costmodel import CostModel
from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph, Node, stable_topological_order
from flowjit.compiler.ir.ops.misc import variable_of
from flowjit.errors import FlowjitError
from flowjit.devices import DeviceSet, DeviceSpec, canonical

# Ops without a kernel for a device type.  Variables live in host memory (the variable
# store), so their reads and writes run on CPUs only.
NO_KERNEL = {"gpu": {"read_variable", "assign_variable"}}


class PlacementError(FlowjitError):
    """No device can run a node under its constraints."""


def has_kernel(node: Node, device_type: str) -> bool:
    return node.op.name not in NO_KERNEL.get(device_type, ())


def _describe(node: Node) -> str:
    parts = [f"%{node.name} ({node.op.name})"]
    if node.requested_device:
        parts.append(f"requests {node.requested_device}")
    if node.device:
        parts.append(f"is placed on {node.device}")
    if node.colocation and node.colocation != node.name:
        parts.append(f"is colocated with %{node.colocation}")
    if node.loc:
        parts.append(f"at {node.loc}")
    return " ".join(parts)


class _UnionFind:
    def __init__(self):
        self.parent: dict[str, str] = {}

    def find(self, item: str) -> str:
        self.parent.setdefault(item, item)
        root = item
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[item] != root:                      # path compression
            self.parent[item], item = root, self.parent[item]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def topological_order(graph: Graph) -> list[Node]:
    """Nodes so that every data and control input comes first; ties keep graph order."""
    order = stable_topological_order(graph.nodes, Node.dependencies)
    if len(order) != len(graph.nodes):
        raise PlacementError(f"graph @{graph.name} has a cycle")
    return order


@dataclass
class Placement:
    graph: Graph                                   # a copy with every node's device set
    notes: list[str] = field(default_factory=list)  # soft-placement fallbacks, in order


def place(graph: Graph, devices: DeviceSet, *, soft: bool = False, costs: CostModel | None = None,
          strategy: str = "cost", seed: int = 0) -> Placement:
    """Place a copy of ``graph`` on ``devices``; the copy's nodes carry full device names."""
    if strategy not in ("cost", "random"):
        raise ValueError(f"unknown placement strategy '{strategy}' (strategies: cost, random)")
    graph = graph.copy()
    costs = costs or CostModel()
    notes: list[str] = []
    names = [device.name for device in devices]

    # 1. feasible devices per node
    feasible: dict[Node, list[str]] = {}
    for node in graph.nodes:
        able = [d.name for d in devices if has_kernel(node, d.type)]
        if not able:
            raise PlacementError(f"no device in the set ({', '.join(d.short for d in devices)}) has a "
                                 f"kernel for {_describe(node)}")
        wanted = able
        if node.device:
            full = canonical(node.device)
            wanted = [name for name in able if name == full]
        elif node.requested_device:
            spec = DeviceSpec.parse(node.requested_device)
            wanted = [d.name for d in devices.matching(spec) if d.name in able]
        if not wanted:
            reason = (f"{_describe(node)}: no device in the set ({', '.join(d.short for d in devices)}) "
                      f"matches it and has a kernel for '{node.op.name}'")
            if not soft:
                raise PlacementError(reason + " (turn on soft placement to fall back)")
            notes.append(f"soft placement: {reason}; it may go on {', '.join(_short(n) for n in able)}")
            wanted = able
        feasible[node] = wanted

    # 2. colocation groups
    groups = _UnionFind()
    by_name = {node.name: node for node in graph.nodes}
    for node in graph.nodes:
        groups.find(node.name)
        variable = variable_of(node)
        if variable is not None:                  # a variable's reads and writes go where it lives
            groups.union(node.name, f"@variable:{variable}")
        if node.colocation:
            groups.union(node.name, f"@{node.colocation}")
            if node.colocation in by_name:
                groups.union(node.name, node.colocation)
    members: dict[str, list[Node]] = {}
    for node in graph.nodes:
        members.setdefault(groups.find(node.name), []).append(node)
    group_feasible: dict[str, list[str]] = {}
    for root, group in members.items():
        common = [name for name in names if all(name in feasible[node] for node in group)]
        if not common and soft:
            able = [name for name in names if all(has_kernel(node, DeviceSpec.parse(name).type) for node in group)]
            if able:
                notes.append("soft placement: colocated nodes " + "; ".join(_describe(n) for n in group)
                             + f" have no device in common; the group may go on {', '.join(map(_short, able))}")
                common = able
        if not common:
            raise PlacementError("colocated nodes cannot share any device: "
                                 + "; ".join(f"{_describe(node)} (feasible: "
                                             f"{', '.join(map(_short, feasible[node])) or 'none'})"
                                             for node in group))
        group_feasible[root] = common

    # 3. simulated greedy placement
    device_of = {d.name: d for d in devices}
    chosen: dict[str, str] = {}
    free_at = {name: 0.0 for name in names}
    finish: dict[Node, float] = {}
    arrival: dict[tuple, float] = {}              # (value, device name) -> when it is there
    home = next((d.name for d in devices if d.type == "cpu"), names[0])   # where inputs live
    rng = random.Random(seed)
    order = topological_order(graph)
    for node in order:
        if node.op is ops.constant and not node.device and not node.requested_device \
                and not node.colocation:
            continue                                 # goes with its first consumer, below
        root = groups.find(node.name)
        candidates = [chosen[root]] if root in chosen else group_feasible[root]
        if root not in chosen and strategy == "random":
            candidates = [rng.choice(candidates)]
        best = None
        for name in candidates:
            device = device_of[name]
            arrivals = {}                            # when each input is on this device
            for value in node.inputs:
                producer = value.producer
                if producer is not None and producer.op is ops.constant and producer.device is None:
                    continue                         # copied where it is used
                when = arrival.get((value, name))
                if when is None:
                    source = device_of[producer.device] if producer is not None else device_of[home]
                    ready = finish[producer] if producer is not None else 0.0
                    when = ready + costs.transfer(value, source, device)
                arrivals[(value, name)] = when
            start = max([free_at[name], *arrivals.values(),
                         *(finish[before] for before in node.control_inputs if before in finish)])
            end = start + costs.node(node, device)
            if best is None or end < best[0]:
                best = (end, name, arrivals)
        end, name, arrivals = best
        node.device = name
        chosen[root] = name
        free_at[name] = end
        finish[node] = end
        arrival.update(arrivals)
    users: dict[Node, list[Node]] = {}
    for node in graph.nodes:
        for value in node.inputs:
            if value.producer is not None:
                users.setdefault(value.producer, []).append(node)
    for node in graph.nodes:
        if node.device is None:                      # a constant: with its first consumer
            consumers = [user for user in users.get(node, []) if user.device]
            node.device = consumers[0].device if consumers else home
    return Placement(graph, notes)


def _short(name: str) -> str:
    return DeviceSpec.parse(name).short
