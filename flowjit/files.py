"""Files written whole or not at all, and directory locks with deadlines: what the kernel cache,
checkpoints and the machine figures share.

- ``atomic_writer(path)``: a stream to a temporary name beside ``path``, fsynced, renamed over
  ``path``, the directory fsynced; a reader sees the old file or the whole new one, and a
  writer that fails (or is killed) leaves at most a temporary file (``is_temporary``).
- ``directory_lock(path, timeout)``: an ``flock`` on a lock file, released by the kernel if
  the holder dies; yields whether it is held, never waits past ``timeout``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import time

try:
    import fcntl
except ImportError:                     # (not POSIX: no cross-process lock)
    fcntl = None

TEMPORARY_PREFIX = ".tmp-"
WRITE_CHUNK = 1 << 24          # bytes per write call of write_atomically


def is_temporary(name: str) -> bool:
    """A file a writer has not renamed into place yet (flowjit's ``.tmp-*``, numba's ``*.tmp.<id>``)."""
    return name.startswith(TEMPORARY_PREFIX) or ".tmp." in name


def fsync_directory(directory: str, strict: bool = False) -> None:
    """Make a rename in ``directory`` durable.  ``strict``: an error raises (checkpoints must
    know); otherwise a platform or file system that cannot sync a directory is let be (caches)."""
    try:
        descriptor = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        if strict:
            raise
        return
    try:
        os.fsync(descriptor)
    except OSError:
        if strict:
            raise
    finally:
        os.close(descriptor)


@contextlib.contextmanager
def atomic_writer(path: str, strict: bool = False):
    """A binary stream whose content replaces ``path`` when the block ends without error."""
    directory, name = os.path.split(os.path.abspath(path))
    temporary = os.path.join(directory, f"{TEMPORARY_PREFIX}{name}.{os.getpid()}.{secrets.token_hex(4)}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(descriptor, "wb") as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    fsync_directory(directory, strict)


def write_atomically(path: str, data: bytes | str, strict: bool = False) -> str:
    """``path`` holds either its old content or all of ``data``, whatever moment the process dies at."""
    view = memoryview(data.encode() if isinstance(data, str) else data)
    with atomic_writer(path, strict) as stream:
        for start in range(0, len(view), WRITE_CHUNK):
            stream.write(view[start:start + WRITE_CHUNK])
    return path


@contextlib.contextmanager
def directory_lock(path: str, timeout: float, poll: float = 0.005, strict: bool = False):
    """Hold the lock file ``path`` (created when missing) across processes; yields True when
    held, False when another process held it past ``timeout`` seconds or (unless ``strict``,
    which raises the OSError) it cannot be opened: a read-only directory.  Not re-entrant.
    The holder may remove the file (``flowjit cache clear``): a process that then takes the
    lock of the removed file sees that ``path`` is not that file and locks the one there now."""
    if fcntl is None:
        yield True
        return
    deadline = time.monotonic() + timeout
    while True:
        try:
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            if strict:
                raise
            yield False
            return
        try:
            held = _flock(descriptor, deadline, poll)
            if held and not _names(path, descriptor):
                if time.monotonic() < deadline:
                    continue
                held = False
            yield held
            return
        finally:
            os.close(descriptor)                   # releases the lock


def _flock(descriptor: int, deadline: float, poll: float) -> bool:
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as error:
            if error.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll)


def _names(path: str, descriptor: int) -> bool:
    """Whether ``path`` is the file open as ``descriptor``."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    opened = os.fstat(descriptor)
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)
