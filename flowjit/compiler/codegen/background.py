"""Compiling in the background: a compile worker process beside the program.

Two things go to the worker, both into the kernel cache, where the program then finds them:

- **Parallel twins** (tiered compilation).  numba compiles a ``prange`` kernel two to three
  times slower than its serial twin (the parfor lowering compiles the loop body a second
  time, as a gufunc): 0.4-0.9 s each.  Both twins compute the same values the same way --
  the writer renders one loop nest with ``range`` or ``prange`` on its outer loop (or, for a
  loop kernel, a ``prange`` over parts of it that calls the serial twin), and
  splits whole-domain reductions into parts by size alone -- so results do not depend on
  which one ran.  When a kernel's parallel twin is not cached for the argument types of its
  first call, ``TieredKernel`` runs the serial twin and hands the parallel one to the
  worker; when the worker is done, the twin loads from the cache and later calls run it.
- **Kernels ahead of the program** (``compile_ahead``).  A program's first call compiles its
  kernels one after another as it reaches them.  The driver knows most kernels' argument
  types before it runs (buffers it allocates are C-contiguous; the inputs are there), so the
  first call hands the worker those kernels, last first, while this process compiles from
  the first.  Where they meet, a kernel the worker has started is waited for (``settle``,
  from the kernel's numba cache, just before numba would compile it) and one it has not
  started is taken back.  A kernel whose arguments turn out to have other types simply
  compiles here.

Nothing depends on the worker.  A job it reports failed, a worker that dies, or one that
has jobs and says nothing for ``JOB_DEADLINE_S`` turns background compiling off for the
process, with one warning: everything still waiting compiles here, as without the worker.  ``wait()`` blocks,
with a deadline, until no job is pending (the bench and the tests call it before timing).
When the process exits, the worker still finishes the jobs it was given (the next process
finds them cached) and then exits.
"""

from __future__ import annotations

import atexit
import contextlib
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
from dataclasses import dataclass

from flowjit.compiler.codegen.writer import PARALLEL, SERIAL      # the two functions of a kernel module
from flowjit.errors import KernelCacheWarning

JOB_DEADLINE_S = 300.0          # a worker with jobs that says nothing for longer is stuck
POLL_S = 1.0                    # how often the reader looks at the deadline while nothing arrives
AHEAD_MIN = 3                   # kernels a first call must have left to compile to hand some ahead
AHEAD_MAX = 32                  # the most it hands ahead (the last ones; their messages fit a pipe's buffer)
SETTLE_S = 60.0                 # the longest this process waits for a kernel the worker is compiling
_HEADER = struct.Struct("<I")


def _frame(message) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


def _unframe(buffered: bytes) -> tuple[list, bytes]:
    """The whole messages at the start of ``buffered``, and what is left of it."""
    messages = []
    while len(buffered) >= _HEADER.size:
        end = _HEADER.size + _HEADER.unpack_from(buffered)[0]
        if len(buffered) < end:
            break
        messages.append(pickle.loads(buffered[_HEADER.size:end]))
        buffered = buffered[end:]
    return messages, buffered


def signature_of(signature) -> tuple:
    """Argument types, however numba passes them (a tuple, or a ``Signature``)."""
    return tuple(getattr(signature, "args", signature))


@dataclass
class Job:
    number: int
    target: tuple                   # (kernel key, function, argument types)
    done: object = None             # called with (job, error) on the reader thread when it ends
    started: float | None = None    # when the worker said it began


def _both(first, second):
    if first is None:
        return second

    def done(job: Job, error: str | None) -> None:
        first(job, error)
        second(job, error)
    return done


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
        from flowjit.compiler.codegen.native import Deferred
        with self.lock:
            parallel = self.compiled.parallel
            if self.function is None and isinstance(parallel, Deferred) and not parallel.ready():
                # A process running native entries (native.py): the serial twin runs while a
                # thread imports numba and finds the parallel one (cached, or from the worker).
                self.function = self.compiled.serial
                finder = threading.Thread(target=self._find_parallel_quietly, args=(arrays,), daemon=True,
                                          name=f"flowjit parallel twin of {self.compiled.name}")
                FINDERS.append(finder)
                finder.start()
                return self.function
        return self._find_parallel(arrays)

    def _find_parallel_quietly(self, arrays) -> None:
        """``_find_parallel`` on a thread of its own: a failure keeps the serial twin, with a warning."""
        try:
            self._find_parallel(arrays)
        except Exception as error:
            warnings.warn(f"flowjit: the parallel twin of kernel {self.compiled.name} could not be loaded "
                          f"({type(error).__name__}: {error}); its serial twin runs", KernelCacheWarning)

    def _find_parallel(self, arrays):
        """The parallel twin, when cached (else the worker is given it and the serial twin runs
        until it answers); the function later calls run."""
        from flowjit.compiler.codegen.numba_cache import load_cached
        with self.lock:
            if self.function is None or self.function is self.compiled.serial:
                parallel = self.compiled.parallel
                signature = tuple(parallel.typeof_pyval(array) for array in arrays)
                if not self.worker.enabled() or load_cached(parallel, signature):
                    self.function = parallel
                else:
                    self.function = self.compiled.serial
                    self.worker.submit(self.compiled, PARALLEL, signature, self._twin_compiled)
            return self.function

    def _twin_compiled(self, job: Job, error: str | None) -> None:
        """The worker's answer (on its reader thread, which never takes numba's compiler lock):
        from the next call on, the parallel twin runs -- its dispatcher loads it from the cache,
        or compiles it here when the worker did not (``error``: why)."""
        if error is not None:
            self.worker.give_up(f"the parallel twin of kernel {self.compiled.name} did not compile there ({error})")
        self.function = self.compiled.parallel


class CompileWorker:
    """The child process that compiles kernels into the kernel cache, and the thread that
    reads its answers."""

    def __init__(self, command: list[str] | None = None):
        self.command = command or [sys.executable, "-m", __name__]
        self.lock = threading.Condition(threading.RLock())     # (re-entered: _fail -> done -> give_up)
        self.process: subprocess.Popen | None = None
        self.pid = os.getpid()
        self.jobs: dict[int, Job] = {}             # pending: until the answer's callback has run
        self.targets: dict[tuple, Job] = {}        # pending jobs not answered yet, by target
        self.count = 0
        self.heard = 0.0                           # when the worker last said something, or got work while idle
        self.failed: str | None = None            # why background compiling is off in this process

    def enabled(self) -> bool:
        return self.failed is None

    # -- the parent's side ---------------------------------------------------------------------------
    def submit(self, compiled, function: str, signature: tuple, done=None) -> None:
        """Compile ``compiled``'s ``function`` for ``signature`` in the worker; ``done(job,
        error)`` when it has (or will not)."""
        with self.lock:
            target = (compiled.key, function, signature)
            if self.failed is not None:
                if done is not None:
                    done(Job(0, target), self.failed)
                return
            if target in self.targets:               # (another program's kernel of the same code)
                if done is not None:
                    self.targets[target].done = _both(self.targets[target].done, done)
                return
            self.count += 1
            if not self.jobs:
                self.heard = time.monotonic()
            job = self.jobs[self.count] = self.targets[target] = Job(self.count, target, done)
            try:
                self._ensure_started()
                self._send(("job", job.number, compiled.path, compiled.key, compiled.name, compiled.fma,
                            function, signature))
            except OSError as error:                   # could not start it, or it died
                self._fail(f"the compile worker could not be used ({error})")

    def compile_ahead(self, kernels: list[tuple]) -> int:
        """Hand the worker the serial kernels (``(compiled, argument types)``, in the order the
        program runs them) that are compiled neither here nor in the cache, last first, when
        there are at least ``AHEAD_MIN``; how many."""
        from flowjit.compiler.codegen.numba_cache import load_cached
        if not self.enabled():
            return 0
        todo, seen = [], set()
        for compiled, signature in kernels:
            if (compiled.key, signature) not in seen and compiled.path is not None:
                seen.add((compiled.key, signature))
                if not load_cached(compiled.serial, signature):
                    todo.append((compiled, signature))
        if len(todo) < AHEAD_MIN:
            return 0
        ahead = todo[1:][-AHEAD_MAX:]                        # this process starts on the first
        for compiled, signature in reversed(ahead):
            self.submit(compiled, SERIAL, signature)
        return len(ahead)

    def settle(self, key: str, function: str, signature) -> None:
        """Before this process compiles ``function`` of kernel ``key`` for ``signature``: wait
        for the worker if it is compiling that (then it loads from the cache), take the job
        back if it has not started."""
        target = (key, function, signature_of(signature))
        with self.lock:
            job = self.targets.get(target)
            if job is None or self.pid != os.getpid() or threading.current_thread().name == READER:
                return
            if job.started is not None:      # (numba's compiler lock is held: a short deadline)
                deadline = time.monotonic() + SETTLE_S
                while self.targets.get(target) is job and time.monotonic() < deadline:
                    self.lock.wait(min(POLL_S, max(0.0, deadline - time.monotonic())))
                if self.targets.get(target) is job:
                    del self.targets[target]     # compiled here instead; later loads do not wait again
                return
            del self.targets[target]
            try:
                self._send(("cancel", job.number))
            except OSError:
                pass
        if job.done is not None:
            job.done(job, None)                        # (this process compiles it now)
        with self.lock:
            self.jobs.pop(job.number, None)
            self.lock.notify_all()

    def _send(self, message) -> None:
        self.process.stdin.write(_frame(message))
        self.process.stdin.flush()

    def _ensure_started(self) -> None:
        if self.process is not None and self.pid == os.getpid() and self.process.poll() is None:
            return
        if self.process is not None and self.pid == os.getpid():
            raise OSError(f"it exited with status {self.process.returncode}")
        self.pid = os.getpid()                           # (a forked child starts its own)
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        environment = dict(os.environ)
        environment["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in [environment.get("PYTHONPATH")] if p])
        self.process = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, env=environment)
        threading.Thread(target=self._read, args=(self.process,), name=READER, daemon=True).start()

    def _read(self, process: subprocess.Popen) -> None:
        """Answers from the worker, until it exits; a job running past its deadline stops it."""
        descriptor, buffered = process.stdout.fileno(), b""
        while True:
            ready, _, _ = select.select([descriptor], [], [], POLL_S)
            if not ready:
                with self.lock:
                    if self.jobs and time.monotonic() - self.heard > JOB_DEADLINE_S:
                        self._fail(f"the compile worker had jobs and said nothing for {JOB_DEADLINE_S:.0f} s")
                        break
                continue
            data = os.read(descriptor, 1 << 16)
            if not data:
                with self.lock:
                    if self.jobs:
                        self._fail(f"the compile worker exited (status {process.poll()})")
                break
            messages, buffered = _unframe(buffered + data)
            for message in messages:
                self._answer(*message)
        with self.lock:
            self._drop_pending()

    def _answer(self, what: str, number: int, error: str | None = None) -> None:
        with self.lock:
            self.heard = time.monotonic()
            job = self.jobs.get(number)
            if job is None:
                return
            if what == "started":
                job.started = time.monotonic()
                return
            if self.targets.get(job.target) is job:
                del self.targets[job.target]
            self.lock.notify_all()                    # settle() may load it now
        if job.done is not None:
            job.done(job, error)                       # pending until done: wait() returns after it
        with self.lock:
            self.jobs.pop(number, None)
            self.lock.notify_all()

    def _fail(self, why: str) -> None:
        """Background compiling off for this process (one warning); the lock is held."""
        if self.failed is None:
            self.failed = why
            warnings.warn(f"flowjit: {why}; kernels compile in this process from now on",
                          KernelCacheWarning, stacklevel=2)
        self.stop()
        self._drop_pending()

    def give_up(self, why: str) -> None:
        with self.lock:
            self._fail(why)

    def _drop_pending(self) -> None:
        jobs, self.jobs, self.targets = self.jobs, {}, {}
        for job in jobs.values():
            if job.done is not None:
                job.done(job, self.failed or "the compile worker stopped")
        self.lock.notify_all()

    def wait(self, timeout: float) -> bool:
        """Block until no job is pending, at most ``timeout`` seconds; whether none is."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while self.jobs and self.pid == os.getpid():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.lock.wait(min(left, POLL_S))
            return True

    def stop(self) -> None:
        """End the worker at once (nothing it writes is ever half there, and the cache's lock is
        an ``flock`` that dies with it).  The lock is held."""
        process, self.process = self.process, None
        if process is None or self.pid != os.getpid():
            return
        process.kill()
        try:
            process.stdin.close()
            process.wait(timeout=1.0)
        except (OSError, subprocess.TimeoutExpired):
            pass


READER = "flowjit-compile-worker"
WORKER = CompileWorker()


FINDERS: list[threading.Thread] = []        # threads loading parallel twins of native kernels


def wait(timeout: float = 120.0) -> bool:
    """Block until every kernel handed to the compile worker has compiled (or failed and will
    compile here), and every parallel twin a thread is loading is loaded, at most ``timeout``
    seconds; whether all have."""
    deadline = time.monotonic() + timeout
    for finder in list(FINDERS):
        finder.join(max(0.0, deadline - time.monotonic()))
        if not finder.is_alive():
            with contextlib.suppress(ValueError):
                FINDERS.remove(finder)
    return not FINDERS and WORKER.wait(max(0.0, deadline - time.monotonic()))


@atexit.register
def _let_finders_finish() -> None:
    """A thread loading a parallel twin is inside numba's import or LLVM: give it a moment to
    finish before the interpreter (and LLVM's statics) go away under it."""
    for finder in list(FINDERS):
        finder.join(5.0)


@atexit.register
def _detach_at_exit() -> None:
    """The process ends: the worker finishes the parallel twins it started or was given (the
    next process finds them cached; kernels handed ahead for this run are taken back), sees
    its stdin close and exits; nothing waits for it here."""
    process = WORKER.process
    if process is not None and WORKER.pid == os.getpid():
        try:
            with WORKER.lock:
                for job in WORKER.targets.values():
                    if job.target[1] == SERIAL and job.started is None:
                        WORKER._send(("cancel", job.number))
            process.stdin.close()
        except OSError:
            pass


def _forget_in_child() -> None:
    """A forked child starts with no worker and no jobs of its own: its kernels waiting for the
    parent's worker compile in the child when next called, and it starts its own worker."""
    worker = WORKER
    jobs = list(worker.jobs.values())
    worker.lock = threading.Condition(threading.RLock())
    worker.jobs, worker.targets, worker.pid = {}, {}, os.getpid()
    if worker.process is not None:
        try:
            worker.process.stdin.close()        # the parent's worker sees EOF when the parent exits
        except OSError:
            pass
        worker.process = None
    for job in jobs:
        if job.done is not None:
            job.done(job, None)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


# -- the worker's side ---------------------------------------------------------------------------------
def _compile(path: str, key: str, name: str, fma: bool, function: str, signature: tuple) -> None:
    """Compile ``function`` of the entry at ``path`` for ``signature`` into the cache."""
    from flowjit.compiler.codegen.cache import kernel_cache
    cache = kernel_cache(os.path.dirname(os.path.dirname(path)))        # <root>/kernels/k_<key>.py
    compiled = cache.import_entry(name, key, path, fma)
    getattr(compiled, "parallel" if function == PARALLEL else "serial").compile(signature)


def main() -> None:
    """Take jobs from stdin in order, skipping the ones taken back, until stdin closes."""
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)                 # whatever the compiler prints stays out of the answers
    queue, cancelled, buffered, closed = [], set(), b"", False

    def send(message) -> None:
        try:
            answers.write(_frame(message))
            answers.flush()
        except BrokenPipeError:                    # the parent has exited: finish the jobs queued
            pass

    while queue or not closed:
        if not closed and select.select([0], [], [], 0 if queue else None)[0]:
            data = os.read(0, 1 << 16)
            closed = not data
            messages, buffered = _unframe(buffered + data)
            for kind, number, *arguments in messages:
                if kind == "cancel":
                    cancelled.add(number)
                else:
                    queue.append((number, arguments))
            continue                               # read everything there before the next job
        number, arguments = queue.pop(0)
        if number in cancelled:
            continue
        send(("started", number))
        signal.alarm(int(JOB_DEADLINE_S) + 1)      # a compile that never ends ends the worker
        try:
            _compile(*arguments)
            error = None
        except Exception as failure:               # reported; the parent compiles it instead
            error = f"{type(failure).__name__}: {failure}"
        signal.alarm(0)
        send(("done", number, error))


if __name__ == "__main__":
    main()
