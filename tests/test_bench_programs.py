"""The program corpus (flowjit/bench/programs/) and its bench suite, on tiny sizes.

Every program runs through flowjit fused, unfused and the reference interpreter and must equal
numpy (dtype, shape, values within the tolerance of the least precise float it computes in).
A program that uses an op flowjit does not trace is an expected failure, strictly: when
support lands the test passes, turns red, and its entry below must go.
"""

import inspect

import numpy as np
import pytest

import flowjit
from flowjit.bench import harness, program_suite
from flowjit.bench.programs import PROGRAMS, Program
from flowjit.errors import FlowjitError
from corpus_sample import covering_sample, op_signatures, sampled
from helpers import assert_same_result, tolerance_for

TINY = 4096

# program -> what flowjit's error says it does not support (a part of its message); none today.
UNSUPPORTED: dict[str, str] = {}


class Unsupported(Exception):
    """flowjit refused the program naming the op its UNSUPPORTED entry names."""


PATHS = {"fused": {}, "unfused": {"fuse": False}, "interpreter": {"backend": "interpreter"}}


UNFUSED_EVERY = 4      # unfused compiles a kernel per op: a quarter of the corpus keeps the suite's time


def fused_sample() -> frozenset:
    """The programs make test runs fused: a covering sample of the corpus (corpus_sample.py:
    every op on every combination of input dtypes the corpus uses, and every program that does
    not trace); the others run fused under ``make test-slow`` (the sweep marker).  Every
    program runs through the interpreter in make test."""
    return covering_sample({name: op_signatures(program.function, program.arguments(TINY, seed=3))
                            for name, program in PROGRAMS.items()})


def cases():
    sample = fused_sample()
    for index, name in enumerate(PROGRAMS):
        marks = []
        if name in UNSUPPORTED:
            marks.append(pytest.mark.xfail(raises=Unsupported, strict=True,
                                           reason=f"flowjit does not support: {UNSUPPORTED[name]}"))
        for path in PATHS:
            if path == "unfused" and index % UNFUSED_EVERY:
                continue
            sweep = sampled(name, sample) if path == "fused" else []
            yield pytest.param(name, path, marks=marks + sweep, id=f"{name}-{path}")


@pytest.mark.parametrize("name, path", list(cases()))
def test_program_matches_numpy(name, path):
    program = PROGRAMS[name]
    args = program.arguments(TINY, seed=3)
    with np.errstate(all="ignore"):
        expected = program.function(*args)
    try:
        got = flowjit.jit(program.function, **PATHS[path])(*args)
    except FlowjitError as error:
        if name in UNSUPPORTED and program_suite.is_unsupported(error) and UNSUPPORTED[name] in str(error):
            raise Unsupported(str(error)) from error
        raise
    rtol = tolerance_for(args, expected)
    assert_same_result(got, expected, exact=rtol == 0.0, rtol=rtol)


def test_corpus_is_large_and_spans_the_domains():
    assert len(PROGRAMS) >= 40
    domains = {p.domain for p in PROGRAMS.values()}
    assert {"models", "finance", "physics", "statistics", "imaging", "arrays"} <= domains
    assert all(p.about and p.function.__module__.startswith("flowjit.bench.programs.") for p in PROGRAMS.values())
    assert set(UNSUPPORTED) <= set(PROGRAMS)


def test_programs_scale_with_the_requested_size():
    """Each program's arguments grow with the size asked for (weights of fixed shape aside)."""
    for program in PROGRAMS.values():
        small = sum(np.asarray(a).size for a in program.arguments(1 << 12))
        large = sum(np.asarray(a).size for a in program.arguments(1 << 16))
        assert large > small, program.name


def test_errors_and_locations_point_into_the_corpus():
    """The corpus is user code inside the package: errors and the IR name its file:line."""
    source, first = inspect.getsourcelines(PROGRAMS["power_spectrum"].function)
    line = first + next(i for i, text in enumerate(source) if "= np.fft.rfft(" in text)
    (frames,) = PROGRAMS["power_spectrum"].arguments(TINY)
    with pytest.raises(FlowjitError, match=rf"imaging\.py:{line}: np\.fft\.rfft\(c128\[.*is not defined for complex128"):
        flowjit.jit(PROGRAMS["power_spectrum"].function)(frames * 1j)
    text = flowjit.jit(PROGRAMS["softplus"].function).lower(*PROGRAMS["softplus"].arguments(64)).as_text()
    assert 'loc("' in text and "bench/programs/models.py" in text


def _singular_values(x):
    return np.linalg.svd(x, compute_uv=False)


def test_suite_checks_times_and_reports_unsupported_ops(monkeypatch):
    """A program using a function flowjit does not trace (np.linalg.svd here, a stand-in: the
    corpus has none today) is timed in numpy and reported as unsupported, naming the function."""
    monkeypatch.setitem(PROGRAMS, "singular_values", Program("singular_values", _singular_values,
                                                             lambda elements, rng: (rng.normal(size=(elements // 64, 64)),),
                                                             "arrays", "singular values"))
    report = program_suite.run(["softplus", "singular_values", "power_spectrum"], ["4K"], ["numpy", "fused"], repeat=3)
    rows = {(r["workload"], r["mode"]): r for r in report["rows"]}
    assert rows["softplus", "fused"]["status"] == "ok" and len(rows["softplus", "fused"]["times_s"]) == 3
    assert rows["power_spectrum", "fused"]["status"] == "ok"
    assert rows["singular_values", "fused"]["status"] == "unsupported"
    assert rows["singular_values", "numpy"]["status"] == "ok"          # numpy is still timed
    summary = report["summary"]
    assert summary["unsupported"] == {"np.linalg.svd": ["singular_values"]}
    assert summary["geometric_means"]["4K"]["numpy"]["programs"] == 2
    table = program_suite.format_table(report)
    assert "geometric mean of flowjit's time over each peer's at 4K: numpy" in table
    assert "unsupported by flowjit (1 programs):\n  np.linalg.svd: singular_values" in table
    assert "UNSUPP" in table.splitlines()[[i for i, t in enumerate(table.splitlines()) if "singular_values" in t][0]]


def test_a_wrong_flowjit_result_is_reported_not_timed(monkeypatch):
    real = program_suite.make_callable

    def broken(mode, program, args):
        call = real(mode, program, args)
        return (lambda: np.asarray(call()) + 1.0) if mode == "fused" else call
    monkeypatch.setattr(program_suite, "make_callable", broken)
    report = program_suite.run(["softplus"], ["4K"], ["numpy", "fused"], repeat=3)
    fused = [r for r in report["rows"] if r["mode"] == "fused"][0]
    assert fused["status"] == "wrong" and fused["times_s"] == [] and "max error" in fused["detail"]
    assert "WRONG: softplus@4K fused" in program_suite.format_table(report)


def test_cli_runs_the_suite_and_writes_json(tmp_path, capsys):
    path = tmp_path / "programs.json"
    assert harness.main(["--suite", "programs", "--programs", "silu,lcg_uniform", "--sizes", "4K",
                         "--modes", "numpy,fused", "--repeat", "3", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "silu" in out and "lcg_uniform" in out and f"wrote {path}" in out
    import json
    report = json.loads(path.read_text())
    assert report["suite"] == "programs" and report["programs"]["lcg_uniform"]["arguments"]["4K"] == ["i64[4096]"]
    assert {r["status"] for r in report["rows"]} == {"ok"}
    with pytest.raises(SystemExit):
        harness.main(["--suite", "programs", "--programs", "no_such_program"])


def test_check_is_exact_for_integers_leafwise_for_tuples_and_equal_on_nan():
    assert harness.check(np.array([1, 2, 3]), np.array([1, 2, 4])) == "1 of 3 values differ (int64, must be exact)"
    assert harness.check((np.float32(1), np.array([1, 2])), (np.float32(1), np.array([1, 2]))) is None
    assert harness.check((np.ones(2), np.ones(2)), (np.ones(2), np.zeros(2))).startswith("result 1: max error")
    assert harness.check(np.array([np.nan, 1.0]), np.array([np.nan, 1.0])) is None
    assert harness.check(np.array([0.0, 1.0]), np.array([np.nan, 1.0])) is not None
    assert harness.check(np.array([1.0 + 1e-5]), np.array([1.0]), "float32") is None
    assert harness.check(np.array([1.0 + 1e-5]), np.array([1.0])) is not None          # float64: 1e-9


def test_jax_runs_the_numpy_program_unchanged():
    pytest.importorskip("jax")
    program = PROGRAMS["black_scholes"]                   # a module helper (norm_cdf) and scipy's erf
    args = program.arguments(256)
    version = program_suite.jax_version(program.function)
    assert version.__globals__["np"].__name__ == "jax.numpy"
    assert version.__globals__["norm_cdf"].__globals__ is version.__globals__
    for got, want in zip(version(*args), program.function(*args)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


def test_flowjit_dump_reads_a_corpus_file(capsys):
    """`flowjit dump flowjit/bench/programs/models.py:softplus` runs the file as a module of its
    own: its programs are already registered from the package, and that is not a clash."""
    from flowjit import cli
    path = inspect.getsourcefile(PROGRAMS["softplus"].function)
    assert cli.main(["dump", f"{path}:softplus", "--arg", "x=f32[8]"]) == 0
    assert "log1p" in capsys.readouterr().out
