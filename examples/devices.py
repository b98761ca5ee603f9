"""Two independent branches, one pinned to cpu:1, joined at the end (README example)."""

import numpy as np

import flowjit


def two_branches(x, w):
    with flowjit.device("cpu:1"):
        a = np.tanh(x @ w)
    b = np.exp(x) * 2.0
    return a.sum() + b.sum()
