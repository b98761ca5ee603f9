"""Reductions of the whole domain in several dependent passes (``x - x.mean()`` over
``x.std()``, a winsorised mean): every pass runs in parallel parts, and what a later pass
reads back goes through a domain-sized scratch indexed from the part's start.  The loops of
such a program that meet the reductions' results join the reduce kernel instead of a loop
kernel reading what it stored."""

import numpy as np
import pytest

import flowjit
from flowjit.compiler.codegen.reduce import PART_MIN
from flowjit.compiler.ir.plan import ReduceStrategy
from helpers import check_against_interpreter as _check


def standardise(x):
    y = x - x.mean()
    return y / np.sqrt((y * y).mean())


def standardise_exp(x):
    y = np.exp(x / 8) - np.exp(x / 8).mean()        # exp is not computed twice: y goes through scratch
    return y / np.sqrt((y * y).mean())


def softmax_argmax(x):
    e = np.exp(x - x.max())
    return e / e.sum(), np.argmax(e * 2 - x), e.sum()


def winsorised_mean(x):
    mu, sd = x.mean(), x.std()
    return np.clip(x, mu - 3 * sd, mu + 3 * sd).mean()


def zscores(x):
    z = (x - x.mean()) / x.std()
    return np.argmin(z), np.abs(z).max(), z


def _kernels(jitted, *args):
    return [n.attrs["plan"] for n in jitted.lower(*args).fused.nodes if n.op.name == "fused"]


PROGRAMS = [standardise, standardise_exp, softmax_argmax, winsorised_mean, zscores]
rng = np.random.default_rng(11)


def _inputs(n, dtype):
    x = (rng.standard_t(3, n) * 2).astype(dtype)
    x[n // 3] = 40        # an outlier the clip cuts, the argmax of softmax_argmax's e * 2 - x
    return x


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_every_pass_runs_in_parts(program):
    """One reduce kernel over the whole domain, every pass in parts.  standardise's centred
    values are computed again in the pass that stores the result (recompute-after-reductions);
    standardise_exp's and softmax_argmax's, which would compute exp again, go through scratch
    as large as the input (the pass that stores the result reads them back)."""
    x = _inputs(3 * PART_MIN + 17, np.float64)
    plans = [p for p in _kernels(flowjit.jit(program), x) if p.strategy is not None]
    assert len(plans) == 1, plans
    (plan,) = plans
    assert plan.strategy is ReduceStrategy.PARTS and len(plan.passes) >= 2, plan
    assert bool(plan.scratch) == (program in (standardise_exp, softmax_argmax)), plan


def test_the_clip_joins_the_reduce_kernel():
    """x >= lo (from the reduce kernel's mean and std) meets isnan(x) (a loop of the input) in
    np.clip: both join the reduce kernel, which had stored x >= lo for a second kernel."""
    x = _inputs(1000, np.float64)
    assert len(_kernels(flowjit.jit(winsorised_mean), x)) == 1


SIZES = [1, 5, PART_MIN - 1, 2 * PART_MIN, 5 * PART_MIN + 3]
DTYPES = [np.float64, np.float32]


def _program_size_dtype():
    """Every program at every size in every dtype; make test runs each program at each size in
    one dtype, the dtypes alternating (so each program, and each size, meets both), and
    ``make test-slow`` (the sweep marker) the other half."""
    for i, program in enumerate(PROGRAMS):
        for j, n in enumerate(SIZES):
            for k, dtype in enumerate(DTYPES):
                marks = [] if (i + j) % len(DTYPES) == k else [pytest.mark.sweep]
                yield pytest.param(program, dtype, n, marks=marks,
                                   id=f"{program.__name__}-{np.dtype(dtype).name}-{n}")


@pytest.mark.parametrize("program, dtype, n", _program_size_dtype())
def test_results_match_the_interpreter(program, dtype, n):
    """One part and several, a partial last part, both kernel twins (the serial one runs
    while the parallel one compiles)."""
    _check(flowjit.jit(program), (_inputs(n, dtype),))


@pytest.mark.parametrize("program", [standardise, zscores, winsorised_mean], ids=lambda p: p.__name__)
def test_nan_and_ties_in_parts(program):
    x = np.ones(3 * PART_MIN + 5)
    x[PART_MIN + 7] = x[2 * PART_MIN + 9] = -3.0        # argmin's first occurrence is in part 1
    _check(flowjit.jit(program), (x,))
    x[2 * PART_MIN] = np.nan
    _check(flowjit.jit(program), (x,))
