"""The cheap launch path for a real GPU: numba-cuda's PTX, loaded once into a CuPy ``RawModule``,
called with arguments packed by numba's array ABI.

numba-cuda's dispatcher costs ~67-119 us a launch (type checks, argument marshalling in
Python); the same PTX launched through CuPy with prepared arguments took ~9-38 us on an H100.
So a kernel is compiled with ``compile_ptx`` once for the device's compute capability, its
PTX loaded once, and each call only packs its arrays into the flat parameters numba's kernel
entry takes -- per array, in order::

    meminfo, parent, nitems, itemsize, data, shape[0..ndim), strides[0..ndim)   (all 64-bit)

(``entry_parameters`` reads the count back from the PTX; the tests check it for every golden
kernel.)  Opt in with ``FLOWJIT_CUDA_LAUNCH=raw``: the default stays numba-cuda's dispatcher
until this path has been measured and checked on a GPU.  Under the simulator kernels always
run through the simulator's dispatcher.
"""

from __future__ import annotations

import os
import re
import tempfile

import numpy as np

ENTRY = re.compile(r"\.visible\s+\.entry\s+(\S+?)\(")
PARAMETER = re.compile(r"\.param\s+\.(\w+)\s+\S+_param_\d+")
FIELDS = 5                      # meminfo, parent, nitems, itemsize, data; then shape and strides


def raw_launch_requested() -> bool:
    return os.environ.get("FLOWJIT_CUDA_LAUNCH", "dispatcher") == "raw"


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


def pack(array) -> tuple:
    """One device array (``__cuda_array_interface__``) as numba's kernel parameters."""
    interface = array.__cuda_array_interface__
    shape = tuple(interface["shape"])
    itemsize = np.dtype(interface["typestr"]).itemsize
    strides = interface.get("strides")
    if strides is None:                      # C-contiguous
        strides, step = [], itemsize
        for size in reversed(shape):
            strides.insert(0, step)
            step *= max(size, 1)
    nitems = int(np.prod(shape, dtype=np.int64))
    return ((np.uint64(0), np.uint64(0), np.int64(nitems), np.int64(itemsize), np.uint64(interface["data"][0]))
            + tuple(np.int64(size) for size in shape) + tuple(np.int64(stride) for stride in strides))


class RawLauncher:
    """One kernel on a GPU through CuPy: ``ptx`` loaded once, host arrays copied in and out
    (device arrays used in place), the grid from the module's ``launch`` as ``Launcher`` sizes it."""

    def __init__(self, name: str, ptx: str, grid, inputs: int):
        import cupy
        self.name, self.grid, self.inputs = name, grid, inputs
        entry, _ = entry_parameters(ptx)
        handle, self.path = tempfile.mkstemp(prefix=f"flowjit-{name}-", suffix=".ptx")
        with os.fdopen(handle, "w") as stream:
            stream.write(ptx)
        self.module = cupy.RawModule(path=self.path)
        self.function = self.module.get_function(entry)

    def __call__(self, *arrays) -> None:
        import cupy
        blocks, threads = self.grid(arrays)
        if blocks == 0:
            return
        device, copies = [], []
        for index, array in enumerate(arrays):
            if hasattr(array, "__cuda_array_interface__"):
                device.append(array)
            elif index < self.inputs:
                device.append(cupy.asarray(array))
            else:
                buffer = cupy.empty(array.shape, array.dtype)
                device.append(buffer)
                copies.append((buffer, array))
        parameters = tuple(field for array in device for field in pack(array))
        self.function((blocks,), (threads,), parameters)
        for buffer, array in copies:
            buffer.get(out=array)
