"""Backends: a backend renders a fused node's kernel plan to source and compiles it.

The driver (and, through it, the multi-device executor) asks a backend for each fused node's
kernel and receives compiled callables; it never looks at how they were made.  A backend has
a ``target``, which picks the per-target overrides of the ops' lowering rules
(``Lowering.targets``), and the library its kernels bind as ``fj``.

``CpuBackend`` is the first: numba kernels for the host, kept in the kernel cache.  It imports
numba where it compiles, not here: the CUDA backend, whose kernels are PTX launched through CuPy,
loads none of the CPU toolchain.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

import numpy as np

from flowjit.compiler.codegen.compiled import CompiledKernel
from flowjit.compiler.codegen.kernel import KernelSource, kernel_source
from flowjit.compiler.codegen.native import NativeKernel
from flowjit.compiler.ir.graph import Node

if TYPE_CHECKING:
    from flowjit.compiler.codegen.cache import KernelCache


class Backend(ABC):
    target: str
    matmul = None       # a callable ``(a, b, out)`` for the matmuls the driver runs; None: numpy's
    # The array module of the buffers the driver allocates, views and concatenates (numpy; CuPy
    # for a GPU's), and whether they live on a device: then ``accept`` and ``deliver`` move the
    # program's arguments and results.  ``device``: a context manager that makes the backend's
    # device current, entered while a program is built (its constants) and while it runs.
    xp = np
    resident = False
    device = contextlib.nullcontext()

    def accept(self, arrays: tuple) -> tuple[tuple, bool]:
        """A resident backend's arguments as its arrays, and whether the caller's were device
        arrays (the results then stay on the device, with no hidden round trip).  Called only
        where ``resident``: a host program's device arguments are copied back by jit."""
        return arrays, False

    def is_current(self) -> bool:
        """Whether ``device`` is current in the calling thread already (then a call need not
        enter it: the dispatch of a small program is a few microseconds)."""
        return True

    def built(self) -> None:
        """Called with ``device`` current once a program's driver is built (a backend whose
        constants are copied in asynchronously waits for them here)."""

    def deliver(self, results: list, on_device: bool) -> list:
        """A resident backend's results as the caller gets them."""
        return results

    def render(self, node: Node) -> KernelSource:
        """The kernel module of a fused node, with the ops' rules for this target."""
        return kernel_source(node, self.target)

    @abstractmethod
    def compile(self, kernel: KernelSource) -> CompiledKernel:
        """Compiled callables for a rendered kernel: ``serial`` and ``parallel``, taking the
        kernel's input arrays then its output arrays."""

    def library_call(self, node: Node, parallel: bool):
        """The callable that runs a library op (OpKind.LIBRARY: a scan, a gather) on its input
        arrays (``parallel``: the traced sizes pay for threads): the op's own call by default.
        One with ``writes_into`` set also takes the output buffer, which the driver allocates
        (and reuses across calls) as it does a kernel's."""
        return node.op.extensions["compiled"](node)

    def ran(self, compiled: list[CompiledKernel]) -> None:
        """Called once after a program's first run with every kernel it ran (a backend may
        record what compiling left behind)."""

    def device_error(self, error: Exception, node: Node | None):
        """flowjit's error for a device's failure while running the program (out of device
        memory, a kernel fault), raised from ``error`` -- naming ``node``, the node whose driver
        lines it came through (None: allocating the workspace) -- or None: not a device's."""
        from flowjit.compiler.codegen.device_errors import device_error
        return device_error(error, node)

    def compile_ahead(self, kernels: list[tuple], arrays: tuple) -> None:
        """Called once before a program's first run with its kernels in order, each with the
        specs of its arguments (``DriverBuilder.argument_spec``) and the program's arguments:
        a backend may start compiling them."""


class CpuBackend(Backend):
    """numba on the host: kernels compiled once per source (``KernelCache``), with or without
    FMA contraction; with ``background``, a kernel cached on disk gets a ``TieredKernel`` that
    runs its serial twin while the compile worker compiles the parallel one (background.py)."""

    target = "cpu"

    def __init__(self, cache: KernelCache, fma: bool = True, background: bool = True):
        self.cache, self.fma, self.background = cache, fma, background

    def compile(self, kernel: KernelSource) -> CompiledKernel:
        compiled = self.cache.get(kernel, self.fma)
        if self.background and compiled.tiered is None and compiled.path is not None and self.cache.writable:
            from flowjit.compiler.codegen.background import WORKER, TieredKernel
            compiled.tiered = TieredKernel(compiled, WORKER)
        return compiled

    def library_call(self, node: Node, parallel: bool):
        from flowjit.compiler.codegen import index_kernels, scans
        return (scans.compiled_scan(node, parallel) or index_kernels.compiled_index_op(node)
                or super().library_call(node, parallel))

    def ran(self, compiled: list[CompiledKernel]) -> None:
        for kernel in compiled:
            self.cache.record(kernel)        # list numba's cache files in the entry's manifest

    def compile_ahead(self, kernels: list[tuple], arrays: tuple) -> None:
        """The compile worker takes the later kernels of the first call (background.py)."""
        # Kernels with native entries (a process without numba) compile on their first call
        # if an entry is missing: handing them ahead would import numba for nothing.
        kernels = [(compiled, specs) for compiled, specs in kernels if not isinstance(compiled.serial, NativeKernel)]
        if not (kernels and self.background and self.cache.writable):
            return
        from flowjit.compiler.codegen.background import WORKER
        typed = []
        for compiled, specs in kernels:
            types = [_argument_type(spec, arrays) for spec in specs]
            if None not in types:
                typed.append((compiled, tuple(types)))
        WORKER.compile_ahead(typed)


def _argument_type(spec: tuple, arrays: tuple):
    """The numba type of a kernel argument (``DriverBuilder.argument_spec``); None if unknown."""
    import numba
    from numba.core import types
    kind, *rest = spec
    if kind == "array":
        dtype, rank = rest
        return types.Array(numba.from_dtype(np.dtype(dtype)), rank, "C")
    array = rest[0] if kind == "object" else arrays[rest[0]]
    if not isinstance(array, np.ndarray):
        return None
    if array.dtype == np.float16:                     # the driver converts it first
        return types.Array(types.float32, rest[1] if len(rest) > 1 else max(1, array.ndim), "C")
    if len(rest) > 1 or array.ndim == 0:              # reshaped, or passed as .reshape(1)
        if not array.flags.c_contiguous:                  # (a copy or a strided view: not known)
            return None
        return types.Array(numba.from_dtype(array.dtype), rest[1] if len(rest) > 1 else 1, "C",
                           readonly=not array.flags.writeable)
    return numba.typeof(array)
