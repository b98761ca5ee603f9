"""The corpus: each program traced and interpreted equals the undecorated function exactly --
but for constant powers, which the constant-powers pass writes as multiplies and square roots
within its stated ulp budget (docs/math.md), where numpy calls pow."""

import numpy as np
import pytest

import flowjit
from flowjit.compiler import ir
from helpers import assert_same_result, tolerance_for
from programs import PROGRAMS


def test_corpus_is_large_enough():
    assert len(PROGRAMS) >= 40
    names = {p.name for p in PROGRAMS}
    assert {"softmax", "layernorm", "gelu_tanh", "black_scholes", "mlp", "logsumexp",
            "cosine_similarity"} <= names


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_program_matches_numpy(program):
    args = program.make_args(np.random.default_rng(7))
    expected = program.fun(*args)
    jitted = flowjit.jit(program.fun, static_argnums=program.static_argnums, backend="interpreter")
    lowered = jitted.lower(*args)
    rewritten = lowered.as_text("optimized").count("= pow ") < lowered.as_text("traced").count("= pow ")
    rtol = tolerance_for(expected, args) if rewritten else None
    assert_same_result(jitted(*args), expected, exact=not rewritten, rtol=rtol)
    # The cached executable serves a second call with fresh values.
    args = program.make_args(np.random.default_rng(8))
    assert_same_result(jitted(*args), program.fun(*args), exact=not rewritten, rtol=rtol)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_program_graph_round_trips(program):
    args = program.make_args(np.random.default_rng(7))
    lowered = flowjit.jit(program.fun, static_argnums=program.static_argnums).lower(*args)
    ir.verify(lowered.graph)
    text = lowered.as_text()
    reparsed = ir.parse(text)
    ir.verify(reparsed)
    assert ir.print_graph(reparsed) == text
    flat = [a for a in flowjit.frontend.pytree.flatten(args)[0] if isinstance(a, (np.ndarray, np.generic))]
    if program.static_argnums:
        flat = [a for i, a in enumerate(args) if i not in program.static_argnums]
    expected = flowjit.interpret(lowered.graph, *flat)
    for got, want in zip(flowjit.interpret(reparsed, *flat), expected):
        np.testing.assert_array_equal(got, want, strict=True)


def test_power_of_two_is_square_as_in_numpy():
    """Found by the random-program test: ndarray's ``a ** 2`` is np.square(a), int8 for
    booleans, while np.power(a, 2) and ``a ** 3`` are int64; interpreted and compiled alike."""
    for x in (np.array([[True, False]]), np.arange(6, dtype=np.int16).reshape(2, 3),
              np.linspace(-1, 1, 6, dtype=np.float32)):
        for function in (lambda x: x ** 2, lambda x: x ** 3, lambda x: np.power(x, 2), lambda x: x ** 2.0):
            expected = function(x)
            for backend in ("interpreter", "kernels"):
                got = flowjit.jit(function, backend=backend)(x)
                assert got.dtype == expected.dtype, (x.dtype, backend, got.dtype, expected.dtype)
                np.testing.assert_allclose(got, expected, rtol=1e-6)
