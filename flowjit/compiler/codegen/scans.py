"""Scan kernels for the CPU backend: np.cumsum, np.cumprod, np.maximum/np.minimum.accumulate.

numpy's accumulate runs its inner loop along the scanned axis.  Along axis 0 of a matrix that
is a strided walk down each column, a cache line read for one element and no vector lanes:
``np.maximum.accumulate`` of a (8388, 500) float64 matrix takes 51 ms.  Here the array is seen
as ``(outer, n, inner)`` (n: the scanned axis) and each task scans a block of up to ``BLOCK``
adjacent columns of one outer index down the n steps, the block's columns in one vectorised
loop, the tasks in parallel: 5.5 ms for that matrix.  Along the last axis (inner = 1) each task
is one row, as numpy's loop.

Each step is the one numpy's loop takes, ``out[i] = combine(out[i - 1], x[i])`` in the
operand's dtype (the frontend cast it to the dtype numpy accumulates in), so the results equal
numpy's bit for bit: floating-point sums in the same order, integers wrapping as numpy's do,
maximum and minimum propagating NaN.  The scan op names its combine
(``extensions["combine"]``, ir/ops/scan.py); float16, which numpy rounds to at every step but
the driver holds in float32, keeps the op's own numpy call.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from flowjit.compiler.codegen.compiled import KERNEL_FLAGS, SERIAL_FLAGS
from flowjit.compiler.ir.graph import Node

BLOCK = 256                     # columns one task scans together: a few vectors' worth of lanes

# Cached in the library's directory (library.cache_kernels), not by numba beside this file.
COMBINED = dict(inline="always")
KERNEL = dict(KERNEL_FLAGS)
SERIAL = dict(SERIAL_FLAGS)


@njit(**COMBINED)
def _add(a, b):
    return a + b


@njit(**COMBINED)
def _multiply(a, b):
    return a * b


@njit(**COMBINED)
def _maximum(a, b):
    return a if (a >= b or a != a) else b       # np.maximum: a NaN on either side wins


@njit(**COMBINED)
def _minimum(a, b):
    return a if (a <= b or a != a) else b


@njit(**COMBINED)
def _scan(x, out, combine):
    """Scan ``x`` (outer, n, inner) along its middle axis into ``out``."""
    outer, n, inner = x.shape
    blocks = (inner + BLOCK - 1) // BLOCK
    for task in prange(outer * blocks):
        o = task // blocks
        low = (task - o * blocks) * BLOCK
        high = min(inner, low + BLOCK)
        for j in range(low, high):
            out[o, 0, j] = x[o, 0, j]
        for i in range(1, n):
            for j in range(low, high):
                out[o, i, j] = combine(out[o, i - 1, j], x[o, i, j])


# One serial and one parallel kernel per combine: module-level functions, which the cache keys by name.
@njit(**SERIAL)
def add_serial(x, out):
    _scan(x, out, _add)


@njit(parallel=True, **KERNEL)
def add_parallel(x, out):
    _scan(x, out, _add)


@njit(**SERIAL)
def multiply_serial(x, out):
    _scan(x, out, _multiply)


@njit(parallel=True, **KERNEL)
def multiply_parallel(x, out):
    _scan(x, out, _multiply)


@njit(**SERIAL)
def maximum_serial(x, out):
    _scan(x, out, _maximum)


@njit(parallel=True, **KERNEL)
def maximum_parallel(x, out):
    _scan(x, out, _maximum)


@njit(**SERIAL)
def minimum_serial(x, out):
    _scan(x, out, _minimum)


@njit(parallel=True, **KERNEL)
def minimum_parallel(x, out):
    _scan(x, out, _minimum)


KERNELS = {name: (globals()[f"{name}_serial"], globals()[f"{name}_parallel"])
           for name in ("add", "multiply", "maximum", "minimum")}


def compiled_scan(node: Node, parallel: bool):
    """The driver's call for a scan node (``parallel``: large enough for threads), or None
    when the op's own call must run it."""
    combine = node.op.extensions.get("combine")
    dtype = node.output.dtype
    if combine not in KERNELS or dtype == np.float16 or dtype.kind not in "iuf":
        return None
    serial, parallel_kernel = KERNELS[combine]
    from flowjit.compiler.codegen.library import cache_kernels
    cache_kernels((serial, parallel_kernel))
    axis, shape = node.attrs["axis"], node.output.shape
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    seen = (outer, shape[axis], inner)
    kernel = parallel_kernel if parallel else serial

    def scan(array, out):
        if out.size:
            kernel(np.ascontiguousarray(array).reshape(seen), out.reshape(seen))
        return out
    scan.__name__ = f"{combine}_scan"
    scan.writes_into = True             # the driver passes the buffer it writes (as kernels')
    return scan
