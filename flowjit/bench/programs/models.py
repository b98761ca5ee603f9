"""Neural-network building blocks, spelled as in numpy tutorials and reference code."""

import math

import numpy as np
from scipy.special import erf

from flowjit.bench.programs.registry import normal32, program, rows, side, uniform32


def vector32(elements, rng):
    return (normal32(rng, elements),)


def rows32(width):
    return lambda elements, rng: (normal32(rng, *rows(elements, width)),)


@program(vector32, "GELU, tanh approximation with np.sqrt(2/np.pi) and x**3")
def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


@program(vector32, "GELU, exact form with scipy's erf")
def gelu_erf(x):
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


@program(vector32, "numerically stable softplus: log1p(exp(-|x|)) + max(x, 0)")
def softplus(x):
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)


@program(vector32, "SiLU / swish: x * sigmoid(x)")
def silu(x):
    return x / (1 + np.exp(-x))


@program(rows32(1000), "softmax over rows of 1000 classes")
def softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


@program(rows32(1000), "log-softmax over rows of 1000 classes")
def log_softmax(x):
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def norm_inputs(elements, rng):
    x = normal32(rng, *rows(elements, 768))
    return x, uniform32(rng, 0.5, 1.5, 768), normal32(rng, 768)


@program(norm_inputs, "layer norm over rows of 768 with x.var, gamma and beta")
def layernorm(x, gamma, beta, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


@program(lambda elements, rng: norm_inputs(elements, rng)[:2], "RMS norm over rows of 768 (x**2)")
def rmsnorm(x, weight, eps=1e-6):
    return x / np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + eps) * weight


def batch_inputs(elements, rng):
    x = normal32(rng, *rows(elements, 256)) * 3 + 1
    return x, uniform32(rng, 0.5, 1.5, 256), normal32(rng, 256)


@program(batch_inputs, "batch norm (training statistics over the batch axis), 256 features")
def batchnorm(x, gamma, beta, eps=1e-5):
    mean = x.mean(axis=0)
    var = x.var(axis=0)
    x_hat = (x - mean) / np.sqrt(var + eps)
    return gamma * x_hat + beta


def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * np.power(x, 3))))


def mlp_inputs(elements, rng):
    batch = max(1, elements // 2048)
    return (normal32(rng, batch, 512), normal32(rng, 512, 2048) / np.float32(22.6), normal32(rng, 2048) * 0.1,
            normal32(rng, 2048, 512) / np.float32(45.0), normal32(rng, 512) * 0.1)


@program(mlp_inputs, "transformer MLP block: x @ w1 + b1 -> GELU (helper, np.power) -> @ w2 + b2 + residual")
def mlp_block(x, w1, b1, w2, b2):
    h = gelu(x @ w1 + b1)
    return x + h @ w2 + b2


def attention_inputs(elements, rng):
    seq = side(elements, multiple=16)
    return tuple(normal32(rng, seq, 64) for _ in range(3))


@program(attention_inputs, "scaled dot-product attention, one head of 64: q @ k.T / np.sqrt(d), softmax, @ v")
def attention(q, k, v):
    d = q.shape[-1]
    scores = q @ k.T / np.sqrt(d)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v


def multihead_inputs(elements, rng):
    seq = side(elements, per_pair=8, multiple=16)
    x = normal32(rng, seq, 512)
    weights = [normal32(rng, 512, 512) / np.float32(22.6) for _ in range(4)]
    return (x, *weights)


@program(multihead_inputs, "causal multi-head self-attention, 8 heads of 64: projections, reshape/transpose, "
                           "np.triu mask, np.where(-inf), softmax, output projection")
def causal_self_attention(x, wq, wk, wv, wo, heads=8):
    seq, width = x.shape
    head = width // heads
    q = (x @ wq).reshape(seq, heads, head).transpose(1, 0, 2)
    k = (x @ wk).reshape(seq, heads, head).transpose(1, 0, 2)
    v = (x @ wv).reshape(seq, heads, head).transpose(1, 0, 2)
    scores = q @ k.transpose(0, 2, 1) * head**-0.5
    mask = np.triu(np.ones((seq, seq), dtype=bool), k=1)
    scores = np.where(mask, -np.inf, scores)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    attn = scores / scores.sum(axis=-1, keepdims=True)
    out = (attn @ v).transpose(1, 0, 2).reshape(seq, width)
    return out @ wo


def batched_attention_inputs(elements, rng):
    seq = side(elements, per_pair=16, multiple=16)
    return tuple(normal32(rng, 2, 8, seq, 64) for _ in range(3))


@program(batched_attention_inputs, "batched attention with np.einsum('bhqd,bhkd->bhqk')")
def attention_einsum(q, k, v):
    scores = np.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    scores = scores / scores.sum(axis=-1, keepdims=True)
    return np.einsum("bhqk,bhkd->bhqd", scores, v)


def classification_inputs(elements, rng, classes=1000):
    batch = max(1, elements // classes)
    logits = normal32(rng, batch, classes) * 3
    labels = rng.integers(0, classes, batch)
    return logits, labels


def onehot_inputs(elements, rng):
    logits, labels = classification_inputs(elements, rng)
    onehot = np.eye(logits.shape[1], dtype=np.float32)[labels]
    return logits, onehot


@program(onehot_inputs, "cross-entropy with one-hot labels: -mean(sum(onehot * log_softmax))")
def cross_entropy_onehot(logits, onehot):
    logits = logits - logits.max(axis=1, keepdims=True)
    log_probs = logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True))
    return -np.mean(np.sum(onehot * log_probs, axis=1))


@program(classification_inputs, "cross-entropy with integer labels: log_probs[np.arange(n), labels]")
def cross_entropy_labels(logits, labels):
    logits = logits - logits.max(axis=1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return -log_probs[np.arange(len(labels)), labels].mean()


def adam_inputs(elements, rng):
    params, grads = normal32(rng, elements), normal32(rng, elements) * 0.01
    m, v = normal32(rng, elements) * 0.001, np.abs(normal32(rng, elements)) * 1e-5
    return params, grads, m, v


@program(adam_inputs, "one Adam step with bias correction (returns params, m, v)")
def adam_step(params, grads, m, v, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, t=10):
    m = beta1 * m + (1 - beta1) * grads
    v = beta2 * v + (1 - beta2) * grads**2
    m_hat = m / (1 - beta1**t)
    v_hat = v / (1 - beta2**t)
    params = params - lr * m_hat / (np.sqrt(v_hat) + eps)
    return params, m, v


def logistic_inputs(elements, rng):
    samples, features = rows(elements, 128)
    X = rng.standard_normal((samples, features))
    w = rng.standard_normal(features) * 0.1
    y = (rng.random(samples) < 0.5).astype(np.float64)
    return X, w, y


@program(logistic_inputs, "logistic regression: loss and gradient, float64 (sigmoid, log, X.T @ residual)")
def logistic_regression(X, w, y):
    p = 1 / (1 + np.exp(-(X @ w)))
    loss = -np.mean(y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12))
    grad = X.T @ (p - y) / len(y)
    return loss, grad


def huber_inputs(elements, rng):
    return normal32(rng, elements) * 2, normal32(rng, elements) * 2


@program(huber_inputs, "Huber loss with np.where, mean")
def huber_loss(pred, target, delta=1.0):
    error = pred - target
    small = np.abs(error) <= delta
    loss = np.where(small, 0.5 * error**2, delta * (np.abs(error) - 0.5 * delta))
    return loss.mean()
