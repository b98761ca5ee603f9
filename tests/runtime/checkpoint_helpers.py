"""Test doubles and a crash harness for the checkpoint tests.

Run as a script (``python checkpoint_helpers.py DIR``) this is a zygote: it imports flowjit
once, then for each command on stdin forks a writer process that saves checkpoints into DIR,
prints the writer's pid, reads one more line (``reap``), waits for the writer to die and prints
``exit <status>``. Forking from a warm
process makes each of the dozens of kills cost milliseconds instead of an interpreter start.

    loop      the writer restores DIR's latest checkpoint (if any) and saves the steps after it,
              forever (at most WRITER_SECONDS), until the test SIGKILLs it
    crash K   the writer restores DIR's latest and saves the next step, SIGKILLing itself just
              before its K-th file-system call (open, write, fsync, rename, unlink, mkdir); it
              exits 0 if the save needed fewer than K calls
    quit      the zygote exits
"""

from __future__ import annotations

import os
import signal
import sys
import time

import numpy as np

KEEP = 3
WRITER_SECONDS = 20.0          # a writer nobody kills stops by itself


class FakeVariable:
    """The variable protocol Checkpoint relies on, and a record of every assign."""

    def __init__(self, name: str, value):
        self.name = name
        self._value = np.array(value)
        self.assigned = []

    @property
    def shape(self):
        return self._value.shape

    @property
    def dtype(self):
        return self._value.dtype

    def numpy(self):
        return self._value.copy()

    def assign(self, value):
        value = np.asarray(value)
        assert value.shape == self._value.shape and value.dtype == self._value.dtype, (self.name, value)
        self._value = value.copy()
        self.assigned.append(value.copy())


def values(step: int) -> dict[str, np.ndarray]:
    """Distinct, checkable values of several dtypes for each step (one big enough that writing
    it takes a while, so that kills land inside writes)."""
    return {
        "dense/w": (np.arange(15, dtype=np.float32).reshape(3, 5) * 0.5 + step).astype(np.float32),
        "dense/b": np.arange(7, dtype=np.float64) - step * 1.25,
        "count": np.array(step, dtype=np.int64),
        "mask": np.array([(step >> bit) & 1 for bit in range(6)], dtype=np.bool_),
        "embedding": (np.arange(64 * 1024, dtype=np.float32) + np.float32(step)).reshape(256, 256),
    }


def _writer(directory: str, crash_at: int | None) -> None:
    from flowjit import files
    from flowjit.runtime.checkpoint import Checkpoint
    files.WRITE_CHUNK = 64 * 1024       # the big tensor takes several writes: a kill between
    arrays = values(0)                             # them leaves a partly written temporary
    checkpoint = Checkpoint(arrays, keep=KEEP)
    restored = checkpoint.restore_latest(directory)
    step = restored.step + 1 if restored is not None else 0
    if crash_at is not None:
        _die_at_call(crash_at)
    deadline = time.monotonic() + WRITER_SECONDS
    while time.monotonic() < deadline:
        arrays.update(values(step))
        checkpoint.save(directory, step)
        if crash_at is not None:
            return
        step += 1


def _die_at_call(count: int) -> None:
    """SIGKILL this process just before its ``count``-th file-system call."""
    calls = [0]

    def counted(function):
        def call(*args, **kwargs):
            calls[0] += 1
            if calls[0] == count:
                os.kill(os.getpid(), signal.SIGKILL)
            return function(*args, **kwargs)
        return call
    for name in ("open", "write", "fsync", "replace", "unlink", "mkdir"):
        setattr(os, name, counted(getattr(os, name)))


def zygote(directory: str) -> None:
    for line in sys.stdin:
        command = line.split()
        if not command or command[0] == "quit":
            return
        crash_at = int(command[1]) if command[0] == "crash" else None
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            status = 0
            try:
                _writer(directory, crash_at)
            except BaseException as error:             # report it: the test fails on a nonzero exit
                print(f"writer failed: {error!r}", file=sys.stderr, flush=True)
                status = 1
            os._exit(status)
        print(pid, flush=True)
        sys.stdin.readline()           # "reap": until then the pid stays the writer's (a zombie at worst),
        _, status = os.waitpid(pid, 0)  # so the test's kill can never reach a process that reused it
        print(f"exit {status}", flush=True)


if __name__ == "__main__":
    # Warm: every writer forks with what it uses imported (``import flowjit`` alone leaves
    # checkpoints to their first use, which each writer would then pay inside its kill window).
    import flowjit.runtime.checkpoint  # noqa: F401
    zygote(sys.argv[1])
