"""numba-cuda, imported in one place (shared by codegen and the device descriptions): whether
it is installed, whether it runs on numba's CUDA simulator, and the compatibility shim it needs.

Nothing here is imported when flowjit is: rendering CUDA source needs no numba-cuda, and a
machine without the ``cuda`` extra never loads it.  Nor does running on a GPU load it where the
kernel cache holds the program's PTX (CuPy launches it): whether a GPU is here is CuPy's device
count, and whether it is simulated is ``NUMBA_ENABLE_CUDASIM`` read as numba-cuda reads it.
Set it before the first ``simulated()`` or ``numba_cuda()`` call (numba-cuda reads it once, when
it loads, and ``simulated()`` once): then ``gpu:0`` is a simulated device on which kernels run
as Python, slowly, the way CI and a user without a GPU check the CUDA path.
"""
from __future__ import annotations

import functools
import os
import sys

import numpy as np

from flowjit.errors import FlowjitError


class CudaUnavailable(FlowjitError):
    pass


INSTALL_HINT = "install the cuda extra (pip install 'flowjit[cuda]')"


@functools.lru_cache(maxsize=None)
def numba_cuda():
    """The ``numba.cuda`` module of the numba-cuda package (raises ``CudaUnavailable``)."""
    # numba-cuda 0.30.4 registers an overload of np.row_stack when it loads, and numpy 2.5
    # removed row_stack (an alias of vstack since numpy 2.0): without this alias its import
    # fails with AttributeError under numpy >= 2.5.  Only added where numpy lacks it.
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack
    try:
        import numba_cuda  # noqa: F401  (the package; numba's own numba.cuda is deprecated)
        from numba import cuda
    except ImportError as error:
        raise CudaUnavailable(f"numba-cuda cannot be imported ({error}): {INSTALL_HINT}") from None
    return cuda


SIMULATOR = "NUMBA_ENABLE_CUDASIM"


@functools.lru_cache(maxsize=None)
def simulated() -> bool:
    """Whether numba-cuda runs on its simulator (``NUMBA_ENABLE_CUDASIM=1``), without importing it:
    the variable read as numba-cuda's config reads it (an integer; unset or unreadable: 0).
    numba-cuda answers itself where it is loaded already (it read the variable then) or where a
    ``.numba_config.yaml`` in the working directory may set it and the variable does not."""
    if "numba.cuda" in sys.modules or (SIMULATOR not in os.environ and os.path.isfile(".numba_config.yaml")):
        numba_cuda()
        from numba.cuda.core import config
        return bool(config.ENABLE_CUDASIM)
    try:
        return bool(int(os.environ.get(SIMULATOR, "0")))
    except ValueError:
        return False


def available() -> bool:
    """Whether ``gpu:*`` devices can run here: numba-cuda simulates one, or it is installed (it
    compiles the kernels) and CuPy (which runs them) sees a GPU -- asked without importing
    numba-cuda, which a program whose PTX is cached never needs."""
    if simulated():
        try:
            numba_cuda()
        except CudaUnavailable:
            return False
        return True
    if not installed():
        return False
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:                          # (no CuPy, no driver, a driver too old: no GPU here)
        return False


def device_count() -> int:
    """How many GPUs kernels can run on here: CuPy's count (those a Ray actor was given, in
    its process), one on numba's simulator, none where ``available()`` is false."""
    if not available():
        return 0
    if simulated():
        return 1
    import cupy
    return cupy.cuda.runtime.getDeviceCount()


def installed() -> bool:
    """Whether the numba-cuda package is installed (without importing it)."""
    import importlib.util
    return importlib.util.find_spec("numba_cuda") is not None


# -- arrays that live on a GPU ----------------------------------------------------------------------
def is_device_array(value) -> bool:
    """Whether ``value`` is a GPU array flowjit takes in place: anything exposing
    ``__cuda_array_interface__`` (CuPy, torch and numba device arrays) or a DLPack capsule on a
    CUDA device (jax)."""
    if hasattr(value, "__cuda_array_interface__"):
        return True
    device = getattr(value, "__dlpack_device__", None)
    if device is None or isinstance(value, np.ndarray):
        return False
    try:
        kind, _ = device()
    except Exception:                           # (a DLPack producer that cannot say where it lives)
        return False
    return int(kind) in (2, 3, 13)              # kDLCUDA, kDLCUDAHost, kDLCUDAManaged


def device_array(value):
    """A GPU array as a CuPy array over the same memory (no copy): what the driver computes on.
    Without CuPy, its host copy where its library gives one to numpy (jax's arrays do), else an
    ``UnsupportedInputError`` naming the extra that reads it."""
    try:
        import cupy
    except ImportError:
        return _host_copy_without_cupy(value)
    if isinstance(value, cupy.ndarray):
        return value
    if hasattr(value, "__cuda_array_interface__"):
        return cupy.asarray(value)
    return cupy.from_dlpack(value)


def _host_copy_without_cupy(value) -> np.ndarray:
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    try:
        host = np.asarray(value)
    except Exception:                           # noqa: BLE001  (torch's CUDA tensors raise TypeError)
        host = None
    if host is None or host.dtype == object:
        from flowjit.errors import UnsupportedInputError, user_location
        raise UnsupportedInputError(f"a {kind} lives on a GPU, and flowjit reads GPU arrays through CuPy, which "
                                    f"is not installed: pip install 'flowjit[cuda]', or pass a numpy array",
                                    user_location())
    return host


def to_host(value) -> np.ndarray:
    """A numpy array of ``value``: GPU arrays are copied back, anything else is ``np.asarray``."""
    if is_device_array(value):
        array = device_array(value)
        return array if type(array) is np.ndarray else array.get()     # (numpy: read without CuPy)
    return np.asarray(value)


def order_after(index: int, stream) -> None:
    """Make ``stream`` wait for the work issued so far, by the calling thread, on the current
    stream of GPU ``index`` (an event recorded there): what it reads next may still be being
    written there."""
    import cupy
    with cupy.cuda.Device(index):
        written = cupy.cuda.Event(disable_timing=True)
        written.record()
    stream.wait_event(written)
