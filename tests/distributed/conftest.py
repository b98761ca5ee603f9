"""One local Ray cluster per test session (loopback, no dashboard, a small object store),
started the first time a test needs it; the cluster tests all run in one xdist worker
(``xdist_group("ray")`` with ``--dist loadgroup``), so one session starts it.  One
flowjit cluster ({"ps": 1, "worker": 2}, three processes) serves every test module; a test
that breaks a task restarts it before it ends."""

import importlib.util
import os

import pytest

RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not RAY, reason="ray is not installed (pip install 'flowjit[distributed]')")


@pytest.fixture(scope="session")
def ray_session():
    from flowjit.runtime.cluster import start_local_ray
    start_local_ray(num_cpus=2, object_store_bytes=80 << 20)
    import ray
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def cluster(ray_session):
    import flowjit
    with flowjit.Cluster({"ps": 1, "worker": 2}) as started:
        yield started
    for info in started._info.values():                    # shutdown waited for every process to exit
        assert not os.path.exists(f"/proc/{info.pid}")


@pytest.fixture
def stats(cluster):
    """Each task's counters (registered, steps, running, ...), of the tasks not in ``dead``."""
    def read(dead=()):
        actors = {task: actor for task, actor in cluster.actors().items() if task not in dead}
        return dict(zip(actors, cluster._ray.get([actor.stats.remote() for actor in actors.values()], timeout=10)))
    return read
