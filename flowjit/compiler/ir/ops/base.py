"""The op registry: every op is defined once, with all it needs next to it.

An ``Op`` holds its attribute specs, its type rule (shapes and dtypes, numpy 2
promotion and broadcasting), its numpy reference implementation (which the
interpreter and constant folding both use), its kind, and flags passes consult
(commutative, stateful), and the rules later stages read: its scalar lowering in the kernel
language (``lowering.py``, with per-target overrides), a reduction's start value and combine,
its cost in flops, and its gradient rule.  The parser is the only code that maps op names to ops.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from flowjit.compiler.ir.types import TensorType, check_dtype, dtype_from_short_name
from flowjit.errors import OpTypeError, ShapeError


class OpKind(enum.Enum):
    ELEMENTWISE = "elementwise"
    REDUCTION = "reduction"
    LIBRARY = "library"             # one library call outside kernels: extensions["compiled"](node) makes it
    SHAPE = "shape"
    MATMUL = "matmul"
    CONSTANT = "constant"
    STATEFUL = "stateful"
    FUSED = "fused"


class AttrKind(enum.Enum):
    INT = "int"
    OPTIONAL_INT = "int?"
    FLOAT = "float"
    BOOL = "bool"
    STR = "str"
    INTS = "ints"
    DTYPE = "dtype"
    ARRAY = "array"        # a numpy array whose dtype and shape come from the node's type
    GRAPH = "graph"
    PLAN = "plan"          # a KernelPlan (ir/plan.py): what fusion decided for a fused node


@dataclass(frozen=True)
class AttrSpec:
    kind: AttrKind
    default: Any = None
    required: bool = False


def attr(kind: AttrKind, default: Any = None) -> AttrSpec:
    return AttrSpec(kind, default, required=False)


def required(kind: AttrKind) -> AttrSpec:
    return AttrSpec(kind, None, required=True)


TypeRule = Callable[[list[TensorType], dict], list[TensorType]]
Reference = Callable[[list[np.ndarray], dict], list[np.ndarray]]


@dataclass(frozen=True, eq=False)
class Op:
    """One operation.  Compared by identity: passes test ``node.op is ops.add``."""

    name: str
    kind: OpKind
    num_inputs: int | None              # None: variadic (one or more)
    type_rule: TypeRule
    reference: Reference
    attrs: dict[str, AttrSpec] = field(default_factory=dict)
    commutative: bool = False
    stateful: bool = False
    ufunc: Any = None                   # the numpy ufunc an elementwise op mirrors
    special: str | None = None          # or the scipy.special ufunc it mirrors (erf, expit)
    doc: str = ""
    # -- the op's rules for the later stages, next to its definition (JAX's per-primitive rules)
    lowering: Any = None                # elementwise: a lowering.Lowering (one element in the kernel language)
    combine: Any = None                 # reduction: (accumulator dtype) -> (start literal, combine(a, b) text)
    flops: float = 1.0                  # per result element, for the cost model
    gradient: Callable | None = None    # reverse-mode rule (the gradients pass)
    complex: bool = False               # takes and makes complex values (an elementwise op: where its
                                        # lowering has a complex rule); others refuse them when typed
    # Hooks other layers register next to the op.
    extensions: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"ops.{self.name}"

    # -- attributes --------------------------------------------------------------------
    def normalize_attrs(self, attrs: dict) -> dict:
        """Fill defaults, reject unknown names, convert values to their canonical form."""
        unknown = set(attrs) - set(self.attrs)
        if unknown:
            raise OpTypeError(f"op '{self.name}' has no attribute {', '.join(sorted(unknown))}"
                              f" (it takes: {', '.join(self.attrs) or 'none'})")
        normalized = {}
        for name, spec in self.attrs.items():
            if name in attrs:
                normalized[name] = _convert_attr(self.name, name, spec.kind, attrs[name])
            elif spec.required:
                raise OpTypeError(f"op '{self.name}' needs attribute '{name}'")
            else:
                normalized[name] = spec.default
        return normalized

    # -- types -------------------------------------------------------------------------
    def infer_types(self, input_types: list[TensorType], attrs: dict) -> list[TensorType]:
        if self.num_inputs is not None and len(input_types) != self.num_inputs:
            raise OpTypeError(f"op '{self.name}' takes {self.num_inputs} inputs, got {len(input_types)}")
        if self.num_inputs is None and not input_types and self.kind is not OpKind.FUSED:
            raise OpTypeError(f"op '{self.name}' takes at least one input")
        if not self.complex and any(t.dtype.kind == "c" for t in input_types):
            raise OpTypeError(f"op '{self.name}' does not take complex values yet (got "
                              f"{', '.join(str(t) for t in input_types)})")
        return self.type_rule(input_types, attrs)

    # -- evaluation --------------------------------------------------------------------
    def evaluate(self, arrays: list[np.ndarray], attrs: dict) -> list[np.ndarray]:
        """Run the numpy reference implementation; results are arrays, never scalars."""
        with np.errstate(all="ignore"):
            results = self.reference(arrays, attrs)
        return [np.asarray(result) for result in results]


def _convert_attr(op_name: str, name: str, kind: AttrKind, value):
    def fail(expected: str):
        raise OpTypeError(f"attribute '{name}' of op '{op_name}' must be {expected}, got {value!r}")

    if kind is AttrKind.INT:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            fail("an integer")
        return int(value)
    if kind is AttrKind.OPTIONAL_INT:
        return None if value is None else _convert_attr(op_name, name, AttrKind.INT, value)
    if kind is AttrKind.FLOAT:
        if not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, bool):
            fail("a number")
        return float(value)
    if kind is AttrKind.BOOL:
        if not isinstance(value, (bool, np.bool_)):
            fail("true or false")
        return bool(value)
    if kind is AttrKind.STR:
        if not isinstance(value, str):
            fail("a string")
        return value
    if kind is AttrKind.INTS:
        if not isinstance(value, (list, tuple)) or not all(
                isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
            fail("a list of integers")
        return tuple(int(v) for v in value)
    if kind is AttrKind.DTYPE:
        if isinstance(value, str):
            try:
                return dtype_from_short_name(value)
            except KeyError:
                fail("a dtype such as f32")
        return check_dtype(value, f"attribute '{name}'")
    if kind is AttrKind.ARRAY:
        if not isinstance(value, (np.ndarray, np.generic)):
            fail("a numpy array")
        return np.asarray(value)
    if kind is AttrKind.PLAN:
        from flowjit.compiler.ir.plan import KernelPlan
        if not isinstance(value, KernelPlan):
            fail("a kernel plan")
    return value


# -- the registry --------------------------------------------------------------------------
_REGISTRY: dict[str, Op] = {}


def register(op: Op) -> Op:
    if op.name in _REGISTRY:
        raise ValueError(f"op '{op.name}' is registered twice")
    _REGISTRY[op.name] = op
    return op


def numpy_call(node) -> Callable:
    """What runs a library op that is one call of numpy's own -- its reference -- on the
    driver's arrays: float16 values, which the driver holds in float32, go in as float16 (numpy
    sorts, searches and computes quantiles of float16 in float16) and a float16 result is held
    in float32 again."""
    op, attrs = node.op, dict(node.attrs)
    halves = [value.dtype == np.float16 for value in node.inputs]
    half_result = node.output.dtype == np.float16

    def call(*arrays):
        arrays = [array.astype(np.float16) if half else array for array, half in zip(arrays, halves)]
        (result,) = op.reference(arrays, attrs)
        return result.astype(np.float32) if half_result else result
    call.__name__ = f"{op.name}_"
    return call


def lookup(name: str) -> Op:
    return _REGISTRY[name]


def all_ops() -> dict[str, Op]:
    return dict(_REGISTRY)


def inlines_math(node) -> bool:
    """Whether a node's lowering inlines a float math routine (exp, log, pow...): a long chain
    of dependent operations per element, which loops must keep vectorised (the staged loops
    of loop kernels, the unfolded reductions of short rows)."""
    lowering = node.op.lowering
    return lowering is not None and lowering.routine is not None and node.output.dtype.kind == "f"


def routine_ops() -> dict[str, Op]:
    """Ops whose lowering calls a vectorised library routine, by routine name (``exp``:
    ``ops.exp``): what fusion counts against its cap, and what the accuracy table measures."""
    return {op.lowering.routine: op for op in _REGISTRY.values()
            if op.lowering is not None and op.lowering.routine is not None}


# -- shape helpers shared by type rules ----------------------------------------------------
def broadcast_shapes(types: list[TensorType]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*(t.shape for t in types)))
    except ValueError:
        shapes = " and ".join(str(t) for t in types)
        raise ShapeError(f"shapes {shapes} do not broadcast together") from None


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < max(rank, 1) or (rank == 0 and axis not in (0, -1)):
        raise ShapeError(f"{what} {axis} is out of bounds for a value of rank {rank}")
    return axis % rank if rank else 0
