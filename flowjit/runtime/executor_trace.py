"""What a profiled call of the multi-device executor (executor.py) gives: its steps' spans as
Chrome-trace JSON (a track per device, a span per step, an arrow per send -> recv), and its
kernels' measured times recorded into the cost model for the next placement."""

from __future__ import annotations

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Node
from flowjit.devices import Device


def chrome_trace(executable, call) -> dict:
    """A finished call (``executor._Call``) of ``executable`` (a ``MultiDeviceExecutable``) as
    Chrome-trace JSON: a track per device, a span per step, a flow arrow per send -> recv."""
    origin = call.started
    events = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "flowjit"}}]
    for index, device in enumerate(executable.devices):
        events.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": index,
                       "args": {"name": f"{device.short} ({device.name})"}})
    transfers: dict[str, dict[str, tuple]] = {}          # key -> {"send"/"recv": (device, start)}
    for device, step, start, end in call.spans:
        args = {"op": step.node.op.name, "device": executable.devices[device].name}
        if step.carry is not None or (step.kind == "kernel" and executable.queues[device] is not None):
            args["timed"] = "CUDA events"                # (the device's own time, not its issue on the host)
        if step.node.loc:
            args["loc"] = str(step.node.loc)
        if step.key:
            args["key"] = step.key
        events.append({"ph": "X", "name": step.node.name, "cat": step.kind, "pid": 0, "tid": device,
                       "ts": (start - origin) * 1e6, "dur": max((end - start) * 1e6, 0.01), "args": args})
        if step.kind != "kernel":
            transfers.setdefault(step.key, {})[step.kind] = (device, start)
    for flow_id, ends in enumerate(pair for pair in transfers.values() if len(pair) == 2):
        for phase, kind in (("s", "send"), ("f", "recv")):
            device, start = ends[kind]
            events.append({"ph": phase, "id": flow_id, "name": "send", "cat": "transfer", "pid": 0,
                           "tid": device, "ts": (start - origin) * 1e6, **({"bp": "e"} if phase == "f" else {})})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"devices": [d.name for d in executable.devices]}}


def record_costs(executable, call, costs) -> None:
    """Measured kernel times into the cost model, split over the ops a kernel fused by
    their estimated shares, so that the next placement (of unfused nodes) can use them."""
    for device_index, step, start, end in call.spans:
        if step.kind == "kernel":
            record_kernel_time(costs, step.node, executable.devices[device_index], end - start)


def record_kernel_time(costs, node: Node, device: Device, seconds: float) -> None:
    """A kernel's measured time into the cost model, split over the ops it fused by their
    estimated shares (a cluster's profile records its tasks' kernels through it too)."""
    if node.op is ops.constant:
        return
    inner = list(node.attrs["body"].nodes) if node.op is ops.fused else [node]
    inner = [n for n in inner if n.op is not ops.constant]
    estimates = [costs.node(n, device) for n in inner]
    total = sum(estimates) or 1.0
    for n, estimate in zip(inner, estimates):
        costs.record(n, device, seconds * estimate / total)


