"""Multi-device benchmarks (issue 6): two independent branches on two CPU devices, and the
executor's overhead per node.

    python -m flowjit.bench.devices [--size 1024] [--repeat 7]

1. Two independent chains of matmuls + tanh, (n x n) float32, run on [cpu:0] with one
   thread, and on [cpu:0, cpu:1] with one thread each (the cost-model placer puts one
   chain on each).  BLAS is held to one thread per call (OPENBLAS_NUM_THREADS=1 and
   friends: BLAS reads them when it loads, so the module runs itself again in a fresh
   interpreter with them set when they are not), so a device's thread budget is what it
   uses.
2. A graph of 100 tiny unfused nodes in two independent chains of 50 on [cpu:0, cpu:1]:
   microseconds per node per call, through the whole executor (ready queues, the two
   device threads, completion).
Prints medians of ``--repeat`` runs and the ratios.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

import flowjit
from flowjit.devices import Device

BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def two_chains(a, b):
    for _ in range(4):
        a = np.tanh(a @ a) * 0.5
        b = np.tanh(b @ b) * 0.5
    return a, b


def tiny_chains(x, y):
    for _ in range(25):
        x = x * 1.0001
        y = y + 0.5
        x = x - 0.25
        y = y * 0.999
    return x, y


def median_time(function, args, repeat: int) -> float:
    function(*args)
    flowjit.wait_for_compiles()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((args.size, args.size)) / np.sqrt(args.size)).astype(np.float32)
    b = (rng.standard_normal((args.size, args.size)) / np.sqrt(args.size)).astype(np.float32)
    one = flowjit.jit(two_chains, devices=[Device.make("cpu:0", threads=1)])
    two = flowjit.jit(two_chains, devices=[Device.make("cpu:0", threads=1), Device.make("cpu:1", threads=1)])
    lowered = two.lower(a, b)
    placed = {node.device.rsplit("/", 1)[1] for node in lowered.placed.nodes if node.op.name == "matmul"}
    want = two_chains(a, b)
    for result in (one(a, b), two(a, b)):
        for got, expected in zip(result, want):
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    t1 = median_time(one, (a, b), args.repeat)
    t2 = median_time(two, (a, b), args.repeat)
    print(f"two branches of 4 x (matmul {args.size}x{args.size} + tanh), float32, one thread per device:")
    print(f"  [cpu:0]        {t1 * 1e3:8.1f} ms")
    print(f"  [cpu:0, cpu:1] {t2 * 1e3:8.1f} ms   (matmuls on {', '.join(sorted(placed))})")
    print(f"  speedup        {t1 / t2:8.2f}x  (target >= 1.6x)")

    x = np.ones(16, np.float32)
    tiny = flowjit.jit(tiny_chains, devices=["cpu:0", "cpu:1"], fuse=False, placement="random", placement_seed=1)
    lowered = tiny.lower(x, x)
    executable = lowered.multi_device_executable
    nodes = sum(1 for step in executable.steps if step.kind == "kernel" and step.node.op.name != "constant")
    spread = {step.device for step in executable.steps}
    transfers = sum(1 for step in executable.steps if step.kind == "send")
    np.testing.assert_allclose(tiny(x, x)[0], tiny_chains(x, x)[0], rtol=1e-5)
    per_call = median_time(tiny, (x, x), max(args.repeat, 51))
    print(f"executor overhead: {nodes} tiny nodes on {len(spread)} devices (+ {transfers} send/recv pairs, "
          f"{len(executable.steps) - nodes - 2 * transfers} constants):")
    print(f"  {per_call * 1e6:8.1f} µs per call, {per_call / nodes * 1e6:6.2f} µs per node, transfers "
          f"included  (target <= 20 µs)")
    return 0


def run_with_one_blas_thread(argv: list[str]) -> int:
    """BLAS reads its thread count when numpy loads it, which ``import flowjit`` has done by
    now: run again in a fresh interpreter with one BLAS thread unless that is already so."""
    if all(os.environ.get(name) == "1" for name in BLAS_THREAD_VARIABLES):
        return main(argv)
    env = dict(os.environ, **{name: "1" for name in BLAS_THREAD_VARIABLES})
    os.execve(sys.executable, [sys.executable, "-m", "flowjit.bench.devices", *argv], env)


if __name__ == "__main__":
    raise SystemExit(run_with_one_blas_thread(sys.argv[1:]))
