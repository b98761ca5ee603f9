"""The multi-device executor's waits all have deadlines, and its rendezvous keys pair up.

A step that cannot finish (a kernel that hangs, a recv whose send never comes) fails
within the step's deadline, naming what it still waits for; partitions whose keys do not
pair one send with one recv are refused before they can hang."""

import threading
import time

import numpy as np
import pytest

import flowjit
from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph
from flowjit.runtime.executor import FIRST_CALL_ALLOWANCE, ExecutionError, MultiDeviceExecutable, StepTimeoutError

TWO = ["cpu:0", "cpu:1"]


def _pipeline(x, y):
    with flowjit.device("cpu:1"):
        a = np.tanh(x) * 2
    with flowjit.device("cpu:0"):
        return a.sum(axis=1) + y


def _args():
    return np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), np.ones(3, np.float32)


def _lowered(**options):
    return flowjit.jit(_pipeline, devices=TWO, **options).lower(*_args())


def _rebuilt(lowered, partitions: list[Graph], **keywords) -> MultiDeviceExecutable:
    """An executable over ``partitions`` (edited copies of the lowered ones), compiled as the
    lowered program compiles its own."""
    inner = lowered.multi_device_executable
    compiled = {name: kernel for (_, name), kernel in inner.kernels.items()}
    partitioned = lowered.partitioned
    return MultiDeviceExecutable(partitions, partitioned.inputs, partitioned.outputs, lowered.devices,
                                 lambda node: compiled[node.name], **keywords)


def test_a_second_recv_of_one_key_is_refused_naming_the_key_and_both_nodes():
    lowered = _lowered()
    partitions = [graph.copy() for graph in lowered.fused_partitions]
    consumer = next(graph for graph in partitions if any(node.op is ops.recv for node in graph.nodes))
    recv = next(node for node in consumer.nodes if node.op is ops.recv)
    consumer.add_node(ops.recv, [], dict(recv.attrs), [recv.outputs[0].type], name="recv_again",
                      device=recv.device)
    with pytest.raises(ExecutionError, match=rf"rendezvous key '{recv.attrs['key']}' has two recvs: "
                                             rf"%{recv.name} on .*cpu:0 and %recv_again on .*cpu:0"):
        _rebuilt(lowered, partitions)


def test_a_send_without_its_recv_is_refused():
    lowered = _lowered()
    partitions = [graph.copy() for graph in lowered.fused_partitions]
    producer = next(graph for graph in partitions if any(node.op is ops.send for node in graph.nodes))
    send = next(node for node in producer.nodes if node.op is ops.send)
    producer.add_node(ops.send, [send.inputs[0]], {"key": send.attrs["key"] + "_orphan"}, [],
                      name="send_orphan", device=send.device)
    with pytest.raises(ExecutionError, match=r"send %send_orphan on .*cpu:1 has no recv for rendezvous key "
                                             r"'.*_orphan' on .*cpu:0: it would wait forever"):
        _rebuilt(lowered, partitions)


def _hang(executable, release: threading.Event):
    """Make the producer's kernel on cpu:1 block until ``release`` (at most 10 s)."""
    step = next(s for s in executable.steps if s.kind == "kernel" and s.node.op is not ops.constant
                and executable.devices[s.device].short == "cpu:1")
    original = step.run

    def hung(*arrays):
        release.wait(10)
        return original(*arrays)
    step.run = hung
    return step, original


def test_a_hung_kernel_fails_the_step_at_its_deadline_naming_the_kernel_and_the_waiting_recv():
    executable = _lowered(step_timeout_s=0.3).multi_device_executable
    executable(*_args())                                       # compiled and warm
    release = threading.Event()
    step, original = _hang(executable, release)
    timer = threading.Timer(5.0, release.set)                  # without a deadline the call would return at 5 s
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(StepTimeoutError) as caught:
            executable(*_args())
        elapsed = time.monotonic() - started
    finally:
        release.set()
        timer.cancel()
    assert elapsed < 2.0
    message = str(caught.value)
    assert "did not finish within its deadline of 0.3 s" in message
    assert f"kernel %{step.node.name} ({step.node.op.name}) on /job:localhost/task:0/device:cpu:1 is queued " \
           f"or running (traced at" in message
    recv = next(s for s in executable.steps if s.kind == "recv")
    assert f"recv %{recv.node.name} on /job:localhost/task:0/device:cpu:0 is waiting for key '{recv.key}' " \
           f"(from /job:localhost/task:0/device:cpu:1 to /job:localhost/task:0/device:cpu:0)" in message
    step.run = original
    time.sleep(0.05)                                           # the released kernel drains from cpu:1
    x, y = _args()
    np.testing.assert_allclose(executable(x, y)[0], (np.tanh(x) * 2).sum(axis=1) + y, rtol=1e-6)


def test_a_recv_whose_send_never_comes_times_out_instead_of_hanging():
    """A key whose send lives in another process (a cluster task) that never sends."""
    lowered = _lowered()
    partitions = [graph for graph in lowered.fused_partitions if any(n.op is ops.recv for n in graph.nodes)]
    index = lowered.fused_partitions.index(partitions[0])
    inner = lowered.multi_device_executable
    compiled = {name: kernel for (_, name), kernel in inner.kernels.items()}
    executable = MultiDeviceExecutable(partitions, [lowered.partitioned.inputs[index]], [(0, 0)], lowered.devices,
                                       lambda node: compiled[node.name], step_timeout_s=0.2,
                                       transport=lambda tag, key, tensor: None)
    x, y = _args()
    assert executable.deadline() == 0.2 + FIRST_CALL_ALLOWANCE      # the first call compiles the kernels
    executable.begin((x, y), mailbox={executable.steps[0].key: np.tanh(x) * 2}).wait(2.0)
    executable.calls += 1
    assert executable.deadline() == 0.2
    started = time.monotonic()
    with pytest.raises(StepTimeoutError, match=r"recv %recv_mul on /job:localhost/task:0/device:cpu:0 is waiting "
                                               r"for key '/job:localhost/task:0/device:cpu:1;"):
        executable(x, y)
    assert time.monotonic() - started < 2.0
    call = executable.begin((x, y), mailbox={executable.steps[0].key: np.tanh(x) * 2})   # delivered: it runs
    np.testing.assert_allclose(call.wait(2.0)[0], (np.tanh(x) * 2).sum(axis=1) + y, rtol=1e-6)


def test_a_key_paired_with_another_process_needs_a_transport():
    lowered = _lowered()
    only = [graph for graph in lowered.fused_partitions if any(n.op is ops.send for n in graph.nodes)]
    with pytest.raises(ExecutionError, match=r"send %send_mul on .*cpu:1 pairs with .*cpu:0, which is not a device "
                                             r"of this program .* no transport"):
        MultiDeviceExecutable(only, [[0]], [], lowered.devices, lambda node: None)
