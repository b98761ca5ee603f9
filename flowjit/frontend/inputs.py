"""What may enter a trace: the checks on arguments and on values captured as constants.

An ndarray subclass that changes numpy's semantics (``np.matrix``'s ``*`` is a matrix
product, a masked array skips masked elements) would be computed by flowjit as a plain
ndarray, silently differently: it is refused, with what to pass instead.  A subclass that
keeps ndarray's semantics (``np.memmap``, a subclass adding attributes) is traced as its
data, and results come back as plain ndarrays, as ``jax.jit`` does.
"""

from __future__ import annotations

import sys

import numpy as np

from flowjit.errors import UnsupportedInputError, user_location

# Hooks through which an ndarray subclass changes what numpy computes for it.
_SEMANTIC_HOOKS = ("__array_ufunc__", "__array_function__", "__array_wrap__", "__getitem__",
                   "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
                   "__rtruediv__", "__floordiv__", "__mod__", "__pow__", "__rpow__", "__matmul__",
                   "__rmatmul__", "__neg__", "__abs__", "__lt__", "__le__", "__gt__", "__ge__", "__eq__",
                   "__ne__")
# Subclasses whose overrides keep ndarray's results (memmap only returns plain arrays from them).
_PLAIN_SUBCLASSES = (np.memmap,)


def array_class_problem(value) -> str | None:
    """Why ``value`` (an ndarray subclass) cannot be traced as its data, or None if it can."""
    cls = type(value)
    if cls is np.ndarray or not isinstance(value, np.ndarray) or isinstance(value, _PLAIN_SUBCLASSES):
        return None
    masked = sys.modules.get("numpy.ma")
    if masked is not None and isinstance(value, masked.MaskedArray):
        return ("is a np.ma.MaskedArray: flowjit does not trace masks; pass np.ma.filled(m, fill_value) "
                "(or m.data to ignore the mask)")
    if isinstance(value, np.matrix):
        return ("is a np.matrix, whose * and ** are matrix products: flowjit follows ndarray semantics; "
                "pass np.asarray(m) and write @ for a matrix product")
    overridden = [name for name in _SEMANTIC_HOOKS if getattr(cls, name, None) is not getattr(np.ndarray, name)]
    if overridden:
        return (f"is a {cls.__module__}.{cls.__qualname__}, an ndarray subclass that overrides "
                f"{', '.join(overridden[:4])}{', ...' if len(overridden) > 4 else ''}: flowjit computes with "
                f"plain ndarray semantics; pass np.asarray(value) if those are the semantics you want")
    return None


def check_argument_array(value, path: str) -> None:
    """Refuse an argument whose class flowjit would compute differently from numpy."""
    problem = array_class_problem(value)
    if problem is not None:
        raise UnsupportedInputError(f"argument '{path}' {problem}", user_location())


def operand_problem(item) -> str | None:
    """Why a non-traced operand of an op cannot become a constant, or None if it can."""
    problem = array_class_problem(item)
    if problem is not None:
        return problem
    if isinstance(item, (np.ndarray, np.generic, bool, int, float, complex, list, tuple)):
        return None
    return (f"is {_short_repr(item)} (of type {type(item).__name__}), not an array or a number: numpy ops "
            f"take arrays, numbers and lists of numbers")


def _short_repr(item) -> str:
    text = repr(item)
    return text if len(text) <= 40 else text[:37] + "..."
