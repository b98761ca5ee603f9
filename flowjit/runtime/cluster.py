"""Hosts: a cluster of tasks, one Ray actor per ``/job:<job>/task:<n>`` (whitepaper §3.3).

``Cluster({"ps": 1, "worker": 2})`` starts one long-lived actor (its own process) per
task, on a local Ray cluster bound to 127.0.0.1 without a dashboard and with a bounded
object store, or on the Ray cluster this process is already connected to, or on the one
at ``address=`` (a GCS address, or ``ray://host:port`` through Ray Client) or, without it,
``RAY_ADDRESS``; never on the one another process last started on this machine (which a bare
``ray.init()`` joins).  The driver links to every task itself (at its node's address), so it
needs TCP access to each task's node, through Ray Client too.  Each task owns its devices
(``cpu:0`` ... by default one; ``gpu:0`` ... where ``gpus=`` gives it GPUs) and runs the
multi-device executor inside its process (``cluster_task``).  A cluster is a device set:
``jit(f, devices=cluster)`` places, partitions by task and device, and registers each
task's partitions with it once (``cluster_executable``).  Ray starts, registers and
restarts; the steps themselves travel over links, direct connections between this process
and the tasks and between tasks (``cluster_links``), which a key only this cluster holds opens
(on one node: Unix sockets, large arrays as shared memory, ``cluster_shared``).

``shutdown()`` (or leaving a ``with cluster:`` block) kills every actor it started, and
the local Ray cluster if it started one; ``pids()`` maps task names to process ids;
``restart()`` replaces dead or given tasks with new actors, which programs re-register
with on their next step.  Every wait here has a deadline.

Variables live on their task.  The first step of a program placed on the cluster moves
each variable it uses to the task its reads and writes were placed on (``TaskHome``): the
task holds the value from then on, the driver's ``Variable`` only its shape and dtype, and
``v.numpy()``, ``v.assign(...)`` and checkpoints fetch and send the value (one call per
task).  A task that is restarted loses the variables it held: reading one then fails
naming the task, until a restore (``Checkpoint.restore``, as ``train.loop`` does after a
fault) or an assign gives it a value again.  ``shutdown()`` fetches the variables back
into this process, so that they outlive the cluster.

Ray is the optional extra ``flowjit[distributed]``; without it, creating a cluster fails
with an error naming the extra, and nothing else needs Ray.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import sys
import threading
import time
import uuid
import weakref
from dataclasses import dataclass

import numpy as np

from flowjit.devices import Device, DeviceError, DeviceSet, DeviceSpec
from flowjit.runtime.cluster_links import Link, Switchboard
from flowjit.runtime.cluster_spec import (PROBE_BYTES, PROBE_ROUNDS, ClusterError, by_task, gpu_counts, link_figures,
                                          parse_spec, task_devices)

START_TIMEOUT = 60.0            # seconds for Ray and the actors to come up
CALL_TIMEOUT = 10.0             # seconds for a control call (info, register, peers) to answer
OBJECT_STORE_BYTES = 128 << 20


def import_ray(loopback: bool = False):
    """The ray module, or an error naming the extra that installs it.  ``loopback``: a local
    cluster is to be started, so Ray (when imported here first) binds to 127.0.0.1 only."""
    if loopback and "ray" not in sys.modules:
        # Ray reads this once, on import: without it a local node takes the machine's address.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
    except Exception as error:                               # noqa: BLE001  (a broken install raises anything)
        if isinstance(error, ModuleNotFoundError) and error.name == "ray":
            raise ClusterError("flowjit.Cluster runs tasks on Ray, which is not installed: "
                               "pip install 'flowjit[distributed]' (it brings ray>=2.9)") from error
        # (Ray is there, but something it imports is missing, shadowed or broken: say what, not "install it")
        raise ClusterError(f"flowjit.Cluster runs tasks on Ray, which failed to import: {type(error).__name__}: "
                           f"{error}") from error
    return ray


def attach(ray, address: str) -> None:
    """Connect this process to the running Ray cluster at ``address``: a GCS address
    (``host:6379``, ``auto``) or a Ray Client one (``ray://host:10001``, which the
    ``distributed`` extra's ``ray[client]`` speaks); ``ClusterError`` naming it when that fails."""
    try:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    except Exception as error:                               # noqa: BLE001  (Ray's own errors vary by version)
        hint = ""
        if address.startswith("ray://") and isinstance(error, ConnectionError):
            hint = " (is the Ray Client port reachable from here?"
            if os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
                hint += (" A cluster with Ray's token authentication on refuses a Ray Client that does not set "
                         "RAY_AUTH_MODE=token and give its token, and Ray reports that as this timeout.")
            hint += ")"
        raise ClusterError(f"flowjit.Cluster could not attach to the Ray cluster at {address}: "
                           f"{type(error).__name__}: {error}{hint}") from error


def start_local_ray(num_cpus: int = 2, object_store_bytes: int = OBJECT_STORE_BYTES, num_gpus: int | None = None) -> None:
    """Start a local Ray cluster for this process: loopback only, no dashboard, a bounded
    object store; task processes import the same flowjit as this one (its directory leads
    their PYTHONPATH: the Ray processes inherit this environment when they start).
    ``num_gpus``: the GPUs it offers (None: those Ray finds; simulated GPUs must be given)."""
    ray = import_ray(loopback=True)
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, before]))
    try:
        # "local": a new cluster even where another runs on this machine (ray.init() would join
        # the one `ray start` or another process last started, from /tmp/ray/ray_current_cluster)
        ray.init(address="local", num_cpus=num_cpus, num_gpus=num_gpus, object_store_memory=object_store_bytes,
                 include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False, configure_logging=False)
    finally:
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before


@dataclass
class TaskInfo:
    """Where a task runs: what its actor reported when it started."""

    name: str                  # /job:worker/task:1
    pid: int
    node: str                  # the node's IP address
    hostname: str
    node_id: str
    address: tuple             # where its listener takes links: its endpoint (cluster_links)
    gpus: int = 0              # the GPUs of its devices its process can run
    simulated: bool = False    # ... on numba's CUDA simulator


class TaskHome:
    """Where a variable lives on a cluster: ``task`` (its ``device``), in the process the task
    had at ``generation`` (a restart makes another, which does not hold it)."""

    __slots__ = ("cluster", "task", "device", "generation")

    def __init__(self, cluster: "Cluster", task: str, device: str, generation: int):
        self.cluster, self.task, self.device, self.generation = cluster, task, device, generation

    @property
    def key(self) -> tuple:
        """Buffers with one key are read and written in one call."""
        return (id(self.cluster), self.task)

    def describe(self) -> str:
        return f"task {self.task} of {self.cluster!r}"

    def read(self, buffers) -> dict:
        return self.cluster.read_variables(self.task, buffers)

    def stage(self, assignments):
        return self.cluster.stage_variables(self.task, assignments)

    def commit(self, assignments, token) -> None:
        self.cluster.commit_variables(self.task, assignments, token)

    def discard(self, token) -> None:
        self.cluster.discard_variables(self.task, token)


class Cluster:
    """Tasks as Ray actors; a device set for ``jit(devices=...)``."""

    def __init__(self, spec=None, *, address: str | None = None, cpu_devices: int = 1, threads: int = 1,
                 resources: dict[str, dict[str, float]] | None = None, gpus=None,
                 env: dict[str, str] | None = None, start_timeout: float = START_TIMEOUT):
        """``resources``: Ray custom resources a task's actor needs, by job (``"worker"``) or
        task (``"/job:worker/task:1"``, which wins): how tasks are placed on the nodes of a
        Ray cluster that offer them (``ray start --resources '{"gpu_box": 1}'``).  ``gpus``:
        the GPUs each task owns (``gpu:0`` ...; Ray's ``num_gpus`` of its actor), one count for
        every task or counts by job or task (``{"worker": 1}``); a task whose process cannot
        run them (no GPU visible to CuPy there, and no simulated one) fails the start.  ``env``:
        environment variables of the tasks' processes (Ray's ``runtime_env``), e.g.
        ``{"NUMBA_ENABLE_CUDASIM": "1"}`` to simulate their GPUs."""
        self.spec = parse_spec(spec)
        self.tasks = [f"/job:{job}/task:{index}" for job, count in self.spec.items() for index in range(count)]
        self.resources = by_task(self.tasks, dict(resources or {}), "resources")
        self.gpus = gpu_counts(self.tasks, gpus)
        self.env = {str(name): str(value) for name, value in (env or {}).items()}
        # Without address=, RAY_ADDRESS names the cluster, as for ray.init (`ray job submit` sets
        # it; "local" asks for a new one); it is not read when this process is connected already.
        from_environment = os.environ.get("RAY_ADDRESS", "").strip()
        from_environment = None if from_environment in ("", "local") else from_environment
        ray = import_ray(loopback=address is None and from_environment is None)
        self.cpu_devices, self.threads = cpu_devices, threads
        self._ray = ray
        self._started_ray = False
        if address is None and not ray.is_initialized():
            address = from_environment
        if address is not None:
            attach(ray, address)
            self._started_ray = True
        elif not ray.is_initialized():
            from flowjit.gpu import SIMULATOR, simulated
            simulating = simulated() or self.env.get(SIMULATOR, "0").strip() not in ("", "0")
            start_local_ray(num_gpus=sum(self.gpus.values()) if simulating else None)
            self._started_ray = True
        self.id = uuid.uuid4().hex[:8]
        self.key = secrets.token_bytes(32)         # what a link to a task proves it knows
        self.links = Switchboard(self.key)
        self._lock = threading.Lock()
        self._actors: dict = {}
        self._senders = None
        self._info: dict[str, TaskInfo] = {}
        self.generation: dict[str, int] = {task: 0 for task in self.tasks}
        self.closed = False
        self.link_figures: dict[str, tuple[float, float]] = {}     # task on another node -> its link, measured
        self._homed: "weakref.WeakValueDictionary[str, object]" = weakref.WeakValueDictionary()
        self._homing = threading.Lock()
        try:
            self._start(self.tasks, start_timeout)
            self._measure_links(start_timeout)
        except BaseException:
            self.shutdown()
            raise
        self.device_set = DeviceSet(tuple(device for task in self.tasks for device in self.devices_of(task)),
                                    cluster=self)

    # -- tasks -------------------------------------------------------------------------
    def devices_of(self, task: str) -> list[Device]:
        info = self._info.get(task)
        return task_devices(task, self.cpu_devices, self.threads, self.link_figures.get(task), self.gpus[task],
                            node=info.node_id if info is not None else None)

    def _measure_links(self, timeout: float = START_TIMEOUT) -> dict[str, tuple[float, float]]:
        """When the cluster starts (its ``device_set`` is made from these figures once): measure
        the link from the first task to each task on another node (a round trip of one byte and
        one of ``PROBE_BYTES``, ``PROBE_ROUNDS`` times each, one task at a time, all within
        ``timeout``), which the cost model then gives that task's devices: a network is not the
        local link it assumes.  Tasks on the first task's node keep the assumed figures, so
        placement on one machine does not depend on a noisy measurement.  Two tasks that share a
        node are priced between each other by the assumed local link whatever their figures
        (their devices name the node: ``Device.link_to``); a task and one on another node by
        the slower of their figures.  A restarted task keeps its figures and node as at the
        start.  Returns them."""
        first = self.tasks[0]
        home = self._info[first].node_id
        actor = self.actors()[first]
        deadline = time.monotonic() + timeout
        for task in [task for task in self.tasks if self._info[task].node_id != home]:
            left = max(0.1, deadline - time.monotonic())
            one_byte, probe = self._get([actor.probe.remote(task, [1, PROBE_BYTES], PROBE_ROUNDS, left)],
                                        left + CALL_TIMEOUT, f"measuring the link from {first} to {task}",
                                        [first])[0]
            self.link_figures[task] = link_figures(one_byte, probe)
        return dict(self.link_figures)

    def _start(self, tasks: list[str], timeout: float) -> None:
        """Start ``tasks``' actors and wait for them, all within ``timeout``; where that fails,
        the actors started are killed (they would hold their GPUs and resources), their handles
        kept, so the tasks do not answer and a ``restart`` may try again."""
        from flowjit.runtime.cluster_task import Task
        deadline = time.monotonic() + timeout
        remote = self._ray.remote(Task)
        self._check_gpus(tasks, deadline)
        started = {}
        for task in tasks:
            devices = self.devices_of(task)
            started[task] = remote.options(num_cpus=0, num_gpus=self.gpus[task], max_concurrency=16, max_restarts=0,
                                           resources=self._needs(task) or None,
                                           runtime_env={"env_vars": self.env} if self.env else None,
                                           name=f"flowjit-{self.id}-{task.replace('/', '_')}-{self.generation[task]}"
                                           ).remote(
                task, [device.name for device in devices], [device.threads for device in devices], self.key)
        with self._lock:
            self._actors.update(started)
        try:
            waits = "; ".join(f"{task} needs {needs}" for task in tasks if (needs := self._needs(task, gpus=True)))
            infos = self._get([actor.info.remote() for actor in started.values()], max(0.1, deadline - time.monotonic()),
                              f"starting the tasks {', '.join(tasks)}" + (f" (a task waits for a node that offers the "
                                                                           f"resources it needs: {waits})" if waits else ""),
                              list(started))
            for task, info in zip(started, infos):
                self._info[task] = TaskInfo(task, **info)
            short = [task for task in started if self._info[task].gpus < self.gpus[task]]
            if short:
                raise ClusterError("; ".join(f"task {self.describe_task(task)} owns {self.gpus[task]} GPU(s) and "
                                             f"its process can run {self._info[task].gpus}" for task in short)
                                   + " (no GPU visible to CuPy there, or numba-cuda missing: install the cuda extra; "
                                     "NUMBA_ENABLE_CUDASIM=1 in the tasks' environment simulates one)",
                                   task=short[0], kind="unavailable", cluster=self)
            self._set_peers(max(0.1, deadline - time.monotonic()))
        except BaseException:
            self._kill(started.values())
            raise

    def _kill(self, actors) -> None:
        """Kill ``actors`` (no restart), passing over those already gone."""
        for actor in actors:
            try:
                self._ray.kill(actor, no_restart=True)
            except Exception:                              # noqa: BLE001  (an actor already gone)
                pass

    def _check_gpus(self, tasks: list[str], deadline: float) -> None:
        """A clear error where no node of the Ray cluster has as many GPUs as a task asks for,
        or the cluster fewer than ``tasks`` together, before any actor waits for them; where it
        has them but others hold some (a cluster just shut down frees its own a moment
        later), wait for them until ``deadline`` (``time.monotonic()``)."""
        wanted = sum(self.gpus[task] for task in tasks)
        if not wanted:
            return
        asking = f"the tasks {', '.join(task for task in tasks if self.gpus[task])} ask for {wanted} GPU(s)"
        total = self._ray.cluster_resources().get("GPU", 0)
        largest = max((node.get("Resources", {}).get("GPU", 0) for node in self._ray.nodes() if node.get("Alive")),
                      default=0)
        most = max(self.gpus[task] for task in tasks)
        if total < wanted or largest < most:
            raise ClusterError(f"{asking} (up to {most} a task) and the Ray cluster has {total:g} in all, at most "
                               f"{largest:g} on a node (a local cluster flowjit starts offers the GPUs Ray finds, or "
                               f"as many as asked where NUMBA_ENABLE_CUDASIM=1 simulates them)",
                               kind="unavailable", cluster=self)
        while (free := self._ray.available_resources().get("GPU", 0)) < wanted:
            if time.monotonic() > deadline:
                raise ClusterError(f"{asking} and the Ray cluster had only {free:g} of its {total:g} free until the "
                                   f"start's deadline (other actors hold them)", kind="unavailable", cluster=self)
            time.sleep(0.05)

    def _needs(self, task: str, gpus: bool = False) -> dict:
        """The Ray custom resources ``task``'s actor needs: its own entry, else its job's
        (``gpus``: with its GPUs, as Ray's ``GPU``)."""
        needs = dict(self.resources.get(task, {}))
        if gpus and self.gpus[task]:
            needs["GPU"] = self.gpus[task]
        return needs

    def _set_peers(self, timeout: float = CALL_TIMEOUT) -> None:
        actors = self.actors()
        addresses = {task: self._info[task].address for task in actors}
        self._get([actor.set_peers.remote(addresses) for actor in actors.values()], timeout, "connecting the tasks",
                  list(actors))

    def senders(self):
        """The threads that send a step's heavy runs side by side (``cluster_executable``)."""
        with self._lock:
            if self._senders is None:
                from concurrent.futures import ThreadPoolExecutor
                self._senders = ThreadPoolExecutor(max(1, len(self.tasks) - 1), thread_name_prefix="flowjit-send")
            return self._senders

    def link(self, task: str, timeout: float) -> Link:
        """The driver's link to ``task`` (``LinkClosed`` when its process is gone)."""
        return self.links.link(task, self._info[task].address, timeout)

    def _get(self, refs, timeout: float, what: str, tasks: list[str] | None = None):
        """``ray.get`` with a deadline; a failure names the task it came from (``tasks``: the
        task of each ref) and whether it died or raised."""
        ray = self._ray
        try:
            return ray.get(refs, timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            raise ClusterError(f"{what} took longer than {timeout:g} s", kind="unavailable", cluster=self) from None
        except ray.exceptions.RayError as error:
            task = kind = None
            for index, ref in enumerate(refs if tasks is not None else []):
                ready, _ = ray.wait([ref], timeout=0)
                if ready:
                    try:
                        ray.get(ref, timeout=0)
                    except ray.exceptions.RayError as failed:
                        task, error = tasks[index], failed
                        break
            if isinstance(error, (ray.exceptions.ActorDiedError, ray.exceptions.ActorUnavailableError)):
                kind, happened = "died", "its process died"
            else:
                kind, happened = ("raised" if isinstance(error, ray.exceptions.RayTaskError) else "unavailable",
                                  str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__)
            info = self._info.get(task) if task else None
            subject = f" on task {self.describe_task(task)}" if task else ""
            raise ClusterError(f"{what} failed{subject}: {happened}", task=task, kind=kind, cluster=self,
                               pid=info.pid if info else None, node=info.node if info else None) from error

    def actors(self) -> dict:
        """Task name -> its actor handle."""
        if self.closed:
            raise ClusterError("the cluster was shut down")
        with self._lock:
            return dict(self._actors)

    def info(self, task: str) -> TaskInfo:
        return self._info[task]

    def describe_task(self, task: str) -> str:
        """``/job:worker/task:1 (pid 1234 on node 127.0.0.1, devices cpu:0)``: for errors."""
        info = self._info.get(task)
        devices = ", ".join(device.name for device in self.devices_of(task))
        where = f"pid {info.pid} on node {info.node}" if info else "not started"
        return f"{task} ({where}; devices {devices})"

    def task_of(self, device: str) -> str:
        spec = DeviceSpec.parse(device)
        task = f"/job:{spec.job}/task:{spec.task}"
        if task not in self.generation:
            raise DeviceError(f"device {device} is not on a task of this cluster ({', '.join(self.tasks)})")
        return task

    def pids(self) -> dict[str, int]:
        """Task name -> the process id of its actor."""
        self.actors()
        return {task: self._info[task].pid for task in self.tasks}

    def alive(self, timeout: float = 1.0) -> dict[str, bool]:
        """Task name -> whether its actor answers within ``timeout`` seconds."""
        actors = self.actors()
        refs = {actor.ping.remote(): task for task, actor in actors.items()}
        ready, _ = self._ray.wait(list(refs), num_returns=len(refs), timeout=timeout)
        answered = {task: False for task in actors}
        for ref in ready:
            try:
                self._ray.get(ref, timeout=0)
                answered[refs[ref]] = True
            except self._ray.exceptions.RayError:
                pass
        return answered

    def restart(self, *tasks: str, timeout: float = START_TIMEOUT) -> list[str]:
        """Replace ``tasks`` (default: every task that does not answer) with new actors; the
        programs placed on the cluster register again with them on their next step.  Returns
        the tasks restarted."""
        tasks = list(tasks) or [task for task, answers in self.alive().items() if not answers]
        for task in tasks:
            if task not in self.generation:
                raise ClusterError(f"no task {task} in the cluster ({', '.join(self.tasks)})")
        if not tasks:
            return []
        with self._lock:
            old = [self._actors.pop(task) for task in tasks]
        for task in tasks:
            self.links.drop(task)
        for actor in old:
            self._ray.kill(actor, no_restart=True)
        for task in tasks:                    # a hung (or stopped) process cannot act on Ray's kill request
            info = self._info.get(task)
            if info is not None and info.hostname == socket.gethostname() and _process_exists(info.pid):
                try:
                    os.kill(info.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for task in tasks:
            self.generation[task] += 1
        self._start(tasks, timeout)
        return tasks

    # -- variables -----------------------------------------------------------------------
    def home_variables(self, task: str, device: str, buffers) -> None:
        """Make ``task`` (its ``device``) the home of ``buffers``: those that live nowhere yet
        are sent there with their value; one that lives elsewhere, or was lost with a
        restarted task, is an error naming it.  The caller holds the variables' locks."""
        with self._homing:
            moving = []
            for buffer in buffers:
                home = buffer.home
                if home is None:
                    moving.append(buffer)
                elif home.cluster is not self or home.task != task:
                    raise ClusterError(f"variable '{buffer.name}' lives on {home.describe()}, but this program "
                                       f"places its reads and writes on task {task} of {self!r}", task=task)
                else:
                    self._check_held(buffer)
            if not moving:
                return
            actor = self.actors()[task]
            self._get([actor.put_variables.remote({buffer.name: buffer.value for buffer in moving})], CALL_TIMEOUT,
                      f"moving variables {', '.join(b.name for b in moving)} to task {task}", [task])
            for buffer in moving:
                buffer.home = TaskHome(self, task, device, self.generation[task])
                self._homed[buffer.name] = buffer
                buffer.value = np.array(buffer.value)          # (a copy: nothing here writes it any more)

    def _check_held(self, buffer) -> None:
        home = buffer.home
        if self.closed:
            raise ClusterError(f"variable '{buffer.name}' lived on task {home.task} of {self!r}, which was shut down "
                               f"when that task could not give it back", task=home.task, kind="unavailable")
        if home.generation != self.generation[home.task]:
            raise ClusterError(f"variable '{buffer.name}' lived on task {home.task}, which was restarted since (the "
                               f"process that held it was lost), so its value is lost: restore it from a checkpoint "
                               f"(Checkpoint.restore; train.loop does so after a fault) or assign it",
                               task=home.task, kind="lost", cluster=self)

    def read_variables(self, task: str, buffers) -> dict:
        """name -> value of ``buffers``, which live on ``task``: one call."""
        for buffer in buffers:
            self._check_held(buffer)
        names = [buffer.name for buffer in buffers]
        [values] = self._get([self.actors()[task].get_variables.remote(names)], CALL_TIMEOUT,
                             f"reading variables {', '.join(names)} from task {task}", [task])
        return {name: np.array(value) for name, value in values.items()}     # (writable copies)

    def stage_variables(self, task: str, assignments) -> str:
        """Send each ``(buffer, array)`` to ``task``, where the buffers live, to be kept aside
        until ``commit_variables``: one call; returns the token that names them there."""
        if self.closed:
            self._check_held(assignments[0][0])
        token = uuid.uuid4().hex
        values = {buffer.name: np.asarray(array) for buffer, array in assignments}
        self._get([self.actors()[task].put_variables.remote(values, token)], CALL_TIMEOUT,
                  f"writing variables {', '.join(values)} to task {task}", [task])
        return token

    def commit_variables(self, task: str, assignments, token: str) -> None:
        """Store what ``stage_variables`` sent.  A variable lost with a restarted task lives on
        its new process from then on."""
        self._get([self.actors()[task].commit_variables.remote(token)], CALL_TIMEOUT,
                  f"storing variables {', '.join(buffer.name for buffer, _ in assignments)} on task {task}", [task])
        for buffer, _ in assignments:
            buffer.home.generation = self.generation[task]

    def discard_variables(self, task: str, token: str) -> None:
        """Drop what ``stage_variables`` sent (not waited on: a task that is gone kept nothing)."""
        try:
            self.actors()[task].discard_variables.remote(token)
        except Exception:                               # noqa: BLE001  (the cluster or the task is gone)
            pass

    def _bring_home(self, timeout: float) -> None:
        """Fetch every variable that lives on a task back into this process (those a task
        still holds); the others stay marked as living on the closed cluster."""
        by_task: dict[str, list] = {}
        for buffer in list(self._homed.values()):
            if buffer.home is not None and buffer.home.cluster is self and \
                    buffer.home.generation == self.generation[buffer.home.task]:
                by_task.setdefault(buffer.home.task, []).append(buffer)
        actors = self.actors()
        refs = {actors[task].get_variables.remote([b.name for b in group]): group for task, group in by_task.items()}
        ready, _ = self._ray.wait(list(refs), num_returns=len(refs), timeout=timeout) if refs else ([], [])
        for ref in ready:
            try:
                values = self._ray.get(ref, timeout=0)
            except self._ray.exceptions.RayError:
                continue
            for buffer in refs[ref]:
                buffer.value = np.array(values[buffer.name])
                buffer.home = None

    def recover(self, error: ClusterError, timeout: float = START_TIMEOUT) -> list[str]:
        """After a step failed with ``error``: restart the tasks that do not answer, and the hung
        one; returns them.  Their variables are lost until restored (``Checkpoint.restore``),
        and the programs register with them again on their next step."""
        tasks = [task for task, answers in self.alive().items() if not answers]
        if error.kind == "hung" and error.task in self.generation and error.task not in tasks:
            tasks.append(error.task)
        return self.restart(*tasks, timeout=timeout) if tasks else []

    def describe(self) -> str:
        """Every task's devices, with where the task runs: what ``flowjit devices --cluster`` prints."""
        lines = []
        for task in self.tasks:
            info = self._info[task]
            gpus = f", {info.gpus} GPU{'s' if info.gpus != 1 else ''}{' (simulated)' if info.simulated else ''}"
            lines.append(f"{task}: pid {info.pid} on node {info.node} ({info.hostname}){gpus if info.gpus else ''}")
        return "\n".join(lines) + "\n" + self.device_set.describe()

    # -- lifetime ----------------------------------------------------------------------
    def shutdown(self, timeout: float = 10.0) -> None:
        """Kill every task's actor and wait (up to ``timeout`` s) for its process to exit;
        stop the Ray cluster this object started."""
        if self.closed:
            return
        try:
            self._bring_home(timeout)
        except ClusterError:
            pass                               # (a variable it could not fetch stays marked as lost)
        self.closed = True
        self.links.close()
        if self._senders is not None:
            self._senders.shutdown(wait=False)
        with self._lock:
            actors, self._actors = dict(self._actors), {}
        self._kill(actors.values())
        deadline = time.monotonic() + timeout
        for info in self._info.values():
            while info.hostname == socket.gethostname() and _process_exists(info.pid) and time.monotonic() < deadline:
                time.sleep(0.02)
        if self._started_ray:
            self._ray.shutdown()

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        jobs = ", ".join(f"{job!r}: {count}" for job, count in self.spec.items())
        return f"Cluster({{{jobs}}}{', shut down' if self.closed else ''})"


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
