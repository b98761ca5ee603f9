"""Every op flowjit knows, as module attributes: ``ops.add``, ``ops.sum``, ``ops.matmul``.

The modules below register their ops; this package exposes exactly the registry.
"""

from flowjit.compiler.ir.ops import (comm, elementwise, fft, fused, gather, linalg, misc, order, random,  # noqa: F401  (register)
                                      reduction, scan, shape)
from flowjit.compiler.ir.ops.base import (AttrKind, AttrSpec, Op, OpKind, all_ops, lookup,
                                          register)

globals().update(all_ops())
