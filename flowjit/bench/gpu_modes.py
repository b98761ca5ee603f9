"""flowjit bench's GPU modes: the same workloads on an NVIDIA GPU, flowjit against its peers.

- ``gpu-fused`` / ``gpu-unfused``: ``flowjit.jit(..., devices=["gpu:0"])`` with and without
  fusion, called on CuPy arrays (results stay on the device, as jax.jit's do);
- ``cupy``: the workload written against CuPy, one kernel per op (eager);
- ``cupy-kernel``: the workload's one-expression form (``Workload.numexpr``) as a single CuPy
  ``ElementwiseKernel``, where it has one: a hand-fused peer;
- ``torch-gpu``: ``torch.compile`` on CUDA tensors.

(``jax`` runs on the GPU wherever jax sees one.)  Every call ends with the device
synchronised, so a time covers the work and not only its launch.  The bound of an
elementwise workload on the GPU is its bytes over a device-to-device copy's bandwidth,
measured in the same run.
"""

from __future__ import annotations

import os
import time

import numpy as np

GPU_MODES = ("gpu-fused", "gpu-unfused", "cupy", "cupy-kernel", "torch-gpu")


def gpu_unavailable() -> str | None:
    """None if CuPy sees a GPU here (not numba's simulator), else why not."""
    from flowjit.gpu import simulated
    if simulated():
        return "NUMBA_ENABLE_CUDASIM is set (the GPU modes time a real GPU)"
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() == 0:
            return "CuPy sees no GPU"
    except Exception as error:
        return f"CuPy sees no GPU ({type(error).__name__}: {str(error)[:80]})"
    return None


def synchronize() -> None:
    import cupy
    cupy.cuda.get_current_stream().synchronize()


def make_gpu_callable(mode: str, workload, args):
    """The callable of a GPU mode over the workload's numpy arguments (copied to the device once)."""
    if mode in ("gpu-fused", "gpu-unfused", "cupy", "cupy-kernel"):
        import cupy
        device_args = [cupy.asarray(a) for a in args]
    if mode in ("gpu-fused", "gpu-unfused"):
        import flowjit
        from flowjit.bench.workloads import NumpyOps
        ops = NumpyOps()
        jitted = flowjit.jit(lambda *a: workload.function(ops, *a), devices=["gpu:0"], fuse=(mode == "gpu-fused"))

        def call():
            result = jitted(*device_args)
            synchronize()
            return result
        return call
    if mode == "cupy":
        from flowjit.bench.workloads import NumpyOps
        ops = NumpyOps(cupy)

        def call():
            result = workload.function(ops, *device_args)
            synchronize()
            return result
        return call
    if mode == "cupy-kernel":
        if workload.numexpr is None or len(args) != 1:
            raise LookupError("not expressible as one elementwise expression")
        kernel = cupy.ElementwiseKernel("T x", "T y", f"y = {workload.numexpr}", f"flowjit_bench_{workload.name}")

        def call():
            result = kernel(device_args[0])
            synchronize()
            return result
        return call
    if mode == "torch-gpu":
        import torch
        if not torch.cuda.is_available():
            raise LookupError("torch sees no GPU")
        from flowjit.bench.workloads import TorchOps
        ops = TorchOps()
        tensors = [torch.from_numpy(a).cuda() for a in args]
        compiled = torch.compile(lambda *a: workload.function(ops, *a))

        def call():
            result = compiled(*tensors)
            torch.cuda.synchronize()
            return result
        return call
    raise ValueError(mode)


def launch_paths(calls: int = 2000) -> dict:
    """Microseconds per call of a cached one-kernel program on 16 elements (CuPy in, CuPy out,
    synchronised) through each launch path, beside a CuPy ``ElementwiseKernel`` and CuPy's eager
    ops: what ``flowjit.jit`` adds to a launch.  Each path in a fresh backend."""
    import cupy

    import flowjit
    from flowjit.compiler.codegen import cuda
    x = cupy.asarray(np.linspace(-1, 1, 16, dtype=np.float32))
    expression = "((x*2+1)*x-3)/(x*x+1)"
    times = {}

    def timed(call) -> float:
        for _ in range(20):
            call()
        synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            call()
        synchronize()
        return (time.perf_counter() - start) / calls * 1e6

    for path in ("raw", "cupy", "dispatcher"):
        os.environ["FLOWJIT_CUDA_LAUNCH"] = path
        cuda._BACKENDS.clear()
        jitted = flowjit.jit(lambda x: ((x * 2 + 1) * x - 3) / (x * x + 1), devices=["gpu:0"], cache_dir=None)
        times[f"flowjit ({path} launch)"] = timed(lambda: jitted(x))
    os.environ.pop("FLOWJIT_CUDA_LAUNCH")
    cuda._BACKENDS.clear()
    kernel = cupy.ElementwiseKernel("T x", "T y", f"y = {expression}", "flowjit_dispatch_chain")
    times["cupy ElementwiseKernel"] = timed(lambda: kernel(x))
    times["cupy eager (5 kernels)"] = timed(lambda: ((x * 2 + 1) * x - 3) / (x * x + 1))
    try:
        import jax
        compiled = jax.jit(lambda x: ((x * 2 + 1) * x - 3) / (x * x + 1))
        jx = jax.device_put(np.linspace(-1, 1, 16, dtype=np.float32))
        times["jax.jit"] = timed(lambda: compiled(jx).block_until_ready())
    except ImportError:
        pass
    return times


def row_kernel_sweep(names=("softmax", "layernorm"), size: int = 1 << 26, repeat: int = 20,
                     threads=(64, 128), unrolls=(1, 2, 4)) -> None:
    """Median ms of the row workloads' gpu-fused kernels for each FLOWJIT_CUDA_ROW_THREADS and
    FLOWJIT_CUDA_ROW_UNROLL, beside jax.jit: how many threads a row of 1024 wants, and how many
    of its elements a thread should take per trip."""
    import statistics

    from flowjit.bench.harness import make_callable
    from flowjit.bench.workloads import WORKLOADS
    from flowjit.compiler.codegen import cuda
    rng = np.random.default_rng(0)

    def median_ms(call) -> float:
        for _ in range(3):
            call()
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1e3

    for name in names:
        workload = WORKLOADS[name]
        args = workload.make(size, rng)
        print(f"{name}: jax.jit {median_ms(make_callable('jax', workload, args)):.3f} ms", flush=True)
        for unroll in unrolls:
            line = []
            for count in threads:
                os.environ["FLOWJIT_CUDA_ROW_THREADS"], os.environ["FLOWJIT_CUDA_ROW_UNROLL"] = str(count), str(unroll)
                cuda._BACKENDS.clear()
                line.append(f"{count}: {median_ms(make_callable('gpu-fused', workload, args)):.3f}")
            print(f"  unroll {unroll}, threads " + "  ".join(line) + " ms", flush=True)
    os.environ.pop("FLOWJIT_CUDA_ROW_THREADS", None)
    os.environ.pop("FLOWJIT_CUDA_ROW_UNROLL", None)


FIRST_CALL = """
import time
start = time.perf_counter()
import numpy as np
import flowjit
f = flowjit.jit(lambda x: ((x * 2 + 1) * x - 3) / (x * x + 1), devices=["gpu:0"])
f(np.linspace(-1, 1, 16, dtype=np.float32))
print(time.perf_counter() - start)
"""


def first_calls(runs: int = 3) -> list[tuple[float, float]]:
    """A fresh process's first call of a one-kernel program on gpu:0 with a warm kernel cache (a
    cache directory the first, uncounted, process filled): for each run, seconds from before
    ``import flowjit`` to the result, and the whole process's wall time."""
    import subprocess
    import sys
    import tempfile
    results = []
    with tempfile.TemporaryDirectory(prefix="flowjit-first-call-") as cache:
        environment = dict(os.environ, FLOWJIT_CACHE_DIR=cache)
        for run in range(runs + 1):
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", FIRST_CALL], env=environment, capture_output=True,
                                  text=True, check=True, timeout=300)
            if run:
                results.append((float(done.stdout.split()[-1]), time.perf_counter() - start))
    return results


if __name__ == "__main__":
    import sys
    if sys.argv[1:] == ["rows"]:
        row_kernel_sweep()
    elif sys.argv[1:] == ["first"]:
        for inside, wall in first_calls():
            print(f"first call with a warm cache: {inside:.3f} s from import flowjit, {wall:.3f} s the whole process")
    else:
        for name, microseconds in launch_paths().items():
            print(f"{name:<32}{microseconds:8.1f} us per call")
