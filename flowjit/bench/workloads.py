"""The benchmark workloads, each written once against an array namespace.

``numpy`` (and so flowjit, which traces it), ``jax.numpy`` and ``torch`` get the same
program through a small adapter, so every mode computes exactly the same thing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np


class NumpyOps:
    """numpy's namespace, or another with numpy's API (CuPy: the GPU modes' eager peer)."""
    name = "numpy"

    def __init__(self, xp=np):
        self.xp = xp
        self.exp, self.tanh, self.sqrt, self.log, self.maximum = xp.exp, xp.tanh, xp.sqrt, xp.log, xp.maximum

    def erf(self, x):
        # only the workloads that need it import scipy (or CuPy's)
        if self.xp is np:
            from scipy.special import erf
        else:
            from cupyx.scipy.special import erf
        return erf(x)

    @staticmethod
    def max(x, axis):
        return x.max(axis=axis, keepdims=True)

    @staticmethod
    def sum(x, axis):
        return x.sum(axis=axis, keepdims=True)

    @staticmethod
    def mean(x, axis):
        return x.mean(axis=axis, keepdims=True)


class JaxOps:
    name = "jax"

    def __init__(self):
        import jax
        jax.config.update("jax_enable_x64", True)     # float64 workloads stay float64, as in numpy
        import jax.numpy as jnp
        from jax.scipy.special import erf
        self.erf, self.exp, self.tanh, self.sqrt, self.log = erf, jnp.exp, jnp.tanh, jnp.sqrt, jnp.log
        self.maximum = jnp.maximum
        self.jnp = jnp

    def max(self, x, axis):
        return self.jnp.max(x, axis=axis, keepdims=True)

    def sum(self, x, axis):
        return self.jnp.sum(x, axis=axis, keepdims=True)

    def mean(self, x, axis):
        return self.jnp.mean(x, axis=axis, keepdims=True)


class TorchOps:
    name = "torch"

    def __init__(self):
        import torch
        self.torch = torch
        self.erf, self.exp, self.tanh, self.sqrt, self.log = torch.erf, torch.exp, torch.tanh, torch.sqrt, torch.log

    def maximum(self, x, y):
        return self.torch.clamp(x, min=y) if isinstance(y, (int, float)) else self.torch.maximum(x, y)

    def max(self, x, axis):
        return self.torch.amax(x, dim=axis, keepdim=True)

    def sum(self, x, axis):
        return self.torch.sum(x, dim=axis, keepdim=True)

    def mean(self, x, axis):
        return self.torch.mean(x, dim=axis, keepdim=True)


def chain(xp, x):
    return ((x * 2 + 1) * x - 3) / (x * x + 1)


def gelu(xp, x):
    return 0.5 * x * (1.0 + xp.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def softmax(xp, x):
    e = xp.exp(x - xp.max(x, -1))
    return e / xp.sum(e, -1)


def layernorm(xp, x, gamma, beta):
    mean = xp.mean(x, -1)
    centered = x - mean
    var = xp.mean(centered * centered, -1)
    return centered / xp.sqrt(var + 1e-5) * gamma + beta


def black_scholes(xp, S, X, T):
    r, v = 0.02, 0.3
    sqrt_t = xp.sqrt(T)
    d1 = (xp.log(S / X) + (r + 0.5 * v * v) * T) / (v * sqrt_t)
    d2 = d1 - v * sqrt_t
    cnd1 = 0.5 * (1.0 + xp.erf(d1 / math.sqrt(2.0)))
    cnd2 = 0.5 * (1.0 + xp.erf(d2 / math.sqrt(2.0)))
    return S * cnd1 - X * xp.exp(-r * T) * cnd2


def mlp(xp, x, w1, b1, w2, b2):
    return xp.maximum(x @ w1 + b1, 0.0) @ w2 + b2


def mlp_small(xp, x, w1, b1, w2, b2):
    return xp.tanh(x @ w1 + b1) @ w2 + b2


# -- train_mlp: one SGD step of a 784 -> 1024 -> 1024 -> 10 ReLU network, softmax cross-entropy --------------
TRAIN_SIZES, TRAIN_BATCH, TRAIN_LR = (784, 1024, 1024, 10), 256, 0.01


def train_mlp_make(n, rng) -> tuple:
    """The batch, its one-hot labels and the initial parameters (w1, b1, w2, b2, w3, b3)."""
    x = rng.standard_normal((TRAIN_BATCH, TRAIN_SIZES[0])).astype(np.float32)
    onehot = np.eye(TRAIN_SIZES[-1], dtype=np.float32)[rng.integers(0, TRAIN_SIZES[-1], TRAIN_BATCH)]
    params = []
    for fan_in, fan_out in zip(TRAIN_SIZES[:-1], TRAIN_SIZES[1:]):
        params.append((rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)).astype(np.float32))
        params.append((rng.standard_normal(fan_out) * 0.1).astype(np.float32))
    return (x, onehot, *params)


def train_mlp_loss(params, x, onehot):
    """The mean softmax cross-entropy of the network's logits (numpy, traced by flowjit)."""
    h = x
    for index in range(0, len(params), 2):
        h = h @ params[index] + params[index + 1]
        if index + 2 < len(params):
            h = np.maximum(h, 0)
    shifted = h - h.max(axis=1, keepdims=True)
    log_probabilities = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return -np.mean(np.sum(onehot * log_probabilities, axis=1))


def train_mlp_numpy_step(params: list, x, onehot, lr=TRAIN_LR):
    """Hand-written backprop and SGD, updating ``params`` in place; returns the loss."""
    activations = [x]
    for index in range(0, len(params), 2):
        h = activations[-1] @ params[index]
        h += params[index + 1]
        if index + 2 < len(params):
            np.maximum(h, 0, out=h)
        activations.append(h)
    logits = activations.pop()
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probabilities = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = -np.mean(np.sum(onehot * log_probabilities, axis=1))
    delta = (np.exp(log_probabilities) - onehot) / np.float32(len(x))
    for index in range(len(params) - 2, -1, -2):
        below = activations[index // 2]
        grad_w, grad_b = below.T @ delta, delta.sum(axis=0)
        if index:
            delta = (delta @ params[index].T) * (below > 0)
        params[index] -= np.float32(lr) * grad_w
        params[index + 1] -= np.float32(lr) * grad_b
    return loss


def train_mlp_reference(xp, x, onehot, *params):
    """One step from the initial parameters: the loss and the updated parameters."""
    params = [p.copy() for p in params]
    loss = train_mlp_numpy_step(params, x, onehot)
    return (np.asarray(loss), *params)


def train_mlp_callables(mode: str, args):
    """One training step per call for ``mode``, each from its own copy of the initial parameters;
    a call returns (loss, *parameters) without copying them (the check converts them)."""
    x, onehot, *initial = args
    if mode == "numpy":
        params = [p.copy() for p in initial]
        return lambda: (train_mlp_numpy_step(params, x, onehot), *params)
    if mode in ("fused", "unfused"):
        import flowjit
        from flowjit import optim
        params = [flowjit.Variable(p, name=f"train_mlp/{mode}/p{i}") for i, p in enumerate(initial)]
        optimizer = optim.SGD(TRAIN_LR, name=f"train_mlp/{mode}/sgd")
        step = flowjit.jit(lambda x, onehot: optimizer.minimize(train_mlp_loss, params, x, onehot),
                           fuse=mode == "fused")
        return lambda: (step(x, onehot), *params)
    if mode == "jax":
        import jax
        import jax.numpy as jnp

        def loss(params, x, onehot):
            h = x
            for index in range(0, len(params), 2):
                h = h @ params[index] + params[index + 1]
                if index + 2 < len(params):
                    h = jnp.maximum(h, 0)
            return -jnp.mean(jnp.sum(onehot * jax.nn.log_softmax(h, axis=1), axis=1))

        def sgd(params, x, onehot):
            value, grads = jax.value_and_grad(loss)(params, x, onehot)
            return value, [p - TRAIN_LR * g for p, g in zip(params, grads)]
        step = jax.jit(sgd, donate_argnums=0)
        state = {"params": [jax.device_put(p.copy()) for p in initial]}
        device_x, device_onehot = jax.device_put(x), jax.device_put(onehot)

        def call():
            value, state["params"] = step(state["params"], device_x, device_onehot)
            jax.block_until_ready(state["params"])
            return (value, *state["params"])
        return call
    if mode in ("torch", "torch_eager"):
        import torch
        tensors = [torch.from_numpy(p.copy()).requires_grad_() for p in initial]
        tx, tonehot = torch.from_numpy(x), torch.from_numpy(onehot)

        def loss(params, x, onehot):
            h = x
            for index in range(0, len(params), 2):
                h = h @ params[index] + params[index + 1]
                if index + 2 < len(params):
                    h = torch.relu(h)
            return -(onehot * torch.log_softmax(h, dim=1)).sum(dim=1).mean()
        forward = torch.compile(loss) if mode == "torch" else loss
        optimizer = torch.optim.SGD(tensors, lr=TRAIN_LR)

        def call():
            optimizer.zero_grad(set_to_none=True)
            value = forward(tensors, tx, tonehot)
            value.backward()
            optimizer.step()
            return (value.detach(), *tensors)
        return call
    raise LookupError(f"train_mlp has no {mode} version")


@dataclass(frozen=True)
class Workload:
    name: str
    function: Callable
    make: Callable[[int, np.random.Generator], tuple]   # (elements, rng) -> numpy arguments
    dtype: str
    elementwise: bool          # a bandwidth bound applies
    numexpr: str | None = None
    sized: bool = True         # False: fixed shapes whatever the size (mlp)
    requires: tuple[str, ...] = ()   # modules the numpy version imports (erf: scipy); missing: skipped
    about: str = ""                  # one line for `flowjit bench --help`
    # A workload with state (a training step) makes each mode's callable itself: (mode, args) -> callable
    callables: Callable | None = None


def _rows(n, rng, width=1024):
    return rng.standard_normal((max(1, n // width), width)).astype(np.float32)


WORKLOADS = {
    "chain": Workload("chain", chain, lambda n, rng: (rng.standard_normal(n).astype(np.float32),), "float32",
                      True, "((x*2+1)*x-3)/(x*x+1)",
                      about="((x*2+1)*x-3)/(x*x+1): a chain of elementwise ops, float32"),
    "gelu": Workload("gelu", gelu, lambda n, rng: (rng.standard_normal(n).astype(np.float32),), "float32", True,
                     "0.5*x*(1.0+tanh(0.7978845608028654*(x+0.044715*x*x*x)))", about="GELU (tanh form), float32"),
    "softmax": Workload("softmax", softmax, lambda n, rng: (_rows(n, rng),), "float32", True,
                        about="softmax over rows of 1024, float32"),
    "layernorm": Workload("layernorm", layernorm,
                          lambda n, rng: (_rows(n, rng), rng.standard_normal(1024).astype(np.float32),
                                          rng.standard_normal(1024).astype(np.float32)), "float32", True,
                          about="layer norm over rows of 1024 with gamma and beta, float32"),
    "black_scholes": Workload("black_scholes", black_scholes,
                              lambda n, rng: (rng.uniform(10, 100, n), rng.uniform(10, 100, n),
                                              rng.uniform(0.1, 2.0, n)), "float64", True,
                              requires=("scipy",),
                              about="Black-Scholes call prices with erf (its numpy version needs scipy), float64"),
    "mlp": Workload("mlp", mlp, lambda n, rng: (
        rng.standard_normal((4096, 1024)).astype(np.float32),
        (rng.standard_normal((1024, 1024)) / 32).astype(np.float32), rng.standard_normal(1024).astype(np.float32),
        (rng.standard_normal((1024, 256)) / 32).astype(np.float32), rng.standard_normal(256).astype(np.float32)),
        "float32", False, sized=False,
        about="relu(x @ w1 + b1) @ w2 + b2, 4096x1024 -> 1024 -> 256, float32 (fixed shapes)"),
    "mlp_small": Workload("mlp_small", mlp_small, lambda n, rng: (
        rng.standard_normal((64, 784)).astype(np.float32),
        (rng.standard_normal((784, 128)) / 28).astype(np.float32), rng.standard_normal(128).astype(np.float32),
        (rng.standard_normal((128, 10)) / 11).astype(np.float32), rng.standard_normal(10).astype(np.float32)),
        "float32", False, sized=False,
        about="tanh(x @ w1 + b1) @ w2 + b2, 64x784 -> 128 -> 10, float32: small matmuls and their epilogues"),
    "train_mlp": Workload("train_mlp", train_mlp_reference, train_mlp_make, "float32", False, sized=False,
                          callables=train_mlp_callables,
                          about="one SGD step (forward, backward, update) of a 784 -> 1024 -> 1024 -> 10 ReLU "
                                "network, softmax cross-entropy, batch 256, float32; numpy is hand-written backprop"),
}
