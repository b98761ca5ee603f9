"""Optimisers on variables: ``SGD``, ``Adam``, ``AdamW``, with PyTorch's formulas (torch.optim).

An optimiser updates a pytree of ``flowjit.Variable`` parameters from a pytree of gradients of
the same structure::

    params = {"w": flowjit.Variable(w0, name="w"), "b": flowjit.Variable(b0, name="b")}
    optimizer = flowjit.optim.SGD(0.1, momentum=0.9)

    @flowjit.jit
    def train_step(x, y):
        loss, grads = flowjit.value_and_grad(loss_fn)(params, x, y)
        optimizer.apply(params, grads)
        return loss

Inside ``jit`` the update is traced into the step like any other numpy expression, so fusion
puts the elementwise updates of all parameters into a few kernels that write the variables
in place; outside ``jit`` it runs at once with numpy.  The optimiser's own state lives in
variables too (``optimizer.variables()``: a slot per parameter for momentum or moments, and
the step count), so a checkpoint of the parameters and the optimiser restores training
exactly.  Slots are made by ``init(params)``, or on the first ``apply`` (also while tracing).

Hyperparameters are Python numbers (constants of the compiled step), except ``lr``: a 0-d
float ``flowjit.Variable`` (given, or made from the number given as ``{name}/lr``, in the
parameters' dtype when they share one), which a
schedule assigns between steps without retracing, a checkpoint saves, and every parameter's
update reads, so fusion runs the updates of equally shaped parameters as one kernel.
Scalars that depend on the step count (Adam's bias corrections) are computed in float64, as
PyTorch computes them in Python floats, then cast to each parameter's dtype.
"""

from __future__ import annotations

import numpy as np

from flowjit.errors import ArgumentError, user_location
from flowjit.frontend import pytree
from flowjit.frontend.tracer import is_variable, outside_trace
from flowjit.frontend.variables import Variable

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]


class Optimizer:
    """What the optimisers share: slot variables per parameter, the step count, ``apply``."""

    slot_names: tuple[str, ...] = ()

    def __init__(self, lr, name: str):
        _check_hyperparameter("lr", lr, self, allow_variable=True)
        self.lr = lr
        self.name = name
        self.step_count: Variable | None = None        # int64 0-d: the number of updates applied
        self._slots: dict[str, tuple[Variable, dict[str, Variable]]] = {}   # param name -> (param, slots)

    def __repr__(self) -> str:
        return f"<flowjit.optim.{type(self).__name__} '{self.name}' lr={self.lr!r} params={len(self._slots)}>"

    # -- state --------------------------------------------------------------------------------------
    def init(self, params) -> None:
        """Make the step count and each parameter's slot variables (zeros), once."""
        parameters = self._parameters(params)
        with outside_trace():
            if self.step_count is None:
                self.name = _unique_prefix(self.name)
                self.step_count = Variable(np.int64(0), name=f"{self.name}/step")
                if not is_variable(self.lr):
                    # In the parameters' dtype when they share one (no cast per step; torch too
                    # rounds lr to it), else float64.
                    dtypes = {param.dtype for param in parameters}
                    dtype = dtypes.pop() if len(dtypes) == 1 else np.float64
                    self.lr = Variable(np.asarray(self.lr, dtype), name=f"{self.name}/lr")
            for param in parameters:
                if param.name not in self._slots:
                    slots = {slot: Variable(np.zeros(param.shape, param.dtype), name=f"{self.name}/{param.name}/{slot}",
                                            device=param.device, trainable=False)
                             for slot in self.slot_names}
                    self._slots[param.name] = (param, slots)
                elif self._slots[param.name][0] is not param:
                    raise ArgumentError(f"{self!r}: a different variable named '{param.name}' was given before; "
                                        f"an optimiser's slots follow its parameters by name", user_location())

    def variables(self) -> list[Variable]:
        """The optimiser's own variables (step count and learning rate first, then each slot):
        what a checkpoint saves besides the parameters."""
        found = [self.step_count, self.lr] if self.step_count is not None else []
        for _, slots in self._slots.values():
            found.extend(slots.values())
        return found

    # -- updating -----------------------------------------------------------------------------------
    def apply(self, params, grads) -> None:
        """Update each variable of ``params`` from the gradient at the same place in ``grads``
        and count one step.  Traced inside ``jit``; at once outside."""
        leaves, paths, treedef = pytree.flatten(params)
        gradient_leaves, _, gradient_tree = pytree.flatten(grads)
        if gradient_tree != treedef:
            raise ArgumentError(f"{type(self).__name__}.apply: the gradients' structure differs from the "
                                f"parameters' (params has {treedef.num_leaves} leaves, grads "
                                f"{gradient_tree.num_leaves})", user_location())
        self.init(params)
        self.step_count.assign_add(1)
        step = self.step_count.value()
        for param, gradient, path in zip(leaves, gradient_leaves, paths):
            if not param.trainable:
                continue
            if tuple(np.shape(gradient)) != param.shape:
                raise ArgumentError(f"{type(self).__name__}.apply: the gradient of '{path or param.name}' is "
                                    f"{list(np.shape(gradient))}, its variable {list(param.shape)}", user_location())
            self._update(param, gradient, self._slots[param.name][1], step)

    def minimize(self, loss_fn, params, *args, has_aux: bool = False, **kwargs):
        """``value_and_grad(loss_fn)(params, *args)``, then ``apply``; returns the loss (with aux)."""
        from flowjit.frontend.grad import value_and_grad
        value, grads = value_and_grad(loss_fn, has_aux=has_aux)(params, *args, **kwargs)
        self.apply(params, grads)
        return value

    def _update(self, param: Variable, gradient, slots: dict, step) -> None:
        raise NotImplementedError

    def _parameters(self, params) -> list[Variable]:
        leaves, paths, _ = pytree.flatten(params)
        for leaf, path in zip(leaves, paths):
            if not is_variable(leaf):
                raise ArgumentError(f"{type(self).__name__}: parameter '{path or '(root)'}' is a "
                                    f"{type(leaf).__name__}; an optimiser updates flowjit.Variables (make one "
                                    f"with flowjit.Variable(value, name=...))", user_location())
            if leaf.dtype.kind != "f":
                raise ArgumentError(f"{type(self).__name__}: parameter '{leaf.name}' is {leaf.dtype}; only "
                                    f"floating-point variables are trained", user_location())
        return leaves

    def _lr(self, dtype):
        return _scalar(self.lr, dtype)


class SGD(Optimizer):
    """torch.optim.SGD: ``g += weight_decay * p``; with momentum ``buf = momentum * buf + g``
    (``buf = g`` on the first step, which zeros give) and ``g = g + momentum * buf`` (nesterov)
    or ``g = buf``; then ``p -= lr * g``."""

    def __init__(self, lr, momentum: float = 0.0, nesterov: bool = False, weight_decay: float = 0.0,
                 name: str = "sgd"):
        _check_hyperparameter("momentum", momentum, self)
        _check_hyperparameter("weight_decay", weight_decay, self)
        if nesterov and momentum <= 0:
            raise ArgumentError("SGD(nesterov=True) needs a momentum > 0 (as torch.optim.SGD)", user_location())
        self.momentum, self.nesterov, self.weight_decay = momentum, bool(nesterov), weight_decay
        self.slot_names = ("momentum",) if momentum else ()
        super().__init__(lr, name)

    def _update(self, param, gradient, slots, step):
        if self.weight_decay:
            gradient = gradient + self.weight_decay * param.value()
        if self.momentum:
            buffer = slots["momentum"]
            new_buffer = buffer.value() * self.momentum + gradient
            buffer.assign(new_buffer)
            gradient = gradient + self.momentum * new_buffer if self.nesterov else new_buffer
        param.assign_sub(self._lr(param.dtype) * gradient)


class Adam(Optimizer):
    """torch.optim.Adam: ``g += weight_decay * p`` (L2); ``m = lerp(m, g, 1 - b1)``,
    ``v = b2 * v + (1 - b2) * g * g``; ``p -= lr / (1 - b1**t) * m / (sqrt(v) / sqrt(1 - b2**t) + eps)``."""

    slot_names = ("m", "v")
    decoupled = False

    def __init__(self, lr=1e-3, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, weight_decay: float = 0.0,
                 name: str | None = None):
        for label, value in (("b1", b1), ("b2", b2)):
            _check_hyperparameter(label, value, self)
            if not 0 <= value < 1:
                raise ArgumentError(f"{type(self).__name__}({label}={value!r}): must be in [0, 1)", user_location())
        _check_hyperparameter("eps", eps, self)
        _check_hyperparameter("weight_decay", weight_decay, self)
        self.b1, self.b2, self.eps, self.weight_decay = b1, b2, eps, weight_decay
        super().__init__(lr, name or type(self).__name__.lower())

    def _update(self, param, gradient, slots, step):
        dtype = param.dtype
        value = param.value()
        if self.weight_decay and self.decoupled:
            value = value * _cast(1 - self._lr(np.float64) * self.weight_decay, dtype)
        elif self.weight_decay:
            gradient = gradient + self.weight_decay * value
        m, v = slots["m"].value(), slots["v"].value()
        m = m + (1 - self.b1) * (gradient - m)                 # torch's lerp for a weight below 0.5
        v = v * self.b2 + (1 - self.b2) * (gradient * gradient)
        slots["m"].assign(m)
        slots["v"].assign(v)
        t = _as_float64(step)
        step_size = self._lr(np.float64) / (1 - self.b1 ** t)
        correction = np.sqrt(1 - self.b2 ** t)
        denominator = np.sqrt(v) / _cast(correction, dtype) + self.eps
        param.assign(value - _cast(step_size, dtype) * (m / denominator))


class AdamW(Adam):
    """torch.optim.AdamW: Adam with decoupled weight decay, ``p *= 1 - lr * weight_decay`` first."""

    decoupled = True

    def __init__(self, lr=1e-3, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, weight_decay: float = 1e-2,
                 name: str | None = None):
        super().__init__(lr, b1, b2, eps, weight_decay, name)


def _unique_prefix(name: str) -> str:
    """``name``, or ``name_1``, ``name_2``...: the first that no live variable's name starts
    with (so two optimisers' variables never share names, which checkpoints key on)."""
    from flowjit.runtime.variables import live_names
    taken = {existing.split("/", 1)[0] for existing in live_names() if "/" in existing}
    candidate, number = name, 0
    while candidate in taken:
        number += 1
        candidate = f"{name}_{number}"
    return candidate


def _scalar(item, dtype):
    """A hyperparameter in ``dtype``: a Python number stays weak (takes the array's dtype), a
    variable is read and cast."""
    if is_variable(item):
        return _cast(item.value(), dtype)
    return item


def _cast(value, dtype):
    if isinstance(value, (int, float)):
        return value
    return value.astype(dtype) if np.dtype(value.dtype) != np.dtype(dtype) else value


def _as_float64(step):
    return step.astype(np.float64) if hasattr(step, "astype") else np.float64(step)


def _check_hyperparameter(label: str, value, optimizer, allow_variable: bool = False) -> None:
    if allow_variable and is_variable(value):
        if value.shape != () or value.dtype.kind != "f":
            raise ArgumentError(f"{type(optimizer).__name__}({label}=Variable '{value.name}'): a variable "
                                f"hyperparameter is a 0-d float, not {value.dtype}{list(value.shape)}",
                                user_location())
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value < 0:
        raise ArgumentError(f"{type(optimizer).__name__}({label}={value!r}): must be a finite number >= 0"
                            + (" or a 0-d float flowjit.Variable" if allow_variable else ""), user_location())
