"""One task of a cluster: the Ray actor that owns a task's devices (whitepaper §3.3).

The driver registers a program's partitions for this task once (as IR text, with the
compiler that turns a node into a callable: the task compiles its kernels itself, from
its own kernel cache); each step then brings only a step id and the feeds this task's
partitions read, and returns the outputs they produce.  Inside, the partitions run on
the multi-device executor with a transport: a send whose recv lives on another task
becomes an actor call ``deliver(program, step, key, tensor)`` on that task, which hands
the tensor to the step's call, or keeps it until the step starts here.  A recv waits
without holding a thread.

The variables that live on this task (``cluster.TaskHome``) are buffers of this process:
the partitions' reads and assigns use them as a local program uses its own, and the driver
reads and writes them with ``get_variables`` and ``put_variables`` (for ``v.numpy()``,
assigns and checkpoints).  The driver holds the variables' locks over each step and each of
those calls, so they never overlap here.

Every wait has a deadline: a step's call waits at most its timeout; ``abort`` fails a
step from outside (the driver does, when another task died, hung or raised), so that no
task stays blocked on a recv whose sender is gone.
"""

from __future__ import annotations

import os
import socket
import threading
import time

import numpy as np

from flowjit.devices import Device, DeviceSet
from flowjit.runtime.executor import ExecutionError, MultiDeviceExecutable
from flowjit.runtime.variables import VariableBuffer


class StepAborted(ExecutionError):
    """The driver aborted the step on this task (another task failed)."""


class Task:
    """A task's process: its devices, its registered programs and their running steps."""

    def __init__(self, name: str, device_names: list[str], threads: list[int]):
        self.name = name
        self.devices = DeviceSet(tuple(Device.make(device, threads=count)
                                       for device, count in zip(device_names, threads)))
        self.peers: dict = {}
        self.programs: dict[str, MultiDeviceExecutable] = {}
        self.lock = threading.Lock()
        self.calls: dict[tuple[str, int], object] = {}      # (program, step) -> the running call
        self.early: dict[tuple[str, int], dict] = {}        # (program, step) -> tensors come before it
        self.latest: dict[str, int] = {}                    # program -> the latest step begun or aborted
        self.aborted: dict[tuple[str, int], str] = {}
        self.variables: dict[str, VariableBuffer] = {}      # the variables that live here
        self.staged: dict[str, dict] = {}                   # token -> values to store (put_variables)
        self.counts = {"registered": 0, "steps": 0}

    # -- control -----------------------------------------------------------------------
    def info(self) -> dict:
        import ray
        context = ray.get_runtime_context()
        return {"pid": os.getpid(), "node": ray.util.get_node_ip_address(), "hostname": socket.gethostname(),
                "node_id": context.get_node_id()}

    def ping(self) -> bool:
        return True

    def set_peers(self, peers: dict) -> None:
        """Task name -> actor handle of every task (this one's included)."""
        self.peers = dict(peers)

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
        executable = MultiDeviceExecutable(partitions, inputs, outputs, self.devices,
                                           lambda node: compile_node(node, buffers),
                                           step_timeout_s=step_timeout_s,
                                           transport=lambda step, key, tensor: self.send(program, step, key, tensor))
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

    # -- steps -------------------------------------------------------------------------
    def run(self, program: str, step: int, input_count: int, timeout: float | None, indices: list[int],
            *values, profile: bool = False):
        """Run this task's part of step ``step`` on the program inputs ``indices`` (``values``:
        top-level arguments, so that Ray resolves those put in its object store); the outputs
        its partitions produce.  ``profile``: ``{"outputs": ..., "spans": ...}``, with a span
        per step run here on this process's ``time.perf_counter`` clock (``clock``): (device,
        node, op, kind, rendezvous key, the user's line, start, end)."""
        feeds = dict(zip(indices, values))
        with self.lock:
            executable = self.programs.get(program)
            if executable is None:
                raise ExecutionError(f"task {self.name} has no program {program} registered (it was restarted "
                                     f"since; the driver registers again)")
            self.latest[program] = max(step, self.latest.get(program, -1))
            for key in [key for key in self.early if key[0] == program and key[1] < step]:
                del self.early[key]                          # tensors for steps that were aborted
            reason = self.aborted.pop((program, step), None)
            mailbox = self.early.pop((program, step), {})
            arrays = [feeds.get(index) for index in range(input_count)]
            call = executable.begin(arrays, mailbox=mailbox, tag=step, profile=profile)
            self.calls[(program, step)] = call
            self.counts["steps"] += 1
        if reason is not None:
            call.fail(None, StepAborted(reason))
        try:
            outputs = call.wait(timeout)
        finally:
            with self.lock:
                self.calls.pop((program, step), None)
        if not profile:
            return outputs
        devices = executable.devices
        spans = [(devices[device].name, item.node.name, item.node.op.name, item.kind, item.key,
                  str(item.node.loc) if item.node.loc else "", start, end)
                 for device, item, start, end in call.spans]
        return {"outputs": outputs, "spans": spans}

    def clock(self) -> float:
        """This process's ``time.perf_counter()``: the driver aligns profiles' clocks with it."""
        return time.perf_counter()

    def send(self, program: str, step: int, key: str, tensor) -> None:
        """The transport: a tensor for a recv on another task (an actor call, not waited on)."""
        destination = key.split(";", 2)[1]
        peer = self.peers[destination.rsplit("/device:", 1)[0]]
        peer.deliver.remote(program, step, key, tensor)

    def deliver(self, program: str, step: int, key: str, tensor) -> None:
        """A tensor another task sent for ``step``: to the step's call, or kept until it begins."""
        with self.lock:
            call = self.calls.get((program, step))
            if call is None:
                if step > self.latest.get(program, -1):
                    self.early.setdefault((program, step), {})[key] = tensor
                return                                       # for a step over or aborted: dropped
        call.deliver(key, tensor)

    def abort(self, program: str, step: int, reason: str) -> None:
        """Fail ``step`` here (now, or when it begins)."""
        with self.lock:
            call = self.calls.get((program, step))
            if call is None:
                if step > self.latest.get(program, -1):
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
        """How often programs were registered here and steps run, and what is held now."""
        with self.lock:
            return {**self.counts, "programs": len(self.programs), "running": len(self.calls),
                    "early": len(self.early), "aborted": len(self.aborted)}

    def running(self) -> list[tuple[str, int]]:
        """The steps running here: (program, step) each."""
        with self.lock:
            return sorted(self.calls)
