"""make test's sample of a program corpus: the programs that between them use every op of the
corpus on every combination of input dtypes it is used on.

A corpus test that compiles every program on a path (test_compiled's unfused kernels, the bench
corpus fused, the corpus on two devices) compiles most of its kernels for ops it has already
compiled on the same dtypes.  ``make test`` runs that path on a covering sample, chosen here from
the traced graphs (no kernel is compiled), so a program that brings a new op or dtype joins the
sample by itself; ``make test-slow`` (the ``sweep`` marker) runs the rest.  A program that cannot
be traced (an unsupported op) is always in the sample.
"""

from __future__ import annotations

import numpy as np

import flowjit


def op_signatures(fun, args, static_argnums=()) -> frozenset:
    """(op name, input dtypes) of every node of ``fun``'s traced and optimised graph."""
    try:
        with np.errstate(all="ignore"):
            graph = flowjit.jit(fun, static_argnums=static_argnums).lower(*args).graph
    except Exception as error:                 # noqa: BLE001 - such a program is its own case
        return frozenset({("<does not trace>", type(error).__name__, getattr(fun, "__qualname__", repr(fun)))})
    return frozenset((node.op.name, tuple(str(value.type.dtype) for value in node.inputs)) for node in graph.nodes)


def covering_sample(signatures: dict[str, frozenset]) -> frozenset:
    """The names of a small set of programs whose signatures together are all of them: greedy,
    the one adding the most first (the earliest on ties), so every worker picks the same."""
    left = set().union(*signatures.values()) if signatures else set()
    names = list(signatures)
    chosen = []
    while left:
        best = max(names, key=lambda name: (len(signatures[name] & left), -names.index(name)))
        chosen.append(best)
        left -= signatures[best]
    return frozenset(chosen)


_SAMPLES: dict[str, frozenset] = {}


def program_corpus_sample() -> frozenset:
    """The covering sample of tests/programs.py's corpus (its arguments from seed 3)."""
    if "programs" not in _SAMPLES:
        from programs import PROGRAMS
        _SAMPLES["programs"] = covering_sample({
            program.name: op_signatures(program.fun, program.make_args(np.random.default_rng(3)),
                                        program.static_argnums)
            for program in PROGRAMS})
    return _SAMPLES["programs"]


def sampled(name: str, sample: frozenset) -> list:
    """pytest marks for a corpus case: none in the sample, else ``sweep``."""
    import pytest
    return [] if name in sample else [pytest.mark.sweep]
