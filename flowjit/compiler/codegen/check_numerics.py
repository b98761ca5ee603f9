"""check_numerics: after each kernel, its outputs are checked for NaN and Inf.

The driver emits one call per kernel (``jit(f, check_numerics=True)`` or
``FLOWJIT_CHECK_NUMERICS=1``; with the option off it emits none).  The check is a
vectorised ``np.isfinite`` over each float output.  When one fails, the kernel's body is
evaluated op by op with the numpy references on the kernel's own inputs (they are intact:
a checked program never writes a buffer it reads) to name the first op that produced a
NaN or an Inf from finite operands, and the error names it, its kernel and the user's
line.
"""

from __future__ import annotations

import numpy as np

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Node, Value
from flowjit.errors import NumericsError
from flowjit.gpu import to_host


def _bad(array: np.ndarray) -> str | None:
    """"NaN", "Inf" or "NaN and Inf" when ``array`` holds them, else None."""
    array = to_host(array)
    if array.dtype.kind not in "fc":
        return None
    nan = bool(np.isnan(array).any())
    inf = bool(np.isinf(array).any())
    return " and ".join(word for word, present in (("NaN", nan), ("Inf", inf)) if present) or None


def _where(node: Node) -> str:
    return f", traced at {node.loc.short_file}:{node.loc.line}" if node.loc else ""


def _count(array: np.ndarray) -> str:
    bad = ~np.isfinite(to_host(array))
    first = np.argwhere(bad)[0] if bad.ndim else ()
    position = f"; first at index {tuple(int(i) for i in first)}" if bad.ndim else ""
    return f"{int(bad.sum())} of {bad.size} elements{position}"


def _describe_input(value: Value) -> str:
    producer = value.producer
    if producer is None:
        return f"the program's argument %{value.name}"
    if producer.op is ops.read_variable:
        return f"variable '{producer.attrs['var']}'"
    return f"%{value.name} ({producer.op.name})"


def first_bad_op(kernel: Node, inputs: list[np.ndarray], outputs: list[np.ndarray]) -> NumericsError:
    """The error for ``kernel`` (a fused node, or an op run outside kernels) given its input
    and output arrays: the first op of its body that made a NaN or Inf from finite operands,
    or, when none did, the input the kernel passed one on from."""
    if kernel.op is not ops.fused:
        return _error(kernel, kernel.name, outputs)
    body = kernel.attrs["body"]
    env: dict[Value, np.ndarray] = {}
    source: dict[Value, Value] = {}
    for inner, outer, array in zip(body.inputs, kernel.inputs, inputs):
        array = to_host(array)
        env[inner] = array.reshape(inner.shape) if array.size == inner.type.size else array
        source[inner] = outer
    passed_on = None
    for node in body.nodes:
        operands = [env[value] for value in node.inputs]
        results = node.op.evaluate(operands, node.attrs)
        for value, result in zip(node.outputs, results):
            env[value] = result
        if any(_bad(result) for result in results):
            if not any(_bad(operand) for operand in operands):
                return _error(node, kernel.name, results)
            if passed_on is None:
                passed_on = next(value for value in node.inputs if _bad(env[value]))
    if passed_on is not None and passed_on in source:
        outer = source[passed_on]
        return NumericsError(f"check_numerics: kernel {kernel.name} passed on {_bad(env[passed_on])} from "
                             f"{_describe_input(outer)} ({_count(env[passed_on])}){_where(kernel)}")
    bad = next(o for o in outputs if _bad(o))
    return NumericsError(f"check_numerics: kernel {kernel.name} produced {_bad(bad)} ({_count(bad)}), which its ops "
                         f"evaluated with numpy do not{_where(kernel)}")


def _error(node: Node, kernel_name: str, results) -> NumericsError:
    result = next(r for r in results if _bad(r))
    return NumericsError(f"check_numerics: %{node.name} ({node.op.name}) produced {_bad(result)} "
                         f"({_count(result)}) in kernel {kernel_name}{_where(node)}")


def checker(kernel: Node):
    """The callable the driver calls after ``kernel``: ``check(inputs, outputs)``."""
    def check(inputs, outputs):
        for array in outputs:
            if array.dtype.kind in "fc" and not np.isfinite(array).all():
                raise first_bad_op(kernel, inputs, outputs)
    return check
