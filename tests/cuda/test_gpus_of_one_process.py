"""Several GPUs in one process (issue 15: ``gpu:N`` runs where CuPy sees a GPU): each GPU has a
CUDA backend of its own, which loads its kernels' modules, allocates its buffers and runs its
programs with that GPU current.

CI has no GPU, let alone two, so CuPy is posed here by ``PosedCupy``: a module whose arrays are
numpy arrays tagged with the GPU that was current when they were made (views keep their
GPU's tag), whose ``Device`` keeps a current GPU per thread as CuPy's does, and whose
``asarray`` leaves an array of another GPU where it is, as CuPy's does.  A kernel "loaded" by
``PosedModule`` remembers the GPU current at loading and runs the program's own generated
kernel on numba's CUDA simulator; before that it checks what a real GPU would refuse or get
wrong: a launch with another GPU current (an invalid handle: the module is in another
context) or an argument in another GPU's memory.  Its ``copy`` between GPUs, like CuPy's,
takes only a contiguous array, and here only after the current stream waited on an event of
the source GPU (whose kernels may still be writing it).

With ``two_gpus_with_streams`` it also poses CuPy's streams (current per thread and per GPU),
events and the runtime's copies by address, so that flowjit's own ``CudaQueue`` drives each
GPU: a peer copy must be issued on the receiving GPU's stream after an event of the sender's,
and an event recorded on its own GPU's stream.  What it does not pose is time: a posed copy is
done when issued, so an unwaited read is not caught here (tests/runtime/test_device_queues.py's
fake queues catch those).  tests/cuda/test_gpu_device.py runs the same on real GPUs."""

import threading
import types

import numpy as np
import pytest

import flowjit
from helpers import assert_same_result, tolerance_for

pytest.importorskip("numba_cuda", reason="numba-cuda is not installed (the cuda extra)")

import flowjit.gpu as gpu  # noqa: E402

if not gpu.simulated():
    pytest.skip("poses CuPy over numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1)", allow_module_level=True)

_current = threading.local()


def current_gpu() -> int:
    return getattr(_current, "index", 0)


class DeviceArray(np.ndarray):
    """An array in GPU ``gpu``'s memory: made where that GPU was current, or a view of one."""

    def __array_finalize__(self, source):
        self.gpu = getattr(source, "gpu", current_gpu())

    @property
    def data(self):
        return types.SimpleNamespace(device_id=self.gpu, ptr=self.ctypes.data)

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ctypes.data, False), "version": 3}

    fetched: list = []                           # (the shapes of the arrays copied back, in order)

    @property
    def device(self):
        return PosedDevice(self.gpu)

    def copy(self, order="C"):
        """CuPy's: onto the current GPU, wherever the array lives."""
        made = np.ndarray.copy(self, order)
        made.gpu = current_gpu()
        return made

    def get(self) -> np.ndarray:
        DeviceArray.fetched.append(self.shape)
        return np.array(self.view(np.ndarray))


def on_current(array) -> DeviceArray:
    """A new array on the current GPU holding ``array``'s values."""
    made = np.array(np.asarray(array)).view(DeviceArray)
    made.gpu = current_gpu()
    return made


class PosedDevice:
    """CuPy's ``Device``: entering makes it current in the calling thread until the exit."""

    def __init__(self, index: int):
        self.id = index

    def __enter__(self):
        stack = _current.__dict__.setdefault("stack", [])
        stack.append(current_gpu())
        _current.index = self.id
        return self

    def __exit__(self, *exc):
        _current.index = _current.stack.pop()

    def use(self):
        _current.index = self.id


class PosedEvent:
    ticks = iter(range(1, 1 << 30))

    def __init__(self, block=False, disable_timing=False):
        self.created_on, self.gpu, self.time = current_gpu(), None, 0

    def record(self, stream=None):
        stream = stream or current_stream()
        assert stream.gpu == self.created_on, "an event recorded on another GPU's stream than its own"
        self.gpu, self.time = stream.gpu, next(self.ticks)

    def synchronize(self):
        pass                                     # (the posed copies are done when issued)


class PosedStream:
    """A stream of GPU ``gpu`` (a null stream, or a non-blocking one): which GPUs' events it has
    waited on since its last copy across."""

    def __init__(self, gpu: int, non_blocking: bool = False):
        self.gpu, self.non_blocking, self.ptr = gpu, non_blocking, id(self)
        self.waited: set = set()

    def use(self):
        assert current_gpu() == self.gpu, "a stream made current with another GPU current"
        _current.__dict__.setdefault("streams", {})[self.gpu] = self
        return self

    def wait_event(self, event):
        self.waited.add(event.gpu)

    def synchronize(self):
        pass


NULL_STREAMS: dict = {}


def current_stream() -> PosedStream:
    """CuPy's current stream: per thread and per GPU, the GPU's null stream until one is used."""
    gpu = current_gpu()
    return _current.__dict__.get("streams", {}).get(gpu) or NULL_STREAMS.setdefault(gpu, PosedStream(gpu))


def posed_runtime(copies: list) -> types.ModuleType:
    """CUDA's runtime as CuPy binds it: the device count (two), the current device, and copies
    by address (the posed arrays are host memory), each logged in ``copies``."""
    import ctypes
    runtime = types.ModuleType("cupy_backends.cuda.api.runtime")
    runtime.getDevice, runtime.getDeviceCount = current_gpu, lambda: 2

    def memcpyAsync(destination, source, size, kind, stream):
        copies.append(("memcpy", current_gpu(), kind))
        ctypes.memmove(destination, source, size)

    def memcpyPeerAsync(destination, destination_gpu, source, source_gpu, size, stream):
        stream = next(s for s in [current_stream()] if s.ptr == stream)
        assert stream.gpu == destination_gpu == current_gpu(), "a peer copy issued on another GPU's stream"
        assert source_gpu in stream.waited, "a peer copy before the sending GPU's event was waited on"
        copies.append(("peer", source_gpu, destination_gpu))
        ctypes.memmove(destination, source, size)

    def memsetAsync(pointer, value, size, stream):
        ctypes.memset(pointer, value, size)
    runtime.memcpyAsync, runtime.memcpyPeerAsync, runtime.memsetAsync = memcpyAsync, memcpyPeerAsync, memsetAsync
    return runtime


def posed_cupy() -> types.ModuleType:
    cupy = types.ModuleType("cupy")
    cupy.ndarray = DeviceArray
    cupy.copies = []
    cupy.cuda = types.SimpleNamespace(Device=PosedDevice, Event=PosedEvent, get_current_stream=current_stream,
                                      Stream=lambda non_blocking=False: PosedStream(current_gpu(), non_blocking),
                                      get_elapsed_time=lambda start, end: float(end.time - start.time),
                                      runtime=posed_runtime(cupy.copies))

    def asarray(value, dtype=None):
        value = getattr(value, "posed_memory", value)   # (another library's GPU array: a view of its memory)
        if isinstance(value, DeviceArray) and (dtype is None or value.dtype == dtype):
            return value                        # (CuPy's asarray: in place, wherever it lives)
        return on_current(np.asarray(value, dtype))

    def empty(shape, dtype=float):
        return on_current(np.empty(shape, dtype))

    def concatenate(arrays, axis=0, out=None):
        assert out is None or all(a.gpu == out.gpu for a in arrays if isinstance(a, DeviceArray))
        result = np.concatenate([np.asarray(a) for a in arrays], axis=axis, out=None if out is None else out)
        return result if out is not None else on_current(result)

    def matmul(a, b, out):
        assert a.gpu == b.gpu == out.gpu == current_gpu(), "cuBLAS on another GPU's arrays"
        np.matmul(a, b, out=out)

    def copy(array):
        """CuPy's copy: onto the current GPU, from any; between GPUs only a contiguous array, and
        here only after the current stream waited on an event of the source GPU's."""
        if array.gpu != current_gpu():
            assert array.flags.c_contiguous or array.flags.f_contiguous, "CuPy cannot copy non-contiguous " \
                                                                         "array between devices."
            stream = current_stream()
            assert array.gpu in stream.waited, "copied before the source GPU's work on it was waited for"
            stream.waited.discard(array.gpu)
            cupy.copies.append(("across", array.gpu, current_gpu()))
        return on_current(array)

    def ascontiguousarray(array):
        return array if array.flags.c_contiguous else on_current(array)

    cupy.asarray, cupy.empty, cupy.concatenate, cupy.matmul = asarray, empty, concatenate, matmul
    cupy.copy, cupy.ascontiguousarray = copy, ascontiguousarray
    cupy.may_share_memory = np.may_share_memory
    cupy.reshape = lambda a, shape: np.reshape(a, shape)
    cupy.broadcast_to = lambda a, shape: np.broadcast_to(a, shape, subok=True)
    cupy.from_dlpack = None
    return cupy


class PosedModule:
    """A kernel's module loaded on the current GPU, launched through the simulator's dispatcher."""

    loaded: list = []

    def __init__(self, name, kernel, grid, packed=True):
        from flowjit.compiler.codegen.cuda import Launcher, module_namespace
        self.name, self.gpu, self.grid = name, current_gpu(), grid
        self.launches, self.streams = 0, set()
        self.launcher = Launcher(name, gpu.numba_cuda().jit(module_namespace(kernel)["kernel"]), grid,
                                 len(kernel.inputs), serial=True)
        self.loaded.append(self)

    def resident(self, threads: int) -> int:
        return 1

    def __call__(self, *arrays):
        assert current_gpu() == self.gpu, f"{self.name}: loaded on gpu:{self.gpu}, launched with gpu:{current_gpu()} current"
        elsewhere = [a.gpu for a in arrays if not isinstance(a, DeviceArray) or a.gpu != self.gpu]
        assert not elsewhere, f"{self.name} on gpu:{self.gpu} given arrays of {elsewhere}"
        self.launches += 1
        self.streams.add(current_stream())
        self.launcher(*arrays)


@pytest.fixture
def two_gpus(monkeypatch):
    """CuPy posed over two GPUs, CUDA backends resident on them, their modules ``PosedModule``s."""
    import sys

    from flowjit.compiler.codegen import cuda
    cupy = posed_cupy()
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    for name in ("cupy_backends", "cupy_backends.cuda", "cupy_backends.cuda.api"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.api.runtime", cupy.cuda.runtime)
    cupyx = types.ModuleType("cupyx")
    cupyx.empty_pinned = lambda shape, dtype: np.empty(shape, dtype)
    monkeypatch.setitem(sys.modules, "cupyx", cupyx)
    monkeypatch.setattr(cuda, "simulated", lambda: False)               # (the backends are resident)
    monkeypatch.setattr(cuda, "_BACKENDS", {})                          # (none of them kept for later tests)
    monkeypatch.setattr(cuda, "RawLauncher", PosedModule)
    monkeypatch.setattr(cuda, "multiprocessors", lambda index: 2)
    monkeypatch.setattr(cuda, "device_capability", lambda index: (9, 0))
    monkeypatch.setattr(cuda.CudaBackend, "ptx", lambda self, kernel, key, cc: kernel)
    monkeypatch.setattr(PosedModule, "loaded", [])
    _current.__dict__.clear()
    NULL_STREAMS.clear()
    return cupy


@pytest.fixture
def two_gpus_with_streams(two_gpus, monkeypatch):
    """As ``two_gpus``, and the executor drives each GPU through a ``CudaQueue`` of its own, on
    the posed CuPy's streams, events and copies (what flowjit.gpu calls a real GPU's)."""
    import importlib
    importlib.import_module("flowjit.compiler.codegen.cuda_library")    # (loaded as the simulator's, first)
    from flowjit.runtime import device_queues
    monkeypatch.setattr(gpu, "simulated", lambda: False)
    monkeypatch.setattr(device_queues, "_QUEUES", {})                   # (none kept for later tests)
    monkeypatch.setattr("flowjit.devices.local_gpu_figures", lambda spec: None)
    return two_gpus


def rows(shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def softmax_and_more(x, w, b):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True), np.maximum(x @ w + b, 0.0) * 2.0 + 1.0


ARGS = (rows((3, 8)), rows((8, 4), 1), rows((4,), 2))


@pytest.mark.parametrize("index", [0, 1])
def test_a_program_on_one_of_several_gpus_runs_there(index, two_gpus):
    """On gpu:N alone, every kernel is loaded on GPU N and launched there on its arrays; numpy
    in, numpy out, equal to the interpreter."""
    expected = flowjit.jit(softmax_and_more, backend="interpreter")(*ARGS)
    actual = flowjit.jit(softmax_and_more, devices=[f"gpu:{index}"])(*ARGS)
    assert all(type(result) is np.ndarray for result in actual)
    assert_same_result(actual, expected, exact=False, rtol=tolerance_for(ARGS, expected))
    assert PosedModule.loaded and {module.gpu for module in PosedModule.loaded} == {index}
    assert all(module.launches == 1 for module in PosedModule.loaded)
    assert current_gpu() == 0                       # (the caller's GPU is current again)


def test_each_gpu_has_a_backend_of_its_own(two_gpus):
    from flowjit.compiler.codegen.cuda import cuda_backend
    from flowjit.compiler.lowered import NodeCompiler
    lowered = flowjit.jit(softmax_and_more, devices=["gpu:0", "gpu:1"]).lower(*ARGS)
    first, second = lowered.backend_for("gpu:0"), lowered.backend_for("gpu:1")
    assert (first.index, second.index) == (0, 1) and first is not second
    assert lowered.backend_for("gpu:1") is second is cuda_backend(first.cache_dir, 1)
    (node, *_) = [n for n in lowered.fused.nodes if n.op.name == "fused"]
    node.device = "/job:worker/task:0/device:gpu:1"                 # (a cluster task's second GPU)
    NodeCompiler(first.cache_dir, True, False)(node, on_device=True)
    assert PosedModule.loaded[-1].gpu == 1


def test_arrays_on_another_gpu_are_copied_across_and_results_stay_on_the_gpu(two_gpus):
    """A program on gpu:1 called with gpu:0's arrays: they are copied onto gpu:1 (CuPy's
    ``asarray`` would hand them over as they are, and the kernels would read another GPU's
    memory), and its results are gpu:1's arrays."""
    with PosedDevice(0):
        on_first = [two_gpus.asarray(a) for a in ARGS]
        on_first[1] = two_gpus.asarray(np.repeat(ARGS[1], 2, axis=1))[:, ::2]    # (a strided view)
    assert not (on_first[1].flags.c_contiguous or on_first[1].flags.f_contiguous) and on_first[1].gpu == 0
    expected = flowjit.jit(softmax_and_more, backend="interpreter")(*ARGS)
    actual = flowjit.jit(softmax_and_more, devices=["gpu:1"])(*on_first)
    assert all(isinstance(result, DeviceArray) and result.gpu == 1 for result in actual)
    assert_same_result(tuple(r.get() for r in actual), expected, exact=False, rtol=tolerance_for(ARGS, expected))
    assert all(a.gpu == 0 for a in on_first)


def test_a_program_split_over_two_gpus_and_a_cpu_runs_each_part_on_its_gpu(two_gpus):
    """Pinned parts on gpu:0, gpu:1 and cpu:0: each GPU's kernels are loaded and launched on it,
    from its device's worker thread, and the whole equals the interpreter."""
    def f(x, w, b):
        with flowjit.device("gpu:1"):
            e = np.exp(x - x.max(axis=1, keepdims=True))
        with flowjit.device("gpu:0"):
            h = np.maximum(x @ w + b, 0.0)
            s = e.sum(axis=1, keepdims=True)
        with flowjit.device("cpu:0"):
            y = np.tanh(h) * 3.0
        with flowjit.device("gpu:1"):
            return e / s, y + 1.0
    expected = flowjit.jit(f, backend="interpreter")(*ARGS)
    actual = flowjit.jit(f, devices=["cpu:0", "gpu:0", "gpu:1"])(*ARGS)
    assert_same_result(actual, expected, exact=False, rtol=tolerance_for(ARGS, expected))
    assert {module.gpu for module in PosedModule.loaded} == {0, 1}
    assert all(module.launches == 1 for module in PosedModule.loaded)


def test_a_gpu_index_beyond_those_cupy_sees_cannot_run(monkeypatch):
    """gpu:N runs where CuPy sees N + 1 GPUs (posed: two); beyond, a hard placement fails."""
    from flowjit.devices import Device, DeviceError
    monkeypatch.setattr(gpu, "simulated", lambda: False)
    monkeypatch.setattr(gpu, "available", lambda: True)
    monkeypatch.setattr(gpu, "device_count", lambda: 2)
    monkeypatch.setattr("flowjit.devices.local_gpu_figures", lambda spec: None)
    assert [Device.make(f"gpu:{i}").executable for i in range(3)] == [True, True, False]

    def f(x):
        with flowjit.device("gpu:2"):
            return x * 2.0
    with pytest.raises(DeviceError, match=r"test_gpus_of_one_process.py:\d+: device gpu:2 .* cannot run here -- CuPy sees 2 GPUs here, "
                                                    r"gpu:0 to gpu:1 \(\d+ nodes? of @f placed on it"):
        flowjit.jit(f, devices=["cpu:0", "gpu:0", "gpu:2"])(ARGS[0])


def test_two_gpus_on_their_streams_copy_peer_to_peer_and_to_and_from_the_host(two_gpus_with_streams):
    """The executor with a real ``CudaQueue`` per GPU: each GPU's kernels run on its worker's own
    stream, gpu:1's values reach gpu:0 by a peer copy after an event of gpu:1's stream, the host
    gets a copy into pinned memory and sends back to a GPU.  Called through jit with device
    arrays, the GPUs' nodes take them in place (another GPU's copied across), the host's get
    them copied back, the results stay on the GPU that computed them, and the host's go to the
    arguments' GPU."""
    cupy = two_gpus_with_streams

    def f(x, w, b):
        with flowjit.device("gpu:1"):
            e = np.exp(x - x.max(axis=1, keepdims=True))
        with flowjit.device("gpu:0"):
            s = e / e.sum(axis=1, keepdims=True)
            h = np.maximum(x @ w + b, 0.0)
        with flowjit.device("cpu:0"):
            y = np.tanh(h) * 3.0 + b.sum()
        with flowjit.device("gpu:1"):
            return s, y + 1.0, y
    expected = flowjit.jit(f, backend="interpreter")(*ARGS)
    jitted = flowjit.jit(f, devices=["cpu:0", "gpu:0", "gpu:1"])
    executable = jitted.lower(*ARGS).multi_device_executable
    assert sorted(queue.index for queue in executable.streams.values()) == [0, 1]
    actual = jitted(*ARGS)
    assert all(type(result) is np.ndarray for result in actual)
    assert_same_result(actual, expected, exact=False, rtol=tolerance_for(ARGS, expected))
    assert {module.gpu for module in PosedModule.loaded} == {0, 1}
    for module in PosedModule.loaded:                 # (the worker's own stream, not the null stream)
        assert module.streams and all(s.non_blocking and s.gpu == module.gpu for s in module.streams), module.name
    assert ("peer", 1, 0) in cupy.copies and ("memcpy", 0, 2) in cupy.copies      # (2: device to host)
    assert not [copy for copy in cupy.copies if copy[0] == "across"]      # (each send lands on its GPU)
    with PosedDevice(0):
        on_first = [cupy.asarray(a) for a in ARGS]
    DeviceArray.fetched.clear()
    on_device = jitted(*on_first)                    # (the CPU's b is copied back; the GPUs' used in place)
    assert DeviceArray.fetched == [ARGS[2].shape]
    # each GPU's result where it was computed; the host's on the arguments' GPU, a device array too
    assert [(type(r).__name__, r.gpu) for r in on_device] == [("DeviceArray", 0), ("DeviceArray", 1),
                                                              ("DeviceArray", 0)]
    assert_same_result(tuple(r.get() for r in on_device), expected, exact=False, rtol=tolerance_for(ARGS, expected))


def test_a_program_with_variables_takes_device_arrays_on_its_gpu_too(two_gpus_with_streams):
    """Its variables live on the host; its calls hold their locks (a wrapper around the
    executor), and that wrapper hands device arguments over as they are."""
    cupy = two_gpus_with_streams
    scale = flowjit.Variable(np.full(8, 2.0, np.float32), name="gpus_of_one_process_scale")

    def f(x):
        with flowjit.device("gpu:1"):
            return np.exp(x) * scale
    x = ARGS[0]
    with PosedDevice(1):
        on_second = cupy.asarray(x)
    DeviceArray.fetched.clear()
    result = flowjit.jit(f, devices=["cpu:0", "gpu:1"])(on_second)
    assert isinstance(result, DeviceArray) and result.gpu == 1 and DeviceArray.fetched == []
    np.testing.assert_allclose(result.get(), np.exp(x) * 2.0, rtol=1e-6)


def test_profiling_a_host_program_with_device_arguments_copies_them_to_the_host(two_gpus_with_streams):
    """As a call does: a program on the host's devices gets host arrays."""
    cupy = two_gpus_with_streams
    with PosedDevice(1):
        on_second = cupy.asarray(ARGS[0])
    DeviceArray.fetched.clear()
    result, trace = flowjit.jit(lambda x: np.tanh(x) * 2.0, devices=["cpu:0"]).profile(on_second)
    assert DeviceArray.fetched == [ARGS[0].shape] and type(result) is np.ndarray
    np.testing.assert_allclose(result, np.tanh(ARGS[0]) * 2.0, rtol=1e-6)
    assert any(event.get("cat") == "kernel" for event in trace["traceEvents"])


class ForeignGpuArray:
    """Another library's GPU array (torch's, numba's): ``__cuda_array_interface__`` only, which
    numpy cannot read (``np.asarray`` makes an object scalar of it) and CuPy views in place."""

    def __init__(self, array: DeviceArray):
        self.posed_memory = array
        self.__cuda_array_interface__ = array.__cuda_array_interface__


def _session_graph():
    g = flowjit.Graph("on_gpus")
    with g.as_default():
        x = flowjit.placeholder((None, 8), np.float32, name="x")
        w = flowjit.placeholder((8, 4), np.float32, name="w")
        with flowjit.device("gpu:1"):
            y = np.tanh(x @ w) * 2.0
    return g, x, w, y


def test_a_session_takes_gpu_feeds_in_place_and_returns_gpu_arrays(two_gpus_with_streams):
    """Feeds as jit's arguments: a CuPy array and another library's GPU array, used where
    they are by a plan on gpu:1; fetches stay there, and a fetched feed is a copy, on its GPU."""
    cupy = two_gpus_with_streams
    g, x, w, y = _session_graph()
    with PosedDevice(1):
        xs, ws = cupy.asarray(ARGS[0]), ForeignGpuArray(cupy.asarray(ARGS[1]))
    DeviceArray.fetched.clear()
    with flowjit.Session(g, devices=["cpu:0", "gpu:1"]) as session:
        result, fed = session.run([y, x], {x: xs, w: ws})
        assert DeviceArray.fetched == []
        assert isinstance(result, DeviceArray) and result.gpu == 1
        assert isinstance(fed, DeviceArray) and fed.gpu == 1 and not np.shares_memory(fed, xs)
        np.testing.assert_allclose(result.get(), np.tanh(ARGS[0] @ ARGS[1]) * 2.0, rtol=1e-5)
        np.testing.assert_array_equal(fed.get(), ARGS[0])
        again = session.run(y, {x: ARGS[0], w: ARGS[1]})          # numpy feeds: numpy results
    assert type(again) is np.ndarray
    np.testing.assert_allclose(again, np.tanh(ARGS[0] @ ARGS[1]) * 2.0, rtol=1e-5)


def test_a_session_on_the_host_copies_gpu_feeds_to_it(two_gpus_with_streams):
    cupy = two_gpus_with_streams
    g, x, w, y = _session_graph()
    with PosedDevice(1):
        xs = ForeignGpuArray(cupy.asarray(ARGS[0]))
    DeviceArray.fetched.clear()
    result = flowjit.Session(g, devices=["cpu:0"], soft_placement=True).run(y, {x: xs, w: ARGS[1]})
    assert DeviceArray.fetched == [ARGS[0].shape] and type(result) is np.ndarray
    np.testing.assert_allclose(result, np.tanh(ARGS[0] @ ARGS[1]) * 2.0, rtol=1e-5)


def test_a_gpu_feed_of_another_dtype_or_shape_is_refused_by_name(two_gpus_with_streams):
    cupy = two_gpus_with_streams
    g, x, w, y = _session_graph()
    session = flowjit.Session(g, devices=["gpu:1"])
    with PosedDevice(1):
        doubles, wrong = ForeignGpuArray(cupy.asarray(ARGS[0].astype(np.float64))), cupy.asarray(ARGS[0])
    with pytest.raises(flowjit.SessionError, match=r"feed for placeholder 'x' \(f32\[\?,8\]\) is float64\[3, 8\]"):
        session.run(y, {x: doubles, w: ARGS[1]})
    with pytest.raises(flowjit.SessionError, match=r"feed for placeholder 'w' .* its shape must be \(8, 4\)"):
        session.run(y, {x: wrong, w: wrong})
