"""One element of an elementwise node, in the kernel language, from the op's own lowering rule.

Each op's rule lives with its definition (``Op.lowering``, ``ir/ops/lowering.py``); this
applies numpy's ufunc loop convention around it: operands are cast to the loop dtypes
(``ufunc.resolve_dtypes``), the result is cast to the node's dtype.  float16 computes in
float32 (numba has no CPU float16); the kernel stores round to the array's dtype.
"""

from __future__ import annotations

import numpy as np

from flowjit.compiler.ir.ops.lowering import ROUTINE_DTYPES, ScalarContext, cast, constructor, is_complex
from flowjit.compiler.ir.ops.misc import constant_value
from flowjit.compiler.ir.types import TensorType, compute_dtype
from flowjit.errors import FlowjitError


class CodegenError(FlowjitError):
    pass


def loop_dtypes(op, input_dtypes) -> tuple[list[np.dtype], np.dtype]:
    """The dtypes the op's inner loop runs at (numpy's ufunc type resolution)."""
    ufunc = op.ufunc
    if ufunc is None and op.special is not None:
        from flowjit.compiler.ir.ops.elementwise import special
        ufunc = special(op.special)
    if not isinstance(ufunc, np.ufunc):                     # numpy-only fallback (no scipy)
        out = op.infer_types([TensorType((), dtype) for dtype in input_dtypes], {})[0].dtype
        return [out] * len(input_dtypes), out
    resolved = ufunc.resolve_dtypes(tuple(input_dtypes) + (None,))
    return [np.dtype(d) for d in resolved[:-1]], np.dtype(resolved[-1])


def fast_path(node, target: str = "cpu") -> tuple[str, str, np.dtype] | None:
    """When ``node``'s op calls a unary routine with a fast path (``Lowering.fast``:
    ``fj.sin_f32_fast``, right for arguments up to a bound) at its loop dtype, the library's check, the
    magnitude it checks and the loop dtype: ``("fj.sin_f32_fits", "fj.magnitude_f32",
    float32)``; the check takes the largest magnitude of a block's arguments, cast to the
    loop dtype.  Else (and off the CPU) None."""
    lowering = node.op.lowering
    if target != "cpu" or lowering is None or not lowering.fast or len(node.inputs) != 1 \
            or lowering.targets.get(target) is not None:
        return None
    (loop,), _ = loop_dtypes(node.op, [node.inputs[0].dtype])
    suffix = ROUTINE_DTYPES.get(compute_dtype(loop).name)
    if suffix is None:
        return None
    return f"fj.{lowering.routine}_{suffix}_fits", f"fj.magnitude_{suffix}", loop


def _scalar_constant(value):
    """The value of a one-element constant operand (a Python scalar), else None."""
    array = constant_value(value)
    return None if array is None or value.type.size != 1 else np.asarray(array).reshape(-1)[0].item()


def expression(node, operands: list[str], target: str = "cpu", fast: bool = False) -> str:
    """The scalar expression computing ``node`` from operand expressions, in its dtype, by
    the op's lowering rule for ``target`` (``fast``: its routine's fast path, which
    ``fast_path`` names; the caller checked the arguments fit it)."""
    op = node.op
    if op.lowering is None:
        raise CodegenError(f"op '{op.name}' has no scalar lowering (%{node.name}; report it)")
    rule = op.lowering.for_target(target)
    inputs = tuple(value.type for value in node.inputs)
    constants = tuple(_scalar_constant(value) for value in node.inputs)
    out_dtype = node.output.dtype
    if op.lowering.typed:
        return rule(ScalarContext(out_dtype, inputs, node.output.type, target, fast, constants), *operands)
    loop_in, loop_out = loop_dtypes(op, [value.dtype for value in inputs])
    if any(is_complex(dtype) for dtype in loop_in):
        rule = op.lowering.complex          # the type rules let complex values reach only ops with one
        if rule is None:
            raise CodegenError(f"op '{op.name}' has no lowering for complex values (%{node.name}; report it)")
    cast_operands = [cast(expr, value.dtype, loop) for expr, value, loop in zip(operands, inputs, loop_in)]
    text = rule(ScalarContext(loop_in[0], inputs, node.output.type, target, fast, constants), *cast_operands)
    if loop_out != out_dtype:
        return cast(text, loop_out, out_dtype)
    if out_dtype == np.float16:                  # numpy computes float16 in float32 and rounds
        return f"fj.round_float16(np.float32({text}))"
    return text if compute_dtype(out_dtype) == np.bool_ else f"{constructor(out_dtype)}({text})"
