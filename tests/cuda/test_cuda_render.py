"""CUDA kernels render on any machine: no GPU and no numba-cuda are needed to read them."""

import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import flowjit
from flowjit.compiler.codegen.cuda_writer import MODULE_HEADER

sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "codegen"))
from test_kernel_golden import CASES  # noqa: E402
from helpers import ForeignGpuArray, assert_matches_snapshot  # noqa: E402

GOLDEN = pathlib.Path(__file__).parent.parent / "golden" / "kernels-cuda"


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_kernel_sources_for_a_gpu_are_cuda_kernels(monkeypatch):
    monkeypatch.setenv("FLOWJIT_VECTOR_BITS", "512")          # CPU kernels ask for a width; CUDA ones never
    x = np.zeros((4, 8), np.float32)
    sources = flowjit.jit(softmax, devices=["gpu:0"]).lower(x).kernel_sources()
    (source,) = sources.values()
    assert "from numba import cuda" in source and "cuda_library as fj" in source
    assert "row = cuda.blockIdx.x" in source and "while row < nrows:" in source and "row += cuda.gridDim.x" in source
    assert "cuda.syncthreads()" in source and "prange" not in source
    assert "other = fj.shfl_xor(acc_sum, 16)" in source                 # warp shuffles, then the warps' partials
    assert "math.exp(v0_sub)" in source                  # libdevice's expf, not the CPU's fj.exp_f32
    assert "vector_width" not in source
    cpu = flowjit.jit(softmax).lower(x).kernel_sources()
    assert "fj.exp_f32" in "".join(cpu.values()) and "from numba import cuda" not in "".join(cpu.values())
    assert "fj.vector_width(512)" in "".join(cpu.values())


def test_loop_kernels_are_grid_stride_loops_in_float32():
    x, y = np.zeros(4, np.float32), np.zeros(8, np.float32)
    (source,) = flowjit.jit(lambda x, y: np.exp(x[:, None] - y[None, :]) * 0.5,
                            devices=["gpu:0"]).lower(x, y).kernel_sources().values()
    assert "while flat < total:" in source and "flat += stride" in source and "for flat in range" not in source
    assert "i1 = flat % n1" in source and "rest = flat // n1" in source
    assert "np.float32(0.5)" in source and "np.float64" not in source


def test_dump_kernels_for_gpu0_on_a_machine_without_one():
    result = subprocess.run([sys.executable, "-m", "flowjit.cli", "dump", "examples/models.py:softmax", "--arg",
                             "x=f32[4,8]", "--stage", "kernels", "--devices", "gpu:0"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "# ==== kernel k0_max_sub_exp_sum_div (reduce, domain [4,8]) ====" in result.stdout
    assert "shared_sum = cuda.shared.array(32, np.float64)" in result.stdout      # a slot per warp


def test_raw_launch_packs_arrays_as_numbas_kernel_abi():
    from flowjit.compiler.codegen.cuda_launch import pack, parameter_count
    packed = pack(ForeignGpuArray((3, 4), "<f4"))          # (what CuPy, torch and numba device arrays expose)
    assert [int(field) for field in packed] == [0, 0, 12, 4, 4096, 3, 4, 16, 4]
    transposed = pack(ForeignGpuArray((4, 3), "<f8", strides=(8, 32)))
    assert [int(field) for field in transposed][2:] == [12, 8, 4096, 4, 3, 8, 32]
    assert len(packed) == parameter_count([2])


def cuda_kernels_text(function, args) -> str:
    """The CUDA kernels of a program on gpu:0, less the module header they share."""
    sources = flowjit.jit(function, devices=["gpu:0"]).lower(*args).kernel_sources()
    assert all(source.startswith(MODULE_HEADER) for source in sources.values())
    text = "\n\n".join(source[len(MODULE_HEADER):].strip("\n") + "\n" for source in sources.values())
    return re.sub(r'loc\("[^"]*":\d+\)', "loc(...)", text)


@pytest.mark.parametrize("name", sorted(CASES))
def test_cuda_kernel_source_matches_its_snapshot(name, monkeypatch):
    """Golden CUDA kernels of the CPU's golden cases (tests/golden/kernels-cuda), at the default
    unrolls, threads and slots: every change to CUDA code generation is a reviewable diff.
    FLOWJIT_UPDATE_GOLDEN=1 rewrites them."""
    for knob in ("LOOP_UNROLL", "ROW_UNROLL", "ROW_THREADS", "ROW_SLOTS"):
        monkeypatch.delenv(f"FLOWJIT_CUDA_{knob}", raising=False)
    assert_matches_snapshot(GOLDEN / f"{name}.py", cuda_kernels_text(*CASES[name]), f"the CUDA kernels of '{name}'")


def test_every_cuda_snapshot_has_a_case():
    assert sorted(path.stem for path in GOLDEN.glob("*.py")) == sorted(CASES)
