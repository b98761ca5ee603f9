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


def per_call_ms(call, synchronize_all, repeat: int = 15, back_to_back: int = 40) -> tuple[float, float]:
    """Milliseconds per call: the median of ``repeat`` calls each ending with the device
    synchronised (what the bench reports: the call's host cost included), and the mean of
    ``back_to_back`` calls issued in a row then synchronised once (the device's throughput)."""
    import statistics
    for _ in range(3):
        call()
    synchronize_all()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        synchronize_all()
        times.append(time.perf_counter() - start)
    start = time.perf_counter()
    for _ in range(back_to_back):
        call()
    synchronize_all()
    return statistics.median(times) * 1e3, (time.perf_counter() - start) / back_to_back * 1e3


def kernel_sweep(print_line=print) -> dict:
    """The CUDA kernels' settings against jax.jit on the same arrays (CuPy in, CuPy out): loop
    kernels (chain, gelu at 64M float32, black_scholes at 16M float64) at 1, 2 and 4 elements a
    trip (``FLOWJIT_CUDA_LOOP_UNROLL``), fused and unfused; row kernels (softmax, layernorm, 64M
    float32 in rows of 1024) at 64, 128 and 256 threads a row with the row in registers, and at 64
    read again by each pass (``FLOWJIT_CUDA_ROW_THREADS``, ``FLOWJIT_CUDA_ROW_SLOTS``); the other
    reduce layouts (``REDUCTIONS``: column blocks, whole and split, a thread per short row, a
    whole-array argmax) against jax.jit and CuPy, their results checked against CuPy's; a
    device-to-device copy of 64M float32 for the bound.  Returns name -> ``per_call_ms``."""
    import cupy

    import flowjit
    from flowjit.bench.workloads import WORKLOADS, JaxOps, NumpyOps
    from flowjit.compiler.codegen import cuda
    rng, results = np.random.default_rng(0), {}

    def device_synchronize():
        cupy.cuda.runtime.deviceSynchronize()

    def report(key, call, synchronize_all=device_synchronize):
        results[key] = per_call_ms(call, synchronize_all)
        print_line(f"{key:<42} synchronised {results[key][0]:.4f} ms  back to back {results[key][1]:.4f} ms")

    def flowjit_call(name, args, settings, fuse=True):
        saved = {key: os.environ.get(key) for key in settings}
        os.environ.update(settings)
        try:
            cuda._BACKENDS.clear()
            ops, workload = NumpyOps(), WORKLOADS[name]
            jitted = flowjit.jit(lambda *a: workload.function(ops, *a), devices=["gpu:0"], fuse=fuse, cache_dir=None)
            jitted(*args)                     # (compiled under the settings)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key)
                else:
                    os.environ[key] = value
        return lambda: jitted(*args)

    def jax_run(name, host):
        import jax
        ops, workload, box = JaxOps(), WORKLOADS[name], [None]
        arrays = [jax.device_put(a) for a in host]
        compiled = jax.jit(lambda *a: workload.function(ops, *a))

        def call():
            box[0] = compiled(*arrays)
        report(f"{name} jax", call, lambda: box[0].block_until_ready())

    def copy_bound():                        # (its 512 MB freed on return)
        source = cupy.ones(1 << 26, np.float32)
        target = cupy.empty_like(source)
        report("copy 64M float32", lambda: cupy.copyto(target, source))

    copy_bound()
    for name, size in (("chain", 1 << 26), ("gelu", 1 << 26), ("black_scholes", 1 << 24)):
        host = WORKLOADS[name].make(size, rng)
        args = [cupy.asarray(a) for a in host]
        for unroll in (1, 2, 4):
            settings = {"FLOWJIT_CUDA_LOOP_UNROLL": str(unroll)}
            report(f"{name} fused unroll {unroll}", flowjit_call(name, args, settings))
            if name != "black_scholes":
                report(f"{name} unfused unroll {unroll}", flowjit_call(name, args, settings, fuse=False))
        jax_run(name, host)
    for name in ("softmax", "layernorm"):
        host = WORKLOADS[name].make(1 << 26, rng)
        args = [cupy.asarray(a) for a in host]
        for threads, slots in ((64, 0), (64, 16), (128, 16), (256, 16)):
            settings = {"FLOWJIT_CUDA_ROW_THREADS": str(threads), "FLOWJIT_CUDA_ROW_SLOTS": str(slots)}
            report(f"{name} flowjit threads {threads} slots {slots}", flowjit_call(name, args, settings))
        jax_run(name, host)
    for name, (function, shape) in REDUCTIONS.items():
        reduction_sweep(name, function, shape, rng, report)
    return results


def _log_sum_exp(xp):
    return lambda x: xp.log(xp.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1))


# The reduce layouts besides rows (cuda_writer.py): name -> (function of an array module, shape).
REDUCTIONS = {
    "column sums 65536x1024 (split columns)": (lambda xp: lambda x: x.sum(axis=0), (1 << 16, 1 << 10)),
    "column sums 16Mx4 (few columns)": (lambda xp: lambda x: x.sum(axis=0), (1 << 24, 4)),
    "log-sum-exp 4M rows of 16 (a thread per row)": (_log_sum_exp, (1 << 22, 16)),
    "argmax 64M (shuffles)": (lambda xp: lambda x: xp.argmax(x), (1 << 26,)),
}


def reduction_sweep(name: str, function, shape: tuple, rng, report) -> None:
    """One of ``REDUCTIONS``: flowjit (on CuPy arrays), jax.jit and CuPy, float32."""
    import cupy

    import flowjit
    host = rng.standard_normal(shape, dtype=np.float32)
    x = cupy.asarray(host)
    jitted, eager = flowjit.jit(function(np), devices=["gpu:0"], cache_dir=None), function(cupy)
    np.testing.assert_allclose(cupy.asnumpy(jitted(x)), cupy.asnumpy(eager(x)), rtol=1e-4, atol=1e-3)
    report(f"{name} flowjit", lambda: jitted(x))
    report(f"{name} cupy", lambda: eager(x))
    import jax
    import jax.numpy as jnp
    compiled, device, box = jax.jit(function(jnp)), jax.device_put(host), [None]

    def call():
        box[0] = compiled(device)
    report(f"{name} jax", call, lambda: box[0].block_until_ready())


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
    if sys.argv[1:] == ["sweep"]:
        kernel_sweep(lambda line: print(line, flush=True))
    elif sys.argv[1:] == ["first"]:
        for inside, wall in first_calls():
            print(f"first call with a warm cache: {inside:.3f} s from import flowjit, {wall:.3f} s the whole process")
    else:
        for name, microseconds in launch_paths().items():
            print(f"{name:<32}{microseconds:8.1f} us per call")
