"""One fused node -> the Python source of a Numba kernel, readable, each line under its IR.

A kernel takes its input arrays then its output arrays and returns nothing.  Sizes come
from the arrays at run time; ranks, dtypes and which dimensions broadcast are baked in, and
so, for reduce kernels, are the strategy and lanes the traced row length and row count
chose (plan_reductions.py, reduce.py), so a loop kernel's source serves every size and a
reduce kernel's the shapes it was written for (``Lowered.compile`` checks the arrays).
0-d arrays are passed as shape (1,).

- loop kernels: one loop per domain axis, the body computes every node and stores the
  kernel's outputs; broadcast inputs read index 0 along their size-1 dimensions.
- reduce kernels: loops over the kept axes outside; inside, one pass over the reduced
  axes per dependent reduction (softmax: max, then sum, then the division), with the
  per-row scalars between passes; full-shaped outputs stored in the first pass that can
  compute them, and read back rather than recomputed by later passes.  Short rows go the
  other way round (``across``, reduce_across.py): blocks of 64 rows, each pass a loop over
  the row position outside one over the block's rows.
- matmul kernels: the runtime calls BLAS; the kernel is the elementwise epilogue over
  its result.

Each kernel is written twice, each variant by a writer of its own: serial, and with ``prange`` on
the outer loop the plan lets run in parallel (``KernelWriter.for_loop``), for
inputs large enough to pay for threads; a loop kernel's parallel twin runs the serial kernel
on a part of its outer axis a thread (``KernelWriter.serial_in_parts``).  Scalar code comes
from each op's lowering rule for the backend's target; library calls go through ``fj``
(codegen/library.py), imported, never pasted.
"""

from __future__ import annotations

from flowjit.compiler.codegen.reduce import ReduceWriter
from flowjit.compiler.codegen.writer import KernelSource, KernelWriter
from flowjit.compiler.ir.graph import Node
from flowjit.compiler.ir.plan import KernelKind


MODULE_HEADER = '''"""flowjit kernel (generated): each line follows the IR line it implements."""
import math

import numpy as np
from numba import prange

from flowjit.compiler.codegen import library as fj
'''


def kernel_source(node: Node, target: str = "cpu") -> KernelSource:
    """The kernel module of one fused node: its serial function and its parallel twin, each
    rendered from the plan by a writer of its own, under the header that binds the library.
    The functions are always ``kernel`` and ``kernel_parallel`` (the node's name is in the
    comment above them), so the same loop in two programs is the same module."""
    writer = ReduceWriter if node.attrs["plan"].kind is KernelKind.REDUCE else KernelWriter
    serial, parallel = writer(node, target=target), writer(node, parallel=True, target=target)
    serial_text, inputs, outputs = serial.write_function()
    parallel_text, _, _ = parallel.write_function()
    module = (f"{MODULE_HEADER}\n\n# {node.name}: {serial.kind} kernel, domain [{','.join(map(str, serial.domain))}]\n"
              f"{serial_text}\n\n\n{parallel_text}\n")
    return KernelSource(node.name, module, [serial.outer_value(v) for v in inputs],
                        [serial.exported[v] for v in outputs], serial.kind, parallel.parallel_loops > 0,
                        tuple(index for index, value in enumerate(inputs) if value in serial.pitched),
                        tuple(dtype for _, dtype in serial.scratch_parameters))
