"""One local Ray cluster per test session (loopback, no dashboard, a small object store),
started the first time a test needs it; the cluster tests all run in one xdist worker
(``xdist_group("ray")`` with ``--dist loadgroup``), so one session starts it.  One
flowjit cluster ({"ps": 1, "worker": 2}, three processes) serves every test module; a test
that breaks a task restarts it before it ends, and one that fails before it could is
followed by a restart of each task that no longer answers, so that no test inherits a
dead task."""

import glob
import importlib.util
import os
import signal
import time

import pytest

RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not RAY, reason="ray is not installed (pip install 'flowjit[distributed]')")


@pytest.fixture(scope="session")
def ray_session():
    from flowjit.runtime.cluster import start_local_ray
    from flowjit.gpu import simulated
    # two simulated GPUs for test_cluster_gpus (NUMBA_ENABLE_CUDASIM=1 here); real ones as Ray finds them
    start_local_ray(num_cpus=2, object_store_bytes=80 << 20, num_gpus=2 if simulated() else None)
    import ray
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def session_cluster(ray_session):
    import flowjit
    with flowjit.Cluster({"ps": 1, "worker": 2}) as started:
        yield started
    for info in started._info.values():                    # shutdown waited for every process to exit
        assert not os.path.exists(f"/proc/{info.pid}")


@pytest.fixture
def cluster(session_cluster):
    """The session's cluster, every task of it answering when the test ends."""
    yield session_cluster
    dead = [task for task, answers in session_cluster.alive(timeout=5.0).items() if not answers]
    if dead:
        session_cluster.restart(*dead)


def stop_process(pid: int, timeout: float = 5.0) -> None:
    """SIGSTOP ``pid`` and wait until each of its threads has stopped: the signal is only
    queued when ``kill`` returns, and a thread stops when it next leaves the kernel (one
    waiting on a page read from disk may take a while)."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout
    while True:
        states = []
        for stat in glob.glob(f"/proc/{pid}/task/*/stat"):
            try:
                with open(stat) as file:
                    states.append(file.read().rsplit(")", 1)[1].split()[0])
            except OSError:                                 # (a thread that just ended)
                pass
        if states and all(state in "tTZX" for state in states):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} did not stop within {timeout:g} s after SIGSTOP: "
                                 f"its threads' states are {sorted(states)}")
        time.sleep(0.005)


@pytest.fixture
def stats(cluster):
    """Each task's counters (registered, steps, running, ...), of the tasks not in ``dead``."""
    def read(dead=()):
        actors = {task: actor for task, actor in cluster.actors().items() if task not in dead}
        return dict(zip(actors, cluster._ray.get([actor.stats.remote() for actor in actors.values()], timeout=10)))
    return read
