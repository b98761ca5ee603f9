"""Comparison helpers shared by the tests."""

from __future__ import annotations

import re

import os

import numpy as np

from flowjit.frontend import pytree


# Compiled results are held to the rounding of the least precise float a program computes in.
TOLERANCE = {np.dtype(np.float64): 1e-9, np.dtype(np.float32): 2e-5, np.dtype(np.float16): 2e-3,
             np.dtype(np.complex128): 1e-9, np.dtype(np.complex64): 2e-5}


def tolerance_for(*trees) -> float:
    """rtol for a program whose inputs and outputs are ``trees`` (0.0: exact, no floats)."""
    leaves = [leaf for tree in trees for leaf in pytree.flatten(tree)[0]]
    dtypes = {np.asarray(leaf).dtype for leaf in leaves if isinstance(leaf, (np.ndarray, np.generic))}
    return max([TOLERANCE.get(dtype, 0.0) for dtype in dtypes] + [0.0])


def scaled_atol(want: np.ndarray, rtol: float) -> float:
    """Absolute slack relative to the result's largest finite magnitude (sums and differences cancel)."""
    finite = want[np.isfinite(want)] if want.dtype.kind in "fc" else want
    return rtol * (float(np.max(np.abs(finite), initial=1.0)) if finite.size else 1.0)


def close(value, want, rtol: float) -> bool:
    value, want = np.asarray(value), np.asarray(want)
    if rtol == 0.0:
        return bool(np.array_equal(value, want))
    return bool(np.allclose(value, want, rtol=rtol, atol=scaled_atol(want, rtol), equal_nan=True))


def check_against_interpreter(jitted, args) -> None:
    """``jitted(*args)`` gives what the reference interpreter gives for its traced graph:
    each result's dtype and shape, its values within the inputs' and its dtype's tolerance."""
    import flowjit
    with np.errstate(all="ignore"):
        expected = flowjit.interpret(jitted.lower(*args).graph, *args)
        got = jitted(*args)
    got = got if isinstance(got, tuple) else (got,)
    for value, want in zip(got, expected):
        value = np.asarray(value)
        assert value.dtype == want.dtype and value.shape == want.shape, (value, want)
        assert close(value, want, tolerance_for(want, args)), (value, want)


def kernel_twins(source: str, name: str, fma: bool = True) -> tuple:
    """A kernel module's serial kernel and parallel twin, compiled afresh as the kernel cache
    compiles them (cached code has no assembly to inspect)."""
    from flowjit.compiler.codegen.cache import kernel_dispatchers
    namespace = {}
    exec(compile(source, name, "exec"), namespace)
    return kernel_dispatchers(namespace, fma)


def compiled_serial(source: str, name: str, arrays):
    """A kernel module's serial kernel compiled afresh with flowjit's flags for ``arrays``' types."""
    from numba import typeof
    kernel, _ = kernel_twins(source, name)
    kernel.compile(tuple(typeof(a) for a in arrays))
    return kernel


def assert_same_result(actual, expected, *, exact: bool = True, rtol: float | None = None):
    """Same structure, and leaf by leaf the same type, dtype, shape and values (NaN equal NaN)."""
    actual_leaves, paths, actual_tree = pytree.flatten(actual)
    expected_leaves, _, expected_tree = pytree.flatten(expected)
    assert actual_tree == expected_tree, f"structure differs: {actual_tree} vs {expected_tree}"
    for path, got, want in zip(paths, actual_leaves, expected_leaves):
        if not isinstance(want, (np.ndarray, np.generic)):
            assert got == want, f"{path}: {got!r} != {want!r}"
            continue
        got_array, want_array = np.asarray(got), np.asarray(want)
        assert got_array.dtype == want_array.dtype, f"{path}: dtype {got_array.dtype} != {want_array.dtype}"
        assert got_array.shape == want_array.shape, f"{path}: shape {got_array.shape} != {want_array.shape}"
        if exact:
            np.testing.assert_array_equal(got_array, want_array, err_msg=path, strict=True)
        else:
            np.testing.assert_allclose(got_array, want_array, rtol=rtol, atol=scaled_atol(want_array, rtol),
                                       equal_nan=True, err_msg=path)


# -- packed (SIMD) instructions in a kernel's assembly, whatever the host CPU ----------------------
_X86_OPERATIONS = {"add": r"v?add", "mul": r"v?(mul|fn?m(add|sub)\d*)", "max": r"v?(max|cmp\w*)",
                   "arith": r"v?(mul|add|sub|fn?m(add|sub)\d*)"}
_ARM_OPERATIONS = {"add": r"fadd", "mul": r"f(mul|mla|ml[as]|n?madd)", "max": r"f(maxnm|max|cm\w+)",
                   "arith": r"f(mul|add|sub|mla|mls)"}


def packed(assembly: str, operation: str, dtype) -> bool:
    """Whether ``assembly`` holds a packed ``operation`` (add, mul, max, or any of add/sub/mul:
    arith) over ``dtype`` lanes at the host's widest vector width: ymm/zmm registers with AVX,
    xmm with SSE only, NEON v-registers on AArch64.  Skips the test on other CPUs."""
    import platform

    import pytest
    float64 = np.dtype(dtype) == np.float64
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        from llvmlite import binding
        registers = r"%[yz]mm" if binding.get_host_cpu_features().get("avx") else r"%xmm"
        suffix = "pd" if float64 else "ps"
        return re.search(rf"\b{_X86_OPERATIONS[operation]}{suffix}\s+[^\n]*{registers}", assembly) is not None
    if machine in ("aarch64", "arm64"):
        lanes = "2d" if float64 else "4s"
        return re.search(rf"\b{_ARM_OPERATIONS[operation]}\s+v\d+\.{lanes}", assembly) is not None
    pytest.skip(f"no packed-instruction patterns for {machine} CPUs")


def assert_matches_snapshot(path, text: str, what: str) -> None:
    """``text`` equals the snapshot at ``path``; with FLOWJIT_UPDATE_GOLDEN=1 it is rewritten instead."""
    if os.environ.get("FLOWJIT_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    assert path.exists(), f"no snapshot {path}: run with FLOWJIT_UPDATE_GOLDEN=1"
    assert text == path.read_text(), (f"{what} changed; review the diff and rewrite the snapshot with "
                                      f"FLOWJIT_UPDATE_GOLDEN=1")


def unsimulated_env() -> dict:
    """This process's environment without NUMBA_ENABLE_CUDASIM, flowjit's checkout on PYTHONPATH."""
    import pathlib
    env = {key: value for key, value in os.environ.items() if key != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = str(pathlib.Path(__file__).parent.parent) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def child_report(test_file, timeout: float, entry: str = "child") -> dict:
    """The JSON that ``child()`` (or ``entry``) of the test module ``test_file`` prints last, run
    in a fresh process without NUMBA_ENABLE_CUDASIM (numba-cuda off its simulator: what the CUDA
    tests that compile PTX or check a real GPU's warm path need)."""
    import json
    import pathlib
    import subprocess
    import sys
    path = pathlib.Path(test_file)
    result = subprocess.run([sys.executable, "-c", f"import sys; sys.path[:0] = [{str(path.parent)!r}, {str(pathlib.Path(__file__).parent)!r}]; "
                             f"import {path.stem}; {path.stem}.{entry}()"],
                            capture_output=True, text=True, env=unsimulated_env(), timeout=timeout)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def echo_server(key: bytes, served: list | None = None):
    """A cluster link listener on 127.0.0.1 whose links send back every message they get (the
    arrays they received, shared memory from their own pool); ``served`` gets each of its links,
    and the queue it returns each link's end."""
    import queue

    from flowjit.runtime.cluster_links import LinkClosed, Listener
    closed = queue.Queue()

    def serve(link):
        if served is not None:
            served.append(link)
        try:
            while True:
                link.send(link.receive())
        except LinkClosed as error:
            closed.put(str(error))
    return Listener(key, "127.0.0.1", serve, "echo"), closed


class ForeignGpuArray:
    """Another library's GPU array as flowjit sees it (torch's CUDA tensors, numba's device
    arrays): only ``__cuda_array_interface__``, at a made-up address, which numpy cannot read."""

    def __init__(self, shape, typestr, strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (4096, False),
                                         "strides": strides, "version": 3}
