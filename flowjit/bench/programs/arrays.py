"""Array manipulation and integer arithmetic: concatenate, stack, one-hot, encodings, // and %."""

import numpy as np

from flowjit.bench.programs.registry import normal32, program, rows, uniform32


def feature_inputs(elements, rng):
    n, width = rows(elements, 32)
    return normal32(rng, n, 8), normal32(rng, 32, 4)


@program(feature_inputs, "polynomial and sine features with np.concatenate(axis=1), then @ w")
def poly_features(x, w):
    features = np.concatenate([x, x**2, x**3, np.sin(x)], axis=1)
    return features @ w


def channels(elements, rng):
    n = max(1, elements // 3)
    return tuple(uniform32(rng, -0.2, 1.2, n) for _ in range(3))


@program(channels, "clip three channels and np.stack them into uint8 pixels")
def stack_rgb(r, g, b):
    rgb = np.stack([r, g, b], axis=-1)
    return (np.clip(rgb, 0, 1) * 255).astype(np.uint8)


@program(lambda elements, rng: (np.arange(max(1, elements // 128), dtype=np.float32),),
         "sinusoidal positional encoding, d=128: 10000 ** (np.arange(0, d, 2) / d), sin and cos concatenated")
def positional_encoding(positions, d=128):
    div = 10000 ** (np.arange(0, d, 2) / d)
    angles = positions[:, None] / div
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=-1)


@program(lambda elements, rng: tuple(rng.standard_normal(elements) for _ in range(2)),
         "Cartesian to polar with np.sqrt(x**2 + y**2) and np.arctan2, np.stack'ed")
def to_polar(x, y):
    return np.stack([np.sqrt(x**2 + y**2), np.arctan2(y, x)], axis=0)


@program(lambda elements, rng: (rng.integers(0, 100, max(1, elements // 100)),),
         "one-hot encoding of int64 labels into 100 classes: labels[:, None] == np.arange(k)")
def one_hot(labels, classes=100):
    return (labels[:, None] == np.arange(classes)).astype(np.float32)


@program(lambda elements, rng: (rng.integers(0, 2**31, elements, dtype=np.int64),),
         "three steps of a linear congruential generator in int64 (% 2**31), then uniforms in [0, 1)")
def lcg_uniform(state, a=1103515245, c=12345, m=2**31):
    for _ in range(3):
        state = (a * state + c) % m
    return state, state / m


@program(lambda elements, rng: (rng.integers(0, 10**9, elements, dtype=np.int64),),
         "int64 seconds to days, hours, minutes and seconds with // and %, np.stack'ed")
def time_components(seconds):
    days = seconds // 86400
    hours = seconds % 86400 // 3600
    minutes = seconds % 3600 // 60
    secs = seconds % 60
    return np.stack([days, hours, minutes, secs], axis=1)


@program(lambda elements, rng: (rng.integers(0, 10**9, elements, dtype=np.int32),),
         "decimal digit sum of int32 values: (x // 10**k) % 10 summed over nine digits")
def digit_sum(x):
    total = np.zeros_like(x)
    for k in range(9):
        total += (x // 10**k) % 10
    return total


@program(lambda elements, rng: (normal32(rng, *rows(elements, 1024)),),
         "central differences with edge padding: np.pad(mode='edge')")
def padded_gradient(u):
    padded = np.pad(u, 1, mode="edge")
    gx = (padded[1:-1, 2:] - padded[1:-1, :-2]) / 2
    gy = (padded[2:, 1:-1] - padded[:-2, 1:-1]) / 2
    return gx, gy


@program(lambda elements, rng: (normal32(rng, *rows(elements, 1024)),),
         "shift rows left and right with np.concatenate and zero columns, combine")
def shift_concat(x):
    zeros = np.zeros((x.shape[0], 1), dtype=x.dtype)
    left = np.concatenate([x[:, 1:], zeros], axis=1)
    right = np.concatenate([zeros, x[:, :-1]], axis=1)
    return 0.25 * left + 0.5 * x + 0.25 * right
