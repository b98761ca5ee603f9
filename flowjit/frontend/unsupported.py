"""What flowjit does not trace, said usefully: the function, method or attribute by name,
what it is close to among what flowjit does trace, and where the full list is
(``flowjit.supported_functions()``) instead of the list itself."""

from __future__ import annotations

import numpy as np

from flowjit.errors import UnsupportedAttributeError, UnsupportedFunctionError, user_location

SEE_ALSO = "flowjit.supported_functions() lists what is supported"

# Close equivalents, by numpy name (functions, ufuncs and ndarray methods share one table).
HINTS = {
    "ediff1d": "use slicing instead: x.ravel()[1:] - x.ravel()[:-1]",
    "vdot": "use (np.conj(a).ravel() * b.ravel()).sum()",
    "tensordot": "reshape the operands to 2-d and use @",
    "kron": "use broadcasting and reshape: (a[:, None, :, None] * b[None, :, None, :]).reshape(...)",
    "nonzero": "its shape depends on the data; use np.where(cond, x, y) or a mask product",
    "argwhere": "its shape depends on the data; use np.where(cond, x, y)",
    "unique": "its shape depends on the data",
    "average": "use (x * w).sum(axis) / w.sum(axis)",
    "left_shift": "for non-negative shifts that stay in range, use x * 2**n",
    "right_shift": "for non-negative shifts, use x // 2**n",
    "copy": "use x.copy() (traced arrays are immutable: a copy is the value itself)",
    "fill": "traced arrays are immutable; use np.full_like(x, value)",
    "put": "flat-index writes are not traced; build the result with np.where",
    "at": "scatters are not traced; build the result with np.where",
    "view": "flowjit has no reinterpreting views; use x.astype(dtype) to convert values",
    "flat": "use x.ravel()",
    "tobytes": "traced arrays have no memory while tracing; return the array and convert the result",
    "strides": "traced arrays have no memory layout while tracing",
    "data": "traced arrays have no memory while tracing",
    "ctypes": "traced arrays have no memory while tracing",
    "base": "traced arrays have no memory while tracing",
    "flags": "traced arrays have no memory while tracing",
}


def numpy_name(function) -> str:
    """``np.diff``, ``np.linalg.norm``: the name a user writes for a numpy function."""
    module = getattr(function, "__module__", None) or "numpy"
    module = module.replace("numpy._core", "numpy").replace("numpy.core", "numpy").replace(".fromnumeric", "")
    module = module.replace(".numeric", "").replace(".multiarray", "").replace(".shape_base", "")
    module = "np" + module[len("numpy"):] if module.startswith("numpy") else module
    if module.startswith("np.lib"):
        module = "np"
    return f"{module}.{function.__name__}"


def unsupported_message(spelled: str, key: str) -> str:
    """``np.diff is not supported by flowjit; use slicing instead: ... (flowjit.supported_functions() ...)``."""
    hint = HINTS.get(key)
    return f"{spelled} is not supported by flowjit{'; ' + hint if hint else ''} ({SEE_ALSO})"


def function_error(function) -> UnsupportedFunctionError:
    """For a numpy function that reached ``__array_function__`` with no handler."""
    return UnsupportedFunctionError(unsupported_message(numpy_name(function), function.__name__),
                                    user_location())


def ufunc_error(ufunc, method: str) -> UnsupportedFunctionError:
    name = f"np.{ufunc.__name__}"
    spelled = name if method == "__call__" else f"{name}.{method}"
    return UnsupportedFunctionError(unsupported_message(spelled, ufunc.__name__ if method == "__call__" else method),
                                    user_location())


def attribute_error(tracer, name: str) -> UnsupportedAttributeError:
    """For ``x.name`` on a traced array where the Tracer has no such attribute."""
    if name.startswith("__") and name.endswith("__"):
        # A protocol probe (copy, pickle, numpy's __array_interface__...): cheap, no location.
        return UnsupportedAttributeError(f"traced arrays have no attribute '{name}'")
    if hasattr(np.ndarray, name):
        return UnsupportedAttributeError(unsupported_message(f"ndarray.{name}", name), user_location())
    return UnsupportedAttributeError(f"numpy arrays have no attribute '{name}' (the value is a traced "
                                     f"{tracer._value.type} array)", user_location())


def supported_functions() -> list[str]:
    """Every numpy function, ufunc and ndarray method flowjit traces, sorted (``np.sum``,
    ``ndarray.sum``, ``scipy.special.erf``...); Python operators on arrays map to these ufuncs."""
    from flowjit.frontend import numpy_api
    names = {numpy_name(function) for function in numpy_api.FUNCTIONS}
    names |= {f"np.{ufunc.__name__}" for ufunc in numpy_api.UFUNCS}
    names |= {"np.matmul", "np.positive", "np.divmod", "np.hypot"}
    names |= {f"np.{ufunc.__name__}.{method}" for ufunc in numpy_api.UFUNC_REDUCTIONS
              for method in ("reduce", "accumulate")}
    names |= {f"scipy.special.{name}" for name in numpy_api.SCIPY_UFUNCS}
    names |= {f"ndarray.{name}" for name in list(numpy_api.METHODS) + list(numpy_api.PROPERTIES)
              if hasattr(np.ndarray, name)}
    return sorted(names)
