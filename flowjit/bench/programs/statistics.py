"""Statistics and data analysis on float64 data, as in notebooks and textbooks."""

import numpy as np

from flowjit.bench.programs.registry import program, rows, side


def table(width):
    return lambda elements, rng: (rng.standard_normal(rows(elements, width)) * 2 + 1,)


@program(table(64), "column z-scores: (x - x.mean(axis=0)) / x.std(axis=0)")
def zscore(x):
    return (x - x.mean(axis=0)) / x.std(axis=0)


@program(table(64), "sample covariance matrix of 64 columns: centred x.T @ x / (n - 1)")
def covariance(x):
    xc = x - x.mean(axis=0)
    return xc.T @ xc / (x.shape[0] - 1)


@program(table(64), "correlation matrix: covariance over np.outer of np.sqrt(np.diag(cov))")
def correlation(x):
    xc = x - x.mean(axis=0)
    cov = xc.T @ xc / (len(x) - 1)
    std = np.sqrt(np.diag(cov))
    return cov / np.outer(std, std)


@program(table(1000), "log-sum-exp over rows of 1000")
def logsumexp(x):
    m = np.max(x, axis=1, keepdims=True)
    return (m + np.log(np.sum(np.exp(x - m), axis=1, keepdims=True))).squeeze(1)


@program(lambda elements, rng: (rng.standard_normal(elements) * 2 + 1,),
         "normal pdf: exp(-0.5 * ((x - mu) / sigma) ** 2) / (sigma * np.sqrt(2 * np.pi))")
def normal_pdf(x, mu=1.0, sigma=2.0):
    return np.exp(-0.5 * ((x - mu) / sigma) ** 2) / (sigma * np.sqrt(2 * np.pi))


def mixture(elements, rng, components=16):
    n = max(1, elements // components)
    x = rng.standard_normal(n) * 3
    means = np.linspace(-4, 4, components)
    sigmas = rng.uniform(0.5, 2.0, components)
    weights = rng.random(components)
    return x, means, sigmas, weights / weights.sum()


@program(mixture, "log-likelihood of a 16-component Gaussian mixture: x[:, None] - means, log-sum-exp over k")
def gmm_log_likelihood(x, means, sigmas, weights):
    log_prob = (np.log(weights) - np.log(sigmas) - 0.5 * np.log(2 * np.pi)
                - 0.5 * ((x[:, None] - means) / sigmas) ** 2)
    m = log_prob.max(axis=1, keepdims=True)
    per_point = m[:, 0] + np.log(np.exp(log_prob - m).sum(axis=1))
    return per_point.sum()


@program(lambda elements, rng: (rng.gamma(2.0, 1.0, elements),), "skewness and excess kurtosis: d**3, d**4, m2**1.5")
def moments(x):
    d = x - x.mean()
    m2 = np.mean(d**2)
    m3 = np.mean(d**3)
    m4 = np.mean(d**4)
    return m3 / m2**1.5, m4 / m2**2 - 3


@program(table(64), "robust z-scores with np.median and the median absolute deviation")
def robust_zscore(x):
    median = np.median(x, axis=0)
    mad = np.median(np.abs(x - median), axis=0)
    return 0.6745 * (x - median) / mad


def clustering(elements, rng, k=16, features=8):
    n = max(k, elements // (k * features))
    return rng.standard_normal((n, features)), rng.standard_normal((k, features))


@program(clustering, "k-means assignment step: squared distances to 16 centroids by broadcasting, argmin, inertia")
def kmeans_assign(x, centroids):
    distances = ((x[:, None, :] - centroids[None, :, :]) ** 2).sum(axis=2)
    labels = distances.argmin(axis=1)
    inertia = distances.min(axis=1).sum()
    return labels, inertia


def point_sets(elements, rng):
    n = side(elements, per_pair=3, multiple=8)
    return rng.standard_normal((n, 3)), rng.standard_normal((n, 3))


@program(point_sets, "pairwise Euclidean distances of two 3-d point sets: np.sqrt(((a[:, None] - b[None]) ** 2).sum(-1))")
def pairwise_distances(a, b):
    return np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(axis=-1))


@program(lambda elements, rng: (rng.standard_normal((side(elements, multiple=8), 128)),),
         "cosine similarity matrix of rows normalised with np.linalg.norm")
def cosine_similarity(x):
    normalized = x / np.linalg.norm(x, axis=1, keepdims=True)
    return normalized @ normalized.T


@program(lambda elements, rng: (rng.standard_normal(elements),), "64-bin histogram with np.histogram")
def histogram(x):
    counts, _ = np.histogram(x, bins=64, range=(-4, 4))
    return counts


@program(lambda elements, rng: (rng.standard_t(3, elements),), "winsorise at mean +- 3 std with np.clip, then mean")
def winsorized_mean(x):
    mu, sd = x.mean(), x.std()
    return np.clip(x, mu - 3 * sd, mu + 3 * sd).mean()
