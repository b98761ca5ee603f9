"""The multi-device executor (whitepaper §3.1, §3.2.2, §9.2).

Each partition's fused graph becomes a list of steps: kernels (each a compiled one-node
program), sends and recvs.  Per call, every step has a count of unfinished inputs (data
and control); a step whose count reaches zero goes on its device's ready queue, and the
device's worker thread runs it.  A device's worker thread is started once per process and
runs its kernels with the device's thread budget (numba's thread count is per calling
thread).  A recv never takes a thread: once its control inputs are done it registers
with the rendezvous, and the send that delivers its tensor completes it and readies its
consumers on their device.  The local rendezvous passes references: the devices of one
process share memory.

An error in any step aborts the whole call: every device stops taking work from it,
and the call raises ``ExecutionError`` naming the node, its device and the user's line.
With ``profile=True`` each call records a span per step and a flow per send -> recv,
which ``chrome_trace`` writes as Chrome-trace JSON (Perfetto, chrome://tracing).
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph, Node
from flowjit.errors import FlowjitError, NumericsError
from flowjit.devices import Device, DeviceError, DeviceSet


class ExecutionError(FlowjitError):
    """A step failed on some device; the call was aborted on every device."""


@dataclass
class Step:
    index: int
    kind: str                            # "kernel" | "send" | "recv"
    node: Node
    device: int                          # index into the executable's devices
    inputs: list[int]                    # value slots read
    outputs: list[int]                   # value slots written
    run: object = None                   # kernel: callable(*arrays) -> list of arrays
    key: str = ""                        # send/recv: the rendezvous key
    successors: list[int] = field(default_factory=list)
    pending: int = 0                     # unfinished inputs at the start of a call


class _Worker:
    """One device's thread and ready queue."""

    def __init__(self, device: Device):
        self.device = device
        self.queue: collections.deque = collections.deque()
        self.ready = threading.Condition(threading.Lock())
        self.thread = threading.Thread(target=self.loop, name=f"flowjit {device.short}", daemon=True)
        self.thread.start()

    def submit(self, call, step: Step) -> None:
        with self.ready:
            self.queue.append((call, step))
            self.ready.notify()

    def loop(self) -> None:
        import numba
        numba.set_num_threads(max(1, min(self.device.threads, numba.config.NUMBA_NUM_THREADS)))
        while True:
            with self.ready:
                while not self.queue:
                    self.ready.wait()
                call, step = self.queue.popleft()
            call.run(step, self)


_WORKERS: dict[tuple[str, int], _Worker] = {}
_WORKERS_LOCK = threading.Lock()


def worker_for(device: Device) -> _Worker:
    """The process's worker thread for a device (shared by every executable placed on it)."""
    key = (device.name, device.threads)
    with _WORKERS_LOCK:
        worker = _WORKERS.get(key)
        if worker is None:
            worker = _WORKERS[key] = _Worker(device)
        return worker


class _Call:
    """The state of one call: values, counts, the rendezvous, the result or the error."""

    def __init__(self, executable: "MultiDeviceExecutable", profile: bool):
        self.executable = executable
        self.values: list = [None] * executable.slot_count
        self.pending = [step.pending for step in executable.steps]
        self.remaining = len(executable.steps)
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.error: tuple[Step, BaseException] | None = None
        self.mailbox: dict[str, object] = {}                 # key -> tensor sent, not yet taken
        self.waiting: dict[str, Step] = {}                   # key -> recv started, tensor not there
        self.profile = profile
        self.spans: list[tuple] = []                         # (device, step, start, end)
        self.started = 0.0

    # -- running steps -------------------------------------------------------------
    def run(self, step: Step, worker: _Worker | None) -> None:
        if self.error is not None:
            return
        start = time.perf_counter() if self.profile else 0.0
        try:
            values = self.values
            if step.kind == "kernel":
                results = step.run(*[values[slot] for slot in step.inputs])
                for slot, result in zip(step.outputs, results):
                    values[slot] = result
            else:                                            # send
                self.deliver(step.key, values[step.inputs[0]])
        except BaseException as error:                       # noqa: B036  (re-raised in the caller)
            self.fail(step, error)
            return
        if self.profile:
            self.spans.append((step.device, step, start, time.perf_counter()))
        self.finish(step)

    def finish(self, step: Step) -> None:
        steps = self.executable.steps
        ready = []
        with self.lock:
            for index in step.successors:
                self.pending[index] -= 1
                if self.pending[index] == 0:
                    ready.append(steps[index])
            self.remaining -= 1
            if self.remaining == 0:
                self.done.set()
        for successor in ready:
            self.start(successor)

    def start(self, step: Step) -> None:
        """A step whose inputs are all done: a recv waits on the rendezvous, others queue."""
        if step.kind == "recv":
            with self.lock:
                tensor = self.mailbox.pop(step.key, _EMPTY)
                if tensor is _EMPTY:
                    self.waiting[step.key] = step
                    return
            self.received(step, tensor)
        else:
            self.executable.workers[step.device].submit(self, step)

    def deliver(self, key: str, tensor) -> None:
        with self.lock:
            recv = self.waiting.pop(key, None)
            if recv is None:
                self.mailbox[key] = tensor
                return
        self.received(recv, tensor)

    def received(self, step: Step, tensor) -> None:
        self.values[step.outputs[0]] = tensor
        if self.profile:
            now = time.perf_counter()
            self.spans.append((step.device, step, now, now))
        self.finish(step)

    def fail(self, step: Step, error: BaseException) -> None:
        with self.lock:
            if self.error is None:
                self.error = (step, error)
        self.done.set()


_EMPTY = object()


class MultiDeviceExecutable:
    """A partitioned, fused program: call it with the program's input arrays."""

    def __init__(self, partitions: list[Graph], inputs: list[list[int]], outputs: list[tuple[int, int]],
                 devices: DeviceSet, compile_node: Callable[[Node], Callable]):
        """``compile_node`` turns one node of a partition into a callable taking its input
        arrays and returning its outputs (with a ``kernel_sources`` mapping): the compiler
        hands compiled code to the runtime, which never generates any itself."""
        self.devices = [devices[graph.attrs["device"]] for graph in partitions]
        for device in self.devices:
            if not device.executable:
                raise DeviceError(f"device {device.short} ({device.name}) is described for planning but "
                                  f"cannot run here; place the program on devices that can "
                                  f"(see `flowjit devices`)")
        self.partitions = partitions
        self.steps: list[Step] = []
        self.input_slots: list[tuple[int, int]] = []       # (slot, program input index)
        slot_of: dict = {}
        for part, graph in enumerate(partitions):
            for value, program_index in zip(graph.inputs, inputs[part]):
                slot_of[value] = len(slot_of)
                self.input_slots.append((slot_of[value], program_index))
            for node in graph.nodes:
                for value in node.outputs:
                    slot_of[value] = len(slot_of)
        self.slot_count = len(slot_of)
        step_of: dict[Node, Step] = {}
        self.kernels: dict = {}
        for part, graph in enumerate(partitions):
            for node in graph.nodes:
                kind = "send" if node.op is ops.send else "recv" if node.op is ops.recv else "kernel"
                step = Step(len(self.steps), kind, node, part, [slot_of[v] for v in node.inputs],
                            [slot_of[v] for v in node.outputs], key=node.attrs.get("key", ""))
                if kind == "kernel":
                    if node.op is ops.constant:
                        constant = node.attrs["value"]
                        step.run = lambda constant=constant: [constant]
                    else:
                        executable = compile_node(node)
                        self.kernels[(part, node.name)] = executable
                        step.run = executable
                self.steps.append(step)
                step_of[node] = step
        for step in self.steps:
            before = step.node.dependencies()
            step.pending = len(before)
            for producer in before:
                step_of[producer].successors.append(step.index)
        self.output_slots = [(-1, index) if part < 0 else (slot_of[partitions[part].outputs[index]], -1)
                             for part, index in outputs]
        self.roots = [step for step in self.steps if step.pending == 0]
        self._workers: list[_Worker] | None = None
        self.last_call: _Call | None = None

    @property
    def workers(self) -> list[_Worker]:
        if self._workers is None:
            self._workers = [worker_for(device) for device in self.devices]
        return self._workers

    @property
    def kernel_sources(self) -> dict[str, str]:
        sources = {}
        for executable in self.kernels.values():
            sources.update(executable.kernel_sources)
        return sources

    def __call__(self, *arrays, profile: bool = False):
        call = _Call(self, profile)
        for slot, index in self.input_slots:
            call.values[slot] = arrays[index]
        if not self.steps:
            call.done.set()
        self.workers                                          # started before the first submit
        call.started = time.perf_counter()
        for step in self.roots:
            call.start(step)
        call.done.wait()
        self.last_call = call
        if call.error is not None:
            step, error = call.error
            if isinstance(error, NumericsError):             # it names the op, kernel and line itself
                raise error
            node, device = step.node, self.devices[step.device]
            where = f" (traced at {node.loc})" if node.loc else ""
            raise ExecutionError(f"node %{node.name} ({node.op.name}) on {device.short} failed{where}: "
                                 f"{type(error).__name__}: {error}; the step was aborted on every device") \
                from error
        return [arrays[index] if slot < 0 else call.values[slot] for slot, index in self.output_slots]


def chrome_trace(executable: MultiDeviceExecutable, call: _Call) -> dict:
    """The call as Chrome-trace JSON: a track per device, a span per step, a flow arrow per
    send -> recv."""
    origin = call.started
    events = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "flowjit"}}]
    for index, device in enumerate(executable.devices):
        events.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": index,
                       "args": {"name": f"{device.short} ({device.name})"}})
    transfers: dict[str, dict[str, tuple]] = {}          # key -> {"send"/"recv": (device, start)}
    for device, step, start, end in call.spans:
        args = {"op": step.node.op.name, "device": executable.devices[device].name}
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


def record_costs(executable: MultiDeviceExecutable, call: _Call, costs) -> None:
    """Measured kernel times into the cost model, split over the ops a kernel fused by
    their estimated shares, so that the next placement (of unfused nodes) can use them."""
    for device_index, step, start, end in call.spans:
        if step.kind != "kernel" or step.node.op is ops.constant:
            continue
        device = executable.devices[device_index]
        node = step.node
        inner = list(node.attrs["body"].nodes) if node.op is ops.fused else [node]
        inner = [n for n in inner if n.op is not ops.constant]
        estimates = [costs.node(n, device) for n in inner]
        total = sum(estimates) or 1.0
        for n, estimate in zip(inner, estimates):
            costs.record(n, device, (end - start) * estimate / total)


