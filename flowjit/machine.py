"""What this machine's CPU does, measured once: memory bandwidth, FLOP rate, launch cost.

The cost model (``flowjit.compiler.costmodel``) estimates a node on a CPU device from these
figures unless the device was given its own.  They are measured in about a second, the
first time placement or ``flowjit devices`` needs them, and kept in the kernel cache
directory (``machine.json``, written atomically) for every later process on the same
machine and toolchain; with the disk cache off they are measured once per process.

- bandwidth: ``a = b + c`` over float32 arrays of 32 MiB each (far larger than the
  caches), one thread, best of 5: bytes read and written per second.
- flops: a float32 512x512 by 512x512 matmul through numpy's BLAS, best of 5.
- launch: the fixed cost of calling a compiled kernel (a numba dispatcher call with an
  array argument, what the generated driver pays per kernel), best of 3 batches.
"""

from __future__ import annotations

import json
import os
import platform
import threading
import time
from dataclasses import asdict, dataclass

from flowjit.files import write_atomically

FILE_NAME = "machine.json"
BANDWIDTH_ELEMENTS = 1 << 23
MATMUL_SIZE = 512
LAUNCH_CALLS = 20000


@dataclass(frozen=True)
class MachineFigures:
    bandwidth: float            # bytes/s, one thread
    flops: float                # flop/s, BLAS matmul
    launch: float               # s per kernel call
    seconds: float = 0.0        # how long measuring took
    measured_at: str = ""       # UTC time of the measurement
    source: str = "measured"    # measured | cached (read from machine.json)


STATIC = MachineFigures(bandwidth=20e9, flops=50e9, launch=2e-6, source="static")


def fingerprint() -> dict:
    """What the figures depend on: the machine and the numerical toolchain."""
    import numba
    import numpy as np
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as stream:
            cpu = next((line.split(":", 1)[1].strip() for line in stream if line.startswith("model name")), cpu)
    except OSError:
        pass
    return {"host": platform.node(), "cpu": cpu, "cpus": os.cpu_count(), "machine": platform.machine(),
            "numpy": np.__version__, "numba": numba.__version__}


def _best(call, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def measure() -> MachineFigures:
    """Measure now (about a second)."""
    import numpy as np
    from numba import njit
    start = time.perf_counter()
    a, b, c = (np.ones(BANDWIDTH_ELEMENTS, np.float32) for _ in range(3))
    np.add(b, c, out=a)
    bandwidth = 3 * a.nbytes / _best(lambda: np.add(b, c, out=a), 5)
    del a, b, c
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((MATMUL_SIZE, MATMUL_SIZE)).astype(np.float32) for _ in range(2))
    x @ y
    flops = 2.0 * MATMUL_SIZE ** 3 / _best(lambda: x @ y, 5)

    @njit
    def kernel(array):
        return array.shape[0]
    small = np.ones(16, np.float32)
    kernel(small)

    def calls():
        for _ in range(LAUNCH_CALLS):
            kernel(small)
    launch = _best(calls, 3) / LAUNCH_CALLS
    return MachineFigures(bandwidth, flops, launch, time.perf_counter() - start,
                          time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))


_lock = threading.Lock()
_in_process: dict[str | None, MachineFigures] = {}


def machine_figures(cache_dir: str | None) -> MachineFigures:
    """The figures for this machine: from ``cache_dir/machine.json`` when it was written for
    this machine and toolchain, else measured now (and written there)."""
    with _lock:
        if cache_dir in _in_process:
            return _in_process[cache_dir]
        figures = _read(cache_dir) if cache_dir else None
        if figures is None:
            figures = measure()
            if cache_dir:
                _write(cache_dir, figures)
        _in_process[cache_dir] = figures
        return figures


def cache_path(cache_dir: str) -> str:
    return os.path.join(cache_dir, FILE_NAME)


def _read(cache_dir: str) -> MachineFigures | None:
    """The cached figures, or None when absent, unreadable or measured elsewhere (remeasured)."""
    try:
        with open(cache_path(cache_dir)) as stream:
            data = json.load(stream)
        if data.get("fingerprint") != fingerprint():
            return None
        figures = {key: data["figures"][key] for key in ("bandwidth", "flops", "launch", "seconds", "measured_at")}
        if not all(isinstance(figures[key], (int, float)) and figures[key] > 0
                   for key in ("bandwidth", "flops", "launch")):
            return None
        return MachineFigures(**figures, source="cached")
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write(cache_dir: str, figures: MachineFigures) -> None:
    """Atomically: a reader sees the old file or the whole new one, never half of it."""
    data = {"fingerprint": fingerprint(), "figures": {k: v for k, v in asdict(figures).items() if k != "source"}}
    try:
        os.makedirs(cache_dir, exist_ok=True)
        write_atomically(cache_path(cache_dir), json.dumps(data, indent=1))
    except OSError:
        return                      # a read-only cache directory: the figures live in this process only
