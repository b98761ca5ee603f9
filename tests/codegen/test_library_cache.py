"""The kernel library's routines in the disk cache (library_cache.py): a fresh process that
compiles a kernel loads the routines an earlier one compiled, inlines them as before (the loop
still vectorises, the bits are the same), under a directory keyed by the toolchain; a garbled
file gives one warning and is rebuilt; without a cache directory nothing is written."""

import json
import os
import subprocess
import sys
import textwrap

from flowjit.compiler.codegen import library_cache

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Compiles a kernel calling tanh, exp and log (each a library routine LLVM inlines), prints its
# result's bytes, whether its loop has packed arithmetic, and the routines' numba cache counts.
SCRIPT = """
import json, sys, warnings
import numpy as np
sys.path.insert(0, "tests")
from helpers import compiled_serial, packed
import flowjit
from flowjit.compiler.codegen import library

def program(x):
    return np.tanh(x) * np.exp(-x * x) + np.log1p(x * x)

x = np.linspace(-3, 3, 1000).astype(np.float32)
z = (x + 1j * x[::-1]).astype(np.complex128)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    jitted = flowjit.jit(program)
    result = jitted(x)
    logs = flowjit.jit(lambda z: np.log10(z) * 2)(z)
    (source,) = jitted.lower(x).kernel_sources().values()
    kernel = compiled_serial(source, "library_cache_check.py", [x, np.empty_like(x)])
assembly = "".join(kernel.inspect_asm().values())
routines = [library.tanh_f32, library.exp_f32, library.log1p_f32]
closure = library.complex_log10_c128            # (made by a function: a closure over numba functions)
print(json.dumps({
    "bytes": result.tobytes().hex(), "log bytes": logs.tobytes().hex(),
    "closure": [sum(closure.stats.cache_hits.values()), sum(closure.stats.cache_misses.values())],
    "packed": packed(assembly, "arith", np.float32),
    "hits": sum(sum(r.stats.cache_hits.values()) for r in routines),
    "misses": sum(sum(r.stats.cache_misses.values()) for r in routines),
    "warnings": [str(w.message) for w in caught if "library" in str(w.message)]}))
"""


def run(cache_dir, script: str = SCRIPT, **env) -> dict:
    environment = dict(os.environ, FLOWJIT_CACHE_DIR=str(cache_dir), FLOWJIT_BACKGROUND_COMPILE="0", **env)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT, env=environment,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def drop_kernels(cache_dir) -> None:
    """Remove every kernel entry, leaving the library's routines."""
    for path in (cache_dir / "kernels").rglob("*"):
        if path.is_file():
            path.unlink()


def test_a_fresh_process_loads_the_routines_another_compiled_and_inlines_them(tmp_path):
    first = run(tmp_path)
    assert first["misses"] > 0 and first["hits"] == 0 and first["warnings"] == []
    (directory,) = (tmp_path / "library").iterdir()
    assert any(path.suffix == ".nbi" for path in directory.iterdir())
    # Another process, its kernel not cached: every routine from disk, the same bits, and the
    # loop still vectorised around the inlined routines.
    drop_kernels(tmp_path)
    second = run(tmp_path)
    assert second["misses"] == 0 and second["hits"] > 0, second
    assert first["closure"] == [0, 1] and second["closure"] == [1, 0]
    assert second["bytes"] == first["bytes"] and second["log bytes"] == first["log bytes"]
    assert second["packed"] and first["packed"]
    assert second["warnings"] == []


def test_only_the_routines_kernels_call_are_cached_and_only_here():
    """The routines kernels call (both flavours) are cached in the library's directory, never
    beside their source; the library's private helpers have no numba cache of their
    own: numba's, beside their source, is keyed by that file's content alone and would outlive a
    change to another file they call into (each routine holds its helpers linked in)."""
    from numba.core.caching import NullCache
    from numba.core.registry import CPUDispatcher
    from flowjit.compiler.codegen import library
    library.load()
    routines = {id(value) for flavour in (library.FUNCTIONS, library.exact.FUNCTIONS)
                for value in flavour.values() if isinstance(value, CPUDispatcher)}
    helpers = [(module, name, value) for module in library.MODULES for name, value in vars(sys.modules[module]).items()
               if isinstance(value, CPUDispatcher) and id(value) not in routines]
    assert len(routines) > 150 and len(helpers) > 10
    for flavour in (library.FUNCTIONS, library.exact.FUNCTIONS):
        for name, value in flavour.items():
            if isinstance(value, CPUDispatcher):
                # (NullCache where a test before this one, in this process, loaded the library
                # without a usable cache directory)
                assert type(value._cache).__name__ in ("DirectoryFunctionCache", "NullCache"), name
    for module, name, value in helpers:
        assert isinstance(value._cache, NullCache), (module, name, value._cache)


def test_a_garbled_routine_file_gives_one_warning_and_is_rebuilt(tmp_path):
    first = run(tmp_path)
    (directory,) = (tmp_path / "library").iterdir()
    garbled = list(directory.glob("mathlib_explog.tanh_f32-*.nbc"))
    assert garbled
    for path in garbled:
        path.write_bytes(path.read_bytes()[:30])
    drop_kernels(tmp_path)
    second = run(tmp_path)
    assert len(second["warnings"]) == 1 and "tanh_f32" in second["warnings"][0], second["warnings"]
    assert second["bytes"] == first["bytes"]
    drop_kernels(tmp_path)
    third = run(tmp_path)                   # rebuilt by the second: loads without a warning
    assert third["warnings"] == [] and third["misses"] == 0 and third["bytes"] == first["bytes"]


def test_the_directory_is_keyed_by_the_toolchain(monkeypatch, tmp_path):
    from flowjit.compiler.codegen import cache
    first = library_cache.directory_for(str(tmp_path))
    assert os.path.dirname(first) == str(tmp_path / "library")
    monkeypatch.setattr(cache, "toolchain_key", lambda: "another toolchain")
    assert library_cache.directory_for(str(tmp_path)) != first


def test_without_a_cache_directory_nothing_is_written(tmp_path):
    result = run("none", HOME=str(tmp_path))
    assert result["hits"] == 0 and result["misses"] > 0
    assert not any(tmp_path.rglob("*.nbi"))


def test_enable_without_a_root_gives_no_cache():
    assert library_cache.enable([object()], None) == 0


SHIPPED_SCRIPT = """
import json
import numpy as np
import flowjit
from flowjit.compiler.codegen import index_kernels, scans

x = np.arange(1000.0)
index = np.arange(0, 1000, 7)
sums = flowjit.jit(lambda x: np.cumsum(x * 2))(x)
taken = flowjit.jit(lambda x, i: x[i] + 1)(x, index)
kernels = [scans.add_serial, index_kernels._gather]
print(json.dumps({"caches": [type(k._cache).__name__ for k in kernels],
                  "hits": [sum(k.stats.cache_hits.values()) for k in kernels],
                  "misses": [sum(k.stats.cache_misses.values()) for k in kernels],
                  "right": bool(np.array_equal(sums, np.cumsum(x * 2)) and np.array_equal(taken, x[index] + 1))}))
"""


def test_the_kernels_flowjit_ships_are_cached_in_the_library_directory_not_beside_their_source(tmp_path):
    """Scans and gathers are numba functions of flowjit's own: cached with the routines, keyed
    by the toolchain (their source included), never by numba beside scans.py."""
    first = run(tmp_path, SHIPPED_SCRIPT)
    assert first["right"] and first["caches"] == ["DirectoryFunctionCache"] * 2, first
    assert first["misses"] == [1, 1] and first["hits"] == [0, 0], first
    (directory,) = (tmp_path / "library").iterdir()
    assert any(path.name.startswith("scans.add_serial") for path in directory.iterdir())
    drop_kernels(tmp_path)
    second = run(tmp_path, SHIPPED_SCRIPT)
    assert second["right"] and second["hits"] == [1, 1] and second["misses"] == [0, 0], second
    assert library_cache.directory_for(str(tmp_path)).endswith(directory.name)
