"""Gather and scatter-add kernels for the CPU backend, for one index array: ``x[idx]`` with ``x``
1-d, and ``scatter_add`` (np.histogram's counts, the gradient of ``x[idx]``).

numpy's fancy indexing and ``np.add.at`` are generic loops: a 4M-element lookup into a table of
65 took 13 ms, and ``np.add.at`` of 4M counts into 65 bins 28 ms.  These loops take a fraction
of that.  The scatter adds in numpy's order (float sums equal numpy's bit for bit); rows of
trailing axes (``updates`` (m, r) into ``out`` (n, r)) add row by row.  An index out of bounds
raises numpy's IndexError with its message.  float16 (numpy computes in float16, the driver
holds float32) and several index arrays keep the op's own numpy call.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from flowjit.compiler.codegen.compiled import SERIAL_FLAGS
from flowjit.compiler.ir.graph import Node

KERNEL = dict(SERIAL_FLAGS)         # cached in the library's directory (library.cache_kernels)


@njit(inline="always")
def _position(j, n):
    """Index ``j`` of an axis of ``n`` counted from the end when negative; -1 when out of bounds."""
    if j < 0:
        j += n
    return j if 0 <= j < n else -1


@njit(**KERNEL)
def _gather(table, index, out):
    """``out[i] = table[index[i]]``; -1, or the position of the first index out of bounds."""
    n = table.shape[0]
    for i in range(index.shape[0]):
        j = _position(index[i], n)
        if j < 0:
            return i
        out[i] = table[j]
    return -1


@njit(**KERNEL)
def _scatter_add(updates, index, out):
    """``out[:] = 0; out[index[i]] += updates[i]`` in order; -1, or the position of the first
    index out of bounds (nothing is added from there on)."""
    n = out.shape[0]
    out[:] = 0
    for i in range(index.shape[0]):
        j = _position(index[i], n)
        if j < 0:
            return i
        out[j] += updates[i]
    return -1


@njit(**KERNEL)
def _scatter_add_rows(updates, index, out):
    """``_scatter_add`` of rows: ``out[index[i], :] += updates[i, :]``."""
    n, width = out.shape
    out[:, :] = 0
    for i in range(index.shape[0]):
        j = _position(index[i], n)
        if j < 0:
            return i
        for c in range(width):
            out[j, c] += updates[i, c]
    return -1


def _out_of_bounds(index, bad: int, size: int) -> IndexError:
    return IndexError(f"index {int(index.reshape(-1)[bad])} is out of bounds for axis 0 with size {size}")


def _supported(dtype) -> bool:
    return dtype != np.float16 and dtype.kind in "biuf"


def compiled_index_op(node: Node):
    """The driver's call for a gather or scatter_add node, or None when the op's own call must
    run it."""
    name = node.op.name
    if len(node.inputs) != 2 or not _supported(node.output.dtype):
        return None
    from flowjit.compiler.codegen.library import cache_kernels
    cache_kernels((_gather, _scatter_add, _scatter_add_rows))
    if name == "gather" and node.inputs[0].type.rank == 1:
        size, count = node.inputs[0].shape[0], int(np.prod(node.inputs[1].shape, dtype=np.int64))
        shape = node.output.shape               # (the driver's buffer for a 0-d result has one element)

        def gather(table, index, out):
            bad = _gather(table, index.reshape(count), out.reshape(count))
            if bad >= 0:
                raise _out_of_bounds(index, bad, size)
            return out.reshape(shape)
        gather.writes_into = True           # the driver passes the buffer it writes (as kernels')
        return gather
    if name == "scatter_add":
        shape = tuple(node.attrs["shape"])
        rows = int(np.prod(node.inputs[1].shape, dtype=np.int64))
        width = int(np.prod(shape[1:], dtype=np.int64))
        kernel = _scatter_add if width == 1 else _scatter_add_rows

        def scatter_add(updates, index, out):
            # (a broadcast view of updates, np.ones_like's, stays a view: no copy of it)
            seen = out.reshape(shape[0]) if width == 1 else out.reshape(shape[0], width)
            values = updates.reshape(rows) if width == 1 else updates.reshape(rows, width)
            bad = kernel(values, index.reshape(rows), seen)
            if bad >= 0:
                raise _out_of_bounds(index, bad, shape[0])
            return out
        scatter_add.writes_into = True
        return scatter_add
    return None
