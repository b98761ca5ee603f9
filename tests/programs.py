"""A corpus of ordinary numpy programs, each with example arguments.

Every compiled path is checked against the undecorated function on these.  They use
nothing from flowjit: this is the code users write.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy.special import erf, expit


@dataclass(frozen=True)
class Program:
    name: str
    fun: Callable
    make_args: Callable[[np.random.Generator], tuple]
    static_argnums: tuple = ()


PROGRAMS: list[Program] = []


def program(*shapes, static_argnums=()):
    """Register ``fun`` with a maker for its arguments (a function of a numpy Generator)."""
    def wrap(fun):
        make = shapes[0] if shapes and callable(shapes[0]) else (
            lambda rng: tuple(rng.standard_normal(s).astype(np.float32) for s in shapes))
        PROGRAMS.append(Program(fun.__name__, fun, make, static_argnums))
        return fun
    return wrap


def f32(rng, *shape, low=-2.0, high=2.0):
    return rng.uniform(low, high, shape).astype(np.float32)


def f64(rng, *shape, low=-2.0, high=2.0):
    return rng.uniform(low, high, shape)


# -- machine-learning building blocks ------------------------------------------------------------
@program((4, 16))
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@program(lambda rng: (f32(rng, 4, 16), f32(rng, 16), f32(rng, 16)))
def layernorm(x, gamma, beta):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * gamma + beta


@program((8, 8))
def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


@program((8, 8))
def gelu_erf(x):
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


@program(lambda rng: (f64(rng, 64, low=10, high=100), f64(rng, 64, low=10, high=100),
                      f64(rng, 64, low=0.1, high=2.0)))
def black_scholes(S, X, T, r=0.02, v=0.3):
    def cnd(d):
        return 0.5 * (1.0 + erf(d / np.sqrt(2.0)))
    sqrt_t = np.sqrt(T)
    d1 = (np.log(S / X) + (r + 0.5 * v * v) * T) / (v * sqrt_t)
    d2 = d1 - v * sqrt_t
    call = S * cnd(d1) - X * np.exp(-r * T) * cnd(d2)
    put = X * np.exp(-r * T) * cnd(-d2) - S * cnd(-d1)
    return call, put


@program(lambda rng: (f32(rng, 8, 16), f32(rng, 16, 32), f32(rng, 32), f32(rng, 32, 4), f32(rng, 4)))
def mlp(x, w1, b1, w2, b2):
    hidden = np.maximum(x @ w1 + b1, 0)
    return hidden @ w2 + b2


@program((4, 16))
def logsumexp(x):
    m = np.max(x, axis=1, keepdims=True)
    return np.log(np.sum(np.exp(x - m), axis=1)) + m[:, 0]


@program((6, 8), (6, 8))
def cosine_similarity(a, b):
    dot = np.sum(a * b, axis=-1)
    return dot / (np.sqrt(np.sum(a * a, axis=-1)) * np.sqrt(np.sum(b * b, axis=-1)))


@program((16,))
def sigmoid(x):
    return 1 / (1 + np.exp(-x))


@program((16,))
def sigmoid_scipy(x):
    return expit(x)


@program((4, 8))
def silu(x):
    return x * expit(x)


@program((4, 8))
def relu6(x):
    return np.clip(x * 4, 0, 6)


@program((4, 8))
def leaky_relu(x):
    return np.where(x > 0, x, 0.01 * x)


@program((4, 8))
def softplus(x):
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)


@program((4, 8))
def elu(x):
    return np.where(x > 0, x, np.expm1(x))


@program((4, 8), (4, 8))
def mse(pred, target):
    return np.mean((pred - target) ** 2)


@program(lambda rng: (f32(rng, 4, 5), np.eye(5, dtype=np.float32)[rng.integers(0, 5, 4)]))
def cross_entropy(logits, onehot):
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return -(onehot * log_probs).sum(axis=1).mean()


@program((3, 4, 8))
def batched_rmsnorm(x):
    return x / np.sqrt(np.mean(np.square(x), axis=-1, keepdims=True) + 1e-6)


@program(lambda rng: (f32(rng, 2, 4, 8), f32(rng, 2, 8, 4)))
def batched_attention_scores(q, k):
    scores = q @ k / np.sqrt(np.float32(q.shape[-1]))
    return np.argmax(scores, axis=-1), scores.max(axis=-1)


@program((8, 8))
def standardize_columns(x):
    return (x - x.mean(axis=0)) / (x.std(axis=0) + 1e-6)


@program((16,))
def variance_ddof(x):
    return np.var(x, ddof=1), np.std(x, ddof=1)


# -- elementwise arithmetic ----------------------------------------------------------------------
@program((32,))
def chain(x):
    return ((x * 2 + 1) * x - 3) / (x * x + 1)


@program(lambda rng: (f64(rng, 16, low=0.1, high=4),))
def transcendental_mix(x):
    return np.log(x) + np.log2(x) * np.log10(x) - np.sqrt(x) + np.exp2(-x) + np.log1p(x)


@program(lambda rng: (f64(rng, 16, low=-0.9, high=0.9),))
def inverse_trig(x):
    return np.arcsin(x) + np.arccos(x) * np.arctan(x) + np.arctan2(x, 0.5)


@program((16,))
def hyperbolic(x):
    return np.sinh(x) - np.cosh(x) + np.tanh(x) + np.sin(x) * np.cos(x) - np.tan(x / 4)


@program(lambda rng: (f64(rng, 16, low=-1e300, high=1e300), f64(rng, 16).astype(np.float32) * np.float32(1e30)))
def trig_of_huge_arguments(x, y):
    """sin and cos far from zero in both dtypes: the kernels' exact argument reduction."""
    return np.sin(x) * np.cos(x * 1e-150), np.cos(y) - np.sin(y * np.float32(1e-20))


@program(lambda rng: (rng.integers(-50, 50, 24).astype(np.int32), rng.integers(1, 7, 24).astype(np.int32)))
def integer_arithmetic(a, b):
    return a // b, a % b, a * b - 3, -a, abs(a), np.sign(a), a ** 2


@program(lambda rng: (rng.integers(-50, 50, 24).astype(np.int64), rng.integers(1, 7, 24).astype(np.int16)))
def mixed_integer_promotion(a, b):
    return a + b, a / b, b * 2, b / 2, (b + 1).astype(np.float32) * 1.5


@program(lambda rng: (rng.integers(0, 255, 16).astype(np.uint8),))
def uint8_wraparound(a):
    return a + 200, a - 1, a * 3, a // 3


@program(lambda rng: (f32(rng, 16) * 10,))
def rounding(x):
    return np.floor(x), np.ceil(x), np.rint(x), np.trunc(x), np.round(x)


@program(lambda rng: (f32(rng, 8), f64(rng, 8)))
def float_promotion(a, b):
    return a + b, a * 2.5, a * np.float64(2.5), b.astype(np.float32) + a, np.float32(3) * a


@program(lambda rng: (np.array([1.0, -1.0, 0.0, -0.0, np.inf, -np.inf, np.nan, 2.0], np.float32),))
def special_values(x):
    return np.isnan(x), np.isinf(x), np.isfinite(x), 1 / x, np.maximum(x, 0), np.fmax(x, 0), np.fmin(x, 1)


@program(lambda rng: (f32(rng, 4, 4) > 0, f32(rng, 4, 4) > 0.5))
def boolean_logic(a, b):
    return a & b, a | b, a ^ b, ~a, np.logical_and(a, b), np.logical_or(a, ~b), np.logical_xor(a, b), \
        np.logical_not(a), (a + b).sum()


@program(lambda rng: (f32(rng, 8), f32(rng, 8)))
def comparisons(a, b):
    return a < b, a <= b, a > b, a >= b, a == b, a != b, np.where(a < b, a, b)


@program(lambda rng: (f32(rng, 16, low=0.5, high=2),))
def powers_and_reciprocal(x):
    return x ** 3, x ** 0.5, np.reciprocal(x), np.square(x), 2 ** x, np.power(x, x)


@program(lambda rng: (f16(rng),))
def float16_math(x):
    return x * 2 + 1, np.exp(x), x.sum(), x.mean(), np.sqrt(np.abs(x))


def f16(rng):
    return rng.uniform(-2, 2, 16).astype(np.float16)


# -- reductions, shapes and indexing --------------------------------------------------------------
@program((3, 4, 5))
def reductions_everywhere(x):
    return (x.sum(), x.sum(axis=0), x.sum(axis=(0, 2)), x.max(axis=1), x.min(axis=-1, keepdims=True),
            np.prod(x, axis=2), np.amax(x), np.amin(x, axis=0))


@program(lambda rng: (rng.integers(-5, 5, (4, 6)).astype(np.int32),))
def integer_reductions(x):
    return x.sum(), x.sum(axis=1), x.mean(), np.prod(x, axis=0), np.argmax(x), np.argmin(x, axis=1)


@program(lambda rng: (f32(rng, 4, 6) > 0,))
def bool_reductions(x):
    return x.sum(), np.any(x, axis=1), np.all(x), x.mean(axis=0)


@program((4, 6))
def argmax_argmin(x):
    return np.argmax(x, axis=0), np.argmin(x, axis=1, keepdims=True), x.argmax(), np.argmax(x, axis=-1)


@program((2, 3, 4))
def transposes_and_reshapes(x):
    return x.T, np.transpose(x, (1, 0, 2)), x.reshape(6, 4), x.reshape(-1), np.swapaxes(x, 0, 2), \
        x.reshape((4, -1)).T @ np.ones((4, 2), np.float32)


@program((6, 8))
def slicing(x):
    return x[1:4, ::2], x[-1], x[:, 3], x[::-1, 1:-1:3], x[2, 5], x[None, 1:3, ..., None], x[..., -2:]


@program((1, 4, 1))
def squeeze_expand(x):
    return np.squeeze(x), np.squeeze(x, axis=0), np.expand_dims(x[0, :, 0], 1), np.expand_dims(x, (0, 3))


@program((3, 4), (3, 4))
def concat_stack(a, b):
    return np.concatenate([a, b]), np.concatenate((a, b), axis=1), np.stack([a, b]), \
        np.stack([a, b, a], axis=-1), np.concatenate([a, b], axis=None)


@program((3, 1), (1, 4))
def outer_broadcast(a, b):
    return a * b, a + b, np.broadcast_to(a, (2, 3, 4)), np.maximum(a, b)


@program((4, 5))
def like_constructors(x):
    return np.zeros_like(x), np.ones_like(x, dtype=np.int32) + 1, np.full_like(x, 7.5) * x, \
        np.full_like(x, 3, dtype=np.float64)


@program((5,), (5, 3), (3,))
def matmul_variants(v, m, w):
    return v @ m, m @ w, np.dot(v, m), np.dot(m, w), np.matmul(m.T, m), v.dot(m), np.dot(v, v)


@program((4, 4))
def masked_fill(x):
    mask = x > 0.5
    return np.where(mask, -np.inf, x).max(axis=1), np.where(mask, 1, 0).sum()


@program(lambda rng: (f32(rng, 4, 4),), static_argnums=(1,))
def static_power(x, n=3):
    result = x
    for _ in range(n - 1):
        result = result * x
    return result


@program(lambda rng: ({"w": f32(rng, 4, 3), "b": f32(rng, 3)}, [f32(rng, 2, 4), f32(rng, 5, 4)]))
def nested_structures(params, batches):
    outs = [np.tanh(batch @ params["w"] + params["b"]) for batch in batches]
    return {"first": outs[0], "rest": tuple(outs[1:]), "count": len(outs)}


@program(lambda rng: (np.float32(2.5), f32(rng, 4)))
def numpy_scalar_argument(scale, x):
    return scale * x + scale, np.sqrt(scale)


@program((4, 8))
def clip_and_minmax(x):
    return np.clip(x, -0.5, 0.5), x.clip(min=0), np.minimum(np.maximum(x, -1), 1)


@program((3, 5))
def cumulative_unrolled(x):
    total = x[:, 0]
    outs = [total]
    for j in range(1, x.shape[1]):
        total = total + x[:, j]
        outs.append(total)
    return np.stack(outs, axis=1)


@program((8,))
def polynomial_horner(x):
    coefficients = [0.5, -1.25, 2.0, 0.125, -0.75]
    result = np.zeros_like(x)
    for c in coefficients:
        result = result * x + c
    return result


@program(lambda rng: (f32(rng, 4, 3), rng.integers(0, 3, 4).astype(np.int64)))
def dtype_conversions(x, labels):
    return x.astype(np.int32), labels.astype(np.float32) / 2, (x > 0).astype(np.float64), \
        x.astype(np.float16).astype(np.float32), labels * 1.0
