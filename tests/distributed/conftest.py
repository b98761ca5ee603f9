"""One local Ray cluster per test session (loopback, no dashboard, a small object store),
started the first time a test needs it; the cluster tests all run in one xdist worker
(``xdist_group("ray")`` with ``--dist loadgroup``), so one session starts it."""

import importlib.util

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
