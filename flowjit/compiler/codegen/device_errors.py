"""A device's failures as flowjit's errors: out of device memory (``DeviceMemoryError``, also a
``MemoryError``) and kernel faults (``DeviceFault``), naming the program's node, the device and
where the user wrote the node's ops -- where CuPy or numba-cuda would say only which API call
failed.  The device's own error stays chained as the cause.

A kernel fault is reported by the next call into the device, so the node named is where it
was detected, which may be after the kernel that faulted; a fault usually leaves the device's
context unusable until the process restarts.
"""

from __future__ import annotations

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Node
from flowjit.errors import DeviceFault, DeviceMemoryError

DEVICE_MODULES = ("cupy", "cupy_backends", "numba.cuda", "numba_cuda")
OUT_OF_MEMORY = ("OutOfMemoryError",)                                   # CuPy's memory pool
FAULTS = ("CUDARuntimeError", "CUDADriverError", "CudaAPIError", "CudaDriverError", "CudaSupportError")


def _device() -> str:
    """The current GPU, as CuPy names it (where CuPy cannot say: 'the GPU')."""
    try:
        import cupy

        from flowjit.gpu_figures import properties
        index = cupy.cuda.Device().id
        return f"gpu:{index} ({properties(index)['name']})"
    except Exception:                         # (no CuPy, or a context the fault broke)
        return "the GPU"


def _what(node: Node | None) -> tuple[str, str]:
    """Where (the user's file:line, or '') and what (the node and its ops) failed."""
    if node is None:
        return "", "allocating the program's buffers"
    inner = node.attrs["body"].nodes if node.op is ops.fused else [node]
    names = ", ".join(dict.fromkeys(n.op.name for n in inner if n.op is not ops.constant)) or node.op.name
    location = next((str(n.loc) for n in inner if n.loc is not None), str(node.loc) if node.loc else "")
    return location, f"running %{node.name} ({names})"


def device_error(error: Exception, node: Node | None) -> Exception | None:
    """The flowjit error for ``error`` raised by a device while the program ran, else None."""
    kind = type(error)
    if not (kind.__module__ or "").startswith(DEVICE_MODULES):
        return None
    location, what = _what(node)
    prefix = f"{location}: " if location else ""
    if kind.__name__ in OUT_OF_MEMORY:
        return DeviceMemoryError(f"{prefix}out of memory on {_device()} {what}: {str(error).rstrip('.')}. Free device arrays "
                                 f"no longer needed (del them; cupy.get_default_memory_pool().free_all_blocks() "
                                 f"returns the pool's cached blocks) or run the program on smaller batches")
    if kind.__name__ in FAULTS:
        return DeviceFault(f"{prefix}{_device()} failed {what} (reported there; the kernel at fault may be an "
                           f"earlier one): {kind.__name__}: {str(error).rstrip('.')}. The device may be unusable until the "
                           f"process restarts")
    return None
