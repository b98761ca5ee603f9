"""``flowjit.grad`` and ``flowjit.value_and_grad``, with JAX's calling conventions.

Inside a traced function they extend the graph being traced backwards from the result
(``ir.gradients``: the whitepaper's §4.1), so the backward program is optimised, fused and
compiled with the forward one; called on arrays, they run the same thing under ``jit``.
The arguments differentiated are pytrees of float arrays; the function must return a float
scalar (or ``(scalar, aux)`` with ``has_aux=True``).  Values the function closes over are
constants of the differentiation, as in JAX.

A leaf of the differentiated arguments may be a ``flowjit.Variable``: its value now is
differentiated, and the gradient comes back as an array in its place.  Every read of that
variable while the function runs (the argument, a closure, a global) is that value, as
TensorFlow's gradient of a variable counts every read, until the function assigns it.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Callable, Sequence

import numpy as np

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.gradients import GradientError, backward, gradients
from flowjit.errors import user_location
from flowjit.frontend import pytree
from flowjit.frontend.tracer import Tracer, current_trace, is_variable


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
        wrt, structures, targets = [], [], {}
        for position in positions:
            leaves, paths, treedef = pytree.flatten(args[position])
            fresh = [_fresh(trace, leaf, path or f"argument {position}", fun) for leaf, path in zip(leaves, paths)]
            for leaf, tracer in zip(leaves, fresh):
                if is_variable(leaf):
                    targets[leaf.name] = tracer
            wrt.append(fresh)
            structures.append(treedef)
            args[position] = pytree.unflatten(treedef, fresh)
        first_new = len(trace.graph.nodes)
        with _reads_differentiated(trace, targets):
            result = fun(*args, **kwargs)
        value, aux = result if has_aux else (result, None)
        if has_aux and not (isinstance(result, tuple) and len(result) == 2):
            raise GradientError(f"grad of {_name(fun)} with has_aux=True: the function must return a pair "
                                f"(value, aux), got {type(result).__name__}", user_location())
        value = _scalar_result(trace, value, fun)
        _check_reads(trace, targets, first_new, value, fun)
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


def tensor_gradients(ys, xs, grad_ys=None) -> list:
    """``flowjit.gradients``: TensorFlow's ``tf.gradients`` for graph mode (and inside ``jit``).

    Adds to the graph of ``ys`` the tensors d(sum over ys of sum(y * grad_y))/dx for each x of
    ``xs`` (``grad_ys`` ones by default) and returns them, in the order of ``xs``; None for an
    x that no y depends on, as TensorFlow.  ``ys`` and ``xs`` are a tensor or a list of them
    (or ``node:port`` names of the default graph); ``grad_ys`` one tensor or array per y.
    A y need not be a scalar."""
    location = user_location()
    single_y = not isinstance(ys, (list, tuple))
    ys = [ys] if single_y else list(ys)
    xs = [xs] if not isinstance(xs, (list, tuple)) else list(xs)
    if not ys or not xs:
        raise GradientError("flowjit.gradients(ys, xs): give at least one y and one x", location)
    trace = _common_trace(ys + xs, location)
    ys, xs = [_tensor(trace, item, "ys", location) for item in ys], [_tensor(trace, item, "xs", location) for item in xs]
    if grad_ys is None:
        seeds = [None] * len(ys)
    else:
        grad_ys = [grad_ys] if single_y and not isinstance(grad_ys, (list, tuple)) else list(grad_ys)
        if len(grad_ys) != len(ys):
            raise GradientError(f"flowjit.gradients: {len(grad_ys)} grad_ys for {len(ys)} ys", location)
        seeds = []
        for y, seed in zip(ys, grad_ys):
            if seed is None:
                seeds.append(None)
                continue
            seed = seed if isinstance(seed, Tracer) else trace.constant(np.asarray(seed, dtype=y.dtype))
            if seed.shape != y.shape or seed.dtype != y.dtype:
                hint = (" (a y with ? dimensions takes a tensor of the graph as its grad_y, e.g. a placeholder)"
                        if "?" in str(y._value.type) else "")
                raise GradientError(f"flowjit.gradients: grad_y {seed._value.type} does not match its y "
                                    f"{y._value.type} ('{y.name}'){hint}", location)
            seeds.append(seed._value)
    for x in xs:
        if x.dtype.kind not in "fc":
            raise GradientError(f"flowjit.gradients: x '{x.name}' is {x._value.type}; only floating-point "
                                f"tensors have gradients", location)
    found = backward(trace.graph, [y._value for y in ys], [x._value for x in xs], seeds, loc=location)
    return [Tracer(trace, value) if value is not None else None for value in found]


def _common_trace(items, location):
    traces = {id(item._trace): item._trace for item in items if isinstance(item, Tracer)}
    if len(traces) > 1:
        raise GradientError("flowjit.gradients: ys and xs belong to different graphs", location)
    if traces:
        return next(iter(traces.values()))
    trace = current_trace()
    if trace is None:
        raise GradientError("flowjit.gradients: give tensors, or call it inside `with graph.as_default():` to "
                            "name them", location)
    return trace


def _tensor(trace, item, what: str, location) -> Tracer:
    if isinstance(item, Tracer):
        return item
    if isinstance(item, str):
        try:
            return Tracer(trace, trace.graph.tensor_named(item))
        except KeyError:
            raise GradientError(f"flowjit.gradients: graph @{trace.graph.name} has no tensor named '{item}'",
                                location) from None
    raise GradientError(f"flowjit.gradients: {what} must hold tensors of the graph (or their names), not "
                        f"{type(item).__name__}", location)


def _name(fun) -> str:
    return getattr(fun, "__qualname__", None) or repr(fun)


def _fresh(trace, leaf, path: str, fun) -> Tracer:
    """The argument as a value of its own, so that only paths through it are differentiated
    (the same array closed over stays a constant).  A variable is read (its value now)."""
    if is_variable(leaf):
        leaf = trace.read_variable(leaf)
    elif not isinstance(leaf, Tracer):
        leaf = trace.constant(leaf)
    if leaf.dtype.kind not in "fc":
        raise GradientError(f"grad of {_name(fun)}: {path} is {leaf._value.type}; only floating-point "
                            f"arguments can be differentiated (cast it, or leave it out of argnums)",
                            user_location())
    return trace.emit1(ops.reshape, [leaf], {"shape": leaf.shape}, what="grad")


@contextlib.contextmanager
def _reads_differentiated(trace, targets: dict):
    """While the function runs, a read of a variable being differentiated (through a closure,
    a global or an attribute as well as the argument) is the value differentiated, until the
    function assigns that variable."""
    saved = {name: trace.shared_read.get(name) for name in targets}
    trace.shared_read.update(targets)
    try:
        yield
    finally:
        for name, tracer in saved.items():
            if trace.shared_read.get(name) is targets[name]:
                if tracer is None:
                    trace.shared_read.pop(name)
                else:
                    trace.shared_read[name] = tracer


def _check_reads(trace, targets: dict, first_new: int, value: Tracer, fun) -> None:
    """No silent partial gradient: a read of a target variable that the function made before
    assigning it (inside a control_dependencies scope, which asks for a read of its own) and
    that the result depends on would not be differentiated."""
    if not targets:
        return
    needed = {value._value}
    assigned = set()
    new_nodes = trace.graph.nodes[first_new:]
    for node in reversed(new_nodes):
        if any(output in needed for output in node.outputs):
            needed.update(node.inputs)
    for node in new_nodes:
        name = node.attrs.get("var")
        if name not in targets:
            continue
        if node.op is ops.assign_variable:
            assigned.add(name)
        elif node.op is ops.read_variable and name not in assigned and node.output in needed:
            raise GradientError(f"grad of {_name(fun)}: Variable '{name}' is differentiated, but the result also "
                                f"depends on a read of it made inside a control_dependencies scope, which is not "
                                f"the value differentiated (read it outside the scope)", node.loc)


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
