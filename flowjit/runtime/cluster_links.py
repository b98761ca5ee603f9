"""Links: the data plane of a cluster's steps, as direct connections between processes.

Ray is the control plane: it starts and restarts the task processes, registers programs,
moves variables, and carries ``abort`` and ``pending``.  What a step sends -- the driver's
``run`` (a step id and the feeds), a task's result, and each cross-task tensor under its
rendezvous key -- goes over links, because a Ray actor call is too slow for it: measured on
a 2-core machine, an actor call's round trip took 1.1 ms (1.7 ms carrying a small array, 5-9
ms carrying 8 MB), and a step from task A to B and back makes four of them; a link's round
trip took 0.1 ms, and 8 MB went one way in 2.6 ms.

A link is one connection carrying whole messages both ways: a message is pickled with
protocol 5, its arrays' memory out of band.  Between nodes it is TCP (``TCP_NODELAY``): an
array is sent from its own buffer and received straight into a new one (no copy but the
socket's).  Between two processes on one node it is a Unix domain socket, and an array of
``cluster_shared.SHARED_MIN`` bytes or more is copied once into shared memory whose file
descriptor goes along (``SCM_RIGHTS``): the receiver maps it, without a copy (how, and
what it measured, is in ``cluster_shared``).  Each task listens on its node's address and
on a Unix socket in the abstract namespace (no file: nothing is left when it is killed);
its ``endpoint`` names both and its node, and ``connect`` takes the Unix socket when it is
on that node (TCP when that fails: another network namespace).  Both ends of a new
connection prove they know the cluster's key, and who they are, before a message goes
either way: each sends a nonce, and each answers with an HMAC of both nonces and both names
(so nothing is unpickled from a process that does not hold the key, and a process that took
over a dead task's port is refused); the handshake is the same on either kind of socket.
Links are not encrypted: as Ray itself, a cluster wants a trusted network.

Every wait has a deadline or ends with the peer: a send gives up at its deadline (a peer
that stops reading is hung), a reader waits for the next message until the link closes,
and a process that dies closes its links, which its peers see at once (``LinkClosed``); a
host that vanishes without closing them is found by TCP keepalive within about
``KEEPALIVE_S`` + 3 seconds.  Errors travel as ``portable_error``: a type name and text
beside the pickled exception, so an exception that does not unpickle still says what it said.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
import socket
import struct
import threading
import time
from typing import Callable

import numpy as np

from flowjit.runtime import cluster_shared
from flowjit.runtime.cluster_shared import SegmentMaps, SegmentPool, node_identity

POLL_S = 0.5                   # how often a blocked read or write looks at its link and deadline
CONNECT_TIMEOUT_S = 10.0       # the longest a connection and its handshake may take
SMALL = 1 << 16                # a message this small goes out in one write
GREETINGS = 32                 # handshakes a listener runs at once (more connections are closed at once)
KEEPALIVE_S = 6                # idle seconds before TCP probes a silent peer (then 3 probes, 1 s apart)
_LENGTH = struct.Struct("<Q")
_NONCE = 32
_NAME = struct.Struct("<H")
_PROOF = hashlib.sha256().digest_size
_NOT_READING = "its deadline passed with the other end not reading"
_NO_ANSWER = "no answer before the deadline"
_MAX_FDS = 250                 # descriptors passed with one marker byte (the kernel takes 253 at most)
LOCAL_LINKS = cluster_shared.AVAILABLE     # whether processes on one node link over Unix sockets


class LinkClosed(ConnectionError):
    """The link's other end is gone (its process died or closed it), or a send missed its
    deadline (``timed_out``: the other end is there but does not read)."""

    def __init__(self, message: str, timed_out: bool = False):
        super().__init__(message)
        self.timed_out = timed_out


def encode(message) -> tuple:
    """``message`` pickled, its arrays' memory out of band: (payload, [each buffer's bytes]);
    each link frames it its own way (``Link.send_encoded``)."""
    buffers: list = []
    payload = pickle.dumps(message, protocol=5, buffer_callback=buffers.append)
    return payload, [buffer.raw() for buffer in buffers]


def portable_error(error: BaseException) -> tuple:
    """``error`` as it travels: (type name, text, the pickled exception or None where it
    does not come back from a pickle)."""
    text = str(error)
    notes = getattr(error, "__notes__", None)
    if notes:
        text += "\n" + "\n".join(notes)
    try:
        pickled = pickle.dumps(error, protocol=5)
        pickle.loads(pickled)
    except Exception:                                    # noqa: BLE001  (any exception may refuse)
        pickled = None
    return type(error).__name__, text, pickled


def restored_error(payload: tuple) -> BaseException:
    """The exception ``portable_error`` sent (a ``RemoteError`` with its text where it did not pickle)."""
    name, text, pickled = payload
    if pickled is not None:
        try:
            return pickle.loads(pickled)
        except Exception:                                # noqa: BLE001
            pass
    return RemoteError(name, text)


class RemoteError(Exception):
    """An exception raised in another process that could not be sent as itself."""

    def __init__(self, name: str, text: str):
        super().__init__(f"{name}: {text}")
        self.name = name


class Prepared:
    """A message ready to go (``Link.prepare``): its parts, the descriptors of its shared
    segments, and those of one-off segments, closed once it is sent or abandoned."""

    __slots__ = ("parts", "descriptors", "owned")

    def __init__(self):
        self.parts: list = []
        self.descriptors: list[int] = []
        self.owned: list[int] = []

    def close(self) -> None:
        owned, self.owned = self.owned, []
        for fd in owned:
            os.close(fd)


class Link:
    """One connection: ``send`` writes whole messages (one writer at a time), ``receive``
    reads the next one (one reader).  ``local``: a Unix socket to a process on this node,
    which passes large arrays as shared memory."""

    def __init__(self, sock: socket.socket, peer: str):
        self.local = sock.family == socket.AF_UNIX
        if not self.local:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            for option, value in (("TCP_KEEPIDLE", KEEPALIVE_S), ("TCP_KEEPINTVL", 1), ("TCP_KEEPCNT", 3)):
                if hasattr(socket, option):              # (Linux; elsewhere the system's defaults)
                    sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)
        sock.settimeout(POLL_S)
        self.sock, self.peer = sock, peer
        self.address: tuple | None = None          # what it was connected to (the connecting side's)
        self.lock = threading.Lock()
        self.closed = False
        self.pool = SegmentPool() if self.local else None       # segments this end sends in
        self.maps = SegmentMaps() if self.local else None       # segments the other end sent in

    def send(self, message, timeout: float | None = None) -> None:
        """Write ``message``; ``LinkClosed`` when the other end is gone or ``timeout`` seconds
        pass first (the link is then closed: a message half written cannot be taken back)."""
        self.send_encoded(encode(message), timeout)

    def send_encoded(self, encoded: tuple, timeout: float | None = None) -> None:
        """``send`` of what ``encode`` made of a message: a length and the pickled (payload,
        layout), the inline buffers, then (a local link) the shared ones' descriptors.  The
        layout gives each buffer's size, or (size, pooled) for one in shared memory."""
        self.commit(self.prepare(encoded), timeout)

    def prepare(self, encoded: tuple) -> "Prepared":
        """The first half of ``send_encoded``: large arrays copied into shared memory (a local
        link) and the head pickled, nothing written yet.  ``commit`` sends it (or ``abandon``
        lets it go), so that a driver can copy several tasks' feeds at once and then wake
        every task within microseconds of the others."""
        payload, raws = encoded
        prepared = Prepared()
        try:
            layout: list = []
            inline: list = []
            for raw in raws:
                segment = self._share(raw)
                if segment is not None:
                    fd, pooled, once = segment
                    prepared.descriptors.append(fd)
                    if once:
                        prepared.owned.append(fd)
                    layout.append((raw.nbytes, pooled))
                else:
                    layout.append(raw.nbytes)
                    inline.append(raw)
            head = pickle.dumps((payload, layout), protocol=5)
            parts = [_LENGTH.pack(len(head)) + head, *inline]
            if sum(len(part) if isinstance(part, bytes) else part.nbytes for part in parts) <= SMALL:
                parts = [b"".join(parts)]
            prepared.parts = parts
        except BaseException:
            self.abandon(prepared)
            raise
        return prepared

    def commit(self, prepared: "Prepared", timeout: float | None = None) -> None:
        """Write what ``prepare`` made ready; ``LinkClosed`` as ``send``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            if not self.lock.acquire(timeout=-1 if timeout is None else timeout):
                if self.local:
                    self.pool.release(prepared.descriptors)  # (nothing of it went out: free again)
                raise LinkClosed(f"sending to {self.peer}: another send held the link past the deadline", True)
            try:
                for part in prepared.parts:
                    self._write(memoryview(part).cast("B"), deadline)
                descriptors = prepared.descriptors
                for first in range(0, len(descriptors), _MAX_FDS):
                    self._write_descriptors(descriptors[first:first + _MAX_FDS], deadline)
            except (OSError, LinkClosed) as error:
                self.close()
                raise LinkClosed(f"sending to {self.peer}: {error}", getattr(error, "timed_out", False)) from None
            finally:
                self.lock.release()
        finally:
            prepared.close()

    def abandon(self, prepared: "Prepared") -> None:
        """A prepared message that will not be sent: its pooled segments are free again."""
        if self.local:
            self.pool.release(prepared.descriptors)
        prepared.close()

    def _share(self, raw: memoryview) -> tuple[int, bool, bool] | None:
        """``raw`` copied into a segment (``SegmentPool.put``), or None: it goes inline (a
        link between nodes, a small array, or no segment to be had: out of memory or
        descriptors, where the stream still works)."""
        if not self.local or raw.nbytes < cluster_shared.SHARED_MIN or self.closed:
            return None
        try:
            return self.pool.put(raw)
        except OSError:
            return None

    def _write(self, view: memoryview, deadline: float | None) -> None:
        while len(view):
            sent = self._attempt(deadline, _NOT_READING, lambda: self.sock.send(view))     # (each chunk)
            view = view[sent or 0:]

    def _write_descriptors(self, descriptors: list[int], deadline: float | None) -> None:
        """One marker byte carrying ``descriptors`` (it goes whole or not at all)."""
        while not self._attempt(deadline, _NOT_READING, lambda: socket.send_fds(self.sock, [b"F"], descriptors)):
            pass

    def receive(self, deadline: float | None = None):
        """The next message; ``LinkClosed`` when the other end is gone, the link was closed, or
        ``deadline`` (a ``time.monotonic()``; None: none) passes first."""
        try:
            (length,) = _LENGTH.unpack(self._read(_LENGTH.size, deadline))
            payload, layout = pickle.loads(self._read(length, deadline))
            buffers = [self._read(entry, deadline) if isinstance(entry, int) else None for entry in layout]
            shared = [(index, entry) for index, entry in enumerate(layout) if not isinstance(entry, int)]
            if shared:
                self._map_shared(buffers, shared, deadline)
        except LinkClosed:
            self.close()                 # (half a message read: the stream cannot be resumed)
            raise
        return pickle.loads(payload, buffers=buffers)

    def _map_shared(self, buffers: list, shared: list, deadline: float | None) -> None:
        """Fill ``buffers`` at each (index, (size, pooled)) of ``shared`` with the segment
        whose descriptor comes next, mapped."""
        if not self.local:
            raise LinkClosed(f"{self.peer} sent shared memory over a link between nodes")
        descriptors: list[int] = []
        try:
            while len(descriptors) < len(shared):
                descriptors += self._read_descriptors(min(_MAX_FDS, len(shared) - len(descriptors)), deadline)
            for position, (index, (size, pooled)) in enumerate(shared):
                fd, descriptors[position] = descriptors[position], -1
                buffers[index] = self.maps.array(fd, size, pooled)
        except LinkClosed:
            raise
        except (ValueError, OSError) as error:
            raise LinkClosed(f"{self.peer} sent shared memory that could not be mapped: {error}") from None
        finally:
            for fd in descriptors:
                if fd >= 0:
                    os.close(fd)

    def _read_descriptors(self, count: int, deadline: float | None) -> list[int]:
        while True:
            received = self._attempt(deadline, _NO_ANSWER, lambda: socket.recv_fds(self.sock, 1, count), reading=True)
            if received is None:
                continue
            data, descriptors, flags, _ = received
            if not data:
                raise LinkClosed(f"{self.peer} closed the link")
            if data != b"F" or len(descriptors) != count or flags & socket.MSG_CTRUNC:
                for fd in descriptors:
                    os.close(fd)
                raise LinkClosed(f"{self.peer} sent {len(descriptors)} descriptors where {count} were due")
            return descriptors

    def _read(self, size: int, deadline: float | None = None) -> np.ndarray:
        buffer = np.empty(size, np.uint8)
        view, got = memoryview(buffer), 0
        while got < size:
            count = self._attempt(deadline, _NO_ANSWER, lambda: self.sock.recv_into(view[got:]), reading=True)
            if count is None:
                continue                                                            # (each chunk)
            if count == 0:
                raise LinkClosed(f"{self.peer} closed the link")
            got += count
        return buffer

    def _attempt(self, deadline: float | None, late: str, operation: Callable, reading: bool = False):
        """``operation()`` on the socket, once ``_still_open``; None when it timed out (the
        caller polls again).  A read's ``OSError`` is ``LinkClosed`` (a write's goes to the
        sender, which closes the link)."""
        self._still_open(deadline, late)
        try:
            return operation()
        except socket.timeout:
            return None
        except OSError as error:
            if not reading:
                raise
            raise LinkClosed(str(error)) from None

    def _still_open(self, deadline: float | None, late: str) -> None:
        """``LinkClosed`` when the link was closed, or ``deadline`` passed (``late`` says how):
        checked before every chunk, so a peer reading or sending a trickle cannot hold a wait
        past it."""
        if self.closed:
            raise LinkClosed("the link was closed")
        if deadline is not None and time.monotonic() > deadline:
            raise LinkClosed(late, True)

    def close(self) -> None:
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        if self.local:
            self.pool.close()
            self.maps.close()


def _proof(key: bytes, role: bytes, first: bytes, second: bytes, names: tuple[str, str]) -> bytes:
    text = b"|".join([role, first, second, *(name.encode() for name in names)])
    return hmac.new(key, text, hashlib.sha256).digest()


def _connect_locally(address: tuple, deadline: float) -> socket.socket | None:
    """A Unix socket to the listener at ``address`` (an ``endpoint``) when it is on this
    node; None when it is not, or cannot be reached so (TCP is tried then)."""
    if not LOCAL_LINKS or len(address) < 4 or not address[2] or address[3] != node_identity():
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(max(deadline - time.monotonic(), 1e-3))
        sock.connect(address[2])
    except OSError:                                      # (another network namespace, or it is gone)
        sock.close()
        return None
    return sock


def connect(address: tuple, key: bytes, name: str, peer: str, timeout: float = CONNECT_TIMEOUT_S) -> Link:
    """A link to the listener at ``address`` (its ``endpoint``, or a TCP (host, port)), which
    must be ``peer`` (the name its listener was given), introduced as ``name``: a Unix socket
    when the listener is on this node, else TCP; ``LinkClosed`` when it refuses, does not
    answer within ``timeout`` seconds, or cannot prove it holds ``key`` and is ``peer``."""
    address = tuple(address)
    deadline = time.monotonic() + timeout
    where = f"connecting to {peer} at {address[0]}:{address[1]}"
    sock = _connect_locally(address, deadline)
    if sock is None:
        try:
            sock = socket.create_connection(address[:2], timeout=max(deadline - time.monotonic(), 1e-3))
        except OSError as error:
            raise LinkClosed(f"{where}: {error}", isinstance(error, socket.timeout) or time.monotonic() > deadline) \
                from None
    link = Link(sock, peer)
    link.address = address
    ours = os.urandom(_NONCE)
    introduction = name.encode()
    try:
        with link.lock:                 # (raw bytes: nothing is unpickled before both proofs)
            link._write(memoryview(ours + _NAME.pack(len(introduction)) + introduction), deadline)
        theirs = bytes(link._read(_NONCE, deadline))
        proof = bytes(link._read(_PROOF, deadline))
        if not hmac.compare_digest(proof, _proof(key, b"listener", ours, theirs, (peer, name))):
            raise LinkClosed(f"the process there is not {peer} of this cluster (it proved neither the key nor that name)")
        with link.lock:
            link._write(memoryview(_proof(key, b"connector", theirs, ours, (name, peer))), deadline)
    except (LinkClosed, OSError) as error:
        link.close()
        raise LinkClosed(f"{where}: {error}", getattr(error, "timed_out", False)) from None
    return link


class Listener:
    """Accepts links, as ``name``, from processes that know ``key``: ``on_link(link)`` gets
    each one (its ``peer`` the name the other end gave), on a thread of its own.  At most
    ``GREETINGS`` handshakes run at once, each within ``CONNECT_TIMEOUT_S``: a flood of
    connections that never prove anything costs that many threads, not one per connection
    (a cluster's own processes connect to a task once each).

    It listens on TCP at ``address`` (host, port) and, where links may be local, on a Unix
    socket in the abstract namespace; ``endpoint`` (host, port, Unix name, node) names both,
    for ``connect``."""

    def __init__(self, key: bytes, host: str, on_link: Callable[[Link], None], name: str):
        self.key, self.on_link, self.name = key, on_link, name
        self.greetings = threading.BoundedSemaphore(GREETINGS)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET         # (a node's IPv6 address too)
        self.sock = socket.create_server((host, 0), family=family)
        self.sock.settimeout(POLL_S)
        self.address = (host, self.sock.getsockname()[1])
        self.endpoint: tuple = self.address
        self.local = None
        if LOCAL_LINKS:
            self.local = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.local.bind("\0flowjit-link-" + os.urandom(12).hex())      # (abstract: no file to leave behind)
            self.local.listen()
            self.local.settimeout(POLL_S)
            self.endpoint = (*self.address, self.local.getsockname(), node_identity())
        self.closed = False
        for sock in filter(None, (self.sock, self.local)):
            threading.Thread(target=self._accept, args=(sock,), name="flowjit-link-listener", daemon=True).start()

    def _accept(self, listening: socket.socket) -> None:
        while not self.closed:
            try:
                sock, _ = listening.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            if not self.greetings.acquire(blocking=False):
                sock.close()                             # (its connect fails: it may try again)
                continue
            threading.Thread(target=self._greet, args=(sock,), name="flowjit-link", daemon=True).start()

    def _greet(self, sock: socket.socket) -> None:
        """The handshake (``connect``'s other half)."""
        try:
            link = self._handshake(sock)
        except OSError:                                  # (reset before the handshake began)
            sock.close()
            link = None
        finally:
            self.greetings.release()
        if link is not None:
            self.on_link(link)

    def _handshake(self, sock: socket.socket) -> Link | None:
        """The link, once the other end proved it holds the key (None: it did not)."""
        link = Link(sock, "a process connecting")
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        ours = os.urandom(_NONCE)
        try:
            theirs = bytes(link._read(_NONCE, deadline))
            (length,) = _NAME.unpack(bytes(link._read(_NAME.size, deadline)))
            name = bytes(link._read(length, deadline)).decode(errors="replace")
            with link.lock:
                link._write(memoryview(ours + _proof(self.key, b"listener", theirs, ours, (self.name, name))),
                            deadline)
            proof = bytes(link._read(_PROOF, deadline))
            accepted = hmac.compare_digest(proof, _proof(self.key, b"connector", ours, theirs, (name, self.name)))
        except (LinkClosed, OSError):
            accepted = False
        if not accepted:
            link.close()
            return None
        link.peer = name
        return link

    def close(self) -> None:
        self.closed = True
        self.sock.close()
        if self.local is not None:
            self.local.close()


class LinkTable:
    """The links one process opens, one to each task it talks to, as ``name``: an open link
    to a task's current address is reused; a closed one, or one to an address the task no
    longer has (it was restarted), is replaced by a new connection."""

    def __init__(self, key: bytes, name: str):
        self.key, self.name = key, name
        self.lock = threading.Lock()
        self.links: dict[str, Link] = {}

    def link(self, task: str, address: tuple, timeout: float) -> Link:
        """The open link to ``task`` at ``address`` (connected now if there is none)."""
        address = tuple(address)
        with self.lock:
            link = self.links.get(task)
        if link is not None and not link.closed and link.address == address:
            return link
        link = connect(address, self.key, self.name, task, timeout)
        with self.lock:
            old = self.links.get(task)
            if old is not None and not old.closed and old.address == address:
                link.close()                             # (another thread connected first)
                return old
            self.links[task] = link
        if old is not None:
            old.close()
        self.opened(task, link)
        return link

    def opened(self, task: str, link: Link) -> None:
        """A new link to ``task`` (a subclass reads it)."""

    def lost(self, task: str) -> bool:
        """Whether the link to ``task`` closed (its process is gone) and none replaced it."""
        with self.lock:
            link = self.links.get(task)
        return link is not None and link.closed

    def drop(self, task: str) -> None:
        """Close the link to ``task`` (it is being replaced)."""
        with self.lock:
            link = self.links.pop(task, None)
        if link is not None:
            link.close()

    def close(self) -> None:
        with self.lock:
            links, self.links = list(self.links.values()), {}
        for link in links:
            link.close()


class Switchboard(LinkTable):
    """The driver's links, and the replies they bring: ``("done", program, step, outputs)``
    and ``("failed", program, step, error)`` from a task, or ``("lost", ...)`` when a task's
    link closes, each posted to the ``Replies`` of its step."""

    def __init__(self, key: bytes):
        super().__init__(key, "driver")
        self.expected: dict[tuple[str, int], "Replies"] = {}

    def opened(self, task: str, link: Link) -> None:
        threading.Thread(target=self._read, args=(task, link), name=f"flowjit-link-{task}", daemon=True).start()

    def _read(self, task: str, link: Link) -> None:
        try:
            while True:
                kind, program, step, payload = link.receive()
                with self.lock:
                    replies = self.expected.get((program, step))
                if replies is not None:
                    replies.post(task, kind, payload)
        except LinkClosed as error:
            reason = str(error)
        except Exception as error:                          # noqa: BLE001  (a reply that does not unpickle)
            reason = f"its reply could not be read: {type(error).__name__}: {error}"
        link.close()                    # (a step begun after this connects again, and learns the task is gone)
        with self.lock:
            current = self.links.get(task) in (link, None)      # (None: dropped, or closed with the board)
            waiting = list(self.expected.values())
        if current:
            for replies in waiting:
                replies.post(task, "lost", reason)

    def expect(self, program: str, step: int) -> "Replies":
        replies = Replies()
        with self.lock:
            self.expected[(program, step)] = replies
        return replies

    def forget(self, program: str, step: int) -> None:
        with self.lock:
            self.expected.pop((program, step), None)


class Replies:
    """What the tasks answered for one step, in order of arrival."""

    def __init__(self):
        self.ready = threading.Condition()
        self.items: list[tuple[str, str, object]] = []

    def post(self, task: str, kind: str, payload) -> None:
        with self.ready:
            self.items.append((task, kind, payload))
            self.ready.notify_all()

    def next(self, deadline: float | None) -> tuple[str, str, object] | None:
        """The next reply (task, kind, payload), or None when ``deadline`` (a
        ``time.monotonic()``) passes first."""
        with self.ready:
            while not self.items:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self.ready.wait(remaining)
            return self.items.pop(0)
