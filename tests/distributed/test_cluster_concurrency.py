"""Threads calling one program on a cluster at once (a program without variables is not
serialized): its steps are in flight together, so a task may see step N+1's run before step
N's, and step N's tensor from the other task before step N's run.  Each step must still get
every tensor sent to it, and nothing must be left behind on the tasks.

One cluster ({"ps": 1, "worker": 2}; conftest's) serves the session."""

import threading
import time

import numpy as np
import pytest

import flowjit
import flowjit.runtime.cluster_executable as cluster_executable
from conftest import needs_ray

pytestmark = [needs_ray, pytest.mark.xdist_group("ray")]

WORKER0, WORKER1 = "/job:worker/task:0", "/job:worker/task:1"
THREADS, CALLS = 4, 10
STEP_TIMEOUT_S = 5.0           # (a step that lost a tensor fails at its deadline, not at the test's)
ROWS, COLUMNS = 64, 8192       # (2 MiB to each task with each run: the other task's tensor comes first)
HELD_S = 0.01                  # how long an odd step's runs are held back before they go out


def exchange(x, y):
    with flowjit.device(WORKER0):
        a = x.max(axis=1)                                  # x feeds worker 0 only
    with flowjit.device(WORKER1):
        b = y.min(axis=1)                                  # y feeds worker 1 only
    with flowjit.device(WORKER0):
        c = a * b                                          # worker 1 -> worker 0
    with flowjit.device(WORKER1):
        d = a - b                                          # worker 0 -> worker 1
    return c, d


def _args(seed):
    rng = np.random.default_rng(seed)
    return tuple(rng.uniform(-1, 1, (ROWS, COLUMNS)).astype(np.float32) for _ in range(2))


def _expected(x, y):
    a, b = x.max(axis=1), y.min(axis=1)
    return a * b, a - b


def _check(got, args):
    for actual, expected in zip(got, _expected(*args), strict=True):
        np.testing.assert_allclose(actual, expected, rtol=1e-6)


def test_threads_calling_one_program_at_once_each_get_their_own_result(cluster, stats, monkeypatch):
    jitted = flowjit.jit(exchange, devices=cluster, step_timeout_s=STEP_TIMEOUT_S)
    _check(jitted(*_args(0)), _args(0))                    # registered, compiled
    encode = cluster_executable.encode

    def held(message):              # (as a thread descheduled between its step number and its sends)
        if message[0] == "run" and message[2] % 2:
            time.sleep(HELD_S)
        return encode(message)
    monkeypatch.setattr(cluster_executable, "encode", held)   # (so that steps overtake each other)
    errors, results = [], {}
    start = threading.Barrier(THREADS)

    def calls(thread):
        try:
            start.wait(10)
            for call in range(CALLS):
                seed = 1 + thread * CALLS + call
                results[seed] = jitted(*_args(seed))
        except BaseException as error:                     # noqa: BLE001  (reported below)
            errors.append(error)
    threads = [threading.Thread(target=calls, args=(thread,)) for thread in range(THREADS)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(STEP_TIMEOUT_S * CALLS * 2)
    assert not any(thread.is_alive() for thread in threads), "a thread's calls did not end"
    assert not errors, f"{len(errors)} thread(s) failed; the first: {type(errors[0]).__name__}: {errors[0]}"
    assert time.monotonic() - began < STEP_TIMEOUT_S * 2
    assert len(results) == THREADS * CALLS
    for seed, got in results.items():
        _check(got, _args(seed))
    for task, counts in stats().items():                   # nothing kept for a step that is over
        assert counts["running"] == 0 and counts["early"] == 0 and counts["aborted"] == 0, (task, counts)
