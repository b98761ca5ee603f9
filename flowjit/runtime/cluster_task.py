"""One task of a cluster: the Ray actor that owns a task's devices (whitepaper §3.3).

The driver registers a program's partitions for this task once (as IR text, with the
compiler that turns a node into a callable: the task compiles its kernels itself, from
its own kernel cache); each step then brings only a step id and the feeds this task's
partitions read, and gets back the outputs they produce.  Those messages, and the tensors
a send here passes to a recv on another task, travel over links (``cluster_links``: direct
connections, which this task accepts on its listener), not as actor calls: a step's ``run``
starts the partitions on the multi-device executor and returns at once; when the call is
done its result goes back over the link the run came on.  A tensor for a step that has
not begun here is kept until it does.  A recv waits without holding a thread.

Threads of the driver may run steps of one program at once, so runs, tensors and aborts of
its steps may come here in any order (step 8's run before step 7's, and step 7's tensors
before either).  What is dropped, then, is decided by each run's *horizon*, the lowest step
of the program the driver still had in flight when it sent it: a step below the highest
horizon seen is over in the driver, and its run, if it was sent, came here first (on the
same link), so what still comes for it, or is kept for it, is dropped; a tensor or an abort
for a step at or above the horizon that has not begun here is kept until it does.

The variables that live on this task (``cluster.TaskHome``) are buffers of this process:
the partitions' reads and assigns use them as a local program uses its own, and the driver
reads and writes them with ``get_variables`` and ``put_variables`` (for ``v.numpy()``,
assigns and checkpoints).  The driver holds the variables' locks over each step and each of
those calls, so they never overlap here.

Every wait has a deadline: a step fails here when its timeout passes (the watchdog), or when
the link of the driver that ran it closes; ``abort`` (an actor call) fails a step from
outside (the driver does, when another task died, hung or raised), so that no task stays
blocked on a recv whose sender is gone.
"""

from __future__ import annotations

import os
import socket
import threading
import time

import numpy as np

from flowjit.devices import Device, DeviceSet
from flowjit.gpu import is_device_array, simulated, to_host
from flowjit.runtime import cluster_shared
from flowjit.runtime.cluster_links import (CONNECT_TIMEOUT_S, POLL_S, Link, LinkClosed, LinkTable, Listener,
                                           connect, portable_error)
from flowjit.runtime.executor import ExecutionError, MultiDeviceExecutable, StepTimeoutError
from flowjit.runtime.variables import VariableBuffer


def on_host(value):
    """What leaves this process: a GPU's array copied back to a numpy array, anything else itself."""
    return to_host(value) if is_device_array(value) else value


class StepAborted(ExecutionError):
    """The driver aborted the step on this task (another task failed)."""


class Task:
    """A task's process: its devices, its registered programs and their running steps."""

    def __init__(self, name: str, device_names: list[str], threads: list[int], key: bytes):
        import ray
        self.name = name
        self.devices = DeviceSet(tuple(Device.make(device, threads=count)
                                       for device, count in zip(device_names, threads)))
        self.addresses: dict[str, tuple] = {}              # task -> its listener's address
        self.links = LinkTable(key, name)                   # the links this task sends to other tasks on
        self.deadlines: dict[tuple[str, int], float] = {}   # (program, step) -> when it fails here
        self.programs: dict[str, MultiDeviceExecutable] = {}
        self.lock = threading.Lock()
        self.calls: dict[tuple[str, int], object] = {}      # (program, step) -> the running call
        self.early: dict[tuple[str, int], dict] = {}        # (program, step) -> tensors come before it
        self.aborted: dict[tuple[str, int], str] = {}       # (program, step) -> why, aborted before it began
        self.horizon: dict[str, int] = {}                   # program -> the highest horizon of its runs
        self.begun: dict[str, set[int]] = {}                # program -> its steps begun here, from the horizon
        self.variables: dict[str, VariableBuffer] = {}      # the variables that live here
        self.staged: dict[str, dict] = {}                   # token -> values to store (put_variables)
        self.counts = {"registered": 0, "steps": 0}
        self.listener = Listener(key, ray.util.get_node_ip_address(), self.accepted, name)
        threading.Thread(target=self.watch, name="flowjit-step-watchdog", daemon=True).start()

    # -- control -----------------------------------------------------------------------
    def info(self) -> dict:
        import ray
        context = ray.get_runtime_context()
        runnable = [device for device in self.devices if device.type == "gpu" and device.executable]
        return {"pid": os.getpid(), "node": ray.util.get_node_ip_address(), "hostname": socket.gethostname(),
                "node_id": context.get_node_id(), "address": self.listener.endpoint,
                "gpus": len(runnable),               # (gpu:N runs where its process sees N + 1 GPUs)
                "simulated": bool(runnable) and simulated()}

    def ping(self) -> bool:
        return True

    def set_peers(self, addresses: dict) -> None:
        """Task name -> the listener address of every task (this one's included): the next
        send to a task whose address changed (it was restarted) connects to the new one."""
        self.addresses = dict(addresses)

    def register(self, program: str, texts: list[str], inputs: list[list[int]], outputs: list[tuple[int, int]],
                 compile_node, step_timeout_s: float | None, variables: list[str] = ()) -> list[str]:
        """Parse this task's partitions of ``program`` and build their executable, whose reads
        and assigns of ``variables`` use the buffers that live here; returns the names of the
        kernels compiled (their first call compiles, from this task's cache)."""
        from flowjit.compiler.ir.parser import parse
        partitions = [parse(text, f"<{self.name}>") for text in texts]
        with self.lock:
            missing = [name for name in variables if name not in self.variables]
            buffers = {name: self.variables[name] for name in variables if name in self.variables}
        if missing:
            raise ExecutionError(f"task {self.name} holds no variable {', '.join(missing)}, which {program} uses "
                                 f"(this process was started after it was moved here: restore it)")
        executable = MultiDeviceExecutable.on_queues(
            partitions, inputs, outputs, self.devices,
            lambda node, on_device: compile_node(node, buffers, self.devices[node.device].threads, on_device),
            step_timeout_s=step_timeout_s, transport=lambda step, key, tensor: self.send(program, step, key, tensor))
        with self.lock:
            self.programs[program] = executable
            self.counts["registered"] += 1
        return sorted(name for _, name in executable.kernels)

    def put_variables(self, values: dict, token: str | None = None) -> None:
        """Store each name -> array: into the buffer that lives here (which the registered
        programs use), or as a new one; with a ``token``, only keep them aside until
        ``commit_variables(token)`` (``discard_variables(token)`` drops them)."""
        with self.lock:
            if token is not None:
                self.staged[token] = {name: np.array(value, order="C") for name, value in values.items()}
                return
            self._store(values)

    def commit_variables(self, token: str) -> None:
        with self.lock:
            values = self.staged.pop(token, None)
            if values is None:
                raise ExecutionError(f"task {self.name} holds no variable values under {token} to store")
            self._store(values)

    def discard_variables(self, token: str) -> None:
        with self.lock:
            self.staged.pop(token, None)

    def _store(self, values: dict) -> None:
        for name, value in values.items():
            buffer = self.variables.get(name)
            if buffer is not None and buffer.value.shape == value.shape and buffer.value.dtype == value.dtype:
                buffer.value[...] = value
            else:
                self.variables[name] = VariableBuffer(name, np.array(value, order="C"))

    def get_variables(self, names: list[str]) -> dict:
        """name -> a copy of the value of each variable that lives here."""
        with self.lock:
            missing = [name for name in names if name not in self.variables]
            if missing:
                raise ExecutionError(f"task {self.name} holds no variable {', '.join(missing)}")
            return {name: self.variables[name].value.copy() for name in names}

    def forget(self, program: str) -> None:
        with self.lock:
            self.programs.pop(program, None)
            self.horizon.pop(program, None)
            self.begun.pop(program, None)
            for table in (self.early, self.aborted):
                for key in [key for key in table if key[0] == program]:
                    del table[key]

    def address_of(self, task: str) -> tuple:
        """Where ``task``'s listener takes links (``set_peers``)."""
        address = self.addresses.get(task)
        if address is None:
            raise ExecutionError(f"task {self.name} knows no address of task {task}")
        return address

    def probe(self, peer: str, sizes: list[int], rounds: int, timeout: float) -> list[float]:
        """Per size in ``sizes``: the median seconds of ``rounds`` round trips to task ``peer``,
        each carrying that many bytes there and a few back, over a link of their own, opened as
        steps open theirs and closed after (Cluster measures a link's latency and bandwidth by
        it when it starts)."""
        deadline = time.monotonic() + timeout
        link = connect(self.address_of(peer), self.links.key, self.name, peer, timeout)
        try:
            medians = []
            for size in sizes:
                payload, times = np.zeros(size, np.uint8), []
                for _ in range(rounds):
                    started = time.perf_counter()
                    link.send(("echo", payload), timeout=max(0.0, deadline - time.monotonic()))
                    link.receive(deadline)
                    times.append(time.perf_counter() - started)
                medians.append(float(np.median(times)))
            return medians
        finally:
            link.close()

    # -- links -----------------------------------------------------------------------
    def accepted(self, link: Link) -> None:
        """A link from the driver or another task: read its messages until it closes."""
        try:
            while True:
                message = link.receive()
                if message[0] == "run":
                    self.run(link, *message[1:])
                elif message[0] == "deliver":
                    self.deliver(*message[1:])
                elif message[0] == "echo":                 # (a peer measuring this link: probe)
                    link.send(("echoed",), timeout=CONNECT_TIMEOUT_S)
        except LinkClosed:
            pass
        except Exception:                                  # noqa: BLE001  (a message that does not unpickle)
            link.close()                                   # (its sender sees the link close)
        with self.lock:                # the driver that ran these is gone: nothing waits for them
            orphans = [call for key, call in self.calls.items() if getattr(call, "link", None) is link]
        for call in orphans:
            call.fail(None, StepAborted(f"the link of the driver that ran this step on task {self.name} closed"))

    def watch(self) -> None:
        """Fail each step whose deadline passed (the driver's deadline comes first: this one
        is for a driver that can no longer say so)."""
        while True:
            time.sleep(POLL_S)
            now = time.monotonic()
            with self.lock:
                late = [(key, self.calls.get(key)) for key, when in self.deadlines.items() if when < now]
            for key, call in late:
                if call is not None:
                    report = "; ".join(call.pending_report()) or "nothing"
                    call.fail(None, StepTimeoutError(f"step {key[1]} of {key[0]} did not finish on task {self.name} "
                                                     f"within its deadline; still pending: {report}"))

    # -- steps -------------------------------------------------------------------------
    def run(self, link: Link, program: str, step: int, horizon: int, input_count: int, timeout: float | None,
            feeds: dict, profile: bool = False) -> None:
        """Begin this task's part of step ``step`` on the program inputs ``feeds`` (index ->
        array), the driver being done with the steps of ``program`` below ``horizon``; its
        outputs (``profile``: ``{"outputs": ..., "spans": ...}``, with a span per step run here
        on this process's ``time.perf_counter`` clock (``clock``): device, node, op, kind,
        rendezvous key, the user's line, start, end) go back over ``link`` as ``("done",
        program, step, outputs)``, or its error as ``("failed", program, step, error)``."""
        key = (program, step)
        with self.lock:
            executable = self.programs.get(program)
            if executable is not None:
                call, reason = self._begin(link, executable, key, horizon, input_count, timeout, feeds, profile)
        if executable is None:
            self._reply(link, ("failed", program, step, portable_error(ExecutionError(
                f"task {self.name} has no program {program} registered (it was restarted since; the driver "
                f"registers again)"))))
        elif reason is not None:
            call.fail(None, StepAborted(reason))
        else:
            executable.launch(call)                          # (outside the lock: it may finish at once)

    def _begin(self, link: Link, executable, key: tuple[str, int], horizon: int, input_count: int,
               timeout: float | None, feeds: dict, profile: bool):
        """Under the lock: the step's call, registered and not launched, and why it is aborted
        (None: it is not).  Only what is kept for steps below the horizon is forgotten: a
        step above it may still begin (its run may come after this one's)."""
        program, step = key
        reason = None
        if step < self.horizon.get(program, -1):         # (a run on a link that closed, read late)
            reason = f"step {step} of {program} began on task {self.name} after the driver was done with it"
        if horizon > self.horizon.get(program, -1):
            self.horizon[program] = horizon
            for stale in [stale for stale in self.early if stale[0] == program and stale[1] < horizon]:
                del self.early[stale]                    # (tensors for steps over in the driver)
            for stale in [stale for stale in self.aborted if stale[0] == program and stale[1] < horizon]:
                del self.aborted[stale]
            self.begun[program] = {done for done in self.begun.get(program, ()) if done >= horizon}
        self.begun.setdefault(program, set()).add(step)
        reason = self.aborted.pop(key, None) or reason
        mailbox = self.early.pop(key, {})
        arrays = [feeds.get(index) for index in range(input_count)]
        call = executable.begin(arrays, mailbox=mailbox, tag=step, profile=profile, launch=False,
                                on_done=lambda call: self.finished(link, program, step, call))
        call.link = link                                 # (what ``accepted`` fails when it closes)
        self.calls[key] = call
        if timeout is not None:
            self.deadlines[key] = time.monotonic() + timeout
        self.counts["steps"] += 1
        return call, reason

    def finished(self, link: Link, program: str, step: int, call) -> None:
        """A step's call is done: forget it, then send its outputs or its error to the driver.
        (It runs on the device thread that finished the call: it never raises into it.)"""
        with self.lock:
            self.calls.pop((program, step), None)
            self.deadlines.pop((program, step), None)
        try:
            outputs = [on_host(output) for output in call.wait(0)]
            if call.profile:
                devices = call.executable.devices
                outputs = {"outputs": outputs,
                           "spans": [(devices[device].name, item.node.name, item.node.op.name, item.kind, item.key,
                                      str(item.node.loc) if item.node.loc else "", start, end)
                                     for device, item, start, end in call.spans]}
            reply = ("done", program, step, outputs)
        except BaseException as error:                       # noqa: B036  (sent to the driver)
            reply = ("failed", program, step, portable_error(error))
        self._reply(link, reply)

    def _reply(self, link: Link, message) -> None:
        """Send a step's result to the driver (nothing when the driver is gone)."""
        try:
            link.send(message)
        except LinkClosed:
            pass
        except Exception as error:                           # noqa: BLE001  (outputs that do not pickle)
            failure = ExecutionError(f"task {self.name} could not send the result of step {message[2]} of "
                                     f"{message[1]}: {type(error).__name__}: {error}")
            try:
                link.send(("failed", message[1], message[2], portable_error(failure)))
            except Exception:                                # noqa: BLE001
                link.close()                                 # (the driver sees the task as lost)

    def clock(self) -> float:
        """This process's ``time.perf_counter()``: the driver aligns profiles' clocks with it."""
        return time.perf_counter()

    def send(self, program: str, step: int, key: str, tensor) -> None:
        """The transport: a tensor for a recv on another task, over the link to it.  A task
        that is gone gets nothing (the driver fails the step when it sees it gone)."""
        task = key.split(";", 2)[1].rsplit("/device:", 1)[0]
        address = self.address_of(task)
        remaining = self.remaining(program, step)
        try:
            link = self.links.link(task, address, CONNECT_TIMEOUT_S if remaining is None
                                   else min(CONNECT_TIMEOUT_S, remaining))
            link.send(("deliver", program, step, key, on_host(tensor)), timeout=remaining)
        except LinkClosed as error:
            if error.timed_out:                              # a task that is there and does not read
                raise ExecutionError(f"sending '{key}' to task {task} did not finish by the step's deadline: "
                                     f"{error}") from None

    def remaining(self, program: str, step: int) -> float | None:
        deadline = self.deadlines.get((program, step))
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    def _over(self, program: str, step: int) -> bool:
        """Under the lock, for a step not running here: whether it is over (it ended here, or
        the driver is done with it), so that nothing need be kept for it."""
        return step < self.horizon.get(program, -1) or step in self.begun.get(program, ())

    def deliver(self, program: str, step: int, key: str, tensor) -> None:
        """A tensor another task sent for ``step``: to the step's call, or kept until it begins
        (its run may come after a later step's)."""
        with self.lock:
            call = self.calls.get((program, step))
            if call is None:
                if not self._over(program, step):
                    self.early.setdefault((program, step), {})[key] = tensor
                return                                       # for a step over or aborted: dropped
        call.deliver(key, tensor)

    def abort(self, program: str, step: int, reason: str) -> None:
        """Fail ``step`` here (now, or when it begins)."""
        with self.lock:
            call = self.calls.get((program, step))
            if call is None:
                if not self._over(program, step):
                    self.aborted[(program, step)] = reason
                self.early.pop((program, step), None)
                return
        call.fail(None, StepAborted(reason))

    def pending(self, program: str, step: int) -> list[str]:
        """What ``step`` still waits for here (empty when it is not running)."""
        with self.lock:
            call = self.calls.get((program, step))
        return call.pending_report() if call is not None else []

    def stats(self) -> dict:
        """How often programs were registered here and steps run, what is held now, and how
        many arrays came here as shared memory (``shared_received``)."""
        with self.lock:
            return {**self.counts, "programs": len(self.programs), "running": len(self.calls),
                    "early": len(self.early), "aborted": len(self.aborted),
                    "begun": sum(len(steps) for steps in self.begun.values()),
                    "shared_received": cluster_shared.received()}

    def set_shared_min(self, nbytes: int) -> int:
        """Send arrays of ``nbytes`` or more as shared memory to tasks on this node (and to a
        driver there); returns the size before.  (Tests lower it to share tiny arrays.)"""
        previous, cluster_shared.SHARED_MIN = cluster_shared.SHARED_MIN, nbytes
        return previous

    def running(self) -> list[tuple[str, int]]:
        """The steps running here: (program, step) each."""
        with self.lock:
            return sorted(self.calls)
