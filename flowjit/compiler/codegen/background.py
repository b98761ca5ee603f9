"""Tiered compilation: a kernel's parallel twin compiles in another process while the
program already runs its serial twin.

numba compiles a ``prange`` kernel two to three times slower than its serial twin (the
parfor lowering compiles the loop body a second time, as a gufunc): 0.4-0.9 s each, most of
a training step's first call.  Both twins compute the same values the same way -- the writer
renders one loop nest with ``range`` or ``prange`` on its outer loop, and splits whole-domain
reductions into parts by size alone -- so a program's results do not depend on which one ran.

When the parallel twin of a kernel is not in the kernel cache for the argument types of its
first call, ``TieredKernel`` runs the serial twin (compiled here) and hands the parallel
twin, with those types, to the compile worker: one child process per process, started on
first need, that compiles into the kernel cache.  When the worker reports it done, the twin
loads from the cache (milliseconds) and every later call runs it.  A warm cache has the
twin on disk, and the first call runs it at once.  When the process exits, the worker
finishes the jobs it was given (the next process finds the twins cached) and then exits.

Nothing waits on the worker.  A job the worker reports failed, a worker that dies or a job
past ``JOB_DEADLINE_S`` turns background compiling off for the process, with one warning:
every kernel still waiting then compiles its parallel twin here on its next call, as
without the worker.  ``wait()`` blocks, with a deadline, until no job is pending (the bench
and the tests call it before timing).
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import warnings

from flowjit.errors import KernelCacheWarning

JOB_DEADLINE_S = 300.0          # a job the worker has not answered by then: the worker is stuck
POLL_S = 1.0                    # how often the reader looks at the deadline while nothing arrives
_HEADER = struct.Struct("<I")


def _send(stream, message) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _receive(stream):
    """The next message, or None at the end of the stream."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    return pickle.loads(data) if len(data) == size else None


class TieredKernel:
    """What the driver calls for a kernel that runs in parallel: the parallel twin once it is
    compiled (here, from the cache, or by the worker), the serial twin until then."""

    def __init__(self, compiled, worker: "CompileWorker"):
        self.compiled, self.worker = compiled, worker
        self.function = None            # what every call runs, once the first call decided
        self.lock = threading.Lock()

    def __call__(self, *arrays):
        function = self.function
        if function is None:
            function = self._first_call(arrays)
        return function(*arrays)

    def _first_call(self, arrays):
        from flowjit.compiler.codegen.numba_cache import load_cached
        with self.lock:
            if self.function is None:
                parallel = self.compiled.parallel
                signature = tuple(parallel.typeof_pyval(array) for array in arrays)
                if not self.worker.enabled() or load_cached(parallel, signature):
                    self.function = parallel
                else:
                    self.function = self.compiled.serial
                    self.worker.submit(self.compiled, signature, self._twin_compiled)
            return self.function

    def _twin_compiled(self, signature, error: str | None) -> None:
        """The worker's answer (on its reader thread): load the twin, or compile it here on the
        next call (``error``: why the worker did not compile it)."""
        from flowjit.compiler.codegen.numba_cache import load_cached
        if error is None and not load_cached(self.compiled.parallel, signature):
            error = "the worker's result was not in the kernel cache"
        if error is not None:
            self.worker.give_up(f"the parallel twin of kernel {self.compiled.name} did not compile there ({error})")
        self.function = self.compiled.parallel


class CompileWorker:
    """The child process that compiles parallel twins into the kernel cache, and the thread
    that reads its answers."""

    def __init__(self, command: list[str] | None = None):
        self.command = command or [sys.executable, "-m", __name__]
        self.lock = threading.Condition()
        self.process: subprocess.Popen | None = None
        self.pid = os.getpid()
        self.pending: dict[int, tuple] = {}        # job -> (started, signature, done callback)
        self.jobs = 0
        self.failed: str | None = None            # why background compiling is off in this process

    def enabled(self) -> bool:
        return self.failed is None

    # -- the parent's side ---------------------------------------------------------------------------
    def submit(self, compiled, signature: tuple, done) -> None:
        with self.lock:
            if self.failed is not None:
                done(signature, self.failed)
                return
            try:
                self._ensure_started()
                self.jobs += 1
                self.pending[self.jobs] = (time.monotonic(), signature, done)
                _send(self.process.stdin, (self.jobs, compiled.path, compiled.key, compiled.name,
                                           compiled.fma, signature))
            except OSError as error:                   # could not start it, or it died
                self.pending.pop(self.jobs, None)
                self._fail(f"the compile worker could not be used ({error})")
                done(signature, self.failed)

    def _ensure_started(self) -> None:
        if self.process is not None and self.pid == os.getpid() and self.process.poll() is None:
            return
        if self.process is not None and self.pid == os.getpid():
            raise OSError(f"it exited with status {self.process.returncode}")
        self.pid, self.pending = os.getpid(), {}       # (a forked child starts its own)
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        environment = dict(os.environ)
        environment["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in [environment.get("PYTHONPATH")] if p])
        self.process = subprocess.Popen(self.command, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=environment)
        threading.Thread(target=self._read, args=(self.process,), name="flowjit-compile-worker",
                         daemon=True).start()

    def _read(self, process: subprocess.Popen) -> None:
        """Answers from the worker, until it exits; a job past its deadline stops it."""
        descriptor, buffered = process.stdout.fileno(), b""
        while True:
            ready, _, _ = select.select([descriptor], [], [], POLL_S)
            if not ready:
                with self.lock:
                    oldest = min((started for started, _, _ in self.pending.values()), default=None)
                    if oldest is not None and time.monotonic() - oldest > JOB_DEADLINE_S:
                        self._fail(f"the compile worker answered no job for {JOB_DEADLINE_S:.0f} s")
                        break
                continue
            data = os.read(descriptor, 1 << 16)
            if not data:
                with self.lock:
                    if self.pending:
                        self._fail(f"the compile worker exited (status {process.poll()})")
                break
            buffered += data
            while len(buffered) >= _HEADER.size and len(buffered) >= _HEADER.size + _HEADER.unpack_from(buffered)[0]:
                end = _HEADER.size + _HEADER.unpack_from(buffered)[0]
                job, error = pickle.loads(buffered[_HEADER.size:end])
                buffered = buffered[end:]
                with self.lock:
                    entry = self.pending.get(job)
                if entry is not None:
                    entry[2](entry[1], error)          # pending until done: wait() returns after it
                with self.lock:
                    self.pending.pop(job, None)
                    self.lock.notify_all()
        with self.lock:
            self._drop_pending()

    def _fail(self, why: str) -> None:
        """Background compiling off for this process (one warning); the lock is held."""
        if self.failed is None:
            self.failed = why
            warnings.warn(f"flowjit: {why}; parallel kernels compile in this process from now on",
                          KernelCacheWarning, stacklevel=2)
        self.stop()

    def give_up(self, why: str) -> None:
        with self.lock:
            self._fail(why)

    def _drop_pending(self) -> None:
        pending, self.pending = self.pending, {}
        for _, signature, done in pending.values():
            done(signature, self.failed or "the compile worker stopped")
        self.lock.notify_all()

    def wait(self, timeout: float) -> bool:
        """Block until no job is pending, at most ``timeout`` seconds; whether none is."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while self.pending and self.pid == os.getpid():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.lock.wait(min(left, POLL_S))
            return True

    def stop(self) -> None:
        """End the worker: killed at once when it has a job (nothing it writes is ever half
        there, and the cache's lock is an ``flock`` that dies with it), else its stdin closes
        and it gets a second to exit.  The lock is held."""
        process, self.process = self.process, None
        if process is None or self.pid != os.getpid():
            return
        try:
            if self.pending:
                process.kill()
            process.stdin.close()
            process.wait(timeout=1.0)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()


WORKER = CompileWorker()


def wait(timeout: float = 120.0) -> bool:
    """Block until every parallel kernel handed to the compile worker has compiled (or failed
    and will compile here), at most ``timeout`` seconds; whether all have."""
    return WORKER.wait(timeout)


def _detach_at_exit() -> None:
    """The process ends: the worker finishes the jobs it has (so the cache has the twins for
    the next process), sees its stdin close and exits; nothing waits for it here."""
    process = WORKER.process
    if process is not None and WORKER.pid == os.getpid():
        try:
            process.stdin.close()
        except OSError:
            pass


import atexit  # noqa: E402

atexit.register(_detach_at_exit)


# -- the worker's side ---------------------------------------------------------------------------------
def _compile(path: str, key: str, name: str, fma: bool, signature: tuple) -> None:
    """Compile the parallel twin of the entry at ``path`` for ``signature`` into the cache."""
    from flowjit.compiler.codegen.cache import kernel_cache
    cache = kernel_cache(os.path.dirname(os.path.dirname(path)))        # <root>/kernels/k_<key>.py
    compiled = cache.import_entry(name, key, path, fma)
    compiled.parallel.compile(signature)


def main() -> None:
    requests, answers = sys.stdin.buffer, os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)                 # whatever the compiler prints stays out of the answers
    while True:
        job = _receive(requests)
        if job is None:
            return
        number, *arguments = job
        signal.alarm(int(JOB_DEADLINE_S) + 1)      # a compile that never ends ends the worker
        try:
            _compile(*arguments)
            error = None
        except Exception as failure:               # reported; the parent compiles it instead
            error = f"{type(failure).__name__}: {failure}"
        signal.alarm(0)
        try:
            _send(answers, (number, error))
        except BrokenPipeError:                    # the parent has exited: finish the jobs queued
            pass


if __name__ == "__main__":
    main()
