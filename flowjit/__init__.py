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
from flowjit.frontend.session import Session, SessionError  # noqa: E402
from flowjit.compiler.passes.specialize import SpecializeError  # noqa: E402
from flowjit.devices import Device, DeviceSet, current_devices, set_devices
from flowjit.runtime.interpreter import interpret
from flowjit.runtime.checkpoint import Checkpoint, CheckpointPolicy
from flowjit import optim, train  # noqa: E402  (flowjit.optim.SGD, flowjit.train.loop)
from flowjit.runtime.cluster import Cluster, ClusterError

__version__ = "0.1.0"


def wait_for_compiles(timeout: float = 120.0) -> bool:
    """Block until every parallel kernel compiling in the background (the compile worker) is
    ready, at most ``timeout`` seconds; whether all are.  Call it before timing a program."""
    from flowjit.compiler.codegen.background import wait
    return wait(timeout)


def stats() -> dict:
    """Counters since start: traces, executables, kernel compiles, disk cache hits and misses."""
    from flowjit.counters import STATS
    return STATS.snapshot()

__all__ = ["Graph", "placeholder", "Session", "SessionError", "SpecializeError", "random", "stats", "wait_for_compiles", "jit", "grad", "value_and_grad", "gradients", "device", "colocate_with", "Device", "DeviceSet", "set_devices", "current_devices", "Jitted", "ShapeDtype", "interpret", "ir", "CompileOptions", "errors", "FlowjitError",
           "TraceError", "ShapeError", "TracerConversionError", "UnsupportedFunctionError",
           "ArgumentError", "OpTypeError", "UnsupportedDTypeError", "UnsupportedAttributeError",
           "UnsupportedOperatorError", "UnsupportedInputError", "InternalError", "supported_functions",
           "Checkpoint", "CheckpointPolicy", "CheckpointError", "KernelCacheWarning", "Variable",
           "control_dependencies", "Operation", "NumericsError", "optim", "train", "Cluster", "ClusterError",
           "DeviceMemoryError", "DeviceFault"]
