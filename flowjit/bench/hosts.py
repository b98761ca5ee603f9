"""The ``hosts`` bench section: programs across task processes on a local Ray cluster.

- pipeline: a step A -> B -> A over two tasks on small tensors (two cross-task hops),
  ms per step after registration, for a short and a long chain of ops per stage (the
  per-step overhead should not grow with the graph);
- branches: two independent heavy branches on two tasks against both on one task;
- faults: a killed task's detection time, and restart + re-register + first step;
- recovery: a 10-variable model (5 layers, weights and biases on both tasks) loses a task:
  restart + restore of every variable from the checkpoint + re-register + the step again,
  whose loss must equal the loss of that step before the fault.

Every result is checked against the same program in one process before it is timed.

    python -m flowjit.bench.hosts [--steps 200] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import time

import numpy as np

import flowjit

A, B = "/job:worker/task:0", "/job:worker/task:1"
BRANCH_ROUNDS = 5              # turns of each branches program...
BRANCH_TURN = 5                # ...of this many steps (a turn's median counts)


def pipeline(length: int):
    def step(x):
        with flowjit.device(A):
            a = x
            for _ in range(length):
                a = np.tanh(a) * 1.5
        with flowjit.device(B):
            b = a
            for _ in range(length):
                b = b * 0.5 + 1.0
        with flowjit.device(A):
            return b - x
    step.__name__ = f"pipeline_{length}"
    return step


def _heavy(x):
    for _ in range(3):
        x = np.sin(np.exp(x * 0.1)) + x
    return x.sum()


def branches(two_tasks: bool):
    def step(x, y):
        with flowjit.device(A):
            first = _heavy(x)
        with flowjit.device(B if two_tasks else A):
            second = _heavy(y)
        with flowjit.device(A):
            return first + second
    step.__name__ = "branches_two_tasks" if two_tasks else "branches_one_task"
    return step


def _check(got, want):
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def _timed(jitted, args, steps: int) -> list[float]:
    times = []
    for _ in range(steps):
        started = time.perf_counter()
        jitted(*args)
        times.append(time.perf_counter() - started)
    return times


def run(steps: int = 200) -> dict:
    results = {}
    with flowjit.Cluster({"worker": 2}) as cluster:
        names = [device.name for device in cluster.device_set]
        x = np.linspace(-1, 1, 256, dtype=np.float32)
        for length in (1, 64):
            fun = pipeline(length)
            jitted = flowjit.jit(fun, devices=cluster)
            _check(jitted(x), flowjit.jit(fun, devices=names)(x))
            times = _timed(jitted, (x,), steps)
            results[f"pipeline, {length} op(s) per stage, f32[256]"] = {
                "ms_per_step_median": 1e3 * statistics.median(times),
                "ms_per_step_p90": 1e3 * sorted(times)[int(0.9 * len(times))]}
        results["branches, 2 x f32[2M] heavy chains"] = branches_speedup(cluster, names)
        jitted = flowjit.jit(pipeline(1), devices=cluster, step_timeout_s=30)
        jitted(x)
        os.kill(cluster.pids()[B], signal.SIGKILL)
        killed = time.perf_counter()
        try:
            jitted(x)
            raise AssertionError("the killed task went unnoticed")
        except flowjit.ClusterError:
            detected = time.perf_counter() - killed
        started = time.perf_counter()
        cluster.restart(B)
        _check(jitted(x), flowjit.jit(pipeline(1), devices=names)(x))
        results["faults"] = {"kill_detected_s": detected, "restart_reregister_first_step_s":
                             time.perf_counter() - started}
        import tempfile
        with tempfile.TemporaryDirectory(prefix="flowjit-bench-hosts-") as directory:
            results["recovery, 10-variable model, task killed"] = recovery(cluster, directory)
    return results


def branches_speedup(cluster, names: list[str], rounds: int = BRANCH_ROUNDS, turn: int = BRANCH_TURN) -> dict:
    """Two heavy branches on one task and on two: both programs compiled and checked first,
    then timed in turns of ``turn`` steps (``rounds`` turns each), so that both see
    the same machine -- on a shared one its load moves within seconds -- and each runs as in
    a loop of its own steps."""
    big = np.random.default_rng(0).uniform(-1, 1, (2, 1 << 21)).astype(np.float32)
    jitted = {}
    for two in (False, True):
        fun = branches(two)
        jitted[two] = flowjit.jit(fun, devices=cluster)
        _check(jitted[two](big[0], big[1]), flowjit.jit(fun, devices=names)(big[0], big[1]))
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(rounds):
        for two in (False, True):
            times[two].append(statistics.median(_timed(jitted[two], (big[0], big[1]), turn)))
    one, two = statistics.median(times[False]), statistics.median(times[True])
    return {"ms_one_task": 1e3 * one, "ms_two_tasks": 1e3 * two, "speedup": one / two,
            "speedup_lowest_turn": min(a / b for a, b in zip(times[False], times[True]))}


def layers_model(count: int = 5, width: int = 16):
    """``count`` layers (a weight and a bias each, alternately on tasks A and B) and a step that
    runs them and nudges every variable: ``(variables, step)``."""
    rng = np.random.default_rng(0)
    variables = []
    for index in range(count):
        with flowjit.device(A if index % 2 == 0 else B):
            variables.append(flowjit.Variable(rng.normal(0, 0.5, (width, width)).astype(np.float32),
                                              name=f"bench_layer{index}_w"))
            variables.append(flowjit.Variable(np.zeros(width, np.float32), name=f"bench_layer{index}_b"))

    def step(x):
        h = x
        for index in range(count):
            w, b = variables[2 * index], variables[2 * index + 1]
            with flowjit.device(A if index % 2 == 0 else B):
                out = np.tanh(h @ w + b)
            w.assign(w * 0.99 + (h.T @ out) * (0.01 / len(x)))
            b.assign(b * 0.99 + out.mean(axis=0) * 0.01)
            h = out
        return (h * h).mean()
    return variables, step


def recovery(cluster, directory: str) -> dict:
    """Restart + restore + re-register + one step of a 10-variable model after a task is killed."""
    variables, fun = layers_model()
    jitted = flowjit.jit(fun, devices=cluster, step_timeout_s=30)
    x = np.random.default_rng(1).normal(size=(8, 16)).astype(np.float32)
    for _ in range(3):
        jitted(x)
    checkpoint = flowjit.Checkpoint(variables)
    checkpoint.save(directory, 3)
    expected = float(jitted(x))                          # step 4, without a fault
    os.kill(cluster.pids()[B], signal.SIGKILL)
    try:
        jitted(x)
        raise AssertionError("the killed task went unnoticed")
    except flowjit.ClusterError as error:
        failure = error
    started = time.perf_counter()
    restarted = cluster.recover(failure)
    after_restart = time.perf_counter()
    restored = checkpoint.restore(directory)
    after_restore = time.perf_counter()
    got = float(jitted(x))                               # step 4 again: registers with the new task first
    done = time.perf_counter()
    assert restarted == [B] and restored.step == 3 and got == expected, (restarted, restored.step, got, expected)
    return {"variables": len(variables), "restart_s": after_restart - started,
            "restore_s": after_restore - after_restart,
            "reregister_and_step_s": done - after_restore, "total_s": done - started}


def report(results: dict) -> str:
    lines = ["hosts (local Ray cluster, 2 worker tasks, one process each)"]
    for name, figures in results.items():
        lines.append(f"  {name}: " + ", ".join(f"{key} {value:.3g}" for key, value in figures.items()))
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    results = run(args.steps)
    print(report(results))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
