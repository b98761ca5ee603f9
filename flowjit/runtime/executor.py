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
Every call has a deadline (``step_timeout_s``; the first call, which compiles the kernels,
gets ``FIRST_CALL_ALLOWANCE`` more): a call that has not finished by then (a
recv whose send never comes, a kernel that hangs) fails with ``StepTimeoutError``
naming each recv still waiting (its key, both devices, the node) and each kernel still
queued or running.  Each rendezvous key has exactly one send and one recv; the
constructor refuses partitions that break this, since a second recv of a key would
wait forever.

Sends whose destination is a device of another process (a task of a cluster) go to a
``transport`` callable; tensors from other processes arrive through ``_Call.deliver``.
``begin`` starts a call and returns it, so that such a process can deliver into it and
wait on it with its own deadline.
With ``profile=True`` each call records a span per step and a flow per send -> recv,
which ``chrome_trace`` writes as Chrome-trace JSON (Perfetto, chrome://tracing).

A GPU device that runs kernels has a queue (``device_queues``: a CUDA stream): its worker
issues the device's kernels on it without waiting for them, values between them stay in
its memory, and a send that crosses devices is a copy issued at the send (to the host: a
``Pending`` whose event the host side waits on when it first needs the array).  A call
synchronises its queues before it returns; its GPU spans are timed by events on them.
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
from flowjit.gpu import is_device_array, to_host
from flowjit.runtime.device_queues import settled


class ExecutionError(FlowjitError):
    """A step failed on some device; the call was aborted on every device."""


class StepTimeoutError(ExecutionError, TimeoutError):
    """A call did not finish within its deadline; it was aborted on every device."""


DEFAULT_STEP_TIMEOUT = 300.0        # seconds; CompileOptions.step_timeout_s
FIRST_CALL_ALLOWANCE = 600.0        # seconds added to the first call's deadline: its kernels compile then


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
    remote: bool = False                 # send: the destination is a device of another process
    carry: tuple | None = None           # send: (source queue, destination queue) where one is a GPU's
    successors: list[int] = field(default_factory=list)
    pending: int = 0                     # unfinished inputs at the start of a call


class _Worker:
    """One device's thread and ready queue (and, for a GPU, the stream it issues on)."""

    def __init__(self, device: Device, stream=None):
        self.device, self.stream = device, stream
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
        if self.stream is not None:
            self.stream.enter()
        while True:
            with self.ready:
                while not self.queue:
                    self.ready.wait()
                call, step = self.queue.popleft()
            call.run(step, self)


_WORKERS: dict[tuple, _Worker] = {}
_WORKERS_LOCK = threading.Lock()


def worker_for(device: Device, stream=None) -> _Worker:
    """The process's worker thread for a device (shared by every executable placed on it)."""
    key = (device.name, device.threads, stream)
    with _WORKERS_LOCK:
        worker = _WORKERS.get(key)
        if worker is None:
            worker = _WORKERS[key] = _Worker(device, stream)
        return worker


class _Call:
    """The state of one call: values, counts, the rendezvous, the result or the error."""

    def __init__(self, executable: "MultiDeviceExecutable", profile: bool, on_done=None):
        self.executable = executable
        self.on_done = on_done                               # called once, with the call, when it is done
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
        self.device_spans: list[tuple] = []                  # (device, step, queue, start event, end event)
        self.keep: list = []                                 # what a GPU copy reads until the queues are synchronised
        self.on_device = False                               # some input is a GPU array: GPU results stay there
        self.started = 0.0
        self.active: set[int] = set()                        # kernels and sends queued or running
        self.arrays: tuple = ()                              # the program's inputs
        self.tag = None                                      # what the caller named the call (a step id)

    # -- running steps -------------------------------------------------------------
    def run(self, step: Step, worker: _Worker | None) -> None:
        if self.error is not None:
            return
        executable = self.executable
        queue = executable.queues[step.device]
        start = time.perf_counter() if self.profile else 0.0
        try:
            values = self.values
            if step.kind == "kernel":
                arrays = [values[slot] for slot in step.inputs]
                if queue is not None:                        # issued on the GPU's stream, not waited for
                    begun = queue.mark() if self.profile else None
                    results = step.run(*arrays)
                    if self.profile:
                        self.device_spans.append((step.device, step, queue, begun, queue.mark()))
                else:
                    results = step.run(*(map(settled, arrays) if executable.copies else arrays))
                for slot, result in zip(step.outputs, results):
                    values[slot] = result
            elif step.remote:                                # a send to another process
                executable.transport(self.tag, step.key, settled(values[step.inputs[0]]))
            elif step.carry is not None:                     # a send between a GPU and another device
                self.deliver(step.key, self.copy(step, values[step.inputs[0]]))
            else:                                            # send
                self.deliver(step.key, values[step.inputs[0]])
        except BaseException as error:                       # noqa: B036  (re-raised in the caller)
            self.fail(step, error)
            return
        if self.profile and (queue is None or step.kind != "kernel") and step.carry is None:
            self.spans.append((step.device, step, start, time.perf_counter()))
        self.finish(step)

    def copy(self, step: Step, value):
        """What a send across devices delivers: issued on the GPU's stream that does the copy
        (to the host: the source's, a ``Pending``; to a GPU: the destination's), timed by
        events on it when profiling."""
        source, destination = step.carry
        copier = source if destination is None else destination
        begun = copier.mark() if self.profile else None
        if destination is None:
            value = source.to_host(value)
        elif source is None:
            value = destination.to_device(settled(value))
        else:
            value = destination.from_peer(value, source, self.keep)
        if self.profile:
            self.device_spans.append((step.device, step, copier, begun, copier.mark()))
        return value

    def finish(self, step: Step) -> None:
        steps = self.executable.steps
        ready = []
        with self.lock:
            self.active.discard(step.index)
            for index in step.successors:
                self.pending[index] -= 1
                if self.pending[index] == 0:
                    ready.append(steps[index])
            self.remaining -= 1
            over = self.remaining == 0
        if over:
            self.complete()
        for successor in ready:
            self.start(successor)

    def complete(self) -> None:
        """The call is done (finished or failed): wake ``wait`` and run ``on_done`` (once)."""
        self.done.set()
        with self.lock:
            callback, self.on_done = self.on_done, None
        if callback is not None:
            callback(self)

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
            with self.lock:
                self.active.add(step.index)
            self.executable.workers[step.device].submit(self, step)

    def deliver(self, key: str, tensor) -> None:
        """The tensor sent under ``key`` (by a send here, or by another process)."""
        with self.lock:
            recv = self.waiting.pop(key, None)
            if recv is None:
                if key in self.mailbox:
                    raise ExecutionError(f"rendezvous key '{key}' was sent twice in one call")
                self.mailbox[key] = tensor
                return
        self.received(recv, tensor)

    def received(self, step: Step, tensor) -> None:
        self.values[step.outputs[0]] = tensor
        if self.profile:
            now = time.perf_counter()
            self.spans.append((step.device, step, now, now))
        self.finish(step)

    def fail(self, step: Step | None, error: BaseException) -> None:
        """Abort the call (the first error wins); ``step`` None: aborted from outside."""
        with self.lock:
            if self.error is None:
                self.error = (step, error)
        self.complete()

    def pending_report(self) -> list[str]:
        """What the call is still waiting for: each recv (key, devices, node) and each kernel
        or send queued or running, one line each."""
        devices = self.executable.devices
        with self.lock:
            recvs = list(self.waiting.values())
            active = [self.executable.steps[index] for index in sorted(self.active)]
        lines = []
        for step in recvs:
            source, destination, _ = (step.key.split(";") + ["", ""])[:3]
            lines.append(f"recv %{step.node.name} on {devices[step.device].name} is waiting for key "
                         f"'{step.key}' (from {source} to {destination})")
        for step in active:
            where = f" (traced at {step.node.loc})" if step.node.loc else ""
            lines.append(f"{step.kind} %{step.node.name} ({step.node.op.name}) on {devices[step.device].name} "
                         f"is queued or running{where}")
        return lines

    def wait(self, timeout: float | None) -> list:
        """The call's outputs, once every step is done; raises ``ExecutionError`` for a failed
        step and ``StepTimeoutError`` when ``timeout`` seconds pass first."""
        if not self.done.wait(timeout):
            report = self.pending_report()
            self.fail(None, StepTimeoutError(
                f"the step did not finish within its deadline of {timeout:g} s and was aborted on every "
                f"device; still pending: " + ("; ".join(report) or "nothing (it finished as it timed out)")))
        elif self.executable.streams:                        # (a hung call's streams are not waited on)
            self.drain()
        self.executable.last_call = self
        if self.error is not None:
            step, error = self.error
            if step is None or isinstance(error, NumericsError):   # these name what failed themselves
                raise error
            node, device = step.node, self.executable.devices[step.device]
            where = f" (traced at {node.loc})" if node.loc else ""
            raise ExecutionError(f"node %{node.name} ({node.op.name}) on {device.short} failed{where}: "
                                 f"{type(error).__name__}: {error}; the step was aborted on every device") \
                from error
        values = self.values
        outputs = [self.arrays[index] if slot < 0 else values[slot] for slot, index in self.executable.output_slots]
        if self.executable.copies:
            outputs = [settled(value) if queue is None or self.on_device else settled(queue.to_host(value))
                       for value, queue in zip(outputs, self.executable.output_queues)]
        if self.on_device and not all(map(is_device_array, outputs)):
            # (device arguments: every result a device array, as a program on one GPU gives --
            # the host's, and numpy arguments passed through, go to the first device argument's GPU)
            arguments = [array for array in self.arrays if is_device_array(array)]
            queues = list(self.executable.streams.values())
            home = next((queue for queue in queues if any(map(queue.holds, arguments))), queues[0])
            outputs = [value if is_device_array(value) else home.to_device(value) for value in outputs]
            home.synchronize()
        return outputs

    def drain(self) -> None:
        """Wait for the work issued on the GPUs' streams (a kernel's fault surfaces here, as the
        call's error), then put the GPU spans on this process's clock: each event's time is
        the moment a marker recorded on the idle stream completed, less the time between them."""
        executable = self.executable
        for index, queue in executable.streams.items():
            try:
                queue.synchronize()
            except Exception as error:                       # noqa: BLE001  (the call's error)
                device = executable.devices[index]
                failure = ExecutionError(f"work issued on {device.short} ({device.name}) failed: "
                                         f"{type(error).__name__}: {error}")
                failure.__cause__ = error
                self.fail(None, failure)
                return
        self.keep.clear()
        if self.device_spans:
            marks = {}
            for queue in executable.streams.values():
                marker = queue.mark()
                marker.synchronize()
                marks[id(queue)] = (marker, time.perf_counter())
            for device, step, queue, begun, ended in self.device_spans:
                marker, now = marks[id(queue)]
                self.spans.append((device, step, now - queue.elapsed(begun, marker), now - queue.elapsed(ended, marker)))
            self.device_spans = []


_EMPTY = object()


def _key_devices(key: str) -> tuple[str, str]:
    """(source, destination) device names of a rendezvous key ``source;destination;tensor``."""
    source, destination, _ = key.split(";", 2)
    return source, destination


def check_rendezvous(steps: list[Step], devices: list[Device], remote_allowed: bool) -> None:
    """Each key has one send and one recv; a key with an end in another process needs a
    transport.  A second recv of a key would wait forever, so it is refused here."""
    sends: dict[str, Step] = {}
    recvs: dict[str, Step] = {}
    for step in steps:
        if step.kind == "kernel":
            continue
        seen = sends if step.kind == "send" else recvs
        if step.key in seen:
            other = seen[step.key]
            raise ExecutionError(f"rendezvous key '{step.key}' has two {step.kind}s: %{other.node.name} on "
                                 f"{devices[other.device].name} and %{step.node.name} on "
                                 f"{devices[step.device].name}; each key is sent once and received once")
        seen[step.key] = step
    here = {device.name for device in devices}
    for key, step in list(sends.items()) + list(recvs.items()):
        source, destination = _key_devices(key)
        other_end = destination if step.kind == "send" else source
        if other_end in here and key not in (recvs if step.kind == "send" else sends):
            missing = "recv" if step.kind == "send" else "send"
            raise ExecutionError(f"{step.kind} %{step.node.name} on {devices[step.device].name} has no {missing} "
                                 f"for rendezvous key '{key}' on {other_end}: it would wait forever")
        if other_end not in here and not remote_allowed:
            raise ExecutionError(f"{step.kind} %{step.node.name} on {devices[step.device].name} pairs with "
                                 f"{other_end}, which is not a device of this program (key '{key}'), and no "
                                 f"transport to other processes was given")


def check_runnable(device: Device, graph: Graph) -> None:
    """A ``DeviceError`` where ``graph`` is placed on a device that is described for planning but
    cannot run here (``gpu:0`` without a GPU), naming the device, the first op placed on it and
    where the user wrote that op."""
    if device.executable:
        return
    placed = [node for node in graph.nodes if node.op not in (ops.constant, ops.send, ops.recv)]
    first = next((node for node in placed if node.loc is not None), placed[0] if placed else None)
    what = ""
    if first is not None:
        inner = first.attrs["body"].nodes if first.op is ops.fused else [first]
        op = next((node.op.name for node in inner if node.op is not ops.constant), first.op.name)
        what = f" ({len(placed)} node{'s' if len(placed) != 1 else ''} of @{graph.name} placed on it, the first %{first.name}: {op})"
    why = ""
    if device.type == "gpu":
        from flowjit.gpu import device_count
        count = device_count()
        if not count:
            from flowjit.gpu import INSTALL_HINT, installed
            why = (" -- no GPU here (CuPy sees none) and NUMBA_ENABLE_CUDASIM is not set to simulate one"
                   if installed() else f" -- numba-cuda is not installed: {INSTALL_HINT}")
        elif (device.spec.index or 0) >= count:
            why = f" -- CuPy sees {count} GPU{'s' if count != 1 else ''} here, gpu:0 to gpu:{count - 1}"
    message = (f"device {device.short} ({device.name}) is described for planning but cannot run here{why}{what}; "
               f"place the program on devices that can (see `flowjit devices`)")
    raise DeviceError(f"{first.loc}: {message}" if first is not None and first.loc is not None else message)


class MultiDeviceExecutable:
    """A partitioned, fused program: call it with the program's input arrays."""

    def __init__(self, partitions: list[Graph], inputs: list[list[int]], outputs: list[tuple[int, int]],
                 devices: DeviceSet, compile_node: Callable[[Node], Callable], *,
                 step_timeout_s: float | None = DEFAULT_STEP_TIMEOUT,
                 transport: Callable[[object, str, object], None] | None = None, queues: dict | None = None):
        """``compile_node`` turns one node of a partition into a callable taking its input
        arrays and returning its outputs (with a ``kernel_sources`` mapping): the compiler
        hands compiled code to the runtime, which never generates any itself.
        ``step_timeout_s``: each call's deadline in seconds (None: none).  ``transport(tag,
        key, tensor)`` carries sends to devices of other processes (``tag``: the call's); without one, every send must
        have its recv here.  ``queues``: device name -> the queue (``device_queues``) of each
        GPU whose kernels run here; ``compile_node`` leaves their results on the GPU."""
        self.devices = [devices[graph.attrs["device"]] for graph in partitions]
        queues = queues or {}
        self.queues = [queues.get(device.name) for device in self.devices]
        self.streams = {index: queue for index, queue in enumerate(self.queues) if queue is not None}
        self.copies = bool(self.streams)                   # (values may be GPU arrays or Pending copies)
        for device, graph in zip(self.devices, partitions):
            check_runnable(device, graph)
        self.partitions = partitions
        self.steps: list[Step] = []
        self.input_slots: list[tuple[int, int]] = []       # (slot, program input index)
        self.host_slots: set[int] = set()                   # the input slots of partitions on the host
        slot_of: dict = {}
        for part, graph in enumerate(partitions):
            for value, program_index in zip(graph.inputs, inputs[part]):
                slot_of[value] = len(slot_of)
                self.input_slots.append((slot_of[value], program_index))
                if self.queues[part] is None:
                    self.host_slots.add(slot_of[value])
            for node in graph.nodes:
                for value in node.outputs:
                    slot_of[value] = len(slot_of)
        self.slot_count = len(slot_of)
        self.step_timeout_s = step_timeout_s
        self.transport = transport
        self.calls = 0
        here = {device.name for device in self.devices}
        step_of: dict[Node, Step] = {}
        self.kernels: dict = {}
        for part, graph in enumerate(partitions):
            for node in graph.nodes:
                kind = "send" if node.op is ops.send else "recv" if node.op is ops.recv else "kernel"
                step = Step(len(self.steps), kind, node, part, [slot_of[v] for v in node.inputs],
                            [slot_of[v] for v in node.outputs], key=node.attrs.get("key", ""))
                if kind == "send":
                    destination = _key_devices(step.key)[1]
                    step.remote = destination not in here
                    ends = (self.queues[part], queues.get(destination))
                    if not step.remote and ends != (None, None):
                        step.carry = ends
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
        check_rendezvous(self.steps, self.devices, transport is not None)
        self.output_slots = [(-1, index) if part < 0 else (slot_of[partitions[part].outputs[index]], -1)
                             for part, index in outputs]
        self.output_queues = [None if part < 0 else self.queues[part] for part, _ in outputs]
        self.roots = [step for step in self.steps if step.pending == 0]
        self._workers: list[_Worker] | None = None
        self.last_call: _Call | None = None

    @property
    def workers(self) -> list[_Worker]:
        if self._workers is None:
            self._workers = [worker_for(device, queue) for device, queue in zip(self.devices, self.queues)]
        return self._workers

    @property
    def resident(self) -> bool:
        """Whether it takes device arrays as they are (jit hands them over): with queues, a
        GPU's node takes them in place (or copies them across from another GPU), a host's gets
        them copied back."""
        return self.copies

    @property
    def kernel_sources(self) -> dict[str, str]:
        sources = {}
        for executable in self.kernels.values():
            sources.update(executable.kernel_sources)
        return sources

    @classmethod
    def on_queues(cls, partitions: list[Graph], inputs, outputs, devices: DeviceSet, compile_node, **options):
        """The executor of ``partitions`` with a queue for each GPU among their devices that
        runs kernels here (``device_queues.queues_for``); ``compile_node(node, on_device)`` is
        told whether the node's results stay on its GPU (its queue copies what leaves it)."""
        from flowjit.runtime.device_queues import queues_for
        queues = queues_for(devices[graph.attrs["device"]] for graph in partitions)
        return cls(partitions, inputs, outputs, devices, lambda node: compile_node(node, node.device in queues),
                   queues=queues, **options)

    def begin(self, arrays, *, profile: bool = False, mailbox: dict | None = None, tag=None, on_done=None,
              launch: bool = True) -> _Call:
        """Start a call on ``arrays`` (the program's inputs, by index) and return it; tensors
        already received from other processes for it come in ``mailbox`` (key -> tensor).
        ``tag`` (a step id) is what the transport is given with each remote send; ``on_done(call)``
        runs once when the call is done (on the thread that finished or failed it).  With
        ``launch=False`` nothing runs until ``launch(call)`` (tensors may be delivered before)."""
        call = _Call(self, profile, on_done)
        call.arrays, call.tag = arrays, tag
        if self.copies:
            call.on_device = any(is_device_array(array) for array in arrays)
            if call.on_device:           # (the caller's arrays may still be being written on its streams)
                for queue in self.streams.values():
                    queue.follow(arrays)
        on_host: dict = {}              # (a host partition's device inputs: copied back once each)
        for slot, index in self.input_slots:
            array = arrays[index]
            if call.on_device and slot in self.host_slots and is_device_array(array):
                if index not in on_host:
                    on_host[index] = to_host(array)
                array = on_host[index]
            call.values[slot] = array
        for key, tensor in (mailbox or {}).items():
            call.deliver(key, tensor)
        if launch:
            self.launch(call)
        return call

    def launch(self, call: _Call) -> None:
        self.workers                                          # started before the first submit
        call.started = time.perf_counter()
        if not self.steps:
            call.complete()
        for step in self.roots:
            call.start(step)

    def deadline(self) -> float | None:
        """Seconds the next call may take: ``step_timeout_s``, with more for the first call."""
        if self.step_timeout_s is None:
            return None
        return self.step_timeout_s + (FIRST_CALL_ALLOWANCE if self.calls == 0 else 0.0)

    def __call__(self, *arrays, profile: bool = False):
        timeout = self.deadline()
        self.calls += 1
        return self.begin(arrays, profile=profile).wait(timeout)
