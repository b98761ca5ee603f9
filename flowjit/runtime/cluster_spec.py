"""What a cluster is made of, with no Ray and no process: its spec (jobs and task counts), what
its tasks are given by job or task (GPUs, resources), each task's devices with their links,
the devices of a cluster planned and not started (``flowjit dump --cluster``), link figures
from measured round trips, and the error a cluster raises.  ``cluster.py`` starts the tasks.
"""

from __future__ import annotations

from flowjit.devices import Device, DeviceSet
from flowjit.errors import FlowjitError

# The cost model's link between tasks of one node, as measured over links (cluster_links) on a
# 2-core machine: a hop between tasks 0.2-0.3 ms with the executors' own work, 8 MB in 2.2 ms.
# A link to a task on another node is measured when the cluster starts (Cluster.link_figures).
LINK_LATENCY = 2.5e-4
LINK_BANDWIDTH = 4e9
PROBE_BYTES = 8 << 20           # what a round trip measuring a link's bandwidth carries
PROBE_ROUNDS = 3


class ClusterError(FlowjitError):
    """A cluster could not start, or a step failed on a task (killed, hung or raising).

    ``task`` names the task at fault (``/job:worker/task:1``), ``kind`` says what happened
    (``died``, ``hung``, ``raised``, ``unavailable``; ``lost``: a variable that lived on a
    task restarted since), ``pid`` and ``node`` where it ran."""

    def __init__(self, message: str, *, task: str | None = None, kind: str | None = None, pid: int | None = None,
                 node: str | None = None, cluster=None):
        super().__init__(message)
        self.task, self.kind, self.pid, self.node = task, kind, pid, node
        self.cluster = cluster                 # the cluster it happened on (what a recovery restarts)


def parse_spec(spec) -> dict[str, int]:
    """``{"ps": 1, "worker": 2}`` or ``"ps=1,worker=2"`` -> {job: task count}."""
    if isinstance(spec, str):
        spec = parse_counts(spec, f"cluster spec '{spec}'", "ps=1,worker=2")
    if not isinstance(spec, dict) or not spec:
        raise ClusterError(f"a cluster spec names jobs and task counts, e.g. {{'ps': 1, 'worker': 2}}; got {spec!r}")
    for job, count in spec.items():
        if not isinstance(job, str) or not job.isidentifier() or not isinstance(count, int) or count < 1:
            raise ClusterError(f"cluster spec {spec!r}: job '{job}' needs a name and at least one task")
    return dict(spec)


def parse_counts(text: str, what: str, example: str) -> dict[str, int]:
    """``"ps=1,worker=2"`` -> {"ps": 1, "worker": 2}; ``what`` and ``example`` for the error."""
    parsed = {}
    for part in filter(None, (piece.strip() for piece in text.split(","))):
        name, _, count = part.partition("=")
        if not count.strip().isdigit():
            raise ClusterError(f"{what}: '{part}' is not job=count (e.g. {example})")
        parsed[name.strip()] = int(count)
    return parsed


def task_devices(task: str, cpu_devices: int = 1, threads: int = 1,
                 link: tuple[float, float] | None = None, gpus: int = 0, node: str | None = None) -> list[Device]:
    """The devices a task owns (``cpu:0`` ..., then ``gpu:0`` ...), with its link to other tasks'
    devices (None: the link between tasks of one node the cost model assumes), and the node it
    runs on (None: unknown), whose other tasks it reaches over that assumed link whatever its
    own.  Its GPUs are taken to run: its process says whether they do when it starts
    (``Cluster``)."""
    latency, bandwidth = link or (LINK_LATENCY, LINK_BANDWIDTH)
    remote = dict(remote_latency=latency, remote_bandwidth=bandwidth, node=node,
                  node_link=(LINK_LATENCY, LINK_BANDWIDTH))
    return ([Device.make(f"{task}/device:cpu:{index}", threads=threads, **remote) for index in range(cpu_devices)]
            + [Device.make(f"{task}/device:gpu:{index}", executable=True, **remote) for index in range(gpus)])


def link_figures(one_byte_s: float, probe_s: float, probe_bytes: int = PROBE_BYTES) -> tuple[float, float]:
    """(latency, bandwidth) of a link from the round trips of one byte and of ``probe_bytes``:
    never better than the link between tasks of one node is taken to be."""
    latency = max(LINK_LATENCY, one_byte_s / 2)
    bandwidth = min(LINK_BANDWIDTH, probe_bytes / max(probe_s - one_byte_s, 1e-9))
    return latency, bandwidth


def planned_devices(spec, cpu_devices: int = 1, threads: int = 1, gpus=None) -> DeviceSet:
    """The devices of a cluster of ``spec``'s tasks, for planning only (nothing starts, no Ray):
    placement and partitioning on them are those a started ``Cluster(spec, gpus=gpus)`` makes on
    one node (on several, the links measured to the other nodes' tasks may move work; ``flowjit
    dump --cluster ps=1,worker=2``)."""
    tasks = [f"/job:{job}/task:{index}" for job, count in parse_spec(spec).items() for index in range(count)]
    counts = gpu_counts(tasks, gpus)
    return DeviceSet(tuple(device for task in tasks
                           for device in task_devices(task, cpu_devices, threads, gpus=counts[task])))


def by_task(tasks: list[str], given: dict, what: str) -> dict:
    """What ``given`` (keyed by job, ``"worker"``, or task, ``"/job:worker/task:1"``, which wins)
    says for each of ``tasks`` (missing: absent); ``what`` names it in the error for a key that
    is no job or task."""
    jobs = {task.split("/")[1].removeprefix("job:") for task in tasks}
    unknown = set(given) - jobs - set(tasks)
    if unknown:
        raise ClusterError(f"{what} name {', '.join(sorted(unknown))}, which is no job or task of the "
                           f"cluster ({', '.join(tasks)})")
    found = {}
    for task in tasks:
        job = task.split("/")[1].removeprefix("job:")
        if task in given or job in given:
            found[task] = given.get(task, given.get(job))
    return found


def gpu_counts(tasks: list[str], gpus) -> dict[str, int]:
    """GPUs per task from ``Cluster(gpus=...)``: a count for every task, or counts by job or
    task (``{"worker": 1}``, ``"worker=1"``); the others have none."""
    if isinstance(gpus, str) and gpus.strip().isdigit():
        gpus = int(gpus)
    if gpus is None or isinstance(gpus, int):
        given = {task: gpus or 0 for task in tasks}
    elif isinstance(gpus, (str, dict)):
        given = by_task(tasks, parse_counts(gpus, f"gpus '{gpus}'", "worker=1") if isinstance(gpus, str)
                        else dict(gpus), "gpus")
    else:
        raise ClusterError(f"gpus: give a count for every task or counts by job or task (e.g. {{'worker': 1}}), "
                           f"not {gpus!r}")
    for task, count in given.items():
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ClusterError(f"gpus: {task} is given {count!r} GPUs; give a count (0, 1, 2 ...)")
    return {task: given.get(task, 0) for task in tasks}
