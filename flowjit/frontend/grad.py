"""``flowjit.grad`` and ``flowjit.value_and_grad``, with JAX's calling conventions.

Inside a traced function they extend the graph being traced backwards from the result
(``ir.gradients``: the whitepaper's §4.1), so the backward program is optimised, fused and
compiled with the forward one; called on arrays, they run the same thing under ``jit``.
The arguments differentiated are pytrees of float arrays; the function must return a float
scalar (or ``(scalar, aux)`` with ``has_aux=True``).  Values the function closes over are
constants of the differentiation, as in JAX.
"""

from __future__ import annotations

import functools
from typing import Callable, Sequence

import numpy as np

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.gradients import GradientError, gradients
from flowjit.errors import user_location
from flowjit.frontend import pytree
from flowjit.frontend.tracer import Tracer, current_trace


def value_and_grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """A function returning ``(fun(*args), gradient)`` (``((value, aux), gradient)`` with
    ``has_aux``); the gradient has the structure of ``args[argnums]`` (a tuple of them for a
    sequence of argnums)."""
    several = not isinstance(argnums, int)
    positions = tuple(argnums) if several else (argnums,)

    @functools.wraps(fun)
    def traced(*args, **kwargs):
        trace = current_trace()
        for position in positions:
            if not -len(args) <= position < len(args):
                raise GradientError(f"grad of {_name(fun)}: argnums {position} is out of range for "
                                    f"{len(args)} positional arguments", user_location())
        args = list(args)
        wrt, structures = [], []
        for position in positions:
            leaves, paths, treedef = pytree.flatten(args[position])
            fresh = [_fresh(trace, leaf, path or f"argument {position}", fun) for leaf, path in zip(leaves, paths)]
            wrt.append(fresh)
            structures.append(treedef)
            args[position] = pytree.unflatten(treedef, fresh)
        result = fun(*args, **kwargs)
        value, aux = result if has_aux else (result, None)
        if has_aux and not (isinstance(result, tuple) and len(result) == 2):
            raise GradientError(f"grad of {_name(fun)} with has_aux=True: the function must return a pair "
                                f"(value, aux), got {type(result).__name__}", user_location())
        value = _scalar_result(trace, value, fun)
        flat = [leaf._value for leaves in wrt for leaf in leaves]
        grads = gradients(trace.graph, value._value, flat, loc=user_location())
        grads = iter([Tracer(trace, grad) for grad in grads])
        rebuilt = tuple(pytree.unflatten(treedef, [next(grads) for _ in range(treedef.num_leaves)])
                        for treedef in structures)
        return ((value, aux) if has_aux else value), (rebuilt if several else rebuilt[0])

    jitted = None

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        nonlocal jitted
        if current_trace() is not None:
            return traced(*args, **kwargs)
        if jitted is None:
            from flowjit.frontend.jit import jit
            jitted = jit(traced)
        return jitted(*args, **kwargs)
    return wrapped


def grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """The gradient of a scalar function with respect to ``args[argnums]`` (``(gradient, aux)``
    with ``has_aux``), as ``jax.grad``."""
    both = value_and_grad(fun, argnums, has_aux)

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        (value, aux), gradient = both(*args, **kwargs) if has_aux else ((None, None), both(*args, **kwargs)[1])
        return (gradient, aux) if has_aux else gradient
    return wrapped


def _name(fun) -> str:
    return getattr(fun, "__qualname__", None) or repr(fun)


def _fresh(trace, leaf, path: str, fun) -> Tracer:
    """The argument as a value of its own, so that only paths through it are differentiated
    (the same array closed over stays a constant)."""
    if not isinstance(leaf, Tracer):
        leaf = trace.constant(leaf)
    if leaf.dtype.kind not in "fc":
        raise GradientError(f"grad of {_name(fun)}: {path} is {leaf._value.type}; only floating-point "
                            f"arguments can be differentiated (cast it, or leave it out of argnums)",
                            user_location())
    return trace.emit1(ops.reshape, [leaf], {"shape": leaf.shape}, what="grad")


def _scalar_result(trace, value, fun) -> Tracer:
    if not isinstance(value, Tracer):
        if isinstance(value, (float, np.floating, np.ndarray)) and np.ndim(value) == 0:
            return trace.constant(value)
        raise GradientError(f"grad of {_name(fun)}: the function must return a float scalar, got "
                            f"{type(value).__name__}", user_location())
    if value.shape != () or value.dtype.kind not in "fc":
        raise GradientError(f"grad of {_name(fun)}: the function must return a float scalar, got "
                            f"{value._value.type} (reduce it, e.g. with .sum(), or use has_aux)", user_location())
    return value
