"""One fused node -> the Python source of a Numba kernel, readable, each line under its IR.

A kernel takes its input arrays then its output arrays and returns nothing.  Sizes come
from the arrays at run time (kernels are size-generic); ranks, dtypes and which
dimensions broadcast are baked in.  0-d arrays are passed as shape (1,).

- loop kernels: one loop per domain axis, the body computes every node and stores the
  kernel's outputs; broadcast inputs read index 0 along their size-1 dimensions.
- reduce kernels: loops over the kept axes outside; inside, one pass over the reduced
  axes per dependent reduction (softmax: max, then sum, then the division), with the
  per-row scalars between passes; full-shaped outputs stored in the first pass that can
  compute them, and read back rather than recomputed by later passes.
- matmul kernels: the runtime calls BLAS; the kernel is the elementwise epilogue over
  its result.

Each kernel is written twice, each variant by a writer of its own: serial, and with ``prange`` on
the outer loop the plan lets run in parallel (``KernelWriter.for_loop``), for
inputs large enough to pay for threads.
"""

from __future__ import annotations

from flowjit.compiler.codegen.reduce import ReduceWriter
from flowjit.compiler.codegen.writer import KernelSource, KernelWriter
from flowjit.compiler.ir.graph import Node
from flowjit.compiler.ir.plan import KernelKind


MODULE_HEADER = '''"""flowjit kernels (generated): each line follows the IR line it implements."""
import math

import numpy as np
from numba import njit, prange

from flowjit.compiler.codegen.mathlib import (bits_float32, cos_f32, cos_f64, erf_f32, erf_f64, exp_f32,
                                              exp_f64, float32_bits, log_f32, log_f64, sigmoid_f32,
                                              sigmoid_f64, sin_f32, sin_f64, stack_array, tanh_f32,
                                              tanh_f64)
from flowjit.compiler.codegen.mathlib_explog import (cosh_f32, cosh_f64, exp2_f32, exp2_f64, expm1_f32, expm1_f64,
                                                     log1p_f32, log1p_f64, log2_f32, log2_f64, log10_f32, log10_f64,
                                                     pow_f32, pow_f64, sinh_f32, sinh_f64)
from flowjit.compiler.codegen.mathlib_trig import (arccos_f32, arccos_f64, arcsin_f32, arcsin_f64, arctan2_f32,
                                                   arctan2_f64, arctan_f32, arctan_f64, tan_f32, tan_f64)
'''


def kernel_source(node: Node) -> KernelSource:
    """The source of the kernel for one fused node (a matmul without epilogue has none): its
    serial function and its parallel twin, each rendered from the plan by a writer of its own."""
    writer = ReduceWriter if node.attrs["plan"].kind is KernelKind.REDUCE else KernelWriter
    serial, parallel = writer(node), writer(node, parallel=True)
    serial_text, inputs, outputs = serial.write_function()
    parallel_text, _, _ = parallel.write_function()
    return KernelSource(node.name, serial_text + "\n\n\n" + parallel_text + "\n",
                        [serial.outer_value(v) for v in inputs], [serial.exported[v] for v in outputs],
                        serial.kind, parallel.parallel_loops > 0)


def module_source(kernel: KernelSource) -> str:
    from flowjit.compiler.codegen.scalar import HELPERS
    return MODULE_HEADER + HELPERS + "\n\n" + kernel.source
