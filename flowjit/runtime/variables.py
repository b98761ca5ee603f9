"""Variable storage: one buffer per variable, found by its unique name.

A graph names a variable by a string (``read_variable {var="w"}``); the process-wide
registry maps that name to the ``VariableBuffer`` holding the value, so any executable
(the straight-line driver, the multi-device executor, the interpreter) can be built from
a graph alone.  The registry holds buffers weakly: a variable nobody refers to any more
(no ``flowjit.Variable``, no cached program) goes away and frees its name.

A buffer's ``value`` is an ndarray owned by the buffer alone: compiled programs write it
in place, so nothing else may hold it (reads that outlive the next write copy it, and
results never alias it).

Threads.  Each buffer has a readers-writer lock (``VariableLock``).  A call of a compiled
program holds the locks of every variable it uses for the whole call (``VariableGuard``):
for writing those it assigns, for reading those it only reads.  So a call sees each of its
variables as no other call changes it -- no update is lost, no value is torn -- calls that
only read a variable run side by side, and calls that write one run one at a time, each
as a whole (they are serializable).  Every call takes its locks in one fixed order (by
variable name, unique in the process), so two calls that use variables in different
orders never deadlock; a waiting writer stops new readers, so readers cannot starve an
update.  A wait has a deadline (``variable_timeout_s``): past it the call fails naming the
variable and who holds it, and runs nothing.
"""

from __future__ import annotations

import re
import threading
import time
import weakref
from typing import Callable, Iterable, Mapping

import numpy as np

from flowjit.config import CompileOptions
from flowjit.errors import FlowjitError

# How long a call (or an eager assign) waits for a variable another call holds.
DEFAULT_TIMEOUT_S = CompileOptions.variable_timeout_s


class VariableError(FlowjitError):
    """A variable that does not exist, or a value that does not fit one."""


class VariableLockTimeout(VariableError, TimeoutError):
    """A call waited past its deadline for a variable another call holds."""


class VariableLock:
    """A readers-writer lock, writers preferred: many readers or one writer; once a writer
    waits, new readers wait behind it.  Not reentrant (a call takes each lock once)."""

    __slots__ = ("_mutex", "_changed", "_readers", "_writer", "_writer_thread", "_writers_waiting", "_waiters")

    def __init__(self):
        self._mutex = threading.Lock()
        self._changed = threading.Condition(self._mutex)
        self._readers = 0
        self._writer = None                       # what holds it for writing (its ``what``), for messages
        self._writer_thread = 0
        self._writers_waiting = 0
        self._waiters = 0

    def try_acquire(self, write: bool, holder) -> bool:
        """Take the lock if it is free now (for writing when ``write``); never waits."""
        with self._mutex:
            if write:
                if self._writer is None and not self._readers:
                    self._writer, self._writer_thread = holder, threading.get_ident()
                    return True
            elif self._writer is None and not self._writers_waiting:
                self._readers += 1
                return True
            return False

    def acquire(self, write: bool, deadline: float, holder) -> bool:
        """Take the lock by ``deadline`` (``time.monotonic()``); False when it passed first."""
        with self._mutex:
            if write:
                self._writers_waiting += 1
                acquired = False
                try:
                    while self._writer is not None or self._readers:
                        if not self._wait(deadline):
                            return False
                    acquired = True
                finally:
                    self._writers_waiting -= 1
                    if not acquired and self._waiters:
                        self._changed.notify_all()        # readers queued behind this writer go on
                self._writer, self._writer_thread = holder, threading.get_ident()
                return True
            while self._writer is not None or self._writers_waiting:
                if not self._wait(deadline):
                    return False
            self._readers += 1
            return True

    def _wait(self, deadline: float) -> bool:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        self._waiters += 1
        try:
            self._changed.wait(remaining)
        finally:
            self._waiters -= 1
        return True

    def release(self, write: bool) -> None:
        with self._mutex:
            if write:
                self._writer = None
            else:
                self._readers -= 1
            if self._waiters:
                self._changed.notify_all()

    def holders(self) -> str:
        """Who holds it now, in words."""
        with self._mutex:
            if self._writer is not None:
                thread = next((t.name for t in threading.enumerate() if t.ident == self._writer_thread), "?")
                return f"held for writing by {getattr(self._writer, 'what', self._writer)} on thread '{thread}'"
            if self._readers:
                return f"held for reading by {self._readers} call(s)"
            return "free now"


class VariableBuffer:
    """The storage of one variable: its unique ``name``, its ``value`` (an owned ndarray) and
    its ``lock``."""

    __slots__ = ("name", "value", "device", "lock", "home", "__weakref__")

    def __init__(self, name: str, value: np.ndarray, device: str | None = None):
        self.name = name
        self.value = value
        self.device = device
        self.lock = VariableLock()
        # Where the value lives when not here: a cluster task (``runtime/cluster.py``'s
        # ``TaskHome``).  Then ``value`` only keeps the shape and dtype, and the value is read
        # and written through ``read_values``/``write_values``.
        self.home = None

    def __repr__(self) -> str:
        return f"<VariableBuffer '{self.name}' {self.value.dtype}{list(self.value.shape)}>"


_REGISTRY: "weakref.WeakValueDictionary[str, VariableBuffer]" = weakref.WeakValueDictionary()
_LOCK = threading.Lock()
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]*$")
_SUFFIX = re.compile(r"^(.*?)(?:_(\d+))?$")


def create(name: str, value: np.ndarray, device: str | None = None) -> VariableBuffer:
    """A new buffer under ``name``, or ``name_1``, ``name_2``... when that is taken (TensorFlow's
    rule: variables of one process have distinct names, which checkpoints key on)."""
    if not _NAME.match(name):
        raise VariableError(f"'{name}' cannot name a variable: use letters, digits, '_', '.', '/' and '-', "
                            f"starting with a letter or '_'")
    with _LOCK:
        unique = name
        if unique in _REGISTRY:
            base = _SUFFIX.match(name).group(1)
            number = 1
            while f"{base}_{number}" in _REGISTRY:
                number += 1
            unique = f"{base}_{number}"
        buffer = VariableBuffer(unique, value, device)
        _REGISTRY[unique] = buffer
        return buffer


def lookup(name: str, where: str = "") -> VariableBuffer:
    """The live buffer named ``name``; an error naming ``where`` it was needed when none is."""
    buffer = _REGISTRY.get(name)
    if buffer is None:
        raise VariableError(f"variable '{name}'{' (used by ' + where + ')' if where else ''} does not exist: "
                            f"no live flowjit.Variable has that name")
    return buffer


def live_names() -> list[str]:
    return sorted(_REGISTRY.keys())


class VariableGuard:
    """The locks one program holds for each call: for writing the variables it assigns, for
    reading the others it reads, taken in name order (see the module docstring).

    ``with guard:`` holds them; ``guard.wrap(run)`` is ``run`` called inside ``with guard``."""

    __slots__ = ("order", "what", "timeout")

    def __init__(self, buffers: Mapping[str, VariableBuffer], written: Iterable[str], what: str,
                 timeout: float = DEFAULT_TIMEOUT_S):
        written = set(written)
        self.order = [(buffer.lock, name in written, buffer.name) for name, buffer in sorted(buffers.items())]
        self.what, self.timeout = what, timeout

    def __enter__(self) -> "VariableGuard":
        deadline = None
        for index, (lock, write, name) in enumerate(self.order):
            if lock.try_acquire(write, self):
                continue
            if deadline is None:                      # the first wait starts the clock
                deadline = time.monotonic() + self.timeout
            if not lock.acquire(write, deadline, self):
                for taken, taken_write, _ in reversed(self.order[:index]):
                    taken.release(taken_write)
                raise VariableLockTimeout(
                    f"{self.what} waited {self.timeout:g} s to {'write' if write else 'read'} variable '{name}', "
                    f"{lock.holders()}; nothing ran (a call holds the variables it uses for its whole run; "
                    f"jit(variable_timeout_s=...) sets the wait)")
        return self

    def __exit__(self, *exc) -> None:
        for lock, write, _ in reversed(self.order):
            lock.release(write)

    def wrap(self, run: Callable) -> Callable:
        """``run`` with the locks held for each call; with no variables, ``run`` itself."""
        if not self.order:
            return run

        def guarded(*arrays, **options):
            with self:
                return run(*arrays, **options)
        guarded.guard = self
        guarded.unguarded = run
        guarded.resident = getattr(run, "resident", False)    # (jit hands a resident program device arrays)
        return guarded


def locked(buffer: VariableBuffer, write: bool, what: str, timeout: float = DEFAULT_TIMEOUT_S) -> VariableGuard:
    """The guard of one variable, for an operation outside compiled programs (an eager
    assign, a copy of the value): ``with locked(buffer, write, what): ...``."""
    return VariableGuard({buffer.name: buffer}, [buffer.name] if write else [], what, timeout)


def read_values(buffers) -> dict[str, np.ndarray]:
    """name -> a copy of the value of each of ``buffers``, fetched from the task it lives on
    (one call per task) when it lives on a cluster task.  The caller holds the locks."""
    values, remote = {}, {}
    for buffer in buffers:
        if buffer.home is None:
            values[buffer.name] = buffer.value.copy()
        else:
            remote.setdefault(buffer.home.key, []).append(buffer)
    for group in remote.values():
        values.update(group[0].home.read(group))
    return values


def write_values(assignments) -> None:
    """Store each ``(buffer, array)`` of ``assignments`` (already checked to fit): in place
    here, or on the task each lives on.  The caller holds the locks.

    All or nothing: the values for tasks are first sent to each (one call per task) and kept
    aside there, and only when every task has them are they stored (another call per task,
    which cannot fail but by the task's death, which loses its variables anyway); then the
    local ones.  A failure before that changes no variable."""
    local, remote = [], {}
    for buffer, array in assignments:
        if buffer.home is None:
            local.append((buffer, array))
        else:
            remote.setdefault(buffer.home.key, []).append((buffer, array))
    staged = []
    try:
        for group in remote.values():
            staged.append((group, group[0][0].home.stage(group)))
    except BaseException:
        for group, token in staged:
            group[0][0].home.discard(token)
        raise
    for group, token in staged:
        group[0][0].home.commit(group, token)
    for buffer, array in local:
        np.copyto(buffer.value, array)


def read_value(buffer: VariableBuffer) -> np.ndarray:
    """A copy of one buffer's value (see ``read_values``)."""
    return read_values([buffer])[buffer.name]


def write_value(buffer: VariableBuffer, array) -> None:
    write_values([(buffer, array)])


def check_local(buffers: Mapping[str, VariableBuffer], what: str) -> None:
    """Refuse to run ``what`` in this process when one of its variables lives on a cluster task."""
    for name, buffer in sorted(buffers.items()):
        if buffer.home is not None:
            raise VariableError(f"{what} uses variable '{name}', which lives on {buffer.home.describe()}: a program "
                                f"that uses it runs on that cluster (jit(f, devices=cluster))")


def storage_of(variable) -> VariableBuffer | None:
    """The buffer behind a ``flowjit.Variable`` (None for any other object): for the runtime's
    own readers and writers of many variables at once, such as checkpoints."""
    buffer = getattr(variable, "_buffer", None)
    return buffer if isinstance(buffer, VariableBuffer) else None
