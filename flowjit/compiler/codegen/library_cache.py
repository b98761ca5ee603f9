"""The kernel library's routines in the disk cache: compiled once, not once a process.

A process that compiles a kernel compiles every library routine the kernel calls (numba
types and lowers each once a process, and LLVM inlines it into each kernel that calls it).
For 45 programs of the test corpus in a fresh process that was 11.6 s of 31.9 s; with the
routines loaded from here, 25.8 s.  Kernels loaded from the kernel cache need no routine at
all: this is for processes that compile.

With a kernel cache directory, each routine numba compiles is saved in
``<cache>/library/<key>/``, ``key`` a hash of the kernel cache's toolchain key: numba,
llvmlite, the CPU, the library's source and the kernels' flags.  numba's own index tells
neither the flags a routine was compiled with nor a change to another module apart (a
routine's ``INLINE`` is defined in ``mathlib.py``; complex log inlines ``_two_product`` from
``mathlib_explog.py``), so under a key that holds them a routine compiled otherwise is never
found; closures are keyed by what their cells name (numba_cache.closure_key).  Only the
routines kernels call are cached, each with the helpers it calls linked in; the library's
private helpers have no cache of their own (numba's, beside their source, would outlive a
change to another file they call into).  What numba caches is the routine's machine code with its
LLVM bitcode, which a kernel inlines as it inlines a routine compiled in the process.

Files are written as the kernel cache writes its own (numba_cache.py: each file synced before
its rename), under this directory's lock, since two processes adding to one index at once
could leave it naming the other's data file.  A file that cannot be loaded is removed, with
one warning, and the routine compiled; a save that fails leaves it compiled in memory.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import warnings

from flowjit.errors import KernelCacheWarning

SUBDIRECTORY = "library"


def directory_for(root: str) -> str:
    """Where the routines compiled by this toolchain are kept under the cache root ``root``."""
    from flowjit.compiler.codegen.cache import toolchain_key
    key = hashlib.sha256(toolchain_key().encode()).hexdigest()[:16]
    return os.path.join(root, SUBDIRECTORY, key)


def enable(dispatchers, root: str | None) -> int:
    """Give each numba dispatcher of ``dispatchers`` (library routines) a cache in ``root``'s
    library directory; how many got one (none without a usable directory, or with a numba
    whose cache flowjit cannot take over: they compile once a process)."""
    from flowjit.compiler.codegen.numba_cache import function_cache_class_at
    if root is None:
        return 0
    directory = directory_for(root)
    with contextlib.suppress(OSError):
        os.makedirs(directory, exist_ok=True)
    if not os.path.isdir(directory):
        return 0
    cache_class = function_cache_class_at(directory)
    if cache_class is None:
        return 0
    owner = _Owner(directory, os.access(directory, os.W_OK))
    enabled = 0
    for dispatcher in dispatchers:
        try:
            dispatcher._cache = cache_class(dispatcher.py_func, owner)
        except Exception:   # (numba cannot cache it, or a closure cell cannot be keyed: it compiles in memory)
            continue
        enabled += 1
    return enabled


class _Owner:
    """What a routine's numba cache calls back into (numba_cache's ``KernelFunctionCache``)."""

    def __init__(self, directory: str, writable: bool):
        self.directory, self.writable = directory, writable
        self.warned = False

    def before_load(self, numba_cache, sig) -> None:
        pass

    def unreadable(self, numba_cache, error: Exception) -> None:
        self._warn(f"numba cannot load {numba_cache.filename_base} ({type(error).__name__}: {error})")
        self._discard(numba_cache)

    def save(self, numba_cache, write, compile_result) -> None:
        from flowjit.compiler.codegen.numba_cache import directory_lock
        if not self.writable:
            return
        with directory_lock(self.directory) as locked:
            if not locked:
                return
            try:
                write()
            except OSError as error:
                self._warn(f"cannot write {numba_cache.filename_base} ({error})")
            except Exception as error:     # an unreadable index read back before adding to it
                self._warn(f"numba cannot update the index of {numba_cache.filename_base} "
                           f"({type(error).__name__}: {error})")
                self._discard(numba_cache, locked=True)

    def _discard(self, numba_cache, locked: bool = False) -> None:
        """Remove a routine's files (its index and data files), under the lock."""
        from flowjit.compiler.codegen.numba_cache import directory_lock
        if not self.writable:
            return
        with contextlib.ExitStack() as stack:
            if not locked and not stack.enter_context(directory_lock(self.directory)):
                return
            for file in numba_cache.files():
                with contextlib.suppress(OSError):
                    os.unlink(file)

    def _warn(self, problem: str) -> None:
        if not self.warned:
            self.warned = True
            warnings.warn(f"flowjit: the kernel library's cache in {self.directory}: {problem}; "
                          f"the routine compiles in memory", KernelCacheWarning, stacklevel=2)
