"""Golden kernel snapshots: the generated source of a dozen representative kernels, so every
change to code generation is a reviewable diff.

    FLOWJIT_UPDATE_GOLDEN=1 pytest tests/codegen/test_kernel_golden.py   # rewrite them

Each snapshot holds the kernels of one program as they are compiled (without the module
header every kernel module shares), in the order the driver runs them, with the
user's locations elided.  The program also runs, and its
result is checked against numpy, so a snapshot is never of a wrong kernel.
"""

import pathlib
import re

import numpy as np
import pytest

import flowjit
from flowjit.compiler.codegen.kernel import MODULE_HEADER
from helpers import assert_matches_snapshot, assert_same_result, tolerance_for

GOLDEN = pathlib.Path(__file__).parent.parent / "golden" / "kernels"


def rows(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def layernorm(x, gamma, beta):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * gamma + beta


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


# name -> (function, arguments); shapes are tiny: kernels read sizes at run time, only ranks,
# dtypes, which dimensions are 1 and whether a reduced row is shorter than reduce.WIDE_ROW
# or a block of lanes (no lane loops) shape the source.  softmax and layernorm have rows that long, to show the lanes.
CASES = {
    "chain": (lambda x: (x * 2.0 + 1.0) * x - np.abs(x) / 3.0, (rows((8,), np.float64),)),
    "gelu_f32": (gelu, (rows((4, 8)),)),
    "softmax_rows": (softmax, (rows((2, 128)),)),
    "layernorm": (layernorm, (rows((2, 128)), rows((128,), seed=1), rows((128,), seed=2))),
    "column_mean": (lambda x: x.mean(axis=0), (rows((4, 8)),)),
    "whole_sum": (lambda x: x.sum(), (rows((4, 25)),)),            # (100 elements: the lanes and their last block)
    "argmax_rows": (lambda x: np.argmax(x, axis=1), (rows((4, 8)),)),
    "sibling_reductions": (lambda x: (x.sum(axis=1), x.max(axis=1)), (rows((4, 8)),)),
    "matmul_epilogue": (lambda a, b, bias: np.maximum(a @ b + bias, 0.0),
                        (rows((4, 6)), rows((6, 8), seed=1), rows((8,), seed=2))),
    "float16": (lambda x, y: x * y + np.float16(1.5), (rows((8,), np.float16), rows((8,), np.float16, 1))),
    "integer_ops": (lambda i: (i // 3) % 5 + i * 2 - (i > 0), (np.arange(-8, 8, dtype=np.int32),)),
    "broadcast_outer": (lambda x, y: np.exp(x[:, None] - y[None, :]), (rows((4,)), rows((8,), seed=1))),
    # (short rows, at least 16 of them, nothing full-shaped stored: reduced across rows)
    "logsumexp_across": (lambda x: np.log(np.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1)) + x.max(axis=1),
                         (rows((20, 7)),)),
    # (columns over enough rows that a GPU splits them across blocks: COLUMN_SPLIT_ROWS)
    "column_sum_split": (lambda x: (x * x).sum(axis=0) + x.max(axis=0), (rows((600, 40)),)),
    # (as many rows as THREAD_ROWS: on a GPU, a thread per row)
    "logsumexp_thread_rows": (lambda x: np.log(np.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1)),
                              (rows((1 << 16, 5)),)),
}
# Kernels only the CPU backend compiles (complex values): no CUDA snapshot of them.
CPU_CASES = {
    **CASES,
    "complex_spectrum": (lambda x: (np.abs(np.fft.rfft(x * np.hanning(8), axis=1)) ** 2,
                                    np.exp(1j * x) / (x + 2j)), (rows((4, 8), np.float64),)),
    # ops the program corpus brought (issue 19): a scan kernel, and what the array ops compile to
    "scan_cumsum": (lambda x: np.cumsum(x * 2.0, axis=1) + 1.0, (rows((4, 8)),)),
    "array_ops": (lambda x, i: (np.diff(np.pad(np.roll(x, 2, axis=1), 1), axis=0), np.tril(np.outer(x[0], x[1])),
                                np.take(x, i, axis=1) * 2.0, np.einsum("ij,kj->ik", x, x) + 1.0),
                  (rows((4, 8)), np.array([0, 3, 7, 3]))),
}


@pytest.fixture(autouse=True)
def _avx512_width(monkeypatch):
    """The snapshots are the kernels a CPU with AVX-512 gets (fj.vector_width), on every machine."""
    monkeypatch.setenv("FLOWJIT_VECTOR_BITS", "512")


def kernels_text(function, args) -> str:
    """The kernels the program compiles, as compiled (less the module header they share)."""
    shared = MODULE_HEADER
    sources = flowjit.jit(function).lower(*args).executable.kernel_sources
    for source in sources.values():
        assert source.startswith(shared)
    text = "\n\n".join(source[len(shared):].strip("\n") + "\n" for source in sources.values())
    return re.sub(r'loc\("[^"]*":\d+\)', "loc(...)", text)       # stable when this file is edited


@pytest.mark.parametrize("name", sorted(CPU_CASES))
def test_kernel_source_matches_its_snapshot(name):
    function, args = CPU_CASES[name]
    with np.errstate(all="ignore"):
        expected = function(*args)
    rtol = tolerance_for(expected, args)
    assert_same_result(flowjit.jit(function)(*args), expected, exact=rtol == 0.0, rtol=rtol)
    assert_matches_snapshot(GOLDEN / f"{name}.py", kernels_text(function, args), f"the kernels of '{name}'")


def test_every_snapshot_has_a_case():
    assert sorted(path.stem for path in GOLDEN.glob("*.py")) == sorted(CPU_CASES)
