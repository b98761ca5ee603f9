"""Tiered compilation (codegen/background.py): a parallel kernel's first call runs its serial
twin while the compile worker compiles the parallel twin into the kernel cache; later calls
run the twin, with the same results to the bit; a warm cache runs it at once; a worker that
fails, dies or hangs turns it off with one warning and nothing else changes."""

import re
import sys
import warnings

import numpy as np
import pytest

import flowjit
from flowjit.compiler.codegen import background
from flowjit.compiler.codegen.cache import kernel_cache
from flowjit.compiler.codegen.driver import PARALLEL_MIN_ELEMENTS
from flowjit.errors import KernelCacheWarning


def program(x, rows, w):
    """Every kind of parallel kernel: a loop, whole-domain and arg reductions (in parts), row
    and column reductions, a row kernel, a matmul epilogue."""
    return (np.tanh(x) * 2 + 1, np.sum(x * 2), np.argmax(x), x.mean(), rows.sum(axis=0), rows.max(axis=1),
            (rows - rows.mean(axis=1, keepdims=True)).std(axis=1), np.maximum(rows @ w + 1, 0))


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("background-cache"))


@pytest.fixture(scope="module")
def arguments():
    rng = np.random.default_rng(5)
    x = rng.standard_normal(PARALLEL_MIN_ELEMENTS + 1000).astype(np.float32)
    rows = rng.standard_normal((PARALLEL_MIN_ELEMENTS // 128 + 3, 128)).astype(np.float32)
    return x, rows, rng.standard_normal((128, 128)).astype(np.float32)


def tiered_kernels(jitted, args):
    """The TieredKernel objects the program's driver calls, by driver symbol."""
    executable = jitted.lower(*args).executable
    names = re.findall(r"^    (k\d+\w*?_parallel_\d*)\(", executable.driver_source, re.M)
    return {name: executable.driver.__globals__[name] for name in names}


def test_first_call_runs_serial_twins_then_the_parallel_ones_with_the_same_bits(cache_dir, arguments):
    jitted = flowjit.jit(program, cache_dir=cache_dir)
    tiered = tiered_kernels(jitted, arguments)
    assert len(tiered) >= 5 and all(isinstance(k, background.TieredKernel) for k in tiered.values()), tiered
    first = jitted(*arguments)
    assert all(k.function is k.compiled.serial or k.function is k.compiled.parallel for k in tiered.values())
    assert any(k.function is k.compiled.serial for k in tiered.values())      # some waited for the worker
    assert flowjit.wait_for_compiles(120)
    assert all(k.function is k.compiled.parallel for k in tiered.values())
    second = jitted(*arguments)
    for index, (a, b, want) in enumerate(zip(first, second, program(*arguments))):
        np.testing.assert_array_equal(a, b, err_msg=f"output {index}: serial and parallel twins differ")
        np.testing.assert_allclose(a, want, rtol=1e-4, atol=1e-4, err_msg=f"output {index}")
    assert all(k.compiled.parallel.signatures for k in tiered.values())


def test_a_warm_cache_runs_the_parallel_twin_from_the_first_call(cache_dir, arguments):
    flowjit.jit(program, cache_dir=cache_dir)(*arguments)      # (in memory already after the test above)
    assert background.wait(120)
    kernel_cache(cache_dir).memory.clear()                  # as a new process finds the cache
    jitted = flowjit.jit(lambda x, rows, w: program(x, rows, w), cache_dir=cache_dir)
    tiered = tiered_kernels(jitted, arguments)
    jitted(*arguments)
    assert all(k.function is k.compiled.parallel for k in tiered.values())
    assert not any(k.compiled.parallel.stats.cache_misses for k in tiered.values())    # loaded, not compiled


def test_turned_off_the_parallel_twin_compiles_here(tmp_path, arguments):
    jitted = flowjit.jit(program, cache_dir=str(tmp_path), background_compile=False)
    called = tiered_kernels(jitted, arguments)
    assert len(called) >= 5 and all(k.targetoptions.get("parallel") for k in called.values()), called


@pytest.mark.parametrize("how", ["exits", "hangs", "fails"])
def test_a_broken_worker_turns_background_compiling_off_with_one_warning(tmp_path, monkeypatch, arguments, how):
    """The parallel twins then compile here on their next call; the results stay right."""
    command = {"exits": [sys.executable, "-c", "import sys; sys.exit(3)"],
               "hangs": [sys.executable, "-c", "import time; time.sleep(60)"],
               "fails": [sys.executable, "-c", "import sys, runpy; sys.argv = ['w']; "
                         "import flowjit.compiler.codegen.background as b; b._compile = None; b.main()"]}[how]
    # The process's own worker first finishes what earlier tests gave it: under the short
    # deadline below, a slow answer of its would turn it off too (a second warning, and the
    # next tests' kernels compiled here).
    assert flowjit.wait_for_compiles(120)
    worker = background.CompileWorker(command)
    monkeypatch.setattr(background, "WORKER", worker)
    monkeypatch.setattr(background, "JOB_DEADLINE_S", 0.5)
    monkeypatch.setattr(background, "POLL_S", 0.05)
    x, rows, w = arguments
    jitted = flowjit.jit(lambda x: np.tanh(x) * 3 - 1, cache_dir=str(tmp_path))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = jitted(x)
        assert worker.wait(30)
        second = jitted(x)
    messages = [str(w.message) for w in caught if issubclass(w.category, KernelCacheWarning)]
    assert len(messages) == 1 and "kernels compile in this process from now on" in messages[0], messages
    assert not worker.enabled() and worker.process is None
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(second, np.tanh(x) * 3 - 1, rtol=1e-5, atol=1e-6)
    (kernel,) = tiered_kernels(jitted, (x,)).values()
    assert kernel.function is kernel.compiled.parallel and kernel.compiled.parallel.signatures


def several(x, y):
    """Five kernels of four kinds, one with a constant and a 0-d result."""
    a = np.tanh(x) * 2
    b = a - a.mean(axis=1, keepdims=True)
    c = np.maximum(b @ y + 1, 0)
    return c.sum(axis=0), np.exp(x).max() * 0.5, x.astype(np.float64) ** 3


def program_kernels(executable):
    return {compiled.key: compiled for compiled in executable.compiled}


def test_the_worker_compiles_a_first_calls_kernels_ahead_with_the_types_they_get(tmp_path):
    """Each kernel's argument types are predicted right: handed to the worker before the
    first call, every kernel but the first loads from the cache and none compiles twice."""
    rng = np.random.default_rng(9)
    x, y = rng.standard_normal((8, 16)).astype(np.float32), rng.standard_normal((16, 4)).astype(np.float32)
    jitted = flowjit.jit(several, cache_dir=str(tmp_path))
    executable = jitted.lower(x, y).executable
    kernels = list(program_kernels(executable).values())
    assert len(kernels) >= 5 and len(executable.ahead) == len(executable.compiled)
    executable.backend.compile_ahead(executable.ahead, (x, y))
    assert flowjit.wait_for_compiles(120)
    got = jitted(x, y)
    first = executable.compiled[0]
    for compiled in kernels:
        stats = compiled.serial.stats
        loaded, compiled_here = sum(stats.cache_hits.values()), sum(stats.cache_misses.values())
        assert (loaded, compiled_here) == ((0, 1) if compiled is first else (1, 0)), compiled.name
    for g, want in zip(got, several(x, y)):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)


def test_a_first_call_meeting_the_worker_midway_neither_hangs_nor_compiles_wrong(tmp_path):
    """The program and the worker compile at once: whatever each takes, results are right and
    every job ends (taken back, waited for, or compiled)."""
    rng = np.random.default_rng(10)
    x, y = rng.standard_normal((8, 16)).astype(np.float32), rng.standard_normal((16, 4)).astype(np.float32)
    for scale in (1.0, 2.0):                     # a new constant: new kernels each time
        jitted = flowjit.jit(lambda x, y: several(x * scale, y), cache_dir=str(tmp_path))
        got = jitted(x, y)
        assert flowjit.wait_for_compiles(120)
        for g, want in zip(got, several(x * scale, y)):
            np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)
    assert background.WORKER.targets == {} and background.WORKER.jobs == {}


def test_a_wrong_prediction_only_compiles_here(tmp_path, monkeypatch):
    from flowjit.compiler.codegen import backend
    from numba.core import types
    monkeypatch.setattr(backend, "_argument_type", lambda spec, arrays: types.Array(types.float64, 3, "A"))
    x, y = np.ones((8, 16), np.float32), np.ones((16, 4), np.float32)
    jitted = flowjit.jit(several, cache_dir=str(tmp_path))
    got = jitted(x, y)
    assert flowjit.wait_for_compiles(120)
    for g, want in zip(got, several(x, y)):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)


def test_predicted_argument_types_are_the_ones_the_kernels_get():
    """For every kernel of programs with inputs, buffers, variables, constants and views of
    them, the types handed to the worker are exactly those the kernel is called with."""
    from flowjit.compiler.codegen.backend import _argument_type
    rng = np.random.default_rng(11)
    x = rng.standard_normal((8, 16)).astype(np.float32)
    w = flowjit.Variable(rng.standard_normal((16, 4)).astype(np.float32), name="ahead_w")

    def loss(params, x):
        return (np.maximum(x @ params[0], 0) ** 2).mean(axis=1).sum()

    programs = [(several, (x, np.asfortranarray(x.T[:, :4])), 5),
                (flowjit.grad(lambda x: (np.tanh(x) ** 2).mean(axis=1).sum()), (x,), 1),
                (lambda x, sgd=flowjit.optim.SGD(0.1): sgd.minimize(loss, [w], x), (x,), 5),
                (flowjit.grad(lambda x: (np.tanh(x) ** 2).mean(axis=1).sum()), (x,), 1, ("dce",)),   # (unsimplified:
                # a kernel reads a reshaped broadcast of a constant)
                (lambda x, s: (x[::2] * s + np.float32(1), x.sum()), (x, np.float32(3)), 1)]   # (a strided view: not)
    for function, args, predicted_kernels, *passes in programs:
        jitted = flowjit.jit(function, background_compile=False, passes=passes[0] if passes else None)
        executable = jitted.lower(*args).executable
        ahead = list(executable.ahead)
        assert len(ahead) == predicted_kernels, executable.driver_source
        executable(*args)
        for compiled, specs in ahead:
            predicted = tuple(_argument_type(spec, args) for spec in specs)
            assert predicted in compiled.serial.signatures, (compiled.name, predicted, compiled.serial.signatures)


def test_a_forked_child_has_no_jobs_of_the_parents_and_its_kernels_still_run(tmp_path):
    """A child forked while the parent's worker has jobs forgets them: its kernels do not wait
    for answers that go to the parent, and it compiles what it needs."""
    import os
    x = np.random.default_rng(12).standard_normal(PARALLEL_MIN_ELEMENTS + 10).astype(np.float32)
    jitted = flowjit.jit(lambda x: np.tanh(x) * 5 + 2, cache_dir=str(tmp_path))
    jitted(x)                                      # the parallel twin is now a job of the parent's worker
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:                                   # the child: report, then leave at once
        try:
            ok = background.WORKER.jobs == {} and background.WORKER.targets == {}
            ok = ok and background.WORKER.process is None and background.WORKER.pid == os.getpid()
            small = x[:100]                        # (serial: OpenMP's threads do not survive a fork)
            ok = ok and np.allclose(jitted(small), np.tanh(small) * 5 + 2, rtol=1e-5, atol=1e-5)
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.waitpid(pid, 0)
    assert answer == b"1"
    assert flowjit.wait_for_compiles(120)
