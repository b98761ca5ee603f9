"""flowjit: a JIT compiler from numpy functions, through dataflow graphs, to fused kernels."""

from flowjit.config import prepare_threads

prepare_threads()           # first thing: before anything imported later loads libgomp

from flowjit import errors  # noqa: E402
from flowjit.compiler import ir  # noqa: E402
from flowjit.config import CompileOptions  # noqa: E402
from flowjit.errors import (ArgumentError, CheckpointError, DeviceFault, DeviceMemoryError, FlowjitError, InternalError, KernelCacheWarning,
                            NumericsError, OpTypeError, ShapeError, TraceError, TracerConversionError, UnsupportedAttributeError,
                            UnsupportedDTypeError, UnsupportedFunctionError, UnsupportedInputError,
                            UnsupportedOperatorError)
from flowjit.frontend.grad import grad, tensor_gradients as gradients, value_and_grad
from flowjit.frontend.jit import Jitted, ShapeDtype, jit
from flowjit.frontend.tracer import colocate_with, device
from flowjit.frontend.control import Operation, control_dependencies
from flowjit.frontend.variables import Variable
from flowjit.frontend.unsupported import supported_functions
from flowjit.frontend import random  # noqa: E402  (flowjit.random)
from flowjit.frontend.graph_mode import Graph, placeholder  # noqa: E402
from flowjit.compiler.passes.specialize import SpecializeError  # noqa: E402
from flowjit.devices import Device, DeviceSet, current_devices, set_devices
from flowjit.runtime.interpreter import interpret

__version__ = "0.1.0"

# Imported at their first use (PEP 562), not by ``import flowjit``: sessions, checkpoints,
# clusters and training were a fifth of its time, which every process's first call pays.
# ``flowjit.optim`` and ``flowjit.train`` are the modules (``flowjit.train.loop``).
_LAZY = {"optim": "flowjit.optim", "train": "flowjit.train",
         "Session": "flowjit.frontend.session", "SessionError": "flowjit.frontend.session",
         "Checkpoint": "flowjit.runtime.checkpoint", "CheckpointPolicy": "flowjit.runtime.checkpoint",
         "Cluster": "flowjit.runtime.cluster", "ClusterError": "flowjit.runtime.cluster_spec"}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'flowjit' has no attribute {name!r}")
    import importlib
    module = importlib.import_module(_LAZY[name])
    value = module if module.__name__ == f"flowjit.{name}" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def wait_for_compiles(timeout: float = 120.0) -> bool:
    """Block until every parallel kernel compiling in the background (the compile worker), or
    loading in the background (a process running native entries), is ready, at most
    ``timeout`` seconds; whether all are.  Call it before timing a program."""
    from flowjit.compiler.codegen.background import wait
    return wait(timeout)


def stats() -> dict:
    """Counters since start: traces, executables, kernel compiles, disk cache hits and misses
    (``native_loads``: the hits that loaded native entries, without numba)."""
    from flowjit.counters import STATS
    return STATS.snapshot()

__all__ = ["Graph", "placeholder", "Session", "SessionError", "SpecializeError", "random", "stats", "wait_for_compiles", "jit", "grad", "value_and_grad", "gradients", "device", "colocate_with", "Device", "DeviceSet", "set_devices", "current_devices", "Jitted", "ShapeDtype", "interpret", "ir", "CompileOptions", "errors", "FlowjitError",
           "TraceError", "ShapeError", "TracerConversionError", "UnsupportedFunctionError",
           "ArgumentError", "OpTypeError", "UnsupportedDTypeError", "UnsupportedAttributeError",
           "UnsupportedOperatorError", "UnsupportedInputError", "InternalError", "supported_functions",
           "Checkpoint", "CheckpointPolicy", "CheckpointError", "KernelCacheWarning", "Variable",
           "control_dependencies", "Operation", "NumericsError", "optim", "train", "Cluster", "ClusterError",
           "DeviceMemoryError", "DeviceFault"]
