"""Native kernel entries (codegen/native.py): cached kernels run without numba.

The corpus runs through its native entries bit for bit as through numba's dispatchers (the
same machine code); a fresh process with a warm cache never imports numba, and arguments no
entry takes (another layout, a subclass, a list) reach numba's dispatcher and the right
result; the pieces (argument keys, the ELF reader, reachability) on their own."""

import ctypes
import json
import math
import os
import subprocess
import sys
import textwrap

import llvmlite.binding as llvm
import numpy as np
import pytest

import flowjit
from flowjit.compiler.codegen import cache, native
from flowjit.counters import STATS
from helpers import assert_same_result
from programs import PROGRAMS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _fresh_native_cache(monkeypatch):
    """Later jit objects load kernels through a new KernelCache that takes native entries
    although numba is loaded here (``always``)."""
    monkeypatch.setenv("FLOWJIT_NATIVE_KERNELS", "always")
    monkeypatch.setattr(cache, "_CACHES", {})


# A third of the corpus (all of it compiles in 45 s on an empty cache), and float16_math, whose
# kernels call numba's frexp and ldexp helpers (the engine's RUNTIME), as dtype_conversions' do.
SAMPLE = PROGRAMS[::3] + [program for program in PROGRAMS[1::3] + PROGRAMS[2::3] if program.name == "float16_math"]


def test_the_corpus_runs_its_native_entries_bit_for_bit_as_numba(monkeypatch):
    expected = {}
    for program in SAMPLE:
        args = program.make_args(np.random.default_rng(3))
        expected[program.name] = (args, flowjit.jit(program.fun, static_argnums=program.static_argnums)(*args))
    flowjit.wait_for_compiles()
    _fresh_native_cache(monkeypatch)
    loads_before, without = STATS.native_loads, []
    for program in SAMPLE:
        args, want = expected[program.name]
        before = STATS.native_loads
        assert_same_result(flowjit.jit(program.fun, static_argnums=program.static_argnums)(*args), want)
        if STATS.native_loads == before:
            without.append(program.name)
    assert STATS.native_loads - loads_before >= len(SAMPLE)
    # Programs whose kernels all ran before in this process (same code, other names) load nothing new.
    assert len(without) <= len(SAMPLE) // 4, without


def test_arguments_no_entry_takes_go_to_numba(monkeypatch):
    def f(x):
        return np.exp(x) * 2.0 + x
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    want = flowjit.jit(f)(x)
    _fresh_native_cache(monkeypatch)
    jitted = flowjit.jit(f)
    assert_same_result(jitted(x), want)
    [compiled] = [kernel for kernel in cache.kernel_cache(os.environ["FLOWJIT_CACHE_DIR"]).memory.values()]
    serial = compiled.serial
    assert isinstance(serial, native.NativeKernel) and serial.function is not None
    entry, passed = serial.function, []
    serial.function = lambda *arrays: passed.append(arrays) or entry(*arrays)
    assert_same_result(jitted(x), want)                 # (what the driver passes: collapsed to 1-D)
    [(given, out)] = passed
    serial.function, ran = entry, []
    serial.fallback = lambda: (lambda *arrays: ran.append(arrays))
    out[:] = 0
    serial(given, out)                                  # the entry takes these: no fallback
    assert not ran and np.array_equal(out, want.reshape(out.shape))

    class Sub(np.ndarray):
        pass
    for odd in (given.view(Sub), [0.0] * given.size, given[::-1], given.astype(np.float64), given[None],
                given.astype(given.dtype.newbyteorder())):
        serial(odd, out)
        assert ran and ran.pop()[0] is odd, type(odd)
    serial(given, out, out)                             # another count of arguments
    assert ran and len(ran.pop()) == 3


FILL_AND_RUN = """
import json, sys
import numpy as np
import flowjit

def chain(x):
    return (x * 2.0 + 1.0) * x - 3.0

def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)

def integers(a, b):
    return (a // 7) % 5 + np.abs(b) * a

def column_stats(x):
    return x.mean(axis=0), x.std(axis=0), np.argmax(x, axis=1)

rng = np.random.default_rng(int(sys.argv[1]))
x32 = rng.standard_normal((8, 33)).astype(np.float32)
x64 = rng.standard_normal((9, 5))
a, b = rng.integers(-100, 100, 40, dtype=np.int32), rng.integers(-9, 9, 40, dtype=np.int32)
calls = [(chain, (x32,)), (softmax, (x32,)), (integers, (a, b)), (column_stats, (x64,))]
ok = True
for function, args in calls:
    got, want = flowjit.jit(function)(*args), function(*args)
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    ok &= all(g.dtype == w.dtype and np.allclose(g, w, rtol=1e-5, atol=1e-6) for g, w in zip(got, want))
numba_before = "numba" in sys.modules
big = rng.standard_normal(1 << 18).astype(np.float32)         # runs in parallel
ok &= bool(np.allclose(flowjit.jit(chain)(big), chain(big), rtol=1e-5, atol=1e-5))
# layouts and dtypes no entry has (the first process did not run them)
others = [np.asfortranarray(x32), x32[:, ::2], x32.astype(np.float64)] if sys.argv[2:] == ["others"] else []
for other in others:
    ok &= bool(np.allclose(flowjit.jit(softmax)(other), softmax(other), rtol=1e-5, atol=1e-7))
numba_after = "numba" in sys.modules
flowjit.wait_for_compiles()             # the parallel twin: loaded by a thread in a process without numba
from flowjit.compiler.codegen import background
hits = flowjit.stats()["disk_hits"]
ok &= bool(np.allclose(flowjit.jit(chain)(big), chain(big), rtol=1e-5, atol=1e-5))
print(json.dumps({"ok": bool(ok), "numba": numba_before, "numba_after": numba_after, "stats": flowjit.stats(),
                  "finders": len(background.FINDERS), "hits_after_wait": flowjit.stats()["disk_hits"] - hits}))
"""


def test_a_fresh_process_with_a_warm_cache_never_imports_numba(tmp_path):
    env = dict(os.environ, FLOWJIT_CACHE_DIR=str(tmp_path))
    env.pop("FLOWJIT_NATIVE_KERNELS", None)

    def run(seed, *more):
        result = subprocess.run([sys.executable, "-c", FILL_AND_RUN, str(seed), *more], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout.splitlines()[-1])
    first = run(1)
    assert first["ok"] and first["numba"] and first["stats"]["native_loads"] == 0
    second = run(2, "others")                           # new values, the same kernels; then others
    assert second["ok"] and not second["numba"] and second["numba_after"], second
    stats = second["stats"]
    assert stats["native_loads"] >= 4 and stats["kernel_compiles"] >= 1, second     # the others: numba
    assert second["finders"] == 0 and second["hits_after_wait"] == 0, second      # the twin was there
    env["FLOWJIT_NATIVE_KERNELS"] = "off"
    third = run(3)
    assert third["ok"] and third["numba"] and third["stats"]["native_loads"] == 0, third


# -- the pieces ------------------------------------------------------------------------------------------
def test_argument_keys_follow_numbas_layouts():
    x = np.zeros((3, 4), np.float32)
    assert native.argument_key([x, x.T, x[:, ::2], np.zeros(5, np.int64)]) == \
        "float32:2C|float32:2F|float32:2A|int64:1C"
    assert native.argument_key([x.astype(">f4")]) is None and native.argument_key([[1.0]]) is None
    assert native.argument_key([x.view(np.matrix)]) is None
    assert native.layout_ok()


def test_elf_undefined_symbols_and_reachability():
    ir = textwrap.dedent("""
        @table = global ptr @used_by_table
        declare void @called()
        declare void @only_wrapper()
        declare void @used_by_table()
        define void @kernel() {
          call void @helper()
          ret void
        }
        define linkonce_odr void @helper() {
          call void @called()
          %t = load ptr, ptr @table
          ret void
        }
        define void @wrapper() {
          call void @only_wrapper()
          call void @kernel()
          ret void
        }
        """)
    assert native.reachable(ir, "kernel") == {"kernel", "helper", "called", "table", "used_by_table"}
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    code = native.target_machine(llvm).emit_object(llvm.parse_assembly(ir))
    assert set(native.elf_undefined(code)) == {"called", "only_wrapper", "used_by_table"}
    with pytest.raises(ValueError):
        native.elf_undefined(b"\xcf\xfa\xed\xfe" + code[4:])          # Mach-O's magic


def test_the_engines_frexp_and_ldexp_pass_zero_nan_and_infinity_through_as_numbas_helpers_do():
    engine = native.engine()
    address = engine.engine.get_function_address
    for kind, name in ((ctypes.c_double, "numba_frexp"), (ctypes.c_float, "numba_frexpf")):
        frexp = ctypes.CFUNCTYPE(kind, kind, ctypes.POINTER(ctypes.c_int))(address(name))
        for x in (0.0, -0.0, 1.5, -3e-30, 6e5, np.inf, -np.inf, np.nan):
            exponent = ctypes.c_int(99)
            mantissa = frexp(x, ctypes.byref(exponent))
            want = math.frexp(x) if math.isfinite(x) else (x, 0)
            assert (np.float64(mantissa), exponent.value) == (np.float64(kind(want[0]).value), want[1]) or \
                np.isnan(x) and np.isnan(mantissa) and exponent.value == 0, (name, x)
    for kind, name in ((ctypes.c_double, "numba_ldexp"), (ctypes.c_float, "numba_ldexpf")):
        ldexp = ctypes.CFUNCTYPE(kind, kind, ctypes.c_int)(address(name))
        for x, e in ((1.5, 3), (-0.0, 5), (3.0, 0), (np.inf, -4), (1.0, -2000)):
            assert np.float64(ldexp(x, e)) == np.float64(kind(math.ldexp(x, e)).value), (name, x, e)
        assert np.isnan(ldexp(np.nan, 2))


def test_a_kernel_that_reports_an_error_runs_once_natively_then_raises_numbas_error(monkeypatch):
    def power(a, b):
        return a ** b + 1
    a, b = np.arange(1, 7, dtype=np.int64), np.full(6, 2, np.int64)
    want = flowjit.jit(power)(a, b)
    with pytest.raises(ValueError) as numbas:
        flowjit.jit(power)(a, -b)
    _fresh_native_cache(monkeypatch)
    jitted = flowjit.jit(power)
    assert_same_result(jitted(a, b), want)
    [compiled] = [kernel for kernel in cache.kernel_cache(os.environ["FLOWJIT_CACHE_DIR"]).memory.values()
                  if isinstance(kernel.serial, native.NativeKernel)]
    entry, runs = compiled.serial.function, []
    compiled.serial.function = lambda *arrays: runs.append(1) or entry(*arrays)
    with pytest.raises(ValueError) as raised:
        jitted(a, -b)
    assert str(raised.value) == str(numbas.value) and runs == [1]
