"""The kernel cache: in memory by source, on disk across processes.

A kernel module is keyed by a hash of its source (without comments and with the
kernel's name left out, so the same loop generated for two programs or two sizes is
compiled once) plus the numba and llvmlite versions, the CPU's name and features, and
the source of the math library the kernels inline.  On disk it is an ordinary Python file whose
functions are jitted with ``cache=True``, so numba keeps the object code beside it in
``__pycache__``; a manifest with the sha256 of every file of the entry lets a later
process detect a corrupted or truncated entry, warn once, and rebuild it.  Files are
written to a temporary name and renamed, so a reader never sees half a file, and two
processes compiling one kernel both succeed.
"""

from __future__ import annotations

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
import warnings
from dataclasses import dataclass, field

import llvmlite        # (flowjit/__init__.py has set libgomp's wait policy before numba loads it)
import llvmlite.binding as llvm
import numba
from numba import njit

from flowjit.compiler.codegen.kernel import KernelSource, module_source
from flowjit.counters import STATS

_PLACEHOLDER = "__kernel__"


class KernelCacheWarning(UserWarning):
    pass


def toolchain_key() -> str:
    """What besides a kernel's own text decides its machine code: the toolchain, the CPU,
    and the source of the math library that kernels inline."""
    from flowjit.compiler.codegen import mathlib
    with open(mathlib.__file__, "rb") as stream:
        library = hashlib.sha256(stream.read()).hexdigest()[:16]
    features = llvm.get_host_cpu_features().flatten()
    return (f"numba={numba.__version__};llvmlite={llvmlite.__version__};cpu={llvm.get_host_cpu_name()};"
            f"{features};mathlib={library}")


@dataclass
class CompiledKernel:
    name: str
    key: str
    source: str
    serial: object
    parallel: object
    path: str | None = None
    recorded: int = field(default=0)         # cache files listed in the manifest so far


def _kernel_dispatcher_cache(dispatcher, saved) -> None:
    """Give a kernel's dispatcher a numba cache that loads machine code without first
    refreshing the target context, and calls ``saved()`` after it saves an overload (a new
    array layout compiled after the first call adds files the entry's manifest must list).

    numba's ``FunctionCache.load_overload`` refreshes the whole target context before it
    looks on disk: it imports and installs every typing and lowering registry (scipy
    included, for the BLAS probe), about 0.3 s of a fresh process's first call and all of
    it for compiling, which a cache hit does not do.  Running cached code needs the
    symbols numba installs when the context is built and the NRT allocator (scratch
    rows), which ``rtsys.initialize`` provides; a cache miss compiles through numba's
    pipeline, which refreshes the context itself.  Without the private pieces this relies
    on (another numba), the dispatcher keeps numba's own cache.
    """
    from numba.core.caching import FunctionCache
    cache = getattr(dispatcher, "_cache", None)
    if type(cache) is not FunctionCache or _KernelFunctionCache is None:
        return
    dispatcher._cache = _KernelFunctionCache(dispatcher.py_func)
    dispatcher._cache.saved = saved


def _kernel_function_cache():
    from numba.core.caching import FunctionCache
    from numba.core.runtime import rtsys
    if not all(hasattr(FunctionCache, name) for name in ("_load_overload", "_guard_against_spurious_io_errors")):
        return None

    class KernelFunctionCache(FunctionCache):
        saved = None

        def load_overload(self, sig, target_context):
            rtsys.initialize(target_context)
            with self._guard_against_spurious_io_errors():
                return self._load_overload(sig, target_context)

        def save_overload(self, sig, data):
            super().save_overload(sig, data)
            if self.saved is not None:
                self.saved()
    return KernelFunctionCache


_KernelFunctionCache = _kernel_function_cache()


def kernel_function_name(text: str) -> str:
    """The serial kernel defined in a module (helpers are ``fj_*``, the other is ``*_parallel``)."""
    for name in re.findall(r"^def (\w+)\(", text, re.MULTILINE):
        if not name.startswith("fj_") and not name.endswith("_parallel"):
            return name
    raise ValueError("no kernel function in module")


def canonical(text: str) -> str:
    """The code without comments and with the kernel's name replaced: what the key hashes.

    Comments carry the IR lines with the traced shapes, and the name says where in the
    program the kernel sits; neither changes the compiled code, so new sizes and other
    programs reuse it."""
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    try:
        name = kernel_function_name(code)
    except ValueError:
        return code
    return re.sub(rf"\b{re.escape(name)}(_parallel)?\b", lambda m: _PLACEHOLDER + (m.group(1) or ""), code)


def _write_atomic(path: str, text: str) -> None:
    directory = os.path.dirname(path)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def _sha256(path: str) -> str:
    with open(path, "rb") as stream:
        return hashlib.sha256(stream.read()).hexdigest()


class KernelCache:
    """Compiled kernels by key; ``directory=None`` keeps them in memory only."""

    def __init__(self, directory: str | None):
        self.directory = os.path.join(directory, "kernels") if directory else None
        self.memory: dict[str, CompiledKernel] = {}
        self.lock = threading.Lock()
        self.warned: set[str] = set()
        self.toolchain = toolchain_key()
        if self.directory:
            os.makedirs(self.directory, exist_ok=True)

    def key_of(self, kernel: KernelSource, fma: bool = True) -> str:
        text = canonical(module_source(kernel))          # header and helpers included
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
        text = module_source(kernel)
        if self.directory is None:
            filename = f"<flowjit kernel {kernel.name} {key}>"
            linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
            namespace: dict = {"__name__": f"flowjit_kernel_{key}"}
            exec(compile(text, filename, "exec"), namespace)
            return self._wrap(kernel.name, key, text, namespace, cache=False, path=None, fma=fma)
        stem = f"k_{key}"
        path = os.path.join(self.directory, stem + ".py")
        self._check_entry(stem, path, text)
        if not os.path.exists(path):
            _write_atomic(path, text)
        else:
            with open(path, encoding="utf-8") as stream:
                text = stream.read()           # the same code, first written for another program
        module_name = f"flowjit_kernels.{stem}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        return self._wrap(kernel.name, key, text, vars(module), cache=True, path=path, fma=fma)

    def _wrap(self, name, key, text, namespace, *, cache: bool, path: str | None, fma: bool) -> CompiledKernel:
        function = kernel_function_name(text)
        # 'contract' lets LLVM fuse a*b+c into one FMA (one rounding); nothing else of fastmath.
        flags = dict(error_model="numpy", cache=cache, fastmath={"contract"} if fma else False)
        serial = njit(**flags)(namespace[function])
        parallel = njit(parallel=True, **flags)(namespace[function + "_parallel"])
        STATS.dispatchers.extend([serial, parallel])
        compiled = CompiledKernel(name, key, text, serial, parallel, path)
        if cache:
            for dispatcher in (serial, parallel):
                _kernel_dispatcher_cache(dispatcher, lambda: self.record(compiled, force=True))
        return compiled

    # -- integrity ---------------------------------------------------------------------------------
    def _entry_files(self, stem: str) -> list[str]:
        return sorted(glob.glob(os.path.join(self.directory, "__pycache__", f"{stem}.*")))

    def _check_entry(self, stem: str, path: str, text: str) -> None:
        """Remove an entry whose source or cached code does not match its manifest."""
        manifest_path = os.path.join(self.directory, stem + ".json")
        problem = None
        if os.path.exists(path):
            with open(path, encoding="utf-8", errors="replace") as stream:
                if canonical(stream.read()) != canonical(text):
                    problem = "its source file differs from the kernel's source (truncated or edited)"
        if problem is None and os.path.exists(manifest_path):
            try:
                with open(manifest_path) as stream:
                    manifest = json.load(stream)
                for filename, digest in manifest["files"].items():
                    full = os.path.join(self.directory, "__pycache__", filename)
                    if not os.path.exists(full):
                        problem = f"{filename} is missing"
                    elif _sha256(full) != digest:
                        problem = f"{filename} does not match its checksum"
                    if problem:
                        break
            except (OSError, ValueError, KeyError, TypeError) as error:
                problem = f"its manifest is unreadable ({error})"
        if problem is None:
            return
        if stem not in self.warned:
            self.warned.add(stem)
            warnings.warn(f"flowjit: kernel cache entry {stem} is corrupted: {problem}; rebuilding it",
                          KernelCacheWarning, stacklevel=4)
        for file in [path, manifest_path] + self._entry_files(stem):
            try:
                os.unlink(file)
            except FileNotFoundError:
                pass

    def record(self, compiled: CompiledKernel, force: bool = False) -> None:
        """List the entry's cache files in its manifest (after numba wrote them); without
        ``force``, only when there are files it does not list yet."""
        if compiled.path is None:
            return
        stem = os.path.splitext(os.path.basename(compiled.path))[0]
        files = self._entry_files(stem)
        if len(files) <= compiled.recorded and not force:
            return
        digests = {}
        for file in files:
            try:
                digests[os.path.basename(file)] = _sha256(file)
            except FileNotFoundError:
                continue
        manifest = {"source_sha256": hashlib.sha256(compiled.source.encode()).hexdigest(), "files": digests}
        _write_atomic(os.path.join(self.directory, stem + ".json"), json.dumps(manifest, indent=1))
        compiled.recorded = len(files)

    # -- management ---------------------------------------------------------------------------------
    def info(self) -> dict:
        if not self.directory or not os.path.isdir(self.directory):
            return {"directory": self.directory, "entries": 0, "bytes": 0}
        total, entries = 0, 0
        for root, _, files in os.walk(self.directory):
            for file in files:
                total += os.path.getsize(os.path.join(root, file))
                entries += file.endswith(".py")
        return {"directory": self.directory, "entries": entries, "bytes": total}

    def clear(self) -> int:
        removed = 0
        if self.directory and os.path.isdir(self.directory):
            for root, _, files in os.walk(self.directory):
                for file in files:
                    os.unlink(os.path.join(root, file))
                    removed += 1
        self.memory.clear()
        return removed


_CACHES: dict = {}


def kernel_cache(directory: str | None) -> KernelCache:
    if directory not in _CACHES:
        _CACHES[directory] = KernelCache(directory)
    return _CACHES[directory]
