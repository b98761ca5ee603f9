"""Scalar lowering rules: how an elementwise op computes one element, written next to the op.

A rule returns an expression in the kernel language: numba-compilable Python with numpy's
semantics, which every backend compiles (numba on the CPU, numba-cuda on the GPU).  A
kernel module binds ``np``, ``math`` and ``fj``, its backend's kernel library (on the CPU
``codegen/library.py``); a rule calls library functions as ``fj.<name>``, never pastes them.

The usual rule follows numpy's ufunc loops: it is called as ``rule(c, *operands)`` with the
operands already cast to the loop dtype ``c.dtype`` (``ufunc.resolve_dtypes``), and its
result is cast to the node's dtype by the code generator.  A ``typed`` rule (cast, where, bit
reinterpretations) gets the operands in their own dtypes and returns the node's dtype.

``targets`` overrides the rule for one backend (``{"cuda": rule}``), as JAX registers a
lowering per platform.  ``routine`` names a vectorised routine family of the library
(``"exp"``: ``fj.exp_f32``, ``fj.exp_f64``): the rule calls it at float32 and float64 and the
fallback elsewhere; fusion and the accuracy table find these ops through it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from flowjit.compiler.ir.types import TensorType, compute_dtype, part_dtype

ROUTINE_DTYPES = {"float64": "f64", "float32": "f32"}


@dataclass(frozen=True)
class ScalarContext:
    """What a rule may look at besides its operands."""

    dtype: np.dtype                 # the loop dtype (a typed rule: the output's dtype)
    inputs: tuple[TensorType, ...]  # the node's operand types
    output: TensorType              # the node's result type
    target: str = "cpu"
    fast: bool = False              # a routine's fast path (``fj.<name>_<suffix>_fast``), where the
                                    # kernel checked that its arguments fit it (``..._fits``)
    constants: tuple = ()           # per operand: its value where a constant of one element gives it, else None


ScalarRule = Callable[..., str]


@dataclass(frozen=True)
class Lowering:
    rule: ScalarRule
    targets: Mapping[str, ScalarRule] = field(default_factory=dict)
    typed: bool = False
    routine: str | None = None
    fast: bool = False          # the routine has a fast path at each float dtype: ``fj.<name>_f32_fast``,
                                # right for arguments whose magnitude ``fj.<name>_f32_fits`` accepts
    complex: ScalarRule | None = None   # the rule at a complex loop dtype (every target); None: the op
                                        # takes no complex values (its type rule refuses them)

    def for_target(self, target: str) -> ScalarRule:
        return self.targets.get(target, self.rule)


def lowering(rule: ScalarRule, **targets: ScalarRule) -> Lowering:
    return Lowering(rule, dict(targets))


def typed(rule: ScalarRule, **targets: ScalarRule) -> Lowering:
    return Lowering(rule, dict(targets), typed=True)


def routine_call(name: str, dtype, operands, fast: bool = False) -> str | None:
    """``fj.<name>_f32(operands)`` at a float32/float64 loop dtype (``fast``: the fast
    path ``fj.<name>_f32_fast``), else None."""
    suffix = ROUTINE_DTYPES.get(compute_dtype(dtype).name)
    return None if suffix is None else f"fj.{name}_{suffix}{'_fast' if fast else ''}({', '.join(operands)})"


def routine(name: str, fallback: str | None, fast: bool = False, **targets: ScalarRule) -> Lowering:
    """A vectorised library routine at float32/float64 (``fj.<name>_f32``), ``fallback``
    (a ``math`` function) at other loop dtypes.  Unary or binary (arctan2).  ``fast``: the
    library also has its fast path (``Lowering.fast``).  On the GPU the
    ``math`` function is itself libdevice's routine at the operand's precision (``math.exp`` of a
    float32 is ``expf``), so it is the ``cuda`` rule unless ``targets`` gives another."""
    if fallback is not None:
        targets.setdefault("cuda", lambda c, *operands: f"math.{fallback}({', '.join(operands)})")

    def rule(c, *operands):
        text = routine_call(name, c.dtype, operands, c.fast)
        if text is not None:
            return text
        if fallback is None:
            raise ValueError(f"no {name} at {c.dtype}")
        return f"math.{fallback}({', '.join(operands)})"
    return Lowering(rule, dict(targets), routine=name, fast=fast)


# -- the kernel language's literals and conversions ------------------------------------------------
def constructor(dtype: np.dtype) -> str:
    dtype = compute_dtype(dtype)
    return "np.bool_" if dtype == np.bool_ else f"np.{dtype.name}"


def cast(expr: str, source: np.dtype, target: np.dtype) -> str:
    source, target = np.dtype(source), np.dtype(target)
    if target.kind != "c" and source.kind == "c" and target != np.bool_:
        expr, source = f"({expr}).real", part_dtype(source)
    if np.dtype(target) == np.float16 and np.dtype(source) != np.float16:
        return f"fj.round_float16(np.float32({expr}))"
    source, target = compute_dtype(source), compute_dtype(target)
    if source == target:
        return expr
    if target == np.bool_:
        return f"({expr} != 0)"
    return f"{constructor(target)}({expr})"


def literal(value, dtype: np.dtype) -> str:
    dtype = compute_dtype(dtype)
    value = np.asarray(value).reshape(()).item()
    if dtype == np.bool_:
        return "True" if value else "False"
    if dtype.kind == "c":
        return f"{constructor(dtype)}(complex({literal(value.real, np.float64)}, {literal(value.imag, np.float64)}))"
    if dtype.kind == "f":
        if value != value:
            text = "np.nan"
        elif value in (float("inf"), float("-inf")):
            text = "np.inf" if value > 0 else "-np.inf"
        else:
            text = repr(float(value))
        return f"{constructor(dtype)}({text})"
    return f"{constructor(dtype)}({int(value)})"


def extreme(dtype: np.dtype, lowest: bool) -> str:
    """The smallest (``lowest``) or largest value of ``dtype``, as a literal (floats: -inf, inf)."""
    dtype = compute_dtype(dtype)
    if dtype == np.bool_:
        return "False" if lowest else "True"
    if dtype.kind == "f":
        return literal(-np.inf if lowest else np.inf, dtype)
    info = np.iinfo(dtype)
    return literal(info.min if lowest else info.max, dtype)


def is_float(dtype) -> bool:
    return compute_dtype(dtype).kind == "f"


def is_complex(dtype) -> bool:
    return np.dtype(dtype).kind == "c"


def is_bool(dtype) -> bool:
    return compute_dtype(dtype) == np.bool_


# -- rule builders most ops share -----------------------------------------------------------------
def infix(symbol: str, bool_symbol: str | None = None) -> Lowering:
    """``a <symbol> b`` (with ``bool_symbol`` for booleans: ``+`` is ``|`` there)."""
    return lowering(lambda c, a, b: f"({a} {bool_symbol if bool_symbol and is_bool(c.dtype) else symbol} {b})")


def float_suffix(dtype) -> str:
    """``f32`` / ``f64``: the suffix of a library function at a float loop dtype."""
    suffix = ROUTINE_DTYPES.get(compute_dtype(dtype).name)
    if suffix is None:
        raise ValueError(f"no float library function at {dtype}")
    return suffix


def per_float(function: str) -> ScalarRule:
    """A rule calling ``fj.<function>_f32`` / ``_f64`` at the loop dtype: how a target whose
    library has one function per precision (CUDA's libdevice) spells a float routine."""
    return lambda c, *operands: f"fj.{function}_{float_suffix(c.dtype)}({', '.join(operands)})"


def call(function: str) -> Lowering:
    """``function(operands...)``: ``math.sqrt``, ``np.floor``."""
    return lowering(lambda c, *operands: f"{function}({', '.join(operands)})")
