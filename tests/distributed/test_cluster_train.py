"""``train.loop`` on a cluster: tasks killed at random steps are restarted, every variable is
restored from the latest checkpoint, and the run ends as one without faults
(conftest's session cluster).  ``FLOWJIT_CHAOS_KILLS`` raises the number of kills
(``make chaos``)."""

import os
import random
import signal
import threading

import numpy as np
import pytest

import flowjit
from flowjit import train
from conftest import needs_ray, stop_process

pytestmark = [needs_ray, pytest.mark.xdist_group("ray")]

WORKER0, WORKER1, PS = "/job:worker/task:0", "/job:worker/task:1", "/job:ps/task:0"
KILLS = max(3, int(os.environ.get("FLOWJIT_CHAOS_KILLS", "3")) // 10)
STEPS = 12 + 2 * KILLS


def _model(prefix: str):
    """A linear model: w on the ps task, b on worker 1, the gradient computed on worker 0."""
    with flowjit.device(PS):
        w = flowjit.Variable(np.zeros((3, 2), np.float32), name=f"{prefix}_w")
    with flowjit.device(WORKER1):
        b = flowjit.Variable(np.zeros(2, np.float32), name=f"{prefix}_b")

    def step(x, y):
        with flowjit.device(WORKER0):
            error = x @ w + b - y
            loss = (error * error).mean()
            grad_w = x.T @ error * (2 / error.size)
        with flowjit.device(WORKER1):
            grad_b = error.sum(axis=0) * (2 / error.size)
        w.assign_sub(grad_w * 0.1)
        b.assign_sub(grad_b * 0.1)
        return loss
    return w, b, step


def _batches(count: int = 5):
    rng = np.random.default_rng(18)
    truth = rng.normal(size=(3, 2)).astype(np.float32)
    batches = []
    for _ in range(count):
        x = rng.normal(size=(8, 3)).astype(np.float32)
        batches.append((x, (x @ truth + 0.5).astype(np.float32)))
    return batches


def test_a_run_with_tasks_killed_at_random_steps_ends_as_one_without_faults(cluster, tmp_path):
    batches = _batches()
    w0, b0, step0 = _model("calm")
    calm = train.loop(flowjit.jit(step0, devices=cluster), batches, steps=STEPS, checkpoint_dir=tmp_path / "calm",
                      every_steps=2)
    assert calm.recovered == []
    calm_w, calm_b = w0.numpy(), b0.numpy()               # (the kills below lose them: they live on the tasks)

    w, b, step = _model("killed")
    chooser = random.Random(18)
    at = sorted(chooser.sample(range(1, STEPS - 2), KILLS))     # (steps after each kill notice it)
    killed: list[tuple[int, str]] = []
    timers = []

    def data(position: int):
        """Batch ``position``; at the chosen positions (the first time only) a task is killed:
        now, before the step, or a few milliseconds into it."""
        if at and position == at[0]:
            at.pop(0)
            victim = chooser.choice([PS, WORKER0, WORKER1])
            killed.append((position, victim))
            pid = cluster.pids()[victim]
            timer = threading.Timer(chooser.choice([0.0, 0.002, 0.01]), os.kill, (pid, signal.SIGKILL))
            timers.append(timer)
            timer.start()
        return batches[position % len(batches)]

    run = train.loop(flowjit.jit(step, devices=cluster), data, steps=STEPS, checkpoint_dir=tmp_path / "killed",
                     every_steps=2, recoveries=2 * KILLS)        # (make chaos kills more than the default 10)
    for timer in timers:
        timer.join(5)
    print("killed", killed, "\n" + "\n".join(run.recovered))
    assert len(killed) == KILLS and len(run.recovered) >= 1, (killed, run.recovered)
    assert all("restored step" in line for line in run.recovered)
    assert cluster.alive() == {task: True for task in cluster.tasks}
    assert run.step == STEPS and len(run.losses) == STEPS
    np.testing.assert_array_equal(run.losses, calm.losses)
    np.testing.assert_array_equal(w.numpy(), calm_w)
    np.testing.assert_array_equal(b.numpy(), calm_b)
    # and both equal one process on the reference interpreter
    wr, br, stepr = _model("reference")
    local = flowjit.jit(stepr, backend="interpreter",
                        devices=[f"{task}/device:cpu:0" for task in (PS, WORKER0, WORKER1)])
    reference = [float(local(*batches[index % len(batches)])) for index in range(STEPS)]
    np.testing.assert_allclose(run.losses, reference, rtol=1e-5)
    np.testing.assert_allclose(w.numpy(), wr.numpy(), rtol=1e-5, atol=1e-6)


def test_without_a_checkpoint_a_lost_task_is_not_recovered(cluster, tmp_path):
    w, b, step = _model("no_checkpoint")
    jitted = flowjit.jit(step, devices=cluster)
    batches = _batches()

    def data(position: int):
        if position == 1:
            os.kill(cluster.pids()[WORKER1], signal.SIGKILL)
        return batches[position]
    try:
        with pytest.raises(flowjit.ClusterError, match=r"failed on task /job:worker/task:1 .* its process died"):
            train.loop(jitted, data, steps=3)              # no checkpoint_dir: nothing to recover to
    finally:
        cluster.restart(WORKER1)


def test_a_hung_task_is_restarted_at_the_step_deadline_and_the_run_goes_on(cluster, tmp_path):
    batches = _batches()
    w0, b0, step0 = _model("unhung")
    calm = train.loop(flowjit.jit(step0, devices=cluster), batches, steps=6, checkpoint_dir=tmp_path / "calm",
                      every_steps=2)
    calm_w = w0.numpy()
    w, b, step = _model("hung")
    stopped = []

    def data(position: int):
        if position == 3 and not stopped:
            stopped.append(cluster.pids()[PS])
            stop_process(stopped[0])                         # alive, but makes no progress
        return batches[position % len(batches)]
    run = train.loop(flowjit.jit(step, devices=cluster, step_timeout_s=2), data, steps=6,
                     checkpoint_dir=tmp_path / "hung", every_steps=2)
    assert len(run.recovered) == 1 and run.recovered[0].startswith(f"hung on {PS}: restarted {PS}"), run.recovered
    assert not os.path.exists(f"/proc/{stopped[0]}") or open(f"/proc/{stopped[0]}/stat").read().split()[2] == "Z"
    np.testing.assert_array_equal(run.losses, calm.losses)
    np.testing.assert_array_equal(w.numpy(), calm_w)
