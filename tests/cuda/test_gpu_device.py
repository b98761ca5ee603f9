"""On a real GPU (``NUMBA_ENABLE_CUDASIM=0`` and CuPy sees a device): buffers on the device, device
arrays in and out with no hidden round trip, the launch paths, and the PTX kept on disk.
Skipped cleanly elsewhere (CI has no GPU; the simulator tests cover the kernels there)."""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import flowjit

sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "codegen"))
from test_kernel_golden import layernorm, rows, softmax  # noqa: E402

pytest.importorskip("numba_cuda", reason="numba-cuda is not installed (the cuda extra)")

from flowjit.bench.gpu_modes import gpu_unavailable  # noqa: E402

if gpu_unavailable() is not None:
    pytest.skip(f"needs a GPU: {gpu_unavailable()}", allow_module_level=True)

import cupy  # noqa: E402

GPU = ["gpu:0"]

PROGRAMS = {
    "chain": (lambda x: ((x * 2 + 1) * x - 3) / (x * x + 1), (rows((1000,)),)),
    "softmax": (softmax, (rows((37, 1024)),)),
    "layernorm": (layernorm, (rows((5, 300)), rows((300,), seed=1), rows((300,), seed=2))),
    "matmul_bias_relu": (lambda a, b, c: np.maximum(a @ b.T + c, 0), (rows((33, 20)), rows((17, 20), seed=1),
                                                                       rows((17,), seed=2))),
    "scan_concat": (lambda x: np.concatenate([np.cumsum(x, axis=0), x * 2, np.sin(x)], axis=1), (rows((9, 4)),)),
    "views": (lambda x: (x.T * 2)[1:, ::2].sum(axis=0) + x.reshape(-1)[:3].sum(), (rows((6, 8)),)),
    "whole_and_columns": (lambda x: (x.sum(), x.mean(axis=0), np.argmax(x, axis=1)), (rows((64, 130)),)),
    "float64_erf": (lambda s, t: s * np.exp(-0.02 * t) + np.sqrt(t), (rows((5000,), np.float64) + 3,
                                                                     rows((5000,), np.float64, 1) ** 2)),
    "complex": (lambda z, w: (np.exp(z * 0.5j) * w / (z + 2), np.abs(z).sum(axis=1), (z * w).mean(), np.log(z) ** 2),
                ((rows((6, 300)) + 1j * rows((6, 300), seed=1)).astype(np.complex64),
                 (rows((6, 300), seed=2) - 0.5j).astype(np.complex64))),
}


def interpreter(function, args):
    with np.errstate(all="ignore"):
        return flowjit.jit(function, backend="interpreter")(*args)


def leaves(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_numpy_in_numpy_out_and_device_in_device_out(name):
    function, args = PROGRAMS[name]
    expected = leaves(interpreter(function, args))
    jitted = flowjit.jit(function, devices=GPU)
    host = leaves(jitted(*args))
    assert all(isinstance(r, (np.ndarray, np.generic)) for r in host), [type(r) for r in host]
    device = leaves(jitted(*[cupy.asarray(a) for a in args]))
    assert all(isinstance(r, cupy.ndarray) for r in device), [type(r) for r in device]
    for h, d, e in zip(host, device, expected):
        rtol = 1e-9 if np.asarray(e).dtype in (np.float64, np.complex128) else 2e-5
        np.testing.assert_allclose(h, e, rtol=rtol, atol=rtol)
        np.testing.assert_allclose(d.get(), e, rtol=rtol, atol=rtol)


def test_results_the_caller_holds_are_never_reused():
    jitted = flowjit.jit(lambda x: x * 2 + 1, devices=GPU)
    x = cupy.arange(4096, dtype=cupy.float32)
    first = jitted(x)
    second = jitted(x + 1)
    assert first.data.ptr != second.data.ptr
    np.testing.assert_array_equal(first.get(), np.arange(4096, dtype=np.float32) * 2 + 1)


def test_torch_and_dlpack_arrays_are_used_in_place():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    x = torch.arange(12, dtype=torch.float32, device="cuda").reshape(3, 4)
    result = flowjit.jit(softmax, devices=GPU)(x)
    assert isinstance(result, cupy.ndarray)
    np.testing.assert_allclose(result.get(), softmax(x.cpu().numpy()), rtol=1e-5)


@pytest.mark.parametrize("path", ["raw", "cupy", "dispatcher"])
def test_every_launch_path_computes_the_same(path, monkeypatch, tmp_path):
    from flowjit.compiler.codegen.cuda import CudaBackend
    monkeypatch.setenv("FLOWJIT_CUDA_LAUNCH", path)
    monkeypatch.setattr("flowjit.compiler.codegen.cuda._BACKENDS", {})
    x = rows((7, 300))
    jitted = flowjit.jit(softmax, devices=GPU, cache_dir=str(tmp_path))
    lowered = jitted.lower(x)
    assert isinstance(lowered.backend, CudaBackend)
    np.testing.assert_allclose(jitted(x), softmax(x), rtol=1e-5)


def test_ptx_is_kept_on_disk_and_reused(tmp_path, monkeypatch):
    from flowjit.compiler.codegen import cuda
    monkeypatch.setattr(cuda, "_BACKENDS", {})
    x = rows((4, 64))
    np.testing.assert_allclose(flowjit.jit(softmax, devices=GPU, cache_dir=str(tmp_path))(x), softmax(x), rtol=1e-5)
    files = list((tmp_path / "cuda").glob("*.ptx"))
    assert files and all(".entry" in f.read_text() for f in files)
    monkeypatch.setattr(cuda, "_BACKENDS", {})
    monkeypatch.setattr(cuda, "ptx", lambda *a: pytest.fail("compiled again although the PTX was on disk"))
    np.testing.assert_allclose(flowjit.jit(softmax, devices=GPU, cache_dir=str(tmp_path))(x), softmax(x), rtol=1e-5)


def test_a_warm_first_call_imports_neither_numba_nor_numba_cuda(tmp_path):
    """With its PTX in the cache directory, a fresh process's first call launches through CuPy
    alone (importing numba and numba-cuda took ~0.4 s of it on an H100)."""
    code = ("import sys, numpy as np, flowjit; "
            "f = flowjit.jit(lambda x: ((x * 2 + 1) * x - 3) / (x * x + 1), devices=['gpu:0']); "
            "print(float(f(np.arange(16, dtype=np.float32))[1])); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numba', 'numba_cuda', 'llvmlite')))")
    root = str(pathlib.Path(__file__).parent.parent.parent)
    env = dict(os.environ, FLOWJIT_CACHE_DIR=str(tmp_path), NUMBA_ENABLE_CUDASIM="0",
               PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for run in ("cold", "warm"):                # (the cold one compiles the PTX)
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
        assert result.returncode == 0, result.stderr[-4000:]
        value, loaded = result.stdout.strip().splitlines()[-2:]
    assert float(value) == pytest.approx(0.0)
    assert loaded == "[]", f"the warm first call imported {loaded[:300]}"


def test_variables_on_the_gpu_are_read_and_written():
    w = flowjit.Variable(np.ones(8, np.float32), name="gpu_test_w")

    @flowjit.jit(devices=GPU)
    def step(x):
        w.assign(w * 0.5 + x)
        return (w * 1).sum()
    x = np.arange(8, dtype=np.float32)
    assert float(step(x)) == pytest.approx(float((0.5 + x).sum()))
    np.testing.assert_allclose(w.numpy(), 0.5 + x)
    step(x)
    np.testing.assert_allclose(w.numpy(), 0.25 + 1.5 * x)


def test_a_grid_is_one_wave_of_the_blocks_the_kernel_fits():
    """A loop kernel's and a row kernel's grid: as many blocks as the multiprocessors hold at once
    with the kernel's registers (the driver's occupancy), not a fixed 2048 threads' worth."""
    from flowjit.compiler.codegen.cuda import multiprocessors
    for function, x in ((lambda x: ((x * 2 + 1) * x - 3) / (x * x + 1), rows((1 << 22,))),
                        (softmax, rows((1 << 14, 1024)))):
        (kernel,) = flowjit.jit(function, devices=GPU).lower(x).executable.compiled
        launcher = kernel.serial
        blocks, threads = launcher.grid((cupy.asarray(x), cupy.empty_like(cupy.asarray(x))))
        fits = launcher.resident(threads)
        assert 1 <= fits <= 2048 // threads
        assert blocks == multiprocessors(0) * fits, (blocks, threads, fits)


def _split(x, w):
    with flowjit.device("cpu:0"):
        shifted = x - x.max(axis=1, keepdims=True)
    with flowjit.device("gpu:0"):
        e = np.exp(shifted) * w
        scaled = e / e.sum(axis=1, keepdims=True)
        total = (scaled * scaled).sum(axis=1)
    with flowjit.device("cpu:0"):
        return scaled, total * 2


def test_a_program_split_between_cpu_and_gpu_keeps_gpu_values_on_the_gpu_and_times_its_kernels_by_events():
    """The executor drives gpu:0 through its stream (runtime/device_queues.py): the GPU's
    kernels pass each other CuPy arrays, only the sends copy, and the profile's GPU spans are
    its own times, read from CUDA events."""
    x, w = rows((64, 256)), rows((256,), seed=1) + 2
    expected = leaves(interpreter(_split, (x, w)))
    jitted = flowjit.jit(_split, devices=["cpu:0", "gpu:0"])
    executable = jitted.lower(x, w).multi_device_executable
    assert executable.copies and any(step.carry for step in executable.steps)
    seen = []
    for (part, name), kernel in executable.kernels.items():
        if executable.devices[part].type == "gpu":
            def spy(*arrays, kernel=kernel):
                results = kernel(*arrays)
                seen.append([isinstance(result, cupy.ndarray) for result in results])
                return results
            next(step for step in executable.steps if step.node.name == name).run = spy
    for _ in range(3):
        got = leaves(executable(x, w))
        for value, want in zip(got, expected):
            assert type(value) is np.ndarray
            np.testing.assert_allclose(value, want, rtol=2e-5, atol=1e-6)
    assert seen and all(all(on_gpu) for on_gpu in seen)          # (no kernel's result went back to the host)
    _, trace = jitted.profile(x, w)
    timed = [event for event in trace["traceEvents"] if event["ph"] == "X"
             and event["args"].get("timed") == "CUDA events"]
    assert any(event["cat"] == "kernel" for event in timed) and any(event["cat"] == "send" for event in timed)
    assert all(0 < event["dur"] < 1e6 for event in timed)


def test_the_gpus_figures_are_measured(tmp_path):
    """Bandwidth, FLOP rate and launch cost of the real GPU (gpu_figures.py), as the cost model
    gets them: within what any NVIDIA GPU of the last years would give."""
    from flowjit import gpu_figures
    figures = gpu_figures.gpu_figures.__wrapped__(0, str(tmp_path))
    assert 1e11 < figures.bandwidth < 2e13 and 1e12 < figures.flops < 1e15 and 5e-7 < figures.launch < 2e-4
    assert gpu_figures.gpu_figures.__wrapped__(0, str(tmp_path)).source == "cached"


def _two_gpus(x, w):
    with flowjit.device("gpu:1"):
        e = np.exp(x - x.max(axis=1, keepdims=True)) * w
    with flowjit.device("gpu:0"):
        scaled = e / e.sum(axis=1, keepdims=True)
    with flowjit.device("cpu:0"):
        return scaled, (scaled * scaled).sum(axis=1)


@pytest.mark.skipif(cupy.cuda.runtime.getDeviceCount() < 2, reason="needs two GPUs")
def test_a_program_over_two_gpus_runs_each_part_on_its_own_gpu():
    """gpu:1's kernels are loaded and launched on GPU 1, its values copied to gpu:0 peer to peer
    (tests/cuda/test_gpus_of_one_process.py checks the same on a posed CuPy in CI)."""
    x, w = rows((64, 256)), rows((256,), seed=1) + 2
    expected = leaves(interpreter(_two_gpus, (x, w)))
    for value, want in zip(leaves(flowjit.jit(_two_gpus, devices=["cpu:0", "gpu:0", "gpu:1"])(x, w)), expected):
        np.testing.assert_allclose(value, want, rtol=2e-5, atol=1e-6)
    with cupy.cuda.Device(1):
        on_second = cupy.asarray(x)
    result = flowjit.jit(softmax, devices=["gpu:1"])(on_second)
    assert result.device.id == 1
    np.testing.assert_allclose(result.get(), softmax(x), rtol=2e-5, atol=1e-6)
