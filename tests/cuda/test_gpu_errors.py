"""On a real GPU: a program whose buffers do not fit the device fails with flowjit's
DeviceMemoryError naming the node and the user's line, and the device is usable after.
Skipped cleanly elsewhere (the simulator tests pose as CuPy's errors instead)."""

import numpy as np
import pytest

import flowjit

pytest.importorskip("numba_cuda", reason="numba-cuda is not installed (the cuda extra)")

from flowjit.bench.gpu_modes import gpu_unavailable  # noqa: E402

if gpu_unavailable() is not None:
    pytest.skip(f"needs a GPU: {gpu_unavailable()}", allow_module_level=True)

import cupy  # noqa: E402


def test_out_of_device_memory_names_the_node_and_the_line():
    total = cupy.cuda.Device().mem_info[1]
    side = int((2 * total / 4) ** 0.5) + 1            # an outer product of twice the device's memory
    x = cupy.ones(side, cupy.float32)

    def outer(x):
        return np.exp(x[:, None] * x[None, :])
    jitted = flowjit.jit(outer, devices=["gpu:0"])
    with pytest.raises(flowjit.DeviceMemoryError, match=r"out of memory on gpu:0") as raised:
        jitted(x)
    message = str(raised.value)       # (a kernel's buffer names the node; the workspace, the allocation)
    assert "allocating the program's buffers" in message or ("test_gpu_errors.py:" in message and "(mul, exp)" in message)
    assert isinstance(raised.value, MemoryError)
    assert type(raised.value.__cause__).__name__ == "OutOfMemoryError"
    cupy.get_default_memory_pool().free_all_blocks()
    small = cupy.arange(4, dtype=cupy.float32)
    np.testing.assert_allclose(cupy.asnumpy(jitted(small)), np.exp(np.outer(np.arange(4), np.arange(4))), rtol=1e-6)
