"""What a real GPU is and does, asked once: its name, memory, multiprocessors and compute
capability (CuPy's device properties), and three figures measured as the machine's CPU ones
are (machine.py):

- memory bandwidth: a device-to-device copy of a 256 MiB float32 array (bytes read and
  written per second, best of 5);
- FLOP rate: a float32 matmul through cuBLAS, 2048 x 2048 by 2048 (best of 5);
- launch cost: the host's time to issue one small kernel (a CuPy elementwise add on 16
  elements, the median of 5 rounds of 200 launches, issued back to back).

Kept in the kernel cache directory (``gpu-<index>.json``, written atomically) for every later
process on the same GPU, driver and CuPy; with the disk cache off, measured once per process.
The placer's cost model uses the three figures for ``gpu:<index>`` (devices.py), and ``flowjit
devices`` prints the rest.  None under numba's simulator or where CuPy sees no such GPU.
"""

from __future__ import annotations

import functools
import json
import os
import time
from dataclasses import dataclass

from flowjit.files import write_atomically

COPY_ELEMENTS = 1 << 26
MATMUL_SIZE = 2048
LAUNCHES = 200


@dataclass(frozen=True)
class GpuFigures:
    name: str
    memory: int                 # bytes
    multiprocessors: int
    capability: str             # "90": 9.0
    bandwidth: float            # bytes/s, device-to-device copy (read and written)
    flops: float                # float32 FLOP/s of a cuBLAS matmul
    launch: float               # seconds to issue one small kernel
    measured_at: str = ""
    source: str = "measured"    # measured | cached


def properties(index: int) -> dict:
    """CuPy's view of GPU ``index``: name, memory, multiprocessors, capability, driver."""
    import cupy
    device = cupy.cuda.Device(index)
    raw = cupy.cuda.runtime.getDeviceProperties(index)
    name = raw["name"].decode() if isinstance(raw["name"], bytes) else str(raw["name"])
    return {"name": name, "memory": int(raw["totalGlobalMem"]), "multiprocessors": int(raw["multiProcessorCount"]),
            "capability": str(device.compute_capability), "driver": cupy.cuda.runtime.driverGetVersion(),
            "cupy": cupy.__version__}


def _best_seconds(call, repeat: int) -> float:
    """The shortest of ``repeat`` + 1 runs of ``call`` (the first warms up: a library loads),
    each between two synchronisations of the current device."""
    from cupy.cuda import runtime
    best = float("inf")
    for _ in range(repeat + 1):
        runtime.deviceSynchronize()
        start = time.perf_counter()
        call()
        runtime.deviceSynchronize()
        best = min(best, time.perf_counter() - start)
    return best


def copy_bandwidth(index: int, repeat: int = 5) -> float:
    """Bytes read and written per second by a device-to-device copy on GPU ``index`` (through
    the runtime's own allocations: CuPy's pool keeps nothing of it)."""
    import cupy
    from cupy.cuda import runtime
    size = COPY_ELEMENTS * 4
    with cupy.cuda.Device(index):
        source, target = runtime.malloc(size), runtime.malloc(size)
        try:
            runtime.memset(source, 0, size)
            best = _best_seconds(lambda: runtime.memcpy(target, source, size, runtime.memcpyDeviceToDevice), repeat)
        finally:
            runtime.free(source)
            runtime.free(target)
    return 2 * size / best


def matmul_flops(index: int, repeat: int = 5) -> float:
    """float32 FLOP/s of a ``MATMUL_SIZE``-square matmul through cuBLAS on GPU ``index``."""
    import cupy
    n = MATMUL_SIZE
    with cupy.cuda.Device(index):
        a = cupy.ones((n, n), cupy.float32)
        out = cupy.empty((n, n), cupy.float32)
        best = _best_seconds(lambda: cupy.matmul(a, a, out=out), repeat)
    return 2 * n ** 3 / best


def launch_cost(index: int, rounds: int = 5) -> float:
    """Seconds the host takes to issue one small kernel on GPU ``index`` (issued back to
    back, the device synchronised between rounds only)."""
    import cupy
    with cupy.cuda.Device(index):
        x = cupy.ones(16, cupy.float32)
        out = cupy.empty_like(x)
        cupy.add(x, x, out=out)                     # (compiled and loaded before the clock starts)
        cupy.cuda.runtime.deviceSynchronize()
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            for _ in range(LAUNCHES):
                cupy.add(x, x, out=out)
            times.append((time.perf_counter() - start) / LAUNCHES)
            cupy.cuda.runtime.deviceSynchronize()
    return sorted(times)[len(times) // 2]


MEASURED = ("bandwidth", "flops", "launch")


def _path(cache_dir: str, index: int) -> str:
    return os.path.join(cache_dir, f"gpu-{index}.json")


@functools.lru_cache(maxsize=None)
def gpu_figures(index: int, cache_dir: str | None) -> GpuFigures | None:
    """GPU ``index``'s figures: from the cache directory when they were taken on this GPU with
    this driver and CuPy, else asked and measured now (and kept there).  None where no real
    GPU ``index`` is here."""
    import flowjit.gpu as gpu
    if gpu.simulated() or not gpu.available():
        return None
    try:
        known = properties(index)
    except Exception:                       # (no such GPU)
        return None
    fields = {key: known[key] for key in ("name", "memory", "multiprocessors", "capability")}
    if cache_dir is not None:
        try:
            with open(_path(cache_dir, index)) as stream:
                data = json.load(stream)
            measured = {key: float(data[key]) for key in MEASURED}
            if data.get("properties") == known and all(value > 0 for value in measured.values()):
                return GpuFigures(**fields, **measured, measured_at=str(data["measured_at"]), source="cached")
        except (OSError, ValueError, KeyError, TypeError):
            pass                            # absent, unreadable, older or another GPU's: measured again
    figures = GpuFigures(**fields, bandwidth=copy_bandwidth(index), flops=matmul_flops(index),
                         launch=launch_cost(index), measured_at=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    if cache_dir is not None:
        record = {"properties": known, **{key: getattr(figures, key) for key in MEASURED},
                  "measured_at": figures.measured_at}
        try:
            os.makedirs(cache_dir, exist_ok=True)
            write_atomically(_path(cache_dir, index), json.dumps(record, indent=1))
        except OSError:
            pass                            # a read-only cache directory: this process only
    return figures


def describe(figures: GpuFigures) -> str:
    """One line: name, memory, multiprocessors, capability, the measured figures and where
    they came from."""
    capability = f"{figures.capability[:-1]}.{figures.capability[-1]}"
    return (f"{figures.name}, {figures.memory / 2 ** 30:.1f} GiB, {figures.multiprocessors} multiprocessors, "
            f"compute capability {capability}; device-to-device copy {figures.bandwidth / 1e9:.0f} GB/s, "
            f"float32 matmul {figures.flops / 1e12:.1f} TFLOP/s, launch {figures.launch * 1e6:.1f} µs "
            f"({figures.source} {figures.measured_at})")


__all__ = ["GpuFigures", "gpu_figures", "describe"]
