"""The multi-device executor's transfers between GPUs and the host (issue 15: Send/Recv
between ``cpu:*`` and ``gpu:*`` as asynchronous copies on streams, a recv that waits on an
event, GPU kernels on the profile's track timed by events).

A real GPU's queue is CuPy's (``device_queues.CudaQueue``, tested on a GPU in
tests/cuda/test_gpu_device.py).  Here the executor drives ``FakeQueue``s, whose semantics
catch what a missing wait or copy would get wrong:

- a GPU's values are ``FakeDeviceArray``s; a GPU kernel refuses anything else but the
  program's host inputs (which its backend copies in), a CPU kernel refuses device arrays
  and unsettled copies;
- a copy to the host lands only when its event is synchronised: a consumer that does not
  wait reads NaN;
- an event's time is a fake clock that moves 1 ms per mark, so a GPU span's length says
  which events timed it.

The kernels are the program's own, compiled by flowjit for each device (the GPU's run on
numba's simulator); the fake only moves their arrays between "memories"."""

import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flowjit
from helpers import assert_same_result, tolerance_for
from random_programs import random_programs
from flowjit.runtime.device_queues import Pending
from flowjit.runtime.executor import ExecutionError, MultiDeviceExecutable
from flowjit.runtime.executor_trace import chrome_trace

pytest.importorskip("numba_cuda", reason="numba-cuda is not installed (the cuda extra)")

TICK = 1e-3


class FakeEvent:
    def __init__(self, time: float, landing=None):
        self.time, self.landing, self.synchronised = time, landing, 0

    def synchronize(self):
        self.synchronised += 1
        if self.landing is not None:
            landing, self.landing = self.landing, None
            landing()


class FakeDeviceArray:
    """An array in a fake GPU's memory (``is_device_array`` sees ``__cuda_array_interface__``)."""

    def __init__(self, data: np.ndarray, queue: "FakeQueue"):
        self.data, self.queue = np.array(data), queue
        self.__cuda_array_interface__ = {"shape": self.data.shape, "typestr": self.data.dtype.str, "version": 3}


class FakeQueue:
    def __init__(self, name: str):
        self.name, self.clock = name, 0.0
        self.log: list[tuple] = []
        self.threads: set[str] = set()
        self.lock = threading.Lock()
        self.fault: Exception | None = None

    def enter(self):
        self.threads.add(threading.current_thread().name)

    def holds(self, array):
        return isinstance(array, FakeDeviceArray) and array.queue is self

    def follow(self, arrays):
        self.log.append(("follow", sum(isinstance(array, FakeDeviceArray) for array in arrays)))

    def mark(self):
        with self.lock:
            self.clock += TICK
            return FakeEvent(self.clock)

    def elapsed(self, start, end):
        return end.time - start.time

    def to_host(self, value):
        self.log.append(("to_host", type(value).__name__))
        if not isinstance(value, FakeDeviceArray):
            return value
        assert value.queue is self, "copied to the host by another GPU's stream"
        host = np.full(value.data.shape, np.nan, value.data.dtype) if value.data.dtype.kind in "fc" else \
            np.zeros_like(value.data)
        event = self.mark()
        event.landing = lambda: np.copyto(host, value.data)
        return Pending(host, event, value)

    def to_device(self, value):
        assert type(value) is np.ndarray or np.isscalar(value), f"to_device of a {type(value).__name__}"
        self.log.append(("to_device",))
        return FakeDeviceArray(value, self)

    def from_peer(self, value, source, keep):
        assert isinstance(value, FakeDeviceArray) and value.queue is source
        ready = source.mark()
        keep.append(value)
        self.log.append(("wait_event", source.name, ready.time))
        return FakeDeviceArray(value.data, self)

    def synchronize(self):
        self.log.append(("synchronize",))
        if self.fault is not None:
            raise self.fault


def fake_compile(lowered, queues: dict):
    """The lowered program's own compiled nodes, wrapped so that a GPU node computes on its
    fake memory and a CPU node checks that it was given host arrays."""
    compiled = {name: kernel for (_, name), kernel in lowered.multi_device_executable.kernels.items()}

    def compile_node(node):
        return fake_compile_one(node, compiled[node.name], queues.get(lowered.devices[node.device].name))
    return compile_node


def executable(function, devices, args, gpus=("gpu:0",)):
    lowered = flowjit.jit(function, devices=devices).lower(*args)
    queues = {lowered.devices[name].name: FakeQueue(name) for name in gpus}
    partitioned = lowered.partitioned
    built = MultiDeviceExecutable(lowered.fused_partitions, partitioned.inputs, partitioned.outputs, lowered.devices,
                                  fake_compile(lowered, queues), queues=queues)
    return built, {name: queues[lowered.devices[name].name] for name in gpus}


def interpreted(function, args):
    result = flowjit.jit(function, backend="interpreter")(*args)
    return list(result) if isinstance(result, tuple) else [result]


def softmax_across(x, w):
    with flowjit.device("cpu:0"):
        shifted = x - x.max(axis=1, keepdims=True)
    with flowjit.device("gpu:0"):
        e = np.exp(shifted) * w
        total = e.sum(axis=1, keepdims=True)
    with flowjit.device("cpu:0"):
        return e / total, total[:, 0] * 2


ARGS = (np.linspace(-2, 2, 24, dtype=np.float32).reshape(4, 6), np.linspace(0.5, 1.5, 6, dtype=np.float32))


def test_values_cross_between_host_and_gpu_only_at_sends_and_the_host_waits_on_each_copy():
    run, queues = executable(softmax_across, ["cpu:0", "gpu:0"], ARGS)
    gpu = queues["gpu:0"]
    for _ in range(2):
        got = run(*ARGS)
        for value, want in zip(got, interpreted(softmax_across, ARGS)):
            assert type(value) is np.ndarray
            np.testing.assert_allclose(value, want, rtol=1e-6)
    copies = [entry[0] for entry in gpu.log if entry[0] != "synchronize"]
    sends_in = sum(1 for step in run.steps if step.kind == "send" and step.carry and step.carry[1] is gpu)
    sends_out = sum(1 for step in run.steps if step.kind == "send" and step.carry and step.carry[0] is gpu)
    assert sends_in >= 1 and sends_out >= 1
    assert copies.count("to_device") == 2 * sends_in and copies.count("to_host") == 2 * sends_out
    assert gpu.log.count(("synchronize",)) == 2                      # once per call, before it returns
    assert gpu.threads and all(name.startswith("flowjit ") for name in gpu.threads)   # the GPU's worker


def gpu_result(x):
    with flowjit.device("gpu:0"):
        y = np.exp(x) * 2
    with flowjit.device("cpu:0"):
        return y, (y * y).sum()


def test_a_gpu_result_comes_back_to_the_host_for_host_inputs_and_stays_for_device_inputs():
    x = np.linspace(0, 1, 8, dtype=np.float32)
    run, queues = executable(gpu_result, ["cpu:0", "gpu:0"], (x,))
    want = interpreted(gpu_result, (x,))
    y, total = run(x)
    assert type(y) is np.ndarray and type(total) is np.ndarray
    np.testing.assert_allclose(y, want[0], rtol=1e-6)
    np.testing.assert_allclose(total, want[1], rtol=1e-6)
    assert not [entry for entry in queues["gpu:0"].log if entry[0] == "follow"]
    y, total = run(FakeDeviceArray(x, queues["gpu:0"]))
    assert isinstance(y, FakeDeviceArray) and y.queue is queues["gpu:0"]        # no hidden round trip
    # the GPU's stream waits for the caller's own work on its input first
    assert [entry for entry in queues["gpu:0"].log if entry[0] == "follow"] == [("follow", 1)]
    np.testing.assert_allclose(y.data, want[0], rtol=1e-6)
    # the host's result too is a device array, on the argument's GPU, as a one-GPU program gives
    assert isinstance(total, FakeDeviceArray) and total.queue is queues["gpu:0"]
    np.testing.assert_allclose(total.data, want[1], rtol=1e-6)


def two_gpus(x):
    with flowjit.device("gpu:0"):
        a = np.sin(x) + 1
    with flowjit.device("gpu:1"):
        b = a * a
    with flowjit.device("cpu:0"):
        return b.sum()


def test_between_two_gpus_the_receiving_stream_waits_on_an_event_of_the_sending_one():
    x = np.linspace(0, 3, 16, dtype=np.float32)
    devices = ["cpu:0", {"name": "gpu:0"}, {"name": "gpu:1", "executable": True}]
    run, queues = executable(two_gpus, devices, (x,), gpus=("gpu:0", "gpu:1"))
    np.testing.assert_allclose(run(x), interpreted(two_gpus, (x,)), rtol=1e-6)
    assert [entry[:2] for entry in queues["gpu:1"].log if entry[0] == "wait_event"] == [("wait_event", "gpu:0")]
    assert ("synchronize",) in queues["gpu:0"].log and ("synchronize",) in queues["gpu:1"].log


def test_gpu_kernels_and_copies_are_on_the_gpu_track_timed_by_its_events():
    run, queues = executable(softmax_across, ["cpu:0", "gpu:0"], ARGS)
    run(*ARGS)
    run(*ARGS, profile=True)
    call = run.last_call
    trace = chrome_trace(run, call)
    gpu_track = run.devices.index(next(d for d in run.devices if d.type == "gpu"))
    spans = [event for event in trace["traceEvents"] if event["ph"] == "X"]
    timed = [event for event in spans if event["args"].get("timed") == "CUDA events"]
    kernels = [event for event in timed if event["cat"] == "kernel"]
    assert kernels and all(event["tid"] == gpu_track for event in kernels)
    for event in kernels:                                 # two marks a kernel: one tick of the fake clock
        assert event["dur"] == pytest.approx(TICK * 1e6)
    for event in timed:                                   # (a copy to the host marks its own event between)
        ticks = event["dur"] / (TICK * 1e6)
        assert round(ticks) >= 1 and ticks == pytest.approx(round(ticks))
    sends = [step for step in run.steps if step.carry is not None]
    assert {event["name"] for event in timed if event["cat"] == "send"} == {step.node.name for step in sends}
    host = [event for event in spans if "timed" not in event["args"]]
    assert host and all(event["tid"] != gpu_track for event in host if event["cat"] == "kernel")
    starts = sorted(event["ts"] for event in kernels)
    assert starts == sorted(set(starts))                  # each on the events' own times


def test_a_fault_found_when_the_stream_is_synchronised_fails_the_call_naming_the_device():
    run, queues = executable(softmax_across, ["cpu:0", "gpu:0"], ARGS)
    queues["gpu:0"].fault = RuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered")
    with pytest.raises(ExecutionError, match=r"work issued on gpu:0 \(.*device:gpu:0\) failed: RuntimeError: "
                                             r"cudaErrorIllegalAddress") as raised:
        run(*ARGS)
    assert isinstance(raised.value.__cause__, RuntimeError)


def test_without_queues_nothing_is_copied_or_waited_for():
    """The simulator's gpu:0 (and every CPU device) has no queue: its kernels take and give
    host arrays, and the executor moves references as before."""
    lowered = flowjit.jit(softmax_across, devices=["cpu:0", "gpu:0"]).lower(*ARGS)
    run = lowered.multi_device_executable
    assert run.queues == [None] * len(run.devices) and not run.copies
    assert all(step.carry is None for step in run.steps)
    for value, want in zip(run(*ARGS), interpreted(softmax_across, ARGS)):
        np.testing.assert_allclose(value, want, rtol=1e-6)


def host_compiled(lowered, queues: dict):
    """Every node compiled by the CPU backend (the fake GPUs' kernels run as CPU code: what is
    tested is the executor's transfers), wrapped as ``fake_compile`` wraps them."""
    from flowjit.compiler.codegen.executable import Executable, single_node_graph
    backend = lowered.cpu_backend

    def compile_node(node):
        run = Executable(single_node_graph(node), backend, lowered.variable_buffers, threads=1)
        return fake_compile_one(node, run, queues.get(lowered.devices[node.device].name))
    return compile_node


def fake_compile_one(node, run, queue):
    def on_gpu(*arrays):
        for array in arrays:
            assert isinstance(array, FakeDeviceArray) and array.queue is queue or type(array) is np.ndarray, \
                f"%{node.name} on a GPU was given a {type(array).__name__}"
        results = run(*[array.data if isinstance(array, FakeDeviceArray) else array for array in arrays])
        return [FakeDeviceArray(result, queue) for result in results]

    def on_host(*arrays):
        for array in arrays:
            assert not isinstance(array, (FakeDeviceArray, Pending)), \
                f"%{node.name} on the host was given a {type(array).__name__}"
        return run(*arrays)
    on_gpu.kernel_sources = on_host.kernel_sources = run.kernel_sources
    return on_gpu if queue is not None else on_host


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(program=random_programs(), seed=st.integers(0, 2 ** 16))
def test_random_programs_on_random_placements_over_a_cpu_and_two_gpus(program, seed):
    """Random programs placed at random on cpu:0, gpu:0 and gpu:1 (fake queues): every value
    that crosses between the host and a GPU, or between the GPUs, is copied and waited for
    where it must be, and the results are the interpreter's."""
    args = program.make_args(np.random.default_rng(0))
    with np.errstate(all="ignore"):
        expected = flowjit.jit(program, backend="interpreter")(*args)
    devices = ["cpu:0", {"name": "gpu:0", "executable": True}, {"name": "gpu:1", "executable": True}]
    lowered = flowjit.jit(program, devices=devices, placement="random", placement_seed=seed).lower(*args)
    queues = {lowered.devices[name].name: FakeQueue(name) for name in ("gpu:0", "gpu:1")}
    partitioned = lowered.partitioned
    run = MultiDeviceExecutable(lowered.fused_partitions, partitioned.inputs, partitioned.outputs, lowered.devices,
                                host_compiled(lowered, queues), queues=queues)
    with np.errstate(all="ignore"):
        actual = run(*args)
    actual = actual[0] if len(actual) == 1 and not isinstance(expected, (tuple, list)) else tuple(actual)
    assert_same_result(actual, expected, exact=False, rtol=tolerance_for(expected, args))
