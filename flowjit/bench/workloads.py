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
    name = "numpy"

    def __init__(self):
        self.exp, self.tanh, self.sqrt, self.log, self.maximum = np.exp, np.tanh, np.sqrt, np.log, np.maximum

    @staticmethod
    def erf(x):
        from scipy.special import erf      # only the workloads that need it import scipy
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
}
