"""The cheap launch path for a real GPU: numba-cuda's PTX, loaded once as a CUDA module through CuPy,
called with arguments packed by numba's array ABI.

numba-cuda's dispatcher costs ~67-119 us a launch (type checks, argument marshalling in
Python); the same PTX launched through CuPy with prepared arguments took ~9-38 us on an H100.
So a kernel is compiled with ``compile_ptx`` once for the device's compute capability, its
PTX loaded once, and each call only packs its arrays into the flat parameters numba's kernel
entry takes -- per array, in order::

    meminfo, parent, nitems, itemsize, data, shape[0..ndim), strides[0..ndim)   (all 64-bit)

(``entry_parameters`` reads the count back from the PTX; the tests check it for every golden
kernel.)  The default on a GPU; ``FLOWJIT_CUDA_LAUNCH=dispatcher`` launches through numba-cuda's
dispatcher instead.  Under the simulator kernels always run through the simulator's dispatcher.
"""

from __future__ import annotations

import os
import re
import struct
import tempfile
import threading

import numpy as np

ENTRY = re.compile(r"\.visible\s+\.entry\s+(\S+?)\(")
PARAMETER = re.compile(r"\.param\s+\.(\w+)\s+\S+_param_\d+")
FIELDS = 5                      # meminfo, parent, nitems, itemsize, data; then shape and strides


def launch_path() -> str:
    """``raw`` (the default: one packed parameter buffer), ``cupy`` (CuPy's Function call) or
    ``dispatcher`` (numba-cuda's): ``FLOWJIT_CUDA_LAUNCH``."""
    path = os.environ.get("FLOWJIT_CUDA_LAUNCH", "raw")
    if path not in ("raw", "cupy", "dispatcher"):
        raise ValueError(f"FLOWJIT_CUDA_LAUNCH={path!r}: expected raw, cupy or dispatcher")
    return path


def entry_parameters(ptx: str) -> tuple[str, list[str]]:
    """The kernel entry's name in the PTX and its parameters' types (``u64``...)."""
    match = ENTRY.search(ptx)
    if match is None:
        raise ValueError("no .entry in the PTX")
    close = ptx.index(")", match.end())
    return match.group(1), PARAMETER.findall(ptx[match.end():close])


def parameter_count(ranks: list[int]) -> int:
    """How many parameters numba's entry takes for arrays of these ranks."""
    return sum(FIELDS + 2 * rank for rank in ranks)


def fields(array, cupy_array: type | None = None) -> list[int]:
    """One device array as numba's kernel parameters, plain integers: an array of type
    ``cupy_array`` (CuPy's, which the resident driver passes) read through its attributes (the
    launch's hot path), any other through ``__cuda_array_interface__``."""
    if type(array) is cupy_array:
        return [0, 0, array.size, array.itemsize, array.data.ptr, *array.shape, *array.strides]
    interface = array.__cuda_array_interface__
    shape = tuple(interface["shape"])
    itemsize = np.dtype(interface["typestr"]).itemsize
    strides = interface.get("strides")
    if strides is None:                      # C-contiguous
        strides, step = [], itemsize
        for size in reversed(shape):
            strides.insert(0, step)
            step *= max(size, 1)
    return [0, 0, int(np.prod(shape, dtype=np.int64)), itemsize, interface["data"][0], *shape, *strides]


def pack(array, cupy_array: type | None = None) -> tuple:
    """``fields`` as the numpy scalars CuPy's ``Function`` call takes (64-bit each; the data
    pointer unsigned)."""
    values = fields(array, cupy_array)
    return tuple(np.uint64(value) if position in POINTERS else np.int64(value) for position, value in enumerate(values))


POINTERS = (0, 1, 4)                 # meminfo, parent, data


# cuLaunchKernel's ``extra`` keys: the parameters as one buffer, its size, the end of the list.
BUFFER_POINTER, BUFFER_SIZE, END = 1, 2, 0


class RawLauncher:
    """One kernel on a GPU through CuPy: ``ptx`` loaded once, launched on device arrays, the grid
    from the module's ``launch`` as ``Launcher`` sizes it.

    ``packed`` (the default, ``FLOWJIT_CUDA_LAUNCH=raw``): every parameter of numba's entry is
    64 bits, so the arguments are one int64 buffer handed to ``cuLaunchKernel`` whole (its
    ``extra``), with no per-parameter conversion; else (``FLOWJIT_CUDA_LAUNCH=cupy``) CuPy's
    ``Function`` call converts each numpy scalar."""

    def __init__(self, name: str, ptx: str, grid, packed: bool = True):
        import cupy
        from cupy.cuda import function
        self.name, self.grid, self.packed = name, grid, packed
        self.cupy_array, self.current_stream = cupy.ndarray, cupy.cuda.get_current_stream
        entry, parameters = entry_parameters(ptx)
        if any(kind not in ("u64", "s64", "b64") for kind in parameters):
            self.packed = False                  # (not numba's all-64-bit array ABI: convert each)
        handle, path = tempfile.mkstemp(prefix=f"flowjit-{name}-", suffix=".ptx")
        try:
            with os.fdopen(handle, "w") as stream:
                stream.write(ptx)
            self.module = function.Module()      # (the driver JIT-compiles the PTX for the device)
            self.module.load_file(path)
            self.function = self.module.get_function(entry)
        finally:
            os.unlink(path)
        self.count = len(parameters)
        if self.packed:
            # One parameter buffer for every launch (cuLaunchKernel copies it before returning),
            # its ``extra`` list made once: a launch only fills the buffer.
            from cupy_backends.cuda.api import driver
            self.launch_kernel, self.pointer = driver.launchKernel, self.function.ptr
            self.buffer = np.zeros(self.count, np.int64)
            self.fill = struct.Struct(f"={self.count}q").pack_into      # (the buffer's bytes, in one call)
            self.size = np.array([self.buffer.nbytes], np.uint64)
            self.extra = np.array([BUFFER_POINTER, self.buffer.ctypes.data, BUFFER_SIZE, self.size.ctypes.data, END],
                                  np.uint64)
            self.extra_pointer = self.extra.ctypes.data
            self.lock = threading.Lock()

    def resident(self, threads: int) -> int:
        """Blocks of ``threads`` one multiprocessor holds at once with this kernel's registers and
        shared memory (the driver's occupancy calculator)."""
        from cupy_backends.cuda.api import driver
        return driver.occupancyMaxActiveBlocksPerMultiprocessor(self.function.ptr, threads, 0)

    def __call__(self, *arrays) -> None:
        """Launch on device arrays (the resident driver's buffers: CuPy)."""
        blocks, threads = self.grid(arrays)
        if blocks == 0:
            return
        cupy_array = self.cupy_array
        if self.packed:
            values = []
            for array in arrays:
                values += fields(array, cupy_array)
            if len(values) != self.count:
                raise RuntimeError(f"kernel {self.name}: {len(values)} parameters packed, its entry takes {self.count}")
            stream = self.current_stream().ptr
            with self.lock:
                self.fill(self.buffer, 0, *values)
                self.launch_kernel(self.pointer, blocks, 1, 1, threads, 1, 1, 0, stream, 0, self.extra_pointer)
        else:
            self.function((blocks,), (threads,), tuple(field for array in arrays for field in pack(array, cupy_array)))
