"""A program placed on a cluster: the driver's side (whitepaper §3.2.2, §3.3).

The driver plays the master.  It has placed and partitioned the program by device;
here the partitions are grouped by task and registered with each task once, as IR text
with the compiler that turns a node into a kernel (each task compiles from its own
cache).  A step sends each task, over the link to it (``cluster_links``), only a step id
and the feeds its partitions read, and gets back the outputs they produce on the same link;
cross-task tensors go task to task under their rendezvous keys (``cluster_task``).  Runs
carrying large feeds to several tasks are copied into their links' shared memory side by
side, then written one after the other, so that every task begins within microseconds of
the others (over TCP each is written from a thread of its own).
A task restarted since the last step is registered with again before the step.

Faults: the step waits on every task with one deadline (``step_timeout_s``; the first step
after a task registered, in which it compiles its kernels, gets ``FIRST_CALL_ALLOWANCE``
more).  A task whose process died (its link closed, or refuses a new one), or whose step
raised, fails the step at once: every other task is told to abort it (so none stays
blocked on a recv), and the error names the task, its devices and node, and what the task
reported.  A step not done by its deadline asks each unfinished task what
it still waits for; a task that does not answer is the hung one.

Threads of this process may call a program at once (one without variables is not
serialized), so several steps of it may be in flight, and a task may see their messages in
any order.  Each ``run`` says which is the lowest step of the program still in flight (its
*horizon*): every step below it is over in the driver, and its ``run`` went out before this
one on the same link, so a task can drop what still comes for those steps without dropping
a tensor of a step that has yet to begin there.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid

import numpy as np

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph
from flowjit.compiler.ir.printer import print_graph
from flowjit.runtime.cluster import CALL_TIMEOUT, Cluster, ClusterError
from flowjit.runtime.cluster_links import LinkClosed, RemoteError, encode, restored_error
from flowjit.runtime.executor import DEFAULT_STEP_TIMEOUT, FIRST_CALL_ALLOWANCE

ABORT_GRACE = 1.0              # seconds the other tasks get to report an abort
LATE = "the step's deadline passed before its feeds went out"
HEAVY_RUN = 1 << 20            # a run carrying this many bytes of arrays goes out beside the others
REGISTER_POLL_S = 0.2          # how often a registration looks at the other tasks' links


class ClusterExecutable:
    """Call it with the program's input arrays, as a ``MultiDeviceExecutable``."""

    def __init__(self, cluster: Cluster, partitions: list[Graph], inputs: list[list[int]],
                 outputs: list[tuple[int, int]], input_count: int, compile_node, *, name: str = "program",
                 step_timeout_s: float | None = DEFAULT_STEP_TIMEOUT, variables: dict | None = None):
        """``variables``: name -> this process's buffer of each variable the program uses; each
        lives on the task its reads and assigns were placed on (moved there on the first step)."""
        self.cluster = cluster
        self.variables = dict(variables or {})
        self.name = name
        self.input_count = input_count
        self.compile_node = compile_node
        self.step_timeout_s = step_timeout_s
        self.program = f"{name}-{uuid.uuid4().hex[:8]}"
        self.partitions = partitions                     # (for profiles: the nodes by device and name)
        self.plan: dict[str, dict] = {}                  # task -> its partitions, inputs, outputs
        self.output_places: list[tuple[str, int] | tuple[None, int]] = []
        part_task = [cluster.task_of(graph.attrs["device"]) for graph in partitions]
        for task in dict.fromkeys(part_task):
            local = [index for index, owner in enumerate(part_task) if owner == task]
            self.plan[task] = {"texts": [print_graph(partitions[index]) for index in local],
                               "inputs": [inputs[index] for index in local],
                               "outputs": [], "local": {index: position for position, index in enumerate(local)},
                               "feeds": sorted({i for index in local for i in inputs[index]}),
                               "variables": {}}                  # variable name -> its device here
            for index in local:
                for node in partitions[index].nodes:
                    if node.op in (ops.read_variable, ops.assign_variable):
                        self.plan[task]["variables"][node.attrs["var"]] = partitions[index].attrs["device"]
        for part, index in outputs:
            if part < 0:
                self.output_places.append((None, index))
                continue
            plan = self.plan[part_task[part]]
            plan["outputs"].append((plan["local"][part], index))
            self.output_places.append((part_task[part], len(plan["outputs"]) - 1))
        self.registered: dict[str, int] = {}             # task -> the generation registered with
        self.steps = itertools.count()
        self.lock = threading.RLock()                    # (steps may begin on several threads at once)
        self.in_flight: set[int] = set()                 # the steps begun and not yet over
        self.compiling: set[int] = set()                 # those of them that compile the tasks' kernels
        self.kernels: dict[str, list[str]] = {}
        if not self.variables:
            self.register()                              # (with variables: on the first step, under their locks)
        self.first = True

    # -- registration ------------------------------------------------------------------
    def register(self) -> bool:
        """Register with every task whose actor changed since (all, the first time); whether
        any task registered (its next step compiles its kernels).  A second thread waits for
        the registration the first one makes (and then has none to make)."""
        with self.lock:
            return self._register()

    def _register(self) -> bool:
        actors = self.cluster.actors()
        stale = [task for task in self.plan if self.registered.get(task) != self.cluster.generation[task]]
        if not stale:
            return False
        for task in stale:
            by_device: dict[str, list] = {}
            for name, device in self.plan[task]["variables"].items():
                by_device.setdefault(device, []).append(self.variables[name])
            for device, buffers in by_device.items():
                self.cluster.home_variables(task, device, buffers)
        refs = [actors[task].register.remote(self.program, self.plan[task]["texts"], self.plan[task]["inputs"],
                                             self.plan[task]["outputs"], self.compile_node, self.step_timeout_s,
                                             sorted(self.plan[task]["variables"]))
                for task in stale]
        what = f"registering @{self.name} with {', '.join(stale)}"
        deadline = time.monotonic() + CALL_TIMEOUT * 6
        waiting = refs
        for task in self.plan:           # (a link closes the moment its task dies; Ray may take seconds)
            try:
                self.cluster.link(task, CALL_TIMEOUT)
            except LinkClosed as error:
                self._lost_while(what, task, str(error))
        while waiting and time.monotonic() < deadline:   # (registering compiles: tasks may die meanwhile)
            _, waiting = self.cluster._ray.wait(waiting, num_returns=len(waiting), timeout=REGISTER_POLL_S)
            for task in self.plan:
                if self.cluster.links.lost(task):
                    self._lost_while(what, task, "its link closed")
        kernels = self.cluster._get(refs, max(0.0, deadline - time.monotonic()), what, stale)
        for task, names in zip(stale, kernels):
            self.registered[task] = self.cluster.generation[task]
            self.kernels[task] = names
        return True

    def _lost_while(self, what: str, task: str, why: str):
        info = self.cluster._info.get(task)
        raise ClusterError(f"{what} failed on task {self.cluster.describe_task(task)}: its process died ({why})",
                           task=task, kind="died", cluster=self.cluster,
                           pid=info.pid if info else None, node=info.node if info else None)

    # -- steps -------------------------------------------------------------------------
    def __call__(self, *arrays):
        return self._step(arrays, False)[0]

    def profile(self, *arrays) -> tuple[list, dict]:
        """One step with every task recording a span per step it runs: the outputs, and the
        step as one Chrome trace (``cluster_trace``: a process per task, a track per device,
        arrows for transfers, the tasks' clocks aligned with this process's)."""
        from flowjit.runtime.cluster_trace import clock_offsets, merged_trace
        offsets = clock_offsets(self.cluster, list(self.plan))
        started = time.perf_counter()
        outputs, results = self._step(arrays, True)
        self.last_spans = {task: result["spans"] for task, result in results.items()}
        return outputs, merged_trace(self.cluster, self.name, self.last_spans, offsets, started)

    def _step(self, arrays, profile: bool):
        """One step, numbered and counted in flight until it is over (threads may run steps
        of the program at once: each run tells the tasks which steps are over)."""
        with self.lock:           # (a step begun while another compiles waits on the same compiles)
            registered = self.register() or self.first
            compiles = registered or bool(self.compiling)
            self.first = False
            step = next(self.steps)
            self.in_flight.add(step)
            horizon = min(self.in_flight)                # (every step below it is over here)
            if registered:
                self.compiling.add(step)
        try:
            return self._run(step, horizon, arrays, profile, compiles)
        finally:
            with self.lock:
                self.in_flight.discard(step)
                self.compiling.discard(step)

    def _run(self, step: int, horizon: int, arrays, profile: bool, compiles: bool):
        """Send ``step``'s run (with its horizon) to every task and wait for their outputs."""
        timeout = self.step_timeout_s
        if timeout is not None and compiles:
            timeout += FIRST_CALL_ALLOWANCE
        actors = self.cluster.actors()
        deadline = None if timeout is None else time.monotonic() + timeout
        messages = {task: encode(("run", self.program, step, horizon, self.input_count,
                                  None if timeout is None else timeout + 5.0,
                                  {feed: arrays[feed] for feed in plan["feeds"]}, profile))
                    for task, plan in self.plan.items()}                 # (all before any is sent)
        replies = self.cluster.links.expect(self.program, step)
        try:
            failures = self._send_runs(messages, deadline)
            begun = [task for task in messages if task not in failures]
            for task, error in failures.items():
                if error.timed_out:
                    self._hung(step, [task], replies, begun, actors, CALL_TIMEOUT if timeout is None else timeout)
                self._failed(step, task, "died", f"its process died ({error})", replies, begun, actors)
            results = self._wait(step, replies, actors, deadline, timeout)
        except ClusterError:
            raise
        except BaseException:                            # (an interrupt: no task stays blocked on the step)
            self._abort(step, f"step {step} of @{self.name} was interrupted in the driver", replies, [], actors)
            raise
        finally:
            self.cluster.links.forget(self.program, step)
        outputs = []
        for task, position in self.output_places:
            value = arrays[position] if task is None else \
                (results[task]["outputs"] if profile else results[task])[position]
            if task is not None and isinstance(value, np.ndarray) and not value.flags.writeable:
                value = value.copy()                     # (a read-only array keeps its flag through pickle)
            outputs.append(value)
        return outputs, results

    def _send_runs(self, messages: dict, deadline: float | None) -> dict[str, LinkClosed]:
        """Send each task its run; the tasks whose link failed, with why.  Runs that carry
        ``HEAVY_RUN`` bytes of arrays or more are staged at once, from threads: each is copied
        into its link's shared memory (``Link.prepare``), or written whole to its TCP socket,
        while the others are.  Then this thread writes every run that is ready, back to back:
        a task that got its run first would otherwise take a core from the copies still
        running (measured on 2 cores: the last task began up to 4 ms after the first)."""
        def remaining() -> float | None:
            return None if deadline is None else deadline - time.monotonic()

        def stage(task: str, message, heavy: bool):
            """(link, prepared) for a run to commit, else the send's outcome (an error or None)."""
            left = remaining()
            try:
                if left is not None and left <= 0:
                    raise LinkClosed(LATE, True)
                link = self.cluster.link(task, CALL_TIMEOUT if left is None else min(left, CALL_TIMEOUT))
                if heavy and not link.local:
                    link.send_encoded(message, timeout=left)
                    return None
                return link, link.prepare(message)
            except LinkClosed as error:
                return error
        heavy = [task for task, (_, raws) in messages.items() if sum(raw.nbytes for raw in raws) >= HEAVY_RUN]
        pending = {task: self.cluster.senders().submit(stage, task, messages[task], True) for task in heavy[1:]}
        staged = {task: stage(task, message, task in heavy) for task, message in messages.items() if task not in pending}
        staged.update({task: future.result() for task, future in pending.items()})
        outcomes = {}
        for task in messages:
            outcome = staged[task]
            if isinstance(outcome, tuple):
                link, prepared = outcome
                left = remaining()
                if left is not None and left <= 0:
                    link.abandon(prepared)
                    outcome = LinkClosed(LATE, True)
                else:
                    try:
                        link.commit(prepared, timeout=left)
                        outcome = None
                    except LinkClosed as error:
                        outcome = error
            outcomes[task] = outcome
        return {task: outcome for task, outcome in outcomes.items() if outcome is not None}

    def _wait(self, step: int, replies, actors: dict, deadline: float | None, timeout: float | None) -> dict:
        """Each task's outputs for ``step``; the first failure or lost task fails the step."""
        pending = list(self.plan)
        results: dict[str, list] = {}
        while pending:
            reply = replies.next(deadline)
            if reply is None:
                self._hung(step, pending, replies, pending, actors, timeout)
            task, kind, payload = reply
            if task not in pending:
                continue
            pending.remove(task)
            if kind == "done":
                results[task] = payload
            elif kind == "lost":
                self._failed(step, task, "died", f"its process died ({payload})", replies, pending, actors)
            else:
                error = restored_error(payload)
                self._failed(step, task, "raised", f"{type(error).__name__}: {error}" if not isinstance(
                    error, RemoteError) else str(error), replies, pending, actors, cause=error)
        return results

    def _abort(self, step: int, reason: str, replies, pending: list, actors: dict) -> None:
        """Tell every task to abort ``step`` and give the unfinished ones (``pending``) a moment
        to stop."""
        for task in self.plan:
            actors[task].abort.remote(self.program, step, reason)
        waiting = set(pending)
        grace = time.monotonic() + ABORT_GRACE
        while waiting:
            reply = replies.next(grace)
            if reply is None:
                return
            waiting.discard(reply[0])

    def _failed(self, step: int, task: str, kind: str, what: str, replies, pending: list, actors: dict, cause=None):
        described = self.cluster.describe_task(task)
        reason = f"step {step} of @{self.name} failed on task {described}: {what}"
        self._abort(step, f"{reason}; aborted here too", replies, [other for other in pending if other != task],
                    actors)
        info = self.cluster._info.get(task)
        error = ClusterError(f"{reason}; the step was aborted on every task", task=task, kind=kind,
                             pid=info.pid if info else None, node=info.node if info else None,
                             cluster=self.cluster)
        raise error from cause

    def _hung(self, step: int, tasks: list[str], replies, pending: list, actors: dict, timeout: float):
        """The deadline passed with ``tasks`` unfinished: ask each what it waits for."""
        ray = self.cluster._ray
        asked = {actors[task].pending.remote(self.program, step): task for task in tasks}
        ready, _ = ray.wait(list(asked), num_returns=len(asked), timeout=ABORT_GRACE)
        reports, silent = {}, []
        for ref in asked:
            try:
                reports[asked[ref]] = ray.get(ref, timeout=0) if ref in ready else None
            except ray.exceptions.RayError:
                reports[asked[ref]] = None
            if reports[asked[ref]] is None:
                silent.append(asked[ref])
        running = [task for task, lines in reports.items() if lines and any(" is queued or running" in line
                                                                              for line in lines)]
        culprit = (silent or running or tasks)[0]
        details = []
        for task in tasks:
            lines = reports.get(task)
            details.append(f"{task}: " + ("does not answer" if lines is None else "; ".join(lines) or "finishing"))
        reason = (f"step {step} of @{self.name} did not finish within its deadline of {timeout:g} s; "
                  f"task {self.cluster.describe_task(culprit)} made no progress"
                  f"{' and does not answer' if culprit in silent else ''}. Still pending: " + " | ".join(details))
        self._abort(step, f"{reason}; aborted here too", replies, [task for task in pending if task not in silent],
                    actors)
        info = self.cluster._info.get(culprit)
        raise ClusterError(f"{reason}; the step was aborted on every task", task=culprit, kind="hung",
                           pid=info.pid if info else None, node=info.node if info else None,
                           cluster=self.cluster)

    @property
    def kernel_sources(self) -> dict[str, str]:
        return {}
