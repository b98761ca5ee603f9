"""The kernel cache: in memory by source, on disk across processes.

A kernel module is keyed by a hash of its source without comments (its functions are always
``kernel`` and ``kernel_parallel``, so the same loop generated for two programs or two sizes
is compiled once) plus the numba and llvmlite versions, the CPU's name and features, and
the source of the kernel library the kernels inline.  On disk it is an ordinary Python file whose
functions use numba's disk cache (through ``numba_cache``), so numba keeps the object code
beside it in ``__pycache__``; a manifest with the sha256 of every file of the entry lets a
later process detect a corrupted or truncated entry, warn once, and rebuild it.  Every file
is written to a temporary name, fsynced and renamed, so a reader never sees half a file;
writes and the manifest check hold the directory's lock, so two processes filling one cache
both succeed and a process killed mid-write leaves an entry the next one uses or repairs.

The cache never takes a program down: a directory that cannot be used or written, or an
entry that cannot be read, gives one ``KernelCacheWarning`` and the kernel compiles in
memory (or again, and is rewritten when the directory is writable).
"""

from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import importlib.util
import json
import linecache
import os
import re
import sys
import tempfile
import threading
import time
import warnings

import llvmlite
import llvmlite.binding as llvm

from flowjit.compiler.codegen import library, library_cache, native
from flowjit.compiler.codegen.compiled import KERNEL_FLAGS, SERIAL_FLAGS, CompiledKernel, canonical
from flowjit.compiler.codegen.writer import PARALLEL, SERIAL, KernelSource
from flowjit.compiler.codegen.numba_cache import LOCK_NAME, LOCK_TIMEOUT_S, directory_lock, function_cache_class
from flowjit.files import is_temporary, write_atomically
from flowjit.config import native_kernels
from flowjit.counters import STATS
from flowjit.errors import KernelCacheWarning, user_stacklevel

def toolchain_key() -> str:
    """What besides a kernel's own text decides its machine code: the toolchain, the CPU,
    the source of the kernel library (``fj``) that kernels inline, and numba's flags; and the
    format of native entries, so that entries written in another format (or a cache from
    before them) are compiled again once, with entries."""
    digest = hashlib.sha256()
    for path in library.source_files():
        with open(path, "rb") as stream:
            digest.update(stream.read())
    sources = digest.hexdigest()[:16]
    features = llvm.get_host_cpu_features().flatten()
    return (f"numba={numba_version()};llvmlite={llvmlite.__version__};cpu={llvm.get_host_cpu_name()};"
            f"{features};library={sources};flags={sorted(SERIAL_FLAGS.items())};native={native.FORMAT}")


def numba_version() -> str:
    """numba's version, read from its ``_version.py`` without importing numba (0.25 s)."""
    spec = importlib.util.find_spec("numba")
    try:
        with open(os.path.join(spec.submodule_search_locations[0], "_version.py"), encoding="utf-8") as stream:
            return re.search(r'"version": "([^"]+)"', stream.read()).group(1)
    except (OSError, AttributeError, TypeError, IndexError):
        import numba
        return numba.__version__


def _sha256(path: str) -> str:
    with open(path, "rb") as stream:
        return hashlib.sha256(stream.read()).hexdigest()


_CANNOT_WRITE = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT}
_WARNED: set = set()           # (what, directory): warnings about a directory, once per process
STALE_TEMPORARY_S = 600        # a temporary file this old belongs to a writer that was killed


def kernel_dispatchers(namespace: dict, fma: bool = True, cache: bool = False) -> tuple:
    """The numba dispatchers of a kernel module's two functions (``namespace``: the module's
    globals), serial and parallel, as the driver calls them.  ``fma``: 'contract' lets LLVM
    fuse a*b+c into one FMA (one rounding), nothing else of fastmath, and binds the module's ``fj``
    to the library's flavour of that setting (library.py).  The module's ``kernel``
    becomes the serial dispatcher: a parallel twin that runs the serial kernel on parts
    (writer.serial_in_parts) calls it."""
    from numba import njit
    fastmath = {"contract"} if fma else False
    namespace["fj"] = library.flavour(fma)       # (the header imports the default, contracting one)
    serial = njit(cache=cache, fastmath=fastmath, **SERIAL_FLAGS)(namespace[SERIAL])
    namespace[SERIAL] = serial
    parallel = njit(parallel=True, cache=cache, fastmath=fastmath, **KERNEL_FLAGS)(namespace[PARALLEL])
    return serial, parallel


class KernelCache:
    """Compiled kernels by key; ``directory=None`` keeps them in memory only.

    A directory that cannot be used (not a directory, a parent that cannot be made, not
    listable) gives one warning and the cache keeps kernels in memory; one that can be
    read but not written, or stops being writable, gives one warning, and the entries
    already there load while new kernels compile in memory.  An entry that cannot be read
    is discarded with one warning and compiled again.  Nothing here raises into a program.
    """

    def __init__(self, directory: str | None):
        self.root = directory
        self.directory = os.path.join(directory, "kernels") if directory else None
        self.memory: dict[str, CompiledKernel] = {}
        self.listed: dict[str, int] = {}          # files an entry's manifest lists, all checked at its load
        self.native_listed: dict[str, bool] = {}  # whether it lists native entries (native.py)
        self.lock = threading.Lock()
        self.warned: set[str] = set()
        self.toolchain = toolchain_key()
        self.writable = False
        if self.directory:
            self._open_directory()

    def _open_directory(self) -> None:
        try:
            os.makedirs(self.directory, exist_ok=True)
            os.listdir(self.directory)
        except OSError as error:
            self._warn_directory("unusable", f"cannot be used ({error}): kernels compile in memory in this process")
            self.directory = None
            return
        try:
            handle, probe = tempfile.mkstemp(dir=self.directory, prefix=".tmp-probe-")
            os.close(handle)
            os.unlink(probe)
        except OSError as error:
            self._stop_writing(error)
            return
        self.writable = True

    def _disk_failed(self, stem: str, error: OSError, action: str) -> None:
        """A read or write of an entry failed: a directory that refuses writes (or has no
        room) stops being written for the rest of the process; anything else (a file removed
        by another process at that moment) concerns this entry only."""
        if error.errno in _CANNOT_WRITE:
            self._stop_writing(error)
        elif stem not in self.warned:
            self.warned.add(stem)
            warnings.warn(f"flowjit: kernel cache entry {stem} in {self.directory} could not be used ({error}); "
                          f"{action}", KernelCacheWarning, stacklevel=user_stacklevel())

    def _stop_writing(self, error: OSError) -> None:
        self.writable = False
        self._warn_directory("read-only", f"is not writable ({error}): the kernels cached there load from it, "
                                          "new ones compile in memory in this process")

    def _warn_directory(self, what: str, text: str) -> None:
        from flowjit.config import cache_directory_origin
        if (what, self.root) in _WARNED:
            return
        _WARNED.add((what, self.root))
        warnings.warn(f"flowjit: the kernel cache directory {cache_directory_origin(self.root)} {text}. Set "
                      "FLOWJIT_CACHE_DIR to a writable directory, or to 'none' to keep kernels in memory only.",
                      KernelCacheWarning, stacklevel=user_stacklevel())

    def _warn_entry(self, stem: str, problem: str, action: str) -> None:
        if stem in self.warned:
            return
        self.warned.add(stem)
        warnings.warn(f"flowjit: kernel cache entry {stem} in {self.directory} is corrupted: {problem}; {action}",
                      KernelCacheWarning, stacklevel=user_stacklevel())

    def key_of(self, kernel: KernelSource, fma: bool = True) -> str:
        text = canonical(kernel.source)          # the header included
        return hashlib.sha256((text + self.toolchain + f";fma={fma}").encode()).hexdigest()[:24]

    def get(self, kernel: KernelSource, fma: bool = True) -> CompiledKernel:
        key = self.key_of(kernel, fma)
        with self.lock:
            compiled = self.memory.get(key)
            if compiled is None:
                compiled = self._load(kernel, key, fma)
                self.memory[key] = compiled
        return compiled

    # -- loading ---------------------------------------------------------------------------------
    def _load(self, kernel: KernelSource, key: str, fma: bool) -> CompiledKernel:
        text = kernel.source
        if self.directory is None:
            return self._in_memory(kernel.name, key, text, fma)
        stem = f"k_{key}"
        path = os.path.join(self.directory, stem + ".py")
        try:
            if not self._check_entry(stem, path, text):
                return self._in_memory(kernel.name, key, text, fma)
            if not os.path.exists(path):
                if not self.writable:
                    return self._in_memory(kernel.name, key, text, fma)
                write_atomically(path, text)
            compiled = (self.native_listed.pop(stem, False) and self._native(kernel.name, key, path, fma)
                        or self.import_entry(kernel.name, key, path, fma))
            compiled.recorded = self.listed.pop(stem, 0)     # checked above: no need to list them again
            return compiled
        except OSError as error:                  # the directory changed under us: read-only, removed
            self._disk_failed(stem, error, "compiling the kernel in memory")
            return self._in_memory(kernel.name, key, kernel.source, fma)

    def import_entry(self, name: str, key: str, path: str, fma: bool) -> CompiledKernel:
        """The kernel module of an entry on disk (the same code may have been written first for
        another program), imported, its functions wrapped in dispatchers with the entry's cache."""
        with open(path, encoding="utf-8") as stream:
            text = stream.read()
        module_name = f"flowjit_kernels.k_{key}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        return self._wrap(name, key, text, vars(module), path=path, fma=fma)

    def _native(self, name: str, key: str, path: str, fma: bool) -> CompiledKernel | None:
        """An entry on disk in a process that has not imported numba: its serial function runs
        its native entries (native.py); numba's dispatchers are made when first needed (the
        parallel twin, arguments no entry takes)."""
        mode = native_kernels()
        if mode == "off" or mode == "auto" and "numba" in sys.modules:
            return None
        with open(path, encoding="utf-8") as stream:
            text = stream.read()
        made: list[CompiledKernel] = []
        lock = threading.Lock()

        def dispatchers() -> CompiledKernel:
            with lock:
                if not made:
                    made.append(self.import_entry(name, key, path, fma))
                    STATS.native_kernels -= 1          # (counted by its dispatchers from now on)
                return made[0]
        STATS.native_kernels += 1
        stem = os.path.splitext(os.path.basename(path))[0]
        serial = native.NativeKernel(os.path.join(self.directory, "__pycache__"), stem, lambda: dispatchers().serial)
        return CompiledKernel(name, key, text, serial, native.Deferred(lambda: dispatchers().parallel), path, fma=fma)

    def _in_memory(self, name: str, key: str, text: str, fma: bool) -> CompiledKernel:
        filename = f"<flowjit kernel {name} {key}>"
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        namespace: dict = {"__name__": f"flowjit_kernel_{key}"}
        exec(compile(text, filename, "exec"), namespace)
        return self._wrap(name, key, text, namespace, path=None, fma=fma)

    def _wrap(self, name, key, text, namespace, *, path: str | None, fma: bool) -> CompiledKernel:
        function_cache = function_cache_class()
        numbas_own = path is not None and function_cache is None       # another numba: its own cache
        serial, parallel = kernel_dispatchers(namespace, fma, cache=numbas_own)
        STATS.dispatchers.extend([serial, parallel])
        compiled = CompiledKernel(name, key, text, serial, parallel, path, fma=fma)
        if path is not None and function_cache is not None:
            for dispatcher in (serial, parallel):
                dispatcher._cache = function_cache(dispatcher.py_func, _EntryHooks(self, compiled))
        return compiled

    # -- integrity ---------------------------------------------------------------------------------
    def _numba_directory(self, compiled: CompiledKernel | None = None) -> str:
        """Where numba keeps an entry's machine code: ``__pycache__`` beside the source with
        flowjit's own numba cache; numba's choice (``NUMBA_CACHE_DIR``...) without it."""
        if compiled is not None and not isinstance(compiled.serial, native.NativeKernel) and function_cache_class() is None:
            return compiled.serial._cache.cache_path
        return os.path.join(self.directory, "__pycache__")

    def _entry_files(self, stem: str, directory: str) -> list[str]:
        return sorted(file for file in glob.glob(os.path.join(directory, f"{stem}.*"))
                      if not is_temporary(os.path.basename(file)))

    def _check_entry(self, stem: str, path: str, text: str) -> bool:
        """Remove an entry whose source or cached code does not match its manifest; False
        when a bad entry could not be removed (a read-only directory: compile in memory)."""
        with directory_lock(self.directory) as locked:
            problem = self._entry_problem(stem, path, text)
            if problem is None:
                return True
            if not (self.writable and locked):
                self._warn_entry(stem, problem, "compiling the kernel in memory")
                return False
            self._warn_entry(stem, problem, "rebuilding it")
            manifest_path = os.path.join(self.directory, stem + ".json")
            numba_directory = self._manifest_directory(manifest_path)
            for file in [path, manifest_path] + self._entry_files(stem, numba_directory):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(file)
            return True

    def _manifest_directory(self, manifest_path: str) -> str:
        try:
            with open(manifest_path) as stream:
                recorded = json.load(stream).get("numba_directory", "__pycache__")
            return os.path.join(self.directory, recorded) if isinstance(recorded, str) else self._numba_directory()
        except (OSError, ValueError, AttributeError):
            return self._numba_directory()

    def _entry_problem(self, stem: str, path: str, text: str) -> str | None:
        manifest_path = os.path.join(self.directory, stem + ".json")
        try:
            if os.path.exists(path):
                with open(path, encoding="utf-8", errors="replace") as stream:
                    if canonical(stream.read()) != canonical(text):
                        return "its source file differs from the kernel's source (truncated or edited)"
            if not os.path.exists(manifest_path):
                return None
            with open(manifest_path) as stream:
                manifest = json.load(stream)
            directory = os.path.join(self.directory, manifest.get("numba_directory", "__pycache__"))
            for filename, digest in manifest["files"].items():
                full = os.path.join(directory, filename)
                if os.path.basename(filename) != filename or not filename.startswith(stem + "."):
                    return f"its manifest names a file that is not the entry's ({filename!r})"
                if not os.path.exists(full):
                    return f"{filename} is missing"
                if _sha256(full) != digest:
                    return f"{filename} does not match its checksum"
            self.listed[stem] = len(manifest["files"])
            self.native_listed[stem] = any(".native." in filename for filename in manifest["files"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            return f"it cannot be read ({type(error).__name__}: {error})"
        return None

    def record(self, compiled: CompiledKernel, force: bool = False, locked: bool = False) -> None:
        """List the entry's cache files in its manifest (after numba wrote them); without
        ``force``, only when there are files it does not list yet.  ``locked``: the caller
        holds the directory's lock."""
        if compiled.path is None or not self.writable:
            return
        stem = os.path.splitext(os.path.basename(compiled.path))[0]
        numba_directory = self._numba_directory(compiled)
        if len(self._entry_files(stem, numba_directory)) <= compiled.recorded and not force:
            return
        if not locked:
            with directory_lock(self.directory) as held:
                if held:
                    self.record(compiled, force=True, locked=True)
            return
        files = self._entry_files(stem, numba_directory)
        digests = {}
        for file in files:
            with contextlib.suppress(FileNotFoundError):
                digests[os.path.basename(file)] = _sha256(file)
        manifest = {"source_sha256": hashlib.sha256(compiled.source.encode()).hexdigest(),
                    "numba_directory": os.path.relpath(numba_directory, self.directory), "files": digests}
        try:
            write_atomically(os.path.join(self.directory, stem + ".json"), json.dumps(manifest, indent=1))
        except OSError as error:
            self._disk_failed(stem, error, "its manifest is not updated")
            return
        compiled.recorded = len(files)

    # -- numba's files of one kernel dispatcher (the hooks of numba_cache.KernelFunctionCache) ----------
    def unreadable(self, compiled: CompiledKernel, numba_cache, error: Exception) -> None:
        """numba could not load one of the entry's files: discard that function's files (when
        the directory is writable) and say so once; numba compiles the kernel instead."""
        stem = os.path.splitext(os.path.basename(compiled.path))[0]
        problem = f"numba cannot load {numba_cache.filename_base} ({type(error).__name__}: {error})"
        if not self.writable:
            self._warn_entry(stem, problem, "compiling the kernel in memory")
            return
        self._warn_entry(stem, problem, "rebuilding it")
        with directory_lock(self.directory) as locked:
            if not locked:
                return
            for file in numba_cache.files():
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(file)
            self.record(compiled, force=True, locked=True)

    def save(self, compiled: CompiledKernel, write, native_entry=None) -> None:
        """Save an overload numba compiled (``write()``) and its native entry (``native_entry()``:
        its path and bytes, or None), and list them in the manifest, under the directory's
        lock; a failure leaves the kernel compiled in memory, never raises."""
        if not self.writable:
            return
        stem = os.path.splitext(os.path.basename(compiled.path))[0]
        with directory_lock(self.directory) as locked:
            if not locked:
                self._warn_entry(stem, "the cache directory's lock was held by another process for "
                                 f"{LOCK_TIMEOUT_S:.0f} s", "keeping this kernel in memory")
                return
            try:
                write()
                made = native_entry() if native_entry is not None else None
                if made is not None:
                    write_atomically(made[0], made[1])
            except OSError as error:
                self._disk_failed(stem, error, "keeping the kernel in memory")
                return
            except Exception as error:         # an unreadable index read back before adding to it
                self._warn_entry(stem, f"numba cannot update its index ({type(error).__name__}: {error})",
                                 "discarding it; the kernel stays compiled in memory")
                for file in self._entry_files(stem, self._numba_directory(compiled)):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(file)
            self._remove_stale_temporaries()
            self.record(compiled, force=True, locked=True)

    def _remove_stale_temporaries(self) -> None:
        """Temporary files of writers that were killed before their rename."""
        cutoff = time.time() - STALE_TEMPORARY_S
        for directory in (self.directory, os.path.join(self.directory, "__pycache__")):
            with contextlib.suppress(OSError):
                for entry in os.scandir(directory):
                    if is_temporary(entry.name) and entry.is_file() and entry.stat().st_mtime < cutoff:
                        with contextlib.suppress(OSError):
                            os.unlink(entry.path)

    # -- management ---------------------------------------------------------------------------------
    def info(self) -> dict:
        """Where the kernels are, how many, and their size two ways, as ``du -s`` counts them:
        ``bytes_on_disk`` the blocks allocated (``du -sB1``), ``bytes`` the files' and
        directories' lengths (``du -sb``); a file with several links counts once."""
        result = {"directory": self.directory, "entries": 0, "bytes": 0, "bytes_on_disk": 0}
        if not self.directory or not os.path.isdir(self.directory):
            return result
        seen = set()
        for root, _, files in os.walk(self.directory):
            for name in [None] + files:
                full = root if name is None else os.path.join(root, name)
                try:
                    status = os.lstat(full)
                except FileNotFoundError:
                    continue
                if (status.st_dev, status.st_ino) in seen:
                    continue
                seen.add((status.st_dev, status.st_ino))
                result["bytes"] += status.st_size
                result["bytes_on_disk"] += status.st_blocks * 512
                result["entries"] += bool(name and name.endswith(".py"))
        return result

    def clear(self) -> int:
        """Delete every entry and the library's routines (library_cache.py), and the directories
        left empty; the number of files removed."""
        removed = 0
        routines = os.path.join(self.root, library_cache.SUBDIRECTORY) if self.directory else None
        for top in (self.directory, routines):
            if not (top and os.path.isdir(top)):
                continue
            for root, directories, files in os.walk(top, topdown=False):
                # under the directory's lock, if it has one (a writer's save is never cut in
                # half), removed last; a file a writer renamed away meanwhile is not there
                with directory_lock(root) if LOCK_NAME in files else contextlib.nullcontext(True) as held:
                    if not held:                    # a writer stuck past the deadline: left as it is
                        continue
                    for file in sorted(files, key=lambda name: name == LOCK_NAME):
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(os.path.join(root, file))
                            removed += 1
                for directory in directories:
                    with contextlib.suppress(OSError):      # not empty: a writer made a file since
                        os.rmdir(os.path.join(root, directory))
        self.memory.clear()
        return removed


class _EntryHooks:
    """What a kernel dispatcher's numba cache calls back into: the kernel cache, for one entry."""

    def __init__(self, cache: KernelCache, compiled: CompiledKernel):
        self.cache, self.compiled = cache, compiled

    def unreadable(self, numba_cache, error: Exception) -> None:
        self.cache.unreadable(self.compiled, numba_cache, error)

    def save(self, numba_cache, write, compile_result) -> None:
        def native_entry():
            if numba_cache.function_name != SERIAL or native_kernels() == "off":
                return None
            try:
                made = native.entry(compile_result)
            except Exception:           # (a kernel numba compiled that the adapter cannot serve: no entry)
                return None
            return made and (native.entry_path(numba_cache.cache_path, self.compiled_stem(), made[0]), made[1])
        self.cache.save(self.compiled, write, native_entry)

    def compiled_stem(self) -> str:
        return os.path.splitext(os.path.basename(self.compiled.path))[0]

    def before_load(self, numba_cache, sig) -> None:
        """numba is about to look on disk, and to compile on a miss: if the compile worker is
        compiling this overload, wait for it (background.py)."""
        from flowjit.compiler.codegen.background import WORKER
        WORKER.settle(self.compiled.key, numba_cache.function_name, sig)


_CACHES: dict = {}


def kernel_cache(directory: str | None) -> KernelCache:
    if directory not in _CACHES:
        _CACHES[directory] = KernelCache(directory)
    return _CACHES[directory]
