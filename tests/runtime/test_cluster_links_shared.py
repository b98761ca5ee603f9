"""Links between processes on one node (runtime/cluster_shared.py, cluster_links.py), without
Ray: a Unix socket that proves the key as TCP does, arrays from ``SHARED_MIN`` bytes passed as
shared memory the receiver maps (never a socket's buffer), small ones inline, pooled segments
never overwritten while the receiver holds an array over them, every wait with a deadline,
and nothing left in /dev/shm by a sender that is killed."""

import os
import queue
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from flowjit.runtime import cluster_links, cluster_shared
from flowjit.runtime.cluster_links import LinkClosed, Listener, connect
from flowjit.runtime.cluster_shared import SHARED_MIN, mapped_memory
from helpers import echo_server

pytestmark = pytest.mark.skipif(not cluster_shared.AVAILABLE, reason="Unix sockets with SCM_RIGHTS and memfd (Linux)")

KEY = b"k" * 32
BIG = SHARED_MIN // 4                 # float32 elements of an array at the threshold


def _echo_server(key=KEY, served=None):
    return echo_server(key, served)


@pytest.fixture
def echo():
    """A local link to an echo server; ``echo.served`` is the server's end."""
    served = []
    listener, _ = _echo_server(served=served)
    link = connect(listener.endpoint, KEY, "test", "echo")
    _round_trip(link, "hello")
    link.served = served[0]
    yield link
    link.close()
    listener.close()


def _round_trip(link, message):
    link.send(message)
    return link.receive(time.monotonic() + 10)


def test_a_listener_on_this_node_is_reached_over_a_unix_socket_and_tcp_stays_for_its_address(echo):
    assert echo.local and echo.sock.family == socket.AF_UNIX
    listener, _ = _echo_server()
    assert len(listener.endpoint) == 4 and listener.endpoint[:2] == listener.address
    assert listener.endpoint[2].startswith(b"\0flowjit-link-")       # abstract: no file anywhere
    tcp = connect(listener.address, KEY, "test", "echo")
    elsewhere = connect((*listener.address, listener.endpoint[2], "another-node/boot"), KEY, "test", "echo")
    try:
        for link in (tcp, elsewhere):
            assert not link.local and link.sock.family in (socket.AF_INET, socket.AF_INET6)
            got = _round_trip(link, np.arange(BIG, dtype=np.float32))[...]
            assert mapped_memory(got) is None and np.array_equal(got, np.arange(BIG, dtype=np.float32))
    finally:
        tcp.close()
        elsewhere.close()
        listener.close()


def test_an_array_from_the_threshold_arrives_as_shared_memory_and_smaller_ones_inline(echo):
    rng = np.random.default_rng(0)
    big = rng.standard_normal((BIG // 64, 64)).astype(np.float32)
    fortran = np.asfortranarray(rng.standard_normal((512, 300)))         # 1.2 MB, column-major
    small = rng.standard_normal(BIG - 1).astype(np.float32)              # one element under
    received = cluster_shared.received()
    got = _round_trip(echo, ("step", {0: big, 1: small}, [fortran], np.float32(2)))
    for sent, arrived in ((big, got[1][0]), (fortran, got[2][0])):
        assert mapped_memory(arrived) is not None, "a large array came through the socket"
        assert arrived.dtype == sent.dtype and arrived.shape == sent.shape and arrived.strides == sent.strides
        np.testing.assert_array_equal(arrived, sent)
        assert arrived.flags.writeable and arrived.ctypes.data % mmap_page() == 0
    assert mapped_memory(got[1][1]) is None and np.array_equal(got[1][1], small)
    assert cluster_shared.received() - received == 4          # both ways, the echo and its reply
    got[1][0][0, 0] = 7.0                                     # the receiver's own: writes stay there
    assert big[0, 0] != 7.0


def mmap_page() -> int:
    import mmap
    return mmap.PAGESIZE


def test_a_pooled_segment_is_reused_only_once_the_receiver_lets_go_of_its_array(echo):
    """The echo server's end sends back from its pool; here the arrays are held or let go."""
    pool = echo.served.pool
    held = _round_trip(echo, np.full(BIG, 1.0, np.float32))
    assert len(pool.segments) == 1
    second = _round_trip(echo, np.full(BIG, 2.0, np.float32))      # the first is still held here
    assert len(pool.segments) == 2      # (not this end's: the server lets go of ours a moment after it replies)
    assert (held == 1.0).all() and (second == 2.0).all()            # nothing written over it
    del held, second
    for value in range(3, 8):                                       # let go each time: no new segment
        assert (_round_trip(echo, np.full(BIG, float(value), np.float32)) == value).all()
    assert len(pool.segments) == 2
    view = _round_trip(echo, np.arange(BIG, dtype=np.float32))[::7].T    # a view keeps it as well
    assert (_round_trip(echo, np.zeros(BIG, np.float32)) == 0).all()
    assert np.array_equal(view, np.arange(BIG, dtype=np.float32)[::7])


def test_past_the_pool_a_segment_is_made_for_one_message(echo, monkeypatch):
    monkeypatch.setattr(cluster_shared, "POOL_BYTES", 0)
    kept = [_round_trip(echo, np.full(BIG + index, float(index), np.float32)) for index in range(3)]
    assert not echo.pool.segments and not echo.served.pool.segments
    for index, array in enumerate(kept):
        assert mapped_memory(array) is not None and array.shape == (BIG + index,) and (array == index).all()


def test_the_unix_socket_refuses_a_process_without_the_key_before_anything_is_unpickled():
    listener, closed = _echo_server()
    greeted = []
    listener.on_link = greeted.append
    with pytest.raises(LinkClosed, match="not echo of this cluster"):
        connect(listener.endpoint, b"x" * 32, "intruder", "echo", timeout=5)
    with pytest.raises(LinkClosed, match="not another of this cluster"):
        connect(listener.endpoint, KEY, "test", "another", timeout=5)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)      # no handshake: a message with a segment
    sock.connect(listener.endpoint[2])
    fd = os.memfd_create("intruder")
    try:
        sock.sendall(b"x" * 64)
        socket.send_fds(sock, [b"F"], [fd])
    except OSError:
        pass                                                      # (the listener may hang up first)
    sock.close()
    os.close(fd)
    time.sleep(0.3)
    assert not greeted and closed.empty()
    listener.close()


def test_a_send_of_shared_arrays_to_a_peer_that_does_not_read_gives_up_at_its_deadline():
    listener = Listener(KEY, "127.0.0.1", lambda link: time.sleep(30), "stuck")
    link = connect(listener.endpoint, KEY, "test", "stuck")
    assert link.local
    link.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)      # a few markers fill it
    big = np.ones(BIG, np.float32)
    started = time.monotonic()
    with pytest.raises(LinkClosed) as caught:
        for _ in range(400):
            link.send(("deliver", big), timeout=1.0)
    assert caught.value.timed_out and 1.0 <= time.monotonic() - started < 5.0
    assert link.closed and not link.pool.segments                   # closed: its segments are gone
    listener.close()


def test_a_send_that_never_got_the_link_frees_its_segment_and_leaves_the_link_open(echo):
    """Another send holds the link past this one's deadline: nothing of it went out, so its
    segment is free for the next message and the link goes on."""
    with echo.lock:
        with pytest.raises(LinkClosed) as caught:
            echo.send(np.ones(BIG, np.float32), timeout=0.2)
    assert caught.value.timed_out and not echo.closed
    assert [segment.free() for segment in echo.pool.segments] == [True]
    assert (_round_trip(echo, np.full(BIG, 3.0, np.float32)) == 3.0).all()
    assert len(echo.pool.segments) == 1


def test_a_message_whose_segments_never_come_fails_at_the_receivers_deadline():
    """A peer that sends a message's head and then stops: the receiver gives up at its
    deadline, and not later."""
    accepted = queue.Queue()
    listener = Listener(KEY, "127.0.0.1", accepted.put, "reader")
    sender = connect(listener.endpoint, KEY, "test", "reader")
    reader = accepted.get(timeout=5)
    import pickle
    head = pickle.dumps((pickle.dumps("payload"), [(SHARED_MIN, True)]), protocol=5)
    with sender.lock:
        sender._write(memoryview(cluster_links._LENGTH.pack(len(head)) + head), None)   # and no descriptor
    started = time.monotonic()
    with pytest.raises(LinkClosed) as caught:
        reader.receive(time.monotonic() + 1.0)
    assert caught.value.timed_out and 1.0 <= time.monotonic() - started < 1.0 + 2 * cluster_links.POLL_S + 1
    sender.close()
    listener.close()


SENDER = """
import sys, time, numpy as np
from flowjit.runtime.cluster_links import connect
link = connect(eval(sys.argv[1]), bytes.fromhex(sys.argv[2]), "sender", "receiver")
link.send(("big", np.arange({elements}, dtype=np.float32)))
print("sent", flush=True)
time.sleep(60)
"""


def _shm() -> set:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


def test_an_array_from_a_killed_sender_stays_readable_and_nothing_is_left_in_dev_shm():
    accepted = queue.Queue()
    listener = Listener(KEY, "127.0.0.1", accepted.put, "receiver")
    before = _shm()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sender = subprocess.Popen([sys.executable, "-c", SENDER.format(elements=4 * BIG), repr(listener.endpoint),
                               KEY.hex()], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
                                  root, os.environ.get("PYTHONPATH")]))})
    try:
        link = accepted.get(timeout=30)
        kind, array = link.receive(time.monotonic() + 30)
        assert sender.stdout.readline().strip() == "sent"
        assert link.local and mapped_memory(array) is not None
    finally:
        sender.send_signal(signal.SIGKILL)
        sender.wait(10)
    with pytest.raises(LinkClosed):
        link.receive(time.monotonic() + 5)                        # the sender is gone...
    assert kind == "big" and np.array_equal(array, np.arange(4 * BIG, dtype=np.float32))   # ...its array is not
    assert _shm() <= before                                        # no file was ever made
    listener.close()


def test_a_driver_copies_every_heavy_run_first_then_writes_them_back_to_back():
    """``ClusterExecutable._send_runs``: the runs carrying large feeds are copied into their
    links' shared memory side by side, and only then written, one after the other, so that
    no task begins while another's feeds are still being copied; a run whose deadline passed
    after its copy is abandoned (its segment free again), not half sent."""
    from concurrent.futures import ThreadPoolExecutor
    from types import SimpleNamespace
    from flowjit.runtime.cluster_executable import HEAVY_RUN, ClusterExecutable
    from flowjit.runtime.cluster_links import encode
    servers, links, order = [], {}, []
    for task in ("a", "b", "c"):
        served = []
        listener, _ = _echo_server(served=served)
        link = connect(listener.endpoint, KEY, "test", "echo")
        _round_trip(link, "hello")
        servers.append(listener)
        links[task] = link
        for name in ("prepare", "commit"):
            original = getattr(link, name)

            def spy(*args, original=original, name=name, task=task, **kwargs):
                order.append((name, task))
                return original(*args, **kwargs)
            setattr(link, name, spy)
    pool = ThreadPoolExecutor(2)
    driver = SimpleNamespace(cluster=SimpleNamespace(link=lambda task, timeout: links[task], senders=lambda: pool))
    big = np.arange(HEAVY_RUN // 4 + 1, dtype=np.float32)
    messages = {"a": encode(("run", big)), "b": encode(("run", big + 1)), "c": encode(("run", 7))}
    try:
        assert ClusterExecutable._send_runs(driver, messages, time.monotonic() + 30) == {}
        commits = [index for index, (name, _) in enumerate(order) if name == "commit"]
        assert len(commits) == 3 and max(i for i, (name, _) in enumerate(order) if name == "prepare") < min(commits)
        for task, want in (("a", big), ("b", big + 1)):
            tag, echoed = links[task].receive(time.monotonic() + 10)
            assert tag == "run" and mapped_memory(echoed) is not None
            np.testing.assert_array_equal(echoed, want)
            del echoed
        assert links["c"].receive(time.monotonic() + 10) == ("run", 7)

        pool_segments = links["a"].pool.segments
        failed = ClusterExecutable._send_runs(driver, {"a": encode(("run", big))}, time.monotonic() - 1)
        assert failed["a"].timed_out and "deadline passed" in str(failed["a"])
        assert not links["a"].closed and all(segment.free() for segment in pool_segments)
    finally:
        pool.shutdown()
        for link in links.values():
            link.close()
        for listener in servers:
            listener.close()
