"""Small real programs written against plain numpy; flowjit compiles them unchanged."""

import numpy as np
from scipy.special import erf


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def mlp(x, w1, b1, w2, b2):
    """The whitepaper's Fig. 1: relu(x @ W1 + b1) @ W2 + b2."""
    return np.maximum(x @ w1 + b1, 0) @ w2 + b2


def black_scholes(S, X, T, r=0.02, v=0.3):
    def cnd(d):
        return 0.5 * (1.0 + erf(d / np.sqrt(2.0)))
    sqrt_t = np.sqrt(T)
    d1 = (np.log(S / X) + (r + 0.5 * v * v) * T) / (v * sqrt_t)
    d2 = d1 - v * sqrt_t
    return S * cnd(d1) - X * np.exp(-r * T) * cnd(d2)


def repeated(x):
    """Computes one subexpression three times, folds constant arithmetic, multiplies by 1."""
    a = np.tanh(x * 2.0) + 1.0
    b = np.tanh(x * 2.0) + 1.0
    c = np.tanh(x * 2.0) + 1.0
    scale = np.ones_like(x) * 4.0 - 3.0      # constant arithmetic inside the graph: all ones
    return (a + b + c) * scale
