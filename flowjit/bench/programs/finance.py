"""Quantitative finance: option pricing, returns and risk, float64 as analysts write it."""

import numpy as np
from scipy.special import erf

from flowjit.bench.programs.registry import program, rows


def options(elements, rng):
    spot = rng.uniform(50, 150, elements)
    strike = rng.uniform(50, 150, elements)
    expiry = rng.uniform(0.1, 3.0, elements)
    return spot, strike, expiry


def norm_cdf(x):
    return 0.5 * (1 + erf(x / np.sqrt(2)))


@program(options, "Black-Scholes call and put prices (log, sqrt, erf, exp), float64")
def black_scholes(S, K, T, r=0.05, sigma=0.2):
    d1 = (np.log(S / K) + (r + sigma**2 / 2) * T) / (sigma * np.sqrt(T))
    d2 = d1 - sigma * np.sqrt(T)
    call = S * norm_cdf(d1) - K * np.exp(-r * T) * norm_cdf(d2)
    put = K * np.exp(-r * T) * norm_cdf(-d2) - S * norm_cdf(-d1)
    return call, put


@program(options, "Black-Scholes delta, gamma and vega with the normal pdf, np.stack'ed, float64")
def black_scholes_greeks(S, K, T, r=0.05, sigma=0.2):
    sqrt_t = np.sqrt(T)
    d1 = (np.log(S / K) + (r + 0.5 * sigma**2) * T) / (sigma * sqrt_t)
    pdf = np.exp(-(d1**2) / 2) / np.sqrt(2 * np.pi)
    delta = norm_cdf(d1)
    gamma = pdf / (S * sigma * sqrt_t)
    vega = S * pdf * sqrt_t / 100
    return np.stack([delta, gamma, vega])


def prices(elements, rng):
    days, assets = rows(elements, 500)
    returns = rng.normal(0.0003, 0.02, (days, assets))
    return (100 * np.exp(np.log1p(returns).cumsum(axis=0)),)


@program(prices, "annualised mean, volatility and Sharpe ratio of log returns, days x 500 assets")
def log_return_stats(prices):
    returns = np.log(prices[1:] / prices[:-1])
    mean = returns.mean(axis=0) * 252
    vol = returns.std(axis=0, ddof=1) * np.sqrt(252)
    return mean, vol, mean / vol


@program(prices, "Sharpe ratio of simple returns with np.diff(prices, axis=0)")
def sharpe_ratio(prices, risk_free=0.01):
    returns = np.diff(prices, axis=0) / prices[:-1]
    excess = returns - risk_free / 252
    return np.sqrt(252) * excess.mean(axis=0) / excess.std(axis=0)


@program(prices, "maximum drawdown: np.maximum.accumulate of the price path")
def max_drawdown(prices):
    peak = np.maximum.accumulate(prices, axis=0)
    drawdown = (prices - peak) / peak
    return drawdown.min(axis=0)


@program(prices, "rolling 20-day mean with np.cumsum (the cumsum trick)")
def moving_average(prices, window=20):
    c = np.cumsum(prices, axis=0)
    return (c[window:] - c[:-window]) / window


@program(lambda elements, rng: (rng.standard_normal(elements),),
         "Monte Carlo European call under geometric Brownian motion from normal draws, float64")
def monte_carlo_call(z, S0=100.0, K=105.0, r=0.05, sigma=0.2, T=1.0):
    ST = S0 * np.exp((r - 0.5 * sigma**2) * T + sigma * np.sqrt(T) * z)
    payoff = np.maximum(ST - K, 0)
    price = np.exp(-r * T) * payoff.mean()
    stderr = np.exp(-r * T) * payoff.std() / np.sqrt(len(z))
    return price, stderr


def bonds(elements, rng):
    count = max(1, elements // 30)
    yields = rng.uniform(0.01, 0.08, count)
    coupons = rng.uniform(0.0, 0.06, count)
    return yields, coupons


@program(bonds, "prices and durations of 30-year annual-coupon bonds: (1 + y[:, None]) ** t with t an array")
def bond_prices(yields, coupons, face=100.0):
    t = np.arange(1, 31)
    discount = (1 + yields[:, None]) ** -t
    coupon = coupons[:, None] * face
    price = (coupon * discount).sum(axis=1) + face * discount[:, -1]
    duration = ((t * coupon * discount).sum(axis=1) + 30 * face * discount[:, -1]) / price
    return price, duration


@program(lambda elements, rng: (rng.normal(0, 1e4, rows(elements, 250)[::-1]),),
         "historical value at risk: np.percentile over 250 scenarios per position")
def historical_var(pnl, level=99):
    return -np.percentile(pnl, 100 - level, axis=0)


def portfolio(elements, rng):
    days, assets = rows(elements, 500)
    returns = rng.normal(0.0003, 0.02, (days, assets))
    weights = rng.random(assets)
    return returns, weights / weights.sum()


@program(portfolio, "portfolio volatility from np.cov(returns, rowvar=False)")
def portfolio_volatility(returns, weights):
    cov = np.cov(returns, rowvar=False) * 252
    return np.sqrt(weights @ cov @ weights)
