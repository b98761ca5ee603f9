"""Kernels at run time: sources, size-generic reuse, memory safety, the disk cache."""

import gc
import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap
import traceback

import numpy as np
import pytest

import flowjit
from flowjit.compiler.codegen import library

ROOT = pathlib.Path(__file__).parent.parent.parent


def chain(x):
    return ((x * 2 + 1) * x - 3) / (x * x + 1)


def test_kernel_sources_are_named_readable_and_commented():
    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    sources = flowjit.jit(softmax).lower(np.ones((2, 8), np.float32)).kernel_sources()
    assert list(sources) == ["k0_max_sub_exp_sum_div"]
    source = sources["k0_max_sub_exp_sum_div"]
    assert "# k0_max_sub_exp_sum_div: reduce kernel, domain [2,8]\ndef kernel(in0_x, out0):" in source
    assert "# %exp = exp %sub : f32[2,8]" in source
    assert "fj.exp_f32(" in source and "math.exp" not in source      # the vectorisable exp


def test_new_sizes_compile_no_kernels():
    jitted = flowjit.jit(chain)
    jitted(np.ones(16, np.float32))
    before = flowjit.stats()
    for size in (3, 100, 1000):
        x = np.linspace(-1, 1, size, dtype=np.float32)
        np.testing.assert_allclose(jitted(x), chain(x), rtol=2e-5, atol=1e-6)
    after = flowjit.stats()
    assert after["traces"] == before["traces"] + 3          # re-traced (cheap) ...
    assert after["kernel_compiles"] == before["kernel_compiles"]   # ... but nothing compiled


def test_one_pattern_at_several_places_compiles_one_kernel():
    """Kernels that differ only in the IR's value names (each layer's bias and ReLU, each
    parameter's update) share one compiled module, here and in another program; the results
    are each place's own."""
    def layers(x, w1, b1, w2, b2):
        h = np.maximum(x @ w1 + b1, 0.0)
        return np.maximum(h @ w2 + b2, 0.0)
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(shape).astype(np.float32) for shape in ((4, 6), (6, 5), (5,), (5, 5), (5,))]
    executable = flowjit.jit(layers).lower(*args).executable
    assert len(executable.kernel_sources) == 2
    first, second = executable.kernel_sources.values()
    assert first != second                                     # each kernel's own names ...
    assert executable.compiled[0] is executable.compiled[1]    # ... one compiled module
    np.testing.assert_allclose(flowjit.jit(layers)(*args), layers(*args), rtol=1e-5, atol=1e-6)

    def other(a, w, bias):                                   # another program, other names
        return np.maximum(a @ w + bias, 0.0) * 1.0
    before = flowjit.stats()["kernel_compiles"]
    np.testing.assert_allclose(flowjit.jit(other)(*args[:3]), other(*args[:3]), rtol=1e-5, atol=1e-6)
    assert flowjit.stats()["kernel_compiles"] == before


def test_a_module_that_runs_in_parallel_somewhere_runs_in_parallel_everywhere():
    """One pattern on a big and a small array is one module; the big use makes it run in
    parallel, and the small one uses that variant too: numba compiles one function, not two."""
    def program(big, small):
        return big * 2.0 + 1.0, small * 2.0 + 1.0
    args = (np.ones((512, 600), np.float32), np.ones((3, 5), np.float32))
    executable = flowjit.jit(program).lower(*args).executable
    assert executable.compiled[0] is executable.compiled[1]
    assert executable.driver_source.count("_parallel_") >= 2, executable.driver_source
    for got, want in zip(flowjit.jit(program)(*args), program(*args)):
        np.testing.assert_array_equal(got, want)


def test_kernel_keys_rename_locals_only():
    """The key's renaming keeps what changes the code: globals, attributes, keyword names,
    module-level names, and what a function loads without assigning."""
    from flowjit.compiler.codegen.cache import canonical
    body = "def kernel(a, out):\n    b = np.{f}(a, dtype={d})\n    for i, j in g(b):\n        out[i] += j\n"
    assert canonical(body.format(f="exp", d="np.float32")) == canonical(
        body.format(f="exp", d="np.float32").replace("b", "value").replace("(a", "(x").replace("kernel(a", "kernel(x"))
    assert canonical(body.format(f="exp", d="np.float32")) != canonical(body.format(f="log", d="np.float32"))
    assert canonical(body.format(f="exp", d="np.float32")) != canonical(body.format(f="exp", d="np.float64"))
    assert canonical("def k(a):\n    f(x=a)\n") != canonical("def k(a):\n    f(y=a)\n")
    assert canonical("T = 1\ndef k(a):\n    return a + T\n") != canonical("S = 1\ndef k(a):\n    return a + S\n")
    assert canonical("def k(a):\n    return a + T\n") != canonical("def k(a):\n    return a + S\n")
    assert canonical("def k(a):\n    # %x = add\n    return a\n") == canonical("def k(b):\n    return b\n")
    # A global that looks like a renamed local is never taken for one.
    assert canonical("def k(a, b):\n    return _l1(a)\n") != canonical("def k(a, f):\n    return f(a)\n")


def test_short_rows_compile_without_lane_loops():
    """A row the traced shapes make shorter than 16 gets the one plain loop (less for numba to
    compile); a longer one 8 lanes, from 32 on 16, a long one 64; all match numpy."""
    def softmax(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    jitted = flowjit.jit(softmax)
    for length, lanes in ((10, None), (15, None), (16, 8), (31, 8), (32, 16), (127, 16), (128, 64), (300, 64)):
        x = np.random.default_rng(length).standard_normal((3, length)).astype(np.float32)
        (source,) = jitted.lower(x).kernel_sources().values()
        assert ("lanes_" in source) == (lanes is not None), (length, source)
        if lanes is not None:
            assert f"lanes_max = fj.stack_array(np.float32, {lanes})" in source, (length, source)
        np.testing.assert_allclose(jitted(x), softmax(x), rtol=1e-5, atol=1e-7)


def test_outputs_held_by_the_user_are_never_reused():
    jitted = flowjit.jit(chain)
    held, expected = [], []
    # What was alive before the loop (in a test worker, every earlier test's objects) is frozen
    # out of the collector: each collection below walks what the loop made, not the whole heap.
    gc.freeze()
    try:
        for step in range(20):
            x = np.full(32, float(step), np.float32)
            result = jitted(x)
            # keep every other result whole, and of the rest only a view: both pin the buffer
            held.append(result if step % 2 == 0 else result[::2])
            expected.append(chain(x) if step % 2 == 0 else chain(x)[::2])
            del result
            gc.collect()
    finally:
        gc.unfreeze()
    for got, want in zip(held, expected):
        np.testing.assert_allclose(got, want, rtol=2e-6)


def test_released_outputs_are_recycled():
    jitted = flowjit.jit(chain)
    x = np.ones(64, np.float32)
    first = jitted(x)
    address = first.__array_interface__["data"][0]
    del first
    gc.collect()
    second = jitted(x)
    assert second.__array_interface__["data"][0] == address
    third = jitted(x)                                       # ``second`` is still held
    assert third.__array_interface__["data"][0] != address


@pytest.mark.parametrize("structure", ["single", "tuple", "dict", "nested"])
def test_released_outputs_are_recycled_without_the_collector(structure):
    """A result dropped by the caller goes back to the pool at once, whatever structure the
    function returns: nothing on the call path may hold it in a reference cycle that only the
    cyclic collector frees (a pytree rebuilt by a self-calling closure did, and every call of a
    multi-output program then faulted in fresh pages: 10x slower at 4M elements)."""
    def program(x):
        a, b = chain(x), x * 3
        return {"single": a, "tuple": (a, b), "dict": {"a": a, "b": b}, "nested": [(a,), {"b": b}]}[structure]
    jitted = flowjit.jit(program)
    x = np.ones(64, np.float32)

    def addresses(result):
        leaves = []
        stack = [result]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                stack.extend(item.values())
            elif isinstance(item, (tuple, list)):
                stack.extend(item)
            else:
                leaves.append(item.__array_interface__["data"][0])
        return sorted(leaves)
    jitted(x)
    enabled = gc.isenabled()
    gc.disable()
    try:
        first = addresses(jitted(x))
        assert addresses(jitted(x)) == first
    finally:
        if enabled:
            gc.enable()


def test_no_kernel_writes_into_a_buffer_it_reads():
    """A kernel that writes into a buffer it reads is not vectorised (LLVM cannot tell the two
    apart): its output gets another slot (the matmul epilogue wrote into the BLAS result)."""
    def two_kernels(x, y):
        a = np.exp(x) + y                  # loop kernel
        s = a.sum(axis=1, keepdims=True)   # reduce kernel: a dies here
        b = (a / s) * 2                    # joins the reduce kernel
        c = np.tanh(b @ y.T)               # matmul + epilogue: the BLAS result dies in it
        return c.sum(axis=1)               # its own reduce kernel: c dies here
    x, y = np.random.default_rng(0).random((2, 8, 8))
    jitted = flowjit.jit(two_kernels)
    np.testing.assert_allclose(jitted(x, y), two_kernels(x, y), rtol=1e-12)
    source = jitted.lower(x, y).executable.driver_source
    assert "np.matmul(" in source
    aliases, calls = {}, []
    for line in source.splitlines():
        line = line.strip()
        if " = workspace[" in line:
            name, slot = line.split(" = ")
            aliases[name] = slot
        elif line.startswith("k") and "(" in line:
            calls.append([aliases.get(a.strip(), a.strip()) for a in line.split("(", 1)[1].rstrip(")").split(",")])
    assert len(calls) == 3
    for arguments in calls:
        slots = [a for a in arguments if a.startswith("workspace[")]
        assert len(slots) == len(set(slots)), (arguments, source)


def test_inputs_are_never_written():
    def f(x):
        return np.exp(x) * 2
    x = np.linspace(0, 1, 16)
    original = x.copy()
    flowjit.jit(f)(x)
    np.testing.assert_array_equal(x, original)


def test_kernel_traceback_shows_the_generated_line():
    """An error inside a kernel shows the generated driver line that called it and the
    generated kernel line that raised, with their text (linecache holds the sources)."""
    def power(x, n):
        return x ** n
    with pytest.raises(ValueError) as info:
        flowjit.jit(power, static_argnums=())(np.arange(4), np.array([-1, 1, 1, 1]))
    assert "Integers to negative integer powers are not allowed" in str(info.value)
    frames = traceback.extract_tb(info.tb)
    driver = [frame for frame in frames if frame.filename.startswith("<flowjit driver power")]
    assert driver and re.match(r"k0_pow\w*\(t_x, t_n, t_k0_pow\)", driver[-1].line or ""), frames
    raised = frames[-1]
    assert "raise ValueError" in (raised.line or ""), frames
    # numba inlines the library's helper into the kernel, so the note says which IR line ran
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert re.search(r"raised in %k0_pow\w*, which computes\n    %pow = pow %\w+, %\w+ : i64\[4\] "
                     r"loc\(\".*test_runtime.py\":\d+\)", notes), notes


def test_recompile_log_says_what_changed(caplog):
    jitted = flowjit.jit(chain, log_recompiles=True)
    jitted(np.ones(4, np.float32))
    with caplog.at_level("WARNING", logger="flowjit.recompiles"):
        jitted(np.ones(4, np.float64))
        jitted(np.ones((4, 1), np.float64))
    assert "argument 'x' dtype float32 -> float64" in caplog.text
    assert "argument 'x' rank 1 -> 2" in caplog.text


def test_too_many_retraces_warn_once():
    jitted = flowjit.jit(lambda x: x + 1, recompile_warning_limit=3)
    with pytest.warns(RuntimeWarning, match="has been traced 4 times"):
        for size in range(1, 6):
            jitted(np.ones(size))


SCRIPT = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    sys.path.insert(0, "examples")
    import flowjit
    from models import softmax, black_scholes
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x = np.random.default_rng(0).random((4, 8)).astype(np.float32)
        ok = np.allclose(flowjit.jit(softmax)(x), softmax(x), rtol=1e-5)
        S = np.linspace(10, 20, 8)
        ok &= np.allclose(flowjit.jit(black_scholes)(S, S * 1.1, S / 10), black_scholes(S, S * 1.1, S / 10))
    print(json.dumps({"stats": flowjit.stats(), "ok": bool(ok), "warnings": [str(w.message) for w in caught]}))
""")


def run_process(cache_dir):
    env = dict(os.environ, FLOWJIT_CACHE_DIR=str(cache_dir))
    result = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_second_process_loads_every_kernel_from_disk_and_corruption_is_rebuilt(tmp_path):
    first = run_process(tmp_path)
    assert first["ok"] and first["stats"]["kernel_compiles"] == 2 and first["stats"]["disk_hits"] == 0
    manifests = {path: path.stat().st_mtime_ns for path in (tmp_path / "kernels").glob("*.json")}
    second = run_process(tmp_path)
    assert second["ok"] and second["stats"]["kernel_compiles"] == 0 and second["stats"]["disk_hits"] == 2
    assert second["warnings"] == []
    # The manifests checked at load are not written again (a warm first call spent 0.1 s on it).
    assert {path: path.stat().st_mtime_ns for path in manifests} == manifests
    cached = sorted((tmp_path / "kernels" / "__pycache__").glob("*.nbc"))
    cached[0].write_bytes(cached[0].read_bytes()[:50])                # truncate one entry
    third = run_process(tmp_path)
    assert third["ok"] and third["stats"]["kernel_compiles"] == 1
    assert len(third["warnings"]) == 1 and "is corrupted" in third["warnings"][0]
    assert "rebuilding it" in third["warnings"][0]
    fourth = run_process(tmp_path)
    assert fourth["ok"] and fourth["stats"]["kernel_compiles"] == 0 and fourth["warnings"] == []


LOAD_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import flowjit
    from flowjit.compiler.codegen.driver import PARALLEL_MIN_ELEMENTS
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((PARALLEL_MIN_ELEMENTS // 1024 + 3, 1024)).astype(np.float32)

    def softmax(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def chain(x):
        return ((x * 2 + 1) * x - 3) / (x * x + 1)
    rows_softmax = flowjit.jit(softmax)
    ok = np.allclose(rows_softmax(rows), softmax(rows), rtol=1e-5, atol=1e-7)     # parallel twin
    ok &= np.allclose(flowjit.jit(softmax)(rows[:4]), softmax(rows[:4]), rtol=1e-5, atol=1e-7)
    ok &= np.allclose(flowjit.jit(chain)(rows.ravel()), chain(rows.ravel()), rtol=1e-5, atol=1e-6)

    def total(x):
        return (x * x).sum()                            # a whole-domain reduction: partial totals
    from numba.core.runtime import rtsys                # (NUMBA_NRT_STATS=1: counted allocations)
    sums = flowjit.jit(total)
    ok &= np.isclose(sums(rows), total(rows), rtol=1e-4)
    before = rtsys.get_allocation_stats()
    for _ in range(3):                                  # each a scratch row per chunk, partial totals
        rows_softmax(rows)
        sums(rows)
    after = rtsys.get_allocation_stats()
    allocations = [after.mi_alloc - before.mi_alloc, after.mi_free - before.mi_free]
    refreshed = "numba.np.arraymath" in sys.modules     # imported only by a registry refresh
    arrays = "numba.np.arrayobj" in sys.modules         # imported by np.empty's environment on a load
    library = [name for name in LIBRARY if name in sys.modules]    # imported only to type a kernel
    masked = "numpy.ma" in sys.modules                  # imported by numba's typeof of an ndarray
    scale = float(sys.argv[1])                          # a new constant: a kernel no process compiled
    fresh = flowjit.jit(lambda x: np.tanh(x) * scale)(rows[:4])
    ok &= np.allclose(fresh, np.tanh(rows[:4]) * np.float32(scale), rtol=1e-5, atol=1e-6)
    print(json.dumps({"ok": bool(ok), "refreshed": refreshed, "arrays": arrays, "library": library,
                      "masked": masked, "allocations": allocations, "stats": flowjit.stats()}))
""")


def test_kernels_load_from_disk_without_refreshing_numba_and_a_new_kernel_still_compiles(tmp_path):
    """A warm-cache process loads serial and parallel kernels (scratch rows use the NRT
    allocator) without numba's target-context refresh, the 0.3 s that made a fresh
    process's first call slow, and can compile a new kernel afterwards.  (Parallel kernels
    compile in the process here, so that the second process finds every one of them cached:
    the first one's compile worker may still be compiling when it starts.)  Nor does it import
    the kernel library (codegen/library.py's modules): only typing a kernel needs it, and
    rendering one (softmax's exp has a routine: the fast-path check) reads what it needs from
    the ops and the config.  Nor numba's array module: scratch rows and partial totals come
    from ``fj.heap_array``, not ``np.empty``, whose environment a load would rebuild (50 ms).
    Nor ``numpy.ma``, which numba's typeof of an array imports (numba_cache.py)."""
    env = dict(os.environ, FLOWJIT_CACHE_DIR=str(tmp_path), FLOWJIT_BACKGROUND_COMPILE="0", NUMBA_NRT_STATS="1")
    names = list(library.MODULES)
    script = LOAD_SCRIPT.replace("LIBRARY", repr(names))

    def run(scale):
        result = subprocess.run([sys.executable, "-c", script, scale], cwd=ROOT, env=env, capture_output=True,
                                text=True)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout.splitlines()[-1])
    first = run("1.5")
    assert first["ok"] and first["refreshed"] and first["stats"]["disk_hits"] == 0 and first["library"] == names
    second = run("2.5")
    assert second["ok"] and not second["refreshed"] and not second["arrays"] and second["library"] == []
    assert not second["masked"]
    made, freed = second["allocations"]                 # the runtime's arrays of three calls, all freed
    assert made >= 3 * 2 and made == freed, second["allocations"]
    assert second["stats"]["disk_hits"] >= 4 and second["stats"]["kernel_compiles"] >= 1


LAYOUT_SCRIPT = textwrap.dedent("""
    import json, warnings
    import numpy as np
    import flowjit
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jitted = flowjit.jit(lambda x: x * 2 + 1)
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        ok = all(np.array_equal(jitted(a), a * 2 + 1) for a in (x, np.asfortranarray(x), x))
    print(json.dumps({"ok": ok, "stats": flowjit.stats(), "warnings": [str(w.message) for w in caught]}))
""")


def test_an_overload_compiled_after_the_first_call_is_in_the_manifest(tmp_path):
    """A Fortran-ordered input after a C-ordered one compiles a second overload into the
    same cache entry, after the entry's manifest was first written: the manifest is
    rewritten then, so the next process finds the entry whole (it used to call it
    corrupted and rebuild it)."""
    env = dict(os.environ, FLOWJIT_CACHE_DIR=str(tmp_path))

    def run():
        result = subprocess.run([sys.executable, "-c", LAYOUT_SCRIPT], cwd=ROOT, env=env, capture_output=True,
                                text=True)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout.splitlines()[-1])
    first = run()
    assert first["ok"] and first["warnings"] == []
    second = run()
    assert second["ok"] and second["warnings"] == [], second["warnings"]
    assert second["stats"]["kernel_compiles"] == 0


def test_two_processes_compiling_one_kernel_both_succeed(tmp_path):
    env = dict(os.environ, FLOWJIT_CACHE_DIR=str(tmp_path))
    processes = [subprocess.Popen([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        assert json.loads(out.splitlines()[-1])["ok"]
    assert run_process(tmp_path)["stats"]["kernel_compiles"] == 0


def test_cache_can_be_turned_off_and_cleared(tmp_path):
    jitted = flowjit.jit(chain, cache_dir=None)
    np.testing.assert_allclose(jitted(np.ones(4)), chain(np.ones(4)))
    from flowjit.compiler.codegen.cache import kernel_cache
    cache = kernel_cache(str(tmp_path))
    flowjit.jit(chain, cache_dir=str(tmp_path))(np.ones(4, np.int16))
    assert cache.info()["entries"] == 1
    assert cache.clear() >= 1 and cache.info()["entries"] == 0


def test_parallel_variants_are_correct():
    """Inputs above the parallel threshold run the prange twins: loops, row and full
    reductions, arg-reductions and a matmul epilogue all match numpy."""
    from flowjit.compiler.codegen.driver import PARALLEL_MIN_ELEMENTS
    rng = np.random.default_rng(5)
    x = rng.standard_normal(PARALLEL_MIN_ELEMENTS + 1000).astype(np.float32)
    rows = rng.standard_normal((PARALLEL_MIN_ELEMENTS // 256 + 3, 256))
    w = rng.standard_normal((256, 256))               # the epilogue over rows @ w is above it too

    def program(x, rows, w):
        return (np.tanh(x) * 2 + 1, np.sum(x * 2), np.max(x - 1), np.argmax(x), x.mean(),
                rows.sum(axis=0), rows.max(axis=1), np.argmin(rows, axis=1),
                (rows - rows.mean(axis=1, keepdims=True)).std(axis=1), np.maximum(rows @ w + 1, 0))
    jitted = flowjit.jit(program)
    calls = re.findall(r"^    (k\d+\w*?)_\d+\(", jitted.lower(x, rows, w).executable.driver_source, re.M)
    assert len(calls) >= 4 and all(call.endswith("_parallel") for call in calls), calls
    got = jitted(x, rows, w)
    expected = program(x, rows, w)
    for index, (value, want) in enumerate(zip(got, expected)):
        np.testing.assert_allclose(value, want, rtol=1e-5 if np.asarray(want).dtype == np.float32 else 1e-9,
                                   atol=1e-4, err_msg=f"output {index}")


@pytest.mark.parametrize("policy", [None, "PASSIVE"])
def test_warns_when_libgomp_was_loaded_first_without_a_wait_policy(policy):
    """libgomp reads OMP_WAIT_POLICY once, when loaded: loaded before flowjit (torch does
    that) with no policy set, its spinning threads slow BLAS, and flowjit says so."""
    import ctypes.util
    if not os.path.exists("/proc/self/maps") or ctypes.util.find_library("gomp") is None:
        pytest.skip("needs Linux and libgomp")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "PYTHONWARNINGS")}
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    script = ("import ctypes, ctypes.util, warnings; warnings.simplefilter('always')\n"
              "ctypes.CDLL(ctypes.util.find_library('gomp'))\nimport flowjit\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    warned = "libgomp was loaded before flowjit" in result.stderr
    assert warned == (policy is None), result.stderr
    if warned:
        assert "<string>:3" in result.stderr          # the user's import line


def test_importing_flowjit_sets_the_wait_policy_first():
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    script = "import os, flowjit; print(os.environ['OMP_WAIT_POLICY'])"
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.stdout.strip() == "PASSIVE" and not result.stderr, result.stderr


def _concatenations(x, y):
    features = np.concatenate([x, x ** 2, x * 3 - 1], axis=1)           # kernel pieces along axis 1
    rows = np.concatenate([np.exp(y), y * 3], axis=0)                    # along axis 0
    polar = np.stack([np.sqrt(y * y + 1), np.arctan2(y, 2.0)], axis=-1)  # np.stack of a math routine: copied
    shared = x * 2                                                       # used twice: copied
    twice = np.concatenate([shared, shared], axis=0)
    returned = x + 5                                                     # a result as well: copied
    return features @ np.ones((features.shape[1], 2), x.dtype), rows, polar, twice, returned, \
        np.concatenate([returned, x], axis=1)


@pytest.mark.parametrize("dtype", ["float32", pytest.param("float64", marks=pytest.mark.sweep)])
def test_kernels_write_their_pieces_into_a_concatenation(dtype):
    """A kernel output whose only use is a concatenation (or np.stack, through the reshape
    that adds its axis) is written straight into its slice of the result; the concat copies
    only the other pieces.  A piece used elsewhere or returned keeps its own buffer, and so
    does one of a kernel inlining a math routine (arctan2, exp) where its slice has a row
    pitch: the stores would be scatters, which keep the loop scalar.
    (float64, 17 s of a cold run for the same driver code, runs under ``make test-slow``.)"""
    rng = np.random.default_rng(31)
    jitted, unfused = flowjit.jit(_concatenations), flowjit.jit(_concatenations, fuse=False)
    for rows, columns in ((1, 1), (3, 5), (64, 7)):
        x = rng.standard_normal((rows, columns)).astype(dtype)
        y = rng.standard_normal((rows, columns)).astype(dtype)
        expected = flowjit.interpret(jitted.lower(x, y).graph, x, y)
        for function in (jitted, unfused):
            for _ in range(2):                                           # buffers reused on the second call
                for got, want in zip(function(x, y), expected):
                    np.testing.assert_allclose(got, want, rtol=2e-6 if dtype == "float32" else 1e-12)
        source = jitted.lower(x, y).executable.driver_source
        lines = [line.strip() for line in source.splitlines() if not line.strip().startswith("#")]
        in_place = [line for line in lines if "piece_view" in line]
        pitched = rows > 1 and columns > 1                   # polar's slices have a row pitch
        assert len(in_place) == (4 if pitched else 6), source     # x**2, x*3-1; exp, y*3; stacked pieces
        concatenates = [line for line in lines if "xp.concatenate(" in line]         # (xp: numpy here)
        assert len(concatenates) == (3 if pitched else 2), source      # shared twice, the returned x+5
                                                                        # (and polar)
        # ... each into a buffer of the driver's (a workspace slot, or the result's pool)
        assert all(line.endswith(")") and ", out=t_" in line for line in concatenates), source


def test_constants_returned_are_arrays_of_the_callers_own():
    """np.zeros_like(x), np.zeros(shape) (a broadcast scalar once simplified) and views of a
    constant come back as new writable C-contiguous arrays, as numpy's results are."""
    def constants(x):
        return np.zeros_like(x), np.zeros(x.shape) + 0.0, np.full(x.shape, 2.5), np.arange(3.0)[::-1]
    x = np.ones((2, 3))
    for jitted in (flowjit.jit(constants), flowjit.jit(constants, fuse=False)):
        first = jitted(x)
        second = jitted(x)
        for got, again, want in zip(first, second, constants(x)):
            np.testing.assert_array_equal(got, want)
            assert got.flags.writeable and got.flags.c_contiguous and got is not again
            got[...] = 7                                   # writing one result changes no later one
        for got, want in zip(jitted(x), constants(x)):
            np.testing.assert_array_equal(got, want)


def test_whole_domain_reductions_get_their_scratch_from_the_driver():
    """A reduction of the whole of a domain it cannot read as one row (an operand broadcast
    along some of its axes, or strided slices) runs in parallel parts of whole rows where its
    reductions fold into lanes (no scratch at all); where one cannot (an int32 sum adds in
    int64 lanes) it keeps its elementwise values in scratch as large as its inputs, and the
    driver passes a workspace buffer, reused across calls and by the next such kernel, where
    the kernel used to allocate one per call (and fault its pages in)."""
    def program(v, m, u):
        kinetic = 0.5 * np.sum(m[:, None] * v ** 2)
        lap = u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4 * u[1:-1, 1:-1]
        return kinetic, lap, np.mean(lap ** 2), np.max(np.abs(m[:, None] - v))

    def integers(a, b):
        return np.sum(a[:, None] * b), np.sum((a[1:, None] - b[:, 1:]) * 3)
    rng = np.random.default_rng(40)
    v, m, u = rng.standard_normal((50, 3)), rng.uniform(1, 2, 50), rng.standard_normal((12, 14))
    a, b = rng.integers(-9, 9, 40).astype(np.int32), rng.integers(-9, 9, (5, 40, 7)).astype(np.int32)
    for fun, args, parts in ((program, (v, m, u), True), (integers, (a, b), False)):
        jitted = flowjit.jit(fun)
        lowered = jitted.lower(*args)
        sources = lowered.kernel_sources()
        assert not any(re.search(r"heap_array\([^)]*, ninner\)", source) for source in sources.values()), sources
        assert all(("for row in range(part * nrows // nparts" in source) == parts
                   for source in sources.values()), sources
        calls = [line.strip() for line in lowered.executable.driver_source.splitlines() if re.match(r"\s+k\d", line)]
        assert len(calls) == 2 and all(bool(re.search(r", workspace\[\d+\]\)$", call)) != parts for call in calls), calls
        for _ in range(3):
            for got, want in zip(jitted(*args), fun(*args)):
                np.testing.assert_allclose(got, want, rtol=1e-12)
