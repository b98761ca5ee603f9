"""Tasks that own GPUs: ``Cluster(spec, gpus=...)`` gives a task ``gpu:N`` devices (Ray's
``num_gpus`` of its actor), the task compiles its GPU partitions with the CUDA backend in its
own process and copies what leaves the process back to the host.  Here the GPUs are numba's
CUDA simulator (conftest sets ``NUMBA_ENABLE_CUDASIM=1``, which the Ray processes inherit, and
the session's Ray cluster offers two logical GPUs); on a machine with GPUs the same path runs
CuPy and PTX."""

import os
import time

import numpy as np
import pytest

import flowjit
from flowjit.gpu import available, simulated
from flowjit.runtime.cluster import ClusterError
from conftest import needs_ray

pytestmark = [needs_ray, pytest.mark.xdist_group("ray"),
              pytest.mark.skipif(not available(), reason="no GPU here, real or simulated (the cuda extra, "
                                                         "NUMBA_ENABLE_CUDASIM=1)")]

WORKER0, WORKER1 = "/job:worker/task:0", "/job:worker/task:1"
GPU, SECOND_GPU = f"{WORKER1}/device:gpu:0", f"{WORKER1}/device:gpu:1"


def across(gpu: str, cpu: str, gpu_host: str):
    """A program on ``gpu``, ``cpu`` (another process) and ``gpu_host`` (the GPU's process's CPU),
    with transfers between them in both directions."""
    def on_gpu_and_back(x, y, w):
        with flowjit.device(gpu):
            a = np.tanh(x) * 2 + y[:, None]
            s = a.sum(axis=1)
        with flowjit.device(cpu):
            b = np.exp(-s) * a.max()
        with flowjit.device(gpu):
            c = (a * b[:, None]) @ w
        with flowjit.device(gpu_host):
            d = np.sqrt(np.abs(c)) + 1
        return s, b, c, d
    return on_gpu_and_back


on_gpu_and_back = across(GPU, WORKER0, WORKER1)


def _args(rows=3, columns=5):
    rng = np.random.default_rng(1)
    return (rng.uniform(-1, 1, (rows, columns)).astype(np.float32), rng.uniform(-1, 1, rows).astype(np.float32),
            rng.uniform(-1, 1, (columns, 2)).astype(np.float32))


def test_a_task_that_cannot_run_the_gpu_it_owns_fails_the_start_naming_it(ray_session):
    """Ray gives the task a (logical) GPU; its process, told not to simulate one, has none: a
    clear error, and no process left running.  (First in the module: it needs a GPU free.)"""
    if not simulated():
        pytest.skip("a task can run no GPU only where the GPUs are simulated")
    with pytest.raises(ClusterError, match=r"/job:worker/task:0 \(pid \d+.*owns 1 GPU\(s\) and its process can "
                                           r"run 0") as caught:
        flowjit.Cluster({"worker": 1}, gpus=1, env={"NUMBA_ENABLE_CUDASIM": "0"})
    assert caught.value.task == WORKER0
    assert not any(os.path.exists(f"/proc/{info.pid}") for info in caught.value.cluster._info.values())


def _more_than_the_ray_cluster_has(ray_session) -> int:
    return int(ray_session.cluster_resources().get("GPU", 0)) + 1


def test_more_gpus_than_the_ray_cluster_has_fail_before_any_task_starts(ray_session):
    tasks = _more_than_the_ray_cluster_has(ray_session)
    began = time.monotonic()
    with pytest.raises(ClusterError, match=rf"/job:worker/task:{tasks - 1} ask for {tasks} GPU\(s\) \(up to 1 a "
                                           rf"task\) and the Ray cluster has {tasks - 1} in all") as caught:
        flowjit.Cluster({"worker": tasks}, gpus={"worker": 1})
    assert time.monotonic() - began < 5 and caught.value.cluster._info == {}


def test_flowjit_devices_refuses_more_gpus_than_the_ray_cluster_has(ray_session, capsys):
    from flowjit.cli import main
    tasks = _more_than_the_ray_cluster_has(ray_session)
    assert main(["devices", "--cluster", f"worker={tasks}", "--gpus", "worker=1"]) != 0
    assert f"ask for {tasks} GPU(s)" in capsys.readouterr().err


@pytest.fixture(scope="module")
def gpu_cluster(ray_session):
    with flowjit.Cluster({"worker": 2}, gpus={WORKER1: 2}) as started:
        yield started


def test_a_task_owns_the_gpus_it_is_given_and_says_they_are_simulated(gpu_cluster):
    assert [device.name for device in flowjit.DeviceSet.of(gpu_cluster)] == [
        f"{WORKER0}/device:cpu:0", f"{WORKER1}/device:cpu:0", GPU, SECOND_GPU]
    assert [gpu_cluster.info(task).gpus for task in (WORKER0, WORKER1)] == [0, 2]
    text = gpu_cluster.describe()
    assert f"2 GPUs{' (simulated)' if simulated() else ''}" in text.splitlines()[1]
    assert "GPU" not in text.splitlines()[0]


@pytest.mark.parametrize("gpu", [GPU, SECOND_GPU], ids=["gpu0", "gpu1"])
def test_a_program_on_a_tasks_gpu_equals_the_interpreter_and_runs_there(gpu_cluster, gpu):
    """Partitions on one of the task's GPUs, its CPU and another task's CPU, with transfers
    between them in both directions; host arrays come back; the profile shows kernels on that
    GPU."""
    x, y, w = _args()
    program = across(gpu, WORKER0, WORKER1)
    jitted = flowjit.jit(program, devices=gpu_cluster)
    reference = flowjit.jit(program, backend="interpreter")(x, y, w)
    local = gpu.rsplit("device:", 1)[1]
    in_process = flowjit.jit(across(local, "cpu:0", "cpu:1"), devices=["cpu:0", "cpu:1", local])(x, y, w)
    for _ in range(2):
        got = jitted(x, y, w)
        for value, want, same in zip(got, reference, in_process):
            assert type(value) is np.ndarray and value.dtype == want.dtype and value.shape == want.shape
            np.testing.assert_array_equal(value, same)            # (the same kernels as in one process)
            np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    partitions = jitted.lower(x, y, w).as_text("partitioned")
    assert gpu in partitions
    _, trace = jitted.profile(x, y, w)
    ran = {event["args"].get("device") for event in trace["traceEvents"]
           if event.get("ph") == "X" and event.get("cat") == "kernel"}
    assert gpu in ran, ran


def test_a_planned_cluster_with_gpus_places_as_the_started_one(gpu_cluster):
    from flowjit.runtime.cluster_spec import planned_devices
    x, y, w = _args()
    started = flowjit.jit(on_gpu_and_back, devices=gpu_cluster).lower(x, y, w)
    planned = flowjit.jit(on_gpu_and_back, devices=planned_devices({"worker": 2}, gpus=f"{WORKER1}=2")).lower(x, y, w)
    assert planned.as_text("partitioned") == started.as_text("partitioned")
