"""The CUDA backend: the kernel plans rendered as numba-cuda kernels (cuda_writer.py), compiled and
launched on a GPU, or on numba's CUDA simulator.

Rendering needs neither numba-cuda nor a GPU (``flowjit dump --stage kernels --devices gpu:0``
shows the source anywhere).  Compiling a PTX imports numba-cuda (``flowjit.gpu``), as do the
simulator and ``FLOWJIT_CUDA_LAUNCH=dispatcher``; a kernel whose PTX is in the cache directory
loads neither numba nor numba-cuda (~0.4 s of a fresh process's first call): its key is its
canonical source and its argument types as text, the grid comes from the module's host code
executed without its device code (``host_namespace``), the toolchain's versions from package
metadata and the compute capability from CuPy.

On a GPU the program's buffers live on the device (``resident``): the driver allocates,
views and concatenates CuPy arrays from CuPy's memory pool, numpy arguments are copied in
once and the results copied back once (device arguments -- CuPy, torch, jax, anything with
``__cuda_array_interface__`` or DLPack -- are used in place and the results stay CuPy
arrays), and a matmul is cuBLAS through CuPy.  Each kernel is compiled with ``compile_ptx``
for the device's compute capability (the PTX kept in the kernel cache directory, so a fresh
process compiles nothing it has seen), loaded once as a CUDA module through CuPy and launched
with its arguments packed by numba's array ABI (cuda_launch.py); ``FLOWJIT_CUDA_LAUNCH=
dispatcher`` launches through numba-cuda's dispatcher instead.  Library ops (scans,
gathers) run on the host, their operands copied across.

Under the simulator (``NUMBA_ENABLE_CUDASIM=1``) buffers are host arrays and each kernel
call copies its arrays through the simulator's dispatcher.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import linecache
import os
import threading

import numpy as np

from flowjit.compiler.codegen.backend import Backend
from flowjit.compiler.codegen.compiled import CompiledKernel, canonical
from flowjit.compiler.codegen.cuda_launch import RawLauncher, launch_path
from flowjit.compiler.codegen.cuda_shape import BLOCK, ROW_THREADS, row_threads, threads_for_row
from flowjit.compiler.codegen.cuda_writer import cuda_kernel_source
from flowjit.files import write_atomically
from flowjit.gpu import device_array, is_device_array, numba_cuda, order_after, simulated, to_host
from flowjit.compiler.codegen.writer import KernelSource
from flowjit.compiler.ir.graph import Node
from flowjit.compiler.ir.plan import KernelKind
from flowjit.compiler.ir.types import compute_dtype

LOOP_THREADS = 256            # threads per block of a loop kernel
MAX_BLOCKS = 65535 * 32       # a grid-stride loop covers the rest
RESIDENT_THREADS = 2048       # threads one multiprocessor holds at once (sm_70 to sm_90)


def multiprocessors(index: int) -> int:
    """GPU ``index``'s multiprocessor count."""
    import cupy
    return int(cupy.cuda.Device(index).attributes["MultiProcessorCount"])


class Grid:
    """A kernel's launch configuration for its arguments, from the module's ``launch`` (the work):
    a loop kernel covers its elements with blocks of LOOP_THREADS; a reduce kernel gets a block
    per row, its threads a power of two, whole warps (its reductions shuffle within them), at
    most ``row_threads`` and the module's ``MAX_THREADS`` (argmax's tree in shared memory).
    The grid is one wave: as many blocks as the GPU's multiprocessors (``sms``) hold at once,
    ``resident(threads)`` each -- the driver's occupancy for the compiled kernel, whose registers
    (a row kept in them) and shared memory may hold fewer than ``RESIDENT_THREADS`` -- since more
    only repeat the per-thread set-up that the grid-stride loops amortise, and blocks beyond
    what fits wait for a second, partial wave.  Without ``sms`` (the simulator) up to
    MAX_BLOCKS.  The configurations of the last few works
    are kept (a call then costs ``launch`` and a look-up)."""

    KEPT = 16

    def __init__(self, work, reduce: bool, sms: int | None = None, row_threads: int = ROW_THREADS,
                 max_threads: int = BLOCK, parts: tuple[int, int, int] | None = None):
        self.work, self.reduce, self.sms, self.parts = work, reduce, sms, parts
        self.row_threads = min(row_threads, max_threads)
        self.max_threads = max_threads
        self.sizes: dict[tuple[int, int], tuple[int, int]] = {}
        self.resident = lambda threads: RESIDENT_THREADS // threads     # (the launcher's occupancy, once loaded)

    def blocks(self, threads: int) -> int:
        return MAX_BLOCKS if self.sms is None else self.sms * max(1, self.resident(threads))

    def size(self, units: int, row: int) -> tuple[int, int]:
        """Blocks and threads for ``units`` elements (a loop kernel) or rows of ``row`` (a reduce kernel)."""
        if self.parts is not None:      # (the whole domain in parts: how many depends on its size alone)
            most, least, threads = self.parts
            return max(1, min(most, row // least)), threads_for_row(row, min(threads, self.max_threads))
        if self.reduce:
            threads = threads_for_row(row, self.row_threads)
            return min(units, self.blocks(threads)), threads
        threads = min(LOOP_THREADS, max(1, units))
        return min(self.blocks(threads), -(-units // threads)), threads

    def __call__(self, arrays) -> tuple[int, int]:
        work = self.work(*arrays)
        size = self.sizes.get(work)
        if size is None:
            size = self.size(*work)
            if len(self.sizes) >= self.KEPT:
                self.sizes.clear()
            self.sizes[work] = size
        return size


class PartBuffers:
    """Launches a kernel that reduces in parts (``KernelSource.part_buffers``) through
    ``launcher``, its part buffers appended: ``size`` elements of each dtype, then ``counts``
    counts of blocks done (int32: one for a whole-domain reduction, one per group of columns
    for split columns), zeroed before every launch.  On a GPU the buffers are kept per stream
    (launches on one stream run in order); under the simulator each launch gets new ones."""

    def __init__(self, launcher, dtypes: tuple, size: int, resident: bool, counts: int = 1):
        self.launcher, self.dtypes, self.size, self.resident, self.counts = launcher, dtypes, size, resident, counts
        self.grid = launcher.grid
        self.kept: dict[int, list] = {}

    def __call__(self, *arrays) -> None:
        if not self.resident:             # (device arrays: the dispatcher's launcher would not copy outputs in)
            cuda = numba_cuda()
            buffers = [cuda.device_array(self.size, dtype) for dtype in self.dtypes[:-1]]
            return self.launcher(*arrays, *buffers, cuda.to_device(np.zeros(self.counts, np.int32)))
        import cupy
        stream = cupy.cuda.get_current_stream()
        buffers = self.kept.get(stream.ptr)
        if buffers is None:
            buffers = [cupy.empty(self.size, dtype) for dtype in self.dtypes[:-1]] + [cupy.zeros(self.counts, cupy.int32)]
            self.kept[stream.ptr] = buffers
        cupy.cuda.runtime.memsetAsync(buffers[-1].data.ptr, 0, 4 * self.counts, stream.ptr)
        self.launcher(*arrays, *buffers)


SIMULATOR_LOCK = threading.Lock()


class Launcher:
    """Calls one kernel through numba-cuda's dispatcher (the simulator's, under it) on host
    (numpy) or device arrays: inputs go to the device, outputs come back into the host arrays.
    With ``on_current_stream`` (a real GPU) it launches on CuPy's current stream, as the other
    launch paths do (numba's own default stream would not be ordered with it).  ``serial``
    (the simulator): one launch at a time in the process -- the simulator swaps ``cuda`` in a
    kernel's globals around each launch, so two simulated GPUs' workers launching at once
    would see each other's threads."""

    def __init__(self, name: str, kernel, grid: Grid, inputs: int, on_current_stream: bool = False,
                 serial: bool = False):
        self.name, self.kernel, self.grid, self.inputs = name, kernel, grid, inputs
        self.on_current_stream = on_current_stream
        self.lock = SIMULATOR_LOCK if serial else contextlib.nullcontext()

    def __call__(self, *arrays) -> None:
        blocks, threads = self.grid(arrays)
        if blocks == 0:
            return
        cuda = numba_cuda()
        device, copies = [], []
        for index, array in enumerate(arrays):
            if not isinstance(array, np.ndarray):          # (a device array: CuPy's, numba's, the simulator's)
                device.append(array)
            elif index < self.inputs:
                device.append(cuda.to_device(np.ascontiguousarray(array)))
            else:
                buffer = cuda.device_array(array.shape, array.dtype)
                device.append(buffer)
                copies.append((buffer, array))
        if self.on_current_stream:
            import cupy
            self.kernel[blocks, threads, cuda.external_stream(cupy.cuda.get_current_stream().ptr)](*device)
        else:
            with self.lock:
                self.kernel[blocks, threads](*device)
        for buffer, array in copies:
            buffer.copy_to_host(array)


def resident_matmul(a, b, out) -> None:
    """``out[...] = a @ b`` on CuPy arrays: cuBLAS, into the driver's buffer."""
    import cupy
    cupy.matmul(a, b, out=out)


def device_capability(index: int) -> tuple[int, int]:
    """GPU ``index``'s compute capability (what its PTX targets), as CuPy, which launches it, sees it."""
    import cupy
    capability = cupy.cuda.Device(index).compute_capability          # ("90": 9.0)
    return int(capability[:-1]), int(capability[-1])


def argument_types(kernel: KernelSource) -> list[tuple[np.dtype, int]]:
    """The dtype and rank of each argument of a kernel as compiled: arrays of the stored dtype
    (float16 lives in float32), 0-d arrays as shape (1,)."""
    return ([(compute_dtype(v.dtype), max(1, v.type.rank)) for v in kernel.inputs + kernel.outputs]
            + [(np.dtype(dtype), 1) for dtype in kernel.part_buffers])


def signature(kernel: KernelSource):
    """numba-cuda's argument types of a kernel: ``argument_types``, any layout."""
    from numba.core import types
    from numba.np.numpy_support import from_dtype
    return tuple(types.Array(from_dtype(dtype), rank, "A") for dtype, rank in argument_types(kernel))


def kernel_key(kernel: KernelSource) -> str:
    """The compiled kernel's key: its code and its argument types (a source may not name its
    dtypes -- x > y -- and the PTX is compiled for one signature, where numba's dispatcher
    compiled one per argument types)."""
    types = " ".join(f"{dtype.name}[{rank}d]" for dtype, rank in argument_types(kernel))
    return hashlib.sha256(f"{canonical(kernel.source)}\n{types}".encode()).hexdigest()


def _executed(kernel: KernelSource, code) -> dict:
    """``code`` -- the kernel module's source, or its tree with statements left out -- executed as
    the module, with the module's lines in ``linecache`` (for tracebacks)."""
    filename = f"<flowjit cuda kernel {kernel.name} {hashlib.sha256(kernel.source.encode()).hexdigest()[:12]}>"
    linecache.cache[filename] = (len(kernel.source), None, kernel.source.splitlines(True), filename)
    namespace: dict = {"__name__": f"flowjit_cuda_{kernel.name}"}
    exec(compile(code, filename, "exec"), namespace)
    return namespace


def module_namespace(kernel: KernelSource) -> dict:
    """The kernel module executed: its device code (``kernel``) for numba-cuda, and its host code."""
    numba_cuda()                 # (the compatibility shim runs before the module imports numba.cuda)
    return _executed(kernel, kernel.source)


DEVICE_MODULES = ("numba", "numba_cuda", "flowjit.compiler.codegen.cuda_library")    # numba-cuda; ``fj`` over it


def _host_statement(statement: ast.stmt) -> bool:
    """Whether a statement of a kernel module is host code: not the ``kernel`` function, nor an
    import of numba-cuda or of the device functions (``fj``)."""
    if isinstance(statement, ast.FunctionDef):
        return statement.name != "kernel"
    if isinstance(statement, ast.Import):
        names = [alias.name for alias in statement.names]
    elif isinstance(statement, ast.ImportFrom):
        names = [f"{statement.module}.{alias.name}" for alias in statement.names]
    else:
        return True
    return not any(name == module or name.startswith(f"{module}.") for name in names for module in DEVICE_MODULES)


def host_namespace(kernel: KernelSource) -> dict:
    """The kernel module's host code executed alone -- ``launch`` and ``MAX_THREADS``, what the
    grid needs -- so that launching a cached PTX imports no numba-cuda (its lines keep their
    numbers in the module, for tracebacks)."""
    tree = ast.parse(kernel.source)
    tree.body = [statement for statement in tree.body if _host_statement(statement)]
    return _executed(kernel, tree)


def ptx(kernel: KernelSource, cc: tuple[int, int]) -> str:
    """The kernel's PTX for compute capability ``cc`` (numba-cuda's ``compile_ptx``: NVVM, no GPU)."""
    cuda = numba_cuda()
    if simulated():
        raise RuntimeError("compile_ptx is not available under the CUDA simulator (NUMBA_ENABLE_CUDASIM=1)")
    text, _ = cuda.compile_ptx(module_namespace(kernel)["kernel"], signature(kernel), cc=cc)
    return text


@functools.lru_cache(maxsize=None)
def toolchain_key() -> str:
    """What a kernel's PTX depends on besides its source and compute capability: the versions of
    numba and numba-cuda, from their installed metadata (importing them would take ~0.4 s)."""
    from importlib import metadata

    def version(package: str) -> str:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return "?"
    return f"numba {version('numba')} numba-cuda {version('numba-cuda')}"


class CudaBackend(Backend):
    """numba-cuda kernels for ``gpu:index`` (or the simulator), compiled once per source; on a
    GPU the PTX is kept under ``cache_dir``/cuda (None: in memory only).

    A CUDA module lives in the context of the GPU it was loaded on, and so do CuPy's buffers:
    each GPU of the process has a backend of its own (``cuda_backend``), which loads its
    modules, sizes its grids and runs its programs with its GPU current (``device``, a CuPy
    ``Device``, entered by ``Executable`` around a call).  Under the simulator every ``gpu:N``
    is the one simulated GPU, and ``device`` does nothing."""

    target = "cuda"

    def __init__(self, cache_dir: str | None = None, index: int = 0):
        self.kernels: dict[str, CompiledKernel] = {}
        self.lock = threading.Lock()
        self.cache_dir, self.index = cache_dir, index
        self.resident = not simulated()
        if self.resident:                    # (the simulator's matmul: numpy's, the driver's default)
            import cupy
            from cupy_backends.cuda.api.runtime import getDevice
            self.xp, self.matmul = cupy, resident_matmul
            self.device = cupy.cuda.Device(index)
            self.is_current = lambda: getDevice() == index

    def render(self, node: Node) -> KernelSource:
        return cuda_kernel_source(node)

    # -- arguments and results ------------------------------------------------------------------------
    def accept(self, arrays: tuple) -> tuple[tuple, bool]:
        """The arguments on this backend's GPU (called with it current): numpy arrays copied
        in, device arrays in place where they are on it, copied across from another GPU."""
        ndarray, index = self.xp.ndarray, self.index
        for array in arrays:
            if type(array) is not ndarray or array.data.device_id != index:
                break
        else:
            if arrays:
                return arrays, True             # (CuPy arrays on this GPU, the common case: as they are)
        on_device = False
        moved = []
        for array in arrays:
            if is_device_array(array):
                array = device_array(array)
                moved.append(array if array.data.device_id == index else self.from_other_gpu(array))
                on_device = True
            else:
                moved.append(self.xp.asarray(array))
        return tuple(moved), on_device

    def from_other_gpu(self, array):
        """``array``, on another GPU, copied to this one (current): made contiguous there (CuPy
        copies only contiguous arrays between GPUs), after what the caller issued on that GPU's
        current stream (an event there, waited on here), and waited for, so that nothing on
        either GPU reuses its memory mid-copy (a rare path: the caller handed over another
        GPU's arrays)."""
        cupy, source_gpu = self.xp, array.data.device_id
        with cupy.cuda.Device(source_gpu):
            source = cupy.ascontiguousarray(array)
        stream = cupy.cuda.get_current_stream()
        order_after(source_gpu, stream)
        copied = cupy.copy(source)
        stream.synchronize()
        return copied

    def built(self) -> None:
        """A program was built with this GPU current: its constants, copied in on the current
        stream, are there before any stream's kernels read them."""
        if self.resident:
            self.xp.cuda.get_current_stream().synchronize()

    def deliver(self, results: list, on_device: bool) -> list:
        if on_device:
            return results
        return [result.get() for result in results]

    def library_call(self, node: Node, parallel: bool):
        """A library op on the host: its operands copied back, its result copied across."""
        call = super().library_call(node, parallel)
        if not self.resident:
            return call
        import cupy

        def on_host(*arrays):
            if getattr(call, "writes_into", False):
                *operands, out = arrays
                result = np.empty(out.shape, out.dtype)
                call(*[to_host(a) for a in operands], result)
                out.set(result)
                return out
            return cupy.asarray(call(*[to_host(a) for a in arrays]))
        on_host.__name__ = f"host_{getattr(call, '__name__', node.op.name)}"
        on_host.writes_into = getattr(call, "writes_into", False)
        return on_host

    # -- compiling --------------------------------------------------------------------------------
    def ptx(self, kernel: KernelSource, key: str, cc: tuple[int, int]) -> str:
        """The kernel's PTX for ``cc``: from the cache directory, else compiled and kept there."""
        if self.cache_dir is None:
            return ptx(kernel, cc)
        name = hashlib.sha256(f"{key} sm_{cc[0]}{cc[1]} {toolchain_key()}".encode()).hexdigest()[:32]
        path = os.path.join(self.cache_dir, "cuda", f"{kernel.name}-{name}.ptx")
        try:
            with open(path) as stream:
                text = stream.read()
            if ".entry" in text:
                return text
        except OSError:
            pass
        text = ptx(kernel, cc)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_atomically(path, text)         # (whole or absent: never a half-written entry)
        except OSError:
            pass                                 # a read-only cache: compiled again next time
        return text

    def compile(self, kernel: KernelSource) -> CompiledKernel:
        key = kernel_key(kernel)
        with self.lock, self.device:           # (a module is loaded into the current GPU's context)
            if key not in self.kernels:
                namespace = host_namespace(kernel)
                reduce = kernel.kind is KernelKind.REDUCE and not namespace.get("THREAD_ROWS")
                grid = Grid(namespace["launch"], reduce, multiprocessors(self.index) if self.resident else None,
                            namespace.get("ROW_THREADS", row_threads()), namespace.get("MAX_THREADS", BLOCK),
                            namespace.get("PARTS"))
                path = launch_path()
                if path != "dispatcher" and self.resident:
                    launcher = RawLauncher(kernel.name, self.ptx(kernel, key, device_capability(self.index)), grid,
                                           packed=path == "raw")
                    grid.resident = launcher.resident
                else:
                    device_code = module_namespace(kernel)["kernel"]
                    launcher = Launcher(kernel.name, numba_cuda().jit(device_code), grid, len(kernel.inputs),
                                        on_current_stream=self.resident, serial=not self.resident)
                if kernel.part_buffers:          # (split columns: PART_SIZES; a whole-domain reduction: PARTS)
                    size, counts = namespace["PART_SIZES"] if "PART_SIZES" in namespace else (namespace["PARTS"][0], 1)
                    launcher = PartBuffers(launcher, kernel.part_buffers, size, self.resident, counts)
                self.kernels[key] = CompiledKernel(kernel.name, key, kernel.source, launcher, launcher)
            return self.kernels[key]


_BACKENDS: dict = {}
_BACKENDS_LOCK = threading.Lock()


def cuda_backend(cache_dir: str | None, index: int = 0) -> CudaBackend:
    """The CUDA backend of GPU ``index`` of this process for a kernel cache directory (one each,
    its loaded kernels shared by every program on that GPU)."""
    with _BACKENDS_LOCK:
        backend = _BACKENDS.get((cache_dir, index))
        if backend is None:
            backend = _BACKENDS[cache_dir, index] = CudaBackend(cache_dir, index)
        return backend
