"""Tensors between processes on one node as shared memory (cluster_shared.py): the driver's
feeds, a task's results and tensors from task to task arrive mapped, not copied out of a
socket, and results equal one process bit for bit; a task killed mid-step leaves nothing in
/dev/shm.

One cluster ({"ps": 1, "worker": 2}; conftest's) serves the session; a test that lowers the
threshold (to share tiny arrays) puts it back before it ends."""

import os
import signal
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flowjit
from flowjit.runtime import cluster_shared
from flowjit.runtime.cluster_shared import SHARED_MIN, mapped_memory
from conftest import needs_ray, stop_process
from random_programs import random_programs

pytestmark = [needs_ray, pytest.mark.xdist_group("ray"),
              pytest.mark.skipif(not cluster_shared.AVAILABLE, reason="shared memory links need Linux")]

WORKER0, WORKER1, PS = "/job:worker/task:0", "/job:worker/task:1", "/job:ps/task:0"
LOCAL_NAMES = [f"{task}/device:cpu:0" for task in (PS, WORKER0, WORKER1)]
ROWS, COLUMNS = 256, SHARED_MIN // 4 // 256          # float32 arrays at the threshold


def relay(x, y):
    with flowjit.device(WORKER1):
        a = np.sin(x) * 2.0                            # x: driver -> worker 1
    with flowjit.device(WORKER0):
        b = a + y                                      # a: worker 1 -> worker 0 (y: driver -> worker 0)
    return b, a[:2]                                    # b: worker 0 -> driver; a small one inline


def _args(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-1, 1, (ROWS, COLUMNS)).astype(np.float32),
            rng.uniform(-1, 1, (ROWS, COLUMNS)).astype(np.float32))


def test_large_tensors_between_tasks_and_the_driver_arrive_as_shared_memory(cluster, stats):
    jitted = flowjit.jit(relay, devices=cluster)
    expected = flowjit.jit(relay, devices=LOCAL_NAMES)(*_args())
    jitted(*_args())                                               # (registers and compiles)
    before, received = stats(), cluster_shared.received()
    for step in range(3):
        got = jitted(*_args())
        for actual, want in zip(got, expected):
            np.testing.assert_array_equal(actual, want)
        assert mapped_memory(got[0]) is not None and got[0].flags.writeable      # worker 0 -> here
        assert mapped_memory(got[1]) is None                                      # 2 rows: inline
    after = stats()
    assert cluster_shared.received() - received == 3
    assert after[WORKER1]["shared_received"] - before[WORKER1]["shared_received"] == 3           # x
    assert after[WORKER0]["shared_received"] - before[WORKER0]["shared_received"] == 6           # y and a


@pytest.fixture
def share_everything(cluster, stats, monkeypatch):
    """Every out-of-band array goes as shared memory, on the tasks and here (and some did,
    over the test's examples: hypothesis sets a fixture up once for all of them)."""
    actors = cluster.actors()
    previous = cluster._ray.get([actor.set_shared_min.remote(1) for actor in actors.values()], timeout=10)
    monkeypatch.setattr(cluster_shared, "SHARED_MIN", 1)
    before = {task: counts["shared_received"] for task, counts in stats().items()}
    yield
    cluster._ray.get([actor.set_shared_min.remote(size) for actor, size in zip(actors.values(), previous)],
                     timeout=10)
    after = {task: counts["shared_received"] for task, counts in stats().items()}
    assert all(after[task] > before[task] for task in after), (before, after)


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(program=random_programs(max_steps=6), seed=st.integers(0, 2 ** 16))
def test_random_programs_placed_on_the_cluster_equal_one_process_bit_for_bit(cluster, share_everything, program,
                                                                              seed):
    args = program.make_args(np.random.default_rng(0))
    got = flowjit.jit(program, devices=cluster, placement="random", placement_seed=seed)(*args)
    want = flowjit.jit(program, devices=LOCAL_NAMES, placement="random", placement_seed=seed)(*args)
    got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
    assert len(got) == len(want)
    for actual, expected in zip(got, want):
        actual, expected = np.asarray(actual), np.asarray(expected)
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        np.testing.assert_array_equal(actual, expected)


def _shm() -> set:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


def test_a_task_killed_mid_step_leaves_nothing_in_dev_shm_and_the_run_goes_on(cluster, stats):
    jitted = flowjit.jit(relay, devices=cluster, step_timeout_s=30)
    expected = flowjit.jit(relay, devices=LOCAL_NAMES)(*_args())
    jitted(*_args())
    before = _shm()
    held = [jitted(*_args()) for _ in range(2)]                     # (results over the driver's mappings)
    victim = cluster.pids()[WORKER1]
    stop_process(victim)                                           # caught mid-step, then killed
    threading.Timer(0.2, os.kill, (victim, signal.SIGKILL)).start()
    try:
        jitted(*_args())
    except flowjit.ClusterError as error:
        assert (error.task, error.kind) == (WORKER1, "died"), error
    else:                                                          # (what to look at if it ever does)
        tasks = [sorted(executable.plan) for executable in jitted._executables.values()]
        pytest.fail(f"a step finished with {WORKER1} (pid {victim}) stopped: its process "
                    f"{'exists' if os.path.exists(f'/proc/{victim}') else 'is gone'}, the cluster's pids "
                    f"are {cluster.pids()}, its programs run on {tasks}")
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{victim}") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _shm() <= before, sorted(_shm() - before)
    assert cluster.restart(WORKER1) == [WORKER1]
    for got in held + [jitted(*_args())]:
        for actual, want in zip(got, expected):
            np.testing.assert_array_equal(actual, want)
    assert _shm() <= before
