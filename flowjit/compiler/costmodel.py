"""What a node costs on a device, and what a tensor costs to move (whitepaper §3.2.1).

Static estimates come from the op's kind, its tensors' bytes and its flops, against the
device's memory bandwidth, arithmetic rate and per-kernel overhead:
``launch + max(bytes / bandwidth, flops / flop rate)``.  Measured costs, recorded from
profiled runs (``Jitted.profile``), replace the estimate for the same op, types and
device type the next time a program is placed.

A transfer between two CPU devices of one task passes a reference (the executor shares
memory), so it costs only the link latency; any other pair pays latency plus bytes over
the slower of the two links.
"""

from __future__ import annotations

import threading

import numpy as np

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Node, Value
from flowjit.compiler.ir.ops.base import OpKind
from flowjit.devices import Device

def elements(value: Value) -> int:
    return int(np.prod(value.shape, dtype=np.int64))


def nbytes(value: Value) -> int:
    return elements(value) * value.dtype.itemsize


def flops(node: Node) -> float:
    op = node.op
    if op is ops.fused:
        return sum(flops(inner) for inner in node.attrs["body"].nodes)
    if op is ops.matmul:
        left = node.inputs[0].shape
        k = left[-1] if left else 1
        return 2.0 * elements(node.outputs[0]) * k
    if op.kind is OpKind.ELEMENTWISE:
        return float(elements(node.outputs[0]) * op.flops)        # (its definition says how many)
    if op.kind in (OpKind.REDUCTION, OpKind.LIBRARY):
        return float(sum(elements(value) for value in node.inputs))
    return 0.0


def moved_bytes(node: Node) -> int:
    if node.op.kind in (OpKind.CONSTANT, OpKind.SHAPE) and node.op is not ops.concat:
        return 0                                    # views and literals move nothing
    return sum(nbytes(v) for v in node.inputs) + sum(nbytes(v) for v in node.outputs)


def measure_key(node: Node, device_type: str) -> str:
    types = ",".join(str(value.type) for value in node.inputs)
    return f"{device_type}|{node.op.name}|{types}"


class CostModel:
    """Estimates, overridden by measurements recorded per (device type, op, input types).

    A CPU device that does not set its own bandwidth, flop rate and launch cost gets
    ``machine``'s (a ``flowjit.machine.MachineFigures``); by default this machine's,
    measured once and cached (``machine_figures``) the first time a CPU device needs them.
    ``machine=STATIC`` gives fixed stand-ins, for plans that must not depend on the machine
    (the golden tests)."""

    def __init__(self, measured: dict[str, float] | None = None, machine=None):
        self.measured: dict[str, float] = dict(measured or {})
        self.machine = machine
        self._figures: dict[str, tuple[float, float, float]] = {}
        self._lock = threading.Lock()

    def machine_figures(self):
        if self.machine is None:
            from flowjit.config import cache_directory
            from flowjit.machine import machine_figures
            self.machine = machine_figures(cache_directory("default"))
        return self.machine

    def figures(self, device: Device) -> tuple[float, float, float]:
        """(bandwidth, flops, launch) of ``device`` under this model."""
        figures = self._figures.get(device.name)
        if figures is None:
            needs_machine = None in (device.bandwidth, device.flops, device.launch)
            resolved = device.figures(self.machine_figures() if needs_machine else None)
            figures = self._figures[device.name] = (resolved["bandwidth"], resolved["flops"], resolved["launch"])
        return figures

    def node(self, node: Node, device: Device) -> float:
        """Seconds ``node`` takes on ``device``."""
        if node.op is ops.constant:
            return 0.0
        measured = self.measured.get(measure_key(node, device.type))
        if measured is not None:
            return measured
        if node.op.kind is OpKind.LIBRARY and device.type == "gpu":
            # (a GPU runs a library op on its host, its operands copied across and back:
            # CudaBackend.library_call) -- the host's time and both copies
            host = self.machine_figures()
            copies = 2 * device.link_latency + moved_bytes(node) / device.link_bandwidth
            return copies + host.launch + max(moved_bytes(node) / host.bandwidth, flops(node) / host.flops)
        bandwidth, rate, launch = self.figures(device)
        return launch + max(moved_bytes(node) / bandwidth, flops(node) / rate)

    def transfer(self, value: Value, source: Device, destination: Device) -> float:
        """Seconds to make ``value``, produced on ``source``, available on ``destination``: over
        the devices' own links within a process (between two CPU devices, the latency alone: they
        share its memory), between a cluster's tasks over their node's link where they share a
        machine, else over their remote links (``Device.link_to``)."""
        if source.name == destination.name:
            return 0.0
        here, there = source.spec, destination.spec
        if (here.job, here.task) == (there.job, there.task):
            latency = max(source.link_latency, destination.link_latency)
            if here.type == there.type == "cpu":
                return latency
            return latency + nbytes(value) / min(source.link_bandwidth, destination.link_bandwidth)
        latency, bandwidth = source.link_to(destination)
        return latency + nbytes(value) / bandwidth

    def record(self, node: Node, device: Device, seconds: float) -> None:
        """A measured run time; a later placement uses it instead of the estimate."""
        key = measure_key(node, device.type)
        with self._lock:
            previous = self.measured.get(key)
            self.measured[key] = seconds if previous is None else 0.5 * (previous + seconds)
