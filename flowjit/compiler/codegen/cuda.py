"""The CUDA backend: the kernel plans rendered as numba-cuda kernels (cuda_writer.py), compiled and
launched on a GPU, or on numba's CUDA simulator.

Rendering needs neither numba-cuda nor a GPU (``flowjit dump --stage kernels --devices gpu:0``
shows the source anywhere).  Compiling imports numba-cuda (``flowjit.gpu``).

What runs today (the first slice of issue 15): each kernel call takes the driver's host
arrays, copies them to the device, launches and copies its outputs back; a matmul runs on
CuPy (cuBLAS) where there is a GPU, on numpy under the simulator.  Launches go through
numba-cuda's dispatcher, or with ``FLOWJIT_CUDA_LAUNCH=raw`` through the PTX loaded into a
CuPy ``RawModule`` with packed arguments (cuda_launch.py; not yet measured on a GPU).  The
driver still holds host arrays between kernels; device-resident buffers and a persistent
PTX cache are next.
"""

from __future__ import annotations

import hashlib
import linecache
import threading

import numpy as np

from flowjit.compiler.codegen.backend import Backend
from flowjit.compiler.codegen.cache import CompiledKernel, canonical
from flowjit.compiler.codegen.cuda_launch import RawLauncher, raw_launch_requested
from flowjit.gpu import numba_cuda, simulated
from flowjit.compiler.codegen.cuda_writer import BLOCK, cuda_kernel_source
from flowjit.compiler.codegen.writer import KernelSource
from flowjit.compiler.ir.graph import Node
from flowjit.compiler.ir.plan import KernelKind
from flowjit.compiler.ir.types import compute_dtype

LOOP_THREADS = 256            # threads per block of a loop kernel
MAX_BLOCKS = 65535 * 32       # a grid-stride loop covers the rest


def _power_of_two_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


class Grid:
    """A kernel's launch configuration for its arguments, from the module's ``launch`` (the work):
    a loop kernel covers its elements (a grid-stride loop takes what MAX_BLOCKS leaves); a reduce
    kernel gets a block per row, its threads a power of two (the tree halves them)."""

    def __init__(self, work, reduce: bool):
        self.work, self.reduce = work, reduce

    def __call__(self, arrays) -> tuple[int, int]:
        units, row = self.work(*arrays)
        if self.reduce:
            return min(units, MAX_BLOCKS), min(BLOCK, _power_of_two_at_least(max(1, row)))
        threads = min(LOOP_THREADS, max(1, units))
        return min(MAX_BLOCKS, -(-units // threads)), threads


class Launcher:
    """Calls one kernel through numba-cuda's dispatcher (the simulator's, under it) on host
    (numpy) or device arrays: inputs go to the device, outputs come back into the host arrays."""

    def __init__(self, name: str, kernel, grid: Grid, inputs: int):
        self.name, self.kernel, self.grid, self.inputs = name, kernel, grid, inputs

    def __call__(self, *arrays) -> None:
        blocks, threads = self.grid(arrays)
        if blocks == 0:
            return
        cuda = numba_cuda()
        device, copies = [], []
        for index, array in enumerate(arrays):
            if hasattr(array, "__cuda_array_interface__"):
                device.append(array)
            elif index < self.inputs:
                device.append(cuda.to_device(np.ascontiguousarray(array)))
            else:
                buffer = cuda.device_array(array.shape, array.dtype)
                device.append(buffer)
                copies.append((buffer, array))
        self.kernel[blocks, threads](*device)
        for buffer, array in copies:
            buffer.copy_to_host(array)


def device_matmul(a, b, out) -> None:
    """``out[...] = a @ b``: cuBLAS through CuPy on a GPU, numpy under the simulator."""
    if simulated():
        np.matmul(a, b, out=out)
        return
    import cupy
    out[...] = cupy.matmul(cupy.asarray(a), cupy.asarray(b)).get()


def device_capability() -> tuple[int, int]:
    """The current GPU's compute capability (what its PTX targets)."""
    major, minor = numba_cuda().get_current_device().compute_capability
    return int(major), int(minor)


def signature(kernel: KernelSource):
    """numba-cuda's argument types of a kernel: arrays of the stored dtype (float16 lives in
    float32, 0-d arrays as shape (1,)), any layout."""
    from numba.core import types
    from numba.np.numpy_support import from_dtype
    return tuple(types.Array(from_dtype(compute_dtype(v.dtype)), max(1, v.type.rank), "A")
                 for v in kernel.inputs + kernel.outputs)


def module_namespace(kernel: KernelSource) -> dict:
    """The kernel module executed (with its lines in ``linecache``, for tracebacks)."""
    filename = f"<flowjit cuda kernel {kernel.name} {hashlib.sha256(kernel.source.encode()).hexdigest()[:12]}>"
    linecache.cache[filename] = (len(kernel.source), None, kernel.source.splitlines(True), filename)
    namespace: dict = {"__name__": f"flowjit_cuda_{kernel.name}"}
    numba_cuda()                 # (the compatibility shim runs before the module imports numba.cuda)
    exec(compile(kernel.source, filename, "exec"), namespace)
    return namespace


def ptx(kernel: KernelSource, cc: tuple[int, int]) -> str:
    """The kernel's PTX for compute capability ``cc`` (numba-cuda's ``compile_ptx``: NVVM, no GPU)."""
    cuda = numba_cuda()
    if simulated():
        raise RuntimeError("compile_ptx is not available under the CUDA simulator (NUMBA_ENABLE_CUDASIM=1)")
    text, _ = cuda.compile_ptx(module_namespace(kernel)["kernel"], signature(kernel), cc=cc)
    return text


class CudaBackend(Backend):
    """numba-cuda kernels for ``gpu:N`` (or the simulator), compiled once per source."""

    target = "cuda"

    def __init__(self):
        self.kernels: dict[str, CompiledKernel] = {}
        self.lock = threading.Lock()

    def render(self, node: Node) -> KernelSource:
        return cuda_kernel_source(node)

    def compile(self, kernel: KernelSource) -> CompiledKernel:
        key = hashlib.sha256(canonical(kernel.source).encode()).hexdigest()
        with self.lock:
            if key not in self.kernels:
                namespace = module_namespace(kernel)
                grid = Grid(namespace["launch"], kernel.kind is KernelKind.REDUCE)
                if raw_launch_requested() and not simulated():
                    launcher = RawLauncher(kernel.name, ptx(kernel, device_capability()), grid, len(kernel.inputs))
                else:
                    launcher = Launcher(kernel.name, numba_cuda().jit(namespace["kernel"]), grid, len(kernel.inputs))
                self.kernels[key] = CompiledKernel(kernel.name, key, kernel.source, launcher, launcher)
            return self.kernels[key]

    matmul = staticmethod(device_matmul)
