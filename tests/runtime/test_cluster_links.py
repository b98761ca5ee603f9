"""Links, the data plane of cluster steps (runtime/cluster_links.py), without Ray: whole
messages with their arrays both ways, a handshake that refuses a wrong key before anything
is unpickled, a closed peer seen at once, a send that gives up at its deadline; and the
executor's call hooks that a task's step runs on (``on_done``, ``launch=False``), and
kernels on a one-thread device, which hold no GIL and run no parallel twin."""

import os
import pickle
import queue
import socket
import threading
import time

import numpy as np
import pytest

import flowjit
from flowjit.runtime.cluster_links import (POLL_S, LinkClosed, Listener, RemoteError, Replies, Switchboard, connect,
                                           portable_error, restored_error)
from flowjit.compiler.codegen.driver import PARALLEL_MIN_ELEMENTS
from flowjit.compiler.ir import ops
from flowjit.runtime.executor import ExecutionError, MultiDeviceExecutable
from helpers import echo_server

KEY = b"k" * 32


def _echo_server(key=KEY):
    return echo_server(key)


MESSAGES = [
    ("scalars", 1, 2.5, "text", None, np.float32(3.0), np.int64(-7)),
    ("arrays", np.arange(6.0).reshape(2, 3), np.ones((3, 4), np.float32).T, np.arange(20, dtype=np.int16)[::3],
     np.zeros((0, 3)), np.array(1.5), np.array([True, False]), np.ones(1 << 18, np.float32)),
    ("nested", {0: np.arange(3, dtype=np.uint8), 5: [np.float64(2), (np.arange(4.0),)]}),
]


@pytest.mark.parametrize("message", MESSAGES, ids=[message[0] for message in MESSAGES])
def test_a_message_and_its_arrays_come_back_equal_and_writable(message):
    listener, _ = _echo_server()
    link = connect(listener.address, KEY, "test", "echo")
    try:
        link.send(message)
        got = link.receive(time.monotonic() + 10)
    finally:
        link.close()
        listener.close()

    def same(a, b):
        if isinstance(a, np.ndarray):
            assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)
            assert b.flags.writeable or b.size == 0
        elif isinstance(a, dict):
            assert a.keys() == b.keys() and all(same(a[k], b[k]) is None for k in a)
        elif isinstance(a, (list, tuple)):
            assert type(a) is type(b) and len(a) == len(b) and all(same(x, y) is None for x, y in zip(a, b))
        else:
            assert a == b and type(a) is type(b)
    same(message, got)


class _Marker:
    """Unpickling one of these leaves a file behind: proof that bytes were unpickled."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_wrong_key_is_refused_before_anything_it_sends_is_unpickled(tmp_path):
    listener, closed = _echo_server()
    greeted = []
    listener.on_link = greeted.append
    started = time.monotonic()
    with pytest.raises(LinkClosed, match="not echo of this cluster") as caught:
        connect(listener.address, b"x" * 32, "intruder", "echo", timeout=5)
    assert not caught.value.timed_out and time.monotonic() - started < 2
    with pytest.raises(LinkClosed, match="not another task of this cluster"):
        connect(listener.address, KEY, "test", "another task", timeout=5)     # the key, another listener
    marker = tmp_path / "unpickled"
    sock = socket.create_connection(listener.address, timeout=5)    # no handshake at all: a pickle at once
    payload = pickle.dumps(_Marker(str(marker)))
    sock.sendall(len(payload).to_bytes(8, "little") + payload + bytes(128))
    sock.shutdown(socket.SHUT_WR)
    sock.settimeout(5)
    while sock.recv(4096):                           # (whatever the listener says, then it hangs up)
        pass
    sock.close()
    time.sleep(0.2)
    listener.close()
    assert not marker.exists() and not greeted and closed.empty()


def test_a_process_that_does_not_hold_the_key_is_not_believed_by_the_connecting_side(tmp_path):
    """Whoever took over a dead task's port answers the handshake with a nonce and a made-up
    proof, then a pickle: the connecting side refuses it before reading any message."""
    marker = tmp_path / "unpickled"
    server = socket.create_server(("127.0.0.1", 0))

    def impostor():
        sock, _ = server.accept()
        sock.recv(4096)
        payload = pickle.dumps(("done", "p", 0, _Marker(str(marker))))
        sock.sendall(os.urandom(64) + len(payload).to_bytes(8, "little") + payload)
        time.sleep(1)
        sock.close()
    threading.Thread(target=impostor, daemon=True).start()
    with pytest.raises(LinkClosed, match="not /job:w/task:0 of this cluster"):
        connect(server.getsockname(), KEY, "driver", "/job:w/task:0", timeout=5)
    server.close()
    assert not marker.exists()


class _Picky(Exception):
    """An exception whose constructor wants more than its message: it pickles, and does not unpickle."""

    def __init__(self, message, graph):
        super().__init__(message)
        self.graph = graph


def test_an_error_that_does_not_unpickle_still_arrives_as_what_it_said():
    assert type(restored_error(portable_error(ValueError("plain")))) is ValueError
    error = _Picky("bad graph", graph=object())
    error.add_note("flowjit: raised in %k0")
    restored = restored_error(portable_error(error))
    assert isinstance(restored, RemoteError) and restored.name == "_Picky"
    assert "bad graph" in str(restored) and "raised in %k0" in str(restored)


def test_a_peer_that_goes_away_is_seen_at_once_on_both_ends():
    listener, closed = _echo_server()
    link = connect(listener.address, KEY, "test", "echo")
    link.send("hello")
    assert link.receive(time.monotonic() + 5) == "hello"
    started = time.monotonic()
    link.close()
    assert "closed the link" in closed.get(timeout=5)
    assert time.monotonic() - started < 5.0
    with pytest.raises(LinkClosed):
        link.send("after")
    listener.close()
    with pytest.raises(LinkClosed, match="connecting to echo"):     # nobody listens there any more
        connect(listener.address, KEY, "test", "echo", timeout=2)


def test_a_send_to_a_peer_that_does_not_read_gives_up_at_its_deadline():
    accepted = []
    listener = Listener(KEY, "127.0.0.1", lambda link: accepted.append(link) or time.sleep(30), "stuck")
    link = connect(listener.address, KEY, "test", "stuck")
    started = time.monotonic()
    with pytest.raises(LinkClosed) as caught:
        for _ in range(64):                          # far more than the socket buffers hold
            link.send(np.ones(1 << 20, np.float32), timeout=1.0)
    assert caught.value.timed_out
    assert 1.0 <= time.monotonic() - started < 5.0
    assert link.closed                               # half a message went out: the link cannot be used again
    listener.close()


def test_a_peer_that_sends_a_trickle_does_not_hold_a_handshake_past_its_deadline(monkeypatch):
    """A byte at a time, each sooner than a poll: the handshake still ends at its deadline."""
    from flowjit.runtime import cluster_links
    monkeypatch.setattr(cluster_links, "CONNECT_TIMEOUT_S", 1.0)
    listener, _ = _echo_server()
    sock = socket.create_connection(listener.address)
    started = time.monotonic()
    closed_after = None
    try:
        for _ in range(100):                             # 10 s of trickle at most
            sock.sendall(b"x")
            time.sleep(0.1)
    except OSError:                                      # (the listener closed it)
        closed_after = time.monotonic() - started
    sock.close()
    listener.close()
    assert closed_after is not None and closed_after < 4.0


def test_links_over_ipv6():
    """A node whose address is IPv6 (Ray gives the node's IP, either family)."""
    try:
        socket.create_server(("::1", 0), family=socket.AF_INET6).close()
    except OSError:
        pytest.skip("no IPv6 loopback here")
    listener = Listener(KEY, "::1", lambda link: link.send(link.receive()), "echo6")
    link = connect(listener.address, KEY, "test", "echo6")
    link.send(("v6", np.arange(4)))
    got = link.receive(time.monotonic() + 5)
    assert got[0] == "v6" and np.array_equal(got[1], np.arange(4))
    link.close()
    listener.close()


def test_a_flood_of_silent_connections_holds_a_bounded_number_of_handshakes(monkeypatch):
    """Connections that never prove anything take at most GREETINGS handshake threads; the
    ones beyond are closed at once, and once the silent ones are gone a real peer connects."""
    from flowjit.runtime import cluster_links
    monkeypatch.setattr(cluster_links, "CONNECT_TIMEOUT_S", 2.0)
    listener, _ = _echo_server()
    before = sum(thread.name == "flowjit-link" for thread in threading.enumerate())
    silent = [socket.create_connection(listener.address) for _ in range(cluster_links.GREETINGS + 8)]
    time.sleep(0.5)
    greeting = sum(thread.name == "flowjit-link" for thread in threading.enumerate()) - before
    assert greeting <= cluster_links.GREETINGS
    refused = 0
    for sock in silent:
        sock.settimeout(0.05)
        try:
            refused += sock.recv(1) == b""               # (closed by the listener: end of stream)
        except (socket.timeout, ConnectionResetError):
            pass
    assert refused >= 8
    for sock in silent:
        sock.close()
    link = connect(listener.address, KEY, "test", "echo", timeout=5)
    link.send("through")
    assert link.receive(time.monotonic() + 5) == "through"
    link.close()
    listener.close()


def test_the_switchboard_posts_replies_to_their_step_and_a_lost_task_to_every_step_waiting():
    def task(link):
        try:
            while True:
                kind, program, step = link.receive()
                if kind == "die":
                    link.close()
                    return
                link.send(("done", program, step, [np.arange(step)]))
        except LinkClosed:
            pass
    listener = Listener(KEY, "127.0.0.1", task, "/job:w/task:0")
    board = Switchboard(KEY)
    first, second = board.expect("p", 1), board.expect("p", 2)
    link = board.link("/job:w/task:0", listener.address, 5)
    assert board.link("/job:w/task:0", listener.address, 5) is link          # one link per task
    link.send(("run", "p", 2))
    task_name, kind, payload = second.next(time.monotonic() + 5)
    assert (task_name, kind) == ("/job:w/task:0", "done") and payload[0].tolist() == [0, 1]
    assert first.next(time.monotonic() + 0.2) is None                        # nothing for step 1
    link.send(("die", "p", 0))
    for replies in (first, second):
        assert replies.next(time.monotonic() + 5)[:2] == ("/job:w/task:0", "lost")
    board.forget("p", 1)
    board.forget("p", 2)
    assert link.closed                     # a later step connects again (and learns the task is gone)
    replies = board.expect("p", 3)         # a link dropped (its task restarted) loses the steps on it
    board.link("/job:w/task:0", listener.address, 5)
    board.drop("/job:w/task:0")
    assert replies.next(time.monotonic() + 5)[:2] == ("/job:w/task:0", "lost")
    board.close()
    listener.close()


def test_replies_wait_until_their_deadline():
    replies = Replies()
    started = time.monotonic()
    assert replies.next(started + 0.2) is None and time.monotonic() - started >= 0.2
    threading.Timer(0.1, replies.post, ("t", "done", 1)).start()
    assert replies.next(time.monotonic() + 5) == ("t", "done", 1)


# -- the executor's hooks for a task's steps -------------------------------------------------
def _two_device_program():
    def pipeline(x, y):
        with flowjit.device("cpu:1"):
            a = np.tanh(x) * 2
        with flowjit.device("cpu:0"):
            return a.sum(axis=1) + y
    x, y = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), np.ones(3, np.float32)
    lowered = flowjit.jit(pipeline, devices=["cpu:0", "cpu:1"]).lower(x, y)
    _two_device_program.lowered = lowered
    return lowered.multi_device_executable, (x, y), (np.tanh(x) * 2).sum(axis=1) + y


def test_on_done_runs_once_when_a_call_finishes_or_fails():
    executable, args, expected = _two_device_program()
    seen = queue.Queue()
    call = executable.begin(args, on_done=seen.put)
    assert seen.get(timeout=10) is call
    np.testing.assert_allclose(call.wait(0), [expected], rtol=1e-6)
    call = executable.begin(args, on_done=seen.put, launch=False)
    call.fail(None, ExecutionError("aborted from outside"))
    call.fail(None, ExecutionError("again"))                      # the first error wins; one callback
    assert seen.get(timeout=1) is call and seen.empty()
    with pytest.raises(ExecutionError, match="aborted from outside"):
        call.wait(0)


def test_a_call_not_launched_takes_deliveries_and_runs_when_launched():
    """A task registers a step's call before it launches it, so that a tensor another task
    sends meanwhile reaches the call (and not the mailbox of steps not begun)."""
    inner, (x, y), expected = _two_device_program()
    receiving = [index for index, graph in enumerate(inner.partitions) if any(n.op is ops.recv for n in graph.nodes)]
    compiled = {name: kernel for (_, name), kernel in inner.kernels.items()}
    lowered = _two_device_program.lowered
    executable = MultiDeviceExecutable([inner.partitions[index] for index in receiving],
                                       [lowered.partitioned.inputs[index] for index in receiving], [(0, 0)],
                                       lowered.devices, lambda node: compiled[node.name],
                                       step_timeout_s=5, transport=lambda tag, key, tensor: None)
    recv = next(step for step in executable.steps if step.kind == "recv")
    call = executable.begin((x, y), launch=False)
    assert not call.done.wait(0.2) and call.started == 0.0         # nothing ran
    call.deliver(recv.key, np.tanh(x) * 2)                         # as from another process
    executable.launch(call)
    np.testing.assert_allclose(call.wait(5)[0], expected, rtol=1e-6)


def test_kernels_on_a_one_thread_device_are_serial_and_release_the_gil():
    x = np.linspace(-1, 1, PARALLEL_MIN_ELEMENTS, dtype=np.float32)   # the size that runs in parallel

    def program(x):
        with flowjit.device("cpu:1"):
            return np.exp(np.sin(x)) * 2
    for threads, parallel in ((1, False), (2, True)):
        lowered = flowjit.jit(program, devices=["cpu:0", {"name": "cpu:1", "threads": threads}]).lower(x)
        executable = lowered.multi_device_executable
        kernels = [kernel for kernel in executable.kernels.values() if kernel.compiled]
        assert kernels, "no kernel compiled"
        for kernel in kernels:
            assert ("_parallel_" in kernel.driver_source) is parallel, kernel.driver_source
            for compiled in kernel.compiled:       # (parallel twins keep the GIL: numba's workqueue layer)
                assert compiled.serial.targetoptions["nogil"] and not compiled.parallel.targetoptions.get("nogil")
        np.testing.assert_allclose(executable(x)[0], np.exp(np.sin(x)) * 2, rtol=1e-6)
