"""How a kernel uses numba's on-disk cache: where numba writes, how it writes, and what
happens when what it finds there cannot be read.

numba keeps a jitted function's machine code in an index file (``<base>.nbi``: a
pickled map from signature to data file) and one data file per overload
(``<base>.<n>.nbc``: a pickled compile result).  It writes each to a temporary name and
renames it, but does not flush it to the disk first, reads the index again before adding
an overload (two processes adding overloads at once can leave the index naming another
process's data file), picks its directory from ``NUMBA_CACHE_DIR`` and a chain of
fallbacks, and lets an unreadable file's ``UnpicklingError`` reach the caller on every
call.  A kernel's dispatcher gets a cache that changes exactly those points:

- its files live beside the kernel's source, in ``<kernels>/__pycache__``, whatever
  ``NUMBA_CACHE_DIR`` says, so flowjit's manifest lists them, ``flowjit cache clear``
  removes them and one probe of the directory decides what may be written;
- each file is fsynced before it is renamed over the old one (and the directory after);
- an overload is saved through the kernel cache's ``save``, which holds the cache
  directory's lock (``directory_lock``) while numba reads its index back, adds to it and
  writes, and while the manifest is rewritten;
- a file that cannot be loaded is reported to ``unreadable`` (which discards the entry
  with one warning) and the overload is compiled instead; a save that fails is reported to
  ``save`` and never raised: the compiled kernel is already in memory;
- it loads machine code without first refreshing the target context (below), and without
  rebuilding the environments of the library routines inlined into it (``reduce``).

Everything here relies on numba's private pieces; without them (another numba) the
dispatcher keeps numba's own cache and the manifest follows its ``cache_path``.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import inspect
import os
import pickle
import sys
import threading

import flowjit.files as files

LOCK_TIMEOUT_S = 30.0                # a writer holds the lock for one save; compiling is outside it
LOCK_NAME = ".lock"


@contextlib.contextmanager
def directory_lock(directory: str, timeout: float = LOCK_TIMEOUT_S):
    """Hold the cache directory's lock (``<directory>/.lock``) across processes; yields whether
    it is held (``flowjit.files.directory_lock``)."""
    with files.directory_lock(os.path.join(directory, LOCK_NAME), timeout, poll=0.002) as held:
        yield held


def _kernel_function_cache():
    try:
        from numba.core.caching import (CompileResultCacheImpl, FunctionCache, IndexDataCacheFile,
                                        InTreeCacheLocator)
        from numba.core.runtime import rtsys
    except ImportError:
        return None
    private = [(FunctionCache, "_load_overload"), (FunctionCache, "_save_overload"),
               (IndexDataCacheFile, "_open_for_write"), (CompileResultCacheImpl, "get_filename_base")]
    if not all(hasattr(owner, name) for owner, name in private):
        return None

    class SyncedIndexDataCacheFile(IndexDataCacheFile):
        @contextlib.contextmanager
        def _open_for_write(self, filepath):
            """numba's write to a temporary name and rename, with the data on disk before the rename."""
            with files.atomic_writer(filepath) as stream:
                yield stream

    KernelCacheImpl = _impl_class(CompileResultCacheImpl, InTreeCacheLocator)

    class KernelFunctionCache(FunctionCache):
        """A kernel dispatcher's cache; ``owner`` is the kernel cache that decides what an
        unreadable file or a failed save means (``unreadable(self, error)``, ``save(self,
        write, compile_result)``)
        and is told before each load (``before_load(self, sig)``)."""

        _impl_class = KernelCacheImpl

        def __init__(self, py_func, owner):
            super().__init__(py_func)
            self._cache_file.__class__ = SyncedIndexDataCacheFile
            self.owner, self.function_name = owner, py_func.__name__

        @property
        def filename_base(self) -> str:
            return self._impl.filename_base

        def files(self) -> list[str]:
            """This function's index and data files (not writers' temporaries)."""
            pattern = os.path.join(self.cache_path, glob.escape(self.filename_base) + ".*")
            return [path for path in glob.glob(pattern) if not files.is_temporary(os.path.basename(path))]

        def load_overload(self, sig, target_context):
            """numba's ``load_overload`` refreshes the whole target context before it looks on
            disk: it imports and installs every typing and lowering registry (scipy included,
            for the BLAS probe), about 0.3 s of a fresh process's first call and all of it for
            compiling, which a cache hit does not do.  Running cached code needs the symbols
            numba installs when the context is built and the NRT allocator (scratch rows),
            which ``rtsys.initialize`` provides; a cache miss compiles through numba's
            pipeline, which refreshes the context itself."""
            rtsys.initialize(target_context)
            self.owner.before_load(self, sig)         # the compile worker may be compiling it
            try:
                return self._load_overload(sig, target_context)
            except Exception as error:          # garbage, truncated, another pickle: compile instead
                self.owner.unreadable(self, error)
                return None

        def save_overload(self, sig, data):
            self.owner.save(self, lambda: self._save_overload(sig, data), data)

    return KernelFunctionCache


def _impl_class(base, locator):
    """numba's cache implementation for a kernel (``base``: numba's ``CompileResultCacheImpl``;
    ``locator``: its ``InTreeCacheLocator``): where its files are and what it saves."""

    class KernelCacheImpl(base):
        """Files beside the kernel's source, in ``__pycache__``: numba's in-tree locator,
        chosen without consulting ``NUMBA_CACHE_DIR`` or probing that it is writable (a
        read-only entry still loads; saving is decided by the kernel cache)."""

        directory = None          # (another directory than beside the source: library_cache.py)

        def __init__(self, py_func):
            self._lineno = py_func.__code__.co_firstlineno
            source = inspect.getfile(py_func)
            self._locator = locator(py_func, source)
            if self.directory is not None:
                self._locator._cache_path = self.directory
            module = os.path.splitext(os.path.basename(source))[0]
            self._filename_base = self.get_filename_base(f"{module}.{py_func.__qualname__}",
                                                         getattr(sys, "abiflags", ""))

        def reduce(self, cres):
            """numba's, less the environments of the library routines LLVM inlined into the
            kernel.  numba saves every environment the machine code names, and rebuilding one
            imports its module: a warm process would import the kernel library (50 ms) for
            globals that routines never read (they run in nopython mode and raise nothing:
            error_model="numpy", no bounds checks)."""
            from flowjit.compiler.codegen.library import MODULES
            *payload, environments = super().reduce(cres)
            return (*payload, tuple(environment for environment in environments
                                    if environment.globals.get("__name__") not in MODULES))

    return KernelCacheImpl


_CLASS: list = []
_CLASS_LOCK = threading.Lock()


def function_cache_class():
    """The cache class kernel dispatchers get (None with another numba: numba's own cache);
    made at first use, which imports numba, and registers the typing rule below (once, whichever
    thread is first)."""
    with _CLASS_LOCK:
        if not _CLASS:
            _CLASS.append(_kernel_function_cache())
            _type_plain_arrays_without_numpy_ma()
        return _CLASS[0]


def function_cache_class_at(directory: str):
    """``function_cache_class()`` with its files in ``directory`` rather than beside each
    function's source (None with another numba), and closures keyed by what their cells name
    (``closure_key``): numba keys a closure by pickling its cells, and a numba function pickles
    with a fresh uuid each process, so a closure over one never hit and added a file a process."""
    base = function_cache_class()
    if base is None:
        return None

    class DirectoryFunctionCache(base):
        _impl_class = type("DirectoryCacheImpl", (base._impl_class,), {"directory": directory})

        def __init__(self, py_func, owner):
            # (raises where a cell cannot be keyed: the function is not cached)
            self._digests = tuple(hashlib.sha256(data).hexdigest() for data in (
                py_func.__code__.co_code, pickle.dumps(closure_key(py_func))))
            super().__init__(py_func, owner)

        def _index_key(self, sig, codegen):
            return sig, codegen.magic_tuple(), self._digests

    return DirectoryFunctionCache


def closure_key(function) -> tuple:
    """What ``function``'s closure holds, each numba function by its module and qualified name
    (and what its own closure holds), the rest as itself; raises where that does not pickle."""
    from numba.core.dispatcher import Dispatcher

    def described(value):
        if isinstance(value, Dispatcher):
            return ("numba function", value.py_func.__module__, value.py_func.__qualname__,
                    sorted(map(repr, value.targetoptions.items())), closure_key(value.py_func))
        if isinstance(value, tuple):
            return tuple(map(described, value))
        pickle.dumps(value)
        return value
    return tuple(described(cell.cell_contents) for cell in function.__closure__ or ())


def load_cached(dispatcher, signature: tuple) -> bool:
    """Give ``dispatcher`` its overload for ``signature`` (argument types) from memory or its
    disk cache, compiling nothing; whether it has it now.  (numba's ``Dispatcher.compile``
    up to the point where it would compile.)"""
    from numba.core.compiler_lock import global_compiler_lock
    with global_compiler_lock:
        if tuple(signature) in dispatcher.overloads:
            return True
        cached = dispatcher._cache.load_overload(signature, dispatcher.targetctx)
        if cached is None:
            return False
        dispatcher._cache_hits[signature] += 1
        dispatcher.targetctx.insert_user_function(cached.entry_point, cached.fndesc, [cached.library])
        dispatcher.add_overload(cached)
        return True


def _type_plain_arrays_without_numpy_ma() -> None:
    """numba types an ndarray argument the first time a dispatcher sees its (dtype, rank,
    layout) by asking, first of all, whether it is a ``numpy.ma.MaskedArray``; that attribute
    imports ``numpy.ma``, 15-35 ms of a warm process's first call for a module no kernel uses.
    An array whose type is exactly ``ndarray`` is typed here the way numba types it, without
    the question; any other (a subclass, a MaskedArray) still goes to numba's own rule."""
    try:
        import numpy as np
        from numba.core import errors, types
        from numba.core.typing.typeof import _typeof_ndarray, typeof_impl
        from numba.np.numpy_support import from_dtype, map_layout
    except ImportError:                  # (another numba: its own rule stays)
        return

    @typeof_impl.register(np.ndarray)
    def typeof_ndarray(val, c):
        if type(val) is not np.ndarray:
            return _typeof_ndarray(val, c)
        try:
            dtype = from_dtype(val.dtype)
        except errors.NumbaNotImplementedError:
            raise errors.NumbaValueError(f"Unsupported array dtype: {val.dtype}") from None
        return types.Array(dtype, val.ndim, map_layout(val), readonly=not val.flags.writeable)
