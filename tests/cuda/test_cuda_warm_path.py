"""A kernel whose PTX is in the cache directory launches through CuPy alone: what a fresh process
does before launching it -- the backend, each kernel's key, its grid from the module's host code,
the toolchain key, whether the GPU is simulated -- imports neither numba nor numba-cuda (~0.4 s
of the first call on an H100).  The steps that need a GPU (loading the PTX, the launch) are
tests/cuda/test_gpu_device.py's."""

import json
import os
import pathlib
import sys

import numpy as np
import pytest
from helpers import child_report

ROOT = pathlib.Path(__file__).parent.parent.parent
TOOLCHAIN = ("numba", "numba_cuda", "llvmlite")


def kernels(backend):
    """Every golden case's kernels rendered for gpu:0, each with arrays of its arguments' shapes."""
    sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "codegen")]
    import flowjit
    from flowjit.compiler.ir.types import compute_dtype
    from flowjit.compiler.lowered import has_kernel
    from test_kernel_golden import CASES
    for name, (function, args) in sorted(CASES.items()):
        lowered = flowjit.jit(function, devices=["gpu:0"]).lower(*args)
        for node in lowered.fused.nodes:
            if has_kernel(node):
                kernel = backend.render(node)
                arrays = [np.zeros(v.shape or (1,), compute_dtype(v.dtype)) for v in kernel.inputs + kernel.outputs]
                yield f"{name}/{kernel.name}", kernel, arrays


def child() -> None:
    """In a child process without NUMBA_ENABLE_CUDASIM: the warm path's steps; print a JSON report."""
    from flowjit import gpu
    from flowjit.compiler.codegen.cuda import BLOCK, CudaBackend, Grid, host_namespace, kernel_key, toolchain_key
    from flowjit.compiler.ir.plan import KernelKind
    readings = {}
    for value in ("1", "0", "", "yes", " 1 ", None):
        if value is None:
            os.environ.pop(gpu.SIMULATOR, None)
        else:
            os.environ[gpu.SIMULATOR] = value
        readings[repr(value)] = gpu.simulated.__wrapped__()
    backend = CudaBackend()
    grids = {}
    for name, kernel, arrays in kernels(backend):
        kernel_key(kernel)
        namespace = host_namespace(kernel)
        grid = Grid(namespace["launch"], kernel.kind is KernelKind.REDUCE, 132, 64, namespace.get("MAX_THREADS", BLOCK))
        grids[name] = grid(arrays)
    toolchain_key()
    print(json.dumps({"readings": readings, "simulated": gpu.simulated(), "resident": backend.resident,
                      "available": gpu.available(), "grids": grids,
                      "loaded": sorted(m for m in sys.modules if m.split(".")[0] in TOOLCHAIN)}))


@pytest.fixture(scope="module")
def report():
    pytest.importorskip("cupy", reason="CuPy is not installed (the cuda extra)")
    return child_report(__file__, timeout=300)


def test_a_cached_kernels_launch_needs_no_numba(report):
    assert report["resident"] and not report["simulated"]
    assert report["grids"], "no kernel rendered"
    assert report["loaded"] == [], f"imported on the warm path: {report['loaded'][:10]}"


def test_the_simulator_variable_is_read_as_numba_cuda_reads_it(report):
    """An integer, 0 where unset or unreadable (numba-cuda's config warns and takes its default)."""
    assert report["readings"] == {"'1'": True, "'0'": False, "''": False, "'yes'": False, "' 1 '": True,
                                  "None": False}


def test_host_code_is_the_modules_own():
    """``launch`` and ``MAX_THREADS`` executed without the device code are the whole module's."""
    pytest.importorskip("numba_cuda", reason="numba-cuda is not installed (the cuda extra)")
    from flowjit import gpu
    from flowjit.compiler.codegen.cuda import CudaBackend, host_namespace, module_namespace
    if not gpu.available():
        pytest.skip("numba-cuda sees no GPU and NUMBA_ENABLE_CUDASIM is not set")
    for name, kernel, arrays in kernels(CudaBackend()):
        host, module = host_namespace(kernel), module_namespace(kernel)
        assert {"kernel", "cuda", "fj"}.isdisjoint(host), name
        assert host["launch"](*arrays) == module["launch"](*arrays), name
        assert host.get("MAX_THREADS") == module.get("MAX_THREADS"), name
