"""What fusion of one device's partition may not do: make a send wait for a recv.

Each partition is fused on its own (fusion never crosses a device), and a kernel waits for
all its inputs before it writes any output.  Merging two nodes or kernels can therefore make
a send of one wait for a recv the other reads.  Either partition's merge alone is safe
where the recv does not depend on the send (partition.order_round_trips makes the ones that
do visible as control edges); but two partitions can each add such a wait, in opposite
directions, and the program deadlocks: a stencil's gradient on two devices merged ``a``,
sent to cpu:1, with ``b`` that reads what cpu:1 sends back, while cpu:1 did the mirror
image.  So no merge may add a wait of a send on a recv: the waits between devices stay
those of the unfused program, which has no cycle.
"""

from __future__ import annotations

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph, Node


class TransferWaits:
    def __init__(self, graph: Graph):
        recvs = [node for node in graph.nodes if node.op is ops.recv]
        sends = [node for node in graph.nodes if node.op is ops.send]
        self.active = bool(recvs and sends)
        if not self.active:
            return
        bit = {node: 1 << index for index, node in enumerate(recvs)}
        self.recvs: dict[Node, int] = {}          # the recvs each node waits for, as bits
        for node in graph.nodes:
            mask = bit.get(node, 0)
            for before in node.dependencies():
                mask |= self.recvs.get(before, 0)
            self.recvs[node] = mask
        self.send_waits = [self.recvs[send] for send in sends]
        send_bit = {send: 1 << index for index, send in enumerate(sends)}
        self.sends: dict[Node, int] = {}          # the sends that wait for each node, as bits
        for node in reversed(graph.nodes):
            mask = self.sends.setdefault(node, 0) | send_bit.get(node, 0)
            self.sends[node] = mask
            for before in node.dependencies():
                self.sends[before] = self.sends.get(before, 0) | mask

    def added(self, a: list[Node], b: list[Node]) -> bool:
        """Whether running the nodes ``a`` and ``b`` in one kernel makes a send wait for a
        recv it does not wait for in the program as it is."""
        if not self.active:
            return False
        recvs, sends = 0, 0
        for node in (*a, *b):
            recvs |= self.recvs.get(node, 0)
            sends |= self.sends.get(node, 0)
        index = 0
        while sends:
            if sends & 1 and recvs & ~self.send_waits[index]:
                return True
            sends >>= 1
            index += 1
        return False
