"""Partitioning a placed graph into one graph per device, joined by Send/Recv (§3.2.2).

Every edge x -> y whose ends lie on different devices becomes x -> send in x's
partition and recv -> y in y's.  All consumers of one tensor on one device share one
recv, so the tensor is sent once and allocated once there.  Send and recv carry a
rendezvous key ``source;destination;tensor``.  Small constants used on several devices
are copied into each partition instead of sent.  A control edge across devices becomes
a send of the control source's first output and a recv used as a control input; a
source with no output (a variable's assign) releases a 0-d token constant that is sent.

§5.5 ``lossy=True``: a float32 tensor crosses as ``truncate16`` (its upper 16 bits) and
comes back through ``extend16`` (the lower 16 bits zero), both visible in the IR.

§5.2 ``schedule_recvs``: ASAP/ALAP times over the whole program (every partition, with
each send -> recv as an edge, durations from the cost model) give each recv's latest
useful start: the ALAP start of its first consumer less the transfer time.  A control
edge from the node of the same partition whose ALAP finish comes last before that
(and that does not itself wait for the recv) holds the recv until shortly before its
first use, so received tensors do not sit in memory early.

A recv that waits, through other devices, on a send of its own partition (a round trip)
gets a control edge from that send, so that fusion of the partition cannot merge the
two ends into one kernel that would wait on itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flowjit.compiler.costmodel import CostModel
from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph, Node, Value
from flowjit.compiler.ir.ops.comm import rendezvous_key
from flowjit.compiler.passes.place import topological_order
from flowjit.devices import DeviceSet

COPY_CONSTANT_LIMIT = 1 << 12        # elements: smaller constants are copied, not sent


@dataclass
class Partitioned:
    """One graph per device (``graph.attrs["device"]``), and how the program's inputs and
    outputs map onto them."""

    partitions: list[Graph]
    inputs: list[list[int]]                   # per partition: program input index of each input
    outputs: list[tuple[int, int]]            # per program output: (partition, output) or (-1, input)


def _tensor_name(value: Value) -> str:
    producer = value.producer
    return f"{producer.name}:{value.port}" if producer is not None else value.name


def partition(placed: Graph, devices: DeviceSet, *, lossy: bool = False, schedule_recvs: bool = True,
              costs: CostModel | None = None) -> Partitioned:
    order = topological_order(placed)
    used = {node.device for node in placed.nodes}
    device_names = [d.name for d in devices if d.name in used] or [devices.devices[0].name]
    index_of = {name: i for i, name in enumerate(device_names)}
    graphs = [Graph(placed.name, attrs={"device": name}) for name in device_names]
    input_maps: list[list[int]] = [[] for _ in device_names]
    program_input = {value: i for i, value in enumerate(placed.inputs)}
    local: dict[tuple[Value, int], Value] = {}           # (value, partition) -> value there
    copied: dict[Node, Node] = {}                         # placed node -> its copy
    truncated: dict[Value, Value] = {}
    links: list[tuple[Node, Node]] = []                   # (send, recv)

    def graph_of(node: Node) -> int:
        return index_of[node.device]

    def value_in(value: Value, part: int) -> Value:
        key = (value, part)
        if key in local:
            return local[key]
        graph = graphs[part]
        producer = value.producer
        if producer is None:                               # a program input: each partition takes it
            local[key] = graph.add_input(value.name, value.type)
            input_maps[part].append(program_input[value])
            return local[key]
        if producer.op is ops.constant and not _too_large_to_copy(producer):
            node = graph.add_node(ops.constant, [], producer.attrs, [value.type], name=producer.name,
                                  device=graph.attrs["device"], loc=producer.loc)
            local[key] = node.output
            return node.output
        return _receive(value, part)

    def _receive(value: Value, part: int) -> Value:
        source = graph_of(value.producer)
        source_graph, graph = graphs[source], graphs[part]
        payload = local[(value, source)]
        wire = lossy and value.dtype == np.float32
        if wire:
            if value not in truncated:
                truncated[value] = source_graph.add_node(
                    ops.truncate16, [payload], name=f"truncate16_{value.producer.name}",
                    device=source_graph.attrs["device"], loc=value.producer.loc).output
            payload = truncated[value]
        key = rendezvous_key(device_names[source], device_names[part], _tensor_name(value))
        send = source_graph.add_node(ops.send, [payload], {"key": key}, name=f"send_{value.producer.name}",
                                     device=source_graph.attrs["device"], loc=value.producer.loc)
        recv = graph.add_node(ops.recv, [], {"key": key, "shape": payload.shape, "dtype": payload.dtype},
                              name=f"recv_{value.producer.name}", device=graph.attrs["device"],
                              loc=value.producer.loc)
        links.append((send, recv))
        received = recv.output
        if wire:
            received = graph.add_node(ops.extend16, [received], name=f"extend16_{value.producer.name}",
                                      device=graph.attrs["device"], loc=value.producer.loc).output
        local[(value, part)] = received
        return received

    tokens: dict[Node, Value] = {}

    def token_of(before: Node) -> Value:
        """A 0-d constant after ``before`` (a node with no output) in its partition: what a
        control edge from it to another device sends."""
        if before not in tokens:
            source = graph_of(before)
            token = graphs[source].add_node(ops.constant, [], {"value": np.zeros((), np.bool_)},
                                            name=f"token_{before.name}", device=graphs[source].attrs["device"],
                                            control_inputs=[copied[before]], loc=before.loc)
            tokens[before] = token.output
            local[(token.output, source)] = token.output
        return tokens[before]

    for node in order:
        if node.op is ops.constant and not _too_large_to_copy(node):
            continue                                       # copied into each consumer's partition
        part = graph_of(node)
        inputs = [value_in(value, part) for value in node.inputs]
        controls = []
        for before in node.control_inputs:
            if graph_of(before) == part:
                controls.append(copied[before])
            elif before.outputs:                           # wait for its first output to arrive
                controls.append(value_in(before.outputs[0], part).producer)
            else:                                          # (an assign): wait for a token it releases
                token = token_of(before)
                received = local.get((token, part)) or _receive(token, part)   # one recv per device
                controls.append(received.producer)
        copy = graphs[part].add_node(node.op, inputs, node.attrs, [v.type for v in node.outputs], name=node.name,
                                     requested_device=node.requested_device, device=node.device,
                                     colocation=node.colocation, control_inputs=controls, loc=node.loc)
        copied[node] = copy
        for old, new in zip(node.outputs, copy.outputs):
            local[(old, part)] = new

    outputs = []
    for value in placed.outputs:
        if value.producer is None:
            outputs.append((-1, program_input[value]))
            continue
        part = graph_of(value.producer)
        mapped = value_in(value, part)
        graphs[part].outputs.append(mapped)
        outputs.append((part, len(graphs[part].outputs) - 1))
    result = Partitioned(graphs, input_maps, outputs)
    if links:
        order_round_trips(result, links)
    if schedule_recvs and links:
        schedule(result, links, devices, costs or CostModel())
    return result


def _program_graph(partitioned: Partitioned, links: list[tuple[Node, Node]]):
    """Every partition's nodes in one networkx DAG, each send -> recv an edge."""
    import networkx as nx
    program = nx.DiGraph()
    for graph in partitioned.partitions:
        for node in graph.nodes:
            program.add_node(node)
            program.add_edges_from((before, node) for before in node.dependencies())
    for send, recv in links:
        program.add_edge(send, recv)
    return program


def order_round_trips(partitioned: Partitioned, links: list[tuple[Node, Node]]) -> None:
    """A recv that waits, through other devices, on a send of its own partition gets a
    control edge from that send.  Execution already implies it; fusion, which sees one
    partition at a time, needs it so as not to put the send's producer and the recv's
    consumer in one kernel (which would wait on itself)."""
    import networkx as nx
    program = _program_graph(partitioned, links)
    for graph in partitioned.partitions:
        sends = [node for node in graph.nodes if node.op is ops.send]
        for recv in (node for node in graph.nodes if node.op is ops.recv):
            ancestors = nx.ancestors(program, recv)
            for send in sends:
                if send in ancestors and send not in recv.control_inputs:
                    recv.control_inputs.append(send)
        graph.nodes = topological_order(graph)


def _too_large_to_copy(node: Node) -> bool:
    """A constant too large to copy into every partition, or one that waits for something
    (control inputs): it is placed and sent."""
    return np.size(node.attrs["value"]) > COPY_CONSTANT_LIMIT or bool(node.control_inputs)


def schedule(partitioned: Partitioned, links: list[tuple[Node, Node]], devices: DeviceSet,
             costs: CostModel) -> None:
    """ASAP/ALAP over the whole program; control edges hold each recv until shortly before
    its first use (see the module docstring)."""
    import networkx as nx
    program = _program_graph(partitioned, links)
    device_of = {node: devices[graph.attrs["device"]] for graph in partitioned.partitions for node in graph.nodes}
    duration = {node: costs.node(node, device_of[node]) for node in program.nodes}
    transfer = {recv: costs.transfer(recv.outputs[0], device_of[send], device_of[recv]) for send, recv in links}
    order = list(nx.lexicographical_topological_sort(program, key=lambda n: n.name))
    asap: dict[Node, float] = {}
    for node in order:
        asap[node] = max((asap[p] + duration[p] + transfer.get(node, 0.0) for p in program.predecessors(node)),
                         default=0.0)
    length = max((asap[n] + duration[n] for n in order), default=0.0)
    alap: dict[Node, float] = {}
    for node in reversed(order):
        latest_finish = min((alap[s] - transfer.get(s, 0.0) for s in program.successors(node)), default=length)
        alap[node] = latest_finish - duration[node]
    for send, recv in links:
        graph = next(g for g in partitioned.partitions if recv in g.nodes)
        consumers = [n for n in program.successors(recv)]
        if not consumers:
            continue
        first_use = min(alap[n] for n in consumers) - transfer[recv]
        waiting = nx.descendants(program, recv) | {recv}
        ancestors = nx.ancestors(program, recv)
        best = None
        for node in graph.nodes:
            if node in waiting or node.op is ops.constant:
                continue
            finish = alap[node] + duration[node]
            if finish <= first_use + 1e-15 and (best is None or finish > best[0]):
                best = (finish, node)
        if best is not None and best[1] not in ancestors:
            recv.control_inputs.append(best[1])
            program.add_edge(best[1], recv)
    for graph in partitioned.partitions:              # a holder may come later in node order
        graph.nodes = topological_order(graph)
